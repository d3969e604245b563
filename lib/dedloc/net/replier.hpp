// How a request handler answers, whichever transport the request came by (net/server.hpp: ZeroMQ;
// net/datagram_rpc.hpp: UDP datagrams).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <zmq.hpp>

#include "dedloc/core/status.hpp"
#include "dedloc/net/message.hpp"

namespace dedloc::net {

// A transport's loop, which sends replies back where their requests came from.
class ReplySink {
 public:
  virtual ~ReplySink() = default;
  // `route` is the transport's own note of where the request came from; callable from any thread.
  virtual void queue_reply(std::string route, std::uint64_t request_id, Outgoing reply) = 0;
};

// Sends the reply to one request. Copyable; safe to use from any thread; a reply after the server stopped,
// or a second reply to the same request, is dropped.
class Replier {
 public:
  Replier() = default;
  Replier(std::weak_ptr<ReplySink> sink, std::string route, std::uint64_t request_id)
      : sink_(std::move(sink)), route_(std::move(route)), request_id_(request_id) {}

  void send(Outgoing reply) const {
    if (auto sink = sink_.lock()) sink->queue_reply(route_, request_id_, std::move(reply));
  }
  template <class Message>
  void reply(const Message& message, std::vector<zmq::message_t> frames = {}) const {
    send(Outgoing::of(message, std::move(frames)));
  }
  void fail(const Status& status) const;  // an ErrorReply with the status's code and message

 private:
  std::weak_ptr<ReplySink> sink_;
  std::string route_;
  std::uint64_t request_id_ = 0;
};

// What a server runs for one message type.
using Handler = std::function<void(Incoming&& request, Replier replier)>;

// A handler that receives the decoded message; a body that does not decode is answered with kMalformed.
template <class Message>
Handler typed_handler(std::function<void(Message&& message, Incoming&& request, Replier replier)> handler) {
  return [handler = std::move(handler)](Incoming&& request, Replier replier) {
    auto message = request.decode<Message>();
    if (!message) return replier.fail(message.status());
    handler(std::move(message.value()), std::move(request), std::move(replier));
  };
}

}  // namespace dedloc::net
