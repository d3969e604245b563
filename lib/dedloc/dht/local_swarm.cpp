#include "dedloc/dht/local_swarm.hpp"

#include <sys/resource.h>

#include <algorithm>

namespace dedloc::dht {

namespace {

// ZeroMQ sockets one node may open: its server, plus its client's connection to each peer it talks to (a
// node of a few hundred talks to most of them during a benchmark's thousand lookups).
constexpr size_t kSocketsPerNode = 256;
// File descriptors per socket: its TCP connection, the peer's end of it, and ZeroMQ's mailbox.
constexpr size_t kDescriptorsPerSocket = 3;

// Many nodes in one process need far more descriptors than the usual soft limit of 1024: raise it toward
// the need (the hard limit too, when we may). Running out makes connects fail, which to the DHT looks like
// dead peers, so a big swarm would measure a broken network instead of a slow one.
void raise_descriptor_limit(size_t wanted) {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= wanted) return;
  if (limit.rlim_max < wanted) {
    rlimit raised{wanted, wanted};
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) return;  // privileged: done
  }
  limit.rlim_cur = std::min<rlim_t>(wanted, limit.rlim_max);
  setrlimit(RLIMIT_NOFILE, &limit);
}

}  // namespace

LocalSwarm::LocalSwarm() : context_(1) {}

LocalSwarm::~LocalSwarm() {
  for (auto& node : nodes_) node->stop();
}

Result<std::unique_ptr<LocalSwarm>> LocalSwarm::launch(size_t nodes, NodeOptions options, std::uint64_t seed,
                                                      Duration join_timeout) {
  std::unique_ptr<LocalSwarm> swarm(new LocalSwarm());
  const size_t sockets = std::max<size_t>(1024, nodes * kSocketsPerNode);
  swarm->context_.set(zmq::ctxopt::max_sockets, static_cast<int>(sockets));
  raise_descriptor_limit(sockets * kDescriptorsPerSocket);
  std::mt19937_64 rng(seed);
  for (size_t i = 0; i < nodes; ++i) {
    if (i == 0) {
      auto first = std::make_unique<Node>(swarm->context_, crypto::Identity::generate(), options);
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
  auto node = std::make_unique<Node>(context_, crypto::Identity::generate(), std::move(options));
  DEDLOC_RETURN_IF_ERROR(node->start());
  DEDLOC_RETURN_IF_ERROR(node->bootstrap({nodes_.at(through)->address()}, Deadline::after(timeout)));
  nodes_.push_back(std::move(node));
  alive_.push_back(true);
  return nodes_.size() - 1;
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
