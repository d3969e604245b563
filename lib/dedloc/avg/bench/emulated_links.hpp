// Internet-like links for the all-reduce benchmark (root only): every peer process is a lab host (its own
// network namespace behind a TUN device, lib/dedloc/lab) and the lab's user-space emulator gives each its
// rate both ways, the round trip between any two peers and the loss of the packets it sends.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dedloc/core/status.hpp"
#include "dedloc/lab/emulator.hpp"
#include "dedloc/lab/lab_network.hpp"

namespace dedloc::avg::bench {

class EmulatedLinks {
 public:
  // Makes one lab host per rate (bytes/s both ways). Call before forking the peers (it runs `ip` and
  // waits; no thread is left behind).
  static Result<std::unique_ptr<EmulatedLinks>> create(const std::vector<double>& rates, Duration rtt, double loss,
                                                       const lab::LabNetworkOptions& hosts);
  // Stops the emulator, then removes the hosts (killing whatever still runs in them).
  ~EmulatedLinks() = default;
  EmulatedLinks(const EmulatedLinks&) = delete;
  EmulatedLinks& operator=(const EmulatedLinks&) = delete;

  std::vector<std::string> namespaces() const;
  // The address peer i binds in its namespace.
  std::string host_of(size_t i) const { return network_->host(i).address; }

  // Starts forwarding (a thread: call after the peers are forked).
  void start();

 private:
  EmulatedLinks(std::unique_ptr<lab::LabNetwork> network, std::vector<lab::HostLink> links)
      : network_(std::move(network)), links_(std::move(links)) {}

  std::unique_ptr<lab::LabNetwork> network_;  // declared first: it outlives the emulator
  std::vector<lab::HostLink> links_;
  std::optional<lab::RunningEmulator> emulator_;
};

}  // namespace dedloc::avg::bench
