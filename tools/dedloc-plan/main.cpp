// dedloc-plan: solves the DeDLOC program for a set of peers and prints the plan next to the classic
// strategies (docs/planner.md).
//
//   dedloc-plan --peers configs/peers/swav-8-fast-16-slow.yaml [--batch 4096] [--params 18M] [--codec fp16] [--json]
#include <iostream>

#include "dedloc/cli/app.hpp"
#include "dedloc/plan/collaboration_plan.hpp"
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
  dedloc::plan::PlanOptions plan;
  bool live = false;   // plan for the peers of a live run (needs the DHT)
};

void read_options(dedloc::ConfigReader& reader, Options& o) {
  reader.read("peers", o.peers);
  reader.read("batch", o.batch);
  reader.read("params", o.params);
  reader.read("codec", o.codec);
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

  auto plan = dedloc::plan::plan_collaboration(*collaboration, o.plan);
  if (!plan) return cli::report_failure(kTool, plan.status());
  if (common.json) {
    std::cout << dedloc::plan::plan_to_json(*plan).dump(2) << "\n";
  } else {
    std::cout << dedloc::plan::format_plan_table(*plan);
  }
  return cli::kExitOk;
}
