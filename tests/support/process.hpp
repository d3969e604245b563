// Child processes for proc tests: spawn a real binary, read its stdout line by line with a deadline (the
// ready line instead of a fixed sleep), kill it with SIGKILL, reap it with a deadline.
#pragma once

#include <sys/types.h>

#include <optional>
#include <utility>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dedloc/core/clock.hpp"

namespace dedloc::test {

class ChildProcess {
 public:
  // Starts `argv[0]` with `argv`; stdout is captured, stderr passes through to the test's stderr.
  static ChildProcess spawn(const std::vector<std::string>& argv);
  ChildProcess(ChildProcess&& other) noexcept;
  ~ChildProcess();  // SIGKILLs and reaps a child still running: a failed test never leaks processes

  pid_t pid() const { return pid_; }
  // The next line of stdout (without the newline); nullopt at EOF or when `timeout` passes.
  std::optional<std::string> read_line(Duration timeout);
  void kill(int signal);
  // Waits for exit; the exit code (or 128 + signal), nullopt when `timeout` passes first.
  std::optional<int> wait(Duration timeout);

 private:
  ChildProcess(pid_t pid, int stdout_fd) : pid_(pid), stdout_fd_(stdout_fd) {}
  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  std::string buffer_;
  bool exited_ = false;
};

// Starts `argv` and reads its JSON ready line (docs/operators.md), failing the test if none comes within
// `timeout` or it is not a ready line (std::runtime_error, which fails the test): for the tools'
// long-running roles (dedloc-dht serve, dedloc-avg aux).
std::pair<ChildProcess, nlohmann::json> start_ready(const std::vector<std::string>& argv,
                                                    Duration timeout = std::chrono::seconds(30));

// Runs `command` with /bin/sh, stdout and stderr together, to its end: what CLI error tests check.
struct CommandOutput {
  int exit_code = -1;  // -1 when it did not exit within the timeout after its output ended
  std::string output;
};
CommandOutput run_command(const std::string& command, Duration line_timeout = std::chrono::seconds(60));

}  // namespace dedloc::test
