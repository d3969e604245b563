#include "dedloc/net/server.hpp"

#include <deque>
#include <system_error>
#include <unordered_map>

#include "dedloc/core/clock.hpp"
#include "dedloc/net/mailbox.hpp"
#include "dedloc/wire/messages.hpp"

#ifndef DEDLOC_VERSION
#define DEDLOC_VERSION "unknown"
#endif

namespace dedloc::net {

// Everything the loop thread owns. Repliers hold a weak_ptr to it, so a late reply after stop() is dropped.
class ServerLoop : public ReplySink, public std::enable_shared_from_this<ServerLoop> {
 public:
  struct QueuedReply {
    std::string routing_id;
    std::uint64_t request_id;
    Outgoing reply;
  };

  ServerLoop(zmq::socket_t socket, const ServerOptions& options, std::map<wire::MessageType, Server::Handler> handlers)
      : socket_(std::move(socket)), options_(options), handlers_(std::move(handlers)), limiter_(options.peer_limits) {}

  void run();
  void request_stop() {
    stopping_.store(true);
    mailbox_.push({});  // wakes the loop
  }
  void queue_reply(std::string routing_id, std::uint64_t request_id, Outgoing reply) override {
    if (std::this_thread::get_id() == thread_id_) {
      send_reply(routing_id, request_id, std::move(reply));
    } else {
      mailbox_.push({std::move(routing_id), request_id, std::move(reply)});
    }
  }
  ServerStats stats() const { return {requests_.load(), rejected_.load(), rate_limited_.load()}; }

 private:
  // Receives and handles one message; false when none was waiting.
  bool receive_one();
  void dispatch(std::string routing_id, std::vector<zmq::message_t> parts);
  void reject(const std::string& routing_id, std::uint64_t request_id, const Status& status);
  // `seal`: with the access control's authentication frame (a private run's replies); reject() sends
  // without, since a refusal must stay cheap under a flood and its reason is for any requester to read.
  void send_reply(const std::string& routing_id, std::uint64_t request_id, Outgoing&& reply, bool seal = true);
  Replier make_replier(const std::string& routing_id, std::uint64_t request_id);

  zmq::socket_t socket_;
  ServerOptions options_;
  std::map<wire::MessageType, Server::Handler> handlers_;
  Mailbox<QueuedReply> mailbox_;
  std::atomic<bool> stopping_{false};
  std::thread::id thread_id_;
  std::atomic<std::uint64_t> requests_{0}, rejected_{0}, rate_limited_{0};
  PeerRateLimiter limiter_;  // by routing id; loop thread only
};

Replier ServerLoop::make_replier(const std::string& routing_id, std::uint64_t request_id) {
  return Replier(weak_from_this(), routing_id, request_id);
}

void ServerLoop::run() {
  thread_id_ = std::this_thread::get_id();
  while (!stopping_.load()) {
    zmq_pollitem_t items[] = {
        {socket_.handle(), 0, ZMQ_POLLIN, 0},
        {nullptr, mailbox_.fd(), ZMQ_POLLIN, 0},
    };
    try {
      zmq::poll(items, 2, std::chrono::milliseconds(-1));
    } catch (const zmq::error_t& e) {
      if (e.num() == EINTR) continue;
      options_.log->error("rpc") << "poll failed: " << e.what();
      break;
    }
    if (items[1].revents & ZMQ_POLLIN) {
      for (auto& queued : mailbox_.drain()) {
        if (!queued.routing_id.empty()) send_reply(queued.routing_id, queued.request_id, std::move(queued.reply));
      }
    }
    if (items[0].revents & ZMQ_POLLIN) {
      // Drain what is ready, but yield to the mailbox now and then so deferred replies are not starved.
      // (Receiving until there is nothing left costs no ZMQ_EVENTS query per message: each is a syscall or
      // two, as is the last, empty receive.)
      for (int i = 0; i < 256 && !stopping_.load(); ++i) {
        if (!receive_one()) break;
      }
    }
  }
  socket_.close();  // linger is bounded by the socket options
}

bool ServerLoop::receive_one() {
  // A ROUTER message: [routing id][header][payload frames...]. Frames beyond the limit are drained and
  // dropped so a hostile peer cannot make us hold them.
  std::vector<zmq::message_t> parts;
  const size_t max_parts = 3 + options_.socket.limits.max_frames;  // routing id, header, payload, authentication
  bool too_many = false;
  while (true) {
    zmq::message_t part;
    auto got = socket_.recv(part, zmq::recv_flags::dontwait);
    if (!got) break;
    bool more = part.more();
    if (parts.size() < max_parts) parts.push_back(std::move(part)); else too_many = true;
    if (!more) break;
  }
  if (parts.empty()) return false;
  std::string routing_id = parts.front().to_string();
  if (parts.size() < 2) {
    ++rejected_;
    options_.log->debug("rpc") << "dropped an empty message";
    return true;
  }
  if (too_many) {
    ++rejected_;
    auto rid = wire::peek_request_id({parts[1].data<std::uint8_t>(), parts[1].size()}, options_.socket.limits);
    reject(routing_id, rid.value_or(0),
           error(Code::kTooLarge, "more than " + std::to_string(options_.socket.limits.max_frames) + " payload frames"));
    return true;
  }
  parts.erase(parts.begin());
  size_t bytes = 0;
  for (const auto& part : parts) bytes += part.size();
  if (!limiter_.admit(routing_id, bytes)) {
    ++rate_limited_;
    auto rid = wire::peek_request_id({parts[0].data<std::uint8_t>(), parts[0].size()}, options_.socket.limits);
    reject(routing_id, rid.value_or(0), error(Code::kRefused, "over this connection's request rate; slow down"));
    return true;
  }
  dispatch(std::move(routing_id), std::move(parts));
  return true;
}

void ServerLoop::dispatch(std::string routing_id, std::vector<zmq::message_t> parts) {
  ByteSpan header_bytes{parts[0].data<std::uint8_t>(), parts[0].size()};
  auto header = wire::decode_header(header_bytes, options_.socket.limits);
  if (!header) {
    ++rejected_;
    auto rid = wire::peek_request_id(header_bytes, options_.socket.limits);
    options_.log->debug("rpc") << "rejected a request: " << header.status().to_string();
    reject(routing_id, rid.value_or(0), header.status());
    return;
  }
  const auto& env = header->envelope();
  if (auto allowed = authenticate(options_.socket.access.get(), *header, parts, false); !allowed.is_ok()) {
    ++rejected_;
    if (allowed.code() == Code::kUnauthorized) limiter_.charge(routing_id, kAuthFailureCost);
    options_.log->debug("rpc") << "refused a request from " << env.sender.short_string() << ": " << allowed.to_string();
    reject(routing_id, env.request_id, allowed);
    return;
  }
  auto handler = handlers_.find(env.type);
  if (handler == handlers_.end()) {
    ++rejected_;
    reject(routing_id, env.request_id,
           error(Code::kUnknownType, "this peer does not serve message type " +
                                         std::to_string(static_cast<unsigned>(env.type)) + " (" +
                                         std::string(wire::message_type_name(env.type)) + ")"));
    return;
  }
  ++requests_;
  Incoming request{std::move(*header), {}};
  request.frames.reserve(parts.size() - 1);
  for (size_t i = 1; i < parts.size(); ++i) request.frames.push_back(std::move(parts[i]));
  std::uint64_t rid = env.request_id;
  try {
    handler->second(std::move(request), make_replier(routing_id, rid));
  } catch (const std::exception& e) {
    // A handler bug must not take the server down for everyone.
    options_.log->error("rpc") << "handler for " << wire::message_type_name(env.type) << " threw: " << e.what();
    reject(routing_id, rid, error(Code::kInternal, "the handler failed"));
  }
}

void ServerLoop::reject(const std::string& routing_id, std::uint64_t request_id, const Status& status) {
  wire::ErrorReply error_reply{status.code(), status.message()};
  send_reply(routing_id, request_id, Outgoing::of(error_reply), false);
}

void ServerLoop::send_reply(const std::string& routing_id, std::uint64_t request_id, Outgoing&& reply, bool seal) {
  std::vector<zmq::message_t> parts;
  parts.emplace_back(routing_id.data(), routing_id.size());
  wire::Envelope env;
  env.request_id = request_id;
  env.sender = options_.self;
  frame_message(env, std::move(reply), parts, seal ? options_.socket.access.get() : nullptr);
  for (size_t i = 0; i < parts.size(); ++i) {
    auto flags = zmq::send_flags::dontwait;
    if (i + 1 < parts.size()) flags = flags | zmq::send_flags::sndmore;
    try {
      if (!socket_.send(parts[i], flags)) {
        // The client's queue is full (it is not reading): drop rather than block everyone else.
        options_.log->warn("rpc") << "dropped a reply: the client's queue is full";
        return;
      }
    } catch (const zmq::error_t& e) {
      // EHOSTUNREACH: the client is gone. Nobody is waiting for this reply.
      options_.log->debug("rpc") << "dropped a reply: " << e.what();
      return;
    }
  }
}

Handler ping_handler(const Clock* clock) {
  return typed_handler<wire::Ping>([clock](wire::Ping&& ping, Incoming&&, Replier replier) {
    replier.reply(wire::Pong{ping.sent_unix_time, clock->unix_seconds(), "dedloc " DEDLOC_VERSION});
  });
}

Server::Server(zmq::context_t& context, ServerOptions options) : context_(context), options_(std::move(options)) {
  resolve_process_defaults(options_.socket);
  handle(wire::Ping::kType, ping_handler(options_.clock));
  handle<wire::Probe>([](wire::Probe&& probe, Incoming&& request, Replier replier) {
    wire::ProbeReply reply{probe.sequence, request.payload_bytes()};
    replier.reply(reply, probe.echo_payload ? std::move(request.frames) : std::vector<zmq::message_t>{});
  });
}

Server::~Server() { stop(); }

void Server::handle(wire::MessageType type, Handler handler) { handlers_[type] = std::move(handler); }

Status Server::start() {
  if (loop_) return error(Code::kInvalidArgument, "server already started");
  zmq::socket_t socket;
  auto bound = open_router(context_, socket, options_.listen, options_.socket);
  if (!bound) return bound.status();
  endpoint_ = std::move(*bound);
  for (const auto& extra : options_.also_listen) {
    try {
      socket.bind(extra);
    } catch (const zmq::error_t& e) {
      return error(Code::kUnavailable, "cannot listen on " + extra + ": " + e.what());
    }
  }
  try {
    loop_ = std::make_shared<ServerLoop>(std::move(socket), options_, handlers_);
  } catch (const std::system_error& e) {
    return error(Code::kUnavailable, "cannot serve on " + endpoint_ + ": " + e.what());
  }
  thread_ = std::thread([loop = loop_] { loop->run(); });
  options_.log->debug("rpc") << "serving on " << endpoint_;
  return Status::ok();
}

void Server::stop() {
  if (!loop_) return;
  loop_->request_stop();
  if (thread_.joinable()) thread_.join();
  loop_.reset();
}

ServerStats Server::stats() const { return loop_ ? loop_->stats() : ServerStats{}; }

}  // namespace dedloc::net
