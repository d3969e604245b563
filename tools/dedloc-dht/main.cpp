// dedloc-dht: runs a DHT node, or asks the DHT from the command line (docs/operators.md).
//
//   dedloc-dht serve [--listen tcp://0.0.0.0:PORT] [--initial-peers ADDR...] [--identity FILE] [--client-mode]
//   dedloc-dht store KEY VALUE [--subkey S] [--ttl SECONDS] --initial-peers ADDR
//   dedloc-dht get KEY [--latest] --initial-peers ADDR
//   dedloc-dht peers --initial-peers ADDR
//   dedloc-dht identity --identity FILE              (private runs: access_commands.hpp)
//   dedloc-dht token issue --authority-key FILE --peer-key PUBKEY --name NAME --expires 21d [--out FILE]
//   dedloc-dht token show FILE [--authority PUBKEY]
//   dedloc-dht token revoke --authority-key FILE --peer-key PUBKEY --initial-peers ADDR
#include <iostream>

#include "dedloc/cli/app.hpp"
#include "dedloc/cli/ready_line.hpp"
#include "dedloc/cli/signals.hpp"
#include "dedloc/dht/node.hpp"
#include "access_commands.hpp"
#include "values.hpp"

namespace {

namespace cli = dedloc::cli;
namespace dht = dedloc::dht;
using dedloc::Code;
using dedloc::Deadline;
using dedloc::Status;

constexpr std::string_view kTool = "dedloc-dht";

struct Options {
  std::vector<std::string> initial_peers;
  double timeout_seconds = 10;  // the whole store/get/peers/bootstrap
  // serve
  std::string listen = "tcp://0.0.0.0:0";
  std::string announce;
  bool client_mode = false;
  double maintenance_seconds = 300;
  double revocation_refresh_seconds = 30;
  std::uint64_t replicas = 5;
  // store / get
  std::string key;
  std::string value;
  std::string subkey;
  bool has_subkey = false;
  double ttl_seconds = 3600;
  bool latest = false;
};

void read_options(dedloc::ConfigReader& reader, Options& o) {
  reader.read("initial_peers", o.initial_peers);
  reader.read("listen", o.listen);
  reader.read("announce", o.announce);
  reader.read("client_mode", o.client_mode);
  reader.read("maintenance_interval_seconds", o.maintenance_seconds);
  reader.read("revocation_refresh_seconds", o.revocation_refresh_seconds);
  reader.read("replicas", o.replicas);
  reader.read("timeout_seconds", o.timeout_seconds);
}

// A short-lived client-mode node for store/get/peers: no server, joined through the initial peers.
dedloc::Result<std::unique_ptr<dht::Node>> join_as_client(zmq::context_t& context, const Options& o,
                                                          const cli::CommonFlags& common) {
  if (o.initial_peers.empty()) {
    return dedloc::error(Code::kInvalidArgument,
                         "--initial-peers ADDR is required: the address a running `dedloc-dht serve` printed "
                         "(tcp://HOST:PORT/k/KEY)");
  }
  auto peers = cli::peer_addresses(common, o.initial_peers, "--initial-peers");
  if (!peers) return peers.status();
  auto identity = cli::load_identity(common);
  if (!identity) return identity.status();
  dht::NodeOptions options;
  options.replicas = o.replicas;
  return dht::join_as_client(context, std::move(*identity), *peers,
                             Deadline::after(dedloc::from_seconds(o.timeout_seconds)), {}, options);
}

int serve(const Options& o, const cli::CommonFlags& common) {
  auto peers = cli::peer_addresses(common, o.initial_peers, "--initial-peers");
  if (!peers) return cli::report_failure(kTool, peers.status());
  auto identity = cli::load_identity(common);
  if (!identity) return cli::report_failure(kTool, identity.status());
  dht::NodeOptions options;
  options.listen = o.listen;
  options.announce = o.announce;
  options.client_mode = o.client_mode;
  options.replicas = o.replicas;
  options.maintenance_interval = dedloc::from_seconds(o.maintenance_seconds);
  options.revocation_refresh = dedloc::from_seconds(o.revocation_refresh_seconds);
  zmq::context_t context;
  dht::Node node(context, std::move(*identity), options);
  cli::install_shutdown_handlers();
  if (auto started = node.start(); !started.is_ok()) return cli::report_failure(kTool, started);
  if (auto joined = node.bootstrap(*peers, Deadline::after(dedloc::from_seconds(o.timeout_seconds))); !joined.is_ok()) {
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

int store(const Options& o, const cli::CommonFlags& common) {
  if (!(o.ttl_seconds > 0)) return cli::report_failure(kTool, dedloc::error(Code::kInvalidArgument, "--ttl must be > 0"));
  zmq::context_t context;
  auto node = join_as_client(context, o, common);
  if (!node) return cli::report_failure(kTool, node.status());
  double expiration = dedloc::SystemClock::instance().unix_seconds() + o.ttl_seconds;
  std::optional<dedloc::Bytes> subkey;
  if (o.has_subkey) subkey = dedloc::Bytes(o.subkey.begin(), o.subkey.end());
  auto stored = (*node)->store(o.key, subkey, dedloc::tools::value_from_text(o.value), expiration,
                               Deadline::after(dedloc::from_seconds(o.timeout_seconds)));
  if (!stored) return cli::report_failure(kTool, stored.status());
  if (common.json) {
    nlohmann::json out{{"key", o.key}, {"stored", stored->stored}, {"attempted", stored->attempted},
                       {"expiration", expiration}};
    if (subkey) out["subkey"] = o.subkey;
    std::cout << out.dump() << "\n";
  } else {
    std::cout << "stored '" << o.key << "'" << (subkey ? " subkey '" + o.subkey + "'" : "") << " on "
              << stored->stored << " of " << stored->attempted << " replicas, expires "
              << dedloc::format_utc(expiration) << "\n";
  }
  return cli::kExitOk;
}

int get(const Options& o, const cli::CommonFlags& common) {
  zmq::context_t context;
  auto node = join_as_client(context, o, common);
  if (!node) return cli::report_failure(kTool, node.status());
  auto record = (*node)->get(o.key, o.latest ? dht::GetMode::kLatest : dht::GetMode::kFirst,
                             Deadline::after(dedloc::from_seconds(o.timeout_seconds)));
  if (!record) return cli::report_failure(kTool, record.status());
  if (common.json) {
    std::cout << dedloc::tools::record_to_json(o.key, *record).dump() << "\n";
  } else {
    std::cout << dedloc::tools::format_record(o.key, *record, dedloc::SystemClock::instance().unix_seconds());
  }
  return record->has_value() ? cli::kExitOk : cli::kExitFailure;
}

int peers(const Options& o, const cli::CommonFlags& common) {
  zmq::context_t context;
  auto node = join_as_client(context, o, common);
  if (!node) return cli::report_failure(kTool, node.status());
  auto first = dedloc::net::PeerAddress::parse(o.initial_peers.front());
  auto list = (*node)->ask_peers(first->endpoint, Deadline::after(dedloc::from_seconds(o.timeout_seconds)));
  if (!list) return cli::report_failure(kTool, list.status());
  double now = dedloc::SystemClock::instance().unix_seconds();
  if (common.json) {
    nlohmann::json out{{"endpoint", list->endpoint}, {"stored_keys", list->stored_keys}, {"contacts", nlohmann::json::array()}};
    for (const auto& c : list->contacts) {
      out["contacts"].push_back({{"peer_id", c.id.to_string()}, {"endpoint", c.endpoint}, {"last_seen", c.last_seen}});
    }
    std::cout << out.dump() << "\n";
  } else {
    std::cout << list->endpoint << " holds " << list->stored_keys << " keys and knows " << list->contacts.size()
              << " peers:\n";
    for (const auto& c : list->contacts) {
      std::cout << "  " << dedloc::net::PeerAddress{c.endpoint, c.id}.to_string() << "   seen "
                << static_cast<long long>(now - c.last_seen) << " s ago\n";
    }
  }
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
  cli::add_common_flags(app, common);
  app.add_option("--initial-peers", o.initial_peers,
                 "DHT nodes to join through: tcp://HOST:PORT/k/KEY, as a `serve` ready line prints it");
  app.add_option("--timeout", o.timeout_seconds, "seconds to join and to finish the command")->capture_default_str();
  app.add_option("--replicas", o.replicas, "nodes that hold each stored value")->capture_default_str();

  auto* serve_cmd = app.add_subcommand("serve", "run a DHT node until SIGINT/SIGTERM; prints a ready line with its address");
  serve_cmd->add_option("--listen", o.listen, "ZeroMQ endpoint to bind (port 0: any free port)")->capture_default_str();
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

  auto* store_cmd = app.add_subcommand("store", "store VALUE under KEY (JSON values are stored as msgpack, others as strings)");
  store_cmd->add_option("KEY", o.key, "the key name")->required();
  store_cmd->add_option("VALUE", o.value, "a string or JSON")->required();
  auto* subkey_opt = store_cmd->add_option("--subkey", o.subkey, "store under this subkey of a dictionary key");
  store_cmd->add_option("--ttl", o.ttl_seconds, "seconds until the value expires")->capture_default_str();

  auto* get_cmd = app.add_subcommand("get", "print the value (or subkeys) under KEY; exit 1 when not found");
  get_cmd->add_option("KEY", o.key, "the key name")->required();
  get_cmd->add_flag("--latest", o.latest, "ask every nearest node and merge the newest entries (slower)");

  auto* peers_cmd = app.add_subcommand("peers", "list what the first initial peer knows: its contacts and key count");

  // Private runs (docs/security.md).
  dedloc::tools::TokenIssueOptions token;
  auto* identity_cmd = app.add_subcommand("identity", "print the PeerID and public key of --identity FILE (created if "
                                                      "missing): what a run's authority signs a token for");
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
  auto* show_cmd = token_cmd->add_subcommand("show", "print a token's peer, name, expiry and authority; with "
                                                     "--authority, whether it is valid for that run (exit 1 if not)");
  show_cmd->add_option("FILE", token.show_path, "the token file")->required();
  auto* revoke_cmd = token_cmd->add_subcommand("revoke", "as the run's authority, add a peer's key to the run's "
                                                         "revocation list in the DHT (peers refuse it from then on)");
  revoke_cmd->add_option("--authority-key", token.authority_key, "the authority's identity file")->required();
  revoke_cmd->add_option("--peer-key", token.peer_key, "the public key (hex) whose tokens to revoke")->required();

  if (auto exit = cli::parse(app, argc, argv)) return *exit;
  if (auto status = cli::setup_logging(common, dedloc::Logger::global()); !status.is_ok()) {
    return cli::report_failure(kTool, status);
  }
  o.has_subkey = subkey_opt->count() > 0;
  if (common.print_config) {
    nlohmann::json effective{{"initial_peers", o.initial_peers}, {"listen", o.listen}, {"announce", o.announce},
                             {"client_mode", o.client_mode}, {"maintenance_interval_seconds", o.maintenance_seconds},
                             {"revocation_refresh_seconds", o.revocation_refresh_seconds},
                             {"replicas", o.replicas}, {"timeout_seconds", o.timeout_seconds}};
    std::cout << effective.dump(2) << "\n";
    return cli::kExitOk;
  }
  if (*serve_cmd) return serve(o, common);
  if (*store_cmd) return store(o, common);
  if (*get_cmd) return get(o, common);
  if (*peers_cmd) return peers(o, common);
  if (*identity_cmd) return dedloc::tools::print_identity(common);
  if (*issue_cmd) return dedloc::tools::issue_token(token, common);
  if (*show_cmd) return dedloc::tools::show_token(token, common);
  if (*revoke_cmd) {
    token.initial_peers = o.initial_peers;
    token.timeout_seconds = o.timeout_seconds;
    return dedloc::tools::revoke_token(token, common);
  }
  return cli::kExitUsage;
}
