#include "dedloc/core/config.hpp"

#include <cmath>
#include <limits>

#include "dedloc/core/files.hpp"

namespace dedloc {

ConfigReader::ConfigReader(YAML::Node node, std::shared_ptr<Shared> shared, std::string path)
    : node_(std::move(node)), shared_(std::move(shared)), path_(std::move(path)) {}

Result<ConfigReader> ConfigReader::from_file(const std::string& path) {
  auto text = read_file(path, 16u << 20);
  if (!text) return text.status().with_context("reading config");
  return from_string(*text, path);
}

Result<ConfigReader> ConfigReader::from_string(const std::string& text, const std::string& source) {
  YAML::Node node;
  try {
    node = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return error(Code::kInvalidArgument, source + ":" + std::to_string(e.mark.line + 1) + ": invalid YAML: " + e.msg);
  }
  if (node.IsNull()) node = YAML::Node(YAML::NodeType::Map);
  if (!node.IsMap()) return error(Code::kInvalidArgument, source + ": the top level must be a mapping of keys");
  auto shared = std::make_shared<Shared>();
  shared->source = source;
  return ConfigReader(node, shared, "");
}

std::string ConfigReader::key_path(std::string_view key) const {
  return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
}

const std::string& ConfigReader::source() const { return shared_->source; }

std::string ConfigReader::where() const { return path_.empty() ? shared_->source : shared_->source + ": " + path_; }

bool ConfigReader::has(std::string_view key) const {
  return node_.IsMap() && node_[std::string(key)].IsDefined();
}

YAML::Node ConfigReader::take(std::string_view key) {
  level_->consumed.emplace(key);
  if (!node_.IsMap()) return YAML::Node(YAML::NodeType::Undefined);
  YAML::Node child = node_[std::string(key)];
  return child;
}

void ConfigReader::type_error(std::string_view key, const YAML::Node& node, std::string_view expected) {
  std::string line = node.Mark().is_null() ? "" : ":" + std::to_string(node.Mark().line + 1);
  shared_->errors.push_back(shared_->source + line + ": key '" + key_path(key) + "' must be " +
                            std::string(expected));
}

namespace {

// A mapping key as text. The files we read have scalar keys, but YAML also allows a null, a sequence or a
// mapping as a key ("~: 1", "? [a, b]\n: 1"), on which as<std::string>() throws: an uncaught exception out of
// keys() and finish() (found by the config fuzz target). Such keys get a name, so finish() reports them as
// unknown keys like any other.
std::string key_text(const YAML::Node& key) {
  if (key.IsScalar()) return key.Scalar();
  if (key.IsNull()) return "~";
  return "<a " + std::string(key.IsSequence() ? "sequence" : "mapping") + " as a key, line " +
         std::to_string(key.Mark().line + 1) + ">";
}

template <class T>
bool convert(const YAML::Node& node, T& out) {
  if (!node.IsScalar()) return false;
  try {
    out = node.as<T>();
    return true;
  } catch (const YAML::Exception&) {
    return false;
  }
}

}  // namespace

void ConfigReader::read(std::string_view key, std::string& out) {
  YAML::Node n = take(key);
  if (!n.IsDefined() || n.IsNull()) return;
  if (!convert(n, out)) type_error(key, n, "a string");
}

void ConfigReader::read(std::string_view key, bool& out) {
  YAML::Node n = take(key);
  if (!n.IsDefined() || n.IsNull()) return;
  if (!convert(n, out)) type_error(key, n, "true or false");
}

void ConfigReader::read(std::string_view key, std::int64_t& out) {
  YAML::Node n = take(key);
  if (!n.IsDefined() || n.IsNull()) return;
  if (!convert(n, out)) type_error(key, n, "an integer");
}

void ConfigReader::read(std::string_view key, int& out) {
  YAML::Node n = take(key);
  if (!n.IsDefined() || n.IsNull()) return;
  std::int64_t wide = 0;
  if (!convert(n, wide)) {
    type_error(key, n, "an integer");
    return;
  }
  if (wide < std::numeric_limits<int>::min() || wide > std::numeric_limits<int>::max()) {
    type_error(key, n, "an integer that fits in 32 bits");
    return;
  }
  out = static_cast<int>(wide);
}

void ConfigReader::read(std::string_view key, std::uint64_t& out) {
  YAML::Node n = take(key);
  if (!n.IsDefined() || n.IsNull()) return;
  std::int64_t signed_value = 0;
  if (!convert(n, signed_value) || signed_value < 0) {
    type_error(key, n, "a non-negative integer");
    return;
  }
  out = static_cast<std::uint64_t>(signed_value);
}

void ConfigReader::read(std::string_view key, double& out) {
  YAML::Node n = take(key);
  if (!n.IsDefined() || n.IsNull()) return;
  double value = 0;
  if (!convert(n, value) || !std::isfinite(value)) {
    type_error(key, n, "a number");
    return;
  }
  out = value;
}

void ConfigReader::read(std::string_view key, Duration& out) {
  YAML::Node n = take(key);
  if (!n.IsDefined() || n.IsNull()) return;
  double seconds = 0;
  if (!convert(n, seconds) || !std::isfinite(seconds) || seconds < 0) {
    type_error(key, n, "a non-negative number of seconds");
    return;
  }
  // Duration is int64 nanoseconds (292 years): converting more seconds than that is undefined behaviour
  // (found by the config fuzz target with "1.5e300"), so anything beyond a generous bound is an error.
  constexpr double kMaxSeconds = 1e9;  // about 31 years
  if (seconds > kMaxSeconds) {
    type_error(key, n, "a number of seconds up to 1e9");
    return;
  }
  out = from_seconds(seconds);
}

void ConfigReader::read(std::string_view key, std::vector<std::string>& out) {
  YAML::Node n = take(key);
  if (!n.IsDefined() || n.IsNull()) return;
  std::vector<std::string> values;
  if (n.IsScalar()) {  // a single value is a list of one
    values.push_back(n.as<std::string>());
  } else if (n.IsSequence()) {
    for (const auto& item : n) {
      std::string s;
      if (!convert(item, s)) {
        type_error(key, n, "a list of strings");
        return;
      }
      values.push_back(s);
    }
  } else {
    type_error(key, n, "a list of strings");
    return;
  }
  out = std::move(values);
}

ConfigReader ConfigReader::section(std::string_view key) {
  YAML::Node n = take(key);
  if (n.IsDefined() && !n.IsNull() && !n.IsMap()) {
    type_error(key, n, "a mapping of keys");
    n = YAML::Node(YAML::NodeType::Map);
  }
  if (!n.IsDefined() || n.IsNull()) n = YAML::Node(YAML::NodeType::Map);
  level_->children.push_back(ConfigReader(n, shared_, key_path(key)));
  return level_->children.back();
}

std::vector<ConfigReader> ConfigReader::list(std::string_view key) {
  std::vector<ConfigReader> out;
  YAML::Node n = take(key);
  if (!n.IsDefined() || n.IsNull()) return out;
  if (!n.IsSequence()) {
    type_error(key, n, "a list");
    return out;
  }
  for (size_t i = 0; i < n.size(); ++i) {
    YAML::Node item = n[i];
    std::string path = key_path(key) + "[" + std::to_string(i) + "]";
    if (!item.IsMap()) {
      type_error(std::string(key) + "[" + std::to_string(i) + "]", item, "a mapping of keys");
      continue;
    }
    level_->children.push_back(ConfigReader(item, shared_, path));
    out.push_back(level_->children.back());
  }
  return out;
}

YAML::Node ConfigReader::raw(std::string_view key) { return take(key); }

std::vector<std::string> ConfigReader::keys() const {
  std::vector<std::string> out;
  if (node_.IsMap()) {
    for (const auto& entry : node_) out.push_back(key_text(entry.first));
  }
  return out;
}

void ConfigReader::collect_unknown(std::vector<std::string>& out) const {
  if (node_.IsMap()) {
    for (const auto& entry : node_) {
      std::string key = key_text(entry.first);
      if (!level_->consumed.count(key)) out.push_back(key_path(key));
    }
  }
  for (const auto& child : level_->children) child.collect_unknown(out);
}

Status ConfigReader::finish() const {
  if (!shared_->errors.empty()) return error(Code::kInvalidArgument, shared_->errors.front());
  std::vector<std::string> unknown;
  collect_unknown(unknown);
  if (unknown.empty()) return Status::ok();
  std::string msg = shared_->source + ": unknown key '" + unknown.front() + "'";
  if (unknown.size() > 1) msg += " (and " + std::to_string(unknown.size() - 1) + " more)";
  return error(Code::kInvalidArgument, msg);
}

}  // namespace dedloc
