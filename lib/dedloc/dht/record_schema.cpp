#include "dedloc/dht/record_schema.hpp"

#include <cmath>

#include "dedloc/wire/map_codec.hpp"
#include "dedloc/wire/unpack.hpp"

namespace dedloc::dht {

namespace {

Status check_field(const msgpack::object& value, const FieldRule& rule, const std::string& where) {
  auto wrong = [&](std::string_view expected) {
    return error(Code::kMalformed, where + " field '" + rule.name + "' must be " + std::string(expected));
  };
  double number = 0;
  switch (rule.kind) {
    case FieldKind::kCount:
      if (value.type != msgpack::type::POSITIVE_INTEGER) return wrong("a non-negative integer");
      number = static_cast<double>(value.via.u64);
      break;
    case FieldKind::kNumber:
      if (value.type == msgpack::type::FLOAT32 || value.type == msgpack::type::FLOAT64) number = value.via.f64;
      else if (value.type == msgpack::type::POSITIVE_INTEGER) number = static_cast<double>(value.via.u64);
      else if (value.type == msgpack::type::NEGATIVE_INTEGER) number = static_cast<double>(value.via.i64);
      else return wrong("a number");
      if (!std::isfinite(number)) return wrong("a finite number");
      break;
    case FieldKind::kString:
      return value.type == msgpack::type::STR ? Status{} : wrong("a string");
    case FieldKind::kBool:
      return value.type == msgpack::type::BOOLEAN ? Status{} : wrong("a boolean");
    case FieldKind::kBinary:
      return value.type == msgpack::type::BIN ? Status{} : wrong("binary");
  }
  if (number < rule.min || number > rule.max) {
    return error(Code::kMalformed, where + " field '" + rule.name + "' = " + std::to_string(number) +
                                       " is outside [" + std::to_string(rule.min) + ", " + std::to_string(rule.max) +
                                       "]");
  }
  return {};
}

}  // namespace

SchemaCheck map_schema(std::string schema_name, std::vector<FieldRule> fields, bool allow_tombstone) {
  return [schema_name = std::move(schema_name), fields = std::move(fields), allow_tombstone](
             std::string_view, const RecordEntry& entry) -> Status {
    if (entry.value.empty() && allow_tombstone) return {};
    auto handle = wire::unpack_bounded(entry.value, wire::Limits{}, schema_name + " value");
    if (!handle) return handle.status();
    const msgpack::object& object = (*handle)->get();
    auto reader = wire::MapReader::of(object, schema_name);
    if (!reader) return reader.status();
    for (const auto& rule : fields) {
      const msgpack::object* value = reader->find(rule.name);
      if (!value) {
        if (rule.required) return error(Code::kMalformed, schema_name + " field '" + rule.name + "' is missing");
        continue;
      }
      DEDLOC_RETURN_IF_ERROR(check_field(*value, rule, schema_name));
    }
    return {};
  };
}

void add_record_schema(RecordValidator& validator, const wire::RecordSchema& schema) {
  validator.add_schema(schema.key_suffix, map_schema(schema.name, schema.fields));
}

void add_run_record_schemas(RecordValidator& validator) {
  for (const auto* schema : {&wire::progress_schema(), &wire::metrics_schema(), &wire::donor_schema(),
                             &wire::relay_schema(), &wire::round_result_schema()}) {
    add_record_schema(validator, *schema);
  }
}

}  // namespace dedloc::dht
