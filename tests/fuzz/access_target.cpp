// libFuzzer target: what a private run decodes from anyone: access tokens
// (crypto/access_token.hpp, binary and text), authentication frames (wire/auth_frame.hpp) as an access
// control checks them, the token an attach proof carries (wire/relay_frames.hpp), and revocation lists
// (dht/revocations.hpp).
//
// Input: one selector byte, then the bytes the decoder gets.
//   0  AccessToken::decode   an accepted token re-encodes to exactly the input; verify() never crashes
//   1  AccessToken::from_text the same through the text form
//   2  decode_auth_frame     an accepted frame re-encodes to exactly the input; AccessControl::check of it
//                            (for a fixed authority and clock) never accepts a frame not signed by its token's key
//   3  verify_attach_proof   (the fixtures' relay and clock) the token of a proof that verifies is admitted or
//                            refused cleanly
//   4  decode_revocations    an accepted list survives a round trip
#include "fuzz/fuzz_target.hpp"

#include "dedloc/crypto/access_token.hpp"
#include "dedloc/dht/revocations.hpp"
#include "dedloc/net/access_control.hpp"
#include "dedloc/wire/auth_frame.hpp"
#include "dedloc/wire/relay_frames.hpp"
#include "fuzz/fixtures.hpp"

namespace {

using namespace dedloc;

// The run the checks are made for: the fixtures' identity is the authority and holds a token of its own.
net::AccessControl& access() {
  static ManualClock clock(fuzz::kRecordsNow);  // fixed at the fixtures' time: seeds signed for it stay valid
  static std::shared_ptr<net::AccessControl> access = [] {
    const auto& authority = fuzz::identity();
    auto token = crypto::AccessToken::issue(authority, authority.public_key(), "fuzz",
                                            static_cast<std::uint64_t>(fuzz::kRecordsNow + 3600));
    return net::AccessControl::create(authority, {.authority = authority.public_key(), .token = token.value(),
                                                  .clock = &clock})
        .value();
  }();
  return *access;
}

}  // namespace

DEDLOC_FUZZ_TARGET(access) {
  fuzz::Input in(data, size);
  const std::uint8_t selector = in.byte() % 5;
  const ByteSpan payload = in.rest();
  switch (selector) {
    case 0: {
      auto token = crypto::AccessToken::decode(payload);
      if (token.is_ok()) {
        DEDLOC_FUZZ_CHECK(token->encode() == Bytes(payload.begin(), payload.end()));
        (void)token->verify(fuzz::identity().public_key(), fuzz::kRecordsNow);
      }
      break;
    }
    case 1: {
      auto token = crypto::AccessToken::from_text(std::string_view(reinterpret_cast<const char*>(payload.data()), payload.size()));
      if (token.is_ok()) DEDLOC_FUZZ_CHECK(crypto::AccessToken::from_text(token->to_text()).is_ok());
      break;
    }
    case 2: {
      auto frame = wire::decode_auth_frame(payload);
      if (frame.is_ok()) {
        DEDLOC_FUZZ_CHECK(wire::encode_auth_frame(*frame) == Bytes(payload.begin(), payload.end()));
        // Checked against an empty header from the token's peer: acceptance needs that peer's signature.
        auto token = crypto::AccessToken::decode(frame->token);
        const crypto::PeerId sender = token.is_ok() ? token->peer_id() : fuzz::fixed_peer_id(1);
        Status checked = access().check({}, sender, payload);
        if (checked.is_ok()) {
          DEDLOC_FUZZ_CHECK(token.is_ok());
          DEDLOC_FUZZ_CHECK(crypto::verify_signature(token->peer, wire::auth_signed_bytes({}, frame->time_ms, frame->nonce),
                                                     frame->signature));
        }
      }
      break;
    }
    case 3: {
      auto proof = wire::verify_attach_proof(payload, fuzz::relay_id(), fuzz::kRelayClockMs, fuzz::kRelayWindowMs);
      if (proof.is_ok()) (void)access().admit(proof->access_token, proof->peer);
      break;
    }
    default: {
      auto revoked = dht::decode_revocations(payload);
      if (revoked.is_ok()) DEDLOC_FUZZ_CHECK(dht::decode_revocations(dht::encode_revocations(*revoked)).value() == *revoked);
      break;
    }
  }
  return 0;
}
