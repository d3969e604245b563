// Uneven links for the all-reduce benchmark (root only): every peer process gets its own network
// namespace, joined to the others by a veth pair on a bridge, and a token-bucket (tc tbf) limit of its
// rate on both directions. Built with the ip, nsenter and tc commands.
#pragma once

#include <string>
#include <vector>

#include "dedloc/avg/bench/peer_processes.hpp"

namespace dedloc::avg::bench {

class EmulatedLinks {
 public:
  EmulatedLinks();
  // Deletes the bridge (the veth pairs go with their namespaces).
  ~EmulatedLinks();
  EmulatedLinks(const EmulatedLinks&) = delete;
  EmulatedLinks& operator=(const EmulatedLinks&) = delete;

  // The address peer i binds in its namespace.
  static std::string host_of(size_t i);

  // Wires every peer (each already in its own namespace, BenchPeerSetup::own_netns) to the bridge, its link
  // limited to rates[i] bytes/s both ways. kUnavailable naming the command that failed.
  Status setup(PeerProcesses& peers, const std::vector<double>& rates);

 private:
  std::string bridge() const { return "dlbr" + tag_; }
  std::string tag_;
  bool bridge_up_ = false;
};

}  // namespace dedloc::avg::bench
