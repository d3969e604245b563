// Compression codecs for the parts of the butterfly all-reduce.
//
// A sender encodes each part of its flat vector with one codec and names the codec in the part's message;
// the reducer decodes, averages, and returns its (average − own) delta encoded in the sender's codec. The
// codec numbers travel on the wire: append only, never renumber, never reuse.
//
// Wire formats (all little-endian; the byte count is exactly encoded_bytes(codec, n), nothing else is sent;
// "f32" is an IEEE binary32, "f16" an IEEE binary16, both stored as their little-endian bit patterns):
//
//   none          n × f32                                        4n bytes
//   fp16          n × f16                                        2n bytes
//                   half(clamp(x, ±65504)), round to nearest, ties to even.
//   scaled-fp16   f32 mean, f32 scale, n × f16                   8 + 2n bytes (the header is always there)
//                   half(clamp((x − mean) / scale, ±65504)), computed in f32;
//                   decoded as half·scale + mean in f32. mean is the part's mean, scale its population
//                   standard deviation (1 when that is 0), both computed in f64 and rounded to f32;
//                   hivemind's ScaledFloat16.
//   uint8         f32 min, f32 max, n × u8                       8 + n bytes
//                   code = round((x − min) · 255/(max − min)) ∈ [0, 255] (0 when max == min);
//                   decoded as min + code·(max − min)/255, evaluated in f64 and rounded once to f32.
//   blockwise8    ceil(n/256) × f32 absmax, then n × i8          4·ceil(n/256) + n bytes
//                   the part is cut into blocks of 256 elements (the last may be shorter), each with the
//                   largest |x| of its block; code = round(x · 127/absmax) ∈ [−127, 127] (0 when absmax
//                   is 0); decoded as code · step, step = absmax/127 in f32 (one ulp smaller if 127·step
//                   would exceed FLT_MAX, so nothing decodes to inf). The code −128 is never written.
//   ("round" is round-to-nearest, ties to even.)
//
// Worst-case absolute error of one element x after encode + decode (error_bound() returns the largest of
// these over a part; unit tests check every element against it):
//
//   none          0
//   fp16          max(|x|·2^-11, 2^-25)                            for |x| ≤ 65504
//                 |x| − 65504                                      beyond (clamped)
//   scaled-fp16   s·max(|z|·2^-11, 2^-25) + 2^-22·(|x − m| + |x|) + 2^-140,   z = (x − m)/s,
//                 m and s the part's header. Beyond |z| = 65504 the first term is s·(|z| − 65504), but that
//                 needs a part of over 2^31 elements (|x − mean| ≤ std·sqrt(n)). Valid while max|x| ≤ 2^126,
//                 so that no f32 step overflows.
//   uint8         (max − min)·(1/510 + 2^-22) + max(|min|, |max|)·2^-23 + 2^-140
//   blockwise8    absmax·(1/254 + 2^-21) + 2^-140,   absmax that of the element's block
//
// The leading terms are the quantization error (half a step); the rest is slack for the f32 rounding in
// the encoder and decoder, and 2^-140 covers rounding among f32 subnormals.
//
// Non-finite inputs. The reducer rejects non-finite contributions before it averages; the codecs only
// promise not to crash or invoke UB, and to write headers that decode:
//   none          passes NaN and ±inf through.
//   fp16          NaN stays NaN (payload truncated, quiet bit set, as F16C does); ±inf becomes ±65504.
//   scaled-fp16   mean and scale come from the finite elements; NaN stays NaN; ±inf becomes ±65504 in z.
//   uint8         min and max come from the finite elements; NaN and −inf encode as min, +inf as max.
//   blockwise8    absmax comes from the finite elements of the block; NaN encodes as 0, ±inf as ±absmax.
// error_bound() of a part with a non-finite element is +inf.
//
// Decoding hostile input never asserts: a wrong byte count, a non-finite or out-of-range header (scale ≤ 0,
// min > max, absmax < 0) or the code −128 in blockwise8 is kMalformed. fp16 payloads are not checked (any
// 16-bit pattern is a half; inf and NaN decode as themselves and are the reducer's to reject).
//
// Performance: encode and decode never allocate and make two passes at most (statistics, then codes). On
// x86-64 the 8-bit codecs and the statistics run SSE2 kernels (baseline there, no dispatch), and fp16
// conversions use F16C (vcvtps2ph / vcvtph2ps) when the CPU has it, chosen at run time; elsewhere plain
// loops written for the compiler's vectorizer and a scalar fp16 conversion run instead. All paths give
// bit-identical bytes (detail::Kernels). The arithmetic has no fused multiply-adds on x86-64, so every
// x86-64 machine writes and reads identical bytes (a compiler for another CPU may fuse a multiply-add,
// which only makes that step more exact). The default floating-point environment (round to nearest, no
// flush-to-zero) is assumed.
//
// Thread-safety: every function is pure (no state but a cached CPU-feature check).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "dedloc/core/bytes.hpp"
#include "dedloc/core/codec_id.hpp"
#include "dedloc/core/status.hpp"

namespace dedloc::avg {

// The codecs, their wire numbers and names are listed once, in core/codec_id.hpp (below the planner too);
// here they are part of averaging's vocabulary.
using ::dedloc::Codec;
using ::dedloc::codec_from_wire;
using ::dedloc::codec_name;
using ::dedloc::parse_codec;

// Elements per blockwise8 block.
inline constexpr std::size_t kBlockwiseBlock = 256;

// The exact size of encode()'s output for `elements` floats (see the formats above).
std::size_t encoded_bytes(Codec codec, std::size_t elements);

// The part grid: the most elements whose part, encoded with `codec`, fits in `wire_bytes` (the largest n
// with encoded_bytes(codec, n) <= wire_bytes), and never less than 1. Averaging sizes its grid with
// Codec::kNone (AveragerOptions::part_elements: 512 KiB of float32, 128 Ki elements): the grid is the
// leader's and every member cuts its vector by it, whatever codec each member sends in, so it is sized by
// the uncompressed part, and a codec makes each part proportionally smaller on the wire.
std::uint64_t part_elements_for(Codec codec, std::uint64_t wire_bytes);

// Encodes one part. out.size() must be encoded_bytes(codec, in.size()) (a programmer error otherwise:
// checked, aborts with file and line). Never allocates.
void encode(Codec codec, std::span<const float> in, std::span<std::uint8_t> out);

// Decodes one part of out.size() elements. kMalformed (with what was wrong) for a byte count other than
// encoded_bytes(codec, out.size()) or a bad header or code; `out` is then unspecified. Never allocates.
Status decode(Codec codec, ByteSpan in, std::span<float> out);

// The documented worst-case absolute error of one element of `part` after encode + decode with `codec`
// (the largest per-element bound above; +inf if the part holds a non-finite value, 0 for an empty part).
double error_bound(Codec codec, std::span<const float> part);

// Which codec a tensor's parts use: one fixed codec, or size-adaptive (hivemind's SizeAdaptiveCompression:
// 8-bit for big tensors, where bandwidth matters, fp16 for small ones such as biases and norms, where 8-bit
// error would hurt most and the bytes saved are few).
struct CodecPolicy {
  Codec small = Codec::kFloat16;        // adaptive: tensors of fewer than large_from_elements elements
  Codec large = Codec::kBlockwise8Bit;  // adaptive: tensors of at least large_from_elements elements
  std::size_t large_from_elements = std::size_t{1} << 16;
  bool adaptive = false;  // false: every tensor uses `fixed`
  Codec fixed = Codec::kNone;

  Codec for_tensor(std::size_t tensor_elements) const;
  // "adaptive" (defaults above) or a codec name (fixed); kInvalidArgument otherwise.
  static Result<CodecPolicy> parse(std::string_view name);
  // "adaptive" or the fixed codec's name: what parse() reads back.
  std::string_view name() const;
};

namespace detail {

// Which kernels encode/decode use. kNative (what encode() and decode() use): SSE2 for the 8-bit codecs and
// the statistics on x86-64, F16C for fp16 where the CPU has it. kPortable: plain C++ loops that the compiler
// vectorizes where it can, and the scalar fp16 conversion (what other CPUs run). Both write and read
// identical bytes; tests hold them to that.
enum class Kernels : std::uint8_t { kNative, kPortable };
void encode_with(Kernels kernels, Codec codec, std::span<const float> in, std::span<std::uint8_t> out);
Status decode_with(Kernels kernels, Codec codec, ByteSpan in, std::span<float> out);

// The fp16 kernels behind kFloat16 and kScaledFloat16, exposed so tests can hold the F16C path and the
// scalar path to identical bytes.
enum class Fp16Mode : std::uint8_t {
  kRaw,      // half(x): plain conversion, overflow becomes ±inf
  kClamped,  // half(clamp(x, ±65504))                      (the fp16 codec)
  kScaled,   // half(clamp((x − mean) / scale, ±65504)); decoded as half·scale + mean   (scaled-fp16)
};

// True when the CPU (and OS) support F16C and AVX; checked once.
bool cpu_has_f16c();

// Scalar IEEE conversions, bit-exact with F16C: round to nearest even, overflow to ±inf, NaN payload
// truncated with the quiet bit set.
std::uint16_t float_to_half(float x);
float half_to_float(std::uint16_t h);

// `out` / `in` hold 2·n bytes of little-endian halves, any alignment. mean/scale matter for kScaled only.
void to_fp16_scalar(Fp16Mode mode, float mean, float scale, std::span<const float> in, std::uint8_t* out);
void from_fp16_scalar(Fp16Mode mode, float mean, float scale, const std::uint8_t* in, std::span<float> out);
// The same with F16C; call only when cpu_has_f16c().
void to_fp16_f16c(Fp16Mode mode, float mean, float scale, std::span<const float> in, std::uint8_t* out);
void from_fp16_f16c(Fp16Mode mode, float mean, float scale, const std::uint8_t* in, std::span<float> out);

}  // namespace detail

}  // namespace dedloc::avg
