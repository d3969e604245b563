// How dedloc-dht turns command-line values into stored bytes and stored records back into text or JSON.
//
// A VALUE that parses as JSON (a number, true, {"a": 1}, "quoted") is stored as its msgpack encoding, the
// form dedloc's own records use; anything else is stored as a msgpack string. Reading reverses this: msgpack
// is shown as JSON, other bytes as {"hex": "..."}.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "dedloc/core/bytes.hpp"
#include "dedloc/dht/node.hpp"

namespace dedloc::tools {

Bytes value_from_text(const std::string& text);
nlohmann::json value_to_json(const Bytes& value);
// A subkey as text when it is printable UTF-8-ish ASCII, else "0x<hex>".
std::string subkey_to_text(const Bytes& subkey);

// {"key":..,"found":true,"value":..,"expiration":..} or, for a dictionary, {"key":..,"found":true,
// "subkeys":{"sk":{"value":..,"expiration":..}}}; {"key":..,"found":false} when absent.
nlohmann::json record_to_json(const std::string& key, const std::optional<dht::FoundRecord>& record);
// The same for people: one line per entry with its expiration as a date and as time left.
std::string format_record(const std::string& key, const std::optional<dht::FoundRecord>& record, double now);

}  // namespace dedloc::tools
