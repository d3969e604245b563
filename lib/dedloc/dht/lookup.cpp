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

std::vector<Contact> Lookup::next_queries() {
  std::vector<Contact> out;
  if (finished_) return out;
  size_t live_seen = 0;
  for (auto& [distance, candidate] : candidates_) {
    if (in_flight_ >= options_.alpha || live_seen >= options_.k) break;
    if (candidate.state == State::kFailed) continue;
    ++live_seen;
    if (candidate.state == State::kFresh) {
      candidate.state = State::kInFlight;
      ++in_flight_;
      out.push_back(candidate.contact);
    }
  }
  return out;
}

void Lookup::on_answer(const PeerId& from, const std::vector<Contact>& contacts) {
  auto it = candidates_.find(xor_distance(from, target_));
  if (it == candidates_.end() || it->second.state != State::kInFlight) return;  // not asked: ignore
  it->second.state = State::kAnswered;
  --in_flight_;
  for (const auto& contact : contacts) add(contact);
}

void Lookup::on_failure(const PeerId& from) {
  auto it = candidates_.find(xor_distance(from, target_));
  if (it == candidates_.end() || it->second.state != State::kInFlight) return;
  it->second.state = State::kFailed;
  --in_flight_;
}

bool Lookup::done() const {
  if (finished_) return true;
  // Done when the k nearest live candidates have all answered (and so nobody nearer is pending).
  size_t live_seen = 0;
  for (const auto& [distance, candidate] : candidates_) {
    if (live_seen >= options_.k) break;
    if (candidate.state == State::kFailed) continue;
    ++live_seen;
    if (candidate.state != State::kAnswered) return false;
  }
  return true;
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
