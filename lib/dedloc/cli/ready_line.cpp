#include "dedloc/cli/ready_line.hpp"

#include <cstdio>

#include <nlohmann/json.hpp>

namespace dedloc::cli {

std::string ReadyLine::to_json() const {
  nlohmann::json j;
  j["ready"] = true;
  j["role"] = role;
  j["peer_id"] = peer_id.to_string();
  j["endpoints"] = endpoints;
  for (const auto& [k, v] : extra) j[k] = v;
  return j.dump();
}

void ReadyLine::print() const {
  std::string line = to_json() + "\n";
  std::fwrite(line.data(), 1, line.size(), stdout);
  std::fflush(stdout);
}

}  // namespace dedloc::cli
