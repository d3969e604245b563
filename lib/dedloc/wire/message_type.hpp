// Every message type dedloc speaks, with explicit numbers.
//
// Rules (ZeroMQ's contract rule): append only; a retired number is never reused; a number's meaning never
// changes. Ranges group the subsystems so a glance at a capture says who is talking.
#pragma once

#include <cstdint>
#include <string_view>

namespace dedloc::wire {

enum class MessageType : std::uint16_t {
  // 1-99: transport (net/)
  kErrorReply = 1,   // any request can be answered with this
  kPing = 2,         // liveness, version and clock check
  kPong = 3,
  kProbe = 4,        // echo of payload frames: latency and bandwidth measurements
  kProbeReply = 5,
  kStreamPart = 6,   // one part of a large byte stream, with its offset (flow-controlled by acks)
  kStreamAck = 7,
  // 100-199: DHT (dht_messages.hpp)
  kDhtFindNode = 100,        // the contacts nearest to a target id
  kDhtNodes = 101,
  kDhtFindValue = 102,       // the record under a key, plus the contacts nearest to it
  kDhtValue = 103,
  kDhtStore = 104,           // store one (signed) record
  kDhtStored = 105,
  kDhtListPeers = 106,       // what a node knows: its routing table and storage size
  kDhtPeerList = 107,
  kDhtCheckReachable = 108,  // "can you dial me back?": the bootstrap reachability check
  kDhtReachability = 109,
  // 200-299: averaging (avg_messages.hpp)
  kAvgJoin = 200,         // "take me into your group": held by the leader until BEGIN
  kAvgBegin = 201,        // the assembled group and its shares (the answer to an accepted AvgJoin)
  kAvgJoinRefused = 202,  // why not, and which leader to try
  kAvgPart = 203,         // one part of a sender's vector, to its reducer
  kAvgPartDelta = 204,    // the part's average minus what that sender sent
  kAvgStateRequest = 205, // a joiner asks a donor for (a stripe of) its training state
  kAvgStateReply = 206,   // the state's metadata and one part of its tensors
  kAvgResultRequest = 207,  // a member that missed a round asks one that took part for its result
  kAvgResultReply = 208,    // one stripe of that result
  // 300-399: relay, 400-499: training state (reserved)
};

// "Ping", "StreamPart", ... ; "unknown" for numbers this build does not know.
std::string_view message_type_name(MessageType type);

}  // namespace dedloc::wire
