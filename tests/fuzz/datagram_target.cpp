// libFuzzer target: a UDP datagram as a DHT node reads it from anyone (wire/datagram.hpp): the prefix, the
// seal (opened with the fixture identity's key, as the receiver; the seeds are sealed for it), and the body.
//
// Properties: an accepted body re-encodes to exactly the bytes it was decoded from, and a plain datagram
// made of it decodes to the same prefix and body again.
#include "fuzz/fuzz_target.hpp"

#include "dedloc/wire/datagram.hpp"
#include "fuzz/fixtures.hpp"

DEDLOC_FUZZ_TARGET(datagram) {
  using namespace dedloc;
  auto envelope = wire::decode_datagram(ByteSpan(data, size));
  if (!envelope.is_ok()) return 0;
  Bytes opened;
  ByteSpan body_bytes = envelope->sealed_or_body;
  if (envelope->sender) {
    auto key = wire::datagram_shared_key(*envelope->sender, fuzz::identity().curve_keys().secret_key);
    if (!key) return 0;
    auto body = wire::open_datagram(*envelope, *key);
    if (!body.is_ok()) return 0;
    opened = std::move(*body);
    body_bytes = opened;
  }
  auto body = wire::decode_datagram_body(body_bytes, 66);
  if (!body.is_ok()) return 0;
  const Bytes again = wire::encode_datagram_body(*body);
  DEDLOC_FUZZ_CHECK(again == Bytes(body_bytes.begin(), body_bytes.end()));
  const Bytes plain_datagram = wire::encode_datagram(again, nullptr, nullptr);
  auto plain = wire::decode_datagram(plain_datagram);
  DEDLOC_FUZZ_CHECK(plain.is_ok() && !plain->sender);
  DEDLOC_FUZZ_CHECK(Bytes(plain->sealed_or_body.begin(), plain->sealed_or_body.end()) == again);
  return 0;
}
