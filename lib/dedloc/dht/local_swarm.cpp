#include "dedloc/dht/local_swarm.hpp"

namespace dedloc::dht {

namespace {
// Sockets one node may need: its server, its client's connections to every peer, and some slack.
constexpr int kSocketsPerNode = 80;
}  // namespace

LocalSwarm::LocalSwarm() : context_(1) {}

LocalSwarm::~LocalSwarm() {
  for (auto& node : nodes_) node->stop();
}

Result<std::unique_ptr<LocalSwarm>> LocalSwarm::launch(size_t nodes, NodeOptions options, std::uint64_t seed,
                                                      Duration join_timeout) {
  std::unique_ptr<LocalSwarm> swarm(new LocalSwarm());
  swarm->context_.set(zmq::ctxopt::max_sockets, static_cast<int>(std::max<size_t>(1024, nodes * kSocketsPerNode)));
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
