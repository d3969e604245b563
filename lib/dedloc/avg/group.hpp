// An averaging group as its leader announced it (AvgBegin), and the part grid every member derives from it.
//
// The vector (all tensors flattened in a fixed order) is split into consecutive ranges, one per member, of
// the sizes the leader's plan gave (0 for clients); each range is cut into parts of `part_elements`, the last
// one shorter. Parts are numbered across the whole grid, member by member, so a part index names the same
// elements on every peer. Nothing here depends on local state: members never disagree on boundaries.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "dedloc/core/status.hpp"
#include "dedloc/crypto/peer_id.hpp"
#include "dedloc/wire/avg_messages.hpp"

namespace dedloc::avg {

using wire::AvgRole;

// A hostile BEGIN must not make us allocate bookkeeping for billions of parts.
inline constexpr std::uint64_t kMaxParts = std::uint64_t{1} << 20;

// The part grid a leader announces for these shares (elements per part): `configured`, or finer where the
// smallest share it hands out would be cut into fewer than kMinPartsPerShare parts, never below
// kMinGridPartElements. A reducer answers a part once every member's copy of it came, so a share of one or
// two parts is answered only after the slowest sender's last byte, and the answers to a slow member then
// start when its uploads end: its download comes after its upload. Cut finer, the first parts are
// answered while later ones are still on the way. Sixteen peers on 50, 25 and 12.5 Mbit/s links with the
// planner's shares of 2.25 M values in fp16 (the lab's scaled ALBERT: the middle peers reduce 112,500
// values, one 512 KiB part): 5.8 s a round at the default grid, 4.2 s at 64 KiB parts, 3.9 s at 32 KiB,
// against 2.9 s for the slow links alone (bench/lab/README.md). Large shares keep the configured grid,
// whose larger parts cost less CPU.
inline constexpr std::uint64_t kMinPartsPerShare = 8;
inline constexpr std::uint64_t kMinGridPartElements = 8 * 1024;  // 32 KiB of float32
std::uint64_t grid_part_elements(const std::vector<std::uint64_t>& counts, std::uint64_t configured);

struct Member {
  crypto::PeerId id;
  std::string endpoint;  // where its reducer listens; empty for a client
  AvgRole role = AvgRole::kNode;
  std::string relay;     // a client's address through its relay, where it answers pings; empty if none

  bool sends() const { return role != AvgRole::kAux; }
  bool reduces() const { return role != AvgRole::kClient; }
  // Where a liveness ping reaches it: its endpoint, else its relay address; empty: nowhere.
  const std::string& ping_endpoint() const { return endpoint.empty() ? relay : endpoint; }
};

struct Part {
  size_t index = 0;     // in the grid
  size_t reducer = 0;   // member index
  std::uint64_t begin = 0, end = 0;  // elements [begin, end) of the vector
  size_t size() const { return static_cast<size_t>(end - begin); }
};

class Group {
 public:
  // Checks what a leader sent: roles agree with counts (clients reduce nothing, aux members have a range or
  // nothing), reducers have endpoints, the grid is not absurdly fine.
  static Result<Group> from_begin(wire::AvgBegin begin);
  const wire::AvgBegin& begin() const { return begin_; }

  const Bytes& id() const { return begin_.group_id; }
  size_t size() const { return members_.size(); }
  const Member& member(size_t i) const { return members_.at(i); }
  const std::vector<Member>& members() const { return members_; }
  std::optional<size_t> index_of(const crypto::PeerId& id) const;
  // This group's trainers (its members but aux peers, which take part only in the rounds they look for)
  // for another round without matchmaking: its id is BLAKE2b(our id, salt) cut to kGroupIdBytes, and the
  // vector is split evenly among the members that reduce, in our order, so every member derives the same
  // group. Errors: no member that reduces is left.
  Result<Group> derived(std::string_view salt) const;
  // The group of its cross-bucket hand-on (Averager::broadcast after a bucket's round): derived(kHandOnSalt).
  static constexpr std::string_view kHandOnSalt = "across";
  Result<Group> hand_on() const { return derived(kHandOnSalt); }

  std::uint64_t length() const { return begin_.length; }
  const std::vector<Part>& parts() const { return parts_; }
  // The parts member `reducer` averages (consecutive in the grid).
  std::span<const Part> parts_of(size_t reducer) const;
  size_t largest_part() const { return largest_part_; }
  // Indices of the members that send (nodes and clients).
  const std::vector<size_t>& senders() const { return senders_; }

 private:
  wire::AvgBegin begin_;
  std::vector<Member> members_;
  std::vector<Part> parts_;
  std::vector<size_t> first_part_;  // per member, plus one past the end
  std::vector<size_t> senders_;
  size_t largest_part_ = 0;
};

}  // namespace dedloc::avg
