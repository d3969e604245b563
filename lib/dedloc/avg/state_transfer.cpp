#include "dedloc/avg/state_transfer.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <deque>
#include <map>
#include <mutex>

#include "dedloc/core/blocking_queue.hpp"
#include "dedloc/dht/record_schema.hpp"

namespace dedloc::avg {

using net::bytes_of;

namespace {

constexpr std::string_view kLog = "state";
// How long a "done" notice may take; nobody waits for it.
constexpr Duration kDoneTimeout = std::chrono::seconds(2);
// Outcomes are due by the caller's deadline (every call's own deadline is within it); this much more is
// allowed for the client's loop to report them before the download gives up waiting.
constexpr Duration kOutcomeSlack = std::chrono::milliseconds(250);
// Failures named in an error message (the rest are counted).
constexpr size_t kReasonsShown = 6;

std::string short_hash(const Bytes& hash) { return to_hex(ByteSpan(hash).first(std::min<size_t>(hash.size(), 6))) + "…"; }

// ZeroMQ is done with a frame that pointed into a snapshot.
void release_snapshot(void* /*data*/, void* hint) { delete static_cast<std::shared_ptr<const TrainingState>*>(hint); }

double load_ratio(const DonorInfo& d) {
  if (d.max_downloads == 0) return static_cast<double>(d.downloads);
  return static_cast<double>(d.downloads) / static_cast<double>(d.max_downloads);
}

}  // namespace

// ---- Donors in the DHT ----

Result<dht::StoreResult> advertise_donor(dht::Node& node, std::string_view run_id, const DonorInfo& donor,
                                         Duration ttl, Deadline deadline, const Clock& clock) {
  if (donor.address.endpoint.empty()) return error(Code::kInvalidArgument, "a donor needs an endpoint to advertise");
  const double now = clock.unix_seconds();
  Bytes value = wire::encode_donor({donor.address.endpoint, donor.epoch, donor.downloads, donor.max_downloads,
                                    donor.priority, now});
  std::string subkey = donor.address.to_string();
  double expiration = now + std::chrono::duration<double>(ttl).count();
  return node.store(donors_key(run_id), Bytes(subkey.begin(), subkey.end()), value, expiration, deadline);
}

Result<std::vector<DonorInfo>> list_donors(dht::Node& node, std::string_view run_id, Deadline deadline) {
  auto found = node.get(donors_key(run_id), dht::GetMode::kLatest, deadline);
  if (!found) return found.status();
  std::vector<DonorInfo> donors;
  if (!found->has_value()) return donors;
  for (const auto& entry : (*found)->entries) {
    if (auto donor = parse_donor(entry)) donors.push_back(std::move(*donor));
  }
  return donors;
}

Result<DonorInfo> parse_donor(const dht::FoundEntry& entry) {
  // Not a donor's entry, or a withdrawn one.
  if (!entry.subkey || entry.value.empty()) return error(Code::kMalformed, "donor record: withdrawn or without a subkey");
  auto address = net::PeerAddress::parse(std::string_view(reinterpret_cast<const char*>(entry.subkey->data()),
                                                          entry.subkey->size()));
  if (!address) return address.status();
  auto record = wire::decode_donor(entry.value);
  if (!record) return record.status();
  DonorInfo d;
  d.address.endpoint = std::move(record->endpoint);
  d.epoch = record->epoch;
  d.downloads = record->downloads;
  d.max_downloads = record->max_downloads;
  d.priority = record->priority;
  d.refreshed = record->refreshed;
  d.address.peer_id = address->peer_id;
  d.expiration = entry.expiration;
  return d;
}

void add_donor_schema(dht::RecordValidator& validator) { dht::add_record_schema(validator, wire::donor_schema()); }

bool stale_advert(const DonorInfo& donor, double newest_refresh) {
  if (donor.refreshed <= 0 || donor.expiration <= donor.refreshed) return false;  // age or TTL unknown
  const double ttl = donor.expiration - donor.refreshed;
  return newest_refresh - donor.refreshed > ttl / 2;
}

double donor_priority(double bandwidth) {
  return std::isfinite(bandwidth) && bandwidth > 0 ? bandwidth * 8 / 1e6 : 0;
}

std::vector<DonorInfo> rank_donors(std::vector<DonorInfo> donors, std::mt19937_64& rng,
                                   const std::vector<crypto::PeerId>& disfavoured) {
  double newest_refresh = 0;
  for (const auto& d : donors) newest_refresh = std::max(newest_refresh, d.refreshed);
  // Adverts at the newest epoch and the one before rank alike: right after a global step only the first
  // peers to step advertise the new epoch, and a wave of joiners ranking by epoch alone would all pick
  // those few. Their probes answer with the epoch the donor holds by then (most have stepped too), and
  // the newest answered wins (step 3).
  std::uint64_t newest_epoch = 0;
  for (const auto& d : donors) {
    if (!stale_advert(d, newest_refresh)) newest_epoch = std::max(newest_epoch, d.epoch);
  }
  auto epoch_class = [&](std::uint64_t epoch) { return epoch + 1 >= newest_epoch ? newest_epoch : epoch; };
  struct Ranked {
    DonorInfo info;
    bool stale = false;
    bool disfavoured = false;
    bool relayed = false;
    double load = 0;
    double priority = 0;
  };
  std::vector<Ranked> ranked;
  ranked.reserve(donors.size());
  for (auto& d : donors) {
    const bool stale = stale_advert(d, newest_refresh);
    const double load = load_ratio(d);
    // Anyone can list anything: a NaN would break the sort's ordering.
    const double priority = std::isfinite(d.priority) ? d.priority : 0;
    const bool relayed = d.address.endpoint.rfind("relay://", 0) == 0;
    const bool disfavour = d.address.peer_id && std::find(disfavoured.begin(), disfavoured.end(),
                                                          *d.address.peer_id) != disfavoured.end();
    ranked.push_back({std::move(d), stale, disfavour, relayed, load, priority});
  }
  std::shuffle(ranked.begin(), ranked.end(), rng);
  std::stable_sort(ranked.begin(), ranked.end(), [&](const Ranked& a, const Ranked& b) {
    if (a.stale != b.stale) return b.stale;
    if (epoch_class(a.info.epoch) != epoch_class(b.info.epoch)) return epoch_class(a.info.epoch) > epoch_class(b.info.epoch);
    // Not excluded: what the downloader knows of a donor's parameters may be a step old.
    if (a.disfavoured != b.disfavoured) return b.disfavoured;
    // A volunteer behind NAT serves through its relay: every byte crosses the relay and a home upload.
    if (a.relayed != b.relayed) return b.relayed;
    if (a.load != b.load) return a.load < b.load;
    // Not the refresh time: the donor that just stepped refreshed last, and every joiner would pick it.
    return a.priority > b.priority;
  });
  donors.clear();
  for (auto& r : ranked) donors.push_back(std::move(r.info));
  return donors;
}

// ---- Serving ----

struct StateServer::Core {
  struct Slot {
    Snapshot snapshot;  // pinned: what this downloader is being served
    TimePoint last_seen{};
  };

  StateServerOptions options;
  SnapshotSource source;

  mutable std::mutex mutex;  // guards everything below
  Snapshot published;
  bool closed = false;
  std::map<crypto::PeerId, Slot> slots;
  StateServerStats stats;

  Snapshot current() const {
    if (source) return source();
    std::lock_guard lock(mutex);
    return published;
  }

  void serve(wire::AvgStateRequest&& request, net::Incoming&& incoming, net::Replier replier);
};

void StateServer::Core::serve(wire::AvgStateRequest&& request, net::Incoming&& incoming, net::Replier replier) {
  const crypto::PeerId peer = incoming.envelope().sender;
  if (request.key != options.run_id) {
    return replier.fail(error(Code::kNotFound, "no state of '" + request.key + "' here (this donor serves '" +
                                                   options.run_id + "')"));
  }
  auto codec = codec_from_wire(request.codec);
  if (!codec) return replier.fail(codec.status());
  if (request.length > options.max_part_elements) {
    return replier.fail(error(Code::kTooLarge, "a stripe of " + std::to_string(request.length) +
                                                   " elements is over this donor's limit of " +
                                                   std::to_string(options.max_part_elements)));
  }
  Snapshot fresh = current();  // outside the lock: the source is the owner's code

  std::unique_lock lock(mutex);
  if (closed) return replier.fail(error(Code::kUnavailable, "this donor is shutting down"));
  const TimePoint now = options.clock->now();
  for (auto it = slots.begin(); it != slots.end();) {
    it = now - it->second.last_seen > options.idle_release ? slots.erase(it) : std::next(it);
  }
  stats.downloads = slots.size();

  auto slot = slots.find(peer);
  Snapshot snapshot;
  if (request.done) {
    snapshot = slot != slots.end() ? slot->second.snapshot : fresh;
    if (slot != slots.end()) slots.erase(slot);
    stats.downloads = slots.size();
    if (!snapshot) return replier.fail(error(Code::kUnavailable, "no state to serve yet"));
    request.length = 0;
    request.offset = 0;
    request.describe = false;
  } else {
    bool new_slot = false;
    if (slot == slots.end()) {
      if (slots.size() >= options.max_downloads) {
        ++stats.refused_busy;
        return replier.fail(error(Code::kRefused, "busy: " + std::to_string(slots.size()) + " downloads in progress"));
      }
      if (!fresh) return replier.fail(error(Code::kUnavailable, "no state to serve yet"));
      slot = slots.emplace(peer, Slot{fresh, now}).first;
      new_slot = true;
      stats.peak_downloads = std::max(stats.peak_downloads, slots.size());
    }
    slot->second.last_seen = now;
    if (request.epoch) {
      if (slot->second.snapshot->epoch() != *request.epoch) {
        if (fresh && fresh->epoch() == *request.epoch) {
          slot->second.snapshot = fresh;
        } else {
          ++stats.refused_epoch;
          std::uint64_t held = fresh ? fresh->epoch() : slot->second.snapshot->epoch();
          if (new_slot) slots.erase(slot);
          stats.downloads = slots.size();
          return replier.fail(error(Code::kNotFound, "epoch " + std::to_string(*request.epoch) +
                                                         " is not held here (serving epoch " + std::to_string(held) + ")"));
        }
      }
    } else if (fresh) {
      slot->second.snapshot = fresh;  // a first request: the newest we have
    }
    snapshot = slot->second.snapshot;
    stats.downloads = slots.size();
  }
  const std::uint64_t total = snapshot->total_elements();
  if (request.offset > total || request.length > total - request.offset) {
    return replier.fail(error(Code::kInvalidArgument, "stripe [" + std::to_string(request.offset) + ", " +
                                                          std::to_string(request.offset + request.length) +
                                                          ") is past the state's " + std::to_string(total) +
                                                          " elements"));
  }
  if (request.describe) ++stats.descriptions;
  if (request.length > 0) {
    ++stats.parts;
    stats.elements += request.length;
  }
  const std::uint64_t load = slots.size();
  lock.unlock();

  wire::AvgStateReply reply;
  reply.key = options.run_id;
  reply.epoch = snapshot->epoch();
  reply.schema_hash = snapshot->schema_hash();
  reply.total = total;
  reply.offset = request.offset;
  reply.length = request.length;
  reply.codec = request.codec;
  reply.downloads = load;
  if (request.describe) {
    reply.described = true;
    reply.tensors = snapshot->tensors();
    reply.metadata = snapshot->metadata.entries;
  }
  std::vector<zmq::message_t> frames;
  if (request.length > 0) {
    auto values = snapshot->flat().subspan(static_cast<size_t>(request.offset), static_cast<size_t>(request.length));
    if (*codec == Codec::kNone && std::endian::native == std::endian::little) {
      // The snapshot's memory is already the wire format: send it without a copy, keeping the snapshot
      // alive until ZeroMQ has sent it.
      auto* keep = new Snapshot(snapshot);
      frames.emplace_back(const_cast<float*>(values.data()), values.size_bytes(), &release_snapshot, keep);
    } else {
      zmq::message_t frame(encoded_bytes(*codec, values.size()));
      encode(*codec, values, {static_cast<std::uint8_t*>(frame.data()), frame.size()});
      frames.push_back(std::move(frame));
    }
  }
  replier.reply(reply, std::move(frames));
}

StateServer::StateServer(net::Server& server, StateServerOptions options, SnapshotSource source)
    : core_(std::make_shared<Core>()) {
  core_->options = std::move(options);
  core_->source = std::move(source);
  server.handle<wire::AvgStateRequest>(
      [core = core_](wire::AvgStateRequest&& request, net::Incoming&& incoming, net::Replier replier) {
        core->serve(std::move(request), std::move(incoming), std::move(replier));
      });
}

StateServer::~StateServer() {
  std::lock_guard lock(core_->mutex);
  core_->closed = true;
  core_->slots.clear();
  core_->published.reset();
}

void StateServer::set_state(Snapshot state) {
  std::lock_guard lock(core_->mutex);
  core_->published = std::move(state);
}

StateServer::Snapshot StateServer::state() const { return core_->current(); }

StateServerStats StateServer::stats() const {
  std::lock_guard lock(core_->mutex);
  return core_->stats;
}

DonorInfo StateServer::donor_info(const net::PeerAddress& address, double priority) const {
  DonorInfo d;
  d.address = address;
  d.priority = priority;
  d.max_downloads = core_->options.max_downloads;
  if (Snapshot s = state()) d.epoch = s->epoch();
  std::lock_guard lock(core_->mutex);
  d.downloads = core_->slots.size();
  return d;
}

// ---- Downloading ----

namespace {

class Downloader {
 public:
  Downloader(net::Client& client, std::vector<DonorInfo> ranked, const DownloadOptions& options, Deadline deadline)
      : client_(client), options_(options), deadline_(deadline) {
    for (auto& info : ranked) {
      Donor d;
      d.label = info.address.to_string();
      d.info = std::move(info);
      donors_.push_back(std::move(d));
    }
  }

  Result<DownloadedState> run() {
    Status status = describe();
    if (status.is_ok()) status = choose();
    if (status.is_ok()) status = fetch();
    release();
    DEDLOC_RETURN_IF_ERROR(status);
    DownloadedState out{std::move(state_), {}, {}};
    for (size_t i : asked_) {
      const Donor& d = donors_[i];
      DonorUse use{d.label, d.description ? d.description->epoch : 0, d.parts, d.elements, d.failure};
      (d.requested ? out.donors : out.passed_over).push_back(std::move(use));
    }
    return out;
  }

 private:
  // kUntried -> kProbing -> kLive (answered a probe) -> kAsked -> kDescribed -> kActive or kReleased; a live
  // spare goes from kLive to kActive directly. Any of them -> kFailed, never asked again.
  enum class Stage { kUntried, kProbing, kLive, kAsked, kDescribed, kActive, kReleased, kFailed };
  enum class Kind { kProbe, kDescription, kPart };
  struct Donor {
    DonorInfo info;
    std::string label;
    Stage stage = Stage::kUntried;
    bool asked = false;       // sent anything, a probe included
    bool requested = false;   // asked for the state (a description or a part), not only probed
    bool slot = false;        // it may hold a slot for us: tell it "done" at the end
    std::optional<std::uint64_t> live_epoch;  // the epoch its probe answered with
    TimePoint live_at{};                      // when
    std::optional<wire::AvgStateReply> description;
    size_t in_flight = 0;
    std::uint64_t parts = 0, elements = 0;
    Status failure;
  };
  struct Pending {
    size_t donor = 0;
    Kind kind = Kind::kPart;
    size_t part = 0;  // for kPart
  };
  struct Outcome {
    std::uint64_t token = 0;
    Result<net::Incoming> reply;
  };
  using Queue = BlockingQueue<Outcome>;

  void send(size_t donor, const wire::AvgStateRequest& request, Kind kind, size_t part = 0) {
    Donor& d = donors_[donor];
    if (!d.asked) asked_.push_back(donor);
    d.asked = true;
    if (kind != Kind::kProbe) d.requested = d.slot = true;  // a probe ("done") takes no slot
    ++d.in_flight;
    std::uint64_t token = ++tokens_;
    pending_[token] = {donor, kind, part};
    const Duration timeout = kind == Kind::kProbe ? std::min(options_.probe_timeout, options_.request_timeout)
                                                  : options_.request_timeout;
    Deadline call_deadline = Deadline::after(std::min(timeout, deadline_.remaining()));
    client_.call(d.info.address.endpoint, net::Outgoing::of(request), call_deadline,
                 [queue = queue_, token](Result<net::Incoming>&& reply) { queue->push(Outcome{token, std::move(reply)}); });
  }

  size_t in_flight(Kind kind) const {
    size_t n = 0;
    for (const auto& [token, p] : pending_) n += p.kind == kind;
    return n;
  }
  bool requests_in_flight() const { return pending_.size() > in_flight(Kind::kProbe); }
  bool untried_left() const {
    return std::any_of(donors_.begin(), donors_.end(), [](const Donor& d) { return d.stage == Stage::kUntried; });
  }

  // The next outcome of ours, or nullopt when `until` passed first. Outcomes of requests already written off
  // (their donor failed) are skipped; a probe's outcome is taken here (its donor is live or failed) and
  // returned too, so that a caller waiting for live donors sees it.
  std::optional<std::pair<Pending, Result<net::Incoming>>> next_outcome(Deadline until) {
    while (!pending_.empty()) {
      auto outcome = queue_->pop(until);
      if (!outcome) return std::nullopt;
      auto it = pending_.find(outcome->token);
      if (it == pending_.end()) continue;
      Pending p = it->second;
      pending_.erase(it);
      --donors_[p.donor].in_flight;
      if (p.kind == Kind::kProbe) {
        Status ok = take_probe(p.donor, outcome->reply);
        if (!ok.is_ok()) fail(p.donor, ok, outcome->reply);
      }
      return std::make_pair(p, std::move(outcome->reply));
    }
    return std::nullopt;
  }
  Deadline outcome_deadline() const { return Deadline{deadline_.at + kOutcomeSlack}; }
  // How long a probe's answer vouches for a spare (fetch()).
  Duration spare_trusted_for() const { return 2 * std::min(options_.probe_timeout, options_.request_timeout); }

  // Drops a donor after `why`, the outcome of a request whose reply was `reply`.
  void fail(size_t donor, Status why, const Result<net::Incoming>& reply) {
    Donor& d = donors_[donor];
    const Code code = reply.status().code();
    const bool declined = code == Code::kRefused || code == Code::kNotFound;  // busy, or moved on: expected
    // A dead donor's advert outlives it: passing it over after a probe is routine in a churning swarm.
    const bool probed = d.stage == Stage::kProbing;
    Logger::Line(options_.log, declined || probed ? LogLevel::kInfo : LogLevel::kWarning, kLog)
        << (probed ? "passing over donor " : "dropping donor ") << d.label << ": " << why.to_string();
    if (declined) d.slot = false;  // it said no: it kept no slot for us
    d.stage = Stage::kFailed;
    d.failure = std::move(why);
    for (auto it = pending_.begin(); it != pending_.end();) {
      if (it->second.donor != donor) {
        ++it;
        continue;
      }
      if (it->second.kind == Kind::kPart) queue_parts_.push_front(it->second.part);
      it = pending_.erase(it);
    }
    d.in_flight = 0;
  }

  Status check_sender(const Donor& d, const net::Incoming& reply) const {
    const auto& expected = d.info.address.peer_id;
    if (expected && reply.envelope().sender != *expected) {
      return error(Code::kUnauthorized, "answered by peer " + reply.envelope().sender.short_string() +
                                            ", not the donor listed");
    }
    return {};
  }

  // Step 2: probes untried donors in rank order, probe_fanout at once, a new one as each answers or fails,
  // until `want` donors answered at the newest epoch answered with no probe still out ranked ahead of them
  // (looking for a spare at `epoch`: one donor there), or a probe timeout after the search began with a
  // live donor found, or nobody is left to probe. An error only when the deadline passed.
  // "done" for this run: the probe of a donor's liveness, and the word that frees its slot once we leave.
  wire::AvgStateRequest done_request() const {
    wire::AvgStateRequest request;
    request.key = options_.run_id;
    request.done = true;
    return request;
  }

  Status find_live(size_t want, std::optional<std::uint64_t> epoch) {
    const Deadline patience = Deadline::after(std::min(options_.probe_timeout, options_.request_timeout));
    size_t next = 0;
    for (;;) {
      size_t probing = in_flight(Kind::kProbe);
      for (; next < donors_.size() && probing < options_.probe_fanout; ++next) {
        if (donors_[next].stage != Stage::kUntried) continue;
        // "done" is answered with the donor's epoch, schema hash and load, and takes no slot.
        wire::AvgStateRequest probe = done_request();
        probe.codec = static_cast<std::uint64_t>(options_.codec);
        send(next, probe, Kind::kProbe);
        donors_[next].stage = Stage::kProbing;
        ++probing;
      }
      if (probing == 0) return {};
      // The live donors worth having: at the newest epoch answered (or the one asked for).
      const std::optional<std::uint64_t> best = epoch ? epoch : newest_live_epoch();
      // Enough when `want` of them have no donor still being probed ranked ahead: a better-ranked donor is
      // waited for (its rank says why: a newer epoch, less load, its owner's priority), at most a probe
      // timeout. Looking for a spare at a known epoch, any live donor there will do.
      size_t live = 0, unblocked = 0;
      bool probing_ahead = false;
      for (const auto& d : donors_) {
        if (d.stage == Stage::kProbing) probing_ahead = true;
        if (d.stage != Stage::kLive || d.live_epoch != best) continue;
        ++live;
        if (!probing_ahead) ++unblocked;
      }
      if (unblocked >= want || (epoch && live > 0)) return {};
      if (live > 0 && patience.passed()) return {};
      Deadline until = outcome_deadline();
      if (live > 0 && patience.at < until.at) until = patience;
      if (!next_outcome(until) && !(live > 0 && patience.passed())) return give_up("while probing donors");
    }
  }

  Status take_probe(size_t donor, const Result<net::Incoming>& reply) {
    if (!reply) return reply.status();
    Donor& d = donors_[donor];
    DEDLOC_RETURN_IF_ERROR(check_sender(d, *reply));
    auto m = reply->decode<wire::AvgStateReply>();
    if (!m) return m.status();
    if (m->key != options_.run_id) return error(Code::kMalformed, "the donor answered for another run");
    if (options_.expected_schema && m->schema_hash != *options_.expected_schema) {
      return error(Code::kRefused, "a state of another schema (" + short_hash(m->schema_hash) + ", ours is " +
                                       short_hash(*options_.expected_schema) + ")");
    }
    DEDLOC_RETURN_IF_ERROR(within_max_epoch(m->epoch));
    d.live_epoch = m->epoch;
    d.live_at = std::chrono::steady_clock::now();
    d.stage = Stage::kLive;
    return {};
  }

  Status within_max_epoch(std::uint64_t epoch) const {
    if (!options_.max_epoch || epoch <= *options_.max_epoch) return {};
    return error(Code::kNotFound, "it holds epoch " + std::to_string(epoch) + ", past the " +
                                      std::to_string(*options_.max_epoch) + " wanted");
  }

  // The newest epoch a live (probed, not yet asked) donor answered with.
  std::optional<std::uint64_t> newest_live_epoch() const {
    std::optional<std::uint64_t> newest;
    for (const auto& d : donors_) {
      if (d.stage == Stage::kLive && (!newest || *d.live_epoch > *newest)) newest = d.live_epoch;
    }
    return newest;
  }

  // The newest epoch of the donors described so far.
  std::optional<std::uint64_t> described_epoch() const {
    std::optional<std::uint64_t> best;
    for (const auto& d : donors_) {
      if (d.stage == Stage::kDescribed && (!best || d.description->epoch > *best)) best = d.description->epoch;
    }
    return best;
  }

  // Step 3: descriptions from up to K live donors (more when some fail), the newest answered epoch first.
  Status describe() {
    for (;;) {
      const std::optional<std::uint64_t> best = described_epoch();
      size_t good = 0;
      for (const auto& d : donors_) good += d.stage == Stage::kDescribed && d.description->epoch == *best;
      if (good >= options_.max_donors) break;
      // The live donors at the newest epoch they answered with; older ones would only hold their slots.
      const std::optional<std::uint64_t> newest = newest_live_epoch();
      size_t batch = 0;
      for (size_t i = 0; i < donors_.size() && batch < options_.max_donors - good && newest && (!best || *newest >= *best); ++i) {
        if (donors_[i].stage != Stage::kLive || *donors_[i].live_epoch != *newest) continue;
        wire::AvgStateRequest request;
        request.key = options_.run_id;
        request.codec = static_cast<std::uint64_t>(options_.codec);
        request.describe = true;
        send(i, request, Kind::kDescription);
        donors_[i].stage = Stage::kAsked;
        ++batch;
      }
      if (batch == 0) {
        // Nobody live to ask: probe more donors, unless we have a state to download already.
        if (good > 0 || (!untried_left() && in_flight(Kind::kProbe) == 0)) break;
        DEDLOC_RETURN_IF_ERROR(find_live(options_.max_donors - good, std::nullopt));
        if (std::none_of(donors_.begin(), donors_.end(), [](const Donor& d) { return d.stage == Stage::kLive; })) break;
        continue;
      }
      while (requests_in_flight()) {
        auto outcome = next_outcome(outcome_deadline());
        if (!outcome) return give_up("while asking donors to describe their state");
        auto& [p, reply] = *outcome;
        if (p.kind != Kind::kDescription) continue;  // a late probe: taken already
        Status ok = take_description(p.donor, reply);
        if (!ok.is_ok()) fail(p.donor, ok, reply);
      }
    }
    return {};
  }

  Status take_description(size_t donor, const Result<net::Incoming>& reply) {
    if (!reply) return reply.status();
    Donor& d = donors_[donor];
    DEDLOC_RETURN_IF_ERROR(check_sender(d, *reply));
    auto m = reply->decode<wire::AvgStateReply>();
    if (!m) return m.status();
    if (!m->described || m->key != options_.run_id) return error(Code::kMalformed, "the donor did not describe its state");
    if (schema_hash(m->tensors) != m->schema_hash) {
      return error(Code::kMalformed, "the donor's tensors do not match its schema hash");
    }
    if (options_.expected_schema && m->schema_hash != *options_.expected_schema) {
      return error(Code::kRefused, "a state of another schema (" + short_hash(m->schema_hash) + ", ours is " +
                                       short_hash(*options_.expected_schema) + ")");
    }
    DEDLOC_RETURN_IF_ERROR(within_max_epoch(m->epoch));  // it stepped since its probe
    d.description = std::move(m.value());
    d.stage = Stage::kDescribed;
    return {};
  }

  // Step 3, the choice: the newest epoch, one schema; the state to fill in.
  Status choose() {
    std::vector<size_t> described;
    for (size_t i = 0; i < donors_.size(); ++i) {
      if (donors_[i].stage == Stage::kDescribed) described.push_back(i);
    }
    if (described.empty()) return no_donor("");
    epoch_ = 0;
    for (size_t i : described) epoch_ = std::max(epoch_, donors_[i].description->epoch);
    std::optional<size_t> first_index;
    for (size_t i : described) {
      Donor& d = donors_[i];
      if (d.description->epoch != epoch_) {
        notify_done(d);  // an older state: not used, free its slot now
        d.stage = Stage::kReleased;
        continue;
      }
      if (!first_index) {
        first_index = i;
      } else if (const Donor& f = donors_[*first_index]; d.description->schema_hash != f.description->schema_hash) {
        return error(Code::kRefused, "donors disagree on schema at epoch " + std::to_string(epoch_) + ": " + f.label +
                                         " has " + short_hash(f.description->schema_hash) + ", " + d.label + " has " +
                                         short_hash(d.description->schema_hash));
      }
      d.stage = Stage::kActive;
    }
    const wire::AvgStateReply* first = &*donors_[*first_index].description;
    schema_ = first->schema_hash;
    auto state = TrainingState::with_tensors(first->tensors, StateMetadata{epoch_, first->metadata});
    if (!state) return state.status().with_context("the donors' state");
    state_ = std::move(state.value());
    options_.log->info(kLog) << "downloading epoch " << epoch_ << " (" << state_.size() << " tensors, "
                             << state_.total_elements() << " elements) from up to " << options_.max_donors
                             << " donors";
    return {};
  }

  // Steps 4 and 5: the parts, striped over the active donors.
  Status fetch() {
    const std::uint64_t total = state_.total_elements();
    const std::uint64_t part = options_.part_elements;
    const size_t parts = static_cast<size_t>((total + part - 1) / part);
    for (size_t i = 0; i < parts; ++i) queue_parts_.push_back(i);
    size_t done = 0;
    while (done < parts) {
      size_t active = 0;
      for (const auto& d : donors_) active += d.stage == Stage::kActive;
      for (size_t i = 0; i < donors_.size() && active < options_.max_donors; ++i) {
        // A live spare that answered its probe at our epoch; its first part tells whether it still has it.
        // One that answered long ago (the donor it stands in for held out until its request timed out) is
        // probed again first: it may have died or moved on since, and a dead spare asked for a part costs
        // a whole request timeout, one spare after another, where probes cost one probe timeout together.
        Donor& d = donors_[i];
        if (d.stage != Stage::kLive || *d.live_epoch != epoch_) continue;
        if (std::chrono::steady_clock::now() - d.live_at > spare_trusted_for()) {
          d.stage = Stage::kUntried;
          continue;
        }
        d.stage = Stage::kActive;
        ++active;
      }
      if (active == 0 && (untried_left() || in_flight(Kind::kProbe) > 0)) {
        DEDLOC_RETURN_IF_ERROR(find_live(1, epoch_));  // every donor at hand failed: look further
        continue;
      }
      for (size_t i = 0; i < donors_.size() && !queue_parts_.empty(); ++i) {
        Donor& d = donors_[i];
        while (d.stage == Stage::kActive && d.in_flight < options_.window && !queue_parts_.empty()) {
          size_t index = queue_parts_.front();
          queue_parts_.pop_front();
          wire::AvgStateRequest request;
          request.key = options_.run_id;
          request.epoch = epoch_;
          request.offset = index * part;
          request.length = std::min(part, total - request.offset);
          request.codec = static_cast<std::uint64_t>(options_.codec);
          send(i, request, Kind::kPart, index);
        }
      }
      if (!requests_in_flight()) {
        return no_donor(" for the rest of the state (" + std::to_string(parts - done) + " of " +
                        std::to_string(parts) + " parts missing)");
      }
      auto outcome = next_outcome(outcome_deadline());
      if (!outcome) return give_up("with " + std::to_string(parts - done) + " of " + std::to_string(parts) + " parts missing");
      auto& [p, reply] = *outcome;
      if (p.kind != Kind::kPart) continue;  // a late probe: taken already
      Status ok = take_part(p.donor, p.part, reply);
      if (ok.is_ok()) {
        ++done;
      } else {
        queue_parts_.push_front(p.part);
        fail(p.donor, ok, reply);
      }
    }
    return {};
  }

  Status take_part(size_t donor, size_t index, const Result<net::Incoming>& reply) {
    if (!reply) return reply.status();
    Donor& d = donors_[donor];
    DEDLOC_RETURN_IF_ERROR(check_sender(d, *reply));
    auto m = reply->decode<wire::AvgStateReply>();
    if (!m) return m.status();
    const std::uint64_t offset = index * options_.part_elements;
    const std::uint64_t length = std::min(options_.part_elements, state_.total_elements() - offset);
    if (m->epoch != epoch_) return error(Code::kRefused, "sent epoch " + std::to_string(m->epoch) + ", not " + std::to_string(epoch_));
    if (m->schema_hash != schema_ || m->total != state_.total_elements()) {
      return error(Code::kRefused, "holds a state of another schema (" + short_hash(m->schema_hash) + ")");
    }
    if (m->offset != offset || m->length != length || m->codec != static_cast<std::uint64_t>(options_.codec) ||
        reply->frames.size() != 1) {
      return error(Code::kMalformed, "answered part " + std::to_string(index) + " with another stripe or codec");
    }
    auto target = state_.flat().subspan(static_cast<size_t>(offset), static_cast<size_t>(length));
    DEDLOC_RETURN_IF_ERROR(decode(options_.codec, bytes_of(reply->frames[0]), target));
    ++d.parts;
    d.elements += length;
    return {};
  }

  void notify_done(Donor& d) {
    if (!d.slot) return;
    d.slot = false;
    client_.call(d.info.address.endpoint, net::Outgoing::of(done_request()), Deadline::after(kDoneTimeout),
                 [](Result<net::Incoming>&&) {});
  }

  // Step 6 (also for donors we dropped: one that answered wrongly may still hold a slot for us).
  void release() {
    for (auto& d : donors_) notify_done(d);
  }

  std::string reasons() const {
    std::string out;
    size_t shown = 0, failed = 0;
    for (size_t i : asked_) {
      const Donor& d = donors_[i];
      if (d.failure.is_ok()) continue;
      ++failed;
      if (shown == kReasonsShown) continue;
      out += (shown++ ? "; " : "") + d.label + ": " + d.failure.to_string();
    }
    if (failed > shown) out += "; and " + std::to_string(failed - shown) + " more";
    return out;
  }

  Status no_donor(const std::string& what) const {
    if (deadline_.passed()) return give_up(what);
    return error(Code::kUnavailable, "no donor reachable" + what + ": " + reasons());
  }

  Status give_up(const std::string& what) const {
    std::string why = reasons();
    return error(Code::kTimeout, "state download ran out of time " + what + (why.empty() ? "" : " (" + why + ")"));
  }

  net::Client& client_;
  const DownloadOptions& options_;
  Deadline deadline_;
  std::vector<Donor> donors_;   // ranked
  std::vector<size_t> asked_;   // donors in the order first asked
  std::shared_ptr<Queue> queue_ = std::make_shared<Queue>();  // outlives us: late replies land here
  std::map<std::uint64_t, Pending> pending_;
  std::uint64_t tokens_ = 0;
  std::deque<size_t> queue_parts_;  // parts to ask for, retried ones first
  std::uint64_t epoch_ = 0;
  Bytes schema_;
  TrainingState state_;
};

}  // namespace

Result<DownloadedState> download_state(net::Client& client, std::vector<DonorInfo> donors,
                                       const DownloadOptions& options, Deadline deadline) {
  if (options.run_id.empty() || options.run_id.size() > wire::kMaxStateKeyBytes) {
    return error(Code::kInvalidArgument, "state download: the run id must have 1 to " +
                                             std::to_string(wire::kMaxStateKeyBytes) + " bytes");
  }
  if (options.max_donors == 0 || options.window == 0 || options.probe_fanout == 0) {
    return error(Code::kInvalidArgument, "state download: max_donors, window and probe_fanout must be at least 1");
  }
  if (options.part_elements == 0 || options.part_elements > wire::kMaxStatePartElements) {
    return error(Code::kInvalidArgument, "state download: part_elements must be 1 to " +
                                             std::to_string(wire::kMaxStatePartElements));
  }
  std::erase_if(donors, [&](const DonorInfo& d) {
    // An advert's epoch may lag its donor's, never lead it: one past max_epoch holds a later state.
    return std::find(options.exclude.begin(), options.exclude.end(), d.address.endpoint) != options.exclude.end() ||
           (options.max_epoch && d.epoch > *options.max_epoch);
  });
  if (donors.empty()) return error(Code::kNotFound, "no state donor to ask for '" + options.run_id + "'");
  std::mt19937_64 rng(options.seed != 0 ? options.seed : std::random_device{}());
  return Downloader(client, rank_donors(std::move(donors), rng, options.disfavoured), options, deadline).run();
}

Result<DownloadedState> download_state(dht::Node& node, net::Client& client, const DownloadOptions& options,
                                       Deadline deadline) {
  auto donors = list_donors(node, options.run_id, deadline);
  if (!donors) return donors.status().with_context("listing state donors");
  if (donors->empty()) return error(Code::kNotFound, "no state donor listed under '" + donors_key(options.run_id) + "'");
  return download_state(client, std::move(donors.value()), options, deadline);
}

}  // namespace dedloc::avg
