#include "dedloc/avg/averager.hpp"

namespace dedloc::avg {

Status publish_schema(dht::Node& dht, const std::string& run_id, const VectorSchema& schema, Duration ttl,
                      Deadline deadline) {
  double expiration = SystemClock::instance().unix_seconds() + std::chrono::duration<double>(ttl).count();
  auto stored = dht.store(wire::vector_schema_key(run_id), std::nullopt, wire::encode_vector_schema(schema), expiration,
                          deadline);
  return stored.status();
}

Result<std::optional<VectorSchema>> read_schema(dht::Node& dht, const std::string& run_id, Deadline deadline) {
  const std::string key = wire::vector_schema_key(run_id);
  auto record = dht.get(key, dht::GetMode::kLatest, deadline);
  if (!record) return record.status();
  if (!record->has_value() || (*record)->entries.empty()) return std::optional<VectorSchema>();
  auto schema = wire::decode_vector_schema((*record)->entries.front().value);
  if (!schema) return schema.status().with_context(key);
  return std::optional<VectorSchema>(std::move(*schema));
}

Averager::Averager(zmq::context_t& context, dht::Node& dht, const crypto::Identity& identity, AveragerOptions options)
    : context_(context),
      dht_(dht),
      self_(identity.peer_id()),
      options_(std::move(options)),
      configured_averaging_timeout_(options_.averaging_timeout) {
  // A client-mode peer still needs a socket for the handlers' sake, but nobody can (or will) dial it.
  std::string listen = options_.role == AvgRole::kClient ? "tcp://127.0.0.1:0" : options_.listen;
  net::ServerOptions serving{listen, self_, {}, options_.log};
  // Behind NAT, requests arrive through a relay, whose link in this process hands them over in-process.
  serving.also_listen = {in_process_endpoint()};
  server_ = std::make_unique<net::Server>(context_, serving);
  // The peers an averager waits on are few (its group's members, leaders, donors), and one that died is
  // better known at once: a ping or a part to it fails then, not at its deadline (net/client.hpp).
  net::ClientOptions calling{self_, {}, std::chrono::seconds(60), options_.log};
  calling.fail_when_refused = true;
  client_ = std::make_unique<net::Client>(context_, calling);
  all_reduce_ = std::make_unique<AllReduce>(*server_, *client_, self_, options_.log);
  MatchmakingOptions matchmaking;
  matchmaking.group_key = options_.run_id + "_grad";
  matchmaking.role = options_.role;
  matchmaking.bandwidth = options_.bandwidth;
  matchmaking.equal_shares = options_.equal_shares;
  matchmaking.target_group_size = options_.target_group_size;
  matchmaking.min_group_size = options_.min_group_size;
  matchmaking.matchmaking_time = options_.matchmaking_time;
  matchmaking.grace = options_.grace;
  matchmaking.part_elements = options_.part_elements;
  matchmaking.announce = options_.announce;
  matchmaker_ = std::make_unique<Matchmaker>(dht_, *server_, *client_, self_, matchmaking, options_.log);
  results_ = std::make_unique<RoundResultShelf>(*server_, dht_);
}

Averager::~Averager() {
  // The server first: its handlers point into the matchmaker and the all-reduce. Joiners the matchmaker
  // still holds then see their requests time out, as they would with any peer that left.
  server_->stop();
  // Then the background work (a prepared search, a withdrawn round), which uses both: told to end now,
  // with our requests in flight failed, it returns within milliseconds.
  matchmaker_->stop();
  all_reduce_->stop();
  // A search ahead may wait on a leader's answer to our join request: failed now, not at its deadline.
  client_->cancel_pending();
  prepared_.reset();
  if (withdrawn_.valid()) withdrawn_.wait();
  matchmaker_.reset();
}

Status Averager::start() { return server_->start(); }

void Averager::interrupt() {
  matchmaker_->stop();
  all_reduce_->stop();
  client_->cancel_pending();
}

// Counts an all-reduce as running for its lifetime (see all_reduces_).
class Averager::AllReduceRunning {
 public:
  explicit AllReduceRunning(Averager& averager) : averager_(averager) {
    std::lock_guard lock(averager_.all_reduces_mutex_);
    ++averager_.all_reduces_;
  }
  ~AllReduceRunning() {
    std::lock_guard lock(averager_.all_reduces_mutex_);
    --averager_.all_reduces_;
  }
  AllReduceRunning(const AllReduceRunning&) = delete;
  AllReduceRunning& operator=(const AllReduceRunning&) = delete;

 private:
  Averager& averager_;
};

void Averager::stop_matchmaking() {
  std::lock_guard lock(all_reduces_mutex_);
  matchmaker_->stop();
  // A round that starts after this sends its parts after the cancel, which does not touch later calls.
  if (all_reduces_ == 0) client_->cancel_pending();
}

void Averager::set_matchmaking_times(Duration matchmaking_time, Duration grace) {
  options_.matchmaking_time = matchmaking_time;
  matchmaker_->set_times(matchmaking_time, grace);
}

void Averager::set_part_timeouts(Duration sender_timeout, Duration reducer_timeout, Duration liveness_timeout) {
  options_.all_reduce.sender_timeout = sender_timeout;
  options_.all_reduce.reducer_timeout = reducer_timeout;
  options_.all_reduce.liveness_timeout = liveness_timeout;
}

void Averager::set_relay_address(std::string address) { matchmaker_->set_relay_address(std::move(address)); }

std::string Averager::endpoint() const { return server_->endpoint(); }

std::string averager_in_process_endpoint(const crypto::PeerId& self) {
  return "inproc://dedloc-averager-" + self.to_string();
}

std::string Averager::in_process_endpoint() const { return averager_in_process_endpoint(self_); }

std::string Averager::dialable_endpoint() const {
  return averaging_endpoint(options_.role, options_.announce, *server_, dht_);
}

Result<StepOutcome> Averager::step(const VectorSchema& schema, std::span<float> vector, double weight,
                                   size_t expected_peers, const std::string& what,
                                   std::optional<wire::PartAnswer> answer) {
  if (prepared_ && (prepared_->what != what || prepared_->schema.hash != schema.hash)) withdraw();
  StepOutcome outcome;
  outcome.late_joiners = matchmaker_->take_late_joiners();
  std::optional<Result<Group>> group;
  if (prepared_) {
    // A group we lead forms now, aux peers that joined meanwhile included, once the peers the step expects
    // are in (its count, not the search's: our caller knows more of the run now).
    matchmaker_->release(expected_peers > 0 ? std::optional<size_t>(expected_peers) : std::nullopt);
    group = prepared_->group.get();
    prepared_.reset();
    outcome.found_ahead = group->is_ok();
  }
  // Nothing prepared, or the search ahead found nobody: the others may be stepping now, look again. Not
  // when it found the key's one group formed without us: it still is. Nor when nobody but us is expected:
  // nobody steps now that did not look then (a trainer alone in its group bucket, a window later than the
  // others for its next round each time it looked again).
  const auto formed_without_us = [&] { return group && !*group && group->status().code() == Code::kRefused; };
  const bool found_nobody = group && !*group && group->status().code() == Code::kTimeout;
  if (!outcome.found_ahead && !formed_without_us() && !(found_nobody && expected_peers == 1)) {
    group = matchmaker_->find_group(schema.hash, schema.length, expected_peers, options_.run_id + "_" + what);
  }
  last_group_.reset();
  if (!*group) {
    if (group->status().code() != Code::kTimeout && !formed_without_us()) return group->status();
    outcome.why_alone = group->status().message();
    outcome.formed_without_us = formed_without_us();
    return outcome;
  }
  const auto search = matchmaker_->last_search();
  if (!outcome.found_ahead) outcome.matchmaking_time = search.took;  // ahead, it includes our own computing
  outcome.quorum_to_full = search.quorum_to_full;
  outcome.by_quorum = search.by_quorum;
  AllReduceOptions all_reduce = options_.all_reduce;
  if (answer) all_reduce.answer = *answer;
  // Adding no weight, we may be in a group found ahead that the senders reach only once their batch is
  // complete: the round starts with their first part. An aux peer waits for it as long as its configured
  // timeout (the trainers' ETA may be off by seconds); a trainer at weight 0 (it downloads meanwhile, and
  // may come back to a round already over, whose members will send nothing more) as long as a round lasts.
  if (!(weight > 0)) {
    all_reduce.senders_start_within =
        options_.role == AvgRole::kAux ? configured_averaging_timeout_ : options_.averaging_timeout;
  }
  last_group_ = **group;
  DEDLOC_RETURN_IF_ERROR(run_round(**group, vector, weight, all_reduce, options_.averaging_timeout, outcome));
  return outcome;
}

Status Averager::run_round(const Group& group, std::span<float> vector, double weight, const AllReduceOptions& options,
                           Duration round, StepOutcome& outcome) {
  outcome.group_size = group.size();
  outcome.group_id = group.id();
  for (const auto& member : group.members()) outcome.members.push_back(member.id);
  outcome.senders = group.senders().size();
  const auto began = std::chrono::steady_clock::now();
  const Deadline deadline = Deadline::after(round);
  AllReduceRunning running(*this);
  auto result = all_reduce_->run(group, vector, weight, options, deadline);
  if (!result) return result.status();
  outcome.all_reduce = std::move(*result);
  outcome.all_reduce_time = std::chrono::steady_clock::now() - began - outcome.all_reduce.waited_for_senders;
  outcome.all_reduce_timed_out = outcome.all_reduce_time >= deadline.at - began;
  return Status();
}

Result<StepOutcome> Averager::broadcast(const Group& group, std::span<float> vector, double weight) {
  StepOutcome outcome;
  AllReduceOptions all_reduce = options_.all_reduce;
  all_reduce.answer = wire::PartAnswer::kAverage;
  all_reduce.order_key = 0;  // summed in a fixed order: one weighted contribution, taken as it is
  // Every member waits as long as a round may take at most, the broadcaster too: a reducer answers the
  // broadcaster's parts only once every member's (empty) copies came or their senders were banned, and a
  // broadcaster that gave up first would leave the receivers holding its values in some ranges and their
  // own in others, a mixture that differs from member to member. Members found gone end the waits sooner.
  const Duration round = configured_averaging_timeout_;
  if (!(weight > 0)) {
    // The broadcaster may still be averaging elsewhere: our reducer's clocks start at its first part, and
    // our parts wait for their answers.
    all_reduce.senders_start_within = configured_averaging_timeout_;
    all_reduce.reducer_timeout = std::max(all_reduce.reducer_timeout, configured_averaging_timeout_);
  }
  DEDLOC_RETURN_IF_ERROR(run_round(group, vector, weight, all_reduce, round, outcome));
  return outcome;
}

void Averager::hold_result(const std::string& what, const VectorSchema& schema, std::span<const float> vector,
                           std::uint64_t contributions) {
  if (options_.role == AvgRole::kClient) return;
  // Long enough for a member a few rounds late; a holder serves only its latest round anyway.
  constexpr Duration kListed = std::chrono::seconds(60);
  results_->hold(options_.run_id + "_" + what, schema.hash, vector, contributions,
                 net::PeerAddress{dialable_endpoint(), self_}, kListed);
}

Result<FetchedResult> Averager::fetch_result(const std::string& what, const VectorSchema& schema,
                                             std::span<float> vector, Deadline deadline, std::uint64_t more_than,
                                             const std::function<bool()>& none_coming) {
  return fetch_round_result(dht_, *client_, options_.run_id + "_" + what, schema.hash, vector, deadline,
                            options_.role == AvgRole::kClient ? "" : dialable_endpoint(), more_than, none_coming);
}

void Averager::keep_result(const std::string& what, const VectorSchema& schema, std::span<const float> vector,
                           std::uint64_t contributions) {
  const std::string round = options_.run_id + "_" + what;
  if (options_.role == AvgRole::kClient || results_->holds(round)) return;
  results_->keep(round, schema.hash, vector, contributions);
}

Result<FetchedResult> Averager::fetch_result_ranges(const std::string& what, const VectorSchema& schema,
                                                    std::span<float> vector, const ElementRanges& ranges,
                                                    std::uint64_t contributions, Deadline deadline) {
  return fetch_round_result_ranges(dht_, *client_, options_.run_id + "_" + what, schema.hash, vector, ranges,
                                   contributions, deadline,
                                   options_.role == AvgRole::kClient ? "" : dialable_endpoint());
}

Result<FetchedResult> Averager::fetch_result_from(const Member& holder, const std::string& what,
                                                  const VectorSchema& schema, std::span<float> vector,
                                                  const ElementRanges& ranges, Deadline deadline) {
  if (holder.endpoint.empty()) return error(Code::kUnavailable, "a client holds no result");
  return fetch_round_result_from(*client_, net::PeerAddress{holder.endpoint, holder.id}, options_.run_id + "_" + what,
                                 schema.hash, vector, ranges, deadline);
}

void Averager::prepare(const VectorSchema& schema, size_t expected_peers, const std::string& what) {
  if (prepared_ && prepared_->what == what && prepared_->schema.hash == schema.hash) return;
  withdraw();  // a round prepared for another `what` (the caller moved on): served, not left waiting
  matchmaker_->hold();  // here, not in the search's thread: our step may come before that thread runs
  auto found = std::make_shared<std::atomic<bool>>(false);
  prepared_ = Prepared{what, schema, std::async(std::launch::async, [this, schema, expected_peers, what, found] {
                         auto group = matchmaker_->find_group(schema.hash, schema.length, expected_peers,
                                                              options_.run_id + "_" + what);
                         if (group) all_reduce_->expect(*group);  // members that step before us: hold their parts
                         if (group) found->store(true);
                         return group;
                       }), found};
}

const std::string& Averager::prepared_round() const {
  static const std::string kNone;
  return prepared_ ? prepared_->what : kNone;
}

Averager::AheadSearch Averager::ahead_search() const {
  if (!prepared_) return AheadSearch::kNone;
  if (prepared_->found->load()) return AheadSearch::kFound;
  // `found` is set before the search returns: a search that returned without it found nobody.
  if (prepared_->group.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return AheadSearch::kSearching;
  return prepared_->found->load() ? AheadSearch::kFound : AheadSearch::kNotFound;
}

void Averager::withdraw() {
  if (!prepared_) return;
  matchmaker_->release();
  auto group = prepared_->group.get();  // bounded by matchmaking_time (and a join's grace)
  const std::string what = prepared_->what;
  prepared_.reset();
  if (!group) return;
  // The group's trainers may go on to hand a cross-bucket result on among themselves (train/trainer.cpp), a
  // round that waits for every one of them: we will not be in it, and say so to whoever asks.
  if (auto hand_on = group->hand_on()) all_reduce_->forgo(hand_on->id());
  if (withdrawn_.valid()) withdrawn_.wait();  // the all-reduce runs one round at a time anyway
  // The options as they are now: the caller may set the next round's timeouts while this one runs.
  withdrawn_ = std::async(std::launch::async, [this, what, group = std::move(*group), all_reduce = options_.all_reduce,
                                               timeout = options_.averaging_timeout] {
    // Zeros at weight 0: our reducer averages its share of the others' vectors, and we add nothing.
    std::vector<float> nothing(group.member(*group.index_of(self_)).sends() ? group.length() : 0, 0.0f);
    AllReduceRunning running(*this);
    auto served = all_reduce_->run(group, nothing, 0.0, all_reduce, Deadline::after(timeout));
    Logger::Line(options_.log, LogLevel::kDebug, "avg")
        << "withdrew from the '" << what << "' round; served its group of " << group.size() << " without contributing"
        << (served ? "" : ": " + served.status().to_string());
  });
}

}  // namespace dedloc::avg
