// Progress records (docs/architecture.md): how far each peer of a run is, published in the DHT so that every peer can
// estimate when the swarm has gathered the global batch, without a master. Metrics records, for monitors
// (dedloc-avg monitor), live beside them.
//
// Under "{run_id}_progress" (and "{run_id}_metrics") each peer owns one subkey, "[owner:<its public key>]",
// so the DHT accepts an entry there only with that peer's signature: nobody can report progress on
// another's behalf. A withdrawn record (a peer that left) is an empty value. The keys, the value maps and
// their schemas are in the record catalogue, wire/records.hpp (docs/wire-protocol.md, "DHT records"); this
// module publishes, withdraws and reads them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dedloc/core/bytes.hpp"
#include "dedloc/core/clock.hpp"
#include "dedloc/core/status.hpp"
#include "dedloc/dht/node.hpp"
#include "dedloc/dht/validator.hpp"
#include "dedloc/wire/records.hpp"

namespace dedloc::collab {

// The records, under the names this module has always given them (wire/records.hpp has their format).
using PeerProgress = wire::ProgressRecord;
using PeerMetrics = wire::MetricsRecord;
using wire::decode_metrics;
using wire::decode_progress;
using wire::encode_metrics;
using wire::encode_progress;
using wire::metrics_key;
using wire::progress_key;

// The kind of averaging round (Averager::step's `what`) for the gradients of the step that ends `epoch`:
// gradients are averaged only among peers at the same epoch, that is, computed on the same parameters. A
// peer that fell behind without knowing it yet then finds no group, steps alone, and downloads the
// state once it sees how far behind it is, instead of applying others' gradients to other parameters.
std::string gradient_round(std::uint64_t epoch);

// The subkey a peer owns in these record families: "[owner:<its public key>]".
Bytes own_subkey(const dht::Node& node);
// Registers the progress schema ("_progress") with a node's validator (before node.start()).
void add_progress_schema(dht::RecordValidator& validator);

// Publishes our record until now + ttl, under our own owner subkey (signed by the node's identity).
Status publish_progress(dht::Node& node, const std::string& run_id, const PeerProgress& progress, Duration ttl,
                        Deadline deadline);
// Withdraws our record (an empty value that outlives the old one briefly), so others stop counting us.
Status withdraw_progress(dht::Node& node, const std::string& run_id, Duration ttl, Deadline deadline);
// Registers the metrics schema ("_metrics") with a node's validator (before node.start()).
void add_metrics_schema(dht::RecordValidator& validator);
// Withdraws our metrics record (as withdraw_progress), so monitors stop listing us at once.
Status withdraw_metrics(dht::Node& node, const std::string& run_id, Duration ttl, Deadline deadline);
// Publishes our metrics record (its time stamped now) until now + ttl.
Status publish_metrics(dht::Node& node, const std::string& run_id, PeerMetrics metrics, Duration ttl,
                       Deadline deadline);
// Every live, well-formed metrics record of the run.
Result<std::vector<PeerMetrics>> read_metrics(dht::Node& node, const std::string& run_id, Deadline deadline);

// Every live, well-formed record of the run (withdrawn and malformed ones are skipped).
Result<std::vector<PeerProgress>> read_progress(dht::Node& node, const std::string& run_id, Deadline deadline);

}  // namespace dedloc::collab
