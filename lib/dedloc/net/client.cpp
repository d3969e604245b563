#include "dedloc/net/client.hpp"

#include <atomic>
#include <cstring>
#include <map>
#include <optional>
#include <queue>
#include <unordered_map>

#include "dedloc/net/mailbox.hpp"
#include "dedloc/net/peer_address.hpp"
#include "dedloc/wire/messages.hpp"
#include "dedloc/wire/relay_frames.hpp"

namespace dedloc::net {

class ClientLoop {
 public:
  struct Request {
    std::string endpoint;
    Outgoing message;
    Deadline deadline;
    Client::Callback done;
    bool disconnect = false;  // not a request: close the connection to `endpoint` (Client::disconnect)
  };

  ClientLoop(zmq::context_t& context, ClientOptions options) : context_(context), options_(std::move(options)) {
    resolve_process_defaults(options_.socket);
  }

  // From the loop thread itself (a completion callback that sends the next request), the request waits in
  // a plain queue that the loop takes before it next polls: no doorbell to ring and no extra trip through
  // poll. Not started at once, so that a request failing at once does not complete inside the callback
  // that made it (which may hold its own locks).
  void submit(Request request) {
    if (std::this_thread::get_id() == thread_id_.load(std::memory_order_relaxed)) {
      from_loop_.push_back(std::move(request));
    } else {
      mailbox_.push(std::move(request));
    }
  }
  void request_stop() {
    stopping_.store(true);
    mailbox_.push({});
  }
  void request_cancel() {
    cancelling_.store(true);
    mailbox_.push({});
  }
  void run();
  ClientStats stats() const {
    return {open_connections_.load(), connections_opened_.load(), refused_attempts_.load()};
  }

 private:
  struct Connection {
    Connection(zmq::socket_t dealer, Bytes route, std::optional<zmq::socket_t> events)
        : socket(std::move(dealer)), relay_route(std::move(route)), monitor(std::move(events)) {}
    Connection(Connection&&) = default;
    Connection& operator=(Connection&&) = delete;
    // A monitored socket stops its monitor before it closes: ZeroMQ sends monitor events blocking, from its
    // I/O thread, and a connection attempt cut short by the close reports one; sent to a monitor whose
    // reader is gone, it would hang that thread, and every socket of the process with it.
    ~Connection() {
      if (monitor && socket) zmq_socket_monitor(socket.handle(), nullptr, 0);
    }

    zmq::socket_t socket;
    size_t in_flight = 0;
    TimePoint last_used;
    Bytes relay_route;  // for a relay:// endpoint: the routing frame that goes before every request
    // ClientOptions::fail_when_refused: the socket's connection events, and whether the latest says that a
    // connection attempt failed (none succeeded since).
    std::optional<zmq::socket_t> monitor;
    bool refused = false;
  };
  struct Pending {
    Client::Callback done;
    std::string endpoint;
    TimePoint deadline;
  };
  using DeadlineEntry = std::pair<TimePoint, std::uint64_t>;

  void start_request(Request&& request);
  void start_requests_from_loop();
  // A request or a disconnect, taken from the mailbox or from_loop_.
  void take(Request&& request);
  void disconnect_now(const std::string& endpoint);
  // Fails the calls in flight to `endpoint` with `why` and closes our connection to it (if any).
  void close_connection(const std::string& endpoint, const Status& why);
  void receive_from(Connection& connection, const std::string& endpoint);
  void complete(std::uint64_t request_id, Result<Incoming>&& outcome);
  void expire_deadlines();
  void close_idle_connections();
  // Below max_connections, room for one more: closes least recently used idle connections.
  void make_room_for_connection();
  void connections_changed() { open_connections_.store(connections_.size(), std::memory_order_relaxed); }
  Connection* connection_for(const std::string& endpoint, Status& failure);
  // ClientOptions::fail_when_refused: watches `socket`'s connection attempts; nullopt when it cannot.
  std::optional<zmq::socket_t> monitor(zmq::socket_t& socket);
  // Reads the connection's monitor events; whether its latest connection attempt was refused.
  bool read_refusals(Connection& connection);
  // A connection found refused: its calls fail now (kUnavailable), and the next call connects anew.
  void drop_refused(const std::string& endpoint);

  zmq::context_t& context_;
  ClientOptions options_;
  Mailbox<Request> mailbox_;
  std::atomic<std::thread::id> thread_id_{};  // the loop's, once run() started
  std::vector<Request> from_loop_;     // submitted on the loop thread; loop thread only
  std::atomic<bool> stopping_{false};
  std::atomic<bool> cancelling_{false};  // cancel_pending() asked: fail what is in flight
  std::map<std::string, Connection> connections_;
  std::unordered_map<std::uint64_t, Pending> pending_;
  std::priority_queue<DeadlineEntry, std::vector<DeadlineEntry>, std::greater<>> deadlines_;
  std::uint64_t next_request_id_ = 1;
  std::atomic<size_t> open_connections_{0};
  std::atomic<std::uint64_t> connections_opened_{0};
  std::atomic<std::uint64_t> refused_attempts_{0};
  std::uint64_t monitors_opened_ = 0;  // names each monitor's inproc address
};

std::optional<zmq::socket_t> ClientLoop::monitor(zmq::socket_t& socket) {
  const std::string address = "inproc://dedloc-client-monitor-" +
                              std::to_string(reinterpret_cast<std::uintptr_t>(this)) + "-" +
                              std::to_string(monitors_opened_++);
  // CLOSED is what a failed connection attempt reports (refused, unreachable); CONNECTED, one that worked.
  if (zmq_socket_monitor(socket.handle(), address.c_str(), ZMQ_EVENT_CONNECTED | ZMQ_EVENT_CLOSED) != 0) {
    return std::nullopt;
  }
  try {
    zmq::socket_t events(context_, zmq::socket_type::pair);
    events.set(zmq::sockopt::linger, 0);
    events.connect(address);
    return events;
  } catch (const zmq::error_t&) {
    // Out of sockets: this connection goes unwatched (its calls time out as before), and its monitor stops,
    // which would otherwise block ZeroMQ's I/O thread on its first event, with nobody to read it.
    zmq_socket_monitor(socket.handle(), nullptr, 0);
    return std::nullopt;
  }
}

bool ClientLoop::read_refusals(Connection& connection) {
  if (!connection.monitor) return false;
  while (true) {
    // An event is two frames: 6 bytes (the event as uint16, a value as uint32), then the endpoint.
    zmq::message_t event;
    if (!connection.monitor->recv(event, zmq::recv_flags::dontwait)) break;
    while (event.more()) {
      zmq::message_t rest;
      if (!connection.monitor->recv(rest, zmq::recv_flags::dontwait)) break;
      if (!rest.more()) break;
    }
    if (event.size() < sizeof(std::uint16_t)) continue;
    std::uint16_t id = 0;
    std::memcpy(&id, event.data(), sizeof id);
    if (id == ZMQ_EVENT_CLOSED) {
      connection.refused = true;
      refused_attempts_.fetch_add(1, std::memory_order_relaxed);
    }
    if (id == ZMQ_EVENT_CONNECTED) connection.refused = false;
  }
  return connection.refused;
}

void ClientLoop::drop_refused(const std::string& endpoint) {
  close_connection(endpoint, error(Code::kUnavailable, "nobody listens at " + endpoint + ": the connection was refused"));
}

ClientLoop::Connection* ClientLoop::connection_for(const std::string& endpoint, Status& failure) {
  auto it = connections_.find(endpoint);
  if (it != connections_.end()) {
    if (!read_refusals(it->second)) return &it->second;
    // Refused when last tried (ZeroMQ is still retrying it): a connection of its own gives this call a
    // fresh attempt, judged by its own events.
    drop_refused(endpoint);
  }
  auto relayed = parse_relay_endpoint(endpoint);
  if (!relayed) {
    failure = relayed.status();
    return nullptr;
  }
  make_room_for_connection();
  zmq::socket_t socket;
  try {
    socket = zmq::socket_t(context_, zmq::socket_type::dealer);
    apply_socket_options(socket, options_.socket);
  } catch (const zmq::error_t& e) {  // e.g. EMFILE: out of sockets
    failure = error(Code::kUnavailable, "cannot open a socket for '" + endpoint + "': " + e.what());
    return nullptr;
  }
  // A relayed peer is dialled at its relay; each request then names it in a routing frame.
  Bytes route;
  if (*relayed) route = wire::encode_relay_frame(wire::RelayTag::kForward, (*relayed)->target.span());
  // Watched from before the first attempt, so that every event is this connection's.
  std::optional<zmq::socket_t> events;
  if (options_.fail_when_refused) {
    events = monitor(socket);
    if (events && options_.refused_retry_max > Duration::zero()) {
      auto cap = std::chrono::duration_cast<std::chrono::milliseconds>(options_.refused_retry_max);
      socket.set(zmq::sockopt::reconnect_ivl_max, static_cast<int>(cap.count()));
    }
  }
  failure = connect_to(socket, *relayed ? (*relayed)->relay_endpoint : endpoint, options_.socket.transport.get());
  if (!failure.is_ok()) return nullptr;
  auto inserted =
      connections_.emplace(endpoint, Connection(std::move(socket), std::move(route), std::move(events))).first;
  connections_opened_.fetch_add(1, std::memory_order_relaxed);
  connections_changed();
  return &inserted->second;
}

void ClientLoop::start_request(Request&& request) {
  Status failure;
  Connection* connection = connection_for(request.endpoint, failure);
  if (!connection) {
    request.done(std::move(failure));
    return;
  }
  std::uint64_t rid = next_request_id_++;
  wire::Envelope env;
  env.request_id = rid;
  env.sender = options_.self;
  std::vector<zmq::message_t> parts;
  if (!connection->relay_route.empty()) parts.emplace_back(connection->relay_route.data(), connection->relay_route.size());
  frame_message(env, std::move(request.message), parts, options_.socket.access.get());
  for (size_t i = 0; i < parts.size(); ++i) {
    auto flags = zmq::send_flags::dontwait;
    if (i + 1 < parts.size()) flags = flags | zmq::send_flags::sndmore;
    bool sent = false;
    try {
      sent = connection->socket.send(parts[i], flags).has_value();
    } catch (const zmq::error_t& e) {
      request.done(error(Code::kUnavailable, "cannot send to " + request.endpoint + ": " + e.what()));
      return;
    }
    if (!sent) {
      // Only the first frame can be refused (multipart messages are queued atomically): the queue to this
      // peer is full, which means it has stopped reading.
      request.done(error(Code::kUnavailable, "the send queue to " + request.endpoint + " is full"));
      return;
    }
  }
  connection->in_flight++;
  connection->last_used = std::chrono::steady_clock::now();
  pending_.emplace(rid, Pending{std::move(request.done), request.endpoint, request.deadline.at});
  deadlines_.emplace(request.deadline.at, rid);
}

void ClientLoop::start_requests_from_loop() {
  // A request that fails at once completes here, and its callback may submit again: until none is left.
  while (!from_loop_.empty()) {
    std::vector<Request> batch;
    batch.swap(from_loop_);
    for (auto& request : batch) take(std::move(request));
  }
}

void ClientLoop::take(Request&& request) {
  if (request.disconnect) {
    disconnect_now(request.endpoint);
  } else if (request.done) {
    start_request(std::move(request));
  }
}

void ClientLoop::disconnect_now(const std::string& endpoint) {
  close_connection(endpoint, error(Code::kCancelled, "the connection to " + endpoint + " was closed"));
}

void ClientLoop::close_connection(const std::string& endpoint, const Status& why) {
  std::vector<std::uint64_t> in_flight;
  for (const auto& [rid, pending] : pending_) {
    if (pending.endpoint == endpoint) in_flight.push_back(rid);
  }
  for (std::uint64_t rid : in_flight) complete(rid, why);
  // Linger is 0: closing drops what is queued at once, and ZeroMQ gives back its zero-copy frames.
  connections_.erase(endpoint);
  connections_changed();
}

void ClientLoop::complete(std::uint64_t request_id, Result<Incoming>&& outcome) {
  auto it = pending_.find(request_id);
  if (it == pending_.end()) return;  // a late reply to a call that already timed out
  Pending pending = std::move(it->second);
  pending_.erase(it);
  auto conn = connections_.find(pending.endpoint);
  if (conn != connections_.end() && conn->second.in_flight > 0) conn->second.in_flight--;
  try {
    pending.done(std::move(outcome));
  } catch (const std::exception& e) {
    options_.log->error("rpc") << "a completion callback threw: " << e.what();
  }
}

void ClientLoop::receive_from(Connection& connection, const std::string& endpoint) {
  for (int budget = 0; budget < 256; ++budget) {
    std::vector<zmq::message_t> parts;
    const size_t max_parts = 2 + options_.socket.limits.max_frames;  // header, payload, authentication
    bool too_many = false;
    while (true) {
      zmq::message_t part;
      if (!connection.socket.recv(part, zmq::recv_flags::dontwait)) break;
      bool more = part.more();
      if (parts.size() < max_parts) parts.push_back(std::move(part)); else too_many = true;
      if (!more) break;
    }
    if (parts.empty()) return;
    connection.last_used = std::chrono::steady_clock::now();
    ByteSpan header_bytes{parts[0].data<std::uint8_t>(), parts[0].size()};
    auto header = wire::decode_header(header_bytes, options_.socket.limits);
    Status why = !header ? header.status()
                 : too_many ? error(Code::kTooLarge, "reply with too many frames")
                            : authenticate(options_.socket.access.get(), *header, parts, true);
    if (!why.is_ok()) {
      // A reply we cannot read or may not accept: fail the call it names, if we can tell which.
      auto rid = header ? std::optional(header->envelope().request_id)
                        : wire::peek_request_id(header_bytes, options_.socket.limits);
      options_.log->warn("rpc") << "refused a reply from " << endpoint << ": " << why.to_string();
      if (rid) complete(*rid, why.with_context("reply from " + endpoint));
      continue;
    }
    std::uint64_t rid = header->envelope().request_id;
    if (header->envelope().type == wire::MessageType::kErrorReply) {
      auto remote = wire::ErrorReply::decode(header->body());
      complete(rid, remote ? remote->to_status() : remote.status());
      continue;
    }
    Incoming reply{std::move(*header), {}};
    for (size_t i = 1; i < parts.size(); ++i) reply.frames.push_back(std::move(parts[i]));
    complete(rid, std::move(reply));
  }
}

void ClientLoop::expire_deadlines() {
  auto now = std::chrono::steady_clock::now();
  while (!deadlines_.empty() && deadlines_.top().first <= now) {
    auto [at, rid] = deadlines_.top();
    deadlines_.pop();
    auto it = pending_.find(rid);
    if (it == pending_.end()) continue;
    std::string endpoint = it->second.endpoint;
    complete(rid, error(Code::kTimeout, "no reply from " + endpoint + " before the deadline"));
  }
}

void ClientLoop::close_idle_connections() {
  auto now = std::chrono::steady_clock::now();
  for (auto it = connections_.begin(); it != connections_.end();) {
    if (it->second.in_flight == 0 && now - it->second.last_used > options_.idle_close) {
      it = connections_.erase(it);  // linger is bounded: closing never waits on the peer
    } else {
      // An idle connection to a dead peer gains events every reconnection (ZeroMQ retries every 100 ms):
      // read them, so that the monitor's queue never fills (ZeroMQ would block its I/O thread on it).
      read_refusals(it->second);
      ++it;
    }
  }
  connections_changed();
}

void ClientLoop::make_room_for_connection() {
  if (options_.max_connections == 0) return;
  while (connections_.size() >= options_.max_connections) {
    // A linear scan: the bound is small (it is there to be small), and this runs once per new connection.
    auto oldest = connections_.end();
    for (auto it = connections_.begin(); it != connections_.end(); ++it) {
      if (it->second.in_flight == 0 && (oldest == connections_.end() || it->second.last_used < oldest->second.last_used)) {
        oldest = it;
      }
    }
    if (oldest == connections_.end()) return;  // every one awaits a reply: exceed the bound for now
    connections_.erase(oldest);  // linger is bounded: closing never waits on the peer
  }
  connections_changed();
}

void ClientLoop::run() {
  thread_id_.store(std::this_thread::get_id(), std::memory_order_relaxed);
  std::vector<zmq_pollitem_t> items;
  // Per polled item after the mailbox: its connection, and whether it is that connection's monitor.
  struct Polled {
    const std::string* endpoint;
    Connection* connection;
    bool monitor;
  };
  std::vector<Polled> order;
  auto last_idle_check = std::chrono::steady_clock::now();
  while (!stopping_.load()) {
    items.clear();
    order.clear();
    items.push_back({nullptr, mailbox_.fd(), ZMQ_POLLIN, 0});
    // Only connections awaiting a reply are polled: zmq_poll costs a few syscalls per socket, and a node
    // keeps a connection to every peer it talked to lately. (A late reply to an expired call waits in its
    // idle socket and is drained, and dropped, when the connection is next used.)
    for (auto& [endpoint, connection] : connections_) {
      if (connection.in_flight == 0) continue;
      items.push_back({connection.socket.handle(), 0, ZMQ_POLLIN, 0});
      order.push_back({&endpoint, &connection, false});
      if (connection.monitor) {
        items.push_back({connection.monitor->handle(), 0, ZMQ_POLLIN, 0});
        order.push_back({&endpoint, &connection, true});
      }
    }
    // Sleep until the next deadline, at most a second (idle connections are checked that often).
    auto now = std::chrono::steady_clock::now();
    auto wake = now + std::chrono::seconds(1);
    if (!deadlines_.empty()) wake = std::min(wake, deadlines_.top().first);
    auto timeout = std::chrono::ceil<std::chrono::milliseconds>(std::max(wake - now, Duration::zero()));
    try {
      zmq::poll(items.data(), items.size(), timeout);
    } catch (const zmq::error_t& e) {
      if (e.num() != EINTR) options_.log->error("rpc") << "poll failed: " << e.what();
      continue;
    }
    std::vector<std::string> refused;
    for (size_t i = 1; i < items.size(); ++i) {
      if (!(items[i].revents & ZMQ_POLLIN)) continue;
      const Polled& polled = order[i - 1];
      if (!polled.monitor) {
        receive_from(*polled.connection, *polled.endpoint);
      } else if (read_refusals(*polled.connection)) {
        refused.push_back(*polled.endpoint);  // dropped below: `order` points into connections_
      }
    }
    for (const std::string& endpoint : refused) drop_refused(endpoint);
    // What those completions sent goes out before the mailbox is read: a disconnect another thread queued
    // after such a send (Client::disconnect) then drops it too.
    start_requests_from_loop();
    if (items[0].revents & ZMQ_POLLIN) {
      for (auto& request : mailbox_.drain()) take(std::move(request));
    }
    if (cancelling_.exchange(false)) {
      while (!pending_.empty()) complete(pending_.begin()->first, error(Code::kCancelled, "the call was cancelled"));
    }
    expire_deadlines();
    start_requests_from_loop();
    if (std::chrono::steady_clock::now() - last_idle_check > std::chrono::seconds(1)) {
      close_idle_connections();
      last_idle_check = std::chrono::steady_clock::now();
    }
  }
  // Shutting down: everyone still waiting learns it now (a callback that submits again adds to from_loop_).
  for (auto& request : mailbox_.drain()) {
    if (request.done) request.done(error(Code::kCancelled, "the client is shutting down"));
  }
  auto cancel_from_loop = [&] {
    while (!from_loop_.empty()) {
      std::vector<Request> batch;
      batch.swap(from_loop_);
      for (auto& request : batch) {
        if (request.done) request.done(error(Code::kCancelled, "the client is shutting down"));
      }
    }
  };
  cancel_from_loop();
  while (!pending_.empty()) {
    complete(pending_.begin()->first, error(Code::kCancelled, "the client is shutting down"));
  }
  cancel_from_loop();
  connections_.clear();
  connections_changed();
}

Client::Client(zmq::context_t& context, ClientOptions options)
    : loop_(std::make_shared<ClientLoop>(context, std::move(options))) {
  thread_ = std::thread([loop = loop_] { loop->run(); });
}

Client::~Client() {
  loop_->request_stop();
  if (thread_.joinable()) thread_.join();
}

void Client::call(const std::string& endpoint, Outgoing request, Deadline deadline, Callback done) {
  loop_->submit({endpoint, std::move(request), deadline, std::move(done)});
}

void Client::cancel_pending() { loop_->request_cancel(); }

ClientStats Client::stats() const { return loop_->stats(); }

void Client::disconnect(const std::string& endpoint) {
  ClientLoop::Request request;
  request.endpoint = endpoint;
  request.disconnect = true;
  loop_->submit(std::move(request));
}

}  // namespace dedloc::net
