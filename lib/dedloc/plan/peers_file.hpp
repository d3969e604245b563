// The peers file: a collaboration described in YAML, for dedloc-plan and the tests.
//
//   batch: 4096                 # optional: global batch B (samples per step)
//   params: 18M                 # optional: model size P (count, see units.hpp)
//   codec: fp16                 # optional: none | fp16 | scaled-fp16 | uint8 | blockwise8 (core/codec_id.hpp)
//   peers:
//     - name: gpu               # unique; with count > 1 the peers are named gpu-1 ... gpu-N
//       count: 8                # optional, default 1: that many identical peers
//       compute: 120            # samples/s (0 or absent: a CPU-only peer)
//       bandwidth: 100Mbit      # sets download and upload at once ...
//       download: 1Gbit         # ... or each on its own (rates: see units.hpp)
//       upload: 100Mbit
//       client_mode: false      # true: behind NAT, never aggregates
//   limits:                     # optional pairwise caps (both directions of the pair)
//     - {from: gpu-1, to: cpu-1, rate: 10Mbit}
//
// Unknown keys are errors naming the key and the file (ConfigReader); so are malformed quantities.
#pragma once

#include <string>

#include "dedloc/core/config.hpp"
#include "dedloc/core/status.hpp"
#include "dedloc/plan/peer.hpp"

namespace dedloc::plan {

// Reads the keys above from `reader` into `collaboration` (keys that are absent leave fields as they are).
// Does not call reader.finish(): the caller does, so a tool can read more keys from the same file.
[[nodiscard]] Status read_collaboration(ConfigReader& reader, Collaboration& collaboration);

// Loads a peers file; fields absent from it keep the values of `defaults`.
[[nodiscard]] Result<Collaboration> load_peers_file(const std::string& path, Collaboration defaults = {});

}  // namespace dedloc::plan
