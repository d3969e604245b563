// What sends requests and hands back their replies: the ZeroMQ client (net/client.hpp) and the datagram
// transport (net/datagram_rpc.hpp), so that a caller such as the DHT node can use either.
//
// Every call completes exactly once: with the reply, with the remote peer's ErrorReply as a Status, with
// kTimeout at its deadline, or with kCancelled when the caller is cancelled or destroyed.
#pragma once

#include <functional>
#include <future>
#include <string>

#include "dedloc/core/clock.hpp"
#include "dedloc/core/status.hpp"
#include "dedloc/net/message.hpp"

namespace dedloc::net {

// A call in flight (like c10d's Work): wait() blocks until its outcome, at the latest its deadline.
class PendingCall {
 public:
  explicit PendingCall(std::future<Result<Incoming>> f) : future_(std::move(f)) {}
  bool ready() const { return future_.wait_for(std::chrono::seconds(0)) == std::future_status::ready; }
  // The outcome. Call once.
  Result<Incoming> wait() { return future_.get(); }

 private:
  std::future<Result<Incoming>> future_;
};

class Caller {
 public:
  using Callback = std::function<void(Result<Incoming>&&)>;
  virtual ~Caller() = default;

  // Sends `request` to `endpoint` ("tcp://host:port[/k/KEY]"). `done` runs exactly once, on the caller's
  // loop thread: keep it short, and hand heavy work to another thread.
  virtual void call(const std::string& endpoint, Outgoing request, Deadline deadline, Callback done) = 0;
  PendingCall call(const std::string& endpoint, Outgoing request, Deadline deadline);

  // A typed round trip: sends `request`, decodes the reply as `Reply`.
  template <class Reply, class Request>
  Result<Reply> ask(const std::string& endpoint, const Request& request, Duration timeout) {
    auto reply = call(endpoint, Outgoing::of(request), Deadline::after(timeout)).wait();
    if (!reply) return reply.status();
    return reply->template decode<Reply>();
  }

  // Fails every call in flight now with kCancelled, at once, and stays usable: for a caller that must stop
  // waiting (a shutdown signal) while other threads wait on the network. Thread-safe.
  virtual void cancel_pending() = 0;
};

}  // namespace dedloc::net
