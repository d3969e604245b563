// A DHT swarm for tests that use the DHT as a tool (matchmaking, state donors, the averager): no
// background maintenance, errors-only logging.
#pragma once

#include <catch2/catch.hpp>

#include "dedloc/dht/local_swarm.hpp"

namespace dedloc::test {

inline Logger& quiet_log() {
  static Logger log(LogLevel::kError);
  return log;
}

inline std::unique_ptr<dht::LocalSwarm> quiet_swarm(size_t nodes) {
  dht::NodeOptions options;
  options.maintenance_interval = Duration::zero();
  options.log = &quiet_log();
  auto swarm = dht::LocalSwarm::launch(nodes, options);
  REQUIRE(swarm.is_ok());
  return std::move(swarm.value());
}

}  // namespace dedloc::test
