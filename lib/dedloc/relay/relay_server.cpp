#include "dedloc/relay/relay_server.hpp"

#include <algorithm>
#include <atomic>
#include <functional>
#include <map>
#include <mutex>

#include "dedloc/core/memory.hpp"
#include "dedloc/net/message.hpp"
#include "dedloc/wire/envelope.hpp"
#include "dedloc/wire/messages.hpp"
#include "dedloc/wire/relay_frames.hpp"

namespace dedloc::relay {

namespace {

using SteadyTime = std::chrono::steady_clock::time_point;
using wire::RelayTag;

std::string as_string(ByteSpan bytes) { return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size()); }
ByteSpan span_of(const zmq::message_t& m) { return {m.data<std::uint8_t>(), m.size()}; }
ByteSpan span_of(const std::string& s) { return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()}; }

size_t bytes_of(const std::vector<zmq::message_t>& parts, size_t from) {
  size_t n = 0;
  for (size_t i = from; i < parts.size(); ++i) n += parts[i].size();
  return n;
}

}  // namespace

class RelayLoop {
 public:
  RelayLoop(zmq::socket_t socket, const crypto::PeerId& self, const RelayOptions& options)
      : socket_(std::move(socket)), self_(self), options_(options) {}

  void run();
  void request_stop() { stop_ = true; }
  RelayStats stats() const {
    std::lock_guard lock(stats_mutex_);
    return stats_;
  }

 private:
  struct Attachment {
    std::string routing_id;                  // the peer's connection to us
    crypto::PeerId peer;
    SteadyTime last_heard;
    std::map<std::string, SteadyTime> circuits;  // requester routing id -> last request
    double tokens = 0;                       // the rate limit's bucket, in bytes
    SteadyTime refilled;
    std::uint64_t total = 0;
  };

  void handle(std::vector<zmq::message_t> parts);
  void attach(const std::string& from, std::vector<zmq::message_t>& parts);
  void forward(const std::string& from, const crypto::PeerId& target, std::vector<zmq::message_t>& parts);
  void reply(const std::string& from, const Bytes& token, std::vector<zmq::message_t>& parts);
  // Takes `bytes` from the peer's limits; the refusal naming the limit otherwise.
  Status charge(Attachment& a, size_t bytes, SteadyTime now);
  void refuse(const std::string& requester, const zmq::message_t& header, const Status& why);
  void send(const std::string& to, std::vector<zmq::message_t>& parts);
  void expire(SteadyTime now);
  Attachment* attachment_of_route(const std::string& routing_id);
  void count(const std::function<void(RelayStats&)>& update) {
    std::lock_guard lock(stats_mutex_);
    update(stats_);
  }

  zmq::socket_t socket_;
  crypto::PeerId self_;
  RelayOptions options_;
  std::atomic<bool> stop_{false};
  std::map<crypto::PeerId, Attachment> attached_;
  std::map<std::string, crypto::PeerId> by_route_;
  mutable std::mutex stats_mutex_;
  RelayStats stats_;
};

void RelayLoop::run() {
  auto next_expiry = std::chrono::steady_clock::now();
  while (!stop_) {
    zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
    try {
      zmq::poll(&item, 1, std::chrono::milliseconds(200));
    } catch (const zmq::error_t&) {
      if (stop_) break;
      continue;
    }
    for (int budget = 0; budget < 1024 && (item.revents & ZMQ_POLLIN); ++budget) {
      std::vector<zmq::message_t> parts;
      zmq::message_t part;
      bool any = false;
      try {
        while (socket_.recv(part, any ? zmq::recv_flags::none : zmq::recv_flags::dontwait)) {
          any = true;
          bool more = part.more();
          parts.push_back(std::move(part));
          if (!more) break;
        }
      } catch (const zmq::error_t&) {
        break;
      }
      if (!any) break;
      if (parts.size() >= 2) handle(std::move(parts));
    }
    auto now = std::chrono::steady_clock::now();
    if (now >= next_expiry) {
      expire(now);
      next_expiry = now + std::chrono::seconds(1);
    }
  }
}

void RelayLoop::handle(std::vector<zmq::message_t> parts) {
  const std::string from = parts[0].to_string();
  auto frame = wire::decode_relay_frame(span_of(parts[1]));
  if (!frame) {
    options_.log->debug("relay") << "dropped a garbled relay frame: " << frame.status().to_string();
    return;
  }
  if (!frame->has_value()) {  // an ordinary request to the relay itself
    refuse(from, parts[1], error(Code::kInvalidArgument, "this is a relay: address peers behind it as "
                                                         "relay://HOST:PORT/k/RELAYKEY/p/PEERID"));
    return;
  }
  auto now = std::chrono::steady_clock::now();
  switch ((*frame)->tag) {
    case RelayTag::kAttach:
      attach(from, parts);
      return;
    case RelayTag::kHeartbeat:
      if (auto* a = attachment_of_route(from)) {
        a->last_heard = now;
        std::vector<zmq::message_t> echo;
        echo.emplace_back(from.data(), from.size());
        auto tag = wire::encode_relay_frame(RelayTag::kHeartbeat);
        echo.emplace_back(tag.data(), tag.size());
        send(from, echo);
      }
      return;
    case RelayTag::kForward: {
      if (parts.size() < 3) return;
      auto target = crypto::PeerId::from_bytes((*frame)->id);
      if (target) forward(from, *target, parts);
      return;
    }
    case RelayTag::kReply:
      if (parts.size() >= 3) reply(from, (*frame)->id, parts);
      return;
    default:
      options_.log->debug("relay") << "dropped a relay frame only relays send";
      return;
  }
}

void RelayLoop::attach(const std::string& from, std::vector<zmq::message_t>& parts) {
  Status outcome;
  std::optional<crypto::PeerId> peer;
  if (parts.size() != 3) {
    outcome = error(Code::kMalformed, "an attach carries exactly one proof frame");
  } else {
    auto now_ms = static_cast<std::uint64_t>(SystemClock::instance().unix_seconds() * 1000);
    auto window = static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(options_.limits.attach_window).count());
    auto verified = wire::verify_attach_proof(span_of(parts[2]), self_, now_ms, window);
    const auto& access = options_.socket.access;
    if (!verified) {
      outcome = verified.status();
    } else if (auto admitted = access ? access->admit(verified->access_token, verified->peer) : Status::ok();
               !admitted.is_ok()) {
      outcome = admitted.with_context("this relay serves a private run");
    } else if (!attached_.count(verified->peer) && attached_.size() >= options_.limits.max_peers) {
      outcome = error(Code::kRefused, "this relay serves its limit of " + std::to_string(options_.limits.max_peers) +
                                          " peers; try another");
    } else {
      peer = verified->peer;
    }
  }
  if (peer) {
    auto old = attached_.find(*peer);
    if (old != attached_.end()) by_route_.erase(old->second.routing_id);  // reconnected: the new circuit wins
    auto now = std::chrono::steady_clock::now();
    Attachment a;
    a.routing_id = from;
    a.peer = *peer;
    a.last_heard = now;
    a.tokens = options_.limits.burst_bytes;
    a.refilled = now;
    attached_[*peer] = std::move(a);
    by_route_[from] = *peer;
    options_.log->info("relay") << "attached " << peer->short_string() << " (" << attached_.size() << " peer(s))";
    count([&](RelayStats& s) {
      ++s.attaches;
      s.attached = attached_.size();
    });
  } else {
    options_.log->info("relay") << "refused an attach: " << outcome.to_string();
    count([](RelayStats& s) { ++s.attaches_refused; });
  }
  std::vector<zmq::message_t> answer;
  answer.emplace_back(from.data(), from.size());
  auto tag = wire::encode_relay_frame(RelayTag::kAttachAnswer);
  answer.emplace_back(tag.data(), tag.size());
  auto body = wire::encode_attach_answer(outcome);
  answer.emplace_back(body.data(), body.size());
  send(from, answer);
}

Status RelayLoop::charge(Attachment& a, size_t bytes, SteadyTime now) {
  const auto& limits = options_.limits;
  double elapsed = std::chrono::duration<double>(now - a.refilled).count();
  a.tokens = std::min(limits.burst_bytes, a.tokens + elapsed * limits.bytes_per_second);
  a.refilled = now;
  if (a.total + bytes > limits.max_total_bytes) {
    return error(Code::kRefused, "relay: peer " + a.peer.short_string() + " is over its limit of " +
                                     std::to_string(limits.max_total_bytes) + " bytes relayed");
  }
  if (static_cast<double>(bytes) > a.tokens) {
    return error(Code::kRefused, "relay: peer " + a.peer.short_string() + " is over its rate of " +
                                     std::to_string(static_cast<std::uint64_t>(limits.bytes_per_second)) +
                                     " bytes/s; retry later");
  }
  a.tokens -= static_cast<double>(bytes);
  a.total += bytes;
  return Status::ok();
}

void RelayLoop::forward(const std::string& from, const crypto::PeerId& target, std::vector<zmq::message_t>& parts) {
  auto it = attached_.find(target);
  if (it == attached_.end()) {
    refuse(from, parts[2], error(Code::kNotFound, "relay: peer " + target.to_string() + " is not attached here"));
    return;
  }
  auto& a = it->second;
  auto now = std::chrono::steady_clock::now();
  if (!a.circuits.count(from) && a.circuits.size() >= options_.limits.max_circuits) {
    refuse(from, parts[2], error(Code::kRefused, "relay: peer " + target.short_string() + " has its limit of " +
                                                     std::to_string(options_.limits.max_circuits) + " open circuits"));
    return;
  }
  const size_t bytes = bytes_of(parts, 2);
  if (auto charged = charge(a, bytes, now); !charged.is_ok()) {
    refuse(from, parts[2], charged);
    return;
  }
  a.circuits[from] = now;
  std::vector<zmq::message_t> out;
  out.reserve(parts.size());
  out.emplace_back(a.routing_id.data(), a.routing_id.size());
  auto tag = wire::encode_relay_frame(RelayTag::kRequest, span_of(from));
  out.emplace_back(tag.data(), tag.size());
  for (size_t i = 2; i < parts.size(); ++i) out.push_back(std::move(parts[i]));
  send(a.routing_id, out);
  count([&](RelayStats& s) {
    ++s.forwarded;
    s.bytes += bytes;
  });
}

void RelayLoop::reply(const std::string& from, const Bytes& token, std::vector<zmq::message_t>& parts) {
  auto* a = attachment_of_route(from);
  if (!a) return;  // only an attached peer answers through us
  std::string requester = as_string(token);
  if (!a->circuits.count(requester)) return;  // not someone who asked it anything
  auto now = std::chrono::steady_clock::now();
  a->last_heard = now;
  const size_t bytes = bytes_of(parts, 2);
  // A reply is charged but never refused: the request it answers was already let through.
  a->total += bytes;
  a->tokens -= static_cast<double>(bytes);
  std::vector<zmq::message_t> out;
  out.reserve(parts.size() - 1);
  out.emplace_back(requester.data(), requester.size());
  for (size_t i = 2; i < parts.size(); ++i) out.push_back(std::move(parts[i]));
  send(requester, out);
  count([&](RelayStats& s) {
    ++s.replies;
    s.bytes += bytes;
  });
}

void RelayLoop::refuse(const std::string& requester, const zmq::message_t& header, const Status& why) {
  auto request_id = wire::peek_request_id(span_of(header), options_.socket.limits);
  if (!request_id) return;  // not a dedloc request: nobody to answer
  std::vector<zmq::message_t> out;
  out.emplace_back(requester.data(), requester.size());
  wire::Envelope env;
  env.request_id = *request_id;
  env.sender = self_;
  net::frame_message(env, net::Outgoing::of(wire::ErrorReply{why.code(), why.message()}), out,
                     options_.socket.access.get());
  send(requester, out);
  count([](RelayStats& s) { ++s.refused; });
}

void RelayLoop::send(const std::string& to, std::vector<zmq::message_t>& parts) {
  for (size_t i = 0; i < parts.size(); ++i) {
    auto flags = zmq::send_flags::dontwait;
    if (i + 1 < parts.size()) flags = flags | zmq::send_flags::sndmore;
    try {
      if (!socket_.send(parts[i], flags)) {
        options_.log->debug("relay") << "dropped a message: the queue to its receiver is full";
        return;
      }
    } catch (const zmq::error_t& e) {  // EHOSTUNREACH: gone
      options_.log->debug("relay") << "dropped a message: " << e.what();
      if (by_route_.count(to)) {
        attached_.erase(by_route_[to]);
        by_route_.erase(to);
      }
      return;
    }
  }
}

RelayLoop::Attachment* RelayLoop::attachment_of_route(const std::string& routing_id) {
  auto route = by_route_.find(routing_id);
  if (route == by_route_.end()) return nullptr;
  auto it = attached_.find(route->second);
  return it == attached_.end() ? nullptr : &it->second;
}

void RelayLoop::expire(SteadyTime now) {
  for (auto it = attached_.begin(); it != attached_.end();) {
    auto& a = it->second;
    std::erase_if(a.circuits, [&](const auto& c) { return now - c.second > options_.limits.idle; });
    if (now - a.last_heard > options_.limits.idle) {
      options_.log->info("relay") << "closed the idle circuit of " << a.peer.short_string();
      by_route_.erase(a.routing_id);
      it = attached_.erase(it);
    } else {
      ++it;
    }
  }
  count([&](RelayStats& s) { s.attached = attached_.size(); });
}

RelayServer::RelayServer(zmq::context_t& context, const crypto::Identity& identity, RelayOptions options)
    : context_(context), self_(identity.peer_id()), options_(std::move(options)) {
  net::resolve_process_defaults(options_.socket);
}

RelayServer::~RelayServer() { stop(); }

Status RelayServer::start() {
  if (loop_) return error(Code::kInvalidArgument, "relay already started");
  keep_freed_memory();  // ZeroMQ mallocs every message the relay receives (parts of MiBs): core/memory.hpp
  zmq::socket_t socket;
  auto bound = net::open_router(context_, socket, options_.listen, options_.socket);
  if (!bound) return bound.status();
  endpoint_ = std::move(*bound);
  loop_ = std::make_shared<RelayLoop>(std::move(socket), self_, options_);
  thread_ = std::thread([loop = loop_] { loop->run(); });
  return Status::ok();
}

void RelayServer::stop() {
  if (!loop_) return;
  loop_->request_stop();
  if (thread_.joinable()) thread_.join();
  loop_.reset();
}

RelayStats RelayServer::stats() const { return loop_ ? loop_->stats() : RelayStats{}; }

}  // namespace dedloc::relay
