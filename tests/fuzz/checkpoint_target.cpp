// libFuzzer target: checkpoints (collab/checkpoint.hpp, safetensors + BLAKE2b checksum), loaded from a file
// anyone may have handed over (--resume, dedloc-avg export).
//
// Input: a mode byte, then
//   mode even  the file's bytes, as they are
//   mode odd   a JSON header, a 0 byte, then the tensor data: the target writes the file itself (length
//              prefix, padding) and fills in the data's checksum and the tensors' schema hash, so that the
//              fuzzer gets past those two checks and into what lies behind them
// The file goes to a temporary path (load_checkpoint reads paths). An accepted checkpoint is saved again
// and loads back the same (tensors, data bits, epoch, entries, extra metadata).
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "dedloc/avg/training_state.hpp"
#include "dedloc/crypto/hash.hpp"
#include "dedloc/collab/checkpoint.hpp"
#include "fuzz/fuzz_target.hpp"

namespace {

using namespace dedloc;

std::string temp_path(const char* what) {
  static const std::string dir = std::filesystem::temp_directory_path().string();
  return dir + "/dedloc-fuzz-" + what + "-" + std::to_string(::getpid()) + ".safetensors";
}

void write(const std::string& path, std::string_view bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Mode odd: header JSON + data -> a file with the right checksum and schema hash (when the header has the
// shape for them).
std::string assemble(std::string_view header_text, std::string_view data) {
  nlohmann::json header = nlohmann::json::parse(header_text, nullptr, /*allow_exceptions=*/false);
  if (header.is_object()) {
    auto meta = header.find("__metadata__");
    if (meta != header.end() && meta->is_object()) {
      (*meta)["checksum"] = crypto::blake2b_hex(as_bytes(data));
      // The schema hash of the tensors in the order of their offsets, where names, shapes and offsets are
      // the right types.
      struct Spec {
        std::uint64_t begin;
        avg::TensorSpec spec;
      };
      std::vector<Spec> specs;
      for (const auto& [name, info] : header.items()) {
        if (name == "__metadata__" || !info.is_object()) continue;
        auto shape = info.find("shape");
        auto offsets = info.find("data_offsets");
        if (shape == info.end() || !shape->is_array() || offsets == info.end() || !offsets->is_array() ||
            offsets->empty() || !(*offsets)[0].is_number_unsigned()) {
          continue;
        }
        Spec s{(*offsets)[0].get<std::uint64_t>(), {name, {}}};
        for (const auto& d : *shape) s.spec.shape.push_back(d.is_number_unsigned() ? d.get<std::uint64_t>() : 0);
        specs.push_back(std::move(s));
      }
      std::stable_sort(specs.begin(), specs.end(), [](const Spec& a, const Spec& b) { return a.begin < b.begin; });
      std::vector<avg::TensorSpec> ordered;
      for (auto& s : specs) ordered.push_back(std::move(s.spec));
      (*meta)["schema_hash"] = to_hex(avg::schema_hash(ordered));
    }
  }
  std::string text = header.is_discarded()
                         ? std::string(header_text)
                         : header.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string file;
  for (int i = 0; i < 8; ++i) file.push_back(static_cast<char>((text.size() >> (8 * i)) & 0xff));
  file += text;
  file.append(data);
  return file;
}

bool same_state(const avg::TrainingState& a, const avg::TrainingState& b) {
  return a.tensors() == b.tensors() && a.metadata == b.metadata && a.schema_hash() == b.schema_hash() &&
         a.flat().size() == b.flat().size() &&
         (a.flat().empty() || std::memcmp(a.flat().data(), b.flat().data(), a.flat().size_bytes()) == 0);
}

}  // namespace

DEDLOC_FUZZ_TARGET(checkpoint) {
  fuzz::Input in(data, size);
  const std::uint8_t mode = in.byte();
  const ByteSpan rest = in.rest();
  const std::string_view bytes(reinterpret_cast<const char*>(rest.data()), rest.size());
  std::string file;
  if (mode % 2 == 0) {
    file = std::string(bytes);
  } else {
    const size_t zero = bytes.find('\0');
    file = zero == std::string_view::npos ? assemble(bytes, {}) : assemble(bytes.substr(0, zero), bytes.substr(zero + 1));
  }
  const std::string path = temp_path("in");
  write(path, file);
  auto loaded = collab::load_checkpoint(path);
  std::filesystem::remove(path);
  if (!loaded) {
    DEDLOC_FUZZ_CHECK(loaded.status().code() == Code::kMalformed);
    return 0;
  }
  // What loads saves again and loads back the same.
  const std::string again_path = temp_path("again");
  Status saved = collab::save_checkpoint(again_path, loaded->state, loaded->extra);
  DEDLOC_FUZZ_CHECK(saved.is_ok());
  auto again = collab::load_checkpoint(again_path);
  std::filesystem::remove(again_path);
  DEDLOC_FUZZ_CHECK(again.is_ok());
  DEDLOC_FUZZ_CHECK(same_state(again->state, loaded->state));
  DEDLOC_FUZZ_CHECK(again->extra == loaded->extra);
  return 0;
}
