// libFuzzer target: YAML configuration (core/config.hpp) as tools, recipes and peers files read it.
//
// Input: YAML text. Three readers of it, each from ConfigReader::from_string:
//   1. every key read as every type, sections and lists followed down (a bounded walk), then finish()
//   2. the peers file (plan/peers_file.hpp: read_collaboration), then finish(); an accepted collaboration has
//      named peers with positive bandwidths
//   3. recipe sections that torch-free code reads: schedule: (train/schedule.hpp), whose accepted options give
//      learning rates within [0, lr] (up to rounding); averaging: codec policies (avg/codec.hpp) and timeouts
#include <cmath>
#include <string>

#include "dedloc/avg/codec.hpp"
#include "dedloc/core/config.hpp"
#include "dedloc/plan/peers_file.hpp"
#include "dedloc/train/schedule.hpp"
#include "fuzz/fuzz_target.hpp"

namespace {

using namespace dedloc;

// Reads everything below `reader`, visiting at most `budget` keys (YAML aliases can make a small text a
// huge tree).
void walk(ConfigReader& reader, int depth, int& budget) {
  for (const std::string& key : reader.keys()) {
    if (--budget < 0) return;
    (void)reader.has(key);
    YAML::Node node = reader.raw(key);
    if (node.IsMap() && depth < 8) {
      ConfigReader section = reader.section(key);
      walk(section, depth + 1, budget);
    } else if (node.IsSequence() && depth < 8) {
      std::vector<std::string> strings;
      reader.read(key, strings);
      for (ConfigReader& item : reader.list(key)) walk(item, depth + 1, budget);
    } else {
      std::string s;
      bool b = false;
      std::int64_t i64 = 0;
      int i = 0;
      std::uint64_t u64 = 0;
      double d = 0;
      Duration duration{};
      std::vector<std::string> strings;
      reader.read(key, s);
      reader.read(key, b);
      reader.read(key, i64);
      reader.read(key, i);
      reader.read(key, u64);
      reader.read(key, d);
      reader.read(key, duration);
      reader.read(key, strings);
      DEDLOC_FUZZ_CHECK(std::isfinite(d));
      DEDLOC_FUZZ_CHECK(duration.count() >= 0);
    }
  }
  (void)reader.where();
}

void read_recipe(ConfigReader& root) {
  ConfigReader schedule_section = root.section("schedule");
  train::ScheduleOptions schedule;
  train::read_schedule_options(schedule_section, schedule);
  if (train::check_schedule_options(schedule).is_ok()) {
    for (std::uint64_t epoch : {std::uint64_t{0}, schedule.warmup_epochs / 2, schedule.warmup_epochs,
                                schedule.total_epochs / 2, schedule.total_epochs, schedule.total_epochs + 1,
                                ~std::uint64_t{0}}) {
      const double rate = train::learning_rate(schedule, epoch);
      // Within [0, lr] up to rounding (lr·(T − e)/(T − W) at e = W may come out an ulp above lr).
      DEDLOC_FUZZ_CHECK(std::isfinite(rate) && rate >= 0 && rate <= schedule.lr * (1 + 1e-12));
    }
  }
  ConfigReader averaging = root.section("averaging");
  std::string codec = "none";
  averaging.read("codec", codec);
  if (auto policy = avg::CodecPolicy::parse(codec)) {
    DEDLOC_FUZZ_CHECK(avg::CodecPolicy::parse(policy->name()).is_ok());
  }
  std::uint64_t group_size = 0;
  double seconds = 0;
  Duration timeout{};
  averaging.read("target_group_size", group_size);
  averaging.read("matchmaking_time", seconds);
  averaging.read("averaging_timeout", timeout);
  (void)root.finish();
}

}  // namespace

DEDLOC_FUZZ_TARGET(config) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  {
    auto reader = ConfigReader::from_string(text, "fuzz.yaml");
    if (!reader) return 0;
    int budget = 2000;
    walk(*reader, 0, budget);
    (void)reader->finish();
  }
  {
    auto reader = ConfigReader::from_string(text, "peers.yaml");
    plan::Collaboration collaboration;
    if (reader && plan::read_collaboration(*reader, collaboration).is_ok() && reader->finish().is_ok()) {
      for (const plan::PeerSpec& peer : collaboration.peers) {
        DEDLOC_FUZZ_CHECK(!peer.name.empty() && peer.download > 0 && peer.upload > 0);
      }
    }
  }
  {
    auto reader = ConfigReader::from_string(text, "recipe.yaml");
    if (reader) read_recipe(*reader);
  }
  return 0;
}
