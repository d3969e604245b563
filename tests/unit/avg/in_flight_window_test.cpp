// The all-reduce's in-flight window, sized from the delivery rate and part round trip it measures.
#include <catch2/catch.hpp>

#include "dedloc/avg/in_flight_window.hpp"

using namespace dedloc;
using dedloc::avg::InFlightWindow;
using std::chrono::milliseconds;

namespace {
constexpr std::uint64_t kPart = 512 * 1024;

// Parts delivered back to back, each `latency` after it was sent, `in_flight` at a time: the delivery rate
// is in_flight × part / latency.
void deliver(InFlightWindow& window, int parts, int in_flight, Duration latency) {
  std::vector<std::uint64_t> tickets;
  for (int i = 0; i < in_flight; ++i) tickets.push_back(window.ticket());
  for (int i = 0; i < parts; ++i) {
    window.on_delivered(kPart, latency, tickets[static_cast<size_t>(i % in_flight)]);
    tickets[static_cast<size_t>(i % in_flight)] = window.ticket();
  }
}
}  // namespace

TEST_CASE("In-flight window: starts where told, within its bounds", "[avg][window]") {
  CHECK(InFlightWindow(2, 32, 0).per_reducer(3, kPart) == 2);
  CHECK(InFlightWindow(2, 32, 9).per_reducer(3, kPart) == 9);
  CHECK(InFlightWindow(2, 32, 99).per_reducer(3, kPart) == 32);
  CHECK(InFlightWindow(4, 2, 0).per_reducer(3, kPart) == 4);  // a ceiling below the floor is the floor
}

TEST_CASE("In-flight window: a short path keeps the floor", "[avg][window]") {
  // Loopback: parts back in 3 ms at about 1 GB/s. The product would be 4 parts per reducer, but the rate
  // is the CPU's: growing there costs CPU and gains nothing.
  InFlightWindow window(2, 32, 2);
  deliver(window, 100, 6, milliseconds(3));
  CHECK(window.min_latency() == milliseconds(3));
  CHECK(window.per_reducer(3, kPart) == 2);
}

TEST_CASE("In-flight window: a long fat path grows it to twice the bandwidth-delay product", "[avg][window]") {
  // 6 parts in flight, back after 200 ms: 15.7 MB/s measured; 2 × 15.7 MB/s × 0.2 s over 3 reducers of
  // 512 KiB parts is 4 parts each.
  InFlightWindow window(2, 32, 2);
  deliver(window, 60, 6, milliseconds(200));
  CHECK(window.max_rate() == Approx(6.0 * kPart / 0.2));
  CHECK(window.per_reducer(3, kPart) == 4);
  // As more goes in flight and comes back as fast (the link was not yet full), it keeps growing.
  deliver(window, 60, 12, milliseconds(200));
  CHECK(window.per_reducer(3, kPart) == 8);
  // It never passes its ceiling.
  deliver(window, 200, 100, milliseconds(200));
  CHECK(window.per_reducer(3, kPart) == 32);
}
