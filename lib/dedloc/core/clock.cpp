#include "dedloc/core/clock.hpp"

namespace dedloc {

double SystemClock::unix_seconds() const {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

const SystemClock& SystemClock::instance() {
  static const SystemClock clock;
  return clock;
}

}  // namespace dedloc
