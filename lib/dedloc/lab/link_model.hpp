// The lab's links, without any I/O: where each packet between two lab hosts is delayed, queued, dropped,
// and when it arrives. The emulator (emulator.hpp) feeds it the packets it reads from the hosts' TUN
// devices and writes out what comes due; tests drive it with a made-up clock.
//
// A host has one access link, with an upload and a download direction (a home's DSL line, a cloud VM's
// port). A packet from host a to host b crosses a's upload, then the path, then b's download:
//
//   a's upload:    tail drop if the backlog exceeds its queue; lost with a's upload loss; then serialized
//                  at a's upload rate (a token bucket one packet deep: the link sends one packet at a time)
//   the path:      a's upload delay + b's download delay, plus up to the two ends' jitter, never reordering
//                  the packets of one (a, b) path (a later packet never arrives before an earlier one)
//   b's download:  the same as an upload, with b's download rate, queue and loss
//
// So a path's one-way delay is the sum of its two ends' delays, and its rate the lesser of a's upload and
// b's download, shared with everything else that crosses them. That is the whole model: no cross traffic,
// no core congestion, no reordering. Times are the caller's (steady) clock.
#pragma once

#include <cstdint>
#include <optional>
#include <queue>
#include <random>
#include <unordered_map>
#include <vector>

#include "dedloc/core/clock.hpp"

namespace dedloc::lab {

// One direction of a host's access link.
struct LinkDirection {
  Duration delay{0};       // one-way delay this end adds to every path through it
  Duration jitter{0};      // up to this much more, uniformly at random (paths still keep their order)
  double rate = 0;         // bytes per second; 0: unlimited
  double loss = 0;         // probability that a packet is dropped on this direction
  std::uint64_t queue_bytes = 0;  // backlog beyond which packets are dropped; 0: 100 ms of rate (min 256 KiB)
};

struct HostLink {
  LinkDirection up;
  LinkDirection down;
};

enum class Drop : std::uint8_t { kNone, kLoss, kQueue, kLinkDown };

struct LinkCounters {
  std::uint64_t packets_sent = 0, bytes_sent = 0;          // left the host (after its upload)
  std::uint64_t packets_received = 0, bytes_received = 0;  // delivered to the host
  std::uint64_t dropped_loss = 0, dropped_queue = 0, dropped_down = 0;
};

class LinkModel {
 public:
  // What comes out: a packet to deliver now, or one dropped on the way (the caller frees its buffer).
  struct Due {
    std::uint64_t token = 0;
    std::uint32_t to = 0;
    Drop drop = Drop::kNone;
  };

  LinkModel(std::vector<HostLink> hosts, std::uint64_t seed);

  size_t size() const { return hosts_.size(); }
  const HostLink& host(size_t i) const { return hosts_[i]; }
  void set_host(size_t i, const HostLink& link) { hosts_[i] = link; }

  // A link that is down drops everything to and from its host, including what is in flight to it.
  void set_up(size_t i, bool up) { state_[i].link_up = up; }
  bool is_up(size_t i) const { return state_[i].link_up; }

  // A packet of `bytes` bytes from host `from` to host `to` entered the network at `now`. Returns kNone
  // when it was accepted (it will come out of due() later, delivered or dropped), otherwise why it was
  // dropped at once (the caller frees it). `token` is the caller's handle on the packet.
  Drop send(TimePoint now, std::uint32_t from, std::uint32_t to, std::uint32_t bytes, std::uint64_t token);

  // The earliest time something is due, if anything is in flight.
  std::optional<TimePoint> next_due() const;

  // Appends to `out` every packet whose time has come by `now`, in order.
  void take_due(TimePoint now, std::vector<Due>& out);

  const LinkCounters& counters(size_t i) const { return state_[i].counters; }
  size_t in_flight() const { return events_.size(); }

 private:
  struct Serializer {
    TimePoint free_at{};  // when the link finishes sending what it already holds
  };
  struct HostState {
    Serializer upload, download;
    bool link_up = true;
    LinkCounters counters;
  };
  enum class Stage : std::uint8_t { kReachDownload, kDeliver };
  struct Event {
    TimePoint at;
    std::uint64_t seq = 0;
    std::uint64_t token = 0;
    std::uint32_t from = 0, to = 0, bytes = 0;
    Stage stage = Stage::kReachDownload;
    bool operator>(const Event& other) const { return at != other.at ? at > other.at : seq > other.seq; }
  };

  // The serializer's admission: kNone and when the packet has left it, or kQueue / kLoss.
  Drop pass(const LinkDirection& link, Serializer& serializer, TimePoint now, std::uint32_t bytes, TimePoint& left);
  Duration jitter(const LinkDirection& link);

  std::vector<HostLink> hosts_;
  std::vector<HostState> state_;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events_;
  std::unordered_map<std::uint64_t, TimePoint> last_arrival_;  // per (from, to): no reordering
  std::uint64_t seq_ = 0;
  std::mt19937_64 random_;
};

// The queue a direction gets when its queue_bytes is 0.
std::uint64_t default_queue_bytes(double rate);

}  // namespace dedloc::lab
