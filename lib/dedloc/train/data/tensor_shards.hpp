// A dataset of tensor shards: safetensors files in which every tensor's first dimension is the sample, so
// that a micro-batch is the same rows of every tensor (the `tensors` data kind of docs/recipes.md, made by
// examples/gpt/prepare.py or any script that writes safetensors).
//
//   shards/tokens-00000.safetensors    tokens: I64 [4096, 129]
//   shards/tokens-00001.safetensors    tokens: I64 [1200, 129]     -> 5296 samples of one column "tokens"
//
// Files are memory-mapped, not read: a dataset may be larger than RAM, and a batch touches only its rows'
// pages. Every file must hold the same tensors (names, dtypes and per-sample shapes), and within a file
// every tensor the same number of samples; anything else is refused when the dataset is opened, naming the
// file and the tensors. Sample i of the dataset is sample i - (samples of the files before) of its file,
// files in the order given (a directory contributes its *.safetensors files sorted by name).
//
// No torch here: the tasks turn rows into tensors (models/torchscript_task.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dedloc/core/mapped_file.hpp"
#include "dedloc/core/safetensors.hpp"
#include "dedloc/core/status.hpp"

namespace dedloc::train {

class TensorShards {
 public:
  struct Column {
    std::string name;
    safetensors::DType dtype = safetensors::DType::kF32;
    std::vector<std::uint64_t> sample_shape;  // the shape without the sample dimension
    std::uint64_t sample_bytes = 0;
  };

  // `paths`: files and directories. Errors, each one line naming the file: kNotFound (a path that does not
  // exist, a directory without .safetensors files), kInvalidArgument (a file of another format, tensors
  // whose sample counts differ, a file whose tensors differ from the first file's, no samples at all),
  // kMalformed (a damaged safetensors header), kIo.
  static Result<TensorShards> open(const std::vector<std::string>& paths);

  const std::vector<Column>& columns() const { return columns_; }
  std::uint64_t samples() const { return samples_; }
  const std::vector<std::string>& files() const { return files_; }

  // Sample `index` (< samples()) of column `column` (< columns().size()): sample_bytes bytes, row-major.
  ByteSpan sample(std::size_t column, std::uint64_t index) const;

 private:
  struct Shard {
    MappedFile file;
    std::uint64_t first_sample = 0;  // its first sample's index in the dataset
    std::uint64_t samples = 0;
    std::vector<std::uint64_t> column_offsets;  // per column, where its data starts in the file
  };
  TensorShards() = default;

  std::vector<Column> columns_;
  std::vector<Shard> shards_;
  std::vector<std::string> files_;
  std::uint64_t samples_ = 0;
};

// "I64 [129]" for messages.
std::string describe_column(const TensorShards::Column& column);

}  // namespace dedloc::train
