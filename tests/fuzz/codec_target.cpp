// libFuzzer target: the compressed parts of the all-reduce and of state downloads (avg/codec.hpp), decoded
// from a peer's frame into a part of known size: avg::decode for every codec, with both kernel sets.
//
// Input: a first byte, then the part's bytes.
//   byte & 7          the codec number (5..7 are unknown numbers: must be kMalformed, never a crash)
//   byte & 0x80       set: the element count that fits the byte count (the usual, accepted case);
//                     clear: the count is the next two bytes (little-endian), so most sizes are wrong
// Checks: the native and portable kernels agree (status, and every output bit); an accepted "none" part
// re-encodes to the same bytes; an accepted finite part re-encodes and decodes again within error_bound.
#include <cmath>
#include <vector>

#include "dedloc/avg/codec.hpp"
#include "fuzz/fuzz_target.hpp"

namespace {

using dedloc::avg::Codec;

// The element count whose encoded size is `bytes` (or a near miss when there is none).
std::size_t elements_for(Codec codec, std::size_t bytes) {
  switch (codec) {
    case Codec::kNone: return bytes / 4;
    case Codec::kFloat16: return bytes / 2;
    case Codec::kScaledFloat16: return bytes < 8 ? 0 : (bytes - 8) / 2;
    case Codec::kUniform8Bit: return bytes < 8 ? 0 : bytes - 8;
    case Codec::kBlockwise8Bit: {
      // 4·ceil(n/256) + n = bytes: n is within a few of bytes·256/260.
      const std::size_t guess = bytes * 256 / 260;
      for (std::size_t n = guess > 4 ? guess - 4 : 0; n <= guess + 4; ++n)
        if (dedloc::avg::encoded_bytes(codec, n) == bytes) return n;
      return guess;
    }
  }
  return bytes;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

}  // namespace

DEDLOC_FUZZ_TARGET(codec) {
  using namespace dedloc;
  namespace detail = avg::detail;
  fuzz::Input in(data, size);
  const std::uint8_t first = in.byte();
  const auto codec = static_cast<Codec>(first & 7);
  const bool known = (first & 7) < 5;
  std::size_t elements;
  if (first & 0x80) {
    elements = 0;  // set below, from the part's size
  } else {
    elements = in.u16();
  }
  const ByteSpan part = in.rest();
  if (first & 0x80) elements = known ? elements_for(codec, part.size()) : part.size();

  std::vector<float> native(elements, -1.0f), portable(elements, -2.0f);
  Status a = detail::decode_with(detail::Kernels::kNative, codec, part, native);
  Status b = detail::decode_with(detail::Kernels::kPortable, codec, part, portable);
  DEDLOC_FUZZ_CHECK(a.code() == b.code());
  if (!known) DEDLOC_FUZZ_CHECK(a.code() == Code::kMalformed);
  if (!a.is_ok()) return 0;
  DEDLOC_FUZZ_CHECK(part.size() == avg::encoded_bytes(codec, elements));
  DEDLOC_FUZZ_CHECK(same_bits(native, portable));
  DEDLOC_FUZZ_CHECK(avg::decode(codec, part, portable).is_ok() && same_bits(native, portable));

  Bytes encoded(avg::encoded_bytes(codec, elements));
  avg::encode(codec, native, encoded);
  if (codec == Codec::kNone) DEDLOC_FUZZ_CHECK(encoded == Bytes(part.begin(), part.end()));
  // The documented bound holds for finite parts with max |x| <= 2^126 (codec.hpp).
  bool in_range = true;
  for (float x : native) in_range = in_range && std::isfinite(x) && std::fabs(x) <= 0x1p126f;
  if (!in_range) return 0;
  std::vector<float> again(elements);
  DEDLOC_FUZZ_CHECK(avg::decode(codec, encoded, again).is_ok());
  const double bound = avg::error_bound(codec, native);
  for (std::size_t i = 0; i < elements; ++i) {
    const double err = std::fabs(static_cast<double>(again[i]) - static_cast<double>(native[i]));
    if (!(err <= bound)) {
      std::fprintf(stderr, "codec %d element %zu of %zu: %.9g -> %.9g, error %.9g > bound %.9g\n",
                   static_cast<int>(codec), i, elements, static_cast<double>(native[i]),
                   static_cast<double>(again[i]), err, bound);
    }
    DEDLOC_FUZZ_CHECK(err <= bound);
  }
  return 0;
}
