#include "values.hpp"

#include <cmath>
#include <sstream>

namespace dedloc::tools {

namespace {

std::string hex(const Bytes& bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (auto b : bytes) {
    out += kDigits[b >> 4];
    out += kDigits[b & 15];
  }
  return out;
}

std::string expires_text(double expiration, double now) {
  std::ostringstream out;
  out << "expires " << format_utc(expiration) << " (in " << static_cast<long long>(std::ceil(expiration - now))
      << " s)";
  return out.str();
}

}  // namespace

Bytes value_from_text(const std::string& text) {
  auto parsed = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) parsed = text;
  auto packed = nlohmann::json::to_msgpack(parsed);
  return Bytes(packed.begin(), packed.end());
}

nlohmann::json value_to_json(const Bytes& value) {
  auto parsed = nlohmann::json::from_msgpack(value, /*strict=*/true, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) return nlohmann::json{{"hex", hex(value)}};
  return parsed;
}

std::string subkey_to_text(const Bytes& subkey) {
  for (auto b : subkey) {
    if (b < 0x20 || b > 0x7e) return "0x" + hex(subkey);
  }
  return std::string(subkey.begin(), subkey.end());
}

nlohmann::json record_to_json(const std::string& key, const std::optional<dht::FoundRecord>& record) {
  nlohmann::json out{{"key", key}, {"found", record.has_value()}};
  if (!record) return out;
  for (const auto& entry : record->entries) {
    if (!entry.subkey) {
      out["value"] = value_to_json(entry.value);
      out["expiration"] = entry.expiration;
    } else {
      out["subkeys"][subkey_to_text(*entry.subkey)] = {{"value", value_to_json(entry.value)},
                                                       {"expiration", entry.expiration}};
    }
  }
  return out;
}

std::string format_record(const std::string& key, const std::optional<dht::FoundRecord>& record, double now) {
  if (!record) return "'" + key + "': not found\n";
  std::ostringstream out;
  for (const auto& entry : record->entries) {
    if (!entry.subkey) {
      out << key << " = " << value_to_json(entry.value).dump() << "   " << expires_text(entry.expiration, now) << "\n";
    }
  }
  size_t subkeys = 0;
  for (const auto& entry : record->entries) subkeys += entry.subkey ? 1 : 0;
  if (subkeys > 0) out << key << ": " << subkeys << " subkey" << (subkeys == 1 ? "" : "s") << "\n";
  for (const auto& entry : record->entries) {
    if (entry.subkey) {
      out << "  " << subkey_to_text(*entry.subkey) << " = " << value_to_json(entry.value).dump() << "   "
          << expires_text(entry.expiration, now) << "\n";
    }
  }
  return out.str();
}


}  // namespace dedloc::tools
