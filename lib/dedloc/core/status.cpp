#include "dedloc/core/status.hpp"

namespace dedloc {

std::string_view code_name(Code code) {
  switch (code) {
    case Code::kOk: return "ok";
    case Code::kInvalidArgument: return "invalid_argument";
    case Code::kNotFound: return "not_found";
    case Code::kTimeout: return "timeout";
    case Code::kUnavailable: return "unavailable";
    case Code::kMalformed: return "malformed";
    case Code::kVersionMismatch: return "version_mismatch";
    case Code::kTooLarge: return "too_large";
    case Code::kRefused: return "refused";
    case Code::kIo: return "io";
    case Code::kInternal: return "internal";
    case Code::kCancelled: return "cancelled";
    case Code::kInfeasible: return "infeasible";
    case Code::kUnknownType: return "unknown_type";
    case Code::kUnauthorized: return "unauthorized";
  }
  return "unknown_code";
}

std::string Status::to_string() const {
  if (is_ok()) return "ok";
  std::string out(code_name(code_));
  if (!message_.empty()) {
    out += ": ";
    out += message_;
  }
  return out;
}

Status Status::with_context(std::string_view context) const {
  if (is_ok()) return *this;
  return {code_, std::string(context) + ": " + message_};
}

}  // namespace dedloc
