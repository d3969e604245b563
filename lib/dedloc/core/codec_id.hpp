// Which compression a vector's values travel in: the one list of codecs, with the number each has on the
// wire, the name every configuration spells it with, and what one value costs on the wire.
//
// The planner (plan/) prices a collaboration with it and averaging (avg/) encodes with it, so it lives
// below both. The formats themselves, their error bounds and their exact sizes are in avg/codec.hpp.
//
//   number  name          bytes per value
//   0       none          4      float32
//   1       fp16          2      IEEE half
//   2       scaled-fp16   2      half of (x − mean) / std, plus an 8-byte header per part
//   3       uint8         1      one byte per value, plus an 8-byte header per part
//   4       blockwise8    1      one byte per value, plus 4 bytes per block of 256
//
// The numbers are on the wire (all-reduce parts, state downloads) and in what peers exchange: append
// only, never renumber, never reuse. The names are what recipes (averaging.codec), peers files, and the
// tools' --codec flags accept. Bytes per value leave out the per-part headers and per-block scales (under
// 2%), as the planner's cost model does (plan/cost_model.hpp).
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

#include "dedloc/core/log.hpp"
#include "dedloc/core/status.hpp"

namespace dedloc {

// Wire values: append only.
enum class Codec : std::uint8_t {
  kNone = 0,
  kFloat16 = 1,
  kScaledFloat16 = 2,
  kUniform8Bit = 3,
  kBlockwise8Bit = 4,
};

struct CodecInfo {
  Codec codec;
  std::string_view name;   // the canonical spelling, what codec_name() prints and parse_codec() reads
  double bytes_per_value;  // on the wire, headers left out (see above)
};

// Every codec, in wire-number order (kCodecs[n].codec has the number n).
inline constexpr std::array<CodecInfo, 5> kCodecs = {{
    {Codec::kNone, "none", 4},
    {Codec::kFloat16, "fp16", 2},
    {Codec::kScaledFloat16, "scaled-fp16", 2},
    {Codec::kUniform8Bit, "uint8", 1},
    {Codec::kBlockwise8Bit, "blockwise8", 1},
}};

// The canonical name; "unknown" for a value outside the enum.
std::string_view codec_name(Codec codec);
// Bytes one value costs on the wire (kCodecs); 4 for a value outside the enum.
double bytes_per_value(Codec codec);

// A canonical name, exactly. An old spelling (the planner's "blockwise-8bit") is still accepted, with a
// warning through `log` naming the new one (nullptr: no warning). Anything else, including "adaptive"
// (a policy, avg::CodecPolicy, not a codec), is kInvalidArgument listing the valid names.
[[nodiscard]] Result<Codec> parse_codec(std::string_view name, Logger* log = &Logger::global());

// The codec a peer named on the wire; a number this build does not know is kMalformed.
[[nodiscard]] Result<Codec> codec_from_wire(std::uint64_t value);

}  // namespace dedloc
