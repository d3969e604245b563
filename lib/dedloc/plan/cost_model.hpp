// The cost model every plan and every classic strategy is judged by (docs/planner.md; DeDLOC §3.2).
//
// One optimizer step: the computing peers (c_i = 1) together compute B samples at Σ c_i·s_i samples/s,
// then average a gradient of G = P × (bytes per value) bytes. Reducer i owns the share w_i of the vector
// (Σ w_i = 1): each computing peer streams w_i·G bytes to i and receives w_i·G averaged bytes back.
// Compute and communication are pipelined (DeDLOC's steady-state flow model), so the step rate is
//
//   r = min( Σ c_i s_i / B ,  min_i u_i / T_i ,  min_i d_i / T_i ,  min_{i,j} t_ij / T_ij )   steps/s
//
// with the bytes a peer moves per step, the same in each direction (what it sends to reducers equals
// what it gets back; what it receives as a reducer equals what it returns):
//
//   T_i  = G · ( c_i·(1 − w_i)  +  w_i·(C − c_i) ),     C = Σ_k c_k
//   T_ij = G · ( c_i·w_j + c_j·w_i )                     (between peers i and j, either direction)
//
// Client-mode peers have w_i = 0. The classic strategies are points of this model (each fixes c and w),
// so every prediction here is comparable; the ring routes through neighbours only (see predict_ring).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "dedloc/core/status.hpp"
#include "dedloc/plan/peer.hpp"

namespace dedloc::plan {

// A validated collaboration in the model's terms. Indices follow Collaboration::peers.
class CostModel {
 public:
  struct Limit {
    std::size_t a = 0;
    std::size_t b = 0;
    double rate = 0;  // bytes/s between a and b (either direction)
  };

  // Checks the input (positive batch and model size, unique names, finite non-negative compute,
  // positive bandwidth, limits naming known peers, some peer computing, some peer able to aggregate) and
  // names the offending peer or key in the error.
  [[nodiscard]] static Result<CostModel> create(const Collaboration& collaboration);

  const Collaboration& collaboration() const { return collaboration_; }
  std::size_t size() const { return collaboration_.peers.size(); }
  const PeerSpec& peer(std::size_t i) const { return collaboration_.peers[i]; }
  double gradient_bytes() const { return gradient_bytes_; }  // G
  double batch() const { return collaboration_.batch; }      // B
  // The smaller of a peer's upload and download: traffic is symmetric, so this is what binds.
  double link(std::size_t i) const;
  bool can_compute(std::size_t i) const { return peer(i).compute > 0; }
  bool can_aggregate(std::size_t i) const { return !peer(i).client_mode; }
  const std::vector<Limit>& limits() const { return limits_; }

 private:
  Collaboration collaboration_;
  double gradient_bytes_ = 0;
  std::vector<Limit> limits_;  // merged: one entry per unordered pair, the smallest rate given
};

// Who computes and who reduces which share. Sizes equal the model's peer count.
struct Assignment {
  std::vector<bool> computes;   // c_i
  std::vector<double> shares;   // w_i, Σ = 1
};

// What limits the step rate.
struct Bottleneck {
  enum class Kind { kCompute, kUpload, kDownload, kPairLimit };
  Kind kind = Kind::kCompute;
  std::size_t peer = 0;   // kUpload, kDownload, kPairLimit
  std::size_t other = 0;  // kPairLimit
};

struct StepPrediction {
  double steps_per_second = 0;    // r
  double samples_per_second = 0;  // r·B
  double step_seconds = 0;        // 1/r (infinity when r = 0)
  Bottleneck bottleneck;
  std::size_t tied_bottlenecks = 0;  // other constraints binding at the same rate (within 1e-6)
  // The step's two halves apart: computing the global batch (B / Σ c_i s_i) and averaging it at the rate of
  // the tightest link (the smallest of the communication terms of r, inverted; 0 without traffic). Pipelined,
  // a step takes the longer of the two (step_seconds); a synchronous run (compute the batch, then average,
  // then step: dedloc's synchronous mode, hivemind's optimizer) takes both, one after the other.
  double compute_seconds = 0;
  double communication_seconds = 0;
  double synchronous_steps_per_second() const;  // 1 / (compute_seconds + communication_seconds), 0 if infinite
};

// Bytes peer i moves per step in each direction (T_i above).
double peer_traffic(const CostModel& model, const Assignment& assignment, std::size_t i);
// Bytes between peers a and b per step in each direction (T_ab above).
double pair_traffic(const CostModel& model, const Assignment& assignment, std::size_t a, std::size_t b);
// The step rate of an assignment and the constraint that sets it.
StepPrediction predict(const CostModel& model, const Assignment& assignment);
// "compute", "upload of 'gpu-3'", "limit between 'a' and 'b'".
std::string describe(const CostModel& model, const Bottleneck& bottleneck);

// The best shares for a fixed compute set, ignoring pairwise limits: the group program (group_shares.hpp)
// with the computing peers as senders (client-mode ones never reduce) and every other peer that can
// aggregate as an auxiliary reducer; idle client-mode peers stay out. With `spread_compute_slack`, when
// compute rather than the network limits the step, the network slack is spread evenly over the reducers.
[[nodiscard]] Result<Assignment> balance_shares(const CostModel& model, const std::vector<bool>& computes,
                                                bool spread_compute_slack);

// The classic strategies, each under the model above. All use every peer that can compute.
enum class Strategy {
  kButterflyAllReduce,  // equal shares over the computing peers that can aggregate
  kRingAllReduce,       // reduce-scatter + all-gather around the computing peers in file order
  kParameterServer,     // the best-connected peer (that can aggregate) reduces everything
  kBytePs,              // computing peers send to the CPU-only peers, shares ∝ their links
  kGroupProgram,        // hivemind's load balancing: the group program over computing and CPU-only peers
};
std::string_view strategy_name(Strategy strategy);

struct StrategyPrediction {
  Strategy strategy{};
  bool applicable = false;
  std::string not_applicable_because;  // when !applicable
  Assignment assignment;                // when applicable (the ring's is its uniform shares)
  StepPrediction prediction;            // when applicable
};

std::vector<StrategyPrediction> predict_classic_strategies(const CostModel& model);

// Every peer that can compute does (the classic strategies' choice).
std::vector<bool> all_capable_compute(const CostModel& model);

}  // namespace dedloc::plan
