#include "dedloc/wire/message_type.hpp"

namespace dedloc::wire {

std::string_view message_type_name(MessageType type) {
  switch (type) {
    case MessageType::kErrorReply: return "ErrorReply";
    case MessageType::kPing: return "Ping";
    case MessageType::kPong: return "Pong";
    case MessageType::kProbe: return "Probe";
    case MessageType::kProbeReply: return "ProbeReply";
    case MessageType::kStreamPart: return "StreamPart";
    case MessageType::kStreamAck: return "StreamAck";
    case MessageType::kDhtFindNode: return "DhtFindNode";
    case MessageType::kDhtNodes: return "DhtNodes";
    case MessageType::kDhtFindValue: return "DhtFindValue";
    case MessageType::kDhtValue: return "DhtValue";
    case MessageType::kDhtStore: return "DhtStore";
    case MessageType::kDhtStored: return "DhtStored";
    case MessageType::kDhtListPeers: return "DhtListPeers";
    case MessageType::kDhtPeerList: return "DhtPeerList";
    case MessageType::kDhtCheckReachable: return "DhtCheckReachable";
    case MessageType::kDhtReachability: return "DhtReachability";
    case MessageType::kAvgJoin: return "AvgJoin";
    case MessageType::kAvgBegin: return "AvgBegin";
    case MessageType::kAvgJoinRefused: return "AvgJoinRefused";
    case MessageType::kAvgPart: return "AvgPart";
    case MessageType::kAvgPartDelta: return "AvgPartDelta";
    case MessageType::kAvgStateRequest: return "AvgStateRequest";
    case MessageType::kAvgStateReply: return "AvgStateReply";
    case MessageType::kAvgResultRequest: return "AvgResultRequest";
    case MessageType::kAvgResultReply: return "AvgResultReply";
  }
  return "unknown";
}

}  // namespace dedloc::wire
