#include "dedloc/avg/in_flight_window.hpp"

#include <algorithm>
#include <cmath>

namespace dedloc::avg {

namespace {
// How much more than the measured bandwidth-delay product to keep in flight (BBR's cwnd gain).
constexpr double kGain = 2.0;
// Parts that come back faster than this never grow the window. On loopback or a LAN the rate measured is
// the CPU's, not a link's, and a larger window there only costs CPU (4 peers, 64 MiB on loopback: 1.4x
// the CPU per round); on a busy machine loopback parts take well over 10 ms. A WAN part takes longer: at
// 20 ms round trip and 100 Mbit/s, a 512 KiB part and its delta alone spend 80 ms on the links.
constexpr Duration kShortPath = std::chrono::milliseconds(30);
}  // namespace

InFlightWindow::InFlightWindow(size_t floor, size_t ceiling, size_t start)
    : floor_(std::max<size_t>(floor, 1)), ceiling_(std::max(ceiling, std::max<size_t>(floor, 1))),
      start_(std::clamp(start, floor_, ceiling_)) {}

void InFlightWindow::on_delivered(std::uint64_t bytes, Duration latency, std::uint64_t ticket) {
  delivered_ += bytes;
  if (latency <= Duration::zero()) return;
  if (min_latency_ == Duration::zero() || latency < min_latency_) min_latency_ = latency;
  const double seconds = std::chrono::duration<double>(latency).count();
  max_rate_ = std::max(max_rate_, static_cast<double>(delivered_ - ticket) / seconds);
}

size_t InFlightWindow::per_reducer(size_t reducers, std::uint64_t part_bytes) const {
  if (min_latency_ == Duration::zero() || reducers == 0 || part_bytes == 0) return start_;
  if (min_latency_ < kShortPath) return floor_;
  const double target = kGain * max_rate_ * std::chrono::duration<double>(min_latency_).count();
  const double parts = std::ceil(target / (static_cast<double>(reducers) * static_cast<double>(part_bytes)));
  if (!(parts < static_cast<double>(ceiling_))) return ceiling_;
  return std::clamp(static_cast<size_t>(parts), floor_, ceiling_);
}

}  // namespace dedloc::avg
