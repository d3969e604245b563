#include "dedloc/net/access_control.hpp"

#include <sodium.h>

#include <cmath>

#include "dedloc/core/process_default.hpp"

namespace dedloc::net {

namespace {

constexpr size_t kMaxVerifiedTokens = 4096;

ProcessDefault<AccessControl>& process_access() {
  static ProcessDefault<AccessControl> access;
  return access;
}

std::uint64_t unix_ms(const Clock& clock) { return static_cast<std::uint64_t>(std::llround(clock.unix_seconds() * 1000)); }

}  // namespace

Result<std::shared_ptr<AccessControl>> AccessControl::create(const crypto::Identity& identity, AccessOptions options) {
  if (options.token.peer != identity.public_key()) {
    return error(Code::kInvalidArgument, "the token was issued to peer " + options.token.peer_id().to_string() +
                                             " (name '" + options.token.name + "'), not to this identity " +
                                             identity.peer_id().to_string() + " (--identity)");
  }
  DEDLOC_RETURN_IF_ERROR(options.token.verify(options.authority, options.clock->unix_seconds()));
  return std::shared_ptr<AccessControl>(new AccessControl(identity, std::move(options)));
}

AccessControl::AccessControl(const crypto::Identity& identity, AccessOptions options)
    : identity_(identity), options_(std::move(options)), token_bytes_(options_.token.encode()) {}

Bytes AccessControl::seal(ByteSpan header) const {
  crypto::ensure_sodium_initialized();
  wire::AuthFrame frame;
  frame.token = token_bytes_;
  frame.time_ms = unix_ms(*options_.clock);
  randombytes_buf(frame.nonce.data(), frame.nonce.size());
  frame.signature = identity_.sign(wire::auth_signed_bytes(header, frame.time_ms, frame.nonce));
  return wire::encode_auth_frame(frame);
}

Status AccessControl::check_token(ByteSpan token_bytes, const crypto::PeerId& sender, double now,
                                  crypto::PublicKey& peer_key) {
  const std::string cache_key(token_bytes.begin(), token_bytes.end());
  std::uint64_t expires = 0;
  {
    std::lock_guard lock(mutex_);
    auto cached = verified_tokens_.find(cache_key);
    if (cached != verified_tokens_.end()) {
      peer_key = cached->second.first;
      expires = cached->second.second;
    }
  }
  if (expires == 0) {  // not seen before: decode and check the authority's signature (outside the lock)
    auto token = crypto::AccessToken::decode(token_bytes);
    if (!token) return error(Code::kUnauthorized, "this run is private: " + token.status().message());
    DEDLOC_RETURN_IF_ERROR(token->verify(options_.authority, now));
    peer_key = token->peer;
    expires = token->expires;
    std::lock_guard lock(mutex_);
    if (verified_tokens_.size() >= kMaxVerifiedTokens) verified_tokens_.clear();
    verified_tokens_.emplace(cache_key, std::make_pair(peer_key, expires));
  }
  if (now >= static_cast<double>(expires)) return error(Code::kUnauthorized, "the sender's access token has expired");
  if (crypto::PeerId::from_public_key(peer_key) != sender) {
    return error(Code::kUnauthorized, "the access token was issued to peer " +
                                          crypto::PeerId::from_public_key(peer_key).short_string() + ", not to the sender " +
                                          sender.short_string());
  }
  std::lock_guard lock(mutex_);
  if (revoked_.contains(peer_key)) return error(Code::kUnauthorized, "the sender's access token was revoked");
  return Status::ok();
}

std::uint64_t AccessControl::window_ms() const {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(options_.replay_window).count());
}

void AccessControl::forget_old_nonces(std::uint64_t now_ms) {
  while (!by_time_.empty() && by_time_.front().first + window_ms() < now_ms) {
    nonces_.erase(by_time_.front().second);
    by_time_.pop_front();
  }
}

Status AccessControl::check(ByteSpan header, const crypto::PeerId& sender, std::optional<ByteSpan> auth_bytes) {
  Status outcome = [&]() -> Status {
    if (!auth_bytes) {
      return error(Code::kUnauthorized, "this run is private: the message carries no access token "
                                        "(start the peer with --authority and --token)");
    }
    if (sender.is_zero()) return error(Code::kUnauthorized, "this run is private: the message names no sender");
    auto frame = wire::decode_auth_frame(*auth_bytes);
    if (!frame) return error(Code::kUnauthorized, "this run is private: " + frame.status().message());
    const double now = options_.clock->unix_seconds();
    crypto::PublicKey peer_key{};
    DEDLOC_RETURN_IF_ERROR(check_token(frame->token, sender, now, peer_key));
    const auto now_ms = static_cast<std::uint64_t>(std::llround(now * 1000));
    const std::uint64_t skew = frame->time_ms > now_ms ? frame->time_ms - now_ms : now_ms - frame->time_ms;
    if (skew > window_ms()) {
      return error(Code::kUnauthorized, "the message's time is " + std::to_string(skew / 1000) +
                                            " s from ours (more than the replay window of " +
                                            std::to_string(window_ms() / 1000) + " s): a replay, or a clock to fix");
    }
    if (!crypto::verify_signature(peer_key, wire::auth_signed_bytes(header, frame->time_ms, frame->nonce),
                                  frame->signature)) {
      return error(Code::kUnauthorized, "the message's signature is not the sender's");
    }
    // Only a message that passed every check takes a place in the replay memory.
    std::lock_guard lock(mutex_);
    forget_old_nonces(now_ms);
    std::string nonce(frame->nonce.begin(), frame->nonce.end());
    if (nonces_.contains(nonce)) return error(Code::kUnauthorized, "a replayed message (its nonce was seen before)");
    if (nonces_.size() >= options_.max_remembered) {
      return error(Code::kRefused, "too many messages within the replay window; try again later");
    }
    nonces_.insert(nonce);
    by_time_.emplace_back(frame->time_ms, std::move(nonce));
    return Status::ok();
  }();
  std::lock_guard lock(mutex_);
  ++(outcome.is_ok() ? stats_.accepted : stats_.refused);
  return outcome;
}

Status AccessControl::admit(ByteSpan token, const crypto::PeerId& holder) {
  if (token.empty()) {
    return error(Code::kUnauthorized, "this run is private: no access token (start the peer with --authority and --token)");
  }
  crypto::PublicKey key{};
  return check_token(token, holder, options_.clock->unix_seconds(), key);
}

void AccessControl::set_revoked(std::set<crypto::PublicKey> revoked) {
  std::lock_guard lock(mutex_);
  revoked_ = std::move(revoked);
}

AccessStats AccessControl::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

std::shared_ptr<AccessControl> AccessControl::process_default() { return process_access().get(); }

void AccessControl::set_process_default(std::shared_ptr<AccessControl> access) { process_access().set(std::move(access)); }

}  // namespace dedloc::net
