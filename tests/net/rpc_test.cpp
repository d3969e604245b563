#include <catch2/catch.hpp>

#include <cstring>
#include <future>
#include <mutex>
#include <thread>

#include "dedloc/crypto/identity.hpp"
#include "dedloc/net/client.hpp"
#include "dedloc/net/server.hpp"
#include "dedloc/wire/messages.hpp"

using namespace dedloc;
using namespace dedloc::net;
using namespace std::chrono_literals;

namespace {

zmq::message_t frame_of(const std::string& s) { return zmq::message_t(s.data(), s.size()); }

}  // namespace

TEST_CASE("Ping gets a Pong from a server bound to port 0", "[net][rpc]") {
  zmq::context_t context;
  auto server_id = crypto::Identity::generate();
  Server server(context, {.self = server_id.peer_id()});
  REQUIRE(server.start().is_ok());
  CHECK(server.endpoint().rfind("tcp://127.0.0.1:", 0) == 0);
  CHECK(server.endpoint() != "tcp://127.0.0.1:0");

  Client client(context, {});
  double sent = SystemClock::instance().unix_seconds();
  auto reply = client.call(server.endpoint(), Outgoing::of(wire::Ping{sent}), Deadline::after(5s)).wait();
  REQUIRE(reply.is_ok());
  CHECK(reply->envelope().sender == server_id.peer_id());
  auto pong = reply->decode<wire::Pong>();
  REQUIRE(pong.is_ok());
  CHECK(pong->ping_sent_unix_time == sent);
  CHECK(std::abs(pong->unix_time - sent) < 5.0);
  CHECK(pong->software.rfind("dedloc ", 0) == 0);
}

TEST_CASE("1,000 concurrent requests from 4 clients are all answered correctly", "[net][rpc]") {
  zmq::context_t context;
  Server server(context, {});
  REQUIRE(server.start().is_ok());

  constexpr int kClients = 4, kPerClient = 250;
  std::vector<int> correct(kClients, 0);
  std::vector<std::thread> threads;
  for (int c = 0; c < kClients; ++c) {
    threads.emplace_back([&, c] {
      Client client(context, {});
      std::vector<PendingCall> calls;
      // All 250 requests are in flight before the first reply is read.
      for (int i = 0; i < kPerClient; ++i) {
        std::vector<zmq::message_t> frames;
        frames.push_back(frame_of("client " + std::to_string(c) + " request " + std::to_string(i)));
        wire::Probe probe{static_cast<std::uint64_t>(c * 100000 + i), true};
        calls.push_back(client.call(server.endpoint(), Outgoing::of(probe, std::move(frames)), Deadline::after(30s)));
      }
      for (int i = 0; i < kPerClient; ++i) {
        auto reply = calls[i].wait();
        if (!reply) continue;
        auto probe_reply = reply->decode<wire::ProbeReply>();
        std::string expected = "client " + std::to_string(c) + " request " + std::to_string(i);
        if (probe_reply && probe_reply->sequence == static_cast<std::uint64_t>(c * 100000 + i) &&
            probe_reply->received_bytes == expected.size() && reply->frames.size() == 1 &&
            reply->frames[0].to_string() == expected) {
          correct[c]++;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int c = 0; c < kClients; ++c) CHECK(correct[c] == kPerClient);
  CHECK(server.stats().requests == kClients * kPerClient);
  CHECK(server.stats().rejected == 0);
}

TEST_CASE("A handler may reply later from another thread", "[net][rpc]") {
  zmq::context_t context;
  Server server(context, {});
  std::vector<std::thread> workers;
  std::mutex mutex;
  server.handle<wire::Ping>([&](wire::Ping&& ping, Incoming&&, Replier replier) {
    std::lock_guard<std::mutex> lock(mutex);
    workers.emplace_back([ping, replier] {
      std::this_thread::sleep_for(50ms);
      replier.reply(wire::Pong{ping.sent_unix_time, 1.0, "deferred"});
    });
  });
  REQUIRE(server.start().is_ok());
  Client client(context, {});
  auto a = client.call(server.endpoint(), Outgoing::of(wire::Ping{1}), Deadline::after(5s));
  auto b = client.call(server.endpoint(), Outgoing::of(wire::Ping{2}), Deadline::after(5s));
  auto ra = a.wait();
  auto rb = b.wait();
  REQUIRE(ra.is_ok());
  REQUIRE(rb.is_ok());
  CHECK(ra->decode<wire::Pong>()->ping_sent_unix_time == 1);
  CHECK(rb->decode<wire::Pong>()->software == "deferred");
  std::lock_guard<std::mutex> lock(mutex);
  for (auto& w : workers) w.join();
}

TEST_CASE("A typed ask() round trip, and ErrorReply becomes the remote Status", "[net][rpc]") {
  zmq::context_t context;
  Server server(context, {});
  server.handle<wire::StreamAck>([](wire::StreamAck&&, Incoming&&, Replier replier) {
    replier.fail(error(Code::kRefused, "not a leader; try 3f2a"));
  });
  REQUIRE(server.start().is_ok());
  Client client(context, {});
  auto pong = client.ask<wire::Pong>(server.endpoint(), wire::Ping{4}, 5s);
  REQUIRE(pong.is_ok());
  CHECK(pong->ping_sent_unix_time == 4);

  auto refused = client.ask<wire::Pong>(server.endpoint(), wire::StreamAck{}, 5s);
  REQUIRE_FALSE(refused.is_ok());
  CHECK(refused.status().code() == Code::kRefused);
  CHECK(refused.status().message() == "remote peer: not a leader; try 3f2a");
}

TEST_CASE("max_connections closes the least recently used idle connection, never one awaiting a reply",
          "[net][rpc]") {
  zmq::context_t context;
  // Server 0 answers its first ping only when told: its connection stays busy while the others are dialled.
  std::promise<void> release;
  auto released = release.get_future().share();
  std::vector<std::thread> workers;
  std::mutex mutex;
  Server slow(context, {});
  slow.handle<wire::Ping>([&](wire::Ping&& ping, Incoming&&, Replier replier) {
    std::lock_guard<std::mutex> lock(mutex);
    workers.emplace_back([ping, replier, released] {
      released.wait();
      replier.reply(wire::Pong{ping.sent_unix_time, 1.0, "slow"});
    });
  });
  REQUIRE(slow.start().is_ok());
  std::vector<std::unique_ptr<Server>> fast;
  for (int i = 0; i < 4; ++i) {
    fast.push_back(std::make_unique<Server>(context, ServerOptions{}));
    REQUIRE(fast.back()->start().is_ok());
  }

  Client client(context, {.max_connections = 2});
  auto busy = client.call(slow.endpoint(), Outgoing::of(wire::Ping{1}), Deadline::after(30s));
  for (size_t i = 0; i < fast.size(); ++i) {
    auto pong = client.ask<wire::Pong>(fast[i]->endpoint(), wire::Ping{2}, 10s);
    REQUIRE(pong.is_ok());
    // The busy connection is kept (it awaits a reply) beside at most one idle one: the one just used.
    CHECK(client.stats().open_connections == 2);
  }
  CHECK(client.stats().connections_opened == 5);
  CHECK_FALSE(busy.ready());
  release.set_value();
  auto slow_reply = busy.wait();
  REQUIRE(slow_reply.is_ok());
  CHECK(slow_reply->decode<wire::Pong>()->software == "slow");

  // The most recently used connection is still open; asking it again dials nothing new.
  REQUIRE(client.ask<wire::Pong>(fast.back()->endpoint(), wire::Ping{3}, 10s).is_ok());
  CHECK(client.stats().connections_opened == 5);
  // One closed earlier is dialled again, and the bound holds once nothing is in flight.
  REQUIRE(client.ask<wire::Pong>(fast.front()->endpoint(), wire::Ping{4}, 10s).is_ok());
  CHECK(client.stats().connections_opened == 6);
  CHECK(client.stats().open_connections == 2);
  std::lock_guard<std::mutex> lock(mutex);
  for (auto& w : workers) w.join();
}
