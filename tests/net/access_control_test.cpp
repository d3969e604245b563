// A private run on real loopback sockets: a server and clients each with their own access control.
// A peer with a valid token is served; a peer without one, with a forged, expired or other authority's
// token, or replaying a recorded request is refused with the reason; a sealed client refuses an unsealed
// reply.
#include <catch2/catch.hpp>

#include "dedloc/net/client.hpp"
#include "dedloc/net/server.hpp"
#include "dedloc/wire/messages.hpp"
#include "support/offset_clock.hpp"

using namespace dedloc;
using namespace dedloc::net;
using namespace std::chrono_literals;

namespace {

double now() { return SystemClock::instance().unix_seconds(); }

// One peer of a run: its identity and, when it has a token of `authority`, its access control.
struct Member {
  crypto::Identity identity = crypto::Identity::generate();
  std::shared_ptr<AccessControl> access;

  static Member with_token(const crypto::Identity& authority, double lifetime = 3600) {
    Member m;
    auto token = crypto::AccessToken::issue(authority, m.identity.public_key(), "member",
                                            static_cast<std::uint64_t>(now() + lifetime));
    REQUIRE(token.is_ok());
    auto access = AccessControl::create(m.identity, {.authority = authority.public_key(), .token = *token});
    REQUIRE(access.is_ok());
    m.access = *access;
    return m;
  }
  SocketOptions socket() const {
    SocketOptions options;
    options.access = access;
    return options;
  }
};

struct PrivateServer {
  Member member;
  Server server;
  PrivateServer(zmq::context_t& context, Member m)
      : member(std::move(m)), server(context, {.listen = "tcp://127.0.0.1:0", .self = member.identity.peer_id(),
                                               .socket = member.socket()}) {
    REQUIRE(server.start().is_ok());
  }
};

Status ping(zmq::context_t& context, const Member& from, const std::string& endpoint) {
  Client client(context, {.self = from.identity.peer_id(), .socket = from.socket()});
  auto pong = client.ask<wire::Pong>(endpoint, wire::Ping{1}, 5s);
  return pong.status();
}

// A request sealed by `sender` with `seal_with` (another peer's access, a forged frame...), sent raw.
struct RawRequest {
  std::vector<zmq::message_t> parts;
  RawRequest(const crypto::PeerId& sender, AccessControl* seal_with) {
    wire::Envelope env;
    env.request_id = 7;
    env.sender = sender;
    frame_message(env, Outgoing::of(wire::Ping{1}), parts, seal_with);
  }
  // Sends a copy of the parts on a fresh DEALER and returns the reply's Status (ok for a Pong).
  Status send(zmq::context_t& context, const std::string& endpoint) const {
    zmq::socket_t socket(context, zmq::socket_type::dealer);
    socket.set(zmq::sockopt::linger, 0);
    socket.set(zmq::sockopt::rcvtimeo, 5000);
    socket.connect(endpoint);
    for (size_t i = 0; i < parts.size(); ++i) {
      zmq::message_t copy(parts[i].data(), parts[i].size());
      socket.send(copy, i + 1 < parts.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
    }
    zmq::message_t header;
    if (!socket.recv(header)) return error(Code::kTimeout, "no reply");
    auto decoded = wire::decode_header({header.data<std::uint8_t>(), header.size()}, wire::Limits{});
    if (!decoded) return decoded.status();
    if (decoded->envelope().type != wire::MessageType::kErrorReply) return Status::ok();
    auto error_reply = wire::ErrorReply::decode(decoded->body());
    return error_reply ? error_reply->to_status() : error_reply.status();
  }
};

}  // namespace

TEST_CASE("A private run serves a peer with a valid token and refuses one without", "[net][access]") {
  zmq::context_t context;
  auto authority = crypto::Identity::generate();
  PrivateServer server(context, Member::with_token(authority));

  CHECK(ping(context, Member::with_token(authority), server.server.endpoint()).is_ok());

  auto outsider = ping(context, Member{}, server.server.endpoint());
  CHECK(outsider.code() == Code::kUnauthorized);
  CHECK_THAT(outsider.message(), Catch::Contains("this run is private"));
  CHECK_THAT(outsider.message(), Catch::Contains("--authority and --token"));

  auto other_run = ping(context, Member::with_token(crypto::Identity::generate()), server.server.endpoint());
  CHECK(other_run.code() == Code::kUnauthorized);
  CHECK_THAT(other_run.message(), Catch::Contains("not this run's authority"));
  CHECK(server.member.access->stats().refused == 2);
}

TEST_CASE("Forged, expired, borrowed and replayed tokens are refused with the reason", "[net][access]") {
  zmq::context_t context;
  auto authority = crypto::Identity::generate();
  PrivateServer server(context, Member::with_token(authority));
  const std::string endpoint = server.server.endpoint();
  auto valid = Member::with_token(authority);

  SECTION("forged: a token whose expiry was pushed out after signing") {
    RawRequest request(valid.identity.peer_id(), valid.access.get());
    auto& seal = request.parts.back();
    auto frame = wire::decode_auth_frame({seal.data<std::uint8_t>(), seal.size()});
    REQUIRE(frame.is_ok());
    auto token = crypto::AccessToken::decode(frame->token);
    REQUIRE(token.is_ok());
    token->expires += 86400 * 365;
    frame->token = token->encode();
    // Re-signed by the peer, so that only the token's own signature is wrong.
    auto header_bytes = Bytes(request.parts.front().data<std::uint8_t>(),
                              request.parts.front().data<std::uint8_t>() + request.parts.front().size());
    frame->signature = valid.identity.sign(wire::auth_signed_bytes(header_bytes, frame->time_ms, frame->nonce));
    Bytes forged = wire::encode_auth_frame(*frame);
    seal = zmq::message_t(forged.data(), forged.size());
    auto refused = request.send(context, endpoint);
    CHECK(refused.code() == Code::kUnauthorized);
    CHECK_THAT(refused.message(), Catch::Contains("forged signature"));
  }

  SECTION("expired: the authority's token ran out") {
    // AccessControl::create refuses an expired token of our own, so the frame is built by hand.
    Member late;
    auto token = crypto::AccessToken::issue(authority, late.identity.public_key(), "late",
                                            static_cast<std::uint64_t>(now() - 10));
    REQUIRE(token.is_ok());
    RawRequest request(late.identity.peer_id(), valid.access.get());
    auto& header = request.parts.front();
    wire::AuthFrame frame;
    frame.token = token->encode();
    frame.time_ms = static_cast<std::uint64_t>(now() * 1000);
    frame.signature = late.identity.sign(
        wire::auth_signed_bytes({header.data<std::uint8_t>(), header.size()}, frame.time_ms, frame.nonce));
    Bytes bytes = wire::encode_auth_frame(frame);
    request.parts.back() = zmq::message_t(bytes.data(), bytes.size());
    auto refused = request.send(context, endpoint);
    CHECK(refused.code() == Code::kUnauthorized);
    CHECK_THAT(refused.message(), Catch::Contains("expired"));
  }

  SECTION("borrowed: someone else's sealed request sent under our PeerID") {
    Member thief;
    RawRequest request(thief.identity.peer_id(), valid.access.get());  // sealed with valid's token and key
    auto refused = request.send(context, endpoint);
    CHECK(refused.code() == Code::kUnauthorized);
    CHECK_THAT(refused.message(), Catch::Contains("issued to peer"));
  }

  SECTION("replayed: a recorded valid request sent again") {
    RawRequest request(valid.identity.peer_id(), valid.access.get());
    CHECK(request.send(context, endpoint).is_ok());  // the original
    auto replayed = request.send(context, endpoint);
    CHECK(replayed.code() == Code::kUnauthorized);
    CHECK_THAT(replayed.message(), Catch::Contains("replayed"));
  }

  SECTION("replayed later: a recorded request older than the replay window") {
    // A server whose clock runs 60 s ahead sees a fresh request as 60 s old.
    test::OffsetClock ahead(60);
    auto token = crypto::AccessToken::issue(authority, server.member.identity.public_key(), "ahead",
                                            static_cast<std::uint64_t>(now() + 3600));
    REQUIRE(token.is_ok());
    auto access = AccessControl::create(server.member.identity,
                                        {.authority = authority.public_key(), .token = *token, .clock = &ahead});
    REQUIRE(access.is_ok());
    SocketOptions options;
    options.access = *access;
    Server later(context, {.listen = "tcp://127.0.0.1:0", .self = server.member.identity.peer_id(), .socket = options});
    REQUIRE(later.start().is_ok());
    RawRequest request(valid.identity.peer_id(), valid.access.get());
    auto refused = request.send(context, later.endpoint());
    CHECK(refused.code() == Code::kUnauthorized);
    CHECK_THAT(refused.message(), Catch::Contains("replay window"));
  }

  SECTION("revoked: the authority withdrew the peer's token") {
    server.member.access->set_revoked({valid.identity.public_key()});
    auto refused = ping(context, valid, endpoint);
    CHECK(refused.code() == Code::kUnauthorized);
    CHECK_THAT(refused.message(), Catch::Contains("revoked"));
  }
}

TEST_CASE("A peer of a private run refuses replies from a peer without a token", "[net][access]") {
  zmq::context_t context;
  auto authority = crypto::Identity::generate();
  auto open_identity = crypto::Identity::generate();
  Server open_server(context, {.listen = "tcp://127.0.0.1:0", .self = open_identity.peer_id()});
  REQUIRE(open_server.start().is_ok());
  auto refused = ping(context, Member::with_token(authority), open_server.endpoint());
  CHECK(refused.code() == Code::kUnauthorized);
  CHECK_THAT(refused.message(), Catch::Contains("carries no access token"));
}

TEST_CASE("An AccessControl is only made from a valid token of this identity", "[net][access]") {
  auto authority = crypto::Identity::generate();
  auto me = crypto::Identity::generate();
  auto someone = crypto::Identity::generate();
  auto theirs = crypto::AccessToken::issue(authority, someone.public_key(), "someone", static_cast<std::uint64_t>(now() + 60));
  REQUIRE(theirs.is_ok());
  auto wrong_peer = AccessControl::create(me, {.authority = authority.public_key(), .token = *theirs});
  CHECK_THAT(wrong_peer.status().message(), Catch::Contains("not to this identity"));
  auto expired = crypto::AccessToken::issue(authority, me.public_key(), "me", static_cast<std::uint64_t>(now() - 1));
  REQUIRE(expired.is_ok());
  CHECK_THAT(AccessControl::create(me, {.authority = authority.public_key(), .token = *expired}).status().message(),
             Catch::Contains("expired"));
}

TEST_CASE("A connection whose requests fail their access check is throttled before they are checked",
          "[net][access]") {
  zmq::context_t context;
  auto authority = crypto::Identity::generate();
  PrivateServer server(context, Member::with_token(authority));
  // 1000 requests without a token at once, on one connection: each failed check costs the connection 100
  // requests of its budget (20,000 at first), so about 200 are checked and the rest refused unread.
  auto outsider = crypto::Identity::generate();
  Client client(context, {.self = outsider.peer_id()});
  std::vector<PendingCall> calls;
  for (int i = 0; i < 1000; ++i) {
    calls.push_back(client.call(server.server.endpoint(), Outgoing::of(wire::Ping{1}), Deadline::after(10s)));
  }
  size_t unauthorized = 0, throttled = 0;
  for (auto& call : calls) {
    auto outcome = call.wait();
    if (outcome.status().code() == Code::kUnauthorized) ++unauthorized;
    if (outcome.status().code() == Code::kRefused) ++throttled;
  }
  INFO(unauthorized << " checked and refused, " << throttled << " throttled");
  CHECK(unauthorized + throttled == 1000);
  CHECK(unauthorized < 400);
  CHECK(server.server.stats().rate_limited == throttled);
  // A member on its own connection is served meanwhile.
  CHECK(ping(context, Member::with_token(authority), server.server.endpoint()).is_ok());
}
