// Which records a DHT node accepts, docs/architecture.md: every store and every value read goes through here.
//
// Rules, in order: the expiration is finite and not too far ahead (nobody pins a key for years); an owned
// entry carries its owner's signature (record.hpp); and a record family with a registered schema (the
// families and their schemas: wire/records.hpp) has a value of the right shape.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "dedloc/core/status.hpp"
#include "dedloc/dht/record.hpp"

namespace dedloc::dht {

// A schema check sees the key name and the entry; it returns kMalformed (or kRefused) naming the problem.
using SchemaCheck = std::function<Status(std::string_view key_name, const RecordEntry& entry)>;

struct ValidatorOptions {
  double max_ttl_seconds = 30 * 24 * 3600.0;  // an expiration further ahead than this is refused
};

class RecordValidator {
 public:
  explicit RecordValidator(ValidatorOptions options = {}) : options_(options) {}

  // Records whose key name ends with `key_suffix` must pass `check`. Later registrations add to earlier
  // ones (a record must pass every schema whose suffix matches).
  void add_schema(std::string key_suffix, SchemaCheck check);

  Status validate(std::string_view key_name, const RecordEntry& entry, double now) const;

 private:
  struct Schema {
    std::string suffix;
    SchemaCheck check;
  };
  ValidatorOptions options_;
  std::vector<Schema> schemas_;
};

}  // namespace dedloc::dht
