#include "dedloc/plan/peers_file.hpp"

#include "dedloc/plan/units.hpp"

namespace dedloc::plan {
namespace {

// Reads an optional quantity written as text ("100Mbit", "18M") with `parse`. Absent: leaves `out`.
template <class Parse>
Status read_quantity(ConfigReader& reader, std::string_view key, double& out, Parse parse) {
  if (!reader.has(key)) return Status::ok();
  std::string text;
  reader.read(key, text);
  if (text.empty()) return Status::ok();  // a type error, reported by finish()
  auto value = parse(text, reader.where() + ": " + std::string(key));
  if (!value) return value.status();
  out = *value;
  return Status::ok();
}

Status read_peer(ConfigReader& reader, std::vector<PeerSpec>& peers) {
  PeerSpec peer;
  int count = 1;
  double bandwidth = -1;
  reader.read("name", peer.name);
  reader.read("count", count);
  reader.read("compute", peer.compute);
  reader.read("client_mode", peer.client_mode);
  DEDLOC_RETURN_IF_ERROR(read_quantity(reader, "bandwidth", bandwidth, parse_rate));
  if (bandwidth >= 0) peer.download = peer.upload = bandwidth;
  DEDLOC_RETURN_IF_ERROR(read_quantity(reader, "download", peer.download, parse_rate));
  DEDLOC_RETURN_IF_ERROR(read_quantity(reader, "upload", peer.upload, parse_rate));
  // A misspelt key ("donwload") is the likelier mistake than a missing one: report it first.
  DEDLOC_RETURN_IF_ERROR(reader.finish());
  if (peer.name.empty()) return error(Code::kInvalidArgument, reader.where() + ": a peer needs a name");
  if (peer.download <= 0 || peer.upload <= 0) {
    return error(Code::kInvalidArgument, reader.where() + ": peer '" + peer.name +
                                             "' needs a download and an upload bandwidth > 0 (or bandwidth:)");
  }
  if (count < 1) return error(Code::kInvalidArgument, reader.where() + ": count must be >= 1");
  if (count == 1) {
    peers.push_back(peer);
    return Status::ok();
  }
  for (int k = 1; k <= count; ++k) {
    PeerSpec copy = peer;
    copy.name = peer.name + "-" + std::to_string(k);
    peers.push_back(std::move(copy));
  }
  return Status::ok();
}

}  // namespace

Status read_collaboration(ConfigReader& reader, Collaboration& collaboration) {
  reader.read("batch", collaboration.batch);
  DEDLOC_RETURN_IF_ERROR(read_quantity(reader, "params", collaboration.params, parse_count));
  std::string codec;
  reader.read("codec", codec);
  if (!codec.empty()) {
    auto parsed = parse_codec(codec);
    if (!parsed) return parsed.status().with_context(reader.where());
    collaboration.codec = *parsed;
  }
  auto peers = reader.list("peers");
  if (!peers.empty()) collaboration.peers.clear();
  for (auto& peer : peers) DEDLOC_RETURN_IF_ERROR(read_peer(peer, collaboration.peers));
  for (auto& limit_reader : reader.list("limits")) {
    PairLimit limit;
    limit_reader.read("from", limit.from);
    limit_reader.read("to", limit.to);
    double rate = -1;
    DEDLOC_RETURN_IF_ERROR(read_quantity(limit_reader, "rate", rate, parse_rate));
    if (limit.from.empty() || limit.to.empty() || rate < 0) {
      return error(Code::kInvalidArgument, limit_reader.where() + ": a limit needs from, to and rate");
    }
    limit.rate = rate;
    collaboration.limits.push_back(std::move(limit));
  }
  return Status::ok();
}

Result<Collaboration> load_peers_file(const std::string& path, Collaboration defaults) {
  auto reader = ConfigReader::from_file(path);
  if (!reader) return reader.status();
  DEDLOC_RETURN_IF_ERROR(read_collaboration(*reader, defaults));
  DEDLOC_RETURN_IF_ERROR(reader->finish());
  if (defaults.peers.empty()) return error(Code::kInvalidArgument, path + ": no peers (expected a 'peers:' list)");
  return defaults;
}

}  // namespace dedloc::plan
