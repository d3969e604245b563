// Parsing and printing of the quantities a peers file and the CLI use.
//
//   counts (model size):  "18M" = 18e6, "1.5G", "125k", "4096"          (decimal prefixes k, M, G, T)
//   rates (bandwidth):    "100Mbit" = 12.5e6 bytes/s, "1Gbit", "512kbit"  (bits, decimal prefixes)
//                         "12.5MB" = 12.5e6 bytes/s, "2MiB", "800kB", "1000" (bytes; binary with "i")
//                         an optional "/s" or "ps" suffix is accepted: "100Mbit/s", "100Mbps"
//   (codec names and their bytes per value are in core/codec_id.hpp)
#pragma once

#include <string>
#include <string_view>

#include "dedloc/core/status.hpp"
#include "dedloc/plan/peer.hpp"

namespace dedloc::plan {

// A non-negative count with an optional decimal prefix. `what` names the value in errors.
[[nodiscard]] Result<double> parse_count(std::string_view text, std::string_view what);
// A non-negative rate in bytes/s.
[[nodiscard]] Result<double> parse_rate(std::string_view text, std::string_view what);

// "12.5 MB/s (100 Mbit/s)" style, compact: "100 Mbit/s".
std::string format_rate(double bytes_per_second);
// "18.0M"
std::string format_count(double count);

}  // namespace dedloc::plan
