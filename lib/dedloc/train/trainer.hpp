// The collaborative optimizer loop (docs/architecture.md): what one dedloc-train peer does between start and exit.
//
// Each iteration computes one micro-batch: forward, backward, per-micro-step gradient clipping, and adds
// the gradients to an accumulator. The progress tracker publishes how many samples this peer holds and
// estimates the swarm's total; when the swarm has gathered the global batch (or the global epoch moved
// on), the peer averages its accumulated gradients (divided by its micro-steps) with a group of peers,
// weighted by samples, through the Averager, applies the optimizer at the schedule's learning rate for the
// epoch, and increments the epoch by exactly one. So the swarm computes large-batch SGD. Once the swarm's
// ETA is within the matchmaking time, the group for that step is sought in the background while the last
// micro-batches compute (match_ahead), so that matchmaking costs the step nothing.
//
// Modes (train/collaboration_mode.hpp): delayed runs the averaging of a batch in the background while the
// next batch computes and applies the step when the round ends; DiLoCo takes inner steps between outer ones.
//
// Faults: if averaging finds no group or fails, the peer steps with its local gradients and says so.
// Non-finite gradients are never applied: a micro-batch with a non-finite loss is dropped, and a step
// whose gradients are non-finite after averaging is skipped. A peer two or more epochs behind the swarm
// (or one that joins a swarm already past epoch 0) downloads the current state — parameters, buffers,
// optimizer statistics, epoch — from donors, and every non-client peer serves its own state as a donor.
// A peer whose parameter hash leaves the majority's at its epoch downloads theirs (collab/divergence.hpp).
// A download that fails is retried with backoff (1 s, doubling to 10 s); a joining peer never starts
// computing from its own state while other peers are ahead of it, since its steps would be wasted.
//
// Stopping: `should_stop` (a shutdown signal) ends every wait on the network within a fraction of a
// second: a download, matchmaking, an all-reduce, the wait between download attempts (WaitBreaker with
// Averager::interrupt). A step whose averaging was interrupted is not taken. Given `leave_now` too (a
// second signal), `should_stop` leaves gracefully instead: a peer whose group for the coming step formed
// or is forming (sought ahead: a leader holds its followers until it steps) keeps computing until that
// step, averages it and then leaves,
// and a round in progress runs to its end, so that the group's members get its share reduced instead of
// waiting out a deadline for it; `leave_now`, or averaging.averaging_timeout without the step starting,
// ends it as above.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <zmq.hpp>

#include "dedloc/avg/averager.hpp"
#include "dedloc/avg/state_transfer.hpp"
#include "dedloc/relay/relay_keeper.hpp"
#include "dedloc/train/optimizer.hpp"
#include "dedloc/collab/group_buckets.hpp"
#include "dedloc/collab/progress_tracker.hpp"
#include "dedloc/collab/step_outcome.hpp"
#include "dedloc/core/wait_breaker.hpp"
#include "dedloc/train/collaboration_mode.hpp"
#include "dedloc/train/recipe.hpp"
#include "dedloc/train/task.hpp"

namespace dedloc::train {

// What happened at one global step, or at one download of the swarm's state (for --json and tests).
struct TrainerEvent {
  // kAlone: no other peer in the run; kLocal: others are, but averaging found no group or failed, so the
  // step used our gradients only.
  enum class Kind { kAveraged, kAlone, kLocal, kSkipped, kLoadedState };
  Kind kind = Kind::kAlone;
  std::uint64_t epoch = 0;     // after the step or the download
  double loss = 0;             // mean micro-batch loss of the epoch that just ended (0 for a download)
  std::uint64_t samples = 0;   // this peer's samples in the step
  size_t group_size = 0;       // peers averaged with (kAveraged)
  bool found_ahead = false;    // the group formed while this peer still computed (kAveraged)
  // kAveraged: the group's id (hex, the same on every member: the peers whose steps averaged together) and
  // the share of the vector that came back averaged (below 1 when a reducer failed: there, our own values).
  std::string group;
  double averaged_fraction = 0;
  // Averaging payload bytes this peer has sent since it started (all-reduce parts and deltas, gradient
  // and parameter rounds), and the samples it has computed: their ratio is what a mode costs per sample.
  std::uint64_t bytes_sent = 0;
  std::uint64_t samples_computed = 0;
  double compute_seconds = 0;     // the time spent computing since it started (the rest went to rounds and waits)
  double waited_seconds = 0;      // this step's wait for the others' micro-batches that complete its batch
  std::uint64_t inner_steps = 0;  // DiLoCo: the inner steps this peer took before the outer step it reports
  // kAveraged: how long the all-reduce took, and the deadline it had.
  double averaging_seconds = 0;
  double averaging_deadline = 0;
  // kAveraged: the round's whole time after this peer's batch ended: the wait for the group, then the all-reduce.
  double round_seconds = 0;
  // kAveraged: in a split round, the buckets whose averages the cross-bucket stage brought in full (every
  // bucket: the swarm's average); 0 when the step took its group's average only.
  size_t buckets = 0;
  // kLoadedState: a resync (our parameters had left the majority's: collab/divergence.hpp) rather than a
  // catch-up with a swarm that was ahead.
  bool resync = false;
  // kLoadedState: loaded instead of a step, because this peer's round was averaged without it (its search
  // found no group, or it came too late to look): Trainer::sit_out_missed_round, handle_late_round.
  bool missed_round = false;
  // kAveraged: the step took a missed round's result from this carrier (its address) instead of averaging in
  // a group: the swarm's step, with none of this peer's samples in it (Trainer::take_missed_round_result).
  std::string took_result_from;
  // kLoadedState: the donor it came from (its address) and how long the download took, so that a run's
  // lines show how joiners spread over donors.
  std::string donor;
  double download_seconds = 0;
  // With TrainerOptions::hash_parameters, what the parameters are after the step or download, so that a
  // test can tell a joiner that loaded the swarm's parameters from one that only took its epoch number.
  // params_hash: a BLAKE2b of every parameter's float32 values, in the model's order, as 16 hex digits;
  // equal right after a download to the donor's (the transfer is exact), and between peers that averaged
  // a step together in full (the all-reduce ends bit-identical: avg/all_reduce.hpp). params_norm is the
  // parameters' L2 norm. (The progress records carry avg::parameters_hash, of the state's parameters.)
  std::string params_hash;
  double params_norm = 0;
};
const char* to_string(TrainerEvent::Kind kind);  // "averaged", "alone", "local", "skipped", "loaded_state"


struct TrainerOptions {
  std::string run_id;
  TrainingOptions training;
  CollaborationOptions collaboration;  // synchronous, or DiLoCo's inner and outer steps
  ScheduleOptions schedule;
  avg::AveragerOptions averaging;     // role kClient for a peer behind NAT
  // Matchmaking ahead of time: once the swarm's ETA is within averaging.matchmaking_time, look for the
  // step's group in the background while the last micro-batches compute (Averager::prepare).
  bool match_ahead = true;
  // Once the swarm outgrows averaging.target_group_size, each round splits it into buckets that average
  // apart, a new split every round (collab/group_buckets.hpp); false: one key, groups in arrival order.
  bool group_buckets = true;
  // After a split round's buckets averaged, the cross-bucket stage brings every trainer the swarm's average
  // (collab/group_buckets.hpp); false: each bucket steps on its own average, and the buckets' parameters
  // part (a second all-reduce a round saved; only periodic parameter averaging brings them together).
  bool across_buckets = true;
  // Each round's all-reduce deadline learned from the rounds before (collab/deadline_estimator.hpp), at most
  // averaging.averaging_timeout, and likewise matchmaking's time and quorum grace and the all-reduce's
  // sender, reducer and liveness timeouts (collab/averaging_timeouts.hpp), the averaging options' values
  // their ceilings; false: those fixed values for every round, no quorum, no liveness pings.
  bool adaptive_averaging_timeout = true;
  // Client mode: `relaying.relays` are relays to stay reachable through, tried before those listed in the
  // DHT (heartbeat, dead_after, ... too; the endpoints are filled in). A client-mode peer attached to a relay
  // serves its state there; one that finds no relay still trains and sends, but nobody can download from it.
  relay::RelayKeeperOptions relaying;
  double max_time_seconds = 0;        // stop after this much wall time; 0: no limit
  std::uint64_t max_epochs = 0;       // stop at this epoch; 0: no limit
  size_t min_peers = 1;               // wait (up to wait_for_peers) until this many peers, us included, are in
  Duration wait_for_peers = std::chrono::minutes(5);
  std::string checkpoint_dir;         // checkpoint.safetensors + model.safetensors (+ the task's export at exit); empty: none
  std::map<std::string, std::string> checkpoint_extra;  // recipe, run id: saved with each checkpoint
  std::string samples_log;            // a file with, per step, the epoch and the sample ids this peer put in
  bool status_line = false;           // a live status line (a terminal) rather than log lines
  std::function<void(const TrainerEvent&)> on_event;  // called on the training thread; may be empty
  bool hash_parameters = false;       // fill TrainerEvent::params_hash and params_norm (a pass over the parameters per event)
  Duration record_ttl = std::chrono::seconds(30);
  Logger* log = &Logger::global();
};

struct TrainerReport {
  std::uint64_t epoch = 0;
  double last_loss = 0;               // mean micro-batch loss of the last completed epoch
  std::uint64_t steps_averaged = 0;   // steps taken with a group's average
  std::uint64_t steps_alone = 0;      // steps taken with local gradients only
  std::uint64_t steps_skipped = 0;    // steps refused because the gradients were not finite
  std::uint64_t states_loaded = 0;    // downloads from donors
  double seconds = 0;                 // wall time in run()
  double compute_seconds = 0;         // of which computing micro-batches
  std::uint64_t bytes_sent = 0;       // averaging payload bytes sent (TrainerEvent::bytes_sent)
  std::uint64_t samples_computed = 0; // samples of every micro-batch this peer computed
};

// A gradient round's outcome: its group's all-reduce (our bucket's, in a split round), then what the
// cross-bucket stage of a split round did (collab/group_buckets.hpp).
struct GradientRound {
  Result<avg::StepOutcome> group;
  size_t buckets = 0;                   // the stage brought every one of this many buckets' averages; 0: it did not
  std::uint64_t across_bytes_sent = 0;  // the stage's payload bytes sent
};

class Trainer {
 public:
  // `node` must be started and joined; everything must outlive the trainer.
  Trainer(zmq::context_t& context, dht::Node& node, const crypto::Identity& identity, Task& task,
          Optimizer& optimizer, TrainerOptions options);
  ~Trainer();

  // Starts the averaging/donor server, checks that the swarm trains the same model (schema hash), and
  // catches up with the swarm if it is past our epoch, retrying until it succeeds, no other peer is
  // ahead any more, or `should_stop` says so: then kCancelled, with our records withdrawn. Errors name
  // what differs.
  Status start(const std::function<bool()>& should_stop = {});
  // Trains until `should_stop` says so, max_time or max_epochs. Withdraws our records on the way out, on
  // an error too. What the task or the optimizer throws (libtorch's errors, a device out of memory) ends
  // the run as an error Status naming what was being done (train/torch_errors.hpp). With `leave_now`,
  // `should_stop` first finishes the round our group waits for (see above).
  Result<TrainerReport> run(const std::function<bool()>& should_stop, const std::function<bool()>& leave_now = {});

  // The whole training state (parameters, buffers, optimizer statistics, epoch, lr) and loading one (a
  // checkpoint, a download); load_state refuses a state of another shape naming the first difference.
  avg::TrainingState snapshot() const;
  Status load_state(const avg::TrainingState& state);
  std::uint64_t epoch() const { return epoch_; }
  // Writes checkpoint.safetensors (everything) and model.safetensors (parameters and buffers under their
  // model names, for the PyTorch / Hugging Face world) into checkpoint_dir.
  Status save_checkpoint_files() const;
  // The task's own export of the model (Task::export_model) into checkpoint_dir, at the end of a run (ALBERT:
  // the Hugging Face folder checkpoint_dir/hf): logged, and a warning when it fails (the checkpoints are
  // written already).
  void export_model_files() const;
  // TrainerEvent::params_hash and params_norm of the parameters as they are now, into `event`.
  void describe_parameters(TrainerEvent& event) const;

 public:
  // What a step needs of the batch it ends, kept apart from the gradient buffer (which a delayed step
  // hands to the next batch before the step is applied).
  struct StepInputs {
    std::uint64_t samples = 0;
    std::vector<std::uint64_t> sample_ids;  // with a samples log only
  };

 private:
  struct Parts;
  Status start_in_swarm();
  Status train_until(TrainerReport& report);  // until stopping(), --max-time or --max-epochs
  // Forward, backward and accumulation of one micro-batch; false when it was dropped (non-finite loss).
  Result<bool> compute_micro_batch();
  void accumulate(const Batch& batch, double loss);
  // One global step: the mean of our gradients, averaged when others are in the run, classified
  // (collab/step_outcome.hpp), applied unless skipped, then published (progress, state, records).
  void step(TrainerReport& report);
  void average_gradients(collab::StepFacts& facts);
  // The gradient round itself (matchmaking and the all-reduce of the buffer's vector, then in a split round
  // the cross-bucket stage), callable from the delayed step's thread; record_gradient_round then puts its
  // outcome into `facts` and the tallies.
  GradientRound run_gradient_round(double weight);
  // The trainers a gradient round expects, us included: the progress records read, less those known gone.
  size_t expected_trainers();
  // Adaptive deadlines: until our own rounds decide, start from the figures other peers publish.
  void seed_round_deadline();
  // The next round's deadline and learned waits (matchmaking, parts), set on the averager.
  void apply_round_waits();
  // The learned waits, with the link floor of the swarm's slowest published upload, set on the averager.
  void apply_waits();
  // collab::link_floor for a round of our gradients among the trainers we read.
  Duration link_floor();
  void record_gradient_round(const GradientRound& round, collab::StepFacts& facts);
  // Classifies, applies and publishes a step whose averaging is over. `next_batch_started`: a delayed step,
  // whose batch's accumulators were emptied for the next batch when its round started.
  void conclude_step(TrainerReport& report, const collab::StepFacts& facts, const StepInputs& inputs,
                     bool next_batch_started);
  // Delayed mode (train/collaboration_mode.hpp): the round starts in the background and the next batch
  // starts computing; the step is applied when the round ends (finish_delayed_step waits for it).
  void start_delayed_step(const collab::StepFacts& facts, StepInputs inputs);
  void finish_delayed_step(TrainerReport& report);
  bool delayed_step_done() const;
  // The epoch our samples count toward: epoch_, or the next one while a delayed step is in flight.
  std::uint64_t progress_epoch() const;
  void apply_gradients(collab::StepOutcome outcome, const std::vector<std::uint64_t>& sample_ids);
  // DiLoCo: the accumulated mean gradient steps the local parameters with the recipe's optimizer.
  void inner_step();
  // What this peer contributes to a round, into the gradient buffer's vector: the mean gradient, or
  // (DiLoCo) the pseudo-gradient θ_outer − θ_local. Again after a failed round left it half-averaged.
  void write_update(bool again);
  void match_ahead(const collab::CollaborationState& state);
  // TrainingOptions::wait_for_due_batch: waits while the others' micro-batches that end before our next one
  // would complete the batch without it, up to what is left of this step's budget (one micro-batch's time).
  // True when it waited: the caller looks at the swarm again before computing.
  bool wait_for_due_batch();
  // Looks for the group of `epoch`'s gradient round in the background (Averager::prepare), in its bucket.
  void prepare_round(std::uint64_t epoch);
  void average_parameters();
  // One download attempt, unless the backoff after a failed one has not yet passed (then ok, nothing done).
  // With `swarm_hash` (a resync, collab/divergence.hpp) a state at our own epoch is loaded too, if its
  // parameters carry that hash.
  // `missed_round` marks the download's event (TrainerEvent::missed_round). With `max_epoch`, donors past
  // that epoch are passed over (avg::DownloadOptions::max_epoch).
  Status catch_up(TrainerReport& report, std::optional<std::uint64_t> swarm_hash = std::nullopt, bool missed_round = false,
                  std::optional<std::uint64_t> max_epoch = std::nullopt);
  // Our search found no group while the others average our round (CollaborationOptions::sit_out_missed_rounds):
  // waits, bounded, until most of them are past it and loads the state; true when it did (no step then),
  // false to step alone as before (the others did not move on in time, or the download failed).
  bool sit_out_missed_round(TrainerReport& report);
  // A round missed in a swarm split into buckets (our bucket's group formed without us, or the round ended
  // before our batch did): the cross-bucket stage's result, which a carrier lists the moment the carriers'
  // round ends (avg/round_result.hpp), is the step every group takes. Steps with it, dropping the samples
  // accumulated for that round, once one is listed within `wait`; true when it did. Sitting out instead
  // waits for the round's end and downloads the whole state after it, and comes back late for the next
  // round as often as not (docs/architecture.md, "A round missed"). false at once where there is no such
  // result: a swarm that fits one group, and other modes than synchronous.
  bool take_missed_round_result(TrainerReport& report, Duration wait);
  // Sitting a round out, before downloading its result: takes part in the next round (`epoch`'s, whose group
  // we are already in) at weight 0 in the background, when CollaborationOptions::zero_weight_next_round
  // says it is worth it; true when it started.
  bool start_zero_weight_round(std::uint64_t epoch);
  // After the download: waits for that round (bounded) and, when the download landed on its epoch and the
  // whole vector came back averaged, steps with the group's average as its members do.
  void finish_zero_weight_round(TrainerReport& report);
  // After a download: notes when the swarm's batch for the epoch loaded was already complete (its group
  // formed ahead without us), for sit_out_late_round. Synchronous runs that sit missed rounds out only.
  void note_if_loaded_late();
  // Where we would step in a round whose state we loaded late: a search now meets only other latecomers, a
  // group of a few whose step leaves them apart from the swarm (a resync, late again, another group of a
  // few...). Sits the round out instead (sit_out_missed_round); true when it did.
  bool sit_out_late_round(TrainerReport& report);
  // How long sit_out_missed_round waits for the others to finish the round.
  Duration missed_round_wait() const;
  // A resync when the progress records say our parameters left the majority's; true when it tried one.
  bool resync_if_diverged(TrainerReport& report);
  // What a lagging peer does once the swarm ahead of it finished our round without us
  // (collab::round_over_without_us): kStep when it may not download yet, kWait while its search ahead
  // may still find a group, kCaughtUp when it loaded the swarm's state (or tried to) instead of averaging
  // in a round nobody else takes part in any more, also when a group found ahead holds it (a late cohort).
  enum class LateRound { kStep, kWait, kCaughtUp };
  // The key and the expected peers of a round ("grad.N", "params.N"): its bucket when the swarm outgrows
  // one group (TrainerOptions::group_buckets), decided once per round.
  collab::GroupBucket round_bucket(const std::string& round, std::uint64_t epoch);
  // The trainers a round of `bucket` waits for (expected_trainers() when the swarm is not split).
  size_t bucket_expected(const collab::GroupBucket& bucket);
  // ... at our step, where a split bucket's trainers still behind its round are not (collab::still_expected;
  // at debug level it logs those it leaves out, collab::left_out).
  size_t expected_at_step(const collab::GroupBucket& bucket);
  // Tells the averager whether the searches for `bucket` look for their key's one group (a split round).
  void search_one_group_per_key(const collab::GroupBucket& bucket);
  LateRound handle_late_round(const collab::CollaborationState& state, TrainerReport& report);
  // Snapshots the state, serves it to joiners and hashes its parameters for our progress record.
  void serve_current_state();
  // The joiner's download at start: attempts until the swarm is no longer ahead of us; kCancelled when stopped.
  Status catch_up_at_start(TrainerReport& report);
  bool stopping() const { return should_stop_ && should_stop_(); }
  // Leave now, whatever others wait for: `leave_now`, or `should_stop` when there is none.
  bool stopping_now() const { return leave_now_ ? leave_now_() : stopping(); }
  // Stopping, but our group for the coming step waits for our share: train on until that step (true), or
  // leave (false: no such group, no `leave_now`, or the step did not start within the grace).
  bool finish_round_before_leaving();
  // While alive, a stop request interrupts the averager's waits (matchmaking, all-reduce, downloads).
  WaitBreaker interruptible();
  // The same for a round others average with us: a stop ends its matchmaking, only stopping_now() its
  // all-reduce; a group that formed or is forming ahead (`grouped_ahead`) gets a moment to form first.
  WaitBreaker round_interruptible(bool grouped_ahead);
  // Our search ahead for `round` found its group or is still looking (its leader may hold us in it).
  bool grouped_ahead(const std::string& round) const;
  // Stopped while averaging, and the round did not complete in a group: leave without a step the others
  // did not take with us.
  bool averaging_cut_short(const collab::StepFacts& facts) const;
  // Sleeps until `until` in short slices; false when stopped first.
  bool sleep_unless_stopped(TimePoint until) const;
  // How long our records' withdrawal may take on the way out (shorter when stopped).
  Deadline leaving_deadline() const;
  void publish_donor_and_metrics(bool force);
  void show_status(const collab::CollaborationState& state, bool final = false);
  collab::PeerProgress local_progress() const;

  dht::Node& node_;
  Task& task_;
  Optimizer& optimizer_;
  TrainerOptions options_;
  std::unique_ptr<Parts> parts_;  // the gradient buffer, the swarm presence, tallies (trainer.cpp)
  std::uint64_t epoch_ = 0;
  std::function<bool()> should_stop_;  // start()'s, then run()'s
  std::function<bool()> leave_now_;    // run()'s
  std::optional<TimePoint> leave_by_;  // leaving after our group's round: at the latest then
};

}  // namespace dedloc::train
