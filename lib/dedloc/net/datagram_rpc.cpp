#include "dedloc/net/datagram_rpc.hpp"

#include <arpa/inet.h>
#include <linux/errqueue.h>
#include <netinet/in.h>
#include <netinet/ip_icmp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <queue>
#include <system_error>
#include <unordered_map>
#include <vector>

#include <sodium.h>

#include "dedloc/net/mailbox.hpp"
#include "dedloc/net/peer_address.hpp"
#include "dedloc/net/server.hpp"
#include "dedloc/wire/datagram.hpp"
#include "dedloc/wire/messages.hpp"

namespace dedloc::net {

namespace {

// A reply may be this many times its request's size before the requester's address must be shown to be its own.
constexpr size_t kAmplificationFactor = 3;
constexpr int kReceiveBufferBytes = 1 << 20;
constexpr int kReceivesPerWake = 256;
constexpr int kMaxCookieRetries = 2;

std::string address_key(const sockaddr_in& address) {
  return std::string(reinterpret_cast<const char*>(&address.sin_addr), sizeof(address.sin_addr)) +
         std::string(reinterpret_cast<const char*>(&address.sin_port), sizeof(address.sin_port));
}

std::string describe(const sockaddr_in& address) {
  char host[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &address.sin_addr, host, sizeof(host));
  return std::string(host) + ":" + std::to_string(ntohs(address.sin_port));
}

std::vector<Bytes> to_bytes(std::vector<zmq::message_t>& parts) {
  std::vector<Bytes> frames;
  frames.reserve(parts.size());
  for (auto& part : parts) {
    auto span = bytes_of(part);
    frames.emplace_back(span.begin(), span.end());
  }
  return frames;
}

std::vector<zmq::message_t> to_parts(std::vector<Bytes>& frames) {
  std::vector<zmq::message_t> parts;
  parts.reserve(frames.size());
  for (auto& frame : frames) parts.emplace_back(frame.data(), frame.size());
  return parts;
}

Outgoing copy_of(const Outgoing& out) {
  Outgoing copy{out.type, out.body, {}};
  for (const auto& frame : out.frames) copy.frames.emplace_back(frame.data(), frame.size());
  return copy;
}

}  // namespace

// Where a request came from, as its Replier carries it (ReplySink's opaque route).
struct ReplyRoute {
  sockaddr_in address{};
  bool sealed = false;
  crypto::PublicKey requester{};  // its key, when sealed
  std::uint32_t request_bytes = 0;
  bool address_shown = false;  // the request carried a valid cookie for its address

  std::string encode() const { return std::string(reinterpret_cast<const char*>(this), sizeof(*this)); }
  static ReplyRoute decode(const std::string& bytes) {
    ReplyRoute route;
    if (bytes.size() == sizeof(route)) std::memcpy(&route, bytes.data(), sizeof(route));
    return route;
  }
};

class DatagramLoop : public ReplySink, public std::enable_shared_from_this<DatagramLoop> {
 public:
  DatagramLoop(int fd, bool serve, const DatagramOptions& options, Caller& stream,
               std::map<wire::MessageType, Handler> handlers)
      : fd_(fd),
        serve_(serve),
        options_(options),
        stream_(stream),
        handlers_(std::move(handlers)),
        limiter_(options.peer_limits) {
    if (auto keys = options_.socket.transport) {
      own_key_ = keys->public_key;
      own_curve_ = keys->curve;
      serves_sealed_only_ = true;
    } else {
      // Without transport keys we still seal for servers that have them (as a CURVE client with a fresh
      // keypair would), with a key of this process's own making.
      auto ephemeral = crypto::Identity::generate();
      own_key_ = ephemeral.public_key();
      own_curve_ = ephemeral.curve_keys();
    }
    randombytes_buf(cookie_secret_.data(), cookie_secret_.size());
  }
  ~DatagramLoop() override { ::close(fd_); }

  void run();
  void submit(Caller::Callback done, std::string endpoint, Outgoing request, Deadline deadline);
  void queue_reply(std::string route, std::uint64_t request_id, Outgoing reply) override;
  void request_stop() {
    stopping_.store(true);
    mailbox_.push({});
  }
  void request_cancel() {
    cancelling_.store(true);
    mailbox_.push({});
  }
  DatagramStats stats() const {
    return {requests_.load(),    rejected_.load(), rate_limited_.load(),   calls_.load(),
            retransmits_.load(), streamed_.load(), cookie_retries_.load(), ports_unreachable_.load()};
  }

 private:
  struct Work {  // what other threads hand the loop: a call to send, or a reply to one we served
    Caller::Callback done;
    std::string endpoint;
    Outgoing message;
    Deadline deadline;
    std::string route;  // non-empty: `message` is a reply along this route
    std::uint64_t request_id = 0;
  };
  struct Pending {
    Caller::Callback done;
    std::string endpoint;
    sockaddr_in address{};
    std::optional<crypto::PublicKey> server_key;  // replies must be sealed by it
    Outgoing retained;  // the request: sent again (with a cookie, or after a loss), or over the stream
    Bytes datagram;     // as last sent
    TimePoint deadline;
    TimePoint first_sent;
    TimePoint resend_at;
    Duration interval{};
    int cookie_retries = 0;
  };
  using Timer = std::pair<TimePoint, std::uint64_t>;

  void take(Work&& work);
  void start_call(Work&& work);
  // Hands the call to the stream (which completes it); `pending` is removed.
  void stream(std::uint64_t request_id);
  void complete(std::uint64_t request_id, Result<Incoming>&& outcome);
  void send_request(std::uint64_t request_id, Pending& pending);
  void fire_timers();
  bool receive_one();
  void read_errors();
  void on_port_unreachable(const sockaddr_in& address);
  bool stream_only(const sockaddr_in& address);
  void on_request(const sockaddr_in& from, const wire::DatagramEnvelope& envelope, wire::DatagramBody&& body,
                  size_t datagram_bytes);
  void on_answer(const wire::DatagramEnvelope& envelope, wire::DatagramBody&& body, size_t datagram_bytes);
  void send_reply(const ReplyRoute& route, std::uint64_t request_id, Outgoing&& reply, bool seal_access = true);
  void reject(const ReplyRoute& route, std::uint64_t request_id, const Status& status);
  void send_body(const sockaddr_in& to, const wire::DatagramBody& body, const crypto::PublicKey* seal_for);
  bool send_to(const sockaddr_in& to, const Bytes& datagram);
  const wire::SharedKey* shared_key(const crypto::PublicKey& peer);
  wire::Cookie cookie_for(const sockaddr_in& address, std::int64_t epoch) const;
  std::int64_t cookie_epoch() const;
  bool cookie_valid(const sockaddr_in& address, const wire::Cookie& cookie) const;
  Duration retransmit_interval() const;

  int fd_;
  bool serve_;
  DatagramOptions options_;
  Caller& stream_;
  std::map<wire::MessageType, Handler> handlers_;
  PeerRateLimiter limiter_;
  crypto::PublicKey own_key_{};
  crypto::CurveKeyPair own_curve_;
  bool serves_sealed_only_ = false;
  std::array<std::uint8_t, crypto_generichash_KEYBYTES> cookie_secret_{};

  Mailbox<Work> mailbox_;
  std::vector<Work> from_loop_;  // submitted on the loop thread itself; loop thread only
  std::atomic<std::thread::id> thread_id_{};
  std::atomic<bool> stopping_{false}, cancelling_{false};
  std::unordered_map<std::uint64_t, Pending> pending_;
  std::priority_queue<Timer, std::vector<Timer>, std::greater<>> timers_;
  std::map<crypto::PublicKey, wire::SharedKey> shared_keys_;  // by peer key
  std::unordered_map<std::string, wire::Cookie> cookies_;         // servers' cookies, by address
  std::unordered_map<std::string, TimePoint> stream_only_until_;  // addresses with no datagrams, by address
  Duration smoothed_rtt_{0};
  Bytes receive_buffer_ = Bytes(wire::kMaxDatagramBytes + 1);

  std::atomic<std::uint64_t> requests_{0}, rejected_{0}, rate_limited_{0}, calls_{0}, retransmits_{0}, streamed_{0},
      cookie_retries_{0}, ports_unreachable_{0};
};

// ---------------------------------------------------------------------------------------------------------
// The loop

void DatagramLoop::run() {
  thread_id_.store(std::this_thread::get_id());
  while (!stopping_.load()) {
    pollfd fds[2] = {{fd_, POLLIN, 0}, {mailbox_.fd(), POLLIN, 0}};
    auto now = std::chrono::steady_clock::now();
    auto wake = now + std::chrono::seconds(1);
    if (!timers_.empty()) wake = std::min(wake, timers_.top().first);
    const auto timeout = std::chrono::ceil<std::chrono::milliseconds>(std::max(wake - now, Duration::zero()));
    if (::poll(fds, 2, static_cast<int>(timeout.count())) < 0 && errno != EINTR) {
      options_.log->error("rpc") << "datagram poll failed: " << std::strerror(errno);
      break;
    }
    if (fds[0].revents & POLLERR) read_errors();
    if (fds[0].revents & POLLIN) {
      for (int i = 0; i < kReceivesPerWake && !stopping_.load(); ++i) {
        if (!receive_one()) break;
      }
    }
    if (fds[1].revents & POLLIN) {
      for (auto& work : mailbox_.drain()) take(std::move(work));
    }
    while (!from_loop_.empty()) {
      std::vector<Work> batch;
      batch.swap(from_loop_);
      for (auto& work : batch) take(std::move(work));
    }
    if (cancelling_.exchange(false)) {
      while (!pending_.empty()) complete(pending_.begin()->first, error(Code::kCancelled, "the call was cancelled"));
    }
    fire_timers();
  }
  // Shutting down: everyone still waiting learns it now (a callback that calls again adds to from_loop_).
  auto cancel = [](Work& work) {
    if (work.done) work.done(error(Code::kCancelled, "the datagram transport is shutting down"));
  };
  for (auto& work : mailbox_.drain()) cancel(work);
  while (!pending_.empty())
    complete(pending_.begin()->first, error(Code::kCancelled, "the datagram transport is shutting down"));
  while (!from_loop_.empty()) {
    std::vector<Work> batch;
    batch.swap(from_loop_);
    for (auto& work : batch) cancel(work);
  }
}

void DatagramLoop::submit(Caller::Callback done, std::string endpoint, Outgoing request, Deadline deadline) {
  Work work{std::move(done), std::move(endpoint), std::move(request), deadline, {}, 0};
  // From the loop thread (a completion that asks the next question), the call waits in a plain queue: not
  // started at once, so that one failing at once does not complete inside the callback that made it.
  if (std::this_thread::get_id() == thread_id_.load(std::memory_order_relaxed)) {
    from_loop_.push_back(std::move(work));
  } else {
    mailbox_.push(std::move(work));
  }
}

void DatagramLoop::queue_reply(std::string route, std::uint64_t request_id, Outgoing reply) {
  if (std::this_thread::get_id() == thread_id_.load(std::memory_order_relaxed)) {
    send_reply(ReplyRoute::decode(route), request_id, std::move(reply));
  } else {
    mailbox_.push(Work{{}, {}, std::move(reply), Deadline{}, std::move(route), request_id});
  }
}

void DatagramLoop::take(Work&& work) {
  if (!work.route.empty()) {
    send_reply(ReplyRoute::decode(work.route), work.request_id, std::move(work.message));
  } else if (work.done) {
    start_call(std::move(work));
  }
}

// ---------------------------------------------------------------------------------------------------------
// Our calls

Duration DatagramLoop::retransmit_interval() const { return std::max(options_.retransmit_after, 2 * smoothed_rtt_); }

void DatagramLoop::start_call(Work&& work) {
  ++calls_;
  Pending pending;
  pending.done = std::move(work.done);
  pending.endpoint = work.endpoint;
  pending.deadline = work.deadline.at;
  std::uint64_t request_id = 0;
  do {
    randombytes_buf(&request_id, sizeof(request_id));
  } while (request_id == 0 || pending_.contains(request_id));

  auto target = parse_tcp_endpoint(work.endpoint);
  const bool ipv4 = target && inet_pton(AF_INET, target->host.c_str(), &pending.address.sin_addr) == 1;
  if (ipv4) {
    pending.address.sin_family = AF_INET;
    pending.address.sin_port = htons(target->port);
    pending.server_key = target->key;
  }
  pending.retained = std::move(work.message);
  auto [it, inserted] = pending_.emplace(request_id, std::move(pending));
  if (!ipv4 || stream_only(it->second.address)) return stream(request_id);
  send_request(request_id, it->second);
  if (it->second.datagram.empty()) {
    return complete(request_id, error(Code::kInvalidArgument, "the key in " + work.endpoint + " is not a valid key"));
  }
  if (it->second.datagram.size() > options_.max_datagram_bytes) return stream(request_id);
  const auto now = std::chrono::steady_clock::now();
  it->second.first_sent = now;
  it->second.interval = retransmit_interval();
  it->second.resend_at = now + it->second.interval;
  timers_.push({std::min(it->second.resend_at, it->second.deadline), request_id});
}

void DatagramLoop::send_request(std::uint64_t request_id, Pending& pending) {
  wire::DatagramBody body;
  body.kind = wire::DatagramKind::kRequest;
  body.request_id = request_id;
  auto cookie = cookies_.find(address_key(pending.address));
  if (cookie != cookies_.end()) body.cookie = cookie->second;
  // Framed anew for every copy: a private run's authentication frame carries a fresh nonce each time, since
  // the server refuses a replayed one (and the copy may be the first it sees, if the earlier was lost).
  wire::Envelope envelope;
  envelope.request_id = request_id;
  envelope.sender = options_.self;
  std::vector<zmq::message_t> parts;
  frame_message(envelope, copy_of(pending.retained), parts, options_.socket.access.get());
  body.frames = to_bytes(parts);
  const Bytes encoded = wire::encode_datagram_body(body);
  const wire::SharedKey* shared = pending.server_key ? shared_key(*pending.server_key) : nullptr;
  pending.datagram = wire::encode_datagram(encoded, &own_key_, shared);
  if (pending.server_key && !shared) {
    pending.datagram.clear();  // a key that is not a curve point: nobody can answer for it
    return;
  }
  if (pending.datagram.size() <= options_.max_datagram_bytes) send_to(pending.address, pending.datagram);
}

void DatagramLoop::stream(std::uint64_t request_id) {
  auto it = pending_.find(request_id);
  if (it == pending_.end()) return;
  Pending pending = std::move(it->second);
  pending_.erase(it);
  ++streamed_;
  stream_.call(pending.endpoint, std::move(pending.retained), Deadline{pending.deadline}, std::move(pending.done));
}

void DatagramLoop::complete(std::uint64_t request_id, Result<Incoming>&& outcome) {
  auto it = pending_.find(request_id);
  if (it == pending_.end()) return;
  auto done = std::move(it->second.done);
  pending_.erase(it);
  done(std::move(outcome));
}

void DatagramLoop::fire_timers() {
  const auto now = std::chrono::steady_clock::now();
  while (!timers_.empty() && timers_.top().first <= now) {
    const std::uint64_t request_id = timers_.top().second;
    timers_.pop();
    auto it = pending_.find(request_id);
    if (it == pending_.end()) continue;
    Pending& pending = it->second;
    if (pending.deadline <= now) {
      complete(request_id, error(Code::kTimeout, "no reply from " + pending.endpoint + " before the deadline"));
      continue;
    }
    if (pending.resend_at <= now) {
      ++retransmits_;
      send_request(request_id, pending);
      pending.interval *= 2;
      pending.resend_at = now + pending.interval;
    }
    timers_.push({std::min(pending.resend_at, pending.deadline), request_id});
  }
}

// ---------------------------------------------------------------------------------------------------------
// Nodes without datagrams

bool DatagramLoop::stream_only(const sockaddr_in& address) {
  auto it = stream_only_until_.find(address_key(address));
  if (it == stream_only_until_.end()) return false;
  if (it->second > std::chrono::steady_clock::now()) return true;
  stream_only_until_.erase(it);  // it may have started listening for datagrams since: try them again
  return false;
}

// The socket has IP_RECVERR set, so the ICMP errors our datagrams draw wait in its error queue (poll says
// POLLERR), each with the address the datagram was sent to.
void DatagramLoop::read_errors() {
  for (int i = 0; i < kReceivesPerWake; ++i) {
    sockaddr_in to{};
    std::uint8_t payload[64];
    alignas(cmsghdr) std::uint8_t control[256];
    iovec iov{payload, sizeof(payload)};
    msghdr message{};
    message.msg_name = &to;
    message.msg_namelen = sizeof(to);
    message.msg_iov = &iov;
    message.msg_iovlen = 1;
    message.msg_control = control;
    message.msg_controllen = sizeof(control);
    if (::recvmsg(fd_, &message, MSG_ERRQUEUE) < 0) return;  // EAGAIN: the queue is empty
    for (cmsghdr* c = CMSG_FIRSTHDR(&message); c != nullptr; c = CMSG_NXTHDR(&message, c)) {
      if (c->cmsg_level != SOL_IP || c->cmsg_type != IP_RECVERR) continue;
      sock_extended_err error{};
      std::memcpy(&error, CMSG_DATA(c), sizeof(error));
      // Only "port unreachable" says something definite (the host is up, and nothing there takes UDP on that
      // port). Host and network unreachable come and go with routes: the retransmissions and the deadline
      // deal with those, as with a loss.
      if (error.ee_origin == SO_EE_ORIGIN_ICMP && error.ee_type == ICMP_DEST_UNREACH &&
          error.ee_code == ICMP_PORT_UNREACH && to.sin_family == AF_INET) {
        on_port_unreachable(to);
      }
    }
  }
}

// Nothing takes datagrams at `address`: its ZeroMQ server (on the same port, the endpoint it advertises)
// may still, so its calls go there. A dead node's port answers so too; its calls then wait out their
// deadlines on the stream, as they would have on datagrams. A forged ICMP answer can do no more than move
// calls to the stream, which is sealed alike.
void DatagramLoop::on_port_unreachable(const sockaddr_in& address) {
  ++ports_unreachable_;
  const std::string key = address_key(address);
  if (stream_only_until_.size() >= options_.max_remembered_peers) stream_only_until_.clear();
  stream_only_until_[key] = std::chrono::steady_clock::now() + options_.stream_only_memory;
  options_.log->debug("rpc") << describe(address) << " takes no datagrams: calling it over the stream";
  std::vector<std::uint64_t> to_stream;
  for (const auto& [request_id, pending] : pending_) {
    if (address_key(pending.address) == key) to_stream.push_back(request_id);
  }
  for (auto request_id : to_stream) stream(request_id);
}

// ---------------------------------------------------------------------------------------------------------
// What arrives

bool DatagramLoop::receive_one() {
  sockaddr_in from{};
  socklen_t from_size = sizeof(from);
  const ssize_t got = ::recvfrom(fd_, receive_buffer_.data(), receive_buffer_.size(), 0,
                                 reinterpret_cast<sockaddr*>(&from), &from_size);
  // EAGAIN: nothing more now. ECONNREFUSED: the pending error of an ICMP answer (read from the error
  // queue), which this read cleared; what follows it is still to read.
  if (got < 0) return errno == ECONNREFUSED;
  if (from.sin_family != AF_INET) return true;
  const size_t size = static_cast<size_t>(got);
  if (!limiter_.admit(address_key(from), size)) {
    ++rate_limited_;
    return true;
  }
  ByteSpan bytes(receive_buffer_.data(), size);
  auto envelope = wire::decode_datagram(bytes);
  if (!envelope) {
    ++rejected_;
    options_.log->debug("rpc") << "dropped a datagram from " << describe(from) << ": " << envelope.status().to_string();
    return true;
  }
  Bytes opened;
  ByteSpan body_bytes = envelope->sealed_or_body;
  if (envelope->sender) {
    const wire::SharedKey* shared = shared_key(*envelope->sender);
    auto body = shared ? wire::open_datagram(*envelope, *shared)
                       : Result<Bytes>(error(Code::kUnauthorized, "a sender key that is not a curve point"));
    if (!body) {
      ++rejected_;
      limiter_.charge(address_key(from), 1);
      options_.log->debug("rpc") << "dropped a datagram from " << describe(from) << ": " << body.status().to_string();
      return true;
    }
    opened = std::move(*body);
    body_bytes = opened;
  }
  auto body = wire::decode_datagram_body(body_bytes, options_.socket.limits.max_frames + 2);
  if (!body) {
    ++rejected_;
    options_.log->debug("rpc") << "dropped a datagram from " << describe(from) << ": " << body.status().to_string();
    return true;
  }
  if (body->kind == wire::DatagramKind::kRequest) {
    on_request(from, *envelope, std::move(*body), size);
  } else {
    on_answer(*envelope, std::move(*body), size);
  }
  return true;
}

void DatagramLoop::on_request(const sockaddr_in& from, const wire::DatagramEnvelope& envelope,
                              wire::DatagramBody&& body, size_t datagram_bytes) {
  if (!serve_ || (serves_sealed_only_ && !envelope.sender) || body.frames.empty()) {
    ++rejected_;  // as a CURVE server ignores a plaintext client: no answer
    return;
  }
  ReplyRoute route;
  route.address = from;
  route.sealed = envelope.sender.has_value();
  if (envelope.sender) route.requester = *envelope.sender;
  route.request_bytes = static_cast<std::uint32_t>(datagram_bytes);
  route.address_shown = body.cookie && cookie_valid(from, *body.cookie);

  auto parts = to_parts(body.frames);
  ByteSpan header_bytes = bytes_of(parts[0]);
  auto header = wire::decode_header(header_bytes, options_.socket.limits);
  if (!header) {
    ++rejected_;
    reject(route, wire::peek_request_id(header_bytes, options_.socket.limits).value_or(body.request_id),
           header.status());
    return;
  }
  // The datagram's request id is the one the requester matches replies by.
  const std::uint64_t request_id = body.request_id;
  if (header->envelope().request_id != request_id) {
    ++rejected_;
    reject(route, request_id, error(Code::kMalformed, "the datagram and its header name different requests"));
    return;
  }
  if (auto allowed = authenticate(options_.socket.access.get(), *header, parts, false); !allowed.is_ok()) {
    ++rejected_;
    if (allowed.code() == Code::kUnauthorized) limiter_.charge(address_key(from), kAuthFailureCost);
    reject(route, request_id, allowed);
    return;
  }
  const auto type = header->envelope().type;
  auto handler = handlers_.find(type);
  if (handler == handlers_.end()) {
    ++rejected_;
    reject(route, request_id,
           error(Code::kUnknownType, "this peer does not serve message type " +
                                         std::to_string(static_cast<unsigned>(type)) + " (" +
                                         std::string(wire::message_type_name(type)) + ") over datagrams"));
    return;
  }
  ++requests_;
  Incoming request{std::move(*header), {}};
  for (size_t i = 1; i < parts.size(); ++i) request.frames.push_back(std::move(parts[i]));
  try {
    handler->second(std::move(request), Replier(weak_from_this(), route.encode(), request_id));
  } catch (const std::exception& e) {
    options_.log->error("rpc") << "handler for " << wire::message_type_name(type) << " threw: " << e.what();
    reject(route, request_id, error(Code::kInternal, "the handler failed"));
  }
}

void DatagramLoop::on_answer(const wire::DatagramEnvelope& envelope, wire::DatagramBody&& body, size_t) {
  auto it = pending_.find(body.request_id);
  if (it == pending_.end()) return;  // late (answered already, or expired), or a guess
  Pending& pending = it->second;
  // Only the server we sealed for may answer, and a server we asked in plaintext answers in plaintext.
  const bool from_expected = pending.server_key ? envelope.sender == pending.server_key : !envelope.sender;
  if (!from_expected) {
    ++rejected_;
    return;
  }
  switch (body.kind) {
    case wire::DatagramKind::kRetry:
      if (!body.cookie) return;
      // A server whose cookies we cannot pass (our address seen differently each time, say): the stream.
      if (++pending.cookie_retries > kMaxCookieRetries) return stream(body.request_id);
      ++cookie_retries_;
      if (cookies_.size() >= options_.max_remembered_peers) cookies_.clear();
      cookies_[address_key(pending.address)] = *body.cookie;
      send_request(body.request_id, pending);
      return;
    case wire::DatagramKind::kUseStream: return stream(body.request_id);
    default: break;
  }
  auto parts = to_parts(body.frames);
  if (parts.empty()) return;
  auto header = wire::decode_header(bytes_of(parts[0]), options_.socket.limits);
  Status valid = !header ? header.status() : authenticate(options_.socket.access.get(), *header, parts, true);
  if (!valid.is_ok()) {
    options_.log->warn("rpc") << "refused a reply from " << pending.endpoint << ": " << valid.to_string();
    return complete(body.request_id, valid.with_context("reply from " + pending.endpoint));
  }
  const auto rtt = std::chrono::steady_clock::now() - pending.first_sent;
  if (rtt < pending.interval) smoothed_rtt_ = smoothed_rtt_ == Duration::zero() ? rtt : (7 * smoothed_rtt_ + rtt) / 8;
  Incoming reply{std::move(*header), {}};
  for (size_t i = 1; i < parts.size(); ++i) reply.frames.push_back(std::move(parts[i]));
  if (reply.type() == wire::MessageType::kErrorReply) {
    auto remote = wire::ErrorReply::decode(reply.header.body());
    return complete(body.request_id, remote ? remote->to_status() : remote.status());
  }
  complete(body.request_id, std::move(reply));
}

// ---------------------------------------------------------------------------------------------------------
// Our replies

void DatagramLoop::send_reply(const ReplyRoute& route, std::uint64_t request_id, Outgoing&& reply, bool seal_access) {
  wire::Envelope envelope;
  envelope.request_id = request_id;
  envelope.sender = options_.self;
  std::vector<zmq::message_t> parts;
  frame_message(envelope, std::move(reply), parts, seal_access ? options_.socket.access.get() : nullptr);
  wire::DatagramBody body{wire::DatagramKind::kReply, request_id, std::nullopt, to_bytes(parts)};
  const crypto::PublicKey* seal_for = route.sealed ? &route.requester : nullptr;
  const wire::SharedKey* shared = seal_for ? shared_key(*seal_for) : nullptr;
  if (seal_for && !shared) return;
  Bytes datagram = wire::encode_datagram(wire::encode_datagram_body(body), &own_key_, shared);
  if (datagram.size() > options_.max_datagram_bytes) {
    send_body(route.address, {wire::DatagramKind::kUseStream, request_id, std::nullopt, {}}, seal_for);
  } else if (datagram.size() > kAmplificationFactor * route.request_bytes && !route.address_shown) {
    send_body(route.address, {wire::DatagramKind::kRetry, request_id, cookie_for(route.address, cookie_epoch()), {}},
              seal_for);
  } else {
    send_to(route.address, datagram);
  }
}

void DatagramLoop::reject(const ReplyRoute& route, std::uint64_t request_id, const Status& status) {
  // Without the access control's frame: a refusal stays cheap under a flood, and its reason is for any
  // requester to read (as on the stream, server.cpp).
  send_reply(route, request_id, Outgoing::of(wire::ErrorReply{status.code(), status.message()}), false);
}

void DatagramLoop::send_body(const sockaddr_in& to, const wire::DatagramBody& body, const crypto::PublicKey* seal_for) {
  const wire::SharedKey* shared = seal_for ? shared_key(*seal_for) : nullptr;
  if (seal_for && !shared) return;
  send_to(to, wire::encode_datagram(wire::encode_datagram_body(body), &own_key_, shared));
}

bool DatagramLoop::send_to(const sockaddr_in& to, const Bytes& datagram) {
  auto send = [&] {
    return ::sendto(fd_, datagram.data(), datagram.size(), 0, reinterpret_cast<const sockaddr*>(&to), sizeof(to));
  };
  ssize_t sent = send();
  // With IP_RECVERR, an ICMP error an earlier datagram drew (to any address) also fails the socket's next
  // send once: that error is read from the error queue, and this datagram goes out now.
  if (sent < 0 && errno == ECONNREFUSED) sent = send();
  if (sent < 0) {
    // A full socket buffer or an unreachable host: as a datagram lost on the way (the retransmission and
    // the deadline deal with it).
    options_.log->debug("rpc") << "a datagram to " << describe(to) << " was not sent: " << std::strerror(errno);
    return false;
  }
  return true;
}

// ---------------------------------------------------------------------------------------------------------
// Keys and cookies

const wire::SharedKey* DatagramLoop::shared_key(const crypto::PublicKey& peer) {
  auto it = shared_keys_.find(peer);
  if (it != shared_keys_.end()) return &it->second;
  auto shared = wire::datagram_shared_key(peer, own_curve_.secret_key);
  if (!shared) return nullptr;
  if (shared_keys_.size() >= options_.max_remembered_peers) shared_keys_.clear();
  return &shared_keys_.emplace(peer, *shared).first->second;
}

std::int64_t DatagramLoop::cookie_epoch() const {
  const auto lifetime = std::max<std::int64_t>(1, to_ms(options_.cookie_lifetime));
  return to_ms(std::chrono::steady_clock::now().time_since_epoch()) / lifetime;
}

wire::Cookie DatagramLoop::cookie_for(const sockaddr_in& address, std::int64_t epoch) const {
  const std::string input = address_key(address) + std::string(reinterpret_cast<const char*>(&epoch), sizeof(epoch));
  wire::Cookie cookie{};
  crypto_generichash(cookie.data(), cookie.size(), reinterpret_cast<const std::uint8_t*>(input.data()), input.size(),
                     cookie_secret_.data(), cookie_secret_.size());
  return cookie;
}

bool DatagramLoop::cookie_valid(const sockaddr_in& address, const wire::Cookie& cookie) const {
  const std::int64_t epoch = cookie_epoch();
  for (std::int64_t e : {epoch, epoch - 1}) {
    const wire::Cookie expected = cookie_for(address, e);
    if (sodium_memcmp(expected.data(), cookie.data(), cookie.size()) == 0) return true;
  }
  return false;
}

// ---------------------------------------------------------------------------------------------------------
// DatagramRpc

DatagramRpc::DatagramRpc(DatagramOptions options, Caller& stream) : options_(std::move(options)), stream_(stream) {
  resolve_process_defaults(options_.socket);
  crypto::ensure_sodium_initialized();
  handle(wire::Ping::kType, ping_handler(options_.clock));
}

DatagramRpc::~DatagramRpc() { stop(); }

void DatagramRpc::handle(wire::MessageType type, Handler handler) { handlers_[type] = std::move(handler); }

Status DatagramRpc::start(const std::string& host, std::uint16_t port, bool serve) {
  if (loop_ || stopped_.load()) return error(Code::kInvalidArgument, "the datagram transport was started already");
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  const std::string where = "udp://" + host + ":" + std::to_string(port);
  if (inet_pton(AF_INET, host.c_str(), &address.sin_addr) != 1) {
    return error(Code::kInvalidArgument, "cannot listen for datagrams on " + where + ": not an IPv4 address");
  }
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return error(Code::kUnavailable, "cannot open a UDP socket: " + std::string(std::strerror(errno)));
  // Bursts of answers (a lookup asks several peers at once) should wait in the kernel, not be dropped.
  int buffer = kReceiveBufferBytes;
  ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buffer, sizeof(buffer));
  // Report ICMP errors (an unconnected UDP socket hears none otherwise): a "port unreachable" answer tells
  // a node that takes no datagrams, which we then call over the stream (DatagramLoop::read_errors).
  int report_errors = 1;
  ::setsockopt(fd, SOL_IP, IP_RECVERR, &report_errors, sizeof(report_errors));
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
    const std::string why = std::strerror(errno);
    ::close(fd);
    return error(Code::kUnavailable, "cannot listen for datagrams on " + where + ": " + why);
  }
  socklen_t size = sizeof(address);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size);
  port_ = ntohs(address.sin_port);
  try {
    loop_ = std::make_shared<DatagramLoop>(fd, serve, options_, stream_, handlers_);
  } catch (const std::system_error& e) {
    ::close(fd);
    return error(Code::kUnavailable, "cannot start the datagram transport: " + std::string(e.what()));
  }
  thread_ = std::thread([loop = loop_] { loop->run(); });
  return Status::ok();
}

void DatagramRpc::stop() {
  {
    // Calls made from here on go over the stream; those made before are in the loop's mailbox, which it
    // drains (cancelling them) before it ends.
    std::lock_guard lock(submit_mutex_);
    stopped_.store(true);
  }
  if (!loop_) return;
  loop_->request_stop();
  if (thread_.joinable()) thread_.join();
  // Closes the socket now, so that the port is free again and nothing more is read from it.
  std::lock_guard lock(submit_mutex_);
  final_stats_ = loop_->stats();
  loop_.reset();
}

void DatagramRpc::call(const std::string& endpoint, Outgoing request, Deadline deadline, Callback done) {
  {
    std::lock_guard lock(submit_mutex_);
    if (loop_ && !stopped_.load()) return loop_->submit(std::move(done), endpoint, std::move(request), deadline);
  }
  stream_.call(endpoint, std::move(request), deadline, std::move(done));
}

void DatagramRpc::cancel_pending() {
  {
    std::lock_guard lock(submit_mutex_);
    if (loop_ && !stopped_.load()) loop_->request_cancel();
  }
  stream_.cancel_pending();
}

DatagramStats DatagramRpc::stats() const {
  std::lock_guard lock(submit_mutex_);
  return loop_ ? loop_->stats() : final_stats_;
}

}  // namespace dedloc::net
