// Tests of DEDLOC_CHECK (core/check.hpp): a failed check aborts the process, so the code under test runs in
// a forked child and the test reads how it ended.
#pragma once

#include <functional>
#include <string>

namespace dedloc::test {

struct ChildEnd {
  bool aborted = false;  // ended by SIGABRT (a failed check) rather than by returning
  std::string stderr_text;
};

// Runs `body` in a forked child (single-threaded code only: the child has just the calling thread) and
// returns whether it aborted and what it wrote to stderr. A child that returns exits with 0.
ChildEnd run_in_child(const std::function<void()>& body);

// True when `body` fails a DEDLOC_CHECK whose line contains `message`.
bool fails_check(const std::function<void()>& body, const std::string& message);

}  // namespace dedloc::test
