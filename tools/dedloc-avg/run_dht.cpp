#include "run_dht.hpp"

#include "dedloc/dht/record_schema.hpp"
#include "dedloc/net/peer_address.hpp"

namespace dedloc::avg_tool {

Result<std::unique_ptr<dht::Node>> join_run_dht(zmq::context_t& context, const crypto::Identity& identity,
                                                const cli::CommonFlags& common,
                                                const std::vector<std::string>& initial_peers, Duration timeout) {
  auto peers = cli::peer_addresses(common, initial_peers, "--initial-peers");
  if (!peers) return peers.status();
  return dht::join_as_client(context, identity, *peers, Deadline::after(timeout), dht::add_run_record_schemas);
}

}  // namespace dedloc::avg_tool
