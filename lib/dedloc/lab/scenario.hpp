// A lab scenario (docs/lab.md, "Scenarios"): which peers, on which links, doing what, and what goes wrong
// when. Read from YAML with strict keys (an unknown key or a bad value names the key and the file):
//
//   duration: 5min                # how long the peers run (the report measures after `warmup`)
//   warmup: 60s
//   recipe: recipes/synthetic.yaml  # what every trainer runs (relative to the scenario file)
//   seed: 1
//   mtu: 1500                     # the lab hosts' MTU (default 65000: docs/lab.md, "Packet size")
//   congestion_control: cubic     # the hosts' TCP congestion control (the default; docs/lab.md)
//   infrastructure:               # the DHT bootstrap node and the relays, on public links
//     rtt: 20ms
//     rate: 1Gbit
//     relays: 2
//   groups:
//     - name: home                # peers home-0, home-1, ...
//       count: 40
//       role: client              # node (public, aggregates), client (client mode, through relays), aux
//       nat: true                 # behind a home router: nothing can connect in
//       compute: 20               # samples/s (emulated by the synthetic task); aux: ignored
//       upload: 20Mbit            # or rate: for both
//       download: 100Mbit
//       rtt: 100ms                # to a host with the same rtt (each end adds a quarter each way)
//       loss: 0.1%                # of each packet the peer sends
//       jitter: 0
//       join_at: 150s             # optional: the group's peers all start then (a wave of joiners)
//   faults:                       # each at a time after the start
//     - {at: 90s, kill: home-3}                 # SIGKILL (a machine losing power)
//     - {at: 120s, start: home-3}               # (re)start it: a joiner
//     - {at: 100s, link_down: node-0, for: 10s} # everything to and from it dropped for 10 s
//     - {at: 150s, kill: relay-0}
//     - {mtbf: 120s, group: home, downtime: 30s}  # each peer of the group dies after an exponential time
//                                                 # with this mean, and comes back `downtime` later
//     - {at: 60s, set_link: home, rtt: 300ms}   # a group's (or one peer's) link changes for good: the
//                                                 # keys of a group's link, over what it had
//     - {alternate: parttime, on: 60s, off: 60s, stagger: 15s}  # part-time peers: from `at` (default 0)
//                                                 # each peer of the group is on for `on`, leaves (SIGINT:
//                                                 # it exits as a volunteer closing it would), is back after
//                                                 # `off`, and so on; peer i's cycle runs i × stagger ahead
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "dedloc/core/status.hpp"
#include "dedloc/lab/lab_network.hpp"
#include "dedloc/lab/link_spec.hpp"

namespace dedloc::lab {

enum class PeerRole { kNode, kClient, kAux };

struct PeerGroup {
  std::string name;
  size_t count = 1;
  PeerRole role = PeerRole::kNode;
  bool nat = false;
  double compute = 10;  // samples/s
  LinkSpec link;
  Duration join_at{0};  // when the group's peers start (all at once: a wave of joiners); 0: with the run
};

struct Fault {
  enum class Kind { kKill, kStart, kLinkDown, kRandomKills, kSetLink, kAlternate };
  Kind kind = Kind::kKill;
  Duration at{0};
  std::string target;      // a process name: home-3, node-0, relay-1, dht-0 (kRandomKills: a group name)
  Duration length{0};      // kLinkDown: how long; kRandomKills: the downtime before the restart
  Duration mean_time{0};   // kRandomKills: the mean time between failures of each peer
  // kSetLink: the target's link from `at` on (target: a group, each of its peers, or one peer).
  LinkSpec link;
  Duration on{0}, off{0};  // kAlternate: how long each peer of the group runs, then stays away
  Duration stagger{0};     // kAlternate: how far ahead in its cycle each next peer of the group is
};

// When part-time peer `index` of an alternating group (Fault::Kind::kAlternate) leaves (false) and comes
// back (true), in order, up to `until`. At f.at its cycle is (index × stagger) mod (on + off) along: a peer
// that is then in its off part leaves at f.at.
std::vector<std::pair<Duration, bool>> alternation(const Fault& f, size_t index, Duration until);

struct Scenario {
  std::string source;      // the file
  std::string recipe;      // resolved against the scenario's directory
  Duration duration = std::chrono::minutes(5);
  Duration warmup = std::chrono::seconds(60);
  std::uint64_t seed = 1;
  int mtu = LabNetworkOptions{}.mtu;
  std::string congestion_control = kDefaultCongestionControl;
  LinkSpec infrastructure_link;
  size_t relays = 0;
  std::vector<PeerGroup> groups;
  std::vector<Fault> faults;

  size_t peer_count() const;
};

// How many of group `g`'s peers are in at a time on average: all of them, or for a group that alternates
// (Fault::Kind::kAlternate), the share of each cycle they run, rounded (what the planner's prediction for
// the scenario counts: a part-time peer that is away half the time adds half a peer).
size_t mean_peers_in(const Scenario& s, const PeerGroup& g);

Result<Scenario> load_scenario(const std::string& path);

std::string_view role_name(PeerRole role);

}  // namespace dedloc::lab
