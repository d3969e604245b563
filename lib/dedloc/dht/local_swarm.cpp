#include "dedloc/dht/local_swarm.hpp"

#include <sys/resource.h>

#include <algorithm>

namespace dedloc::dht {

namespace {

// Connections one node may hold when descriptors are plenty: its client's connection to each peer it talks to
// (a node of a few hundred talks to most of them during a benchmark's thousand lookups).
constexpr size_t kConnectionsPerNode = 256;
// File descriptors per connection: its TCP connection, the peer's end of it, and the client socket's ZeroMQ
// mailbox.
constexpr size_t kDescriptorsPerConnection = 3;
// Per node without any connection: the server's listening socket and its ZeroMQ mailbox, the client's and
// server's loop doorbells (net/mailbox.hpp), and the datagram transport's UDP socket and doorbell.
constexpr size_t kDescriptorsPerNode = 6;
// For the rest of the process (standard streams, /proc reads, logs), and for connections opened beyond a
// node's bound while calls await them (net::ClientOptions::max_connections).
constexpr size_t kReservedDescriptors = 512;
// Fewer connections per node than this and a lookup would reconnect for nearly every query.
constexpr size_t kMinConnectionsPerNode = 2;

// Many nodes in one process need far more descriptors than the usual soft limit of 1024: raise it toward
// the need (the hard limit too, when we may). Returns the soft limit now in force.
size_t raise_descriptor_limit(size_t wanted) {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return 1024;
  if (limit.rlim_cur >= wanted) return limit.rlim_cur;
  if (limit.rlim_max < wanted) {
    rlimit raised{wanted, wanted};
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) return wanted;  // privileged: done
  }
  rlim_t soft = std::min<rlim_t>(wanted, limit.rlim_max);
  rlimit lifted{soft, limit.rlim_max};
  if (setrlimit(RLIMIT_NOFILE, &lifted) == 0) return soft;
  return limit.rlim_cur;
}

}  // namespace

LocalSwarm::LocalSwarm() : context_(1) {}

LocalSwarm::~LocalSwarm() {
  for (auto& node : nodes_) node->stop();
}

Result<std::unique_ptr<LocalSwarm>> LocalSwarm::launch(size_t nodes, NodeOptions options, std::uint64_t seed,
                                                      Duration join_timeout) {
  std::unique_ptr<LocalSwarm> swarm(new LocalSwarm());
  // Running out of descriptors makes connects fail, which to the DHT looks like dead peers (and a node that
  // cannot start aborts the launch), so a big swarm would measure a broken network instead of a slow one.
  const size_t wanted = kReservedDescriptors + nodes * (kDescriptorsPerNode + kConnectionsPerNode * kDescriptorsPerConnection);
  const size_t limit = raise_descriptor_limit(wanted);
  size_t connections = kConnectionsPerNode;
  if (limit < wanted) {
    const size_t fixed = kReservedDescriptors + nodes * kDescriptorsPerNode;
    connections = limit > fixed ? (limit - fixed) / (nodes * kDescriptorsPerConnection) : 0;
    if (connections < kMinConnectionsPerNode) {
      return error(Code::kUnavailable,
                   std::to_string(nodes) + " nodes in one process need at least " +
                       std::to_string(fixed + nodes * kMinConnectionsPerNode * kDescriptorsPerConnection) +
                       " file descriptors; the limit is " + std::to_string(limit) + " (ulimit -Hn)");
    }
    swarm->max_connections_ = connections;
  }
  // Every ZeroMQ socket holds a descriptor (its mailbox): the descriptors bound the sockets too, including
  // those beyond a node's bound while calls await them and those closed but not yet reaped.
  const size_t sockets = std::max<size_t>(1024, std::min(limit, wanted));
  swarm->context_.set(zmq::ctxopt::max_sockets, static_cast<int>(std::min<size_t>(sockets, 1u << 20)));
  std::mt19937_64 rng(seed);
  for (size_t i = 0; i < nodes; ++i) {
    if (i == 0) {
      auto first = std::make_unique<Node>(swarm->context_, crypto::Identity::generate(), swarm->bounded(options));
      DEDLOC_RETURN_IF_ERROR(first->start());
      swarm->nodes_.push_back(std::move(first));
      swarm->alive_.push_back(true);
      continue;
    }
    auto joined = swarm->join(options, std::uniform_int_distribution<size_t>(0, i - 1)(rng), join_timeout);
    if (!joined) return joined.status().with_context("node " + std::to_string(i));
  }
  return swarm;
}

Result<size_t> LocalSwarm::join(NodeOptions options, size_t through, Duration timeout) {
  auto node = std::make_unique<Node>(context_, crypto::Identity::generate(), bounded(std::move(options)));
  DEDLOC_RETURN_IF_ERROR(node->start());
  DEDLOC_RETURN_IF_ERROR(node->bootstrap({nodes_.at(through)->address()}, Deadline::after(timeout)));
  nodes_.push_back(std::move(node));
  alive_.push_back(true);
  return nodes_.size() - 1;
}

NodeOptions LocalSwarm::bounded(NodeOptions options) const {
  if (max_connections_ > 0 && (options.max_connections == 0 || options.max_connections > max_connections_)) {
    options.max_connections = max_connections_;
  }
  return options;
}

void LocalSwarm::kill(size_t i) {
  nodes_.at(i)->stop();
  alive_.at(i) = false;
}

std::vector<size_t> LocalSwarm::alive_nodes() const {
  std::vector<size_t> out;
  for (size_t i = 0; i < alive_.size(); ++i) {
    if (alive_[i]) out.push_back(i);
  }
  return out;
}

}  // namespace dedloc::dht
