#include "dedloc/avg/centered_clip.hpp"

#include <algorithm>
#include <cmath>

#include "dedloc/avg/float_ops.hpp"

namespace dedloc::avg {

Status check(const CenteredClipOptions& options) {
  if (!(options.tau > 0) || !std::isfinite(options.tau)) {
    return error(Code::kInvalidArgument, "centered clip: tau must be a positive number (the clipping radius)");
  }
  if (options.iterations < 1 || options.iterations > 1000) {
    return error(Code::kInvalidArgument, "centered clip: iterations must be between 1 and 1000");
  }
  return Status::ok();
}

namespace {

using float_ops::Float4;
using float_ops::load4;
using float_ops::store4;

// Sorts v[0..n) element-wise (each lane on its own) with odd-even transposition: n rounds of
// compare-exchanges between neighbours, branch-free, so four coordinates sort at once in vector lanes.
template <typename T>
void sort_lanes(T* v, size_t n) {
  for (size_t round = 0; round < n; ++round) {
    for (size_t i = round % 2; i + 1 < n; i += 2) {
      const T low = v[i] < v[i + 1] ? v[i] : v[i + 1];
      const T high = v[i] < v[i + 1] ? v[i + 1] : v[i];
      v[i] = low;
      v[i + 1] = high;
    }
  }
}

template <typename T>
T middle_of_sorted(const T* v, size_t n) {
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) * 0.5f;
}

// The coordinate-wise median of `count` points of `dim` floats, four coordinates at a time.
void coordinate_median(std::span<const float> points, size_t count, size_t dim, std::span<float> out) {
  std::vector<Float4> column(count);
  size_t j = 0;
  for (; j + 4 <= dim; j += 4) {
    for (size_t i = 0; i < count; ++i) column[i] = load4(&points[i * dim + j]);
    sort_lanes(column.data(), count);
    store4(&out[j], middle_of_sorted(column.data(), count));
  }
  std::vector<float> single(count);
  for (; j < dim; ++j) {
    for (size_t i = 0; i < count; ++i) single[i] = points[i * dim + j];
    sort_lanes(single.data(), count);
    out[j] = middle_of_sorted(single.data(), count);
  }
}

// ‖x − v‖², four lanes of float partial sums (each over dim/4 terms), added up in double.
double squared_distance(const float* x, const float* v, size_t dim) {
  Float4 sum{0, 0, 0, 0};
  size_t j = 0;
  for (; j + 4 <= dim; j += 4) {
    const Float4 d = load4(x + j) - load4(v + j);
    sum += d * d;
  }
  double total = static_cast<double>(sum[0]) + sum[1] + sum[2] + sum[3];
  for (; j < dim; ++j) total += static_cast<double>(x[j] - v[j]) * (x[j] - v[j]);
  return total;
}

}  // namespace

void centered_clip(std::span<const float> points, size_t dim, std::span<const double> weights,
                   const CenteredClipOptions& options, std::span<float> out, std::vector<float>& scratch) {
  const size_t count = weights.size();
  if (count == 0 || dim == 0) return;
  // Start at the coordinate-wise median: no single contribution can move it far.
  coordinate_median(points, count, dim, out);

  double total = 0;
  for (double w : weights) total += w;
  if (!(total > 0)) return;
  scratch.resize(dim);
  std::vector<double> pull(count);
  for (size_t iteration = 0; iteration < options.iterations; ++iteration) {
    // Each point's pull: its weight share, scaled down so that its step toward it is at most tau long.
    double kept = 1;  // of v itself: v' = (1 − Σ pull_i) v + Σ pull_i x_i = v + Σ pull_i (x_i − v)
    for (size_t i = 0; i < count; ++i) {
      const double distance = std::sqrt(squared_distance(&points[i * dim], out.data(), dim));
      pull[i] = weights[i] * (distance > options.tau ? options.tau / distance : 1.0) / total;
      kept -= pull[i];
    }
    std::span<float> next(scratch.data(), dim);
    std::copy(out.begin(), out.end(), next.begin());
    float_ops::scale(next, static_cast<float>(kept));
    for (size_t i = 0; i < count; ++i) {
      if (pull[i] == 0) continue;
      float_ops::add_scaled(next, static_cast<float>(pull[i]), reinterpret_cast<const std::uint8_t*>(&points[i * dim]));
    }
    std::copy(next.begin(), next.end(), out.begin());
  }
}

}  // namespace dedloc::avg
