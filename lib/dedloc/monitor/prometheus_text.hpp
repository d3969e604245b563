// The Prometheus text exposition format (version 0.0.4), written by one small builder so that every rule of
// the format lives in one place: metric and label names checked against the format's grammar, HELP text
// and label values escaped (label values come from the network: peer ids), numbers as Go's parser reads
// them ("NaN", "+Inf", "-Inf", shortest round-trip decimals), each family's HELP and TYPE lines once,
// before its samples.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dedloc::monitor {

using PrometheusLabels = std::vector<std::pair<std::string, std::string>>;

class PrometheusText {
 public:
  enum class Type { kGauge, kCounter };

  // Starts a family. Names are the program's own constants: a name outside [a-zA-Z_:][a-zA-Z0-9_:]*, a
  // counter whose name does not end in "_total", or a family started twice is a bug: DEDLOC_CHECK.
  PrometheusText& family(std::string_view name, Type type, std::string_view help);
  // A sample of the family started last. Label names are constants too (checked likewise); values are
  // escaped.
  PrometheusText& sample(double value, const PrometheusLabels& labels = {});

  const std::string& text() const { return text_; }

 private:
  std::string text_;
  std::string family_;
  std::vector<std::string> families_;
};

// Escapes a label value (\\, \", \n) as the format requires.
std::string escape_label_value(std::string_view value);
// Go-readable number: "NaN", "+Inf", "-Inf", or the shortest decimal that reads back as `value`.
std::string format_sample_value(double value);

}  // namespace dedloc::monitor
