#include "dedloc/monitor/exposition.hpp"

#include <nlohmann/json.hpp>

#include "dedloc/monitor/prometheus_text.hpp"

namespace dedloc::monitor {

namespace {

nlohmann::json optional_number(const std::optional<double>& x) {
  return x ? nlohmann::json(*x) : nlohmann::json(nullptr);
}

nlohmann::json optional_text(const std::string& x) { return x.empty() ? nlohmann::json(nullptr) : nlohmann::json(x); }

}  // namespace

std::string state_json(const std::string& run_id, const SwarmView& view, const MonitorCounters& counters) {
  auto peers = nlohmann::json::array();
  for (const auto& p : view.peers) {
    peers.push_back({{"peer_id", p.peer_id},
                     {"role", p.role},
                     {"epoch", p.epoch},
                     {"loss", optional_number(p.loss)},
                     {"samples_per_second", p.samples_per_second},
                     {"samples_accumulated", p.samples_accumulated},
                     {"rounds", p.rounds},
                     {"contribution", p.contribution},
                     {"age_seconds", p.age_seconds},
                     {"mode", optional_text(p.mode)},
                     {"inner_steps", p.inner_steps},
                     {"bytes_sent", p.bytes_sent},
                     {"samples_computed", p.samples_computed},
                     {"bytes_per_sample", optional_number(p.bytes_per_sample)}});
  }
  nlohmann::json state = {{"run_id", run_id},
                          {"time", view.time},
                          {"epoch", view.epoch},
                          {"alive_peers", view.alive()},
                          {"trainers", view.trainers},
                          {"clients", view.clients},
                          {"aux", view.aux},
                          {"samples_per_second", view.samples_per_second},
                          {"mean_loss", optional_number(view.mean_loss)},
                          {"target_batch_size", view.target_batch_size},
                          {"samples_accumulated", view.samples_accumulated},
                          {"eta_seconds", optional_number(view.eta_seconds)},
                          {"mode", optional_text(view.mode)},
                          {"inner_steps", optional_number(view.inner_steps)},
                          {"bytes_per_sample", optional_number(view.bytes_per_sample)},
                          {"peers", std::move(peers)},
                          {"monitor", {{"polls", counters.polls},
                                       {"poll_errors", counters.poll_errors},
                                       {"last_poll_time", counters.last_poll_time}}}};
  // Peer ids are hex (swarm_view.hpp), roles one of three words and modes one of two (wire/records.cpp), so
  // nothing here can be invalid UTF-8.
  return state.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string metrics_text(const std::string& run_id, const SwarmView& view, const MonitorCounters& counters) {
  using Type = PrometheusText::Type;
  const PrometheusLabels run{{"run", run_id}};
  PrometheusText out;
  out.family("dedloc_epoch", Type::kGauge, "Global steps the run has taken.").sample(static_cast<double>(view.epoch), run);
  out.family("dedloc_peers", Type::kGauge, "Live peers of the run, by role.");
  for (auto [role, count] : {std::pair{"trainer", view.trainers}, {"client", view.clients}, {"aux", view.aux}}) {
    out.sample(static_cast<double>(count), {{"run", run_id}, {"role", role}});
  }
  out.family("dedloc_samples_per_second", Type::kGauge, "Samples per second the trainers compute together.")
      .sample(view.samples_per_second, run);
  out.family("dedloc_target_batch_size", Type::kGauge, "Samples in one global step (0: no trainer said).")
      .sample(static_cast<double>(view.target_batch_size), run);
  out.family("dedloc_samples_accumulated", Type::kGauge, "Samples gathered toward the next global step.")
      .sample(view.samples_accumulated, run);
  if (view.mean_loss) {
    out.family("dedloc_loss", Type::kGauge, "Mean of the trainers' last-epoch losses.").sample(*view.mean_loss, run);
  }
  if (view.eta_seconds) {
    out.family("dedloc_eta_seconds", Type::kGauge, "Estimated seconds until the next global step.")
        .sample(*view.eta_seconds, run);
  }
  if (!view.mode.empty()) {
    out.family("dedloc_collaboration_mode", Type::kGauge,
               "1 for the collaboration mode the trainers say (synchronous, delayed, diloco, or mixed when they disagree).")
        .sample(1, {{"run", run_id}, {"mode", view.mode}});
  }
  if (view.inner_steps) {
    out.family("dedloc_inner_steps", Type::kGauge, "Mean inner steps per outer step of the DiLoCo peers.")
        .sample(*view.inner_steps, run);
  }
  if (view.bytes_per_sample) {
    out.family("dedloc_bytes_per_sample", Type::kGauge,
               "Averaging bytes the peers sent per sample they computed, since each started.")
        .sample(*view.bytes_per_sample, run);
  }
  auto per_peer = [&](const char* name, const char* help, auto value) {
    out.family(name, Type::kGauge, help);
    for (const auto& p : view.peers) {
      if (auto x = value(p)) out.sample(*x, {{"run", run_id}, {"peer", p.peer_id}, {"role", p.role}});
    }
  };
  per_peer("dedloc_peer_epoch", "The epoch each peer is at.",
           [](const PeerView& p) { return std::optional<double>(static_cast<double>(p.epoch)); });
  per_peer("dedloc_peer_samples_per_second", "Samples per second each trainer computes.",
           [](const PeerView& p) { return std::optional<double>(p.samples_per_second); });
  per_peer("dedloc_peer_loss", "Each trainer's mean loss over its last epoch.",
           [](const PeerView& p) { return p.loss; });
  per_peer("dedloc_peer_averaging_rounds", "Averaging rounds each peer took part in (resets when it restarts).",
           [](const PeerView& p) { return std::optional<double>(static_cast<double>(p.rounds)); });
  per_peer("dedloc_peer_inner_steps", "Inner steps each DiLoCo peer took in its last outer step.",
           [](const PeerView& p) {
             return p.mode == "diloco" ? std::optional<double>(static_cast<double>(p.inner_steps)) : std::nullopt;
           });
  per_peer("dedloc_peer_bytes_per_sample", "Averaging bytes each peer sent per sample it computed, since it started.",
           [](const PeerView& p) { return p.bytes_per_sample; });
  per_peer("dedloc_peer_record_age_seconds", "Seconds since each peer last refreshed its records.",
           [](const PeerView& p) { return std::optional<double>(p.age_seconds); });
  out.family("dedloc_monitor_polls_total", Type::kCounter, "DHT reads of the run's records that succeeded.")
      .sample(static_cast<double>(counters.polls), run);
  out.family("dedloc_monitor_poll_errors_total", Type::kCounter, "DHT reads of the run's records that failed.")
      .sample(static_cast<double>(counters.poll_errors), run);
  out.family("dedloc_monitor_last_poll_timestamp_seconds", Type::kGauge, "Unix time of the last successful read.")
      .sample(counters.last_poll_time, run);
  return out.text();
}

}  // namespace dedloc::monitor
