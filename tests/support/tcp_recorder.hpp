// A TCP forwarder on 127.0.0.1 that keeps a copy of every byte it passes, both ways: what someone on the
// path between two peers would see. Tests dial its endpoint instead of the server's and then look for
// their payload in the recording.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

namespace dedloc::test {

class TcpRecorder {
 public:
  // Forwards connections made to endpoint() to 127.0.0.1:`target_port`.
  explicit TcpRecorder(std::uint16_t target_port);
  ~TcpRecorder();  // closes every connection and joins the thread
  TcpRecorder(const TcpRecorder&) = delete;
  TcpRecorder& operator=(const TcpRecorder&) = delete;

  std::string endpoint() const;   // "tcp://127.0.0.1:PORT"
  std::string recorded() const;   // every byte passed so far, both directions, in arrival order
  size_t connections() const { return connections_.load(); }

 private:
  void run();

  int listener_ = -1;
  std::uint16_t port_ = 0;
  std::uint16_t target_port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<size_t> connections_{0};
  mutable std::mutex mutex_;
  std::string recorded_;
  std::thread thread_;
};

}  // namespace dedloc::test
