// How dedloc-avg's subcommands reach a run: a DHT node in client mode (it asks and stores, but serves no
// records and binds no port), joined through the run's initial peers.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <zmq.hpp>

#include "dedloc/cli/app.hpp"
#include "dedloc/core/clock.hpp"
#include "dedloc/dht/node.hpp"

namespace dedloc::avg_tool {

// Started and bootstrapped, with the run's record schemas registered (records that do not fit are dropped
// on arrival). `initial_peers` as given on the command line (errors name --initial-peers).
Result<std::unique_ptr<dht::Node>> join_run_dht(zmq::context_t& context, const crypto::Identity& identity,
                                                const cli::CommonFlags& common,
                                                const std::vector<std::string>& initial_peers, Duration timeout);

}  // namespace dedloc::avg_tool
