// libFuzzer target: the envelope decoder and every message schema's decoder.
//
// Built as a real fuzzer with -DDEDLOC_FUZZ=ON (clang), and linked into the unit tests, where
// replay_test.cpp runs it over the checked-in corpus in tests/fuzz/corpus/envelope/.
#include <cstddef>
#include <cstdint>

#include "fuzz/fuzz_target.hpp"
#include "dedloc/wire/avg_messages.hpp"
#include "dedloc/wire/dht_messages.hpp"
#include "dedloc/wire/envelope.hpp"
#include "dedloc/wire/messages.hpp"

namespace {

template <class Message>
void try_decode(const dedloc::wire::DecodedHeader& header) {
  auto message = Message::decode(header.body());
  if (message.is_ok()) {
    // Re-encoding what was accepted must work too.
    dedloc::wire::MapWriter out;
    message->encode(out);
    (void)out.to_bytes();
  }
}

}  // namespace

DEDLOC_FUZZ_TARGET(envelope) {
  using namespace dedloc::wire;
  Limits limits;
  limits.max_header_bytes = 1u << 16;  // keep the fuzzer fast; the logic is the same
  auto header = decode_header({data, size}, limits);
  (void)peek_request_id({data, size}, limits);
  if (!header.is_ok()) return 0;
  try_decode<ErrorReply>(*header);
  try_decode<Ping>(*header);
  try_decode<Pong>(*header);
  try_decode<Probe>(*header);
  try_decode<ProbeReply>(*header);
  try_decode<StreamPart>(*header);
  try_decode<StreamAck>(*header);
  try_decode<DhtFindNode>(*header);
  try_decode<DhtNodes>(*header);
  try_decode<DhtFindValue>(*header);
  try_decode<DhtValue>(*header);
  try_decode<DhtStore>(*header);
  try_decode<DhtStored>(*header);
  try_decode<DhtListPeers>(*header);
  try_decode<DhtPeerList>(*header);
  try_decode<DhtCheckReachable>(*header);
  try_decode<DhtReachability>(*header);
  try_decode<AvgJoin>(*header);
  try_decode<AvgBegin>(*header);
  try_decode<AvgJoinRefused>(*header);
  try_decode<AvgPart>(*header);
  try_decode<AvgPartDelta>(*header);
  try_decode<AvgStateRequest>(*header);
  try_decode<AvgStateReply>(*header);
  try_decode<AvgResultRequest>(*header);
  try_decode<AvgResultReply>(*header);
  return 0;
}
