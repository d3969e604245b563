#include "dedloc/dht/routing_table.hpp"

#include <algorithm>

namespace dedloc::dht {

namespace {

bool bit(const PeerId& id, size_t index) { return (id.bytes()[index / 8] >> (7 - index % 8)) & 1; }

PeerId with_bit(const PeerId& id, size_t index) {
  auto bytes = id.bytes();
  bytes[index / 8] = static_cast<std::uint8_t>(bytes[index / 8] | (1u << (7 - index % 8)));
  return PeerId(bytes);
}

}  // namespace

PeerId xor_distance(const PeerId& a, const PeerId& b) {
  std::array<std::uint8_t, PeerId::kSize> out{};
  for (size_t i = 0; i < out.size(); ++i) out[i] = a.bytes()[i] ^ b.bytes()[i];
  return PeerId(out);
}

bool closer_to(const PeerId& target, const PeerId& a, const PeerId& b) {
  auto da = xor_distance(target, a), db = xor_distance(target, b);
  if (da != db) return da < db;
  return a < b;
}

bool RoutingTable::Bucket::covers(const PeerId& id) const {
  for (size_t i = 0; i < depth; ++i) {
    if (bit(id, i) != bit(prefix, i)) return false;
  }
  return true;
}

RoutingTable::RoutingTable(PeerId self, size_t bucket_size, size_t replacement_cache_size)
    : self_(self), bucket_size_(bucket_size), replacement_cache_size_(replacement_cache_size) {
  buckets_.push_back(Bucket{});  // depth 0 covers every id
}

RoutingTable::Bucket& RoutingTable::bucket_for(const PeerId& id) {
  for (auto& b : buckets_) {
    if (b.covers(id)) return b;
  }
  return buckets_.front();  // unreachable: the buckets partition the id space
}

const RoutingTable::Bucket& RoutingTable::bucket_for(const PeerId& id) const {
  return const_cast<RoutingTable*>(this)->bucket_for(id);
}

void RoutingTable::split(size_t index) {
  Bucket& old = buckets_[index];
  Bucket zero{old.prefix, old.depth + 1, {}, {}};
  Bucket one{with_bit(old.prefix, old.depth), old.depth + 1, {}, {}};
  for (auto& c : old.contacts) (one.covers(c.id) ? one : zero).contacts.push_back(c);
  for (auto& c : old.replacements) (one.covers(c.id) ? one : zero).replacements.push_back(c);
  buckets_[index] = std::move(zero);
  buckets_.insert(buckets_.begin() + static_cast<std::ptrdiff_t>(index) + 1, std::move(one));
}

std::optional<Contact> RoutingTable::update(const Contact& contact) {
  if (contact.id == self_) return std::nullopt;
  while (true) {
    Bucket& b = bucket_for(contact.id);
    auto known = std::find_if(b.contacts.begin(), b.contacts.end(), [&](const Contact& c) { return c.id == contact.id; });
    if (known != b.contacts.end()) {  // seen again: move to the most recently seen end
      b.contacts.erase(known);
      b.contacts.push_back(contact);
      return std::nullopt;
    }
    if (b.contacts.size() < bucket_size_) {
      b.contacts.push_back(contact);
      return std::nullopt;
    }
    if (b.covers(self_) && b.depth < PeerId::kSize * 8) {
      split(static_cast<size_t>(&b - buckets_.data()));
      continue;  // retry in the half that now covers the contact
    }
    auto cached = std::find_if(b.replacements.begin(), b.replacements.end(),
                               [&](const Contact& c) { return c.id == contact.id; });
    if (cached != b.replacements.end()) b.replacements.erase(cached);
    b.replacements.push_back(contact);
    if (b.replacements.size() > replacement_cache_size_) b.replacements.erase(b.replacements.begin());
    return b.contacts.front();  // the least recently seen: ping it, mark_dead() if it does not answer
  }
}

void RoutingTable::mark_dead(const PeerId& id) {
  Bucket& b = bucket_for(id);
  auto it = std::find_if(b.contacts.begin(), b.contacts.end(), [&](const Contact& c) { return c.id == id; });
  if (it == b.contacts.end()) return;
  b.contacts.erase(it);
  if (!b.replacements.empty()) {
    b.contacts.push_back(b.replacements.back());
    b.replacements.pop_back();
  }
}

std::optional<Contact> RoutingTable::find(const PeerId& id) const {
  const Bucket& b = bucket_for(id);
  for (const auto& c : b.contacts) {
    if (c.id == id) return c;
  }
  return std::nullopt;
}

std::vector<Contact> RoutingTable::nearest(const PeerId& target, size_t count) const {
  std::vector<Contact> all;
  for (const auto& b : buckets_) all.insert(all.end(), b.contacts.begin(), b.contacts.end());
  auto by_distance = [&](const Contact& a, const Contact& b) { return closer_to(target, a.id, b.id); };
  if (all.size() > count) {
    std::partial_sort(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(count), all.end(), by_distance);
    all.resize(count);
  } else {
    std::sort(all.begin(), all.end(), by_distance);
  }
  return all;
}

size_t RoutingTable::count_nearer(const PeerId& target, const PeerId& id, size_t limit, const PeerId& ignored) const {
  size_t nearer = 0;
  for (const auto& b : buckets_) {
    for (const auto& c : b.contacts) {
      if (c.id == ignored || c.id == id || !closer_to(target, c.id, id)) continue;
      if (++nearer >= limit) return nearer;
    }
  }
  return nearer;
}

size_t RoutingTable::size() const {
  size_t n = 0;
  for (const auto& b : buckets_) n += b.contacts.size();
  return n;
}

}  // namespace dedloc::dht
