// Matchmaking through the DHT: peers ready to average find each other and form groups of up
// to `target_group_size`, with no coordinator.
//
// Each peer looking for a group declares itself under "<group_key>_matchmaking" (subkey: its address,
// value: its schema hash) until its own deadline, the declaration's expiration. Peers are ordered by
// (expiration, id): earlier peers lead. A peer asks the earlier peers, in order, to take it (AvgJoin); a
// leader holds each accepted request and answers them all with BEGIN when its group is full, or at its
// deadline if it has at least `min_group_size` members. Refusals say why (not looking, another schema,
// full, "I follow X" with X to try instead) so a joiner moves on at once. A peer that no earlier peer
// takes leads its own group. A client-mode peer cannot lead (nobody can dial it): it asks every declared
// leader, and waits for a later one's BEGIN until that leader's deadline. Every wait is bounded. A leader
// that knows how many peers to expect forms its group once they are all in, or, with a grace
// (MatchmakingOptions::grace), once a quorum is in and the grace has passed (GroupFormation, Search::grace).
// A join that comes after such a group formed is counted (take_late_joiners()): the grace was too short.
//
// The leader shuffles the members and computes each one's share of the vector once, with the planner's
// group program (plan::plan_group_shares over the members' bandwidths and roles), and sends that with
// BEGIN: members never compute boundaries themselves, so they cannot disagree.
//
// Groups that formed side by side merge: a leader whose group is not full keeps looking for earlier
// peers and asks them to take it together with its followers (AvgJoin with companions). While it asks,
// it refuses newcomers ("I follow X"); when the earlier leader's BEGIN comes, it passes it on to its own
// followers, who never had to move. If the earlier leader refuses, nothing changed. Merges only flow
// toward earlier peers, so they cannot cycle.
//
// The rules (who is taken, who is refused and why, when a group forms, how merges go) live in
// GroupFormation (group_formation.hpp), which has no sockets and no clock of its own; the Matchmaker is its
// shell: the DHT declarations and lookups, the AvgJoin RPCs and their held replies, the waiting.
#pragma once

#include <condition_variable>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "dedloc/avg/defaults.hpp"
#include "dedloc/avg/group.hpp"
#include "dedloc/avg/group_formation.hpp"
#include "dedloc/core/clock.hpp"
#include "dedloc/core/log.hpp"
#include "dedloc/dht/node.hpp"
#include "dedloc/net/client.hpp"
#include "dedloc/net/server.hpp"

namespace dedloc::avg {

struct MatchmakingOptions {
  std::string group_key;        // what is averaged, e.g. "run1_grad"; peers with different keys never meet
  Bytes schema_hash;            // wire::kSchemaHashBytes: the tensors' names, shapes and order
  std::uint64_t vector_length = 0;
  AvgRole role = AvgRole::kNode;
  double bandwidth = kDefaultBandwidth;  // bytes/s each way (the leader's shares depend on it)
  bool equal_shares = false;             // Search::equal_shares: groups we lead split equally
  size_t target_group_size = kDefaultTargetGroupSize;
  size_t min_group_size = kDefaultMinGroupSize;
  Duration matchmaking_time = kDefaultMatchmakingTime;      // how long to look before giving up
  Duration grace{};  // Search::grace: a quorum's grace for the rest of the expected peers (zero: none)
  // Each key holds one group (a group bucket's key: collab/group_buckets.hpp): a peer declared under our key
  // that answers it is no longer looking (its group formed, or it gave up), asked in leader order or first
  // where its declaration says its group formed (Matchmaker::linger_locked), means the key's group is
  // decided without us, and the search ends at once, with kRefused. Otherwise the search leads a group of
  // its own until its deadline: where a key holds several groups, the next may yet form.
  bool one_group_per_key = false;
  std::uint64_t part_elements = default_part_elements();  // the part grid a leader announces
  // Where others dial our averaging server; empty: its bound endpoint, a wildcard host replaced by the
  // address our DHT node advertises. Ignored for clients (nobody can dial them; they never lead).
  std::string announce;
};

// Where others dial an averaging server: nothing for a client-mode peer (nobody can dial it); `announce`,
// with our transport key, when given; otherwise the bound endpoint, a wildcard host replaced by the address
// toward our DHT node's host.
std::string averaging_endpoint(AvgRole role, const std::string& announce, const net::Server& server,
                               const dht::Node& dht);

class Matchmaker {
 public:
  // Registers the AvgJoin handler on `server` (before server.start()). `clock` times the searches: its
  // steady time bounds the waits and RPCs, its unix time stamps our declaration's expiration.
  Matchmaker(dht::Node& dht, net::Server& server, net::Client& client, crypto::PeerId self,
             MatchmakingOptions options, Logger* log = &Logger::global(),
             const Clock& clock = SystemClock::instance());
  ~Matchmaker();  // refuses joiners still held
  Matchmaker(const Matchmaker&) = delete;
  Matchmaker& operator=(const Matchmaker&) = delete;

  // Finds a group: as a follower (a leader's BEGIN) or as a leader (our own BEGIN). kTimeout when no
  // group of at least min_group_size formed in matchmaking_time; the message says what was seen. kRefused
  // when the key's one group formed without us (MatchmakingOptions::one_group_per_key).
  Result<Group> find_group();
  // The same, for a vector layout other than the one in the options (the averager learns it per step).
  // `expected_peers` (us included; 0: unknown) is how many peers the caller knows to be in the run: a
  // leader whose group holds that many (at least min_group_size, at most target_group_size) forms it at
  // once instead of waiting out matchmaking_time for peers that do not exist. Only members that send
  // count toward it: aux peers (which publish no progress, so nobody expects them) join if they are in
  // by then, but never take an expected peer's place. A non-empty `group_key`
  // replaces the options' from now on (one matchmaker serves several kinds of rounds, one at a time).
  Result<Group> find_group(const Bytes& schema_hash, std::uint64_t vector_length, size_t expected_peers = 0,
                           const std::string& group_key = "");
  // Searches ahead of time (Averager::prepare): hold() before starting the search, from the caller's
  // thread; a held search that leads does not form its group when the expected peers are in, but keeps
  // taking joiners (aux peers, which nobody expects) until release(), its deadline, or target_group_size.
  // release() is the caller's own step: from then on the group forms as usual. Neither waits.
  void hold();
  // `expected_peers` (when given) replaces the count the held search began with: the caller's step knows
  // more of the run than it did then (GroupFormation::expect).
  void release(std::optional<size_t> expected_peers = std::nullopt);
  // For a peer shutting down: a search in progress (on another thread) ends at its next check, with
  // kCancelled (a join request already sent still waits for its answer, bounded by the deadline), and
  // every later search returns kCancelled at once.
  void stop();

  // The matchmaking time and quorum grace of later searches (the trainer learns them per round:
  // collab/averaging_timeouts.hpp). Thread-safe; a search in progress keeps its own.
  void set_times(Duration matchmaking_time, Duration grace);
  // MatchmakingOptions::one_group_per_key for later searches. Thread-safe; a search in progress keeps its own.
  void set_one_group_per_key(bool one);
  // A client's address through its relay (relay://...; empty: none), sent with its later joins so that the
  // other members can ping it during a round (AvgJoin::relay). Thread-safe.
  void set_relay_address(std::string address);

  // What the last search that found a group saw (for the caller's estimates).
  struct SearchReport {
    Duration took{};                        // from the search's start to the group
    bool led = false;                       // we formed it
    std::optional<Duration> quorum_to_full; // GroupFormation's Assembly::quorum_to_full, when we led
    bool by_quorum = false;                 // we formed it by quorum and grace, expected peers missing
  };
  SearchReport last_search() const;
  // Join requests refused since the last call because they came after our group for their round had
  // formed by quorum and grace: live peers the grace left out (the caller lengthens it). Resets the count.
  size_t take_late_joiners();

  // What the search in progress looks like (for tests that wait for a state instead of sleeping).
  struct Snapshot {
    bool looking = false;   // a search is in progress and takes part in matchmaking
    bool leading = false;   // it leads a group (not asking an earlier leader to take it)
    bool declared = false;  // its declaration is stored in the DHT, so later peers can find it
    size_t group_size = 0;  // members in the group it leads now, itself included
  };
  Snapshot snapshot() const;

 private:
  void on_join(wire::AvgJoin&& join, net::Incoming&& request, net::Replier replier);
  Result<Group> search(size_t expected_peers);
  // Earlier peers with our schema, in leader order, read from the DHT (the read bounded by 2 s, or by the
  // search's matchmaking_time if shorter, and never past the search's deadline).
  EarlierPeers earlier_peers(double my_expiration, Duration matchmaking_time, Deadline search_deadline,
                             std::string& seen);
  struct JoinOutcome {
    std::optional<Group> group;                     // the leader's BEGIN
    wire::AvgBegin begin;                           // as received, to pass on to our followers after a merge
    std::string why;                                // otherwise: why not
    std::optional<net::PeerAddress> other_leader;   // a leader the refusal suggests instead
    std::optional<wire::JoinRefusal> refusal;       // the leader's reason, when it refused
  };
  // Asks `leader` to take us, waiting (bounded) for its BEGIN.
  // `companions` are our followers when we merge our group into the leader's: the BEGIN must list them.
  JoinOutcome try_join(const net::PeerAddress& leader, Deadline deadline,
                       const std::vector<wire::JoinCompanion>& companions);
  // Forms the group we lead and answers our followers with its BEGIN. Under mutex_.
  Result<Group> assemble_locked();
  // Answers each of `dismissal`'s followers with its refusal. Under mutex_.
  void dismiss_locked(const Dismissal& dismissal);
  // Ends a search under a key that holds one group, whose group formed without us (kRefused); `how_we_know`
  // goes into the error. Under mutex_.
  Status formed_without_us_locked(const std::string& how_we_know);
  // Under a key that holds one group (MatchmakingOptions::one_group_per_key), once the group we lead formed:
  // we declare it formed (formed_declaration) for two more matchmaking windows (stored in the background),
  // so that a latecomer reads it, asks us first, hears that we look no more and ends its search (kRefused).
  // Declared until our deadline only, it was gone for those that came after: in the lab's 64-volunteer churn
  // runs a pair or trio of a bucket's late trainers then led a group of their own to its deadline every few
  // rounds, and their carrier came seconds late to the carriers' round. Under mutex_.
  void linger_locked(const std::string& key, const std::string& me, double expiration);
  std::string address() const;

  dht::Node& dht_;
  net::Server& server_;
  net::Client& client_;
  crypto::PeerId self_;
  std::string endpoint_;  // set when looking starts (the server is bound by then)
  std::string relay_;     // set_relay_address; under mutex_
  MatchmakingOptions options_;
  Logger* log_;
  const Clock& clock_;

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  bool stopping_ = false;
  bool declared_ = false;  // the search in progress is declared in the DHT
  GroupFormation formation_;
  std::map<crypto::PeerId, net::Replier> repliers_;  // each follower's held request, answered when it is decided
  SearchReport last_search_;
  std::string quorum_round_;  // the group key of the last group we formed by quorum and grace
  size_t late_joiners_ = 0;
  // linger_locked's store. Last: destroyed first, waiting for the store (bounded) before what it uses goes.
  std::future<void> lingering_;
};

// The DHT key under which peers looking for a group declare themselves.
std::string matchmaking_key(const std::string& group_key);

}  // namespace dedloc::avg
