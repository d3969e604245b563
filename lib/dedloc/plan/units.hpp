// Parsing and printing of the quantities a peers file and the CLI use.
//
//   counts (model size):  "18M" = 18e6, "1.5G", "125k", "4096"          (decimal prefixes k, M, G, T)
//   rates (bandwidth):    "100Mbit" = 12.5e6 bytes/s, "1Gbit", "512kbit"  (bits, decimal prefixes)
//                         "12.5MB" = 12.5e6 bytes/s, "2MiB", "800kB", "1000" (bytes; binary with "i")
//                         an optional "/s" or "ps" suffix is accepted: "100Mbit/s", "100Mbps"
//   codecs:               none (4 bytes/value), fp16, scaled-fp16 (2), uint8, blockwise-8bit (1)
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
[[nodiscard]] Result<Codec> parse_codec(std::string_view text);

std::string_view codec_name(Codec codec);
// Bytes one value costs on the wire after compression (per-part scales are negligible and ignored).
double bytes_per_value(Codec codec);

// "12.5 MB/s (100 Mbit/s)" style, compact: "100 Mbit/s".
std::string format_rate(double bytes_per_second);
// "18.0M"
std::string format_count(double count);

}  // namespace dedloc::plan
