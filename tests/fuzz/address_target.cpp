// libFuzzer target: peer addresses (net/peer_address.hpp). DHT contacts, donor and relay records, group
// member lists and a request's sender endpoint all carry them, so anyone can write one, and a keyed one
// decides which key a client trusts (net/transport_security.hpp).
//
// Input: the address text. Checks: parsing accepts or refuses cleanly; an accepted address prints back to
// text that parses to the same endpoint and PeerID; a keyed address is encrypted and its PeerID is its
// key's; the endpoint-key helpers agree with the parser and never crash.
#include "fuzz/fuzz_target.hpp"

#include "dedloc/net/peer_address.hpp"

DEDLOC_FUZZ_TARGET(address) {
  using namespace dedloc;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto address = net::PeerAddress::parse(text);
  if (address.is_ok()) {
    auto again = net::PeerAddress::parse(address->to_string());
    DEDLOC_FUZZ_CHECK(again.is_ok());
    DEDLOC_FUZZ_CHECK(again->endpoint == address->endpoint);
    DEDLOC_FUZZ_CHECK(again->peer_id == address->peer_id);
    auto relayed = net::parse_relay_endpoint(address->endpoint);
    DEDLOC_FUZZ_CHECK(relayed.is_ok());
    if (!*relayed) {
      auto host_port = net::parse_tcp_endpoint(address->endpoint);
      DEDLOC_FUZZ_CHECK(host_port.is_ok());
      DEDLOC_FUZZ_CHECK(address->encrypted() == host_port->key.has_value());
      if (host_port->key) DEDLOC_FUZZ_CHECK(address->peer_id == crypto::PeerId::from_public_key(*host_port->key));
    }
    if (address->peer_id) DEDLOC_FUZZ_CHECK(net::endpoint_key_matches(address->endpoint, *address->peer_id));
  }
  auto keyed = net::split_endpoint_key(text);
  if (keyed.is_ok() && keyed->key) {
    DEDLOC_FUZZ_CHECK(net::with_endpoint_key(keyed->dial, *keyed->key).size() == keyed->dial.size() + 3 + 64);
  }
  (void)net::endpoint_key_matches(text, crypto::PeerId{});
  return 0;
}
