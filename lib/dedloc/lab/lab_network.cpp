#include "dedloc/lab/lab_network.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "dedloc/core/run_command.hpp"

namespace dedloc::lab {

namespace {

constexpr std::uint32_t kBase = (10u << 24) | (250u << 16);  // 10.250.0.0/16
constexpr size_t kMaxHosts = 65000;
constexpr const char* kNetnsDir = "/run/netns/";

std::string errno_text() { return std::strerror(errno); }

// Runs `ip [prefix...] -batch FILE` on the given lines (one ip process for many commands).
Status ip_batch(const std::vector<std::string>& prefix, const std::vector<std::string>& lines) {
  char path[] = "/tmp/dedloc-lab-XXXXXX";
  const int fd = ::mkstemp(path);
  if (fd < 0) return error(Code::kUnavailable, "cannot create a temporary file: " + errno_text());
  ::close(fd);
  {
    std::ofstream out(path);
    for (const auto& line : lines) out << line << '\n';
  }
  std::vector<std::string> args = {"ip"};
  args.insert(args.end(), prefix.begin(), prefix.end());
  args.insert(args.end(), {"-batch", path});
  Status status = run_command(args);
  ::unlink(path);
  return status;
}

// The first line of a /proc file ("" when it cannot be read).
std::string first_line(const char* path) {
  std::string line;
  std::ifstream file(path);
  std::getline(file, line);
  return line;
}

// Whether a space-separated list of names (a sysctl's value) holds `name`.
bool lists(const std::string& names, const std::string& name) {
  std::istringstream words(names);
  for (std::string word; words >> word;) {
    if (word == name) return true;
  }
  return false;
}

// Writes a /proc/sys value: an empty string, or why not.
std::string write_sysctl(const char* path, const std::string& value) {
  const int fd = ::open(path, O_WRONLY | O_CLOEXEC);
  const bool written = fd >= 0 && ::write(fd, value.data(), value.size()) == static_cast<ssize_t>(value.size());
  const std::string why = written ? "" : errno_text();
  if (fd >= 0) ::close(fd);
  return why;
}

constexpr const char* kAvailableCongestionControl = "/proc/sys/net/ipv4/tcp_available_congestion_control";

// A namespace other than the machine's own may only choose an algorithm the machine allows
// (net.ipv4.tcp_allowed_congestion_control, one list for all namespaces); some machines allow only their
// default (bbr) and reno. Adds `algorithm` to that list when it is available but not allowed: this permits
// it, and changes no namespace's default.
Status allow_congestion_control(const std::string& algorithm) {
  const char* path = "/proc/sys/net/ipv4/tcp_allowed_congestion_control";
  const std::string allowed = first_line(path);
  // Not available: set_congestion_control's error names the ones this kernel has.
  if (lists(allowed, algorithm) || !lists(first_line(kAvailableCongestionControl), algorithm)) return Status();
  const std::string why = write_sysctl(path, allowed.empty() ? algorithm : allowed + " " + algorithm);
  if (!why.empty()) {
    return error(Code::kUnavailable, "cannot allow the TCP congestion control '" + algorithm + "' in the lab's " +
                                         "namespaces (" + path + " lists only: " + allowed + "): " + why);
  }
  return Status();
}

// Sets a namespace's net.ipv4.tcp_congestion_control: from a thread of its own that enters the namespace,
// since /proc/sys/net shows the namespace of the thread that opens it (and this process must stay in its own).
Status set_congestion_control(const std::string& netns, const std::string& algorithm) {
  Status status;
  std::thread([&] {
    status = enter_netns(netns);
    if (!status.is_ok()) return;
    const std::string why = write_sysctl("/proc/sys/net/ipv4/tcp_congestion_control", algorithm);
    if (!why.empty()) {
      status = error(Code::kUnavailable, "cannot set the TCP congestion control '" + algorithm + "' in " + netns + ": " +
                                             why + " (this kernel has: " + first_line(kAvailableCongestionControl) + ")");
    }
  }).join();
  return status;
}

Result<int> open_tun(const std::string& name) {
  const int fd = ::open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return error(Code::kUnavailable, "cannot open /dev/net/tun: " + errno_text());
  ifreq request{};
  request.ifr_flags = IFF_TUN | IFF_NO_PI;
  std::snprintf(request.ifr_name, IFNAMSIZ, "%s", name.c_str());
  if (::ioctl(fd, TUNSETIFF, &request) < 0) {
    const std::string why = errno_text();
    ::close(fd);
    return error(Code::kUnavailable, "cannot create TUN device " + name + ": " + why);
  }
  return fd;
}

bool same_netns(const struct stat& netns, const std::string& proc_ns) {
  struct stat st {};
  return ::stat(proc_ns.c_str(), &st) == 0 && st.st_ino == netns.st_ino && st.st_dev == netns.st_dev;
}

std::vector<pid_t> processes_in(const std::string& netns) {
  std::vector<pid_t> found;
  struct stat target {};
  if (::stat((kNetnsDir + netns).c_str(), &target) != 0) return found;
  DIR* proc = ::opendir("/proc");
  if (!proc) return found;
  while (dirent* entry = ::readdir(proc)) {
    char* end = nullptr;
    const long pid = std::strtol(entry->d_name, &end, 10);
    if (*end != '\0' || pid <= 0 || pid == ::getpid()) continue;
    if (same_netns(target, "/proc/" + std::string(entry->d_name) + "/ns/net")) found.push_back(static_cast<pid_t>(pid));
  }
  ::closedir(proc);
  return found;
}

void delete_namespaces(const std::vector<std::string>& names) {
  if (names.empty()) return;
  for (const auto& name : names) kill_processes_in(name);
  std::vector<std::string> lines;
  for (const auto& name : names) lines.push_back("netns del " + name);
  (void)ip_batch({"-force"}, lines);  // -force: go on past one that is already gone
}

}  // namespace

size_t kill_processes_in(const std::string& netns) {
  const std::vector<pid_t> pids = processes_in(netns);
  for (pid_t pid : pids) ::kill(pid, SIGKILL);
  // A killed process leaves its namespace when it exits: wait for that (briefly; a process stuck in the
  // kernel must not stop the cleanup).
  for (int i = 0; i < 100 && !pids.empty() && !processes_in(netns).empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pids.size();
}

Status enter_netns(const std::string& name) {
  const int fd = ::open((kNetnsDir + name).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return error(Code::kUnavailable, "cannot open network namespace " + name + ": " + errno_text());
  const int rc = ::setns(fd, CLONE_NEWNET);
  const std::string why = errno_text();
  ::close(fd);
  if (rc != 0) return error(Code::kUnavailable, "cannot enter network namespace " + name + ": " + why);
  return {};
}

std::string LabNetwork::address_of(size_t i) {
  const std::uint32_t a = address_number_of(i);
  return std::to_string(a >> 24) + "." + std::to_string((a >> 16) & 255) + "." + std::to_string((a >> 8) & 255) +
         "." + std::to_string(a & 255);
}

std::uint32_t LabNetwork::address_number_of(size_t i) { return kBase + static_cast<std::uint32_t>(i) + 1; }

std::optional<size_t> LabNetwork::host_of(std::uint32_t address) const {
  if (address <= kBase || address - kBase - 1 >= hosts_.size()) return std::nullopt;
  return address - kBase - 1;
}

void LabNetwork::remove_leftovers() {
  static const std::regex kLabName("dlab([0-9]+)-[0-9]+");
  std::vector<std::string> dead;
  if (DIR* dir = ::opendir(kNetnsDir)) {
    while (dirent* entry = ::readdir(dir)) {
      std::cmatch match;
      if (!std::regex_match(entry->d_name, match, kLabName)) continue;
      const pid_t owner = static_cast<pid_t>(std::stol(match[1].str()));
      if (owner != ::getpid() && ::kill(owner, 0) != 0 && errno == ESRCH) dead.push_back(entry->d_name);
    }
    ::closedir(dir);
  }
  delete_namespaces(dead);
}

Result<std::unique_ptr<LabNetwork>> LabNetwork::create(size_t hosts, const LabNetworkOptions& options) {
  if (hosts == 0 || hosts > kMaxHosts) {
    return error(Code::kInvalidArgument, "a lab has 1 to " + std::to_string(kMaxHosts) + " hosts");
  }
  if (::geteuid() != 0) return error(Code::kUnavailable, "the lab needs root (network namespaces and TUN devices)");
  if (::access("/dev/net/tun", R_OK | W_OK) != 0) return error(Code::kUnavailable, "no usable /dev/net/tun: " + errno_text());
  remove_leftovers();
  DEDLOC_RETURN_IF_ERROR(allow_congestion_control(options.congestion_control));

  std::unique_ptr<LabNetwork> net(new LabNetwork());
  const std::string pid = std::to_string(::getpid());
  std::vector<std::string> add, move;
  for (size_t i = 0; i < hosts; ++i) {
    LabHost host;
    host.netns = "dlab" + pid + "-" + std::to_string(i);
    host.device = "dl" + pid + "t" + std::to_string(i);
    host.address = address_of(i);
    add.push_back("netns add " + host.netns);
    move.push_back("link set dev " + host.device + " netns " + host.netns);
    net->hosts_.push_back(std::move(host));
  }
  DEDLOC_RETURN_IF_ERROR(ip_batch({}, add).with_context("creating the lab's namespaces"));
  for (LabHost& host : net->hosts_) {
    auto fd = open_tun(host.device);
    if (!fd) return fd.status();
    host.tun_fd = *fd;
  }
  DEDLOC_RETURN_IF_ERROR(ip_batch({}, move).with_context("moving the TUN devices into their namespaces"));
  for (const LabHost& host : net->hosts_) {
    DEDLOC_RETURN_IF_ERROR(ip_batch({"-n", host.netns},
                                    {"link set lo up",
                                     "link set dev " + host.device + " mtu " + std::to_string(options.mtu) + " up",
                                     "addr add " + host.address + "/16 dev " + host.device})
                               .with_context("configuring " + host.netns));
    DEDLOC_RETURN_IF_ERROR(set_congestion_control(host.netns, options.congestion_control));
  }
  return net;
}

size_t LabNetwork::kill_processes(size_t i) const { return kill_processes_in(hosts_[i].netns); }

LabNetwork::~LabNetwork() {
  std::vector<std::string> names;
  for (const LabHost& host : hosts_) {
    names.push_back(host.netns);
    if (host.tun_fd >= 0) ::close(host.tun_fd);
  }
  delete_namespaces(names);
}

}  // namespace dedloc::lab
