#include "support/tcp_recorder.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdexcept>
#include <vector>

namespace dedloc::test {

namespace {

sockaddr_in loopback(std::uint16_t port) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return address;
}

}  // namespace

TcpRecorder::TcpRecorder(std::uint16_t target_port) : target_port_(target_port) {
  listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
  auto address = loopback(0);
  socklen_t length = sizeof(address);
  if (listener_ < 0 || ::bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      ::listen(listener_, 8) != 0 || ::getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    if (listener_ >= 0) ::close(listener_);
    throw std::runtime_error("TcpRecorder: cannot listen on 127.0.0.1");
  }
  port_ = ntohs(address.sin_port);
  thread_ = std::thread([this] { run(); });
}

TcpRecorder::~TcpRecorder() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
  ::close(listener_);
}

std::string TcpRecorder::endpoint() const { return "tcp://127.0.0.1:" + std::to_string(port_); }

std::string TcpRecorder::recorded() const {
  std::lock_guard lock(mutex_);
  return recorded_;
}

void TcpRecorder::run() {
  // Pairs of descriptors: [2k] the accepted side, [2k+1] its connection to the target.
  std::vector<int> ends;
  char buffer[1 << 16];
  while (!stop_.load()) {
    std::vector<pollfd> items{{listener_, POLLIN, 0}};
    for (int fd : ends) items.push_back({fd, POLLIN, 0});
    if (::poll(items.data(), items.size(), 50) <= 0) continue;  // 50 ms: how soon a stop is noticed
    if (items[0].revents & POLLIN) {
      int accepted = ::accept(listener_, nullptr, nullptr);
      int upstream = ::socket(AF_INET, SOCK_STREAM, 0);
      auto target = loopback(target_port_);
      if (accepted >= 0 && upstream >= 0 &&
          ::connect(upstream, reinterpret_cast<sockaddr*>(&target), sizeof(target)) == 0) {
        ends.push_back(accepted);
        ends.push_back(upstream);
        ++connections_;
      } else {
        if (accepted >= 0) ::close(accepted);
        if (upstream >= 0) ::close(upstream);
      }
    }
    for (size_t i = 1; i < items.size(); ++i) {
      if (!(items[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const size_t index = i - 1;
      const int from = ends[index], to = ends[index ^ 1];
      if (from < 0) continue;  // its pair was closed earlier in this pass
      ssize_t n = ::read(from, buffer, sizeof buffer);
      if (n > 0) {
        {
          std::lock_guard lock(mutex_);
          recorded_.append(buffer, static_cast<size_t>(n));
        }
        for (ssize_t sent = 0; sent < n;) {
          ssize_t w = ::send(to, buffer + sent, static_cast<size_t>(n - sent), MSG_NOSIGNAL);
          if (w <= 0) break;
          sent += w;
        }
      } else {
        // One side closed or failed: close the pair (poll ignores the -1 left in its place).
        ::close(from);
        ::close(to);
        ends[index] = ends[index ^ 1] = -1;
      }
    }
  }
  for (int fd : ends) {
    if (fd >= 0) ::close(fd);
  }
}

}  // namespace dedloc::test
