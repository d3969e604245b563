#include "dedloc/core/clock.hpp"

#include <algorithm>
#include <ctime>
#include <thread>

namespace dedloc {

double SystemClock::unix_seconds() const {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

const SystemClock& SystemClock::instance() {
  static const SystemClock clock;
  return clock;
}

std::string format_utc(double unix_seconds) {
  std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm utc{};
  gmtime_r(&t, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

bool sleep_unless(Duration duration, const std::function<bool()>& should_stop) {
  const Deadline deadline = Deadline::after(duration);
  while (!deadline.passed()) {
    if (should_stop()) return true;
    std::this_thread::sleep_for(std::min<Duration>(deadline.remaining(), std::chrono::milliseconds(50)));
  }
  return should_stop();
}

}  // namespace dedloc
