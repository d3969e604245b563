// What a monitor shows of a run (docs/operators.md): one picture of the swarm built from the progress and
// metrics records every peer keeps in the DHT. Pure functions: the monitor calls them with what it read,
// tests with hand-made records.
//
//   peers        every owner with a live progress or metrics record (one row each)
//   epoch        the global epoch, as the trainers' own estimate (collab::estimate_collaboration)
//   samples/s    the sum of the trainers' rates
//   mean loss    the mean of the last-epoch losses the trainers report (peers without one yet do not count)
//   ETA          until the global batch is gathered, when a trainer says how large it is ("B")
//   contribution a trainer's share of the swarm's samples/s; an aux peer's is the rounds it reduced
//   mode         the collaboration mode the trainers say (train/collaboration_mode.hpp); "mixed" when they
//                disagree (peers of the two modes never average together: a misconfigured peer)
//   inner steps  DiLoCo: inner steps per outer step, each peer's last, and their mean over the swarm
//   bytes/sample averaging bytes sent per sample computed, each peer's since it started, and the swarm's:
//                Σ bytes sent / Σ samples computed (what dedloc-plan predicts as upload per sample)
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dedloc/collab/progress.hpp"

namespace dedloc::monitor {

struct PeerView {
  std::string peer_id;         // 40 hex digits (the owner's PeerID); "unowned:<hex>" when the subkey names none
  std::string role;            // "trainer", "client" or "aux"
  std::uint64_t epoch = 0;
  std::optional<double> loss;  // of its last epoch
  double samples_per_second = 0;
  std::uint64_t samples_accumulated = 0;  // toward the next step (from its progress record)
  std::uint64_t rounds = 0;               // averaging rounds it took part in
  double contribution = 0;                // share of the swarm's samples/s, 0..1
  double age_seconds = 0;                 // since its freshest record
  std::string mode;                       // "synchronous" or "diloco"; empty when it did not say (aux, older)
  std::uint64_t inner_steps = 0;          // diloco: inner steps it took in its last outer step
  std::uint64_t bytes_sent = 0;           // averaging payload bytes it sent since it started
  std::uint64_t samples_computed = 0;     // samples it computed since it started
  std::optional<double> bytes_per_sample; // bytes_sent / samples_computed; none before it computed any
};

struct SwarmView {
  double time = 0;                     // unix seconds of this picture
  std::uint64_t epoch = 0;
  size_t trainers = 0, clients = 0, aux = 0;
  double samples_per_second = 0;
  std::optional<double> mean_loss;
  std::uint64_t target_batch_size = 0;  // 0: no peer said
  double samples_accumulated = 0;
  std::optional<double> eta_seconds;    // none without a target batch or a rate
  std::string mode;                     // the trainers' mode, "mixed" when they disagree; empty: none said
  std::optional<double> inner_steps;    // mean inner steps per outer step of the peers that report some
  std::optional<double> bytes_per_sample;  // Σ bytes_sent / Σ samples_computed; none before any sample
  std::vector<PeerView> peers;          // trainers first (fastest first), then clients, then aux

  size_t alive() const { return peers.size(); }
};

SwarmView summarize_swarm(const std::vector<collab::PeerProgress>& progress,
                          const std::vector<collab::PeerMetrics>& metrics, double now);

// A PeerID's hex from an owner subkey ("[owner:<public key hex>]"); "unowned:" and the subkey's first bytes in
// hex when it is not one.
std::string peer_id_of_subkey(const std::string& subkey);

}  // namespace dedloc::monitor
