// One-shot checkpoint export (`dedloc-avg export`, meant for cron): fetch the run's newest training state
// from its donors and keep it on disk, the way DeDLOC's operators kept the collaboration's model.
//
// In OUT_DIR, one run at a time:
//   1. take OUT_DIR/.export.lock (flock, never waited for: a run that finds it held fails at once, so cron
//      jobs that overlap do not pile up); remove temporary files a killed run left behind;
//   2. download the state from the donors listed in the DHT (one donor: optimizer statistics are not
//      averaged, so stripes from several could mix two peers' statistics);
//   3. verify it: the schema hash the caller expects (if any), at least one tensor, every value finite;
//   4. write checkpoint-e<EPOCH>.safetensors (collab/checkpoint.hpp: safetensors with a checksum, written
//      to a temporary file, fsynced and renamed, so no partial file ever carries the final name), read it
//      back, then its metadata checkpoint-e<EPOCH>.json (run, epoch, recipe, model, time, peers, donor,
//      schema hash) the same way, and point the symlink `latest.safetensors` at it (also by rename);
//   5. delete all but the newest `keep` checkpoints.
// An epoch already on disk is not written again (its metadata is, if missing).
//
// With ExportFormat::kHuggingFace, step 4 writes the folder hf-e<EPOCH>/ instead (collab/hf_export.hpp:
// model.safetensors under transformers' AlbertForMaskedLM names, config.json, tokenizer_config.json and the
// run's spiece.model; built in a temporary sibling and renamed) and points the symlink `latest-hf` at it;
// step 5 keeps the newest `keep` such folders. The tokenizer file is checked before anything is
// downloaded, the state's ALBERT tensors and shape after.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "dedloc/core/bytes.hpp"
#include "dedloc/core/clock.hpp"
#include "dedloc/core/log.hpp"
#include "dedloc/core/status.hpp"
#include "dedloc/dht/node.hpp"
#include "dedloc/net/client.hpp"

namespace dedloc::monitor {

enum class ExportFormat {
  kCheckpoint,   // checkpoint-e<EPOCH>.safetensors: the whole training state, resumable
  kHuggingFace,  // hf-e<EPOCH>/: the ALBERT model as transformers loads it
};

struct ExportOptions {
  std::string run_id;
  std::string out_dir;
  ExportFormat format = ExportFormat::kCheckpoint;
  std::string tokenizer_model;            // kHuggingFace: the run's SentencePiece model file (spiece.model)
  size_t keep = 5;                        // checkpoints kept (at least 1)
  std::optional<Bytes> expected_schema;   // refuse a state of another model
  Duration request_timeout = std::chrono::seconds(10);
  Logger* log = &Logger::global();
};

struct ExportResult {
  std::string path;            // the checkpoint or Hugging Face folder (new or already there)
  std::uint64_t epoch = 0;
  bool written = false;        // false: that epoch was already on disk
  std::string donor;           // who served it
  size_t peers = 0;            // live progress records when exported
  std::vector<std::string> removed;  // rotated away
};

// Errors, each one line naming what went wrong:
//   kRefused      another export holds OUT_DIR/.export.lock
//   kNotFound     no donor of the run is listed in the DHT
//   kUnavailable  donors are listed but none served the state (each one's reason)
//   kMalformed    the state failed verification (which tensor is not finite, whose schema)
//   kIo           OUT_DIR cannot be written
//   kHuggingFace only: those of collab::write_albert_hf_folder (a state that is not ALBERT, a missing
//   tokenizer file, ...)
//   kTimeout      `deadline` passed first
Result<ExportResult> export_checkpoint(dht::Node& node, net::Client& client, const ExportOptions& options,
                                       Deadline deadline);

// The checkpoints in `dir` written by export, newest epoch first: (epoch, path).
std::vector<std::pair<std::uint64_t, std::string>> list_exported_checkpoints(const std::string& dir);
// The Hugging Face folders (hf-e<EPOCH>) in `dir` written by export, newest epoch first: (epoch, path).
std::vector<std::pair<std::uint64_t, std::string>> list_exported_hf_folders(const std::string& dir);

}  // namespace dedloc::monitor
