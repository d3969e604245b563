#include "dedloc/train/trainer.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <deque>
#include <fstream>
#include <future>
#include <mutex>
#include <sstream>
#include <thread>
#include <utility>

#include "dedloc/avg/background_parameters_hash.hpp"
#include "dedloc/avg/codec.hpp"
#include "dedloc/collab/checkpoint.hpp"
#include "dedloc/collab/averaging_timeouts.hpp"
#include "dedloc/collab/deadline_estimator.hpp"
#include "dedloc/collab/known_gone.hpp"
#include "dedloc/collab/divergence.hpp"
#include "dedloc/collab/group_buckets.hpp"
#include "dedloc/collab/step_outcome.hpp"
#include "dedloc/core/bytes.hpp"
#include "dedloc/crypto/hash.hpp"
#include "dedloc/dht/record.hpp"
#include "dedloc/train/gradient_buffer.hpp"
#include "dedloc/train/outer_optimizer.hpp"
#include "dedloc/train/swarm_presence.hpp"
#include "dedloc/train/torch_errors.hpp"

namespace dedloc::train {

namespace {

constexpr std::string_view kLog = "train";
// A failed download is retried after this, doubling with each failure up to kLastCatchUpRetry: a donor
// that was busy or just gone is soon replaced, while a swarm nobody can download from is not hammered.
constexpr Duration kFirstCatchUpRetry = std::chrono::seconds(1);
constexpr Duration kLastCatchUpRetry = std::chrono::seconds(10);
// Leaving gracefully, how long our step waits for the group sought ahead to form (Trainer::round_interruptible).
constexpr Duration kGroupFormingWhileLeaving = std::chrono::seconds(2);
// Sitting out a missed round, how often the progress records are read again to see whether it is over.
constexpr Duration kMissedRoundPoll = std::chrono::milliseconds(250);
// How often a peer waiting for a due batch looks at the swarm's estimate (a local extrapolation: cheap).
constexpr Duration kDueBatchPoll = std::chrono::milliseconds(10);

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

bool all_finite(std::span<const float> values) {
  for (float v : values) {
    if (!std::isfinite(v)) return false;
  }
  return true;
}

TrainerEvent::Kind event_kind(collab::StepOutcome outcome) {
  switch (outcome) {
    case collab::StepOutcome::kAveraged: return TrainerEvent::Kind::kAveraged;
    case collab::StepOutcome::kAlone: return TrainerEvent::Kind::kAlone;
    case collab::StepOutcome::kLocal: return TrainerEvent::Kind::kLocal;
    case collab::StepOutcome::kSkippedLocal:
    case collab::StepOutcome::kSkippedAverage: return TrainerEvent::Kind::kSkipped;
  }
  return TrainerEvent::Kind::kSkipped;
}

}  // namespace

const char* to_string(TrainerEvent::Kind kind) {
  switch (kind) {
    case TrainerEvent::Kind::kAveraged: return "averaged";
    case TrainerEvent::Kind::kAlone: return "alone";
    case TrainerEvent::Kind::kLocal: return "local";
    case TrainerEvent::Kind::kSkipped: return "skipped";
    case TrainerEvent::Kind::kLoadedState: return "loaded_state";
  }
  return "?";
}

// The mean micro-batch loss of each epoch, for logs, events and the metrics record. Unlike the gradients,
// it survives a state download in the middle of an epoch.
struct LossTally {
  double sum = 0;
  std::uint64_t micro_batches = 0;
  double last = 0;        // of the epoch that ended last
  bool has_last = false;  // an epoch has ended: `last` means something

  void add(double loss) {
    sum += loss;
    ++micro_batches;
  }
  void end_epoch() {
    last = micro_batches ? sum / static_cast<double>(micro_batches) : 0;
    has_last = micro_batches > 0;
    sum = 0;
    micro_batches = 0;
  }
};

// The live tensors of the training state, under the names snapshot() gives them: parameters, buffers and
// optimizer statistics under "param/", "buffer/", "optim/".
struct StateTensors {
  std::vector<avg::TensorSpec> specs;
  std::vector<torch::Tensor> tensors;
  Bytes schema;  // avg::schema_hash(specs): what donors must match

  void add(const std::string& prefix, const NamedTensors& named) {
    for (const auto& [name, tensor] : named) {
      specs.push_back({prefix + name, shape_of(tensor)});
      tensors.push_back(tensor);
    }
    schema = avg::schema_hash(specs);
  }
};

// Everything with torch types or network objects, kept out of the header.
// Delayed mode: a step whose gradients are being averaged in the background while the next batch computes.
struct DelayedStep {
  collab::StepFacts facts;
  Trainer::StepInputs inputs;
  std::future<GradientRound> round;
};

struct Trainer::Parts {
  Parts(zmq::context_t& context, dht::Node& node, const crypto::Identity& identity, const NamedTensors& parameters,
        SwarmPresenceOptions presence, const CollaborationOptions& collaboration)
      : gradients(parameters, collaboration.mode == CollaborationMode::kDiloco ? "pseudo-gradient/" : ""),
        swarm(context, node, identity, std::move(presence)) {
    if (collaboration.mode == CollaborationMode::kDiloco) outer = std::make_unique<OuterOptimizer>(parameters, collaboration);
  }

  GradientBuffer gradients;
  std::unique_ptr<OuterOptimizer> outer;     // DiLoCo only: θ_outer and the outer momentum
  std::unique_ptr<DelayedStep> delayed;      // delayed mode: the step in flight, if any
  std::optional<collab::DeadlineEstimator> round_deadline;  // with adaptive_averaging_timeout
  std::optional<collab::AveragingTimeouts> waits;           // ... and matchmaking's and the parts' waits
  std::optional<collab::KnownGone> gone;                    // ... and trainers a round found gone
  collab::DivergenceWatch divergence;        // with collaboration.resync_divergent
  avg::BackgroundParametersHash params_hash;  // of the state we serve, for our progress record
  StateTensors state;
  SwarmPresence swarm;
  LossTally loss;
  collab::ThroughputEma ema;
  std::ofstream samples_log;
  TimePoint next_catch_up{};                 // no download attempt before this (backoff)
  double last_download_seconds = 0;          // how long our latest state download took
  // A round taken part in at weight 0 while the download it follows runs (Trainer::start_zero_weight_round).
  struct ZeroWeightRound {
    std::uint64_t epoch = 0;    // its average steps the state of this epoch to the next
    std::vector<float> vector;  // our zeros, then the group's average
    std::future<GradientRound> outcome;
  };
  std::optional<ZeroWeightRound> zero_round;
  // The epoch whose state we loaded after the swarm's batch for it was complete (Trainer::sit_out_late_round).
  std::optional<std::uint64_t> loaded_late_at;
  Duration catch_up_retry = kFirstCatchUpRetry;
  std::uint64_t states_loaded_at_start = 0;  // a joining peer's first download, for run()'s report
  // Joining a running swarm: the epoch of the state we loaded then (0: we started from our own), in our
  // progress record so that nobody counts us in that round's buckets (collab/group_buckets.hpp).
  bool joining = true;
  std::uint64_t joined_at = 0;
  std::vector<std::string> resync_exclude;   // donors whose parameters were not the majority's either
  std::uint64_t rounds_averaged = 0;         // gradient rounds averaged with a group, for the metrics record
  // The bucket each round averages in (collab/group_buckets.hpp), decided once per round: a search ahead
  // and the step must look under the same key even if the swarm changed in between. Guarded: a delayed
  // step's round asks from its own thread.
  std::mutex bucket_mutex;
  std::deque<std::pair<std::string, collab::GroupBucket>> buckets;  // (round, its bucket): the last few, oldest first
  std::uint64_t bytes_sent = 0;              // averaging payload bytes sent, every round
  std::uint64_t samples_computed = 0;
  std::uint64_t inner_steps = 0;             // DiLoCo: inner steps since the last outer step was applied
  std::uint64_t inner_steps_per_outer = 0;   // DiLoCo: those of the last outer step, for the metrics record
  double compute_seconds = 0;
  double last_micro_batch_seconds = 0;  // how long our latest micro-batch took
  // Waiting for a due batch (Trainer::wait_for_due_batch): the epoch waited in and the seconds waited in it.
  std::uint64_t due_batch_epoch = 0;
  double due_batch_waited = 0;
  // The loop's next pass looks at the swarm before computing a micro-batch: after waiting for a due batch,
  // and after loading a state (the group of the round we loaded may be forming now; a micro-batch first
  // would look for it a micro-batch late, past the moment its leader closes it).
  bool look_before_computing = false;
  double started = 0;
  std::map<std::string, std::string> task_entries;  // Task::state_entries(), asked once
};

namespace {

SwarmPresenceOptions presence_options(const TrainerOptions& options) {
  SwarmPresenceOptions presence;
  presence.run_id = options.run_id;
  presence.averaging = options.averaging;
  presence.relaying = options.relaying;
  presence.target_batch_size = options.training.target_batch_size;
  presence.record_ttl = options.record_ttl;
  presence.log = options.log;
  return presence;
}

}  // namespace

Trainer::Trainer(zmq::context_t& context, dht::Node& node, const crypto::Identity& identity, Task& task,
                 Optimizer& optimizer, TrainerOptions options)
    : node_(node), task_(task), optimizer_(optimizer), options_(std::move(options)) {
  auto parameters = task_.named_parameters();
  parts_ = std::make_unique<Parts>(context, node, identity, parameters, presence_options(options_), options_.collaboration);
  auto& p = *parts_;
  // DiLoCo: the state is the swarm's θ_outer and its momentum; this peer's inner steps are its own.
  p.state.add("param/", p.outer ? p.outer->outer_parameters() : parameters);
  p.state.add("buffer/", task_.named_buffers());
  p.state.add("optim/", optimizer_.state());
  if (p.outer) p.state.add("outer_momentum/", p.outer->momentum());
  if (options_.adaptive_averaging_timeout) {
    p.round_deadline.emplace(collab::DeadlineEstimatorOptions{.ceiling = options_.averaging.averaging_timeout});
    p.waits.emplace(collab::AveragingTimeoutsOptions{.matchmaking_ceiling = options_.averaging.matchmaking_time,
                                                     .sender_ceiling = options_.averaging.all_reduce.sender_timeout,
                                                     .reducer_ceiling = options_.averaging.all_reduce.reducer_timeout});
    p.gone.emplace(options_.record_ttl);
  }
  p.task_entries = task_.state_entries();
  if (!options_.samples_log.empty()) p.samples_log.open(options_.samples_log, std::ios::app);
}

Trainer::~Trainer() = default;  // SwarmPresence stops its threads first

avg::TrainingState Trainer::snapshot() const {
  const auto& p = *parts_;
  auto state = avg::TrainingState::with_tensors(p.state.specs);
  if (!state) {  // names come from the model; a clash is a programming error worth a loud message
    Logger::Line(options_.log, LogLevel::kError, kLog) << "cannot describe the training state: " << state.status().to_string();
    return {};
  }
  for (size_t i = 0; i < p.state.tensors.size(); ++i) copy_to_floats(p.state.tensors[i], state->tensor(i));
  state->metadata.epoch = epoch_;
  state->metadata.entries["lr"] = learning_rate(options_.schedule, epoch_);
  // The run id, recipe and model travel with the state, so that whoever downloads it (a joiner, or
  // `dedloc-avg export`) knows what it holds; so does what the task publishes (ALBERT's shape).
  for (const auto& [key, value] : options_.checkpoint_extra) state->metadata.entries[key] = value;
  for (const auto& [key, value] : p.task_entries) state->metadata.entries[key] = value;
  return std::move(*state);
}

void Trainer::serve_current_state() {
  auto& p = *parts_;
  auto state = std::make_shared<const avg::TrainingState>(snapshot());
  p.params_hash.submit(state);  // our record carries the hash once it is ready, a moment into the next batch
  p.swarm.serve_state(std::move(state));
}

void Trainer::describe_parameters(TrainerEvent& event) const {
  crypto::Hasher hasher;
  double squares = 0;
  std::vector<float> values;
  for (const auto& parameter : parts_->gradients.parameters()) {
    values.resize(static_cast<size_t>(parameter.numel()));
    copy_to_floats(parameter, values);
    hasher.update(ByteSpan(reinterpret_cast<const std::uint8_t*>(values.data()), values.size() * sizeof(float)));
    for (float v : values) squares += static_cast<double>(v) * v;
  }
  event.params_hash = hasher.finish_hex().substr(0, 16);
  event.params_norm = std::sqrt(squares);
}

Status Trainer::load_state(const avg::TrainingState& state) {
  auto& p = *parts_;
  const auto& mine = p.state.specs;
  if (state.schema_hash() != p.state.schema) {
    // Name the first difference: that is what a person needs to fix a recipe.
    std::string detail = "a different tensor count (" + std::to_string(state.size()) + " vs " + std::to_string(mine.size()) + ")";
    for (size_t i = 0; i < std::min(state.size(), mine.size()); ++i) {
      if (!(state.tensors()[i] == mine[i])) {
        detail = "'" + state.tensors()[i].name + "' where this model has '" + mine[i].name + "' (or another shape)";
        break;
      }
    }
    return error(Code::kRefused, "the state is for another model or optimizer: " + detail);
  }
  DEDLOC_RETURN_IF_ERROR(guard_torch("loading a training state", [&] {
    for (size_t i = 0; i < p.state.tensors.size(); ++i) copy_from_floats(state.tensor(i), p.state.tensors[i]);
    if (p.outer) p.outer->restart_local();  // the inner steps start from the loaded θ_outer
    p.inner_steps = 0;
  }));
  epoch_ = state.epoch();
  p.gradients.clear();  // computed on the parameters we had
  serve_current_state();
  return Status();
}

Status Trainer::start(const std::function<bool()>& should_stop) {
  should_stop_ = should_stop;
  return guard_torch("starting", [&] { return start_in_swarm(); });
}

WaitBreaker Trainer::interruptible() {
  return WaitBreaker(should_stop_, [this] { parts_->swarm.averager().interrupt(); });
}

bool Trainer::averaging_cut_short(const collab::StepFacts& facts) const {
  return stopping_now() || (stopping() && facts.averaging != collab::StepAveraging::kGroup);
}

WaitBreaker Trainer::round_interruptible(bool grouped_ahead) {
  if (!leave_now_) return interruptible();
  // Matchmaking ends at the first signal (no group waits for us yet), an all-reduce only when leaving now.
  // A group sought ahead gets a few seconds from the start of our step to form (its leader steps about
  // when we do), and is then left too: its leader may be gone.
  const TimePoint forming_until =
      std::chrono::steady_clock::now() + (grouped_ahead ? kGroupFormingWhileLeaving : Duration::zero());
  return WaitBreaker(should_stop_, [this, forming_until] {
    auto& averager = parts_->swarm.averager();
    if (stopping_now()) {
      averager.interrupt();
    } else if (std::chrono::steady_clock::now() >= forming_until) {
      averager.stop_matchmaking();
    }
  });
}

bool Trainer::grouped_ahead(const std::string& round) const {
  const auto& averager = parts_->swarm.averager();
  const auto search = averager.ahead_search();
  return (search == avg::Averager::AheadSearch::kFound || search == avg::Averager::AheadSearch::kSearching) &&
         averager.prepared_round() == round;
}

bool Trainer::finish_round_before_leaving() {
  auto& p = *parts_;
  if (!leave_now_ || options_.collaboration.mode == CollaborationMode::kDelayed) return false;  // delayed: train_until's end
  const bool grouped = grouped_ahead(round_bucket(collab::gradient_round(epoch_), epoch_).round);
  if (!leave_by_) {
    leave_by_ = std::chrono::steady_clock::now() + options_.averaging.averaging_timeout;
    if (grouped) {
      Logger::Line(options_.log, LogLevel::kInfo, kLog)
          << "leaving after epoch " << epoch_ + 1 << "'s step: our group for it "
          << (p.swarm.averager().ahead_search() == avg::Averager::AheadSearch::kFound ? "formed" : "is forming")
          << " and would wait for our share (at most "
          << std::chrono::duration<double>(options_.averaging.averaging_timeout).count()
          << " s; a second signal leaves now)";
    }
  }
  if (!grouped) return false;
  if (std::chrono::steady_clock::now() < *leave_by_) return true;
  Logger::Line(options_.log, LogLevel::kInfo, kLog) << "epoch " << epoch_ + 1 << "'s step did not start in time: leaving";
  return false;
}

Deadline Trainer::leaving_deadline() const {
  // Stopped by a signal: the operator waits, and an unanswered withdrawal still expires with its TTL.
  return Deadline::after(stopping() ? std::chrono::seconds(1) : std::chrono::seconds(3));
}

bool Trainer::sleep_unless_stopped(TimePoint until) const {
  while (std::chrono::steady_clock::now() < until) {
    if (stopping()) return false;
    std::this_thread::sleep_until(std::min(until, std::chrono::steady_clock::now() + std::chrono::milliseconds(50)));
  }
  return !stopping();
}

Status Trainer::start_in_swarm() {
  auto& p = *parts_;
  DEDLOC_RETURN_IF_ERROR(p.swarm.start());
  // The swarm's model must be ours: compare with the schema the first peers published.
  DEDLOC_RETURN_IF_ERROR(p.swarm.check_schema(p.gradients.schema()));
  serve_current_state();
  p.swarm.tracker().report(local_progress());
  p.swarm.tracker().refresh_now();
  TrainerReport at_start;
  auto caught = catch_up_at_start(at_start);
  p.joining = false;
  p.states_loaded_at_start = at_start.states_loaded;
  if (!caught.is_ok()) {
    p.swarm.withdraw_records(leaving_deadline());  // our progress record says epoch 0: others must not count us
    return caught;
  }
  publish_donor_and_metrics(true);
  return Status();
}

Status Trainer::catch_up_at_start(TrainerReport& report) {
  auto& p = *parts_;
  auto& tracker = p.swarm.tracker();
  for (std::uint64_t attempt = 1;; ++attempt) {
    auto state = tracker.state();
    // Alone, or nobody ahead: our own state is the swarm's.
    if (state.epoch <= epoch_ || p.swarm.others() == 0) return Status();
    if (!sleep_unless_stopped(p.next_catch_up)) break;
    auto caught = catch_up(report);
    if (stopping()) break;
    if (!caught.is_ok()) {
      // Every failure is retried: nobody listed (kNotFound), nobody reachable (kUnavailable), donors that
      // disagree or a deadline; the status says which.
      Logger::Line(options_.log, LogLevel::kWarning, kLog)
          << "the swarm is at epoch " << state.epoch << " and we are at " << epoch_ << ": download attempt "
          << attempt << " failed (" << caught.to_string() << "); not training from our own state, retrying in "
          << std::chrono::duration<double>(p.next_catch_up - std::chrono::steady_clock::now()).count() << " s";
    }
    tracker.report(local_progress());
    tracker.refresh_now();
  }
  return error(Code::kCancelled, "stopped while downloading the swarm's state (at epoch " + std::to_string(epoch_) + ")");
}

collab::PeerProgress Trainer::local_progress() const {
  collab::PeerProgress progress;
  progress.epoch = progress_epoch();
  progress.samples_accumulated = parts_->gradients.samples();
  progress.samples_per_second = parts_->ema.samples_per_second();
  progress.client_mode = options_.averaging.role == avg::AvgRole::kClient;
  progress.bandwidth = options_.averaging.bandwidth;
  progress.compute = parts_->ema.samples_per_second();
  progress.micro_batch = static_cast<std::uint64_t>(std::max<std::int64_t>(0, options_.training.micro_batch_size));
  progress.joined_at = parts_->joined_at;
  // While a delayed step is in flight our parameters are the last epoch's: no hash rather than a wrong one.
  progress.params_hash = parts_->delayed ? 0 : parts_->params_hash.latest();
  if (parts_->round_deadline && parts_->round_deadline->learned()) {
    progress.round_seconds = std::chrono::duration<double>(parts_->round_deadline->median()).count();
    progress.round_mad_seconds = std::chrono::duration<double>(parts_->round_deadline->mad()).count();
  }
  return progress;
}

void Trainer::accumulate(const Batch& batch, double loss) {
  auto& p = *parts_;
  p.gradients.add_micro_batch(batch, options_.training.max_grad_norm, p.samples_log.is_open());
  p.loss.add(loss);
}

void Trainer::average_gradients(collab::StepFacts& facts) {
  auto& p = *parts_;
  p.ema.pause();
  const double began = now_seconds();
  auto round = run_gradient_round(static_cast<double>(p.gradients.samples()));
  facts.round_seconds = now_seconds() - began;
  if (!round.group) write_update(/*again=*/true);  // a failed round may have left the buffer half-averaged
  record_gradient_round(round, facts);
}

void Trainer::seed_round_deadline() {
  auto& p = *parts_;
  // The swarm's figures: our estimate until our own rounds decide, and a floor under it always.
  if (p.round_deadline) collab::follow_swarm_figures(*p.round_deadline, p.swarm.tracker().others_records());
}

namespace {

// After a gradient round that came back partly averaged: zeros where our own gradients stayed. Stepping on
// them would give this member parameters of its own; when a reducer fails every member alike (it died, or
// its answers came after the deadline), each member would leave the round on a model of its own, and no
// set would lead for a resync to repair (a part-time run's swarm split so into 19 hashes at once). With
// zeros, the members that lost the same parts skip that slice of the update alike and stay one model.
void zero_unaveraged(const avg::AllReduceResult& reduced, std::span<float> vector) {
  for (const auto& [begin, end] : reduced.unaveraged) {  // ranges of this vector (AllReduceResult::unaveraged)
    std::fill(vector.begin() + static_cast<std::ptrdiff_t>(begin), vector.begin() + static_cast<std::ptrdiff_t>(end),
              0.0f);
  }
}

// The carriers' round's result, from a carrier that took part (avg/round_result.hpp), into `vector` in
// place of our bucket's own average: what the groups on the swarm's model step with (without our bucket's
// samples). Where it came from and the buckets it holds; nullopt, `vector` as it was, when none was listed
// by `deadline` (a carrier's: a matchmaking window). The wait is that short because where every carrier missed the others (two buckets, their carriers
// seconds apart), each would otherwise wait for a result nobody holds while its group waits for its hand-on
// (waiting to the averaging deadline, 30 s in a run's first rounds, stalled a 16-peer lab run for 40 s).
// With `more_than` > 0 (a carrier whose own carriers' round held that many buckets): only a result holding
// more, and only if one is listed already. `none_coming`: avg::fetch_round_result's.
std::optional<avg::FetchedResult> take_stage_result(avg::Averager& averager, const std::string& stage,
                                                    const avg::VectorSchema& schema, std::span<float> vector,
                                                    Logger::Line& line, std::uint64_t more_than = 0,
                                                    std::optional<Deadline> deadline = std::nullopt,
                                                    const std::function<bool()>& none_coming = {}) {
  std::vector<float> theirs(vector.size());  // aside: a failed fetch may leave part of a result behind
  auto fetched = averager.fetch_result(stage, schema, theirs,
                                       deadline.value_or(Deadline::after(averager.matchmaking_time())), more_than,
                                       none_coming);
  if (!fetched) {
    line << "no result to take (" << fetched.status().to_string() << ")";
    return std::nullopt;
  }
  std::copy(theirs.begin(), theirs.end(), vector.begin());
  line << "took the result of " << fetched->contributions << " bucket(s) from " << fetched->holder;
  return *fetched;
}

// The cross-bucket stage of a split round (collab/group_buckets.hpp), after `round`'s group averaged our
// bucket's gradients in `vector`: the group's carrier averages them with the other buckets' carriers, then
// hands the result to the group's other trainers, so that every member of the group, whatever happened
// elsewhere, ends with the same values. Callable from a background round's thread (it touches only the
// averager, which is that thread's then).
void across_buckets(GradientRound& round, avg::Averager& averager, const avg::VectorSchema& schema,
                    std::span<float> vector, const collab::GroupBucket& bucket, std::uint64_t epoch,
                    size_t target_group_size, Logger* log) {
  if (!round.group || round.group->group_size == 0 || bucket.buckets < 2 || !averager.last_group()) return;
  Logger::Line line(log, LogLevel::kDebug, kLog);
  line << "epoch " << epoch << ": across " << bucket.buckets << " buckets: ";
  if (!collab::has_cross_bucket_stage(bucket, target_group_size)) {
    line << "more buckets than a group holds: our bucket's average only";
    return;
  }
  // A copy: the carriers' round below makes its own group the averager's last.
  const avg::Group bucket_group = *averager.last_group();
  // Passing over a carrier our round found dead: the next node, if we are it, carries instead. Where every
  // node is dead, the first choice stays: we receive, and fetch what does not come from the holders.
  const auto first_choice = collab::bucket_carrier(bucket_group);
  auto carrier = collab::bucket_carrier(bucket_group, round.group->all_reduce.gone);
  if (!carrier) carrier = first_choice;
  if (carrier != first_choice) {
    line << "our carrier " << bucket_group.member(*first_choice).id.short_string() << " died in our round, ";
  }
  auto ours = bucket_group.hand_on();  // fails only where no trainer reduces: no carrier
  const std::string stage = collab::cross_bucket_round(epoch);
  if (!carrier || !ours) {
    // A group of clients led by an aux peer. Each of its trainers taking the carriers' result itself was
    // measured (bench/lab/README.md): 23 of 72 got it, and a group whose members took different things
    // steps on several models.
    line << "no trainer of our group can carry it: our bucket's average only";
    return;
  }
  double buckets_averaged = 1;  // what the carrier tells its group: how many buckets its values hold
  const avg::Member carrier_member = bucket_group.member(*carrier);
  const bool carrying = carrier_member.id == averager.id();
  if (carrying) {
    // The group's members hand their parts to us while we average with the other carriers: held, not refused.
    averager.expect(*ours);
    // Our bucket's average goes in at the bucket's weight (its samples, as the reducers told it), when the
    // bucket's round averaged all of it. Where a sender dropped out midway, the parts reduced before hold
    // its samples and the rest do not: each is still an average, and the bucket goes in at the least total
    // (at weight 0, every carrier whose bucket lost a member had left its bucket out; where all of them had,
    // as when a relay died, nobody weighed anything and each group stepped on its own bucket's values).
    // Parts kept unaveraged (a reducer lost: zeros there) put it in at weight 0, and we hand on the others'
    // average.
    const auto& reduced = round.group->all_reduce;
    const double bucket_weight =
        reduced.averaged_fraction >= 1 && reduced.unweighed_parts == 0 ? reduced.least_weight : 0.0;
    const bool whole_bucket = bucket_weight > 0;
    if (!whole_bucket) {
      line << "our bucket at weight 0 (" << 100 * reduced.averaged_fraction << "% averaged), ";
    } else if (bucket_weight != reduced.weight) {
      line << "our bucket at the least of its parts' weights (" << bucket_weight << "), ";
    }
    auto across = averager.step(schema, vector, bucket_weight, bucket.buckets, stage, wire::PartAnswer::kAverage);
    if (!across) {
      line << "carrying: failed (" << across.status().to_string() << "), ";
    } else if (across->group_size == 0) {
      line << "carrying: no group (" << across->why_alone << "), ";
      // The other carriers formed without us, or have yet to: their result keeps our group on the swarm's
      // model; our bucket's own average would leave it on a model of its own until a resync downloads the
      // state into every member.
      if (const auto taken = take_stage_result(averager, stage, schema, vector, line)) {
        buckets_averaged = static_cast<double>(taken->contributions);
      }
      line << ", ";
    } else {
      round.across_bytes_sent += across->all_reduce.bytes_sent;
      const auto& reduced_across = across->all_reduce;
      // A carrier that died in the stage leaves the others the stage's average everywhere but in its share,
      // where each kept its own bucket's values (or some of its parts came back first): handed on so, every
      // group would step on a model of its own (in 64-peer churn runs, a node killed in the carriers' round
      // split the swarm into as many sets as it had buckets, which dozens of downloads then settled). Its
      // whole share zeroed, the carriers agree again and skip that slice of the update alike, as a bucket's
      // members do where their round lost a reducer (zero_unaveraged).
      const size_t dropped = avg::zero_failed_shares(reduced_across, *averager.last_group(), vector);
      // Its buckets: the stage's carriers, less ours if it weighed nothing (others may have, too: a ranking)
      // and less those that dropped out.
      const size_t counted = whole_bucket ? 0 : 1;
      const size_t held = across->group_size > counted + dropped ? across->group_size - counted - dropped : 0;
      const bool agreed = reduced_across.unweighed_parts == 0 && held > 0;  // one result on every carrier left
      if (agreed) buckets_averaged = static_cast<double>(held);
      line << "carrying: averaged with " << across->group_size - 1 << " other carrier(s), ";
      // Fewer buckets than the round has: other carriers may have averaged more of them already. A bucket's
      // trainers that formed two groups send two carriers, and the late group's carrier meets other late
      // ones (a second, smaller carriers' round came after the first in a fifth to a third of the epochs of
      // 64-peer churn runs, each splitting its groups off the swarm's model until a resync downloaded the
      // state into every member). Their result keeps our groups on the model the most buckets step to,
      // without our samples. (Taking one merely as large, too, was measured and reverted: bench/lab/README.md.)
      const std::uint64_t ours_held = agreed ? held : 0;
      std::optional<std::uint64_t> taken;
      if (ours_held < bucket.buckets) {
        line << "a larger carriers' result: ";
        const auto larger =
            take_stage_result(averager, stage, schema, vector, line, std::max<std::uint64_t>(ours_held, 1));
        if (larger) taken = larger->contributions;
        line << ", ";
      }
      if (taken) buckets_averaged = static_cast<double>(*taken);
      // For a carrier that comes after the others formed: what it takes in place of its own bucket's average.
      if (taken || agreed) averager.hold_result(stage, schema, vector, taken ? *taken : held);
    }
  }
  // Kept for the receivers to mend their copies from (avg/round_result.hpp): what we hand on, in full.
  if (carrying) averager.keep_result(stage, schema, vector, static_cast<std::uint64_t>(buckets_averaged));
  auto handed = averager.broadcast(*ours, vector, carrying ? buckets_averaged : 0.0);
  if (handed) {
    round.across_bytes_sent += handed->all_reduce.bytes_sent;
    line << (carrying ? "handed on" : "received") << " to " << handed->group_size << " trainers, "
         << 100 * handed->all_reduce.averaged_fraction << "% of it";
  } else {
    line << "the hand-on failed (" << handed.status().to_string() << ")";
  }
  if (carrying) {
    // Our values are what we handed on, whatever reached the others.
    line << ", holding " << buckets_averaged << " bucket(s)";
    if (buckets_averaged >= static_cast<double>(bucket.buckets)) round.buckets = bucket.buckets;
    return;
  }
  double told = handed ? handed->all_reduce.weight : 0;
  const bool whole = handed && handed->all_reduce.averaged_fraction >= 1 && handed->all_reduce.unweighed_parts == 0;
  if (!whole) {
    // A member that died in the hand-on (or a reducer that never weighed the carrier's part) left us the
    // carrier's values in some ranges and our own elsewhere: the rest comes from the carrier itself. Ranges
    // not known (a part answered unweighed, or no hand-on at all): all of it.
    const bool ranges_known = handed && handed->all_reduce.unweighed_parts == 0;
    const avg::ElementRanges missing =
        ranges_known ? handed->all_reduce.unaveraged : avg::ElementRanges{{0, vector.size()}};
    auto mended = averager.fetch_result_from(carrier_member, stage, schema, vector, missing,
                                             Deadline::after(averager.matchmaking_time()));
    if (mended) {
      told = static_cast<double>(mended->contributions);
      line << ", the rest fetched from the carrier";
    } else {
      line << ", the rest not fetched (" << mended.status().to_string() << "), ";
      // The carrier died (or moved on). The carriers it averaged with hold what it handed on, listed with
      // the buckets it told us: the missing ranges (all of it where they are not known) from one of them,
      // each receiver asking them in an order of its own. (Each receiver taking a whole result from the
      // best listed holder instead, all of them at once from the same one, left half of a group without
      // it by the deadline, each on a mixture of its own.)
      const double partly_told = handed ? handed->all_reduce.least_weight : 0;
      std::optional<avg::FetchedResult> rest;
      if (partly_told >= 1) {
        auto fetched = averager.fetch_result_ranges(stage, schema, vector, missing,
                                                    static_cast<std::uint64_t>(partly_told),
                                                    Deadline::after(averager.matchmaking_time()));
        if (fetched) {
          rest = *fetched;
          line << "the rest fetched from " << fetched->holder;
        } else {
          line << "nor from a holder of as many buckets (" << fetched.status().to_string() << "), ";
        }
      }
      if (rest) {
        told = partly_told;
      } else {
        // The carriers' result from one that listed it, in full, which the other groups step with; our
        // group's other receivers take the same, the best listed.
        const auto taken = take_stage_result(averager, stage, schema, vector, line);
        if (!taken) return;
        told = static_cast<double>(taken->contributions);
      }
    }
  }
  line << ", holding " << told << " bucket(s)";
  if (told >= static_cast<double>(bucket.buckets)) round.buckets = bucket.buckets;
}

// The waits learned so far (collab/averaging_timeouts.hpp), for the averager's next search and round.
void apply_learned_waits(const std::optional<collab::AveragingTimeouts>& waits, avg::Averager& averager) {
  if (!waits) return;
  const auto times = waits->times();
  averager.set_matchmaking_times(times.matchmaking_time, times.grace);
  averager.set_part_timeouts(times.sender_timeout, times.reducer_timeout, times.liveness_timeout);
}

// What a round tells the learned waits: how long matchmaking took, how long the last expected joiners
// took after the quorum (or that a grace left some out), how long its slowest part took.
void learn_waits(collab::AveragingTimeouts& waits, const avg::StepOutcome& outcome, size_t other_trainers) {
  if (outcome.late_joiners > 0) waits.observe_late_joiners();
  if (outcome.group_size == 0) {
    // A group that formed without us says nothing of how long forming one takes.
    if (other_trainers > 0 && !outcome.formed_without_us) waits.observe_no_group();
    return;
  }
  if (outcome.matchmaking_time > Duration::zero()) waits.observe_matchmaking(outcome.matchmaking_time);
  if (outcome.quorum_to_full) waits.observe_quorum_to_full(*outcome.quorum_to_full);
  const auto& reduced = outcome.all_reduce;
  // A member banned or given up on that was not known gone: a live one the part timeouts were too short for.
  const size_t lost = reduced.banned_senders.size() + reduced.failed_reducers.size();
  if (lost > 0 && reduced.gone.empty() && !outcome.all_reduce_timed_out) {
    waits.observe_part_timeout();
  } else if (reduced.slowest_part > Duration::zero()) {
    waits.observe_slowest_part(reduced.slowest_part);
  }
}

}  // namespace

void Trainer::apply_round_waits() {
  auto& p = *parts_;
  if (p.round_deadline) {
    // Learned from our own rounds, which group buckets draw anew each time: never below what the swarm's
    // slowest upload needs for a round (the learned 1 s cut rounds that held a volunteer at 20 Mbit/s).
    const Duration deadline = std::max(p.round_deadline->deadline(), std::min(link_floor(), options_.averaging.averaging_timeout));
    p.swarm.averager().set_averaging_timeout(deadline);
  }
  apply_waits();
}

void Trainer::apply_waits() {
  auto& p = *parts_;
  if (p.waits) p.waits->set_link_floor(link_floor());
  apply_learned_waits(p.waits, p.swarm.averager());
}

Duration Trainer::link_floor() {
  auto& p = *parts_;
  const size_t payload = avg::encoded_bytes(options_.averaging.all_reduce.codec, p.gradients.values().size());
  return collab::link_floor(p.swarm.tracker().others_records(), options_.averaging.bandwidth, payload);
}

size_t Trainer::expected_trainers() {
  auto& p = *parts_;
  if (!p.gone) return p.swarm.others() + 1;
  return p.gone->expected(p.swarm.others(), std::chrono::steady_clock::now());
}

size_t Trainer::bucket_expected(const collab::GroupBucket& bucket) {
  // Split buckets count only trainers within an epoch of ours, which leaves the dead out after two steps;
  // one bucket counts everyone listed, so the trainers a round found gone come off it.
  return bucket.buckets > 1 ? bucket.expected : expected_trainers();
}

size_t Trainer::expected_at_step(const collab::GroupBucket& bucket) {
  // The split was drawn at our last step; the records read since say which of our bucket's trainers
  // reached the round (our search ahead, if any, takes this count at its release: Averager::step).
  if (bucket.buckets <= 1) return bucket_expected(bucket);
  const auto records = parts_->swarm.tracker().others_records();
  const size_t expected = collab::still_expected(bucket, records, epoch_);
  if (expected < bucket.expected && options_.log && options_.log->enabled(LogLevel::kDebug)) {
    // Whom the round no longer waits for, and why: what an operator reads when a bucket's leader forms
    // short (avg/matchmaking.cpp logs why it formed).
    Logger::Line line(options_.log, LogLevel::kDebug, kLog);
    line << "epoch " << epoch_ << ": " << bucket.round << " expects " << expected << " of its " << bucket.expected
         << " trainers at our step; the others (their epoch, or gone):";
    for (const auto& [peer, epoch] : collab::left_out(bucket, records, epoch_)) {
      const auto id = dht::owner_peer_id(as_bytes(peer));
      line << ' ' << (id ? id->short_string() : std::string("?")) << '@' << (epoch ? std::to_string(*epoch) : "gone");
    }
  }
  return expected;
}

void Trainer::search_one_group_per_key(const collab::GroupBucket& bucket) {
  // A split round's bucket holds one group, and a search that finds it formed without us ends at once
  // (avg::MatchmakingOptions::one_group_per_key): leading a group of latecomers to our deadline gave them
  // a round of their own, whose result the carriers' then replaced, and made them late for the next round.
  // A swarm of one key may still form another group.
  parts_->swarm.averager().set_one_group_per_key(bucket.buckets > 1);
}

GradientRound Trainer::run_gradient_round(double weight) {
  auto& p = *parts_;
  auto& averager = p.swarm.averager();
  // The trainers of our bucket, or every trainer we know of in a swarm that fits one group, less those a
  // round found gone (aux peers publish no progress, and are welcome if they are in by then).
  const collab::GroupBucket bucket = round_bucket(collab::gradient_round(epoch_), epoch_);
  auto breaker = round_interruptible(grouped_ahead(bucket.round));
  apply_round_waits();
  search_one_group_per_key(bucket);
  const size_t expected = expected_at_step(bucket);
  auto average = [&] {
    return averager.step(p.gradients.schema(), p.gradients.values(), weight, expected, bucket.round);
  };
  auto outcome = average();
  // Peers we know of but did not meet may have looked just before or after us (their batch came a
  // moment apart): one more window overlaps theirs, where stepping alone now would leave us out of
  // phase for good.
  // Not when most of them already stepped past this round: nobody is left to meet.
  // Nor when our bucket's group formed without us, or our bucket holds nobody else (as our view of the swarm
  // counts it): its carriers' result is what is left to take. (One more window made the one alone in a
  // bucket of 5 trainers in groups of 3 a window later for the next round than the others, round after
  // round.)
  const bool nobody_to_meet = outcome && (outcome->formed_without_us || (bucket.buckets > 1 && bucket.expected <= 1));
  if (outcome && outcome->group_size == 0 && !nobody_to_meet && p.swarm.others() > 0 && !stopping() &&
      !collab::round_over_without_us(p.swarm.tracker().others_records(), epoch_)) {
    outcome = average();
  }
  GradientRound round{std::move(outcome)};
  if (round.group) zero_unaveraged(round.group->all_reduce, p.gradients.values());  // nothing without a group
  if (options_.across_buckets && !stopping()) {
    across_buckets(round, averager, p.gradients.schema(), p.gradients.values(), bucket, epoch_,
                   options_.averaging.target_group_size, options_.log);
  }
  return round;
}

void Trainer::record_gradient_round(const GradientRound& round, collab::StepFacts& facts) {
  auto& p = *parts_;
  const Result<avg::StepOutcome>& outcome = round.group;
  facts.buckets = round.buckets;
  p.bytes_sent += round.across_bytes_sent;
  if (!outcome) {
    facts.averaging = collab::StepAveraging::kFailed;
    facts.why_not_averaged = outcome.status().to_string();
  } else if (outcome->group_size == 0) {
    facts.averaging = collab::StepAveraging::kNoGroup;
    facts.why_not_averaged = outcome->why_alone;
    if (p.waits) learn_waits(*p.waits, *outcome, p.swarm.others());
  } else {
    if (p.waits) learn_waits(*p.waits, *outcome, p.swarm.others());
    if (p.gone) {
      p.gone->seen(outcome->members);
      p.gone->add(outcome->all_reduce.gone, p.swarm.others(), std::chrono::steady_clock::now());
    }
    facts.averaging = collab::StepAveraging::kGroup;
    facts.group_size = outcome->group_size;
    facts.found_ahead = outcome->found_ahead;
    facts.group_id = to_hex(outcome->group_id);
    facts.averaged_fraction = outcome->all_reduce.averaged_fraction;
    facts.averaging_seconds = std::chrono::duration<double>(outcome->all_reduce_time).count();
    facts.averaging_deadline = std::chrono::duration<double>(options_.averaging.averaging_timeout).count();
    if (p.round_deadline) {
      facts.averaging_deadline = std::chrono::duration<double>(p.round_deadline->deadline()).count();
      // A round its deadline ended tells only that it needed longer; one that completed, how long it took.
      if (outcome->all_reduce_timed_out || outcome->all_reduce.averaged_fraction < 1) {
        p.round_deadline->observe_timeout();
      } else {
        p.round_deadline->observe(outcome->all_reduce_time);
      }
    }
    p.bytes_sent += outcome->all_reduce.bytes_sent;
    ++p.rounds_averaged;
  }
  facts.result_finite = p.gradients.finite();
}

void Trainer::write_update(bool again) {
  auto& p = *parts_;
  if (p.outer) {
    p.outer->pseudo_gradient_into(p.gradients.values());
  } else if (again) {
    p.gradients.restore_mean();
  } else {
    p.gradients.take_mean();
  }
}

void Trainer::inner_step() {
  auto& p = *parts_;
  p.gradients.take_mean();
  p.gradients.write_gradients();
  optimizer_.step(learning_rate(options_.schedule, epoch_));
  p.gradients.restart_accumulation();
  ++p.inner_steps;
}

void Trainer::apply_gradients(collab::StepOutcome outcome, const std::vector<std::uint64_t>& sample_ids) {
  auto& p = *parts_;
  p.inner_steps_per_outer = std::exchange(p.inner_steps, 0);
  if (p.outer) {
    p.outer->apply(p.gradients.values());
  } else {
    p.gradients.write_gradients();
    optimizer_.step(learning_rate(options_.schedule, epoch_));
  }
  if (p.samples_log.is_open()) {
    p.samples_log << epoch_ << (outcome == collab::StepOutcome::kAveraged ? " averaged" : " alone");
    for (auto id : sample_ids) p.samples_log << ' ' << id;
    p.samples_log << '\n' << std::flush;
  }
  ++epoch_;
  task_.after_step(epoch_);
}

void Trainer::step(TrainerReport& report) {
  auto& p = *parts_;
  if (p.delayed) {
    finish_delayed_step(report);  // the previous step is applied before this one starts
    if (stopping_now()) return;
  }
  // DiLoCo: what is left of this peer's samples since its last inner step makes one more, then the
  // outer step averages where the inner steps led.
  if (p.outer && p.gradients.accumulated_micro_steps() > 0) inner_step();
  write_update(/*again=*/false);
  collab::StepFacts facts;
  facts.local_gradients_finite = p.gradients.finite();
  facts.other_trainers = p.swarm.others();
  facts.waited_seconds = p.due_batch_epoch == epoch_ ? p.due_batch_waited : 0;
  StepInputs inputs{p.gradients.samples(), p.gradients.sample_ids()};
  seed_round_deadline();
  if (!facts.local_gradients_finite) {
    p.swarm.averager().withdraw();  // a group found ahead is served without our gradients, not left waiting
  } else if (collab::should_average(facts.local_gradients_finite, facts.other_trainers)) {
    if (options_.collaboration.mode == CollaborationMode::kDelayed) {
      start_delayed_step(facts, std::move(inputs));
      return;
    }
    average_gradients(facts);
    if (averaging_cut_short(facts)) {
      Logger::Line(options_.log, LogLevel::kInfo, kLog) << "stopped while averaging: epoch " << epoch_ + 1 << " not taken";
      return;
    }
    if (facts.averaging == collab::StepAveraging::kNoGroup) {
      if (take_missed_round_result(report, missed_round_wait())) return;
      if (sit_out_missed_round(report)) {
        p.loss.end_epoch();
        return;
      }
    }
    // While our round failed to average, the swarm went two or more epochs on (a joiner whose first round
    // found its group gone, on a loaded machine): a step of our own from there would be a step from behind,
    // undone by the download the next look at the swarm makes. The batch is dropped instead.
    if (facts.averaging != collab::StepAveraging::kGroup &&
        options_.collaboration.mode == CollaborationMode::kSynchronous) {
      const auto swarm_epoch = p.swarm.tracker().state().epoch;
      if (swarm_epoch > epoch_ + 1) {
        Logger::Line(options_.log, LogLevel::kInfo, kLog)
            << "epoch " << epoch_ << ": not averaged (" << facts.why_not_averaged << ") and the swarm is at epoch "
            << swarm_epoch << ": dropping this batch and downloading the swarm's state rather than stepping from behind";
        p.loss.end_epoch();
        p.gradients.clear();
        return;
      }
    }
  }
  p.loss.end_epoch();
  conclude_step(report, facts, inputs, /*next_batch_started=*/false);
}

void Trainer::start_delayed_step(const collab::StepFacts& facts, StepInputs inputs) {
  auto& p = *parts_;
  // The round owns the gradient buffer's vector (our mean gradient) until it ends; the next batch
  // accumulates from zero meanwhile, on the parameters we have.
  const double weight = static_cast<double>(inputs.samples);
  p.loss.end_epoch();
  p.gradients.clear();
  p.delayed = std::make_unique<DelayedStep>();
  p.delayed->facts = facts;
  p.delayed->inputs = std::move(inputs);
  p.delayed->round = std::async(std::launch::async, [this, weight] { return run_gradient_round(weight); });
  p.swarm.tracker().report(local_progress());  // our record moves on to the next epoch at once
}

void Trainer::finish_delayed_step(TrainerReport& report) {
  auto& p = *parts_;
  auto delayed = std::move(p.delayed);
  auto round = delayed->round.get();  // bounded: matchmaking_time plus the rounds' deadlines
  // A failed round leaves the vector as it was (the errors come before any part is sent) or ends in a stop:
  // there is no accumulated mean to restore here, the next batch's gradients accumulate meanwhile.
  record_gradient_round(round, delayed->facts);
  if (averaging_cut_short(delayed->facts)) {
    Logger::Line(options_.log, LogLevel::kInfo, kLog) << "stopped while averaging: epoch " << epoch_ + 1 << " not taken";
    return;
  }
  conclude_step(report, delayed->facts, delayed->inputs, /*next_batch_started=*/true);
}

bool Trainer::delayed_step_done() const {
  const auto& p = *parts_;
  return p.delayed && p.delayed->round.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
}

std::uint64_t Trainer::progress_epoch() const { return epoch_ + (parts_->delayed ? 1 : 0); }

void Trainer::conclude_step(TrainerReport& report, const collab::StepFacts& facts, const StepInputs& inputs,
                            bool next_batch_started) {
  auto& p = *parts_;
  const auto outcome = collab::classify_step(facts);
  const bool apply = collab::applies(outcome);
  switch (outcome) {
    case collab::StepOutcome::kAveraged: ++report.steps_averaged; break;
    case collab::StepOutcome::kAlone:
    case collab::StepOutcome::kLocal: ++report.steps_alone; break;
    case collab::StepOutcome::kSkippedLocal:
    case collab::StepOutcome::kSkippedAverage: ++report.steps_skipped; break;
  }
  if (apply) {
    apply_gradients(outcome, inputs.sample_ids);
    p.divergence.on_step(collab::averaged_with_swarm(facts));
  } else if (p.outer) {
    p.outer->restart_local();  // the inner steps of a skipped outer step are discarded
    p.inner_steps = 0;
  }
  Logger::Line(options_.log, LogLevel::kInfo, kLog) << "epoch " << epoch_ << ": " << inputs.samples
                                                    << " samples here, " << collab::describe_step(facts, outcome)
                                                    << ", loss " << p.loss.last;
  if (options_.on_event) {
    TrainerEvent event{.kind = event_kind(outcome), .epoch = epoch_, .loss = p.loss.last, .samples = inputs.samples};
    if (outcome == collab::StepOutcome::kAveraged) {
      event.group_size = facts.group_size;
      event.found_ahead = facts.found_ahead;
      event.group = facts.group_id;
      event.averaged_fraction = facts.averaged_fraction;
      event.averaging_seconds = facts.averaging_seconds;
      event.averaging_deadline = facts.averaging_deadline;
      event.round_seconds = facts.round_seconds;
      event.buckets = facts.buckets;
      event.took_result_from = facts.taken_from;
    }
    event.bytes_sent = p.bytes_sent;
    if (p.outer && apply) event.inner_steps = p.inner_steps_per_outer;
    event.samples_computed = p.samples_computed;
    event.compute_seconds = p.compute_seconds;
    event.waited_seconds = facts.waited_seconds;
    if (options_.hash_parameters) describe_parameters(event);
    options_.on_event(event);
  }
  // Every peer reaches this epoch with this step, so all of them look for a parameter group together.
  const auto every = options_.training.average_parameters_every;
  if (apply && every > 0 && epoch_ % every == 0 && p.swarm.others() > 0) average_parameters();
  if (next_batch_started) {
    p.gradients.drop_micro_batch();  // the applied gradients out of .grad; the accumulators hold the next batch
  } else {
    p.gradients.clear();
  }
  serve_current_state();  // first: a donor serves the epoch before our record announces it
  p.swarm.tracker().report(local_progress());
  publish_donor_and_metrics(true);
  if (!options_.checkpoint_dir.empty() && options_.training.checkpoint_every > 0 &&
      epoch_ % options_.training.checkpoint_every == 0) {
    auto saved = save_checkpoint_files();
    if (!saved.is_ok()) Logger::Line(options_.log, LogLevel::kWarning, kLog) << saved.to_string();
  }
}

bool Trainer::wait_for_due_batch() {
  auto& p = *parts_;
  if (!options_.training.wait_for_due_batch || options_.collaboration.mode != CollaborationMode::kSynchronous ||
      p.swarm.others() == 0 || p.gradients.samples() == 0 || p.last_micro_batch_seconds <= 0) {
    return false;
  }
  if (p.due_batch_epoch != epoch_) {
    p.due_batch_epoch = epoch_;
    p.due_batch_waited = 0;
  }
  // Every peer checks for the batch only between micro-batches, so when the peers end the micro-batches that
  // complete the batch, the first to end do not see it complete yet: the others' last micro-batches are a
  // moment from their end. Computing on, each starts one more and the group waits for the slowest of those
  // (in the lab's high-bandwidth run 9 micro-batches a step where 8 made the batch: bench/lab/README.md).
  // Where the others' micro-batches that end before our next one would complete the batch without it, we
  // wait for them instead: at most one micro-batch's time a step, which costs no more than that micro-batch.
  // The estimate counts their micro-batches whole (collab/collaboration_state.hpp), so the batch we wait for
  // is made of micro-batches that will be there, not parts of ones still running.
  const double budget = p.last_micro_batch_seconds - p.due_batch_waited;
  if (budget <= 0) return false;
  auto& tracker = p.swarm.tracker();
  if (!tracker.state_if_we_stop(budget).batch_ready()) return false;
  const double began = now_seconds();
  const TimePoint until = std::chrono::steady_clock::now() + from_seconds(budget);
  p.ema.pause();
  while (sleep_unless_stopped(std::min(until, std::chrono::steady_clock::now() + kDueBatchPoll))) {
    const auto swarm = tracker.state();
    if (swarm.batch_ready() || swarm.epoch > progress_epoch() || std::chrono::steady_clock::now() >= until) break;
  }
  p.due_batch_waited += now_seconds() - began;
  return true;
}

void Trainer::match_ahead(const collab::CollaborationState& state) {
  auto& p = *parts_;
  // A delayed step's round still holds the averager (not thread-safe): the next group is sought after it.
  if (!options_.match_ahead || p.swarm.others() == 0 || p.delayed) return;
  if (state.eta_seconds > std::chrono::duration<double>(options_.averaging.matchmaking_time).count()) return;
  prepare_round(epoch_);
}

void Trainer::prepare_round(std::uint64_t epoch) {
  auto& p = *parts_;
  const collab::GroupBucket bucket = round_bucket(collab::gradient_round(epoch), epoch);
  if (p.swarm.averager().prepared_round() == bucket.round) return;
  // A round still prepared for an earlier epoch (we caught up since) is withdrawn by prepare().
  apply_waits();
  search_one_group_per_key(bucket);
  p.swarm.averager().prepare(p.gradients.schema(), bucket_expected(bucket), bucket.round);
}

void Trainer::average_parameters() {
  auto& p = *parts_;
  // The gradient buffer is free between steps, and parameters have the gradients' layout and schema
  // (the round's kind keeps them apart from gradient rounds).
  p.gradients.read_parameters();
  p.ema.pause();
  auto breaker = round_interruptible(/*grouped_ahead=*/false);
  // As deltas: under a lossy codec each peer keeps its parameters' own precision (the average itself would
  // round every parameter to the codec), at the price of peers differing in the last bits afterwards.
  const collab::GroupBucket bucket = round_bucket("params." + std::to_string(epoch_), epoch_);
  search_one_group_per_key(bucket);
  auto outcome = p.swarm.averager().step(p.gradients.schema(), p.gradients.values(), 1.0, bucket_expected(bucket),
                                         bucket.round, wire::PartAnswer::kDelta);
  Logger::Line line(options_.log, LogLevel::kInfo, kLog);
  line << "epoch " << epoch_ << ": ";
  if (!outcome) {
    line << "parameters not averaged: " << outcome.status().to_string();
  } else if (outcome->group_size == 0) {
    line << "parameters not averaged: " << outcome->why_alone;
  } else if (!all_finite(p.gradients.values())) {
    line << "parameters not averaged: the average is not finite";
  } else {
    p.bytes_sent += outcome->all_reduce.bytes_sent;
    p.gradients.write_parameters();
    if (p.outer) p.outer->adopt_local();  // DiLoCo: right after an outer step, θ_local is θ_outer
    line << "parameters averaged in a group of " << outcome->group_size;
  }
}

Status Trainer::catch_up(TrainerReport& report, std::optional<std::uint64_t> swarm_hash, bool missed_round,
                         std::optional<std::uint64_t> max_epoch) {
  auto& p = *parts_;
  if (std::chrono::steady_clock::now() < p.next_catch_up) return Status();
  // Until it succeeds, the next attempt waits longer (reset below).
  p.next_catch_up = std::chrono::steady_clock::now() + p.catch_up_retry;
  p.catch_up_retry = std::min(p.catch_up_retry * 2, kLastCatchUpRetry);
  avg::DownloadOptions download;
  download.run_id = options_.run_id;
  download.expected_schema = p.state.schema;
  if (!p.swarm.donor_endpoint().empty()) download.exclude.push_back(p.swarm.donor_endpoint());
  download.exclude.insert(download.exclude.end(), p.resync_exclude.begin(), p.resync_exclude.end());
  download.max_donors = 1;  // optimizer statistics are not averaged: stripes must come from one peer
  // The parameters a state at `epoch` must carry (0: any): a resync's at our epoch, the hash it resyncs to;
  // a catch-up's, the hash that leads at that epoch where one does (collab/divergence.hpp): a donor whose
  // parameters left the swarm's (its group missed a round's cross-bucket stage) would hand us its
  // divergence, and a swarm split into sets would stay split through its downloads. Donors whose records
  // say they differ are asked last; one that differs after all is passed over next time.
  auto others = p.swarm.tracker().others_records();
  auto wanted_at = [&](std::uint64_t epoch) -> std::uint64_t {
    if (swarm_hash) return epoch == epoch_ ? *swarm_hash : 0;
    collab::PeerProgress at;
    at.epoch = epoch;
    return collab::judge_divergence(others, at).swarm_hash;
  };
  download.disfavoured = collab::peers_apart(others, wanted_at);
  download.max_epoch = max_epoch;
  download.log = options_.log;
  p.ema.pause();
  const auto download_began = std::chrono::steady_clock::now();
  Result<avg::DownloadedState> downloaded = error(Code::kCancelled, "stopped");
  {
    auto breaker = interruptible();
    downloaded = avg::download_state(node_, p.swarm.averager().client(), download, Deadline::after(std::chrono::seconds(120)));
  }
  if (!downloaded) return downloaded.status().with_context("downloading the swarm's state");
  p.catch_up_retry = kFirstCatchUpRetry;  // the donors answered: a later failure is a new story
  p.last_download_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - download_began).count();
  const std::string donor = downloaded->donors.empty() ? "?" : downloaded->donors.front().address;
  if (downloaded->state.epoch() < epoch_) return Status();
  if (downloaded->state.epoch() == epoch_ && !swarm_hash) return Status();  // nothing newer than ours
  others = p.swarm.tracker().others_records();  // the records as they are now: the download took a while
  const std::uint64_t wanted = wanted_at(downloaded->state.epoch());
  if (wanted != 0 && avg::parameters_hash(downloaded->state) != wanted) {
    if (auto address = net::PeerAddress::parse(donor)) p.resync_exclude.push_back(address->endpoint);
    return error(Code::kUnavailable, "donor " + donor + "'s parameters at epoch " +
                                         std::to_string(downloaded->state.epoch()) + " are not the swarm's leading ones");
  }
  auto from = epoch_;
  DEDLOC_RETURN_IF_ERROR(load_state(downloaded->state));
  ++report.states_loaded;
  if (p.joining) p.joined_at = epoch_;
  p.resync_exclude.clear();
  if (swarm_hash) {
    p.divergence.on_resynced(epoch_);
    Logger::Line(options_.log, LogLevel::kInfo, kLog) << "resynced: loaded the swarm's state at epoch " << epoch_
                                                      << " (we were at " << from << ") from " << donor;
  } else {
    Logger::Line(options_.log, LogLevel::kInfo, kLog) << "caught up: loaded the state at epoch " << epoch_
                                                      << " (we were at " << from << ") from " << donor;
  }
  if (options_.on_event) {
    TrainerEvent event{.kind = TrainerEvent::Kind::kLoadedState, .epoch = epoch_};
    event.resync = swarm_hash.has_value();
    event.missed_round = missed_round;
    event.donor = donor;
    event.download_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - download_began).count();
    if (options_.hash_parameters) describe_parameters(event);
    options_.on_event(event);
  }
  p.swarm.tracker().report(local_progress());
  note_if_loaded_late();
  p.look_before_computing = true;
  return Status();
}

void Trainer::note_if_loaded_late() {
  auto& p = *parts_;
  p.loaded_late_at.reset();
  if (!options_.collaboration.sit_out_missed_rounds || options_.collaboration.mode != CollaborationMode::kSynchronous) return;
  auto& tracker = p.swarm.tracker();
  tracker.refresh_now();  // bounded by the tracker's DHT timeout; the last read is from before the download
  const auto state = tracker.state();
  if (state.epoch == epoch_ && state.batch_ready()) p.loaded_late_at = epoch_;
}

bool Trainer::sit_out_late_round(TrainerReport& report) {
  auto& p = *parts_;
  if (p.loaded_late_at != epoch_) return false;
  p.loaded_late_at.reset();
  // A search for this round declared before the download (a round sat out declares the next one first; a
  // resync keeps the group found ahead) is the swarm's own, not a latecomer's: in the group it found, or
  // may yet find, we step with everyone at the round's end, at the weight of what we computed (none, as a
  // rule). Sitting out instead would download that step after the round, late for the next batch again:
  // in the lab's 64-volunteer runs a third of the rounds sat out came right after such a download.
  if (grouped_ahead(round_bucket(collab::gradient_round(epoch_), epoch_).round)) return false;
  Logger::Line(options_.log, LogLevel::kInfo, kLog)
      << "epoch " << epoch_ << ": we loaded its state after the swarm's batch was complete, so its group formed "
      << "without us: taking its carriers' result, or else sitting the round out, instead of looking for a group "
      << "of latecomers";
  p.swarm.averager().withdraw();
  if (take_missed_round_result(report, missed_round_wait())) return true;
  if (!sit_out_missed_round(report)) return false;
  p.loss.end_epoch();
  return true;
}

void Trainer::publish_donor_and_metrics(bool force) {
  auto& p = *parts_;
  collab::PeerMetrics metrics;
  metrics.epoch = epoch_;
  if (p.loss.has_last) metrics.loss = p.loss.last;
  metrics.samples_per_second = p.ema.samples_per_second();
  metrics.micro_steps = p.gradients.micro_steps();
  metrics.role = options_.averaging.role == avg::AvgRole::kClient ? "client" : "trainer";
  metrics.target_batch_size = options_.training.target_batch_size;
  metrics.rounds = p.rounds_averaged;
  metrics.mode = std::string(to_string(options_.collaboration.mode));
  metrics.inner_steps = p.inner_steps_per_outer;
  metrics.bytes_sent = p.bytes_sent;
  metrics.samples_computed = p.samples_computed;
  p.swarm.publish_donor_and_metrics(metrics, force);
}

void Trainer::show_status(const collab::CollaborationState& state, bool final) {
  if (!options_.status_line) return;
  auto& p = *parts_;
  std::fprintf(stderr, "\r\033[Kepoch %llu | %.0f/%llu samples | %zu peers | ETA %.1f s | loss %.4f | %.1f samples/s%s",
               static_cast<unsigned long long>(epoch_), state.samples_accumulated,
               static_cast<unsigned long long>(state.target_batch_size), state.peers, state.eta_seconds, p.loss.last,
               p.ema.samples_per_second(), final ? "\n" : "");
}

Result<TrainerReport> Trainer::run(const std::function<bool()>& should_stop, const std::function<bool()>& leave_now) {
  auto& p = *parts_;
  auto& tracker = p.swarm.tracker();
  should_stop_ = should_stop;
  leave_now_ = leave_now;
  TrainerReport report;
  report.states_loaded = p.states_loaded_at_start;
  if (options_.min_peers > 1) {
    Logger::Line(options_.log, LogLevel::kInfo, kLog) << "waiting for " << options_.min_peers << " peers in run '" << options_.run_id << "'";
    auto deadline = Deadline::after(options_.wait_for_peers);
    while (p.swarm.others() + 1 < options_.min_peers) {
      if (stopping()) {
        p.swarm.withdraw_records(leaving_deadline());
        return report;
      }
      if (deadline.passed()) {
        return error(Code::kTimeout, "only " + std::to_string(p.swarm.others() + 1) + " of the " +
                                         std::to_string(options_.min_peers) + " peers asked for (--min-peers) joined run '" +
                                         options_.run_id + "' in time");
      }
      tracker.report(local_progress());
      tracker.refresh_now();
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }
  p.started = now_seconds();
  p.ema.resume(p.started);
  auto trained = train_until(report);
  show_status(tracker.state(), true);
  report.epoch = epoch_;
  report.last_loss = p.loss.last;
  report.seconds = now_seconds() - p.started;
  report.compute_seconds = p.compute_seconds;
  report.bytes_sent = p.bytes_sent;
  report.samples_computed = p.samples_computed;
  if (!trained.is_ok()) {
    // Leave at once, and cleanly: a group found ahead goes on without us, others stop counting us. No
    // checkpoint: a step that threw may have left the parameters half-updated (the last one written stays).
    p.swarm.averager().withdraw();
    p.swarm.withdraw_records(leaving_deadline());
    return trained;
  }
  if (!options_.checkpoint_dir.empty()) {
    auto saved = save_checkpoint_files();
    if (!saved.is_ok()) Logger::Line(options_.log, LogLevel::kWarning, kLog) << saved.to_string();
    // DiLoCo: the model is the swarm's θ_outer, not where this peer's unfinished inner steps led.
    Status restored = p.outer ? guard_torch("restoring θ_outer", [&] { p.outer->restart_local(); }) : Status();
    if (restored.is_ok()) {
      export_model_files();
    } else {
      Logger::Line(options_.log, LogLevel::kWarning, kLog) << "the model was not exported: " << restored.to_string();
    }
  }
  p.swarm.withdraw_records(leaving_deadline());
  return report;
}

Status Trainer::train_until(TrainerReport& report) {
  auto& p = *parts_;
  auto& tracker = p.swarm.tracker();
  while (!stopping_now()) {
    if (stopping() && !finish_round_before_leaving()) break;
    double now = now_seconds();
    if (options_.max_time_seconds > 0 && now - p.started >= options_.max_time_seconds) break;
    if (options_.max_epochs > 0 && progress_epoch() >= options_.max_epochs) break;

    // The task's and the optimizer's edge: what libtorch throws ends the run as an error (torch_errors.hpp).
    if (!std::exchange(p.look_before_computing, false)) {
      auto computed = guard_torch("computing a micro-batch", [&] { return compute_micro_batch(); });
      if (!computed) return computed.status();
      if (!*computed) continue;
    }
    if (delayed_step_done()) {
      DEDLOC_RETURN_IF_ERROR(guard_torch("applying global step " + std::to_string(epoch_ + 1), [&] { finish_delayed_step(report); }));
    }
    tracker.report(local_progress());

    auto state = tracker.state();
    show_status(state);
    // Leaving: only the step our group waits for is still worth taking, not a download.
    if (stopping() && state.epoch > progress_epoch() + 1) break;
    if (state.epoch > progress_epoch() + 1) {
      if (p.delayed) {
        DEDLOC_RETURN_IF_ERROR(guard_torch("applying global step " + std::to_string(epoch_ + 1), [&] { finish_delayed_step(report); }));
      }
      // A group found ahead for the round we fell behind in is served without us, not left waiting.
      p.swarm.averager().withdraw();
      auto caught = catch_up(report);
      if (!caught.is_ok() && !stopping()) {
        Logger::Line(options_.log, LogLevel::kWarning, kLog) << caught.to_string();
        // Micro-batches computed now would be dropped by the download: wait for the next attempt instead.
        sleep_unless_stopped(p.next_catch_up);
      }
      continue;
    }
    if (!stopping() && resync_if_diverged(report)) continue;
    if (state.epoch > progress_epoch()) {
      const LateRound late = handle_late_round(state, report);
      if (late != LateRound::kStep) continue;
    }
    if (state.batch_ready() || state.epoch > progress_epoch()) {
      if (sit_out_late_round(report)) continue;
      DEDLOC_RETURN_IF_ERROR(guard_torch("taking global step " + std::to_string(epoch_ + 1), [&] { step(report); }));
    } else if (!stopping()) {
      match_ahead(state);
      p.look_before_computing = wait_for_due_batch();
    }
    publish_donor_and_metrics(false);
  }
  // Delayed: the step in flight is applied when its round ends (stopped by leave_now, or by should_stop
  // alone, it ends at once, not applied).
  if (p.delayed) {
    DEDLOC_RETURN_IF_ERROR(guard_torch("applying global step " + std::to_string(epoch_ + 1), [&] { finish_delayed_step(report); }));
  }
  return Status();
}

collab::GroupBucket Trainer::round_bucket(const std::string& round, std::uint64_t epoch) {
  auto& p = *parts_;
  std::lock_guard lock(p.bucket_mutex);
  for (const auto& [known, bucket] : p.buckets) {
    if (known == round) return bucket;
  }
  collab::GroupBucket bucket{.round = round, .expected = p.swarm.others() + 1};
  if (options_.group_buckets) {
    const Bytes self = collab::own_subkey(node_);
    bucket = collab::choose_group_bucket(round, epoch, p.swarm.tracker().others_records(), std::string(self.begin(), self.end()),
                                         /*self_trainer=*/true, options_.averaging.role == avg::AvgRole::kClient,
                                         options_.averaging.target_group_size, p.joined_at);
  }
  if (p.buckets.size() >= 8) p.buckets.pop_front();  // a round long past
  p.buckets.emplace_back(round, bucket);
  return bucket;
}

Trainer::LateRound Trainer::handle_late_round(const collab::CollaborationState& state, TrainerReport& report) {
  auto& p = *parts_;
  // Delayed and DiLoCo rounds are not a step behind in the same way (the record already moved on; the
  // outer round spans many batches): they step as the swarm does.
  if (options_.collaboration.mode != CollaborationMode::kSynchronous || p.swarm.others() == 0) return LateRound::kStep;
  auto& averager = p.swarm.averager();
  const bool ours = averager.prepared_round() == round_bucket(collab::gradient_round(epoch_), epoch_).round;
  const auto search = ours ? averager.ahead_search() : avg::Averager::AheadSearch::kNone;
  const auto others = p.swarm.tracker().others_records();
  if (!collab::round_over_without_us(others, epoch_)) return LateRound::kStep;
  // A group found ahead does not keep us in a round most of the swarm finished without us: its members are
  // a late cohort (out of a round that ran to its deadline, or a step behind from the start), and a round
  // of their own would give them parameters of their own and keep them a step behind the swarm for good
  // (the lab's 64 volunteers under churn: cohorts 15 s apart from the first rounds on, each gathering the
  // global batch alone). We load the swarm's state, as any peer left behind does; withdrawing serves our
  // group without our share, so members already in its round are not held.
  if (search == avg::Averager::AheadSearch::kSearching) return LateRound::kWait;  // it ends within matchmaking_time
  if (std::chrono::steady_clock::now() < p.next_catch_up) return LateRound::kStep;  // the backoff after a failed download
  const auto past = std::count_if(others.begin(), others.end(), [&](const auto& r) { return r.epoch > epoch_; });
  Logger::Line(options_.log, LogLevel::kInfo, kLog)
      << "epoch " << epoch_ << ": " << past << " of the " << others.size() << " other peers finished this round "
      << "without us (the swarm is at epoch " << state.epoch << "): loading the swarm's state instead of looking "
      << "for a group";
  averager.withdraw();
  // The carriers' result of our round, listed since the round ended, is a step without a download.
  if (take_missed_round_result(report, averager.matchmaking_time())) return LateRound::kCaughtUp;
  // The round after ours is the swarm's next: declared before the download, as a round sat out does
  // (sit_out_missed_round), so that a download landing after that round's batch is complete still finds
  // us in its group (sit_out_late_round).
  if (options_.match_ahead) prepare_round(epoch_ + 1);
  auto caught = catch_up(report, std::nullopt, /*missed_round=*/true);
  if (!caught.is_ok() && !stopping()) Logger::Line(options_.log, LogLevel::kWarning, kLog) << caught.to_string();
  return LateRound::kCaughtUp;
}

Duration Trainer::missed_round_wait() const {
  const auto& p = *parts_;
  const Duration matchmaking = p.waits ? p.waits->times().matchmaking_time : options_.averaging.matchmaking_time;
  // A group that formed without us ends its all-reduce within its deadline. Fixed deadlines are sized for
  // the worst case (often 30 s or more), too long to hold a peer that may yet have to step alone: there, one
  // more matchmaking window.
  const Duration all_reduce = p.round_deadline ? p.round_deadline->deadline() : matchmaking;
  return matchmaking + all_reduce;
}

bool Trainer::sit_out_missed_round(TrainerReport& report) {
  auto& p = *parts_;
  if (!options_.collaboration.sit_out_missed_rounds || options_.collaboration.mode != CollaborationMode::kSynchronous ||
      p.swarm.others() == 0 || stopping()) {
    return false;
  }
  auto& tracker = p.swarm.tracker();
  // Only a round the others are in or past: when they are all behind us there is nothing to load.
  const auto others = tracker.others_records();
  if (std::none_of(others.begin(), others.end(), [&](const collab::PeerProgress& r) { return r.epoch >= epoch_; })) {
    return false;
  }
  const TimePoint until = std::chrono::steady_clock::now() + missed_round_wait();
  p.ema.pause();
  bool over = collab::round_done_without_us(others, epoch_);
  while (!over && std::chrono::steady_clock::now() < until &&
         sleep_unless_stopped(std::min(until, std::chrono::steady_clock::now() + kMissedRoundPoll))) {
    tracker.refresh_now();  // bounded by the tracker's DHT timeout
    over = collab::round_done_without_us(tracker.others_records(), epoch_);
  }
  if (!over || stopping()) return false;
  Logger::Line(options_.log, LogLevel::kInfo, kLog)
      << "epoch " << epoch_ << ": no group, and the other peers finished this round without us: loading the "
      << "swarm's state instead of stepping alone";
  // Our next round is the swarm's next: declared before the download, we are in its group, where a peer
  // that looked only after the download would find the others grouped ahead without it and miss that round
  // too. Not before the round we missed is over: a search that early would lead with an early deadline, and
  // form its group then with whoever came (an aux peer), apart from the swarm's.
  if (options_.match_ahead) prepare_round(epoch_ + 1);
  const auto before = epoch_;
  const bool zero_weight = options_.match_ahead && start_zero_weight_round(epoch_ + 1);
  // Twice at most: a joiner's first download a moment ago holds the next one back for its backoff, and a
  // donor may not yet serve the round's result; a longer backoff (downloads failing) is not waited out.
  for (int attempt = 0; attempt < 2 && epoch_ == before && !stopping(); ++attempt) {
    if (attempt > 0 && (p.next_catch_up > std::chrono::steady_clock::now() + kFirstCatchUpRetry ||
                        !sleep_unless_stopped(p.next_catch_up))) {
      break;
    }
    // The round we take part in at weight 0 steps from the state of its epoch, and only from that: a donor
    // already a round further (the swarm's front, while the rest still average) would leave that round's
    // result unusable and us out of the next round's search (in the lab's 64-volunteer churn runs, one such
    // round in five). A second attempt takes the newest: by then that round is over.
    const auto max_epoch = zero_weight && attempt == 0 ? std::optional<std::uint64_t>(before + 1) : std::nullopt;
    auto caught = catch_up(report, std::nullopt, /*missed_round=*/true, max_epoch);
    if (!caught.is_ok() && !stopping()) Logger::Line(options_.log, LogLevel::kWarning, kLog) << caught.to_string();
  }
  if (zero_weight) finish_zero_weight_round(report);
  return epoch_ > before;
}

bool Trainer::take_missed_round_result(TrainerReport& report, Duration wait) {
  auto& p = *parts_;
  if (!options_.across_buckets || !options_.collaboration.sit_out_missed_rounds ||
      options_.collaboration.mode != CollaborationMode::kSynchronous || p.swarm.others() == 0 || stopping()) {
    return false;
  }
  const collab::GroupBucket bucket = round_bucket(collab::gradient_round(epoch_), epoch_);
  if (!collab::has_cross_bucket_stage(bucket, options_.averaging.target_group_size)) return false;
  p.ema.pause();
  const double began = now_seconds();
  const std::uint64_t dropped = p.gradients.samples();
  std::optional<avg::FetchedResult> fetched;
  {
    Logger::Line line(options_.log, LogLevel::kInfo, kLog);
    line << "epoch " << epoch_ << ": the round went on without us, so not our " << dropped << " samples but its "
         << "carriers' result: ";
    auto breaker = interruptible();
    // The carriers list their result before they hand it on, and so before anyone steps past the round:
    // with most of the others past it (or all of them gone) and nothing listed, nothing will be (the
    // carriers missed one another, or the run ended), where the wait alone lasts a round deadline, 30 s
    // until one is learned.
    auto& tracker = p.swarm.tracker();
    const auto round_over = [&] {
      tracker.refresh_now();  // bounded by the tracker's DHT timeout
      const auto others = tracker.others_records();
      return others.empty() || collab::round_done_without_us(others, epoch_);
    };
    // Nothing comes: our gradients are left as they are, for the sit-out that follows.
    fetched = take_stage_result(p.swarm.averager(), collab::cross_bucket_round(epoch_), p.gradients.schema(),
                                p.gradients.values(), line, 0, Deadline::after(wait), round_over);
  }
  if (!fetched) return false;
  collab::StepFacts facts;
  facts.other_trainers = p.swarm.others();
  facts.averaging = collab::StepAveraging::kTaken;
  facts.taken_from = fetched->holder;
  facts.taken_buckets = fetched->contributions;
  if (fetched->contributions >= bucket.buckets) facts.buckets = bucket.buckets;
  facts.round_seconds = now_seconds() - began;
  facts.result_finite = all_finite(p.gradients.values());
  p.loss.end_epoch();
  conclude_step(report, facts, StepInputs{}, /*next_batch_started=*/false);
  return true;
}

bool Trainer::start_zero_weight_round(std::uint64_t epoch) {
  auto& p = *parts_;
  using When = CollaborationOptions::ZeroWeightNextRound;
  const When when = options_.collaboration.zero_weight_next_round;
  if (when == When::kNever || p.outer || p.delayed) return false;
  // Worth it when the download will likely outlast the next batch: our group would wait for us.
  if (when == When::kAuto && p.last_download_seconds <= p.swarm.tracker().state().eta_seconds) return false;
  auto& averager = p.swarm.averager();
  const collab::GroupBucket bucket = round_bucket(collab::gradient_round(epoch), epoch);
  seed_round_deadline();
  apply_round_waits();
  auto& round = p.zero_round.emplace();
  round.epoch = epoch;
  round.vector.assign(p.gradients.values().size(), 0.0f);
  // Our search for the round is under way, held open (the caller prepared it). A computing leader forms its
  // group when its batch is complete, with the aux peers that joined by then (they start looking as the
  // batch comes due); we have nothing to compute, and stepping at once formed the group the moment the
  // expected trainers were in, without the aux peers that hold most of the vector on fast links. So we
  // step when the swarm's batch is due, at the latest when our search ends anyway.
  const TimePoint due = std::chrono::steady_clock::now() +
                        std::min(from_seconds(std::max(0.0, p.swarm.tracker().state().eta_seconds)),
                                 options_.averaging.matchmaking_time);
  // The averager is the background round's alone until finish_zero_weight_round: the download in between
  // uses only its client, which any thread may call.
  round.outcome = std::async(std::launch::async, [&averager, stop = should_stop_, schema = p.gradients.schema(),
                                                  values = std::span<float>(round.vector), expected = bucket_expected(bucket),
                                                  bucket, epoch, due, log = options_.log, across = options_.across_buckets,
                                                  target = options_.averaging.target_group_size] {
    // Stopping: the step then ends at once (the averager is interrupted).
    sleep_unless(due - std::chrono::steady_clock::now(), [&stop] { return stop && stop(); });
    GradientRound taken{averager.step(schema, values, 0.0, expected, bucket.round)};
    if (across) across_buckets(taken, averager, schema, values, bucket, epoch, target, log);
    return taken;
  });
  Logger::Line(options_.log, LogLevel::kInfo, kLog)
      << "epoch " << epoch << ": taking part in its round at weight 0 while we download (our last download took "
      << p.last_download_seconds << " s)";
  return true;
}

void Trainer::finish_zero_weight_round(TrainerReport& report) {
  auto& p = *parts_;
  auto round = std::move(*p.zero_round);
  p.zero_round.reset();
  auto taken = round.outcome.get();  // bounded: matchmaking_time plus the rounds' deadlines
  const Result<avg::StepOutcome>& outcome = taken.group;
  collab::StepFacts facts;
  facts.other_trainers = p.swarm.others();
  record_gradient_round(taken, facts);
  // Only from the state that round averaged for, and only where every part holds the average of weighted
  // contributions, as every other member's does: not where a part came back unaveraged, nor where a reducer
  // (ours among them) dropped a sender and may have weighed nothing (aux peers alone, or the only sender
  // banned), leaving our zeros there.
  std::string why_not;
  if (epoch_ != round.epoch) why_not = "we are at epoch " + std::to_string(epoch_);
  else if (facts.averaging != collab::StepAveraging::kGroup) why_not = facts.why_not_averaged;
  else if (outcome->senders < 2) why_not = "nobody else in its group sent gradients";
  else if (facts.averaged_fraction < 1) why_not = "not all of it was averaged";
  else if (!outcome->all_reduce.banned_senders.empty() || outcome->all_reduce.unweighed_parts > 0) {
    why_not = "a reducer averaged without a sender";
  } else if (stopping()) {
    why_not = "stopping";
  }
  if (!why_not.empty()) {
    Logger::Line(options_.log, LogLevel::kInfo, kLog)
        << "epoch " << round.epoch << ": the round taken part in at weight 0 gives us no step (" << why_not << ")";
    return;
  }
  std::copy(round.vector.begin(), round.vector.end(), p.gradients.values().begin());
  facts.result_finite = all_finite(p.gradients.values());
  conclude_step(report, facts, StepInputs{}, /*next_batch_started=*/false);
}

bool Trainer::resync_if_diverged(TrainerReport& report) {
  auto& p = *parts_;
  // While a delayed step is in flight our parameters are an epoch behind our record: judged after it lands.
  if (!options_.collaboration.resync_divergent || !p.divergence.enabled() || p.delayed) return false;
  const auto verdict = collab::judge_divergence(p.swarm.tracker().others_records(), local_progress());
  switch (p.divergence.on_verdict(verdict, epoch_)) {
    case collab::DivergenceWatch::Action::kNone: return false;
    case collab::DivergenceWatch::Action::kGiveUp:
      Logger::Line(options_.log, LogLevel::kWarning, kLog)
          << "epoch " << epoch_ << ": our parameters differ from the swarm's again right after a resync and a step "
          << "averaged in full with most of the swarm: this peer's hardware or libraries round the optimizer step "
          << "differently; no more resyncs for divergence (collaboration.resync_divergent)";
      return false;
    case collab::DivergenceWatch::Action::kGiveUpAfterRepeats:
      Logger::Line(options_.log, LogLevel::kWarning, kLog)
          << "epoch " << epoch_ << ": our parameters differ from the swarm's again after "
          << collab::DivergenceWatch::kMaxResyncsInARow << " resyncs in a row, each followed by a step in a small "
          << "group formed apart from the rest: no more resyncs for divergence (collaboration.resync_divergent)";
      return false;
    case collab::DivergenceWatch::Action::kResync: break;
  }
  if (std::chrono::steady_clock::now() < p.next_catch_up) return false;  // the backoff after a failed attempt
  Logger::Line(options_.log, LogLevel::kInfo, kLog)
      << "epoch " << epoch_ << ": our parameters differ from those of " << verdict.agreeing << " of the " << verdict.peers
      << " peers (hash " << avg::parameters_hash_hex(p.params_hash.latest()) << " against "
      << avg::parameters_hash_hex(verdict.swarm_hash)
      << "): downloading theirs";
  // A group found ahead for this round keeps us: the state we load is of our own epoch, so we step in that
  // group after the download, on the swarm's parameters, with the samples computed since (the group waits
  // for us the download's time: a median 1-2 s in the lab, 9 s at most). Withdrawing served the group's own
  // round without us, but its cross-bucket hand-on is a round of all its trainers (Averager::broadcast),
  // which then waited for us to the averaging deadline: 30 s of a whole group's time at a run's start, for
  // every member that resynced. A state of a later epoch makes the group's round stale: the search for our
  // next round withdraws it then (Averager::prepare).
  auto caught = catch_up(report, verdict.swarm_hash);
  if (!caught.is_ok() && !stopping()) Logger::Line(options_.log, LogLevel::kWarning, kLog) << caught.to_string();
  return true;
}

Result<bool> Trainer::compute_micro_batch() {
  auto& p = *parts_;
  double compute_begin = now_seconds();
  p.ema.begin_micro_batch(compute_begin);  // after a round, wait or download (paused), the clock restarts here
  auto batch = task_.next_batch();
  if (!batch) return batch.status().with_context("reading data");
  torch::Tensor loss = task_.loss(*batch);
  double loss_value = loss.item<double>();
  if (!std::isfinite(loss_value)) {
    Logger::Line(options_.log, LogLevel::kWarning, kLog) << "dropped a micro-batch with a non-finite loss";
    p.gradients.drop_micro_batch();
    return false;
  }
  loss.backward();
  accumulate(*batch, loss_value);
  if (p.outer && p.gradients.accumulated_samples() >= options_.collaboration.inner_batch_size) inner_step();
  double compute_end = now_seconds();
  p.compute_seconds += compute_end - compute_begin;
  p.last_micro_batch_seconds = compute_end - compute_begin;
  p.ema.update(static_cast<std::uint64_t>(batch->size()), compute_end);
  p.samples_computed += static_cast<std::uint64_t>(batch->size());
  return true;
}

Status Trainer::save_checkpoint_files() const {
  auto snapshotted = guard_torch("copying the training state", [&] { return Result<avg::TrainingState>(snapshot()); });
  if (!snapshotted) return snapshotted.status();
  auto& state = *snapshotted;
  std::string dir = options_.checkpoint_dir;
  DEDLOC_RETURN_IF_ERROR(collab::save_checkpoint(dir + "/checkpoint.safetensors", state, options_.checkpoint_extra));
  // The model alone, under its own names.
  std::vector<avg::TensorSpec> specs;
  std::vector<size_t> which;
  for (size_t i = 0; i < state.size(); ++i) {
    const auto& name = state.tensors()[i].name;
    for (std::string_view prefix : {"param/", "buffer/"}) {
      if (name.rfind(prefix, 0) == 0) {
        specs.push_back({name.substr(prefix.size()), state.tensors()[i].shape});
        which.push_back(i);
      }
    }
  }
  auto model = avg::TrainingState::with_tensors(std::move(specs), state.metadata);
  if (!model) return model.status();
  for (size_t k = 0; k < which.size(); ++k) {
    auto from = state.tensor(which[k]);
    std::copy(from.begin(), from.end(), model->tensor(k).begin());
  }
  return collab::save_checkpoint(dir + "/model.safetensors", *model, options_.checkpoint_extra);
}

void Trainer::export_model_files() const {
  auto exported = guard_torch("exporting the model", [&] { return task_.export_model(options_.checkpoint_dir); });
  if (!exported) {
    Logger::Line(options_.log, LogLevel::kWarning, kLog) << "the model was not exported: " << exported.status().to_string();
  } else if (!exported->empty()) {
    Logger::Line(options_.log, LogLevel::kInfo, kLog) << "exported the model to " << *exported;
  }
}

}  // namespace dedloc::train
