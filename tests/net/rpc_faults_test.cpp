#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <future>
#include <optional>
#include <random>
#include <thread>

#include "dedloc/net/client.hpp"
#include "dedloc/net/server.hpp"
#include "dedloc/wire/messages.hpp"

using namespace dedloc;
using namespace dedloc::net;
using namespace std::chrono_literals;

namespace {

// An endpoint where nothing listens: bind port 0, read the port, close.
// A port where nobody listens (connections are refused), held for the test: a socket bound to it without
// listen(). A port merely closed again could be taken by a server of another test running beside this
// one, which would answer the ping.
struct DeadPort {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  std::string endpoint;
  DeadPort() {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0);
    socklen_t length = sizeof(address);
    REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0);
    endpoint = "tcp://127.0.0.1:" + std::to_string(ntohs(address.sin_port));
  }
  ~DeadPort() { ::close(fd); }
  DeadPort(const DeadPort&) = delete;
  DeadPort& operator=(const DeadPort&) = delete;
};

// Binds `fd` to a free port of 127.0.0.1 and listens with `backlog`; `address` gets the port.
bool listen_on_loopback(int fd, int backlog, sockaddr_in& address) {
  address = {};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  return ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 && ::listen(fd, backlog) == 0 &&
         ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0;
}

// A TCP port that accepts connections (the kernel completes them) but never speaks ZeroMQ: what is sent to
// it stays queued in ZeroMQ, waiting for a handshake that never comes. Unlike a closed port (dead_endpoint),
// nobody else can take the port while the test runs, so nothing queued there is ever delivered.
struct MuteListener {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  std::string endpoint;
  MuteListener() {
    sockaddr_in address{};
    if (listen_on_loopback(fd, 16, address)) endpoint = "tcp://127.0.0.1:" + std::to_string(ntohs(address.sin_port));
  }
  ~MuteListener() { ::close(fd); }
};

// A TCP port whose accept queue is full: the kernel answers no further SYN, so a connection to it stays in
// progress (its SYN retried) for seconds, as one to a distant or overloaded peer does.
struct FullBacklog {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  std::vector<int> fillers;
  std::string endpoint;
  FullBacklog() {
    sockaddr_in address{};
    if (!listen_on_loopback(fd, 0, address)) return;
    for (int i = 0; i < 4; ++i) {  // connections nobody accepts fill the queue
      const int filler = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
      (void)::connect(filler, reinterpret_cast<sockaddr*>(&address), sizeof address);
      fillers.push_back(filler);
    }
    endpoint = "tcp://127.0.0.1:" + std::to_string(ntohs(address.sin_port));
  }
  ~FullBacklog() {
    for (const int filler : fillers) ::close(filler);
    ::close(fd);
  }
};

// A raw DEALER, to send bytes no dedloc client would.
struct RawPeer {
  zmq::socket_t socket;
  RawPeer(zmq::context_t& context, const std::string& endpoint) : socket(context, zmq::socket_type::dealer) {
    socket.set(zmq::sockopt::linger, 0);
    socket.set(zmq::sockopt::rcvtimeo, 5000);
    socket.connect(endpoint);
  }
  void send(const std::vector<Bytes>& frames) {
    for (size_t i = 0; i < frames.size(); ++i) {
      zmq::message_t m(frames[i].data(), frames[i].size());
      socket.send(m, i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
    }
  }
  // The ErrorReply the server sent back (fails the test when none comes within 5 s).
  wire::ErrorReply receive_error() {
    zmq::message_t header;
    auto got = socket.recv(header);
    REQUIRE(got.has_value());
    while (header.more()) {
      zmq::message_t rest;
      (void)socket.recv(rest);
    }
    auto decoded = wire::decode_header({header.data<std::uint8_t>(), header.size()}, wire::Limits{});
    REQUIRE(decoded.is_ok());
    REQUIRE(decoded->envelope().type == wire::MessageType::kErrorReply);
    auto error_reply = wire::ErrorReply::decode(decoded->body());
    REQUIRE(error_reply.is_ok());
    return *error_reply;
  }
};

Bytes valid_ping_header(std::uint32_t frames = 0, std::uint64_t version = wire::kProtocolVersion) {
  wire::MapWriter body;
  wire::Ping{1.0}.encode(body);
  wire::MapWriter h;
  h.put("magic", wire::kMagic).put("ver", version).put("type", std::uint64_t{2}).put("rid", std::uint64_t{42})
      .put("nf", static_cast<std::uint64_t>(frames)).put_map("body", body);
  return h.to_bytes();
}

void expect_ping_works(Client& client, const std::string& endpoint) {
  auto pong = client.ask<wire::Pong>(endpoint, wire::Ping{9}, 5s);
  REQUIRE(pong.is_ok());
  CHECK(pong->ping_sent_unix_time == 9);
}

// A client's options as the averager's: a call whose connection is refused fails at once.
ClientOptions failing_when_refused() {
  ClientOptions options;
  options.fail_when_refused = true;
  return options;
}

double elapsed_ms(TimePoint start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

TEST_CASE("A request to a dead peer times out within its deadline (+10%)", "[net][rpc][faults]") {
  zmq::context_t context;
  Client client(context, {});
  DeadPort dead;
  const std::string& endpoint = dead.endpoint;
  auto start = std::chrono::steady_clock::now();
  auto reply = client.call(endpoint, Outgoing::of(wire::Ping{1}), Deadline::after(500ms)).wait();
  double ms = elapsed_ms(start);
  REQUIRE_FALSE(reply.is_ok());
  CHECK(reply.status().code() == Code::kTimeout);
  CHECK(reply.status().message().find(endpoint) != std::string::npos);
  CHECK(ms >= 500);
  CHECK(ms <= 550);
}

TEST_CASE("A request to a silent peer times out within its deadline (+10%)", "[net][rpc][faults]") {
  zmq::context_t context;
  Server silent(context, {});
  silent.handle(wire::MessageType::kPing, [](Incoming&&, Replier) { /* never answers */ });
  REQUIRE(silent.start().is_ok());
  Client client(context, {});
  // Calls with different deadlines, in flight together: each fails at its own.
  struct Outcome {
    std::promise<std::pair<Status, double>> done;
  };
  std::vector<std::pair<int, std::shared_ptr<Outcome>>> calls;
  auto start = std::chrono::steady_clock::now();
  for (int ms : {300, 200, 400}) {
    auto outcome = std::make_shared<Outcome>();
    client.call(silent.endpoint(), Outgoing::of(wire::Ping{1}), Deadline::after(std::chrono::milliseconds(ms)),
                [outcome, start](Result<Incoming>&& reply) {
                  outcome->done.set_value({reply.status(), elapsed_ms(start)});
                });
    calls.emplace_back(ms, outcome);
  }
  for (auto& [ms, outcome] : calls) {
    auto [status, took] = outcome->done.get_future().get();
    INFO("deadline " << ms << " ms, failed after " << took << " ms");
    CHECK(status.code() == Code::kTimeout);
    CHECK(took >= ms);
    CHECK(took <= ms * 1.1);
  }
}

TEST_CASE("fail_when_refused: a call to a port nobody listens at fails at once, not at its deadline",
          "[net][rpc][faults]") {
  zmq::context_t context;
  Client client(context, failing_when_refused());
  DeadPort dead;
  for (int attempt = 0; attempt < 2; ++attempt) {  // the second on the connection the first left refused
    auto start = std::chrono::steady_clock::now();
    auto reply = client.call(dead.endpoint, Outgoing::of(wire::Ping{1}), Deadline::after(10s)).wait();
    INFO("attempt " << attempt << ": failed after " << elapsed_ms(start) << " ms");
    REQUIRE_FALSE(reply.is_ok());
    CHECK(reply.status().code() == Code::kUnavailable);
    CHECK(reply.status().message().find(dead.endpoint) != std::string::npos);
    CHECK(elapsed_ms(start) < 2000);
  }
  // A live peer is reached as ever.
  Server answering(context, {});
  REQUIRE(answering.start().is_ok());
  expect_ping_works(client, answering.endpoint());
}

TEST_CASE("fail_when_refused: calls to a peer whose process is gone fail at once, and it is reached again once "
          "back", "[net][rpc][faults]") {
  zmq::context_t context;
  Client client(context, failing_when_refused());
  auto silent = std::make_unique<Server>(context, ServerOptions{});
  silent->handle(wire::MessageType::kPing, [](Incoming&&, Replier) { /* holds every call */ });
  REQUIRE(silent->start().is_ok());
  const std::string endpoint = silent->endpoint();
  auto held = client.call(endpoint, Outgoing::of(wire::Ping{1}), Deadline::after(30s));
  std::this_thread::sleep_for(200ms);  // connected and sent
  REQUIRE_FALSE(held.ready());

  auto start = std::chrono::steady_clock::now();
  silent.reset();  // its port closes, as a SIGKILLed process's does: ZeroMQ's reconnection is refused
  auto reply = held.wait();
  INFO("failed after " << elapsed_ms(start) << " ms");
  REQUIRE_FALSE(reply.is_ok());
  CHECK(reply.status().code() == Code::kUnavailable);
  CHECK(elapsed_ms(start) < 2000);

  // Back on the same port (a restarted peer): the next call connects anew.
  Server back(context, ServerOptions{endpoint});
  REQUIRE(back.start().is_ok());
  expect_ping_works(client, endpoint);
}

TEST_CASE("fail_when_refused: an idle connection to a peer gone retries with backoff, and the peer back is "
          "reached at once", "[net][rpc][faults]") {
  zmq::context_t context;
  Client backing_off(context, failing_when_refused());
  ClientOptions fixed_options = failing_when_refused();
  fixed_options.refused_retry_max = Duration::zero();  // ZeroMQ's fixed 100 ms
  Client fixed(context, fixed_options);
  auto gone = std::make_unique<Server>(context, ServerOptions{});
  REQUIRE(gone->start().is_ok());
  const std::string endpoint = gone->endpoint();
  expect_ping_works(backing_off, endpoint);
  expect_ping_works(fixed, endpoint);

  gone.reset();  // its port refuses now; both connections stay open, idle, and ZeroMQ retries them
  std::this_thread::sleep_for(4500ms);  // each client reads its connections' events every second
  auto backed_off = backing_off.stats().refused_attempts;
  auto retried = fixed.stats().refused_attempts;
  INFO("refused attempts in 4.5 s: " << backed_off << " backing off, " << retried << " every 100 ms");
  CHECK(backed_off >= 1);
  CHECK(backed_off <= 8);  // 0.1, 0.2, 0.4, 0.8, 1.6 s apart (plus up to 0.1 s each)
  CHECK(retried >= 12);  // 26 on a quiet machine

  // Back on the same port (a restarted peer) while the backoff waits seconds: a call does not wait for it.
  Server back(context, ServerOptions{endpoint});
  REQUIRE(back.start().is_ok());
  auto start = std::chrono::steady_clock::now();
  expect_ping_works(backing_off, endpoint);
  CHECK(elapsed_ms(start) < 1000);
}

TEST_CASE("fail_when_refused: connections to a dead port opened and dropped many times leave the client (and "
          "ZeroMQ's I/O thread) working", "[net][rpc][faults]") {
  // Each refused connection is dropped while ZeroMQ is retrying it: a monitor event reported then, to a
  // monitor already closed, would hang the I/O thread that every socket of the process shares.
  zmq::context_t context;
  Client client(context, failing_when_refused());
  Server answering(context, {});
  REQUIRE(answering.start().is_ok());
  DeadPort dead;
  for (int i = 0; i < 200; ++i) {
    auto reply = client.call(dead.endpoint, Outgoing::of(wire::Ping{1}), Deadline::after(5s)).wait();
    REQUIRE_FALSE(reply.is_ok());
    REQUIRE(reply.status().code() == Code::kUnavailable);
    if (i % 50 == 0) std::this_thread::sleep_for(150ms);  // past ZeroMQ's reconnection interval now and then
  }
  auto start = std::chrono::steady_clock::now();
  expect_ping_works(client, answering.endpoint());
  Client other(context, {});  // another socket on the same I/O thread
  expect_ping_works(other, answering.endpoint());
  CHECK(elapsed_ms(start) < 1000);

  // A connection closed while its connection attempt is in progress (disconnect): the attempt cut short
  // reports an event as the socket closes.
  FullBacklog pending;
  REQUIRE_FALSE(pending.endpoint.empty());
  for (int i = 0; i < 3; ++i) {
    auto stuck = client.call(pending.endpoint, Outgoing::of(wire::Ping{1}), Deadline::after(10s));
    std::this_thread::sleep_for(100ms);
    client.disconnect(pending.endpoint);
    auto reply = stuck.wait();
    REQUIRE_FALSE(reply.is_ok());
    CHECK(reply.status().code() == Code::kCancelled);
  }
  start = std::chrono::steady_clock::now();
  expect_ping_works(client, answering.endpoint());
  expect_ping_works(other, answering.endpoint());
  CHECK(elapsed_ms(start) < 1000);
}

TEST_CASE("cancel_pending fails the calls in flight at once and leaves the client usable", "[net][rpc][faults]") {
  zmq::context_t context;
  Server silent(context, {});
  silent.handle(wire::MessageType::kPing, [](Incoming&&, Replier) { /* never answers */ });
  REQUIRE(silent.start().is_ok());
  Server answering(context, {});
  answering.handle(wire::MessageType::kPing, [](Incoming&&, Replier replier) { replier.reply(wire::Pong{1, 1}); });
  REQUIRE(answering.start().is_ok());
  Client client(context, {});
  auto first = client.call(silent.endpoint(), Outgoing::of(wire::Ping{1}), Deadline::after(30s));
  auto second = client.call(silent.endpoint(), Outgoing::of(wire::Ping{1}), Deadline::after(30s));
  std::this_thread::sleep_for(100ms);  // both sent
  auto start = std::chrono::steady_clock::now();
  client.cancel_pending();
  for (auto* call : {&first, &second}) {
    auto reply = call->wait();
    REQUIRE_FALSE(reply.is_ok());
    CHECK(reply.status().code() == Code::kCancelled);
  }
  CHECK(elapsed_ms(start) < 500);
  // Later calls are not affected.
  auto after = client.call(answering.endpoint(), Outgoing::of(wire::Ping{1}), Deadline::after(5s)).wait();
  CHECK(after.is_ok());
}

TEST_CASE("disconnect drops what is queued to a peer, gives zero-copy frames back and fails its calls",
          "[net][rpc][faults]") {
  std::vector<std::uint8_t> lent(64 << 10, 7);
  std::atomic<int> given_back{0};  // both outlive the client, which would give the frame back at the latest
  zmq::context_t context;
  Client client(context, {});
  // A frame lent to ZeroMQ (zero-copy), queued to an endpoint that never completes ZeroMQ's handshake: it
  // waits there, its memory still ZeroMQ's, until we disconnect.
  std::vector<zmq::message_t> frames;
  frames.emplace_back(lent.data(), lent.size(), [](void*, void* hint) { static_cast<std::atomic<int>*>(hint)->fetch_add(1); },
                      &given_back);
  MuteListener mute;
  REQUIRE_FALSE(mute.endpoint.empty());
  const std::string nobody = mute.endpoint;
  auto queued = client.call(nobody, Outgoing::of(wire::Probe{1, true}, std::move(frames)), Deadline::after(30s));
  std::this_thread::sleep_for(100ms);
  CHECK(given_back.load() == 0);
  CHECK_FALSE(queued.ready());

  // A call in flight to a live peer that never answers fails at once too; the connection is made anew later.
  Server silent(context, {});
  silent.handle(wire::MessageType::kPing, [](Incoming&&, Replier) { /* never answers */ });
  REQUIRE(silent.start().is_ok());
  auto unanswered = client.call(silent.endpoint(), Outgoing::of(wire::Ping{1}), Deadline::after(30s));
  std::this_thread::sleep_for(100ms);  // sent

  auto start = std::chrono::steady_clock::now();
  client.disconnect(nobody);
  client.disconnect(silent.endpoint());
  for (auto* call : {&queued, &unanswered}) {
    auto reply = call->wait();
    REQUIRE_FALSE(reply.is_ok());
    CHECK(reply.status().code() == Code::kCancelled);
  }
  while (given_back.load() == 0 && elapsed_ms(start) < 1000) std::this_thread::sleep_for(1ms);
  CHECK(given_back.load() == 1);
  CHECK(elapsed_ms(start) < 500);
  auto after = client.call(silent.endpoint(), Outgoing::of(wire::Probe{2, false}), Deadline::after(5s)).wait();
  CHECK(after.is_ok());
}

TEST_CASE("Random bytes, truncated frames and a wrong version get clear errors and others are still served",
          "[net][rpc][faults]") {
  zmq::context_t context;
  Server server(context, {});
  REQUIRE(server.start().is_ok());
  Client client(context, {});
  RawPeer raw(context, server.endpoint());

  std::mt19937_64 rng(7);
  Bytes random(200);
  for (auto& b : random) b = static_cast<std::uint8_t>(rng());
  raw.send({random});
  auto e1 = raw.receive_error();
  CHECK(e1.code == Code::kMalformed);
  INFO("error for random bytes: " << e1.message);
  CHECK(e1.message.rfind("header", 0) == 0);
  expect_ping_works(client, server.endpoint());

  Bytes truncated = valid_ping_header();
  truncated.resize(truncated.size() / 2);
  raw.send({truncated});
  auto e2 = raw.receive_error();
  CHECK(e2.code == Code::kMalformed);

  raw.send({valid_ping_header(0, 99)});
  auto e3 = raw.receive_error();
  CHECK(e3.code == Code::kVersionMismatch);
  CHECK(e3.message == "protocol version 99 is not supported (this peer speaks 1)");

  raw.send({valid_ping_header(2), Bytes{1, 2, 3}});  // announces 2 payload frames, sends 1
  auto e4 = raw.receive_error();
  CHECK(e4.code == Code::kMalformed);
  CHECK(e4.message == "header announces 2 payload frames, 1 arrived");

  wire::MapWriter body;
  wire::MapWriter h;
  h.put("magic", wire::kMagic).put("ver", std::uint64_t{1}).put("type", std::uint64_t{999})
      .put("rid", std::uint64_t{1}).put("nf", std::uint64_t{0}).put_map("body", body);
  raw.send({h.to_bytes()});
  auto e5 = raw.receive_error();
  CHECK(e5.code == Code::kUnknownType);

  raw.send({Bytes{}});  // an empty header frame
  CHECK(raw.receive_error().code == Code::kMalformed);

  expect_ping_works(client, server.endpoint());
  CHECK(server.stats().rejected == 6);
}

TEST_CASE("A frame over the size limit cuts that peer off, not the server", "[net][rpc][faults]") {
  zmq::context_t context;
  ServerOptions options;
  options.socket.limits.max_frame_bytes = 1 << 20;
  options.socket.limits.max_header_bytes = 1 << 16;
  Server server(context, options);
  REQUIRE(server.start().is_ok());
  RawPeer raw(context, server.endpoint());
  raw.send({valid_ping_header(1), Bytes(4 << 20, 0xab)});  // a 4 MiB frame against a 1 MiB limit
  Client client(context, {});
  expect_ping_works(client, server.endpoint());
  CHECK(server.stats().requests == 1);  // only the good Ping was dispatched
}

TEST_CASE("A handler that throws gets an internal error reply and the server goes on", "[net][rpc][faults]") {
  zmq::context_t context;
  Server server(context, {});
  server.handle(wire::MessageType::kStreamAck, [](Incoming&&, Replier) { throw std::runtime_error("bug"); });
  REQUIRE(server.start().is_ok());
  Client client(context, {});
  auto reply = client.ask<wire::Pong>(server.endpoint(), wire::StreamAck{}, 5s);
  CHECK(reply.status().code() == Code::kInternal);
  expect_ping_works(client, server.endpoint());
}

TEST_CASE("Destroying a client cancels its calls at once and stopping a server never waits on peers",
          "[net][rpc][faults]") {
  zmq::context_t context;
  DeadPort dead;
  const std::string& endpoint = dead.endpoint;
  std::optional<PendingCall> pending;
  {
    Client client(context, {});
    pending.emplace(client.call(endpoint, Outgoing::of(wire::Ping{1}), Deadline::after(60s)));
  }
  REQUIRE(pending->ready());
  auto outcome = pending->wait();
  CHECK(outcome.status().code() == Code::kCancelled);

  // A server with a connected client that never reads, stopped with replies queued.
  auto start = std::chrono::steady_clock::now();
  {
    Server server(context, {});
    REQUIRE(server.start().is_ok());
    RawPeer raw(context, server.endpoint());
    for (int i = 0; i < 100; ++i) raw.send({valid_ping_header()});
    std::this_thread::sleep_for(50ms);
    server.stop();
  }
  CHECK(elapsed_ms(start) < 2000);
}
