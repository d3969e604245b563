// The all-reduce benchmark's peer processes as the parent sees them: forked before anything starts a
// ZeroMQ context (forking after zmq started its threads is unsafe), reached through two pipes each, and
// reaped, or killed, on the way out. Peers die with the parent (PR_SET_PDEATHSIG).
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

#include "dedloc/avg/bench/bench_peer.hpp"
#include "dedloc/avg/bench/pipe_protocol.hpp"

namespace dedloc::avg::bench {

struct PeerProcess {
  pid_t pid = -1;
  int to_child = -1;
  int from_child = -1;
  bool reaped = false;
};

// Not thread-safe; one object per parent. Kills and reaps whatever is left when destroyed.
class PeerProcesses {
 public:
  // `interrupted` ends any wait on a peer with kCancelled (the tool passes its SIGINT/SIGTERM flag).
  explicit PeerProcesses(std::function<bool()> interrupted = {}) : interrupted_(std::move(interrupted)) {}
  ~PeerProcesses() { stop(std::chrono::seconds(0)); }
  PeerProcesses(const PeerProcesses&) = delete;
  PeerProcesses& operator=(const PeerProcesses&) = delete;

  // Forks `peers` processes, each running run_bench_peer(setup with its index). Call before anything
  // creates a ZeroMQ context or a thread in this process.
  Status fork_all(size_t peers, BenchPeerSetup setup);

  size_t size() const { return children_.size(); }
  PeerProcess& operator[](size_t i) { return children_[i]; }

  Status send(size_t i, PipeMessage type, const PipeWriter& payload = PipeWriter());
  // The next message from peer i, which must be `expected`. A peer that died is named with how it ended.
  Result<Bytes> receive(size_t i, PipeMessage expected, Deadline deadline);

  // Asks every peer to quit, waits for them until `grace` has passed, then kills the rest.
  void stop(Duration grace);

 private:
  // A failed pipe operation: say which peer, and how it ended if it did.
  Status explain(size_t i, const Status& status);

  std::function<bool()> interrupted_;
  std::vector<PeerProcess> children_;
};

// "exited with status 3", "was killed by signal 9 (Killed)": a waitpid status in words.
std::string describe_exit(int wait_status);

}  // namespace dedloc::avg::bench
