#include "dedloc/lab/lab_processes.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

extern char** environ;

namespace dedloc::lab {

LabProcesses::LabProcesses(std::string log_dir) : log_dir_(std::move(log_dir)), reader_([this] { read_loop(); }) {}

LabProcesses::~LabProcesses() {
  stop_all(std::chrono::seconds(0));
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  reader_.join();
  for (auto& p : procs_) {
    if (p.out_fd >= 0) ::close(p.out_fd);
  }
}

size_t LabProcesses::add(std::string name, std::string netns, std::vector<std::string> argv) {
  std::lock_guard lock(mutex_);
  procs_.push_back(Proc{std::move(name), std::move(netns), std::move(argv)});
  return procs_.size() - 1;
}

std::optional<size_t> LabProcesses::find(const std::string& name) const {
  std::lock_guard lock(mutex_);
  for (size_t i = 0; i < procs_.size(); ++i) {
    if (procs_[i].name == name) return i;
  }
  return std::nullopt;
}

Status LabProcesses::start(size_t i) {
  std::lock_guard lock(mutex_);
  Proc& p = procs_[i];
  if (p.pid > 0) return {};
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return error(Code::kUnavailable, "pipe: " + std::string(std::strerror(errno)));
  const std::string err_path = log_dir_ + "/" + p.name + ".err";
  std::vector<std::string> args = {"ip", "netns", "exec", p.netns};
  args.insert(args.end(), p.argv.begin(), p.argv.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  pid_t pid = -1;
  const int rc = ::posix_spawnp(&pid, "ip", &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(pipe_fds[1]);
  if (rc != 0) {
    ::close(pipe_fds[0]);
    return error(Code::kUnavailable, "cannot start " + p.name + ": " + std::strerror(rc));
  }
  if (p.out_fd >= 0) ::close(p.out_fd);
  ::fcntl(pipe_fds[0], F_SETFL, O_NONBLOCK);
  p.out_fd = pipe_fds[0];
  p.partial.clear();
  p.pid = pid;
  p.starts.push_back(SystemClock::instance().now());
  return {};
}

void LabProcesses::kill(size_t i) {
  std::lock_guard lock(mutex_);
  if (procs_[i].pid > 0) ::kill(procs_[i].pid, SIGKILL);
}

void LabProcesses::interrupt(size_t i) {
  std::lock_guard lock(mutex_);
  if (procs_[i].pid > 0) ::kill(procs_[i].pid, SIGINT);
}

bool LabProcesses::running(size_t i) const {
  std::lock_guard lock(mutex_);
  return procs_[i].pid > 0;
}

pid_t LabProcesses::pid(size_t i) const {
  std::lock_guard lock(mutex_);
  return procs_[i].pid;
}

std::vector<TimePoint> LabProcesses::starts(size_t i) const {
  std::lock_guard lock(mutex_);
  return procs_[i].starts;
}

std::vector<OutputLine> LabProcesses::lines() const {
  std::lock_guard lock(mutex_);
  return lines_;
}

size_t LabProcesses::line_count() const {
  std::lock_guard lock(mutex_);
  return lines_.size();
}

std::optional<std::string> LabProcesses::wait_for_line(size_t i, const std::string& needle, Duration timeout) const {
  const Deadline deadline = Deadline::after(timeout);
  size_t seen = 0;
  while (!deadline.passed()) {
    {
      std::lock_guard lock(mutex_);
      for (; seen < lines_.size(); ++seen) {
        if (lines_[seen].process == i && lines_[seen].text.find(needle) != std::string::npos) return lines_[seen].text;
      }
      if (procs_[i].pid <= 0 && !procs_[i].starts.empty()) return std::nullopt;  // it ended
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return std::nullopt;
}

void LabProcesses::stop_all(Duration grace) {
  {
    std::lock_guard lock(mutex_);
    for (auto& p : procs_) {
      if (p.pid > 0) ::kill(p.pid, grace > Duration::zero() ? SIGINT : SIGKILL);
    }
  }
  const Deadline deadline = Deadline::after(grace);
  while (!deadline.passed()) {
    {
      std::lock_guard lock(mutex_);
      bool any = false;
      for (auto& p : procs_) any = any || p.pid > 0;
      if (!any) return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::lock_guard lock(mutex_);
  for (auto& p : procs_) {
    if (p.pid > 0) ::kill(p.pid, SIGKILL);
  }
}

void LabProcesses::reap_locked() {
  for (auto& p : procs_) {
    if (p.pid <= 0) continue;
    int status = 0;
    if (::waitpid(p.pid, &status, WNOHANG) == p.pid) p.pid = -1;
  }
}

void LabProcesses::read_loop() {
  std::vector<pollfd> fds;
  std::vector<size_t> owners;
  char buffer[65536];
  while (true) {
    {
      std::lock_guard lock(mutex_);
      reap_locked();
      if (stopping_) return;
      fds.clear();
      owners.clear();
      for (size_t i = 0; i < procs_.size(); ++i) {
        if (procs_[i].out_fd < 0) continue;
        fds.push_back({procs_[i].out_fd, POLLIN, 0});
        owners.push_back(i);
      }
    }
    // A short timeout: processes (re)started meanwhile are picked up, and the dead reaped.
    if (::poll(fds.data(), fds.size(), 100) <= 0) continue;
    const TimePoint now = SystemClock::instance().now();
    std::lock_guard lock(mutex_);
    for (size_t k = 0; k < fds.size(); ++k) {
      if (!(fds[k].revents & (POLLIN | POLLHUP))) continue;
      Proc& p = procs_[owners[k]];
      if (p.out_fd != fds[k].fd) continue;  // restarted meanwhile
      const ssize_t n = ::read(p.out_fd, buffer, sizeof buffer);
      if (n <= 0) {
        if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
          ::close(p.out_fd);
          p.out_fd = -1;
        }
        continue;
      }
      p.partial.append(buffer, static_cast<size_t>(n));
      for (size_t nl; (nl = p.partial.find('\n')) != std::string::npos;) {
        lines_.push_back({now, owners[k], p.partial.substr(0, nl)});
        p.partial.erase(0, nl + 1);
      }
      if (p.partial.size() > (1u << 20)) p.partial.clear();  // a runaway line: drop it
    }
  }
}

}  // namespace dedloc::lab
