// What the planner knows about a collaboration: its peers, their links, the model and the batch.
//
// Units are fixed here once so no caller has to guess: compute in samples per second, bandwidth in
// bytes per second (the peers file accepts "100Mbit", "1Gbit", "12.5MB"; see units.hpp), model size in
// parameters, the codec in bytes per transmitted value (bytes_per_value, core/codec_id.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dedloc/core/codec_id.hpp"

namespace dedloc::plan {

struct PeerSpec {
  std::string name;         // unique within a collaboration; used in tables, errors and pairwise limits
  double compute = 0.0;     // samples/s this peer can compute gradients at; 0 for a CPU-only peer
  double download = 0.0;    // bytes/s
  double upload = 0.0;      // bytes/s
  bool client_mode = false; // behind NAT: cannot accept connections, so it never aggregates
};

// A cap on the traffic between two peers (bytes/s), e.g. a slow route between two sites. The averaging
// traffic between two peers is the same in both directions (see cost_model.hpp), so a limit given for
// from->to caps both directions of that pair.
struct PairLimit {
  std::string from;
  std::string to;
  double rate = 0.0;  // bytes/s
};

struct Collaboration {
  std::vector<PeerSpec> peers;
  std::vector<PairLimit> limits;
  double batch = 4096;          // global batch B: samples per optimizer step
  double params = 0;            // model size P: number of averaged values (parameters)
  Codec codec = Codec::kFloat16;  // applied to every averaged value (core/codec_id.hpp: bytes per value)
};

}  // namespace dedloc::plan
