#include "dedloc/avg/bench/emulated_links.hpp"

#include "dedloc/lab/link_spec.hpp"

namespace dedloc::avg::bench {

Result<std::unique_ptr<EmulatedLinks>> EmulatedLinks::create(const std::vector<double>& rates, Duration rtt,
                                                            double loss, const lab::LabNetworkOptions& hosts) {
  auto network = lab::LabNetwork::create(rates.size(), hosts);
  if (!network) return network.status();
  std::vector<lab::HostLink> links;
  for (double rate : rates) links.push_back(lab::host_link({.rtt = rtt, .upload = rate, .download = rate, .loss = loss}));
  return std::unique_ptr<EmulatedLinks>(new EmulatedLinks(std::move(*network), std::move(links)));
}

std::vector<std::string> EmulatedLinks::namespaces() const {
  std::vector<std::string> names;
  for (const auto& host : network_->hosts()) names.push_back(host.netns);
  return names;
}

void EmulatedLinks::start() {
  emulator_.emplace(*network_, links_, std::vector<bool>(links_.size(), false), /*seed=*/1);
}

}  // namespace dedloc::avg::bench
