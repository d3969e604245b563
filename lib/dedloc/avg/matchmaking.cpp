#include "dedloc/avg/matchmaking.hpp"

#include <algorithm>
#include <deque>
#include <random>
#include <set>

#include "dedloc/plan/group_shares.hpp"

namespace dedloc::avg {

namespace {

constexpr std::string_view kLog = "matchmaking";
// How often a peer without followers looks again for earlier peers to join.
constexpr Duration kPollInterval = std::chrono::milliseconds(200);
// A follower waits this much past its leader's deadline for BEGIN (the leader assembles at its deadline).
constexpr Duration kBeginGrace = std::chrono::seconds(2);

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

}  // namespace

std::string matchmaking_key(const std::string& group_key) { return group_key + "_matchmaking"; }

std::string averaging_endpoint(AvgRole role, const std::string& announce, const net::Server& server,
                               const dht::Node& dht) {
  if (role == AvgRole::kClient) return "";
  if (!announce.empty()) return server.advertise(announce);
  auto dht_host = net::parse_tcp_endpoint(dht.endpoint());
  return net::dialable_endpoint(server.endpoint(), dht_host ? dht_host->host : "127.0.0.1");
}

Matchmaker::Matchmaker(dht::Node& dht, net::Server& server, net::Client& client, crypto::PeerId self,
                       MatchmakingOptions options, Logger* log)
    : dht_(dht), server_(server), client_(client), self_(self), options_(std::move(options)), log_(log) {
  server.handle<wire::AvgJoin>([this](wire::AvgJoin&& join, net::Incoming&& request, net::Replier replier) {
    on_join(std::move(join), std::move(request), std::move(replier));
  });
}

void Matchmaker::hold() {
  std::lock_guard lock(mutex_);
  held_ = true;
}

void Matchmaker::release() {
  std::lock_guard lock(mutex_);
  held_ = false;
  changed_.notify_all();
}

void Matchmaker::stop() {
  std::lock_guard lock(mutex_);
  stopping_ = true;
  changed_.notify_all();
}

Matchmaker::~Matchmaker() {
  std::lock_guard lock(mutex_);
  refuse_followers_locked(wire::JoinRefusal::kNotLooking, "the leader is shutting down");
}

std::string Matchmaker::address() const { return net::PeerAddress{endpoint_, self_}.to_string(); }

void Matchmaker::on_join(wire::AvgJoin&& join, net::Incoming&& request, net::Replier replier) {
  auto refuse = [&](wire::JoinRefusal reason, std::string detail, std::string leader = "") {
    replier.reply(wire::AvgJoinRefused{reason, std::move(detail), std::move(leader)});
  };
  std::lock_guard lock(mutex_);
  if (join.group_key != options_.group_key || state_ == State::kIdle || state_ == State::kDone) {
    return refuse(wire::JoinRefusal::kNotLooking, "not looking for a group under '" + join.group_key + "' now");
  }
  if (join.schema_hash != options_.schema_hash) {
    return refuse(wire::JoinRefusal::kWrongSchema, "tensor schema differs: " + hex_prefix(options_.schema_hash) +
                                                       "… here, " + hex_prefix(join.schema_hash) +
                                                       "… from you (other tensors, shapes or order)");
  }
  if (state_ == State::kJoining) {
    return refuse(wire::JoinRefusal::kNotALeader, "following another leader", following_);
  }
  const crypto::PeerId& who = request.envelope().sender;
  if (who == self_) return refuse(wire::JoinRefusal::kBadRequest, "that is us");
  if (join.role != AvgRole::kClient && join.endpoint.empty()) {
    return refuse(wire::JoinRefusal::kBadRequest, "a member that reduces needs an endpoint");
  }
  for (const auto& c : join.companions) {
    if (c.id == self_ || c.id == who) return refuse(wire::JoinRefusal::kBadRequest, "a companion is us or the joiner");
    if (c.role != AvgRole::kClient && c.endpoint.empty()) {
      return refuse(wire::JoinRefusal::kBadRequest, "a companion that reduces needs an endpoint");
    }
  }
  std::erase_if(followers_, [&](const Follower& f) { return f.member.id == who; });  // a retry replaces
  for (const auto& f : followers_) {
    for (const auto& c : join.companions) {
      bool taken = c.id == f.member.id || std::any_of(f.companions.begin(), f.companions.end(),
                                                      [&](const wire::JoinCompanion& o) { return o.id == c.id; });
      if (taken) return refuse(wire::JoinRefusal::kBadRequest, "a companion is already in this group");
    }
  }
  if (group_size_locked() + join.members > options_.target_group_size) {
    return refuse(wire::JoinRefusal::kGroupFull, "group full (" + std::to_string(options_.target_group_size) + ")");
  }
  followers_.push_back(Follower{Member{who, join.endpoint, join.role}, join.bandwidth, std::move(replier),
                                std::move(join.companions)});
  changed_.notify_all();
}

size_t Matchmaker::group_size_locked() const {
  size_t size = 1;
  for (const auto& f : followers_) size += 1 + f.companions.size();
  return size;
}

std::vector<wire::JoinCompanion> Matchmaker::companions_locked() const {
  std::vector<wire::JoinCompanion> out;
  for (const auto& f : followers_) {
    out.push_back({f.member.id, f.member.endpoint, f.member.role, f.bandwidth});
    out.insert(out.end(), f.companions.begin(), f.companions.end());
  }
  return out;
}

std::vector<net::PeerAddress> Matchmaker::earlier_peers(double my_expiration, std::string& seen) {
  std::vector<net::PeerAddress> out;
  auto record = dht_.get(matchmaking_key(options_.group_key), dht::GetMode::kLatest,
                         Deadline::after(std::min<Duration>(std::chrono::seconds(2), options_.matchmaking_time)));
  if (!record) {
    seen = "the DHT lookup failed: " + record.status().to_string();
    return out;
  }
  if (!record->has_value()) {
    seen = "nobody else is looking";
    return out;
  }
  struct Candidate {
    double expiration;
    net::PeerAddress address;
  };
  std::vector<Candidate> earlier;
  size_t looking = 0, other_schema = 0;
  for (const auto& entry : (*record)->entries) {
    if (!entry.subkey) continue;
    auto address = net::PeerAddress::parse(std::string(entry.subkey->begin(), entry.subkey->end()));
    if (!address || !address->peer_id || *address->peer_id == self_) continue;
    ++looking;
    if (entry.value != options_.schema_hash) {
      ++other_schema;
      continue;
    }
    // Leader order: earlier expiration first, ties to the smaller id.
    if (entry.expiration < my_expiration || (entry.expiration == my_expiration && *address->peer_id < self_)) {
      earlier.push_back({entry.expiration, *address});
    }
  }
  std::sort(earlier.begin(), earlier.end(), [](const Candidate& a, const Candidate& b) {
    return a.expiration != b.expiration ? a.expiration < b.expiration : *a.address.peer_id < *b.address.peer_id;
  });
  for (auto& c : earlier) out.push_back(std::move(c.address));
  seen = std::to_string(looking) + " other peer(s) looking, " + std::to_string(other_schema) +
         " of them with another tensor schema";
  return out;
}

Matchmaker::JoinOutcome Matchmaker::try_join(const net::PeerAddress& leader, double my_expiration, Deadline deadline,
                                             const std::vector<wire::JoinCompanion>& companions) {
  wire::AvgJoin join{options_.group_key, options_.schema_hash, endpoint_, options_.role, options_.bandwidth,
                     my_expiration, 1 + companions.size(), companions};
  auto reply = client_.call(leader.endpoint, net::Outgoing::of(join), deadline).wait();
  if (!reply) return {std::nullopt, {}, reply.status().to_string(), std::nullopt};
  if (leader.peer_id && reply->envelope().sender != *leader.peer_id) return {std::nullopt, {}, "answered as another peer", std::nullopt};
  if (reply->type() == wire::MessageType::kAvgJoinRefused) {
    auto refused = reply->decode<wire::AvgJoinRefused>();
    if (!refused) return {std::nullopt, {}, refused.status().to_string(), std::nullopt};
    std::optional<net::PeerAddress> other;
    if (!refused->leader.empty()) {
      if (auto parsed = net::PeerAddress::parse(refused->leader)) other = *parsed;
    }
    return {std::nullopt, {}, refused->detail, other};
  }
  auto begin = reply->decode<wire::AvgBegin>();
  if (!begin) return {std::nullopt, {}, "a bad BEGIN: " + begin.status().to_string(), std::nullopt};
  auto group = Group::from_begin(*begin);
  if (!group) return {std::nullopt, {}, "a bad BEGIN: " + group.status().to_string(), std::nullopt};
  if (!group->index_of(self_) || group->length() != options_.vector_length) {
    return {std::nullopt, {}, "a BEGIN without us, or for a vector of another length", std::nullopt};
  }
  for (const auto& c : companions) {
    if (!group->index_of(c.id)) return {std::nullopt, {}, "a BEGIN without the followers we brought", std::nullopt};
  }
  return {std::move(group.value()), std::move(*begin), "", std::nullopt};
}

Result<Group> Matchmaker::find_group(const Bytes& schema_hash, std::uint64_t vector_length, size_t expected_peers,
                                     const std::string& group_key) {
  {
    std::lock_guard lock(mutex_);  // joiners' requests read the schema and the key
    if (!group_key.empty()) options_.group_key = group_key;
    options_.schema_hash = schema_hash;
    options_.vector_length = vector_length;
    expected_peers_ = expected_peers;
  }
  auto group = find_group();
  std::lock_guard lock(mutex_);
  expected_peers_ = 0;
  return group;
}

size_t Matchmaker::senders_locked() const {
  size_t senders = options_.role == AvgRole::kAux ? 0 : 1;
  for (const auto& f : followers_) {
    senders += f.member.role != AvgRole::kAux;
    for (const auto& c : f.companions) senders += c.role != AvgRole::kAux;
  }
  return senders;
}

bool Matchmaker::full_locked() const {
  if (group_size_locked() >= options_.target_group_size) return true;
  if (expected_peers_ == 0 || held_) return false;
  // The expected peers are the ones that send (trainers): an aux peer that joined early is welcome, but
  // filling a place with it would leave a trainer out of its own step's group.
  return senders_locked() >= std::clamp(expected_peers_, std::max<size_t>(2, options_.min_group_size), options_.target_group_size);
}

Result<Group> Matchmaker::find_group() {
  if (options_.schema_hash.size() != wire::kSchemaHashBytes) {
    return error(Code::kInvalidArgument, "the schema hash must have 32 bytes");
  }
  if (options_.target_group_size < 2 || options_.min_group_size < 1 || options_.min_group_size > options_.target_group_size) {
    return error(Code::kInvalidArgument, "need 1 <= min_group_size <= target_group_size, target >= 2");
  }
  endpoint_ = averaging_endpoint(options_.role, options_.announce, server_, dht_);
  if (endpoint_.empty() && options_.role != AvgRole::kClient) {
    return error(Code::kInvalidArgument, "the averaging server is not started (no endpoint to announce)");
  }
  const bool can_lead = !endpoint_.empty();
  const double my_expiration = SystemClock::instance().unix_seconds() +
                               std::chrono::duration<double>(options_.matchmaking_time).count();
  const Deadline deadline = Deadline::after(options_.matchmaking_time);
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return error(Code::kCancelled, "this peer is shutting down");
    followers_.clear();
    state_ = can_lead ? State::kLeading : State::kJoining;
  }
  if (can_lead) {
    const std::string me = address();
    auto declared = dht_.store(matchmaking_key(options_.group_key), Bytes(me.begin(), me.end()),
                               options_.schema_hash, my_expiration, deadline);
    if (!declared) Logger::Line(log_, LogLevel::kWarning, kLog) << "could not declare ourselves: " << declared.status().to_string();
  }

  std::string seen = "nobody else is looking";
  std::string last_refusal;
  auto full = [&] { return full_locked(); };
  auto stopping = [&] {
    std::lock_guard lock(mutex_);
    return stopping_;
  };
  while (!deadline.passed() && !stopping()) {
    {
      std::lock_guard lock(mutex_);
      if (state_ == State::kLeading && full()) return assemble_locked();
    }
    // Try the earlier peers in leader order, and any leader a refusal names. With followers, this is a
    // merge: we ask to be taken with them, and hold them meanwhile.
    std::deque<net::PeerAddress> queue;
    for (auto& p : earlier_peers(my_expiration, seen)) queue.push_back(std::move(p));
    std::set<std::string> tried;
    while (!queue.empty() && !deadline.passed() && !stopping()) {
      net::PeerAddress leader = std::move(queue.front());
      queue.pop_front();
      if (!tried.insert(leader.to_string()).second) continue;
      std::vector<wire::JoinCompanion> companions;
      {
        std::lock_guard lock(mutex_);
        if (full()) break;  // followers filled our group meanwhile: we lead
        state_ = State::kJoining;
        following_ = leader.to_string();
        companions = companions_locked();
      }
      // Alone, we may wait a little past our deadline for BEGIN. With followers we must not: they wait
      // for our BEGIN only until their own deadlines, which may be close to ours. An earlier leader
      // assembles by its deadline, which is no later than ours.
      const Deadline wait = companions.empty() ? Deadline{deadline.at + kBeginGrace} : Deadline{deadline.at + kBeginGrace / 4};
      auto outcome = try_join(leader, my_expiration, wait, companions);
      std::lock_guard lock(mutex_);
      if (outcome.group) {
        for (auto& f : followers_) f.replier.reply(outcome.begin);  // they were merged with us
        if (!followers_.empty()) {
          Logger::Line(log_, LogLevel::kDebug, kLog) << "merged our group of " << group_size_locked() << " into "
                                                     << leader.to_string();
        }
        followers_.clear();
        state_ = State::kDone;
        return std::move(*outcome.group);
      }
      state_ = can_lead ? State::kLeading : State::kJoining;
      following_.clear();
      if (outcome.other_leader) queue.push_front(*outcome.other_leader);
      last_refusal = leader.to_string() + ": " + outcome.why;
    }
    std::unique_lock lock(mutex_);
    changed_.wait_until(lock, std::min(deadline.at, std::chrono::steady_clock::now() + kPollInterval),
                        [&] { return full() || stopping_; });
  }

  std::lock_guard lock(mutex_);
  if (stopping_) {
    refuse_followers_locked(wire::JoinRefusal::kNotLooking, "the leader is shutting down");
    state_ = State::kIdle;
    return error(Code::kCancelled, "this peer is shutting down");
  }
  if (state_ == State::kLeading && group_size_locked() >= options_.min_group_size && !followers_.empty()) {
    return assemble_locked();
  }
  refuse_followers_locked(wire::JoinRefusal::kTooLate, "too few peers joined before the deadline");
  state_ = State::kIdle;
  return error(Code::kTimeout, "no group of at least " + std::to_string(std::max<size_t>(2, options_.min_group_size)) +
                                   " formed under '" + options_.group_key + "' within " +
                                   std::to_string(std::chrono::duration<double>(options_.matchmaking_time).count()) +
                                   " s: " + seen + (last_refusal.empty() ? "" : "; last refusal: " + last_refusal));
}

Result<Group> Matchmaker::assemble_locked() {
  struct Planned {
    Member member;
    double bandwidth;
  };
  std::vector<Planned> members{{Member{self_, endpoint_, options_.role}, options_.bandwidth}};
  std::vector<net::Replier> repliers;  // our followers; their companions hear from the leader that brought them
  for (auto& f : followers_) {
    members.push_back({f.member, f.bandwidth});
    for (const auto& c : f.companions) members.push_back({Member{c.id, c.endpoint, c.role}, c.bandwidth});
    repliers.push_back(std::move(f.replier));
  }
  followers_.clear();
  state_ = State::kDone;
  // A random order, so that no peer is always first in the grid (the planner's rounding favours nobody).
  std::shuffle(members.begin(), members.end(), std::mt19937_64(std::random_device{}()));

  std::vector<plan::GroupMember> planned;
  for (const auto& m : members) planned.push_back({m.member.id.to_string(), m.bandwidth, plan_role(m.member.role)});
  auto counts = plan::plan_group_shares(planned, options_.vector_length);
  wire::AvgBegin begin;
  Status status = counts.status();
  if (counts) {
    begin.group_id.resize(wire::kGroupIdBytes);
    std::random_device random;
    for (auto& b : begin.group_id) b = static_cast<std::uint8_t>(random());
    for (size_t i = 0; i < members.size(); ++i) {
      begin.ids.push_back(members[i].member.id);
      begin.endpoints.push_back(members[i].member.endpoint);
      begin.roles.push_back(members[i].member.role);
    }
    begin.counts = *counts;
    begin.length = options_.vector_length;
    begin.part_elements = options_.part_elements;
  }
  auto group = counts ? Group::from_begin(begin) : Result<Group>(status);
  for (auto& replier : repliers) {
    if (group) replier.reply(begin);
    else replier.reply(wire::AvgJoinRefused{wire::JoinRefusal::kBadRequest, "the group cannot average: " + group.status().message(), ""});
  }
  if (!group) return group.status().with_context("assembling the group");
  Logger::Line(log_, LogLevel::kDebug, kLog) << "leading a group of " << members.size();
  return group;
}

void Matchmaker::refuse_followers_locked(wire::JoinRefusal reason, const std::string& detail, const std::string& leader) {
  for (auto& f : followers_) f.replier.reply(wire::AvgJoinRefused{reason, detail, leader});
  followers_.clear();
}

}  // namespace dedloc::avg
