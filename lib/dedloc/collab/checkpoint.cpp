#include "dedloc/collab/checkpoint.hpp"

#include <algorithm>
#include <cstring>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "dedloc/core/files.hpp"
#include "dedloc/crypto/hash.hpp"

namespace dedloc::collab {

namespace {

constexpr std::string_view kFormat = "dedloc-checkpoint-v1";
constexpr size_t kMaxHeaderBytes = 100u << 20;              // the safetensors reference limit
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
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  std::uint64_t offset = 0;
  for (size_t i = 0; i < state.size(); ++i) {
    const auto& spec = state.tensors()[i];
    std::uint64_t bytes = state.tensor(i).size() * sizeof(float);
    header[spec.name] = {{"dtype", "F32"}, {"shape", spec.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  auto data = ByteSpan(reinterpret_cast<const std::uint8_t*>(state.flat().data()), state.flat().size() * sizeof(float));
  nlohmann::ordered_json metadata = {{"format", kFormat},
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
  header["__metadata__"] = std::move(metadata);
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');

  std::string contents;
  contents.reserve(8 + text.size() + data.size());
  std::uint64_t length = text.size();
  for (int i = 0; i < 8; ++i) contents.push_back(static_cast<char>((length >> (8 * i)) & 0xff));
  contents += text;
  contents.append(reinterpret_cast<const char*>(data.data()), data.size());
  return write_file_atomically(path, contents).with_context("writing checkpoint " + path);
}

Result<Checkpoint> load_checkpoint(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return error(Code::kNotFound, "no checkpoint at " + path);
  auto contents = read_file(path, kMaxCheckpointBytes);
  if (!contents) return contents.status().with_context("reading checkpoint " + path);
  auto bad = [&](const std::string& why) { return error(Code::kMalformed, "checkpoint " + path + " is corrupt: " + why); };
  const std::string& file = *contents;
  if (file.size() < 8) return bad("shorter than its 8-byte header length");
  std::uint64_t length = 0;
  for (int i = 0; i < 8; ++i) length |= std::uint64_t{static_cast<std::uint8_t>(file[i])} << (8 * i);
  if (length > kMaxHeaderBytes || length > file.size() - 8) return bad("the header length exceeds the file");
  nlohmann::json header = nlohmann::json::parse(file.begin() + 8, file.begin() + 8 + static_cast<std::ptrdiff_t>(length),
                                                nullptr, /*allow_exceptions=*/false);
  if (!header.is_object()) return bad("the header is not a JSON object");
  const size_t data_begin = 8 + length;
  const size_t data_size = file.size() - data_begin;

  auto meta_it = header.find("__metadata__");
  if (meta_it == header.end() || !meta_it->is_object()) return bad("no __metadata__ (not a dedloc checkpoint)");
  std::map<std::string, std::string> metadata;
  for (const auto& [key, value] : meta_it->items()) {
    if (!value.is_string()) return bad("metadata '" + key + "' is not a string");
    metadata[key] = value.get<std::string>();
  }
  if (metadata["format"] != kFormat) return bad("format '" + metadata["format"] + "', expected " + std::string(kFormat));

  struct Entry {
    std::string name;
    std::vector<std::uint64_t> shape;
    std::uint64_t begin, end;
  };
  std::vector<Entry> entries;
  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__") continue;
    // find(), not value("dtype", ""): value() throws when the key holds another type ("dtype": [2]), an
    // uncaught exception out of a corrupt file (found by the checkpoint fuzz target).
    if (!info.is_object()) return bad("tensor '" + name + "' is not F32");
    auto dtype = info.find("dtype");
    if (dtype == info.end() || !dtype->is_string() || *dtype != "F32") return bad("tensor '" + name + "' is not F32");
    auto shape = info.find("shape");
    auto offsets = info.find("data_offsets");
    if (shape == info.end() || !shape->is_array() || offsets == info.end() || !offsets->is_array() || offsets->size() != 2) {
      return bad("tensor '" + name + "' lacks a shape or data offsets");
    }
    Entry e{name, {}, 0, 0};
    std::uint64_t elements = 1;
    for (const auto& d : *shape) {
      if (!d.is_number_unsigned()) return bad("tensor '" + name + "' has a bad dimension");
      e.shape.push_back(d.get<std::uint64_t>());
      if (e.shape.back() != 0 && elements > (std::uint64_t{1} << 48) / e.shape.back()) return bad("tensor '" + name + "' is too large");
      elements *= e.shape.back();
    }
    if (!(*offsets)[0].is_number_unsigned() || !(*offsets)[1].is_number_unsigned()) return bad("tensor '" + name + "' has bad offsets");
    e.begin = (*offsets)[0].get<std::uint64_t>();
    e.end = (*offsets)[1].get<std::uint64_t>();
    if (e.end < e.begin || e.end > data_size || e.end - e.begin != elements * sizeof(float)) {
      return bad("tensor '" + name + "' does not fit its offsets or the file (truncated?)");
    }
    entries.push_back(std::move(e));
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.begin < b.begin; });
  std::uint64_t expected = 0;
  for (const auto& e : entries) {
    if (e.begin != expected) return bad("tensor data overlaps or leaves a hole at '" + e.name + "'");
    expected = e.end;
  }
  if (expected != data_size) return bad("the data section has " + std::to_string(data_size) + " bytes, the tensors " + std::to_string(expected));

  auto data = ByteSpan(reinterpret_cast<const std::uint8_t*>(file.data() + data_begin), data_size);
  if (crypto::blake2b_hex(data) != metadata["checksum"]) return bad("checksum mismatch (the tensor data changed)");

  std::vector<avg::TensorSpec> specs;
  for (const auto& e : entries) specs.push_back({e.name, e.shape});
  auto state = avg::TrainingState::with_tensors(std::move(specs));
  if (!state) return bad(state.status().message());
  // An empty state has no buffer: memcpy from or to a null pointer is undefined even for 0 bytes (found by
  // the checkpoint fuzz target).
  if (data_size > 0) std::memcpy(state->flat().data(), data.data(), data_size);
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
