#include "dedloc/lab/link_model.hpp"

#include <algorithm>

namespace dedloc::lab {

std::uint64_t default_queue_bytes(double rate) {
  // A router buffer of about 100 ms, the common rule of thumb for access links; at least a few of the
  // lab's largest packets.
  return std::max<std::uint64_t>(256 * 1024, static_cast<std::uint64_t>(rate * 0.1));
}

LinkModel::LinkModel(std::vector<HostLink> hosts, std::uint64_t seed)
    : hosts_(std::move(hosts)), state_(hosts_.size()), random_(seed) {}

Duration LinkModel::jitter(const LinkDirection& link) {
  if (link.jitter <= Duration::zero()) return Duration::zero();
  std::uniform_int_distribution<std::int64_t> pick(0, link.jitter.count());
  return Duration(pick(random_));
}

Drop LinkModel::pass(const LinkDirection& link, Serializer& serializer, TimePoint now, std::uint32_t bytes,
                     TimePoint& left) {
  if (link.rate > 0) {
    // The backlog is what the link has accepted and not yet sent: (free_at - now) at its rate.
    const double backlog_seconds = std::max(0.0, std::chrono::duration<double>(serializer.free_at - now).count());
    const double backlog = backlog_seconds * link.rate;
    const double queue = static_cast<double>(link.queue_bytes ? link.queue_bytes : default_queue_bytes(link.rate));
    if (backlog + bytes > queue && backlog > 0) return Drop::kQueue;
  }
  if (link.loss > 0 && std::uniform_real_distribution<double>(0, 1)(random_) < link.loss) return Drop::kLoss;
  if (link.rate <= 0) {
    left = now;
    return Drop::kNone;
  }
  const TimePoint start = std::max(now, serializer.free_at);
  left = start + std::chrono::duration_cast<Duration>(std::chrono::duration<double>(bytes / link.rate));
  serializer.free_at = left;
  return Drop::kNone;
}

Drop LinkModel::send(TimePoint now, std::uint32_t from, std::uint32_t to, std::uint32_t bytes, std::uint64_t token) {
  HostState& source = state_[from];
  if (!source.link_up || !state_[to].link_up) {
    ++source.counters.dropped_down;
    return Drop::kLinkDown;
  }
  TimePoint left;
  const Drop drop = pass(hosts_[from].up, source.upload, now, bytes, left);
  if (drop == Drop::kLoss) ++source.counters.dropped_loss;
  if (drop == Drop::kQueue) ++source.counters.dropped_queue;
  if (drop != Drop::kNone) return drop;
  ++source.counters.packets_sent;
  source.counters.bytes_sent += bytes;

  TimePoint arrival = left + hosts_[from].up.delay + hosts_[to].down.delay + jitter(hosts_[from].up) +
                      jitter(hosts_[to].down);
  TimePoint& last = last_arrival_[(static_cast<std::uint64_t>(from) << 32) | to];
  arrival = std::max(arrival, last);
  last = arrival;
  events_.push(Event{arrival, seq_++, token, from, to, bytes, Stage::kReachDownload});
  return Drop::kNone;
}

std::optional<TimePoint> LinkModel::next_due() const {
  if (events_.empty()) return std::nullopt;
  return events_.top().at;
}

void LinkModel::take_due(TimePoint now, std::vector<Due>& out) {
  while (!events_.empty() && events_.top().at <= now) {
    Event event = events_.top();
    events_.pop();
    HostState& target = state_[event.to];
    if (!target.link_up) {
      ++target.counters.dropped_down;
      out.push_back({event.token, event.to, Drop::kLinkDown});
      continue;
    }
    if (event.stage == Stage::kDeliver) {
      ++target.counters.packets_received;
      target.counters.bytes_received += event.bytes;
      out.push_back({event.token, event.to, Drop::kNone});
      continue;
    }
    // The packet reaches the download link at its own arrival time, which may be earlier than `now`
    // (the caller came late): its serialization starts then, not now.
    TimePoint left;
    const Drop drop = pass(hosts_[event.to].down, target.download, event.at, event.bytes, left);
    if (drop == Drop::kLoss) ++target.counters.dropped_loss;
    if (drop == Drop::kQueue) ++target.counters.dropped_queue;
    if (drop != Drop::kNone) {
      out.push_back({event.token, event.to, drop});
      continue;
    }
    event.at = left;
    event.seq = seq_++;
    event.stage = Stage::kDeliver;
    events_.push(event);
  }
}

}  // namespace dedloc::lab
