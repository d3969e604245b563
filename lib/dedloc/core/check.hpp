// DEDLOC_CHECK: the one way to state a programmer error (a broken invariant, a contract a caller broke).
//
// Expected failures (a timeout, a dead peer, malformed bytes from the network or a file, a bad config) are
// Status values (core/status.hpp) and never reach a check: a check on network input would let any peer stop
// the process. A failed check prints "FILE:LINE: check failed: CONDITION (MESSAGE)" to stderr and aborts, in
// release builds too: continuing with a broken invariant would only move the damage somewhere harder to find.
//
//   DEDLOC_CHECK(out.size() == encoded_bytes(codec, in.size()));
//   DEDLOC_CHECK(!name.empty(), "a metric family needs a name");
//   DEDLOC_CHECK(is_name(name), "not a Prometheus metric name: " + std::string(name));
//
// The message is evaluated only when the check fails.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace dedloc::detail {

[[noreturn, gnu::cold]] inline void check_failed(const char* file, int line, const char* condition,
                                                 std::string_view message = {}) {
  if (message.empty()) {
    std::fprintf(stderr, "%s:%d: check failed: %s\n", file, line, condition);
  } else {
    std::fprintf(stderr, "%s:%d: check failed: %s (%.*s)\n", file, line, condition, static_cast<int>(message.size()),
                 message.data());
  }
  std::fflush(stderr);
  std::abort();
}

}  // namespace dedloc::detail

#define DEDLOC_CHECK(condition, ...)                                                             \
  do {                                                                                           \
    if (!(condition)) [[unlikely]] {                                                             \
      ::dedloc::detail::check_failed(__FILE__, __LINE__, #condition __VA_OPT__(, ) __VA_ARGS__); \
    }                                                                                            \
  } while (0)
