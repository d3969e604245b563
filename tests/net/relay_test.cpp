// Relay circuits on real loopback sockets: a peer attached to a relay answers requests
// addressed to relay://…/p/ID, probes with payloads come back whole, the relay refuses what it must
// (unknown peers, forged attaches, a peer over its limits) without affecting others, and a link notices a
// dead relay within its bound.
#include <catch2/catch.hpp>

#include <mutex>
#include <thread>

#include "dedloc/crypto/identity.hpp"
#include "dedloc/net/client.hpp"
#include "dedloc/net/relay_link.hpp"
#include "dedloc/net/server.hpp"
#include "dedloc/relay/relay_keeper.hpp"
#include "dedloc/relay/relay_server.hpp"
#include "dedloc/wire/messages.hpp"
#include "dedloc/wire/relay_frames.hpp"

using namespace dedloc;
using namespace dedloc::net;
using namespace std::chrono_literals;

namespace {

// A peer behind the relay: its server on loopback (nobody outside dials it) and its link to the relay.
struct RelayedPeer {
  crypto::Identity identity = crypto::Identity::generate();
  Server server;
  std::unique_ptr<RelayLink> link;

  RelayedPeer(zmq::context_t& context, const PeerAddress& relay, Duration dead_after = 6s)
      : server(context, {.listen = "tcp://127.0.0.1:0", .self = identity.peer_id()}) {
    REQUIRE(server.start().is_ok());
    link = std::make_unique<RelayLink>(context, identity,
                                       RelayLinkOptions{.relay = relay, .local_endpoint = server.endpoint(),
                                                        .heartbeat = 200ms, .dead_after = dead_after});
  }
};

PeerAddress address_of(const relay::RelayServer& relay, const crypto::Identity& id) {
  return PeerAddress{relay.endpoint(), id.peer_id()};
}

Result<Incoming> ping(Client& client, const std::string& endpoint) {
  return client.call(endpoint, Outgoing::of(wire::Ping{1}), Deadline::after(5s)).wait();
}

}  // namespace

TEST_CASE("A peer attached to a relay answers requests addressed through it", "[net][relay]") {
  zmq::context_t context;
  auto relay_id = crypto::Identity::generate();
  relay::RelayServer relay(context, relay_id, {.listen = "tcp://127.0.0.1:0"});
  REQUIRE(relay.start().is_ok());
  RelayedPeer peer(context, address_of(relay, relay_id));
  REQUIRE(peer.link->start().is_ok());
  CHECK(peer.link->address() == relay_address(relay.endpoint(), peer.identity.peer_id()));
  auto parsed = PeerAddress::parse(peer.link->address());
  REQUIRE(parsed.is_ok());
  CHECK(parsed->peer_id == peer.identity.peer_id());
  CHECK(parsed->to_string() == peer.link->address());

  Client client(context, {});
  auto reply = ping(client, peer.link->address());
  REQUIRE(reply.is_ok());
  CHECK(reply->envelope().sender == peer.identity.peer_id());  // end to end: the peer answered, not the relay
  CHECK(reply->decode<wire::Pong>().is_ok());

  // Payload frames travel both ways untouched (a Probe echoes its payload).
  std::string payload(3 << 20, 'x');
  for (size_t i = 0; i < payload.size(); i += 4096) payload[i] = static_cast<char>(i / 4096);
  std::vector<zmq::message_t> frames;
  frames.emplace_back(payload.data(), payload.size());
  auto echoed = client.call(peer.link->address(), Outgoing::of(wire::Probe{7, true}, std::move(frames)),
                            Deadline::after(10s)).wait();
  REQUIRE(echoed.is_ok());
  REQUIRE(echoed->frames.size() == 1);
  CHECK(echoed->frames[0].to_string() == payload);

  // Several requesters at once, each with its own circuit.
  std::vector<std::unique_ptr<Client>> clients;
  std::vector<PendingCall> calls;
  for (int i = 0; i < 8; ++i) {
    clients.push_back(std::make_unique<Client>(context, ClientOptions{}));
    for (int k = 0; k < 20; ++k) {
      calls.push_back(clients.back()->call(peer.link->address(), Outgoing::of(wire::Ping{double(k)}), Deadline::after(10s)));
    }
  }
  for (auto& call : calls) CHECK(call.wait().is_ok());
  auto stats = relay.stats();
  CHECK(stats.attached == 1);
  CHECK(stats.forwarded >= 162);
  CHECK(stats.replies == stats.forwarded);
}

TEST_CASE("The relay answers for peers it does not hold and refuses forged attaches", "[net][relay]") {
  zmq::context_t context;
  auto relay_id = crypto::Identity::generate();
  relay::RelayServer relay(context, relay_id, {.listen = "tcp://127.0.0.1:0"});
  REQUIRE(relay.start().is_ok());
  Client client(context, {});

  auto nobody = crypto::Identity::generate();
  auto missing = ping(client, relay_address(relay.endpoint(), nobody.peer_id()));
  REQUIRE_FALSE(missing.is_ok());
  CHECK(missing.status().code() == Code::kNotFound);
  CHECK(missing.status().message().find(nobody.peer_id().to_string()) != std::string::npos);

  // An attach signed for another relay (a replay elsewhere) is refused, with the reason.
  auto other_relay = crypto::Identity::generate();
  RelayedPeer forger(context, PeerAddress{relay.endpoint(), other_relay.peer_id()});
  auto refused = forger.link->start();
  CHECK(refused.code() == Code::kUnauthorized);
  CHECK(refused.message().find("signature") != std::string::npos);
  CHECK(relay.stats().attaches_refused == 1);

  // A plain request to the relay itself is told how to address peers.
  auto direct = ping(client, relay.endpoint());
  REQUIRE_FALSE(direct.is_ok());
  CHECK(direct.status().message().find("relay://") != std::string::npos);
}

TEST_CASE("A peer over its limits is refused while another peer on the relay is served", "[net][relay]") {
  zmq::context_t context;
  auto relay_id = crypto::Identity::generate();
  relay::RelayOptions options{.listen = "tcp://127.0.0.1:0"};
  options.limits.max_circuits = 2;
  options.limits.max_total_bytes = 8 << 20;
  relay::RelayServer relay(context, relay_id, options);
  REQUIRE(relay.start().is_ok());
  RelayedPeer busy(context, address_of(relay, relay_id));
  RelayedPeer calm(context, address_of(relay, relay_id));
  REQUIRE(busy.link->start().is_ok());
  REQUIRE(calm.link->start().is_ok());

  // Circuits: two requesters are served, a third is refused naming the limit.
  Client a(context, {}), b(context, {}), c(context, {});
  CHECK(ping(a, busy.link->address()).is_ok());
  CHECK(ping(b, busy.link->address()).is_ok());
  auto third = ping(c, busy.link->address());
  REQUIRE_FALSE(third.is_ok());
  CHECK(third.status().code() == Code::kRefused);
  CHECK(third.status().message().find("2 open circuits") != std::string::npos);
  CHECK(ping(c, calm.link->address()).is_ok());  // the same requester, another peer: fine

  // Bytes: past 8 MiB through its circuit the busy peer is refused; the calm one is not.
  std::string chunk(3 << 20, 'y');
  size_t refusals = 0;
  for (int i = 0; i < 4; ++i) {
    std::vector<zmq::message_t> frames;
    frames.emplace_back(chunk.data(), chunk.size());
    auto sent = a.call(busy.link->address(), Outgoing::of(wire::Probe{1, false}, std::move(frames)), Deadline::after(10s)).wait();
    if (!sent) {
      CHECK(sent.status().code() == Code::kRefused);
      CHECK(sent.status().message().find("bytes relayed") != std::string::npos);
      ++refusals;
    }
  }
  CHECK(refusals >= 1);
  CHECK(ping(c, calm.link->address()).is_ok());
  CHECK(busy.link->alive());  // refused requests, not a dropped circuit
}

TEST_CASE("A link notices a dead relay within its bound", "[net][relay]") {
  zmq::context_t context;
  auto relay_id = crypto::Identity::generate();
  auto relay = std::make_unique<relay::RelayServer>(context, relay_id, relay::RelayOptions{.listen = "tcp://127.0.0.1:0"});
  REQUIRE(relay->start().is_ok());
  RelayedPeer peer(context, address_of(*relay, relay_id), 1500ms);
  REQUIRE(peer.link->start().is_ok());
  std::this_thread::sleep_for(1s);
  CHECK(peer.link->alive());  // heartbeats answered
  relay->stop();
  auto stopped = std::chrono::steady_clock::now();
  while (peer.link->alive() && std::chrono::steady_clock::now() - stopped < 5s) std::this_thread::sleep_for(20ms);
  CHECK_FALSE(peer.link->alive());
  CHECK(std::chrono::steady_clock::now() - stopped < 2500ms);
  CHECK(peer.link->failure().message().find("stopped answering") != std::string::npos);
}

TEST_CASE("Relay routing frames and attach proofs decode only when well formed", "[net][relay]") {
  auto id = crypto::Identity::generate();
  auto relay = crypto::Identity::generate();
  auto frame = wire::decode_relay_frame(wire::encode_relay_frame(wire::RelayTag::kForward, id.peer_id().span()));
  REQUIRE(frame.is_ok());
  REQUIRE(frame->has_value());
  CHECK((*frame)->id == Bytes(id.peer_id().bytes().begin(), id.peer_id().bytes().end()));
  CHECK_FALSE(wire::decode_relay_frame(Bytes{'D', 'L', 'R', '1', 'F', 1, 2}).is_ok());  // short peer id
  CHECK_FALSE(wire::decode_relay_frame(Bytes{'D', 'L', 'R', '1', 'z'}).is_ok());        // unknown tag
  CHECK_FALSE(wire::decode_relay_frame(Bytes{'D', 'L', 'R', '1'}).is_ok());             // no tag
  auto plain = wire::decode_relay_frame(Bytes{0x85, 1, 2});
  REQUIRE(plain.is_ok());
  CHECK_FALSE(plain->has_value());

  const std::uint64_t now = 1'700'000'000'000;
  auto proof = wire::encode_attach_proof(id, relay.peer_id(), now);
  auto verified = wire::verify_attach_proof(proof, relay.peer_id(), now + 1000, 60'000);
  REQUIRE(verified.is_ok());
  CHECK(verified->peer == id.peer_id());
  CHECK(verified->access_token.empty());
  auto with_token = wire::verify_attach_proof(wire::encode_attach_proof(id, relay.peer_id(), now, Bytes{1, 2, 3}),
                                              relay.peer_id(), now, 60'000);
  REQUIRE(with_token.is_ok());
  CHECK(with_token->access_token == Bytes{1, 2, 3});
  CHECK(wire::verify_attach_proof(proof, relay.peer_id(), now + 120'000, 60'000).status().code() == Code::kUnauthorized);
  CHECK(wire::verify_attach_proof(proof, id.peer_id(), now, 60'000).status().code() == Code::kUnauthorized);
  Bytes tampered = proof;
  tampered[tampered.size() - 1] ^= 1;
  CHECK_FALSE(wire::verify_attach_proof(tampered, relay.peer_id(), now, 60'000).is_ok());
  CHECK_FALSE(wire::verify_attach_proof(Bytes{1, 2, 3}, relay.peer_id(), now, 60'000).is_ok());
}

TEST_CASE("A keeper re-attaches to a second relay when its relay dies", "[net][relay]") {
  zmq::context_t context;
  auto first_id = crypto::Identity::generate(), second_id = crypto::Identity::generate();
  auto first = std::make_unique<relay::RelayServer>(context, first_id, relay::RelayOptions{.listen = "tcp://127.0.0.1:0"});
  relay::RelayServer second(context, second_id, {.listen = "tcp://127.0.0.1:0"});
  REQUIRE(first->start().is_ok());
  REQUIRE(second.start().is_ok());
  auto me = crypto::Identity::generate();
  Server server(context, {.listen = "tcp://127.0.0.1:0", .self = me.peer_id()});
  REQUIRE(server.start().is_ok());
  std::mutex mutex;
  std::vector<std::string> moves;
  relay::RelayKeeperOptions options;
  options.relays = {address_of(*first, first_id), address_of(second, second_id)};
  options.local_endpoint = server.endpoint();
  options.link.heartbeat = 200ms;
  options.link.dead_after = 1s;
  options.check_interval = 100ms;
  options.on_moved = [&](const std::string& address) {
    std::lock_guard lock(mutex);
    moves.push_back(address);
  };
  relay::RelayKeeper keeper(context, me, nullptr, options);
  REQUIRE(keeper.start(Deadline::after(5s)).is_ok());
  CHECK(keeper.address() == relay_address(first->endpoint(), me.peer_id()));
  Client client(context, {});
  CHECK(ping(client, keeper.address()).is_ok());

  first->stop();
  auto killed = std::chrono::steady_clock::now();
  auto moved_to = relay_address(second.endpoint(), me.peer_id());
  while (keeper.address() != moved_to && std::chrono::steady_clock::now() - killed < 10s) std::this_thread::sleep_for(20ms);
  CHECK(keeper.address() == moved_to);
  CHECK(std::chrono::steady_clock::now() - killed < 3s);  // dead_after + a check + an attach
  CHECK(ping(client, keeper.address()).is_ok());
  std::lock_guard lock(mutex);
  CHECK(moves.size() == 2);
}

TEST_CASE("A private run's relay attaches members only, and their requests are checked end to end",
          "[net][relay][access]") {
  zmq::context_t context;
  auto authority = crypto::Identity::generate();
  auto access_for = [&](const crypto::Identity& who, const crypto::Identity& signer) {
    auto token = crypto::AccessToken::issue(signer, who.public_key(), "member",
                                            static_cast<std::uint64_t>(SystemClock::instance().unix_seconds() + 600));
    REQUIRE(token.is_ok());
    auto access = AccessControl::create(who, {.authority = signer.public_key(), .token = *token});
    REQUIRE(access.is_ok());
    return *access;
  };
  auto relay_id = crypto::Identity::generate();
  relay::RelayOptions relay_options{.listen = "tcp://127.0.0.1:0"};
  relay_options.socket.access = access_for(relay_id, authority);
  relay::RelayServer relay(context, relay_id, relay_options);
  REQUIRE(relay.start().is_ok());

  // A peer that runs its server and link with a member's access control (or none).
  auto attach = [&](const crypto::Identity& who, std::shared_ptr<AccessControl> access) {
    SocketOptions socket;
    socket.access = access;
    auto server = std::make_unique<Server>(context, ServerOptions{.listen = "tcp://127.0.0.1:0", .self = who.peer_id(), .socket = socket});
    REQUIRE(server->start().is_ok());
    auto link = std::make_unique<RelayLink>(context, who, RelayLinkOptions{.relay = address_of(relay, relay_id),
                                                                        .local_endpoint = server->endpoint(),
                                                                        .socket = socket});
    return std::make_pair(std::move(server), std::move(link));
  };

  auto member = crypto::Identity::generate();
  auto [member_server, member_link] = attach(member, access_for(member, authority));
  REQUIRE(member_link->start().is_ok());

  auto outsider = crypto::Identity::generate();
  auto [outsider_server, outsider_link] = attach(outsider, nullptr);
  auto refused = outsider_link->start();
  CHECK(refused.code() == Code::kUnauthorized);
  CHECK_THAT(refused.message(), Catch::Contains("private run"));
  auto stranger = crypto::Identity::generate();
  auto [stranger_server, stranger_link] = attach(stranger, access_for(stranger, crypto::Identity::generate()));
  CHECK_THAT(stranger_link->start().message(), Catch::Contains("not this run's authority"));

  // Through the relay, a member's request is served and an outsider's is refused by the member itself.
  auto asker = crypto::Identity::generate();
  SocketOptions member_socket;
  member_socket.access = access_for(asker, authority);
  Client member_client(context, {.self = asker.peer_id(), .socket = member_socket});
  CHECK(ping(member_client, member_link->address()).is_ok());
  Client outsider_client(context, {.self = outsider.peer_id()});
  auto outsider_ping = ping(outsider_client, member_link->address());
  CHECK(outsider_ping.status().code() == Code::kUnauthorized);
}
