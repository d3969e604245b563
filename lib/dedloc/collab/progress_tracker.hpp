// Keeps this peer's progress record in the DHT fresh and the swarm's state estimate current, on a thread
// of its own, so the training loop never waits on the network to ask "is the global batch there yet?".
//
// The loop reports its local progress after every micro-batch (cheap: a copy under a lock). The thread
// publishes it when the epoch (or the parameters' hash) changed, when it first has a rate (a record without one promises nothing:
// others extrapolate a record's samples by its rate), and otherwise every ttl/3 (records expire after
// `record_ttl`; a crashed peer drops out of everyone's estimate by then). It reads everyone's records as
// often as estimate_collaboration's next_refresh_seconds says, and at most min_refresh_seconds after
// publishing one of those changes, since the other peers make theirs at about the same moment (the step
// that ends an epoch, the start of computing); without that, peers that started together would each count
// only their own samples until the next scheduled read, which is the maximum while nobody had a rate yet.
// state() re-extrapolates the last records to now with our own freshest progress in place of our
// published one.
#pragma once

#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "dedloc/core/log.hpp"
#include "dedloc/dht/node.hpp"
#include "dedloc/collab/collaboration_state.hpp"

namespace dedloc::collab {

struct TrackerOptions {
  std::string run_id;
  std::uint64_t target_batch_size = 4096;
  Duration record_ttl = std::chrono::seconds(30);
  Duration dht_timeout = std::chrono::seconds(5);  // one publish or read
  EstimateOptions estimate;
  Logger* log = &Logger::global();
};

class ProgressTracker {
 public:
  // `node` must be started and joined, and outlive the tracker.
  ProgressTracker(dht::Node& node, TrackerOptions options);
  ~ProgressTracker();  // stops the thread (an RPC in flight ends by its deadline); does not withdraw
  ProgressTracker(const ProgressTracker&) = delete;
  ProgressTracker& operator=(const ProgressTracker&) = delete;

  // Our progress now (its `time` is set here). An epoch change is published at once.
  void report(PeerProgress local);
  // The estimate at this moment.
  CollaborationState state() const;
  // The estimate `seconds_ahead` from now if we computed nothing more: our samples held where they are, the
  // others' extrapolated (whole micro-batches where their records say how big those are).
  CollaborationState state_if_we_stop(double seconds_ahead) const;
  // Reads the records again without waiting for the next scheduled refresh; returns when done (bounded).
  void refresh_now();
  // Removes our record (on leaving), after stopping the background thread.
  Status withdraw(Deadline deadline);
  // The other peers' records as the last read returned them (collab/divergence.hpp reads them).
  std::vector<PeerProgress> others_records() const;
  // How many peers' records the last read returned (others than us), for logs.
  size_t others() const;

 private:
  CollaborationState state_at(double seconds_ahead, bool ours_computing) const;
  void run();
  void publish(const PeerProgress& progress);
  void fetch();

  dht::Node& node_;
  TrackerOptions options_;
  std::string own_subkey_;  // as PeerProgress::peer holds it

  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  bool fetch_requested_ = false;
  std::uint64_t fetches_done_ = 0;
  std::optional<PeerProgress> local_;
  std::optional<std::uint64_t> published_epoch_;
  std::uint64_t published_hash_ = 0;
  bool published_rate_ = false;  // the last published record had a rate (samples_per_second > 0)
  TimePoint last_publish_{};
  TimePoint next_fetch_{};
  std::vector<PeerProgress> others_;  // the last read, without our own record
  std::thread thread_;
};

}  // namespace dedloc::collab
