// 2 to 8 averaging peers as separate processes (`dedloc-avg bench` forks them): every peer's result is
// checked against the exact weighted mean inside the tool, which exits 1 on a wrong one.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "support/process.hpp"
#include "support/test_paths.hpp"

using namespace dedloc;
using namespace std::chrono_literals;

TEST_CASE("dedloc-avg bench: 2, 5 and 8 peer processes average exactly, codecs within their bounds", "[proc][avg]") {
  struct Shape {
    int peers;
    std::string size, codec;
    double tolerance;
  };
  for (const Shape& shape : {Shape{2, "3MiB", "none", 1e-6}, Shape{5, "1MiB", "none", 1e-6}, Shape{8, "2MiB", "none", 1e-6},
                             Shape{8, "1MiB", "fp16", 1e-2}, Shape{4, "1MiB", "blockwise8", 5e-2}}) {
    INFO(shape.peers << " peers, " << shape.size << ", codec " << shape.codec);
    auto child = test::ChildProcess::spawn({test::binary_path("tools/dedloc-avg/dedloc-avg"), "bench", "--peers",
                                            std::to_string(shape.peers), "--size", shape.size, "--codec", shape.codec,
                                            "--rounds", "2", "--json"});
    std::optional<std::string> last;
    while (auto line = child.read_line(60s)) last = line;
    REQUIRE(child.wait(10s) == 0);
    REQUIRE(last.has_value());
    auto report = nlohmann::json::parse(*last);
    CHECK(report["ok"] == true);
    CHECK(report["counts"].size() == static_cast<size_t>(shape.peers));
    CHECK(report["max_rel_error"].get<double>() <= shape.tolerance);
  }
}
