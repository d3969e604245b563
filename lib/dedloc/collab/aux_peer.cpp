#include "dedloc/collab/aux_peer.hpp"

#include <algorithm>
#include <thread>

#include "dedloc/collab/aux_timing.hpp"
#include "dedloc/collab/deadline_estimator.hpp"
#include "dedloc/collab/group_buckets.hpp"
#include "dedloc/collab/progress.hpp"

namespace dedloc::collab {

AuxPeer::AuxPeer(zmq::context_t& context, dht::Node& dht, const crypto::Identity& identity, AuxPeerOptions options)
    : context_(context), dht_(dht), identity_(identity), options_(std::move(options)), log_(*options_.averager.log) {
  options_.averager.role = avg::AvgRole::kAux;
  options_.averager.all_reduce.liveness_timeout = options_.liveness_timeout;
  if (options_.relay_address) options_.averager.announce = options_.relay_address();
}

AuxPeer::~AuxPeer() = default;

Status AuxPeer::start() {
  averager_ = std::make_unique<avg::Averager>(context_, dht_, identity_, options_.averager);
  return averager_->start();
}

std::string AuxPeer::endpoint() const {
  if (options_.relay_address) return options_.averager.announce;
  return averager_ ? averager_->endpoint() : std::string();
}

Result<AuxPeerReport> AuxPeer::run(const std::function<bool()>& should_stop) {
  if (!averager_) return error(Code::kInternal, "AuxPeer::run before start()");
  AuxPeerReport report;
  while (!should_stop() && (options_.rounds == 0 || report.rounds < options_.rounds)) {
    if (options_.relay_address) {
      const std::string address = options_.relay_address();
      if (!address.empty() && address != options_.averager.announce) {
        options_.averager.announce = address;
        log_.info("aux") << "now reachable at " << address;
        averager_.reset();  // frees its in-process endpoint for the new one
        averager_ = std::make_unique<avg::Averager>(context_, dht_, identity_, options_.averager);
        DEDLOC_RETURN_IF_ERROR(averager_->start());
      }
    }
    const Duration wait = help_one_round(report);
    if (wait > Duration::zero() && sleep_unless(wait, should_stop)) break;
  }
  const std::string& run_id = options_.averager.run_id;
  if (auto withdrawn = withdraw_metrics(dht_, run_id, options_.record_ttl, Deadline::after(std::chrono::seconds(2)));
      !withdrawn.is_ok()) {
    log_.debug("aux") << "withdrawing the metrics record: " << withdrawn.to_string();
  }
  log_.info("aux") << "leaving after " << report.rounds << " round(s)";
  return report;
}

Duration AuxPeer::help_one_round(AuxPeerReport& report) {
  const std::string& run_id = options_.averager.run_id;
  // The trainers' progress records say which epoch's gradients they will average next (the round's name:
  // gradient_round), when they start looking for its group (aux_timing.hpp), and how many will look: with
  // all of them in, a group we lead forms at once rather than at the matchmaking deadline. Without
  // records, plain "grad" rounds.
  auto trainers = read_progress(dht_, run_id, Deadline::after(std::chrono::seconds(2)));
  std::optional<AuxRoundTiming> timing;
  if (trainers && !trainers->empty()) {
    timing = time_aux_round(*trainers, last_looked_, synchronous_batch(), options_.averager.matchmaking_time,
                            SystemClock::instance().unix_seconds());
    if (!timing->look_now) {
      publish_metrics(timing->epoch, report.rounds);  // also while we wait: monitors keep listing us
      return timing->wait;
    }
  }
  // The layout only once it is time to look (not at every read of the records while we wait).
  auto schema = avg::read_schema(dht_, run_id, Deadline::after(std::chrono::seconds(5)));
  if (!schema || !schema->has_value()) {
    if (!told_waiting_) {
      log_.info("aux") << "waiting for a trainer of '" << run_id << "' to publish its vector layout"
                       << (schema ? std::string() : ": " + schema.status().to_string());
      told_waiting_ = true;
    }
    return options_.retry_interval;
  }
  publish_metrics(timing ? timing->epoch : 0, report.rounds);
  size_t expected = 0;
  std::string round = "grad";
  if (timing) {
    const std::uint64_t epoch = timing->epoch;
    // The round's bucket, as the trainers split it (group_buckets.hpp): an aux peer takes its own.
    const Bytes self = own_subkey(dht_);
    const GroupBucket bucket = choose_group_bucket(gradient_round(epoch), epoch, *trainers, std::string(self.begin(), self.end()),
                                                   /*self_trainer=*/false, /*self_client=*/false,
                                                   options_.averager.target_group_size);
    expected = bucket.expected;
    round = bucket.round;
    last_looked_ = epoch;  // found or not, this round is over for us once the search ends
    follow_trainers_deadline(*trainers);
  }
  auto outcome = averager_->step(**schema, {}, 0, expected, round);
  if (!outcome) {
    log_.warn("aux") << "round failed: " << outcome.status().to_string();
    return options_.retry_interval;
  }
  if (outcome->group_size == 0) {
    log_.debug("aux") << "no group this round: " << outcome->why_alone;
    return Duration::zero();
  }
  ++report.rounds;
  if (round_deadline_) {
    // As the trainers learn theirs: a round its deadline ended (senders went silent) tells only that it
    // needed longer.
    if (outcome->all_reduce_timed_out || !outcome->all_reduce.banned_senders.empty()) round_deadline_->observe_timeout();
    else round_deadline_->observe(outcome->all_reduce_time);
  }
  const auto& reduced = outcome->all_reduce;
  // Senders cut off are either silent from the start (gone, or never in the round) or held up: a part
  // completes only once every sender delivered it, so one silent sender stalls the others' windows too.
  log_.info("aux") << "reduced for a group of " << outcome->group_size
                   << (reduced.banned_senders.empty()
                           ? std::string()
                           : ", without " + std::to_string(reduced.banned_senders.size()) + " sender(s) (" +
                                 std::to_string(reduced.unheard_senders.size()) + " of them sent us nothing)");
  return Duration::zero();
}

void AuxPeer::follow_trainers_deadline(const std::vector<PeerProgress>& trainers) {
  // Trainers with adaptive deadlines publish their round figures: they stop waiting for our share at a
  // deadline learned from them, and we stop waiting for their parts at one learned the same way, not at a
  // fixed averaging timeout long after they moved on (which made us miss their next rounds).
  const bool published = std::any_of(trainers.begin(), trainers.end(), [](const PeerProgress& t) { return t.round_seconds > 0; });
  if (!published && !round_deadline_) return;
  if (!round_deadline_) round_deadline_.emplace(DeadlineEstimatorOptions{.ceiling = options_.averager.averaging_timeout});
  follow_swarm_figures(*round_deadline_, trainers);
  averager_->set_averaging_timeout(round_deadline_->deadline());
}

std::uint64_t AuxPeer::synchronous_batch() {
  const auto now = std::chrono::steady_clock::now();
  if (now < next_batch_read_) return batch_;
  // The run's batch and mode change rarely (a trainer with another recipe joins): read every record_ttl/3.
  next_batch_read_ = now + options_.record_ttl / 3;
  auto records = read_metrics(dht_, options_.averager.run_id, Deadline::after(std::chrono::seconds(2)));
  if (!records) return batch_;
  std::uint64_t batch = 0;
  for (const auto& r : *records) {
    if (r.role == "aux") continue;
    if (!r.mode.empty() && r.mode != "synchronous") return batch_ = 0;
    batch = std::max(batch, r.target_batch_size);
  }
  return batch_ = batch;
}

// Our metrics record, so that monitors list this peer with its role and the rounds it reduced.
void AuxPeer::publish_metrics(std::uint64_t epoch, size_t rounds) {
  auto now = std::chrono::steady_clock::now();
  if (now - last_metrics_ < options_.record_ttl / 3) return;
  last_metrics_ = now;
  PeerMetrics metrics;
  metrics.role = "aux";
  metrics.rounds = rounds;
  metrics.epoch = epoch;
  auto stored = collab::publish_metrics(dht_, options_.averager.run_id, metrics, options_.record_ttl,
                                        Deadline::after(std::chrono::seconds(2)));
  if (!stored.is_ok()) log_.debug("aux") << "metrics record: " << stored.to_string();
}

}  // namespace dedloc::collab
