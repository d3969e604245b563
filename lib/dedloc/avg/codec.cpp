// Codecs for all-reduce parts: formats and error bounds are specified in codec.hpp.
//
// Two sets of kernels write identical bytes (detail::Kernels):
//  - native: SSE2 intrinsics for the 8-bit codes and the statistics (baseline on x86-64, so no dispatch),
//    F16C for fp16 when the CPU has it (checked once at run time);
//  - portable: plain loops written for GCC's vectorizer at -O2, where it only vectorizes loops whose trip
//    count is a known multiple of the vector width and whose pointers cannot alias. So they work on
//    fixed-size chunks (kChunk elements, or one 256-element block) between __restrict pointers, and a
//    part's ragged end goes through the same chunk code on a zero-padded copy. Rounding uses the 1.5·2^23
//    trick ((q + M) − M rounds to nearest even for |q| < 2^22), plain float arithmetic that vectorizes.
//    GCC turns the NaN-aware selects in these loops into compare-and-mask sequences rather than minps, which
//    is why x86-64 gets the intrinsics: ≈ 4x faster on the 8-bit codes.
// Reductions keep kLanes = 8 independent accumulators, lane j taking elements i ≡ j (mod 8), the ragged end
// going to lane 0, and the lanes summed in order; both kernel sets follow that order exactly, so their
// headers agree to the bit.
//
// Every conversion to an integer type is preceded by a clamp that also maps NaN into range: converting NaN
// or an out-of-range float to an integer is UB.
#include "dedloc/avg/codec.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>

#include "dedloc/core/check.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define DEDLOC_AVG_X86 1
#endif
#if defined(__SSE2__)
#define DEDLOC_AVG_SSE2 1
#endif

namespace dedloc::avg {

static_assert(std::endian::native == std::endian::little,
              "the codecs write host floats as little-endian bytes");
static_assert(std::numeric_limits<float>::is_iec559, "the codecs assume IEEE binary32 floats");

namespace {

constexpr std::size_t kChunk = 64;  // elements per vectorized chunk
constexpr std::size_t kLanes = 8;   // independent accumulators in reductions
constexpr std::size_t kBlock = kBlockwiseBlock;
constexpr float kHalfMax = 65504.0f;
constexpr float kRoundMagic = 12582912.0f;  // 1.5 * 2^23

// Round to nearest, ties to even, for |q| < 2^22 (larger values stay large, inf and NaN pass through).
inline float round_even(float q) { return (q + kRoundMagic) - kRoundMagic; }

inline float load_f32(const std::uint8_t* p) {
  float v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store_f32(std::uint8_t* p, float v) { std::memcpy(p, &v, sizeof v); }

bool all_finite(std::span<const float> part) {
  // x − x is 0 for finite x and NaN otherwise; summing lanes of it keeps the loop branch-free.
  float lanes[kLanes] = {};
  std::size_t i = 0;
  for (; i + kLanes <= part.size(); i += kLanes)
    for (std::size_t j = 0; j < kLanes; ++j) lanes[j] += part[i + j] - part[i + j];
  for (; i < part.size(); ++i) lanes[0] += part[i] - part[i];
  float sum = 0;
  for (float v : lanes) sum += v;
  return sum == 0;
}

// ---- reductions: the scaled-fp16 statistics and the uint8 range ----

// Sums of d and d² with d = x − shift, in double. The shift (an element of the part) keeps the one-pass
// variance S2/n − (S1/n)² free of the catastrophic cancellation that a large common offset would cause.
void shifted_sums(std::span<const float> part, double shift, double& s1, double& s2, bool simd) {
  double a[kLanes] = {}, b[kLanes] = {};
  const float* x = part.data();
  const std::size_t n = part.size(), full = n - n % kLanes;
  bool done = false;
#ifdef DEDLOC_AVG_SSE2
  if (simd) {
    done = true;
    const __m128d s = _mm_set1_pd(shift);
    __m128d a0 = _mm_setzero_pd(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
    for (std::size_t i = 0; i < full; i += kLanes) {
      const __m128 lo = _mm_loadu_ps(x + i), hi = _mm_loadu_ps(x + i + 4);
      const __m128d d0 = _mm_sub_pd(_mm_cvtps_pd(lo), s),
                    d1 = _mm_sub_pd(_mm_cvtps_pd(_mm_movehl_ps(lo, lo)), s);
      const __m128d d2 = _mm_sub_pd(_mm_cvtps_pd(hi), s),
                    d3 = _mm_sub_pd(_mm_cvtps_pd(_mm_movehl_ps(hi, hi)), s);
      a0 = _mm_add_pd(a0, d0), a1 = _mm_add_pd(a1, d1), a2 = _mm_add_pd(a2, d2), a3 = _mm_add_pd(a3, d3);
      b0 = _mm_add_pd(b0, _mm_mul_pd(d0, d0)), b1 = _mm_add_pd(b1, _mm_mul_pd(d1, d1));
      b2 = _mm_add_pd(b2, _mm_mul_pd(d2, d2)), b3 = _mm_add_pd(b3, _mm_mul_pd(d3, d3));
    }
    _mm_storeu_pd(a, a0), _mm_storeu_pd(a + 2, a1), _mm_storeu_pd(a + 4, a2), _mm_storeu_pd(a + 6, a3);
    _mm_storeu_pd(b, b0), _mm_storeu_pd(b + 2, b1), _mm_storeu_pd(b + 4, b2), _mm_storeu_pd(b + 6, b3);
  }
#endif
  if (!done) {
    for (std::size_t i = 0; i < full; i += kLanes)
      for (std::size_t j = 0; j < kLanes; ++j) {
        const double d = static_cast<double>(x[i + j]) - shift;
        a[j] += d;
        b[j] += d * d;
      }
  }
  for (std::size_t i = full; i < n; ++i) {
    const double d = static_cast<double>(x[i]) - shift;
    a[0] += d;
    b[0] += d * d;
  }
  s1 = 0;
  s2 = 0;
  for (std::size_t j = 0; j < kLanes; ++j) {
    s1 += a[j];
    s2 += b[j];
  }
}

struct Affine {
  float mean = 0;
  float scale = 1;
};

Affine scaled_header(std::span<const float> part, bool simd) {
  if (part.empty()) return {};
  double shift = part[0], s1 = 0, s2 = 0, count = static_cast<double>(part.size());
  shifted_sums(part, shift, s1, s2, simd);
  if (!std::isfinite(s1) || !std::isfinite(s2)) {
    // Slow path, only for parts with NaN or ±inf: statistics of the finite elements.
    std::size_t finite = 0;
    s1 = s2 = 0;
    for (float x : part) {
      if (!std::isfinite(x)) continue;
      if (finite++ == 0) shift = x;
      const double d = static_cast<double>(x) - shift;
      s1 += d;
      s2 += d * d;
    }
    if (finite == 0) return {};
    count = static_cast<double>(finite);
  }
  const double mean_offset = s1 / count;
  const double variance = std::max(s2 / count - mean_offset * mean_offset, 0.0);
  const double stddev = std::sqrt(variance);
  Affine header;
  header.mean = static_cast<float>(shift + mean_offset);  // a mean of floats is within the float range
  header.scale = stddev > 0 ? static_cast<float>(std::min(stddev, static_cast<double>(FLT_MAX))) : 1.0f;
  if (!(header.scale > 0)) header.scale = 1.0f;  // a standard deviation that rounds to 0
  return header;
}

struct MinMax {
  float min = 0;
  float max = 0;
};

// The least and greatest finite elements ({0, 0} if there are none).
MinMax finite_min_max(std::span<const float> part, bool simd) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  float lo[kLanes], hi[kLanes];
  std::fill(std::begin(lo), std::end(lo), kInf);
  std::fill(std::begin(hi), std::end(hi), -kInf);
  const float* x = part.data();
  const std::size_t n = part.size(), full = n - n % kLanes;
  // `v < lo ? v : lo` is minps(v, lo): it keeps lo when v is NaN, so NaN never enters.
  bool done = false;
#ifdef DEDLOC_AVG_SSE2
  if (simd) {
    done = true;
    __m128 lo0 = _mm_set1_ps(kInf), lo1 = lo0, hi0 = _mm_set1_ps(-kInf), hi1 = hi0;
    for (std::size_t i = 0; i < full; i += kLanes) {
      const __m128 v0 = _mm_loadu_ps(x + i), v1 = _mm_loadu_ps(x + i + 4);
      lo0 = _mm_min_ps(v0, lo0), lo1 = _mm_min_ps(v1, lo1);
      hi0 = _mm_max_ps(v0, hi0), hi1 = _mm_max_ps(v1, hi1);
    }
    _mm_storeu_ps(lo, lo0), _mm_storeu_ps(lo + 4, lo1), _mm_storeu_ps(hi, hi0), _mm_storeu_ps(hi + 4, hi1);
  }
#endif
  if (!done) {
    for (std::size_t i = 0; i < full; i += kLanes)
      for (std::size_t j = 0; j < kLanes; ++j) {
        const float v = x[i + j];
        lo[j] = v < lo[j] ? v : lo[j];
        hi[j] = v > hi[j] ? v : hi[j];
      }
  }
  for (std::size_t i = full; i < n; ++i) {
    const float v = x[i];
    lo[0] = v < lo[0] ? v : lo[0];
    hi[0] = v > hi[0] ? v : hi[0];
  }
  MinMax r{lo[0], hi[0]};
  for (std::size_t j = 1; j < kLanes; ++j) {
    r.min = lo[j] < r.min ? lo[j] : r.min;
    r.max = hi[j] > r.max ? hi[j] : r.max;
  }
  if (std::isfinite(r.min) && std::isfinite(r.max)) return r;
  // Slow path: the part holds ±inf, or nothing but NaN.
  bool any = false;
  for (float v : part) {
    if (!std::isfinite(v)) continue;
    if (!any) r = {v, v};
    any = true;
    r.min = v < r.min ? v : r.min;
    r.max = v > r.max ? v : r.max;
  }
  return any ? r : MinMax{};
}

// ---- uint8 ----

// Codes for kChunk elements (portable).
void uniform_codes(const float* __restrict in, float min, float inv, std::uint8_t* __restrict out) {
  for (std::size_t j = 0; j < kChunk; ++j) {
    // Rounding before clamping keeps the loop vectorizable (GCC will not if-convert float arithmetic
    // that follows a select); rounding moves nothing across 0 or 255, and NaN/inf pass through it.
    float q = round_even((in[j] - min) * inv);
    q = q > 0.0f ? q : 0.0f;  // NaN -> 0
    q = q < 255.0f ? q : 255.0f;
    out[j] = static_cast<std::uint8_t>(static_cast<std::int32_t>(q));
  }
}

#ifdef DEDLOC_AVG_SSE2
// Codes for kChunk elements (SSE2). cvtps2dq rounds to nearest even, like round_even.
void uniform_codes_sse2(const float* in, float min_s, float inv_s, std::uint8_t* out) {
  const __m128 min = _mm_set1_ps(min_s), inv = _mm_set1_ps(inv_s), zero = _mm_setzero_ps(),
               top = _mm_set1_ps(255.0f);
  for (std::size_t j = 0; j < kChunk; j += 16) {
    __m128i c[4];
    for (std::size_t k = 0; k < 4; ++k) {
      __m128 q = _mm_mul_ps(_mm_sub_ps(_mm_loadu_ps(in + j + 4 * k), min), inv);
      q = _mm_min_ps(_mm_max_ps(q, zero), top);  // maxps returns its second operand for NaN: NaN -> 0
      c[k] = _mm_cvtps_epi32(q);
    }
    const __m128i codes = _mm_packus_epi16(_mm_packs_epi32(c[0], c[1]), _mm_packs_epi32(c[2], c[3]));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + j), codes);
  }
}
#endif

void encode_uniform8(std::span<const float> in, std::uint8_t* out, bool simd) {
  const MinMax mm = finite_min_max(in, simd);
  store_f32(out, mm.min);
  store_f32(out + 4, mm.max);
  std::uint8_t* codes = out + 8;
  const std::size_t n = in.size();
  const double range = static_cast<double>(mm.max) - static_cast<double>(mm.min);
  if (range == 0) {
    std::memset(codes, 0, n);
    return;
  }
  const double inv = 255.0 / range;
  if (range <= FLT_MAX && inv <= FLT_MAX) {
    const float inv_f = static_cast<float>(inv);
    auto chunk = [&](const float* src, std::uint8_t* dst) {
#ifdef DEDLOC_AVG_SSE2
      if (simd) return uniform_codes_sse2(src, mm.min, inv_f, dst);
#endif
      uniform_codes(src, mm.min, inv_f, dst);
    };
    std::size_t i = 0;
    for (; i + kChunk <= n; i += kChunk) chunk(in.data() + i, codes + i);
    if (i < n) {
      float tail[kChunk] = {};
      std::uint8_t tail_codes[kChunk];
      std::memcpy(tail, in.data() + i, (n - i) * sizeof(float));
      chunk(tail, tail_codes);
      std::memcpy(codes + i, tail_codes, n - i);
    }
    return;
  }
  // Slow path: a range beyond FLT_MAX, or below 255/FLT_MAX, where an f32 difference or step overflows.
  for (std::size_t i = 0; i < n; ++i) {
    double q = (static_cast<double>(in[i]) - mm.min) * inv;
    q = q > 0.0 ? q : 0.0;
    q = q < 255.0 ? q : 255.0;
    codes[i] = static_cast<std::uint8_t>(std::nearbyint(q));
  }
}

Status decode_uniform8(ByteSpan in, std::span<float> out) {
  const float min = load_f32(in.data()), max = load_f32(in.data() + 4);
  if (!std::isfinite(min) || !std::isfinite(max) || min > max)
    return error(Code::kMalformed,
                 "uint8 part: bad header (min " + std::to_string(min) + ", max " + std::to_string(max) + ")");
  // All 256 values, each rounded once from f64: exact to half an f32 ulp, no overflow at any range.
  float table[256];
  const double lo = min, hi = max, step = (hi - lo) / 255.0;
  for (int c = 0; c < 256; ++c) table[c] = static_cast<float>(std::clamp(lo + c * step, lo, hi));
  const std::uint8_t* codes = in.data() + 8;
  float* dst = out.data();
  for (std::size_t i = 0; i < out.size(); ++i) dst[i] = table[codes[i]];
  return Status::ok();
}

// ---- blockwise8 ----

float block_absmax(const float* __restrict in) {
  float m[kLanes] = {};
  for (std::size_t i = 0; i < kBlock; i += kLanes)
    for (std::size_t j = 0; j < kLanes; ++j) {
      const float a = std::fabs(in[i + j]);
      m[j] = a > m[j] ? a : m[j];  // skips NaN
    }
  float r = 0;
  for (float v : m) r = std::max(r, v);
  if (r <= FLT_MAX) return r;
  r = 0;  // slow path: an infinite element; the finite ones decide
  for (std::size_t i = 0; i < kBlock; ++i)
    if (std::isfinite(in[i])) r = std::max(r, std::fabs(in[i]));
  return r;
}

void block_codes(const float* __restrict in, float absmax, std::uint8_t* __restrict out, bool simd) {
  if (absmax == 0) {
    std::memset(out, 0, kBlock);
    return;
  }
  const double inv = 127.0 / absmax;
  if (!(inv <= FLT_MAX)) {
    for (std::size_t j = 0; j < kBlock; ++j) {  // absmax below 127/FLT_MAX: scale in f64
      double q = static_cast<double>(in[j]) * inv;
      q = q == q ? q : 0.0;
      q = std::clamp(q, -127.0, 127.0);
      out[j] = static_cast<std::uint8_t>(static_cast<std::int8_t>(std::nearbyint(q)));
    }
    return;
  }
  const float inv_f = static_cast<float>(inv);
#ifdef DEDLOC_AVG_SSE2
  if (simd) {
    const __m128 scale = _mm_set1_ps(inv_f), lo = _mm_set1_ps(-127.0f), hi = _mm_set1_ps(127.0f);
    for (std::size_t j = 0; j < kBlock; j += 16) {
      __m128i c[4];
      for (std::size_t k = 0; k < 4; ++k) {
        __m128 q = _mm_mul_ps(_mm_loadu_ps(in + j + 4 * k), scale);
        q = _mm_and_ps(q, _mm_cmpord_ps(q, q));  // NaN -> 0
        c[k] = _mm_cvtps_epi32(_mm_min_ps(_mm_max_ps(q, lo), hi));
      }
      const __m128i codes = _mm_packs_epi16(_mm_packs_epi32(c[0], c[1]), _mm_packs_epi32(c[2], c[3]));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + j), codes);
    }
    return;
  }
#endif
  (void)simd;
  for (std::size_t j = 0; j < kBlock; ++j) {
    float q = round_even(in[j] * inv_f);  // round first: see uniform_codes
    q = q == q ? q : 0.0f;                // NaN -> 0
    q = q > -127.0f ? q : -127.0f;
    q = q < 127.0f ? q : 127.0f;
    out[j] = static_cast<std::uint8_t>(static_cast<std::int8_t>(static_cast<std::int32_t>(q)));
  }
}

// Decodes one block; returns true if a code was −128.
bool block_values(const std::uint8_t* __restrict codes, float step, float* __restrict out, bool simd) {
#ifdef DEDLOC_AVG_SSE2
  if (simd) {
    const __m128 s = _mm_set1_ps(step);
    const __m128i minus128 = _mm_set1_epi8(-128);
    __m128i bad = _mm_setzero_si128();
    for (std::size_t j = 0; j < kBlock; j += 16) {
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(codes + j));
      bad = _mm_or_si128(bad, _mm_cmpeq_epi8(v, minus128));
      // Sign-extend bytes to int32: duplicate into the high half, then shift right arithmetically.
      const __m128i lo16 = _mm_srai_epi16(_mm_unpacklo_epi8(v, v), 8),
                    hi16 = _mm_srai_epi16(_mm_unpackhi_epi8(v, v), 8);
      const __m128i w[4] = {_mm_srai_epi32(_mm_unpacklo_epi16(lo16, lo16), 16),
                            _mm_srai_epi32(_mm_unpackhi_epi16(lo16, lo16), 16),
                            _mm_srai_epi32(_mm_unpacklo_epi16(hi16, hi16), 16),
                            _mm_srai_epi32(_mm_unpackhi_epi16(hi16, hi16), 16)};
      for (std::size_t k = 0; k < 4; ++k)
        _mm_storeu_ps(out + j + 4 * k, _mm_mul_ps(_mm_cvtepi32_ps(w[k]), s));
    }
    return _mm_movemask_epi8(bad) != 0;
  }
#endif
  (void)simd;
  std::uint8_t bad[kLanes] = {};
  for (std::size_t i = 0; i < kBlock; i += kLanes)
    for (std::size_t j = 0; j < kLanes; ++j) {
      const std::uint8_t c = codes[i + j];
      bad[j] |= static_cast<std::uint8_t>(c == 0x80);
      out[i + j] = static_cast<float>(static_cast<std::int8_t>(c)) * step;
    }
  std::uint8_t any = 0;
  for (std::uint8_t b : bad) any |= b;
  return any != 0;
}

std::size_t block_count(std::size_t n) { return (n + kBlock - 1) / kBlock; }

void encode_blockwise8(std::span<const float> in, std::uint8_t* out, bool simd) {
  const std::size_t n = in.size(), blocks = block_count(n);
  std::uint8_t* codes = out + 4 * blocks;
  for (std::size_t b = 0; b < blocks; ++b) {
    const std::size_t begin = b * kBlock, len = std::min(kBlock, n - begin);
    if (len == kBlock) {
      const float absmax = block_absmax(in.data() + begin);
      store_f32(out + 4 * b, absmax);
      block_codes(in.data() + begin, absmax, codes + begin, simd);
    } else {
      float padded[kBlock] = {};
      std::uint8_t padded_codes[kBlock];
      std::memcpy(padded, in.data() + begin, len * sizeof(float));
      const float absmax = block_absmax(padded);
      store_f32(out + 4 * b, absmax);
      block_codes(padded, absmax, padded_codes, simd);
      std::memcpy(codes + begin, padded_codes, len);
    }
  }
}

Status decode_blockwise8(ByteSpan in, std::span<float> out, bool simd) {
  const std::size_t n = out.size(), blocks = block_count(n);
  const std::uint8_t* codes = in.data() + 4 * blocks;
  bool bad_code = false;
  for (std::size_t b = 0; b < blocks; ++b) {
    const float absmax = load_f32(in.data() + 4 * b);
    if (!(absmax >= 0 && absmax <= FLT_MAX))
      return error(Code::kMalformed,
                   "blockwise8 part: block " + std::to_string(b) + " has absmax " + std::to_string(absmax));
    float step = absmax / 127.0f;
    // Keep 127·step within FLT_MAX so that no decoded value overflows (matters only near FLT_MAX).
    if (static_cast<double>(step) * 127.0 > FLT_MAX) step = std::nextafter(step, 0.0f);
    const std::size_t begin = b * kBlock, len = std::min(kBlock, n - begin);
    if (len == kBlock) {
      bad_code |= block_values(codes + begin, step, out.data() + begin, simd);
    } else {
      std::uint8_t padded[kBlock] = {};
      float values[kBlock];
      std::memcpy(padded, codes + begin, len);
      bad_code |= block_values(padded, step, values, simd);
      std::memcpy(out.data() + begin, values, len * sizeof(float));
    }
  }
  if (bad_code) return error(Code::kMalformed, "blockwise8 part: code -128 (codes are -127..127)");
  return Status::ok();
}

// ---- fp16 ----

using detail::Fp16Mode;

template <Fp16Mode M>
inline float to_half_input(float x, float mean, float scale) {
  if constexpr (M == Fp16Mode::kScaled) x = (x - mean) / scale;
  if constexpr (M != Fp16Mode::kRaw) {
    x = x > kHalfMax ? kHalfMax : x;  // NaN passes through both
    x = x < -kHalfMax ? -kHalfMax : x;
  }
  return x;
}

template <Fp16Mode M>
void to_fp16_scalar_impl(float mean, float scale, std::span<const float> in, std::uint8_t* out) {
  for (std::size_t i = 0; i < in.size(); ++i) {
    const std::uint16_t h = detail::float_to_half(to_half_input<M>(in[i], mean, scale));
    std::memcpy(out + 2 * i, &h, 2);
  }
}

template <Fp16Mode M>
void from_fp16_scalar_impl(float mean, float scale, const std::uint8_t* in, std::span<float> out) {
  for (std::size_t i = 0; i < out.size(); ++i) {
    std::uint16_t h;
    std::memcpy(&h, in + 2 * i, 2);
    float v = detail::half_to_float(h);
    if constexpr (M == Fp16Mode::kScaled) v = v * scale + mean;
    out[i] = v;
  }
}

#ifdef DEDLOC_AVG_X86
// F16C kernels. vcvtps2ph with an immediate rounding mode ignores MXCSR's rounding bits; no FMA is enabled
// here, so v·scale + mean rounds twice, as the scalar path does.
template <Fp16Mode M>
__attribute__((target("avx,f16c"))) inline __m256 f16c_input(__m256 v, __m256 mean, __m256 scale) {
  if constexpr (M == Fp16Mode::kScaled) v = _mm256_div_ps(_mm256_sub_ps(v, mean), scale);
  if constexpr (M != Fp16Mode::kRaw) {
    // maxps/minps return their second operand when either is NaN: NaN passes through.
    v = _mm256_max_ps(_mm256_set1_ps(-kHalfMax), v);
    v = _mm256_min_ps(_mm256_set1_ps(kHalfMax), v);
  }
  return v;
}

template <Fp16Mode M>
__attribute__((target("avx,f16c"))) inline __m256 f16c_output(__m256 v, __m256 mean, __m256 scale) {
  if constexpr (M == Fp16Mode::kScaled) v = _mm256_add_ps(_mm256_mul_ps(v, scale), mean);
  return v;
}

template <Fp16Mode M>
__attribute__((target("avx,f16c"))) void to_fp16_f16c_impl(float mean_s, float scale_s,
                                                           std::span<const float> in, std::uint8_t* out) {
  const __m256 mean = _mm256_set1_ps(mean_s), scale = _mm256_set1_ps(scale_s);
  const std::size_t n = in.size();
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = f16c_input<M>(_mm256_loadu_ps(in.data() + i), mean, scale);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 2 * i), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
  if (i < n) {
    float tail[8] = {};
    std::memcpy(tail, in.data() + i, (n - i) * sizeof(float));
    const __m256 v = f16c_input<M>(_mm256_loadu_ps(tail), mean, scale);
    alignas(16) std::uint8_t halves[16];
    _mm_store_si128(reinterpret_cast<__m128i*>(halves), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
    std::memcpy(out + 2 * i, halves, 2 * (n - i));
  }
}

template <Fp16Mode M>
__attribute__((target("avx,f16c"))) void from_fp16_f16c_impl(float mean_s, float scale_s,
                                                             const std::uint8_t* in, std::span<float> out) {
  const __m256 mean = _mm256_set1_ps(mean_s), scale = _mm256_set1_ps(scale_s);
  const std::size_t n = out.size();
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + 2 * i)));
    _mm256_storeu_ps(out.data() + i, f16c_output<M>(v, mean, scale));
  }
  if (i < n) {
    alignas(16) std::uint8_t halves[16] = {};
    std::memcpy(halves, in + 2 * i, 2 * (n - i));
    alignas(32) float values[8];
    const __m256 v = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(halves)));
    _mm256_store_ps(values, f16c_output<M>(v, mean, scale));
    std::memcpy(out.data() + i, values, (n - i) * sizeof(float));
  }
}
#endif

void to_fp16(Fp16Mode mode, float mean, float scale, std::span<const float> in, std::uint8_t* out,
             bool simd) {
  if (simd && detail::cpu_has_f16c())
    detail::to_fp16_f16c(mode, mean, scale, in, out);
  else
    detail::to_fp16_scalar(mode, mean, scale, in, out);
}

void from_fp16(Fp16Mode mode, float mean, float scale, const std::uint8_t* in, std::span<float> out,
               bool simd) {
  if (simd && detail::cpu_has_f16c())
    detail::from_fp16_f16c(mode, mean, scale, in, out);
  else
    detail::from_fp16_scalar(mode, mean, scale, in, out);
}

// ---- error bounds (f64, per element; see codec.hpp) ----

constexpr double kTiny = 0x1p-140;

// The error of half(clamp(z)) for a z given exactly; beyond ±65504 the clamp distance.
double fp16_error(double z) {
  const double a = std::fabs(z);
  return a <= kHalfMax ? std::max(a * 0x1p-11, 0x1p-25) : a - kHalfMax;
}

double fp16_bound(std::span<const float> part) {
  double bound = 0;
  for (float x : part) bound = std::max(bound, fp16_error(x));
  return bound;
}

double scaled_fp16_bound(std::span<const float> part) {
  const Affine h = scaled_header(part, true);
  const double m = h.mean, s = h.scale;
  double bound = 0;
  for (float x : part) {
    // The f32 z differs from the exact one by 2 roundings; 2^-22·|x − m| covers that, also when clamped.
    const double centered = std::fabs(x - m);
    bound = std::max(bound, s * fp16_error(centered / s) + 0x1p-22 * (centered + std::fabs(x)) + kTiny);
  }
  return bound;
}

double uniform8_bound(std::span<const float> part) {
  if (part.empty()) return 0;
  const MinMax mm = finite_min_max(part, true);
  const double range = static_cast<double>(mm.max) - mm.min;
  const double magnitude = std::max(std::fabs(mm.min), std::fabs(mm.max));
  return range * (1.0 / 510 + 0x1p-22) + magnitude * 0x1p-23 + kTiny;
}

double blockwise8_bound(std::span<const float> part) {
  double bound = 0;
  for (std::size_t begin = 0; begin < part.size(); begin += kBlock) {
    double absmax = 0;
    for (float x : part.subspan(begin, std::min(kBlock, part.size() - begin)))
      absmax = std::max(absmax, std::fabs(static_cast<double>(x)));
    bound = std::max(bound, absmax * (1.0 / 254 + 0x1p-21) + kTiny);
  }
  return bound;
}

constexpr std::size_t kCodecCount = kCodecs.size();

}  // namespace

std::size_t encoded_bytes(Codec codec, std::size_t elements) {
  switch (codec) {
    case Codec::kNone: return 4 * elements;
    case Codec::kFloat16: return 2 * elements;
    case Codec::kScaledFloat16: return 8 + 2 * elements;
    case Codec::kUniform8Bit: return 8 + elements;
    case Codec::kBlockwise8Bit: return 4 * block_count(elements) + elements;
  }
  DEDLOC_CHECK(false, "unknown codec");
  return 0;
}

std::uint64_t part_elements_for(Codec codec, std::uint64_t wire_bytes) {
  // encoded_bytes grows with n and is at least n, so the answer lies in [0, wire_bytes].
  std::uint64_t low = 0, high = wire_bytes;
  while (low < high) {
    const std::uint64_t mid = low + (high - low + 1) / 2;
    if (encoded_bytes(codec, static_cast<std::size_t>(mid)) <= wire_bytes) low = mid; else high = mid - 1;
  }
  return std::max<std::uint64_t>(low, 1);
}

void encode(Codec codec, std::span<const float> in, std::span<std::uint8_t> out) {
  detail::encode_with(detail::Kernels::kNative, codec, in, out);
}

Status decode(Codec codec, ByteSpan in, std::span<float> out) {
  return detail::decode_with(detail::Kernels::kNative, codec, in, out);
}

double error_bound(Codec codec, std::span<const float> part) {
  if (!all_finite(part)) return std::numeric_limits<double>::infinity();
  switch (codec) {
    case Codec::kNone: return 0;
    case Codec::kFloat16: return fp16_bound(part);
    case Codec::kScaledFloat16: return part.empty() ? 0 : scaled_fp16_bound(part);
    case Codec::kUniform8Bit: return uniform8_bound(part);
    case Codec::kBlockwise8Bit: return blockwise8_bound(part);
  }
  return std::numeric_limits<double>::infinity();
}

Codec CodecPolicy::for_tensor(std::size_t tensor_elements) const {
  if (!adaptive) return fixed;
  return tensor_elements >= large_from_elements ? large : small;
}

Result<CodecPolicy> CodecPolicy::parse(std::string_view name) {
  CodecPolicy policy;
  if (name == "adaptive") {
    policy.adaptive = true;
    return policy;
  }
  auto codec = parse_codec(name);
  if (!codec) {
    std::string message = "unknown compression '" + std::string(name) + "' (adaptive";
    for (const CodecInfo& known : kCodecs) message += ", " + std::string(known.name);
    return error(Code::kInvalidArgument, message + ")");
  }
  policy.fixed = *codec;
  return policy;
}

std::string_view CodecPolicy::name() const { return adaptive ? "adaptive" : codec_name(fixed); }

namespace detail {

void encode_with(Kernels kernels, Codec codec, std::span<const float> in, std::span<std::uint8_t> out) {
  const bool simd = kernels == Kernels::kNative;
  DEDLOC_CHECK(out.size() == encoded_bytes(codec, in.size()), "encode: output size != encoded_bytes");
  switch (codec) {
    case Codec::kNone:
      if (!in.empty()) std::memcpy(out.data(), in.data(), in.size_bytes());
      return;
    case Codec::kFloat16: to_fp16(Fp16Mode::kClamped, 0, 1, in, out.data(), simd); return;
    case Codec::kScaledFloat16: {
      const Affine h = scaled_header(in, simd);
      store_f32(out.data(), h.mean);
      store_f32(out.data() + 4, h.scale);
      to_fp16(Fp16Mode::kScaled, h.mean, h.scale, in, out.data() + 8, simd);
      return;
    }
    case Codec::kUniform8Bit: encode_uniform8(in, out.data(), simd); return;
    case Codec::kBlockwise8Bit: encode_blockwise8(in, out.data(), simd); return;
  }
  DEDLOC_CHECK(false, "unknown codec");
}

Status decode_with(Kernels kernels, Codec codec, ByteSpan in, std::span<float> out) {
  const bool simd = kernels == Kernels::kNative;
  if (static_cast<std::size_t>(codec) >= kCodecCount)
    return error(Code::kMalformed, "unknown codec number " + std::to_string(static_cast<int>(codec)));
  const std::size_t want = encoded_bytes(codec, out.size());
  if (in.size() != want)
    return error(Code::kMalformed, std::string(codec_name(codec)) + " part: " + std::to_string(in.size()) +
                                       " bytes for " + std::to_string(out.size()) + " elements, want " +
                                       std::to_string(want));
  switch (codec) {
    case Codec::kNone:
      if (!out.empty()) std::memcpy(out.data(), in.data(), in.size());
      return Status::ok();
    case Codec::kFloat16: from_fp16(Fp16Mode::kClamped, 0, 1, in.data(), out, simd); return Status::ok();
    case Codec::kScaledFloat16: {
      const float mean = load_f32(in.data()), scale = load_f32(in.data() + 4);
      if (!std::isfinite(mean) || !std::isfinite(scale) || !(scale > 0))
        return error(Code::kMalformed, "scaled-fp16 part: bad header (mean " + std::to_string(mean) +
                                           ", scale " + std::to_string(scale) + ")");
      from_fp16(Fp16Mode::kScaled, mean, scale, in.data() + 8, out, simd);
      return Status::ok();
    }
    case Codec::kUniform8Bit: return decode_uniform8(in, out);
    case Codec::kBlockwise8Bit: return decode_blockwise8(in, out, simd);
  }
  return error(Code::kMalformed, "unknown codec");
}

bool cpu_has_f16c() {
#ifdef DEDLOC_AVG_X86
  // "avx" also checks that the OS saves the YMM registers. F16C comes from CPUID leaf 1 (ECX bit 29)
  // itself: clang before 16 does not know __builtin_cpu_supports("f16c") and refuses to compile it (which
  // kept this file, and so the fuzz build, from building with clang).
  static const bool has = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return __builtin_cpu_supports("avx") && __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
  }();
  return has;
#else
  return false;
#endif
}

std::uint16_t float_to_half(float x) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(x);
  const std::uint32_t sign = (bits >> 16) & 0x8000u;
  const std::uint32_t abs = bits & 0x7FFFFFFFu;
  if (abs > 0x7F800000u) return static_cast<std::uint16_t>(sign | 0x7E00u | ((abs >> 13) & 0x03FFu));  // NaN
  if (abs >= 0x477FF000u) return static_cast<std::uint16_t>(sign | 0x7C00u);  // ≥ 65520 rounds to inf
  if (abs >= 0x38800000u) {
    // Normal half (≥ 2^-14): rebias the exponent (127 → 15) and round the 13 dropped bits to nearest even;
    // a carry out of the mantissa correctly bumps the exponent.
    const std::uint32_t rounded = abs - 0x38000000u + 0x0FFFu + ((abs >> 13) & 1u);
    return static_cast<std::uint16_t>(sign | (rounded >> 13));
  }
  if (abs <= 0x33000000u) return static_cast<std::uint16_t>(sign);  // ≤ 2^-25 (a tie at 2^-25) rounds to 0
  // Subnormal half: value / 2^-24 = mantissa · 2^(exponent − 126), rounded to nearest even.
  const std::uint32_t exponent = abs >> 23;  // 102..112
  const std::uint32_t mantissa = (abs & 0x007FFFFFu) | 0x00800000u;
  const std::uint32_t shift = 126u - exponent;  // 14..24
  std::uint32_t q = mantissa >> shift;
  const std::uint32_t rest = mantissa & ((1u << shift) - 1u), half = 1u << (shift - 1u);
  if (rest > half || (rest == half && (q & 1u))) ++q;
  return static_cast<std::uint16_t>(sign | q);
}

float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = (std::uint32_t{h} & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1Fu, mantissa = h & 0x03FFu;
  if (exponent == 0x1F)  // inf, or NaN with the quiet bit set
    return std::bit_cast<float>(sign | 0x7F800000u | (mantissa << 13) | (mantissa != 0 ? 0x00400000u : 0u));
  if (exponent != 0) return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
  // Zero or subnormal: mantissa · 2^-24, exact in float.
  return std::bit_cast<float>(sign | std::bit_cast<std::uint32_t>(static_cast<float>(mantissa) * 0x1p-24f));
}

void to_fp16_scalar(Fp16Mode mode, float mean, float scale, std::span<const float> in, std::uint8_t* out) {
  switch (mode) {
    case Fp16Mode::kRaw: return to_fp16_scalar_impl<Fp16Mode::kRaw>(mean, scale, in, out);
    case Fp16Mode::kClamped: return to_fp16_scalar_impl<Fp16Mode::kClamped>(mean, scale, in, out);
    case Fp16Mode::kScaled: return to_fp16_scalar_impl<Fp16Mode::kScaled>(mean, scale, in, out);
  }
}

void from_fp16_scalar(Fp16Mode mode, float mean, float scale, const std::uint8_t* in, std::span<float> out) {
  if (mode == Fp16Mode::kScaled) return from_fp16_scalar_impl<Fp16Mode::kScaled>(mean, scale, in, out);
  from_fp16_scalar_impl<Fp16Mode::kRaw>(mean, scale, in, out);
}

void to_fp16_f16c(Fp16Mode mode, float mean, float scale, std::span<const float> in, std::uint8_t* out) {
#ifdef DEDLOC_AVG_X86
  DEDLOC_CHECK(cpu_has_f16c(), "F16C kernel on a CPU without F16C");
  switch (mode) {
    case Fp16Mode::kRaw: return to_fp16_f16c_impl<Fp16Mode::kRaw>(mean, scale, in, out);
    case Fp16Mode::kClamped: return to_fp16_f16c_impl<Fp16Mode::kClamped>(mean, scale, in, out);
    case Fp16Mode::kScaled: return to_fp16_f16c_impl<Fp16Mode::kScaled>(mean, scale, in, out);
  }
#else
  DEDLOC_CHECK(false, "F16C kernel on a non-x86 build");
  (void)mode, (void)mean, (void)scale, (void)in, (void)out;
#endif
}

void from_fp16_f16c(Fp16Mode mode, float mean, float scale, const std::uint8_t* in, std::span<float> out) {
#ifdef DEDLOC_AVG_X86
  DEDLOC_CHECK(cpu_has_f16c(), "F16C kernel on a CPU without F16C");
  if (mode == Fp16Mode::kScaled) return from_fp16_f16c_impl<Fp16Mode::kScaled>(mean, scale, in, out);
  from_fp16_f16c_impl<Fp16Mode::kRaw>(mean, scale, in, out);
#else
  DEDLOC_CHECK(false, "F16C kernel on a non-x86 build");
  (void)mode, (void)mean, (void)scale, (void)in, (void)out;
#endif
}

}  // namespace detail

}  // namespace dedloc::avg
