#include "query_commands.hpp"

#include <iostream>

#include <nlohmann/json.hpp>

#include "dedloc/dht/node.hpp"
#include "values.hpp"

namespace dedloc::tools {
namespace {

constexpr std::string_view kTool = "dedloc-dht";

// A short-lived client-mode node for store/get/peers: no server, joined through the initial peers.
Result<std::unique_ptr<dht::Node>> join_as_client(zmq::context_t& context, const QueryOptions& o,
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

}  // namespace

int store_value(const QueryOptions& o, const cli::CommonFlags& common) {
  if (!(o.ttl_seconds > 0)) return cli::report_failure(kTool, dedloc::error(Code::kInvalidArgument, "--ttl must be > 0"));
  zmq::context_t context;
  auto node = join_as_client(context, o, common);
  if (!node) return cli::report_failure(kTool, node.status());
  double expiration = dedloc::SystemClock::instance().unix_seconds() + o.ttl_seconds;
  std::optional<dedloc::Bytes> subkey;
  if (o.has_subkey) subkey = dedloc::Bytes(o.subkey.begin(), o.subkey.end());
  auto stored = (*node)->store(o.key, subkey, value_from_text(o.value), expiration,
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

int get_value(const QueryOptions& o, const cli::CommonFlags& common) {
  zmq::context_t context;
  auto node = join_as_client(context, o, common);
  if (!node) return cli::report_failure(kTool, node.status());
  auto record = (*node)->get(o.key, o.latest ? dht::GetMode::kLatest : dht::GetMode::kFirst,
                             Deadline::after(dedloc::from_seconds(o.timeout_seconds)));
  if (!record) return cli::report_failure(kTool, record.status());
  if (common.json) {
    std::cout << record_to_json(o.key, *record).dump() << "\n";
  } else {
    std::cout << format_record(o.key, *record, dedloc::SystemClock::instance().unix_seconds());
  }
  return record->has_value() ? cli::kExitOk : cli::kExitFailure;
}

int list_peers(const QueryOptions& o, const cli::CommonFlags& common) {
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

}  // namespace dedloc::tools
