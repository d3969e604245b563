// Shared by the DHT's net tests (dht_test.cpp, dht_swarm_test.cpp): quiet nodes with a short RPC deadline,
// and byte/text helpers for record values.
#pragma once

#include <catch2/catch.hpp>

#include <chrono>
#include <string>

#include "dedloc/dht/local_swarm.hpp"

namespace dedloc::test {

constexpr auto kRpcTimeout = std::chrono::milliseconds(1000);
// A quarter for thread scheduling: CI runs this beside other tests on 2 cores, where a wake-up can lag.
constexpr auto kRpcTimeoutWithSlack = std::chrono::milliseconds(1250);

inline dht::NodeOptions quiet_options() {
  static Logger quiet(LogLevel::kError);
  dht::NodeOptions options;
  options.rpc_timeout = kRpcTimeout;
  options.rpc_stall_timeout = kRpcTimeout / 4;  // the defaults' ratio (2 s and 500 ms)
  options.maintenance_interval = Duration::zero();  // the tests republish when they mean to
  options.log = &quiet;
  return options;
}

inline Bytes bytes_of(const std::string& s) { return Bytes(s.begin(), s.end()); }
inline std::string text_of(const Bytes& b) { return std::string(b.begin(), b.end()); }
inline double in_an_hour() { return SystemClock::instance().unix_seconds() + 3600; }

inline std::unique_ptr<dht::LocalSwarm> launch(size_t nodes, dht::NodeOptions options = quiet_options()) {
  auto swarm = dht::LocalSwarm::launch(nodes, options);
  REQUIRE(swarm.is_ok());
  return std::move(swarm.value());
}

}  // namespace dedloc::test
