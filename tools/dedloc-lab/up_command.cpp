// dedloc-lab up: uniform links between N hosts, for shell scripts (bench/lab) and tests.
#include <iostream>
#include <optional>

#include "commands.hpp"
#include "dedloc/cli/app.hpp"
#include "dedloc/cli/signals.hpp"
#include "dedloc/lab/emulator.hpp"
#include "dedloc/lab/link_spec.hpp"
#include "dedloc/lab/stats_json.hpp"

namespace dedloc::lab_tool {

namespace {

Result<lab::LinkSpec> link_spec(const UpOptions& o) {
  return lab::parse_link({o.rtt, o.jitter, o.rate, o.upload, o.download, o.loss, o.queue}, {}, "--");
}

}  // namespace

void add_up_flags(CLI::App& up, UpOptions& o) {
  up.add_option("--hosts", o.hosts, "number of lab hosts")->check(CLI::Range(1, 65000))->capture_default_str();
  up.add_option("--rtt", o.rtt, "round-trip time between two hosts, e.g. 100ms (each end adds a quarter each way)")
      ->capture_default_str();
  up.add_option("--jitter", o.jitter, "extra round-trip delay, up to this much at random, never reordering")
      ->capture_default_str();
  up.add_option("--rate", o.rate, "each host's link rate both ways, e.g. 100Mbit; 0: unlimited")->capture_default_str();
  up.add_option("--upload", o.upload, "each host's upload rate (overrides --rate)");
  up.add_option("--download", o.download, "each host's download rate (overrides --rate)");
  up.add_option("--loss", o.loss, "probability that a packet a host sends is lost (one way), e.g. 0.5%")
      ->capture_default_str();
  up.add_option("--queue", o.queue, "bytes each direction queues before tail drop; 0: 100 ms of its rate")
      ->capture_default_str();
  up.add_option("--mtu", o.mtu, "the TUN devices' MTU")->check(CLI::Range(lab::kMinMtu, lab::kMaxMtu))->capture_default_str();
  up.add_option("--congestion-control", o.congestion_control,
                 "the hosts' TCP congestion control (cubic, the internet's usual one, whatever this machine's)")
      ->capture_default_str();
  up.add_option("--seed", o.seed, "random seed of the loss and jitter")->capture_default_str();
}

int run_up(const UpOptions& o) {
  constexpr std::string_view kTool = "dedloc-lab up";
  auto spec = link_spec(o);
  if (!spec) return cli::report_failure(kTool, spec.status()), cli::kExitUsage;
  cli::install_shutdown_handlers();
  auto network = lab::LabNetwork::create(o.hosts, {.mtu = o.mtu, .congestion_control = o.congestion_control});
  if (!network) return cli::report_failure(kTool, network.status()), cli::kExitUnavailable;
  std::optional<lab::RunningEmulator> running;
  running.emplace(**network, std::vector<lab::HostLink>(o.hosts, lab::host_link(*spec)), std::vector<bool>(o.hosts, false),
                  o.seed);

  nlohmann::json hosts = nlohmann::json::array();
  for (const auto& host : (*network)->hosts()) hosts.push_back({{"netns", host.netns}, {"address", host.address}});
  std::cout << nlohmann::json{{"ready", true}, {"role", "lab"}, {"hosts", hosts}}.dump() << std::endl;

  while (!cli::wait_for_shutdown(std::chrono::milliseconds(200)) && running->failure().is_ok()) {
  }
  const nlohmann::json stats = lab::stats_json(running->emulator().stats());
  const Status outcome = running->failure();
  running.reset();  // stops and joins the emulator before the hosts go
  if (o.json) std::cout << stats.dump() << std::endl;
  else std::cerr << "dedloc-lab: " << stats.dump() << std::endl;
  if (!outcome.is_ok()) return cli::report_failure(kTool, outcome), cli::kExitFailure;
  return cli::kExitOk;
}

}  // namespace dedloc::lab_tool
