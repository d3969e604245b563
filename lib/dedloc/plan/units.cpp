#include "dedloc/plan/units.hpp"

#include <array>
#include <charconv>
#include <optional>
#include <cmath>
#include <cstdio>
#include <utility>

namespace dedloc::plan {
namespace {

struct Suffix {
  std::string_view text;
  double factor;
};

// Splits "12.5MB" into 12.5 and "MB"; nullopt when there is no leading number.
std::optional<std::pair<double, std::string_view>> split_number(std::string_view text) {
  while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
  double value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end == text.data()) return std::nullopt;
  std::string_view unit = text.substr(static_cast<std::size_t>(end - text.data()));
  while (!unit.empty() && unit.front() == ' ') unit.remove_prefix(1);
  return std::pair{value, unit};
}

template <std::size_t N>
Result<double> parse_with(std::string_view text, std::string_view what, const std::array<Suffix, N>& suffixes,
                          std::string_view expected) {
  auto number = split_number(text);
  if (!number) {
    return error(Code::kInvalidArgument, std::string(what) + ": '" + std::string(text) + "' is not a number (expected " +
                                             std::string(expected) + ")");
  }
  auto [value, unit] = *number;
  for (const auto& suffix : suffixes) {
    if (unit != suffix.text) continue;
    double scaled = value * suffix.factor;
    if (!std::isfinite(scaled) || scaled < 0) {
      return error(Code::kInvalidArgument, std::string(what) + ": '" + std::string(text) + "' must be a finite value >= 0");
    }
    return scaled;
  }
  return error(Code::kInvalidArgument, std::string(what) + ": unknown unit '" + std::string(unit) + "' in '" +
                                           std::string(text) + "' (expected " + std::string(expected) + ")");
}

constexpr std::array kCountSuffixes{Suffix{"", 1}, Suffix{"k", 1e3}, Suffix{"K", 1e3}, Suffix{"M", 1e6},
                                    Suffix{"G", 1e9}, Suffix{"T", 1e12}};

// Every spelling of every rate unit: bits are decimal (networking convention); bytes may be binary.
constexpr std::array kRateSuffixes{
    Suffix{"", 1},
    Suffix{"bit", 1.0 / 8},        Suffix{"kbit", 1e3 / 8},      Suffix{"Kbit", 1e3 / 8},
    Suffix{"Mbit", 1e6 / 8},       Suffix{"Gbit", 1e9 / 8},      Suffix{"bit/s", 1.0 / 8},
    Suffix{"kbit/s", 1e3 / 8},     Suffix{"Kbit/s", 1e3 / 8},    Suffix{"Mbit/s", 1e6 / 8},
    Suffix{"Gbit/s", 1e9 / 8},     Suffix{"bps", 1.0 / 8},       Suffix{"kbps", 1e3 / 8},
    Suffix{"Kbps", 1e3 / 8},       Suffix{"Mbps", 1e6 / 8},      Suffix{"Gbps", 1e9 / 8},
    Suffix{"B", 1},                Suffix{"kB", 1e3},            Suffix{"KB", 1e3},
    Suffix{"MB", 1e6},             Suffix{"GB", 1e9},            Suffix{"KiB", 1024.0},
    Suffix{"MiB", 1024.0 * 1024},  Suffix{"GiB", 1024.0 * 1024 * 1024},
    Suffix{"B/s", 1},              Suffix{"kB/s", 1e3},          Suffix{"KB/s", 1e3},
    Suffix{"MB/s", 1e6},           Suffix{"GB/s", 1e9},          Suffix{"KiB/s", 1024.0},
    Suffix{"MiB/s", 1024.0 * 1024}, Suffix{"GiB/s", 1024.0 * 1024 * 1024},
};

}  // namespace

Result<double> parse_count(std::string_view text, std::string_view what) {
  return parse_with(text, what, kCountSuffixes, "a count like 4096, 125k, 18M or 1.5G");
}

Result<double> parse_rate(std::string_view text, std::string_view what) {
  return parse_with(text, what, kRateSuffixes, "a rate like 100Mbit, 1Gbit, 12.5MB or bytes/s as a number");
}

namespace {

// `value` with the largest of G/M/k (powers of 1000) that keeps it >= 1, then `unit`: "1.5 Gbit/s", "18M".
std::string format_scaled(double value, const char* separator, const char* unit, int digits) {
  static constexpr struct {
    double scale;
    const char* prefix;
  } kPrefixes[] = {{1e9, "G"}, {1e6, "M"}, {1e3, "k"}, {1, ""}};
  for (const auto& p : kPrefixes) {
    if (value >= p.scale || p.scale == 1) {
      char buffer[64];
      std::snprintf(buffer, sizeof buffer, "%.*g%s%s%s", digits, value / p.scale, separator, p.prefix, unit);
      return buffer;
    }
  }
  return {};
}

}  // namespace

std::string format_rate(double bytes_per_second) { return format_scaled(bytes_per_second * 8, " ", "bit/s", 3); }

std::string format_count(double count) { return format_scaled(count, "", "", 4); }

}  // namespace dedloc::plan
