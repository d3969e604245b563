// Progress records (docs/architecture.md): how far each peer of a run is, published in the DHT so that every peer can
// estimate when the swarm has gathered the global batch, without a master.
//
// Under "{run_id}_progress" each peer owns one subkey, "[owner:<its public key>]", so the DHT accepts an
// entry there only with that peer's signature: nobody can report progress on another's behalf. The value
// is a msgpack map (wire format, see docs/wire-protocol.md):
//   "epoch"  uint   global steps the peer has taken
//   "n"      uint   samples accumulated toward the next step
//   "sps"    float  samples/s (an EMA over compute time only: averaging pauses it)
//   "t"      float  unix seconds when measured
//   "client" bool   behind NAT: it sends gradients but reduces nothing
//   "bw"     float  bytes/s it can move each way (dedloc-plan --live)
//   "flops"  float  samples/s it computes at best, for the planner (optional)
// A withdrawn record (a peer that left) is an empty value.
//
// Metrics records, for monitors (dedloc-avg monitor), live beside them under "{run_id}_metrics" with the same
// owner subkey:
//   "epoch" uint, "loss" float (optional: the mean micro-batch loss of the last epoch; absent before the
//   first epoch ends and when it is not finite, so that a diverged peer still shows), "sps" float, "steps" uint
//   (micro-steps toward the current epoch), "t" float (unix seconds),
//   "role" string (optional: "trainer", "client" or "aux"; "trainer" when absent),
//   "B" uint (optional: the run's global batch, for the monitor's ETA),
//   "rounds" uint (optional: averaging rounds this peer took part in).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dedloc/core/bytes.hpp"
#include "dedloc/core/clock.hpp"
#include "dedloc/core/status.hpp"
#include "dedloc/dht/node.hpp"
#include "dedloc/dht/validator.hpp"

namespace dedloc::collab {

struct PeerProgress {
  std::uint64_t epoch = 0;
  std::uint64_t samples_accumulated = 0;
  double samples_per_second = 0;
  double time = 0;                 // unix seconds
  bool client_mode = false;
  double bandwidth = 0;            // bytes/s each way
  double compute = 0;              // samples/s at best
  std::string peer;                // who (the owner subkey); filled when read from the DHT

  bool operator==(const PeerProgress&) const = default;
};

std::string progress_key(const std::string& run_id);
std::string metrics_key(const std::string& run_id);
// The kind of averaging round (Averager::step's `what`) for the gradients of the step that ends `epoch`:
// gradients are averaged only among peers at the same epoch, that is, computed on the same parameters. A
// peer that fell behind without knowing it yet then finds no group, steps alone, and downloads the
// state once it sees how far behind it is, instead of applying others' gradients to other parameters.
std::string gradient_round(std::uint64_t epoch);

// The subkey a peer owns in these record families: "[owner:<its public key>]".
Bytes own_subkey(const dht::Node& node);
Bytes encode_progress(const PeerProgress& progress);
Result<PeerProgress> decode_progress(ByteSpan value);
// Registers the progress schema ("_progress") with a node's validator (before node.start()).
void add_progress_schema(dht::RecordValidator& validator);

// Publishes our record until now + ttl, under our own owner subkey (signed by the node's identity).
Status publish_progress(dht::Node& node, const std::string& run_id, const PeerProgress& progress, Duration ttl,
                        Deadline deadline);
// Withdraws our record (an empty value that outlives the old one briefly), so others stop counting us.
Status withdraw_progress(dht::Node& node, const std::string& run_id, Duration ttl, Deadline deadline);
struct PeerMetrics {
  std::uint64_t epoch = 0;
  std::optional<double> loss;           // none yet, or not finite
  double samples_per_second = 0;
  std::uint64_t micro_steps = 0;
  std::string role = "trainer";         // "trainer", "client" or "aux"
  std::uint64_t target_batch_size = 0;  // 0: not said
  std::uint64_t rounds = 0;
  double time = 0;                      // unix seconds; publish_metrics stamps it
  std::string peer;                     // the owner subkey; filled when read from the DHT

  bool operator==(const PeerMetrics&) const = default;
};
Bytes encode_metrics(const PeerMetrics& metrics);
// kMalformed for anything but a well-formed record.
Result<PeerMetrics> decode_metrics(ByteSpan value);
// Registers the metrics schema ("_metrics") with a node's validator (before node.start()).
void add_metrics_schema(dht::RecordValidator& validator);
// Withdraws our metrics record (as withdraw_progress), so monitors stop listing us at once.
Status withdraw_metrics(dht::Node& node, const std::string& run_id, Duration ttl, Deadline deadline);
// Publishes our metrics record (stamped now) until now + ttl.
Status publish_metrics(dht::Node& node, const std::string& run_id, PeerMetrics metrics, Duration ttl,
                       Deadline deadline);
// Every live, well-formed metrics record of the run.
Result<std::vector<PeerMetrics>> read_metrics(dht::Node& node, const std::string& run_id, Deadline deadline);

// Every live, well-formed record of the run (withdrawn and malformed ones are skipped).
Result<std::vector<PeerProgress>> read_progress(dht::Node& node, const std::string& run_id, Deadline deadline);

}  // namespace dedloc::collab
