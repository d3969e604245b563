// Msgpack maps with named, pinned keys: the only way dedloc encodes message fields.
//
// Keys are string literals written at each field's encode and decode site, so renaming a C++ member never
// changes the wire. MapWriter counts its own entries (no hand-counted map sizes). MapReader skips keys it
// does not know (forward compatibility), checks every type, and reports the first problem as a Status
// naming the message and the field. Nothing here asserts on input.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <msgpack.hpp>

#include "dedloc/core/bytes.hpp"
#include "dedloc/core/status.hpp"

namespace dedloc::wire {

class MapWriter {
 public:
  MapWriter() : packer_(&body_) {}
  MapWriter(const MapWriter&) = delete;
  MapWriter& operator=(const MapWriter&) = delete;

  MapWriter& put(std::string_view key, std::uint64_t value);
  MapWriter& put(std::string_view key, std::int64_t value);
  MapWriter& put(std::string_view key, double value);
  MapWriter& put(std::string_view key, bool value);
  MapWriter& put(std::string_view key, std::string_view value);
  MapWriter& put(std::string_view key, const char* value) { return put(key, std::string_view(value)); }
  MapWriter& put_binary(std::string_view key, ByteSpan value);
  MapWriter& put_strings(std::string_view key, const std::vector<std::string>& values);
  MapWriter& put_doubles(std::string_view key, const std::vector<double>& values);
  MapWriter& put_binaries(std::string_view key, const std::vector<Bytes>& values);
  MapWriter& put_uints(std::string_view key, const std::vector<std::uint64_t>& values);
  MapWriter& put_map(std::string_view key, const MapWriter& nested);
  // A value that is already msgpack-encoded (e.g. a message body map); appended as it is.
  MapWriter& put_encoded(std::string_view key, ByteSpan encoded);

  size_t size() const { return count_; }
  // Appends the map (header with the counted size, then the entries) to `out`.
  void write_to(msgpack::sbuffer& out) const;
  Bytes to_bytes() const;

 private:
  void key(std::string_view k);
  void pack_number(double value);
  msgpack::sbuffer body_;
  msgpack::packer<msgpack::sbuffer> packer_;
  std::uint32_t count_ = 0;
};

class MapReader {
 public:
  // `what` names the map in errors ("Pong", "header"). The object must outlive the reader.
  static Result<MapReader> of(const msgpack::object& object, std::string_view what);

  // Required fields: a missing key or a wrong type is recorded as the reader's error.
  MapReader& get(std::string_view key, std::uint64_t& out) { return field(key, out, true); }
  MapReader& get(std::string_view key, std::int64_t& out) { return field(key, out, true); }
  MapReader& get(std::string_view key, double& out) { return field(key, out, true); }
  MapReader& get(std::string_view key, bool& out) { return field(key, out, true); }
  MapReader& get(std::string_view key, std::string& out) { return field(key, out, true); }
  MapReader& get(std::string_view key, Bytes& out) { return field(key, out, true); }
  MapReader& get(std::string_view key, std::vector<std::string>& out) { return field(key, out, true); }
  MapReader& get(std::string_view key, std::vector<double>& out) { return field(key, out, true); }
  MapReader& get(std::string_view key, std::vector<Bytes>& out) { return field(key, out, true); }
  MapReader& get(std::string_view key, std::vector<std::uint64_t>& out) { return field(key, out, true); }
  // Optional fields: a missing key leaves `out` as it is; a present key of the wrong type is an error.
  template <class T>
  MapReader& get_optional(std::string_view key, T& out) { return field(key, out, false); }

  // A nested map; a missing key gives an empty map.
  Result<MapReader> nested(std::string_view key) const;
  const msgpack::object* find(std::string_view key) const;

  Status status() const { return status_; }

 private:
  MapReader(const msgpack::object& object, std::string what) : object_(&object), what_(std::move(what)) {}
  template <class T>
  MapReader& field(std::string_view key, T& out, bool required);
  void fail(std::string_view key, std::string_view problem);

  const msgpack::object* object_;
  std::string what_;
  Status status_;
};

}  // namespace dedloc::wire
