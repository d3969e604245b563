// Checkpoints in the safetensors format: round trip, atomic replacement, and corrupt files refused.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "dedloc/core/files.hpp"
#include "dedloc/collab/checkpoint.hpp"
#include "support/test_paths.hpp"

using namespace dedloc;
using namespace dedloc::collab;

namespace {

avg::TrainingState sample_state() {
  auto state = avg::TrainingState::with_tensors({{"encoder.weight", {3, 2}}, {"encoder.bias", {2}}, {"step", {}}},
                                                {42, {{"lr", 0.125}, {"optimizer", std::string("lamb")}}});
  REQUIRE(state.is_ok());
  for (size_t k = 0; k < state->flat().size(); ++k) state->flat()[k] = 0.5f * static_cast<float>(k) - 1;
  return std::move(*state);
}

std::string slurp(const std::string& path) { return read_file(path).value(); }
void spit(const std::string& path, const std::string& contents) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << contents;
}

}  // namespace

TEST_CASE("A checkpoint round-trips the state, its epoch, its metadata and the caller's extras", "[unit][train]") {
  test::ScopedTempDir dir{"dedloc-checkpoint"};
  std::string path = (dir.path / "ckpt.safetensors").string();
  auto state = sample_state();
  REQUIRE(save_checkpoint(path, state, {{"run_id", "run1"}, {"recipe", "recipes/mlp.yaml"}}).is_ok());
  auto loaded = load_checkpoint(path);
  REQUIRE(loaded.is_ok());
  CHECK(loaded->state.tensors() == state.tensors());
  CHECK(std::equal(state.flat().begin(), state.flat().end(), loaded->state.flat().begin(), loaded->state.flat().end()));
  CHECK(loaded->state.metadata == state.metadata);
  CHECK(loaded->extra.at("run_id") == "run1");
  CHECK(loaded->extra.at("recipe") == "recipes/mlp.yaml");
  // Reserved metadata keys cannot be overwritten by the caller.
  CHECK(save_checkpoint(path, state, {{"epoch", "7"}}).code() == Code::kInvalidArgument);
  // Saving again replaces the file whole; no temporary files are left behind.
  state.metadata.epoch = 43;
  REQUIRE(save_checkpoint(path, state).is_ok());
  CHECK(load_checkpoint(path)->state.epoch() == 43);
  CHECK(std::distance(std::filesystem::directory_iterator(dir.path), std::filesystem::directory_iterator()) == 1);
}

TEST_CASE("The file is safetensors: an 8-byte header length, a JSON header, F32 data in order", "[unit][train]") {
  test::ScopedTempDir dir{"dedloc-checkpoint"};
  std::string path = (dir.path / "ckpt.safetensors").string();
  REQUIRE(save_checkpoint(path, sample_state()).is_ok());
  std::string file = slurp(path);
  std::uint64_t length = 0;
  for (int i = 0; i < 8; ++i) length |= std::uint64_t{static_cast<std::uint8_t>(file[i])} << (8 * i);
  CHECK(length % 8 == 0);
  std::string header = file.substr(8, length);
  CHECK(header.find(R"("encoder.weight":{"dtype":"F32","shape":[3,2],"data_offsets":[0,24]})") != std::string::npos);
  CHECK(header.find(R"("step":{"dtype":"F32","shape":[],"data_offsets":[32,36]})") != std::string::npos);
  CHECK(file.size() == 8 + length + 9 * sizeof(float));
}

TEST_CASE("A corrupt or truncated checkpoint is refused with a message naming the file", "[unit][train]") {
  test::ScopedTempDir dir{"dedloc-checkpoint"};
  std::string path = (dir.path / "ckpt.safetensors").string();
  REQUIRE(save_checkpoint(path, sample_state()).is_ok());
  const std::string good = slurp(path);

  auto refused = [&](const std::string& contents, const std::string& why) {
    spit(path, contents);
    auto loaded = load_checkpoint(path);
    INFO(why << ": " << (loaded.is_ok() ? "loaded" : loaded.status().to_string()));
    REQUIRE_FALSE(loaded.is_ok());
    CHECK(loaded.status().code() == Code::kMalformed);
    CHECK(loaded.status().message().find(path) != std::string::npos);
  };
  refused(good.substr(0, good.size() - 4), "truncated data");
  refused(good.substr(0, 5), "truncated length");
  std::string flipped = good;
  flipped[flipped.size() - 1] ^= 0x40;
  refused(flipped, "a flipped data bit");
  std::string huge = good;
  huge[7] = '\x7f';
  refused(huge, "a header length past the end");
  std::string garbage = good;
  garbage[8] = '[';
  refused(garbage, "a header that is not an object");
  CHECK(load_checkpoint((dir.path / "missing").string()).status().code() == Code::kNotFound);
}
