// Time, injected: state machines (routing, matchmaking, progress) take a Clock so tests can drive them
// without sleeping.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

namespace dedloc {

using Duration = std::chrono::nanoseconds;
using TimePoint = std::chrono::steady_clock::time_point;  // for deadlines: never jumps

class Clock {
 public:
  virtual ~Clock() = default;
  // Monotonic time for deadlines and intervals.
  virtual TimePoint now() const = 0;
  // Wall-clock time in seconds since the Unix epoch, for expirations shared between machines.
  virtual double unix_seconds() const = 0;
};

// The real clocks of this machine.
class SystemClock final : public Clock {
 public:
  TimePoint now() const override { return std::chrono::steady_clock::now(); }
  double unix_seconds() const override;
  static const SystemClock& instance();
};

// A clock that moves only when told to (tests, simulations).
class ManualClock final : public Clock {
 public:
  explicit ManualClock(double unix_start = 1.7e9) : unix_start_(unix_start) {}
  TimePoint now() const override { return TimePoint{} + elapsed_; }
  double unix_seconds() const override {
    return unix_start_ + std::chrono::duration<double>(elapsed_).count();
  }
  void advance(Duration d) { elapsed_ += d; }

 private:
  double unix_start_;
  Duration elapsed_{0};
};

// A point in time after which waiting is pointless. Every blocking call in dedloc takes one.
struct Deadline {
  TimePoint at;

  static Deadline after(Duration d, const Clock& clock = SystemClock::instance()) {
    return {clock.now() + d};
  }
  bool passed(const Clock& clock = SystemClock::instance()) const { return clock.now() >= at; }
  // Time left, never negative.
  Duration remaining(const Clock& clock = SystemClock::instance()) const {
    auto left = at - clock.now();
    return left > Duration::zero() ? std::chrono::duration_cast<Duration>(left) : Duration::zero();
  }
};

// Seconds as flags and YAML give them (fractions allowed) to a Duration.
inline Duration from_seconds(double seconds) {
  return std::chrono::duration_cast<Duration>(std::chrono::duration<double>(seconds));
}

inline std::int64_t to_ms(Duration d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}

// Sleeps `duration` in slices of at most 50 ms, ending early once `should_stop` says so: a loop's pause
// that a shutdown request cuts short. True when it ended because of `should_stop`.
bool sleep_unless(Duration duration, const std::function<bool()>& should_stop);

// Unix seconds as an ISO 8601 UTC time, "2026-11-24T02:01:02Z" (whole seconds), for logs, metadata and CLIs.
std::string format_utc(double unix_seconds);

}  // namespace dedloc
