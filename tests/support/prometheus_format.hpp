// A strict reader of the Prometheus text exposition format (0.0.4), for tests of what dedloc serves on
// /metrics: independent of the writer (lib/dedloc/monitor/prometheus_text.cpp), written from the format's
// specification (https://prometheus.io/docs/instrumenting/exposition_formats/).
#pragma once

#include <map>
#include <string>
#include <vector>

namespace dedloc::test {

struct PrometheusSample {
  std::string name;
  std::map<std::string, std::string> labels;  // unescaped values
  double value = 0;
};

struct PrometheusFamily {
  std::string name;
  std::string type;  // "gauge", "counter", ... ("untyped" when no TYPE line)
  std::string help;  // unescaped
  std::vector<PrometheusSample> samples;
};

// Parses `text`; throws std::runtime_error naming the line and the rule broken: a malformed line, a bad
// metric or label name, a bad escape, a value Go's ParseFloat would refuse, a TYPE after the family's
// samples or twice, a family's samples not all together, the same series twice, a missing final newline.
std::vector<PrometheusFamily> parse_prometheus_text(const std::string& text);

}  // namespace dedloc::test
