// libFuzzer target: the relay's routing frames, attach proofs and attach answers (wire/relay_frames.hpp),
// what a relay reads from anyone who dials it and what a peer reads back from a relay.
//
// Input: one selector byte, then the bytes the decoder gets.
//   0  decode_relay_frame     an accepted frame re-encodes to exactly the input
//   1  verify_attach_proof    for a fixed relay id and clock (the seeds hold proofs signed for them); an
//                             accepted proof names the PeerID of the key it carries, twice the same
//   2  decode_attach_answer   the status re-encodes and decodes to the same code
#include "fuzz/fuzz_target.hpp"

#include "dedloc/wire/relay_frames.hpp"
#include "fuzz/fixtures.hpp"

DEDLOC_FUZZ_TARGET(relay_frames) {
  using namespace dedloc;
  fuzz::Input in(data, size);
  const std::uint8_t selector = in.byte() % 3;
  const ByteSpan payload = in.rest();
  switch (selector) {
    case 0: {
      auto frame = wire::decode_relay_frame(payload);
      if (frame.is_ok() && frame->has_value()) {
        Bytes again = wire::encode_relay_frame((*frame)->tag, (*frame)->id);
        DEDLOC_FUZZ_CHECK(again == Bytes(payload.begin(), payload.end()));
      }
      break;
    }
    case 1: {
      const crypto::PeerId relay = fuzz::relay_id();
      auto peer = wire::verify_attach_proof(payload, relay, fuzz::kRelayClockMs, fuzz::kRelayWindowMs);
      if (peer.is_ok()) {
        auto again = wire::verify_attach_proof(payload, relay, fuzz::kRelayClockMs, fuzz::kRelayWindowMs);
        DEDLOC_FUZZ_CHECK(again.is_ok() && again->peer == peer->peer && again->access_token == peer->access_token);
        // The proof binds the relay: for another relay it must not verify.
        DEDLOC_FUZZ_CHECK(!wire::verify_attach_proof(payload, fuzz::fixed_peer_id(0x11), fuzz::kRelayClockMs,
                                                     fuzz::kRelayWindowMs)
                               .is_ok());
      }
      break;
    }
    default: {
      Status status = wire::decode_attach_answer(payload);
      Status again = wire::decode_attach_answer(wire::encode_attach_answer(status));
      DEDLOC_FUZZ_CHECK(again.code() == status.code());
      break;
    }
  }
  return 0;
}
