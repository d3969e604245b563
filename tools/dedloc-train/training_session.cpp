#include "training_session.hpp"

#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <random>

#include <nlohmann/json.hpp>

#include "dedloc/cli/ready_line.hpp"
#include "dedloc/cli/signals.hpp"
#include "dedloc/core/memory.hpp"
#include "dedloc/dht/node.hpp"
#include "dedloc/collab/checkpoint.hpp"
#include "dedloc/collab/progress.hpp"
#include "dedloc/train/trainer.hpp"

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
}

// What others should dial for a server bound at `listen` when --announce-host names this machine's public
// host; empty (the bound endpoint) without one, or when the port is chosen at bind time.
std::string announced(const std::string& listen, const std::string& host) {
  auto bound = net::parse_tcp_endpoint(listen);
  if (host.empty() || !bound || bound->port == 0) return "";
  return "tcp://" + host + ":" + std::to_string(bound->port);
}

}  // namespace

int run_session(const cli::CommonFlags& common, const SessionOptions& o) {
  auto& log = Logger::global();
  if (auto status = cli::setup_logging(common, log); !status.is_ok()) return cli::report_failure(kTool, status);
  if (!common.config.empty() || common.print_config) {
    return cli::report_failure(kTool, error(Code::kInvalidArgument, "--config/--print-config: dedloc-train takes its "
                                                                     "settings from --recipe and flags"));
  }
  auto recipe = train::Recipe::load(o.recipe);
  if (!recipe) return cli::report_failure(kTool, recipe.status());
  std::string run_id = o.run_id.empty() ? recipe->run_id : o.run_id;
  if (run_id.empty()) {
    return cli::report_failure(kTool, error(Code::kInvalidArgument, o.recipe + ": no run_id; give one there or with --run-id"));
  }
  if (o.resume && o.checkpoint_dir.empty()) {
    return cli::report_failure(kTool, error(Code::kInvalidArgument, "--resume needs --checkpoint-dir"));
  }
  auto peers = cli::peer_addresses(common, o.initial_peers, "--initial-peers");
  if (!peers) return cli::report_failure(kTool, peers.status());
  auto relays = cli::peer_addresses(common, o.relays, "--relay");
  if (!relays) return cli::report_failure(kTool, relays.status());
  if (!o.relays.empty() && !o.client_mode) {
    return cli::report_failure(kTool, error(Code::kInvalidArgument, "--relay is for --client-mode peers (others are dialled directly)"));
  }
  if (o.client_mode && peers->empty()) {
    return cli::report_failure(kTool, error(Code::kInvalidArgument, "--client-mode needs --initial-peers: a client cannot start a swarm"));
  }
  auto device = parse_device(o.device);
  if (!device) return cli::report_failure(kTool, device.status());
  auto identity = cli::load_identity(common);
  if (!identity) return cli::report_failure(kTool, identity.status());
  if (o.threads > 0) torch::set_num_threads(o.threads);
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
    if (auto joined = node.bootstrap(*peers, Deadline::after(std::chrono::seconds(15))); !joined.is_ok()) {
      return cli::report_failure(kTool, joined.with_context("joining the swarm through --initial-peers"));
    }
  }

  train::TaskContext task_context;
  task_context.device = *device;
  task_context.init_seed = recipe->seed;
  task_context.data_seed = o.data_seed != 0 ? o.data_seed : std::random_device{}();
  task_context.micro_batch_size = o.micro_batch_size > 0 ? o.micro_batch_size : recipe->training.micro_batch_size;
  task_context.work_dir = o.checkpoint_dir.empty() ? std::filesystem::temp_directory_path().string() + "/dedloc-" + run_id
                                                   : o.checkpoint_dir;
  task_context.log = &log;
  std::error_code ec;
  std::filesystem::create_directories(task_context.work_dir, ec);
  auto task = recipe->build_task(task_context);
  if (!task) return cli::report_failure(kTool, task.status());
  auto& t = **task;
  auto optimizer = train::make_optimizer(recipe->optimizer, t.named_parameters(),
                                         [&t](const std::string& name) { return t.decays(name); });
  if (!optimizer) return cli::report_failure(kTool, optimizer.status().with_context(o.recipe + ": optimizer"));

  train::TrainerOptions options;
  options.run_id = run_id;
  options.training = recipe->training;
  options.training.micro_batch_size = task_context.micro_batch_size;
  options.schedule = recipe->schedule;
  auto& a = options.averaging;
  a.role = o.client_mode ? avg::AvgRole::kClient : avg::AvgRole::kNode;
  options.relaying.relays = std::move(*relays);
  a.listen = o.avg_listen;
  if (!o.client_mode) a.announce = announced(o.avg_listen, o.announce_host);
  a.bandwidth = (o.bandwidth_mbit > 0 ? o.bandwidth_mbit : recipe->averaging.bandwidth_mbit) * 1e6 / 8;
  a.target_group_size = recipe->averaging.target_group_size;
  a.min_group_size = recipe->averaging.min_group_size;
  a.matchmaking_time = from_seconds(recipe->averaging.matchmaking_time);
  options.match_ahead = recipe->averaging.match_ahead;
  a.averaging_timeout = from_seconds(recipe->averaging.averaging_timeout);
  a.all_reduce.codec = recipe->averaging.codec;
  a.all_reduce.sender_timeout = from_seconds(recipe->averaging.sender_timeout);
  a.all_reduce.reducer_timeout = from_seconds(recipe->averaging.reducer_timeout);
  a.all_reduce.centered_clip = recipe->averaging.centered_clip;
  options.max_time_seconds = o.max_time;
  options.max_epochs = o.max_epochs;
  options.min_peers = o.min_peers;
  options.checkpoint_dir = o.checkpoint_dir;
  options.checkpoint_extra = {{"run_id", run_id}, {"recipe", o.recipe}, {"model", recipe->model_kind}};
  options.samples_log = o.samples_log;
  options.status_line = ::isatty(STDERR_FILENO) && !common.json;
  if (common.json) {
    // One line per global step and per state download, for scripts and tests that follow a run.
    options.on_event = [](const train::TrainerEvent& e) {
      nlohmann::json line = {{"event", train::to_string(e.kind)}, {"epoch", e.epoch}};
      if (e.kind != train::TrainerEvent::Kind::kLoadedState) {
        line["loss"] = e.loss;
        line["samples"] = e.samples;
      }
      if (e.kind == train::TrainerEvent::Kind::kAveraged) {
        line["group_size"] = e.group_size;
        line["found_ahead"] = e.found_ahead;
      }
      std::cout << line.dump() << std::endl;
    };
  }
  options.log = &log;
  train::Trainer trainer(context, node, *identity, t, **optimizer, options);

  if (o.resume) {
    auto checkpoint = collab::load_checkpoint(o.checkpoint_dir + "/checkpoint.safetensors");
    if (!checkpoint) return cli::report_failure(kTool, checkpoint.status());
    if (auto loaded = trainer.load_state(checkpoint->state); !loaded.is_ok()) {
      return cli::report_failure(kTool, loaded.with_context("resuming from " + o.checkpoint_dir));
    }
    log.info("train") << "resumed at epoch " << trainer.epoch() << " from " << o.checkpoint_dir;
  }
  if (auto started = trainer.start(); !started.is_ok()) return cli::report_failure(kTool, started);
  cli::ReadyLine ready{"train", node.id(), {}, {{"run_id", run_id}, {"model", t.describe()}}};
  if (!o.client_mode) ready.endpoints.push_back(node.address().to_string());
  ready.print();
  log.info("train") << "training " << t.describe() << " in run '" << run_id << "' from epoch " << trainer.epoch()
                    << ", global batch " << recipe->training.target_batch_size << ", micro-batch "
                    << task_context.micro_batch_size << " on " << o.device;

  auto report = trainer.run([] { return cli::shutdown_requested(); });
  if (!report) return cli::report_failure(kTool, report.status());
  nlohmann::json summary = {{"event", "exit"},
                            {"epoch", report->epoch},
                            {"loss", report->last_loss},
                            {"steps_averaged", report->steps_averaged},
                            {"steps_alone", report->steps_alone},
                            {"steps_skipped", report->steps_skipped},
                            {"states_loaded", report->states_loaded},
                            {"seconds", report->seconds},
                            {"compute_seconds", report->compute_seconds}};
  if (common.json) std::cout << summary.dump() << std::endl;
  log.info("train") << "leaving at epoch " << report->epoch << ": " << summary.dump();
  return cli::shutdown_requested() ? cli::kExitInterrupted : cli::kExitOk;
}

}  // namespace dedloc::train_tool
