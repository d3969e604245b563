// dedloc-relay: a public peer through which peers behind NAT take part (lib/dedloc/relay).
//
//   dedloc-relay serve [--listen tcp://0.0.0.0:PORT] [--announce tcp://HOST:PORT] [--initial-peers ADDR...]
//                      [--max-peers N] [--max-circuits N] [--max-rate MIB_PER_S] [--max-total GIB] [--idle S]
//
// Prints a ready line with its address (tcp://HOST:PORT/k/RELAYKEY) and, with --initial-peers, lists itself
// in the DHT so that client-mode peers find it without configuration (relay::ListedRelay). Runs until
// SIGINT/SIGTERM.
#include <iostream>

#include "dedloc/cli/app.hpp"
#include "dedloc/cli/ready_line.hpp"
#include "dedloc/cli/signals.hpp"
#include "dedloc/relay/listed_relay.hpp"

namespace {

using namespace dedloc;
constexpr std::string_view kTool = "dedloc-relay";

struct Options {
  std::string listen = "tcp://0.0.0.0:0";
  std::string announce;
  std::vector<std::string> initial_peers;
  size_t max_peers = 1024;
  size_t max_circuits = 64;
  double max_rate_mib = 32;
  double max_total_gib = 1024;
  double idle_seconds = 30;
};

int serve(const Options& o, const cli::CommonFlags& common) {
  auto identity = cli::load_identity(common);
  if (!identity) return cli::report_failure(kTool, identity.status());
  auto peers = cli::peer_addresses(common, o.initial_peers, "--initial-peers");
  if (!peers) return cli::report_failure(kTool, peers.status());
  cli::install_shutdown_handlers();

  zmq::context_t context;
  relay::ListedRelayOptions options;
  options.relay.listen = o.listen;
  options.relay.limits.max_peers = o.max_peers;
  options.relay.limits.max_circuits = o.max_circuits;
  options.relay.limits.bytes_per_second = o.max_rate_mib * (1 << 20);
  options.relay.limits.max_total_bytes = static_cast<std::uint64_t>(o.max_total_gib * (1ull << 30));
  options.relay.limits.idle = from_seconds(o.idle_seconds);
  options.announce = o.announce;
  options.initial_peers = std::move(*peers);
  relay::ListedRelay relay(context, *identity, std::move(options));
  if (auto started = relay.start(); !started.is_ok()) return cli::report_failure(kTool, started);
  cli::ReadyLine{"relay", identity->peer_id(), {relay.address().to_string()}, {}}.print();
  (void)relay.run([] { return cli::shutdown_requested(); });
  return cli::kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  cli::CommonFlags common;
  Options o;
  CLI::App app{"dedloc-relay: a public peer through which peers behind NAT (client mode) stay reachable. They "
               "keep a connection to it; others reach them as relay://HOST:PORT/k/RELAYKEY/p/PEERID.",
               "dedloc-relay"};
  app.require_subcommand(1);
  app.fallthrough();
  // No --config (the relay takes flags only), --print-config or --json (its one output is the ready line).
  cli::add_common_flags(app, common, cli::HonouredFlags::peer());
  auto* serve_cmd = app.add_subcommand("serve", "relay for client-mode peers until SIGINT/SIGTERM");
  serve_cmd->add_option("--listen", o.listen, "endpoint to bind (port 0: any free port)")->capture_default_str();
  serve_cmd->add_option("--announce", o.announce, "the address peers dial, when it differs from the bound one");
  serve_cmd->add_option("--initial-peers", o.initial_peers, "DHT nodes to list this relay through (client peers find it there)");
  serve_cmd->add_option("--max-peers", o.max_peers, "client peers attached at once")->capture_default_str();
  serve_cmd->add_option("--max-circuits", o.max_circuits, "requesters at once, per client peer")->capture_default_str();
  serve_cmd->add_option("--max-rate", o.max_rate_mib, "MiB/s through each client peer's circuit")
      ->capture_default_str()->check(CLI::PositiveNumber);
  serve_cmd->add_option("--max-total", o.max_total_gib, "GiB through each client peer's circuit while attached")
      ->capture_default_str()->check(CLI::PositiveNumber);
  serve_cmd->add_option("--idle", o.idle_seconds, "seconds of silence after which a circuit is closed")
      ->capture_default_str()->check(CLI::PositiveNumber);
  if (auto exit = cli::parse(app, argc, argv)) return *exit;
  if (auto status = cli::setup_logging(common, Logger::global()); !status.is_ok()) {
    return cli::report_failure(kTool, status);
  }
  return serve(o, common);
}
