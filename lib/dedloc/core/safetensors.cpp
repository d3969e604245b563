#include "dedloc/core/safetensors.hpp"

#include <algorithm>
#include <array>
#include <set>

#include <nlohmann/json.hpp>

namespace dedloc::safetensors {

namespace {

struct DTypeName {
  DType dtype;
  std::string_view name;
  std::size_t size;
};

constexpr std::array<DTypeName, 10> kDTypes = {{{DType::kF64, "F64", 8},
                                                {DType::kF32, "F32", 4},
                                                {DType::kF16, "F16", 2},
                                                {DType::kBF16, "BF16", 2},
                                                {DType::kI64, "I64", 8},
                                                {DType::kI32, "I32", 4},
                                                {DType::kI16, "I16", 2},
                                                {DType::kI8, "I8", 1},
                                                {DType::kU8, "U8", 1},
                                                {DType::kBool, "BOOL", 1}}};

constexpr std::uint64_t kMaxElements = std::uint64_t{1} << 48;  // no real tensor is larger; keeps products exact

const DTypeName& entry(DType dtype) {
  for (const auto& e : kDTypes) {
    if (e.dtype == dtype) return e;
  }
  return kDTypes[1];
}

Status malformed(const std::string& why) { return error(Code::kMalformed, why); }

// One tensor's header entry. find() rather than value(): value() throws when a key holds another type
// ("dtype": [2]), and a file is untrusted input.
Result<TensorInfo> parse_tensor(const std::string& name, const nlohmann::json& info, std::uint64_t data_size) {
  auto bad = [&](const std::string& why) { return malformed("tensor '" + name + "' " + why); };
  if (!info.is_object()) return bad("is not described by an object");
  TensorInfo tensor;
  tensor.name = name;
  auto dtype = info.find("dtype");
  if (dtype == info.end() || !dtype->is_string()) return bad("has no dtype");
  auto parsed = parse_dtype(dtype->get<std::string>());
  if (!parsed) return bad("has the unknown dtype '" + dtype->get<std::string>() + "'");
  tensor.dtype = *parsed;
  auto shape = info.find("shape");
  auto offsets = info.find("data_offsets");
  if (shape == info.end() || !shape->is_array() || offsets == info.end() || !offsets->is_array() || offsets->size() != 2) {
    return bad("lacks a shape or data offsets");
  }
  std::uint64_t elements = 1;
  for (const auto& d : *shape) {
    if (!d.is_number_unsigned()) return bad("has a dimension that is not a non-negative integer");
    tensor.shape.push_back(d.get<std::uint64_t>());
    if (tensor.shape.back() != 0 && elements > kMaxElements / tensor.shape.back()) return bad("is too large");
    elements *= tensor.shape.back();
  }
  if (!(*offsets)[0].is_number_unsigned() || !(*offsets)[1].is_number_unsigned()) return bad("has bad data offsets");
  tensor.begin = (*offsets)[0].get<std::uint64_t>();
  tensor.end = (*offsets)[1].get<std::uint64_t>();
  if (tensor.end < tensor.begin || tensor.end > data_size) return bad("runs past the end of the file (truncated?)");
  if (tensor.end - tensor.begin != elements * dtype_size(tensor.dtype)) {
    return bad("has " + std::to_string(tensor.end - tensor.begin) + " bytes of data, its shape and dtype need " +
               std::to_string(elements * dtype_size(tensor.dtype)));
  }
  return tensor;
}

}  // namespace

std::string_view dtype_name(DType dtype) { return entry(dtype).name; }
std::size_t dtype_size(DType dtype) { return entry(dtype).size; }

std::optional<DType> parse_dtype(std::string_view name) {
  for (const auto& e : kDTypes) {
    if (e.name == name) return e.dtype;
  }
  return std::nullopt;
}

std::uint64_t TensorInfo::elements() const {
  std::uint64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

const TensorInfo* Header::find(std::string_view name) const {
  for (const auto& t : tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

Result<std::uint64_t> declared_header_length(ByteSpan start) {
  if (start.size() < 8) return malformed("shorter than its 8-byte header length");
  std::uint64_t length = 0;
  for (int i = 0; i < 8; ++i) length |= std::uint64_t{start[static_cast<size_t>(i)]} << (8 * i);
  return length;
}

Result<Header> parse_header(ByteSpan start, std::uint64_t file_size, Layout layout) {
  auto length = declared_header_length(start);
  if (!length) return length.status();
  if (file_size < start.size()) return malformed("the file is shorter than what was read of it");
  if (*length > kMaxHeaderBytes || *length > file_size - 8 || *length > start.size() - 8) {
    return malformed("the header length (" + std::to_string(*length) + " bytes) exceeds the file");
  }
  auto text = start.subspan(8, static_cast<size_t>(*length));
  nlohmann::json json = nlohmann::json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (!json.is_object()) return malformed("the header is not a JSON object");

  Header header;
  header.data_offset = 8 + *length;
  header.data_size = file_size - header.data_offset;
  for (const auto& [name, info] : json.items()) {
    if (name == "__metadata__") {
      if (!info.is_object()) return malformed("__metadata__ is not an object");
      for (const auto& [key, value] : info.items()) {
        if (!value.is_string()) return malformed("metadata '" + key + "' is not a string");
        header.metadata[key] = value.get<std::string>();
      }
      continue;
    }
    auto tensor = parse_tensor(name, info, header.data_size);
    if (!tensor) return tensor.status();
    header.tensors.push_back(std::move(*tensor));
  }
  std::sort(header.tensors.begin(), header.tensors.end(),
            [](const TensorInfo& a, const TensorInfo& b) { return a.begin != b.begin ? a.begin < b.begin : a.end < b.end; });
  std::uint64_t expected = 0;
  for (const auto& t : header.tensors) {
    if (t.begin < expected) return malformed("tensor data overlaps at '" + t.name + "'");
    if (layout == Layout::kPacked && t.begin != expected) return malformed("tensor data leaves a hole before '" + t.name + "'");
    expected = t.end;
  }
  if (layout == Layout::kPacked && expected != header.data_size) {
    return malformed("the data section has " + std::to_string(header.data_size) + " bytes, the tensors " + std::to_string(expected));
  }
  return header;
}

Result<std::string> encode(const std::vector<TensorBytes>& tensors, const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  std::set<std::string_view> names;
  std::uint64_t offset = 0;
  for (const auto& t : tensors) {
    if (t.name.empty() || t.name == "__metadata__" || !names.insert(t.name).second) {
      return error(Code::kInvalidArgument, "safetensors: tensor name '" + t.name + "' is empty, reserved or repeated");
    }
    std::uint64_t elements = 1;
    for (auto d : t.shape) elements *= d;
    if (t.data.size() != elements * dtype_size(t.dtype)) {
      return error(Code::kInvalidArgument, "safetensors: tensor '" + t.name + "' has " + std::to_string(t.data.size()) +
                                               " bytes for " + std::to_string(elements) + " elements of " +
                                               std::string(dtype_name(t.dtype)));
    }
    header[t.name] = {{"dtype", dtype_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.data.size()}}};
    offset += t.data.size();
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');

  std::string contents;
  contents.reserve(8 + text.size() + offset);
  const std::uint64_t length = text.size();
  for (int i = 0; i < 8; ++i) contents.push_back(static_cast<char>((length >> (8 * i)) & 0xff));
  contents += text;
  for (const auto& t : tensors) contents.append(reinterpret_cast<const char*>(t.data.data()), t.data.size());
  return contents;
}

}  // namespace dedloc::safetensors
