#include "dedloc/plan/report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "dedloc/plan/units.hpp"

namespace dedloc::plan {
namespace {

// A share below this is rounding noise, not an aggregation role.
constexpr double kNoShare = 1e-12;

std::string format(const char* pattern, double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, pattern, value);
  return buffer;
}

std::string format_seconds(double seconds) {
  if (!std::isfinite(seconds)) return "inf";
  return seconds >= 1 ? format("%.3g s", seconds) : format("%.3g ms", seconds * 1e3);
}

std::string bytes(double count) { return format_count(count) + "B"; }

std::string bottleneck_line(const CostModel& model, const StepPrediction& prediction) {
  std::string line = describe(model, prediction.bottleneck);
  if (prediction.tied_bottlenecks > 0) line += " (+" + std::to_string(prediction.tied_bottlenecks) + " tied)";
  return line;
}

// Left-aligned columns sized to their widest cell.
class Table {
 public:
  explicit Table(std::vector<std::string> header) { rows_.push_back(std::move(header)); }
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  void print(std::ostream& out) const {
    std::vector<std::size_t> width(rows_.front().size(), 0);
    for (const auto& row : rows_) {
      for (std::size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
    }
    for (const auto& row : rows_) {
      std::string line;
      for (std::size_t c = 0; c < row.size(); ++c) {
        line += row[c];
        if (c + 1 < row.size()) line += std::string(width[c] - row[c].size() + 2, ' ');
      }
      out << line << "\n";
    }
  }

 private:
  std::vector<std::vector<std::string>> rows_;
};

// "synchronous" or "diloco, H=8".
std::string mode_label(const ModePrediction& m) {
  if (m.mode.mode == CollaborationMode::kSynchronous) return "synchronous";
  return "diloco, H=" + std::to_string(m.mode.inner_steps);
}

// "compute" or "communication: upload of 'a' (+2 tied)".
std::string bound_line(const ModePrediction& m) {
  const auto& p = m.plan.prediction;
  if (m.bound() == Bound::kCompute) return bottleneck_line(m.plan.model, p);
  return "communication: " + bottleneck_line(m.plan.model, p);
}

std::size_t busiest_uploader(const ModePrediction& m) {
  const auto& u = m.upload_bytes_per_sample;
  return static_cast<std::size_t>(std::max_element(u.begin(), u.end()) - u.begin());
}

// What both modes' JSON say of a prediction, without the plan.
nlohmann::json mode_summary_json(const ModePrediction& m) {
  const auto& p = m.plan.prediction;
  return nlohmann::json{{"mode", mode_name(m.mode.mode)},
                        {"inner_steps", m.mode.mode == CollaborationMode::kDiloco ? m.mode.inner_steps : 0},
                        {"global_batch", m.global_batch},
                        {"averaged_batch", m.averaged_batch},
                        {"steps_per_second", p.steps_per_second},
                        {"step_seconds", std::isfinite(p.step_seconds) ? nlohmann::json(p.step_seconds) : nlohmann::json()},
                        {"samples_per_second", p.samples_per_second},
                        {"bound", bound_name(m.bound())},
                        {"bound_by", describe(m.plan.model, p.bottleneck)},
                        {"upload_bytes_per_sample", m.swarm_upload_bytes_per_sample()},
                        {"max_upload_bytes_per_sample", m.max_upload_bytes_per_sample()}};
}

}  // namespace

std::string_view role_name(const PeerRole& role) {
  bool aggregates = role.share > kNoShare;
  if (role.computes) return aggregates ? "compute+aggregate" : "compute";
  return aggregates ? "aggregate" : "idle";
}

std::string format_plan_table(const CollaborationPlan& plan) {
  const CostModel& model = plan.model;
  const Collaboration& c = model.collaboration();
  std::ostringstream out;
  out << model.size() << " peers, batch " << format("%g", c.batch) << ", model " << format_count(c.params)
      << " params x " << format("%g", bytes_per_value(c.codec)) << " B (" << codec_name(c.codec)
      << ") = " << bytes(model.gradient_bytes()) << " per gradient\n";
  out << "method: " << plan.method_note << "\n\n";

  Table peers({"peer", "compute", "download", "upload", "mode", "role", "share", "send=recv", "link use"});
  for (std::size_t i = 0; i < model.size(); ++i) {
    const auto& p = model.peer(i);
    const auto& role = plan.roles[i];
    peers.add({p.name, format("%g/s", p.compute), format_rate(p.download), format_rate(p.upload),
               p.client_mode ? "client" : "node", std::string(role_name(role)), format("%.2f%%", role.share * 100),
               format_rate(role.send_rate), format("%.0f%%", role.link_utilization * 100)});
  }
  peers.print(out);

  const auto& best = plan.prediction;
  out << "\npredicted: " << format("%.4g", best.steps_per_second) << " steps/s (" << format_seconds(best.step_seconds)
      << " per step), " << format("%.4g", best.samples_per_second) << " samples/s; bound by "
      << bottleneck_line(model, best) << "\n";
  out << "synchronous (compute the batch, then average it, as collaboration.mode synchronous does): "
      << format("%.4g", best.synchronous_steps_per_second()) << " steps/s (" << format_seconds(best.compute_seconds)
      << " computing + " << format_seconds(best.communication_seconds) << " averaging)\n\n";

  Table strategies({"strategy", "step time", "samples/s", "plan speedup", "bound by"});
  strategies.add({"DeDLOC plan (this)", format_seconds(best.step_seconds), format("%.4g", best.samples_per_second),
                  "1.00x", bottleneck_line(model, best)});
  for (const auto& s : plan.strategies) {
    if (!s.applicable) {
      strategies.add({std::string(strategy_name(s.strategy)), "n/a", "n/a", "n/a", s.not_applicable_because});
      continue;
    }
    const auto& p = s.prediction;
    std::string speedup = p.steps_per_second > 0 ? format("%.2fx", best.steps_per_second / p.steps_per_second) : "inf";
    strategies.add({std::string(strategy_name(s.strategy)), format_seconds(p.step_seconds),
                    format("%.4g", p.samples_per_second), speedup, bottleneck_line(model, p)});
  }
  strategies.print(out);
  return out.str();
}

nlohmann::json plan_to_json(const CollaborationPlan& plan) {
  const CostModel& model = plan.model;
  const Collaboration& c = model.collaboration();
  auto prediction_json = [&](const StepPrediction& p) {
    return nlohmann::json{{"steps_per_second", p.steps_per_second},
                          {"step_seconds", std::isfinite(p.step_seconds) ? nlohmann::json(p.step_seconds) : nlohmann::json()},
                          {"samples_per_second", p.samples_per_second},
                          {"bound_by", describe(model, p.bottleneck)},
                          {"tied_bottlenecks", p.tied_bottlenecks},
                          {"synchronous_steps_per_second", p.synchronous_steps_per_second()}};
  };
  nlohmann::json out;
  out["method"] = method_name(plan.method);
  out["method_note"] = plan.method_note;
  out["batch"] = c.batch;
  out["params"] = c.params;
  out["codec"] = codec_name(c.codec);
  out["gradient_bytes"] = model.gradient_bytes();
  out["prediction"] = prediction_json(plan.prediction);
  out["peers"] = nlohmann::json::array();
  for (std::size_t i = 0; i < model.size(); ++i) {
    const auto& p = model.peer(i);
    const auto& role = plan.roles[i];
    out["peers"].push_back({{"name", p.name},
                            {"compute", p.compute},
                            {"download", p.download},
                            {"upload", p.upload},
                            {"client_mode", p.client_mode},
                            {"role", role_name(role)},
                            {"computes", role.computes},
                            {"share", role.share},
                            {"traffic_bytes_per_step", role.traffic_bytes},
                            {"send_rate", role.send_rate},
                            {"receive_rate", role.send_rate},
                            {"link_utilization", role.link_utilization}});
  }
  out["strategies"] = nlohmann::json::array();
  for (const auto& s : plan.strategies) {
    nlohmann::json entry{{"name", strategy_name(s.strategy)}, {"applicable", s.applicable}};
    if (s.applicable) {
      entry["prediction"] = prediction_json(s.prediction);
      entry["plan_speedup"] = s.prediction.steps_per_second > 0
                                  ? nlohmann::json(plan.prediction.steps_per_second / s.prediction.steps_per_second)
                                  : nlohmann::json();
    } else {
      entry["not_applicable_because"] = s.not_applicable_because;
    }
    out["strategies"].push_back(std::move(entry));
  }
  return out;
}

std::string format_mode_plan(const ModePrediction& m) {
  std::ostringstream out;
  if (m.mode.mode == CollaborationMode::kSynchronous) {
    out << "mode: synchronous, one all-reduce of the gradient per global batch of " << format("%g", m.global_batch)
        << " samples\n";
  } else {
    out << "mode: diloco, " << m.mode.inner_steps << " inner steps per outer step: one all-reduce of the "
        << "pseudo-gradient per outer batch of " << format("%g", m.averaged_batch) << " samples ("
        << m.mode.inner_steps << " x " << format("%g", m.global_batch) << "); the steps below are outer steps\n";
  }
  out << format_plan_table(m.plan);
  const std::size_t busiest = busiest_uploader(m);
  out << "\nupload per sample: " << bytes(m.swarm_upload_bytes_per_sample()) << " from the swarm, at most "
      << bytes(m.upload_bytes_per_sample[busiest]) << " from one peer ('" << m.plan.model.peer(busiest).name
      << "'); bound by " << bound_name(m.bound()) << "\n";
  return out.str();
}

nlohmann::json mode_plan_to_json(const ModePrediction& m) {
  nlohmann::json out = plan_to_json(m.plan);  // its "batch" and "prediction" are per averaging round
  const nlohmann::json summary = mode_summary_json(m);
  for (const char* key : {"mode", "inner_steps", "global_batch", "averaged_batch", "bound", "upload_bytes_per_sample",
                          "max_upload_bytes_per_sample"}) {
    out[key] = summary[key];
  }
  for (std::size_t i = 0; i < m.upload_bytes_per_sample.size(); ++i) {
    out["peers"][i]["upload_bytes_per_sample"] = m.upload_bytes_per_sample[i];
  }
  return out;
}

std::string format_mode_comparison(const ModeComparison& c) {
  const auto& sync = c.synchronous;
  const auto& diloco = c.diloco;
  const CostModel& model = sync.plan.model;
  const Collaboration& collaboration = model.collaboration();
  std::ostringstream out;
  out << model.size() << " peers, global batch " << format("%g", sync.global_batch) << ", model "
      << format_count(collaboration.params) << " params x " << format("%g", bytes_per_value(collaboration.codec))
      << " B (" << codec_name(collaboration.codec) << ") = " << bytes(model.gradient_bytes())
      << " per all-reduce; DiLoCo with " << diloco.mode.inner_steps << " inner steps per outer step\n\n";

  Table modes({"mode", "batch per all-reduce", "steps/s", "step time", "samples/s", "upload/sample (swarm)",
               "upload/sample (max peer)", "bound by"});
  for (const auto* m : {&sync, &diloco}) {
    const auto& p = m->plan.prediction;
    modes.add({mode_label(*m),
               format("%g", m->averaged_batch) + (m->mode.mode == CollaborationMode::kDiloco ? " (outer)" : ""),
               format("%.4g", p.steps_per_second), format_seconds(p.step_seconds), format("%.4g", p.samples_per_second),
               bytes(m->swarm_upload_bytes_per_sample()), bytes(m->max_upload_bytes_per_sample()), bound_line(*m)});
  }
  modes.print(out);
  const double sync_rate = sync.plan.prediction.samples_per_second;
  const double diloco_bytes = diloco.swarm_upload_bytes_per_sample();
  out << "\ndiloco over synchronous: "
      << (sync_rate > 0 ? format("%.2fx", diloco.plan.prediction.samples_per_second / sync_rate) : std::string("inf"))
      << " samples/s, " << (diloco_bytes > 0 ? format("%.3gx", sync.swarm_upload_bytes_per_sample() / diloco_bytes)
                                             : std::string("inf"))
      << " fewer bytes per sample\n\n";

  Table peers({"peer", "synchronous role", "upload/sample", "diloco role", "upload/sample"});
  for (std::size_t i = 0; i < model.size(); ++i) {
    peers.add({model.peer(i).name, std::string(role_name(sync.plan.roles[i])), bytes(sync.upload_bytes_per_sample[i]),
               std::string(role_name(diloco.plan.roles[i])), bytes(diloco.upload_bytes_per_sample[i])});
  }
  peers.print(out);
  return out.str();
}

nlohmann::json mode_comparison_to_json(const ModeComparison& c) {
  const CostModel& model = c.synchronous.plan.model;
  const Collaboration& collaboration = model.collaboration();
  nlohmann::json out;
  out["global_batch"] = c.synchronous.global_batch;
  out["inner_steps"] = c.diloco.mode.inner_steps;
  out["params"] = collaboration.params;
  out["codec"] = codec_name(collaboration.codec);
  out["gradient_bytes"] = model.gradient_bytes();
  for (const auto* m : {&c.synchronous, &c.diloco}) {
    nlohmann::json entry = mode_summary_json(*m);
    entry["method"] = method_name(m->plan.method);
    entry["peers"] = nlohmann::json::array();
    for (std::size_t i = 0; i < model.size(); ++i) {
      entry["peers"].push_back({{"name", model.peer(i).name},
                                {"role", role_name(m->plan.roles[i])},
                                {"upload_bytes_per_sample", m->upload_bytes_per_sample[i]}});
    }
    out[std::string(mode_name(m->mode.mode))] = std::move(entry);
  }
  const double sync_rate = c.synchronous.plan.prediction.samples_per_second;
  out["diloco_samples_speedup"] = sync_rate > 0 ? nlohmann::json(c.diloco.plan.prediction.samples_per_second / sync_rate)
                                                : nlohmann::json();
  return out;
}

}  // namespace dedloc::plan
