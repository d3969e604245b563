// Access control for a private collaboration (docs/security.md): who may talk to this peer.
//
// A peer started with --authority PUBKEY --token FILE seals every message it sends (requests and replies)
// with an authentication frame (wire/auth_frame.hpp): its access token, the time and a random nonce,
// signed with its own key. It accepts a message only when the frame is there and
//   - the token is signed by the run's authority, not forged, not expired, and not revoked;
//   - the token was issued to the message's sender (the PeerID in the envelope is the token's key's);
//   - the signature over the header, time and nonce is the sender's: the token alone proves nothing, it is
//     shown with every message;
//   - the time is within `replay_window` of ours and the nonce was not seen within it: a recorded message
//     replayed later, or twice, is refused.
// Error replies travel unsealed when the peer has no token (a peer telling an outsider "this run is
// private"); a sealed peer accepts an unsealed ErrorReply as the failure of its call, which anyone on the
// path could cause anyway by dropping the reply.
//
// Thread-safe: servers and clients of one process share one AccessControl (the process default, which the
// tools install from their flags: cli::load_identity).
#pragma once

#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "dedloc/core/clock.hpp"
#include "dedloc/crypto/access_token.hpp"
#include "dedloc/crypto/identity.hpp"
#include "dedloc/wire/auth_frame.hpp"

namespace dedloc::net {

struct AccessOptions {
  crypto::PublicKey authority{};  // the run's authority: tokens must carry its signature
  crypto::AccessToken token;      // ours, issued by `authority` to our identity's public key
  // A message's time may differ from ours by this much; its nonce is remembered this long.
  Duration replay_window = std::chrono::seconds(30);
  // Nonces remembered at once: a flood past this many messages per window is refused, not remembered.
  size_t max_remembered = 500000;
  const Clock* clock = &SystemClock::instance();
};

struct AccessStats {
  std::uint64_t accepted = 0;
  std::uint64_t refused = 0;
};

class AccessControl {
 public:
  // Checks that the token is for `identity` and valid for the authority now; the error says which flag to fix.
  static Result<std::shared_ptr<AccessControl>> create(const crypto::Identity& identity, AccessOptions options);

  // Our authentication frame for a message whose header frame is `header`.
  Bytes seal(ByteSpan header) const;
  // Whether the message with this header, from `sender`, and this authentication frame (nullopt: it came
  // without one) may be accepted. kUnauthorized with the reason (kRefused when the replay memory is full).
  Status check(ByteSpan header, const crypto::PeerId& sender, std::optional<ByteSpan> auth_frame);
  // Whether `token` (an access token's binary form; empty: none) admits `holder` to the run: the checks of
  // a message's token, without a message (a relay admitting an attaching peer). kUnauthorized with the reason.
  Status admit(ByteSpan token, const crypto::PeerId& holder);
  // Replaces the set of revoked peer keys (a revocation list published by the authority).
  void set_revoked(std::set<crypto::PublicKey> revoked);

  const crypto::PublicKey& authority() const { return options_.authority; }
  const crypto::AccessToken& token() const { return options_.token; }
  AccessStats stats() const;

  // The access control of this process, shared by every server and client that is not given another
  // (SocketOptions::access); null: an open run, messages are neither sealed nor checked.
  static std::shared_ptr<AccessControl> process_default();
  static void set_process_default(std::shared_ptr<AccessControl> access);

 private:
  AccessControl(const crypto::Identity& identity, AccessOptions options);
  Status check_token(ByteSpan token_bytes, const crypto::PeerId& sender, double now, crypto::PublicKey& peer_key);
  void forget_old_nonces(std::uint64_t now_ms);
  std::uint64_t window_ms() const;

  crypto::Identity identity_;
  AccessOptions options_;
  Bytes token_bytes_;

  mutable std::mutex mutex_;
  // Tokens whose signature was checked: (token bytes → its peer key and expiry), so that the ed25519
  // check of a token runs once, not per message. Bounded: cleared when full.
  std::unordered_map<std::string, std::pair<crypto::PublicKey, std::uint64_t>> verified_tokens_;
  std::set<crypto::PublicKey> revoked_;
  std::unordered_set<std::string> nonces_;                     // seen within the window
  std::deque<std::pair<std::uint64_t, std::string>> by_time_;  // (message time, nonce), oldest first
  AccessStats stats_;
};

}  // namespace dedloc::net
