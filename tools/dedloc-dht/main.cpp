// dedloc-dht: runs a DHT node, or asks the DHT from the command line (docs/operators.md).
//
//   dedloc-dht serve [--listen tcp://0.0.0.0:PORT] [--initial-peers ADDR...] [--identity FILE] [--client-mode]
//   dedloc-dht store KEY VALUE [--subkey S] [--ttl SECONDS] --initial-peers ADDR
//   dedloc-dht get KEY [--latest] --initial-peers ADDR
//   dedloc-dht peers --initial-peers ADDR         (store, get, peers: query_commands.hpp)
//   dedloc-dht identity --identity FILE              (private runs: access_commands.hpp)
//   dedloc-dht token issue --authority-key FILE --peer-key PUBKEY --name NAME --expires 21d [--out FILE]
//   dedloc-dht token show FILE [--authority PUBKEY]
//   dedloc-dht token revoke --authority-key FILE --peer-key PUBKEY --initial-peers ADDR
#include <iostream>

#include <nlohmann/json.hpp>

#include "dedloc/cli/app.hpp"
#include "dedloc/cli/ready_line.hpp"
#include "dedloc/cli/signals.hpp"
#include "dedloc/dht/node.hpp"
#include "access_commands.hpp"
#include "query_commands.hpp"

namespace {

namespace cli = dedloc::cli;
namespace dht = dedloc::dht;
using dedloc::Deadline;

constexpr std::string_view kTool = "dedloc-dht";

struct Options {
  dedloc::tools::QueryOptions query;  // initial_peers, timeout and replicas serve `serve` too
  // serve
  std::string listen = "tcp://0.0.0.0:0";
  std::string announce;
  bool client_mode = false;
  double maintenance_seconds = 300;
  double revocation_refresh_seconds = 30;
};

void read_options(dedloc::ConfigReader& reader, Options& o) {
  reader.read("initial_peers", o.query.initial_peers);
  reader.read("listen", o.listen);
  reader.read("announce", o.announce);
  reader.read("client_mode", o.client_mode);
  reader.read("maintenance_interval_seconds", o.maintenance_seconds);
  reader.read("revocation_refresh_seconds", o.revocation_refresh_seconds);
  reader.read("replicas", o.query.replicas);
  reader.read("timeout_seconds", o.query.timeout_seconds);
}

int serve(const Options& o, const cli::CommonFlags& common) {
  auto peers = cli::peer_addresses(common, o.query.initial_peers, "--initial-peers");
  if (!peers) return cli::report_failure(kTool, peers.status());
  auto identity = cli::load_identity(common);
  if (!identity) return cli::report_failure(kTool, identity.status());
  dht::NodeOptions options;
  options.listen = o.listen;
  options.announce = o.announce;
  options.client_mode = o.client_mode;
  options.replicas = o.query.replicas;
  options.maintenance_interval = dedloc::from_seconds(o.maintenance_seconds);
  options.revocation_refresh = dedloc::from_seconds(o.revocation_refresh_seconds);
  zmq::context_t context;
  dht::Node node(context, std::move(*identity), options);
  cli::install_shutdown_handlers();
  if (auto started = node.start(); !started.is_ok()) return cli::report_failure(kTool, started);
  if (auto joined = node.bootstrap(*peers, Deadline::after(dedloc::from_seconds(o.query.timeout_seconds))); !joined.is_ok()) {
    return cli::report_failure(kTool, joined);
  }
  cli::ReadyLine ready{"dht", node.id(), {node.address().to_string()}, {}};
  if (o.client_mode) ready.extra["client_mode"] = "true";
  ready.print();
  if (!o.client_mode) {
    dedloc::Logger::global().info("dht") << "others join with --initial-peers " << node.address().to_string();
  }
  while (!cli::wait_for_shutdown(std::chrono::seconds(1))) {
  }
  node.stop();
  dedloc::Logger::global().info("dht") << "left the network";
  return cli::kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  cli::CommonFlags common;
  if (auto config = cli::find_config_flag(argc, argv)) {
    auto loaded = cli::load_config_file(*config, [&](dedloc::ConfigReader& r) { read_options(r, o); });
    if (!loaded.is_ok()) return cli::report_failure(kTool, loaded), cli::kExitConfig;
  }

  CLI::App app{"The dedloc DHT: a Kademlia network where peers find each other and share collaboration records "
               "(progress, metrics, matchmaking) without a master. Run a node with `serve`; read and write "
               "records with `store`, `get` and `peers`.",
               std::string(kTool)};
  app.require_subcommand(1);
  app.fallthrough();
  // The subcommands honour different common flags (`serve` prints no JSON, `token issue` joins no run): the
  // tool offers them all, and each subcommand refuses those it would ignore (below).
  const cli::HonouredFlags dht_settings{.config = true, .print_config = true};
  const cli::HonouredFlags json_output{.json = true};
  cli::add_common_flags(app, common, cli::HonouredFlags::all());
  app.add_option("--initial-peers", o.query.initial_peers,
                 "DHT nodes to join through: tcp://HOST:PORT/k/KEY, as a `serve` ready line prints it");
  app.add_option("--timeout", o.query.timeout_seconds, "seconds to join and to finish the command")->capture_default_str();
  app.add_option("--replicas", o.query.replicas, "nodes that hold each stored value")->capture_default_str();

  std::vector<std::pair<CLI::App*, cli::HonouredFlags>> honoured;
  auto* serve_cmd = app.add_subcommand("serve", "run a DHT node until SIGINT/SIGTERM; prints a ready line with its address");
  serve_cmd->add_option("--listen", o.listen, "endpoint to bind (port 0: any free port): ZeroMQ on its TCP port, DHT datagrams on the same UDP port")->capture_default_str();
  serve_cmd->add_option("--announce", o.announce,
                        "address others should dial, when it differs from the bound one (port forwarding)");
  serve_cmd->add_flag("--client-mode", o.client_mode,
                      "behind NAT: query and store, but never enter other nodes' routing tables");
  serve_cmd->add_option("--maintenance-interval", o.maintenance_seconds,
                        "seconds between re-storing held records to their current nearest nodes (0: never)")
      ->capture_default_str();
  serve_cmd->add_option("--revocation-refresh", o.revocation_refresh_seconds,
                        "a private run: seconds between reads of the authority's revocation list (0: never)")
      ->capture_default_str();
  honoured.emplace_back(serve_cmd, dht_settings | cli::HonouredFlags::peer());

  auto* store_cmd = app.add_subcommand("store", "store VALUE under KEY (JSON values are stored as msgpack, others as strings)");
  store_cmd->add_option("KEY", o.query.key, "the key name")->required();
  store_cmd->add_option("VALUE", o.query.value, "a string or JSON")->required();
  auto* subkey_opt = store_cmd->add_option("--subkey", o.query.subkey, "store under this subkey of a dictionary key");
  store_cmd->add_option("--ttl", o.query.ttl_seconds, "seconds until the value expires")->capture_default_str();
  honoured.emplace_back(store_cmd, dht_settings | cli::HonouredFlags::peer() | json_output);

  auto* get_cmd = app.add_subcommand("get", "print the value (or subkeys) under KEY; exit 1 when not found");
  get_cmd->add_option("KEY", o.query.key, "the key name")->required();
  get_cmd->add_flag("--latest", o.query.latest, "ask every nearest node and merge the newest entries (slower)");
  honoured.emplace_back(get_cmd, dht_settings | cli::HonouredFlags::peer() | json_output);

  auto* peers_cmd = app.add_subcommand("peers", "list what the first initial peer knows: its contacts and key count");
  honoured.emplace_back(peers_cmd, dht_settings | cli::HonouredFlags::peer() | json_output);

  // Private runs (docs/security.md).
  dedloc::tools::TokenIssueOptions token;
  auto* identity_cmd = app.add_subcommand("identity", "print the PeerID and public key of --identity FILE (created if "
                                                      "missing): what a run's authority signs a token for");
  honoured.emplace_back(identity_cmd, cli::HonouredFlags{.identity = true, .json = true});
  auto* token_cmd = app.add_subcommand("token", "access tokens of a private run");
  token_cmd->require_subcommand(1);
  auto* issue_cmd = token_cmd->add_subcommand("issue", "as the run's authority, sign a token for one peer's public key");
  issue_cmd->add_option("--authority-key", token.authority_key, "the authority's identity file (its ed25519 key)")
      ->required();
  issue_cmd->add_option("--peer-key", token.peer_key, "the peer's public key (hex, as `dedloc-dht identity` prints it)")
      ->required();
  issue_cmd->add_option("--name", token.name, "who the token is for (shown in logs; at most 64 bytes)")->required();
  issue_cmd->add_option("--expires", token.expires, "how long it is valid: 21d, 12h, 90m or seconds")
      ->capture_default_str();
  issue_cmd->add_option("--out", token.out, "write the token to this file (mode 0600) instead of printing it");
  honoured.emplace_back(issue_cmd, json_output);
  auto* show_cmd = token_cmd->add_subcommand("show", "print a token's peer, name, expiry and authority; with "
                                                     "--authority, whether it is valid for that run (exit 1 if not)");
  show_cmd->add_option("FILE", token.show_path, "the token file")->required();
  honoured.emplace_back(show_cmd, cli::HonouredFlags{.authority = true, .json = true});
  auto* revoke_cmd = token_cmd->add_subcommand("revoke", "as the run's authority, add a peer's key to the run's "
                                                         "revocation list in the DHT (peers refuse it from then on)");
  revoke_cmd->add_option("--authority-key", token.authority_key, "the authority's identity file")->required();
  revoke_cmd->add_option("--peer-key", token.peer_key, "the public key (hex) whose tokens to revoke")->required();
  // The authority joins as itself (--authority-key), with a token it signs for this one command.
  honoured.emplace_back(revoke_cmd, dht_settings | cli::HonouredFlags{.plaintext = true, .json = true});

  if (auto exit = cli::parse(app, argc, argv)) return *exit;
  for (const auto& [subcommand, flags] : honoured) {
    if (!*subcommand) continue;
    const std::string name =
        subcommand->get_parent() == token_cmd ? "token " + subcommand->get_name() : subcommand->get_name();
    if (auto refused = cli::refuse_unhonoured(app, flags, name); !refused.is_ok()) {
      return cli::report_failure(kTool, refused);
    }
  }
  if (auto status = cli::setup_logging(common, dedloc::Logger::global()); !status.is_ok()) {
    return cli::report_failure(kTool, status);
  }
  o.query.has_subkey = subkey_opt->count() > 0;
  if (common.print_config) {
    nlohmann::json effective{{"initial_peers", o.query.initial_peers}, {"listen", o.listen}, {"announce", o.announce},
                             {"client_mode", o.client_mode}, {"maintenance_interval_seconds", o.maintenance_seconds},
                             {"revocation_refresh_seconds", o.revocation_refresh_seconds},
                             {"replicas", o.query.replicas}, {"timeout_seconds", o.query.timeout_seconds}};
    std::cout << effective.dump(2) << "\n";
    return cli::kExitOk;
  }
  if (*serve_cmd) return serve(o, common);
  if (*store_cmd) return dedloc::tools::store_value(o.query, common);
  if (*get_cmd) return dedloc::tools::get_value(o.query, common);
  if (*peers_cmd) return dedloc::tools::list_peers(o.query, common);
  if (*identity_cmd) return dedloc::tools::print_identity(common);
  if (*issue_cmd) return dedloc::tools::issue_token(token, common);
  if (*show_cmd) return dedloc::tools::show_token(token, common);
  if (*revoke_cmd) {
    token.initial_peers = o.query.initial_peers;
    token.timeout_seconds = o.query.timeout_seconds;
    return dedloc::tools::revoke_token(token, common);
  }
  return cli::kExitUsage;
}
