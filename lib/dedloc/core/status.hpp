// Status and Result: expected failures as values.
//
// Every operation that can fail for a reason outside the program's control (a timeout, a dead peer, a
// malformed message, an infeasible program, a bad config) returns a Status or a Result<T>. Codes are
// stable numbers because they also travel on the wire in error replies: append only, never renumber.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace dedloc {

enum class Code : std::uint16_t {
  kOk = 0,
  kInvalidArgument = 1,   // the caller (user, config, CLI) asked for something impossible
  kNotFound = 2,          // a key, file or peer that does not exist
  kTimeout = 3,           // a deadline passed before the answer came
  kUnavailable = 4,       // the peer or service cannot be reached / is shutting down
  kMalformed = 5,         // bytes that do not decode (network input, files)
  kVersionMismatch = 6,   // wrong magic or protocol version
  kTooLarge = 7,          // a frame, collection or request over its limit
  kRefused = 8,           // the peer understood and said no (not a leader, group full, ...)
  kIo = 9,                // filesystem or socket error
  kInternal = 10,         // a bug or an unexpected third-party failure
  kCancelled = 11,        // shut down while waiting
  kInfeasible = 12,       // an optimization problem without a solution
  kUnknownType = 13,      // a message type this peer does not serve
  kUnauthorized = 14,     // a signature, token or owner check failed
};

// A short lowercase name for logs and JSON ("timeout", "malformed", ...).
std::string_view code_name(Code code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // ok
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok() { return {}; }

  bool is_ok() const { return code_ == Code::kOk; }
  explicit operator bool() const { return is_ok(); }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }

  // "timeout: no reply from tcp://1.2.3.4:5 within 2000 ms"
  std::string to_string() const;

  // Prefixes the message with context: Status(kIo, "x").with_context("loading a.yaml") -> "loading a.yaml: x".
  Status with_context(std::string_view context) const;

 private:
  Code code_ = Code::kOk;
  std::string message_;
};

// Shorthands that read well at the call site: return error(Code::kTimeout, "...").
inline Status error(Code code, std::string message) { return {code, std::move(message)}; }

// A value or the Status that explains why there is none. Result<T> is never constructed from an ok Status.
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : data_(std::move(value)) {}                 // NOLINT: implicit by design
  Result(Status status) : data_(std::move(status)) {}          // NOLINT: implicit by design

  bool is_ok() const { return std::holds_alternative<T>(data_); }
  explicit operator bool() const { return is_ok(); }

  // The status: ok() when a value is present.
  Status status() const { return is_ok() ? Status::ok() : std::get<Status>(data_); }

  T& value() & { return std::get<T>(data_); }
  const T& value() const& { return std::get<T>(data_); }
  T&& value() && { return std::get<T>(std::move(data_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> data_;
};

}  // namespace dedloc

// Returns early from the enclosing function when the Status expression fails.
#define DEDLOC_RETURN_IF_ERROR(expr)                  \
  do {                                                \
    ::dedloc::Status dedloc_status_ = (expr);         \
    if (!dedloc_status_.is_ok()) return dedloc_status_; \
  } while (0)
