// The datagram transport (net/datagram_rpc.hpp) on real UDP sockets on 127.0.0.1: calls and replies,
// sealing, the amplification guard, lost requests sent again, the stream for what does not fit, and
// hostile datagrams.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <random>

#include "dedloc/crypto/access_token.hpp"
#include "dedloc/crypto/identity.hpp"
#include "dedloc/net/access_control.hpp"
#include "dedloc/net/client.hpp"
#include "dedloc/net/datagram_rpc.hpp"
#include "dedloc/net/peer_address.hpp"
#include "dedloc/net/server.hpp"
#include "dedloc/net/transport_security.hpp"
#include "dedloc/wire/dht_messages.hpp"
#include "dedloc/wire/messages.hpp"

using namespace dedloc;
using namespace dedloc::net;
using namespace std::chrono_literals;

namespace {

// A peer as a DHT node is one: a ZeroMQ server and client, and datagrams on the server's port.
struct Peer {
  // `authority`: a private run's, which issues this peer a token (net/access_control.hpp).
  explicit Peer(zmq::context_t& context, bool keyed = true, DatagramOptions datagram_options = {},
                const crypto::Identity* authority = nullptr)
      : identity(crypto::Identity::generate()) {
    SocketOptions socket;
    if (keyed) socket.transport = TransportKeys::of(identity);
    if (authority) {
      const auto expires = static_cast<std::uint64_t>(SystemClock::instance().unix_seconds() + 3600);
      auto token = crypto::AccessToken::issue(*authority, identity.public_key(), "member", expires);
      REQUIRE(token.is_ok());
      auto access = AccessControl::create(identity, {.authority = authority->public_key(), .token = *token});
      REQUIRE(access.is_ok());
      socket.access = *access;
    }
    server = std::make_unique<Server>(context, ServerOptions{"tcp://127.0.0.1:0", identity.peer_id(), socket});
    client = std::make_unique<Client>(context, ClientOptions{identity.peer_id(), socket});
    datagram_options.self = identity.peer_id();
    datagram_options.socket = socket;
    datagrams = std::make_unique<DatagramRpc>(datagram_options, *client);
  }
  // Registers `handler` on both transports, then starts them on one port.
  void start(wire::MessageType type = {}, const Handler& handler = {}) {
    if (handler) {
      server->handle(type, handler);
      datagrams->handle(type, handler);
    }
    REQUIRE(server->start().is_ok());
    auto bound = parse_tcp_endpoint(server->endpoint());
    REQUIRE(bound.is_ok());
    REQUIRE(datagrams->start("127.0.0.1", bound->port, true).is_ok());
  }
  const std::string& endpoint() const { return server->endpoint(); }

  crypto::Identity identity;
  std::unique_ptr<Server> server;
  std::unique_ptr<Client> client;
  std::unique_ptr<DatagramRpc> datagrams;
};

// A DhtNodes reply with `contacts` contacts: about 100 bytes each.
Handler nodes_handler(size_t contacts) {
  return typed_handler<wire::DhtFindNode>([contacts](wire::DhtFindNode&&, Incoming&&, Replier replier) {
    wire::DhtNodes reply;
    for (size_t i = 0; i < contacts; ++i) {
      auto id = crypto::Identity::generate();
      reply.nearest.push_back({id.peer_id(), with_endpoint_key("tcp://10.0.0.1:4000", id.public_key()), 0});
    }
    replier.reply(reply);
  });
}

wire::DhtFindNode find_node(const crypto::PeerId& target) { return wire::DhtFindNode{target, ""}; }

void send_raw(std::uint16_t port, const Bytes& bytes) {
  int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(port);
  inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
  ::sendto(fd, bytes.data(), bytes.size(), 0, reinterpret_cast<const sockaddr*>(&to), sizeof(to));
  ::close(fd);
}

}  // namespace

TEST_CASE("A ping in a sealed datagram gets a Pong from the peer the endpoint names", "[net][datagram]") {
  zmq::context_t context;
  Peer server(context), caller(context);
  server.start();
  caller.start();
  auto reply = caller.datagrams->call(server.endpoint(), Outgoing::of(wire::Ping{1.0}), Deadline::after(5s)).wait();
  REQUIRE(reply.is_ok());
  CHECK(reply->envelope().sender == server.identity.peer_id());
  CHECK(reply->decode<wire::Pong>().is_ok());
  const auto served = server.datagrams->stats();
  CHECK(served.requests == 1);
  CHECK(server.server->stats().requests == 0);  // not over ZeroMQ
  CHECK(caller.client->stats().connections_opened == 0);
  CHECK(caller.datagrams->stats().streamed == 0);
}

TEST_CASE("A reply much larger than its request is sent once the requester shows its address", "[net][datagram]") {
  zmq::context_t context;
  Peer server(context), caller(context);
  server.start(wire::DhtFindNode::kType, nodes_handler(20));  // ~2 KiB against a request of ~150 bytes
  caller.start();
  for (int i = 0; i < 3; ++i) {
    auto reply = caller.datagrams->ask<wire::DhtNodes>(server.endpoint(), find_node(caller.identity.peer_id()), 5s);
    REQUIRE(reply.is_ok());
    CHECK(reply->nearest.size() == 20);
  }
  // The first call was answered with a cookie, and asked again with it; the later ones carried it.
  CHECK(caller.datagrams->stats().cookie_retries == 1);
  CHECK(server.datagrams->stats().requests == 4);
  CHECK(caller.datagrams->stats().streamed == 0);
}

TEST_CASE("A reply too large for a datagram comes over the stream", "[net][datagram]") {
  zmq::context_t context;
  DatagramOptions small;
  small.max_datagram_bytes = 1200;
  Peer server(context, true, small), caller(context, true, small);
  server.start(wire::DhtFindNode::kType, nodes_handler(30));  // ~3 KiB
  caller.start();
  auto reply = caller.datagrams->ask<wire::DhtNodes>(server.endpoint(), find_node(caller.identity.peer_id()), 5s);
  REQUIRE(reply.is_ok());
  CHECK(reply->nearest.size() == 30);
  CHECK(caller.datagrams->stats().streamed == 1);
  CHECK(server.server->stats().requests == 1);  // asked again over ZeroMQ
  CHECK(caller.client->stats().connections_opened == 1);

  // A request too large for a datagram goes over the stream at once.
  wire::DhtFindNode big = find_node(caller.identity.peer_id());
  big.sender_endpoint = "tcp://127.0.0.1:1/" + std::string(1500, 'x');
  auto streamed = caller.datagrams->call(server.endpoint(), Outgoing::of(big), Deadline::after(5s)).wait();
  CHECK(caller.datagrams->stats().streamed == 2);
  CHECK(server.server->stats().requests + server.server->stats().rejected == 2);
  (void)streamed;
}

TEST_CASE("A request lost on the way is sent again before its deadline", "[net][datagram]") {
  zmq::context_t context;
  DatagramOptions quick;
  quick.retransmit_after = 100ms;
  Peer server(context), caller(context, true, quick);
  // The server "loses" the first copy of every request: its handler never answers it.
  auto copies = std::make_shared<std::atomic<int>>(0);
  server.start(wire::Ping::kType, [copies](Incoming&&, Replier replier) {
    if (copies->fetch_add(1) % 2 == 0) return;
    replier.reply(wire::Pong{1.0, 2.0, "test"});
  });
  caller.start();
  const auto started = std::chrono::steady_clock::now();
  auto reply = caller.datagrams->call(server.endpoint(), Outgoing::of(wire::Ping{1.0}), Deadline::after(5s)).wait();
  REQUIRE(reply.is_ok());
  CHECK(std::chrono::steady_clock::now() - started < 2s);
  CHECK(caller.datagrams->stats().retransmits >= 1);
  CHECK(copies->load() == 2);
}

TEST_CASE("In a private run a request sent again is sealed anew, so the server does not take it for a replay",
          "[net][datagram]") {
  zmq::context_t context;
  const auto authority = crypto::Identity::generate();
  DatagramOptions quick;
  quick.retransmit_after = 100ms;
  Peer server(context, true, {}, &authority), caller(context, true, quick, &authority);
  auto copies = std::make_shared<std::atomic<int>>(0);
  server.start(wire::Ping::kType, [copies](Incoming&&, Replier replier) {
    if (copies->fetch_add(1) == 0) return;  // the first copy's reply is "lost"
    replier.reply(wire::Pong{1.0, 2.0, "test"});
  });
  caller.start();
  auto reply = caller.datagrams->call(server.endpoint(), Outgoing::of(wire::Ping{1.0}), Deadline::after(5s)).wait();
  REQUIRE(reply.is_ok());
  CHECK(copies->load() >= 2);  // the handler ran for the copy: it passed the access check
  CHECK(caller.datagrams->stats().retransmits >= 1);

  // A member without a token is refused with the reason.
  Peer outsider(context);
  outsider.start();
  auto refused = outsider.datagrams->call(server.endpoint(), Outgoing::of(wire::Ping{1.0}), Deadline::after(5s)).wait();
  CHECK(refused.status().code() == Code::kUnauthorized);
}

TEST_CASE("A node that takes no datagrams is called over the stream once its port says so", "[net][datagram]") {
  zmq::context_t context;
  Peer stream_only(context), modern(context), caller(context);
  REQUIRE(stream_only.server->start().is_ok());  // ZeroMQ only: nothing takes datagrams on its port
  modern.start();
  caller.start();
  auto reply =
      caller.datagrams->call(stream_only.endpoint(), Outgoing::of(wire::Ping{1.0}), Deadline::after(5s)).wait();
  REQUIRE(reply.is_ok());
  CHECK(reply->envelope().sender == stream_only.identity.peer_id());
  CHECK(stream_only.server->stats().requests == 1);
  // The port's ICMP answer moved the call, before the datagram was due to be sent again.
  auto stats = caller.datagrams->stats();
  CHECK(stats.ports_unreachable == 1);
  CHECK(stats.streamed == 1);
  CHECK(stats.retransmits == 0);
  // Later calls to it go straight to the stream; other peers are still called in datagrams.
  auto ping = [&](const Peer& peer) {
    return caller.datagrams->call(peer.endpoint(), Outgoing::of(wire::Ping{2.0}), Deadline::after(5s)).wait();
  };
  REQUIRE(ping(stream_only).is_ok());
  REQUIRE(ping(modern).is_ok());
  stats = caller.datagrams->stats();
  CHECK(stats.ports_unreachable == 1);
  CHECK(stats.streamed == 2);
  CHECK(stream_only.server->stats().requests == 2);
  CHECK(modern.datagrams->stats().requests == 1);
}

TEST_CASE("Only the key the endpoint names can answer, and a keyed server ignores plaintext", "[net][datagram]") {
  zmq::context_t context;
  Peer server(context), caller(context), plaintext(context, false);
  server.start();
  caller.start();
  plaintext.start();
  auto bound = parse_tcp_endpoint(server.endpoint());
  REQUIRE(bound.is_ok());

  // Sealed for another key: the server cannot open it, and stays silent.
  const auto impostor = crypto::Identity::generate();
  const std::string wrong_key =
      with_endpoint_key("tcp://127.0.0.1:" + std::to_string(bound->port), impostor.public_key());
  auto reply = caller.datagrams->call(wrong_key, Outgoing::of(wire::Ping{1.0}), Deadline::after(600ms)).wait();
  CHECK(reply.status().code() == Code::kTimeout);

  // Without a key: a plaintext request, which a server with transport keys does not answer.
  const std::string no_key = "tcp://127.0.0.1:" + std::to_string(bound->port);
  auto plain = plaintext.datagrams->call(no_key, Outgoing::of(wire::Ping{1.0}), Deadline::after(600ms)).wait();
  CHECK(plain.status().code() == Code::kTimeout);
  CHECK(server.datagrams->stats().requests == 0);
  CHECK(server.datagrams->stats().rejected >= 2);

  // A plaintext server answers plaintext.
  const std::uint16_t plain_port = parse_tcp_endpoint(plaintext.endpoint())->port;
  auto both_plain =
      caller.datagrams
          ->call("tcp://127.0.0.1:" + std::to_string(plain_port), Outgoing::of(wire::Ping{1.0}), Deadline::after(5s))
          .wait();
  CHECK(both_plain.is_ok());
}

TEST_CASE("Garbage datagrams are dropped and the server keeps answering", "[net][datagram]") {
  zmq::context_t context;
  Peer server(context), caller(context);
  server.start();
  caller.start();
  const std::uint16_t port = server.datagrams->port();
  std::mt19937 rng(7);
  for (int i = 0; i < 200; ++i) {
    Bytes junk(rng() % 2000);
    for (auto& b : junk) b = static_cast<std::uint8_t>(rng());
    if (i % 3 == 0 && junk.size() >= 4)
      junk[0] = 'D', junk[1] = 'G', junk[2] = 1, junk[3] = static_cast<std::uint8_t>(i % 2);
    send_raw(port, junk);
  }
  auto reply = caller.datagrams->call(server.endpoint(), Outgoing::of(wire::Ping{1.0}), Deadline::after(5s)).wait();
  REQUIRE(reply.is_ok());
  CHECK(server.datagrams->stats().rejected >= 100);
  CHECK(server.datagrams->stats().requests == 1);
}

TEST_CASE("Calls in flight fail when cancelled or stopped, and later calls go over the stream", "[net][datagram]") {
  zmq::context_t context;
  Peer server(context), caller(context);
  server.start(wire::Ping::kType, [](Incoming&&, Replier) {});  // never answers
  caller.start();
  auto pending = caller.datagrams->call(server.endpoint(), Outgoing::of(wire::Ping{1.0}), Deadline::after(30s));
  std::this_thread::sleep_for(50ms);
  caller.datagrams->cancel_pending();
  CHECK(pending.wait().status().code() == Code::kCancelled);

  auto stopped = caller.datagrams->call(server.endpoint(), Outgoing::of(wire::Ping{1.0}), Deadline::after(30s));
  std::this_thread::sleep_for(50ms);
  caller.datagrams->stop();
  CHECK(stopped.wait().status().code() == Code::kCancelled);

  // Stopped: the call goes over the stream (whose server does answer pings: its handler is the built-in).
  Peer other(context);
  other.start();
  auto after = caller.datagrams->call(other.endpoint(), Outgoing::of(wire::Ping{1.0}), Deadline::after(5s)).wait();
  CHECK(after.is_ok());
  CHECK(other.server->stats().requests == 1);
}
