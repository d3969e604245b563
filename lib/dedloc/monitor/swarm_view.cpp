#include "dedloc/monitor/swarm_view.hpp"

#include <algorithm>
#include <map>

#include "dedloc/crypto/peer_id.hpp"
#include "dedloc/dht/record.hpp"
#include "dedloc/collab/collaboration_state.hpp"

namespace dedloc::monitor {

std::string peer_id_of_subkey(const std::string& subkey) {
  ByteSpan bytes(reinterpret_cast<const std::uint8_t*>(subkey.data()), subkey.size());
  if (auto owner = dht::owner_peer_id(bytes)) return owner->to_string();
  // Anything else came from the network as it is: shown as bounded hex, never as raw bytes in a page.
  return "unowned:" + to_hex(bytes.subspan(0, std::min<size_t>(bytes.size(), 16)));
}

namespace {

int role_rank(const std::string& role) { return role == "trainer" ? 0 : role == "client" ? 1 : 2; }

// The mode, inner steps and bytes per sample of each peer and of the swarm. Sums in double: the counters
// come from the network and may be anything up to 2^64.
void summarize_modes(SwarmView& view) {
  double sent = 0, computed = 0, inner = 0;
  size_t diloco_peers = 0;
  for (auto& r : view.peers) {
    if (r.samples_computed > 0) {
      r.bytes_per_sample = static_cast<double>(r.bytes_sent) / static_cast<double>(r.samples_computed);
    }
    sent += static_cast<double>(r.bytes_sent);
    computed += static_cast<double>(r.samples_computed);
    if (r.inner_steps > 0) {
      inner += static_cast<double>(r.inner_steps);
      ++diloco_peers;
    }
    if (r.role == "aux" || r.mode.empty()) continue;
    if (view.mode.empty()) view.mode = r.mode;
    else if (view.mode != r.mode) view.mode = "mixed";
  }
  if (computed > 0) view.bytes_per_sample = sent / computed;
  if (diloco_peers > 0) view.inner_steps = inner / static_cast<double>(diloco_peers);
}

}  // namespace

SwarmView summarize_swarm(const std::vector<collab::PeerProgress>& progress,
                          const std::vector<collab::PeerMetrics>& metrics, double now) {
  SwarmView view;
  view.time = now;
  std::map<std::string, PeerView> rows;  // by owner subkey
  auto row = [&](const std::string& subkey, double time) -> PeerView& {
    auto [it, added] = rows.try_emplace(subkey);
    if (added) {
      it->second.peer_id = peer_id_of_subkey(subkey);
      it->second.role = "trainer";
      it->second.age_seconds = std::max(0.0, now - time);
    } else {
      it->second.age_seconds = std::min(it->second.age_seconds, std::max(0.0, now - time));
    }
    return it->second;
  };
  for (const auto& p : progress) {
    auto& r = row(p.peer, p.time);
    r.epoch = std::max(r.epoch, p.epoch);
    r.samples_per_second = p.samples_per_second;
    r.samples_accumulated = p.samples_accumulated;
    if (p.client_mode) r.role = "client";
  }
  std::optional<double> loss_sum;
  size_t losses = 0;
  for (const auto& m : metrics) {
    auto& r = row(m.peer, m.time);
    r.role = m.role;
    r.epoch = std::max(r.epoch, m.epoch);
    r.loss = m.loss;
    r.rounds = m.rounds;
    r.mode = m.mode;
    r.inner_steps = m.inner_steps;
    r.bytes_sent = m.bytes_sent;
    r.samples_computed = m.samples_computed;
    if (r.samples_per_second == 0) r.samples_per_second = m.samples_per_second;  // the progress record is fresher
    view.target_batch_size = std::max(view.target_batch_size, m.target_batch_size);
    if (m.loss && m.role != "aux") {
      loss_sum = loss_sum.value_or(0) + *m.loss;
      ++losses;
    }
  }
  if (losses > 0) view.mean_loss = *loss_sum / static_cast<double>(losses);

  for (auto& [subkey, r] : rows) {
    if (r.role == "aux") {
      r.samples_per_second = 0;  // reduces, computes nothing
      ++view.aux;
    } else {
      (r.role == "client" ? view.clients : view.trainers) += 1;
      view.samples_per_second += r.samples_per_second;
    }
    view.peers.push_back(r);
  }
  for (auto& r : view.peers) {
    if (r.role != "aux" && view.samples_per_second > 0) r.contribution = r.samples_per_second / view.samples_per_second;
  }
  summarize_modes(view);
  std::sort(view.peers.begin(), view.peers.end(), [](const PeerView& a, const PeerView& b) {
    if (role_rank(a.role) != role_rank(b.role)) return role_rank(a.role) < role_rank(b.role);
    if (a.samples_per_second != b.samples_per_second) return a.samples_per_second > b.samples_per_second;
    return a.peer_id < b.peer_id;
  });

  auto state = collab::estimate_collaboration(progress, view.target_batch_size, now);
  view.epoch = state.epoch;
  if (progress.empty()) {  // metrics only (records expire apart): the trainers' newest epoch
    for (const auto& r : view.peers) {
      if (r.role != "aux") view.epoch = std::max(view.epoch, r.epoch);
    }
  }
  view.samples_accumulated = state.samples_accumulated;
  if (view.target_batch_size > 0 && (state.samples_per_second > 0 || state.batch_ready())) {
    view.eta_seconds = state.eta_seconds;
  }
  return view;
}

}  // namespace dedloc::monitor
