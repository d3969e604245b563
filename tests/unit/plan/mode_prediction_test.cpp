// Synchronous or DiLoCo in the planner (plan/mode_prediction.hpp): DiLoCo's communication bound on samples/s
// is H times the synchronous one, its compute bound the same, its bytes per sample 1/H for the same plan.
#include <catch2/catch.hpp>

#include "dedloc/plan/mode_prediction.hpp"
#include "dedloc/plan/peers_file.hpp"
#include "support/test_paths.hpp"

using namespace dedloc;
using namespace dedloc::plan;

namespace {

// Four GPU peers in client mode, 2000 samples/s each on 1 MB/s links, and one CPU-only peer on 100 MB/s
// that reduces everything; they average 2 MB (1M values in fp16). Each GPU peer sends its whole gradient
// and gets it back averaged, T = 2 MB per step each way, so its link allows 1/2 step/s: B/2 = 2048
// samples/s synchronous, a quarter of the 8000 samples/s the GPUs compute. (Peers that can all reduce never
// make a plan bound by its links: one peer computing alone moves nothing.)
Collaboration link_bound() {
  Collaboration c;
  for (int i = 1; i <= 4; ++i) c.peers.push_back({"gpu-" + std::to_string(i), 2000, 1e6, 1e6, true});
  c.peers.push_back({"cpu", 0, 1e8, 1e8, false});
  c.batch = 4096;
  c.params = 1e6;
  c.codec = Codec::kFloat16;
  return c;
}

constexpr double kGpuBytesPerStep = 2e6;      // T of a GPU peer: one gradient
constexpr double kReducerBytesPerStep = 8e6;  // T of the CPU peer: a gradient back to each of the four

ModePrediction predict(const Collaboration& c, ModeOptions mode) {
  auto prediction = predict_mode(c, mode);
  INFO(prediction.status().to_string());
  REQUIRE(prediction.is_ok());
  return std::move(*prediction);
}

}  // namespace

TEST_CASE("DiLoCo multiplies the communication bound on samples/s by H and leaves compute alone", "[plan][modes]") {
  const auto c = link_bound();
  const auto sync = predict(c, {CollaborationMode::kSynchronous, 1});
  CHECK(sync.bound() == Bound::kCommunication);
  CHECK(sync.averaged_batch == 4096);
  CHECK(sync.plan.prediction.samples_per_second == Approx(2048));
  for (int i = 0; i < 4; ++i) CHECK(sync.upload_bytes_per_sample[i] == Approx(kGpuBytesPerStep / 4096));
  CHECK(sync.upload_bytes_per_sample[4] == Approx(kReducerBytesPerStep / 4096));
  CHECK(sync.swarm_upload_bytes_per_sample() == Approx((4 * kGpuBytesPerStep + kReducerBytesPerStep) / 4096));

  // H = 3: still bound by the links, which now carry one vector per 12288 samples.
  const auto diloco3 = predict(c, {CollaborationMode::kDiloco, 3});
  CHECK(diloco3.bound() == Bound::kCommunication);
  CHECK(diloco3.averaged_batch == 3 * 4096);
  CHECK(diloco3.global_batch == 4096);
  CHECK(diloco3.plan.prediction.steps_per_second == Approx(sync.plan.prediction.steps_per_second));  // outer steps/s
  CHECK(diloco3.plan.prediction.samples_per_second == Approx(3 * sync.plan.prediction.samples_per_second));
  CHECK(diloco3.upload_bytes_per_sample[0] == Approx(kGpuBytesPerStep / (3 * 4096)));
  CHECK(diloco3.swarm_upload_bytes_per_sample() == Approx(sync.swarm_upload_bytes_per_sample() / 3));

  // H = 8: the links would allow 8 x 2048 samples/s; the GPUs compute 8000.
  const auto diloco8 = predict(c, {CollaborationMode::kDiloco, 8});
  CHECK(diloco8.bound() == Bound::kCompute);
  CHECK(diloco8.plan.prediction.samples_per_second == Approx(8000));
  CHECK(diloco8.max_upload_bytes_per_sample() == Approx(kReducerBytesPerStep / (8 * 4096)));

  // H = 1 is the synchronous run in this model.
  const auto diloco1 = predict(c, {CollaborationMode::kDiloco, 1});
  CHECK(diloco1.plan.prediction.samples_per_second == Approx(sync.plan.prediction.samples_per_second));
}

TEST_CASE("compare_modes plans both modes for the same peers, and DiLoCo may let a slow link compute",
          "[plan][modes]") {
  auto c = load_peers_file(dedloc::test::source_path("configs/peers/slow-link-gpu.yaml"));
  REQUIRE(c.is_ok());
  auto comparison = compare_modes(*c, 64);
  REQUIRE(comparison.is_ok());
  const auto& sync = comparison->synchronous;
  const auto& diloco = comparison->diloco;
  CHECK(sync.mode.mode == CollaborationMode::kSynchronous);
  CHECK(diloco.mode.mode == CollaborationMode::kDiloco);
  CHECK(diloco.mode.inner_steps == 64);
  CHECK(diloco.averaged_batch == 64 * sync.averaged_batch);
  REQUIRE(sync.plan.model.peer(6).name == "home-gpu");
  // Synchronous: its 5 Mbit/s uplink would cap every step, so it does not compute (600 samples/s). With one
  // all-reduce per 64 global batches that uplink is no longer the limit: it computes too (700 samples/s).
  CHECK_FALSE(sync.plan.assignment.computes[6]);
  CHECK(sync.plan.prediction.samples_per_second == Approx(600));
  CHECK(diloco.plan.assignment.computes[6]);
  CHECK(diloco.plan.prediction.samples_per_second == Approx(700));
  CHECK(diloco.bound() == Bound::kCompute);
}

TEST_CASE("Modes and inner steps are parsed strictly, naming the option", "[plan][modes][errors]") {
  CHECK(*parse_mode("synchronous", "--mode") == CollaborationMode::kSynchronous);
  CHECK(*parse_mode("diloco", "--mode") == CollaborationMode::kDiloco);
  auto bad_mode = parse_mode("DiLoCo", "--mode");
  REQUIRE_FALSE(bad_mode.is_ok());
  CHECK_THAT(bad_mode.status().message(), Catch::StartsWith("--mode:") && Catch::Contains("synchronous or diloco"));

  CHECK(*parse_inner_steps("8", "--inner-steps") == 8);
  CHECK(*parse_inner_steps("500", "--inner-steps") == 500);
  for (const char* bad : {"0", "-1", "1.5", "8k", "", " 8", "abc", "99999999999999999999999"}) {
    INFO(bad);
    auto steps = parse_inner_steps(bad, "--inner-steps");
    REQUIRE_FALSE(steps.is_ok());
    CHECK(steps.status().code() == Code::kInvalidArgument);
    CHECK_THAT(steps.status().message(), Catch::StartsWith("--inner-steps:") && Catch::Contains(">= 1"));
  }
  CHECK(predict_mode(link_bound(), {CollaborationMode::kDiloco, 0}).status().code() == Code::kInvalidArgument);
}
