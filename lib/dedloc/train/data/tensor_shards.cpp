#include "dedloc/train/data/tensor_shards.hpp"

#include <algorithm>
#include <filesystem>

namespace dedloc::train {

namespace {

namespace fs = std::filesystem;

constexpr std::string_view kExtension = ".safetensors";

std::string shape_text(const std::vector<std::uint64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

// The files `paths` name, directories expanded to their *.safetensors files sorted by name.
Result<std::vector<std::string>> expand(const std::vector<std::string>& paths) {
  std::vector<std::string> files;
  for (const auto& path : paths) {
    std::error_code ec;
    if (fs::is_directory(path, ec)) {
      std::vector<std::string> inside;
      for (const auto& entry : fs::directory_iterator(path, ec)) {
        if (entry.is_regular_file() && entry.path().extension() == kExtension) inside.push_back(entry.path().string());
      }
      if (ec) return error(Code::kIo, path + ": cannot list: " + ec.message());
      if (inside.empty()) return error(Code::kNotFound, path + ": no " + std::string(kExtension) + " files in this directory");
      std::sort(inside.begin(), inside.end());
      files.insert(files.end(), inside.begin(), inside.end());
    } else if (fs::exists(path, ec)) {
      if (fs::path(path).extension() != kExtension) {
        return error(Code::kInvalidArgument, path + ": not a safetensors file (tensor shards are *.safetensors)");
      }
      files.push_back(path);
    } else {
      return error(Code::kNotFound, path + ": no such file or directory");
    }
  }
  if (files.empty()) return error(Code::kInvalidArgument, "no tensor shard files given");
  return files;
}

}  // namespace

std::string describe_column(const TensorShards::Column& column) {
  return std::string(safetensors::dtype_name(column.dtype)) + " " + shape_text(column.sample_shape);
}

Result<TensorShards> TensorShards::open(const std::vector<std::string>& paths) {
  auto files = expand(paths);
  if (!files) return files.status();
  TensorShards shards;
  shards.files_ = *files;
  for (const auto& path : *files) {
    auto file = MappedFile::open(path);
    if (!file) return file.status();
    auto header = safetensors::parse_header(file->bytes(), file->bytes().size(), safetensors::Layout::kAnyGaps);
    if (!header) return error(header.status().code(), path + ": " + header.status().message());
    if (header->tensors.empty()) return error(Code::kInvalidArgument, path + ": holds no tensors");
    // Columns in name order, so that files written with their tensors in another order still agree.
    std::vector<const safetensors::TensorInfo*> tensors;
    for (const auto& t : header->tensors) tensors.push_back(&t);
    std::sort(tensors.begin(), tensors.end(), [](auto* a, auto* b) { return a->name < b->name; });

    Shard shard;
    shard.first_sample = shards.samples_;
    for (size_t i = 0; i < tensors.size(); ++i) {
      const auto& t = *tensors[i];
      if (t.shape.empty()) {
        return error(Code::kInvalidArgument, path + ": tensor '" + t.name + "' is a scalar; every tensor needs a leading sample dimension");
      }
      Column column{t.name, t.dtype, std::vector<std::uint64_t>(t.shape.begin() + 1, t.shape.end()), 0};
      column.sample_bytes = t.shape[0] == 0 ? 0 : t.bytes() / t.shape[0];
      if (i == 0) {
        shard.samples = t.shape[0];
      } else if (t.shape[0] != shard.samples) {
        return error(Code::kInvalidArgument, path + ": tensor '" + t.name + "' has " + std::to_string(t.shape[0]) +
                                                 " samples, tensor '" + tensors[0]->name + "' has " + std::to_string(shard.samples));
      }
      if (shards.shards_.empty()) {
        shards.columns_.push_back(column);
      } else if (i >= shards.columns_.size() || shards.columns_[i].name != column.name) {
        return error(Code::kInvalidArgument, path + ": holds tensors different from " + files->front() + "'s (" +
                                                 "tensor '" + column.name + "')");
      } else if (shards.columns_[i].dtype != column.dtype || shards.columns_[i].sample_shape != column.sample_shape) {
        return error(Code::kInvalidArgument, path + ": tensor '" + column.name + "' is " + describe_column(column) +
                                                 " per sample, in " + files->front() + " " + describe_column(shards.columns_[i]));
      }
      shard.column_offsets.push_back(header->data_offset + t.begin);
    }
    if (shard.column_offsets.size() != shards.columns_.size()) {
      return error(Code::kInvalidArgument, path + ": holds " + std::to_string(shard.column_offsets.size()) + " tensors, " +
                                               files->front() + " " + std::to_string(shards.columns_.size()));
    }
    shard.file = std::move(*file);
    shards.samples_ += shard.samples;
    shards.shards_.push_back(std::move(shard));
  }
  if (shards.samples_ == 0) return error(Code::kInvalidArgument, files->front() + ": the tensor shards hold no samples");
  return shards;
}

ByteSpan TensorShards::sample(std::size_t column, std::uint64_t index) const {
  // The shard whose range holds `index`: the last one starting at or before it.
  auto it = std::upper_bound(shards_.begin(), shards_.end(), index,
                             [](std::uint64_t i, const Shard& s) { return i < s.first_sample; });
  const Shard& shard = *(it - 1);
  const std::uint64_t bytes = columns_[column].sample_bytes;
  return shard.file.bytes().subspan(shard.column_offsets[column] + (index - shard.first_sample) * bytes, bytes);
}

}  // namespace dedloc::train
