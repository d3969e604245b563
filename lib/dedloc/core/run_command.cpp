#include "dedloc/core/run_command.hpp"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

extern char** environ;

namespace dedloc {

Status run_command(const std::vector<std::string>& args, Duration timeout) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::string line;
  for (const auto& a : args) line += (line.empty() ? "" : " ") + a;
  pid_t pid = -1;
  if (int rc = ::posix_spawnp(&pid, argv[0], nullptr, nullptr, argv.data(), environ); rc != 0) {
    return error(Code::kUnavailable, "cannot run '" + line + "': " + std::strerror(rc));
  }
  const Deadline deadline = Deadline::after(timeout);
  int status = 0;
  while (true) {
    pid_t got = ::waitpid(pid, &status, WNOHANG);
    if (got == pid) break;
    if (got < 0 && errno != EINTR) return error(Code::kInternal, "waitpid: " + std::string(std::strerror(errno)));
    if (deadline.passed()) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return error(Code::kTimeout, "'" + line + "' did not finish in time");
    }
    ::usleep(2000);
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return error(Code::kUnavailable, "'" + line + "' failed");
  return {};
}

}  // namespace dedloc
