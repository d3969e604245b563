#include "support/process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace dedloc::test {

ChildProcess ChildProcess::spawn(const std::vector<std::string>& argv) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);
  if (rc != 0) {
    ::close(fds[0]);
    throw std::runtime_error("cannot start " + argv[0]);
  }
  return ChildProcess(pid, fds[0]);
}

ChildProcess::ChildProcess(ChildProcess&& other) noexcept
    : pid_(other.pid_), stdout_fd_(other.stdout_fd_), buffer_(std::move(other.buffer_)), exited_(other.exited_) {
  other.pid_ = -1;
  other.stdout_fd_ = -1;
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0 && !exited_) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  if (stdout_fd_ >= 0) ::close(stdout_fd_);
}

std::optional<std::string> ChildProcess::read_line(Duration timeout) {
  Deadline deadline = Deadline::after(timeout);
  while (true) {
    auto newline = buffer_.find('\n');
    if (newline != std::string::npos) {
      std::string line = buffer_.substr(0, newline);
      buffer_.erase(0, newline + 1);
      return line;
    }
    pollfd p{stdout_fd_, POLLIN, 0};
    int rc = ::poll(&p, 1, static_cast<int>(to_ms(deadline.remaining())) + 1);
    if (rc == 0 && deadline.passed()) return std::nullopt;
    if (rc < 0 && errno != EINTR) return std::nullopt;
    if (rc <= 0) continue;
    char chunk[4096];
    ssize_t n = ::read(stdout_fd_, chunk, sizeof chunk);
    if (n == 0) return std::nullopt;  // EOF
    if (n > 0) buffer_.append(chunk, static_cast<size_t>(n));
  }
}

void ChildProcess::kill(int signal) {
  if (pid_ > 0 && !exited_) ::kill(pid_, signal);
}

std::optional<int> ChildProcess::wait(Duration timeout) {
  Deadline deadline = Deadline::after(timeout);
  while (true) {
    int status = 0;
    pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      exited_ = true;
      if (WIFEXITED(status)) return WEXITSTATUS(status);
      if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
      return -1;
    }
    if (deadline.passed()) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

std::pair<ChildProcess, nlohmann::json> start_ready(const std::vector<std::string>& argv, Duration timeout) {
  auto child = ChildProcess::spawn(argv);
  auto ready = child.read_line(timeout);
  if (!ready) throw std::runtime_error(argv[0] + ": no ready line in time");
  auto json = nlohmann::json::parse(*ready);  // throws on anything but JSON
  if (!json.value("ready", false)) throw std::runtime_error(argv[0] + ": not a ready line: " + *ready);
  return {std::move(child), std::move(json)};
}

CommandOutput run_command(const std::string& command, Duration line_timeout) {
  auto child = ChildProcess::spawn({"/bin/sh", "-c", command + " 2>&1"});
  CommandOutput result;
  while (auto line = child.read_line(line_timeout)) result.output += *line + "\n";
  result.exit_code = child.wait(std::chrono::seconds(10)).value_or(-1);
  return result;
}

}  // namespace dedloc::test
