#include "dedloc/plan/cost_model.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "dedloc/plan/group_shares.hpp"
#include "dedloc/plan/units.hpp"

namespace dedloc::plan {
namespace {

constexpr double kTieTolerance = 1e-6;

std::string quoted(const std::string& name) { return "'" + name + "'"; }

Status check_peer(const PeerSpec& peer) {
  auto bad = [&](const std::string& what) {
    return error(Code::kInvalidArgument, "peer " + quoted(peer.name) + ": " + what);
  };
  if (peer.name.empty()) return error(Code::kInvalidArgument, "a peer has no name");
  if (!std::isfinite(peer.compute) || peer.compute < 0) {
    return bad("compute must be a finite number of samples/s >= 0 (got " + std::to_string(peer.compute) + ")");
  }
  if (!std::isfinite(peer.download) || peer.download <= 0) {
    return bad("download bandwidth must be > 0 (got " + std::to_string(peer.download) + " bytes/s)");
  }
  if (!std::isfinite(peer.upload) || peer.upload <= 0) {
    return bad("upload bandwidth must be > 0 (got " + std::to_string(peer.upload) + " bytes/s)");
  }
  return Status::ok();
}

}  // namespace

Result<CostModel> CostModel::create(const Collaboration& collaboration) {
  if (!(collaboration.batch > 0) || !std::isfinite(collaboration.batch)) {
    return error(Code::kInvalidArgument, "batch must be > 0 samples (got " + std::to_string(collaboration.batch) + ")");
  }
  if (!(collaboration.params > 0) || !std::isfinite(collaboration.params)) {
    return error(Code::kInvalidArgument,
                 "params (model size) must be > 0 (got " + std::to_string(collaboration.params) + ")");
  }
  if (collaboration.peers.empty()) return error(Code::kInvalidArgument, "no peers given");

  CostModel model;
  model.collaboration_ = collaboration;
  model.gradient_bytes_ = collaboration.params * bytes_per_value(collaboration.codec);

  std::map<std::string, std::size_t, std::less<>> index;
  bool any_compute = false;
  bool any_aggregator = false;
  for (std::size_t i = 0; i < collaboration.peers.size(); ++i) {
    const auto& peer = collaboration.peers[i];
    DEDLOC_RETURN_IF_ERROR(check_peer(peer));
    if (!index.emplace(peer.name, i).second) {
      return error(Code::kInvalidArgument, "peer name " + quoted(peer.name) + " appears twice");
    }
    any_compute |= peer.compute > 0;
    any_aggregator |= !peer.client_mode;
  }
  if (!any_compute) return error(Code::kInvalidArgument, "no peer can compute gradients (every compute is 0)");
  if (!any_aggregator) {
    return error(Code::kInvalidArgument, "no peer can aggregate: every peer is in client mode");
  }

  std::map<std::pair<std::size_t, std::size_t>, double> merged;
  for (const auto& limit : collaboration.limits) {
    auto from = index.find(limit.from);
    auto to = index.find(limit.to);
    if (from == index.end() || to == index.end()) {
      return error(Code::kInvalidArgument, "limit between " + quoted(limit.from) + " and " + quoted(limit.to) +
                                               " names an unknown peer " +
                                               quoted(from == index.end() ? limit.from : limit.to));
    }
    if (from->second == to->second) {
      return error(Code::kInvalidArgument, "limit from " + quoted(limit.from) + " to itself");
    }
    if (!std::isfinite(limit.rate) || limit.rate < 0) {
      return error(Code::kInvalidArgument, "limit between " + quoted(limit.from) + " and " + quoted(limit.to) +
                                               " must be a rate >= 0");
    }
    auto key = std::minmax(from->second, to->second);
    auto [it, inserted] = merged.emplace(std::pair{key.first, key.second}, limit.rate);
    if (!inserted) it->second = std::min(it->second, limit.rate);
  }
  for (const auto& [pair, rate] : merged) model.limits_.push_back({pair.first, pair.second, rate});
  return model;
}

double CostModel::link(std::size_t i) const { return std::min(peer(i).upload, peer(i).download); }

namespace {

double computing_peers(const Assignment& assignment) {
  return static_cast<double>(std::count(assignment.computes.begin(), assignment.computes.end(), true));
}

// T_i with C given, so predict() stays O(n).
double traffic_given(const CostModel& model, const Assignment& assignment, std::size_t i, double computing) {
  const double c_i = assignment.computes[i] ? 1 : 0;
  const double w_i = assignment.shares[i];
  return model.gradient_bytes() * (c_i * (1 - w_i) + w_i * (computing - c_i));
}

}  // namespace

double peer_traffic(const CostModel& model, const Assignment& assignment, std::size_t i) {
  return traffic_given(model, assignment, i, computing_peers(assignment));
}

double pair_traffic(const CostModel& model, const Assignment& assignment, std::size_t a, std::size_t b) {
  const double c_a = assignment.computes[a] ? 1 : 0;
  const double c_b = assignment.computes[b] ? 1 : 0;
  return model.gradient_bytes() * (c_a * assignment.shares[b] + c_b * assignment.shares[a]);
}

namespace {

// Keeps the smallest rate seen and counts the constraints that tie with it.
class BottleneckFinder {
 public:
  void offer(double rate, const Bottleneck& bottleneck) {
    if (bottleneck.kind == Bottleneck::Kind::kCompute) {
      compute_ = rate;
    } else {
      communication_ = std::min(communication_, rate);
    }
    if (rate < best_ * (1 - kTieTolerance)) {
      best_ = rate;
      bottleneck_ = bottleneck;
      ties_ = 0;
    } else if (rate <= best_ * (1 + kTieTolerance)) {
      ties_ += 1;
      best_ = std::min(best_, rate);
    }
  }
  StepPrediction result(double batch) const {
    StepPrediction p;
    p.compute_seconds = compute_ > 0 ? 1 / compute_ : std::numeric_limits<double>::infinity();
    p.communication_seconds = !std::isfinite(communication_) ? 0  // no traffic
                              : communication_ > 0           ? 1 / communication_
                                                             : std::numeric_limits<double>::infinity();
    p.steps_per_second = std::isfinite(best_) ? best_ : 0;
    p.samples_per_second = p.steps_per_second * batch;
    p.step_seconds = p.steps_per_second > 0 ? 1 / p.steps_per_second : std::numeric_limits<double>::infinity();
    p.bottleneck = bottleneck_;
    p.tied_bottlenecks = ties_;
    return p;
  }

 private:
  double best_ = std::numeric_limits<double>::infinity();
  double compute_ = 0;                                              // steps/s the compute allows
  double communication_ = std::numeric_limits<double>::infinity();  // ... the tightest link allows
  Bottleneck bottleneck_;
  std::size_t ties_ = 0;
};

}  // namespace

StepPrediction predict(const CostModel& model, const Assignment& assignment) {
  BottleneckFinder finder;
  double compute = 0;
  for (std::size_t i = 0; i < model.size(); ++i) {
    if (assignment.computes[i]) compute += model.peer(i).compute;
  }
  finder.offer(compute / model.batch(), {Bottleneck::Kind::kCompute});
  const double computing = computing_peers(assignment);
  for (std::size_t i = 0; i < model.size(); ++i) {
    double traffic = traffic_given(model, assignment, i, computing);
    if (traffic <= 0) continue;
    // Upload first: when both links are equal the upload is named.
    finder.offer(model.peer(i).upload / traffic, {Bottleneck::Kind::kUpload, i});
    finder.offer(model.peer(i).download / traffic, {Bottleneck::Kind::kDownload, i});
  }
  for (const auto& limit : model.limits()) {
    double traffic = pair_traffic(model, assignment, limit.a, limit.b);
    if (traffic <= 0) continue;
    finder.offer(limit.rate / traffic, {Bottleneck::Kind::kPairLimit, limit.a, limit.b});
  }
  return finder.result(model.batch());
}

double StepPrediction::synchronous_steps_per_second() const {
  const double seconds = compute_seconds + communication_seconds;
  return std::isfinite(seconds) && seconds > 0 ? 1 / seconds : 0;
}

std::string describe(const CostModel& model, const Bottleneck& bottleneck) {
  switch (bottleneck.kind) {
    case Bottleneck::Kind::kCompute: return "compute";
    case Bottleneck::Kind::kUpload: return "upload of " + quoted(model.peer(bottleneck.peer).name);
    case Bottleneck::Kind::kDownload: return "download of " + quoted(model.peer(bottleneck.peer).name);
    case Bottleneck::Kind::kPairLimit:
      return "limit between " + quoted(model.peer(bottleneck.peer).name) + " and " +
             quoted(model.peer(bottleneck.other).name);
  }
  return "compute";
}

std::vector<bool> all_capable_compute(const CostModel& model) {
  std::vector<bool> computes(model.size());
  for (std::size_t i = 0; i < model.size(); ++i) computes[i] = model.can_compute(i);
  return computes;
}

Result<Assignment> balance_shares(const CostModel& model, const std::vector<bool>& computes,
                                  bool spread_compute_slack) {
  std::vector<GroupMember> members;
  std::vector<std::size_t> peer_of_member;
  double compute = 0;
  for (std::size_t i = 0; i < model.size(); ++i) {
    MemberRole role;
    if (computes[i]) {
      role = model.can_aggregate(i) ? MemberRole::kNode : MemberRole::kClient;
      compute += model.peer(i).compute;
    } else if (model.can_aggregate(i)) {
      role = MemberRole::kAux;
    } else {
      continue;  // an idle client-mode peer moves nothing
    }
    // Ids only break rounding ties, which this real-valued use never reaches: leave them empty.
    members.push_back({std::string(), model.link(i), role});
    peer_of_member.push_back(i);
  }
  // ξ is in seconds per byte; compute alone allows a step every B/compute seconds.
  double min_xi = spread_compute_slack && compute > 0 ? model.batch() / compute / model.gradient_bytes() : 0.0;
  auto solution = solve_group_program(members, min_xi);
  if (!solution) return solution.status();
  Assignment assignment{computes, std::vector<double>(model.size(), 0.0)};
  for (std::size_t m = 0; m < members.size(); ++m) assignment.shares[peer_of_member[m]] = solution->weights[m];
  return assignment;
}

std::string_view strategy_name(Strategy strategy) {
  switch (strategy) {
    case Strategy::kButterflyAllReduce: return "butterfly all-reduce";
    case Strategy::kRingAllReduce: return "ring all-reduce";
    case Strategy::kParameterServer: return "parameter server";
    case Strategy::kBytePs: return "BytePS-like";
    case Strategy::kGroupProgram: return "hivemind group program";
  }
  return "unknown";
}

namespace {

StrategyPrediction not_applicable(Strategy strategy, std::string because) {
  StrategyPrediction p;
  p.strategy = strategy;
  p.not_applicable_because = std::move(because);
  return p;
}

StrategyPrediction applicable(const CostModel& model, Strategy strategy, Assignment assignment) {
  StrategyPrediction p;
  p.strategy = strategy;
  p.applicable = true;
  p.prediction = predict(model, assignment);
  p.assignment = std::move(assignment);
  return p;
}

// Shares proportional to `weight` over the peers it is positive for.
Assignment proportional(const CostModel& model, const std::vector<double>& weight) {
  Assignment assignment{all_capable_compute(model), std::vector<double>(model.size(), 0.0)};
  double total = 0;
  for (double w : weight) total += w;
  for (std::size_t i = 0; i < model.size(); ++i) assignment.shares[i] = weight[i] / total;
  return assignment;
}

StrategyPrediction predict_butterfly(const CostModel& model) {
  std::vector<double> weight(model.size(), 0.0);
  bool any = false;
  for (std::size_t i = 0; i < model.size(); ++i) {
    if (model.can_compute(i) && model.can_aggregate(i)) weight[i] = 1, any = true;
  }
  if (!any) return not_applicable(Strategy::kButterflyAllReduce, "every computing peer is in client mode");
  return applicable(model, Strategy::kButterflyAllReduce, proportional(model, weight));
}

// Ring all-reduce moves the same bytes per peer as a uniform butterfly, 2(C−1)/C·G each way, but only
// between ring neighbours, so pairwise limits apply to those C links alone (2(C−1)/C·G each), and every
// member must reduce a chunk, so client-mode peers cannot take part. It also pays 2(C−1) latency rounds
// that this bandwidth-only model does not charge.
StrategyPrediction predict_ring(const CostModel& model) {
  std::vector<std::size_t> ring;
  for (std::size_t i = 0; i < model.size(); ++i) {
    if (!model.can_compute(i)) continue;
    if (!model.can_aggregate(i)) {
      return not_applicable(Strategy::kRingAllReduce,
                            "computing peer '" + model.peer(i).name + "' is in client mode and cannot reduce a chunk");
    }
    ring.push_back(i);
  }
  std::vector<double> weight(model.size(), 0.0);
  for (std::size_t i : ring) weight[i] = 1;
  StrategyPrediction p = applicable(model, Strategy::kRingAllReduce, proportional(model, weight));
  if (ring.size() < 2) return p;
  const double members = static_cast<double>(ring.size());
  const double per_link = 2 * (members - 1) / members * model.gradient_bytes();
  // Start from the node-level prediction, then apply the limits on the ring's own links instead.
  std::vector<bool> is_member(model.size(), false);
  for (std::size_t i : ring) is_member[i] = true;
  BottleneckFinder finder;
  double compute = 0;
  for (std::size_t i : ring) compute += model.peer(i).compute;
  finder.offer(compute / model.batch(), {Bottleneck::Kind::kCompute});
  for (std::size_t i : ring) {
    finder.offer(model.peer(i).upload / per_link, {Bottleneck::Kind::kUpload, i});
    finder.offer(model.peer(i).download / per_link, {Bottleneck::Kind::kDownload, i});
  }
  for (const auto& limit : model.limits()) {
    if (!is_member[limit.a] || !is_member[limit.b]) continue;
    auto pos_a = std::find(ring.begin(), ring.end(), limit.a) - ring.begin();
    auto pos_b = std::find(ring.begin(), ring.end(), limit.b) - ring.begin();
    auto gap = std::abs(pos_a - pos_b);
    bool neighbours = gap == 1 || gap == static_cast<long>(ring.size()) - 1;
    if (neighbours) finder.offer(limit.rate / per_link, {Bottleneck::Kind::kPairLimit, limit.a, limit.b});
  }
  p.prediction = finder.result(model.batch());
  return p;
}

StrategyPrediction predict_parameter_server(const CostModel& model) {
  std::optional<std::size_t> server;
  for (std::size_t i = 0; i < model.size(); ++i) {
    if (model.can_aggregate(i) && (!server || model.link(i) > model.link(*server))) server = i;
  }
  if (!server) return not_applicable(Strategy::kParameterServer, "no peer can aggregate");
  std::vector<double> weight(model.size(), 0.0);
  weight[*server] = 1;
  return applicable(model, Strategy::kParameterServer, proportional(model, weight));
}

StrategyPrediction predict_byteps(const CostModel& model) {
  std::vector<double> weight(model.size(), 0.0);
  bool any = false;
  for (std::size_t i = 0; i < model.size(); ++i) {
    if (!model.can_compute(i) && model.can_aggregate(i)) weight[i] = model.link(i), any = true;
  }
  if (!any) return not_applicable(Strategy::kBytePs, "no CPU-only peer that can aggregate");
  return applicable(model, Strategy::kBytePs, proportional(model, weight));
}

StrategyPrediction predict_group_program(const CostModel& model) {
  auto assignment = balance_shares(model, all_capable_compute(model), /*spread_compute_slack=*/false);
  if (!assignment) return not_applicable(Strategy::kGroupProgram, assignment.status().message());
  return applicable(model, Strategy::kGroupProgram, std::move(*assignment));
}

}  // namespace

std::vector<StrategyPrediction> predict_classic_strategies(const CostModel& model) {
  return {predict_butterfly(model), predict_ring(model), predict_parameter_server(model), predict_byteps(model),
          predict_group_program(model)};
}

}  // namespace dedloc::plan
