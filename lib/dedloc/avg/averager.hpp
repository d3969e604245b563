// A peer's averaging role in a run: its averaging server, matchmaking through the DHT and the
// butterfly all-reduce, behind one call per step. The trainer averages its gradients with it; `dedloc-avg
// aux` runs it with the aux role (reduces, sends nothing) to lend a CPU-only machine's bandwidth.
//
// The run's vector layout is published in the DHT ("<run>_grad_schema": schema hash and length) by the
// peers that have a model, so an aux peer, which has none, learns what it averages from there.
#pragma once

#include <atomic>
#include <future>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include <zmq.hpp>

#include "dedloc/avg/all_reduce.hpp"
#include "dedloc/avg/defaults.hpp"
#include "dedloc/avg/matchmaking.hpp"
#include "dedloc/avg/round_result.hpp"
#include "dedloc/dht/node.hpp"
#include "dedloc/wire/records.hpp"

namespace dedloc::avg {

struct AveragerOptions {
  std::string run_id;                        // groups form among peers of the same run
  AvgRole role = AvgRole::kNode;
  std::string listen = "tcp://0.0.0.0:0";    // the averaging server (unused by clients)
  std::string announce;                      // see MatchmakingOptions::announce
  double bandwidth = kDefaultBandwidth;      // bytes/s each way, for the leader's shares
  bool equal_shares = false;                 // groups we lead split equally (Search::equal_shares)
  size_t target_group_size = kDefaultTargetGroupSize;
  size_t min_group_size = kDefaultMinGroupSize;
  Duration matchmaking_time = kDefaultMatchmakingTime;
  Duration grace{};                          // Search::grace (zero: wait for every expected peer)
  AllReduceOptions all_reduce;
  Duration averaging_timeout = std::chrono::seconds(60);  // one all-reduce, after the group formed
  std::uint64_t part_elements = default_part_elements();  // the grid we announce when we lead
  Logger* log = &Logger::global();
};

// What the trainer or aux peer learns from a step.
struct StepOutcome {
  size_t group_size = 0;         // 0: no group formed; the vector is unchanged (average alone)
  bool found_ahead = false;      // the group was found by prepare(), while the caller still computed
  Bytes group_id;                // when a group formed: the id its leader gave it, the same on every member
  std::vector<crypto::PeerId> members;  // ... and its members, us included
  size_t senders = 0;                   // ... of which send a vector (not aux), us included when we do
  AllReduceResult all_reduce;    // when a group formed
  Duration all_reduce_time{};    // when a group formed: how long its all-reduce took (up to its deadline)
  bool all_reduce_timed_out = false;  // ... and whether the deadline ended it
  std::string why_alone;         // when no group formed
  // ... because the one group of its key formed without us (Averager::set_one_group_per_key), not because
  // the matchmaking time was too short for one to form.
  bool formed_without_us = false;
  // What matchmaking saw (Matchmaker::SearchReport), when a group formed:
  Duration matchmaking_time{};               // how long finding it took (zero when found ahead)
  std::optional<Duration> quorum_to_full;    // we led, every expected peer came: the last one after the quorum
  bool by_quorum = false;                    // we led and formed it by quorum and grace
  // Joins refused since the last step for coming after a quorum's grace had formed their group.
  size_t late_joiners = 0;
};

// The layout of the run's averaged vector, as published in the DHT under wire::vector_schema_key(run_id)
// (the record's format: wire/records.hpp).
using VectorSchema = wire::VectorSchema;

Status publish_schema(dht::Node& dht, const std::string& run_id, const VectorSchema& schema, Duration ttl, Deadline deadline);
// nullopt when nobody published one yet.
Result<std::optional<VectorSchema>> read_schema(dht::Node& dht, const std::string& run_id, Deadline deadline);

// "inproc://dedloc-averager-<id>": bound by every Averager, so that a relay link (client mode) can be set up
// before the averager that will serve behind it.
std::string averager_in_process_endpoint(const crypto::PeerId& self);

class Averager {
 public:
  // `dht` must be started and joined, and outlive the averager.
  Averager(zmq::context_t& context, dht::Node& dht, const crypto::Identity& identity, AveragerOptions options);
  ~Averager();

  // Binds the averaging server (clients bind nothing). kUnavailable when the address cannot be bound.
  Status start();

  // Finds a group for `schema` and averages `vector` (empty for aux) weighted by `weight` (samples).
  // Without a group the vector is left as it is, and the outcome says why. `expected_peers`: how many
  // peers (us included) the caller knows to be in the run, so that a group of all of them forms without
  // waiting out matchmaking_time (Matchmaker::find_group); 0: unknown.
  // `what` names the kind of round: peers average together only vectors of the same kind ("grad":
  // gradients, where aux peers help; "params": a trainer's periodic parameter averaging).
  // A round prepare()d for another `what` is withdrawn first. Weight 0 takes part without contributing
  // (AllReduce::run): `vector` must then be finite. `answer` overrides AveragerOptions::all_reduce.answer
  // for this round (a trainer averages its parameters as deltas, its gradients as the identical average).
  Result<StepOutcome> step(const VectorSchema& schema, std::span<float> vector, double weight,
                           size_t expected_peers = 0, const std::string& what = "grad",
                           std::optional<wire::PartAnswer> answer = std::nullopt);

  // The group the last step() averaged in; nullopt when it formed none (or before the first). For another
  // round among its members without matchmaking: Group::derived, then broadcast().
  const std::optional<Group>& last_group() const { return last_group_; }
  // Holds the parts members of `group` send before we run its round (AllReduce::expect): for a member
  // that has something else to do first (the broadcaster of a derived group, averaging elsewhere).
  void expect(const Group& group) { all_reduce_->expect(group); }
  // One member of `group` (every member runs it, no matchmaking) hands its vector to the others: they end
  // with exactly its values (an all-reduce in which only it weighs, its values taken as they are, and
  // nothing else summed). The broadcaster passes `weight` > 0, which every member's outcome then carries
  // (AllReduceResult::weight: a figure it tells them); a receiver passes 0, and waits for the
  // broadcaster's first part as long as the configured averaging_timeout (it may still be averaging
  // elsewhere; liveness pings end the wait if it is gone). Every member's round, the broadcaster's
  // included, lasts at most the configured averaging_timeout, not the learned one. A part that fails
  // leaves a receiver's values there as they were (AllReduceResult::unaveraged: a receiver fetches those
  // ranges from a broadcaster that kept its values, keep_result and fetch_result_from).
  Result<StepOutcome> broadcast(const Group& group, std::span<float> vector, double weight);
  const crypto::PeerId& id() const { return self_; }

  // A finished round's result, for members that missed the round (avg/round_result.hpp). After a `what`
  // round that averaged everything, hold_result keeps `vector` as its result, `contributions` weighed in,
  // and lists us as its holder for a minute (a client, which nobody can dial, holds nothing). A member
  // that missed the round fetches it into `vector` with fetch_result, from one that holds it (with more
  // than `more_than` contributions); kTimeout when none could be had by `deadline` (`vector` may then hold
  // part of it).
  void hold_result(const std::string& what, const VectorSchema& schema, std::span<const float> vector,
                   std::uint64_t contributions);
  // `none_coming`: fetch_round_result's.
  Result<FetchedResult> fetch_result(const std::string& what, const VectorSchema& schema, std::span<float> vector,
                                     Deadline deadline, std::uint64_t more_than = 0,
                                     const std::function<bool()>& none_coming = {});
  // For a broadcaster (broadcast()), before it hands `vector` on: keeps it as `what`'s result, unlisted (a
  // result already held for `what` stays as it is: the same values), so that receivers can mend what the
  // hand-on did not bring them with fetch_result_from. A client keeps nothing.
  void keep_result(const std::string& what, const VectorSchema& schema, std::span<const float> vector,
                   std::uint64_t contributions);
  // The `ranges` of `what`'s result from a holder listed with exactly `contributions` (fetch_round_result_ranges).
  Result<FetchedResult> fetch_result_ranges(const std::string& what, const VectorSchema& schema,
                                            std::span<float> vector, const ElementRanges& ranges,
                                            std::uint64_t contributions, Deadline deadline);
  // The `ranges` of `what`'s result from `holder`, a member known to hold it (avg/round_result.hpp).
  Result<FetchedResult> fetch_result_from(const Member& holder, const std::string& what, const VectorSchema& schema,
                                          std::span<float> vector, const ElementRanges& ranges, Deadline deadline);

  // Matchmaking ahead of time (docs/architecture.md): starts looking for a group for the `what` round in the
  // background and returns at once, so that the caller keeps computing while the group forms; step() for
  // the same `what` then averages in the group found (or, if none formed, looks again as usual). Members
  // that step before us send their parts, which our all-reduce holds until we step (AllReduce::expect).
  // Does nothing while the same round is prepared; a round prepared for another `what` is withdrawn
  // first. Not thread-safe: prepare, step and withdraw belong to one caller thread.
  void prepare(const VectorSchema& schema, size_t expected_peers, const std::string& what);
  // The round prepare() is looking for or found a group for; empty when none.
  const std::string& prepared_round() const;
  // Where prepare()'s search for the prepared round stands (kNone: nothing prepared); never blocks.
  enum class AheadSearch { kNone, kSearching, kFound, kNotFound };
  AheadSearch ahead_search() const;
  // Gives up the prepared round: if a group formed, we still serve it, contributing nothing (weight 0), in
  // the background, so that its members are not left waiting out their sender timeout for us. Its hand-on
  // (Group::hand_on), which we will not run, is refused at once (AllReduce::forgo).
  void withdraw();

  // For a peer shutting down (from any thread, also while step() or a download on client() waits on
  // another): matchmaking in progress and every later search end with kCancelled, an all-reduce in
  // progress gives up, and our RPCs in flight fail at once (net::Client::cancel_pending; calls made later
  // are not affected, so call it again while something may still be waiting). Idempotent.
  void interrupt();
  // For a peer leaving gracefully: matchmaking in progress (a step's or a search ahead) and every later
  // search end with kCancelled, and matchmaking's RPCs in flight fail at once, but an all-reduce in
  // progress runs to its end: its group waits for our share, matchmaking's does not yet. Idempotent;
  // interrupt() still ends everything.
  void stop_matchmaking();

  // The deadline of the all-reduces of later step()s (AveragerOptions::averaging_timeout at start); the
  // trainer sets it per round from what it observed (collab/deadline_estimator.hpp). The caller thread's.
  void set_averaging_timeout(Duration timeout) { options_.averaging_timeout = timeout; }
  // Likewise the matchmaking time and quorum grace of later searches (Matchmaker::set_times), and the
  // all-reduce's sender, reducer and liveness timeouts (AllReduceOptions). The caller thread's.
  void set_matchmaking_times(Duration matchmaking_time, Duration grace);
  Duration matchmaking_time() const { return options_.matchmaking_time; }
  // Whether each key of later searches holds one group (a group bucket's: MatchmakingOptions::
  // one_group_per_key): a search that learns it formed without us ends at once, with no group
  // (StepOutcome::formed_without_us). The caller thread's.
  void set_one_group_per_key(bool one) { matchmaker_->set_one_group_per_key(one); }
  void set_part_timeouts(Duration sender_timeout, Duration reducer_timeout, Duration liveness_timeout);
  // A client's address through its relay, announced with its joins so that its groups can ping it
  // (Matchmaker::set_relay_address). Thread-safe.
  void set_relay_address(std::string address);

  std::string endpoint() const;
  // Where others dial our averaging server: --announce, or the bound endpoint with a wildcard host replaced
  // by the host our DHT node advertises. Empty for clients.
  std::string dialable_endpoint() const;
  // Where a relay link in this process (same ZeroMQ context) hands forwarded requests to our server,
  // skipping a loopback TCP hop: averager_in_process_endpoint(our id).
  std::string in_process_endpoint() const;
  // The averager's RPC server and client, to serve more on the same port (a trainer's state downloads):
  // register handlers before start().
  net::Server& server() { return *server_; }
  net::Client& client() { return *client_; }

 private:
  zmq::context_t& context_;
  dht::Node& dht_;
  crypto::PeerId self_;
  AveragerOptions options_;
  // options_.averaging_timeout as configured, before set_averaging_timeout() learned another: how long an
  // aux peer waits for the senders to begin (AllReduceOptions::senders_start_within).
  const Duration configured_averaging_timeout_;
  std::unique_ptr<net::Server> server_;
  std::unique_ptr<net::Client> client_;
  std::unique_ptr<AllReduce> all_reduce_;
  std::unique_ptr<Matchmaker> matchmaker_;
  std::optional<Group> last_group_;  // the group of the last step(), if it formed one
  std::unique_ptr<RoundResultShelf> results_;

  // The all-reduce of `group` (step()'s and broadcast()'s alike) with `round` to run, its group and timing
  // filled into `outcome`.
  Status run_round(const Group& group, std::span<float> vector, double weight, const AllReduceOptions& options,
                   Duration round, StepOutcome& outcome);

  struct Prepared {
    std::string what;
    VectorSchema schema;
    std::future<Result<Group>> group;  // the background search
    std::shared_ptr<std::atomic<bool>> found;  // set by the search when it found a group (before it returns)
  };
  std::optional<Prepared> prepared_;
  std::future<void> withdrawn_;       // a withdrawn group's round, served without contributing
  // All-reduces running now (a step's, a withdrawn round's): their parts share the client with
  // matchmaking's requests, which stop_matchmaking() must not cancel then.
  std::mutex all_reduces_mutex_;
  size_t all_reduces_ = 0;
  class AllReduceRunning;
};

}  // namespace dedloc::avg
