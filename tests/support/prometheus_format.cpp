#include "support/prometheus_format.hpp"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <set>
#include <sstream>
#include <stdexcept>

namespace dedloc::test {

namespace {

[[noreturn]] void fail(size_t line, const std::string& why) {
  throw std::runtime_error("/metrics line " + std::to_string(line) + ": " + why);
}

bool name_head(char c, bool colon) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || (colon && c == ':'); }
bool name_char(char c, bool colon) { return name_head(c, colon) || std::isdigit(static_cast<unsigned char>(c)); }

// Reads a metric (colon = true) or label name at `pos`.
std::string read_name(const std::string& s, size_t& pos, bool colon, size_t line) {
  size_t start = pos;
  if (pos >= s.size() || !name_head(s[pos], colon)) fail(line, "expected a name at column " + std::to_string(pos + 1));
  while (pos < s.size() && name_char(s[pos], colon)) ++pos;
  return s.substr(start, pos - start);
}

double read_value(const std::string& text, size_t line) {
  if (text == "NaN") return std::nan("");
  if (text == "+Inf" || text == "Inf") return INFINITY;
  if (text == "-Inf") return -INFINITY;
  if (text.empty()) fail(line, "missing value");
  for (char c : text) {
    if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-')) {
      fail(line, "not a number: '" + text + "'");
    }
  }
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size()) fail(line, "not a number: '" + text + "'");
  return v;
}

std::string unescape(const std::string& s, size_t& pos, bool quoted, size_t line) {
  std::string out;
  while (pos < s.size()) {
    char c = s[pos];
    if (quoted && c == '"') return out;
    if (c == '\\') {
      if (pos + 1 >= s.size()) fail(line, "a lone backslash");
      char e = s[pos + 1];
      if (e == '\\') out += '\\';
      else if (e == 'n') out += '\n';
      else if (quoted && e == '"') out += '"';
      else fail(line, std::string("bad escape \\") + e);
      pos += 2;
      continue;
    }
    if (c == '\n') fail(line, "a raw newline");
    out += c;
    ++pos;
  }
  if (quoted) fail(line, "an unterminated label value");
  return out;
}

}  // namespace

std::vector<PrometheusFamily> parse_prometheus_text(const std::string& text) {
  if (!text.empty() && text.back() != '\n') throw std::runtime_error("/metrics: the last line has no newline");
  std::vector<PrometheusFamily> families;
  std::set<std::string> closed;   // families whose samples ended (another family's began)
  std::set<std::string> series;   // name + labels seen
  std::istringstream lines(text);
  std::string s;
  size_t line = 0;
  auto family_of = [&](const std::string& name) -> PrometheusFamily& {
    if (!families.empty() && families.back().name == name) return families.back();
    if (closed.count(name)) fail(line, "family " + name + " appears in two places");
    if (!families.empty()) closed.insert(families.back().name);
    families.push_back({name, "untyped", "", {}});
    return families.back();
  };
  while (std::getline(lines, s)) {
    ++line;
    if (s.empty()) continue;
    if (s[0] == '#') {
      std::istringstream words(s);
      std::string hash, keyword;
      words >> hash >> keyword;
      if (keyword != "HELP" && keyword != "TYPE") continue;  // a plain comment
      size_t pos = s.find(keyword) + keyword.size();
      if (pos >= s.size() || s[pos] != ' ') fail(line, keyword + " without a metric name");
      ++pos;
      std::string name = read_name(s, pos, true, line);
      auto& family = family_of(name);
      std::string rest = pos < s.size() && s[pos] == ' ' ? s.substr(pos + 1) : (pos == s.size() ? "" : "!");
      if (rest == "!") fail(line, "junk after the metric name");
      if (keyword == "HELP") {
        size_t p = 0;
        family.help = unescape(rest, p, false, line);
      } else {
        static const std::set<std::string> kTypes{"counter", "gauge", "histogram", "summary", "untyped"};
        if (!kTypes.count(rest)) fail(line, "unknown type '" + rest + "'");
        if (!family.samples.empty()) fail(line, "TYPE after the samples of " + name);
        if (family.type != "untyped") fail(line, "a second TYPE for " + name);
        family.type = rest;
      }
      continue;
    }
    size_t pos = 0;
    PrometheusSample sample;
    sample.name = read_name(s, pos, true, line);
    if (pos < s.size() && s[pos] == '{') {
      ++pos;
      while (pos < s.size() && s[pos] != '}') {
        std::string label = read_name(s, pos, false, line);
        if (pos >= s.size() || s[pos] != '=' || pos + 1 >= s.size() || s[pos + 1] != '"') {
          fail(line, "expected =\" after label " + label);
        }
        pos += 2;
        std::string value = unescape(s, pos, true, line);
        ++pos;  // the closing quote
        if (!sample.labels.emplace(label, value).second) fail(line, "label " + label + " twice");
        if (pos < s.size() && s[pos] == ',') ++pos;
        else if (pos >= s.size() || s[pos] != '}') fail(line, "expected , or } after a label");
      }
      if (pos >= s.size()) fail(line, "unterminated label set");
      ++pos;
    }
    if (pos >= s.size() || s[pos] != ' ') fail(line, "expected a space before the value");
    std::istringstream rest(s.substr(pos + 1));
    std::string value, timestamp, extra;
    rest >> value >> timestamp >> extra;
    if (!extra.empty()) fail(line, "junk after the timestamp");
    sample.value = read_value(value, line);
    if (!timestamp.empty()) {
      for (char c : timestamp) {
        if (!std::isdigit(static_cast<unsigned char>(c)) && c != '-') fail(line, "a bad timestamp");
      }
    }
    std::string family_name = sample.name;  // no histograms or summaries here: a sample names its family
    std::ostringstream key;
    key << sample.name;
    for (const auto& [k, v] : sample.labels) key << '\x01' << k << '\x02' << v;
    if (!series.insert(key.str()).second) fail(line, "the series " + sample.name + " twice");
    family_of(family_name).samples.push_back(std::move(sample));
  }
  return families;
}

}  // namespace dedloc::test
