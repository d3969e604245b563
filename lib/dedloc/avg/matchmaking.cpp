#include "dedloc/avg/matchmaking.hpp"

#include <algorithm>
#include <limits>
#include <deque>
#include <random>
#include <set>
#include <utility>

namespace dedloc::avg {

namespace {

constexpr std::string_view kLog = "matchmaking";
// How often a peer without followers looks again for earlier peers to join.
constexpr Duration kPollInterval = std::chrono::milliseconds(200);
// How long the store that keeps a formed group's declaration up may take (linger_locked): it runs beside
// the all-reduce, and a latecomer that came meanwhile still sees the declaration as first stored.
constexpr Duration kLingerStoreTimeout = std::chrono::seconds(2);
// How long a latecomer asks the leader of its key's formed group before it stops anyway: it answers at
// once when alive (not looking), and a dead one must not hold the latecomer to its deadline.
constexpr Duration kFormedAskTimeout = std::chrono::seconds(1);

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
                       MatchmakingOptions options, Logger* log, const Clock& clock)
    : dht_(dht), server_(server), client_(client), self_(self), options_(std::move(options)), log_(log),
      clock_(clock), formation_(self) {
  server.handle<wire::AvgJoin>([this](wire::AvgJoin&& join, net::Incoming&& request, net::Replier replier) {
    on_join(std::move(join), std::move(request), std::move(replier));
  });
}

void Matchmaker::hold() {
  std::lock_guard lock(mutex_);
  formation_.hold();
}

void Matchmaker::set_times(Duration matchmaking_time, Duration grace) {
  std::lock_guard lock(mutex_);
  options_.matchmaking_time = matchmaking_time;
  options_.grace = grace;
}

void Matchmaker::set_one_group_per_key(bool one) {
  std::lock_guard lock(mutex_);
  options_.one_group_per_key = one;
}

void Matchmaker::set_relay_address(std::string address) {
  std::lock_guard lock(mutex_);
  relay_ = std::move(address);
}

Matchmaker::SearchReport Matchmaker::last_search() const {
  std::lock_guard lock(mutex_);
  return last_search_;
}

size_t Matchmaker::take_late_joiners() {
  std::lock_guard lock(mutex_);
  return std::exchange(late_joiners_, 0);
}

void Matchmaker::release(std::optional<size_t> expected_peers) {
  std::lock_guard lock(mutex_);
  if (expected_peers) formation_.expect(*expected_peers, clock_.now());
  formation_.release(clock_.now());
  changed_.notify_all();
}

void Matchmaker::stop() {
  std::lock_guard lock(mutex_);
  stopping_ = true;
  changed_.notify_all();
}

Matchmaker::~Matchmaker() {
  std::lock_guard lock(mutex_);
  dismiss_locked(formation_.shut_down());
}

Matchmaker::Snapshot Matchmaker::snapshot() const {
  std::lock_guard lock(mutex_);
  return Snapshot{formation_.looking(), formation_.leading(), formation_.looking() && declared_,
                  formation_.group_size()};
}

std::string Matchmaker::address() const { return net::PeerAddress{endpoint_, self_}.to_string(); }

void Matchmaker::on_join(wire::AvgJoin&& join, net::Incoming&& request, net::Replier replier) {
  const crypto::PeerId& who = request.envelope().sender;
  std::lock_guard lock(mutex_);
  auto refused = formation_.on_join(who, join, clock_.now());
  if (!formation_.holds(who)) repliers_.erase(who);  // a refused retry dropped the earlier request too
  if (refused) {
    Logger::Line(log_, LogLevel::kDebug, kLog) << "refused " << who.short_string() << " for '" << join.group_key
                                                << "': " << refused->detail;
    if (refused->reason == wire::JoinRefusal::kNotLooking && !formation_.looking() && !quorum_round_.empty() &&
        join.group_key == quorum_round_) {
      ++late_joiners_;
      Logger::Line(log_, LogLevel::kDebug, kLog) << "a join for '" << join.group_key << "' came after its quorum's grace";
    }
    return replier.reply(*refused);
  }
  repliers_.insert_or_assign(who, std::move(replier));
  changed_.notify_all();
}

void Matchmaker::dismiss_locked(const Dismissal& dismissal) {
  for (const auto& id : dismissal.followers) {
    if (auto it = repliers_.find(id); it != repliers_.end()) it->second.reply(dismissal.answer);
  }
  repliers_.clear();
}

EarlierPeers Matchmaker::earlier_peers(double my_expiration, Duration matchmaking_time, Deadline search_deadline,
                                       std::string& seen) {
  // Never past our own deadline: a leader must be free to form its group then, or the followers that wait
  // for it (until a little past their deadlines, close to ours) give up first.
  const Deadline read_by = Deadline::after(std::min<Duration>(std::chrono::seconds(2), matchmaking_time), clock_);
  auto record = dht_.get(matchmaking_key(options_.group_key), dht::GetMode::kLatest,
                         Deadline{std::min(read_by.at, search_deadline.at)});
  if (!record) {
    seen = "the DHT lookup failed: " + record.status().to_string();
    return {};
  }
  if (!record->has_value()) {
    seen = "nobody else is looking";
    return {};
  }
  auto found = avg::earlier_peers((*record)->entries, self_, options_.schema_hash, my_expiration);
  seen = std::to_string(found.looking) + " other peer(s) looking, " + std::to_string(found.other_schema) +
         " of them with another tensor schema";
  return found;
}

Matchmaker::JoinOutcome Matchmaker::try_join(const net::PeerAddress& leader, Deadline deadline,
                                             const std::vector<wire::JoinCompanion>& companions) {
  // Our wait's end, so that a leader still held past it leaves us out of its group (drop_given_up).
  const double wait_until = clock_.unix_seconds() + std::chrono::duration<double>(deadline.remaining(clock_)).count();
  wire::AvgJoin join{options_.group_key, options_.schema_hash, endpoint_, options_.role, options_.bandwidth,
                     wait_until, 1 + companions.size(), companions};
  if (options_.role == AvgRole::kClient) {
    std::lock_guard lock(mutex_);
    join.relay = relay_;
  }
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
    return {std::nullopt, {}, refused->detail, other, refused->reason};
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
  // Only searches read the options (joiners are checked against the search in progress), one at a time.
  if (!group_key.empty()) options_.group_key = group_key;
  options_.schema_hash = schema_hash;
  options_.vector_length = vector_length;
  return search(expected_peers);
}

Result<Group> Matchmaker::find_group() { return search(0); }

Result<Group> Matchmaker::search(size_t expected_peers) {
  endpoint_ = averaging_endpoint(options_.role, options_.announce, server_, dht_);
  Search search{.group_key = options_.group_key,
                .schema_hash = options_.schema_hash,
                .vector_length = options_.vector_length,
                .part_elements = options_.part_elements,
                .role = options_.role,
                .bandwidth = options_.bandwidth,
                .equal_shares = options_.equal_shares,
                .endpoint = endpoint_,
                .target_group_size = options_.target_group_size,
                .min_group_size = options_.min_group_size,
                .expected_peers = expected_peers};
  DEDLOC_RETURN_IF_ERROR(check_search(search));
  double my_expiration = 0;
  Deadline deadline;
  TimePoint started;
  bool one_group = false;
  {
    std::lock_guard lock(mutex_);
    search.matchmaking_time = options_.matchmaking_time;
    search.grace = options_.grace;
    one_group = options_.one_group_per_key;
    started = clock_.now();
    if (stopping_) return error(Code::kCancelled, "this peer is shutting down");
    formation_.start(search, clock_.now(), clock_.unix_seconds());
    repliers_.clear();
    declared_ = false;
    my_expiration = formation_.expiration();
    deadline = Deadline{formation_.deadline()};
  }
  const bool can_lead = !endpoint_.empty();
  Logger::Line(log_, LogLevel::kDebug, kLog) << "looking for a group under '" << options_.group_key << "' ("
                                              << expected_peers << " expected, "
                                              << std::chrono::duration<double>(search.matchmaking_time).count()
                                              << " s" << (can_lead ? "" : ", cannot lead") << ")";
  if (can_lead) {
    const std::string me = address();
    auto declared = dht_.store(matchmaking_key(options_.group_key), Bytes(me.begin(), me.end()),
                               options_.schema_hash, my_expiration, deadline);
    if (!declared) Logger::Line(log_, LogLevel::kWarning, kLog) << "could not declare ourselves: " << declared.status().to_string();
    std::lock_guard lock(mutex_);
    declared_ = declared.is_ok();
  }

  std::string seen = "nobody else is looking";
  std::string last_refusal;
  auto stopping = [&] {
    std::lock_guard lock(mutex_);
    return stopping_;
  };
  while (true) {
    {
      std::lock_guard lock(mutex_);
      if (stopping_) {
        dismiss_locked(formation_.shut_down());
        return error(Code::kCancelled, "this peer is shutting down");
      }
      for (const auto& id : formation_.drop_given_up(clock_.unix_seconds())) {
        repliers_.erase(id);
        Logger::Line(log_, LogLevel::kDebug, kLog) << "a joiner stopped waiting for us: " << id.short_string();
      }
      NextStep next = formation_.next(clock_.now());
      if (next == NextStep::kAssemble) {
        auto group = assemble_locked();
        if (group) last_search_.took = clock_.now() - started;
        if (group && one_group && declared_) linger_locked(options_.group_key, address(), my_expiration);
        return group;
      }
      if (next == NextStep::kGiveUp) {
        dismiss_locked(formation_.time_out());
        return error(Code::kTimeout, "no group of at least " + std::to_string(std::max<size_t>(2, options_.min_group_size)) +
                                         " formed under '" + options_.group_key + "' within " +
                                         std::to_string(std::chrono::duration<double>(search.matchmaking_time).count()) +
                                         " s: " + seen + (last_refusal.empty() ? "" : "; last refusal: " + last_refusal));
      }
    }
    // Try the earlier peers in leader order, and any leader a refusal names. With followers, this is a
    // merge: we ask to be taken with them, and hold them meanwhile.
    // A peer that cannot lead asks every declared leader, earliest first, also those that started looking
    // after it: otherwise a client-mode peer that starts first finds no one "earlier" and steps alone.
    std::deque<std::pair<net::PeerAddress, double>> queue;  // a leader and its expiration (0: unknown)
    auto found = earlier_peers(can_lead ? my_expiration : std::numeric_limits<double>::infinity(),
                               search.matchmaking_time, deadline, seen);
    // The key's one group formed, and its leader says so (linger_locked): we ask it first, whatever the
    // leader order, and stop on its answer (not looking), or on none. Asked, it counts us late where a
    // quorum's grace formed its group (take_late_joiners), which a search that stopped on reading alone
    // would keep from it.
    std::optional<std::string> formed_leader;
    if (one_group && found.formed) {
      formed_leader = found.formed->to_string();
      queue.emplace_front(std::move(*found.formed), 0.0);
    }
    for (size_t i = 0; i < found.leaders.size(); ++i) queue.emplace_back(std::move(found.leaders[i]), found.expirations[i]);
    std::set<std::string> tried;
    while (!queue.empty() && !deadline.passed(clock_) && !stopping()) {
      auto [leader, leader_expiration] = std::move(queue.front());
      queue.pop_front();
      if (!tried.insert(leader.to_string()).second) continue;
      std::optional<std::vector<wire::JoinCompanion>> companions;
      Deadline wait;
      {
        std::lock_guard lock(mutex_);
        companions = formation_.ask(leader.to_string());
        if (companions) {
          wait = Deadline{can_lead || leader_expiration <= 0
                              ? formation_.answer_deadline(!companions->empty(), clock_.now(), clock_.unix_seconds())
                              : formation_.client_answer_deadline(leader_expiration, clock_.now(), clock_.unix_seconds())};
          if (formed_leader && leader.to_string() == *formed_leader) {
            wait = Deadline{std::min(wait.at, clock_.now() + kFormedAskTimeout)};
          }
        }
      }
      if (!companions) break;  // followers filled our group meanwhile: we lead
      auto outcome = try_join(leader, wait, *companions);
      std::lock_guard lock(mutex_);
      if (outcome.group) {
        const size_t merged = formation_.group_size();
        auto followers = formation_.on_taken();
        for (const auto& id : followers) {  // they were merged with us
          if (auto it = repliers_.find(id); it != repliers_.end()) it->second.reply(outcome.begin);
        }
        repliers_.clear();
        if (!followers.empty()) {
          Logger::Line(log_, LogLevel::kDebug, kLog) << "merged our group of " << merged << " into " << leader.to_string();
        } else {
          Logger::Line(log_, LogLevel::kDebug, kLog) << "joined a group of " << outcome.group->size() << " led by "
                                                      << leader.to_string();
        }
        last_search_ = SearchReport{clock_.now() - started, false, std::nullopt, false};
        return std::move(*outcome.group);
      }
      formation_.on_refused();
      if (outcome.other_leader) queue.emplace_front(*outcome.other_leader, 0.0);
      last_refusal = leader.to_string() + ": " + outcome.why;
      Logger::Line(log_, LogLevel::kDebug, kLog) << "not taken by " << last_refusal;
      if (one_group && (outcome.refusal == wire::JoinRefusal::kNotLooking ||
                        (formed_leader && leader.to_string() == *formed_leader))) {
        // It declared itself under our key and looks no more, or declared the key's group formed: the key's
        // one group formed (or its leader gave up).
        return formed_without_us_locked(last_refusal);
      }
    }
    std::unique_lock lock(mutex_);
    Duration wait = std::min<Duration>(deadline.remaining(clock_), kPollInterval);
    if (auto grace = formation_.grace_end()) wait = std::clamp<Duration>(*grace - clock_.now(), Duration::zero(), wait);
    changed_.wait_for(lock, wait, [&] {
      return stopping_ || formation_.full() || (formation_.grace_end() && clock_.now() >= *formation_.grace_end());
    });
  }
}

Status Matchmaker::formed_without_us_locked(const std::string& how_we_know) {
  // Leading a group of latecomers until our deadline would only hold them there too; our followers hear the
  // same answer and end their searches the same way.
  const std::string why = "the group under '" + options_.group_key + "' formed without us";
  dismiss_locked(formation_.give_up(why));
  return error(Code::kRefused, why + " (" + how_we_know + ")");
}

void Matchmaker::linger_locked(const std::string& key, const std::string& me, double expiration) {
  // Never waits: a store still running (it would have to be a round ago) keeps the declaration as it is.
  if (lingering_.valid() && lingering_.wait_for(Duration::zero()) != std::future_status::ready) return;
  const double window = std::chrono::duration<double>(options_.matchmaking_time).count();
  const double until = std::max(expiration, clock_.unix_seconds() + 2 * window);
  lingering_ = std::async(std::launch::async, [&dht = dht_, log = log_, key = matchmaking_key(key), me,
                                               value = formed_declaration(options_.schema_hash), until] {
    auto stored = dht.store(key, Bytes(me.begin(), me.end()), value, until, Deadline::after(kLingerStoreTimeout));
    if (!stored) {
      Logger::Line(log, LogLevel::kDebug, kLog) << "could not keep our declaration up: " << stored.status().to_string();
    }
  });
}

Result<Group> Matchmaker::assemble_locked() {
  // Why it forms now, for the log: every expected sender is in, a quorum's grace ran out, or the deadline.
  const auto grace_end = formation_.grace_end();
  const char* why = "the deadline";
  if (formation_.full()) {
    why = "full";
  } else if (grace_end && clock_.now() >= *grace_end) {
    why = "a quorum's grace over";
  }
  const size_t senders = formation_.senders(), expected = formation_.expected_senders();
  Bytes group_id(wire::kGroupIdBytes);
  std::random_device random;
  for (auto& b : group_id) b = static_cast<std::uint8_t>(random());
  auto assembly = formation_.assemble(std::move(group_id), random());
  last_search_ = SearchReport{{}, true, assembly.quorum_to_full, assembly.by_quorum};
  if (assembly.by_quorum) quorum_round_ = options_.group_key;
  for (const auto& id : assembly.followers) {
    auto it = repliers_.find(id);
    if (it == repliers_.end()) continue;
    if (assembly.group) it->second.reply(assembly.group->begin());
    else it->second.reply(*assembly.refusal);
  }
  repliers_.clear();
  if (assembly.group) {
    Logger::Line(log_, LogLevel::kDebug, kLog) << "leading a group of " << assembly.group->size() << " ("
                                               << senders << " of " << expected << " expected senders; " << why << ")";
  }
  return std::move(assembly.group);
}

}  // namespace dedloc::avg
