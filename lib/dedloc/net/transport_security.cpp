#include "dedloc/net/transport_security.hpp"

#include <sodium.h>

#include "dedloc/core/process_default.hpp"
#include "dedloc/net/peer_address.hpp"

namespace dedloc::net {

namespace {

ProcessDefault<const TransportKeys>& process_keys() {
  static ProcessDefault<const TransportKeys> keys;
  return keys;
}

zmq::const_buffer key_buffer(const crypto::CurveKey& key) { return zmq::const_buffer(key.data(), key.size()); }

}  // namespace

std::shared_ptr<const TransportKeys> TransportKeys::of(const crypto::Identity& identity) {
  auto keys = std::make_shared<TransportKeys>();
  keys->public_key = identity.public_key();
  keys->curve = identity.curve_keys();
  return keys;
}

std::shared_ptr<const TransportKeys> TransportKeys::process_default() { return process_keys().get(); }

void TransportKeys::set_process_default(std::shared_ptr<const TransportKeys> keys) { process_keys().set(std::move(keys)); }

bool curve_supported() { return zmq_has("curve") == 1; }

Status require_curve() {
  if (curve_supported()) return Status::ok();
  return error(Code::kUnavailable,
               "this libzmq was built without CURVE, so it cannot encrypt; run with --plaintext, or install a "
               "libzmq built with libsodium (Debian's libzmq5 is)");
}

Status make_curve_server(zmq::socket_t& socket, const TransportKeys& keys) {
  DEDLOC_RETURN_IF_ERROR(require_curve());
  socket.set(zmq::sockopt::curve_server, 1);
  socket.set(zmq::sockopt::curve_secretkey, key_buffer(keys.curve.secret_key));
  return Status::ok();
}

std::string advertised_endpoint(const std::string& bound, const TransportKeys* keys) {
  // Only TCP endpoints are dialled by others; inproc:// and ipc:// stay as they are, and so does an
  // endpoint that names a key already (an --announce address written out in full).
  if (!keys || bound.rfind("tcp://", 0) != 0) return bound;
  if (auto keyed = split_endpoint_key(bound); !keyed || keyed->key) return bound;
  return with_endpoint_key(bound, keys->public_key);
}

Status connect_to(zmq::socket_t& socket, std::string_view endpoint, const TransportKeys* own) {
  auto keyed = split_endpoint_key(endpoint);
  if (!keyed) return keyed.status();
  try {
    if (keyed->key) {
      DEDLOC_RETURN_IF_ERROR(require_curve());
      auto server_key = crypto::curve_public_key(*keyed->key);
      if (!server_key) return error(Code::kInvalidArgument, "'" + std::string(endpoint) + "': not a valid key after /k/");
      crypto::CurveKeyPair client;
      if (own) {
        client = own->curve;
      } else {
        crypto::ensure_sodium_initialized();
        crypto_box_keypair(client.public_key.data(), client.secret_key.data());
      }
      // Options are taken at connect(): a socket that dials several servers may hold a different key for each.
      socket.set(zmq::sockopt::curve_serverkey, key_buffer(*server_key));
      socket.set(zmq::sockopt::curve_publickey, key_buffer(client.public_key));
      socket.set(zmq::sockopt::curve_secretkey, key_buffer(client.secret_key));
      sodium_memzero(client.secret_key.data(), client.secret_key.size());
    }
    socket.connect(keyed->dial);
  } catch (const zmq::error_t& e) {
    return error(Code::kInvalidArgument, "cannot connect to '" + std::string(endpoint) + "': " + e.what());
  }
  return Status::ok();
}

}  // namespace dedloc::net
