// Skipping a test that needs what this machine lacks (root and namespaces, a CPU feature): loudly, never as a
// silent pass. Catch2 v2 (Debian's) has no SKIP, so the test process prints "SKIPPED: <reason>" and exits
// with 77, which ctest reports as skipped for binaries registered with SKIP_CODE 77 (tests/CMakeLists.txt).
// ctest runs each test case in its own process; a binary run by hand with all its cases stops there.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

namespace dedloc::test {

inline constexpr int kSkipExitCode = 77;

[[noreturn]] inline void skip_test(const std::string& reason) {
  std::fprintf(stderr, "SKIPPED: %s\n", reason.c_str());
  std::fflush(stderr);
  std::exit(kSkipExitCode);
}

}  // namespace dedloc::test
