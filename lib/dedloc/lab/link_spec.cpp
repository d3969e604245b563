#include "dedloc/lab/link_spec.hpp"

#include <charconv>
#include <cmath>

#include "dedloc/plan/units.hpp"

namespace dedloc::lab {

namespace {

// The leading number of `text` and the unit after it.
bool split_number(std::string_view text, double& value, std::string_view& unit) {
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || !std::isfinite(value) || value < 0) return false;
  unit = std::string_view(ptr, static_cast<size_t>(end - ptr));
  return true;
}

}  // namespace

Result<Duration> parse_duration(std::string_view text, std::string_view what) {
  double value = 0;
  std::string_view unit;
  auto bad = [&] {
    return error(Code::kInvalidArgument,
                 std::string(what) + ": '" + std::string(text) + "' is not a duration (e.g. 25ms, 1.5s, 300us)");
  };
  if (!split_number(text, value, unit)) return bad();
  double seconds;
  if (unit == "s") seconds = value;
  else if (unit == "ms") seconds = value / 1e3;
  else if (unit == "us") seconds = value / 1e6;
  else if (unit == "min") seconds = value * 60;
  else if (unit.empty() && value == 0) seconds = 0;
  else return bad();
  return std::chrono::duration_cast<Duration>(std::chrono::duration<double>(seconds));
}

Result<double> parse_probability(std::string_view text, std::string_view what) {
  double value = 0;
  std::string_view unit;
  if (split_number(text, value, unit) && (unit.empty() || unit == "%")) {
    if (unit == "%") value /= 100;
    if (value < 1) return value;
  }
  return error(Code::kInvalidArgument,
               std::string(what) + ": '" + std::string(text) + "' is not a probability below 1 (e.g. 0.005 or 0.5%)");
}

HostLink host_link(const LinkSpec& spec) {
  HostLink link;
  const Duration quarter = spec.rtt / 4;
  const Duration jitter = spec.jitter / 4;
  link.up = {quarter, jitter, spec.upload, spec.loss, spec.queue_bytes};
  link.down = {quarter, jitter, spec.download, 0, spec.queue_bytes};
  return link;
}

Result<LinkSpec> parse_link(const LinkText& text, LinkSpec link, std::string_view prefix) {
  // Parses one field when given, into `out`; false (and `failure` set) on an error.
  Status failure;
  auto field = [&](const std::string& value, std::string_view name, auto parse, auto& out) {
    if (value.empty() || !failure.is_ok()) return;
    auto parsed = parse(value, std::string(prefix) + std::string(name));
    if (parsed) out = static_cast<std::remove_reference_t<decltype(out)>>(*parsed);
    else failure = parsed.status();
  };
  double rate = -1, queue = -1;
  field(text.rtt, "rtt", parse_duration, link.rtt);
  field(text.jitter, "jitter", parse_duration, link.jitter);
  field(text.rate, "rate", plan::parse_rate, rate);
  if (rate >= 0) link.upload = link.download = rate;
  field(text.upload, "upload", plan::parse_rate, link.upload);
  field(text.download, "download", plan::parse_rate, link.download);
  field(text.loss, "loss", parse_probability, link.loss);
  field(text.queue, "queue", plan::parse_rate, queue);
  if (queue >= 0) link.queue_bytes = static_cast<std::uint64_t>(queue);
  if (!failure.is_ok()) return failure;
  return link;
}

}  // namespace dedloc::lab
