#include "dedloc/net/relay_link.hpp"

#include <cstdio>
#include <map>
#include <mutex>

#include "dedloc/wire/relay_frames.hpp"

namespace dedloc::net {

namespace {

using wire::RelayTag;
using Steady = std::chrono::steady_clock;

ByteSpan span_of(const zmq::message_t& m) { return {m.data<std::uint8_t>(), m.size()}; }

// Receives one whole multipart message without waiting (empty when none is queued, or on an error such as
// EINTR: a signal must not end the loop thread).
std::vector<zmq::message_t> receive_message(zmq::socket_t& socket) {
  std::vector<zmq::message_t> parts;
  try {
    zmq::message_t part;
    if (!socket.recv(part, zmq::recv_flags::dontwait)) return parts;
    bool more = part.more();
    parts.push_back(std::move(part));
    while (more) {
      zmq::message_t next;
      if (!socket.recv(next, zmq::recv_flags::none)) break;
      more = next.more();
      parts.push_back(std::move(next));
    }
  } catch (const zmq::error_t&) {
    parts.clear();
  }
  return parts;
}

bool send_message(zmq::socket_t& socket, std::vector<zmq::message_t>& parts) {
  for (size_t i = 0; i < parts.size(); ++i) {
    auto flags = zmq::send_flags::dontwait;
    if (i + 1 < parts.size()) flags = flags | zmq::send_flags::sndmore;
    try {
      if (!socket.send(parts[i], flags)) return false;
    } catch (const zmq::error_t&) {
      return false;
    }
  }
  return true;
}

void push_frame(std::vector<zmq::message_t>& parts, const Bytes& bytes) { parts.emplace_back(bytes.data(), bytes.size()); }

// Local connections for requesters at once: the relay bounds them per peer (--max-circuits); this bounds
// them here too, whatever a relay sends.
constexpr size_t kMaxRequesters = 1024;

}  // namespace

class RelayLinkLoop {
 public:
  RelayLinkLoop(zmq::context_t& context, zmq::socket_t relay, const RelayLinkOptions& options)
      : context_(context), relay_(std::move(relay)), options_(options) {}

  void run();
  void request_stop() { stop_ = true; }
  bool alive() const { return alive_; }
  Status failure() const {
    std::lock_guard lock(mutex_);
    return failure_;
  }

 private:
  struct Requester {
    zmq::socket_t socket;
    Steady::time_point last_used;
  };

  void from_relay(std::vector<zmq::message_t> parts);
  void die(Status why) {
    std::lock_guard lock(mutex_);
    failure_ = std::move(why);
    alive_ = false;
  }

  zmq::context_t& context_;
  zmq::socket_t relay_;
  RelayLinkOptions options_;
  std::map<std::string, Requester> requesters_;  // by the relay's token
  std::atomic<bool> stop_{false};
  std::atomic<bool> alive_{true};
  mutable std::mutex mutex_;
  Status failure_;
  Steady::time_point last_echo_ = Steady::now();
};

void RelayLinkLoop::from_relay(std::vector<zmq::message_t> parts) {
  if (parts.empty()) return;
  auto frame = wire::decode_relay_frame(span_of(parts[0]));
  if (!frame || !frame->has_value()) return;  // only relay frames come down a circuit
  const auto& relay_frame = **frame;
  if (relay_frame.tag == RelayTag::kHeartbeat) {
    last_echo_ = Steady::now();
    return;
  }
  if (relay_frame.tag != RelayTag::kRequest || parts.size() < 2) return;
  last_echo_ = Steady::now();  // traffic from the relay proves it alive as well as an echo
  std::string token(reinterpret_cast<const char*>(relay_frame.id.data()), relay_frame.id.size());
  auto it = requesters_.find(token);
  if (it == requesters_.end() && requesters_.size() >= kMaxRequesters) {
    options_.log->warn("relay") << "dropped a forwarded request: " << kMaxRequesters << " requesters already open";
    return;
  }
  if (it == requesters_.end()) {
    try {
      zmq::socket_t socket(context_, zmq::socket_type::dealer);
      apply_socket_options(socket, options_.socket);
      auto dialed = connect_to(socket, options_.local_endpoint, options_.socket.transport.get());
      if (!dialed.is_ok()) {
        options_.log->warn("relay") << "cannot reach our own server: " << dialed.to_string();
        return;
      }
      it = requesters_.emplace(token, Requester{std::move(socket), Steady::now()}).first;
    } catch (const zmq::error_t& e) {
      options_.log->warn("relay") << "cannot reach our own server at " << options_.local_endpoint << ": " << e.what();
      return;
    }
  }
  it->second.last_used = Steady::now();
  parts.erase(parts.begin());
  send_message(it->second.socket, parts);
}

void RelayLinkLoop::run() {
  auto next_heartbeat = Steady::now();
  while (!stop_) {
    std::vector<zmq::pollitem_t> items{{relay_.handle(), 0, ZMQ_POLLIN, 0}};
    std::vector<std::map<std::string, Requester>::iterator> order;
    for (auto it = requesters_.begin(); it != requesters_.end(); ++it) {
      items.push_back({it->second.socket.handle(), 0, ZMQ_POLLIN, 0});
      order.push_back(it);
    }
    try {
      zmq::poll(items.data(), items.size(), std::chrono::milliseconds(100));
    } catch (const zmq::error_t&) {
      continue;
    }
    if (items[0].revents & ZMQ_POLLIN) {
      for (int budget = 0; budget < 256; ++budget) {
        auto parts = receive_message(relay_);
        if (parts.empty()) break;
        from_relay(std::move(parts));
      }
    }
    for (size_t i = 1; i < items.size(); ++i) {
      if (!(items[i].revents & ZMQ_POLLIN)) continue;
      auto& [token, requester] = *order[i - 1];
      for (int budget = 0; budget < 256; ++budget) {
        auto reply = receive_message(requester.socket);
        if (reply.empty()) break;
        std::vector<zmq::message_t> out;
        push_frame(out, wire::encode_relay_frame(RelayTag::kReply, ByteSpan(reinterpret_cast<const std::uint8_t*>(token.data()), token.size())));
        for (auto& part : reply) out.push_back(std::move(part));
        send_message(relay_, out);
        requester.last_used = Steady::now();
      }
    }
    auto now = Steady::now();
    if (now >= next_heartbeat) {
      std::vector<zmq::message_t> beat;
      push_frame(beat, wire::encode_relay_frame(RelayTag::kHeartbeat));
      send_message(relay_, beat);
      next_heartbeat = now + options_.heartbeat;
      std::erase_if(requesters_, [&](const auto& r) { return now - r.second.last_used > options_.requester_idle; });
    }
    if (now - last_echo_ > options_.dead_after) {
      char waited[32];
      std::snprintf(waited, sizeof waited, "%.1f", std::chrono::duration<double>(options_.dead_after).count());
      die(error(Code::kUnavailable, "relay " + options_.relay.to_string() + " stopped answering (no heartbeat for " +
                                        waited + " s)"));
      options_.log->warn("relay") << failure().message();
      return;
    }
  }
  die(error(Code::kCancelled, "stopped"));
}

RelayLink::RelayLink(zmq::context_t& context, const crypto::Identity& identity, RelayLinkOptions options)
    : context_(context), identity_(identity), options_(std::move(options)) {
  resolve_process_defaults(options_.socket);
}

RelayLink::~RelayLink() { stop(); }

Status RelayLink::start() {
  if (!options_.relay.peer_id) {
    return error(Code::kInvalidArgument, "relay " + options_.relay.endpoint + ": its address must name it (/k/KEY or /p/PEERID)");
  }
  zmq::socket_t socket;
  try {
    socket = zmq::socket_t(context_, zmq::socket_type::dealer);
    apply_socket_options(socket, options_.socket);
  } catch (const zmq::error_t& e) {
    return error(Code::kUnavailable, "cannot open a socket for relay " + options_.relay.to_string() + ": " + e.what());
  }
  auto dialed = connect_to(socket, options_.relay.endpoint, options_.socket.transport.get());
  if (!dialed.is_ok()) return dialed.with_context("dialing relay " + options_.relay.to_string());
  auto now_ms = static_cast<std::uint64_t>(SystemClock::instance().unix_seconds() * 1000);
  std::vector<zmq::message_t> attach;
  push_frame(attach, wire::encode_relay_frame(RelayTag::kAttach));
  // In a private run the relay admits only members: our token goes with the proof.
  const auto& access = options_.socket.access;
  Bytes token = access ? access->token().encode() : Bytes{};
  push_frame(attach, wire::encode_attach_proof(identity_, *options_.relay.peer_id, now_ms, token));
  if (!send_message(socket, attach)) return error(Code::kUnavailable, "cannot send to relay " + options_.relay.to_string());

  auto deadline = Deadline::after(options_.attach_timeout);
  while (!deadline.passed()) {
    zmq::pollitem_t item{socket.handle(), 0, ZMQ_POLLIN, 0};
    try {
      zmq::poll(&item, 1, std::chrono::milliseconds(50));
    } catch (const zmq::error_t&) {  // EINTR (a signal): look again until the deadline
      continue;
    }
    auto parts = receive_message(socket);
    if (parts.size() != 2) continue;
    auto frame = wire::decode_relay_frame(span_of(parts[0]));
    if (!frame || !frame->has_value() || (*frame)->tag != RelayTag::kAttachAnswer) continue;
    DEDLOC_RETURN_IF_ERROR(wire::decode_attach_answer(span_of(parts[1])).with_context("attaching to " + options_.relay.to_string()));
    address_ = relay_address(options_.relay.endpoint, identity_.peer_id());
    loop_ = std::make_shared<RelayLinkLoop>(context_, std::move(socket), options_);
    thread_ = std::thread([loop = loop_] { loop->run(); });
    options_.log->info("relay") << "reachable at " << address_;
    return Status::ok();
  }
  return error(Code::kTimeout, "relay " + options_.relay.to_string() + " did not answer the attach within " +
                                   std::to_string(std::chrono::duration_cast<std::chrono::seconds>(options_.attach_timeout).count()) + " s");
}

bool RelayLink::alive() const { return loop_ && loop_->alive(); }

Status RelayLink::failure() const {
  if (!loop_) return error(Code::kUnavailable, "not attached");
  return loop_->failure();
}

void RelayLink::stop() {
  if (!loop_) return;
  loop_->request_stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace dedloc::net
