#include "dedloc/lab/scenario.hpp"

#include <algorithm>
#include <cmath>
#include <set>

#include "dedloc/core/config.hpp"
#include "dedloc/core/files.hpp"

namespace dedloc::lab {

namespace {

// Reads the textual value `key` with `parse`, or records why not; absent keys leave `out` alone.
template <typename T, typename Parse>
void read_parsed(ConfigReader& reader, std::string_view key, T& out, Parse parse, std::vector<std::string>& errors) {
  if (!reader.has(key)) return;
  std::string text;
  reader.read(key, text);
  auto parsed = parse(text, reader.where() + ": " + std::string(key));
  if (parsed) {
    out = static_cast<T>(*parsed);
  } else {
    errors.push_back(parsed.status().message());
  }
}

void read_link(ConfigReader& r, LinkSpec& link, std::vector<std::string>& errors) {
  LinkText text;
  for (auto [key, field] : {std::pair{"rtt", &text.rtt}, {"jitter", &text.jitter}, {"rate", &text.rate},
                            {"upload", &text.upload}, {"download", &text.download}, {"loss", &text.loss},
                            {"queue", &text.queue}}) {
    r.read(key, *field);
  }
  auto parsed = parse_link(text, link, r.where() + ": ");
  if (parsed) link = *parsed;
  else errors.push_back(parsed.status().message());
}

}  // namespace

std::string_view role_name(PeerRole role) {
  switch (role) {
    case PeerRole::kNode: return "node";
    case PeerRole::kClient: return "client";
    case PeerRole::kAux: return "aux";
  }
  return "?";
}

std::vector<std::pair<Duration, bool>> alternation(const Fault& f, size_t index, Duration until) {
  std::vector<std::pair<Duration, bool>> changes;
  if (f.on <= Duration::zero() || f.off <= Duration::zero()) return changes;
  const Duration cycle = f.on + f.off;
  const Duration phase = (f.stagger * static_cast<Duration::rep>(index)) % cycle;
  bool on = phase < f.on;
  if (!on && f.at < until) changes.push_back({f.at, false});
  // The first change ends the part of the cycle the peer is in at f.at; then on and off take turns.
  for (Duration t = f.at + (on ? f.on - phase : cycle - phase); t < until; t += on ? f.on : f.off) {
    on = !on;
    changes.push_back({t, on});
  }
  return changes;
}

size_t mean_peers_in(const Scenario& s, const PeerGroup& g) {
  for (const Fault& f : s.faults) {
    if (f.kind != Fault::Kind::kAlternate || f.target != g.name || f.on <= Duration::zero() || f.off <= Duration::zero()) {
      continue;
    }
    const double share = std::chrono::duration<double>(f.on) / std::chrono::duration<double>(f.on + f.off);
    return static_cast<size_t>(std::lround(static_cast<double>(g.count) * share));
  }
  return g.count;
}

size_t Scenario::peer_count() const {
  size_t n = 0;
  for (const auto& g : groups) n += g.count;
  return n;
}

Result<Scenario> load_scenario(const std::string& path) {
  auto reader = ConfigReader::from_file(path);
  if (!reader) return reader.status();
  Scenario s;
  s.source = path;
  std::vector<std::string> errors;
  read_parsed(*reader, "duration", s.duration, parse_duration, errors);
  read_parsed(*reader, "warmup", s.warmup, parse_duration, errors);
  reader->read("seed", s.seed);
  reader->read("recipe", s.recipe);
  std::int64_t mtu = s.mtu;
  reader->read("mtu", mtu);
  if (mtu < kMinMtu || mtu > kMaxMtu) {
    errors.push_back(path + ": mtu: " + std::to_string(mtu) + " bytes is not within " + std::to_string(kMinMtu) + "-" +
                     std::to_string(kMaxMtu));
  }
  s.mtu = static_cast<int>(mtu);
  reader->read("congestion_control", s.congestion_control);
  if (s.congestion_control.empty() || s.congestion_control.size() > 15 ||
      s.congestion_control.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") != std::string::npos) {
    errors.push_back(path + ": congestion_control: '" + s.congestion_control +
                     "' is not a TCP congestion control's name (cubic, reno, bbr, ...)");
  }
  ConfigReader infra = reader->section("infrastructure");
  s.infrastructure_link = {.rtt = std::chrono::milliseconds(20), .upload = 125e6, .download = 125e6};
  read_link(infra, s.infrastructure_link, errors);
  std::uint64_t relays = 0;
  infra.read("relays", relays);
  s.relays = relays;

  std::set<std::string> names = {"dht", "relay"};
  for (ConfigReader& g : reader->list("groups")) {
    PeerGroup group;
    g.read("name", group.name);
    std::uint64_t count = 1;
    g.read("count", count);
    group.count = count;
    std::string role = "node";
    g.read("role", role);
    g.read("nat", group.nat);
    g.read("compute", group.compute);
    read_link(g, group.link, errors);
    read_parsed(g, "join_at", group.join_at, parse_duration, errors);
    if (group.join_at >= s.duration) errors.push_back(g.where() + ": join_at: must be before the run ends (duration)");
    if (role == "node") group.role = PeerRole::kNode;
    else if (role == "client") group.role = PeerRole::kClient;
    else if (role == "aux") group.role = PeerRole::kAux;
    else errors.push_back(g.where() + ": role: '" + role + "' is not node, client or aux");
    if (group.name.empty() || group.name.find_first_of(" /-") != std::string::npos) {
      errors.push_back(g.where() + ": name: give each group a name without spaces, '/' or '-'");
    } else if (!names.insert(group.name).second) {
      errors.push_back(g.where() + ": name: '" + group.name + "' is used twice (or is dht/relay)");
    }
    if (group.nat && group.role == PeerRole::kNode) {
      errors.push_back(g.where() + ": a peer behind NAT cannot be a node (nobody can connect to it): role client or aux");
    }
    if (!(group.compute >= 0)) errors.push_back(g.where() + ": compute: samples/s must be >= 0");
    s.groups.push_back(group);
  }
  for (ConfigReader& f : reader->list("faults")) {
    Fault fault;
    read_parsed(f, "at", fault.at, parse_duration, errors);
    if (f.has("kill")) {
      fault.kind = Fault::Kind::kKill;
      f.read("kill", fault.target);
    } else if (f.has("start")) {
      fault.kind = Fault::Kind::kStart;
      f.read("start", fault.target);
    } else if (f.has("link_down")) {
      fault.kind = Fault::Kind::kLinkDown;
      f.read("link_down", fault.target);
      read_parsed(f, "for", fault.length, parse_duration, errors);
    } else if (f.has("mtbf")) {
      fault.kind = Fault::Kind::kRandomKills;
      read_parsed(f, "mtbf", fault.mean_time, parse_duration, errors);
      f.read("group", fault.target);
      read_parsed(f, "downtime", fault.length, parse_duration, errors);
      if (fault.mean_time <= Duration::zero()) errors.push_back(f.where() + ": mtbf: must be positive");
    } else if (f.has("set_link")) {
      fault.kind = Fault::Kind::kSetLink;
      f.read("set_link", fault.target);
      // Over the link the target's group had: only the keys given change.
      const std::string group = fault.target.substr(0, fault.target.rfind('-') == std::string::npos
                                                           ? fault.target.size() : fault.target.rfind('-'));
      auto g = std::find_if(s.groups.begin(), s.groups.end(),
                            [&](const PeerGroup& x) { return x.name == fault.target || x.name == group; });
      if (g == s.groups.end()) {
        errors.push_back(f.where() + ": set_link: '" + fault.target + "' is no group or peer of a group");
        read_link(f, fault.link, errors);  // its keys are still read: the error above is the one to see
      } else {
        fault.link = g->link;
        read_link(f, fault.link, errors);
      }
    } else if (f.has("alternate")) {
      fault.kind = Fault::Kind::kAlternate;
      f.read("alternate", fault.target);
      read_parsed(f, "on", fault.on, parse_duration, errors);
      read_parsed(f, "off", fault.off, parse_duration, errors);
      read_parsed(f, "stagger", fault.stagger, parse_duration, errors);
      if (fault.on <= Duration::zero()) errors.push_back(f.where() + ": on: how long each peer runs, must be positive");
      if (fault.off <= Duration::zero()) errors.push_back(f.where() + ": off: how long each peer stays away, must be positive");
      if (fault.stagger < Duration::zero()) errors.push_back(f.where() + ": stagger: must be >= 0");
    } else {
      errors.push_back(f.where() + ": a fault needs one of kill, start, link_down, mtbf, set_link or alternate");
    }
    s.faults.push_back(fault);
  }
  DEDLOC_RETURN_IF_ERROR(reader->finish());
  if (!errors.empty()) return error(Code::kInvalidArgument, errors.front());
  if (s.recipe.empty()) return error(Code::kInvalidArgument, path + ": recipe: the training recipe every peer runs");
  if (s.groups.empty()) return error(Code::kInvalidArgument, path + ": groups: at least one group of peers");
  if (s.warmup >= s.duration) return error(Code::kInvalidArgument, path + ": warmup must be shorter than duration");
  s.recipe = path_beside(path, s.recipe);
  if (s.relays == 0) {
    for (const auto& g : s.groups) {
      if (g.role != PeerRole::kNode && g.nat) {
        return error(Code::kInvalidArgument, path + ": infrastructure: relays: peers behind NAT need at least one relay");
      }
    }
  }
  return s;
}

}  // namespace dedloc::lab
