// Moshpit-style group keys: once the swarm outgrows one averaging group, each round splits it into buckets,
// and the peers of one bucket average together under that bucket's key. Without them, groups form in the
// order peers arrive: the first target_group_size fill the first group, and peers that come late (volunteers
// behind NAT, who cannot lead a group of their own) find every group full or formed, and step alone. With
// buckets, every bucket holds fewer peers than a group takes, its leader knows how many to wait for, and the
// split changes every round (hivemind's Moshpit averaging splits by key bits; here the buckets come from a
// hash of the round). The buckets' averages are then averaged across them (the cross-bucket stage, below).
//
//   N        the trainers within an epoch of ours, but for those that joined the running swarm in this
//            round (their records' joined_at): the others split it before their records came, and a
//            newcomer counting itself and its fellow newcomers would see more buckets than they made
//   buckets  B = 1 while the trainers fit in one group; beyond, ceil(N / (0.8 · target_group_size)), at most
//            one per trainer that can lead (a bucket needs a leader), at least 1
//   the trainers that can lead, then the clients, each in an order drawn from the round: the first B that
//   can lead take a bucket each (the one maximising hash(peer, round, b) among those without a leader yet),
//   every other trainer the bucket b maximising hash(peer, round, b) among those not yet holding
//   max(floor(0.8 · target_group_size), ceil(N / B)); an aux peer (no record, nobody counts it) and a
//   newcomer take their heaviest bucket (rendezvous hashing with bounded loads: every peer computes the
//   whole assignment from its view, and views that differ by a peer or two still agree on most buckets).
//   Even loads leave a group's spare places to aux peers, newcomers and trainers whose view placed them
//   there; a leader keeps the places of expected trainers from aux peers (avg/group_formation.hpp).
//   expected = the trainers in our bucket (us included): with all of them in, the group forms at once; at our
//            step, those whose records reached the round (still_expected: one still behind it is dead or
//            late, and would hold the group to its deadline)
//
// The round's key is "<round>.b<b>" (the plain round when B = 1, so a small swarm's keys are what they
// always were). B is not in it: during churn peers' views of N differ, and B with them for a while; peers
// that count B = 4 and B = 5 still meet in buckets 0 to 3, where rendezvous hashing keeps most of them.
//
// The cross-bucket stage (train/trainer.cpp, across_buckets). Each bucket's round averages only its own
// trainers' gradients: stepping on those would leave every bucket with parameters of its own (nothing would
// average them back), which is not one model trained with the swarm's batch. So after a split round each
// group's carrier (bucket_carrier: its trainer that can be dialled and reduces the most) averages
// the group's result with the other groups' carriers under "<round>.x" (B expected), weighted by its
// group's samples, and then hands the swarm's average to its group's other trainers in a round of the same
// members without matchmaking (avg::Averager::broadcast): they end with exactly the carrier's values.
// Whatever fails, a group's members hold the same values: a carrier that missed the stage takes its result
// from a carrier that took part (avg/round_result.hpp) and hands that on, as does a carrier whose carriers'
// round held fewer buckets than a result already listed (late groups' carriers meeting one another); a
// receiver whose hand-on came back partial (a member died in it) fetches the rest from its carrier (the
// carrier dead, from a carrier it averaged with); where none can be had, its whole group steps on its own
// average and the divergence check brings it back (collab/divergence.hpp). A trainer whose bucket's group
// formed without it learns so from the bucket's leader at once (avg::MatchmakingOptions::one_group_per_key),
// takes the carriers' result too and steps with the swarm, without its samples
// (Trainer::take_missed_round_result).
// No stage where B exceeds target_group_size (the carriers would not fit in one group).
//
// Sans-IO: progress records in, a key out (tests/unit/collab/group_buckets_test.cpp).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "dedloc/avg/group.hpp"
#include "dedloc/collab/progress.hpp"

namespace dedloc::collab {

struct GroupBucket {
  std::string round;     // what to average under: the round's name with its bucket
  size_t buckets = 1;    // B
  size_t index = 0;      // b
  size_t expected = 0;   // trainers in this bucket, us included when we are one
  std::vector<std::string> others;  // B > 1: the other trainers in this bucket (their records' `peer` subkeys)
};

// `round` is for `epoch` (ours; an aux peer's, the swarm's); `others`: the other trainers' progress records
// (their `peer` subkeys, epochs and client_mode), of which only those within one epoch of ours count: a
// peer that died stays listed until its record expires, but its epoch stops, so after two steps it no
// longer holds a bucket that nobody leads (and a peer two behind downloads the state instead of averaging).
// `self`: our subkey as records hold it (own_subkey); `self_trainer`: false for an aux peer (it has no
// record and is counted in no bucket); `self_client`: we cannot lead; `self_joined_at`: the epoch whose state
// we loaded when we joined the running swarm (our record's joined_at; 0: we started from our own state).
// A trainer that joined at `epoch` or later (its record's joined_at) is left out of the round's split by
// everybody, itself included: it takes its heaviest bucket, as an aux peer does, and is expected by
// nobody but itself.
GroupBucket choose_group_bucket(const std::string& round, std::uint64_t epoch, const std::vector<PeerProgress>& others,
                                const std::string& self, bool self_trainer, bool self_client,
                                size_t target_group_size, std::uint64_t self_joined_at = 0);

// The trainers of `bucket` (split for `epoch`, the round's) still expected when our step comes, us included:
// those whose records in `others` (read since the split) reached the round's epoch. One still behind it,
// or no longer listed, died with its record lingering, or still sits out the round before; its leader
// waited for it to the deadline (a third of the buckets' rounds in the lab's 64-volunteer churn runs),
// and the carriers' round for that bucket's carrier. B = 1: `bucket.expected`.
size_t still_expected(const GroupBucket& bucket, const std::vector<PeerProgress>& others, std::uint64_t epoch);
// The trainers of `bucket` that still_expected() leaves out: each with its record's epoch in `others`,
// nullopt when it has none (gone). Empty when B = 1.
struct LeftOut {
  std::string peer;                    // the record's `peer` subkey
  std::optional<std::uint64_t> epoch;  // where its record is; nullopt: no record
};
std::vector<LeftOut> left_out(const GroupBucket& bucket, const std::vector<PeerProgress>& others, std::uint64_t epoch);

// Whether `bucket`'s round has a cross-bucket stage: split into buckets, no more of them than a group holds.
bool has_cross_bucket_stage(const GroupBucket& bucket, size_t target_group_size);
// The cross-bucket stage's round for `epoch` (gradient_round(epoch) + ".x"): the carriers' key, and the name
// their result is listed under (avg/round_result.hpp).
std::string cross_bucket_round(std::uint64_t epoch);

// The cross-bucket stage's carrier in a bucket's `group`: of its trainers that can be dialled (nodes), the one
// that reduces the most (the fastest link, by its leader's plan), the first in the group's order on a tie:
// every member picks the same. Members in `gone` are passed over: those our bucket's round found dead (their
// pings failed, avg::AllReduceResult::gone). A carrier that died in its bucket's round left the carriers'
// round waiting for it out of a quorum's grace or to its deadline (1.5-3 s, in the epochs of the lab's churn
// runs where a carrier died, for the whole swarm); the next one, where it saw the death, goes in instead (at
// weight 0: its bucket's round lost a reducer) and hands the carriers' result on. A member that did not see
// the death picks the dead one and only receives, as before; two that both carry (a live carrier taken for
// dead) bring the same bucket twice, and hand on the same values where their carriers' round was one.
// nullopt: none (a group of clients led by an aux peer).
std::optional<size_t> bucket_carrier(const avg::Group& group, const std::vector<crypto::PeerId>& gone = {});

}  // namespace dedloc::collab
