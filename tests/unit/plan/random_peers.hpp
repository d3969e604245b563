// Random collaborations for property tests: seeded, so a failure names a reproducible case.
#pragma once

#include <cmath>
#include <random>
#include <string>

#include "dedloc/plan/peer.hpp"

namespace dedloc::plan::test {

struct RandomPeersOptions {
  std::size_t min_peers = 2;
  std::size_t max_peers = 64;
  bool with_limits = false;  // add pairwise limits on about n/2 random pairs
};

inline double log_uniform(std::mt19937_64& rng, double lo, double hi) {
  return std::exp(std::uniform_real_distribution<double>(std::log(lo), std::log(hi))(rng));
}

// A mix of GPU peers (10..200 samples/s), CPU-only peers (30%) and client-mode peers (25%) on links
// from 10 Mbit/s to 1 Gbit/s, with at least one peer that computes and one that can aggregate.
inline Collaboration random_collaboration(std::mt19937_64& rng, const RandomPeersOptions& options = {}) {
  Collaboration c;
  c.batch = 4096;
  c.params = 18e6;
  c.codec = Codec::kFloat16;
  std::size_t n = std::uniform_int_distribution<std::size_t>(options.min_peers, options.max_peers)(rng);
  std::bernoulli_distribution cpu_only(0.3), client(0.25);
  for (std::size_t i = 0; i < n; ++i) {
    PeerSpec p;
    p.name = "peer-" + std::to_string(i);
    p.compute = cpu_only(rng) ? 0.0 : std::uniform_real_distribution<double>(10, 200)(rng);
    p.download = log_uniform(rng, 10e6 / 8, 1e9 / 8);
    p.upload = log_uniform(rng, 10e6 / 8, 1e9 / 8);
    p.client_mode = client(rng);
    c.peers.push_back(p);
  }
  c.peers[0].compute = std::max(c.peers[0].compute, 50.0);
  c.peers[n - 1].client_mode = false;
  if (options.with_limits) {
    std::uniform_int_distribution<std::size_t> pick(0, n - 1);
    for (std::size_t k = 0; k < n / 2; ++k) {
      std::size_t a = pick(rng), b = pick(rng);
      if (a == b) continue;
      c.limits.push_back({c.peers[a].name, c.peers[b].name, log_uniform(rng, 1e6 / 8, 100e6 / 8)});
    }
  }
  return c;
}

}  // namespace dedloc::plan::test
