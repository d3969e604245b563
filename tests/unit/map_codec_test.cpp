#include <catch2/catch.hpp>

#include <limits>

#include "dedloc/wire/map_codec.hpp"

using namespace dedloc;
using namespace dedloc::wire;

namespace {

msgpack::object_handle parse(const Bytes& bytes) {
  return msgpack::unpack(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

}  // namespace

TEST_CASE("MapWriter counts its own entries and MapReader reads them back by key", "[unit][wire]") {
  MapWriter inner;
  inner.put("x", std::uint64_t{1});
  MapWriter w;
  w.put("u", std::uint64_t{1} << 40)
      .put("i", std::int64_t{-5})
      .put("d", 0.25)
      .put("b", true)
      .put("s", "hello")
      .put_binary("bin", as_bytes("\x01\x02"))
      .put_strings("ss", {"a", "b"})
      .put_doubles("dd", {1.5, -2})
      .put_map("m", inner);
  CHECK(w.size() == 9);
  Bytes bytes = w.to_bytes();
  auto handle = parse(bytes);
  auto r = MapReader::of(handle.get(), "Test");
  REQUIRE(r.is_ok());
  std::uint64_t u = 0;
  std::int64_t i = 0;
  double d = 0;
  bool b = false;
  std::string s;
  Bytes bin;
  std::vector<std::string> ss;
  std::vector<double> dd;
  r->get("u", u).get("i", i).get("d", d).get("b", b).get("s", s).get("bin", bin).get("ss", ss).get("dd", dd);
  REQUIRE(r->status().is_ok());
  CHECK(u == std::uint64_t{1} << 40);
  CHECK(i == -5);
  CHECK(d == 0.25);
  CHECK(b);
  CHECK(s == "hello");
  CHECK(bin == Bytes{1, 2});
  CHECK(ss == std::vector<std::string>{"a", "b"});
  CHECK(dd == std::vector<double>{1.5, -2});
  auto m = r->nested("m");
  REQUIRE(m.is_ok());
  std::uint64_t x = 0;
  CHECK(m->get("x", x).status().is_ok());
  CHECK(x == 1);
}

TEST_CASE("MapReader names the message and field of a missing or mistyped value", "[unit][wire]") {
  MapWriter w;
  w.put("count", "seven").put("future_field", 1.0);
  Bytes bytes = w.to_bytes();
  auto handle = parse(bytes);
  auto r = MapReader::of(handle.get(), "Progress");
  REQUIRE(r.is_ok());
  std::uint64_t count = 0;
  r->get("count", count);
  CHECK(r->status().message() == "field 'count' of Progress must be a non-negative integer");

  auto r2 = MapReader::of(handle.get(), "Progress");
  std::string name;
  r2->get("name", name);
  CHECK(r2->status().message() == "field 'name' of Progress is missing");

  // Unknown keys are skipped; optional keys may be absent.
  auto r3 = MapReader::of(handle.get(), "Progress");
  std::string count_text;
  double absent = 3;
  r3->get("count", count_text).get_optional("absent", absent);
  CHECK(r3->status().is_ok());
  CHECK(absent == 3);
}

TEST_CASE("Signed integers reject values that do not fit", "[unit][wire]") {
  MapWriter w;
  w.put("big", std::uint64_t{1} << 63);
  Bytes bytes = w.to_bytes();
  auto handle = parse(bytes);
  auto r = MapReader::of(handle.get(), "T");
  std::int64_t v = 0;
  r->get("big", v);
  CHECK(r->status().code() == Code::kMalformed);
}

TEST_CASE("Doubles beyond the integer range round-trip as float64", "[unit][wire]") {
  // msgpack-c converts whole doubles to integers; 2^64 itself would overflow that conversion.
  for (double value : {0x1p64, 0x1p70, -0x1p63 * 2, std::numeric_limits<double>::infinity(), 1700000000.0, 0.5}) {
    MapWriter writer;
    writer.put("d", value).put_doubles("ds", {value, value});
    auto handle = parse(writer.to_bytes());
    auto reader = MapReader::of(handle.get(), "Test");
    REQUIRE(reader.is_ok());
    double read = 0;
    std::vector<double> reads;
    reader->get("d", read).get("ds", reads);
    REQUIRE(reader->status().is_ok());
    CHECK(read == value);
    CHECK(reads == std::vector<double>{value, value});
  }
}
