#include "dedloc/train/trainer.hpp"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "dedloc/collab/checkpoint.hpp"

namespace dedloc::train {

namespace {

constexpr std::string_view kLog = "train";
// A failed download is retried no sooner than this (the loop checks every micro-batch).
constexpr Duration kCatchUpBackoff = std::chrono::seconds(10);

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::vector<std::uint64_t> shape_of(const torch::Tensor& t) {
  std::vector<std::uint64_t> shape;
  for (auto d : t.sizes()) shape.push_back(static_cast<std::uint64_t>(d));
  return shape;
}

// One tensor (any device) to and from float32 elements on the host.
void copy_to_floats(const torch::Tensor& tensor, std::span<float> out) {
  torch::from_blob(out.data(), {tensor.numel()}, torch::kFloat32).copy_(tensor.detach().reshape({-1}).to(torch::kCPU, torch::kFloat32));
}

void copy_from_floats(std::span<const float> in, const torch::Tensor& tensor) {
  torch::NoGradGuard no_grad;
  tensor.copy_(torch::from_blob(const_cast<float*>(in.data()), tensor.sizes(), torch::kFloat32));
}

// Tensors back to back in a flat buffer, in order, and back.
void flatten_into(const std::vector<torch::Tensor>& tensors, std::span<float> out) {
  size_t offset = 0;
  for (const auto& t : tensors) {
    copy_to_floats(t, out.subspan(offset, static_cast<size_t>(t.numel())));
    offset += static_cast<size_t>(t.numel());
  }
}

void unflatten_from(std::span<const float> in, const std::vector<torch::Tensor>& tensors) {
  size_t offset = 0;
  for (const auto& t : tensors) {
    copy_from_floats(in.subspan(offset, static_cast<size_t>(t.numel())), t);
    offset += static_cast<size_t>(t.numel());
  }
}

bool all_finite(std::span<const float> values) {
  for (float v : values) {
    if (!std::isfinite(v)) return false;
  }
  return true;
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

// Everything with torch types or network objects, kept out of the header.
struct Trainer::Parts {
  NamedTensors parameters, buffers, optimizer_state;
  std::vector<torch::Tensor> parameter_list, accumulators;
  std::vector<avg::TensorSpec> gradient_specs;
  avg::VectorSchema gradient_schema;
  std::vector<float> gradient_vector;  // allocated once: the averaging buffer
  // What snapshot() holds: parameters, buffers and optimizer statistics under "param/", "buffer/",
  // "optim/" names, and the live tensors behind them.
  std::vector<avg::TensorSpec> state_specs;
  std::vector<torch::Tensor> state_tensors;
  Bytes state_schema;                  // avg::schema_hash(state_specs): what donors must match

  std::unique_ptr<avg::Averager> averager;
  std::unique_ptr<collab::ProgressTracker> tracker;
  std::unique_ptr<avg::StateServer> state_server;
  std::string donor_endpoint;                     // where downloaders reach us; a relay:// address in client mode
  zmq::context_t* context = nullptr;
  const crypto::Identity* identity = nullptr;
  std::unique_ptr<relay::RelayKeeper> relay_keeper;  // client mode, when a relay took us

  collab::ThroughputEma ema;
  std::uint64_t micro_steps = 0, samples = 0, epoch_micro_steps = 0;
  double loss_sum = 0, last_loss = 0;
  std::vector<std::uint64_t> sample_ids;
  std::ofstream samples_log;
  TimePoint last_donor_advert{}, next_catch_up{};
  std::uint64_t states_loaded_at_start = 0;  // a joining peer's first download, for run()'s report
  std::uint64_t rounds_averaged = 0;         // gradient rounds averaged with a group, for the metrics record
  bool has_loss = false;                     // an epoch has ended: last_loss means something
  double compute_seconds = 0;
  double started = 0;
};

Trainer::Trainer(zmq::context_t& context, dht::Node& node, const crypto::Identity& identity, Task& task,
                 Optimizer& optimizer, TrainerOptions options)
    : node_(node), task_(task), optimizer_(optimizer), options_(std::move(options)), parts_(std::make_unique<Parts>()) {
  auto& p = *parts_;
  p.context = &context;
  p.identity = &identity;
  p.parameters = task_.named_parameters();
  p.buffers = task_.named_buffers();
  p.optimizer_state = optimizer_.state();
  std::uint64_t length = 0;
  for (const auto& [name, tensor] : p.parameters) {
    p.parameter_list.push_back(tensor);
    p.accumulators.push_back(torch::zeros_like(tensor));
    p.gradient_specs.push_back({name, shape_of(tensor)});
    length += static_cast<std::uint64_t>(tensor.numel());
  }
  p.gradient_schema = {avg::schema_hash(p.gradient_specs), length};
  p.gradient_vector.assign(length, 0.0f);
  auto add_to_state = [&p](const std::string& prefix, const NamedTensors& named) {
    for (const auto& [name, tensor] : named) {
      p.state_specs.push_back({prefix + name, shape_of(tensor)});
      p.state_tensors.push_back(tensor);
    }
  };
  add_to_state("param/", p.parameters);
  add_to_state("buffer/", p.buffers);
  add_to_state("optim/", p.optimizer_state);
  p.state_schema = avg::schema_hash(p.state_specs);

  options_.averaging.run_id = options_.run_id;
  options_.averaging.log = options_.log;
  p.averager = std::make_unique<avg::Averager>(context, node, identity, options_.averaging);
  // A client-mode peer serves too: through its relay, once one takes it (start()).
  avg::StateServerOptions serving;
  serving.run_id = options_.run_id;
  serving.log = options_.log;
  p.state_server = std::make_unique<avg::StateServer>(p.averager->server(), serving);
  collab::TrackerOptions tracking;
  tracking.run_id = options_.run_id;
  tracking.target_batch_size = options_.training.target_batch_size;
  tracking.record_ttl = options_.record_ttl;
  tracking.log = options_.log;
  p.tracker = std::make_unique<collab::ProgressTracker>(node, tracking);
  if (!options_.samples_log.empty()) p.samples_log.open(options_.samples_log, std::ios::app);
}

Trainer::~Trainer() {
  // The tracker's thread and the averager's server first: they call into what follows.
  parts_->tracker.reset();
  parts_->averager.reset();
}

avg::TrainingState Trainer::snapshot() const {
  const auto& p = *parts_;
  auto state = avg::TrainingState::with_tensors(p.state_specs);
  if (!state) {  // names come from the model; a clash is a programming error worth a loud message
    Logger::Line(options_.log, LogLevel::kError, kLog) << "cannot describe the training state: " << state.status().to_string();
    return {};
  }
  for (size_t i = 0; i < p.state_tensors.size(); ++i) copy_to_floats(p.state_tensors[i], state->tensor(i));
  state->metadata.epoch = epoch_;
  state->metadata.entries["lr"] = learning_rate(options_.schedule, epoch_);
  // The run id, recipe and model travel with the state, so that whoever downloads it (a joiner, or
  // `dedloc-avg export`) knows what it holds.
  for (const auto& [key, value] : options_.checkpoint_extra) state->metadata.entries[key] = value;
  return std::move(*state);
}

Status Trainer::load_state(const avg::TrainingState& state) {
  auto& p = *parts_;
  const auto& mine = p.state_specs;
  if (state.schema_hash() != p.state_schema) {
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
  for (size_t i = 0; i < p.state_tensors.size(); ++i) copy_from_floats(state.tensor(i), p.state_tensors[i]);
  epoch_ = state.epoch();
  for (auto& a : p.accumulators) a.zero_();
  p.micro_steps = p.samples = 0;
  p.sample_ids.clear();
  if (p.state_server) p.state_server->set_state(std::make_shared<const avg::TrainingState>(snapshot()));
  return Status();
}

Status Trainer::start() {
  auto& p = *parts_;
  DEDLOC_RETURN_IF_ERROR(p.averager->start().with_context("starting the averaging server"));
  p.donor_endpoint = p.averager->dialable_endpoint();
  if (options_.averaging.role == avg::AvgRole::kClient) attach_to_relay();
  // The swarm's model must be ours: compare with the schema the first peers published.
  auto published = avg::read_schema(node_, options_.run_id, Deadline::after(std::chrono::seconds(10)));
  if (published && published->has_value()) {
    const auto& theirs = **published;
    if (theirs.hash != p.gradient_schema.hash || theirs.length != p.gradient_schema.length) {
      return error(Code::kRefused,
                   "run '" + options_.run_id + "' trains another model: its parameters' schema is " +
                       to_hex(ByteSpan(theirs.hash).first(4)) + "… (" + std::to_string(theirs.length) +
                       " values), this recipe's is " + to_hex(ByteSpan(p.gradient_schema.hash).first(4)) + "… (" +
                       std::to_string(p.gradient_schema.length) + " values): use the run's recipe or another --run-id");
    }
  } else if (published) {
    auto stored = avg::publish_schema(node_, options_.run_id, p.gradient_schema, std::chrono::hours(24),
                                      Deadline::after(std::chrono::seconds(10)));
    if (!stored.is_ok()) Logger::Line(options_.log, LogLevel::kWarning, kLog) << "could not publish the model schema: " << stored.to_string();
  }
  if (p.state_server) p.state_server->set_state(std::make_shared<const avg::TrainingState>(snapshot()));
  p.tracker->report(local_progress());
  p.tracker->refresh_now();
  auto state = p.tracker->state();
  if (state.epoch > epoch_) {
    TrainerReport at_start;
    auto caught = catch_up(at_start);
    p.states_loaded_at_start = at_start.states_loaded;
    if (!caught.is_ok()) {
      Logger::Line(options_.log, LogLevel::kWarning, kLog) << "the swarm is at epoch " << state.epoch
                                                           << " but its state could not be downloaded yet: " << caught.to_string();
    }
  }
  publish_donor_and_metrics(true);
  return Status();
}

collab::PeerProgress Trainer::local_progress() const {
  collab::PeerProgress progress;
  progress.epoch = epoch_;
  progress.samples_accumulated = parts_->samples;
  progress.samples_per_second = parts_->ema.samples_per_second();
  progress.client_mode = options_.averaging.role == avg::AvgRole::kClient;
  progress.bandwidth = options_.averaging.bandwidth;
  progress.compute = parts_->ema.samples_per_second();
  return progress;
}

void Trainer::accumulate(const Batch& batch, double loss) {
  auto& p = *parts_;
  torch::NoGradGuard no_grad;
  if (options_.training.max_grad_norm > 0) {
    torch::nn::utils::clip_grad_norm_(p.parameter_list, options_.training.max_grad_norm);
  }
  for (size_t i = 0; i < p.parameter_list.size(); ++i) {
    auto& grad = p.parameter_list[i].mutable_grad();
    if (!grad.defined()) continue;  // a parameter this batch did not reach
    p.accumulators[i].add_(grad);
    grad.zero_();
  }
  ++p.micro_steps;
  ++p.epoch_micro_steps;
  p.samples += static_cast<std::uint64_t>(batch.size());
  p.loss_sum += loss;
  if (p.samples_log.is_open()) p.sample_ids.insert(p.sample_ids.end(), batch.sample_ids.begin(), batch.sample_ids.end());
}

void Trainer::step(TrainerReport& report) {
  auto& p = *parts_;
  // The mean gradient over our micro-steps (each micro-step's loss is already a mean over its batch).
  for (size_t i = 0; i < p.accumulators.size(); ++i) p.accumulators[i].div_(static_cast<double>(std::max<std::uint64_t>(1, p.micro_steps)));
  flatten_into(p.accumulators, p.gradient_vector);
  const std::uint64_t contributed = p.samples;
  std::string how;
  bool apply = true;
  TrainerEvent event;
  event.samples = contributed;
  if (!all_finite(p.gradient_vector)) {
    how = "skipped: our accumulated gradients are not finite";
    apply = false;
    p.averager->withdraw();  // a group found ahead is served without our gradients, not left waiting
  } else if (p.tracker->others() == 0) {
    how = "alone (no other peer in the run)";
    ++report.steps_alone;
  } else {
    p.ema.pause();
    // Every trainer we know of (aux peers publish no progress, and are welcome if they are in by then).
    auto average = [&] {
      return p.averager->step(p.gradient_schema, p.gradient_vector, static_cast<double>(contributed),
                              p.tracker->others() + 1, collab::gradient_round(epoch_));
    };
    auto outcome = average();
    // Peers we know of but did not meet may have looked just before or after us (their batch came a
    // moment apart): one more window overlaps theirs, where stepping alone now would leave us out of
    // phase for good.
    if (outcome && outcome->group_size == 0 && p.tracker->others() > 0) outcome = average();
    p.ema.resume(now_seconds());
    if (!outcome) {
      flatten_into(p.accumulators, p.gradient_vector);  // a failed round may have left the buffer half-averaged
      how = "with local gradients: averaging failed: " + outcome.status().to_string();
      ++report.steps_alone;
      event.kind = TrainerEvent::Kind::kLocal;
    } else if (outcome->group_size == 0) {
      how = "with local gradients: " + outcome->why_alone;
      ++report.steps_alone;
      event.kind = TrainerEvent::Kind::kLocal;
    } else {
      std::ostringstream text;
      text << "averaged in a group of " << outcome->group_size << (outcome->found_ahead ? " (found ahead)" : "");
      if (outcome->all_reduce.averaged_fraction < 1) text << " (" << 100 * outcome->all_reduce.averaged_fraction << "% averaged)";
      how = text.str();
      ++report.steps_averaged;
      ++p.rounds_averaged;
      event.kind = TrainerEvent::Kind::kAveraged;
      event.group_size = outcome->group_size;
      event.found_ahead = outcome->found_ahead;
    }
    if (apply && !all_finite(p.gradient_vector)) {
      how = "skipped: the averaged gradients are not finite";
      apply = false;
    }
  }
  if (apply) {
    std::vector<torch::Tensor> grads;
    for (auto& param : p.parameter_list) {
      if (!param.mutable_grad().defined()) param.mutable_grad() = torch::zeros_like(param);
      grads.push_back(param.mutable_grad());
    }
    unflatten_from(p.gradient_vector, grads);
    optimizer_.step(learning_rate(options_.schedule, epoch_));
    if (p.samples_log.is_open()) {
      p.samples_log << epoch_ << (how.rfind("averaged", 0) == 0 ? " averaged" : " alone");
      for (auto id : p.sample_ids) p.samples_log << ' ' << id;
      p.samples_log << '\n' << std::flush;
    }
    ++epoch_;
    task_.after_step(epoch_);
  } else {
    ++report.steps_skipped;
    event.kind = TrainerEvent::Kind::kSkipped;
  }
  p.last_loss = p.epoch_micro_steps ? p.loss_sum / static_cast<double>(p.epoch_micro_steps) : 0;
  p.has_loss = p.epoch_micro_steps > 0;
  Logger::Line(options_.log, LogLevel::kInfo, kLog) << "epoch " << epoch_ << ": " << contributed << " samples here, "
                                                    << how << ", loss " << p.last_loss;
  event.epoch = epoch_;
  event.loss = p.last_loss;
  if (options_.on_event) options_.on_event(event);
  // Every peer reaches this epoch with this step, so all of them look for a parameter group together.
  const auto every = options_.training.average_parameters_every;
  if (apply && every > 0 && epoch_ % every == 0 && p.tracker->others() > 0) average_parameters();
  for (auto& a : p.accumulators) a.zero_();
  for (auto& param : p.parameter_list) {
    if (param.mutable_grad().defined()) param.mutable_grad().zero_();
  }
  p.micro_steps = p.samples = p.epoch_micro_steps = 0;
  p.loss_sum = 0;
  p.sample_ids.clear();
  p.tracker->report(local_progress());
  if (p.state_server) p.state_server->set_state(std::make_shared<const avg::TrainingState>(snapshot()));
  publish_donor_and_metrics(true);
  if (!options_.checkpoint_dir.empty() && options_.training.checkpoint_every > 0 &&
      epoch_ % options_.training.checkpoint_every == 0) {
    auto saved = save_checkpoint_files();
    if (!saved.is_ok()) Logger::Line(options_.log, LogLevel::kWarning, kLog) << saved.to_string();
  }
}

void Trainer::match_ahead(const collab::CollaborationState& state) {
  auto& p = *parts_;
  if (!options_.match_ahead || p.tracker->others() == 0) return;
  if (state.eta_seconds > std::chrono::duration<double>(options_.averaging.matchmaking_time).count()) return;
  const std::string round = collab::gradient_round(epoch_);
  if (p.averager->prepared_round() == round) return;
  // A round still prepared for an earlier epoch (we caught up since) is withdrawn by prepare().
  p.averager->prepare(p.gradient_schema, p.tracker->others() + 1, round);
}

void Trainer::average_parameters() {
  auto& p = *parts_;
  torch::NoGradGuard no_grad;
  // The gradient buffer is free between steps, and parameters have the gradients' layout and schema
  // (the round's kind keeps them apart from gradient rounds).
  flatten_into(p.parameter_list, p.gradient_vector);
  p.ema.pause();
  auto outcome = p.averager->step(p.gradient_schema, p.gradient_vector, 1.0, p.tracker->others() + 1,
                                  "params." + std::to_string(epoch_));
  p.ema.resume(now_seconds());
  Logger::Line line(options_.log, LogLevel::kInfo, kLog);
  line << "epoch " << epoch_ << ": ";
  if (!outcome) {
    line << "parameters not averaged: " << outcome.status().to_string();
  } else if (outcome->group_size == 0) {
    line << "parameters not averaged: " << outcome->why_alone;
  } else if (!all_finite(p.gradient_vector)) {
    line << "parameters not averaged: the average is not finite";
  } else {
    unflatten_from(p.gradient_vector, p.parameter_list);
    line << "parameters averaged in a group of " << outcome->group_size;
  }
}

Status Trainer::catch_up(TrainerReport& report) {
  auto& p = *parts_;
  if (std::chrono::steady_clock::now() < p.next_catch_up) return Status();
  p.next_catch_up = std::chrono::steady_clock::now() + kCatchUpBackoff;
  avg::DownloadOptions download;
  download.run_id = options_.run_id;
  download.expected_schema = p.state_schema;
  if (!p.donor_endpoint.empty()) download.exclude.push_back(p.donor_endpoint);
  download.max_donors = 1;  // optimizer statistics are not averaged: stripes must come from one peer
  download.log = options_.log;
  p.ema.pause();
  auto downloaded = avg::download_state(node_, p.averager->client(), download, Deadline::after(std::chrono::seconds(120)));
  p.ema.resume(now_seconds());
  if (!downloaded) return downloaded.status().with_context("downloading the swarm's state");
  if (downloaded->state.epoch() <= epoch_) return Status();
  auto from = epoch_;
  DEDLOC_RETURN_IF_ERROR(load_state(downloaded->state));
  ++report.states_loaded;
  Logger::Line(options_.log, LogLevel::kInfo, kLog) << "caught up: loaded the state at epoch " << epoch_
                                                    << " (we were at " << from << ") from "
                                                    << (downloaded->donors.empty() ? "?" : downloaded->donors.front().address);
  if (options_.on_event) options_.on_event(TrainerEvent{.kind = TrainerEvent::Kind::kLoadedState, .epoch = epoch_});
  p.tracker->report(local_progress());
  return Status();
}

void Trainer::attach_to_relay() {
  auto& p = *parts_;
  relay::RelayKeeperOptions keeping = options_.relaying;
  // Forwarded requests reach our averaging server in-process.
  keeping.local_endpoint = p.averager->in_process_endpoint();
  keeping.log = options_.log;
  auto keeper = std::make_unique<relay::RelayKeeper>(*p.context, *p.identity, &node_, keeping);
  auto attached = keeper->start(Deadline::after(std::chrono::seconds(15)));
  if (!attached.is_ok()) {
    Logger::Line(options_.log, LogLevel::kWarning, kLog)
        << "client mode without a relay (" << attached.message()
        << "): this peer trains and sends its gradients, but nobody can reach it to download its state";
    return;
  }
  p.relay_keeper = std::move(keeper);
  p.donor_endpoint = p.relay_keeper->address();
  Logger::Line(options_.log, LogLevel::kInfo, kLog) << "reachable through a relay at " << p.donor_endpoint;
}

void Trainer::publish_donor_and_metrics(bool force) {
  auto& p = *parts_;
  if (p.relay_keeper) {  // our relay may have changed (the keeper moved us): advertise the new address at once
    auto address = p.relay_keeper->address();
    if (!address.empty() && address != p.donor_endpoint) {
      p.donor_endpoint = address;
      force = true;
    }
  }
  auto now = std::chrono::steady_clock::now();
  if (!force && now - p.last_donor_advert < options_.record_ttl / 3) return;
  p.last_donor_advert = now;
  const auto deadline = Deadline::after(std::chrono::seconds(3));
  if (p.state_server && !p.donor_endpoint.empty()) {
    auto info = p.state_server->donor_info(net::PeerAddress{p.donor_endpoint, node_.id()});
    auto advertised = avg::advertise_donor(node_, options_.run_id, info, options_.record_ttl, deadline);
    if (!advertised) Logger::Line(options_.log, LogLevel::kDebug, kLog) << "donor advertisement: " << advertised.status().to_string();
  }
  collab::PeerMetrics metrics;
  metrics.epoch = epoch_;
  if (p.has_loss) metrics.loss = p.last_loss;
  metrics.samples_per_second = p.ema.samples_per_second();
  metrics.micro_steps = p.micro_steps;
  metrics.role = options_.averaging.role == avg::AvgRole::kClient ? "client" : "trainer";
  metrics.target_batch_size = options_.training.target_batch_size;
  metrics.rounds = p.rounds_averaged;
  auto stored = collab::publish_metrics(node_, options_.run_id, metrics, options_.record_ttl, deadline);
  if (!stored.is_ok()) Logger::Line(options_.log, LogLevel::kDebug, kLog) << "metrics record: " << stored.to_string();
}

void Trainer::show_status(const collab::CollaborationState& state, bool final) {
  if (!options_.status_line) return;
  auto& p = *parts_;
  std::fprintf(stderr, "\r\033[Kepoch %llu | %.0f/%llu samples | %zu peers | ETA %.1f s | loss %.4f | %.1f samples/s%s",
               static_cast<unsigned long long>(epoch_), state.samples_accumulated,
               static_cast<unsigned long long>(state.target_batch_size), state.peers, state.eta_seconds, p.last_loss,
               p.ema.samples_per_second(), final ? "\n" : "");
}

Result<TrainerReport> Trainer::run(const std::function<bool()>& should_stop) {
  auto& p = *parts_;
  TrainerReport report;
  report.states_loaded = p.states_loaded_at_start;
  if (options_.min_peers > 1) {
    Logger::Line(options_.log, LogLevel::kInfo, kLog) << "waiting for " << options_.min_peers << " peers in run '" << options_.run_id << "'";
    auto deadline = Deadline::after(options_.wait_for_peers);
    while (p.tracker->others() + 1 < options_.min_peers) {
      if (should_stop()) return report;
      if (deadline.passed()) {
        return error(Code::kTimeout, "only " + std::to_string(p.tracker->others() + 1) + " of the " +
                                         std::to_string(options_.min_peers) + " peers asked for (--min-peers) joined run '" +
                                         options_.run_id + "' in time");
      }
      p.tracker->report(local_progress());
      p.tracker->refresh_now();
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }
  p.started = now_seconds();
  p.ema.resume(p.started);
  torch::Tensor loss;
  while (!should_stop()) {
    double now = now_seconds();
    if (options_.max_time_seconds > 0 && now - p.started >= options_.max_time_seconds) break;
    if (options_.max_epochs > 0 && epoch_ >= options_.max_epochs) break;

    double compute_begin = now_seconds();
    auto batch = task_.next_batch();
    if (!batch) return batch.status().with_context("reading data");
    loss = task_.loss(*batch);
    double loss_value = loss.item<double>();
    if (!std::isfinite(loss_value)) {
      Logger::Line(options_.log, LogLevel::kWarning, kLog) << "dropped a micro-batch with a non-finite loss";
      for (auto& param : p.parameter_list) {
        if (param.mutable_grad().defined()) param.mutable_grad().zero_();
      }
      continue;
    }
    loss.backward();
    accumulate(*batch, loss_value);
    double compute_end = now_seconds();
    p.compute_seconds += compute_end - compute_begin;
    p.ema.update(static_cast<std::uint64_t>(batch->size()), compute_end);
    p.tracker->report(local_progress());

    auto state = p.tracker->state();
    show_status(state);
    if (state.epoch > epoch_ + 1) {
      auto caught = catch_up(report);
      if (!caught.is_ok()) Logger::Line(options_.log, LogLevel::kWarning, kLog) << caught.to_string();
      continue;
    }
    if (state.batch_ready() || state.epoch > epoch_) {
      step(report);
    } else {
      match_ahead(state);
    }
    publish_donor_and_metrics(false);
  }
  show_status(p.tracker->state(), true);
  report.epoch = epoch_;
  report.last_loss = p.last_loss;
  report.seconds = now_seconds() - p.started;
  report.compute_seconds = p.compute_seconds;
  if (!options_.checkpoint_dir.empty()) {
    auto saved = save_checkpoint_files();
    if (!saved.is_ok()) Logger::Line(options_.log, LogLevel::kWarning, kLog) << saved.to_string();
  }
  auto withdrawn = p.tracker->withdraw(Deadline::after(std::chrono::seconds(3)));
  if (!withdrawn.is_ok()) Logger::Line(options_.log, LogLevel::kDebug, kLog) << "withdrawing progress: " << withdrawn.to_string();
  withdrawn = collab::withdraw_metrics(node_, options_.run_id, options_.record_ttl, Deadline::after(std::chrono::seconds(2)));
  if (!withdrawn.is_ok()) Logger::Line(options_.log, LogLevel::kDebug, kLog) << "withdrawing metrics: " << withdrawn.to_string();
  return report;
}

Status Trainer::save_checkpoint_files() const {
  auto state = snapshot();
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

}  // namespace dedloc::train
