// The lab's hosts: one network namespace per host, each with one TUN device whose other end this process
// holds, so that every packet a host sends comes to the emulator (emulator.hpp) and nothing else reaches
// it. Root only.
//
// Names and addresses. Host i lives in namespace "dlab<pid>-<i>" (pid: the process that made the lab)
// behind the TUN device "dl<pid>t<i>", with address 10.250.x.y = 10.250.0.0 + i + 1 on a /16: every lab
// address is on-link through the TUN, so no routes are needed. The TUN's MTU is large (65000 by default)
// so that a 1 Gbit/s link costs the emulator about two thousand packets a second, not eighty thousand.
//
// Cleanup. The destructor SIGKILLs whatever still runs in the namespaces and deletes them (the TUN devices
// go with the emulator's file descriptors). A lab whose process was SIGKILLed leaves its namespaces behind:
// remove_leftovers() deletes every "dlab<pid>-*" namespace whose pid no longer runs, and create() calls it
// first, so the next lab run cleans up after a killed one.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dedloc/core/status.hpp"

namespace dedloc::lab {

struct LabHost {
  std::string netns;    // e.g. dlab4242-3
  std::string address;  // e.g. 10.250.0.4
  std::string device;   // the TUN inside the namespace
  int tun_fd = -1;      // our end (non-blocking), owned by the LabNetwork
};

// The TUN devices' MTU. The default keeps the emulator's packets few (a 1 Gbit/s stream is ~2,000 packets a
// second); on a slow link its packets are long (42 ms each at 12.5 Mbit/s) and its queues a few packets
// deep, which TCP's many flows handle worse than the internet's 1500 bytes (docs/lab.md, "Packet size").
constexpr int kMinMtu = 576;
constexpr int kMaxMtu = 65535;
// The hosts' TCP congestion control. A namespace inherits the machine's, which need not be the internet's:
// this machine's is BBR, and sixteen peers all-reducing over the paper scenario's slow links took 1.11-1.16x as
// long under it as under CUBIC, the default of Linux, Windows and macOS (docs/lab.md, "Congestion control").
// So every host gets CUBIC unless a scenario asks otherwise.
constexpr const char* kDefaultCongestionControl = "cubic";
struct LabNetworkOptions {
  int mtu = 65000;
  std::string congestion_control = kDefaultCongestionControl;
};

class LabNetwork {
 public:
  // Creates `hosts` namespaces with their TUN devices, after removing leftovers of dead labs.
  // kUnavailable naming what failed (not root, no /dev/net/tun, ip missing), having removed what it made.
  static Result<std::unique_ptr<LabNetwork>> create(size_t hosts, const LabNetworkOptions& options = {});
  ~LabNetwork();
  LabNetwork(const LabNetwork&) = delete;
  LabNetwork& operator=(const LabNetwork&) = delete;

  const std::vector<LabHost>& hosts() const { return hosts_; }
  const LabHost& host(size_t i) const { return hosts_[i]; }

  // Host i's address, and back (nullopt for an address outside the lab or past its last host).
  static std::string address_of(size_t i);
  static std::uint32_t address_number_of(size_t i);
  std::optional<size_t> host_of(std::uint32_t address) const;

  // SIGKILLs every process inside host i's namespace (a machine losing power) and waits, briefly, for
  // them to go. Returns how many there were.
  size_t kill_processes(size_t i) const;

  // Deletes the namespaces of labs whose process is gone (and SIGKILLs what still runs in them).
  static void remove_leftovers();

 private:
  LabNetwork() = default;
  std::vector<LabHost> hosts_;
};

// Moves the calling thread into a named network namespace (in a forked child before it execs or opens
// sockets). kUnavailable with the reason.
Status enter_netns(const std::string& name);

// SIGKILLs every process whose network namespace is the named one. Returns how many.
size_t kill_processes_in(const std::string& netns);

}  // namespace dedloc::lab
