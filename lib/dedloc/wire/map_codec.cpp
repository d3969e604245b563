#include "dedloc/wire/map_codec.hpp"

#include <cmath>
#include <cstring>
#include <limits>

namespace dedloc::wire {

void MapWriter::pack_number(double value) {
  // msgpack-c writes whole doubles as integers, converting with uint64_t(d) once d <= 2^64 (as a double), so
  // d == 2^64 is undefined behaviour there. Values outside the integer range go out as float64 directly.
  if (value >= 0x1p64 || value < -0x1p63) {
    std::uint64_t bits;
    std::memcpy(&bits, &value, sizeof bits);
    char raw[9] = {static_cast<char>(0xcb)};
    for (int i = 0; i < 8; ++i) raw[1 + i] = static_cast<char>(bits >> (56 - 8 * i));
    body_.write(raw, sizeof raw);
    return;
  }
  packer_.pack_double(value);
}

void MapWriter::key(std::string_view k) {
  packer_.pack_str(static_cast<std::uint32_t>(k.size()));
  packer_.pack_str_body(k.data(), static_cast<std::uint32_t>(k.size()));
  ++count_;
}

MapWriter& MapWriter::put(std::string_view k, std::uint64_t value) {
  key(k);
  packer_.pack_uint64(value);
  return *this;
}

MapWriter& MapWriter::put(std::string_view k, std::int64_t value) {
  key(k);
  packer_.pack_int64(value);
  return *this;
}

MapWriter& MapWriter::put(std::string_view k, double value) {
  key(k);
  pack_number(value);
  return *this;
}

MapWriter& MapWriter::put(std::string_view k, bool value) {
  key(k);
  if (value) packer_.pack_true(); else packer_.pack_false();
  return *this;
}

MapWriter& MapWriter::put(std::string_view k, std::string_view value) {
  key(k);
  packer_.pack_str(static_cast<std::uint32_t>(value.size()));
  packer_.pack_str_body(value.data(), static_cast<std::uint32_t>(value.size()));
  return *this;
}

MapWriter& MapWriter::put_binary(std::string_view k, ByteSpan value) {
  key(k);
  packer_.pack_bin(static_cast<std::uint32_t>(value.size()));
  packer_.pack_bin_body(reinterpret_cast<const char*>(value.data()), static_cast<std::uint32_t>(value.size()));
  return *this;
}

MapWriter& MapWriter::put_strings(std::string_view k, const std::vector<std::string>& values) {
  key(k);
  packer_.pack_array(static_cast<std::uint32_t>(values.size()));
  for (const auto& v : values) {
    packer_.pack_str(static_cast<std::uint32_t>(v.size()));
    packer_.pack_str_body(v.data(), static_cast<std::uint32_t>(v.size()));
  }
  return *this;
}

MapWriter& MapWriter::put_doubles(std::string_view k, const std::vector<double>& values) {
  key(k);
  packer_.pack_array(static_cast<std::uint32_t>(values.size()));
  for (double v : values) pack_number(v);
  return *this;
}

MapWriter& MapWriter::put_uints(std::string_view k, const std::vector<std::uint64_t>& values) {
  key(k);
  packer_.pack_array(static_cast<std::uint32_t>(values.size()));
  for (std::uint64_t v : values) packer_.pack_uint64(v);
  return *this;
}

MapWriter& MapWriter::put_binaries(std::string_view k, const std::vector<Bytes>& values) {
  key(k);
  packer_.pack_array(static_cast<std::uint32_t>(values.size()));
  for (const auto& v : values) {
    packer_.pack_bin(static_cast<std::uint32_t>(v.size()));
    packer_.pack_bin_body(reinterpret_cast<const char*>(v.data()), static_cast<std::uint32_t>(v.size()));
  }
  return *this;
}

MapWriter& MapWriter::put_map(std::string_view k, const MapWriter& nested) {
  key(k);
  nested.write_to(body_);
  return *this;
}

MapWriter& MapWriter::put_encoded(std::string_view k, ByteSpan encoded) {
  key(k);
  body_.write(reinterpret_cast<const char*>(encoded.data()), encoded.size());
  return *this;
}

void MapWriter::write_to(msgpack::sbuffer& out) const {
  msgpack::packer<msgpack::sbuffer> header(&out);
  header.pack_map(count_);
  out.write(body_.data(), body_.size());  // the entries, already encoded
}

Bytes MapWriter::to_bytes() const {
  msgpack::sbuffer out;
  write_to(out);
  return Bytes(out.data(), out.data() + out.size());
}

// ---- MapReader ----

Result<MapReader> MapReader::of(const msgpack::object& object, std::string_view what) {
  if (object.type != msgpack::type::MAP) {
    return error(Code::kMalformed, std::string(what) + " is not a msgpack map");
  }
  return MapReader(object, std::string(what));
}

const msgpack::object* MapReader::find(std::string_view key) const {
  const auto& map = object_->via.map;
  for (std::uint32_t i = 0; i < map.size; ++i) {
    const auto& k = map.ptr[i].key;
    if (k.type == msgpack::type::STR && std::string_view(k.via.str.ptr, k.via.str.size) == key) {
      return &map.ptr[i].val;
    }
  }
  return nullptr;
}

void MapReader::fail(std::string_view key, std::string_view problem) {
  if (!status_.is_ok()) return;  // keep the first problem
  status_ = error(Code::kMalformed, "field '" + std::string(key) + "' of " + what_ + " " + std::string(problem));
}

namespace {

// One conversion per field type; false means "wrong type".
bool convert(const msgpack::object& o, std::uint64_t& out) {
  if (o.type != msgpack::type::POSITIVE_INTEGER) return false;
  out = o.via.u64;
  return true;
}

bool convert(const msgpack::object& o, std::int64_t& out) {
  if (o.type == msgpack::type::NEGATIVE_INTEGER) {
    out = o.via.i64;
    return true;
  }
  if (o.type == msgpack::type::POSITIVE_INTEGER && o.via.u64 <= static_cast<std::uint64_t>(INT64_MAX)) {
    out = static_cast<std::int64_t>(o.via.u64);
    return true;
  }
  return false;
}

bool convert(const msgpack::object& o, double& out) {
  switch (o.type) {
    case msgpack::type::FLOAT32:
    case msgpack::type::FLOAT64: out = o.via.f64; return true;
    case msgpack::type::POSITIVE_INTEGER: out = static_cast<double>(o.via.u64); return true;
    case msgpack::type::NEGATIVE_INTEGER: out = static_cast<double>(o.via.i64); return true;
    default: return false;
  }
}

bool convert(const msgpack::object& o, bool& out) {
  if (o.type != msgpack::type::BOOLEAN) return false;
  out = o.via.boolean;
  return true;
}

bool convert(const msgpack::object& o, std::string& out) {
  if (o.type != msgpack::type::STR) return false;
  out.assign(o.via.str.ptr, o.via.str.size);
  return true;
}

bool convert(const msgpack::object& o, Bytes& out) {
  if (o.type != msgpack::type::BIN) return false;
  out.assign(o.via.bin.ptr, o.via.bin.ptr + o.via.bin.size);
  return true;
}

template <class T>
bool convert_array(const msgpack::object& o, std::vector<T>& out) {
  if (o.type != msgpack::type::ARRAY) return false;
  std::vector<T> values(o.via.array.size);
  for (std::uint32_t i = 0; i < o.via.array.size; ++i) {
    if (!convert(o.via.array.ptr[i], values[i])) return false;
  }
  out = std::move(values);
  return true;
}

bool convert(const msgpack::object& o, std::vector<std::string>& out) { return convert_array(o, out); }
bool convert(const msgpack::object& o, std::vector<double>& out) { return convert_array(o, out); }
bool convert(const msgpack::object& o, std::vector<Bytes>& out) { return convert_array(o, out); }
bool convert(const msgpack::object& o, std::vector<std::uint64_t>& out) { return convert_array(o, out); }

template <class T>
constexpr std::string_view type_name() {
  if constexpr (std::is_same_v<T, std::uint64_t>) return "a non-negative integer";
  else if constexpr (std::is_same_v<T, std::int64_t>) return "an integer";
  else if constexpr (std::is_same_v<T, double>) return "a number";
  else if constexpr (std::is_same_v<T, bool>) return "a boolean";
  else if constexpr (std::is_same_v<T, std::string>) return "a string";
  else if constexpr (std::is_same_v<T, Bytes>) return "binary";
  else if constexpr (std::is_same_v<T, std::vector<std::string>>) return "an array of strings";
  else if constexpr (std::is_same_v<T, std::vector<Bytes>>) return "an array of binaries";
  else if constexpr (std::is_same_v<T, std::vector<std::uint64_t>>) return "an array of non-negative integers";
  else return "an array of numbers";
}

}  // namespace

template <class T>
MapReader& MapReader::field(std::string_view key, T& out, bool required) {
  const msgpack::object* value = find(key);
  if (!value) {
    if (required) fail(key, "is missing");
    return *this;
  }
  if (!convert(*value, out)) fail(key, "must be " + std::string(type_name<T>()));
  return *this;
}

template MapReader& MapReader::field(std::string_view, std::uint64_t&, bool);
template MapReader& MapReader::field(std::string_view, std::int64_t&, bool);
template MapReader& MapReader::field(std::string_view, double&, bool);
template MapReader& MapReader::field(std::string_view, bool&, bool);
template MapReader& MapReader::field(std::string_view, std::string&, bool);
template MapReader& MapReader::field(std::string_view, Bytes&, bool);
template MapReader& MapReader::field(std::string_view, std::vector<std::string>&, bool);
template MapReader& MapReader::field(std::string_view, std::vector<double>&, bool);
template MapReader& MapReader::field(std::string_view, std::vector<std::uint64_t>&, bool);
template MapReader& MapReader::field(std::string_view, std::vector<Bytes>&, bool);

Result<MapReader> MapReader::nested(std::string_view key) const {
  static const msgpack::object kEmptyMap = [] {
    msgpack::object o;
    o.type = msgpack::type::MAP;
    o.via.map.size = 0;
    o.via.map.ptr = nullptr;
    return o;
  }();
  const msgpack::object* value = find(key);
  if (!value) return MapReader(kEmptyMap, what_ + "." + std::string(key));
  return of(*value, what_ + "." + std::string(key));
}

}  // namespace dedloc::wire
