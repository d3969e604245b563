#include "dedloc/train/torch_errors.hpp"

#include <string>

#include <c10/util/Exception.h>

namespace dedloc::train {

namespace {

// libtorch's messages may span lines (context it added on the way up): one line for the error line.
std::string one_line(std::string_view text) {
  std::string out;
  bool pending_break = false;
  for (char c : text) {
    if (c == '\n' || c == '\r') {
      pending_break = !out.empty();
      continue;
    }
    if (pending_break) out += "; ";
    pending_break = false;
    out += c;
  }
  return out;
}

}  // namespace

Status status_from_exception(std::string_view doing, std::exception_ptr exception) {
  const std::string what_doing(doing);
  try {
    std::rethrow_exception(exception);
  } catch (const c10::OutOfMemoryError& e) {
    return error(Code::kTooLarge, "out of memory on the device while " + what_doing + ": " +
                                      one_line(e.what_without_backtrace()) + "; a smaller --batch-size needs less");
  } catch (const c10::Error& e) {
    return error(Code::kInternal, "libtorch failed while " + what_doing + ": " + one_line(e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return error(Code::kInternal, what_doing + " failed: " + one_line(e.what()));
  } catch (...) {
    return error(Code::kInternal, what_doing + " failed: an unknown exception");
  }
}

}  // namespace dedloc::train
