// ReducerRound (avg/reducer.hpp) on its own, without sockets: what a refused contribution leaves behind.
#include <catch2/catch.hpp>

#include <cstring>
#include <limits>

#include "dedloc/avg/reducer.hpp"
#include "support/avg_begin.hpp"

using namespace dedloc;
using namespace dedloc::avg;
using namespace std::chrono_literals;

namespace {

zmq::message_t frame_of(const std::vector<float>& values) {
  zmq::message_t frame(values.size() * sizeof(float));
  std::memcpy(frame.data(), values.data(), frame.size());
  return frame;
}

}  // namespace

TEST_CASE("Reducer: a contribution holding NaN or Inf is refused and leaves the others' weighted mean exact",
          "[unit][avg]") {
  // Member 0 reduces the whole vector (6 values, parts of 4 and 2) and sends too, with weight 2.
  const wire::AvgBegin begin = test::begin_of({{AvgRole::kNode, 6}, {AvgRole::kNode, 0}, {AvgRole::kNode, 0}}, 6, 4);
  auto group = Group::from_begin(begin);
  REQUIRE(group.is_ok());
  const std::vector<float> own = {1.5f, -2.25f, 3.0f, 0.1f, 7.0f, -0.3f};
  std::vector<float> mine = own;
  std::vector<float> scratch(4);
  const auto now = std::chrono::steady_clock::now();
  ReducerRound reducer(*group, 0, mine, 2.0, {}, scratch, 10s, std::nullopt, std::nullopt, now, [] {});

  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const std::vector<float> a = {10.0f, 11.0f, -12.0f, 13.0f, 14.0f, 15.0f};
  const std::vector<float> b = {20.5f, 21.0f, 22.0f, -23.0f, 24.0f, 25.0f};
  // Part 0: member 1's contribution arrives first (while our own values still wait for their weight) and
  // holds a NaN in its last value; part 1: member 2's arrives first and holds an Inf.
  reducer.on_part(1, wire::AvgPart{begin.group_id, 0, 3.0, 0}, frame_of({a[0], a[1], a[2], nan}), net::Replier{}, now);
  reducer.on_part(2, wire::AvgPart{begin.group_id, 0, 5.0, 0}, frame_of({b[0], b[1], b[2], b[3]}), net::Replier{}, now);
  reducer.on_part(2, wire::AvgPart{begin.group_id, 1, 5.0, 0}, frame_of({inf, b[5]}), net::Replier{}, now);
  CHECK_FALSE(reducer.done());
  reducer.on_part(1, wire::AvgPart{begin.group_id, 1, 3.0, 0}, frame_of({a[4], a[5]}), net::Replier{}, now);
  REQUIRE(reducer.done());

  // Bit for bit what summing only the accepted contributions, in their order of arrival, gives.
  for (size_t i = 0; i < 4; ++i) {
    INFO("value " << i);
    CHECK(mine[i] == (2.0f * own[i] + 5.0f * b[i]) * static_cast<float>(1.0 / 7.0));
  }
  for (size_t i = 4; i < 6; ++i) {
    INFO("value " << i);
    CHECK(mine[i] == (2.0f * own[i] + 3.0f * a[i]) * static_cast<float>(1.0 / 5.0));
  }
}
