// Tensor-shard datasets (train/data/tensor_shards.hpp): samples numbered across files and directories,
// rows read back exactly, and each way a set of shards can disagree refused with the file and tensors named.
#include <catch2/catch.hpp>

#include <cstring>

#include "dedloc/core/files.hpp"
#include "dedloc/core/safetensors.hpp"
#include "dedloc/train/data/tensor_shards.hpp"
#include "support/test_paths.hpp"

using namespace dedloc;
using namespace dedloc::train;
using safetensors::DType;

namespace {

template <class T>
safetensors::TensorBytes column(const std::string& name, DType dtype, std::vector<std::uint64_t> shape, const std::vector<T>& values) {
  return {name, dtype, std::move(shape), ByteSpan(reinterpret_cast<const std::uint8_t*>(values.data()), values.size() * sizeof(T))};
}

std::string write_shard(const std::filesystem::path& path, const std::vector<safetensors::TensorBytes>& tensors) {
  auto contents = safetensors::encode(tensors);
  REQUIRE(contents.is_ok());
  REQUIRE(write_file_atomically(path.string(), *contents).is_ok());
  return path.string();
}

// Shard k of a dataset of rows whose values encode their global index: tokens[i] = {10 i, 10 i + 1, 10 i + 2},
// labels[i] = i / 2.
std::string write_numbered_shard(const std::filesystem::path& path, std::int64_t first, std::int64_t rows,
                                 bool labels_first = false) {
  std::vector<std::int64_t> tokens;
  std::vector<float> labels;
  for (std::int64_t i = first; i < first + rows; ++i) {
    for (std::int64_t j = 0; j < 3; ++j) tokens.push_back(10 * i + j);
    labels.push_back(static_cast<float>(i) / 2);
  }
  auto t = column("tokens", DType::kI64, {static_cast<std::uint64_t>(rows), 3}, tokens);
  auto l = column("labels", DType::kF32, {static_cast<std::uint64_t>(rows)}, labels);
  return write_shard(path, labels_first ? std::vector{l, t} : std::vector{t, l});
}

std::string error_of(const std::vector<std::string>& paths) {
  auto shards = TensorShards::open(paths);
  REQUIRE_FALSE(shards.is_ok());
  return shards.status().message();
}

}  // namespace

TEST_CASE("Tensor shards: a directory's files in name order, rows of every column read back", "[unit][tensor_shards]") {
  test::ScopedTempDir dir;
  std::filesystem::create_directories(dir.path / "shards");
  // Written out of order and with the tensors in another order in one file: name order decides both.
  write_numbered_shard(dir.path / "shards/part-1.safetensors", 5, 7, /*labels_first=*/true);
  write_numbered_shard(dir.path / "shards/part-0.safetensors", 0, 5);
  write_shard(dir.path / "shards/notes.txt", {});  // not a shard: ignored in a directory
  write_numbered_shard(dir.path / "extra.safetensors", 12, 3);

  auto shards = TensorShards::open({(dir.path / "shards").string(), (dir.path / "extra.safetensors").string()});
  REQUIRE(shards.is_ok());
  CHECK(shards->samples() == 15);
  REQUIRE(shards->files().size() == 3);
  CHECK(shards->files()[0].ends_with("part-0.safetensors"));
  REQUIRE(shards->columns().size() == 2);
  CHECK(shards->columns()[0].name == "labels");
  CHECK(describe_column(shards->columns()[0]) == "F32 []");
  CHECK(shards->columns()[1].name == "tokens");
  CHECK(describe_column(shards->columns()[1]) == "I64 [3]");
  for (std::uint64_t i = 0; i < 15; ++i) {
    INFO("sample " << i);
    std::int64_t tokens[3];
    float label = 0;
    REQUIRE(shards->sample(1, i).size() == sizeof tokens);
    std::memcpy(tokens, shards->sample(1, i).data(), sizeof tokens);
    std::memcpy(&label, shards->sample(0, i).data(), sizeof label);
    CHECK(tokens[0] == static_cast<std::int64_t>(10 * i));
    CHECK(tokens[2] == static_cast<std::int64_t>(10 * i + 2));
    CHECK(label == static_cast<float>(i) / 2);
  }
}

TEST_CASE("Tensor shards: shards that disagree are refused, naming the file and the tensors", "[unit][tensor_shards]") {
  test::ScopedTempDir dir;
  const auto good = write_numbered_shard(dir.path / "good.safetensors", 0, 4);
  std::vector<std::int64_t> six(6, 1);
  std::vector<float> floats(8, 0.5f);

  SECTION("sample counts differ between a file's tensors") {
    auto bad = write_shard(dir.path / "bad.safetensors", {column("tokens", DType::kI64, {2, 3}, six),
                                                          column("labels", DType::kF32, {8}, floats)});
    CHECK(error_of({bad}) == bad + ": tensor 'tokens' has 2 samples, tensor 'labels' has 8");
  }
  SECTION("a file whose tensors have another per-sample shape or dtype than the first file's") {
    auto bad = write_shard(dir.path / "bad.safetensors", {column("tokens", DType::kI64, {3, 2}, six),
                                                          column("labels", DType::kF32, {3}, std::vector<float>(3))});
    CHECK_THAT(error_of({good, bad}), Catch::Contains(bad + ": tensor 'tokens' is I64 [2] per sample, in " + good + " I64 [3]"));
  }
  SECTION("a file with other tensors") {
    auto bad = write_shard(dir.path / "bad.safetensors", {column("ids", DType::kI64, {2, 3}, six)});
    CHECK_THAT(error_of({good, bad}), Catch::Contains(bad + ": holds tensors different from " + good));
    auto fewer = write_shard(dir.path / "fewer.safetensors", {column("labels", DType::kF32, {8}, floats)});
    CHECK_THAT(error_of({good, fewer}), Catch::Contains(fewer + ": holds 1 tensors, " + good + " 2"));
  }
  SECTION("a scalar tensor has no sample dimension") {
    std::vector<float> one{1.0f};
    auto bad = write_shard(dir.path / "bad.safetensors", {column("scale", DType::kF32, {}, one)});
    CHECK_THAT(error_of({bad}), Catch::Contains(bad + ": tensor 'scale' is a scalar"));
  }
  SECTION("paths that are not shards") {
    CHECK(error_of({(dir.path / "missing.safetensors").string()}) == (dir.path / "missing.safetensors").string() + ": no such file or directory");
    auto npy = dir.path / "data.npy";
    REQUIRE(write_file_atomically(npy.string(), "\x93NUMPY").is_ok());
    CHECK_THAT(error_of({npy.string()}), Catch::Contains("not a safetensors file"));
    std::filesystem::create_directories(dir.path / "empty");
    CHECK_THAT(error_of({(dir.path / "empty").string()}), Catch::Contains("no .safetensors files in this directory"));
    auto damaged = dir.path / "damaged.safetensors";
    REQUIRE(write_file_atomically(damaged.string(), std::string(8, '\xff') + "{}").is_ok());
    CHECK_THAT(error_of({damaged.string()}), Catch::Contains(damaged.string() + ": the header length"));
  }
  SECTION("no samples at all") {
    std::vector<float> none;
    auto empty = write_shard(dir.path / "empty.safetensors", {column("labels", DType::kF32, {0}, none)});
    CHECK_THAT(error_of({empty}), Catch::Contains("hold no samples"));
  }
}
