// libtorch's exceptions at the edge of dedloc's code.
//
// libtorch reports failures by throwing: c10::Error for a bad shape, a device error or a failed kernel,
// c10::OutOfMemoryError (a c10::Error) when a device runs out of memory. The trainer calls into a task and
// an optimizer (and a task's prefetch thread calls its batch producer); whatever they throw is caught there
// and becomes a Status with one line that says what was being done, so that dedloc-train ends with an
// error line and a documented exit code (docs/operators.md) instead of std::terminate, and leaves the
// swarm cleanly (its records withdrawn).
#pragma once

#include <exception>
#include <string_view>
#include <type_traits>
#include <utility>

#include "dedloc/core/status.hpp"

namespace dedloc::train {

// The Status for an exception caught while `doing` (e.g. "computing a micro-batch"):
//   c10::OutOfMemoryError  kTooLarge: "out of memory on the device while <doing>: <libtorch's message>; a
//                          smaller --batch-size needs less"
//   c10::Error             kInternal: "libtorch failed while <doing>: <message without the backtrace>"
//   std::exception         kInternal: "<doing> failed: <what()>"
//   anything else          kInternal: "<doing> failed: an unknown exception"
// The message is one line (libtorch's newlines become "; ").
Status status_from_exception(std::string_view doing, std::exception_ptr exception);

// Runs `work` (returning void, Status or Result<T>) and turns whatever it throws into status_from_exception.
template <class Work>
auto guard_torch(std::string_view doing, Work&& work) {
  using Returned = std::invoke_result_t<Work>;
  if constexpr (std::is_void_v<Returned>) {
    try {
      std::forward<Work>(work)();
      return Status();
    } catch (...) {
      return status_from_exception(doing, std::current_exception());
    }
  } else {
    try {
      return Returned(std::forward<Work>(work)());
    } catch (...) {
      return Returned(status_from_exception(doing, std::current_exception()));
    }
  }
}

}  // namespace dedloc::train
