#include "dedloc/collab/checkpoint.hpp"

#include <algorithm>
#include <cstring>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "dedloc/core/files.hpp"
#include "dedloc/core/safetensors.hpp"
#include "dedloc/crypto/hash.hpp"

namespace dedloc::collab {

namespace {

constexpr std::string_view kFormat = "dedloc-checkpoint-v1";
constexpr size_t kMaxCheckpointBytes = size_t{64} << 30;    // a sanity bound on what we read back
const char* const kReserved[] = {"format", "epoch", "schema_hash", "checksum", "entries"};

nlohmann::json entries_to_json(const wire::StateEntries& entries) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [key, value] : entries) {
    if (const double* number = std::get_if<double>(&value)) out[key] = *number;
    else out[key] = std::get<std::string>(value);
  }
  return out;
}

Result<wire::StateEntries> entries_from_json(const nlohmann::json& json) {
  wire::StateEntries out;
  if (!json.is_object()) return error(Code::kMalformed, "'entries' is not a JSON object");
  for (const auto& [key, value] : json.items()) {
    if (value.is_number()) out[key] = value.get<double>();
    else if (value.is_string()) out[key] = value.get<std::string>();
    else return error(Code::kMalformed, "entry '" + key + "' is neither a number nor a string");
  }
  return out;
}

}  // namespace

Status save_checkpoint(const std::string& path, const avg::TrainingState& state,
                       const std::map<std::string, std::string>& extra) {
  std::vector<safetensors::TensorBytes> tensors;
  for (size_t i = 0; i < state.size(); ++i) {
    const auto values = state.tensor(i);
    tensors.push_back({state.tensors()[i].name, safetensors::DType::kF32, state.tensors()[i].shape,
                       ByteSpan(reinterpret_cast<const std::uint8_t*>(values.data()), values.size() * sizeof(float))});
  }
  auto data = ByteSpan(reinterpret_cast<const std::uint8_t*>(state.flat().data()), state.flat().size() * sizeof(float));
  std::map<std::string, std::string> metadata = {{"format", std::string(kFormat)},
                                                 {"epoch", std::to_string(state.epoch())},
                                                 {"schema_hash", to_hex(state.schema_hash())},
                                                 {"checksum", crypto::blake2b_hex(data)},
                                                 {"entries", entries_to_json(state.metadata.entries).dump()}};
  for (const auto& [key, value] : extra) {
    if (std::find(std::begin(kReserved), std::end(kReserved), key) != std::end(kReserved)) {
      return error(Code::kInvalidArgument, "checkpoint metadata key '" + key + "' is reserved");
    }
    metadata[key] = value;
  }
  auto contents = safetensors::encode(tensors, metadata);
  if (!contents) return contents.status().with_context("writing checkpoint " + path);
  return write_file_atomically(path, *contents).with_context("writing checkpoint " + path);
}

Result<Checkpoint> load_checkpoint(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return error(Code::kNotFound, "no checkpoint at " + path);
  auto contents = read_file(path, kMaxCheckpointBytes);
  if (!contents) return contents.status().with_context("reading checkpoint " + path);
  auto bad = [&](const std::string& why) { return error(Code::kMalformed, "checkpoint " + path + " is corrupt: " + why); };
  const std::string& file = *contents;
  auto header = safetensors::parse_header(as_bytes(file), file.size());
  if (!header) return bad(header.status().message());
  auto metadata = header->metadata;
  if (metadata.empty()) return bad("no __metadata__ (not a dedloc checkpoint)");
  if (metadata["format"] != kFormat) return bad("format '" + metadata["format"] + "', expected " + std::string(kFormat));
  std::vector<avg::TensorSpec> specs;
  for (const auto& t : header->tensors) {
    if (t.dtype != safetensors::DType::kF32) return bad("tensor '" + t.name + "' is not F32");
    specs.push_back({t.name, t.shape});
  }

  auto data = as_bytes(file).subspan(header->data_offset);
  if (crypto::blake2b_hex(data) != metadata["checksum"]) return bad("checksum mismatch (the tensor data changed)");

  auto state = avg::TrainingState::with_tensors(std::move(specs));
  if (!state) return bad(state.status().message());
  // An empty state has no buffer: memcpy from or to a null pointer is undefined even for 0 bytes (found by
  // the checkpoint fuzz target).
  if (!data.empty()) std::memcpy(state->flat().data(), data.data(), data.size());
  if (to_hex(state->schema_hash()) != metadata["schema_hash"]) return bad("schema hash mismatch");
  char* end = nullptr;
  state->metadata.epoch = std::strtoull(metadata["epoch"].c_str(), &end, 10);
  if (metadata["epoch"].empty() || *end != '\0') return bad("epoch '" + metadata["epoch"] + "' is not a number");
  auto parsed = nlohmann::json::parse(metadata["entries"], nullptr, false);
  auto state_entries = entries_from_json(parsed);
  if (!state_entries) return bad(state_entries.status().message());
  state->metadata.entries = std::move(*state_entries);
  DEDLOC_RETURN_IF_ERROR(avg::check_metadata(state->metadata).with_context("checkpoint " + path));

  Checkpoint checkpoint{std::move(*state), {}};
  for (auto& [key, value] : metadata) {
    if (std::find(std::begin(kReserved), std::end(kReserved), key) == std::end(kReserved)) checkpoint.extra[key] = value;
  }
  return checkpoint;
}

}  // namespace dedloc::collab
