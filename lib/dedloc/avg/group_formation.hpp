// How one peer's averaging group forms, sans-IO: the leader/follower state machine behind the Matchmaker
// (lib/dedloc/avg/matchmaking.hpp describes the protocol). It takes what happens (a search starts, a join
// request comes, an earlier leader takes or refuses us, time passes) and says what to do: refuse the
// request and why, hold it, ask a leader and bring these companions, assemble the group now, give up. The
// Matchmaker does the DHT and the RPCs; here there are no sockets, no threads and no clock of its own, so
// tests drive every rule with a ManualClock's `now`.
//
// Followers are named by their PeerId: the Matchmaker keeps each one's pending reply and answers the ids
// this returns. Not thread-safe: the Matchmaker calls it under its own mutex.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dedloc/avg/group.hpp"
#include "dedloc/core/clock.hpp"
#include "dedloc/dht/node.hpp"
#include "dedloc/net/peer_address.hpp"

namespace dedloc::avg {

// One search for a group (Matchmaker::find_group): what is averaged, who we are, how large a group may be.
struct Search {
  std::string group_key;            // peers with different keys never meet
  Bytes schema_hash;                // wire::kSchemaHashBytes: the tensors' names, shapes and order
  std::uint64_t vector_length = 0;
  std::uint64_t part_elements = 0;  // the part grid our BEGIN announces when we lead
  AvgRole role = AvgRole::kNode;
  double bandwidth = 0;             // bytes/s each way (the shares depend on it)
  // When we lead: every reducer the same share (plan::equal_group_shares), the naive split the planner is
  // measured against; false: the planner's shares over the members' bandwidths (plan::plan_group_shares).
  bool equal_shares = false;
  std::string endpoint;             // where others dial our reducer; empty for a client, which never leads
  size_t target_group_size = 0;
  size_t min_group_size = 0;
  // How many peers the caller knows to be in the run, us included (0: unknown): a leader whose group holds
  // that many senders forms it at once instead of waiting for peers that do not exist.
  size_t expected_peers = 0;
  Duration matchmaking_time{};      // from start() to our deadline
  // Quorum and grace (zero: off, a group waits for every expected sender until the deadline): a leader
  // whose group holds a quorum of the expected senders (quorum_of(expected_peers)) forms it `grace` after
  // the quorum came in, instead of waiting out matchmaking_time for an expected peer that may never come
  // (one that died between rounds still has a progress record until it expires). The caller derives the
  // grace from how long the last expected joiners took after the quorum in earlier rounds
  // (collab/averaging_timeouts.hpp).
  Duration grace{};
};

// How many of `expected` senders make a quorum: all but a quarter (at least one) may be missing, never
// fewer than two members. Below three expected, every one of them.
size_t quorum_of(size_t expected);

// Whether `search` can be looked for at all: kInvalidArgument saying what is wrong otherwise.
Status check_search(const Search& search);

// What a search does now (GroupFormation::next).
enum class NextStep {
  kLook,      // keep looking: ask earlier leaders, take joiners, look again soon
  kAssemble,  // we lead and our group is complete (full, or at the deadline large enough): form it
  kGiveUp,    // the deadline passed without a group: refuse our followers (time_out()) and fail
};

// Followers to answer with one refusal (the search ended without a group for them).
struct Dismissal {
  std::vector<crypto::PeerId> followers;
  wire::AvgJoinRefused answer;
};

// A group we lead, formed.
struct Assembly {
  Result<Group> group;                        // ours; an error when the members cannot average together
  std::vector<crypto::PeerId> followers;      // to answer with group->begin(), or else with `refusal`
  std::optional<wire::AvgJoinRefused> refusal;  // set when `group` is an error
  // When every expected sender came in (the group formed full, not by quorum and grace): how long after
  // the quorum the last of them joined, the observation the next rounds' grace is learned from.
  std::optional<Duration> quorum_to_full;
  bool by_quorum = false;  // formed by quorum and grace, with expected senders missing
};

class GroupFormation {
 public:
  explicit GroupFormation(crypto::PeerId self) : self_(self) {}

  // A search begins at `now` (steady time; `unix_now` the same moment in unix seconds): we lead if we can
  // (we have an endpoint), otherwise we only join. Followers of an earlier search are forgotten.
  // Call check_search() first.
  void start(const Search& search, TimePoint now, double unix_now);
  // Our declaration's expiration in unix seconds: when we stop looking, and our place in leader order.
  double expiration() const { return expiration_; }
  TimePoint deadline() const { return deadline_; }
  // How long to wait for an earlier leader's BEGIN (`now`/`unix_now`: the same instant on both clocks).
  // Alone, a little past our deadline: the leader assembles by its own deadline, which is no later than
  // ours. With followers, until a BEGIN's transit before the first of them stops waiting for ours (their
  // AvgJoin's `until`), and never past the wait alone: when the earlier leader does not take us in time, we
  // still form our own group before they give up on us. (A leader of nearly the same deadline that answers
  // late, busy in a DHT read or a join of its own, otherwise left our followers waiting in vain.) Followers
  // that did not say how long they wait: a quarter of the grace past our deadline.
  TimePoint answer_deadline(bool with_companions, TimePoint now, double unix_now) const;
  // How long a peer that cannot lead waits for the BEGIN of a leader whose declaration expires at
  // `leader_expiration` (unix seconds; `now`/`unix_now` the same instant on both clocks): that leader
  // assembles by its own deadline, which may come after ours (it started looking after us), so until then
  // plus the grace; at least as long as answer_deadline(false), at most one more matchmaking window.
  TimePoint client_answer_deadline(double leader_expiration, TimePoint now, double unix_now) const;

  NextStep next(TimePoint now) const;

  // A join request from `who` (the envelope's sender). nullopt: accepted and held until the group forms
  // (a retry replaces the same peer's earlier request, which is dropped unanswered). Otherwise the refusal
  // to send at once.
  // `now` times the quorum's grace (Search::grace).
  std::optional<wire::AvgJoinRefused> on_join(const crypto::PeerId& who, const wire::AvgJoin& join,
                                              TimePoint now = TimePoint{});

  // Followers that stopped waiting for our BEGIN: their join's wait_until (unix seconds; 0: not said) is
  // less than kBeginTransit after `unix_now`. They no longer listen, and a group formed with them would
  // have its other members wait, to their deadline, on members that never run its round: a joiner whose
  // wait ended while its leader was still held (a search ahead, a merge in progress) does not know it was
  // taken. Returns them; their requests are dead, nothing is answered. Their companions go with them.
  std::vector<crypto::PeerId> drop_given_up(double unix_now);

  // Asking an earlier leader to take us (a merge when we have followers). nullopt: our group became full
  // meanwhile, so we lead instead. Otherwise the companions to bring (our followers and theirs); until
  // on_taken() or on_refused(), newcomers are told to try `leader` instead.
  std::optional<std::vector<wire::JoinCompanion>> ask(const std::string& leader);
  // The leader took us: its BEGIN goes to the followers returned (they were merged with us). Search done.
  std::vector<crypto::PeerId> on_taken();
  // The leader refused us or did not answer: nothing changed.
  void on_refused();

  // Forms the group we lead, us and our followers with their companions, in an order shuffled with
  // `shuffle_seed` (so that no peer is always first in the grid), each member's share planned once
  // (plan::plan_group_shares), named by `group_id` (wire::kGroupIdBytes random bytes). Search done.
  Assembly assemble(Bytes group_id, std::uint64_t shuffle_seed);
  // The deadline passed without a group: refuse the followers (too late). Idle again.
  Dismissal time_out();
  // We are shutting down: refuse the followers (not looking). Idle again.
  Dismissal shut_down();
  // We stop looking before our deadline (`why`: the group of our key formed without us): refuse the
  // followers (not looking, `why`). Idle again.
  Dismissal give_up(std::string why);

  // Searching ahead (Matchmaker::hold): the expected peers alone do not complete a group we lead until
  // release(); joiners still do, up to target_group_size. Outlives a search.
  // A grace runs from the later of the quorum and the release (`now`).
  void hold() { held_ = true; }
  void release(TimePoint now = TimePoint{}) {
    held_ = false;
    released_at_ = now;
  }
  // The caller's count of the expected peers changed (Search::expected_peers; a search ahead began with an
  // earlier view of the run than the caller's step has): later decisions use `expected_peers`, a quorum
  // the new count makes dating from `now`, one it no longer makes gone.
  void expect(size_t expected_peers, TimePoint now);
  // When the grace of a quorum that is in ends (the group forms then unless it fills first); nullopt when
  // no grace runs.
  std::optional<TimePoint> grace_end() const;

  // What the search looks like now.
  bool looking() const { return state_ == State::kLeading || state_ == State::kJoining; }
  bool leading() const { return state_ == State::kLeading; }
  const std::string& following() const { return following_; }  // the leader we are asking, or empty
  // Members in our group now, us included (followers bring their companions).
  size_t group_size() const;
  // Members of our group that send (not aux), us included.
  size_t senders() const;
  // The expected senders (Search::expected_peers clamped between two, or min_group_size, and
  // target_group_size), 0 when unknown.
  size_t expected_senders() const;
  // Whether our group is complete without waiting longer: target_group_size members, or (when not held)
  // every expected sender in.
  bool full() const;
  bool holds(const crypto::PeerId& follower) const;

 private:
  enum class State { kIdle, kLeading, kJoining, kDone };
  struct Follower {
    Member member;
    double bandwidth = 0;
    std::vector<wire::JoinCompanion> companions;  // a merging leader's followers: in our group, answered by it
    double wait_until = 0;                         // unix seconds: it stops waiting for BEGIN then (0: not said)
  };
  std::vector<crypto::PeerId> take_followers();
  Dismissal dismiss(wire::JoinRefusal reason, std::string detail);

  crypto::PeerId self_;
  Search search_;
  State state_ = State::kIdle;
  bool held_ = false;
  std::string following_;
  TimePoint deadline_{};
  double expiration_ = 0;
  std::vector<Follower> followers_;
  std::optional<TimePoint> quorum_at_;  // when the group we lead reached its quorum (this search)
  TimePoint last_join_at_{};
  TimePoint released_at_{};
};

// The value a leader declares under the key once its group formed there (Matchmaker::linger_locked): the
// schema hash followed by kFormedMarker. Such a declaration outlives the leader's search, and with it the
// leader order: it says that the key's group formed, whoever reads it (the Matchmaker asks that leader
// first). Kept up as a plain declaration, with its later expiration, it came after the declarations of the
// latecomers it was kept up for: those that could lead never asked it, and led a group of their own to
// their deadline.
inline constexpr std::uint8_t kFormedMarker = 'F';
Bytes formed_declaration(const Bytes& schema_hash);

// The peers declared under our matchmaking key (subkey: address, value: schema hash, expiration) that come
// before us in leader order: earlier expiration first, ties to the smaller id. Merges flow only toward them,
// so they cannot cycle. Entries that are us, unparsable, or of another schema are skipped (and counted).
// A peer that cannot lead (client mode: nobody can dial it) never takes followers and so never merges: it
// passes an infinite expiration and gets every declared leader. A formed group's declaration
// (formed_declaration, of our schema) is no leader to ask: it is reported apart, whatever its expiration.
struct EarlierPeers {
  std::vector<net::PeerAddress> leaders;  // in leader order
  std::vector<double> expirations;        // each leader's declaration expiration (unix seconds), same order
  size_t looking = 0;                     // other peers declared, still looking
  size_t other_schema = 0;                // of them, with another tensor schema
  std::optional<net::PeerAddress> formed;  // the leader of a group of our schema that formed under the key
};
EarlierPeers earlier_peers(const std::vector<dht::FoundEntry>& entries, const crypto::PeerId& self,
                           const Bytes& schema_hash, double my_expiration);

}  // namespace dedloc::avg
