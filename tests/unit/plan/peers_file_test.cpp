#include <fstream>

#include <catch2/catch.hpp>

#include "dedloc/plan/collaboration_plan.hpp"
#include "dedloc/plan/peers_file.hpp"
#include "dedloc/plan/report.hpp"
#include "support/test_paths.hpp"

using namespace dedloc::plan;

namespace {

dedloc::Result<Collaboration> load_text(const std::string& text) {
  auto reader = dedloc::ConfigReader::from_string(text, "peers.yaml");
  if (!reader) return reader.status();
  Collaboration c;
  DEDLOC_RETURN_IF_ERROR(read_collaboration(*reader, c));
  DEDLOC_RETURN_IF_ERROR(reader->finish());
  return c;
}

}  // namespace

TEST_CASE("a peers file expands counts and parses units", "[plan][file]") {
  auto c = load_text(R"(
batch: 2048
params: 18M
codec: uint8
peers:
  - {name: gpu, count: 3, compute: 100, bandwidth: 100Mbit}
  - {name: home, compute: 20, download: 1Gbit, upload: 10Mbit, client_mode: true}
limits:
  - {from: gpu-1, to: home, rate: 5Mbit}
)");
  REQUIRE(c);
  CHECK(c->batch == 2048);
  CHECK(c->params == 18e6);
  CHECK(c->codec == dedloc::Codec::kUniform8Bit);
  REQUIRE(c->peers.size() == 4);
  CHECK(c->peers[0].name == "gpu-1");
  CHECK(c->peers[2].name == "gpu-3");
  CHECK(c->peers[2].upload == 12.5e6);
  CHECK(c->peers[3].client_mode);
  CHECK(c->peers[3].download == 125e6);
  CHECK(c->peers[3].upload == 1.25e6);
  REQUIRE(c->limits.size() == 1);
  CHECK(c->limits[0].rate == 625e3);
}

TEST_CASE("peers file errors name the key and the file", "[plan][file]") {
  auto typo = load_text("params: 18M\npeers:\n  - {name: a, compute: 1, bandwidth: 1Gbit, donwload: 1Gbit}\n");
  REQUIRE_FALSE(typo);
  CHECK_THAT(typo.status().message(), Catch::Contains("peers.yaml") && Catch::Contains("donwload"));

  auto negative = load_text("params: 18M\npeers:\n  - {name: a, compute: 1, bandwidth: -100Mbit}\n");
  REQUIRE_FALSE(negative);
  CHECK_THAT(negative.status().message(), Catch::Contains("peers[0]") && Catch::Contains("bandwidth"));

  auto missing = load_text("params: 18M\npeers:\n  - {name: a, compute: 1}\n");
  REQUIRE_FALSE(missing);
  CHECK_THAT(missing.status().message(), Catch::Contains("'a'") && Catch::Contains("bandwidth"));

  auto top = load_text("parms: 18M\npeers:\n  - {name: a, compute: 1, bandwidth: 1Gbit}\n");
  REQUIRE_FALSE(top);
  CHECK_THAT(top.status().message(), Catch::Contains("parms"));
}

TEST_CASE("every shipped peers file plans, and its table names every peer", "[plan][file]") {
  for (const char* name : {"equal-peers.yaml", "one-strong-server.yaml", "gpu-plus-cpu.yaml", "slow-link-gpu.yaml",
                           "client-mode.yaml", "swav-8-fast-16-slow.yaml", "albert-16-mixed.yaml",
                           "albert-volunteers.yaml", "pairwise-limits.yaml"}) {
    INFO(name);
    auto c = load_peers_file(dedloc::test::source_path(std::string("configs/peers/") + name));
    REQUIRE(c);
    auto plan = plan_collaboration(*c);
    REQUIRE(plan);
    auto table = format_plan_table(*plan);
    for (const auto& peer : c->peers) CHECK_THAT(table, Catch::Contains(peer.name));
    CHECK_THAT(table, Catch::Contains("butterfly all-reduce") && Catch::Contains("parameter server"));
    auto json = plan_to_json(*plan);
    CHECK(json["peers"].size() == c->peers.size());
    CHECK(json["strategies"].size() == 5);
    CHECK(json["prediction"]["steps_per_second"].get<double>() > 0);
  }
}
