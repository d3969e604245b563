#include "support/check_failure.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <stdexcept>

namespace dedloc::test {

ChildEnd run_in_child(const std::function<void()>& body) {
  int pipe_fds[2];
  if (::pipe(pipe_fds) != 0) throw std::runtime_error("pipe failed");
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    ::close(pipe_fds[0]);
    ::dup2(pipe_fds[1], STDERR_FILENO);
    ::close(pipe_fds[1]);
    body();
    ::_exit(0);
  }
  ::close(pipe_fds[1]);
  ChildEnd end;
  char buffer[4096];
  for (ssize_t n; (n = ::read(pipe_fds[0], buffer, sizeof buffer)) != 0;) {
    if (n > 0) {
      end.stderr_text.append(buffer, static_cast<size_t>(n));
    } else if (errno != EINTR) {
      break;
    }
  }
  ::close(pipe_fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  end.aborted = WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT;
  return end;
}

bool fails_check(const std::function<void()>& body, const std::string& message) {
  auto end = run_in_child(body);
  return end.aborted && end.stderr_text.find("check failed") != std::string::npos &&
         end.stderr_text.find(message) != std::string::npos;
}

}  // namespace dedloc::test
