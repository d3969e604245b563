// avg/background_parameters_hash.hpp: the hash of the state submitted last, computed off the caller's thread,
// equal to avg::parameters_hash, and never an earlier state's hash in its place.
#include <catch2/catch.hpp>

#include <memory>
#include <thread>

#include "dedloc/avg/background_parameters_hash.hpp"

using namespace dedloc;
using namespace dedloc::avg;
using namespace std::chrono_literals;

namespace {

std::shared_ptr<const TrainingState> state_filled_with(float value, size_t elements = 1 << 20) {
  auto state = TrainingState::with_tensors({{"param/w", {elements}}, {"buffer/step", {}}});
  REQUIRE(state.is_ok());
  for (float& v : state->tensor(0)) v = value;
  return std::make_shared<const TrainingState>(std::move(*state));
}

}  // namespace

TEST_CASE("Background parameters hash: the submitted state's avg::parameters_hash, once computed", "[unit][avg][state]") {
  BackgroundParametersHash hasher;
  CHECK(hasher.latest() == 0);  // nothing submitted
  const auto a = state_filled_with(1.0f);
  hasher.submit(a);
  CHECK(hasher.wait_latest(10s) == parameters_hash(*a));
  CHECK(hasher.latest() == parameters_hash(*a));
}

TEST_CASE("Background parameters hash: never an earlier state's hash, whatever the timing", "[unit][avg][state]") {
  BackgroundParametersHash hasher;
  // Small states, so that the worker is often done, often mid-way, when the next is submitted.
  const auto a = state_filled_with(1.0f, 4096), b = state_filled_with(2.0f, 4096);
  const std::uint64_t hash_a = parameters_hash(*a), hash_b = parameters_hash(*b);
  REQUIRE(hash_a != hash_b);
  size_t ready = 0;
  for (int i = 0; i < 2000; ++i) {
    const bool even = i % 2 == 0;
    hasher.submit(even ? a : b);
    // Read at once, or up to 200 µs later: the worker is then sometimes done, sometimes mid-way.
    if (i % 4 != 0) std::this_thread::sleep_for(std::chrono::microseconds(i % 200));
    const std::uint64_t seen = hasher.latest();
    // Not known yet, or the new state's hash: the previous state's would be a lie.
    CHECK((seen == 0 || seen == (even ? hash_a : hash_b)));
    ready += seen != 0;
  }
  CHECK(hasher.wait_latest(10s) == hash_b);  // the last submitted (i = 1999)
  // Both cases came up, so the check above met the worker at both stages.
  INFO(ready << " of 2000 reads found the hash ready");
  CHECK(ready > 0);
  CHECK(ready < 2000);
}

TEST_CASE("Background parameters hash: a big state is hashed off the caller's thread", "[unit][avg][state]") {
  BackgroundParametersHash hasher;
  const auto big = state_filled_with(3.0f, 64 << 20);  // 256 MB: ~0.3 s of one core to hash here
  hasher.submit(big);
  // The caller is back long before one pass over 256 MB could be made (a hash on its thread would be ready).
  CHECK(hasher.latest() == 0);
  CHECK(hasher.wait_latest(60s) == parameters_hash(*big));
}
