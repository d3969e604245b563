#include "dedloc/lab/stats_json.hpp"

namespace dedloc::lab {

nlohmann::json stats_json(const EmulatorStats& stats) {
  nlohmann::json hosts = nlohmann::json::array();
  for (const LinkCounters& c : stats.hosts) {
    hosts.push_back({{"packets_sent", c.packets_sent},
                     {"bytes_sent", c.bytes_sent},
                     {"packets_received", c.packets_received},
                     {"bytes_received", c.bytes_received},
                     {"dropped_loss", c.dropped_loss},
                     {"dropped_queue", c.dropped_queue},
                     {"dropped_link_down", c.dropped_down}});
  }
  const double gbits = static_cast<double>(stats.bytes) * 8 / 1e9;
  return {{"packets", stats.packets},
          {"bytes", stats.bytes},
          {"dropped", {{"nat", stats.dropped_nat}, {"unroutable", stats.dropped_unroutable}, {"overflow", stats.dropped_overflow}}},
          {"cpu_s", stats.cpu_seconds},
          {"wall_s", stats.wall_seconds},
          // CPU seconds the emulator spent per gigabit it delivered (both TUN ends' reads and writes).
          {"cpu_s_per_gbit", gbits > 0 ? stats.cpu_seconds / gbits : 0.0},
          {"hosts", hosts}};
}

}  // namespace dedloc::lab
