// The lab's emulator: one thread that owns the TUN end of every lab host (lab_network.hpp), reads each
// packet a host sends, passes it through the link model (link_model.hpp: upload, path delay, download;
// rate, queue, loss, jitter) and the NAT filter of hosts behind NAT (nat_filter.hpp), and writes it into
// the destination host's TUN when it comes due. In user space because this kernel has no netem qdisc,
// in the spirit of mahimahi's delay/link/loss shells.
//
// Timing: packets come due on a timerfd armed for the model's next event (timer slack 1 µs), so the
// delays hold to a few tens of microseconds at the rates the lab runs. With the lab's 65000-byte MTU a
// 1 Gbit/s stream is about two thousand packets a second each way; the emulator's CPU per Gbit/s is
// measured by bench/lab/selfcheck.sh.
#pragma once

#include <time.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "dedloc/core/status.hpp"
#include "dedloc/lab/lab_network.hpp"
#include "dedloc/lab/link_model.hpp"
#include "dedloc/lab/nat_filter.hpp"

namespace dedloc::lab {

struct EmulatorStats {
  std::vector<LinkCounters> hosts;
  std::uint64_t packets = 0, bytes = 0;  // delivered
  std::uint64_t dropped_nat = 0;         // to a host behind NAT, not an answer to a flow it opened
  std::uint64_t dropped_unroutable = 0;  // not IPv4, or not to a lab address
  std::uint64_t dropped_overflow = 0;    // the emulator's own packet store was full, or a TUN refused a write
  double cpu_seconds = 0;                // the emulator thread's, since run() began
  double wall_seconds = 0;
};

class Emulator {
 public:
  // `links[i]` and `behind_nat[i]` describe host i of `network` (which must outlive the emulator).
  Emulator(const LabNetwork& network, std::vector<HostLink> links, std::vector<bool> behind_nat, std::uint64_t seed);
  ~Emulator();
  Emulator(const Emulator&) = delete;
  Emulator& operator=(const Emulator&) = delete;

  // Forwards packets until stop(). kUnavailable if epoll/timerfd cannot be set up.
  Status run();
  // From any thread (or a signal handler): run() returns within a few milliseconds.
  void stop();

  // From any thread while run() runs: a host's link goes down (everything to and from it, in flight
  // included, is dropped) or comes back.
  void set_link_up(size_t host, bool up);
  // A host's link parameters, changed on the fly.
  void set_link(size_t host, const HostLink& link);

  // A snapshot, from any thread.
  EmulatorStats stats() const;

 private:
  struct Packet {
    std::vector<std::uint8_t> bytes;
    std::uint32_t size = 0;
  };
  void read_from(size_t host, TimePoint now);
  void deliver_due(TimePoint now);
  std::uint64_t store(const std::uint8_t* data, size_t size);
  void release(std::uint64_t token) { free_.push_back(token); }

  const LabNetwork& network_;
  std::vector<bool> behind_nat_;
  int wake_fd_ = -1;
  std::atomic<bool> stopping_{false};

  mutable std::mutex mutex_;  // the loop holds it while it works; the setters and stats() take it briefly
  LinkModel model_;
  NatFilter nat_;
  std::vector<Packet> packets_;
  std::vector<std::uint64_t> free_;
  std::vector<LinkModel::Due> due_;
  std::vector<std::uint8_t> scratch_;
  EmulatorStats counters_;  // the emulator's own counters (hosts and times filled in by stats())
  TimePoint started_{};
  // The loop thread's CPU clock, read by stats() from any thread while the loop runs; what it had used
  // when the loop ended.
  std::optional<clockid_t> cpu_clock_;
  double cpu_at_start_ = 0;
  double cpu_at_end_ = 0;
};

// An emulator forwarding on a thread of its own for the life of this object, stopped and joined when it
// goes: how the lab's users run one.
class RunningEmulator {
 public:
  RunningEmulator(const LabNetwork& network, std::vector<HostLink> links, std::vector<bool> behind_nat,
                  std::uint64_t seed);
  ~RunningEmulator();
  RunningEmulator(const RunningEmulator&) = delete;
  RunningEmulator& operator=(const RunningEmulator&) = delete;

  Emulator& emulator() { return emulator_; }
  // The loop's error if it ended on its own (it could not set up epoll or a timer); ok while it runs.
  Status failure() const;

 private:
  Emulator emulator_;
  mutable std::mutex mutex_;
  Status failure_;
  std::thread thread_;
};

}  // namespace dedloc::lab
