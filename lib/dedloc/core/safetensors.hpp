// The safetensors file format (https://github.com/huggingface/safetensors), read and written without torch:
// checkpoints (collab/checkpoint.hpp), Hugging Face exports and tensor-shard datasets all use it.
//
// Layout: an 8-byte little-endian header length N, N bytes of JSON
//   {"<tensor>": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ..., "__metadata__": {...}}
// padded with spaces to a multiple of 8, then the data section: every tensor's bytes (row-major,
// little-endian), its offsets counted from the start of that section. __metadata__ maps strings to strings.
//
// Files come from other people (a downloaded dataset shard, a checkpoint someone sent): parse_header checks
// everything before anything is read through it, and every error names the tensor and what is wrong.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dedloc/core/bytes.hpp"
#include "dedloc/core/status.hpp"

namespace dedloc::safetensors {

enum class DType { kF64, kF32, kF16, kBF16, kI64, kI32, kI16, kI8, kU8, kBool };

std::string_view dtype_name(DType dtype);            // "F32", as the header spells it
std::optional<DType> parse_dtype(std::string_view name);
std::size_t dtype_size(DType dtype);                 // bytes per element

inline constexpr std::uint64_t kMaxHeaderBytes = 100u << 20;  // the reference implementation's limit

struct TensorInfo {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<std::uint64_t> shape;
  std::uint64_t begin = 0, end = 0;  // byte offsets in the data section

  std::uint64_t elements() const;
  std::uint64_t bytes() const { return end - begin; }
};

struct Header {
  std::vector<TensorInfo> tensors;  // in data order (by begin offset)
  std::map<std::string, std::string> metadata;
  std::uint64_t data_offset = 0;    // where the data section starts in the file: 8 + the header length
  std::uint64_t data_size = 0;      // its length: the file's size minus data_offset

  const TensorInfo* find(std::string_view name) const;
};

// How strict to be about the data section. Files this project writes pack the tensors back to back
// (checkpoints depend on that for their checksum); the format itself allows gaps.
enum class Layout { kPacked, kAnyGaps };

// The header of a file of `file_size` bytes, whose first bytes are `start` (the length prefix and at least
// the whole header; more is fine). kMalformed, naming the problem: a header length beyond the file or
// kMaxHeaderBytes, JSON that is not an object of tensors, an unknown dtype, a shape whose size disagrees
// with the offsets, tensors that overlap or run past the end of the file (or, kPacked, leave gaps).
Result<Header> parse_header(ByteSpan start, std::uint64_t file_size, Layout layout = Layout::kPacked);

// The header length the 8-byte prefix of `start` declares (kMalformed when `start` is shorter than 8).
Result<std::uint64_t> declared_header_length(ByteSpan start);

// One tensor to write: its bytes (dtype_size(dtype) * elements, row-major).
struct TensorBytes {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<std::uint64_t> shape;
  ByteSpan data;
};

// A whole file's contents: tensors packed back to back in the given order. kInvalidArgument for a data
// span that does not match its shape, a repeated or empty name, or the reserved name "__metadata__".
Result<std::string> encode(const std::vector<TensorBytes>& tensors, const std::map<std::string, std::string>& metadata = {});

}  // namespace dedloc::safetensors
