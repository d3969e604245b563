#include "dedloc/avg/group_formation.hpp"

#include <algorithm>
#include <random>

#include "dedloc/plan/group_shares.hpp"

namespace dedloc::avg {

namespace {

// A follower waits this much past its leader's deadline for BEGIN (the leader assembles at its deadline).
constexpr Duration kBeginGrace = std::chrono::seconds(2);
// What a BEGIN may take to reach a follower (drop_given_up): one that stops waiting sooner than this after
// we would send it may not get it in time.
constexpr double kBeginTransitSeconds = 0.5;

// The first bytes of a hash, enough for people to tell two apart.
std::string hex_prefix(const Bytes& bytes) { return to_hex(ByteSpan(bytes).first(std::min<size_t>(bytes.size(), 4))); }

plan::MemberRole plan_role(AvgRole role) {
  switch (role) {
    case AvgRole::kNode: return plan::MemberRole::kNode;
    case AvgRole::kClient: return plan::MemberRole::kClient;
    case AvgRole::kAux: return plan::MemberRole::kAux;
  }
  return plan::MemberRole::kNode;
}

wire::AvgJoinRefused refusal(wire::JoinRefusal reason, std::string detail, std::string leader = "") {
  return wire::AvgJoinRefused{reason, std::move(detail), std::move(leader)};
}

// A join of aux peers only (a lone aux peer, or an aux leader merging with aux followers): members that
// reduce but add no weight.
bool adds_no_sender(const wire::AvgJoin& join) {
  return join.role == AvgRole::kAux &&
         std::all_of(join.companions.begin(), join.companions.end(), [](const wire::JoinCompanion& c) { return c.role == AvgRole::kAux; });
}

}  // namespace

Status check_search(const Search& search) {
  if (search.schema_hash.size() != wire::kSchemaHashBytes) {
    return error(Code::kInvalidArgument, "the schema hash must have 32 bytes");
  }
  if (search.target_group_size < 2 || search.min_group_size < 1 || search.min_group_size > search.target_group_size) {
    return error(Code::kInvalidArgument, "need 1 <= min_group_size <= target_group_size, target >= 2");
  }
  if (search.endpoint.empty() && search.role != AvgRole::kClient) {
    return error(Code::kInvalidArgument, "the averaging server is not started (no endpoint to announce)");
  }
  return Status::ok();
}

size_t quorum_of(size_t expected) {
  if (expected < 3) return expected;
  return std::max<size_t>(2, expected - std::max<size_t>(1, expected / 4));
}

void GroupFormation::start(const Search& search, TimePoint now, double unix_now) {
  search_ = search;
  quorum_at_.reset();
  last_join_at_ = now;
  deadline_ = now + search.matchmaking_time;
  expiration_ = unix_now + std::chrono::duration<double>(search.matchmaking_time).count();
  followers_.clear();
  following_.clear();
  state_ = search.endpoint.empty() ? State::kJoining : State::kLeading;
}

TimePoint GroupFormation::answer_deadline(bool with_companions, TimePoint now, double unix_now) const {
  const TimePoint alone = deadline_ + kBeginGrace;
  if (!with_companions) return alone;
  std::optional<double> first;  // when the first of our followers stops waiting, unix seconds
  for (const auto& f : followers_) {
    if (f.wait_until > 0) first = std::min(first.value_or(f.wait_until), f.wait_until);
  }
  if (!first) return deadline_ + kBeginGrace / 4;
  const TimePoint theirs =
      now + std::chrono::duration_cast<Duration>(std::chrono::duration<double>(*first - kBeginTransitSeconds - unix_now));
  return std::clamp(theirs, now, std::max(now, alone));
}

TimePoint GroupFormation::client_answer_deadline(double leader_expiration, TimePoint now, double unix_now) const {
  const TimePoint leader_deadline =
      now + std::chrono::duration_cast<Duration>(std::chrono::duration<double>(leader_expiration - unix_now));
  return std::clamp(leader_deadline + kBeginGrace, answer_deadline(false, now, unix_now),
                    deadline_ + search_.matchmaking_time + kBeginGrace);
}

void GroupFormation::expect(size_t expected_peers, TimePoint now) {
  search_.expected_peers = expected_peers;
  const size_t expected = expected_senders();
  if (expected == 0 || senders() < quorum_of(expected)) {
    quorum_at_.reset();
  } else if (!quorum_at_) {
    quorum_at_ = now;
  }
}

std::optional<TimePoint> GroupFormation::grace_end() const {
  if (search_.grace <= Duration::zero() || held_ || !quorum_at_ || state_ != State::kLeading ||
      group_size() < search_.min_group_size) {
    return std::nullopt;
  }
  return std::max(*quorum_at_, released_at_) + search_.grace;
}

NextStep GroupFormation::next(TimePoint now) const {
  if (now < deadline_) {
    if (state_ != State::kLeading) return NextStep::kLook;
    const auto grace = grace_end();
    return full() || (grace && now >= *grace) ? NextStep::kAssemble : NextStep::kLook;
  }
  // At the deadline a group we lead forms if it is large enough: waiting longer would only leave its
  // members waiting past their own deadlines. Aux peers alone (no member sends) have nothing to average.
  if (state_ == State::kLeading && group_size() >= search_.min_group_size && !followers_.empty() && senders() > 0) {
    return NextStep::kAssemble;
  }
  return NextStep::kGiveUp;
}

std::optional<wire::AvgJoinRefused> GroupFormation::on_join(const crypto::PeerId& who, const wire::AvgJoin& join,
                                                            TimePoint now) {
  if (join.group_key != search_.group_key || !looking()) {
    return refusal(wire::JoinRefusal::kNotLooking, "not looking for a group under '" + join.group_key + "' now");
  }
  if (join.schema_hash != search_.schema_hash) {
    return refusal(wire::JoinRefusal::kWrongSchema, "tensor schema differs: " + hex_prefix(search_.schema_hash) +
                                                        "… here, " + hex_prefix(join.schema_hash) +
                                                        "… from you (other tensors, shapes or order)");
  }
  // While we ask an earlier leader to take us (and our followers), newcomers go to it directly.
  if (state_ == State::kJoining) return refusal(wire::JoinRefusal::kNotALeader, "following another leader", following_);
  if (who == self_) return refusal(wire::JoinRefusal::kBadRequest, "that is us");
  if (join.role != AvgRole::kClient && join.endpoint.empty()) {
    return refusal(wire::JoinRefusal::kBadRequest, "a member that reduces needs an endpoint");
  }
  for (const auto& c : join.companions) {
    if (c.id == self_ || c.id == who) return refusal(wire::JoinRefusal::kBadRequest, "a companion is us or the joiner");
    if (c.role != AvgRole::kClient && c.endpoint.empty()) {
      return refusal(wire::JoinRefusal::kBadRequest, "a companion that reduces needs an endpoint");
    }
  }
  std::erase_if(followers_, [&](const Follower& f) { return f.member.id == who; });  // a retry replaces
  for (const auto& f : followers_) {
    for (const auto& c : join.companions) {
      bool taken = c.id == f.member.id || std::any_of(f.companions.begin(), f.companions.end(),
                                                      [&](const wire::JoinCompanion& o) { return o.id == c.id; });
      if (taken) return refusal(wire::JoinRefusal::kBadRequest, "a companion is already in this group");
    }
  }
  if (group_size() + join.members > search_.target_group_size) {
    return refusal(wire::JoinRefusal::kGroupFull, "group full (" + std::to_string(search_.target_group_size) + ")");
  }
  // Aux peers come early (they have no batch to wait for), and an aux peer taking the last place would leave
  // an expected trainer out of its own step's group: the places of the trainers still to come are kept.
  if (adds_no_sender(join)) {
    const size_t expected = expected_senders();
    const size_t missing = expected > senders() ? expected - senders() : 0;
    if (group_size() + join.members + missing > search_.target_group_size) {
      return refusal(wire::JoinRefusal::kGroupFull, "group full (" + std::to_string(search_.target_group_size) +
                                                        "): its other places are kept for the " +
                                                        std::to_string(missing) + " trainer(s) still expected");
    }
  }
  followers_.push_back(Follower{Member{who, join.endpoint, join.role, join.relay}, join.bandwidth, join.companions, join.wait_until});
  last_join_at_ = now;
  const size_t expected = expected_senders();
  if (!quorum_at_ && expected > 0 && senders() >= quorum_of(expected)) quorum_at_ = now;
  return std::nullopt;
}

std::optional<std::vector<wire::JoinCompanion>> GroupFormation::ask(const std::string& leader) {
  if (full()) return std::nullopt;
  state_ = State::kJoining;
  following_ = leader;
  std::vector<wire::JoinCompanion> companions;
  for (const auto& f : followers_) {
    companions.push_back({f.member.id, f.member.endpoint, f.member.role, f.bandwidth, f.member.relay});
    companions.insert(companions.end(), f.companions.begin(), f.companions.end());
  }
  return companions;
}

std::vector<crypto::PeerId> GroupFormation::on_taken() {
  state_ = State::kDone;
  return take_followers();
}

void GroupFormation::on_refused() {
  state_ = search_.endpoint.empty() ? State::kJoining : State::kLeading;
  following_.clear();
}

Assembly GroupFormation::assemble(Bytes group_id, std::uint64_t shuffle_seed) {
  struct Planned {
    Member member;
    double bandwidth;
  };
  std::vector<Planned> members{{Member{self_, search_.endpoint, search_.role}, search_.bandwidth}};
  for (const auto& f : followers_) {
    members.push_back({f.member, f.bandwidth});
    for (const auto& c : f.companions) members.push_back({Member{c.id, c.endpoint, c.role, c.relay}, c.bandwidth});
  }
  const size_t expected = expected_senders();
  std::optional<Duration> quorum_to_full;
  bool by_quorum = false;
  if (expected > 0 && quorum_at_) {
    if (senders() >= expected) quorum_to_full = last_join_at_ - *quorum_at_;
    else by_quorum = group_size() < search_.target_group_size;
  }
  std::vector<crypto::PeerId> followers = take_followers();
  state_ = State::kDone;
  // A random order, so that no peer is always first in the grid (the planner's rounding favours nobody).
  std::shuffle(members.begin(), members.end(), std::mt19937_64(shuffle_seed));

  std::vector<plan::GroupMember> planned;
  for (const auto& m : members) planned.push_back({m.member.id.to_string(), m.bandwidth, plan_role(m.member.role)});
  auto group = [&]() -> Result<Group> {
    auto counts = search_.equal_shares ? plan::equal_group_shares(planned, search_.vector_length)
                                       : plan::plan_group_shares(planned, search_.vector_length);
    if (!counts) return counts.status();
    wire::AvgBegin begin;
    begin.group_id = std::move(group_id);
    for (const auto& m : members) {
      begin.ids.push_back(m.member.id);
      begin.endpoints.push_back(m.member.endpoint);
      begin.roles.push_back(m.member.role);
      begin.relays.push_back(m.member.relay);
    }
    begin.counts = *counts;
    begin.length = search_.vector_length;
    begin.part_elements = grid_part_elements(begin.counts, search_.part_elements);
    return Group::from_begin(std::move(begin));
  }();
  if (group) return Assembly{std::move(group), std::move(followers), std::nullopt, quorum_to_full, by_quorum};
  return Assembly{group.status().with_context("assembling the group"), std::move(followers),
                  refusal(wire::JoinRefusal::kBadRequest, "the group cannot average: " + group.status().message()),
                  std::nullopt, false};
}

Dismissal GroupFormation::time_out() {
  return dismiss(wire::JoinRefusal::kTooLate, "too few peers joined before the deadline");
}

Dismissal GroupFormation::shut_down() {
  return dismiss(wire::JoinRefusal::kNotLooking, "the leader is shutting down");
}

Dismissal GroupFormation::give_up(std::string why) { return dismiss(wire::JoinRefusal::kNotLooking, std::move(why)); }

Dismissal GroupFormation::dismiss(wire::JoinRefusal reason, std::string detail) {
  state_ = State::kIdle;
  return Dismissal{take_followers(), refusal(reason, std::move(detail))};
}

std::vector<crypto::PeerId> GroupFormation::drop_given_up(double unix_now) {
  std::vector<crypto::PeerId> dropped;
  std::erase_if(followers_, [&](const Follower& f) {
    const bool gone = f.wait_until > 0 && f.wait_until < unix_now + kBeginTransitSeconds;
    if (gone) dropped.push_back(f.member.id);
    return gone;
  });
  return dropped;
}

std::vector<crypto::PeerId> GroupFormation::take_followers() {
  std::vector<crypto::PeerId> ids;
  for (const auto& f : followers_) ids.push_back(f.member.id);
  followers_.clear();
  return ids;
}

size_t GroupFormation::group_size() const {
  size_t size = 1;
  for (const auto& f : followers_) size += 1 + f.companions.size();
  return size;
}

size_t GroupFormation::senders() const {
  size_t senders = search_.role == AvgRole::kAux ? 0 : 1;
  for (const auto& f : followers_) {
    senders += f.member.role != AvgRole::kAux;
    for (const auto& c : f.companions) senders += c.role != AvgRole::kAux;
  }
  return senders;
}

size_t GroupFormation::expected_senders() const {
  if (search_.expected_peers == 0) return 0;
  return std::clamp(search_.expected_peers, std::max<size_t>(2, search_.min_group_size), search_.target_group_size);
}

bool GroupFormation::full() const {
  if (group_size() >= search_.target_group_size) return true;
  if (search_.expected_peers == 0 || held_) return false;
  // The expected peers are the ones that send (trainers): an aux peer that joined early is welcome, but
  // filling a place with it would leave a trainer out of its own step's group.
  return senders() >= expected_senders();
}

bool GroupFormation::holds(const crypto::PeerId& follower) const {
  return std::any_of(followers_.begin(), followers_.end(), [&](const Follower& f) { return f.member.id == follower; });
}

Bytes formed_declaration(const Bytes& schema_hash) {
  Bytes value = schema_hash;
  value.push_back(kFormedMarker);
  return value;
}

EarlierPeers earlier_peers(const std::vector<dht::FoundEntry>& entries, const crypto::PeerId& self,
                           const Bytes& schema_hash, double my_expiration) {
  struct Candidate {
    double expiration;
    net::PeerAddress address;
  };
  EarlierPeers out;
  std::vector<Candidate> earlier;
  const Bytes formed = formed_declaration(schema_hash);
  for (const auto& entry : entries) {
    if (!entry.subkey) continue;
    auto address = net::PeerAddress::parse(std::string(entry.subkey->begin(), entry.subkey->end()));
    if (!address || !address->peer_id || *address->peer_id == self) continue;
    if (entry.value == formed) {
      out.formed = std::move(*address);
      continue;
    }
    ++out.looking;
    if (entry.value != schema_hash) {
      ++out.other_schema;
      continue;
    }
    if (entry.expiration < my_expiration || (entry.expiration == my_expiration && *address->peer_id < self)) {
      earlier.push_back({entry.expiration, *address});
    }
  }
  std::sort(earlier.begin(), earlier.end(), [](const Candidate& a, const Candidate& b) {
    return a.expiration != b.expiration ? a.expiration < b.expiration : *a.address.peer_id < *b.address.peer_id;
  });
  for (auto& c : earlier) {
    out.leaders.push_back(std::move(c.address));
    out.expirations.push_back(c.expiration);
  }
  return out;
}

}  // namespace dedloc::avg
