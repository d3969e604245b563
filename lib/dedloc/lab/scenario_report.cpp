#include "dedloc/lab/scenario_report.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <sstream>

#include "dedloc/net/peer_address.hpp"

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

// The peer id a donor's address names (net::PeerAddress: "/p/<id>", or the key of an encrypted endpoint);
// the whole address when it names none.
std::string peer_of(const std::string& address) {
  auto parsed = net::PeerAddress::parse(address);
  return parsed && parsed->peer_id ? parsed->peer_id->to_string() : address;
}

// How downloads spread over donors: how many, from how many donors, the most any one served, and the
// median download time.
nlohmann::json donor_load(const std::vector<std::pair<std::string, double>>& downloads,
                          const std::map<std::string, std::string>& name_of_peer) {
  std::map<std::string, size_t> served;
  std::vector<double> seconds;
  for (const auto& [donor, took] : downloads) {
    ++served[donor];
    seconds.push_back(took);
  }
  size_t most = 0;
  std::string busiest;
  for (const auto& [donor, count] : served) {
    if (count > most) {
      most = count;
      const auto name = name_of_peer.find(donor);
      busiest = name == name_of_peer.end() ? donor : name->second;
    }
  }
  return {{"downloads", downloads.size()},
          {"donors", served.size()},
          {"max_per_donor", most},
          {"busiest_donor", busiest},
          {"median_download_s", median(seconds)}};
}

}  // namespace

nlohmann::json build_report(const RunRecord& run) {
  const Scenario& s = *run.scenario;
  const double window = std::max(1e-9, seconds(run.end - run.warm));
  std::map<size_t, size_t> host_of_process;
  for (size_t h = 0; h < run.hosts.size(); ++h) host_of_process[run.hosts[h].process] = h;

  std::map<std::uint64_t, TimePoint> epoch_first_reached;
  std::uint64_t samples = 0, samples_averaged = 0;
  size_t steps_reported = 0, steps_averaged = 0;
  size_t missed_rounds = 0;  // rounds a peer sat out and loaded the result of (TrainerEvent::missed_round)
  size_t taken_results = 0;  // rounds missed whose carriers' result a peer stepped with (TrainerEvent::took_result_from)
  size_t nonfinite_losses = 0;
  double longest_round_over_deadline = 0;
  std::map<std::string, std::string> name_of_peer;  // peer id -> lab host name, from the ready lines
  std::vector<std::pair<std::string, double>> downloads;                 // (donor peer id, seconds)
  std::map<size_t, std::vector<std::pair<std::string, double>>> wave_downloads;  // per joining group
  // ... and of those, each joiner's first: its join, the download a crowd of newcomers makes at once
  std::map<size_t, std::vector<std::pair<std::string, double>>> wave_joins;
  std::set<size_t> joined;  // processes whose first download is in wave_joins
  std::map<size_t, TimePoint> last_event;  // per process: its last step or download (a gap is a wait)
  double longest_gap = 0;
  std::string longest_gap_peer;
  std::map<size_t, std::pair<std::optional<TimePoint>, std::optional<TimePoint>>> join_progress;  // loaded, averaged
  std::map<size_t, std::vector<TimePoint>> averaged_at;  // per process: when it reported averaged steps
  std::map<std::uint64_t, std::map<std::string, size_t>> hashes_at;  // per epoch: parameter hashes after the step
  for (const OutputLine& line : run.lines) {
    if (line.text.empty() || line.text[0] != '{') continue;
    const auto j = nlohmann::json::parse(line.text, nullptr, false);
    if (!j.is_object()) continue;
    const size_t host = host_of_process[line.process];
    if (j.contains("peer_id") && j["peer_id"].is_string()) name_of_peer[j["peer_id"]] = run.hosts[host].name;
    if (!j.contains("event") || !j["event"].is_string()) continue;
    const std::string event = j["event"];
    if (event == "averaged") averaged_at[line.process].push_back(line.at);
    const auto& starts = run.starts[line.process];
    if (event == "loaded_state" && j.contains("donor") && j["donor"].is_string()) {
      const std::pair<std::string, double> download{peer_of(j["donor"]), j.value("download_seconds", 0.0)};
      downloads.push_back(download);
      const int group = run.hosts[host].group;
      if (group >= 0 && s.groups[static_cast<size_t>(group)].join_at > Duration::zero() && starts.size() == 1) {
        wave_downloads[static_cast<size_t>(group)].push_back(download);  // the wave's first start only
        if (joined.insert(line.process).second) wave_joins[static_cast<size_t>(group)].push_back(download);
      }
    }
    if (event == "loaded_state" && j.value("missed_round", false) && line.at >= run.warm && line.at <= run.end) {
      ++missed_rounds;
    }
    if ((is_step(event) || event == "loaded_state") && line.at >= run.warm && line.at <= run.end) {
      // Measured within one life of the process: a restart is not a wait.
      auto last = last_event.find(line.process);
      if (last != last_event.end() && (starts.empty() || last->second >= starts.back())) {
        const double gap = seconds(line.at - last->second);
        if (gap > longest_gap) {
          longest_gap = gap;
          longest_gap_peer = run.hosts[host].name;
        }
      }
      last_event[line.process] = line.at;
    }
    if (is_step(event) && event != "skipped" && (!j.contains("loss") || !j["loss"].is_number() ||
                                                 !std::isfinite(j["loss"].get<double>()))) {
      ++nonfinite_losses;  // JSON has no NaN: a non-finite loss is written as null
    }
    if (event == "averaged" && j.value("averaging_deadline", 0.0) > 0) {
      longest_round_over_deadline =
          std::max(longest_round_over_deadline, j.value("averaging_seconds", 0.0) / j.value("averaging_deadline", 1.0));
    }
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
    taken_results += event == "averaged" && j.contains("took_result_from");
    if (event != "skipped" && j.contains("params_hash") && j["params_hash"].is_string()) {
      ++hashes_at[epoch][j["params_hash"].get<std::string>()];
    }
    if (event != "skipped") samples += j.value("samples", std::uint64_t{0});
    if (event == "averaged") samples_averaged += j.value("samples", std::uint64_t{0});
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
    double peak_rss = 0;
    for (size_t h = 0; h < run.hosts.size(); ++h) {
      if (run.hosts[h].group != static_cast<int>(g)) continue;
      const double sent = static_cast<double>(run.at_end.hosts[h].bytes_sent - run.at_warmup.hosts[h].bytes_sent);
      const double received =
          static_cast<double>(run.at_end.hosts[h].bytes_received - run.at_warmup.hosts[h].bytes_received);
      if (global_steps > 0) per_step.push_back(sent / static_cast<double>(global_steps));
      if (group.link.upload > 0) up.push_back(sent / (group.link.upload * window));
      if (group.link.download > 0) down.push_back(received / (group.link.download * window));
      rss.push_back(run.hosts[h].rss_mib);
      peak_rss = std::max(peak_rss, run.hosts[h].peak_rss_mib);
      cpu.push_back(run.hosts[h].cpu_seconds / window);
    }
    groups[group.name] = {{"count", group.count},
                          {"role", role_name(group.role)},
                          {"nat", group.nat},
                          {"bytes_sent_per_step", median(per_step)},
                          {"upload_utilization", median(up)},
                          {"download_utilization", median(down)},
                          {"rss_mib", median(rss)},
                          {"peak_rss_mib", peak_rss},
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
                     {"peak_rss_mib", host.peak_rss_mib},
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

  // A group that joined at once (join_at): how its joiners spread over the donors, and how soon they
  // had the state and averaged.
  nlohmann::json waves = nlohmann::json::object();
  for (size_t g = 0; g < s.groups.size(); ++g) {
    if (s.groups[g].join_at <= Duration::zero()) continue;
    std::vector<double> to_state, to_averaged;
    for (const auto& [process, progress] : join_progress) {
      const size_t h = host_of_process[process];
      if (run.hosts[h].group != static_cast<int>(g) || run.starts[process].size() != 1) continue;
      const TimePoint started = run.starts[process].front();
      if (progress.first) to_state.push_back(seconds(*progress.first - started));
      if (progress.second) to_averaged.push_back(seconds(*progress.second - started));
    }
    // Every download its joiners made while the run lasted (rounds sat out and resyncs too), and their
    // joins alone: the crowd that arrives at once, which must not all pick one donor.
    nlohmann::json wave = donor_load(wave_downloads[g], name_of_peer);
    wave["join"] = donor_load(wave_joins[g], name_of_peer);
    wave["joiners"] = s.groups[g].count;
    wave["to_state_median_s"] = median(to_state);
    wave["to_averaged_step_median_s"] = median(to_averaged);
    wave["averaged"] = to_averaged.size();
    waves[s.groups[g].name] = wave;
  }

  // Each link taken down (link_down): how soon its peer averaged a step again once the link was back, and
  // how many steps it averaged from then on (null and 0: it never did, cut off from the swarm for good).
  nlohmann::json outages = nlohmann::json::array();
  for (const Fault& f : s.faults) {
    if (f.kind != Fault::Kind::kLinkDown) continue;
    const auto host = std::find_if(run.hosts.begin(), run.hosts.end(), [&](const HostRecord& h) { return h.name == f.target; });
    if (host == run.hosts.end()) continue;
    const TimePoint back = run.start + f.at + f.length;
    std::optional<TimePoint> first;
    size_t averaged_after = 0;
    for (const TimePoint at : averaged_at[host->process]) {
      if (at < back) continue;
      ++averaged_after;
      if (!first || at < *first) first = at;
    }
    outages.push_back({{"peer", f.target},
                       {"down_at_s", seconds(f.at)},
                       {"down_for_s", seconds(f.length)},
                       {"back_to_averaged_s", first ? nlohmann::json(seconds(*first - back)) : nlohmann::json(nullptr)},
                       {"averaged_after", averaged_after}});
  }

  // One model: whether the trainers that reached an epoch by a step hold the same parameters there.
  size_t epochs_hashed = 0, epochs_one_hash = 0, steps_hashed = 0, steps_on_majority = 0;
  for (const auto& [epoch, hashes] : hashes_at) {
    size_t all = 0, most = 0;
    for (const auto& [hash, count] : hashes) {
      all += count;
      most = std::max(most, count);
    }
    if (all < 2) continue;
    ++epochs_hashed;
    epochs_one_hash += hashes.size() == 1;
    steps_hashed += all;
    steps_on_majority += most;
  }
  const nlohmann::json one_model = {
      {"epochs", epochs_hashed},
      {"epochs_one_hash", epochs_one_hash},
      {"steps", steps_hashed},
      {"steps_on_epoch_majority", steps_on_majority},
      {"fraction_on_majority", steps_hashed ? static_cast<double>(steps_on_majority) / static_cast<double>(steps_hashed) : 0.0}};

  // Packets the links' queues dropped in the window (tail drop at an upload or a download: TCP's losses).
  std::uint64_t dropped_queue = 0;
  for (size_t h = 0; h < run.at_end.hosts.size(); ++h) {
    dropped_queue += run.at_end.hosts[h].dropped_queue -
                     (h < run.at_warmup.hosts.size() ? run.at_warmup.hosts[h].dropped_queue : 0);
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
      {"averaged_samples_per_s", static_cast<double>(samples_averaged) / window},
      {"averaged_fraction", steps_reported ? static_cast<double>(steps_averaged) / static_cast<double>(steps_reported) : 0.0},
      // The same over the rounds peers sat out too (loaded instead of stepping): what share of the rounds a
      // peer was in for ended in a group.
      {"missed_rounds", missed_rounds},
      // Of the averaged steps, those that took a missed round's result from a carrier: no samples of theirs in it.
      {"taken_results", taken_results},
      {"averaged_fraction_of_rounds", steps_reported + missed_rounds
                                          ? static_cast<double>(steps_averaged) / static_cast<double>(steps_reported + missed_rounds)
                                          : 0.0},
      {"nonfinite_losses", nonfinite_losses},
      {"longest_round_over_deadline", longest_round_over_deadline},
      {"longest_wait_s", longest_gap},
      {"longest_wait_peer", longest_gap_peer},
      {"state_downloads", donor_load(downloads, name_of_peer)},
      {"waves", waves},
      {"groups", groups},
      {"hosts", peers},
      {"joiners", joiners},
      {"joiner_to_averaged_step_median_s", median(catch_up)},
      {"outages", outages},
      {"one_model", one_model},
      {"emulator", {{"cpu_s", run.at_end.cpu_seconds - run.at_warmup.cpu_seconds},
                    {"mtu", s.mtu},
                    {"dropped_queue", dropped_queue},
                    {"dropped_nat", run.at_end.dropped_nat},
                    {"dropped_overflow", run.at_end.dropped_overflow}}}};
  if (run.predicted_steps_per_second > 0) {
    report["predicted_steps_per_s"] = run.predicted_steps_per_second;
    report["measured_over_predicted"] = steps_per_second / run.predicted_steps_per_second;
    if (run.predicted_synchronous_steps_per_second > 0) {
      report["predicted_synchronous_steps_per_s"] = run.predicted_synchronous_steps_per_second;
      report["measured_over_predicted_synchronous"] = steps_per_second / run.predicted_synchronous_steps_per_second;
    }
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
    if (r.contains("predicted_synchronous_steps_per_s")) {
      out << "; without overlap " << r["predicted_synchronous_steps_per_s"].get<double>() << "/s, measured/that "
          << r["measured_over_predicted_synchronous"].get<double>();
    }
  }
  out << "), " << r["samples_per_s"].get<double>() << " samples/s, " << 100 * r["averaged_fraction"].get<double>()
      << "% of step reports averaged (" << r["missed_rounds"] << " rounds sat out, " << r.value("taken_results", 0)
      << " missed rounds' results taken, "
      << 100 * r["averaged_fraction_of_rounds"].get<double>() << "% of steps and rounds sat out averaged)\n";
  for (const auto& [name, g] : r["groups"].items()) {
    out << "  " << name << " (" << g["count"] << " " << g["role"].get<std::string>() << (g["nat"].get<bool>() ? ", NAT" : "")
        << "): " << g["bytes_sent_per_step"].get<double>() / 1e6 << " MB sent per step, upload "
        << 100 * g["upload_utilization"].get<double>() << "% / download " << 100 * g["download_utilization"].get<double>()
        << "% used, " << g["rss_mib"].get<double>() << " MiB RSS (peak " << g["peak_rss_mib"].get<double>() << "), "
        << 100 * g["cpu_share"].get<double>() << "% of a core\n";
  }
  out << "  averaged samples " << r["averaged_samples_per_s"].get<double>() << "/s; non-finite losses "
      << r["nonfinite_losses"] << "; longest round " << r["longest_round_over_deadline"].get<double>()
      << "x its deadline; longest wait between a peer's steps " << r["longest_wait_s"].get<double>() << " s ("
      << r["longest_wait_peer"].get<std::string>() << ")\n";
  const auto& d = r["state_downloads"];
  out << "  state downloads " << d["downloads"] << " from " << d["donors"] << " donors, at most " << d["max_per_donor"]
      << " from one (" << d["busiest_donor"].get<std::string>() << "), median " << d["median_download_s"].get<double>() << " s\n";
  for (const auto& [name, w] : r["waves"].items()) {
    const auto& join = w["join"];
    out << "  wave " << name << ": " << w["joiners"] << " joiners, their joins from " << join["donors"]
        << " donors (at most " << join["max_per_donor"] << " from one); " << w["downloads"] << " downloads in all from "
        << w["donors"] << " donors (at most " << w["max_per_donor"] << " from one), median " << w["to_state_median_s"].get<double>()
        << " s to the state and " << w["to_averaged_step_median_s"].get<double>() << " s to an averaged step ("
        << w["averaged"] << " averaged)\n";
  }
  if (!r["joiners"].empty()) {
    out << "  " << r["joiners"].size() << " joiners; median time to the first averaged step "
        << r["joiner_to_averaged_step_median_s"].get<double>() << " s\n";
  }
  if (const auto& m = r.value("one_model", nlohmann::json::object()); m.value("epochs", 0) > 0) {
    out << "  one model: " << m["epochs_one_hash"] << " of " << m["epochs"] << " epochs with one parameter hash on every "
        << "trainer that stepped there; " << 100 * m["fraction_on_majority"].get<double>()
        << "% of the step reports on their epoch's most common hash\n";
  }
  for (const auto& o : r.value("outages", nlohmann::json::array())) {
    out << "  " << o["peer"].get<std::string>() << "'s link down " << o["down_for_s"].get<double>() << " s: ";
    if (o["back_to_averaged_s"].is_null()) out << "never averaged again\n";
    else out << "averaged again " << o["back_to_averaged_s"].get<double>() << " s after it was back (" << o["averaged_after"] << " steps)\n";
  }
  return out.str();
}

}  // namespace dedloc::lab
