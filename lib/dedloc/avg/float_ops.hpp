// The element-wise loops on the all-reduce's hot path: accumulating parts, computing and
// applying deltas, checking contributions for NaN and Inf.
//
// Why not plain loops: the project builds with -O2, where GCC 12 vectorizes only loops that need no
// remainder and no alias check (its "very cheap" cost model), so a plain loop over a part of unknown size
// ran one float at a time; the reducer's accumulate loop was the costliest user-space symbol of a 4-peer
// round. These use GCC/Clang vector extensions (four floats a step, SSE2 on x86-64, NEON on arm64, no
// run-time dispatch) and give results bit-identical to the plain loops: every element is computed by the
// same single multiply or add, nothing is reassociated or fused.
//
// fp16 frames are streamed through a small buffer (for_each_fp16_chunk), which gives the same values and
// bytes as decoding the whole part: the format is element by element.
//
// Arrays given as bytes may have any alignment (ZeroMQ frames); they hold host-order floats, which the
// codecs' wire format requires to be little-endian (codec.cpp). `src` and `dst` may not overlap `target`
// partially (they are separate buffers in every use).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "dedloc/avg/codec.hpp"

namespace dedloc::avg::float_ops {

using Float4 = float __attribute__((vector_size(16)));

inline Float4 load4(const void* p) {
  Float4 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store4(void* p, Float4 v) { std::memcpy(p, &v, sizeof v); }
inline float load1(const std::uint8_t* p) {
  float v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// x[i] *= factor
inline void scale(std::span<float> x, float factor) {
  size_t i = 0;
  for (; i + 4 <= x.size(); i += 4) store4(&x[i], load4(&x[i]) * factor);
  for (; i < x.size(); ++i) x[i] *= factor;
}

// target[i] += src[i], src: target.size() floats
inline void add(std::span<float> target, const std::uint8_t* src) {
  size_t i = 0;
  for (; i + 4 <= target.size(); i += 4) store4(&target[i], load4(&target[i]) + load4(src + 4 * i));
  for (; i < target.size(); ++i) target[i] += load1(src + 4 * i);
}

// target[i] += w · src[i]
inline void add_scaled(std::span<float> target, float w, const std::uint8_t* src) {
  size_t i = 0;
  for (; i + 4 <= target.size(); i += 4) store4(&target[i], load4(&target[i]) + w * load4(src + 4 * i));
  for (; i < target.size(); ++i) target[i] += w * load1(src + 4 * i);
}

// target[i] = v · target[i] + w · src[i]: a reducer's own values (not yet scaled by its weight `v`) and the
// first contribution, in one pass instead of two (the same two products and one sum: bit-identical).
inline void scale_add_scaled(std::span<float> target, float v, float w, const std::uint8_t* src) {
  size_t i = 0;
  for (; i + 4 <= target.size(); i += 4) store4(&target[i], v * load4(&target[i]) + w * load4(src + 4 * i));
  for (; i < target.size(); ++i) target[i] = v * target[i] + w * load1(src + 4 * i);
}

// x[i] = (x[i] · first) · second: two scalings in one pass (bit-identical to two scale() calls).
inline void scale_twice(std::span<float> x, float first, float second) {
  size_t i = 0;
  for (; i + 4 <= x.size(); i += 4) store4(&x[i], (load4(&x[i]) * first) * second);
  for (; i < x.size(); ++i) x[i] = (x[i] * first) * second;
}

// dst[i] = from[i] − dst[i], dst: from.size() floats (the delta, written over what the sender sent)
inline void subtract_from(std::span<const float> from, std::uint8_t* dst) {
  size_t i = 0;
  for (; i + 4 <= from.size(); i += 4) store4(dst + 4 * i, load4(&from[i]) - load4(dst + 4 * i));
  for (; i < from.size(); ++i) {
    const float d = from[i] - load1(dst + 4 * i);
    std::memcpy(dst + 4 * i, &d, sizeof d);
  }
}

// Whether none of the `count` floats at `src` is NaN or ±inf. Branch-free: an exponent field of all ones,
// plus one in its lowest bit, carries into the sign bit.
inline bool all_finite(const std::uint8_t* src, size_t count) {
  using U4 = std::uint32_t __attribute__((vector_size(16)));
  U4 carried4 = {0, 0, 0, 0};
  size_t i = 0;
  for (; i + 4 <= count; i += 4) {
    U4 bits;
    std::memcpy(&bits, src + 4 * i, sizeof bits);
    carried4 |= (bits & 0x7f800000u) + 0x00800000u;
  }
  std::uint32_t carried = carried4[0] | carried4[1] | carried4[2] | carried4[3];
  for (; i < count; ++i) {
    std::uint32_t bits;
    std::memcpy(&bits, src + 4 * i, sizeof bits);
    carried |= (bits & 0x7f800000u) + 0x00800000u;
  }
  return (carried & 0x80000000u) == 0;
}

// Whether none of the `count` IEEE halves at `src` is NaN or ±inf (as all_finite, on the 5-bit exponent).
inline bool all_finite_half(const std::uint8_t* src, size_t count) {
  using U8 = std::uint16_t __attribute__((vector_size(16)));
  U8 carried8 = {0, 0, 0, 0, 0, 0, 0, 0};
  size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    U8 bits;
    std::memcpy(&bits, src + 2 * i, sizeof bits);
    carried8 |= static_cast<U8>((bits & 0x7c00) + 0x0400);
  }
  std::uint16_t carried = 0;
  for (int lane = 0; lane < 8; ++lane) carried = static_cast<std::uint16_t>(carried | carried8[lane]);
  for (; i < count; ++i) {
    std::uint16_t bits;
    std::memcpy(&bits, src + 2 * i, sizeof bits);
    carried = static_cast<std::uint16_t>(carried | ((bits & 0x7c00) + 0x0400));
  }
  return (carried & 0x8000) == 0;
}

// Element-by-element codecs (fp16) are decoded a chunk at a time into a buffer that stays in L1, instead
// of a part-sized scratch that goes out to memory and back: the frame is then read from cache.
inline constexpr size_t kChunk = 2048;

// Calls use(offset, values) for each chunk of the fp16 frame `bytes` (2 · count bytes, checked by the
// caller), decoded.
template <class Use>
void for_each_fp16_chunk(const std::uint8_t* bytes, size_t count, Use&& use) {
  float chunk[kChunk];
  for (size_t at = 0; at < count; at += kChunk) {
    const std::span<float> values(chunk, std::min(kChunk, count - at));
    (void)decode(Codec::kFloat16, ByteSpan(bytes + 2 * at, 2 * values.size()), values);  // exact size: cannot fail
    use(at, values);
  }
}

// The same, and each chunk's values (as `change` left them) are encoded back in place.
template <class Change>
void transform_fp16_chunks(std::uint8_t* bytes, size_t count, Change&& change) {
  float chunk[kChunk];
  for (size_t at = 0; at < count; at += kChunk) {
    const std::span<float> values(chunk, std::min(kChunk, count - at));
    const std::span<std::uint8_t> encoded(bytes + 2 * at, 2 * values.size());
    (void)decode(Codec::kFloat16, encoded, values);  // exact size: cannot fail
    change(at, values);
    encode(Codec::kFloat16, values, encoded);
  }
}

}  // namespace dedloc::avg::float_ops
