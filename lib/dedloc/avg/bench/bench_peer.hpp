// One peer process of the all-reduce benchmark: the child side of pipe_protocol.hpp. It builds its own
// ZeroMQ context, server, client and AllReduce, fills its synthetic vector, reports its endpoint, and then
// runs the rounds the parent starts, checking each result (synthetic_vector.hpp) and reporting it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dedloc/avg/all_reduce.hpp"
#include "dedloc/avg/codec.hpp"
#include "dedloc/core/clock.hpp"

namespace dedloc::avg::bench {

struct BenchPeerSetup {
  size_t index = 0;            // this peer's place in the group: it holds (index+1)·g(k) and weighs index+1
  size_t peers = 0;            // the group's size
  std::uint64_t elements = 0;  // of the vector
  Codec codec = Codec::kNone;  // to compute the error bound of what it sends
  AllReduceOptions all_reduce;
  Duration round_timeout{};  // one AllReduce::run
  Duration idle_timeout{};   // waiting for the parent's next command
  std::vector<std::string> netns;  // per peer: the lab host (network namespace) to enter first; empty: none
  bool encrypted = true;     // CURVE, as the tools run by default
  std::string name = "bench";  // prefixes the errors it writes to stderr ("NAME: peer I: ...")
};

// The whole life of peer `setup.index`, in a forked child, talking over the two pipe ends; returns its exit
// status. Round failures go to the parent as reports; anything that ends the peer goes to stderr, and the
// parent's own messages name the peer.
int run_bench_peer(const BenchPeerSetup& setup, int from_parent, int to_parent);

}  // namespace dedloc::avg::bench
