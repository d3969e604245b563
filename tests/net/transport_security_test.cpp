// Encrypted transport: ZeroMQ CURVE keyed by the peers' identities, on real sockets. A TCP
// recorder between client and server stands for someone on the path: it sees every byte, and must not
// see the payload when the transport is encrypted (and does when it is not, which shows the check works).
#include <catch2/catch.hpp>

#include "dedloc/core/bytes.hpp"
#include "dedloc/crypto/identity.hpp"
#include "dedloc/net/client.hpp"
#include "dedloc/net/peer_address.hpp"
#include "dedloc/net/server.hpp"
#include "dedloc/wire/messages.hpp"
#include "support/tcp_recorder.hpp"

using namespace dedloc;
using namespace dedloc::net;
using namespace std::chrono_literals;

namespace {

const std::string kSecret = "the gradient of layer 7 is 0.1234567 -- nobody on the path should read this";

std::uint16_t port_of(const std::string& endpoint) { return parse_tcp_endpoint(endpoint).value().port; }

// An echoing Probe carrying kSecret, sent to `endpoint`; the reply, or why there is none.
Result<Incoming> probe(Client& client, const std::string& endpoint, Duration timeout = 10s) {
  std::vector<zmq::message_t> frames;
  frames.emplace_back(kSecret.data(), kSecret.size());
  return client.call(endpoint, Outgoing::of(wire::Probe{1, true}, std::move(frames)), Deadline::after(timeout)).wait();
}

ServerOptions encrypted_server(const crypto::Identity& identity) {
  ServerOptions options{.self = identity.peer_id()};
  options.socket.transport = TransportKeys::of(identity);
  return options;
}

}  // namespace

TEST_CASE("An encrypted server is dialled through its keyed endpoint, and the path sees no payload",
          "[net][curve]") {
  REQUIRE(curve_supported());
  zmq::context_t context;
  auto server_identity = crypto::Identity::generate();
  auto client_identity = crypto::Identity::generate();
  Server server(context, encrypted_server(server_identity));
  REQUIRE(server.start().is_ok());

  // The endpoint carries the key, and the key names the peer.
  CHECK(server.endpoint() == with_endpoint_key(split_endpoint_key(server.endpoint()).value().dial,
                                               server_identity.public_key()));
  auto address = PeerAddress::parse(server.endpoint());
  REQUIRE(address.is_ok());
  CHECK(address->peer_id == server_identity.peer_id());
  CHECK(address->encrypted());
  CHECK(address->to_string() == server.endpoint());

  test::TcpRecorder path(port_of(server.endpoint()));
  ClientOptions client_options{.self = client_identity.peer_id()};
  client_options.socket.transport = TransportKeys::of(client_identity);
  Client client(context, client_options);
  auto reply = probe(client, with_endpoint_key(path.endpoint(), server_identity.public_key()));
  REQUIRE(reply.is_ok());
  CHECK(reply->envelope().sender == server_identity.peer_id());
  REQUIRE(reply->frames.size() == 1);  // the ProbeReply's payload: our frame, echoed
  CHECK(reply->frames[0].to_string() == kSecret);

  const std::string seen = path.recorded();
  CHECK(path.connections() == 1);
  CHECK(seen.size() > 2 * kSecret.size());  // the request and the echo went through the recorder...
  CHECK(seen.find(kSecret) == std::string::npos);  // ...and it could read neither
  CHECK(seen.find("Probe") == std::string::npos);

  SECTION("a client with no keys of its own dials with a fresh keypair") {
    Client anonymous(context, {});
    CHECK(probe(anonymous, server.endpoint()).is_ok());
  }
}

TEST_CASE("Without keys the same exchange is readable on the path (what the encrypted test rules out)",
          "[net][curve]") {
  zmq::context_t context;
  Server server(context, {});
  REQUIRE(server.start().is_ok());
  CHECK(server.endpoint().find("/k/") == std::string::npos);
  CHECK_FALSE(PeerAddress::parse(server.endpoint()).value().encrypted());
  test::TcpRecorder path(port_of(server.endpoint()));
  Client client(context, {});
  REQUIRE(probe(client, path.endpoint()).is_ok());
  CHECK(path.recorded().find(kSecret) != std::string::npos);
}

TEST_CASE("An encrypted server answers no one who dials with another key or in plaintext", "[net][curve]") {
  REQUIRE(curve_supported());
  zmq::context_t context;
  auto server_identity = crypto::Identity::generate();
  Server server(context, encrypted_server(server_identity));
  REQUIRE(server.start().is_ok());
  const std::string dial = split_endpoint_key(server.endpoint()).value().dial;
  Client client(context, {});

  SECTION("another peer's key: the handshake fails, as it would against an impostor") {
    auto impostor_key = crypto::Identity::generate().public_key();
    auto reply = probe(client, with_endpoint_key(dial, impostor_key), 1500ms);
    CHECK(reply.status().code() == Code::kTimeout);
  }
  SECTION("a key that is no curve point (a small-order one) is refused before dialling") {
    auto reply = probe(client, with_endpoint_key(dial, crypto::PublicKey{}), 1500ms);
    CHECK(reply.status().code() == Code::kInvalidArgument);
    CHECK_THAT(reply.status().message(), Catch::Contains("not a valid key after /k/"));
  }
  SECTION("no key: a plaintext client is not let in") {
    auto reply = probe(client, dial, 1500ms);
    CHECK(reply.status().code() == Code::kTimeout);
  }
  CHECK(server.stats().requests == 0);
  // The server is unharmed: the right key still gets an answer.
  CHECK(probe(client, server.endpoint()).is_ok());
  CHECK(server.stats().requests == 1);
}

TEST_CASE("Endpoint keys: parsed, checked against the peer they claim, kept when made dialable", "[net][curve]") {
  auto identity = crypto::Identity::generate();
  const std::string hex = to_hex(identity.public_key());
  const std::string keyed = "tcp://127.0.0.1:4000/k/" + hex;

  auto split = split_endpoint_key(keyed);
  REQUIRE(split.is_ok());
  CHECK(split->dial == "tcp://127.0.0.1:4000");
  CHECK(split->key == identity.public_key());
  CHECK(split_endpoint_key("tcp://127.0.0.1:4000").value().key == std::nullopt);

  // The /p/ id, when given too, must be the key's.
  CHECK(PeerAddress::parse(keyed + "/p/" + identity.peer_id().to_string()).is_ok());
  auto mismatch = PeerAddress::parse(keyed + "/p/" + crypto::Identity::generate().peer_id().to_string());
  CHECK(mismatch.status().code() == Code::kInvalidArgument);
  CHECK_THAT(mismatch.status().message(), Catch::Contains("not the /p/ id's"));

  // Malformed keys are refused with the reason, never dialled.
  const std::vector<std::string> malformed{"tcp://127.0.0.1:4000/k/", "tcp://127.0.0.1:4000/k/12ab",
                                          "tcp://127.0.0.1:4000/k/" + std::string(64, 'z')};
  for (const auto& bad : malformed) {
    INFO(bad);
    CHECK(PeerAddress::parse(bad).status().code() == Code::kInvalidArgument);
    CHECK_FALSE(parse_tcp_endpoint(bad).is_ok());
  }

  // A host that would print back as another address (the address fuzzer's find) is refused.
  CHECK(PeerAddress::parse("p/c://[24.:38").status().code() == Code::kInvalidArgument);
  CHECK(PeerAddress::parse("tcp://[2001:db8::1]:31337/k/" + hex).is_ok());

  // DHT contacts: an endpoint whose key is not the claimed id's is a lie; keyless ones have nothing to check.
  CHECK(endpoint_key_matches(keyed, identity.peer_id()));
  CHECK_FALSE(endpoint_key_matches(keyed, crypto::Identity::generate().peer_id()));
  CHECK(endpoint_key_matches("tcp://127.0.0.1:4000", crypto::Identity::generate().peer_id()));

  // A wildcard bind is advertised with a routable host and the same key.
  auto dialable = dialable_endpoint("tcp://0.0.0.0:4000/k/" + hex, "127.0.0.1");
  CHECK(dialable == "tcp://127.0.0.1:4000/k/" + hex);

  // Relays: the key after the relay's host names the relay; the peer behind it is /p/.
  auto relay_identity = crypto::Identity::generate();
  const std::string relay_endpoint = with_endpoint_key("tcp://127.0.0.1:5000", relay_identity.public_key());
  const std::string relayed = relay_address(relay_endpoint, identity.peer_id());
  CHECK(relayed == "relay://127.0.0.1:5000/k/" + to_hex(relay_identity.public_key()) + "/p/" +
                       identity.peer_id().to_string());
  auto route = parse_relay_endpoint(relayed);
  REQUIRE(route.is_ok());
  REQUIRE(route->has_value());
  CHECK((*route)->relay_endpoint == relay_endpoint);
  CHECK((*route)->target == identity.peer_id());
  auto relayed_address = PeerAddress::parse(relayed);
  REQUIRE(relayed_address.is_ok());
  CHECK(relayed_address->encrypted());
  CHECK(relayed_address->peer_id == identity.peer_id());
  CHECK(endpoint_key_matches(relayed, identity.peer_id()));
}
