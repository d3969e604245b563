#include "dedloc/core/log.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <ctime>

namespace dedloc {

Result<LogLevel> parse_log_level(std::string_view name) {
  if (name == "debug") return LogLevel::kDebug;
  if (name == "info") return LogLevel::kInfo;
  if (name == "warning" || name == "warn") return LogLevel::kWarning;
  if (name == "error") return LogLevel::kError;
  if (name == "off") return LogLevel::kOff;
  return error(Code::kInvalidArgument,
               "unknown log level '" + std::string(name) + "' (use debug, info, warning, error or off)");
}

namespace {

char level_letter(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug: return 'D';
    case LogLevel::kInfo: return 'I';
    case LogLevel::kWarning: return 'W';
    case LogLevel::kError: return 'E';
    case LogLevel::kOff: break;
  }
  return '?';
}

std::string utc_timestamp() {
  auto now = std::chrono::system_clock::now();
  auto seconds = std::chrono::system_clock::to_time_t(now);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
                tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(ms));
  return buf;
}

}  // namespace

void Logger::write(LogLevel level, std::string_view component, std::string_view message) {
  if (!enabled(level)) return;
  std::string line = utc_timestamp();
  line += ' ';
  line += level_letter(level);
  line += ' ';
  line += component;
  line += ": ";
  line += message;
  line += '\n';
  // One write per line keeps lines from different threads and processes whole.
  const char* data = line.data();
  size_t left = line.size();
  while (left > 0) {
    ssize_t n = ::write(fd_, data, left);
    if (n <= 0) break;  // nowhere to report a failing stderr
    data += n;
    left -= static_cast<size_t>(n);
  }
}

Logger& Logger::global() {
  static Logger logger([] {
    if (const char* env = std::getenv("DEDLOC_LOG_LEVEL")) {
      if (auto parsed = parse_log_level(env)) return *parsed;
    }
    return LogLevel::kInfo;
  }());
  return logger;
}

}  // namespace dedloc
