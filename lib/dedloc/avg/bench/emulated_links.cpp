#include "dedloc/avg/bench/emulated_links.hpp"

#include <unistd.h>

#include <algorithm>

#include "dedloc/core/run_command.hpp"

namespace dedloc::avg::bench {

EmulatedLinks::EmulatedLinks() : tag_(std::to_string(::getpid())) {}

EmulatedLinks::~EmulatedLinks() {
  if (bridge_up_) (void)run_command({"ip", "link", "del", bridge()});
}

std::string EmulatedLinks::host_of(size_t i) {
  return "10.213." + std::to_string(i / 250) + "." + std::to_string(i % 250 + 2);
}

Status EmulatedLinks::setup(PeerProcesses& peers, const std::vector<double>& rates) {
  DEDLOC_RETURN_IF_ERROR(run_command({"ip", "link", "add", bridge(), "type", "bridge"}));
  bridge_up_ = true;
  DEDLOC_RETURN_IF_ERROR(run_command({"ip", "link", "set", bridge(), "up"}));
  for (size_t i = 0; i < peers.size(); ++i) {
    const std::string host_side = "dlv" + tag_ + "x" + std::to_string(i);
    const std::string pid = std::to_string(peers[i].pid);
    DEDLOC_RETURN_IF_ERROR(run_command({"ip", "link", "add", host_side, "type", "veth", "peer", "name", "eth0", "netns", pid}));
    DEDLOC_RETURN_IF_ERROR(run_command({"ip", "link", "set", host_side, "master", bridge()}));
    DEDLOC_RETURN_IF_ERROR(run_command({"ip", "link", "set", host_side, "up"}));
    DEDLOC_RETURN_IF_ERROR(run_command({"nsenter", "-t", pid, "-n", "ip", "link", "set", "lo", "up"}));
    DEDLOC_RETURN_IF_ERROR(run_command({"nsenter", "-t", pid, "-n", "ip", "addr", "add", host_of(i) + "/16", "dev", "eth0"}));
    DEDLOC_RETURN_IF_ERROR(run_command({"nsenter", "-t", pid, "-n", "ip", "link", "set", "eth0", "up"}));
    // Token bucket: the rate, a burst of 5 ms of it (at least 64 KiB, so TSO segments pass), and up to
    // 100 ms of queue before drops, like a router's buffer.
    const double bytes_per_second = rates[i];
    const std::string rate = std::to_string(static_cast<std::uint64_t>(bytes_per_second * 8)) + "bit";
    const std::string burst =
        std::to_string(std::max<std::uint64_t>(65536, static_cast<std::uint64_t>(bytes_per_second * 0.005)));
    const std::vector<std::string> tbf = {"root", "tbf", "rate", rate, "burst", burst, "latency", "100ms"};
    std::vector<std::string> download = {"tc", "qdisc", "add", "dev", host_side};
    download.insert(download.end(), tbf.begin(), tbf.end());
    DEDLOC_RETURN_IF_ERROR(run_command(download));
    std::vector<std::string> upload = {"nsenter", "-t", pid, "-n", "tc", "qdisc", "add", "dev", "eth0"};
    upload.insert(upload.end(), tbf.begin(), tbf.end());
    DEDLOC_RETURN_IF_ERROR(run_command(upload));
  }
  return {};
}

}  // namespace dedloc::avg::bench
