#include "run_dht.hpp"

#include "dedloc/avg/state_transfer.hpp"
#include "dedloc/net/peer_address.hpp"
#include "dedloc/relay/relay_directory.hpp"
#include "dedloc/collab/progress.hpp"

namespace dedloc::avg_tool {

Result<std::unique_ptr<dht::Node>> join_run_dht(zmq::context_t& context, const crypto::Identity& identity,
                                                const cli::CommonFlags& common,
                                                const std::vector<std::string>& initial_peers, Duration timeout) {
  auto peers = cli::peer_addresses(common, initial_peers, "--initial-peers");
  if (!peers) return peers.status();
  return dht::join_as_client(context, identity, *peers, Deadline::after(timeout), [](dht::RecordValidator& validator) {
    collab::add_progress_schema(validator);
    collab::add_metrics_schema(validator);
    avg::add_donor_schema(validator);
    relay::add_relay_schema(validator);
  });
}

}  // namespace dedloc::avg_tool
