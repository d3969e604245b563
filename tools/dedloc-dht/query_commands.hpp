// dedloc-dht's commands that ask the DHT through a short-lived client-mode node (values.hpp says how
// values are written and shown):
//   store KEY VALUE [--subkey S] [--ttl SECONDS]     get KEY [--latest]     peers
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dedloc/cli/app.hpp"

namespace dedloc::tools {

struct QueryOptions {
  std::vector<std::string> initial_peers;  // where to join (serve: whom to bootstrap from)
  double timeout_seconds = 10;             // the whole store/get/peers/bootstrap
  std::uint64_t replicas = 5;              // nodes that hold each stored value
  std::string key;
  std::string value;                       // store: a string or JSON
  std::string subkey;
  bool has_subkey = false;
  double ttl_seconds = 3600;
  bool latest = false;                     // get: ask every nearest node and merge
};

int store_value(const QueryOptions& o, const cli::CommonFlags& common);
// Exit 1 when the key is not found.
int get_value(const QueryOptions& o, const cli::CommonFlags& common);
int list_peers(const QueryOptions& o, const cli::CommonFlags& common);

}  // namespace dedloc::tools
