#include "dedloc/wire/dht_messages.hpp"

namespace dedloc::wire {

namespace {

Status malformed(std::string_view message, const std::string& problem) {
  return error(Code::kMalformed, std::string(message) + ": " + problem);
}

Result<crypto::PeerId> id_field(MapReader& in, std::string_view key, std::string_view message) {
  Bytes raw;
  in.get(key, raw);
  DEDLOC_RETURN_IF_ERROR(in.status());
  auto id = crypto::PeerId::from_bytes(raw);
  if (!id) return malformed(message, "field '" + std::string(key) + "' must be a 20-byte id");
  return *id;
}

Status check_endpoint(const std::string& endpoint, std::string_view message) {
  if (endpoint.size() > kMaxEndpointBytes) return malformed(message, "an endpoint is longer than the limit");
  return {};
}

// Contacts travel as parallel arrays: "ids" (20-byte binaries), "eps" (strings), and "seen" (numbers) when
// `with_seen`.
void encode_contacts(MapWriter& out, const std::vector<ContactInfo>& contacts, bool with_seen) {
  std::vector<Bytes> ids;
  std::vector<std::string> endpoints;
  std::vector<double> seen;
  for (const auto& c : contacts) {
    ids.emplace_back(c.id.span().begin(), c.id.span().end());
    endpoints.push_back(c.endpoint);
    seen.push_back(c.last_seen);
  }
  out.put_binaries("ids", ids).put_strings("eps", endpoints);
  if (with_seen) out.put_doubles("seen", seen);
}

Result<std::vector<ContactInfo>> decode_contacts(MapReader& in, size_t max, bool with_seen, std::string_view message) {
  std::vector<Bytes> ids;
  std::vector<std::string> endpoints;
  std::vector<double> seen;
  in.get("ids", ids).get("eps", endpoints);
  if (with_seen) in.get("seen", seen);
  DEDLOC_RETURN_IF_ERROR(in.status());
  if (ids.size() != endpoints.size() || (with_seen && seen.size() != ids.size())) {
    return malformed(message, "contact arrays differ in length");
  }
  if (ids.size() > max) return malformed(message, "more than " + std::to_string(max) + " contacts");
  std::vector<ContactInfo> contacts;
  contacts.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    auto id = crypto::PeerId::from_bytes(ids[i]);
    if (!id) return malformed(message, "a contact id is not 20 bytes");
    DEDLOC_RETURN_IF_ERROR(check_endpoint(endpoints[i], message));
    contacts.push_back({*id, std::move(endpoints[i]), with_seen ? seen[i] : 0.0});
  }
  return contacts;
}

Status check_subkey(const std::optional<Bytes>& subkey, std::string_view message) {
  if (subkey && subkey->size() > kMaxSubkeyBytes) return malformed(message, "a subkey is longer than the limit");
  return {};
}

}  // namespace

// ---- DhtFindNode / DhtNodes ----
void DhtFindNode::encode(MapWriter& out) const {
  out.put_binary("target", target.span()).put("ep", sender_endpoint);
}

Result<DhtFindNode> DhtFindNode::decode(MapReader in) {
  DhtFindNode m;
  auto target = id_field(in, "target", kName);
  if (!target) return target.status();
  m.target = *target;
  in.get_optional("ep", m.sender_endpoint);
  DEDLOC_RETURN_IF_ERROR(in.status());
  DEDLOC_RETURN_IF_ERROR(check_endpoint(m.sender_endpoint, kName));
  return m;
}

void DhtNodes::encode(MapWriter& out) const { encode_contacts(out, nearest, false); }

Result<DhtNodes> DhtNodes::decode(MapReader in) {
  auto contacts = decode_contacts(in, kMaxDhtContacts, false, kName);
  if (!contacts) return contacts.status();
  return DhtNodes{std::move(*contacts)};
}

// ---- DhtFindValue / DhtValue ----
void DhtFindValue::encode(MapWriter& out) const {
  out.put_binary("key", key.span()).put("ep", sender_endpoint);
  if (since_instance != 0) out.put("ci", since_instance).put("cs", since_seq);
}

Result<DhtFindValue> DhtFindValue::decode(MapReader in) {
  DhtFindValue m;
  auto key = id_field(in, "key", kName);
  if (!key) return key.status();
  m.key = *key;
  in.get_optional("ep", m.sender_endpoint).get_optional("ci", m.since_instance).get_optional("cs", m.since_seq);
  DEDLOC_RETURN_IF_ERROR(in.status());
  DEDLOC_RETURN_IF_ERROR(check_endpoint(m.sender_endpoint, kName));
  return m;
}

// A plain value travels as "v"/"e"/"s"; dictionary entries as parallel arrays "sk"/"sv"/"se"/"ss".
void DhtValue::encode(MapWriter& out) const {
  std::vector<Bytes> subkeys, values, signatures;
  std::vector<double> expirations;
  for (const auto& e : entries) {
    if (!e.subkey) {
      out.put_binary("v", e.value).put("e", e.expiration).put_binary("s", e.signature);
      continue;
    }
    subkeys.push_back(*e.subkey);
    values.push_back(e.value);
    expirations.push_back(e.expiration);
    signatures.push_back(e.signature);
  }
  if (!subkeys.empty()) {
    out.put_binaries("sk", subkeys).put_binaries("sv", values).put_doubles("se", expirations).put_binaries("ss",
                                                                                                      signatures);
  }
  if (instance != 0) out.put("ci", instance).put("cs", seq).put("n", held);
  encode_contacts(out, nearest, false);
}

Result<DhtValue> DhtValue::decode(MapReader in) {
  DhtValue m;
  if (in.find("v")) {
    RecordEntry plain;
    in.get("v", plain.value).get("e", plain.expiration).get_optional("s", plain.signature);
    DEDLOC_RETURN_IF_ERROR(in.status());
    m.entries.push_back(std::move(plain));
  }
  if (in.find("sk")) {
    std::vector<Bytes> subkeys, values, signatures;
    std::vector<double> expirations;
    in.get("sk", subkeys).get("sv", values).get("se", expirations).get("ss", signatures);
    DEDLOC_RETURN_IF_ERROR(in.status());
    if (values.size() != subkeys.size() || expirations.size() != subkeys.size() ||
        signatures.size() != subkeys.size()) {
      return malformed(kName, "subkey arrays differ in length");
    }
    if (subkeys.size() > kMaxRecordSubkeys) return malformed(kName, "too many subkeys");
    for (size_t i = 0; i < subkeys.size(); ++i) {
      RecordEntry entry{std::move(subkeys[i]), std::move(values[i]), expirations[i], std::move(signatures[i])};
      DEDLOC_RETURN_IF_ERROR(check_subkey(entry.subkey, kName));
      m.entries.push_back(std::move(entry));
    }
  }
  in.get_optional("ci", m.instance).get_optional("cs", m.seq).get_optional("n", m.held);
  DEDLOC_RETURN_IF_ERROR(in.status());
  auto contacts = decode_contacts(in, kMaxDhtContacts, false, kName);
  if (!contacts) return contacts.status();
  m.nearest = std::move(*contacts);
  return m;
}

// ---- DhtStore / DhtStored ----
void DhtStore::encode(MapWriter& out) const {
  out.put("name", key_name);
  if (entry.subkey) out.put_binary("sk", *entry.subkey);
  out.put_binary("v", entry.value).put("e", entry.expiration).put_binary("s", entry.signature).put("ep", sender_endpoint);
}

Result<DhtStore> DhtStore::decode(MapReader in) {
  DhtStore m;
  in.get("name", m.key_name).get("v", m.entry.value).get("e", m.entry.expiration).get_optional("s", m.entry.signature)
      .get_optional("ep", m.sender_endpoint);
  if (in.find("sk")) {
    Bytes subkey;
    in.get("sk", subkey);
    m.entry.subkey = std::move(subkey);
  }
  DEDLOC_RETURN_IF_ERROR(in.status());
  if (m.key_name.empty() || m.key_name.size() > kMaxKeyNameBytes) {
    return malformed(kName, "the key name must be 1 to " + std::to_string(kMaxKeyNameBytes) + " bytes");
  }
  DEDLOC_RETURN_IF_ERROR(check_subkey(m.entry.subkey, kName));
  DEDLOC_RETURN_IF_ERROR(check_endpoint(m.sender_endpoint, kName));
  return m;
}

void DhtStored::encode(MapWriter& out) const { encode_contacts(out, nearest, false); }

Result<DhtStored> DhtStored::decode(MapReader in) {
  auto contacts = decode_contacts(in, kMaxDhtContacts, false, kName);
  if (!contacts) return contacts.status();
  return DhtStored{std::move(*contacts)};
}

// ---- DhtListPeers / DhtPeerList ----
void DhtListPeers::encode(MapWriter& out) const { out.put("max", max_contacts); }

Result<DhtListPeers> DhtListPeers::decode(MapReader in) {
  DhtListPeers m;
  in.get_optional("max", m.max_contacts);
  DEDLOC_RETURN_IF_ERROR(in.status());
  return m;
}

void DhtPeerList::encode(MapWriter& out) const {
  out.put("self", endpoint).put("keys", stored_keys);
  encode_contacts(out, contacts, true);
}

Result<DhtPeerList> DhtPeerList::decode(MapReader in) {
  DhtPeerList m;
  in.get("self", m.endpoint).get("keys", m.stored_keys);
  DEDLOC_RETURN_IF_ERROR(in.status());
  DEDLOC_RETURN_IF_ERROR(check_endpoint(m.endpoint, kName));
  auto contacts = decode_contacts(in, kMaxPeerListContacts, true, kName);
  if (!contacts) return contacts.status();
  m.contacts = std::move(*contacts);
  return m;
}

// ---- DhtCheckReachable / DhtReachability ----
void DhtCheckReachable::encode(MapWriter& out) const { out.put("ep", endpoint); }

Result<DhtCheckReachable> DhtCheckReachable::decode(MapReader in) {
  DhtCheckReachable m;
  in.get("ep", m.endpoint);
  DEDLOC_RETURN_IF_ERROR(in.status());
  if (m.endpoint.empty()) return malformed(kName, "the endpoint is empty");
  DEDLOC_RETURN_IF_ERROR(check_endpoint(m.endpoint, kName));
  return m;
}

void DhtReachability::encode(MapWriter& out) const { out.put("ok", reachable).put("why", detail); }

Result<DhtReachability> DhtReachability::decode(MapReader in) {
  DhtReachability m;
  in.get("ok", m.reachable).get_optional("why", m.detail);
  DEDLOC_RETURN_IF_ERROR(in.status());
  return m;
}

}  // namespace dedloc::wire
