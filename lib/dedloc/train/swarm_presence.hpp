// A trainer's presence in the swarm (docs/architecture.md): everything through which others see it and
// reach it, apart from the model.
//
//   the averager      matchmaking and all-reduce for gradient and parameter rounds, and the RPC server
//   the tracker       our progress record and the swarm's estimate (collab/progress_tracker.hpp)
//   the state server  our training state for peers that download it (every peer serves, clients through
//                     their relay)
//   the relay keeper  client mode: a relay that others reach us through, once one takes us
//   the records       the model schema, the donor advertisement and the metrics record, and withdrawing our
//                     progress and metrics on the way out
//
// No torch here: the trainer hands in vectors, snapshots and metrics.
#pragma once

#include <memory>
#include <string>

#include <zmq.hpp>

#include "dedloc/avg/averager.hpp"
#include "dedloc/avg/state_transfer.hpp"
#include "dedloc/collab/progress.hpp"
#include "dedloc/collab/progress_tracker.hpp"
#include "dedloc/core/latest_job.hpp"
#include "dedloc/relay/relay_keeper.hpp"

namespace dedloc::train {

struct SwarmPresenceOptions {
  std::string run_id;
  avg::AveragerOptions averaging;       // role kClient for a peer behind NAT
  relay::RelayKeeperOptions relaying;   // client mode (TrainerOptions::relaying)
  std::uint64_t target_batch_size = 1;  // the tracker's B
  Duration record_ttl = std::chrono::seconds(30);
  Logger* log = &Logger::global();
};

class SwarmPresence {
 public:
  // `node` must be started and joined; the context, node and identity must outlive this.
  SwarmPresence(zmq::context_t& context, dht::Node& node, const crypto::Identity& identity, SwarmPresenceOptions options);
  ~SwarmPresence();  // the tracker's thread and the averager's server first: they call into the rest

  // Starts the averaging and state server; in client mode, attaches to a relay (without one, it warns:
  // the peer trains and sends, but nobody can download its state).
  Status start();
  // Compares the run's published parameter schema with ours (an error naming both when they differ), or
  // publishes ours when the run has none yet.
  Status check_schema(const avg::VectorSchema& schema);

  avg::Averager& averager() { return *averager_; }
  collab::ProgressTracker& tracker() { return *tracker_; }
  // Other trainers in the run (aux peers publish no progress).
  size_t others() const { return tracker_->others(); }
  // What the state server hands to downloaders from now on.
  void serve_state(std::shared_ptr<const avg::TrainingState> state) { state_server_->set_state(std::move(state)); }
  // Where downloaders reach us (a relay:// address in client mode); empty for a client without a relay.
  const std::string& donor_endpoint() const { return donor_endpoint_; }

  // Refreshes the donor advertisement and the metrics record when a third of their TTL has passed, at once
  // with `force` or when our relay changed: in the background (a newer refresh replaces one not yet begun).
  void publish_donor_and_metrics(const collab::PeerMetrics& metrics, bool force);
  // Withdraws our progress and metrics records, so that others stop counting us at once (errors are logged
  // at debug level: a record nobody withdraws still expires with its TTL). Both at once, by `deadline`: a
  // peer told to stop leaves within about a second even when some DHT nodes no longer answer.
  void withdraw_records(Deadline deadline = Deadline::after(std::chrono::seconds(3)));

 private:
  void attach_to_relay();

  zmq::context_t& context_;
  dht::Node& node_;
  const crypto::Identity& identity_;
  SwarmPresenceOptions options_;
  std::unique_ptr<avg::Averager> averager_;
  std::unique_ptr<avg::StateServer> state_server_;
  std::unique_ptr<collab::ProgressTracker> tracker_;
  std::unique_ptr<relay::RelayKeeper> relay_keeper_;  // client mode, when a relay took us
  std::string donor_endpoint_;
  TimePoint last_donor_advert_{};
  LatestJob publisher_;  // the donor advertisement and metrics record; stopped before anything it uses goes
};

}  // namespace dedloc::train
