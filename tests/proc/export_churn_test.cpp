// Checkpoint export, with real processes: `dedloc-avg export` runs again and again while
// trainers are SIGKILLed and new ones join; every checkpoint it leaves loads and holds finite weights. Then
// export is SIGKILLed in the middle of writing a checkpoint (caught by inotify the moment its temporary
// file appears): no partial file ever carries a final name, and the next run cleans up and succeeds. A
// second export on the same folder while one holds the lock fails with one clear line, and so does
// `--format hf` of that run (an MLP, not ALBERT).
#include <catch2/catch.hpp>

#include <poll.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>

#include <nlohmann/json.hpp>

#include "dedloc/core/files.hpp"
#include "dedloc/monitor/checkpoint_export.hpp"
#include "dedloc/collab/checkpoint.hpp"
#include "support/process.hpp"
#include "support/test_paths.hpp"
#include "support/trainer_process.hpp"

using namespace std::chrono_literals;
namespace fs = std::filesystem;
using dedloc::test::TrainerArgs;
using dedloc::test::TrainerProcess;

namespace {

constexpr size_t kKeep = 3;

// The last line of a command's output: stdout's one line, after any warnings on stderr.
std::string last_line(const std::string& output) {
  auto end = output.size();
  if (end > 0 && output[end - 1] == '\n') --end;
  auto start = output.rfind('\n', end == 0 ? 0 : end - 1);
  return output.substr(start == std::string::npos ? 0 : start + 1, end - (start == std::string::npos ? 0 : start + 1));
}

// recipes/mlp.yaml with a wider network (about 2 M floats of weights and momentum, 8 MiB): a checkpoint
// takes long enough to write that the kill below lands inside the write.
std::string wide_recipe() {
  static const std::string path = dedloc::test::write_recipe_variant(
      "recipes/mlp.yaml", dedloc::test::make_temp_dir("dedloc-export"), "mlp-wide.yaml", {{"  hidden: 64\n", "  hidden: 1024\n"}});
  return path;
}

std::string export_command(const std::string& address, const std::string& out) {
  return dedloc::test::binary_path("tools/dedloc-avg/dedloc-avg") + " --log-level warning export --run wide "
         "--initial-peers " + address + " --out " + out + " --keep " + std::to_string(kKeep) + " --timeout 30 --request-timeout 2";
}

// Every file under a final name loads as an intact checkpoint with finite values and has its metadata.
void check_every_checkpoint(const std::string& out) {
  size_t count = 0;
  for (const auto& [epoch, path] : dedloc::monitor::list_exported_checkpoints(out)) {
    INFO(path);
    auto loaded = dedloc::collab::load_checkpoint(path);
    REQUIRE(loaded.is_ok());
    CHECK(loaded->state.epoch() == epoch);
    const auto values = loaded->state.flat();
    CHECK(std::all_of(values.begin(), values.end(), [](float x) { return std::isfinite(x); }));
    CHECK(loaded->state.total_elements() > 1'000'000);
    auto metadata = dedloc::read_file(fs::path(path).replace_extension(".json").string());
    if (metadata.is_ok()) {  // absent only when a kill fell between the two files
      auto json = nlohmann::json::parse(*metadata);
      CHECK(json["epoch"] == epoch);
      CHECK(json["run_id"] == "wide");
    }
    ++count;
  }
  CHECK(count <= kKeep);
}

std::vector<std::string> leftovers(const std::string& out) {
  std::vector<std::string> found;
  for (const auto& entry : fs::directory_iterator(out)) {
    if (entry.path().filename().string().find(".tmp.") != std::string::npos) found.push_back(entry.path().string());
  }
  return found;
}

}  // namespace

TEST_CASE("Export under churn: every checkpoint loads, and a kill mid-write leaves no partial file under a final name",
          "[proc][monitor][export]") {
  auto [bootstrap, ready] = dedloc::test::start_ready({dedloc::test::binary_path("tools/dedloc-dht/dedloc-dht"),
                                                       "--log-level", "warning", "serve", "--listen", "tcp://127.0.0.1:0"});
  const auto address = ready["endpoints"][0].get<std::string>();
  const std::string out = dedloc::test::make_temp_dir("dedloc-exports") + "/exports";
  std::uint64_t seed = 0;
  auto start_trainer = [&](size_t min_peers) {
    TrainerArgs args{.recipe = wide_recipe(), .initial_peer = address, .run_id = "wide", .data_seed = ++seed,
                     .max_time = 150, .min_peers = min_peers};
    auto trainer = TrainerProcess::start("t" + std::to_string(seed), args);
    REQUIRE(trainer.has_value());
    return std::make_unique<TrainerProcess>(std::move(*trainer));
  };
  std::vector<std::unique_ptr<TrainerProcess>> trainers;
  for (int i = 0; i < 3; ++i) trainers.push_back(start_trainer(1));
  auto pump = [&](dedloc::Duration wait) {
    for (auto& t : trainers) t->pump(wait);
  };
  REQUIRE(dedloc::test::pump_until({trainers[0].get()}, 60s, [&] { return trainers[0]->epoch() >= 2; }));

  // Churn: after the second and the fourth export, the oldest trainer is SIGKILLed and a new one joins.
  // (Each kill costs the next DHT lookups and joins a few seconds of timeouts on the dead node.)
  size_t succeeded = 0;
  std::set<std::uint64_t> epochs;
  for (int round = 0; round < 6; ++round) {
    pump(50ms);
    auto run = dedloc::test::run_command(export_command(address, out));
    INFO("round " << round << ": " << run.output);
    const auto line = last_line(run.output);
    if (run.exit_code == 0) {
      ++succeeded;
      CHECK((line.rfind("exported epoch ", 0) == 0 || line.rfind("already had epoch ", 0) == 0));
      epochs.insert(std::stoull(line.substr(line.find("epoch ") + 6)));
    } else {
      // Every donor it tried died under it: the last line says so.
      CHECK(line.rfind("dedloc-avg export: error: ", 0) == 0);
    }
    check_every_checkpoint(out);
    if (round == 1 || round == 3) {
      trainers.front()->process().kill(SIGKILL);
      CHECK(trainers.front()->process().wait(10s) == 128 + SIGKILL);
      trainers.erase(trainers.begin());
      trainers.push_back(start_trainer(1));
    }
  }
  CHECK(succeeded >= 4);
  CHECK(epochs.size() >= 3);  // it followed the run, not one stale state

  // SIGKILL the moment a checkpoint's temporary file appears.
  int watch = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
  REQUIRE(watch >= 0);
  REQUIRE(inotify_add_watch(watch, out.c_str(), IN_CREATE) >= 0);
  bool killed_mid_write = false;
  for (int attempt = 0; attempt < 10 && !killed_mid_write; ++attempt) {
    pump(300ms);  // a new epoch to write
    auto argv = std::vector<std::string>{"/bin/sh", "-c", "exec " + export_command(address, out)};
    auto child = dedloc::test::ChildProcess::spawn(argv);
    auto until = std::chrono::steady_clock::now() + 40s;
    bool ended = false;
    while (!ended && std::chrono::steady_clock::now() < until) {
      pollfd p{watch, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) {
        ended = child.wait(0s).has_value();  // it finished without writing (that epoch was on disk already)
        continue;
      }
      alignas(inotify_event) char buffer[4096];
      ssize_t n = ::read(watch, buffer, sizeof buffer);
      for (ssize_t at = 0; at < n;) {
        auto* event = reinterpret_cast<inotify_event*>(buffer + at);
        if (event->len > 0 && std::string(event->name).find(".safetensors.tmp.") != std::string::npos) {
          child.kill(SIGKILL);
          child.wait(10s);
          // A small checkpoint can be written and renamed between the event and the kill: that attempt
          // tore nothing, so it does not count, and the next epoch is tried.
          killed_mid_write = !leftovers(out).empty();
          ended = true;
          break;
        }
        at += static_cast<ssize_t>(sizeof(inotify_event) + event->len);
      }
    }
    if (!ended) child.wait(10s);
  }
  ::close(watch);
  REQUIRE(killed_mid_write);  // the torn write is there, under its temporary name only
  check_every_checkpoint(out);

  // The next run removes it and exports; a run overlapping one that holds the lock fails at once.
  pump(50ms);
  auto next = dedloc::test::run_command(export_command(address, out));
  INFO(next.output);
  CHECK(next.exit_code == 0);
  CHECK(leftovers(out).empty());
  check_every_checkpoint(out);
  auto locked = dedloc::test::run_command("flock " + out + "/.export.lock " + export_command(address, out));
  CHECK(locked.exit_code != 0);
  CHECK(locked.output.rfind("dedloc-avg export: error: refused: another export is writing to " + out, 0) == 0);
  CHECK(std::count(locked.output.begin(), locked.output.end(), '\n') == 1);  // one line, nothing else
  CHECK(fs::is_symlink(out + "/latest.safetensors"));
  CHECK(dedloc::collab::load_checkpoint(out + "/latest.safetensors").is_ok());

  // --format hf downloads the same state, which is no ALBERT: one line naming the tensor it looked for,
  // nothing written.
  const std::string tokenizer = fs::path(out).parent_path().string() + "/spm.model";
  REQUIRE(dedloc::write_file_atomically(tokenizer, "a SentencePiece model").is_ok());
  auto hf = dedloc::test::run_command(export_command(address, out) + " --format hf --tokenizer " + tokenizer);
  INFO(hf.output);
  CHECK(hf.exit_code == 2);
  CHECK(last_line(hf.output) == "dedloc-avg export: error: invalid_argument: not an ALBERT state: it has no tensor "
                                "'param/embeddings.word_embeddings.weight'");
  CHECK(dedloc::monitor::list_exported_hf_folders(out).empty());
  CHECK_FALSE(fs::exists(out + "/latest-hf"));
  CHECK(leftovers(out).empty());
}

TEST_CASE("Export with no donor in the run fails with one clear line", "[proc][monitor][export]") {
  auto [bootstrap, ready] = dedloc::test::start_ready({dedloc::test::binary_path("tools/dedloc-dht/dedloc-dht"),
                                                       "--log-level", "warning", "serve", "--listen", "tcp://127.0.0.1:0"});
  const std::string out = dedloc::test::make_temp_dir("dedloc-exports") + "/none";
  auto run = dedloc::test::run_command(dedloc::test::binary_path("tools/dedloc-avg/dedloc-avg") +
                                       " export --run nobody --initial-peers " + ready["endpoints"][0].get<std::string>() +
                                       " --out " + out);
  CHECK(run.exit_code != 0);
  CHECK(run.output == "dedloc-avg export: error: not_found: no donor of run 'nobody' is listed in the DHT\n");
  CHECK(dedloc::monitor::list_exported_checkpoints(out).empty());
}
