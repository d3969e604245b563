#include "dedloc/avg/all_reduce.hpp"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <set>

#include "dedloc/avg/float_ops.hpp"
#include "dedloc/avg/in_flight_window.hpp"
#include "dedloc/avg/reducer.hpp"
#include "dedloc/core/check.hpp"
#include "dedloc/core/memory.hpp"
#include "dedloc/wire/messages.hpp"

namespace dedloc::avg {

using net::bytes_of;

namespace {

constexpr size_t kFinishedRoundsRemembered = 64;
// A part sent before its reducer heard BEGIN is retried this often (within the reducer timeout).
constexpr Duration kRetryInterval = std::chrono::milliseconds(2);
// How often the waiting caller checks its reducer's senders for silence.
constexpr Duration kCheckInterval = std::chrono::milliseconds(20);
// How often a member we wait on is pinged (at most: never more than one ping in flight to it), from this
// long into the round; liveness_timeout when that is shorter. A ping is cheap, and a member that died is
// known as soon as a ping fails at once (its relay says it is not attached; its port refuses the
// connection): pinged only every liveness_timeout, a member that died cost its group up to two of them.
constexpr Duration kPingInterval = std::chrono::seconds(1);
// Parts held for an expected round, per member: a sender has `window` parts in flight per reducer (2 by
// default), so this holds a well-behaved member's whole window; more are refused as "not yet" (retried).
// At most 8 × 512 KiB per member of the group.
constexpr size_t kHeldPartsPerSender = 8;
// Expected rounds at once (a peer prepares one round ahead; the rest are stale or hostile).
constexpr size_t kExpectedRoundsRemembered = 4;
// How long run() waits, after closing the connections to reducers it gave up on, for ZeroMQ to give back the
// parts it sent straight from the caller's vector. ZeroMQ's I/O thread does so within a millisecond; past this
// something is badly wrong, and returning would let ZeroMQ read memory the caller may free.
constexpr Duration kLoanReturnLimit = std::chrono::seconds(60);

}  // namespace

// The memory of the compressed parts we send, touched once and reused between parts and rounds (a fresh
// page costs more than the network takes to move it). A frame lends ZeroMQ one buffer (zero-copy); ZeroMQ
// gives it back, from its I/O thread, once the bytes are written to the socket or the message is dropped.
// A lent buffer keeps the pool alive, so frames may outlive the AllReduce. The pool grows to the most
// frames in flight at once (about window × reducers) and keeps them.
class FramePool : public std::enable_shared_from_this<FramePool> {
 public:
  // A frame of `bytes` bytes (contents unspecified), backed by a pooled buffer.
  zmq::message_t take(size_t bytes) {
    Buffer* buffer = nullptr;
    {
      std::lock_guard lock(mutex_);
      if (!free_.empty()) {
        buffer = free_.back();
        free_.pop_back();
      } else {
        all_.push_back(std::make_unique<Buffer>());
        buffer = all_.back().get();
      }
    }
    if (buffer->bytes.size() < bytes) buffer->bytes.resize(bytes);
    buffer->pool = shared_from_this();
    return zmq::message_t(buffer->bytes.data(), bytes, &FramePool::give_back, buffer);
  }

 private:
  struct Buffer {
    std::vector<std::uint8_t> bytes;
    std::shared_ptr<FramePool> pool;  // set while ZeroMQ holds the buffer
  };

  static void give_back(void* /*data*/, void* hint) {
    auto* buffer = static_cast<Buffer*>(hint);
    std::shared_ptr<FramePool> pool = std::move(buffer->pool);  // may be the last reference: released last
    std::lock_guard lock(pool->mutex_);
    pool->free_.push_back(buffer);
  }

  std::mutex mutex_;
  std::vector<Buffer*> free_;
  std::vector<std::unique_ptr<Buffer>> all_;
};

namespace {

// Parts of the caller's vector lent to ZeroMQ (codec none is sent straight from it, zero-copy): counted, so
// that run() gives the vector back only when ZeroMQ has let go of every one.
struct Loans {
  std::mutex mutex;
  std::condition_variable returned;
  size_t out = 0;

  // A frame over `bytes`, counted until ZeroMQ lets go of it.
  static zmq::message_t lend(const std::shared_ptr<Loans>& loans, std::span<const std::uint8_t> bytes) {
    {
      std::lock_guard lock(loans->mutex);
      ++loans->out;
    }
    auto* hint = new std::shared_ptr<Loans>(loans);  // keeps the count alive until the last frame is back
    return zmq::message_t(const_cast<std::uint8_t*>(bytes.data()), bytes.size(), &Loans::give_back, hint);
  }

  // False if some are still out at `deadline`.
  bool wait_all_back(TimePoint deadline) {
    std::unique_lock lock(mutex);
    return returned.wait_until(lock, deadline, [&] { return out == 0; });
  }

 private:
  static void give_back(void* /*data*/, void* hint) {
    auto* loans = static_cast<std::shared_ptr<Loans>*>(hint);
    {
      std::lock_guard lock((*loans)->mutex);
      --(*loans)->out;
      (*loans)->returned.notify_all();
    }
    delete loans;
  }
};

// The sending half of one round: our parts to every other reducer, `window` at a time, and the deltas
// they return. Completions run on the client's loop thread; the caller's thread starts sends and retries.
// Shared with the completions, which may outlive run() (after its deadline): `closed` stops them touching
// the caller's vector.
struct Sender : std::enable_shared_from_this<Sender> {
  struct ToReducer {
    size_t member = 0;
    std::span<const Part> parts;
    size_t next = 0;         // parts[next] is the next to send
    size_t in_flight = 0;
    size_t unresolved = 0;   // parts whose outcome (delta or giving up) is still to come
    bool failed = false;
    std::vector<std::pair<TimePoint, std::uint64_t>> sent = {};  // per part: when, and its window ticket
    std::vector<bool> averaged = {};                              // per part: its answer was applied
  };

  net::Client* client = nullptr;
  crypto::PeerId client_self;  // us: never pinged
  const Group* group = nullptr;
  std::span<float> vector;
  double weight = 0;
  AllReduceOptions options;
  std::vector<float>* scratch = nullptr;
  FramePool* pool = nullptr;
  std::shared_ptr<Loans> loans = std::make_shared<Loans>();

  std::mutex mutex;
  std::condition_variable changed;
  bool closed = false;
  std::vector<ToReducer> reducers;
  struct Retry {
    size_t slot = 0;      // the reducer
    size_t position = 0;  // the part, in that reducer's share
    TimePoint due;        // kRetryInterval after the refusal: in order of due time
  };
  std::deque<Retry> retries;
  std::uint64_t unweighed_parts = 0;  // AllReduceResult::unweighed_parts
  // The total weights the reducers' answers told: the first, and whether another came (AllReduceResult::weight).
  std::optional<double> answered_weight;
  bool answered_weights_differ = false;
  std::optional<double> least_answered_weight;  // the smallest of them (AllReduceResult::least_weight)
  std::uint64_t bytes_sent = 0;  // the parts' payloads
  Logger* log = nullptr;
  std::optional<InFlightWindow> window;  // set before the first send
  std::uint64_t part_bytes = 0;           // a whole part on the wire, for the window's arithmetic
  Duration slowest_part{};                // the longest round trip of a part that came back averaged
  // Liveness pings (AllReduceOptions::liveness_timeout), per member: in flight now; once gone, why.
  std::vector<bool> pinging;
  std::vector<std::optional<Status>> gone;

  bool done_locked() const {
    return std::all_of(reducers.begin(), reducers.end(), [](const ToReducer& r) { return r.unresolved == 0; });
  }

  // Sends what the windows allow: at most `window` parts to each reducer and `max_in_flight` to all
  // together, each to the reducer furthest behind (every reducer waits for every sender, so even progress
  // keeps them all busy). Under `mutex`.
  void fill_windows(Deadline deadline) {
    size_t total = 0;
    for (const ToReducer& r : reducers) total += r.in_flight;
    const size_t cap = options.max_in_flight == 0 ? SIZE_MAX : options.max_in_flight;
    const size_t active = static_cast<size_t>(
        std::count_if(reducers.begin(), reducers.end(), [](const ToReducer& r) { return !r.failed; }));
    const size_t per_reducer = window->per_reducer(active, part_bytes);
    while (total < cap) {
      size_t best = reducers.size();
      for (size_t slot = 0; slot < reducers.size(); ++slot) {
        const ToReducer& r = reducers[slot];
        if (r.failed || r.in_flight >= per_reducer || r.next >= r.parts.size()) continue;
        // Less of its share sent (r.next / r.parts.size() smaller), compared without division.
        if (best == reducers.size() || r.next * reducers[best].parts.size() < reducers[best].next * r.parts.size()) {
          best = slot;
        }
      }
      if (best == reducers.size()) break;
      send(best, reducers[best].next++, deadline);
      ++total;
    }
  }

  void send(size_t slot, size_t position, Deadline deadline) {
    ToReducer& r = reducers[slot];
    const Part& part = r.parts[position];
    std::span<const float> values = vector.subspan(static_cast<size_t>(part.begin), part.size());
    zmq::message_t frame;
    if (weight == 0 && (options.answer == wire::PartAnswer::kAverage ||
                        std::all_of(values.begin(), values.end(), [](float v) { return v == 0.0f; }))) {
      // Values at weight 0 add nothing anywhere: the part goes without them, and the reducer answers as if
      // zeros had come (reducer.hpp), which only a delta could tell from our values. A peer taking part at
      // weight 0 (while it downloads the state, withdrawn from a round, carrying no bucket's average across
      // buckets) then uploads headers, not a whole vector its group would wait for.
    } else if (options.codec == Codec::kNone) {
      // Straight from the vector, which holds the wire format already (codec.hpp): no copy. Nothing writes
      // these values while ZeroMQ may read them: only this part's delta does, and it comes after the
      // reducer received the whole part; run() waits for every loan before it returns.
      frame = Loans::lend(loans, {reinterpret_cast<const std::uint8_t*>(values.data()), values.size_bytes()});
    } else {
      frame = pool->take(encoded_bytes(options.codec, values.size()));
      encode(options.codec, values, {static_cast<std::uint8_t*>(frame.data()), frame.size()});
    }
    bytes_sent += frame.size();
    std::vector<zmq::message_t> frames;
    frames.push_back(std::move(frame));
    ++r.in_flight;
    r.sent[position] = {std::chrono::steady_clock::now(), window->ticket()};
    Deadline part_deadline = Deadline::after(std::min(options.reducer_timeout, deadline.remaining()));
    client->call(group->member(r.member).endpoint,
                 net::Outgoing::of(wire::AvgPart{group->id(), part.index, weight,
                                                 static_cast<std::uint64_t>(options.codec), options.answer,
                                                 options.order_key.value_or(wire::AvgPart::kNoOrder)},
                                   std::move(frames)),
                 part_deadline,
                 [self = shared_from_this(), slot, position, deadline](Result<net::Incoming>&& reply) {
                   self->on_reply(slot, position, std::move(reply), deadline);
                 });
    if (options.on_progress) options.on_progress();
  }

  void on_reply(size_t slot, size_t position, Result<net::Incoming>&& reply, Deadline deadline) {
    std::lock_guard lock(mutex);
    if (closed) return;
    ToReducer& r = reducers[slot];
    --r.in_flight;
    const Part& part = r.parts[position];
    if (!reply && reply.status().code() == Code::kNotFound && !r.failed) {
      // The reducer has not heard BEGIN yet: try again shortly (the part's own deadline still bounds it).
      retries.push_back({slot, position, std::chrono::steady_clock::now() + kRetryInterval});
      ++r.in_flight;  // still ours to resolve; keeps the window accounting honest
      changed.notify_all();
      return;
    }
    --r.unresolved;
    Status applied = reply ? apply(part, *reply) : reply.status();
    if (applied.is_ok()) {
      r.averaged[position] = true;
      const auto [sent_at, ticket] = r.sent[position];
      const Duration latency = std::chrono::steady_clock::now() - sent_at;
      window->on_delivered(encoded_bytes(options.codec, part.size()), latency, ticket);
      slowest_part = std::max(slowest_part, latency);
    } else {
      Code code = applied.code();
      if (code == Code::kTimeout || code == Code::kUnavailable || code == Code::kCancelled ||
          code == Code::kRefused) {
        give_up(r, applied);
      } else {
        Logger::Line(log, LogLevel::kWarning, "avg") << "part " << part.index << " kept unaveraged: " << applied.to_string();
      }
    }
    fill_windows(deadline);
    // The caller waits for the end (and for retries, above): waking it for every delta would cost two
    // context switches a part for nothing.
    if (done_locked()) changed.notify_all();
  }

  Status apply(const Part& part, const net::Incoming& reply) {
    auto answer = reply.decode<wire::AvgPartDelta>();
    if (!answer) return answer.status();
    if (answer->part != part.index || answer->codec != static_cast<std::uint64_t>(options.codec) ||
        reply.frames.size() != 1) {
      return error(Code::kMalformed, "a reducer answered part " + std::to_string(part.index) + " with another part or codec");
    }
    // A delta is added to our values; the average replaces them. A reducer may answer a part that asked for
    // the average with a (zero) delta when nothing was weighed, never the other way round.
    const bool average = answer->answer == wire::PartAnswer::kAverage;
    if (average && options.answer != wire::PartAnswer::kAverage) {
      return error(Code::kMalformed, "a reducer answered part " + std::to_string(part.index) + " with an average where we asked for a delta");
    }
    if (!average && options.answer == wire::PartAnswer::kAverage) ++unweighed_parts;
    if (!answered_weight) {
      answered_weight = answer->weight;
    } else if (*answered_weight != answer->weight) {
      answered_weights_differ = true;
    }
    if (answer->weight > 0) {
      least_answered_weight = std::min(least_answered_weight.value_or(answer->weight), answer->weight);
    }
    std::span<float> target = vector.subspan(static_cast<size_t>(part.begin), part.size());
    const zmq::message_t& frame = reply.frames[0];
    const auto* bytes = static_cast<const std::uint8_t*>(frame.data());
    if (options.codec == Codec::kNone || options.codec == Codec::kFloat16) {
      // Straight from the frame (fp16 a chunk at a time): no part-sized decoding pass.
      if (frame.size() != encoded_bytes(options.codec, part.size())) {
        return error(Code::kMalformed, "an answer of " + std::to_string(frame.size()) + " bytes for " +
                                           std::to_string(part.size()) + " values");
      }
      if (options.codec == Codec::kNone) {
        if (average) {
          std::memcpy(target.data(), bytes, target.size_bytes());
        } else {
          float_ops::add(target, bytes);
        }
      } else {
        float_ops::for_each_fp16_chunk(bytes, part.size(), [&](size_t at, std::span<const float> chunk) {
          auto into = target.subspan(at, chunk.size());
          if (average) {
            std::copy(chunk.begin(), chunk.end(), into.begin());
          } else {
            float_ops::add(into, reinterpret_cast<const std::uint8_t*>(chunk.data()));
          }
        });
      }
    } else if (average) {
      DEDLOC_RETURN_IF_ERROR(decode(options.codec, bytes_of(frame), target));
    } else {
      std::span<float> values = std::span<float>(*scratch).first(part.size());
      DEDLOC_RETURN_IF_ERROR(decode(options.codec, bytes_of(frame), values));
      float_ops::add(target, reinterpret_cast<const std::uint8_t*>(values.data()));
    }
    return {};
  }

  // Pings every member we still wait on (its parts for our reducer, or its answers to ours) that is not
  // already being pinged and can be reached (a client through its relay, which answers at once that a
  // client no longer attached is not there); one that does not answer by `timeout` is marked gone, for
  // the waiting caller to act on. Under `mutex`.
  // `owes`: per member, whether our reducer still waits for its parts.
  void ping_awaited(const std::vector<bool>& owes, Duration timeout) {
    for (size_t m = 0; m < group->size(); ++m) {
      const Member& member = group->member(m);
      if (pinging[m] || gone[m] || member.ping_endpoint().empty() || member.id == client_self) continue;
      bool awaited = owes[m];
      for (const ToReducer& r : reducers) awaited = awaited || (r.member == m && !r.failed && r.unresolved > 0);
      if (!awaited) continue;
      pinging[m] = true;
      client->call(member.ping_endpoint(), net::Outgoing::of(wire::Ping{SystemClock::instance().unix_seconds()}),
                   Deadline::after(timeout), [self = shared_from_this(), m](Result<net::Incoming>&& reply) {
                     std::lock_guard lock(self->mutex);
                     self->pinging[m] = false;
                     // kCancelled: we closed the connection ourselves (or are shutting down), not a verdict.
                     if (reply || reply.status().code() == Code::kCancelled || self->closed) return;
                     self->gone[m] = reply.status();
                     self->changed.notify_all();
                   });
    }
  }

  // AllReduceResult::unaveraged, once nothing more can come back (`closed`). Under `mutex`.
  std::vector<std::pair<std::uint64_t, std::uint64_t>> unaveraged_ranges() const {
    std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;
    for (const ToReducer& r : reducers) {
      for (size_t position = 0; position < r.parts.size(); ++position) {
        if (!r.averaged[position]) ranges.emplace_back(r.parts[position].begin, r.parts[position].end);
      }
    }
    std::sort(ranges.begin(), ranges.end());
    std::vector<std::pair<std::uint64_t, std::uint64_t>> merged;
    for (const auto& range : ranges) {
      if (!merged.empty() && merged.back().second == range.first) merged.back().second = range.second;
      else merged.push_back(range);
    }
    return merged;
  }

  // The reducer is gone (or refuses us): keep our own values for everything not yet sent to it.
  void give_up(ToReducer& r, const Status& why) {
    if (!r.failed) {
      Logger::Line(log, LogLevel::kWarning, "avg") << "gave up on reducer " << group->member(r.member).id.short_string()
                                                   << ": " << why.to_string();
    }
    r.failed = true;
    r.unresolved -= r.parts.size() - r.next;
    r.next = r.parts.size();
  }
};

}  // namespace

AllReduce::AllReduce(net::Server& server, net::Client& client, crypto::PeerId self, Logger* log)
    : client_(client), self_(self), log_(log), frames_(std::make_shared<FramePool>()) {
  keep_freed_memory();  // ZeroMQ mallocs every part it receives (0.5-4 MiB): core/memory.hpp
  server.handle<wire::AvgPart>([this](wire::AvgPart&& part, net::Incoming&& request, net::Replier replier) {
    on_part(std::move(part), std::move(request), std::move(replier));
  });
}

AllReduce::~AllReduce() = default;

void AllReduce::on_part(wire::AvgPart&& part, net::Incoming&& request, net::Replier replier) {
  if (request.frames.size() != 1) return replier.fail(error(Code::kMalformed, "AvgPart carries exactly one frame"));
  Active active;
  {
    std::lock_guard lock(mutex_);
    auto it = rounds_.find(part.group_id);
    if (it == rounds_.end()) {
      if (auto expected = expected_.find(part.group_id); expected != expected_.end()) {
        return hold_locked(expected->second, std::move(part), std::move(request), std::move(replier));
      }
      bool over = std::find(finished_.begin(), finished_.end(), part.group_id) != finished_.end();
      return replier.fail(over ? error(Code::kRefused, "that averaging round is over here")
                               : error(Code::kNotFound, "no such averaging round here (yet)"));
    }
    active = it->second;
  }
  auto sender = active.group->index_of(request.envelope().sender);
  if (!sender) return replier.fail(error(Code::kRefused, "not a member of this group"));
  active.reducer->on_part(*sender, part, std::move(request.frames[0]), std::move(replier), std::chrono::steady_clock::now());
}

void AllReduce::hold_locked(Expected& expected, wire::AvgPart&& part, net::Incoming&& request, net::Replier replier) {
  auto sender = expected.group->index_of(request.envelope().sender);
  if (!sender) return replier.fail(error(Code::kRefused, "not a member of this group"));
  size_t from_sender = 0;
  for (const auto& h : expected.held) from_sender += h.sender == *sender;
  if (from_sender >= kHeldPartsPerSender) {
    return replier.fail(error(Code::kNotFound, "this averaging round has not started here yet"));
  }
  expected.held.push_back(HeldPart{*sender, std::move(part), std::move(request.frames[0]), std::move(replier)});
}

void AllReduce::expect(const Group& group) {
  std::lock_guard lock(mutex_);
  if (rounds_.count(group.id()) || expected_.count(group.id())) return;
  while (expected_.size() >= kExpectedRoundsRemembered) {
    for (auto& held : expected_.begin()->second.held) held.replier.fail(error(Code::kRefused, "that averaging round is over here"));
    expected_.erase(expected_.begin());
  }
  expected_[group.id()] = Expected{std::make_shared<const Group>(group), {}};
}

void AllReduce::forgo(const Bytes& group_id) {
  std::lock_guard lock(mutex_);
  if (rounds_.count(group_id)) return;
  if (auto it = expected_.find(group_id); it != expected_.end()) {
    for (auto& held : it->second.held) held.replier.fail(error(Code::kRefused, "that averaging round is over here"));
    expected_.erase(it);
  }
  finished_.push_back(group_id);
  if (finished_.size() > kFinishedRoundsRemembered) finished_.erase(finished_.begin());
}

std::span<float> AllReduce::buffer(std::vector<float>& storage, size_t elements) {
  if (storage.size() < elements) storage.resize(elements);
  return std::span<float>(storage).first(elements);
}

Result<AllReduceResult> AllReduce::run(const Group& group, std::span<float> vector, double weight,
                                       const AllReduceOptions& options, Deadline deadline) {
  std::lock_guard one_round_at_a_time(run_mutex_);
  if (stopping_) return error(Code::kCancelled, "this peer is shutting down");
  auto me = group.index_of(self_);
  if (!me) return error(Code::kInvalidArgument, "this peer is not a member of the group");
  const Member& self = group.member(*me);
  if (self.sends()) {
    if (vector.size() != group.length()) {
      return error(Code::kInvalidArgument, "the vector has " + std::to_string(vector.size()) + " elements, the group averages " +
                                               std::to_string(group.length()));
    }
    if (!(weight >= 0) || !std::isfinite(weight)) return error(Code::kInvalidArgument, "a sender's weight must be >= 0");
  }
  if (options.window == 0) return error(Code::kInvalidArgument, "window must be at least 1");
  if (options.centered_clip) DEDLOC_RETURN_IF_ERROR(check(*options.centered_clip));
  if (options.centered_clip && options.order_key) {
    return error(Code::kInvalidArgument, "a round summed in a fixed order cannot also clip (centered_clip)");
  }

  auto sender = std::make_shared<Sender>();
  sender->client = &client_;
  sender->client_self = self_;
  sender->group = &group;
  sender->pinging.assign(group.size(), false);
  sender->gone.assign(group.size(), std::nullopt);
  sender->vector = vector;
  sender->weight = weight;
  sender->options = options;
  sender->log = log_;
  sender->scratch = &send_scratch_;
  sender->pool = frames_.get();
  buffer(send_scratch_, group.largest_part());

  // Our reducer first, so that parts arriving from faster members find it.
  std::span<const Part> mine = group.parts_of(*me);
  std::uint64_t my_begin = mine.empty() ? 0 : mine.front().begin;
  std::uint64_t my_elements = mine.empty() ? 0 : mine.back().end - my_begin;
  auto group_copy = std::make_shared<const Group>(group);
  auto reducer = std::make_shared<ReducerRound>(
      *group_copy, *me, self.sends() ? vector.subspan(static_cast<size_t>(my_begin), static_cast<size_t>(my_elements)) : std::span<float>(),
      weight, buffer(workspace_, self.sends() ? 0 : static_cast<size_t>(my_elements)),
      buffer(reduce_scratch_, group.largest_part()), options.sender_timeout, options.centered_clip,
      options.answer == wire::PartAnswer::kAverage ? std::optional<Codec>(options.codec) : std::nullopt,
      std::chrono::steady_clock::now(),
      [sender] { sender->changed.notify_all(); }, options.order_key);
  if (options.on_progress) reducer->set_progress_callback(options.on_progress);
  // The round's deadline: `deadline` as given, or, when we may have started before the senders, as long
  // after their first part as `deadline` is after now (see AllReduceOptions::senders_start_within).
  const bool await_senders = options.senders_start_within > Duration::zero();
  if (await_senders) reducer->count_silence_from_first_part();
  const TimePoint run_began = std::chrono::steady_clock::now();
  const Duration round_length = std::max(Duration::zero(), deadline.at - run_began);
  auto round_deadline = [&]() -> Deadline {
    if (!await_senders) return deadline;
    if (auto first = reducer->first_part_at()) return Deadline{*first + round_length};
    return Deadline{run_began + options.senders_start_within};
  };
  {
    std::lock_guard lock(mutex_);
    rounds_[group.id()] = Active{group_copy, reducer};
    // Parts that came before us (expect()), in their order of arrival: still under the lock, so that none
    // arriving now overtakes them.
    if (auto it = expected_.find(group.id()); it != expected_.end()) {
      for (auto& h : it->second.held) {
        reducer->on_part(h.sender, h.part, std::move(h.frame), std::move(h.replier), std::chrono::steady_clock::now());
      }
      expected_.erase(it);
    }
  }

  {
    std::lock_guard lock(sender->mutex);
    if (self.sends()) {
      for (size_t m = 0; m < group.size(); ++m) {
        auto parts = group.parts_of(m);
        if (m == *me || parts.empty()) continue;
        sender->reducers.push_back({m, parts, 0, 0, parts.size(), false});
        sender->reducers.back().sent.resize(parts.size());
        sender->reducers.back().averaged.assign(parts.size(), false);
      }
    }
    sender->window.emplace(options.window, std::max(options.window, options.max_window), learned_window_);
    sender->part_bytes = encoded_bytes(options.codec, group.largest_part());
    sender->fill_windows(deadline);
  }

  // Wait for both halves, resending early parts, banning silent senders and members known gone, bounded
  // by the deadline.
  std::vector<bool> handled_gone(group.size(), false);
  std::vector<crypto::PeerId> result_gone;
  {
    std::unique_lock lock(sender->mutex);
    TimePoint next_check = std::chrono::steady_clock::now() + kCheckInterval;
    // Pings every kPingInterval (liveness_timeout if shorter), from that long into the round; each may take
    // liveness_timeout to come back (it rides behind the parts queued to its member).
    const bool pings = options.liveness_timeout > Duration::zero();
    const Duration ping_every = std::min(options.liveness_timeout, kPingInterval);
    TimePoint next_ping = std::chrono::steady_clock::now() + ping_every;
    for (Deadline until = round_deadline(); !(sender->done_locked() && reducer->done()) && !until.passed() && !stopping_;
         until = round_deadline()) {
      TimePoint wake = std::min({next_check, until.at, sender->retries.empty() ? next_check : sender->retries.front().due,
                                 pings ? next_ping : next_check});
      sender->changed.wait_until(lock, wake);
      // Only the retries that are due: a refusal wakes us (to shorten the wait), and resending at once
      // would spin as fast as the reducer can say "not yet".
      while (!sender->retries.empty() && sender->retries.front().due <= std::chrono::steady_clock::now()) {
        auto [slot, position, due] = sender->retries.front();
        sender->retries.pop_front();
        --sender->reducers[slot].in_flight;
        if (sender->reducers[slot].failed) {
          --sender->reducers[slot].unresolved;
          continue;
        }
        sender->send(slot, position, deadline);
      }
      if (pings && std::chrono::steady_clock::now() >= next_ping) {
        lock.unlock();  // the reducer's lock is never taken under ours
        std::vector<bool> owes(group.size());
        for (size_t m = 0; m < group.size(); ++m) owes[m] = reducer->owes(m);
        lock.lock();
        sender->ping_awaited(owes, options.liveness_timeout);
        next_ping = std::chrono::steady_clock::now() + ping_every;
      }
      for (size_t m = 0; m < group.size(); ++m) {
        if (!sender->gone[m] || handled_gone[m]) continue;
        handled_gone[m] = true;
        result_gone.push_back(group.member(m).id);
        const Status& failed = *sender->gone[m];
        const double waited = std::chrono::duration<double>(options.liveness_timeout).count();
        const Status why =
            error(Code::kUnavailable, failed.code() == Code::kTimeout
                                          ? "gone: no answer to a ping within " + std::to_string(waited) + " s"
                                          : "gone: its ping failed: " + failed.to_string());
        Logger::Line(log_, LogLevel::kInfo, "avg") << "member " << group.member(m).id.short_string() << " is " << why.message();
        for (auto& r : sender->reducers) {
          if (r.member != m || r.unresolved == 0) continue;
          sender->give_up(r, why);
          // Parts in flight to it resolve now (kCancelled), not at the reducer timeout.
          if (r.in_flight > 0) client_.disconnect(group.member(m).endpoint);
        }
        lock.unlock();
        reducer->drop(m, std::chrono::steady_clock::now());
        lock.lock();
      }
      if (std::chrono::steady_clock::now() >= next_check) {
        lock.unlock();
        reducer->check_senders(std::chrono::steady_clock::now());
        lock.lock();
        next_check = std::chrono::steady_clock::now() + kCheckInterval;
      }
    }
  }
  // Past the deadline: our reducer averages what it has, so our range holds averages, not partial sums.
  if (!reducer->done()) reducer->finish_now(std::chrono::steady_clock::now());

  AllReduceResult result;
  result.gone = std::move(result_gone);
  const std::optional<double> reduced = reducer->common_weight();  // not under the sender's lock (above)
  const std::optional<double> least_reduced = reducer->least_weight();
  if (await_senders) {
    // No part with weight ever came (the senders' round was over, or they never sent): all of it was the wait.
    const auto first = reducer->first_part_at();
    result.waited_for_senders = (first ? *first : std::chrono::steady_clock::now()) - run_began;
  }
  {
    std::lock_guard lock(sender->mutex);
    result.slowest_part = sender->slowest_part;
    sender->closed = true;  // late completions no longer touch `vector`, and nothing more is sent
    for (const auto& r : sender->reducers) {
      if (r.failed || r.unresolved > 0) {
        result.failed_reducers.push_back(group.member(r.member).id);
        // Parts of `vector` may still wait in ZeroMQ's queue to it (a dead or stalled peer): closing the
        // connection drops them (below, we wait until they are given back).
        if (options.codec == Codec::kNone) client_.disconnect(group.member(r.member).endpoint);
      }
    }
    // The parts of every other reducer and our own share make the whole vector.
    result.unaveraged = sender->unaveraged_ranges();
    std::uint64_t averaged = group.length();
    for (const auto& [begin, end] : result.unaveraged) averaged -= end - begin;
    result.bytes_sent = sender->bytes_sent;
    result.unweighed_parts = sender->unweighed_parts;
    result.averaged_fraction = group.length() == 0 || !self.sends() ? 1.0
                                                                    : static_cast<double>(averaged) / static_cast<double>(group.length());
    // One total over every part, ours included, and nothing kept unaveraged: the group's weight.
    std::optional<double> total = sender->answered_weight;
    bool agree = !sender->answered_weights_differ;
    if (my_elements > 0) {
      agree = agree && reduced && (!total || *total == *reduced);
      if (reduced) total = reduced;
    }
    if (self.sends() && result.averaged_fraction == 1.0 && agree && total) result.weight = *total;
    // The least of the totals, ours included, over the parts that came back weighed (a sender banned midway
    // leaves them differing; a reducer given up on, some parts without one).
    std::optional<double> least = sender->least_answered_weight;
    if (my_elements > 0 && least_reduced) least = std::min(least.value_or(*least_reduced), *least_reduced);
    if (self.sends() && least) result.least_weight = *least;
  }
  // The caller may free or change `vector` once we return: ZeroMQ must have let go of every part sent from
  // it. Those to reducers that answered were written to their sockets before the answers came; the rest
  // were dropped with their connections above.
  DEDLOC_CHECK(sender->loans->wait_all_back(std::chrono::steady_clock::now() + kLoanReturnLimit),
               "ZeroMQ kept parts of the vector for a minute after their connections were closed");
  for (size_t m : reducer->banned()) result.banned_senders.push_back(group.member(m).id);
  for (size_t m : reducer->banned_unheard()) result.unheard_senders.push_back(group.member(m).id);
  result.bytes_sent += reducer->bytes_sent();
  {
    std::lock_guard lock(sender->mutex);
    if (!sender->reducers.empty()) learned_window_ = sender->window->per_reducer(sender->reducers.size(), sender->part_bytes);
  }
  {
    std::lock_guard lock(mutex_);
    rounds_.erase(group.id());
    finished_.push_back(group.id());
    if (finished_.size() > kFinishedRoundsRemembered) finished_.erase(finished_.begin());
  }
  return result;
}

size_t zero_failed_shares(const AllReduceResult& reduced, const Group& group, std::span<float> vector) {
  std::set<crypto::PeerId> dropped(reduced.banned_senders.begin(), reduced.banned_senders.end());
  for (const auto& id : reduced.failed_reducers) {
    dropped.insert(id);
    const auto index = group.index_of(id);
    if (!index) continue;
    for (const Part& part : group.parts_of(*index)) {
      if (part.end > vector.size() || part.begin > part.end) continue;
      std::fill(vector.begin() + static_cast<std::ptrdiff_t>(part.begin),
                vector.begin() + static_cast<std::ptrdiff_t>(part.end), 0.0f);
    }
  }
  return dropped.size();
}

}  // namespace dedloc::avg
