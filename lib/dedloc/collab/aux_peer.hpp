// An auxiliary peer: a CPU-only machine with no model and no gradients that lends its bandwidth to a run's
// averaging. Round after round it reads the run's vector layout and the trainers' progress from the DHT,
// joins their gradient round with the aux role (it reduces a share of every group's vector and sends
// nothing) when they look for its group (aux_timing.hpp), waits for their parts as long as they wait for its
// share (their published round figures, deadline_estimator.hpp), and publishes a metrics record so that
// monitors list it. `dedloc-avg aux` runs one.
//
// It lives beside the trainer's torch-free half because it reads the same records (progress, metrics)
// the trainers write; the averaging itself is avg::Averager.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <zmq.hpp>

#include "dedloc/avg/averager.hpp"
#include "dedloc/collab/deadline_estimator.hpp"
#include "dedloc/collab/progress.hpp"
#include "dedloc/crypto/identity.hpp"
#include "dedloc/dht/node.hpp"

namespace dedloc::collab {

struct AuxPeerOptions {
  // The averager's settings: run_id names the run to help; role is set to aux; log is the aux peer's log too.
  avg::AveragerOptions averager;
  // Stop after this many rounds that formed a group (0: until should_stop).
  size_t rounds = 0;
  // Behind NAT: the address a relay holds for us now ("" while none), read before every round; when it
  // changes, the averager is rebuilt to announce it (its in-process endpoint is what the relay forwards
  // to). Empty function: announce averager.announce as it is.
  std::function<std::string()> relay_address;
  // How long our metrics record lives; it is refreshed every third of it and withdrawn on the way out.
  Duration record_ttl = std::chrono::seconds(30);
  // Between two looks at the DHT while no trainer has published the layout, and after a failed round.
  Duration retry_interval = std::chrono::seconds(1);
  // How long a member we wait on may leave a ping unanswered before it is gone (it replaces
  // averager.all_reduce.liveness_timeout; zero: no pings). With pings, a trainer that dies in our round
  // (its port refuses, or its relay says it is not attached) is known gone at once, as the trainers know
  // it, and the parts we reduce complete without it. Without them every part we reduce waited for the
  // dead trainer's to the sender timeout, the live trainers gave up on us first, and our share of their
  // round came back unaveraged (bench/lab/README.md, "Where churn's cost lies"). 5 s, the trainers' own
  // before they have measured their rounds (collab/averaging_timeouts.hpp): it must cover a part's round
  // trip over a volunteer's slow upload.
  Duration liveness_timeout = std::chrono::seconds(5);
};

struct AuxPeerReport {
  size_t rounds = 0;  // rounds that formed a group and that we reduced for
};

// Not thread-safe: start and run belong to one thread. `dht` must be started and joined; it, the context
// and the identity must outlive the aux peer.
class AuxPeer {
 public:
  AuxPeer(zmq::context_t& context, dht::Node& dht, const crypto::Identity& identity, AuxPeerOptions options);
  ~AuxPeer();

  // Binds the averaging server. kUnavailable when the address cannot be bound.
  Status start();
  // Where trainers reach us: the relay's address behind NAT, else the bound endpoint (for the ready line).
  std::string endpoint() const;

  // Helps round after round until `should_stop` says so (checked between rounds and while waiting; a round
  // under way, at most matchmaking_time plus its all-reduce, finishes first) or `rounds` were reduced.
  // Failed rounds are logged and retried; an error only when the averager cannot be rebuilt for a new
  // relay address. Withdraws the metrics record on the way out.
  Result<AuxPeerReport> run(const std::function<bool()>& should_stop);

 private:
  // One round: the layout, the trainers' epoch, our metrics, the step; or, when it is not time yet (no
  // layout, the trainers' next round not due: aux_timing.hpp), nothing. Returns how long to wait before
  // the next call.
  Duration help_one_round(AuxPeerReport& report);
  // The run's global batch when every trainer is synchronous (their metrics records), else 0.
  std::uint64_t synchronous_batch();
  // Once trainers publish their round figures (adaptive deadlines), our rounds' deadline is learned as
  // theirs is (deadline_estimator.hpp): their figures as prior and floor, our own rounds after that.
  void follow_trainers_deadline(const std::vector<PeerProgress>& trainers);
  void publish_metrics(std::uint64_t epoch, size_t rounds);

  zmq::context_t& context_;
  dht::Node& dht_;
  const crypto::Identity& identity_;
  AuxPeerOptions options_;
  Logger& log_;
  std::unique_ptr<avg::Averager> averager_;
  std::chrono::steady_clock::time_point last_metrics_{};
  bool told_waiting_ = false;
  std::optional<std::uint64_t> last_looked_;  // the epoch of our last search
  std::uint64_t batch_ = 0;                   // synchronous_batch()'s last answer
  std::chrono::steady_clock::time_point next_batch_read_{};
  std::optional<DeadlineEstimator> round_deadline_;  // follow_trainers_deadline()
};

}  // namespace dedloc::collab
