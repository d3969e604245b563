// Averaging's defaults, declared once: the averager (averager.hpp), the matchmaker (matchmaking.hpp) and a
// recipe's averaging section (train/recipe.hpp) start from these values.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

#include "dedloc/avg/codec.hpp"
#include "dedloc/core/clock.hpp"

namespace dedloc::avg {

inline constexpr std::size_t kDefaultTargetGroupSize = 16;  // the largest group matchmaking forms
inline constexpr std::size_t kDefaultMinGroupSize = 2;      // the smallest group a leader forms at its deadline
inline constexpr Duration kDefaultMatchmakingTime = std::chrono::seconds(5);  // how long to look for a group
// Bytes/s each way that a peer reports for the leader's shares when nobody says (1 Gbit/s). A recipe's
// trainers assume a slower home link (train/recipe.hpp: averaging.bandwidth_mbit, 100 Mbit/s).
inline constexpr double kDefaultBandwidth = 1.25e8;

// The part grid a leader announces: parts of 512 KiB of float32, whatever codec they are then sent in
// (part_elements_for explains why the grid is sized uncompressed).
inline constexpr std::uint64_t kDefaultPartBytes = 512 * 1024;
inline constexpr Codec kPartGridCodec = Codec::kNone;
// 128 Ki elements: what part_elements_for(kPartGridCodec, kDefaultPartBytes) computes (the bench's test
// pins the two equal), known at compile time since uncompressed floats have no headers.
constexpr std::uint64_t default_part_elements() { return kDefaultPartBytes / sizeof(float); }

}  // namespace dedloc::avg
