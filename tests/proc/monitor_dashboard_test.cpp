// The monitor's dashboard, with real processes: a local collaboration (a DHT bootstrap node, two
// dedloc-train peers, a dedloc-avg aux peer) and `dedloc-avg monitor`; Debian's Chromium loads the
// dashboard headless, the test checks the page it rendered lists the live peers and shows a loss, and saves
// a screenshot. /metrics is read by the strict parser here and by Prometheus' own Python parser; the history
// the monitor kept is charted by scripts/plot-history. Then `dedloc-avg monitor --json` follows a synchronous
// and a DiLoCo run of the same recipe: each peer's mode, inner steps and bytes per sample, and DiLoCo's outer
// batch of eight global batches sending about an eighth of the bytes per sample.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <regex>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "dedloc/core/files.hpp"
#include "support/process.hpp"
#include "support/prometheus_format.hpp"
#include "support/test_paths.hpp"
#include "support/trainer_process.hpp"

using namespace std::chrono_literals;
using dedloc::test::TrainerArgs;
using dedloc::test::TrainerProcess;

namespace {


// Two dedloc-train peers on `recipe` and `dedloc-avg monitor --json`: the first /api/state document the monitor
// prints, once the run is at `epochs` or later, in which both trainers report bytes per sample.
nlohmann::json watch_with_monitor(const std::string& recipe, const std::string& run_id, std::uint64_t epochs) {
  auto [bootstrap, ready] = dedloc::test::start_ready({dedloc::test::binary_path("tools/dedloc-dht/dedloc-dht"),
                                                       "--log-level", "warning", "serve", "--listen", "tcp://127.0.0.1:0"});
  const auto address = ready["endpoints"][0].get<std::string>();
  TrainerArgs args{.recipe = recipe, .initial_peer = address, .run_id = run_id, .max_time = 120, .min_peers = 2};
  auto a = TrainerProcess::start("a", args);
  args.data_seed = 2;
  auto b = TrainerProcess::start("b", args);
  REQUIRE((a && b));
  auto [monitor, monitor_ready] = dedloc::test::start_ready(
      {dedloc::test::binary_path("tools/dedloc-avg/dedloc-avg"), "--log-level", "warning", "--json", "monitor", "--run",
       run_id, "--initial-peers", address, "--http", "off", "--interval", "0.3"});
  nlohmann::json state;
  const bool seen = dedloc::test::pump_until({&*a, &*b}, 90s, [&] {
    auto line = monitor.read_line(10ms);
    if (!line) return false;
    state = nlohmann::json::parse(*line);  // --json prints nothing else on stdout
    if (state["epoch"].get<std::uint64_t>() < epochs || state["trainers"] != 2) return false;
    for (const auto& peer : state["peers"]) {
      if (!peer["bytes_per_sample"].is_number()) return false;
    }
    return true;
  });
  INFO(state.dump());
  REQUIRE(seen);
  return state;
}

std::string chromium(const std::string& flags, const std::string& url) {
  // --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start.
  auto run = dedloc::test::run_command("timeout 90 chromium --headless --no-sandbox --disable-gpu "
                                       "--disable-dev-shm-usage --hide-scrollbars --window-size=1280,1000 "
                                       "--virtual-time-budget=6000 " + flags + " '" + url + "' 2>/dev/null");
  INFO(run.output.substr(0, 2000));
  REQUIRE(run.exit_code == 0);
  return run.output;
}

}  // namespace

TEST_CASE("The dashboard shows a live collaboration's peers and loss in headless Chromium", "[proc][monitor]") {
  REQUIRE(dedloc::test::run_command("command -v chromium").exit_code == 0);  // scripts/setup-deps installs it

  auto [bootstrap, ready] = dedloc::test::start_ready({dedloc::test::binary_path("tools/dedloc-dht/dedloc-dht"),
                                                       "--log-level", "warning", "serve", "--listen", "tcp://127.0.0.1:0"});
  const auto address = ready["endpoints"][0].get<std::string>();
  TrainerArgs args{.recipe = "recipes/mlp.yaml", .initial_peer = address, .run_id = "dash", .max_time = 90,
                   .min_peers = 2};
  auto a = TrainerProcess::start("a", args);
  args.data_seed = 2;
  auto b = TrainerProcess::start("b", args);
  REQUIRE((a && b));
  auto [aux, aux_ready] = dedloc::test::start_ready({dedloc::test::binary_path("tools/dedloc-avg/dedloc-avg"),
                                                     "--log-level", "warning", "aux", "--run", "dash", "--initial-peers",
                                                     address, "--listen", "tcp://127.0.0.1:0", "--matchmaking-time", "1"});
  const std::string history = dedloc::test::make_temp_dir("dedloc-monitor");
  auto [monitor, monitor_ready] = dedloc::test::start_ready(
      {dedloc::test::binary_path("tools/dedloc-avg/dedloc-avg"), "--log-level", "warning", "monitor", "--run", "dash",
       "--initial-peers", address, "--http", "127.0.0.1:0", "--history", history, "--interval", "0.5"});
  const auto url = monitor_ready["http"].get<std::string>();
  const std::vector<std::string> peers{a->peer_id(), b->peer_id(),
                                       aux_ready["peer_id"].get<std::string>()};

  // Wait (trainers pumped: their --json lines must not fill the pipe) until the monitor sees all three
  // peers and a loss.
  std::smatch port;
  REQUIRE(std::regex_search(url, port, std::regex(":(\\d+)/")));
  httplib::Client http("127.0.0.1", std::stoi(port[1]));
  http.set_read_timeout(5, 0);
  nlohmann::json state;
  REQUIRE(dedloc::test::pump_until({&*a, &*b}, 60s, [&] {
    auto got = http.Get("/api/state");
    if (!got || got->status != 200) return false;
    state = nlohmann::json::parse(got->body);
    return state["alive_peers"] == 3 && state["mean_loss"].is_number() && state["aux"] == 1 &&
           state["bytes_per_sample"].is_number() && state["bytes_per_sample"].get<double>() > 0;
  }));
  // The trainers say their mode and what they sent per sample; the aux peer says neither.
  INFO(state.dump());
  CHECK(state["mode"] == "synchronous");
  CHECK(state["inner_steps"].is_null());

  // The page as Chromium renders it, after its scripts fetched the state.
  auto dom = chromium("--dump-dom", url);
  for (const auto& peer : peers) {
    INFO(peer);
    CHECK(dom.find("data-peer-id=\"" + peer + "\"") != std::string::npos);
  }
  std::smatch loss;
  CHECK(std::regex_search(dom, loss, std::regex("id=\"mean-loss\">(\\d+\\.\\d{4})<")));
  CHECK(std::regex_search(dom, std::regex("id=\"alive-peers\">3<")));
  CHECK(dom.find(">aux<") != std::string::npos);
  CHECK(std::regex_search(dom, std::regex("id=\"mode\">synchronous<")));
  CHECK(std::regex_search(dom, std::regex("id=\"bytes-per-sample\">\\d+<")));
  CHECK(dom.find("<th>bytes/sample</th>") != std::string::npos);
  CHECK(dom.find("<td>synchronous</td>") != std::string::npos);
  CHECK(std::regex_search(dom, std::regex("id=\"status\">updated ")));  // not "monitor unreachable"

  const std::string screenshot = dedloc::test::binary_path("test-artifacts/dashboard.png");
  std::filesystem::create_directories(std::filesystem::path(screenshot).parent_path());
  std::filesystem::remove(screenshot);
  chromium("--screenshot=" + screenshot, url);
  auto png = dedloc::read_file(screenshot);
  REQUIRE(png.is_ok());
  CHECK(png->rfind("\x89PNG\r\n\x1a\n", 0) == 0);
  CHECK(png->size() > 20000);  // charts and a table, not a blank page
  WARN("dashboard screenshot: " << screenshot);

  // /metrics: the strict reader, then Prometheus' own parser (python3-prometheus-client).
  auto metrics = http.Get("/metrics");
  REQUIRE(metrics);
  auto families = dedloc::test::parse_prometheus_text(metrics->body);
  CHECK(families.size() >= 10);
  CHECK(metrics->body.find("dedloc_collaboration_mode{run=\"dash\",mode=\"synchronous\"} 1") != std::string::npos);
  CHECK(metrics->body.find("\ndedloc_bytes_per_sample{") != std::string::npos);
  const std::string metrics_file = history + "/metrics.txt";
  std::ofstream(metrics_file) << metrics->body;
  auto parsed = dedloc::test::run_command(
      "/usr/bin/python3 -c 'import sys; from prometheus_client.parser import text_string_to_metric_families as f; "
      "fams = list(f(open(sys.argv[1]).read())); print(len(fams), sum(len(x.samples) for x in fams))' " + metrics_file);
  INFO(parsed.output);
  REQUIRE(parsed.exit_code == 0);
  size_t samples = 0;
  for (const auto& family : families) samples += family.samples.size();
  CHECK(parsed.output == std::to_string(families.size()) + " " + std::to_string(samples) + "\n");

  // The history it kept: one row per step, with the loss.
  monitor.kill(SIGTERM);
  CHECK(monitor.wait(15s) == 0);
  auto csv = dedloc::read_file(history + "/history.csv");
  REQUIRE(csv.is_ok());
  CHECK(std::count(csv->begin(), csv->end(), '\n') >= 3);

  // ... and its charts (`make -f Makefile.recipes plot`: scripts/plot-history with gnuplot).
  auto plot = dedloc::test::run_command(dedloc::test::source_path("scripts/plot-history") + " " + history);
  INFO(plot.output);
  REQUIRE(plot.exit_code == 0);
  for (const char* chart : {"loss.png", "throughput.png", "peers.png"}) {
    auto image = dedloc::read_file(history + "/" + chart);
    REQUIRE(image.is_ok());
    CHECK(image->rfind("\x89PNG\r\n\x1a\n", 0) == 0);
    CHECK(image->size() > 5000);
  }
}

TEST_CASE("The monitor shows each peer's mode, inner steps and bytes per sample, synchronous and DiLoCo",
          "[proc][monitor]") {
  // recipes/mlp.yaml as it is (a global batch of 256), and in DiLoCo mode with an outer batch of 2,048 and
  // an inner step every 128 samples of a peer's own.
  const auto sync = watch_with_monitor("recipes/mlp.yaml", "mode-sync", 8);
  const std::string diloco_recipe = dedloc::test::write_recipe_variant(
      "recipes/mlp.yaml", dedloc::test::make_temp_dir("dedloc-monitor-diloco"), "mlp-diloco.yaml",
      {{"  target_batch_size: 256", "  target_batch_size: 2048"},
       {"optimizer:", "collaboration: {mode: diloco, inner_batch_size: 128}\noptimizer:"}});
  const auto diloco = watch_with_monitor(diloco_recipe, "mode-diloco", 4);
  INFO("synchronous: " << sync.dump() << "\ndiloco: " << diloco.dump());

  CHECK(sync["mode"] == "synchronous");
  CHECK(sync["inner_steps"].is_null());
  for (const auto& peer : sync["peers"]) {
    CHECK(peer["mode"] == "synchronous");
    CHECK(peer["inner_steps"] == 0);
    CHECK(peer["bytes_sent"].get<double>() > 0);
    CHECK(peer["bytes_per_sample"].get<double>() ==
          Approx(peer["bytes_sent"].get<double>() / peer["samples_computed"].get<double>()));
  }
  CHECK(diloco["mode"] == "diloco");
  REQUIRE(diloco["inner_steps"].is_number());
  CHECK(diloco["inner_steps"].get<double>() >= 1);
  for (const auto& peer : diloco["peers"]) {
    CHECK(peer["mode"] == "diloco");
    // Every inner step but the one for what is left at the outer step took 128 of the peer's samples.
    const auto inner = peer["inner_steps"].get<std::uint64_t>();
    CHECK(inner >= 1);
    CHECK((inner - 1) * 128 <= peer["samples_computed"].get<std::uint64_t>());
  }
  // One vector per 2,048 samples instead of per 256: about an eighth of the bytes per sample (partial
  // batches and rounds that ended early move it; a DiLoCo run sending as much as a synchronous one fails).
  const double ratio = sync["bytes_per_sample"].get<double>() / diloco["bytes_per_sample"].get<double>();
  WARN("bytes per sample: synchronous " << sync["bytes_per_sample"] << ", diloco " << diloco["bytes_per_sample"]
                                        << ", ratio " << ratio);
  CHECK(ratio > 4);
  CHECK(ratio < 16);
}
