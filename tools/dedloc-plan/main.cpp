// dedloc-plan: solves the DeDLOC program for a set of peers and prints the plan next to the classic
// strategies (docs/planner.md).
//
//   dedloc-plan --peers configs/peers/swav-8-fast-16-slow.yaml [--batch 4096] [--params 18M] [--codec fp16] [--json]
//               [--mode synchronous|diloco --inner-steps H | --compare-modes --inner-steps H]
#include <iostream>

#include "dedloc/cli/app.hpp"
#include "dedloc/plan/collaboration_plan.hpp"
#include "dedloc/plan/mode_prediction.hpp"
#include "dedloc/plan/peers_file.hpp"
#include "dedloc/plan/report.hpp"
#include "dedloc/plan/units.hpp"

namespace {

constexpr std::string_view kTool = "dedloc-plan";

// Settings from --config and the flags. Empty strings mean "not given": the peers file's value stands.
struct Options {
  std::string peers;   // the peers file
  std::string batch;   // global batch B, e.g. "4096" or "4k"
  std::string params;  // model size P, e.g. "18M"
  std::string codec;   // a codec name (core/codec_id.hpp): none | fp16 | scaled-fp16 | uint8 | blockwise8
  std::string mode;         // synchronous | diloco; empty: the plan alone, as before modes existed
  std::string inner_steps;  // DiLoCo's H: inner steps per outer step (the outer batch is H x the batch)
  bool compare_modes = false;  // synchronous next to DiLoCo at inner_steps
  dedloc::plan::PlanOptions plan;
  bool live = false;   // plan for the peers of a live run (needs the DHT)
};

void read_options(dedloc::ConfigReader& reader, Options& o) {
  reader.read("peers", o.peers);
  reader.read("batch", o.batch);
  reader.read("params", o.params);
  reader.read("codec", o.codec);
  reader.read("mode", o.mode);
  reader.read("inner_steps", o.inner_steps);
  reader.read("compare_modes", o.compare_modes);
  std::uint64_t exact_limit = o.plan.exact_peer_limit;
  reader.read("exact_limit", exact_limit);
  o.plan.exact_peer_limit = exact_limit;
  reader.read("solver_timeout", o.plan.solver_timeout_seconds);
}

// Applies the flags and --config values over what the peers file said.
dedloc::Status apply_overrides(const Options& o, dedloc::plan::Collaboration& c) {
  using dedloc::plan::parse_count;
  if (!o.batch.empty()) {
    auto batch = parse_count(o.batch, "--batch");
    if (!batch) return batch.status();
    c.batch = *batch;
  }
  if (!o.params.empty()) {
    auto params = parse_count(o.params, "--params");
    if (!params) return params.status();
    c.params = *params;
  }
  if (!o.codec.empty()) {
    auto codec = dedloc::parse_codec(o.codec);
    if (!codec) return codec.status().with_context("--codec");
    c.codec = *codec;
  }
  if (c.params <= 0) {
    return dedloc::error(dedloc::Code::kInvalidArgument, "model size unknown: give --params or 'params:' in the peers file");
  }
  return dedloc::Status::ok();
}

// What --mode, --inner-steps and --compare-modes ask for.
struct ModeRequest {
  std::optional<dedloc::plan::ModeOptions> mode;  // none: the plan alone, its output as before modes existed
  std::uint64_t compare_at = 0;                   // > 0: both modes, DiLoCo at this many inner steps
};

dedloc::Result<ModeRequest> mode_request(const Options& o) {
  using dedloc::Code;
  using dedloc::error;
  namespace plan = dedloc::plan;
  if (o.compare_modes && !o.mode.empty()) {
    return error(Code::kInvalidArgument, "--compare-modes shows both modes: leave out --mode");
  }
  std::uint64_t inner_steps = 0;
  if (!o.inner_steps.empty()) {
    auto parsed = plan::parse_inner_steps(o.inner_steps, "--inner-steps");
    if (!parsed) return parsed.status();
    inner_steps = *parsed;
  }
  ModeRequest request;
  if (o.compare_modes) {
    if (inner_steps == 0) {
      return error(Code::kInvalidArgument, "--compare-modes needs --inner-steps H (DiLoCo's inner steps per outer step)");
    }
    request.compare_at = inner_steps;
    return request;
  }
  if (o.mode.empty()) {
    if (inner_steps > 0) {
      return error(Code::kInvalidArgument, "--inner-steps is DiLoCo's: give it with --mode diloco or --compare-modes");
    }
    return request;
  }
  auto mode = plan::parse_mode(o.mode, "--mode");
  if (!mode) return mode.status();
  if (*mode == plan::CollaborationMode::kDiloco && inner_steps == 0) {
    return error(Code::kInvalidArgument, "--mode diloco needs --inner-steps H (inner steps per outer step)");
  }
  if (*mode == plan::CollaborationMode::kSynchronous && inner_steps > 0) {
    return error(Code::kInvalidArgument, "--inner-steps is DiLoCo's: a synchronous run takes no inner steps");
  }
  request.mode = plan::ModeOptions{*mode, *mode == plan::CollaborationMode::kDiloco ? inner_steps : 1};
  return request;
}

}  // namespace

int main(int argc, char** argv) {
  namespace cli = dedloc::cli;
  Options o;
  cli::CommonFlags common;
  if (auto config = cli::find_config_flag(argc, argv)) {
    auto loaded = cli::load_config_file(*config, [&](dedloc::ConfigReader& r) { read_options(r, o); });
    if (!loaded.is_ok()) return cli::report_failure(kTool, loaded), cli::kExitConfig;
  }

  CLI::App app{"Plans DeDLOC adaptive averaging: who computes, who aggregates which share, and the predicted "
               "throughput next to all-reduce, parameter server and the other classic strategies.",
               std::string(kTool)};
  // The planner talks to no peer: no --identity, --authority, --token or --plaintext.
  cli::add_common_flags(app, common, {.config = true, .print_config = true, .json = true});
  app.add_option("--peers", o.peers, "YAML peers file (see configs/peers/)");
  app.add_option("--batch", o.batch, "global batch size in samples (overrides the peers file; default 4096)");
  app.add_option("--params", o.params, "model size in parameters, e.g. 18M (overrides the peers file)");
  app.add_option("--codec", o.codec, "none, fp16, scaled-fp16, uint8 or blockwise8 (default fp16)");
  app.add_option("--mode", o.mode,
                 "synchronous (one all-reduce of the gradient per global batch) or diloco (inner steps on each peer, "
                 "one all-reduce of the pseudo-gradient per outer batch of H global batches; needs --inner-steps): "
                 "plan for that mode and print the bytes each peer uploads per sample");
  app.add_option("--inner-steps", o.inner_steps,
                 "H, DiLoCo's inner steps per outer step (a whole number >= 1): the outer batch is H x --batch, so "
                 "the communication bound on samples/s is H times the synchronous one");
  app.add_flag("--compare-modes", o.compare_modes,
               "print synchronous next to DiLoCo at --inner-steps H for the same peers: steps/s, samples/s, bytes "
               "uploaded per sample, and whether compute or communication bounds each");
  app.add_option("--exact-limit", o.plan.exact_peer_limit, "largest peer count solved exactly by the MILP")
      ->capture_default_str();
  app.add_option("--solver-timeout", o.plan.solver_timeout_seconds, "lpsolve time limit per solve, seconds")
      ->capture_default_str();
  app.add_flag("--live", o.live, "plan for the peers of a live run (needs the DHT: not available yet)");
  std::string initial_peers, run_id;
  app.add_option("--initial-peers", initial_peers, "with --live: a DHT peer to bootstrap from");
  app.add_option("--run", run_id, "with --live: the run id");
  if (auto exit = cli::parse(app, argc, argv)) return *exit;
  if (auto status = cli::setup_logging(common, dedloc::Logger::global()); !status.is_ok()) {
    return cli::report_failure(kTool, status);
  }

  if (common.print_config) {
    std::cout << "peers: " << o.peers << "\nbatch: " << o.batch << "\nparams: " << o.params << "\ncodec: " << o.codec
              << "\nmode: " << o.mode << "\ninner_steps: " << o.inner_steps
              << "\ncompare_modes: " << (o.compare_modes ? "true" : "false")
              << "\nexact_limit: " << o.plan.exact_peer_limit << "\nsolver_timeout: " << o.plan.solver_timeout_seconds
              << "\n";
    return cli::kExitOk;
  }
  if (o.live) {
    return cli::report_failure(kTool, dedloc::error(dedloc::Code::kUnavailable,
                                                    "--live is not available until the DHT exists; "
                                                    "describe the peers in a file and pass --peers"));
  }
  if (o.peers.empty()) {
    return cli::report_failure(kTool, dedloc::error(dedloc::Code::kInvalidArgument, "--peers FILE is required"));
  }

  auto collaboration = dedloc::plan::load_peers_file(o.peers);
  if (!collaboration) return cli::report_failure(kTool, collaboration.status()), cli::kExitConfig;
  if (auto status = apply_overrides(o, *collaboration); !status.is_ok()) return cli::report_failure(kTool, status);
  auto request = mode_request(o);
  if (!request) return cli::report_failure(kTool, request.status());

  if (request->compare_at > 0) {
    auto comparison = dedloc::plan::compare_modes(*collaboration, request->compare_at, o.plan);
    if (!comparison) return cli::report_failure(kTool, comparison.status());
    std::cout << (common.json ? dedloc::plan::mode_comparison_to_json(*comparison).dump(2) + "\n"
                              : dedloc::plan::format_mode_comparison(*comparison));
    return cli::kExitOk;
  }
  if (request->mode) {
    auto prediction = dedloc::plan::predict_mode(*collaboration, *request->mode, o.plan);
    if (!prediction) return cli::report_failure(kTool, prediction.status());
    std::cout << (common.json ? dedloc::plan::mode_plan_to_json(*prediction).dump(2) + "\n"
                              : dedloc::plan::format_mode_plan(*prediction));
    return cli::kExitOk;
  }

  auto plan = dedloc::plan::plan_collaboration(*collaboration, o.plan);
  if (!plan) return cli::report_failure(kTool, plan.status());
  if (common.json) {
    std::cout << dedloc::plan::plan_to_json(*plan).dump(2) << "\n";
  } else {
    std::cout << dedloc::plan::format_plan_table(*plan);
  }
  return cli::kExitOk;
}
