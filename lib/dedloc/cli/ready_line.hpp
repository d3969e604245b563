// The one machine-readable line a daemon prints on stdout when it is ready to serve, so scripts and tests
// wait for it instead of sleeping:
//   {"ready":true,"role":"dht","peer_id":"3f2a…","endpoints":["tcp://127.0.0.1:41234/k/9c1e…"]}
#pragma once

#include <map>
#include <string>
#include <vector>

#include "dedloc/crypto/peer_id.hpp"

namespace dedloc::cli {

struct ReadyLine {
  std::string role;
  crypto::PeerId peer_id;
  std::vector<std::string> endpoints;
  std::map<std::string, std::string> extra;  // role-specific facts (e.g. "run_id")

  std::string to_json() const;
  void print() const;  // to stdout, flushed
};

}  // namespace dedloc::cli
