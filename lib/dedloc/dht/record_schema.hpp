// Declarative schemas for record values that are msgpack maps (progress, metrics, donors...): which fields,
// of which type, within which range. A validator hook built from one rejects wrong types and negative counts
// before they reach any peer's storage. The families' schemas themselves are in the record catalogue
// (wire/records.hpp).
#pragma once

#include <string>
#include <vector>

#include "dedloc/dht/validator.hpp"
#include "dedloc/wire/records.hpp"

namespace dedloc::dht {

using wire::FieldKind;
using wire::FieldRule;

// A check for values that must be msgpack maps with these fields (other keys are allowed and ignored, so
// newer peers can add fields). `allow_tombstone`: an empty value (a withdrawn record) passes too.
SchemaCheck map_schema(std::string schema_name, std::vector<FieldRule> fields, bool allow_tombstone = true);

// Registers a record family's schema with a node's validator (before node.start()): records whose key name
// ends with schema.key_suffix must be maps of its fields, or withdrawn (empty).
void add_record_schema(RecordValidator& validator, const wire::RecordSchema& schema);
// Every schema'd family a run's records use (wire/records.hpp): progress, metrics, donors, relay listings.
// What a tool that reads a run's records registers, so hostile values never reach it.
void add_run_record_schemas(RecordValidator& validator);

}  // namespace dedloc::dht
