// Learning-rate schedules: each formula of schedule.hpp at its boundaries, and the recipe keys.
#include <catch2/catch.hpp>

#include <cmath>
#include <numbers>

#include "dedloc/train/schedule.hpp"

using namespace dedloc;
using namespace dedloc::train;

namespace {

// Reads a "schedule:" section from `yaml` and returns finish()'s verdict, then check_schedule_options'.
Status read_text(const std::string& yaml, ScheduleOptions& options) {
  auto root = ConfigReader::from_string(yaml, "recipe.yaml");
  REQUIRE(root.is_ok());
  auto section = root->section("schedule");
  read_schedule_options(section, options);
  DEDLOC_RETURN_IF_ERROR(root->finish());
  return check_schedule_options(options);
}

ScheduleOptions schedule(std::string kind, double lr, std::uint64_t warmup, std::uint64_t total, double final_lr) {
  ScheduleOptions o;
  o.kind = std::move(kind);
  o.lr = lr;
  o.warmup_epochs = warmup;
  o.total_epochs = total;
  o.final_lr = final_lr;
  REQUIRE(check_schedule_options(o).is_ok());
  return o;
}

}  // namespace

TEST_CASE("A constant schedule is lr, after a linear warmup from 0", "[unit][schedule]") {
  auto none = schedule("constant", 0.5, 0, 0, 0);
  CHECK(learning_rate(none, 0) == 0.5);
  CHECK(learning_rate(none, 1'000'000'000'000) == 0.5);

  auto warm = schedule("constant", 0.5, 4, 0, 0);
  CHECK(learning_rate(warm, 0) == 0);  // transformers' convention: the first step has rate 0
  CHECK(learning_rate(warm, 1) == Approx(0.125));
  CHECK(learning_rate(warm, 3) == Approx(0.375));
  CHECK(learning_rate(warm, 4) == 0.5);
  CHECK(learning_rate(warm, 5) == 0.5);
}

TEST_CASE("A linear schedule warms up, decays linearly to final_lr at total_epochs, then stays", "[unit][schedule]") {
  // transformers' get_linear_schedule_with_warmup(num_warmup_steps=10, num_training_steps=110) at lr 1.
  auto s = schedule("linear", 1.0, 10, 110, 0);
  CHECK(learning_rate(s, 0) == 0);
  CHECK(learning_rate(s, 5) == Approx(0.5));
  CHECK(learning_rate(s, 9) == Approx(0.9));
  CHECK(learning_rate(s, 10) == 1.0);
  CHECK(learning_rate(s, 11) == Approx(0.99));
  CHECK(learning_rate(s, 60) == Approx(0.5));
  CHECK(learning_rate(s, 109) == Approx(0.01));
  CHECK(learning_rate(s, 110) == 0);
  CHECK(learning_rate(s, 1000) == 0);

  auto to_final = schedule("linear", 0.3, 0, 4, 0.1);
  CHECK(learning_rate(to_final, 0) == Approx(0.3));
  CHECK(learning_rate(to_final, 1) == Approx(0.25));
  CHECK(learning_rate(to_final, 2) == Approx(0.2));
  CHECK(learning_rate(to_final, 3) == Approx(0.15));
  CHECK(learning_rate(to_final, 4) == 0.1);
  CHECK(learning_rate(to_final, 5) == 0.1);
}

TEST_CASE("A cosine schedule warms up, follows half a cosine to final_lr, then stays", "[unit][schedule]") {
  auto s = schedule("cosine", 2.0, 2, 10, 0.4);
  CHECK(learning_rate(s, 0) == 0);
  CHECK(learning_rate(s, 1) == Approx(1.0));
  CHECK(learning_rate(s, 2) == Approx(2.0));
  CHECK(learning_rate(s, 6) == Approx(1.2));  // halfway: the mean of lr and final_lr
  CHECK(learning_rate(s, 4) == Approx(0.4 + 1.6 * 0.5 * (1 + std::cos(std::numbers::pi / 4))));
  CHECK(learning_rate(s, 9) == Approx(0.4 + 1.6 * 0.5 * (1 + std::cos(std::numbers::pi * 7 / 8))));
  CHECK(learning_rate(s, 10) == 0.4);
  CHECK(learning_rate(s, 11) == 0.4);

  // Monotone from the peak down to final_lr.
  auto long_run = schedule("cosine", 1.0, 100, 125'000, 0);
  double previous = learning_rate(long_run, 100);
  for (std::uint64_t e = 101; e <= 125'000; e += 97) {
    double now = learning_rate(long_run, e);
    REQUIRE(now <= previous);
    previous = now;
  }
  CHECK(learning_rate(long_run, 124'999) > 0);
  CHECK(learning_rate(long_run, 124'999) < 1e-9);
}

TEST_CASE("Huge epoch counts keep their precision", "[unit][schedule]") {
  const std::uint64_t big = 1ull << 60;
  auto s = schedule("linear", 1.0, big, big + 4, 0);
  CHECK(learning_rate(s, big) == 1.0);
  CHECK(learning_rate(s, big + 1) == 0.75);  // the integer difference, not (2^60 + 4) − (2^60 + 1) in double
  CHECK(learning_rate(s, big + 3) == 0.25);
}

TEST_CASE("A schedule section reads its keys", "[unit][schedule][config]") {
  ScheduleOptions o;
  REQUIRE(read_text("schedule:\n  kind: cosine\n  lr: 4.8\n  warmup_epochs: 10\n  total_epochs: 100\n"
                    "  final_lr: 0.0048\n",
                    o)
              .is_ok());
  CHECK(o.kind == "cosine");
  CHECK(o.lr == 4.8);
  CHECK(o.warmup_epochs == 10);
  CHECK(o.total_epochs == 100);
  CHECK(o.final_lr == 0.0048);

  ScheduleOptions defaults;
  REQUIRE(read_text("other: 1\n", defaults).code() == Code::kInvalidArgument);  // "other" is unknown at the root
  CHECK(defaults.kind == "constant");
}

TEST_CASE("A wrong schedule key or value is an error naming the key", "[unit][schedule][config]") {
  auto message = [](const std::string& yaml) {
    ScheduleOptions o;
    Status st = read_text(yaml, o);
    CHECK(st.code() == Code::kInvalidArgument);
    return st.message();
  };
  CHECK_THAT(message("schedule:\n  kind: linear\n  lr: 1\n  total_epochs: 10\n  warmup: 5\n"),
             Catch::Contains("recipe.yaml") && Catch::Contains("'schedule.warmup'"));
  // Keys of the decaying kinds are unknown to a constant schedule.
  CHECK_THAT(message("schedule:\n  lr: 1\n  total_epochs: 10\n"), Catch::Contains("'schedule.total_epochs'"));
  CHECK_THAT(message("schedule:\n  kind: constant\n  final_lr: 0\n"), Catch::Contains("'schedule.final_lr'"));
  CHECK_THAT(message("schedule:\n  lr: fast\n"), Catch::Contains("'schedule.lr' must be a number"));
  CHECK_THAT(message("schedule:\n  warmup_epochs: -3\n"), Catch::Contains("'schedule.warmup_epochs'"));

  CHECK_THAT(message("schedule:\n  kind: exponential\n  total_epochs: 10\n"),
             Catch::Contains("schedule.kind must be constant, linear or cosine (got 'exponential')"));
  CHECK_THAT(message("schedule:\n  lr: 0\n"), Catch::Contains("schedule.lr must be a number > 0 (got 0)"));
  CHECK_THAT(message("schedule:\n  lr: -0.1\n"), Catch::Contains("schedule.lr"));
  CHECK_THAT(message("schedule:\n  kind: linear\n  lr: 1\n"), Catch::Contains("schedule.total_epochs must be greater"));
  CHECK_THAT(message("schedule:\n  kind: cosine\n  warmup_epochs: 10\n  total_epochs: 10\n"),
             Catch::Contains("schedule.total_epochs must be greater than warmup_epochs (10)"));
  CHECK_THAT(message("schedule:\n  kind: linear\n  lr: 0.1\n  total_epochs: 10\n  final_lr: 0.2\n"),
             Catch::Contains("schedule.final_lr must be between 0 and lr"));
  CHECK_THAT(message("schedule:\n  kind: linear\n  total_epochs: 10\n  final_lr: -1\n"),
             Catch::Contains("schedule.final_lr"));
}
