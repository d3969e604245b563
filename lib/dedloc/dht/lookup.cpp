#include "dedloc/dht/lookup.hpp"

#include <algorithm>

namespace dedloc::dht {

Lookup::Lookup(PeerId target, PeerId self, const std::vector<Contact>& seeds, LookupOptions options)
    : target_(target), self_(self), options_(options) {
  for (const auto& seed : seeds) add(seed);
}

void Lookup::add(const Contact& contact) {
  if (contact.id == self_ || contact.endpoint.empty()) return;
  PeerId distance = xor_distance(contact.id, target_);
  if (candidates_.contains(distance)) return;
  if (candidates_.size() >= options_.max_candidates) {
    // Full: a failed candidate is dead weight, so it goes first (else hostile answers naming dead ids near
    // the target could fill the list and shut real nodes out); otherwise a newcomer may only replace the
    // farthest candidate not yet asked.
    auto victim = std::find_if(candidates_.rbegin(), candidates_.rend(),
                               [](const auto& entry) { return entry.second.state == State::kFailed; });
    if (victim == candidates_.rend()) {
      victim = candidates_.rbegin();
      if (!(distance < victim->first) || victim->second.state != State::kFresh) return;
    }
    candidates_.erase(std::next(victim).base());
  }
  candidates_.emplace(distance, Candidate{contact});
}

std::vector<Contact> Lookup::next_queries(TimePoint now) {
  std::vector<Contact> out;
  if (finished_) return out;
  size_t live_seen = 0;
  for (auto& [distance, candidate] : candidates_) {
    if (in_flight_ >= options_.alpha || live_seen >= options_.k) break;
    if (candidate.state == State::kFailed || candidate.state == State::kStalled) continue;
    if (candidate.state == State::kFresh) {
      candidate.asked_at = now;
      out.push_back(candidate.contact);
      if (suspects_.contains(candidate.contact.id)) {
        // Asked in case it is back, but never waited for, nor counted among the nearest live ones.
        candidate.state = State::kStalled;
        ++stalled_;
        continue;
      }
      candidate.state = State::kInFlight;
      ++in_flight_;
    }
    ++live_seen;
  }
  return out;
}

Duration Lookup::stall_time() const {
  if (options_.stall_after <= Duration::zero()) return Duration::zero();
  if (!slowest_answer_ || options_.min_stall_after <= Duration::zero()) return options_.stall_after;
  auto scaled = std::chrono::duration_cast<Duration>(*slowest_answer_ * options_.stall_multiple);
  return std::clamp(scaled, std::min(options_.min_stall_after, options_.stall_after), options_.stall_after);
}

std::vector<PeerId> Lookup::stall_overdue(TimePoint now) {
  std::vector<PeerId> out;
  Duration stall = stall_time();
  if (stall <= Duration::zero()) return out;
  for (auto& [distance, candidate] : candidates_) {
    if (candidate.state == State::kInFlight && now - candidate.asked_at >= stall) {
      candidate.state = State::kStalled;
      candidate.waited_for = true;
      --in_flight_;
      ++stalled_;
      ++waited_stalled_;
      out.push_back(candidate.contact.id);
    }
    if (candidate.state == State::kStalled && candidate.waited_for && answered_ > 0 &&
        now - candidate.asked_at >= 2 * stall) {
      candidate.waited_for = false;
      --waited_stalled_;
    }
  }
  return out;
}

TimePoint Lookup::next_stall() const {
  TimePoint next = TimePoint::max();
  Duration stall = stall_time();
  if (stall <= Duration::zero()) return next;
  for (const auto& [distance, candidate] : candidates_) {
    if (candidate.state == State::kInFlight) next = std::min(next, candidate.asked_at + stall);
    if (candidate.state == State::kStalled && candidate.waited_for && answered_ > 0) {
      next = std::min(next, candidate.asked_at + 2 * stall);
    }
  }
  return next;
}

bool Lookup::settle(Candidate& candidate, State to) {
  if (candidate.state == State::kInFlight) {
    --in_flight_;
  } else if (candidate.state == State::kStalled) {
    --stalled_;
    if (candidate.waited_for) --waited_stalled_;
    candidate.waited_for = false;
  } else {
    return false;  // never asked, or already settled: ignore
  }
  candidate.state = to;
  return true;
}

void Lookup::on_answer(const PeerId& from, const std::vector<Contact>& contacts, TimePoint now) {
  auto it = candidates_.find(xor_distance(from, target_));
  if (it == candidates_.end() || !settle(it->second, State::kAnswered)) return;
  ++answered_;
  // A late answer from a stalled query counts too: the network is slower than we thought.
  Duration took = std::max(Duration::zero(), now - it->second.asked_at);
  slowest_answer_ = slowest_answer_ ? std::max(*slowest_answer_, took) : took;
  for (const auto& contact : contacts) add(contact);
}

void Lookup::on_failure(const PeerId& from) {
  auto it = candidates_.find(xor_distance(from, target_));
  if (it == candidates_.end()) return;
  settle(it->second, State::kFailed);
}

bool Lookup::done() const {
  if (finished_) return true;
  // Done when the k nearest live candidates have all answered (and so nobody nearer is pending). Stalled
  // ones do not count as live here, unless too few nodes answered to go without them.
  size_t live_seen = 0;
  for (const auto& [distance, candidate] : candidates_) {
    if (live_seen >= options_.k) break;
    if (candidate.state == State::kFailed) continue;
    // waited_for: stalled, not a suspect and not given up.
    if (candidate.state == State::kStalled && (!options_.wait_for_nearest || !candidate.waited_for)) continue;
    ++live_seen;
    if (candidate.state != State::kAnswered) return false;
  }
  // Fewer than k answered: stalled queries are waited for, unless some node answered and they are
  // suspects or were given up (stall_overdue).
  return stalled_ == 0 || answered_ >= options_.k || (answered_ > 0 && waited_stalled_ == 0);
}

std::vector<Contact> Lookup::nearest_answered(size_t count) const {
  std::vector<Contact> out;
  for (const auto& [distance, candidate] : candidates_) {
    if (out.size() >= count) break;
    if (candidate.state == State::kAnswered) out.push_back(candidate.contact);
  }
  return out;
}

}  // namespace dedloc::dht
