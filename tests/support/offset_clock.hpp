// A wall clock set wrong by a fixed offset (a machine without NTP); steady time is the real one.
#pragma once

#include "dedloc/core/clock.hpp"

namespace dedloc::test {

class OffsetClock final : public Clock {
 public:
  explicit OffsetClock(double offset_seconds) : offset_(offset_seconds) {}
  TimePoint now() const override { return SystemClock::instance().now(); }
  double unix_seconds() const override { return SystemClock::instance().unix_seconds() + offset_; }

 private:
  double offset_;
};

}  // namespace dedloc::test
