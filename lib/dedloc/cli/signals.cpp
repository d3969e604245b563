#include "dedloc/cli/signals.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>

namespace dedloc::cli {

namespace {

std::atomic<bool> g_requested{false};
std::atomic<bool> g_urgent{false};
int g_pipe[2] = {-1, -1};  // self-pipe: the handler writes, wait_for_shutdown polls

void on_signal(int) {
  if (g_requested.exchange(true)) g_urgent.store(true);
  if (g_pipe[1] >= 0) {
    char byte = 1;
    [[maybe_unused]] auto n = ::write(g_pipe[1], &byte, 1);
  }
}

}  // namespace

void install_shutdown_handlers() {
  if (g_pipe[0] < 0 && ::pipe2(g_pipe, O_CLOEXEC | O_NONBLOCK) != 0) g_pipe[0] = g_pipe[1] = -1;
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
}

bool shutdown_requested() { return g_requested.load(); }

bool shutdown_urgent() { return g_urgent.load(); }

bool wait_for_shutdown(Duration timeout) {
  if (g_requested.load()) return true;
  if (g_pipe[0] < 0) {
    ::usleep(static_cast<useconds_t>(std::chrono::duration_cast<std::chrono::microseconds>(timeout).count()));
    return g_requested.load();
  }
  pollfd p{g_pipe[0], POLLIN, 0};
  int rc = ::poll(&p, 1, static_cast<int>(to_ms(timeout)));
  (void)rc;
  return g_requested.load();
}

}  // namespace dedloc::cli
