// `dedloc-avg export`: one shot, for cron: download the run's newest state, verify it, write it as a
// checkpoint in --out atomically and keep the last --keep (lib/dedloc/monitor/checkpoint_export.hpp).
// Prints one line and exits 0; on failure one error line and a non-zero code (docs/operators.md).
#include <iostream>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "dedloc/monitor/checkpoint_export.hpp"
#include "run_dht.hpp"

namespace dedloc::avg_tool {

namespace {

constexpr std::string_view kTool = "dedloc-avg export";

class ExportCommand final : public Command {
 public:
  CLI::App* add_to(CLI::App& app) override {
    auto* cmd = app.add_subcommand(
        "export", "save the run's newest state as a checkpoint (safetensors + JSON metadata) in --out, keeping "
                  "the last --keep; one shot, for cron (a second export on the same --out while one runs fails)");
    cmd->add_option("--run", run_id_, "the run to export (its trainers' --run-id)")->required();
    cmd->add_option("--initial-peers", initial_peers_, "DHT nodes to join through: tcp://HOST:PORT/k/KEY")->required();
    cmd->add_option("--out", out_dir_, "folder for checkpoint-e<EPOCH>.safetensors/.json and latest.safetensors")
        ->required();
    cmd->add_option("--keep", keep_, "checkpoints to keep (older ones are deleted)")
        ->capture_default_str()
        ->check(CLI::Range(1, 100000));
    cmd->add_option("--schema", schema_hex_, "refuse a state whose schema hash (64 hex digits) differs");
    cmd->add_option("--timeout", timeout_seconds_, "give up after this many seconds")
        ->capture_default_str()
        ->check(CLI::PositiveNumber);
    cmd->add_option("--request-timeout", request_timeout_seconds_,
                    "seconds a donor may stay silent on one request before another is asked")
        ->capture_default_str()
        ->check(CLI::PositiveNumber);
    return cmd;
  }

  int run(const cli::CommonFlags& common) override {
    monitor::ExportOptions options;
    options.run_id = run_id_;
    options.out_dir = out_dir_;
    options.keep = keep_;
    options.request_timeout = from_seconds(request_timeout_seconds_);
    if (!schema_hex_.empty()) {
      auto schema = from_hex(schema_hex_);
      if (!schema || schema->size() != 32) {
        return cli::report_failure(kTool, error(Code::kInvalidArgument, "--schema: expected 64 hex digits"));
      }
      options.expected_schema = *schema;
    }
    auto identity = cli::load_identity(common);
    if (!identity) return cli::report_failure(kTool, identity.status());
    const auto deadline = Deadline::after(from_seconds(timeout_seconds_));

    zmq::context_t context;
    auto joined = join_run_dht(context, *identity, common, initial_peers_, std::chrono::seconds(10));
    if (!joined) return cli::report_failure(kTool, joined.status());
    net::Client client(context, net::ClientOptions{.self = identity->peer_id()});
    auto exported = monitor::export_checkpoint(**joined, client, options, deadline);
    if (!exported) return cli::report_failure(kTool, exported.status());

    if (common.json) {
      std::cout << nlohmann::json{{"path", exported->path},   {"epoch", exported->epoch},
                                  {"written", exported->written}, {"donor", exported->donor},
                                  {"peers", exported->peers},  {"removed", exported->removed}}
                       .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
                << std::endl;
    } else {
      std::cout << (exported->written ? "exported epoch " : "already had epoch ") << exported->epoch << ": "
                << exported->path << " (from " << exported->donor << ", " << exported->peers << " peer(s) in the run"
                << (exported->removed.empty() ? "" : ", " + std::to_string(exported->removed.size()) + " old removed")
                << ")" << std::endl;
    }
    return cli::kExitOk;
  }

 private:
  std::string run_id_;
  std::vector<std::string> initial_peers_;
  std::string out_dir_;
  size_t keep_ = 5;
  std::string schema_hex_;
  double timeout_seconds_ = 120;
  double request_timeout_seconds_ = 10;
};

}  // namespace

std::unique_ptr<Command> make_export_command() { return std::make_unique<ExportCommand>(); }

}  // namespace dedloc::avg_tool
