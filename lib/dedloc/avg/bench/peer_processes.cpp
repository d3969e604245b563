#include "dedloc/avg/bench/peer_processes.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>

namespace dedloc::avg::bench {

std::string describe_exit(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    return std::string("was killed by signal ") + std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")";
  }
  return "stopped";
}

Status PeerProcesses::fork_all(size_t peers, BenchPeerSetup setup) {
  // Whatever is buffered would otherwise be written once more by every child.
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  const pid_t parent = ::getpid();
  for (size_t i = 0; i < peers; ++i) {
    int down[2], up[2];
    if (::pipe2(down, O_CLOEXEC) != 0 || ::pipe2(up, O_CLOEXEC) != 0) {
      return error(Code::kIo, std::string("pipe: ") + std::strerror(errno));
    }
    const pid_t pid = ::fork();
    if (pid < 0) return error(Code::kIo, std::string("fork: ") + std::strerror(errno));
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(1);  // the parent died before prctl
      ::signal(SIGINT, SIG_DFL);
      ::signal(SIGTERM, SIG_DFL);
      for (const PeerProcess& other : children_) {
        ::close(other.to_child);
        ::close(other.from_child);
      }
      ::close(down[1]);
      ::close(up[0]);
      setup.index = i;
      const int code = run_bench_peer(setup, down[0], up[1]);
      std::cerr.flush();
      ::_exit(code);
    }
    ::close(down[0]);
    ::close(up[1]);
    PeerProcess child;
    child.pid = pid;
    child.to_child = down[1];
    child.from_child = up[0];
    children_.push_back(child);
  }
  return {};
}

Status PeerProcesses::send(size_t i, PipeMessage type, const PipeWriter& payload) {
  Status s = send_pipe_message(children_[i].to_child, type, payload);
  return s.is_ok() ? s : explain(i, s);
}

Result<Bytes> PeerProcesses::receive(size_t i, PipeMessage expected, Deadline deadline) {
  auto got = receive_pipe_message(children_[i].from_child, deadline, interrupted_);
  if (!got) return explain(i, got.status());
  if (got->first != expected) return error(Code::kMalformed, "peer " + std::to_string(i) + " sent an unexpected message");
  return std::move(got->second);
}

void PeerProcesses::stop(Duration grace) {
  for (PeerProcess& child : children_) {
    if (!child.reaped && grace > Duration::zero()) (void)send_pipe_message(child.to_child, PipeMessage::kQuit);
  }
  const Deadline deadline = Deadline::after(grace);
  for (PeerProcess& child : children_) {
    if (child.reaped) continue;
    int status = 0;
    while (::waitpid(child.pid, &status, WNOHANG) == 0) {
      if (deadline.passed()) {
        ::kill(child.pid, SIGKILL);
        ::waitpid(child.pid, &status, 0);
        break;
      }
      ::usleep(5000);
    }
    child.reaped = true;
    ::close(child.to_child);
    ::close(child.from_child);
  }
}

Status PeerProcesses::explain(size_t i, const Status& status) {
  PeerProcess& child = children_[i];
  std::string what = "peer " + std::to_string(i) + " (pid " + std::to_string(child.pid) + ")";
  if (status.code() == Code::kTimeout) return error(Code::kTimeout, what + " did not answer before the deadline");
  if (status.code() == Code::kCancelled) return status;
  // Its pipe closed: it is exiting. Give it a moment to finish, so that we can say how it ended.
  int exit_status = 0;
  const Deadline deadline = Deadline::after(std::chrono::seconds(2));
  while (!deadline.passed()) {
    if (::waitpid(child.pid, &exit_status, WNOHANG) == child.pid) {
      child.reaped = true;
      ::close(child.to_child);
      ::close(child.from_child);
      return error(Code::kUnavailable, what + " died: it " + describe_exit(exit_status));
    }
    ::usleep(5000);
  }
  return status.with_context(what);
}

}  // namespace dedloc::avg::bench
