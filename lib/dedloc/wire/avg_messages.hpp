// Averaging's messages (types 200-299), DESIGN §6. Same rules as messages.hpp: pinned keys, decoders that
// bound every collection and never trust a length.
//
// Matchmaking: a peer asks a leader to take it with AvgJoin. The leader holds the request until its group
// is assembled and answers it with AvgBegin (the group, in order, and the shares it computed once for
// everyone), or at once with AvgJoinRefused saying why and, when it knows one, which leader to try.
// All-reduce: each sender sends every part of the vector to the part's reducer as AvgPart (one payload
// frame, in the sender's codec); the reducer answers each when that part is averaged, with AvgPartDelta:
// the average minus what the sender sent, in the same codec.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dedloc/core/status.hpp"
#include "dedloc/crypto/peer_id.hpp"
#include "dedloc/wire/map_codec.hpp"
#include "dedloc/wire/message_type.hpp"

namespace dedloc::wire {

inline constexpr size_t kMaxGroupSize = 256;
inline constexpr size_t kGroupIdBytes = 16;
inline constexpr size_t kSchemaHashBytes = 32;
inline constexpr size_t kMaxGroupKeyBytes = 256;

// How a member takes part (the planner's roles): NODE sends and reduces, CLIENT sends only (behind NAT:
// nobody can dial it), AUX reduces only (a CPU-only helper with no gradients of its own).
enum class AvgRole : std::uint8_t { kNode = 0, kClient = 1, kAux = 2 };

struct AvgJoin {
  static constexpr MessageType kType = MessageType::kAvgJoin;
  static constexpr std::string_view kName = "AvgJoin";
  std::string group_key;      // what is being averaged, e.g. "run1_grad"
  Bytes schema_hash;          // of the tensors' names, shapes and order: members must agree
  std::string endpoint;       // where the joiner serves parts; empty for a client
  AvgRole role = AvgRole::kNode;
  double bandwidth = 0;       // bytes/s the joiner can move each way (the shares depend on it)
  double wait_until = 0;      // unix seconds: the joiner gives up waiting for BEGIN then
  std::uint64_t members = 1;  // how many peers come with it (a leader merging its group into ours)

  void encode(MapWriter& out) const;
  static Result<AvgJoin> decode(MapReader in);
};

struct AvgBegin {
  static constexpr MessageType kType = MessageType::kAvgBegin;
  static constexpr std::string_view kName = "AvgBegin";
  Bytes group_id;                         // kGroupIdBytes random bytes: names this round everywhere
  std::vector<crypto::PeerId> ids;        // members in the leader's (shuffled) order
  std::vector<std::string> endpoints;     // same order; empty for clients
  std::vector<AvgRole> roles;             // same order
  std::vector<std::uint64_t> counts;      // elements each member reduces (0 for clients); sums to `length`
  std::uint64_t length = 0;               // elements of the whole vector
  std::uint64_t part_elements = 0;        // each reducer's range is cut into parts of this many elements

  void encode(MapWriter& out) const;
  static Result<AvgBegin> decode(MapReader in);
};

enum class JoinRefusal : std::uint8_t {
  kNotLooking = 1,    // not matchmaking for this key now
  kWrongSchema = 2,   // different tensors: never in one group
  kGroupFull = 3,
  kNotALeader = 4,    // follows another leader (`leader` names it)
  kDisbanded = 5,     // was a leader, joined a bigger group (`leader` names its new leader)
  kTooLate = 6,       // already assembled
  kBadRequest = 7,
};

struct AvgJoinRefused {
  static constexpr MessageType kType = MessageType::kAvgJoinRefused;
  static constexpr std::string_view kName = "AvgJoinRefused";
  JoinRefusal reason = JoinRefusal::kNotLooking;
  std::string detail;  // for people: "schema differs: ab12… here, cd34… from you"
  std::string leader;  // a leader's address (tcp://HOST:PORT/p/PEERID) to try instead, or empty

  void encode(MapWriter& out) const;
  static Result<AvgJoinRefused> decode(MapReader in);
};

struct AvgPart {
  static constexpr MessageType kType = MessageType::kAvgPart;
  static constexpr std::string_view kName = "AvgPart";
  Bytes group_id;
  std::uint64_t part = 0;    // index in the group's part grid
  double weight = 0;         // the sender's weight (samples accumulated); the same in all its parts
  std::uint64_t codec = 0;   // avg::Codec of the payload frame

  void encode(MapWriter& out) const;
  static Result<AvgPart> decode(MapReader in);
};

struct AvgPartDelta {
  static constexpr MessageType kType = MessageType::kAvgPartDelta;
  static constexpr std::string_view kName = "AvgPartDelta";
  std::uint64_t part = 0;
  std::uint64_t codec = 0;
  std::uint64_t senders = 0;  // contributions averaged into this part (fewer than the group: some failed)

  void encode(MapWriter& out) const;
  static Result<AvgPartDelta> decode(MapReader in);
};

}  // namespace dedloc::wire
