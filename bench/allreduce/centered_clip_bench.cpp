// bench/allreduce: what robust aggregation costs a reducer: CenteredClip (avg/centered_clip.hpp)
// against the plain weighted mean, on one part's contributions from n senders.
//
// Both sides start from the same n decoded contributions of --part-elements floats (normal(0, 1) plus a
// per-sender offset, so every point lies within tau and only the arithmetic differs). The mean is what the
// reducer does without the clip: n weighted adds into an accumulator and one scale. CenteredClip: the
// median start, then --iterations steps (a norm and an update pass over all n points each). Reported per n:
// the median time per part over --repeats runs, the throughput in GB/s of contributions read once, and
// the ratio. Buffers are allocated and touched before timing.
//
// Usage: bench_centered_clip [--part-elements N] [--iterations L] [--repeats R]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <vector>

#include "dedloc/avg/centered_clip.hpp"
#include "dedloc/avg/float_ops.hpp"

using namespace dedloc;
using namespace dedloc::avg;
using SteadyClock = std::chrono::steady_clock;

namespace {

template <typename Work>
double median_seconds(int repeats, Work work) {
  std::vector<double> times;
  work();  // warm-up
  for (int r = 0; r < repeats; ++r) {
    auto start = SteadyClock::now();
    work();
    times.push_back(std::chrono::duration<double>(SteadyClock::now() - start).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"CenteredClip against the plain weighted mean on one part's contributions"};
  size_t part = 131072;  // 512 KiB of float32: the all-reduce's default part
  size_t iterations = 10;
  int repeats = 21;
  app.add_option("--part-elements", part, "floats per part")->check(CLI::PositiveNumber);
  app.add_option("--iterations", iterations, "CenteredClip iterations")->check(CLI::Range(1, 1000));
  app.add_option("--repeats", repeats, "timed runs; the median is reported")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);

  std::printf("one part of %zu floats, CenteredClip with %zu iterations, medians of %d runs\n\n", part, iterations,
              repeats);
  std::printf("| senders | mean (ms) | centered clip (ms) | mean GB/s | clip GB/s | clip / mean |\n");
  std::printf("|---:|---:|---:|---:|---:|---:|\n");
  for (size_t n : {4, 8, 16}) {
    std::mt19937 rng(static_cast<std::uint32_t>(n));
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> points(n * part);
    for (size_t i = 0; i < n; ++i) {
      for (size_t j = 0; j < part; ++j) points[i * part + j] = normal(rng) * 0.001f + static_cast<float>(i) * 1e-6f;
    }
    std::vector<double> weights(n, 1.0);
    std::vector<float> out(part), scratch;
    const double mean_s = median_seconds(repeats, [&] {
      std::fill(out.begin(), out.end(), 0.0f);
      for (size_t i = 0; i < n; ++i) {
        float_ops::add_scaled(out, static_cast<float>(weights[i]), reinterpret_cast<const std::uint8_t*>(&points[i * part]));
      }
      float_ops::scale(out, static_cast<float>(1.0 / static_cast<double>(n)));
    });
    const double clip_s = median_seconds(repeats, [&] {
      centered_clip(points, part, weights, {.tau = 1e3, .iterations = iterations}, out, scratch);
    });
    const double gigabytes = static_cast<double>(n * part * sizeof(float)) / 1e9;
    std::printf("| %zu | %.3f | %.3f | %.2f | %.2f | %.1fx |\n", n, mean_s * 1e3, clip_s * 1e3, gigabytes / mean_s,
                gigabytes / clip_s, clip_s / mean_s);
  }
  return 0;
}
