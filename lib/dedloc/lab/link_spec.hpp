// Links described the way people talk about them: a round-trip time between two hosts of the same kind,
// a rate each way, a loss rate. The lab splits them over the two ends of a path (link_model.hpp): each end
// adds a quarter of the round trip on its upload and a quarter on its download, so two hosts of round trip
// R see R between them, and hosts of round trips R1 and R2 see (R1 + R2) / 2.
#pragma once

#include <string>
#include <string_view>

#include "dedloc/core/status.hpp"
#include "dedloc/lab/link_model.hpp"

namespace dedloc::lab {

// "25ms", "1.5s", "300us", "0": a non-negative duration. `what` names the value in errors.
[[nodiscard]] Result<Duration> parse_duration(std::string_view text, std::string_view what);

// A probability in [0, 1): "0.005" or "0.5%".
[[nodiscard]] Result<double> parse_probability(std::string_view text, std::string_view what);

struct LinkSpec {
  Duration rtt{0};           // to another host with the same spec
  Duration jitter{0};        // extra round-trip delay, up to this much, spread over the four directions
  double upload = 0;         // bytes/s; 0: unlimited
  double download = 0;
  double loss = 0;           // of each packet this host sends (its upload): a one-way path loss
  std::uint64_t queue_bytes = 0;  // per direction; 0: default_queue_bytes(rate)
};

HostLink host_link(const LinkSpec& spec);

// A link as written in flags or a scenario file: each field's text, empty when not given.
struct LinkText {
  std::string rtt, jitter, rate, upload, download, loss, queue;
};

// Parses `text` over `base` (fields not given keep base's values): `rate` sets both directions, `upload`
// and `download` override it. An error names the field as `prefix` + its name ("--rtt", "f.yaml: groups: rtt").
[[nodiscard]] Result<LinkSpec> parse_link(const LinkText& text, LinkSpec base, std::string_view prefix);

}  // namespace dedloc::lab
