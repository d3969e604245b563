// The DHT record families: every key, subkey, value and schema that peers leave in the DHT for each other,
// in one place, as messages.hpp is for messages (docs/wire-protocol.md, "DHT records", is the prose form;
// tests/unit/record_golden_test.cpp pins the bytes).
//
//   family          key                              subkey                     value
//   progress        "{run}_progress"                 owner marker of the peer   map, ProgressRecord
//   metrics         "{run}_metrics"                  owner marker of the peer   map, MetricsRecord
//   donors          "{run}_donors"                   the donor's address        map, DonorRecord
//   vector schema   "{run}_grad_schema"              none (a plain value)       map, VectorSchema
//   relay listings  "dedloc_relays"                  owner marker of the relay  map, RelayRecord
//   round results   "{round}_held"                   the holder's address       map, RoundResultRecord
//   revocations     "dedloc_revocations" + owner     none (a plain value)       32-byte keys, sorted
//                   marker of the run's authority
// An empty value under an owned subkey is a withdrawn record (its peer left); readers skip it. Matchmaking
// declarations ("{run}_{round}_matchmaking", the raw schema hash under the peer's address, for the seconds a
// search lasts; the hash and 'F' once a one-group key's group formed) stay with the matchmaker,
// avg/matchmaking.hpp and avg/group_formation.hpp.
//
// Only encoding lives here: nothing talks to a DHT. Each family's module publishes and reads its records
// through these functions (collab/progress.hpp, avg/state_transfer.hpp, avg/averager.hpp,
// relay/relay_directory.hpp, dht/revocations.hpp), and registers its schema with a node's validator
// (dht/record_schema.hpp's add_record_schema). Field keys are the literals written in records.cpp, pinned
// like message keys: renaming a C++ member never changes a record. Decoders take any bytes (anyone can
// store anything in a DHT), skip keys they do not know (newer peers may add optional fields), check every
// type, and return kMalformed naming the record; nothing here asserts on input.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "dedloc/core/bytes.hpp"
#include "dedloc/core/status.hpp"
#include "dedloc/crypto/identity.hpp"

namespace dedloc::wire {

// ---- Owned entries ----

// "[owner:<64 hex digits of an ed25519 public key>]": in a key name or subkey, it makes the entry owned by
// that key: a DHT node stores only values signed by it (dht/record.hpp checks the signature).
inline constexpr std::string_view kOwnerMarkerOpen = "[owner:";
std::string owner_marker(const crypto::PublicKey& key);

// ---- Schemas: the shape a DHT node checks before it stores a value ----

enum class FieldKind { kCount, kNumber, kString, kBool, kBinary };  // kCount: a non-negative integer

struct FieldRule {
  std::string name;
  FieldKind kind = FieldKind::kNumber;
  bool required = true;
  double min = -std::numeric_limits<double>::infinity();  // for kCount and kNumber
  double max = std::numeric_limits<double>::infinity();
};

// A family whose values are msgpack maps with these fields (other keys are allowed and ignored, so newer
// peers can add fields; an empty value, a withdrawn record, passes too).
struct RecordSchema {
  std::string key_suffix;  // the family's records are the keys whose name ends with this
  std::string name;        // names the record in errors ("progress record")
  std::vector<FieldRule> fields;
};

// ---- Progress: how far each peer of a run is (collab/progress.hpp) ----

std::string progress_key(std::string_view run_id);  // "{run_id}_progress"

// {"epoch": uint, "n": uint, "sps": float, "t": float, "client": bool, "bw": float, "flops": float};
// "client", "bw" and "flops" are optional (absent: false, 0, 0).
struct ProgressRecord {
  std::uint64_t epoch = 0;                 // "epoch": global steps the peer has taken
  std::uint64_t samples_accumulated = 0;   // "n": samples accumulated toward the next step
  double samples_per_second = 0;           // "sps": an EMA over compute time only (averaging pauses it)
  double time = 0;                         // "t": unix seconds when measured
  bool client_mode = false;                // "client": behind NAT, it sends gradients but reduces nothing
  double bandwidth = 0;                    // "bw": bytes/s it can move each way (dedloc-plan --live)
  double compute = 0;                      // "flops": samples/s it computes at best, for the planner
  // "ph": a fingerprint of the peer's parameters at `epoch` (avg::parameters_hash; DiLoCo: of θ_outer), so
  // that a peer whose parameters left the swarm's notices (collab/divergence.hpp); 0: none published.
  std::uint64_t params_hash = 0;
  // "rs", "rm": the median and MAD, in seconds, of the peer's recent all-reduce durations (with adaptive
  // deadlines, once it has enough: collab/deadline_estimator.hpp), from which a newcomer starts; 0: none.
  double round_seconds = 0;
  double round_mad_seconds = 0;
  // "mb": samples per micro-batch. Its samples then grow a micro-batch at a time, at `time` plus multiples
  // of mb / sps (`time` is the end of a micro-batch), and others extrapolate them so; 0: continuously.
  std::uint64_t micro_batch = 0;
  // "j": the epoch of the swarm's state the peer loaded when it joined a running swarm (0: it started from
  // its own state). The round it joined in was split into buckets without it (collab/group_buckets.hpp).
  std::uint64_t joined_at = 0;
  std::string peer;                        // not in the value: the owner subkey, filled by readers

  bool operator==(const ProgressRecord&) const = default;
};

Bytes encode_progress(const ProgressRecord& progress);
// kMalformed for anything but a well-formed record (numbers negative or not finite included).
Result<ProgressRecord> decode_progress(ByteSpan value);
const RecordSchema& progress_schema();  // "_progress"

// ---- Metrics: what monitors show of each peer (collab/progress.hpp, monitor/) ----

std::string metrics_key(std::string_view run_id);  // "{run_id}_metrics"

// {"epoch": uint, "loss": float, "sps": float, "steps": uint, "t": float, "role": str, "B": uint,
//  "rounds": uint, "mode": str, "inner": uint, "sent": uint, "computed": uint}; all but "epoch", "sps",
// "steps" and "t" are optional. "mode", "inner", "sent" and "computed" are written only when set (not
// empty, not 0): a record without them (an aux peer's, an older trainer's) encodes as it did before them.
struct MetricsRecord {
  std::uint64_t epoch = 0;               // "epoch"
  std::optional<double> loss;            // "loss": the mean micro-batch loss of the last epoch; absent before
                                         // the first epoch ends and when not finite (a diverged peer still shows)
  double samples_per_second = 0;         // "sps"
  std::uint64_t micro_steps = 0;         // "steps": micro-steps toward the current epoch
  std::string role = "trainer";          // "role": "trainer", "client" or "aux" (absent: "trainer")
  std::uint64_t target_batch_size = 0;   // "B": the run's global batch, for the monitor's ETA (0: not said)
  std::uint64_t rounds = 0;              // "rounds": averaging rounds this peer took part in
  double time = 0;                       // "t": unix seconds
  std::string peer;                      // not in the value: the owner subkey, filled by readers
  // The collaboration mode (train/collaboration_mode.hpp) and what it costs the network, for monitors:
  std::string mode;                      // "mode": "synchronous", "delayed" or "diloco"; empty: not said (aux peers, older
                                         // trainers)
  std::uint64_t inner_steps = 0;         // "inner": inner steps this peer took in its last outer step (diloco;
                                         // 0 when synchronous or before its first outer step)
  std::uint64_t bytes_sent = 0;          // "sent": averaging payload bytes it sent since it started
  std::uint64_t samples_computed = 0;    // "computed": samples it computed since it started

  bool operator==(const MetricsRecord&) const = default;
};

Bytes encode_metrics(const MetricsRecord& metrics);
// kMalformed for anything but a well-formed record (an unknown role or mode included).
Result<MetricsRecord> decode_metrics(ByteSpan value);
const RecordSchema& metrics_schema();  // "_metrics"

// ---- Donors: peers that serve the training state (avg/state_transfer.hpp) ----

std::string donors_key(std::string_view run_id);  // "{run_id}_donors"; the subkey is the donor's address

// {"ep": str, "epoch": uint, "load": uint, "max": uint, "prio": float, "t": float}; "load", "max", "prio"
// and "t" optional ("t" is newer than the others: records of older peers lack it).
struct DonorRecord {
  std::string endpoint;                // "ep": where to ask (never empty)
  std::uint64_t epoch = 0;             // "epoch": of the state it serves, as advertised
  std::uint64_t downloads = 0;         // "load": downloads in progress when advertised
  std::uint64_t max_downloads = 0;     // "max": its limit (0: unknown)
  double priority = 0;                 // "prio": the owner's preference, higher first
  double refreshed = 0;                // "t": unix seconds when its owner last stored it (0: not said). With
                                       // the entry's expiration it tells a reader the record's TTL and age:
                                       // a donor that stopped refreshing is probably gone

  bool operator==(const DonorRecord&) const = default;
};

Bytes encode_donor(const DonorRecord& donor);
// kMalformed for anything but a well-formed record (an empty endpoint, a negative or non-finite "t" included).
Result<DonorRecord> decode_donor(ByteSpan value);
const RecordSchema& donor_schema();  // "_donors"

// ---- The vector schema: the layout of a run's averaged vector (avg/averager.hpp) ----

// "{run_id}_grad_schema", a plain value. Published by the peers that have a model, so that an aux peer,
// which has none, learns what it averages. No validator schema is registered for it: its readers check it.
std::string vector_schema_key(std::string_view run_id);

// {"hash": bin (kSchemaHashBytes), "len": uint}
struct VectorSchema {
  Bytes hash;                  // "hash": the schema hash of the averaged tensors (wire::kSchemaHashBytes)
  std::uint64_t length = 0;    // "len": elements

  bool operator==(const VectorSchema&) const = default;
};

Bytes encode_vector_schema(const VectorSchema& schema);
// kMalformed for anything but a well-formed record (a hash of the wrong size included).
Result<VectorSchema> decode_vector_schema(ByteSpan value);

// ---- Relay listings: where peers behind NAT find relays (relay/relay_directory.hpp) ----

inline constexpr std::string_view kRelaysKey = "dedloc_relays";  // the subkey: the relay's owner marker

// {"addr": str, "peers": uint, "max": uint}; "peers" and "max" optional.
struct RelayRecord {
  std::string address;          // "addr": "tcp://HOST:PORT/k/RELAYKEY", which must name the entry's owner
  std::uint64_t peers = 0;      // "peers": attached now
  std::uint64_t max_peers = 0;  // "max": its limit

  bool operator==(const RelayRecord&) const = default;
};

Bytes encode_relay_listing(const RelayRecord& relay);
// kMalformed for a value that does not decode; the address is checked by its reader (net::PeerAddress).
Result<RelayRecord> decode_relay_listing(ByteSpan value);
const RecordSchema& relay_schema();  // "_relays"

// ---- Round results: who holds a finished round's result (avg/round_result.hpp) ----

// "{round}_held" (the round's group key, e.g. "run1_grad.12.x"); the subkey is the holder's averaging
// endpoint, where it answers AvgResultRequest for that round.
std::string round_result_key(std::string_view round);

// {"hash": bin, "len": uint, "n": uint}
struct RoundResultRecord {
  Bytes schema_hash;                // "hash": of the averaged tensors (kSchemaHashBytes)
  std::uint64_t length = 0;         // "len": elements
  std::uint64_t contributions = 0;  // "n": weighed contributions averaged into it (readers prefer more)

  bool operator==(const RoundResultRecord&) const = default;
};

Bytes encode_round_result(const RoundResultRecord& record);
// kMalformed for anything but a well-formed record (a hash of the wrong size, no contribution).
Result<RoundResultRecord> decode_round_result(ByteSpan value);
const RecordSchema& round_result_schema();  // "_held"

// ---- Revocations: the keys a private run's authority withdrew (dht/revocations.hpp) ----

// "dedloc_revocations" + owner_marker(authority): owned by the authority, so only it can write the list.
std::string revocation_key(const crypto::PublicKey& authority);

// At most this many keys in one list (the DHT's 64 KiB value limit holds 2048).
inline constexpr size_t kMaxRevokedKeys = 2000;

// The keys, 32 bytes each, in ascending order (no map: a list of fixed-size keys).
Bytes encode_revocations(const std::set<crypto::PublicKey>& revoked);
// Any bytes: kMalformed unless a whole number of keys, at most kMaxRevokedKeys.
Result<std::set<crypto::PublicKey>> decode_revocations(ByteSpan value);

}  // namespace dedloc::wire
