#include "dedloc/plan/report.hpp"

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
      << bottleneck_line(model, best) << "\n\n";

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
                          {"tied_bottlenecks", p.tied_bottlenecks}};
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

}  // namespace dedloc::plan
