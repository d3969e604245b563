// Many DHT nodes in one process, on real loopback sockets: the net tests and the benchmark's swarm.
//
// All nodes share one ZeroMQ context (its socket limit raised: each node holds a socket per peer it talks
// to). Node 0 starts alone; every later node bootstraps through a randomly chosen earlier one, as
// volunteers joining a running collaboration would.
//
// Every connection between two nodes costs this one process three file descriptors (both TCP ends and the
// client socket's ZeroMQ mailbox), so a big swarm outgrows any usual descriptor limit: the soft limit is
// raised toward what the swarm could use, and where the hard limit is lower, each node's open connections
// are bounded (NodeOptions::max_connections, least recently used closed first) so that all of them fit.
#pragma once

#include <memory>
#include <random>
#include <vector>

#include <zmq.hpp>

#include "dedloc/dht/node.hpp"

namespace dedloc::dht {

class LocalSwarm {
 public:
  // `options` is every node's (its listen address should end in ":0"). kUnavailable or the bootstrap's
  // error when a node cannot start or join.
  static Result<std::unique_ptr<LocalSwarm>> launch(size_t nodes, NodeOptions options, std::uint64_t seed = 1,
                                                   Duration join_timeout = std::chrono::seconds(30));
  ~LocalSwarm();  // stops every node, then closes the context

  size_t size() const { return nodes_.size(); }
  Node& node(size_t i) { return *nodes_.at(i); }
  // Adds one more node, bootstrapped through node `through` (which must be alive).
  Result<size_t> join(NodeOptions options, size_t through, Duration timeout = std::chrono::seconds(30));
  // Stops node i abruptly (sockets closed, linger 0): to the others it is a crashed peer.
  void kill(size_t i);
  bool alive(size_t i) const { return alive_.at(i); }
  std::vector<size_t> alive_nodes() const;
  // The bound on each node's open connections that the descriptor limit imposed; 0: none was needed.
  size_t max_connections_per_node() const { return max_connections_; }

 private:
  LocalSwarm();
  NodeOptions bounded(NodeOptions options) const;  // with max_connections_ applied
  zmq::context_t context_;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::vector<bool> alive_;
  size_t max_connections_ = 0;  // applied to every node (launch() and join())
};

}  // namespace dedloc::dht
