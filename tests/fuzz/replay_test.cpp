// Replays the fuzz corpus through the fuzz target as an ordinary test: every input the fuzzer ever found
// interesting (and every crash it found, once fixed) stays covered in the normal suite.
#include <catch2/catch.hpp>

#include <filesystem>

#include "dedloc/core/files.hpp"
#include "support/test_paths.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

TEST_CASE("The envelope fuzz corpus replays without a crash", "[unit][fuzz]") {
  namespace fs = std::filesystem;
  fs::path corpus = dedloc::test::source_path("tests/fuzz/corpus/envelope");
  REQUIRE(fs::is_directory(corpus));
  size_t inputs = 0;
  for (const auto& entry : fs::directory_iterator(corpus)) {
    if (!entry.is_regular_file()) continue;
    auto bytes = dedloc::read_file(entry.path().string());
    REQUIRE(bytes.is_ok());
    CHECK(LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes->data()), bytes->size()) == 0);
    ++inputs;
  }
  INFO("corpus inputs: " << inputs);
  CHECK(inputs >= 20);  // the seed corpus alone has that many; the fuzzer adds more
}
