// Logging: one logger, injected, writing to stderr (stdout is for data). Lines carry a level and a
// component tag: "2026-11-23T10:00:00.123Z W rpc: dropped a malformed request from 3f2a...".
//
// Thread-safety: Logger is safe to use from any thread; each line is written with one write(2).
#pragma once

#include <atomic>
#include <mutex>
#include <sstream>
#include <string>
#include <string_view>

#include "dedloc/core/status.hpp"

namespace dedloc {

enum class LogLevel : int { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3, kOff = 4 };

// "debug" | "info" | "warning" (or "warn") | "error" | "off".
Result<LogLevel> parse_log_level(std::string_view name);

class Logger {
 public:
  explicit Logger(LogLevel level = LogLevel::kInfo, int fd = 2) : level_(level), fd_(fd) {}

  void set_level(LogLevel level) { level_.store(level, std::memory_order_relaxed); }
  LogLevel level() const { return level_.load(std::memory_order_relaxed); }
  bool enabled(LogLevel level) const { return level >= this->level(); }

  void write(LogLevel level, std::string_view component, std::string_view message);

  // The process-wide default, used when no logger is injected. Level from DEDLOC_LOG_LEVEL if set.
  static Logger& global();

  // A line under construction: logger.info("rpc") << "bound " << endpoint; written when it goes out of scope.
  class Line {
   public:
    Line(Logger* logger, LogLevel level, std::string_view component)
        : logger_(logger && logger->enabled(level) ? logger : nullptr), level_(level), component_(component) {}
    Line(Line&&) = delete;
    ~Line() {
      if (logger_) logger_->write(level_, component_, out_.str());
    }
    template <class T>
    Line& operator<<(const T& value) {
      if (logger_) out_ << value;
      return *this;
    }

   private:
    Logger* logger_;
    LogLevel level_;
    std::string_view component_;
    std::ostringstream out_;
  };

  Line debug(std::string_view component) { return {this, LogLevel::kDebug, component}; }
  Line info(std::string_view component) { return {this, LogLevel::kInfo, component}; }
  Line warn(std::string_view component) { return {this, LogLevel::kWarning, component}; }
  Line error(std::string_view component) { return {this, LogLevel::kError, component}; }

 private:
  std::atomic<LogLevel> level_;
  int fd_;
};

}  // namespace dedloc
