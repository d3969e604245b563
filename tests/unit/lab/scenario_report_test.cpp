// The lab's report (lib/dedloc/lab/scenario_report.hpp) on a hand-made run record: what it counts from the
// peers' JSON lines.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "dedloc/crypto/identity.hpp"
#include "dedloc/lab/scenario.hpp"
#include "dedloc/lab/scenario_report.hpp"

using namespace dedloc;
using namespace dedloc::lab;

TEST_CASE("Lab report: a wave's joins are counted apart from the downloads its joiners make later", "[unit][lab]") {
  const auto path = std::filesystem::temp_directory_path() / "dedloc-report-wave.yaml";
  std::ofstream(path) << R"(duration: 60s
warmup: 10s
recipe: some-recipe.yaml
infrastructure: {rtt: 20ms, rate: 1Gbit, relays: 1}
groups:
  - {name: node, count: 2, compute: 50, rate: 100Mbit}
  - {name: wave, count: 3, role: client, nat: true, rate: 50Mbit, join_at: 20s}
)";
  auto scenario = load_scenario(path.string());
  INFO(scenario.status().to_string());
  REQUIRE(scenario.is_ok());

  RunRecord run;
  run.scenario = &*scenario;
  const TimePoint start = std::chrono::steady_clock::now();
  run.start = start;
  run.warm = start + std::chrono::seconds(10);
  run.end = start + std::chrono::seconds(60);
  const std::vector<std::pair<std::string, int>> hosts{{"node-0", 0}, {"node-1", 0}, {"wave-0", 1}, {"wave-1", 1}, {"wave-2", 1}};
  std::vector<std::string> ids;
  for (size_t h = 0; h < hosts.size(); ++h) {
    run.hosts.push_back(HostRecord{.name = hosts[h].first, .group = hosts[h].second, .process = h});
    run.starts.push_back({start + std::chrono::seconds(hosts[h].second == 1 ? 20 : 0)});
    ids.push_back(crypto::Identity::generate().peer_id().to_string());
  }
  run.at_warmup.hosts.resize(hosts.size());
  run.at_end.hosts.resize(hosts.size());
  auto line = [&](int second, size_t process, const std::string& text) {
    run.lines.push_back(OutputLine{start + std::chrono::seconds(second), process, text});
  };
  for (size_t h = 0; h < hosts.size(); ++h) line(1, h, R"({"ready":true,"peer_id":")" + ids[h] + R"("})");
  auto loaded = [&](int second, size_t process, size_t donor, bool missed_round) {
    line(second, process, R"({"event":"loaded_state","epoch":3,"download_seconds":1.5,"missed_round":)" +
                              std::string(missed_round ? "true" : "false") + R"(,"donor":"tcp://10.0.0.1:1/p/)" +
                              ids[donor] + R"("})");
  };
  // The three joins: two from node-0, one from node-1; then wave-0 sits three rounds out, each time
  // loading node-0's state.
  loaded(21, 2, 0, false);
  loaded(21, 3, 0, false);
  loaded(22, 4, 1, false);
  for (int round = 0; round < 3; ++round) loaded(30 + 5 * round, 2, 0, true);

  const auto report = build_report(run);
  const auto& wave = report["waves"]["wave"];
  CHECK(wave["downloads"] == 6);
  CHECK(wave["donors"] == 2);
  CHECK(wave["max_per_donor"] == 5);
  CHECK(wave["busiest_donor"] == "node-0");
  const auto& join = wave["join"];
  CHECK(join["downloads"] == 3);
  CHECK(join["donors"] == 2);
  CHECK(join["max_per_donor"] == 2);
  CHECK(report["missed_rounds"] == 3);
  CHECK(describe_report(report).find("their joins from 2 donors (at most 2 from one)") != std::string::npos);
}
