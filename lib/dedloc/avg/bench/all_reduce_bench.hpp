// The all-reduce benchmark behind `dedloc-avg bench`: times butterfly all-reduce rounds among N local peer
// processes, the way nccl-tests time an all-reduce, so that shell scripts can compare it with other
// implementations (bench/allreduce/run.sh runs it beside torch.distributed's gloo).
//
// Processes. The parent forks the N peers (peer_processes.hpp) before anything creates a ZeroMQ context,
// and talks to each through two pipes (pipe_protocol.hpp). A peer (bench_peer.hpp) builds its own context,
// server (port 0), client and AllReduce, fills its vector and reports its endpoint; the parent builds the
// group (shares, part grid: bench_plan.hpp) once and then starts every round on all peers at once with a
// fresh random 16-byte group id. A peer that dies, or does not answer within the timeout, fails the
// benchmark with a message naming it. Nothing waits without a deadline.
//
// What is timed: each peer times its AllReduce::run(); a round takes as long as its slowest peer. The
// first round (warm-up: connections, first touch of the buffers) is not counted. Vectors are allocated and
// touched once and reused (synthetic_vector.hpp): every peer checks its own result after the timed part.
//
// Figures (as nccl-tests define them for all-reduce): algorithm bandwidth = bytes / time, bus bandwidth =
// algbw · 2(n−1)/n, the bytes every link of an optimal all-reduce carries. GB are 10^9 bytes.
//
// Correctness: without compression the largest error relative to max|c·g| must stay within 1e-5 (f32
// rounding); with a codec, within 3 × the codec's documented bound (avg::error_bound of the values sent,
// once on the way in and once for the delta back) plus the same f32 slack.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "dedloc/avg/bench/bench_plan.hpp"

namespace dedloc::avg::bench {

struct RoundOutcome {
  std::vector<double> peer_seconds;
  double seconds = 0;      // the slowest peer
  double cpu_seconds = 0;  // all peers' processes together
  double max_rel_error = 0;
  double tolerance_rel = 0;
};

struct BenchReport {
  std::vector<RoundOutcome> rounds;  // the timed ones (the warm-up round is left out)
  bool wrong = false;                // a result outside its tolerance, or not wholly averaged
  std::string wrong_why;             // the last such finding, in words

  // Over the timed rounds: medians, nccl-tests' bandwidths in GB/s, the worst error and its tolerance.
  double median_seconds = 0;
  double median_cpu_seconds = 0;
  double algbw_gbps = 0;
  double busbw_gbps = 0;
  double max_rel_error = 0;
  double tolerance_rel = 0;
};

// Runs the benchmark that `plan` (from plan_all_reduce_bench(options)) describes. Call it from a process
// that has no ZeroMQ context or other threads yet: it forks. A wrong result is a report with `wrong` set;
// errors are a peer that failed or died (kUnavailable, kMalformed, ...), a deadline (kTimeout), or
// `interrupted` turning true (kCancelled). Leaves no peer process behind.
Result<BenchReport> run_all_reduce_bench(const BenchOptions& options, const BenchPlan& plan,
                                         const std::function<bool()>& interrupted = {});

}  // namespace dedloc::avg::bench
