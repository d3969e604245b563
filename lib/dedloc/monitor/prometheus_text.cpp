#include "dedloc/monitor/prometheus_text.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "dedloc/core/check.hpp"

namespace dedloc::monitor {

namespace {

bool is_name(std::string_view name, bool colons) {
  if (name.empty()) return false;
  auto head = [&](char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || (colons && c == ':'); };
  auto tail = [&](char c) { return head(c) || std::isdigit(static_cast<unsigned char>(c)); };
  return head(name.front()) && std::all_of(name.begin() + 1, name.end(), tail);
}

std::string escape_help(std::string_view help) {
  std::string out;
  for (char c : help) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

}  // namespace

std::string escape_label_value(std::string_view value) {
  std::string out;
  for (char c : value) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string format_sample_value(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buffer[32];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, value);
  return std::string(buffer, end);
}

PrometheusText& PrometheusText::family(std::string_view name, Type type, std::string_view help) {
  DEDLOC_CHECK(is_name(name, true), "not a Prometheus metric name: " + std::string(name));
  DEDLOC_CHECK(type != Type::kCounter || name.ends_with("_total"),
               "a Prometheus counter's name ends in _total: " + std::string(name));
  DEDLOC_CHECK(std::find(families_.begin(), families_.end(), name) == families_.end(),
               "Prometheus family written twice: " + std::string(name));
  families_.emplace_back(name);
  family_ = name;
  text_ += "# HELP " + family_ + " " + escape_help(help) + "\n";
  text_ += "# TYPE " + family_ + (type == Type::kCounter ? " counter\n" : " gauge\n");
  return *this;
}

PrometheusText& PrometheusText::sample(double value, const PrometheusLabels& labels) {
  DEDLOC_CHECK(!family_.empty(), "a Prometheus sample before any family");
  text_ += family_;
  if (!labels.empty()) {
    text_ += '{';
    for (size_t i = 0; i < labels.size(); ++i) {
      DEDLOC_CHECK(is_name(labels[i].first, false) && !labels[i].first.starts_with("__"),
                   "not a Prometheus label name: " + labels[i].first);
      if (i > 0) text_ += ',';
      text_ += labels[i].first + "=\"" + escape_label_value(labels[i].second) + '"';
    }
    text_ += '}';
  }
  text_ += ' ' + format_sample_value(value) + '\n';
  return *this;
}

}  // namespace dedloc::monitor
