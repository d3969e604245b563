// collab/divergence.hpp: who has left the swarm's parameters, judged from hand-made progress records, and
// the watch's resync / give-up decisions.
#include <catch2/catch.hpp>

#include "dedloc/collab/divergence.hpp"
#include "dedloc/crypto/identity.hpp"
#include "dedloc/dht/record.hpp"

using namespace dedloc;
using namespace dedloc::collab;

namespace {

PeerProgress record(std::uint64_t epoch, std::uint64_t hash) {
  PeerProgress progress;
  progress.epoch = epoch;
  progress.params_hash = hash;
  return progress;
}

// Verdicts as the watch gets them: a majority of 2 of 3 against us, 3 of 3 with us, and 2 of 3 while our
// own hash is still being computed (avg/background_parameters_hash.hpp).
const DivergenceVerdict kApart{true, 0xA, 2, 3, false};
const DivergenceVerdict kAgreeing{false, 0xA, 3, 3, true};
const DivergenceVerdict kOursUnknown{false, 0xA, 2, 3, false};

}  // namespace

TEST_CASE("Divergence: a strict majority of the live peers at our epoch with another hash says we diverged",
          "[unit][collab]") {
  const auto verdict = judge_divergence({record(5, 0xA), record(5, 0xA)}, record(5, 0xB));
  CHECK(verdict.diverged);
  CHECK(verdict.swarm_hash == 0xA);
  CHECK(verdict.agreeing == 2);
  CHECK(verdict.peers == 3);

  // We are the majority: the others are the ones to resync.
  const auto ours = judge_divergence({record(5, 0xA), record(5, 0xB), record(5, 0xB)}, record(5, 0xB));
  CHECK_FALSE(ours.diverged);
  CHECK(ours.swarm_hash == 0xB);
}

TEST_CASE("Divergence: nothing is decided without a majority of all live peers", "[unit][collab]") {
  // Two peers: neither is a majority against the other.
  CHECK_FALSE(judge_divergence({record(5, 0xA)}, record(5, 0xB)).diverged);
  // The first two peers to publish epoch 5 cannot outvote the three still at epoch 4.
  const auto early = judge_divergence({record(5, 0xA), record(5, 0xA), record(4, 0xC), record(4, 0xC)}, record(5, 0xB));
  CHECK_FALSE(early.diverged);
  CHECK(early.swarm_hash == 0);
  // A split swarm with a peer still at epoch 4: no set leads by more than that peer could make up.
  CHECK_FALSE(judge_divergence({record(5, 0xA), record(5, 0xC), record(5, 0xC), record(4, 0xC)}, record(5, 0xA)).diverged);
  // Records without a hash (older peers) count among the live, never for a side.
  CHECK_FALSE(judge_divergence({record(5, 0xA), record(5, 0xA), record(5, 0), record(5, 0)}, record(5, 0xB)).diverged);
  // Without a hash of our own (not computed yet) there is nothing to compare: neither apart nor agreeing.
  const auto unknown = judge_divergence({record(5, 0xA), record(5, 0xA)}, record(5, 0));
  CHECK_FALSE(unknown.diverged);
  CHECK_FALSE(unknown.agrees);
  CHECK(unknown.swarm_hash == 0xA);
  CHECK(judge_divergence({record(5, 0xA), record(5, 0xA)}, record(5, 0xA)).agrees);
  // Peers at other epochs do not count for a side, however many.
  CHECK_FALSE(judge_divergence({record(6, 0xA), record(6, 0xA), record(6, 0xA)}, record(5, 0xB)).diverged);
}

TEST_CASE("Divergence: once every live peer reported our epoch, a swarm split into sets follows the largest",
          "[unit][collab]") {
  // Three sets (groups of a round that averaged apart), ours among them: 3, 2 and 2. The two smaller resync
  // to the largest.
  const std::vector<PeerProgress> split{record(5, 0xA), record(5, 0xA), record(5, 0xA), record(5, 0xB), record(5, 0xC),
                                        record(5, 0xC)};
  const auto smaller = judge_divergence(split, record(5, 0xB));
  CHECK(smaller.diverged);
  CHECK(smaller.swarm_hash == 0xA);
  CHECK(smaller.agreeing == 3);
  CHECK_FALSE(judge_divergence(split, record(5, 0xA)).diverged);
  // Two sets of the same size: every peer takes the smaller hash, so both sides agree which one stays.
  const std::vector<PeerProgress> halves{record(5, 0xA), record(5, 0xC), record(5, 0xC)};
  CHECK_FALSE(judge_divergence(halves, record(5, 0xA)).diverged);
  const auto other_half = judge_divergence({record(5, 0xA), record(5, 0xA), record(5, 0xC)}, record(5, 0xC));
  CHECK(other_half.diverged);
  CHECK(other_half.swarm_hash == 0xA);
  // A joiner far behind (it will load a later state) and a peer gone past our epoch do not hold the decision
  // up; a peer one epoch behind, in its round now, does: it may still side with us.
  const auto churn = judge_divergence({record(5, 0xA), record(5, 0xA), record(3, 0xC), record(6, 0xD)}, record(5, 0xB));
  CHECK(churn.diverged);
  CHECK(churn.swarm_hash == 0xA);
  CHECK_FALSE(judge_divergence({record(5, 0xA), record(5, 0xA), record(4, 0xC)}, record(5, 0xB)).diverged);
  // Sets of one decide nothing: every peer differs from every other (no two stepped alike).
  CHECK_FALSE(judge_divergence({record(5, 0xA), record(5, 0xC)}, record(5, 0xB)).diverged);
}

TEST_CASE("Divergence: a split that the records one epoch behind would keep undecided settles on its largest set "
          "once most have reported", "[unit][collab]") {
  // Three sets at our epoch (4, 3 with us, 3) and one record an epoch behind (a dead peer's, lingering): 4
  // does not lead 3 by more than that record could make up, but 10 records with a hash against 1 unknown
  // settle it.
  std::vector<PeerProgress> split{record(5, 0xA), record(5, 0xA), record(5, 0xA), record(5, 0xA), record(5, 0xB),
                                  record(5, 0xB), record(5, 0xC), record(5, 0xC), record(5, 0xC), record(4, 0xD)};
  const auto behind = judge_divergence(split, record(5, 0xB));
  CHECK(behind.diverged);
  CHECK(behind.split_settled);
  CHECK(behind.swarm_hash == 0xA);
  CHECK(behind.agreeing == 4);
  // The largest set's members stay; a watch resyncs the others, and never gives up on a split (no majority
  // whose model we failed to keep).
  const auto in_largest = judge_divergence(split, record(5, 0xA));
  CHECK_FALSE(in_largest.diverged);
  CHECK(in_largest.agrees);
  DivergenceWatch watch;
  CHECK(watch.on_verdict(behind, 5) == DivergenceWatch::Action::kResync);
  watch.on_resynced(5);
  watch.on_step(true);
  CHECK(watch.on_verdict(judge_divergence(split, record(6, 0xB)), 6) == DivergenceWatch::Action::kNone);  // other epoch
  // Equal sets (A 3, C 3 with us, B 2): the smaller hash, as every peer computes it.
  std::vector<PeerProgress> tied{record(5, 0xA), record(5, 0xA), record(5, 0xA), record(5, 0xC), record(5, 0xC),
                                 record(5, 0xB), record(5, 0xB), record(4, 0xD)};
  const auto tie = judge_divergence(tied, record(5, 0xC));
  CHECK(tie.diverged);
  CHECK(tie.swarm_hash == 0xA);
  // Early in an epoch, the first records to come settle nothing: most of the swarm has yet to report (4
  // records with a hash against 8 one epoch behind).
  std::vector<PeerProgress> early{record(6, 0xA), record(6, 0xA), record(6, 0xA)};
  for (int i = 0; i < 8; ++i) early.push_back(record(5, 0xB));
  const auto first_ones = judge_divergence(early, record(6, 0xB));
  CHECK_FALSE(first_ones.diverged);
  CHECK_FALSE(first_ones.split_settled);
  // Sets of two settle nothing, however few are unknown.
  CHECK_FALSE(judge_divergence({record(5, 0xA), record(5, 0xA), record(5, 0xC), record(5, 0xC), record(5, 0xB),
                                record(4, 0xD)},
                               record(5, 0xB)).diverged);
  // A set that leads by more than the unknown is decided as before, not "settled".
  const auto decided = judge_divergence(
      {record(5, 0xA), record(5, 0xA), record(5, 0xA), record(5, 0xA), record(4, 0xD)}, record(5, 0xB));
  CHECK(decided.diverged);
  CHECK_FALSE(decided.split_settled);
}

TEST_CASE("Divergence watch: resync, then give up when a step averaged in full leaves us apart again",
          "[unit][collab]") {
  DivergenceWatch watch;

  CHECK(watch.on_verdict(kApart, 7) == DivergenceWatch::Action::kResync);
  watch.on_resynced(7);
  // Agreeing at the resync's epoch proves nothing yet; agreeing after a later step does.
  CHECK(watch.on_verdict(kAgreeing, 7) == DivergenceWatch::Action::kNone);
  watch.on_step(true);
  CHECK(watch.on_verdict(kAgreeing, 8) == DivergenceWatch::Action::kNone);

  // Apart again later, after steps that agreed: a new divergence, resynced like the first.
  watch.on_step(false);
  CHECK(watch.on_verdict(kApart, 12) == DivergenceWatch::Action::kResync);
  watch.on_resynced(12);
  // The next step was local (no group): being apart is explained, resync again.
  watch.on_step(false);
  CHECK(watch.on_verdict(kApart, 13) == DivergenceWatch::Action::kResync);
  watch.on_resynced(13);
  // The next step averaged in full and we are still apart: our arithmetic differs. Give up, once.
  watch.on_step(true);
  CHECK(watch.on_verdict(kApart, 14) == DivergenceWatch::Action::kGiveUp);
  CHECK_FALSE(watch.enabled());
  CHECK(watch.on_verdict(kApart, 15) == DivergenceWatch::Action::kNone);
}

TEST_CASE("Divergence watch: resyncs that never hold (steps in groups of a few) stop after three in a row",
          "[unit][collab]") {
  DivergenceWatch watch;
  // A resync that held resets the count.
  CHECK(watch.on_verdict(kApart, 1) == DivergenceWatch::Action::kResync);
  watch.on_resynced(1);
  watch.on_step(false);
  CHECK(watch.on_verdict(kAgreeing, 2) == DivergenceWatch::Action::kNone);
  // Then three that do not: each followed by a step that did not average with the swarm. Between them,
  // verdicts read while our hash was still being computed say nothing: they do not count as holding.
  std::uint64_t epoch = 5;
  for (int k = 0; k < DivergenceWatch::kMaxResyncsInARow; ++k, ++epoch) {
    CHECK(watch.on_verdict(kApart, epoch) == DivergenceWatch::Action::kResync);
    watch.on_resynced(epoch);
    watch.on_step(false);
    CHECK(watch.on_verdict(kOursUnknown, epoch + 1) == DivergenceWatch::Action::kNone);
  }
  CHECK(watch.on_verdict(kApart, epoch) == DivergenceWatch::Action::kGiveUpAfterRepeats);
  CHECK_FALSE(watch.enabled());
}

TEST_CASE("Divergence watch: in a swarm split into sets, apart again after a resync means resync again, not give up",
          "[unit][collab]") {
  // The largest of several sets leads (4 of 10 records), but holds no strict majority: after our step it may
  // no longer be the largest, whatever our arithmetic.
  const DivergenceVerdict apart_from_a_set{true, 0xA, 4, 10, false};
  DivergenceWatch watch;
  std::uint64_t epoch = 3;
  for (int k = 0; k < 2 * DivergenceWatch::kMaxResyncsInARow; ++k, ++epoch) {
    CHECK(watch.on_verdict(apart_from_a_set, epoch) == DivergenceWatch::Action::kResync);
    watch.on_resynced(epoch);
    watch.on_step(k % 2 == 0);  // averaged in full with the swarm, or in a group of a few: neither gives up
  }
  CHECK(watch.enabled());
  // Once one hash holds a strict majority and a step averaged in full leaves us apart from it, the
  // arithmetic is ours: give up, once.
  watch.on_step(true);
  CHECK(watch.on_verdict(kApart, epoch) == DivergenceWatch::Action::kGiveUp);
  CHECK_FALSE(watch.enabled());
}

TEST_CASE("Peers apart: the owners of records whose hash is not the one wanted at their epoch", "[unit][collab]") {
  std::vector<crypto::Identity> ids;
  std::vector<PeerProgress> records;
  const std::pair<std::uint64_t, std::uint64_t> kRecords[] = {{5, 0xA}, {5, 0xB}, {5, 0}, {6, 0xC}, {4, 0xD}};
  for (const auto& [epoch, hash] : kRecords) {
    ids.push_back(crypto::Identity::generate());
    records.push_back(record(epoch, hash));
    records.back().peer = dht::owner_marker(ids.back().public_key());
  }
  records.push_back(record(5, 0xB));
  records.back().peer = "not an owner";  // names nobody: left out, not guessed
  int asked_for_5 = 0;
  auto wanted = [&](std::uint64_t epoch) -> std::uint64_t {
    if (epoch == 5) ++asked_for_5;
    return epoch == 5 ? 0xA : epoch == 6 ? 0xC : 0;  // at 4 nothing leads: anything goes
  };
  const auto apart = peers_apart(records, wanted);
  // Only the second: the first and the fourth carry what is wanted, the third no hash yet, the fifth an
  // epoch where nothing leads.
  REQUIRE(apart.size() == 1);
  CHECK(apart[0] == ids[1].peer_id());
  CHECK(asked_for_5 == 1);
  CHECK(peers_apart(records, [](std::uint64_t) -> std::uint64_t { return 0; }).empty());
}
