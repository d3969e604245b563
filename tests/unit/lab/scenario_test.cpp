// Lab scenarios: the shipped ones load, and mistakes are named with their key and file.
#include <catch2/catch.hpp>

#include <cmath>

#include <filesystem>
#include <fstream>

#include "dedloc/lab/scenario.hpp"
#include "support/test_paths.hpp"

using namespace dedloc;
using namespace dedloc::lab;

namespace {

std::string write_scenario(const std::string& name, const std::string& text) {
  const auto path = std::filesystem::temp_directory_path() / ("dedloc-scenario-" + name + ".yaml");
  std::ofstream(path) << text;
  return path.string();
}

const std::string kValid = R"(duration: 60s
warmup: 20s
mtu: 9000
congestion_control: reno
recipe: some-recipe.yaml
infrastructure: {rtt: 20ms, rate: 1Gbit, relays: 1}
groups:
  - {name: node, count: 2, compute: 50, rate: 100Mbit, rtt: 100ms}
  - {name: home, count: 3, role: client, nat: true, upload: 20Mbit, download: 100Mbit, loss: 0.5%}
  - {name: wave, count: 4, role: client, nat: true, rate: 50Mbit, join_at: 25s}
faults:
  - {at: 30s, kill: home-1}
  - {at: 40s, link_down: node-0, for: 5s}
  - {mtbf: 60s, group: home, downtime: 10s}
)";

}  // namespace

TEST_CASE("Lab scenarios: the shipped scenarios load", "[lab]") {
  for (const char* name : {"home-volunteers", "four-peers", "volunteers-churn", "volunteers-steady", "volunteers-16",
                           "paper-albert-fast", "paper-albert-naive", "paper-albert-balanced", "paper-albert-aux",
                           "paper-albert-parttime", "paper-albert-delayed", "paper-albert-parttime-adaptive"}) {
    auto s = load_scenario(test::source_path(std::string("bench/lab/scenarios/") + name + ".yaml"));
    INFO(name << ": " << s.status().to_string());
    REQUIRE(s.is_ok());
    CHECK(std::filesystem::exists(s->recipe));
  }
  auto big = load_scenario(test::source_path("bench/lab/scenarios/home-volunteers.yaml"));
  CHECK(big->peer_count() == 64);
  CHECK(big->relays == 2);
  CHECK(big->mtu == 65000);  // the default
  CHECK(big->congestion_control == "cubic");  // the default, whatever the machine's
  CHECK(load_scenario(test::source_path("bench/lab/scenarios/paper-albert-naive.yaml"))->mtu == 9000);
}

TEST_CASE("Lab scenarios: every field as written", "[lab]") {
  const std::string path = write_scenario("valid", kValid);
  auto s = load_scenario(path);
  INFO(s.status().to_string());
  REQUIRE(s.is_ok());
  CHECK(s->duration == std::chrono::seconds(60));
  CHECK(s->mtu == 9000);
  CHECK(s->congestion_control == "reno");
  CHECK(s->recipe == (std::filesystem::path(path).parent_path() / "some-recipe.yaml").string());
  CHECK(s->relays == 1);
  REQUIRE(s->groups.size() == 3);
  CHECK(s->groups[0].join_at == Duration::zero());
  CHECK(s->groups[2].join_at == std::chrono::seconds(25));
  CHECK(s->groups[0].link.upload == Approx(12.5e6));
  CHECK(s->groups[0].link.rtt == std::chrono::milliseconds(100));
  CHECK(s->groups[1].role == PeerRole::kClient);
  CHECK(s->groups[1].nat);
  CHECK(s->groups[1].link.upload == Approx(2.5e6));
  CHECK(s->groups[1].link.loss == Approx(0.005));
  REQUIRE(s->faults.size() == 3);
  CHECK(s->faults[1].kind == Fault::Kind::kLinkDown);
  CHECK(s->faults[1].length == std::chrono::seconds(5));
  CHECK(s->faults[2].kind == Fault::Kind::kRandomKills);
  CHECK(s->faults[2].mean_time == std::chrono::seconds(60));
}

TEST_CASE("Lab scenarios: mistakes name their key and file", "[lab]") {
  struct Bad {
    std::string find, replace, expect;
  };
  for (const Bad& bad : std::vector<Bad>{
           {"rtt: 100ms}", "rtt: 100}", "rtt"},
           {"compute: 50,", "compute: 50, colour: red,", "colour"},
           {"role: client, nat: true", "role: node, nat: true", "cannot be a node"},
           {"role: client,", "role: boss,", "'boss'"},
           {"relays: 1", "relays: 0", "relay"},
           {"warmup: 20s", "warmup: 90s", "warmup"},
           {"{at: 30s, kill: home-1}", "{at: 30s}", "kill, start, link_down, mtbf, set_link or alternate"},
           {"{at: 30s, kill: home-1}", "{alternate: home, on: 20s}", "off"},
           {"{at: 30s, kill: home-1}", "{alternate: home, on: 0s, off: 10s}", "on: how long"},
           {"{at: 30s, kill: home-1}", "{alternate: home, on: 10s, off: 10s, stager: 5s}", "stager"},
           {"name: home,", "name: node,", "used twice"},
           {"join_at: 25s", "join_at: 60s", "join_at"},
           {"join_at: 25s", "join_at: soon", "join_at"},
           {"mtu: 9000", "mtu: 100", "mtu: 100 bytes"},
           {"mtu: 9000", "mtu: 70000", "mtu"},
           {"congestion_control: reno", "congestion_control: \"\"", "congestion_control"},
           {"congestion_control: reno", "congestion_control: b b r", "congestion_control"},
       }) {
    std::string text = kValid;
    REQUIRE(text.find(bad.find) != std::string::npos);
    text.replace(text.find(bad.find), bad.find.size(), bad.replace);
    const std::string path = write_scenario("bad", text);
    auto s = load_scenario(path);
    INFO(bad.replace);
    REQUIRE_FALSE(s.is_ok());
    CHECK_THAT(s.status().message(), Catch::Contains(bad.expect));
    CHECK_THAT(s.status().message(), Catch::Contains(path));
  }
}

TEST_CASE("Lab scenarios: a link that changes mid-run, for a group or one peer", "[lab]") {
  std::string text = kValid + "  - {at: 50s, set_link: node, rtt: 300ms}\n  - {at: 55s, set_link: home-2, upload: 1Mbit}\n";
  auto s = load_scenario(write_scenario("set-link", text));
  INFO(s.status().to_string());
  REQUIRE(s.is_ok());
  REQUIRE(s->faults.size() == 5);
  const Fault& group = s->faults[3];
  CHECK(group.kind == Fault::Kind::kSetLink);
  CHECK(group.target == "node");
  CHECK(group.at == std::chrono::seconds(50));
  CHECK(group.link.rtt == std::chrono::milliseconds(300));
  CHECK(group.link.upload == Approx(12.5e6));  // what the group had: only the keys given change
  const Fault& peer = s->faults[4];
  CHECK(peer.target == "home-2");
  CHECK(peer.link.upload == Approx(125e3));
  CHECK(peer.link.download == Approx(12.5e6));
  CHECK(peer.link.loss == Approx(0.005));

  struct Bad {
    std::string fault, expect;
  };
  for (const Bad& bad : std::vector<Bad>{
           {"{at: 50s, set_link: node, rtt: fast}", "rtt"},
           {"{at: 50s, set_link: node, colour: red}", "colour"},
           {"{at: 50s, set_link: nobody, rtt: 300ms}", "'nobody'"},
       }) {
    const std::string path = write_scenario("bad-set-link", kValid + "  - " + bad.fault + "\n");
    auto loaded = load_scenario(path);
    INFO(bad.fault);
    REQUIRE_FALSE(loaded.is_ok());
    CHECK_THAT(loaded.status().message(), Catch::Contains(bad.expect));
    CHECK_THAT(loaded.status().message(), Catch::Contains(path));
  }
}

TEST_CASE("Lab scenarios: part-time peers alternate on and off, each a stagger further along its cycle", "[lab]") {
  std::string text = kValid;
  text += "  - {alternate: home, at: 10s, on: 60s, off: 40s, stagger: 30s}\n";
  auto s = load_scenario(write_scenario("alternate", text));
  INFO(s.status().to_string());
  REQUIRE(s.is_ok());
  REQUIRE(s->faults.size() == 4);
  const Fault& f = s->faults[3];
  CHECK(f.kind == Fault::Kind::kAlternate);
  CHECK(f.target == "home");
  CHECK(f.at == std::chrono::seconds(10));
  CHECK(f.on == std::chrono::seconds(60));
  CHECK(f.off == std::chrono::seconds(40));
  CHECK(f.stagger == std::chrono::seconds(30));

  using std::chrono::seconds;
  using Changes = std::vector<std::pair<Duration, bool>>;
  // Peer 0 starts its cycle at 10 s: off at 70, on at 110, off at 170, on at 210, off at 270 (< 300).
  CHECK(alternation(f, 0, seconds(300)) ==
        Changes{{seconds(70), false}, {seconds(110), true}, {seconds(170), false}, {seconds(210), true}, {seconds(270), false}});
  // Peer 1 is 30 s along: off at 40 (after the 30 s left of its on part), on at 80.
  CHECK(alternation(f, 1, seconds(100)) == Changes{{seconds(40), false}, {seconds(80), true}});
  // Peer 2 is 60 s along, at the start of its off part: it leaves at `at` and is back 40 s later.
  CHECK(alternation(f, 2, seconds(120)) == Changes{{seconds(10), false}, {seconds(50), true}, {seconds(110), false}});
  // Peer 4 is 120 s along: 20 s into the next cycle (the stagger wraps around on + off).
  CHECK(alternation(f, 4, seconds(60)) == Changes{{seconds(50), false}});
  CHECK(alternation(f, 0, seconds(10)).empty());

  // The planner's prediction counts a part-time group by the peers in on average: 60 of every 100 s.
  for (const auto& g : s->groups) {
    if (g.name == "home") CHECK(mean_peers_in(*s, g) == static_cast<size_t>(std::lround(0.6 * static_cast<double>(g.count))));
    else CHECK(mean_peers_in(*s, g) == g.count);
  }
}
