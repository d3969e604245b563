#include "dedloc/dht/validator.hpp"

#include <cmath>

namespace dedloc::dht {

void RecordValidator::add_schema(std::string key_suffix, SchemaCheck check) {
  schemas_.push_back({std::move(key_suffix), std::move(check)});
}

Status RecordValidator::validate(std::string_view key_name, const RecordEntry& entry, double now) const {
  if (!std::isfinite(entry.expiration)) return error(Code::kMalformed, "the expiration is not a finite time");
  if (entry.expiration > now + options_.max_ttl_seconds) {
    return error(Code::kRefused, "the expiration is more than " + std::to_string(options_.max_ttl_seconds) +
                                     " s ahead");
  }
  DEDLOC_RETURN_IF_ERROR(check_owner_signature(key_name, entry));
  for (const auto& schema : schemas_) {
    if (key_name.ends_with(schema.suffix)) {
      DEDLOC_RETURN_IF_ERROR(schema.check(key_name, entry).with_context("record '" + std::string(key_name) + "'"));
    }
  }
  return {};
}

}  // namespace dedloc::dht
