// What one all-reduce benchmark will do, settled before any process starts: its validated settings, the
// vector's size, the part grid and every peer's share. Errors name the dedloc-avg bench flag at fault
// (kInvalidArgument), so that the tool can print them as they are.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dedloc/avg/all_reduce.hpp"
#include "dedloc/avg/codec.hpp"
#include "dedloc/avg/defaults.hpp"
#include "dedloc/lab/lab_network.hpp"

namespace dedloc::avg::bench {

struct BenchOptions {
  size_t peers = 4;                                         // peer processes, 2 to 64
  std::string size = "64MiB";                               // of the float32 vector (parse_size)
  std::string codec = "none";                               // of the parts (avg::parse_codec)
  size_t rounds = 5;                                        // timed rounds, after one warm-up round
  size_t window = AllReduceOptions{}.window;                // parts in flight per reducer
  size_t max_window = AllReduceOptions{}.max_window;        // ... at most, sized by measurement (in_flight_window.hpp)
  size_t max_in_flight = AllReduceOptions{}.max_in_flight;  // parts in flight in all (0: no cap)
  size_t part_kib = 512;  // KiB of float32 per part: the part grid, sized as training sizes it (plan below)
  std::vector<std::string> bandwidths;  // per peer ("1Gbit", "100Mbit"): planner shares
  bool uniform = false;                 // equal shares even when bandwidths are given
  bool emulate_links = false;           // each peer a lab host behind emulated links (emulated_links.hpp; root)
  std::string rtt = "0";                // with emulate_links: the round trip between two peers (e.g. 100ms)
  std::string loss = "0";               // with emulate_links: the loss of each packet a peer sends (e.g. 0.5%)
  int mtu = lab::LabNetworkOptions{}.mtu;  // with emulate_links: the lab hosts' MTU (docs/lab.md, "Packet size")
  // with emulate_links: the lab hosts' TCP congestion control (docs/lab.md, "Congestion control")
  std::string congestion_control = lab::kDefaultCongestionControl;
  // Lab hosts made elsewhere (`dedloc-lab up`), one per peer, as NETNS@ADDRESS: peer i runs in the i-th
  // namespace and binds its address, and the links are whatever that lab emulates (bench/lab/run.sh
  // runs gloo in the same hosts). Not with emulate_links.
  std::vector<std::string> lab_hosts;
  bool encrypted = true;                // CURVE between the peers, as the tools run by default
  double timeout_seconds = 120;         // one round; also bounds start-up and shutdown
  std::string name = "dedloc-avg bench";  // prefixes what the peer processes write to stderr
};

struct BenchPlan {
  std::uint64_t bytes = 0;
  std::uint64_t elements = 0;
  // The part grid exactly as training cuts its vector for the same budget, whatever the codec:
  // avg::part_elements_for(avg::kPartGridCodec, part_kib KiB), 128 Ki values for 512 KiB
  // (avg::default_part_elements()), finer where the shares are small (avg::grid_part_elements); a codec then
  // sends each part smaller.
  std::uint64_t part_elements = 0;
  Codec codec = Codec::kNone;
  std::vector<double> rates;          // bytes/s per peer, when bandwidths were given
  std::vector<std::uint64_t> counts;  // elements each peer reduces
  bool planned = false;               // counts from plan::plan_group_shares (else equal)
  Duration rtt{0};                    // emulated links: round trip and one-way loss
  std::vector<std::string> netns;     // lab hosts (--lab-hosts): each peer's namespace and address
  std::vector<std::string> addresses;
  double loss = 0;
  int mtu = lab::LabNetworkOptions{}.mtu;
  std::string congestion_control = lab::kDefaultCongestionControl;
};

// Validates `options` (including, with emulate_links, that this process runs as root, and, when
// encrypted, that libzmq has CURVE) and computes the plan. kInvalidArgument naming the flag; kUnavailable
// without CURVE.
Result<BenchPlan> plan_all_reduce_bench(const BenchOptions& options);

// "64MiB", "256MiB", "1GiB", "100MB", "4096B", "4096": a byte count (errors name --size).
Result<std::uint64_t> parse_size(const std::string& text);

}  // namespace dedloc::avg::bench
