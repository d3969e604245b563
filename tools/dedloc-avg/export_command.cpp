// `dedloc-avg export`: one shot, for cron: download the run's newest state, verify it, write it in --out
// atomically and keep the last --keep (lib/dedloc/monitor/checkpoint_export.hpp): as a checkpoint
// (--format checkpoint, the default) or as a Hugging Face folder of the ALBERT model (--format hf,
// lib/dedloc/collab/hf_export.hpp). With --from FILE it converts a checkpoint file on disk into a Hugging
// Face folder at --out instead, without the network.
// Prints one line and exits 0; on failure one error line and a non-zero code (docs/operators.md).
#include <iostream>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "dedloc/collab/checkpoint.hpp"
#include "dedloc/collab/hf_export.hpp"
#include "dedloc/monitor/checkpoint_export.hpp"
#include "run_dht.hpp"

namespace dedloc::avg_tool {

namespace {

constexpr std::string_view kTool = "dedloc-avg export";

class ExportCommand final : public Command {
 public:
  CLI::App* add_to(CLI::App& app) override {
    auto* cmd = app.add_subcommand(
        "export", "save the run's newest state in --out, keeping the last --keep: as a checkpoint (safetensors + "
                  "JSON metadata) or, --format hf, as a Hugging Face folder of the ALBERT model; one shot, for "
                  "cron (a second export on the same --out while one runs fails). With --from FILE: convert a "
                  "checkpoint file into a Hugging Face folder at --out, offline");
    auto* run_flag = cmd->add_option("--run", run_id_, "the run to export (its trainers' --run-id)");
    auto* peers = cmd->add_option("--initial-peers", initial_peers_, "DHT nodes to join through: tcp://HOST:PORT/k/KEY");
    cmd->add_option("--out", out_dir_,
                    "folder for checkpoint-e<EPOCH>.safetensors/.json and latest.safetensors, or (--format hf) "
                    "hf-e<EPOCH>/ and latest-hf; with --from, the Hugging Face folder itself")
        ->required();
    cmd->add_option("--format", format_, "checkpoint: the whole training state; hf: the ALBERT model as "
                                         "transformers' AlbertForMaskedLM.from_pretrained loads it")
        ->capture_default_str()
        ->check(CLI::IsMember({"checkpoint", "hf"}));
    cmd->add_option("--tokenizer", tokenizer_,
                    "--format hf: the run's SentencePiece model (albert-spm-*.model in a trainer's "
                    "--checkpoint-dir), copied in as spiece.model");
    auto* from = cmd->add_option("--from", from_,
                                 "convert this checkpoint file (checkpoint.safetensors, model.safetensors or an "
                                 "exported checkpoint-e*.safetensors) instead of downloading; needs --format hf");
    auto* keep = cmd->add_option("--keep", keep_, "exports to keep (older ones are deleted)")
                     ->capture_default_str()
                     ->check(CLI::Range(1, 100000));
    auto* schema = cmd->add_option("--schema", schema_hex_, "refuse a state whose schema hash (64 hex digits) differs");
    auto* timeout = cmd->add_option("--timeout", timeout_seconds_, "give up after this many seconds")
                        ->capture_default_str()
                        ->check(CLI::PositiveNumber);
    auto* request_timeout = cmd->add_option("--request-timeout", request_timeout_seconds_,
                                            "seconds a donor may stay silent on one request before another is asked")
                                ->capture_default_str()
                                ->check(CLI::PositiveNumber);
    for (auto* network_only : {run_flag, peers, keep, schema, timeout, request_timeout}) from->excludes(network_only);
    return cmd;
  }

  int run(const cli::CommonFlags& common) override {
    const bool hf = format_ == "hf";
    if (hf && tokenizer_.empty()) return usage("--format hf needs --tokenizer (the run's SentencePiece model)");
    if (!hf && !tokenizer_.empty()) return usage("--tokenizer applies to --format hf only");
    if (!from_.empty()) {
      if (!hf) return usage("--from converts a checkpoint into --format hf only");
      return convert(common);
    }
    if (run_id_.empty()) return usage("--run is required (or --from FILE)");
    if (initial_peers_.empty()) return usage("--initial-peers is required (or --from FILE)");

    monitor::ExportOptions options;
    options.run_id = run_id_;
    options.out_dir = out_dir_;
    options.format = hf ? monitor::ExportFormat::kHuggingFace : monitor::ExportFormat::kCheckpoint;
    options.tokenizer_model = tokenizer_;
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
  static int usage(const std::string& message) {
    return cli::report_failure(kTool, error(Code::kInvalidArgument, message));
  }

  // --from: a checkpoint file on disk to a Hugging Face folder, no network.
  int convert(const cli::CommonFlags& common) {
    auto checkpoint = collab::load_checkpoint(from_);
    if (!checkpoint) return cli::report_failure(kTool, checkpoint.status());
    auto written = collab::write_albert_hf_folder(checkpoint->state, tokenizer_, out_dir_);
    if (!written.is_ok()) return cli::report_failure(kTool, written.with_context("converting " + from_));
    const auto epoch = checkpoint->state.epoch();
    if (common.json) {
      std::cout << nlohmann::json{{"path", out_dir_}, {"epoch", epoch}, {"written", true}, {"from", from_}}
                       .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
                << std::endl;
    } else {
      std::cout << "exported epoch " << epoch << ": " << out_dir_ << " (Hugging Face folder from " << from_ << ")"
                << std::endl;
    }
    return cli::kExitOk;
  }

  std::string run_id_;
  std::vector<std::string> initial_peers_;
  std::string out_dir_;
  std::string format_ = "checkpoint";
  std::string tokenizer_;
  std::string from_;
  size_t keep_ = 5;
  std::string schema_hex_;
  double timeout_seconds_ = 120;
  double request_timeout_seconds_ = 10;
};

}  // namespace

std::unique_ptr<Command> make_export_command() { return std::make_unique<ExportCommand>(); }

}  // namespace dedloc::avg_tool
