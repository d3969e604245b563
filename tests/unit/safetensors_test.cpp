// The safetensors reader and writer (core/safetensors.hpp): round trips of every dtype, and the header
// errors a file from elsewhere can carry, each named.
#include <catch2/catch.hpp>

#include <cstring>

#include "dedloc/core/safetensors.hpp"

using namespace dedloc;
using namespace dedloc::safetensors;

namespace {

// A file whose header is `json`, padded, followed by `data_bytes` zero bytes.
std::string file_with_header(const std::string& json, size_t data_bytes) {
  std::string text = json;
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string file;
  for (int i = 0; i < 8; ++i) file.push_back(static_cast<char>((text.size() >> (8 * i)) & 0xff));
  return file + text + std::string(data_bytes, '\0');
}

Result<Header> parse(const std::string& file, Layout layout = Layout::kPacked) {
  return parse_header(as_bytes(file), file.size(), layout);
}

}  // namespace

TEST_CASE("safetensors: what encode writes, parse_header reads back with offsets into the data", "[unit][safetensors]") {
  const std::int64_t longs[] = {1, -2, 3};
  const float floats[] = {0.5f, 1.5f, -2.0f, 4.0f};
  const std::uint8_t flags[] = {1, 0};
  std::vector<TensorBytes> tensors = {
      {"ids", DType::kI64, {3}, ByteSpan(reinterpret_cast<const std::uint8_t*>(longs), sizeof longs)},
      {"weights", DType::kF32, {2, 2}, ByteSpan(reinterpret_cast<const std::uint8_t*>(floats), sizeof floats)},
      {"mask", DType::kBool, {2, 1}, ByteSpan(flags, sizeof flags)},
  };
  auto file = encode(tensors, {{"format", "pt"}});
  REQUIRE(file.is_ok());
  auto header = parse(*file);
  REQUIRE(header.is_ok());
  REQUIRE(header->tensors.size() == 3);
  CHECK(header->metadata == std::map<std::string, std::string>{{"format", "pt"}});
  CHECK(header->data_offset % 8 == 0);
  CHECK(header->data_size == sizeof longs + sizeof floats + sizeof flags);
  const TensorInfo* weights = header->find("weights");
  REQUIRE(weights != nullptr);
  CHECK(weights->dtype == DType::kF32);
  CHECK(weights->shape == std::vector<std::uint64_t>{2, 2});
  CHECK(weights->elements() == 4);
  float back[4];
  std::memcpy(back, file->data() + header->data_offset + weights->begin, sizeof back);
  CHECK(std::memcmp(back, floats, sizeof back) == 0);
  CHECK(header->find("missing") == nullptr);
  for (auto dtype : {DType::kF64, DType::kF32, DType::kF16, DType::kBF16, DType::kI64, DType::kI32, DType::kI16,
                     DType::kI8, DType::kU8, DType::kBool}) {
    CHECK(parse_dtype(dtype_name(dtype)) == dtype);
  }
}

TEST_CASE("safetensors: encode refuses data that does not match its shape, and repeated names", "[unit][safetensors]") {
  const float one = 1;
  ByteSpan four(reinterpret_cast<const std::uint8_t*>(&one), sizeof one);
  CHECK(encode({{"a", DType::kF32, {2}, four}}).status().code() == Code::kInvalidArgument);
  CHECK(encode({{"a", DType::kF32, {1}, four}, {"a", DType::kF32, {1}, four}}).status().code() == Code::kInvalidArgument);
  CHECK(encode({{"__metadata__", DType::kF32, {1}, four}}).status().code() == Code::kInvalidArgument);
}

TEST_CASE("safetensors: a damaged header is refused, naming the tensor and the problem", "[unit][safetensors]") {
  struct Case {
    std::string json;
    size_t data;
    std::string says;
  };
  const Case cases[] = {
      {R"({"a":{"dtype":"F33","shape":[1],"data_offsets":[0,4]}})", 4, "unknown dtype 'F33'"},
      {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", 4, "tensor 'a' has 4 bytes of data, its shape and dtype need 8"},
      {R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 2, "tensor 'a' runs past the end"},
      {R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4, "tensor 'a' has a dimension"},
      {R"({"a":{"dtype":"F32","shape":[1]}})", 4, "tensor 'a' lacks a shape or data offsets"},
      {R"({"a":[1]})", 4, "tensor 'a' is not described by an object"},
      {R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[2,6]}})", 8, "overlaps at 'b'"},
      {R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8, "leaves a hole before 'a'"},
      {R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", 3, "the data section has 3 bytes, the tensors 1"},
      {R"({"__metadata__":{"k":1}})", 0, "metadata 'k' is not a string"},
      {R"([1,2])", 0, "not a JSON object"},
      {R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}})", 4, "too large"},
  };
  for (const auto& c : cases) {
    INFO(c.json);
    auto header = parse(file_with_header(c.json, c.data));
    REQUIRE_FALSE(header.is_ok());
    CHECK(header.status().code() == Code::kMalformed);
    CHECK_THAT(header.status().message(), Catch::Contains(c.says));
  }
  // Gaps are the format's right; only kPacked (this project's own files) refuses them.
  CHECK(parse(file_with_header(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8), Layout::kAnyGaps).is_ok());
  // A length prefix beyond the file, or a file shorter than the prefix.
  std::string huge(16, '\0');
  huge[7] = 1;
  CHECK_THAT(parse(huge).status().message(), Catch::Contains("exceeds the file"));
  CHECK_THAT(parse("abc").status().message(), Catch::Contains("shorter than its 8-byte header length"));
}
