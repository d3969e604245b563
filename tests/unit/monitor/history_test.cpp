// The monitor's history files: one row per step or change of peers, reloaded after a restart, a torn last
// line (a monitor killed mid-write) skipped.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "dedloc/core/files.hpp"
#include "dedloc/monitor/history.hpp"
#include "support/test_paths.hpp"

using namespace dedloc;
using namespace dedloc::monitor;

namespace {

SwarmView view_at(double time, std::uint64_t epoch, size_t trainers, std::optional<double> loss) {
  SwarmView v;
  v.time = time;
  v.epoch = epoch;
  v.trainers = trainers;
  v.samples_per_second = 10.0 * static_cast<double>(trainers);
  v.mean_loss = loss;
  for (size_t i = 0; i < trainers; ++i) v.peers.push_back({.peer_id = std::to_string(i), .role = "trainer"});
  return v;
}

size_t count_lines(const std::string& text) { return static_cast<size_t>(std::count(text.begin(), text.end(), '\n')); }

}  // namespace

TEST_CASE("History gains a row per global step or change of peers, in CSV and JSONL", "[unit][monitor]") {
  test::ScopedTempDir dir{"dedloc-history"};
  auto history = History::open(dir.path.string());
  REQUIRE(history.is_ok());
  CHECK(*history->record(view_at(100, 1, 2, std::nullopt)) == true);
  CHECK(*history->record(view_at(101, 1, 2, 5.0)) == false);  // nothing the charts show changed
  CHECK(*history->record(view_at(102, 2, 2, 4.5)) == true);   // a step
  CHECK(*history->record(view_at(103, 2, 3, 4.5)) == true);   // a peer joined
  REQUIRE(history->rows().size() == 3);

  auto csv = read_file((dir.path / "history.csv").string());
  REQUIRE(csv.is_ok());
  CHECK(csv->rfind("time,epoch,peers,trainers,clients,aux,samples_per_second,loss,eta_seconds\n", 0) == 0);
  CHECK(count_lines(*csv) == 4);
  CHECK(csv->find("\n100,1,2,2,0,0,20,,\n") != std::string::npos);  // no loss yet: an empty field
  CHECK(csv->find("\n102,2,2,2,0,0,20,4.5,\n") != std::string::npos);
  auto jsonl = read_file((dir.path / "history.jsonl").string());
  REQUIRE(jsonl.is_ok());
  CHECK(count_lines(*jsonl) == 3);
  CHECK(jsonl->find("\"loss\":null") != std::string::npos);

  auto json = history->to_json();
  CHECK(json.front() == '[');
  CHECK(json.find("\"epoch\":2") != std::string::npos);
}

TEST_CASE("A restarted monitor reloads its history and skips a torn last line", "[unit][monitor]") {
  test::ScopedTempDir dir{"dedloc-history"};
  {
    auto history = History::open(dir.path.string());
    REQUIRE(history.is_ok());
    REQUIRE(history->record(view_at(100, 1, 1, 3.0)).is_ok());
    REQUIRE(history->record(view_at(110, 2, 1, 2.0)).is_ok());
  }
  {  // killed mid-row
    std::ofstream jsonl(dir.path / "history.jsonl", std::ios::app);
    jsonl << "{\"time\":120,\"epo";
    std::ofstream csv(dir.path / "history.csv", std::ios::app);
    csv << "120,3";
  }
  auto history = History::open(dir.path.string());
  REQUIRE(history.is_ok());
  REQUIRE(history->rows().size() == 2);
  CHECK(history->rows().back() == HistoryRow::of(view_at(110, 2, 1, 2.0)));
  CHECK(*history->record(view_at(110, 2, 1, 2.0)) == false);  // the same as the last row: not repeated
  auto appended = history->record(view_at(130, 3, 1, 1.5));
  REQUIRE(appended.is_ok());
  CHECK(*appended == true);
  // The new rows start on a line of their own: the torn one stays torn, the rest parse.
  auto csv = read_file((dir.path / "history.csv").string());
  REQUIRE(csv.is_ok());
  CHECK(csv->find("\n120,3\n130,3,1,1,0,0,10,1.5,\n") != std::string::npos);
  auto reloaded = History::open(dir.path.string());
  REQUIRE(reloaded.is_ok());
  CHECK(reloaded->rows().size() == 3);
}

TEST_CASE("History keeps at most `keep` rows in memory, and a folder it cannot create is named", "[unit][monitor]") {
  History history(2);
  for (std::uint64_t epoch = 1; epoch <= 5; ++epoch) REQUIRE(history.record(view_at(static_cast<double>(epoch), epoch, 1, 1.0)).is_ok());
  REQUIRE(history.rows().size() == 2);
  CHECK(history.rows().front().epoch == 4);
  auto bad = History::open("/proc/dedloc-no-such/history");
  REQUIRE_FALSE(bad.is_ok());
  CHECK(bad.status().message().find("/proc/dedloc-no-such/history") != std::string::npos);
}
