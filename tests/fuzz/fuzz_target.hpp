// What every fuzz target shares: its entry point, a reader for structured inputs, and a check.
//
// Each target defines its entry point with DEDLOC_FUZZ_TARGET(name) { ... }, which declares
//   extern "C" int dedloc_fuzz_<name>(const std::uint8_t* data, std::size_t size);
// so that several targets link into one ordinary test binary (replay_test.cpp replays each corpus there).
// Only the libFuzzer binary of a target (compiled with DEDLOC_LIBFUZZER, tests/CMakeLists.txt) also gets
// LLVMFuzzerTestOneInput, forwarding to it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>

#ifdef DEDLOC_LIBFUZZER
#define DEDLOC_FUZZ_TARGET(name)                                                                \
  extern "C" int dedloc_fuzz_##name(const std::uint8_t* data, std::size_t size);              \
  extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {         \
    return dedloc_fuzz_##name(data, size);                                                    \
  }                                                                                           \
  extern "C" int dedloc_fuzz_##name(const std::uint8_t* data, std::size_t size)
#else
#define DEDLOC_FUZZ_TARGET(name) extern "C" int dedloc_fuzz_##name(const std::uint8_t* data, std::size_t size)
#endif

// A property of what a decoder accepted that must hold: a failure aborts (a crash for libFuzzer, which keeps
// the input; a failed test when replayed), printing what failed.
#define DEDLOC_FUZZ_CHECK(cond)                                                                  \
  do {                                                                                           \
    if (!(cond)) {                                                                               \
      std::fprintf(stderr, "%s:%d: fuzz check failed: %s\n", __FILE__, __LINE__, #cond);       \
      std::abort();                                                                              \
    }                                                                                            \
  } while (0)

namespace dedloc::fuzz {

// Takes a structured input apart from the front; past the end everything is zero or empty, so any input is
// some valid structure.
class Input {
 public:
  Input(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}

  std::uint8_t byte() { return at_ < size_ ? data_[at_++] : 0; }
  std::uint16_t u16() { return static_cast<std::uint16_t>(byte() | (byte() << 8)); }
  std::uint64_t u64() {
    std::uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= std::uint64_t{byte()} << (8 * i);
    return v;
  }
  double f64() {
    std::uint64_t bits = u64();
    double v;
    std::memcpy(&v, &bits, sizeof v);
    return v;
  }
  // Up to n bytes.
  std::span<const std::uint8_t> bytes(std::size_t n) {
    n = std::min(n, size_ - at_);
    std::span<const std::uint8_t> out(data_ + at_, n);
    at_ += n;
    return out;
  }
  // A length byte, then that many bytes (fewer at the end).
  std::span<const std::uint8_t> prefixed() { return bytes(byte()); }
  std::span<const std::uint8_t> rest() { return bytes(size_ - at_); }
  bool empty() const { return at_ >= size_; }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t at_ = 0;
};

}  // namespace dedloc::fuzz
