#include "dedloc/monitor/checkpoint_export.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <regex>

#include <nlohmann/json.hpp>

#include "dedloc/avg/state_transfer.hpp"
#include "dedloc/core/file_lock.hpp"
#include "dedloc/core/files.hpp"
#include "dedloc/collab/checkpoint.hpp"
#include "dedloc/collab/hf_export.hpp"
#include "dedloc/collab/progress.hpp"

namespace dedloc::monitor {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kLog = "export";

std::string epoch_name(const char* stem, std::uint64_t epoch) {
  char name[64];
  std::snprintf(name, sizeof name, "%s-e%08llu", stem, static_cast<unsigned long long>(epoch));
  return name;
}

// Temporary files of write_file_atomically ("<name>.tmp.<pid>.<n>"), staging folders of the Hugging Face
// export (the same pattern) and the symlink swap's, left by a run that was killed; only ever called with
// the lock held, so none of them is being written.
void remove_leftovers(const std::string& dir, Logger& log) {
  std::error_code ec;
  std::vector<fs::path> leftovers;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.path().filename().string().find(".tmp.") != std::string::npos) leftovers.push_back(entry.path());
  }
  for (const auto& path : leftovers) {
    if (fs::remove_all(path, ec) > 0) {
      log.info(kLog) << "removed " << path.filename().string() << ", left by an interrupted export";
    }
  }
}

// (epoch, path) of the entries of `dir` named by `pattern` (its group 1: the epoch) that `kind` accepts,
// newest first.
template <class Kind>
std::vector<std::pair<std::uint64_t, std::string>> list_exports(const std::string& dir, const std::regex& pattern,
                                                                Kind kind) {
  std::vector<std::pair<std::uint64_t, std::string>> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    std::smatch match;
    auto name = entry.path().filename().string();
    if (!kind(entry) || !std::regex_match(name, match, pattern)) continue;
    found.emplace_back(std::stoull(match[1].str()), entry.path().string());
  }
  std::sort(found.begin(), found.end(), std::greater<>());
  return found;
}

Status verify(const avg::TrainingState& state, const ExportOptions& options) {
  if (state.size() == 0) return error(Code::kMalformed, "the downloaded state holds no tensors");
  if (options.expected_schema && state.schema_hash() != *options.expected_schema) {
    return error(Code::kMalformed, "the state's schema " + to_hex(state.schema_hash()) + " is not the expected " +
                                       to_hex(*options.expected_schema) + " (another model?)");
  }
  for (size_t i = 0; i < state.size(); ++i) {
    auto values = state.tensor(i);
    auto bad = std::find_if(values.begin(), values.end(), [](float x) { return !std::isfinite(x); });
    if (bad != values.end()) {
      return error(Code::kMalformed, "tensor '" + state.tensors()[i].name + "' holds a non-finite value at element " +
                                         std::to_string(bad - values.begin()) + ": not exported");
    }
  }
  return Status::ok();
}

std::string entry_text(const avg::TrainingState& state, const std::string& key) {
  auto it = state.metadata.entries.find(key);
  if (it == state.metadata.entries.end()) return "";
  if (const auto* text = std::get_if<std::string>(&it->second)) return *text;
  return "";
}

// Points `link` at `target` (a name in the same folder) by renaming a fresh symlink over it.
Status replace_symlink(const std::string& target, const std::string& link) {
  std::string tmp = link + ".tmp." + std::to_string(::getpid());
  ::unlink(tmp.c_str());
  if (::symlink(target.c_str(), tmp.c_str()) != 0 || ::rename(tmp.c_str(), link.c_str()) != 0) {
    ::unlink(tmp.c_str());
    return error(Code::kIo, "cannot point " + link + " at " + target);
  }
  return Status::ok();
}

Status write_checkpoint_export(const avg::TrainingState& state, const ExportOptions& options, ExportResult& result) {
  auto& log = *options.log;
  std::error_code ec;
  const std::string base = options.out_dir + "/" + epoch_name("checkpoint", result.epoch);
  result.path = base + ".safetensors";
  const double now = SystemClock::instance().unix_seconds();
  if (fs::exists(result.path, ec)) {
    log.info(kLog) << "epoch " << result.epoch << " is already in " << result.path;
  } else {
    std::map<std::string, std::string> extra = {{"exported_at", format_utc(now)},
                                                {"exported_from", result.donor},
                                                {"peers", std::to_string(result.peers)}};
    // The trainers' own description of the run (run_id, recipe, model) is in the state's entries already.
    DEDLOC_RETURN_IF_ERROR(collab::save_checkpoint(result.path, state, extra));
    auto reread = collab::load_checkpoint(result.path);
    if (!reread) return reread.status().with_context("reading back the checkpoint just written");
    result.written = true;
  }
  if (!fs::exists(base + ".json", ec)) {
    nlohmann::json metadata = {{"run_id", options.run_id},
                               {"epoch", result.epoch},
                               {"recipe", entry_text(state, "recipe")},
                               {"model", entry_text(state, "model")},
                               {"time", format_utc(now)},
                               {"unix_time", now},
                               {"peers", result.peers},
                               {"donor", result.donor},
                               {"schema_hash", to_hex(state.schema_hash())},
                               {"tensors", state.size()},
                               {"elements", state.total_elements()},
                               {"file", fs::path(result.path).filename().string()}};
    DEDLOC_RETURN_IF_ERROR(write_file_atomically(
        base + ".json", metadata.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n"));
  }

  auto checkpoints = list_exported_checkpoints(options.out_dir);
  DEDLOC_RETURN_IF_ERROR(replace_symlink(fs::path(checkpoints.front().second).filename().string(),
                                         options.out_dir + "/latest.safetensors"));
  for (size_t i = std::max<size_t>(options.keep, 1); i < checkpoints.size(); ++i) {
    const auto& path = checkpoints[i].second;
    fs::remove(fs::path(path).replace_extension(".json"), ec);
    if (fs::remove(path, ec)) result.removed.push_back(path);
  }
  return Status::ok();
}

Status write_hf_export(const avg::TrainingState& state, const ExportOptions& options, ExportResult& result) {
  std::error_code ec;
  result.path = options.out_dir + "/" + epoch_name("hf", result.epoch);
  if (fs::exists(result.path, ec)) {
    options.log->info(kLog) << "epoch " << result.epoch << " is already in " << result.path;
  } else {
    DEDLOC_RETURN_IF_ERROR(collab::write_albert_hf_folder(state, options.tokenizer_model, result.path));
    result.written = true;
  }
  auto folders = list_exported_hf_folders(options.out_dir);
  DEDLOC_RETURN_IF_ERROR(
      replace_symlink(fs::path(folders.front().second).filename().string(), options.out_dir + "/latest-hf"));
  for (size_t i = std::max<size_t>(options.keep, 1); i < folders.size(); ++i) {
    if (fs::remove_all(folders[i].second, ec) > 0) result.removed.push_back(folders[i].second);
  }
  return Status::ok();
}

}  // namespace

std::vector<std::pair<std::uint64_t, std::string>> list_exported_checkpoints(const std::string& dir) {
  static const std::regex kName(R"(checkpoint-e(\d{1,19})\.safetensors)");
  return list_exports(dir, kName, [](const fs::directory_entry& entry) {
    std::error_code ec;
    return entry.is_regular_file(ec);
  });
}

std::vector<std::pair<std::uint64_t, std::string>> list_exported_hf_folders(const std::string& dir) {
  static const std::regex kName(R"(hf-e(\d{1,19}))");
  return list_exports(dir, kName, [](const fs::directory_entry& entry) {
    std::error_code ec;
    return entry.is_directory(ec) && !entry.is_symlink(ec);
  });
}

Result<ExportResult> export_checkpoint(dht::Node& node, net::Client& client, const ExportOptions& options,
                                       Deadline deadline) {
  auto& log = *options.log;
  std::error_code ec;
  const bool hf = options.format == ExportFormat::kHuggingFace;
  // Before the download: a missing tokenizer is the operator's typo, not worth a state transfer.
  if (hf && !fs::is_regular_file(options.tokenizer_model, ec)) {
    return error(Code::kNotFound, "tokenizer file missing: " + options.tokenizer_model);
  }
  fs::create_directories(options.out_dir, ec);
  if (ec) return error(Code::kIo, "cannot create " + options.out_dir + ": " + ec.message());
  auto lock = FileLock::try_acquire(options.out_dir + "/.export.lock");
  if (!lock) {
    if (lock.status().code() == Code::kRefused) {
      return error(Code::kRefused, "another export is writing to " + options.out_dir + " (" +
                                       lock.status().message() + ")");
    }
    return lock.status();
  }
  remove_leftovers(options.out_dir, log);

  avg::DownloadOptions download;
  download.run_id = options.run_id;
  download.max_donors = 1;
  download.expected_schema = options.expected_schema;
  download.request_timeout = options.request_timeout;
  download.log = &log;
  auto downloaded = avg::download_state(node, client, download, deadline);
  if (!downloaded) {
    if (downloaded.status().code() == Code::kNotFound) {
      return error(Code::kNotFound, "no donor of run '" + options.run_id + "' is listed in the DHT");
    }
    return downloaded.status();
  }
  const auto& state = downloaded->state;
  DEDLOC_RETURN_IF_ERROR(verify(state, options));

  ExportResult result;
  result.epoch = state.epoch();
  for (const auto& d : downloaded->donors) {
    if (d.failure.is_ok() && d.parts > 0) result.donor = d.address;
  }
  if (auto peers = collab::read_progress(node, options.run_id, deadline)) result.peers = peers->size();
  DEDLOC_RETURN_IF_ERROR(hf ? write_hf_export(state, options, result) : write_checkpoint_export(state, options, result));
  return result;
}

}  // namespace dedloc::monitor
