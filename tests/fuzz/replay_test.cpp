// Replays each fuzz target's corpus (tests/fuzz/corpus/<target>/) through the target as an ordinary test:
// every input the fuzzer ever found interesting (and every crash it found, once fixed) stays covered in the
// normal suite, and under ASan+UBSan in a sanitizer build. A target's checks abort on failure, which fails
// the test.
#include <catch2/catch.hpp>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

#include "dedloc/core/files.hpp"
#include "support/test_paths.hpp"

extern "C" int dedloc_fuzz_envelope(const std::uint8_t* data, std::size_t size);
extern "C" int dedloc_fuzz_relay_frames(const std::uint8_t* data, std::size_t size);
extern "C" int dedloc_fuzz_codec(const std::uint8_t* data, std::size_t size);
extern "C" int dedloc_fuzz_avg_state(const std::uint8_t* data, std::size_t size);
extern "C" int dedloc_fuzz_config(const std::uint8_t* data, std::size_t size);
extern "C" int dedloc_fuzz_checkpoint(const std::uint8_t* data, std::size_t size);
extern "C" int dedloc_fuzz_records(const std::uint8_t* data, std::size_t size);
extern "C" int dedloc_fuzz_access(const std::uint8_t* data, std::size_t size);
extern "C" int dedloc_fuzz_address(const std::uint8_t* data, std::size_t size);
extern "C" int dedloc_fuzz_datagram(const std::uint8_t* data, std::size_t size);

namespace {

using Target = int (*)(const std::uint8_t*, std::size_t);

// Runs every file of the target's corpus through it; `at_least`: the seeds alone are that many, the fuzzer
// adds more (an emptied or misplaced corpus fails here rather than passing vacuously).
void replay(const std::string& target, Target run, size_t at_least) {
  namespace fs = std::filesystem;
  fs::path corpus = dedloc::test::source_path("tests/fuzz/corpus/" + target);
  REQUIRE(fs::is_directory(corpus));
  size_t inputs = 0;
  for (const auto& entry : fs::directory_iterator(corpus)) {
    if (!entry.is_regular_file()) continue;
    auto bytes = dedloc::read_file(entry.path().string());
    REQUIRE(bytes.is_ok());
    INFO("input " << entry.path().filename().string());
    CHECK(run(reinterpret_cast<const std::uint8_t*>(bytes->data()), bytes->size()) == 0);
    ++inputs;
  }
  INFO("corpus inputs: " << inputs);
  CHECK(inputs >= at_least);
}

}  // namespace

TEST_CASE("The envelope fuzz corpus replays without a crash", "[unit][fuzz]") {
  replay("envelope", dedloc_fuzz_envelope, 20);
}

TEST_CASE("The relay frames fuzz corpus replays without a crash", "[unit][fuzz]") {
  replay("relay_frames", dedloc_fuzz_relay_frames, 20);
}

TEST_CASE("The codec fuzz corpus replays without a crash", "[unit][fuzz]") {
  replay("codec", dedloc_fuzz_codec, 20);
}

TEST_CASE("The averaging state fuzz corpus replays without a crash", "[unit][fuzz]") {
  replay("avg_state", dedloc_fuzz_avg_state, 20);
}

TEST_CASE("The YAML config fuzz corpus replays without a crash", "[unit][fuzz]") {
  replay("config", dedloc_fuzz_config, 20);
}

TEST_CASE("The checkpoint fuzz corpus replays without a crash", "[unit][fuzz]") {
  replay("checkpoint", dedloc_fuzz_checkpoint, 20);
}

TEST_CASE("The DHT records fuzz corpus replays without a crash", "[unit][fuzz]") {
  replay("records", dedloc_fuzz_records, 20);
}

TEST_CASE("The private-run fuzz corpus replays without a crash", "[unit][fuzz]") {
  replay("access", dedloc_fuzz_access, 20);
}

TEST_CASE("The peer address fuzz corpus replays without a crash", "[unit][fuzz]") {
  replay("address", dedloc_fuzz_address, 20);
}

TEST_CASE("The datagram fuzz corpus replays without a crash", "[unit][fuzz]") {
  replay("datagram", dedloc_fuzz_datagram, 8);
}
