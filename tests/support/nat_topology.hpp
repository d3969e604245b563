// The NAT test network of scripts/nat-topology, for proc tests: a public namespace and two homes behind
// NAT routers. Needs root and network namespaces.
#pragma once

#include <map>
#include <vector>
#include <string>

namespace dedloc::test {

// The `ip` binary's path ("" when there is none): ChildProcess::spawn takes a path, not a name.
std::string ip_binary();

// Exits the test process with 77 (ctest: skipped, SKIP_CODE 77) and a loud "SKIPPED: <reason>" line when
// the topology cannot be built here (not root, no namespaces, no nftables). Never a silent pass.
void skip_unless_namespaces();

// One topology: `up` in the constructor (std::runtime_error with the script's output if it fails), `down`
// in the destructor. Declare it before the processes that run inside it, so that they die first.
class NatTopology {
 public:
  explicit NatTopology(std::string prefix);
  ~NatTopology();
  NatTopology(const NatTopology&) = delete;
  NatTopology& operator=(const NatTopology&) = delete;

  // A value of `scripts/nat-topology up --env` (PUB_NS, PUB_ADDR, HOME1_NS, ...); throws when missing.
  const std::string& operator[](const std::string& key) const;
  // {ip, "netns", "exec", ns}: runs a command inside namespace `ns`.
  std::vector<std::string> launcher(const std::string& ns) const;

 private:
  std::string prefix_;
  bool up_ = false;
  std::map<std::string, std::string> env_;
};

}  // namespace dedloc::test
