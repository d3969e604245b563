// CenteredClip (avg/centered_clip.hpp): the weighted mean when nobody is clipped, and a bounded pull from a
// contribution however far away it is.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include "dedloc/avg/centered_clip.hpp"

using namespace dedloc;
using namespace dedloc::avg;

namespace {

constexpr size_t kDim = 512;

// `count` points near a common centre: centre ~ N(0, 1), each point's offset ~ N(0, spread).
std::vector<float> points_near_a_centre(size_t count, float spread, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> centre(kDim), points(count * kDim);
  for (auto& c : centre) c = normal(rng);
  for (size_t i = 0; i < count; ++i) {
    for (size_t j = 0; j < kDim; ++j) points[i * kDim + j] = centre[j] + spread * normal(rng);
  }
  return points;
}

std::vector<double> mean_of(const std::vector<float>& points, const std::vector<double>& weights, size_t count) {
  std::vector<double> mean(kDim, 0.0);
  double total = 0;
  for (size_t i = 0; i < count; ++i) {
    for (size_t j = 0; j < kDim; ++j) mean[j] += weights[i] * points[i * kDim + j];
    total += weights[i];
  }
  for (auto& m : mean) m /= total;
  return mean;
}

double distance(const std::vector<float>& a, const std::vector<double>& b) {
  double squared = 0;
  for (size_t j = 0; j < kDim; ++j) squared += (a[j] - b[j]) * (a[j] - b[j]);
  return std::sqrt(squared);
}

}  // namespace

TEST_CASE("CenteredClip is the weighted mean when every point lies within tau", "[unit][avg]") {
  auto points = points_near_a_centre(5, 0.01f, 1);  // pairwise ≈ 0.3 apart, tau 10
  std::vector<double> weights{1, 2, 3, 4, 5};
  std::vector<float> out(kDim), scratch;
  centered_clip(points, kDim, weights, {.tau = 10, .iterations = 3}, out, scratch);
  CHECK(distance(out, mean_of(points, weights, 5)) < 1e-4);
}

TEST_CASE("CenteredClip: a point scaled by 1e6 pulls the result at most tau times its weight share", "[unit][avg]") {
  auto points = points_near_a_centre(4, 0.01f, 2);
  for (size_t j = 0; j < kDim; ++j) points[3 * kDim + j] *= 1e6f;  // the poisoned contribution
  std::vector<double> weights{1, 1, 1, 1};
  const double tau = 1.0;
  std::vector<float> out(kDim), scratch;
  centered_clip(points, kDim, weights, {.tau = tau, .iterations = 10}, out, scratch);
  const auto honest = mean_of(points, weights, 3);
  // At the fixed point the honest pulls balance the clipped one: tau · W_bad / W_honest = tau / 3.
  CHECK(distance(out, honest) <= tau / 3 + 1e-3);
  // The plain mean is ruined by the same point.
  CHECK(distance(std::vector<float>(kDim), mean_of(points, weights, 4)) > 1e5);
}

TEST_CASE("CenteredClip starts at the median: even a majority of pulls toward far points stays bounded", "[unit][avg]") {
  // 3 honest, 2 poisoned in opposite directions: the median start and the clipping keep the result near.
  auto points = points_near_a_centre(5, 0.01f, 3);
  for (size_t j = 0; j < kDim; ++j) {
    points[3 * kDim + j] *= 1e6f;
    points[4 * kDim + j] *= -1e6f;
  }
  std::vector<double> weights{1, 1, 1, 1, 1};
  std::vector<float> out(kDim), scratch;
  centered_clip(points, kDim, weights, {.tau = 1.0, .iterations = 10}, out, scratch);
  CHECK(distance(out, mean_of(points, weights, 3)) <= 2.0 / 3 + 1e-3);
}

TEST_CASE("CenteredClip options are checked, naming the field", "[unit][avg]") {
  CHECK(check(CenteredClipOptions{}).is_ok());
  CHECK_THAT(check({.tau = 0}).message(), Catch::Contains("tau"));
  CHECK_THAT(check({.tau = std::nan("")}).message(), Catch::Contains("tau"));
  CHECK_THAT(check({.tau = 1, .iterations = 0}).message(), Catch::Contains("iterations"));
}
