// Declarative schemas for record values that are msgpack maps (progress, metrics, donors...): which fields,
// of which type, within which range. A validator hook built from one rejects wrong types and negative counts
// before they reach any peer's storage.
#pragma once

#include <limits>
#include <string>
#include <vector>

#include "dedloc/dht/validator.hpp"

namespace dedloc::dht {

enum class FieldKind { kCount, kNumber, kString, kBool, kBinary };  // kCount: a non-negative integer

struct FieldRule {
  std::string name;
  FieldKind kind = FieldKind::kNumber;
  bool required = true;
  double min = -std::numeric_limits<double>::infinity();  // for kCount and kNumber
  double max = std::numeric_limits<double>::infinity();
};

// A check for values that must be msgpack maps with these fields (other keys are allowed and ignored, so
// newer peers can add fields). `allow_tombstone`: an empty value (a withdrawn record) passes too.
SchemaCheck map_schema(std::string schema_name, std::vector<FieldRule> fields, bool allow_tombstone = true);

}  // namespace dedloc::dht
