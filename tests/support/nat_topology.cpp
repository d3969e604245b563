#include "support/nat_topology.hpp"

#include <unistd.h>

#include <cstdio>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "support/process.hpp"
#include "support/skip.hpp"
#include "support/test_paths.hpp"

namespace dedloc::test {

namespace {

std::string script() { return source_path("scripts/nat-topology"); }

std::string trimmed(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

}  // namespace

std::string ip_binary() {
  for (const char* candidate : {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"}) {
    if (::access(candidate, X_OK) == 0) return candidate;
  }
  return "";
}

void skip_unless_namespaces() {
  std::string reason;
  if (::geteuid() != 0) {
    reason = "not root: network namespaces (scripts/nat-topology) need root";
  } else if (ip_binary().empty()) {
    reason = "no 'ip' binary (iproute2) in /usr/sbin, /sbin, /usr/bin or /bin";
  } else {
    auto check = run_command("'" + script() + "' check");
    if (check.exit_code != 0) reason = trimmed(check.output);
    if (reason.empty() && check.exit_code != 0) reason = "scripts/nat-topology check failed without a reason";
  }
  if (!reason.empty()) skip_test(reason);
}

NatTopology::NatTopology(std::string prefix) : prefix_(std::move(prefix)) {
  auto up = run_command("'" + script() + "' up " + prefix_ + " --env");
  if (up.exit_code != 0) throw std::runtime_error("nat-topology up " + prefix_ + " failed: " + up.output);
  up_ = true;
  std::istringstream lines(up.output);
  for (std::string line; std::getline(lines, line);) {
    auto eq = line.find('=');
    if (eq != std::string::npos) env_[line.substr(0, eq)] = line.substr(eq + 1);
  }
}

NatTopology::~NatTopology() {
  if (!up_) return;
  auto down = run_command("'" + script() + "' down " + prefix_);
  if (down.exit_code != 0) std::fprintf(stderr, "nat-topology down %s failed: %s", prefix_.c_str(), down.output.c_str());
}

const std::string& NatTopology::operator[](const std::string& key) const {
  auto found = env_.find(key);
  if (found == env_.end()) throw std::runtime_error("nat-topology up --env printed no " + key);
  return found->second;
}

std::vector<std::string> NatTopology::launcher(const std::string& ns) const { return {ip_binary(), "netns", "exec", ns}; }

}  // namespace dedloc::test
