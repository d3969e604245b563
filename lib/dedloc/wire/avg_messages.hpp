// Averaging's messages (types 200-299). Same rules as messages.hpp: pinned keys, decoders that
// bound every collection and never trust a length.
//
// Matchmaking: a peer asks a leader to take it with AvgJoin. The leader holds the request until its group
// is assembled and answers it with AvgBegin (the group, in order, and the shares it computed once for
// everyone), or at once with AvgJoinRefused saying why and, when it knows one, which leader to try.
// All-reduce: each sender sends every part of the vector to the part's reducer as AvgPart (one payload
// frame, in the sender's codec); the reducer answers each when that part is averaged, with AvgPartDelta:
// the average minus what the sender sent, in the same codec, or, when the part asked for it
// (PartAnswer::kAverage), the average itself: the same bytes to every sender that asked, so that all of
// them end the round with bit-identical values.
// State download: a joiner asks a donor for its training state with AvgStateRequest, one bounded stripe of
// the flattened tensors at a time (and the state's description first); the donor answers each with
// AvgStateReply (the epoch and schema hash the stripe belongs to, and the stripe in one payload frame), or
// with an ErrorReply (kRefused "busy: N downloads in progress" when it already serves its limit).
// A round's result: a member that missed a round (it came after the others formed their group) asks one
// that took part for the values the round ended with, one bounded stripe at a time, with AvgResultRequest;
// the holder answers each with AvgResultReply (the round's schema hash, length and weighed contributions,
// and the stripe as float32 in one payload frame), or kNotFound when it holds no result of that round.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <variant>
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

// A member a merging leader brings with it (one of its followers, or theirs).
struct JoinCompanion {
  crypto::PeerId id;
  std::string endpoint;  // empty for a client
  AvgRole role = AvgRole::kNode;
  double bandwidth = 0;  // bytes/s each way
  std::string relay;     // a client's address through its relay (pings only); empty otherwise

  bool operator==(const JoinCompanion&) const = default;
};

struct AvgJoin {
  static constexpr MessageType kType = MessageType::kAvgJoin;
  static constexpr std::string_view kName = "AvgJoin";
  std::string group_key;      // what is being averaged, e.g. "run1_grad"
  Bytes schema_hash;          // of the tensors' names, shapes and order: members must agree
  std::string endpoint;       // where the joiner serves parts; empty for a client
  AvgRole role = AvgRole::kNode;
  double bandwidth = 0;       // bytes/s the joiner can move each way (the shares depend on it)
  double wait_until = 0;      // unix seconds: the joiner gives up waiting for BEGIN then
  std::uint64_t members = 1;  // peers this join is for: 1 + companions.size()
  // A leader merging its partly filled group into an earlier leader's brings its followers along: the
  // earlier leader puts them all in BEGIN and the merging leader passes BEGIN on to them.
  std::vector<JoinCompanion> companions;
  // "rly", left out when empty: a client's address through its relay (relay://...), where the other
  // members ping it during a round to learn at once that it died (its parts would otherwise be waited
  // for to the sender timeout). Nothing else is sent there.
  std::string relay;

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
  // "rlys": same order, the clients' addresses through their relays (AvgJoin::relay), for liveness pings.
  // Left out when every one is empty (so older leaders send none); decoded, one per member, all empty
  // when absent. Built locally it may also be left empty: no member has one.
  std::vector<std::string> relays;

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
  std::string leader;  // a leader's address (tcp://HOST:PORT/k/KEY) to try instead, or empty

  void encode(MapWriter& out) const;
  static Result<AvgJoinRefused> decode(MapReader in);
};

// What a sender asks its part's reducer to answer with. The delta keeps the sender's own precision where
// the codec is lossy (parameters averaged in 8 bits lose only the delta's rounding); the average is the
// same for every member (gradients, pseudo-gradients: values whose members must agree to the bit).
enum class PartAnswer : std::uint8_t { kDelta = 0, kAverage = 1 };

struct AvgPart {
  static constexpr MessageType kType = MessageType::kAvgPart;
  static constexpr std::string_view kName = "AvgPart";
  Bytes group_id;
  std::uint64_t part = 0;    // index in the group's part grid
  double weight = 0;         // the sender's weight (samples accumulated); the same in all its parts
  std::uint64_t codec = 0;   // avg::Codec of the payload frame
  PartAnswer answer = PartAnswer::kDelta;  // "ans", left out when kDelta (older peers send none)
  // "o", left out when kNoOrder: where the sender's contribution goes in a round summed in a fixed order
  // (avg::AllReduceOptions::order_key), so that groups holding the same contributions sum them alike.
  std::uint64_t order = kNoOrder;
  static constexpr std::uint64_t kNoOrder = ~std::uint64_t{0};

  void encode(MapWriter& out) const;
  static Result<AvgPart> decode(MapReader in);
};

struct AvgPartDelta {
  static constexpr MessageType kType = MessageType::kAvgPartDelta;
  static constexpr std::string_view kName = "AvgPartDelta";
  std::uint64_t part = 0;
  std::uint64_t codec = 0;
  std::uint64_t senders = 0;  // contributions averaged into this part (fewer than the group: some failed)
  // What the payload is. kDelta also answers a part that asked for the average when nothing was weighed
  // (a zero delta: every sender keeps its values).
  PartAnswer answer = PartAnswer::kDelta;
  // "w": the total weight of the contributions averaged into this part (0 from older peers, which send
  // none): a member learns its group's weight from it (avg::AllReduceResult::weight).
  double weight = 0;

  void encode(MapWriter& out) const;
  static Result<AvgPartDelta> decode(MapReader in);
};

// ---- State download (docs/architecture.md) ----

inline constexpr size_t kMaxStateKeyBytes = 256;
inline constexpr size_t kMaxStateTensors = 16384;          // the description must also fit the 1 MiB header
inline constexpr size_t kMaxTensorNameBytes = 1024;
inline constexpr size_t kMaxTensorRank = 16;
inline constexpr size_t kMaxStateEntries = 1024;           // free-form metadata entries
inline constexpr size_t kMaxStateEntryKeyBytes = 256;
inline constexpr size_t kMaxStateEntryStringBytes = 4096;
inline constexpr std::uint64_t kMaxStateElements = std::uint64_t{1} << 48;
inline constexpr std::uint64_t kMaxStatePartElements = std::uint64_t{1} << 22;  // 16 MiB of float32 per reply

// One tensor of a training state: its name and row-major shape ({} is a scalar: one element).
struct StateTensor {
  std::string name;
  std::vector<std::uint64_t> shape;

  // The product of the dimensions; nullopt when it exceeds kMaxStateElements.
  std::optional<std::uint64_t> elements() const;
  bool operator==(const StateTensor&) const = default;
};

// A free-form metadata value: a number (integers travel as msgpack integers and come back as doubles, so
// exact up to 2^53) or a string.
using StateValue = std::variant<double, std::string>;
using StateEntries = std::map<std::string, StateValue, std::less<>>;

struct AvgStateRequest {
  static constexpr MessageType kType = MessageType::kAvgStateRequest;
  static constexpr std::string_view kName = "AvgStateRequest";
  std::string key;                     // whose state: the run id
  std::optional<std::uint64_t> epoch;  // only this epoch's state; absent: the donor's newest (a first request)
  std::uint64_t offset = 0;            // first element of the stripe, in the tensors flattened in order
  std::uint64_t length = 0;            // elements wanted (<= kMaxStatePartElements); 0: no payload
  std::uint64_t codec = 0;             // avg::Codec of the payload
  bool describe = false;               // put the tensors' names and shapes and the metadata in the reply
  bool done = false;                   // the downloader is finished here: the donor frees its slot

  void encode(MapWriter& out) const;
  static Result<AvgStateRequest> decode(MapReader in);
};

struct AvgStateReply {
  static constexpr MessageType kType = MessageType::kAvgStateReply;
  static constexpr std::string_view kName = "AvgStateReply";
  std::string key;
  std::uint64_t epoch = 0;         // of the snapshot this reply comes from
  Bytes schema_hash;               // kSchemaHashBytes: BLAKE2b-256 of the tensors' names and shapes, in order
  std::uint64_t total = 0;         // elements of all tensors
  std::uint64_t offset = 0;        // the stripe in the payload frame (no frame when length is 0)
  std::uint64_t length = 0;
  std::uint64_t codec = 0;
  std::uint64_t downloads = 0;     // downloads the donor serves now, this one included
  bool described = false;          // the two fields below were sent (the request asked to describe)
  std::vector<StateTensor> tensors;  // in flattening order; their elements sum to `total`
  StateEntries metadata;

  void encode(MapWriter& out) const;
  static Result<AvgStateReply> decode(MapReader in);
};

// ---- A round's result, for a member that missed the round (avg/round_result.hpp) ----

struct AvgResultRequest {
  static constexpr MessageType kType = MessageType::kAvgResultRequest;
  static constexpr std::string_view kName = "AvgResultRequest";
  std::string round;         // the round's group key, e.g. "run1_grad.12.x" (at most kMaxGroupKeyBytes)
  std::uint64_t offset = 0;  // first element of the stripe
  std::uint64_t length = 0;  // elements wanted (<= kMaxStatePartElements); 0: the description alone

  void encode(MapWriter& out) const;
  static Result<AvgResultRequest> decode(MapReader in);
};

struct AvgResultReply {
  static constexpr MessageType kType = MessageType::kAvgResultReply;
  static constexpr std::string_view kName = "AvgResultReply";
  std::string round;
  Bytes schema_hash;                // kSchemaHashBytes: of the averaged tensors
  std::uint64_t total = 0;          // elements of the whole result
  std::uint64_t contributions = 0;  // "n": weighed contributions averaged into it (at least 1)
  std::uint64_t offset = 0;         // the stripe in the payload frame (float32, little-endian; no frame when
  std::uint64_t length = 0;         // length is 0)

  bool operator==(const AvgResultReply&) const = default;
  void encode(MapWriter& out) const;
  static Result<AvgResultReply> decode(MapReader in);
};

}  // namespace dedloc::wire
