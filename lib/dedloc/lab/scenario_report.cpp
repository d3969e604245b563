#include "dedloc/lab/scenario_report.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <sstream>

namespace dedloc::lab {

namespace {

double seconds(Duration d) { return std::chrono::duration<double>(d).count(); }

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

bool is_step(const std::string& event) {
  return event == "averaged" || event == "alone" || event == "local" || event == "skipped";
}

}  // namespace

nlohmann::json build_report(const RunRecord& run) {
  const Scenario& s = *run.scenario;
  const double window = std::max(1e-9, seconds(run.end - run.warm));
  std::map<size_t, size_t> host_of_process;
  for (size_t h = 0; h < run.hosts.size(); ++h) host_of_process[run.hosts[h].process] = h;

  std::map<std::uint64_t, TimePoint> epoch_first_reached;
  std::uint64_t samples = 0;
  size_t steps_reported = 0, steps_averaged = 0;
  std::map<size_t, std::pair<std::optional<TimePoint>, std::optional<TimePoint>>> join_progress;  // loaded, averaged
  for (const OutputLine& line : run.lines) {
    if (line.text.empty() || line.text[0] != '{') continue;
    const auto j = nlohmann::json::parse(line.text, nullptr, false);
    if (!j.is_object() || !j.contains("event") || !j["event"].is_string()) continue;
    const std::string event = j["event"];
    const auto& starts = run.starts[line.process];
    // Joiners: lines after a (re)start past the first seconds of the run.
    if (!starts.empty() && starts.back() > run.start + std::chrono::seconds(5) && line.at >= starts.back()) {
      auto& [loaded, averaged] = join_progress[line.process];
      if (event == "loaded_state" && !loaded) loaded = line.at;
      if (event == "averaged" && !averaged) averaged = line.at;
    }
    if (!is_step(event) || !j.contains("epoch")) continue;
    const std::uint64_t epoch = j.value("epoch", std::uint64_t{0});
    auto [it, fresh] = epoch_first_reached.emplace(epoch, line.at);
    if (!fresh && line.at < it->second) it->second = line.at;
    if (line.at < run.warm || line.at > run.end) continue;
    ++steps_reported;
    steps_averaged += event == "averaged";
    if (event != "skipped") samples += j.value("samples", std::uint64_t{0});
  }
  size_t global_steps = 0;
  std::uint64_t last_epoch = 0;
  for (const auto& [epoch, at] : epoch_first_reached) {
    last_epoch = std::max(last_epoch, epoch);
    global_steps += at >= run.warm && at <= run.end;
  }

  nlohmann::json groups = nlohmann::json::object();
  for (size_t g = 0; g < s.groups.size(); ++g) {
    const PeerGroup& group = s.groups[g];
    std::vector<double> per_step, up, down, rss, cpu;
    for (size_t h = 0; h < run.hosts.size(); ++h) {
      if (run.hosts[h].group != static_cast<int>(g)) continue;
      const double sent = static_cast<double>(run.at_end.hosts[h].bytes_sent - run.at_warmup.hosts[h].bytes_sent);
      const double received =
          static_cast<double>(run.at_end.hosts[h].bytes_received - run.at_warmup.hosts[h].bytes_received);
      if (global_steps > 0) per_step.push_back(sent / static_cast<double>(global_steps));
      if (group.link.upload > 0) up.push_back(sent / (group.link.upload * window));
      if (group.link.download > 0) down.push_back(received / (group.link.download * window));
      rss.push_back(run.hosts[h].rss_mib);
      cpu.push_back(run.hosts[h].cpu_seconds / window);
    }
    groups[group.name] = {{"count", group.count},
                          {"role", role_name(group.role)},
                          {"nat", group.nat},
                          {"bytes_sent_per_step", median(per_step)},
                          {"upload_utilization", median(up)},
                          {"download_utilization", median(down)},
                          {"rss_mib", median(rss)},
                          {"cpu_share", median(cpu)}};
  }

  nlohmann::json peers = nlohmann::json::array();
  for (size_t h = 0; h < run.hosts.size(); ++h) {
    const HostRecord& host = run.hosts[h];
    const double sent = static_cast<double>(run.at_end.hosts[h].bytes_sent - run.at_warmup.hosts[h].bytes_sent);
    const double received = static_cast<double>(run.at_end.hosts[h].bytes_received - run.at_warmup.hosts[h].bytes_received);
    peers.push_back({{"name", host.name},
                     {"bytes_sent", sent},
                     {"bytes_received", received},
                     {"bytes_sent_per_step", global_steps ? sent / static_cast<double>(global_steps) : 0.0},
                     {"upload_utilization", host.link.upload > 0 ? sent / (host.link.upload * window) : 0.0},
                     {"download_utilization", host.link.download > 0 ? received / (host.link.download * window) : 0.0},
                     {"rss_mib", host.rss_mib},
                     {"cpu_share", host.cpu_seconds / window}});
  }

  nlohmann::json joiners = nlohmann::json::array();
  std::vector<double> catch_up;
  for (const auto& [process, progress] : join_progress) {
    const TimePoint started = run.starts[process].back();
    nlohmann::json j = {{"peer", run.hosts[host_of_process[process]].name}, {"started_s", seconds(started - run.start)}};
    j["to_state_s"] = progress.first ? nlohmann::json(seconds(*progress.first - started)) : nlohmann::json(nullptr);
    j["to_averaged_step_s"] = progress.second ? nlohmann::json(seconds(*progress.second - started)) : nlohmann::json(nullptr);
    if (progress.second) catch_up.push_back(seconds(*progress.second - started));
    joiners.push_back(j);
  }

  const double steps_per_second = static_cast<double>(global_steps) / window;
  nlohmann::json report = {
      {"scenario", s.source},
      {"peers", s.peer_count()},
      {"duration_s", seconds(run.end - run.start)},
      {"window_s", window},
      {"global_steps", global_steps},
      {"last_epoch", last_epoch},
      {"global_steps_per_s", steps_per_second},
      {"samples_per_s", static_cast<double>(samples) / window},
      {"step_reports", steps_reported},
      {"averaged_fraction", steps_reported ? static_cast<double>(steps_averaged) / static_cast<double>(steps_reported) : 0.0},
      {"groups", groups},
      {"hosts", peers},
      {"joiners", joiners},
      {"joiner_to_averaged_step_median_s", median(catch_up)},
      {"emulator", {{"cpu_s", run.at_end.cpu_seconds - run.at_warmup.cpu_seconds},
                    {"dropped_nat", run.at_end.dropped_nat},
                    {"dropped_overflow", run.at_end.dropped_overflow}}}};
  if (run.predicted_steps_per_second > 0) {
    report["predicted_steps_per_s"] = run.predicted_steps_per_second;
    report["measured_over_predicted"] = steps_per_second / run.predicted_steps_per_second;
  } else {
    report["prediction"] = run.prediction_note;
  }
  return report;
}

std::string describe_report(const nlohmann::json& r) {
  std::ostringstream out;
  out.precision(3);
  out << r["scenario"].get<std::string>() << ": " << r["peers"] << " peers, measured over " << r["window_s"].get<double>()
      << " s\n";
  out << "  global steps " << r["global_steps"] << " (" << r["global_steps_per_s"].get<double>() << "/s";
  if (r.contains("predicted_steps_per_s")) {
    out << "; planner predicts " << r["predicted_steps_per_s"].get<double>() << "/s, measured/predicted "
        << r["measured_over_predicted"].get<double>();
  }
  out << "), " << r["samples_per_s"].get<double>() << " samples/s, " << 100 * r["averaged_fraction"].get<double>()
      << "% of step reports averaged\n";
  for (const auto& [name, g] : r["groups"].items()) {
    out << "  " << name << " (" << g["count"] << " " << g["role"].get<std::string>() << (g["nat"].get<bool>() ? ", NAT" : "")
        << "): " << g["bytes_sent_per_step"].get<double>() / 1e6 << " MB sent per step, upload "
        << 100 * g["upload_utilization"].get<double>() << "% / download " << 100 * g["download_utilization"].get<double>()
        << "% used, " << g["rss_mib"].get<double>() << " MiB RSS, " << 100 * g["cpu_share"].get<double>() << "% of a core\n";
  }
  if (!r["joiners"].empty()) {
    out << "  " << r["joiners"].size() << " joiners; median time to the first averaged step "
        << r["joiner_to_averaged_step_median_s"].get<double>() << " s\n";
  }
  return out.str();
}

}  // namespace dedloc::lab
