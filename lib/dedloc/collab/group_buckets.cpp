#include "dedloc/collab/group_buckets.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace dedloc::collab {

namespace {

// A fixed 64-bit hash (FNV-1a, then SplitMix64's finalizer to spread it), the same on every build: peers
// of different builds must agree on the buckets.
std::uint64_t bucket_weight(const std::string& peer, const std::string& round, size_t bucket) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  auto mix = [&](const std::string& text) {
    for (unsigned char c : text) {
      h ^= c;
      h *= 0x100000001b3ULL;
    }
    h ^= 0xff;  // a separator: ("ab", "c") and ("a", "bc") differ
    h *= 0x100000001b3ULL;
  };
  mix(peer);
  mix(round);
  mix(std::to_string(bucket));
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ULL;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebULL;
  h ^= h >> 31;
  return h;
}

// The bucket among `allowed` (all of [0, buckets) when empty) with the largest weight for this peer, among
// those with room (`load` below `capacity`) when there are any.
size_t rendezvous(const std::string& peer, const std::string& round, const std::vector<bool>& allowed,
                  const std::vector<size_t>& load, size_t capacity) {
  size_t best = 0, best_full = 0;
  std::uint64_t best_weight = 0, best_full_weight = 0;
  bool any = false, any_full = false;
  for (size_t b = 0; b < load.size(); ++b) {
    if (!allowed.empty() && !allowed[b]) continue;
    const std::uint64_t w = bucket_weight(peer, round, b);
    if (load[b] < capacity) {
      if (!any || w > best_weight) best = b, best_weight = w, any = true;
    } else if (!any_full || w > best_full_weight) {
      best_full = b, best_full_weight = w, any_full = true;
    }
  }
  return any ? best : best_full;
}

struct Trainer {
  const std::string* peer;
  bool client;
};

}  // namespace

GroupBucket choose_group_bucket(const std::string& round, std::uint64_t epoch, const std::vector<PeerProgress>& others,
                                const std::string& self, bool self_trainer, bool self_client,
                                size_t target_group_size, std::uint64_t self_joined_at) {
  // A peer that joined the running swarm in this round is left out of its split, by every peer alike: the
  // others split the round before its record came, and a newcomer that counted itself and its fellow
  // newcomers saw more buckets than they made (3 where they made 2), and searched where nobody led.
  const auto joined_this_round = [&](std::uint64_t joined_at) { return joined_at > 0 && joined_at >= epoch; };
  std::vector<const PeerProgress*> near;
  for (const auto& record : others) {
    if (record.peer != self && record.epoch + 1 >= epoch && record.epoch <= epoch + 1) near.push_back(&record);
  }
  // Where nobody was there before the round (every trainer downloaded in it), nobody is left out.
  const bool anyone_established =
      (self_trainer && !joined_this_round(self_joined_at)) ||
      std::any_of(near.begin(), near.end(), [&](const PeerProgress* r) { return !joined_this_round(r->joined_at); });
  std::vector<Trainer> trainers;
  for (const PeerProgress* record : near) {
    if (!anyone_established || !joined_this_round(record->joined_at)) trainers.push_back({&record->peer, record->client_mode});
  }
  const bool self_counted = self_trainer && (!anyone_established || !joined_this_round(self_joined_at));
  if (self_counted) trainers.push_back({&self, self_client});
  const size_t n = trainers.size();
  const size_t leaders = static_cast<size_t>(std::count_if(trainers.begin(), trainers.end(), [](const Trainer& t) { return !t.client; }));

  GroupBucket bucket;
  bucket.round = round;
  bucket.expected = n + (self_trainer && !self_counted ? 1 : 0);
  if (target_group_size == 0 || n <= target_group_size) return bucket;
  const double per_bucket = 0.8 * static_cast<double>(target_group_size);
  size_t buckets = static_cast<size_t>(std::ceil(static_cast<double>(n) / per_bucket));
  buckets = std::max<size_t>(1, std::min(buckets, leaders));
  if (buckets == 1) return bucket;

  // Those that can lead first (which buckets hold one decides where clients may go), then the clients,
  // each kind in an order drawn from the round. The first B that can lead take a bucket each (its heaviest
  // among those without one), so that every bucket has a leader and clients may go anywhere; then every
  // peer takes its heaviest bucket not yet holding its share: what a bucket is meant to hold, 0.8 of a
  // group (ceil(N / B) where too few can lead for that). Bounded only by the group's size, one bucket often
  // filled to it, and the aux peers that joined it took places its trainers then lacked; a share that does
  // not follow N itself keeps views that differ by a peer in the same buckets. Every peer computes the
  // whole assignment from its view; views that differ by a peer or two agree on most of it.
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (trainers[a].client != trainers[b].client) return !trainers[a].client;
    return bucket_weight(*trainers[a].peer, round, buckets) < bucket_weight(*trainers[b].peer, round, buckets);
  });
  const size_t share = std::max((n + buckets - 1) / buckets, static_cast<size_t>(std::floor(per_bucket)));
  std::vector<size_t> of(n), load(buckets, 0);
  std::vector<bool> has_leader(buckets, false);
  size_t leaders_placed = 0;
  for (size_t i : order) {
    if (!trainers[i].client && leaders_placed < buckets) {
      std::vector<bool> leaderless(buckets);
      for (size_t b = 0; b < buckets; ++b) leaderless[b] = !has_leader[b];
      of[i] = rendezvous(*trainers[i].peer, round, leaderless, std::vector<size_t>(buckets, 0), 1);
      ++leaders_placed;
    } else {
      of[i] = rendezvous(*trainers[i].peer, round, trainers[i].client ? has_leader : std::vector<bool>{}, load, share);
    }
    ++load[of[i]];
    if (!trainers[i].client) has_leader[of[i]] = true;
  }
  // Uncounted (an aux peer, a newcomer): our heaviest bucket, where a newcomer that cannot lead finds a leader
  // anywhere (every bucket has one); counted, where the assignment put us.
  const size_t mine = self_counted ? of[n - 1] : rendezvous(self, round, {}, std::vector<size_t>(buckets, 0), 1);
  bucket.buckets = buckets;
  bucket.index = mine;
  bucket.expected = static_cast<size_t>(std::count(of.begin(), of.end(), mine)) + (self_trainer && !self_counted ? 1 : 0);
  for (size_t i = 0; i < n; ++i) {
    if (of[i] == mine && !(self_counted && i == n - 1)) bucket.others.push_back(*trainers[i].peer);
  }
  // Not the count in the key: peers whose views differ on B (the swarm grew or shrank by a few) still meet
  // in every bucket both counts have, and rendezvous hashing moves few peers between those.
  bucket.round = round + ".b" + std::to_string(mine);
  return bucket;
}

std::vector<LeftOut> left_out(const GroupBucket& bucket, const std::vector<PeerProgress>& others, std::uint64_t epoch) {
  std::vector<LeftOut> out;
  if (bucket.buckets <= 1) return out;
  for (const auto& peer : bucket.others) {
    const auto mine = [&](const PeerProgress& r) { return r.peer == peer; };
    if (std::any_of(others.begin(), others.end(), [&](const PeerProgress& r) { return mine(r) && r.epoch == epoch; })) continue;
    const auto record = std::find_if(others.begin(), others.end(), mine);
    out.push_back({peer, record == others.end() ? std::nullopt : std::optional<std::uint64_t>(record->epoch)});
  }
  return out;
}

size_t still_expected(const GroupBucket& bucket, const std::vector<PeerProgress>& others, std::uint64_t epoch) {
  if (bucket.buckets <= 1) return bucket.expected;
  const size_t there = bucket.others.size() - left_out(bucket, others, epoch).size();
  return std::min(bucket.expected, there + 1);
}

bool has_cross_bucket_stage(const GroupBucket& bucket, size_t target_group_size) {
  return bucket.buckets >= 2 && bucket.buckets <= target_group_size;
}

std::string cross_bucket_round(std::uint64_t epoch) { return gradient_round(epoch) + ".x"; }

std::optional<size_t> bucket_carrier(const avg::Group& group, const std::vector<crypto::PeerId>& gone) {
  std::optional<size_t> best;
  const auto& counts = group.begin().counts;
  for (size_t i = 0; i < group.size(); ++i) {
    const avg::Member& member = group.member(i);
    if (member.role != avg::AvgRole::kNode || std::find(gone.begin(), gone.end(), member.id) != gone.end()) continue;
    if (!best || counts[i] > counts[*best]) best = i;
  }
  return best;
}

}  // namespace dedloc::collab
