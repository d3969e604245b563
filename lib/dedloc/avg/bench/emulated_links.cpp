#include "dedloc/avg/bench/emulated_links.hpp"

#include "dedloc/lab/link_spec.hpp"

namespace dedloc::avg::bench {

Result<std::unique_ptr<EmulatedLinks>> EmulatedLinks::create(const std::vector<double>& rates, Duration rtt,
                                                            double loss) {
  auto network = lab::LabNetwork::create(rates.size());
  if (!network) return network.status();
  std::vector<lab::HostLink> links;
  for (double rate : rates) links.push_back(lab::host_link({.rtt = rtt, .upload = rate, .download = rate, .loss = loss}));
  return std::unique_ptr<EmulatedLinks>(new EmulatedLinks(std::move(*network), std::move(links)));
}

EmulatedLinks::EmulatedLinks(std::unique_ptr<lab::LabNetwork> network, std::vector<lab::HostLink> links)
    : network_(std::move(network)),
      emulator_(*network_, std::move(links), std::vector<bool>(network_->hosts().size(), false), /*seed=*/1) {}

EmulatedLinks::~EmulatedLinks() {
  if (loop_.joinable()) {
    emulator_.stop();
    loop_.join();
  }
}

std::vector<std::string> EmulatedLinks::namespaces() const {
  std::vector<std::string> names;
  for (const auto& host : network_->hosts()) names.push_back(host.netns);
  return names;
}

void EmulatedLinks::start() {
  loop_ = std::thread([this] { (void)emulator_.run(); });
}

}  // namespace dedloc::avg::bench
