// The DHT's messages (types 100-199). Same rules as messages.hpp: pinned keys, decoders that
// bound every collection and never trust a length.
//
// Every request from a node that can be dialled carries its endpoint ("ep"); the receiver then adds the
// sender (the envelope's "from") to its routing table. Client-mode nodes send an empty endpoint and never
// enter anyone's table. Refusals (an older record, a bad signature, a full storage) come back as ErrorReply.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "dedloc/core/status.hpp"
#include "dedloc/crypto/peer_id.hpp"
#include "dedloc/wire/map_codec.hpp"
#include "dedloc/wire/message_type.hpp"

namespace dedloc::wire {

// Bounds a hostile peer cannot exceed (the decoders refuse more).
inline constexpr size_t kMaxDhtContacts = 64;         // contacts in one reply
inline constexpr size_t kMaxPeerListContacts = 4096;  // contacts in one DhtPeerList
inline constexpr size_t kMaxEndpointBytes = 256;
inline constexpr size_t kMaxKeyNameBytes = 512;
inline constexpr size_t kMaxSubkeyBytes = 1024;
inline constexpr size_t kMaxRecordSubkeys = 4096;    // subkeys of one dictionary in one reply

struct ContactInfo {
  crypto::PeerId id;
  std::string endpoint;  // "tcp://host:port"
  double last_seen = 0;  // unix seconds; only DhtPeerList carries it

  bool operator==(const ContactInfo&) const = default;
};

// One stored value as it travels: a plain value has no subkey.
struct RecordEntry {
  std::optional<Bytes> subkey;
  Bytes value;
  double expiration = 0;  // unix seconds
  Bytes signature;        // the owner's ed25519 signature when the key or subkey names an owner, else empty

  bool operator==(const RecordEntry&) const = default;
};

struct DhtFindNode {
  static constexpr MessageType kType = MessageType::kDhtFindNode;
  static constexpr std::string_view kName = "DhtFindNode";
  crypto::PeerId target;
  std::string sender_endpoint;  // empty: a client-mode node

  void encode(MapWriter& out) const;
  static Result<DhtFindNode> decode(MapReader in);
};

struct DhtNodes {
  static constexpr MessageType kType = MessageType::kDhtNodes;
  static constexpr std::string_view kName = "DhtNodes";
  std::vector<ContactInfo> nearest;  // nearest to the target first

  void encode(MapWriter& out) const;
  static Result<DhtNodes> decode(MapReader in);
};

// A reader that read this node before sends where that read ended (the node's storage instance and the
// sequence number it had reached, from its DhtValue): the node then sends only the entries stored since.
struct DhtFindValue {
  static constexpr MessageType kType = MessageType::kDhtFindValue;
  static constexpr std::string_view kName = "DhtFindValue";
  crypto::PeerId key;
  std::string sender_endpoint;
  std::uint64_t since_instance = 0;  // 0: no earlier read, send everything
  std::uint64_t since_seq = 0;

  void encode(MapWriter& out) const;
  static Result<DhtFindValue> decode(MapReader in);
};

struct DhtValue {
  static constexpr MessageType kType = MessageType::kDhtValue;
  static constexpr std::string_view kName = "DhtValue";
  std::vector<RecordEntry> entries;  // empty: this node holds nothing live under the key (or nothing new)
  std::vector<ContactInfo> nearest;  // the node's contacts nearest to the key (the lookup goes on with them)
  // Where this read ended (the reader's next DhtFindValue sends it back), and how many live entries the
  // node holds under the key, those it left out as not new included. instance 0: a node that sends
  // everything every time (then `held` is not set either).
  std::uint64_t instance = 0;
  std::uint64_t seq = 0;
  std::uint64_t held = 0;

  void encode(MapWriter& out) const;
  static Result<DhtValue> decode(MapReader in);
};

struct DhtStore {
  static constexpr MessageType kType = MessageType::kDhtStore;
  static constexpr std::string_view kName = "DhtStore";
  std::string key_name;  // the key as the user named it; the node derives the key id and checks owners
  RecordEntry entry;
  std::string sender_endpoint;

  void encode(MapWriter& out) const;
  static Result<DhtStore> decode(MapReader in);
};

// A store doubles as a find-node: the reply lists the replier's contacts nearest to the key, so a put is
// one iterative lookup that stores as it goes, a round trip shorter than find-then-store.
struct DhtStored {
  static constexpr MessageType kType = MessageType::kDhtStored;
  static constexpr std::string_view kName = "DhtStored";
  std::vector<ContactInfo> nearest;

  void encode(MapWriter& out) const;
  static Result<DhtStored> decode(MapReader in);
};

struct DhtListPeers {
  static constexpr MessageType kType = MessageType::kDhtListPeers;
  static constexpr std::string_view kName = "DhtListPeers";
  std::uint64_t max_contacts = 1000;

  void encode(MapWriter& out) const;
  static Result<DhtListPeers> decode(MapReader in);
};

struct DhtPeerList {
  static constexpr MessageType kType = MessageType::kDhtPeerList;
  static constexpr std::string_view kName = "DhtPeerList";
  std::string endpoint;                // the answering node's own endpoint
  std::vector<ContactInfo> contacts;   // its routing table, with last_seen
  std::uint64_t stored_keys = 0;

  void encode(MapWriter& out) const;
  static Result<DhtPeerList> decode(MapReader in);
};

struct DhtCheckReachable {
  static constexpr MessageType kType = MessageType::kDhtCheckReachable;
  static constexpr std::string_view kName = "DhtCheckReachable";
  std::string endpoint;  // where the asking node says it can be dialled

  void encode(MapWriter& out) const;
  static Result<DhtCheckReachable> decode(MapReader in);
};

struct DhtReachability {
  static constexpr MessageType kType = MessageType::kDhtReachability;
  static constexpr std::string_view kName = "DhtReachability";
  bool reachable = false;
  std::string detail;  // why not: "no answer within 2000 ms", "answered as peer 1a2b3c4d"

  void encode(MapWriter& out) const;
  static Result<DhtReachability> decode(MapReader in);
};

}  // namespace dedloc::wire
