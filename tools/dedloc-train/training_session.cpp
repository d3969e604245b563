#include "training_session.hpp"

#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <random>

#include <nlohmann/json.hpp>

#include "dedloc/cli/ready_line.hpp"
#include "dedloc/cli/signals.hpp"
#include "dedloc/collab/checkpoint.hpp"
#include "dedloc/collab/progress.hpp"
#include "dedloc/core/blas.hpp"
#include "dedloc/core/memory.hpp"
#include "dedloc/core/wait_breaker.hpp"
#include "dedloc/dht/node.hpp"
#include "dedloc/train/models/synthetic_task.hpp"
#include "dedloc/train/torch_errors.hpp"
#include "dedloc/train/trainer.hpp"
#include "dedloc/train/trainer_options.hpp"

namespace dedloc::train_tool {

namespace {

constexpr std::string_view kTool = "dedloc-train";

Result<torch::Device> parse_device(const std::string& text) {
  try {
    torch::Device device(text);
    if (device.is_cuda() && !torch::cuda::is_available()) {
      return error(Code::kInvalidArgument, "--device " + text + ": this libtorch build or machine has no CUDA device");
    }
    return device;
  } catch (const std::exception&) {
    return error(Code::kInvalidArgument, "--device " + text + ": expected cpu, cuda or cuda:N");
  }
}

// Registers the record families a trainer reads and writes, so hostile values never reach storage.
void add_schemas(dht::RecordValidator& validator) {
  collab::add_progress_schema(validator);
  collab::add_metrics_schema(validator);
  avg::add_donor_schema(validator);
  avg::add_round_result_schema(validator);
}

// What others should dial for a server bound at `listen` when --announce-host names this machine's public
// host; empty (the bound endpoint) without one, or when the port is chosen at bind time.
std::string announced(const std::string& listen, const std::string& host) {
  auto bound = net::parse_tcp_endpoint(listen);
  if (host.empty() || !bound || bound->port == 0) return "";
  return "tcp://" + host + ":" + std::to_string(bound->port);
}

// One line per global step and per state download, for scripts and tests that follow a run.
void print_event(const train::TrainerEvent& e) {
  nlohmann::json line = {{"event", train::to_string(e.kind)}, {"epoch", e.epoch}};
  if (e.kind == train::TrainerEvent::Kind::kLoadedState) {
    line["resync"] = e.resync;
    line["donor"] = e.donor;
    line["download_seconds"] = e.download_seconds;
    if (e.missed_round) line["missed_round"] = true;
  } else {
    line["loss"] = e.loss;
    line["samples"] = e.samples;
    line["bytes_sent"] = e.bytes_sent;
    line["samples_computed"] = e.samples_computed;
    line["compute_seconds"] = e.compute_seconds;
    line["waited_seconds"] = e.waited_seconds;
    if (e.inner_steps > 0) line["inner_steps"] = e.inner_steps;
  }
  if (e.kind == train::TrainerEvent::Kind::kAveraged) {
    line["group_size"] = e.group_size;
    line["found_ahead"] = e.found_ahead;
    line["group"] = e.group;
    line["averaged_fraction"] = e.averaged_fraction;
    if (!e.took_result_from.empty()) line["took_result_from"] = e.took_result_from;
    line["averaging_seconds"] = e.averaging_seconds;
    line["averaging_deadline"] = e.averaging_deadline;
    line["round_seconds"] = e.round_seconds;
    if (e.buckets > 0) line["buckets"] = e.buckets;
  }
  if (!e.params_hash.empty()) {
    line["params_hash"] = e.params_hash;
    line["params_norm"] = e.params_norm;
  }
  std::cout << line.dump() << std::endl;
}

// The checks of flags against each other and the recipe, before anything starts.
Status check_flags(const SessionOptions& o, const train::Recipe& recipe, const std::vector<net::PeerAddress>& peers) {
  const bool synthetic = recipe.model_kind == train::kSyntheticTaskKind;
  if (o.compute_rate != 0 && (!synthetic || !(o.compute_rate > 0))) {
    return error(Code::kInvalidArgument, "--compute-rate is a positive samples/s for the synthetic task (" +
                                             recipe.path + " trains '" + recipe.model_kind + "')");
  }
  if (o.resume && o.checkpoint_dir.empty()) return error(Code::kInvalidArgument, "--resume needs --checkpoint-dir");
  if (!o.relays.empty() && !o.client_mode) {
    return error(Code::kInvalidArgument, "--relay is for --client-mode peers (others are dialled directly)");
  }
  if (o.client_mode && peers.empty()) {
    return error(Code::kInvalidArgument, "--client-mode needs --initial-peers: a client cannot start a swarm");
  }
  return Status();
}

// A shutdown signal before training began: nothing to save, our records (if any) already withdrawn.
int interrupted(Logger& log, std::string_view while_doing) {
  log.info("train") << "interrupted while " << while_doing << ": leaving";
  return cli::kExitInterrupted;
}

}  // namespace

int run_session(const cli::CommonFlags& common, const SessionOptions& o) {
  auto& log = Logger::global();
  if (auto status = cli::setup_logging(common, log); !status.is_ok()) return cli::report_failure(kTool, status);
  warn_if_reference_blas(log);
  // The whole recipe is checked here, every key of every section: a bad one fails before the swarm is joined.
  auto recipe = train::Recipe::load(o.recipe);
  // A recipe that is missing or wrong is a config error (exit 3, docs/operators.md), whatever its cause.
  if (!recipe) return cli::report_failure(kTool, recipe.status()), cli::kExitConfig;
  auto peers = cli::peer_addresses(common, o.initial_peers, "--initial-peers");
  if (!peers) return cli::report_failure(kTool, peers.status());
  auto relays = cli::peer_addresses(common, o.relays, "--relay");
  if (!relays) return cli::report_failure(kTool, relays.status());
  if (auto checked = check_flags(o, *recipe, *peers); !checked.is_ok()) return cli::report_failure(kTool, checked);
  train::TrainerOverrides overrides{.run_id = o.run_id,
                                    .client_mode = o.client_mode,
                                    .relays = std::move(*relays),
                                    .avg_listen = o.avg_listen,
                                    .avg_announce = announced(o.avg_listen, o.announce_host),
                                    .bandwidth_mbit = o.bandwidth_mbit,
                                    .micro_batch_size = o.micro_batch_size,
                                    .max_time_seconds = o.max_time,
                                    .max_epochs = o.max_epochs,
                                    .min_peers = o.min_peers,
                                    .checkpoint_dir = o.checkpoint_dir,
                                    .samples_log = o.samples_log,
                                    .status_line = ::isatty(STDERR_FILENO) && !common.json};
  auto options = train::trainer_options(*recipe, overrides);
  if (!options) return cli::report_failure(kTool, options.status());
  options->log = &log;
  if (common.json) options->on_event = print_event;
  options->hash_parameters = common.json && o.params_hash;
  const std::string& run_id = options->run_id;
  auto device = parse_device(o.device);
  if (!device) return cli::report_failure(kTool, device.status());
  auto identity = cli::load_identity(common);
  if (!identity) return cli::report_failure(kTool, identity.status());
  // The synthetic task's only torch work is a sum and an add per micro-batch: one thread, so that dozens of
  // such peers on one machine do not each keep a pool of threads.
  // --threads caps the BLAS library's own pool too, which torch's setting does not reach (core/blas.hpp).
  const int threads = o.threads > 0 ? o.threads : recipe->model_kind == train::kSyntheticTaskKind ? 1 : 0;
  if (threads > 0) {
    torch::set_num_threads(threads);
    set_blas_threads(threads);
  }
  keep_freed_memory();  // libtorch's activations and gradients reuse warm pages (core/memory.hpp)
  cli::install_shutdown_handlers();

  // The DHT first: an unreachable initial peer is reported before minutes of model building.
  zmq::context_t context;
  dht::NodeOptions dht_options;
  dht_options.listen = o.client_mode ? "" : o.dht_listen;
  dht_options.client_mode = o.client_mode;
  if (!o.client_mode) dht_options.announce = announced(o.dht_listen, o.announce_host);
  dht::Node node(context, *identity, dht_options);
  add_schemas(node.validator());
  if (auto started = node.start(); !started.is_ok()) return cli::report_failure(kTool, started);
  if (!peers->empty()) {
    Status joined;
    {
      WaitBreaker breaker(cli::shutdown_requested, [&node] { node.cancel_bootstrap(); });
      joined = node.bootstrap(*peers, Deadline::after(std::chrono::seconds(15)));
    }
    if (cli::shutdown_requested()) return interrupted(log, "joining the swarm");
    if (!joined.is_ok()) return cli::report_failure(kTool, joined.with_context("joining the swarm through --initial-peers"));
  }

  auto task_context = train::task_context(
      *recipe, *options, *device, o.data_seed != 0 ? o.data_seed : std::random_device{}(),
      o.checkpoint_dir.empty() ? std::filesystem::temp_directory_path().string() + "/dedloc-" + run_id : o.checkpoint_dir);
  task_context.samples_per_second = o.compute_rate;
  auto task = recipe->build_task(task_context);
  if (!task) return cli::report_failure(kTool, task.status());
  auto& t = **task;
  // The optimizer's statistics and the trainer's buffers live on the device too.
  std::unique_ptr<train::Optimizer> optimizer;
  std::unique_ptr<train::Trainer> trainer;
  auto built = train::guard_torch("building the optimizer and the trainer", [&]() -> Status {
    auto made = train::make_optimizer(recipe->optimizer, t.named_parameters(),
                                      [&t](const std::string& name) { return t.decays(name); });
    if (!made) return made.status().with_context(o.recipe + ": optimizer");
    optimizer = std::move(*made);
    trainer = std::make_unique<train::Trainer>(context, node, *identity, t, *optimizer, *options);
    return Status();
  });
  if (!built.is_ok()) return cli::report_failure(kTool, built);

  if (o.resume) {
    auto checkpoint = collab::load_checkpoint(o.checkpoint_dir + "/checkpoint.safetensors");
    if (!checkpoint) return cli::report_failure(kTool, checkpoint.status());
    if (auto loaded = trainer->load_state(checkpoint->state); !loaded.is_ok()) {
      return cli::report_failure(kTool, loaded.with_context("resuming from " + o.checkpoint_dir));
    }
    log.info("train") << "resumed at epoch " << trainer->epoch() << " from " << o.checkpoint_dir;
  }
  if (auto started = trainer->start(cli::shutdown_requested); !started.is_ok()) {
    if (cli::shutdown_requested()) return interrupted(log, "catching up with the swarm");
    return cli::report_failure(kTool, started);
  }
  const std::string mode(to_string(recipe->collaboration.mode));
  cli::ReadyLine ready{"train", node.id(), {}, {{"run_id", run_id}, {"model", t.describe()}, {"mode", mode}}};
  if (!o.client_mode) ready.endpoints.push_back(node.address().to_string());
  ready.print();
  log.info("train") << "training " << t.describe() << " in run '" << run_id << "' from epoch " << trainer->epoch()
                    << ", global batch " << recipe->training.target_batch_size << ", micro-batch "
                    << task_context.micro_batch_size << " on " << o.device;

  // The first signal finishes the round our group waits for, a second one leaves at once.
  auto report = trainer->run([] { return cli::shutdown_requested(); }, [] { return cli::shutdown_urgent(); });
  if (!report) return cli::report_failure(kTool, report.status());
  nlohmann::json summary = {{"event", "exit"},
                            {"epoch", report->epoch},
                            {"loss", report->last_loss},
                            {"steps_averaged", report->steps_averaged},
                            {"steps_alone", report->steps_alone},
                            {"steps_skipped", report->steps_skipped},
                            {"states_loaded", report->states_loaded},
                            {"seconds", report->seconds},
                            {"compute_seconds", report->compute_seconds},
                            {"bytes_sent", report->bytes_sent},
                            {"samples_computed", report->samples_computed},
                            {"bytes_per_sample", report->samples_computed
                                                     ? static_cast<double>(report->bytes_sent) / static_cast<double>(report->samples_computed)
                                                     : 0.0}};
  if (common.json) std::cout << summary.dump() << std::endl;
  log.info("train") << "leaving at epoch " << report->epoch << ": " << summary.dump();
  return cli::shutdown_requested() ? cli::kExitInterrupted : cli::kExitOk;
}

}  // namespace dedloc::train_tool
