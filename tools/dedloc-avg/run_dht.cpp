#include "run_dht.hpp"

#include "dedloc/avg/state_transfer.hpp"
#include "dedloc/net/peer_address.hpp"
#include "dedloc/relay/relay_directory.hpp"
#include "dedloc/train/progress.hpp"

namespace dedloc::avg_tool {

Result<std::unique_ptr<dht::Node>> join_run_dht(zmq::context_t& context, const crypto::Identity& identity,
                                                const std::vector<std::string>& initial_peers, Duration timeout) {
  auto peers = net::PeerAddress::parse_all(initial_peers, "--initial-peers");
  if (!peers) return peers.status();
  dht::NodeOptions options;
  options.listen = "";
  options.client_mode = true;
  options.maintenance_interval = Duration::zero();
  auto node = std::make_unique<dht::Node>(context, identity, options);
  train::add_progress_schema(node->validator());
  train::add_metrics_schema(node->validator());
  avg::add_donor_schema(node->validator());
  relay::add_relay_schema(node->validator());
  DEDLOC_RETURN_IF_ERROR(node->start());
  DEDLOC_RETURN_IF_ERROR(node->bootstrap(*peers, Deadline::after(timeout)));
  return node;
}

}  // namespace dedloc::avg_tool
