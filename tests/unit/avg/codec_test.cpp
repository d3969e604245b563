#include "dedloc/avg/codec.hpp"

#include <algorithm>
#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "support/skip.hpp"

using namespace dedloc;
using namespace dedloc::avg;

namespace {

constexpr Codec kAllCodecs[] = {Codec::kNone, Codec::kFloat16, Codec::kScaledFloat16, Codec::kUniform8Bit,
                                Codec::kBlockwise8Bit};
constexpr Codec kLossyCodecs[] = {Codec::kFloat16, Codec::kScaledFloat16, Codec::kUniform8Bit,
                                  Codec::kBlockwise8Bit};
constexpr std::size_t kSizes[] = {0, 1, 255, 256, 257, 100003};
constexpr float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();

enum class Shape { kNormal, kUniform, kHeavyTailed, kWideMagnitudes };

const char* shape_name(Shape shape) {
  switch (shape) {
    case Shape::kNormal: return "normal(0.3, 2)";
    case Shape::kUniform: return "uniform(-3, 7)";
    case Shape::kHeavyTailed: return "student-t(1 dof)";
    case Shape::kWideMagnitudes: return "sign * 10^uniform(-30, 6)";
  }
  return "?";
}

std::vector<float> sample(Shape shape, std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<float> x(n);
  std::normal_distribution<float> normal(0.3f, 2.0f);
  std::uniform_real_distribution<float> uniform(-3.0f, 7.0f);
  std::student_t_distribution<float> heavy(1.0f);  // Cauchy: outliers far beyond fp16's range happen
  std::uniform_real_distribution<float> exponent(-30.0f, 6.0f);
  std::bernoulli_distribution negative(0.5);
  for (float& v : x) {
    switch (shape) {
      case Shape::kNormal: v = normal(rng); break;
      case Shape::kUniform: v = uniform(rng); break;
      case Shape::kHeavyTailed: v = heavy(rng); break;
      case Shape::kWideMagnitudes: v = (negative(rng) ? -1.0f : 1.0f) * std::pow(10.0f, exponent(rng)); break;
    }
  }
  return x;
}

Bytes encoded(Codec codec, std::span<const float> x) {
  Bytes out(encoded_bytes(codec, x.size()));
  encode(codec, x, out);
  return out;
}

std::vector<float> round_trip(Codec codec, std::span<const float> x) {
  Bytes bytes = encoded(codec, x);
  std::vector<float> y(x.size(), -12345.0f);
  Status status = decode(codec, bytes, y);
  INFO(status.to_string());
  REQUIRE(status.is_ok());
  return y;
}

double max_error(std::span<const float> x, std::span<const float> y) {
  double worst = 0;
  for (std::size_t i = 0; i < x.size(); ++i)
    worst = std::max(worst, std::fabs(static_cast<double>(x[i]) - static_cast<double>(y[i])));
  return worst;
}

double rms_error(std::span<const float> x, std::span<const float> y) {
  double sum = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double d = static_cast<double>(x[i]) - static_cast<double>(y[i]);
    sum += d * d;
  }
  return std::sqrt(sum / static_cast<double>(std::max<std::size_t>(x.size(), 1)));
}

double max_abs(std::span<const float> x) {
  double m = 0;
  for (float v : x) m = std::max(m, std::fabs(static_cast<double>(v)));
  return m;
}

// Every element within the documented bound: per block for blockwise8 (error_bound of a block-aligned
// sub-span is that block's bound), per part otherwise. Returns the number of violations.
std::size_t violations(Codec codec, std::span<const float> x, std::span<const float> y) {
  const std::size_t step =
      codec == Codec::kBlockwise8Bit ? kBlockwiseBlock : std::max<std::size_t>(x.size(), 1);
  std::size_t bad = 0;
  for (std::size_t begin = 0; begin < x.size(); begin += step) {
    const std::size_t len = std::min(step, x.size() - begin);
    const double bound = error_bound(codec, x.subspan(begin, len));
    for (std::size_t i = begin; i < begin + len; ++i) {
      const double err = std::fabs(static_cast<double>(x[i]) - static_cast<double>(y[i]));
      if (!(err <= bound)) {
        if (bad < 3)
          UNSCOPED_INFO("element " << i << ": x=" << x[i] << " decoded=" << y[i] << " error " << err
                                   << " > bound " << bound);
        ++bad;
      }
    }
  }
  return bad;
}

std::uint32_t bits(float v) { return std::bit_cast<std::uint32_t>(v); }

}  // namespace

TEST_CASE("codec names and wire numbers are pinned and parse back", "[unit][avg]") {
  CHECK(static_cast<int>(Codec::kNone) == 0);
  CHECK(static_cast<int>(Codec::kFloat16) == 1);
  CHECK(static_cast<int>(Codec::kScaledFloat16) == 2);
  CHECK(static_cast<int>(Codec::kUniform8Bit) == 3);
  CHECK(static_cast<int>(Codec::kBlockwise8Bit) == 4);
  CHECK(codec_name(Codec::kNone) == "none");
  CHECK(codec_name(Codec::kFloat16) == "fp16");
  CHECK(codec_name(Codec::kScaledFloat16) == "scaled-fp16");
  CHECK(codec_name(Codec::kUniform8Bit) == "uint8");
  CHECK(codec_name(Codec::kBlockwise8Bit) == "blockwise8");
  for (Codec codec : kAllCodecs) {
    auto parsed = parse_codec(codec_name(codec));
    REQUIRE(parsed.is_ok());
    CHECK(*parsed == codec);
    auto wire = codec_from_wire(static_cast<std::uint64_t>(codec));
    REQUIRE(wire.is_ok());
    CHECK(*wire == codec);
  }
  CHECK(codec_from_wire(5).status().code() == Code::kMalformed);
  CHECK(codec_from_wire(std::uint64_t{1} << 40).status().code() == Code::kMalformed);
  CHECK(parse_codec("FP16").status().code() == Code::kInvalidArgument);
  CHECK(parse_codec("").status().code() == Code::kInvalidArgument);
  auto adaptive = parse_codec("adaptive");
  CHECK(adaptive.status().code() == Code::kInvalidArgument);
  CHECK(adaptive.status().message().find("policy") != std::string::npos);
}

TEST_CASE("encoded_bytes is exactly what encode writes", "[unit][avg]") {
  for (std::size_t n : kSizes) {
    const std::size_t blocks = (n + 255) / 256;
    CHECK(encoded_bytes(Codec::kNone, n) == 4 * n);
    CHECK(encoded_bytes(Codec::kFloat16, n) == 2 * n);
    CHECK(encoded_bytes(Codec::kScaledFloat16, n) == 8 + 2 * n);
    CHECK(encoded_bytes(Codec::kUniform8Bit, n) == 8 + n);
    CHECK(encoded_bytes(Codec::kBlockwise8Bit, n) == 4 * blocks + n);
  }
  std::vector<float> x = sample(Shape::kNormal, 1000, 1);
  for (Codec codec : kAllCodecs) {
    for (std::size_t n : {0, 1, 7, 255, 256, 257, 1000}) {
      INFO(codec_name(codec) << " n=" << n);
      std::span<const float> part(x.data(), n);
      const std::size_t size = encoded_bytes(codec, n);
      // Canaries on both sides, and two different prefills that must give the same bytes: every byte of
      // the output is written, none outside it.
      Bytes a(size + 64, 0xAA), b(size + 64, 0x55);
      encode(codec, part, std::span<std::uint8_t>(a).subspan(32, size));
      encode(codec, part, std::span<std::uint8_t>(b).subspan(32, size));
      CHECK(std::equal(a.begin() + 32, a.begin() + 32 + static_cast<std::ptrdiff_t>(size), b.begin() + 32));
      CHECK(std::all_of(a.begin(), a.begin() + 32, [](std::uint8_t v) { return v == 0xAA; }));
      CHECK(std::all_of(a.end() - 32, a.end(), [](std::uint8_t v) { return v == 0xAA; }));
    }
  }
}

TEST_CASE("round trips stay within the documented error bound", "[unit][avg]") {
  for (Shape shape : {Shape::kNormal, Shape::kUniform, Shape::kHeavyTailed, Shape::kWideMagnitudes}) {
    for (std::size_t n : kSizes) {
      const std::vector<float> x = sample(shape, n, static_cast<std::uint32_t>(n * 7 + 3));
      for (Codec codec : kAllCodecs) {
        INFO(codec_name(codec) << ", " << shape_name(shape) << ", n=" << n);
        const std::vector<float> y = round_trip(codec, x);
        CHECK(violations(codec, x, y) == 0);
        if (codec == Codec::kNone) CHECK(y == x);
      }
    }
  }
}

TEST_CASE("constant parts round-trip within their bound, exactly where the format allows", "[unit][avg]") {
  for (float c : {0.0f, 3.25f, -1e-3f, 1e30f, -7e-40f /* subnormal */}) {
    for (std::size_t n : {1, 256, 1000}) {
      const std::vector<float> x(n, c);
      for (Codec codec : kAllCodecs) {
        INFO(codec_name(codec) << " value " << c << " n=" << n);
        const std::vector<float> y = round_trip(codec, x);
        CHECK(violations(codec, x, y) == 0);
        // max == min: every uint8 code is 0 and decodes to min; std == 0: scale 1 and z == 0.
        if (codec == Codec::kUniform8Bit || codec == Codec::kScaledFloat16 || codec == Codec::kNone)
          CHECK(y == x);
      }
    }
  }
}

TEST_CASE("error bounds are tight enough to mean something", "[unit][avg]") {
  const std::vector<float> x = sample(Shape::kNormal, 100003, 42);
  const double scale = max_abs(x);
  double measured[5];
  for (Codec codec : kAllCodecs) measured[static_cast<int>(codec)] = max_error(x, round_trip(codec, x));
  const double fp16 = measured[1], scaled = measured[2], uint8 = measured[3], block8 = measured[4];

  // The fp16 bound is the half-ulp rule itself, orders of magnitude below the data's scale.
  CHECK(error_bound(Codec::kFloat16, x) <= scale * 0x1p-11);
  CHECK(error_bound(Codec::kScaledFloat16, x) < 1e-3 * scale);
  // Both 8-bit bounds are a few tenths of a percent of the range.
  auto [lo, hi] = std::minmax_element(x.begin(), x.end());
  const double range = static_cast<double>(*hi) - static_cast<double>(*lo);
  CHECK(error_bound(Codec::kUniform8Bit, x) < range / 500);
  CHECK(error_bound(Codec::kBlockwise8Bit, x) < scale / 250);
  // And the codecs come close to their bounds: the quantization error is really that large.
  CHECK(fp16 > 0.4 * error_bound(Codec::kFloat16, x));
  CHECK(uint8 > 0.9 * error_bound(Codec::kUniform8Bit, x));
  CHECK(block8 > 0.5 * error_bound(Codec::kBlockwise8Bit, x));
  // 8 bits lose far more than 16: the reason the adaptive policy keeps small tensors in fp16. (The worst
  // fp16 error sits at the largest |x|, where its relative step is coarsest; the typical error shows the
  // gap better.)
  CHECK(uint8 > 5 * fp16);
  CHECK(block8 > 5 * fp16);
  CHECK(uint8 > 5 * scaled);
  const double rms_fp16 = rms_error(x, round_trip(Codec::kFloat16, x));
  const double rms_scaled = rms_error(x, round_trip(Codec::kScaledFloat16, x));
  CHECK(rms_error(x, round_trip(Codec::kUniform8Bit, x)) > 30 * std::max(rms_fp16, rms_scaled));
  CHECK(rms_error(x, round_trip(Codec::kBlockwise8Bit, x)) > 30 * std::max(rms_fp16, rms_scaled));
  CHECK(measured[0] == 0);

  // fp16 is correctly rounded: on [1, 2) the worst error is half an ulp, 2^-11.
  std::vector<float> ones(50000);
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> one_two(1.0f, 2.0f);
  for (float& v : ones) v = one_two(rng);
  const double err = max_error(ones, round_trip(Codec::kFloat16, ones));
  CHECK(err <= 0x1p-11);
  CHECK(err > 0.9 * 0x1p-11);
}

TEST_CASE("scaled fp16 keeps precision where plain fp16 cannot", "[unit][avg]") {
  // A large common offset with small spread: plain fp16 rounds to multiples of 0.5 near 1000, erasing the
  // spread; the scaled codec is limited only by f32 itself.
  std::mt19937 rng(9);
  std::normal_distribution<float> noise(0.0f, 0.01f);
  std::vector<float> x(5000);
  for (float& v : x) v = 1000.0f + noise(rng);
  const std::vector<float> y = round_trip(Codec::kScaledFloat16, x);
  CHECK(violations(Codec::kScaledFloat16, x, y) == 0);
  CHECK(error_bound(Codec::kScaledFloat16, x) < 1e-3);
  CHECK(max_error(x, round_trip(Codec::kFloat16, x)) > 100 * max_error(x, y));

  // Values far beyond fp16's range.
  std::vector<float> big = sample(Shape::kNormal, 3000, 10);
  for (float& v : big) v *= 1e30f;
  CHECK(violations(Codec::kScaledFloat16, big, round_trip(Codec::kScaledFloat16, big)) == 0);
  CHECK(error_bound(Codec::kScaledFloat16, big) < 1e-3 * max_abs(big));
}

TEST_CASE("extreme ranges stay finite and within bound", "[unit][avg]") {
  std::mt19937 rng(77);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  auto scaled_sample = [&](float s, std::size_t n) {
    std::vector<float> x(n);
    for (float& v : x) v = unit(rng) * s;
    return x;
  };
  struct Case {
    const char* what;
    std::vector<float> x;
  };
  std::vector<float> spanning = scaled_sample(3e38f, 1000);  // max − min > FLT_MAX
  spanning[0] = 3.3e38f;
  spanning[1] = -3.3e38f;
  std::vector<float> shifted = scaled_sample(1e-30f, 1000);  // tiny range around a normal value
  for (float& v : shifted) v += 1.0f;
  Case cases[] = {
      {"range beyond FLT_MAX", spanning},
      {"subnormal values (range below 255/FLT_MAX)", scaled_sample(1e-39f, 1000)},
      {"tiny values", scaled_sample(1e-36f, 1000)},
      {"values near FLT_MAX", scaled_sample(3.4e38f, 1000)},
      {"tiny spread around 1", shifted},
  };
  for (const Case& c : cases) {
    for (Codec codec : {Codec::kUniform8Bit, Codec::kBlockwise8Bit, Codec::kFloat16}) {
      INFO(c.what << ", " << codec_name(codec));
      const std::vector<float> y = round_trip(codec, c.x);
      CHECK(std::all_of(y.begin(), y.end(), [](float v) { return std::isfinite(v); }));
      CHECK(violations(codec, c.x, y) == 0);
    }
  }
  // An absmax of exactly FLT_MAX: 127·(FLT_MAX/127) must not round up to inf.
  std::vector<float> edge = {std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(), 1.0f};
  const std::vector<float> y = round_trip(Codec::kBlockwise8Bit, edge);
  CHECK(std::isfinite(y[0]));
  CHECK(std::isfinite(y[1]));
  CHECK(violations(Codec::kBlockwise8Bit, edge, y) == 0);
}

TEST_CASE("fp16 clamps to ±65504 instead of overflowing, and keeps NaN", "[unit][avg]") {
  const std::vector<float> x = {
      65504.0f, 65519.99f, 65520.0f, 1e5f, 3e38f,
      kInf,     -65520.0f, -kInf,    kNaN, 5.9604645e-8f /* 2^-24, the least subnormal half */,
      1.0f,     -0.0f};
  const std::vector<float> y = round_trip(Codec::kFloat16, x);
  for (std::size_t i = 0; i < 6; ++i) CHECK(y[i] == 65504.0f);
  CHECK(y[6] == -65504.0f);
  CHECK(y[7] == -65504.0f);
  CHECK(std::isnan(y[8]));
  CHECK(y[9] == 0x1p-24f);
  CHECK(y[10] == 1.0f);
  CHECK(bits(y[11]) == bits(-0.0f));
  // The bound for clamped values is the clamping distance.
  const std::vector<float> over = {1e5f};
  CHECK(error_bound(Codec::kFloat16, over) == 1e5 - 65504);
  // The scaled codec clamps z the same way (a header can only produce |z| > 65504 when set by hand).
  std::uint8_t h[2];
  const float one = 1.0f;
  detail::to_fp16_scalar(detail::Fp16Mode::kScaled, 0.0f, 1e-10f, std::span<const float>(&one, 1), h);
  CHECK((h[0] | h[1] << 8) == 0x7BFF);
}

TEST_CASE("non-finite inputs encode without crashing, as documented", "[unit][avg]") {
  std::vector<float> x = sample(Shape::kNormal, 1000, 3);
  x[3] = kNaN;
  x[10] = kInf;
  x[700] = -kInf;
  std::vector<float> finite;
  for (float v : x)
    if (std::isfinite(v)) finite.push_back(v);
  for (Codec codec : kAllCodecs) {
    INFO(codec_name(codec));
    CHECK(error_bound(codec, x) == std::numeric_limits<double>::infinity());
    const Bytes bytes = encoded(codec, x);
    std::vector<float> y(x.size());
    REQUIRE(decode(codec, bytes, y).is_ok());  // headers stay finite
    CHECK(std::isnan(y[3]) ==
          (codec == Codec::kNone || codec == Codec::kFloat16 || codec == Codec::kScaledFloat16));
    switch (codec) {
      case Codec::kNone:
        CHECK(y[10] == kInf);
        CHECK(y[700] == -kInf);
        break;
      case Codec::kFloat16:
        CHECK(y[10] == 65504.0f);
        CHECK(y[700] == -65504.0f);
        break;
      case Codec::kScaledFloat16: {
        float mean, scale;
        std::memcpy(&mean, bytes.data(), 4);
        std::memcpy(&scale, bytes.data() + 4, 4);
        CHECK(y[10] == 65504.0f * scale + mean);
        CHECK(y[700] == -65504.0f * scale + mean);
        // The header describes the finite elements: close to their own statistics.
        double sum = 0;
        for (float v : finite) sum += v;
        CHECK(std::fabs(mean - sum / static_cast<double>(finite.size())) < 1e-5);
        break;
      }
      case Codec::kUniform8Bit: {
        auto [lo, hi] = std::minmax_element(finite.begin(), finite.end());
        CHECK(y[3] == *lo);
        CHECK(y[700] == *lo);
        CHECK(y[10] == *hi);
        // The header is that of the finite elements, so they keep the finite part's bound.
        double bound = error_bound(codec, finite);
        for (std::size_t i = 0; i < x.size(); ++i)
          if (std::isfinite(x[i])) CHECK(std::fabs(static_cast<double>(x[i]) - y[i]) <= bound);
        break;
      }
      case Codec::kBlockwise8Bit:
        CHECK(y[3] == 0.0f);
        CHECK(y[10] > 0);
        CHECK(y[700] < 0);
        break;
    }
  }
  // A part of nothing but NaN.
  const std::vector<float> nans(300, kNaN);
  for (Codec codec : kAllCodecs) {
    std::vector<float> y(nans.size());
    CHECK(decode(codec, encoded(codec, nans), y).is_ok());
  }
}

TEST_CASE("decode refuses malformed parts", "[unit][avg]") {
  const std::vector<float> x = sample(Shape::kNormal, 300, 8);  // two blockwise8 blocks
  std::vector<float> y(x.size());
  for (Codec codec : kAllCodecs) {
    INFO(codec_name(codec));
    Bytes bytes = encoded(codec, x);
    REQUIRE(decode(codec, bytes, y).is_ok());
    Bytes longer = bytes;
    longer.push_back(0);
    CHECK(decode(codec, longer, y).code() == Code::kMalformed);
    CHECK(decode(codec, ByteSpan(bytes).first(bytes.size() - 1), y).code() == Code::kMalformed);
    CHECK(decode(codec, ByteSpan(), y).code() == Code::kMalformed);
    std::vector<float> fewer(x.size() - 1);
    CHECK(decode(codec, bytes, fewer).code() == Code::kMalformed);
  }
  CHECK(decode(static_cast<Codec>(9), Bytes(8), std::span<float>()).code() == Code::kMalformed);

  auto with_float = [](Bytes bytes, std::size_t offset, float v) {
    std::memcpy(bytes.data() + offset, &v, 4);
    return bytes;
  };
  const Bytes scaled = encoded(Codec::kScaledFloat16, x);
  for (float bad_mean : {kNaN, kInf, -kInf})
    CHECK(decode(Codec::kScaledFloat16, with_float(scaled, 0, bad_mean), y).code() == Code::kMalformed);
  for (float bad_scale : {0.0f, -0.0f, -1.0f, kNaN, kInf})
    CHECK(decode(Codec::kScaledFloat16, with_float(scaled, 4, bad_scale), y).code() == Code::kMalformed);

  const Bytes uniform = encoded(Codec::kUniform8Bit, x);
  CHECK(decode(Codec::kUniform8Bit, with_float(uniform, 0, kNaN), y).code() == Code::kMalformed);
  CHECK(decode(Codec::kUniform8Bit, with_float(uniform, 4, kInf), y).code() == Code::kMalformed);
  CHECK(decode(Codec::kUniform8Bit, with_float(with_float(uniform, 0, 2.0f), 4, 1.0f), y).code() ==
        Code::kMalformed);  // min > max

  const Bytes block = encoded(Codec::kBlockwise8Bit, x);
  for (float bad_absmax : {kNaN, kInf, -1.0f})
    CHECK(decode(Codec::kBlockwise8Bit, with_float(block, 4, bad_absmax), y).code() == Code::kMalformed);
  Bytes minus128 = block;
  minus128[8 + 299] = 0x80;  // the last code of the short second block
  CHECK(decode(Codec::kBlockwise8Bit, minus128, y).code() == Code::kMalformed);
  minus128 = block;
  minus128[8 + 5] = 0x80;
  CHECK(decode(Codec::kBlockwise8Bit, minus128, y).code() == Code::kMalformed);

  // Random bytes of every length: a value or kMalformed, never a crash (ASan/UBSan builds watch this).
  std::mt19937 rng(1234);
  for (int round = 0; round < 3000; ++round) {
    const Codec codec = kAllCodecs[round % 5];
    const std::size_t n = rng() % 600;
    Bytes garbage(rng() % 3 == 0 ? rng() % 1300 : encoded_bytes(codec, n));
    for (auto& b : garbage) b = static_cast<std::uint8_t>(rng());
    std::vector<float> out(n);
    const Status status = decode(codec, garbage, out);
    CHECK((status.is_ok() || status.code() == Code::kMalformed));
  }
}

TEST_CASE("the scalar fp16 conversion is correctly rounded", "[unit][avg]") {
  using detail::float_to_half;
  using detail::half_to_float;
  // Every finite half survives a round trip through float.
  for (std::uint32_t h = 0; h < 0x10000; ++h) {
    const auto half = static_cast<std::uint16_t>(h);
    if ((h & 0x7C00) == 0x7C00) continue;
    if (float_to_half(half_to_float(half)) != half) FAIL("half " << h << " does not round-trip");
  }
  // Midpoints between neighbouring halves tie to the even one; one float ulp either side decides.
  for (std::uint16_t h = 0; h < 0x7BFF; ++h) {
    const double a = half_to_float(h), b = half_to_float(static_cast<std::uint16_t>(h + 1));
    const float mid = static_cast<float>((a + b) / 2);  // exact: a 12-bit significand
    REQUIRE(static_cast<double>(mid) == (a + b) / 2);
    const std::uint16_t even = (h & 1) ? static_cast<std::uint16_t>(h + 1) : h;
    if (float_to_half(mid) != even) FAIL("tie above half " << h);
    if (float_to_half(std::nextafter(mid, 0.0f)) != h) FAIL("below the midpoint above half " << h);
    if (float_to_half(std::nextafter(mid, kInf)) != h + 1) FAIL("above the midpoint above half " << h);
    if (float_to_half(-mid) != (even | 0x8000)) FAIL("negative tie above half " << h);
  }
  CHECK(float_to_half(65519.996f) == 0x7BFF);
  CHECK(float_to_half(65520.0f) == 0x7C00);  // the tie between 65504 and 65536 goes to "even" inf
  CHECK(float_to_half(kInf) == 0x7C00);
  CHECK(float_to_half(-kInf) == 0xFC00);
  CHECK(float_to_half(0x1p-25f) == 0);  // a tie with 0
  CHECK(float_to_half(std::nextafter(0x1p-25f, 1.0f)) == 1);
  CHECK(float_to_half(1e-10f) == 0);
  CHECK((float_to_half(kNaN) & 0x7E00) == 0x7E00);
  CHECK(half_to_float(1) == 0x1p-24f);
  CHECK(half_to_float(0x7BFF) == 65504.0f);
  CHECK(half_to_float(0x7C00) == kInf);
  CHECK(std::isnan(half_to_float(0x7E00)));
  CHECK(std::isnan(half_to_float(0x7C01)));
}

TEST_CASE("the F16C and scalar fp16 kernels give identical bytes", "[unit][avg]") {
  using detail::Fp16Mode;
  if (!detail::cpu_has_f16c()) test::skip_test("this CPU has no F16C: only the scalar fp16 kernels are in use");
  // Inputs: random bit patterns (NaNs with payloads, infinities, float subnormals), every tie between
  // neighbouring halves and the floats on either side of it, the overflow threshold, half subnormals.
  std::vector<float> x;
  std::mt19937 rng(2024);
  for (int i = 0; i < 200000; ++i) x.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(rng())));
  for (std::uint32_t h = 0; h < 0x7C00; ++h) {
    const double a = detail::half_to_float(static_cast<std::uint16_t>(h));
    const double b = detail::half_to_float(static_cast<std::uint16_t>(h + 1));
    const float mid = static_cast<float>((a + b) / 2);
    for (float v : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, kInf), static_cast<float>(a)}) {
      x.push_back(v);
      x.push_back(-v);
    }
  }
  for (float v = 65000.0f; v < 66000.0f; v += 0.5f) x.push_back(v);
  std::uniform_real_distribution<float> tiny(-1e-4f, 1e-4f);
  for (int i = 0; i < 20000; ++i) x.push_back(tiny(rng));
  std::shuffle(x.begin(), x.end(), rng);

  struct Setting {
    Fp16Mode mode;
    float mean, scale;
  };
  for (Setting s : {Setting{Fp16Mode::kRaw, 0, 1}, Setting{Fp16Mode::kClamped, 0, 1},
                    Setting{Fp16Mode::kScaled, 0.37f, 2.5e-3f}, Setting{Fp16Mode::kScaled, -3.0f, 1e3f}}) {
    INFO("mode " << static_cast<int>(s.mode) << " mean " << s.mean << " scale " << s.scale);
    for (std::size_t n : {x.size(), x.size() - 5, std::size_t{7}, std::size_t{1}, std::size_t{0}}) {
      std::span<const float> in(x.data() + (x.size() - n), n);  // ragged starts and tails
      Bytes scalar(2 * n + 1), f16c(2 * n + 1);
      detail::to_fp16_scalar(s.mode, s.mean, s.scale, in, scalar.data() + 1);  // unaligned output
      detail::to_fp16_f16c(s.mode, s.mean, s.scale, in, f16c.data() + 1);
      CHECK(scalar == f16c);
    }
  }
  // Decoding: all 65536 halves, raw and scaled, including NaN payloads (compared as bits).
  Bytes halves(2 * 0x10000 + 1);
  for (std::uint32_t h = 0; h < 0x10000; ++h) {
    halves[1 + 2 * h] = static_cast<std::uint8_t>(h);
    halves[2 + 2 * h] = static_cast<std::uint8_t>(h >> 8);
  }
  for (Setting s : {Setting{Fp16Mode::kClamped, 0, 1}, Setting{Fp16Mode::kScaled, 0.37f, 2.5e-3f}}) {
    for (std::size_t n : {std::size_t{0x10000}, std::size_t{0x10000 - 3}, std::size_t{5}}) {
      std::vector<float> scalar(n), f16c(n);
      detail::from_fp16_scalar(s.mode, s.mean, s.scale, halves.data() + 1, scalar);
      detail::from_fp16_f16c(s.mode, s.mean, s.scale, halves.data() + 1, f16c);
      std::size_t mismatches = 0;
      for (std::size_t i = 0; i < n; ++i) mismatches += bits(scalar[i]) != bits(f16c[i]);
      CHECK(mismatches == 0);
    }
  }
  // The public codec takes the F16C path here and equals the scalar reference.
  std::vector<float> part(x.begin(), x.begin() + 1001);
  Bytes reference(2 * part.size());
  detail::to_fp16_scalar(Fp16Mode::kClamped, 0, 1, part, reference.data());
  CHECK(encoded(Codec::kFloat16, part) == reference);
}

TEST_CASE("native and portable kernels write and read identical bytes", "[unit][avg]") {
  using detail::Kernels;
  std::mt19937 rng(99);
  std::vector<std::vector<float>> parts;
  for (Shape shape : {Shape::kNormal, Shape::kUniform, Shape::kHeavyTailed, Shape::kWideMagnitudes})
    for (std::size_t n : {1, 7, 8, 15, 16, 63, 64, 65, 255, 256, 257, 1000, 4099})
      parts.push_back(sample(shape, n, static_cast<std::uint32_t>(rng())));
  // Codes exactly halfway between two levels (ties go to even on both paths), zeros of both signs,
  // NaN/inf mixed in, and subnormal and near-FLT_MAX blocks.
  std::vector<float> ties;
  for (int k = -600; k <= 600; ++k) ties.push_back(static_cast<float>(k) * 0.5f);
  parts.push_back(ties);
  std::vector<float> zeros = {0.0f, -0.0f, -0.0f, 0.0f, 1.0f, -0.0f};
  parts.push_back(zeros);
  std::vector<float> mixed = sample(Shape::kNormal, 700, 4);
  mixed[0] = kNaN, mixed[9] = kInf, mixed[300] = -kInf, mixed[699] = kNaN;
  parts.push_back(mixed);
  std::vector<float> tiny = sample(Shape::kUniform, 600, 5);
  for (float& v : tiny) v *= 1e-39f;
  parts.push_back(tiny);
  std::vector<float> huge = sample(Shape::kUniform, 600, 6);
  for (float& v : huge) v *= 4.8e37f;
  parts.push_back(huge);
  for (Codec codec : kAllCodecs) {
    for (const auto& part : parts) {
      INFO(codec_name(codec) << " n=" << part.size());
      Bytes native(encoded_bytes(codec, part.size())), portable(native.size());
      detail::encode_with(Kernels::kNative, codec, part, native);
      detail::encode_with(Kernels::kPortable, codec, part, portable);
      REQUIRE(native == portable);
      std::vector<float> a(part.size()), b(part.size());
      REQUIRE(detail::decode_with(Kernels::kNative, codec, native, a).is_ok());
      REQUIRE(detail::decode_with(Kernels::kPortable, codec, native, b).is_ok());
      std::size_t mismatches = 0;
      for (std::size_t i = 0; i < a.size(); ++i) mismatches += bits(a[i]) != bits(b[i]);
      CHECK(mismatches == 0);
    }
  }
  // Malformed input is refused alike (the −128 check has its own SIMD path).
  Bytes block = encoded(Codec::kBlockwise8Bit, parts[0]);
  block.back() = 0x80;
  std::vector<float> out(parts[0].size());
  CHECK(detail::decode_with(Kernels::kNative, Codec::kBlockwise8Bit, block, out).code() == Code::kMalformed);
  CHECK(detail::decode_with(Kernels::kPortable, Codec::kBlockwise8Bit, block, out).code() ==
        Code::kMalformed);
}

TEST_CASE("the codec policy picks by tensor size", "[unit][avg]") {
  CodecPolicy defaults;
  CHECK_FALSE(defaults.adaptive);
  CHECK(defaults.for_tensor(1 << 20) == Codec::kNone);
  CHECK(defaults.name() == "none");

  auto adaptive = CodecPolicy::parse("adaptive");
  REQUIRE(adaptive.is_ok());
  CHECK(adaptive->adaptive);
  CHECK(adaptive->name() == "adaptive");
  CHECK(adaptive->for_tensor(0) == Codec::kFloat16);
  CHECK(adaptive->for_tensor(768) == Codec::kFloat16);
  CHECK(adaptive->for_tensor((1 << 16) - 1) == Codec::kFloat16);
  CHECK(adaptive->for_tensor(1 << 16) == Codec::kBlockwise8Bit);
  CHECK(adaptive->for_tensor(std::size_t{1} << 30) == Codec::kBlockwise8Bit);

  CodecPolicy custom = *adaptive;
  custom.small = Codec::kScaledFloat16;
  custom.large = Codec::kUniform8Bit;
  custom.large_from_elements = 100;
  CHECK(custom.for_tensor(99) == Codec::kScaledFloat16);
  CHECK(custom.for_tensor(100) == Codec::kUniform8Bit);

  for (Codec codec : kAllCodecs) {
    auto fixed = CodecPolicy::parse(codec_name(codec));
    REQUIRE(fixed.is_ok());
    CHECK_FALSE(fixed->adaptive);
    CHECK(fixed->for_tensor(1) == codec);
    CHECK(fixed->for_tensor(std::size_t{1} << 24) == codec);
    CHECK(fixed->name() == codec_name(codec));
  }
  CHECK(CodecPolicy::parse("Adaptive").status().code() == Code::kInvalidArgument);
  CHECK(CodecPolicy::parse("int8").status().code() == Code::kInvalidArgument);
}
