#include "dedloc/avg/round_result.hpp"

#include <algorithm>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include "dedloc/avg/codec.hpp"
#include "dedloc/dht/record_schema.hpp"
#include "dedloc/wire/avg_messages.hpp"
#include "dedloc/wire/records.hpp"

namespace dedloc::avg {

using net::bytes_of;

namespace {

constexpr Duration kListingDeadline = std::chrono::seconds(3);   // storing a holder's listing
constexpr Duration kRelist = std::chrono::milliseconds(300);     // reading the listing again while it is empty
constexpr Duration kRequestTimeout = std::chrono::seconds(5);    // one stripe from one holder
constexpr std::uint64_t kStripe = wire::kMaxStatePartElements;   // elements per request

std::string text_of(const Bytes& bytes) { return std::string(bytes.begin(), bytes.end()); }

}  // namespace

// What the handler on the server's loop thread shares with the owner: the result held now.
struct RoundResultShelf::Core {
  std::mutex mutex;
  std::string round;
  Bytes schema_hash;
  std::uint64_t contributions = 0;
  std::vector<float> values;

  void serve(const wire::AvgResultRequest& request, const net::Replier& replier) {
    std::lock_guard lock(mutex);
    if (request.round != round || values.empty()) {
      return replier.fail(error(Code::kNotFound, "no result of '" + request.round + "' held here"));
    }
    if (request.offset > values.size() || request.length > values.size() - request.offset) {
      return replier.fail(error(Code::kInvalidArgument, "stripe past the result's " + std::to_string(values.size()) +
                                                            " elements"));
    }
    wire::AvgResultReply reply{round, schema_hash, values.size(), contributions, request.offset, request.length};
    std::vector<zmq::message_t> frames;
    if (request.length > 0) {
      const auto stripe = std::span<const float>(values).subspan(request.offset, request.length);
      zmq::message_t frame(encoded_bytes(Codec::kNone, stripe.size()));
      encode(Codec::kNone, stripe, {static_cast<std::uint8_t*>(frame.data()), frame.size()});
      frames.push_back(std::move(frame));
    }
    replier.reply(reply, std::move(frames));
  }
};

void add_round_result_schema(dht::RecordValidator& validator) {
  dht::add_record_schema(validator, wire::round_result_schema());
}

RoundResultShelf::RoundResultShelf(net::Server& server, dht::Node& dht) : dht_(dht), core_(std::make_shared<Core>()) {
  server.handle<wire::AvgResultRequest>(
      [core = core_](wire::AvgResultRequest&& request, net::Incoming&&, net::Replier replier) {
        core->serve(request, replier);
      });
}

RoundResultShelf::~RoundResultShelf() {
  if (listing_.valid()) listing_.wait();
}

void RoundResultShelf::keep(const std::string& round, const Bytes& schema_hash, std::span<const float> values,
                            std::uint64_t contributions) {
  std::lock_guard lock(core_->mutex);
  core_->round = round;
  core_->schema_hash = schema_hash;
  core_->contributions = contributions;
  core_->values.assign(values.begin(), values.end());
}

bool RoundResultShelf::holds(const std::string& round) const {
  std::lock_guard lock(core_->mutex);
  return core_->round == round && !core_->values.empty();
}

void RoundResultShelf::hold(const std::string& round, const Bytes& schema_hash, std::span<const float> values,
                            std::uint64_t contributions, const net::PeerAddress& self, Duration ttl) {
  keep(round, schema_hash, values, contributions);
  if (listing_.valid()) listing_.wait();  // the last round's, long stored (or given up) by now
  const std::string key = wire::round_result_key(round);
  const std::string subkey = self.to_string();
  Bytes value = wire::encode_round_result({schema_hash, values.size(), contributions});
  const double expiration = SystemClock::instance().unix_seconds() + std::chrono::duration<double>(ttl).count();
  listing_ = std::async(std::launch::async, [this, key, subkey, value = std::move(value), expiration]() mutable {
    // A listing that fails costs the late members only this holder; nothing to do about it here.
    (void)dht_.store(key, Bytes(subkey.begin(), subkey.end()), std::move(value), expiration,
                     Deadline::after(kListingDeadline));
  });
}

namespace {

struct Holder {
  net::PeerAddress address;
  std::uint64_t contributions = 0;
};

// The holders listed for `round` whose record matches the result wanted, with more than `more_than`
// contributions, the most first, and among holders of as many in an order of this call's own: the readers of
// one listing are many at once (a dead carrier's receivers, a bucket's latecomers), and in the listing's
// order they all asked the same holder, a carrier busy handing the result on to its own group.
Result<std::vector<Holder>> list_holders(dht::Node& dht, const std::string& round, const Bytes& schema_hash,
                                         std::uint64_t length, const std::string& self_endpoint,
                                         std::uint64_t more_than, Deadline deadline) {
  auto found = dht.get(wire::round_result_key(round), dht::GetMode::kLatest, deadline);
  if (!found) return found.status();
  std::vector<Holder> holders;
  if (!found->has_value()) return holders;
  for (const auto& entry : (*found)->entries) {
    if (!entry.subkey || entry.value.empty()) continue;
    auto address = net::PeerAddress::parse(text_of(*entry.subkey));
    auto record = wire::decode_round_result(entry.value);
    if (!address || !record || address->endpoint == self_endpoint) continue;
    if (record->schema_hash != schema_hash || record->length != length || record->contributions <= more_than) continue;
    holders.push_back({std::move(*address), record->contributions});
  }
  thread_local std::mt19937_64 random{std::random_device{}()};
  std::shuffle(holders.begin(), holders.end(), random);
  std::stable_sort(holders.begin(), holders.end(),
                   [](const Holder& a, const Holder& b) { return a.contributions > b.contributions; });
  return holders;
}

// The `ranges` of the result from one holder, stripe by stripe, into `into`.
Result<std::uint64_t> fetch_from(net::Client& client, const Holder& holder, const std::string& round,
                                 const Bytes& schema_hash, std::span<float> into, const ElementRanges& ranges,
                                 Deadline deadline) {
  std::uint64_t contributions = 0;
  for (const auto& [begin, end] : ranges) {
    if (begin > end || end > into.size()) return error(Code::kInvalidArgument, "a range past the result's end");
    for (std::uint64_t offset = begin; offset < end; offset += kStripe) {
      const std::uint64_t length = std::min<std::uint64_t>(kStripe, end - offset);
      const Deadline request{std::min(deadline.at, Deadline::after(kRequestTimeout).at)};
      auto reply = client.call(holder.address.endpoint,
                               net::Outgoing::of(wire::AvgResultRequest{round, offset, length}), request).wait();
      if (!reply) return reply.status();
      if (holder.address.peer_id && reply->envelope().sender != *holder.address.peer_id) {
        return error(Code::kUnauthorized, "answered by another peer than the holder listed");
      }
      auto m = reply->decode<wire::AvgResultReply>();
      if (!m) return m.status();
      if (m->round != round || m->schema_hash != schema_hash || m->total != into.size() || m->offset != offset ||
          m->length != length || reply->frames.size() != 1) {
        return error(Code::kMalformed, "answered with another round, schema or stripe");
      }
      if (contributions != 0 && m->contributions != contributions) {
        return error(Code::kRefused, "moved on to another result of the round midway");
      }
      contributions = m->contributions;
      DEDLOC_RETURN_IF_ERROR(decode(Codec::kNone, bytes_of(reply->frames[0]), into.subspan(offset, length)));
    }
  }
  return contributions;
}

// The `ranges` of the result from the first of `holders`, in their order, that answers whole by `deadline`;
// nullopt otherwise, with the last failure in `last`.
std::optional<FetchedResult> fetch_from_first(net::Client& client, const std::vector<Holder>& holders,
                                              const std::string& round, const Bytes& schema_hash,
                                              std::span<float> into, const ElementRanges& ranges, Deadline deadline,
                                              Status& last) {
  for (const auto& holder : holders) {
    if (deadline.passed()) break;
    auto fetched = fetch_from(client, holder, round, schema_hash, into, ranges, deadline);
    if (fetched) return FetchedResult{holder.address.to_string(), *fetched};
    last = fetched.status().with_context(holder.address.to_string());
  }
  return std::nullopt;
}

}  // namespace

Result<FetchedResult> fetch_round_result(dht::Node& dht, net::Client& client, const std::string& round,
                                         const Bytes& schema_hash, std::span<float> into, Deadline deadline,
                                         const std::string& self_endpoint, std::uint64_t more_than,
                                         const std::function<bool()>& none_coming) {
  Status last = error(Code::kTimeout, "no holder of '" + round + "' listed");
  while (!deadline.passed()) {
    auto holders = list_holders(dht, round, schema_hash, into.size(), self_endpoint, more_than, deadline);
    if (!holders) {
      last = holders.status();
    } else {
      if (auto fetched = fetch_from_first(client, *holders, round, schema_hash, into, {{0, into.size()}}, deadline,
                                          last)) {
        return *fetched;
      }
      if (more_than > 0 && holders->empty()) {
        return error(Code::kNotFound, "no holder of '" + round + "' with more than " + std::to_string(more_than) +
                                          " contributions listed");
      }
      if (holders->empty() && none_coming && none_coming()) {
        return error(Code::kNotFound, "no holder of '" + round + "' listed, and the round is over");
      }
    }
    std::this_thread::sleep_for(std::min<Duration>(kRelist, deadline.remaining()));
  }
  return error(Code::kTimeout, "no result of '" + round + "' fetched in time (last: " + last.to_string() + ")");
}

Result<FetchedResult> fetch_round_result_ranges(dht::Node& dht, net::Client& client, const std::string& round,
                                                const Bytes& schema_hash, std::span<float> into,
                                                const ElementRanges& ranges, std::uint64_t contributions,
                                                Deadline deadline, const std::string& self_endpoint) {
  if (contributions == 0) return error(Code::kInvalidArgument, "a listed result holds at least one contribution");
  Status last = error(Code::kTimeout, "no holder of '" + round + "' with " + std::to_string(contributions) +
                                          " contributions listed");
  while (!deadline.passed()) {
    auto holders = list_holders(dht, round, schema_hash, into.size(), self_endpoint, contributions - 1, deadline);
    if (!holders) {
      last = holders.status();
    } else {
      std::erase_if(*holders, [&](const Holder& h) { return h.contributions != contributions; });
      if (auto fetched = fetch_from_first(client, *holders, round, schema_hash, into, ranges, deadline, last)) {
        return *fetched;
      }
    }
    std::this_thread::sleep_for(std::min<Duration>(kRelist, deadline.remaining()));
  }
  return error(Code::kTimeout, "no ranges of '" + round + "' fetched in time (last: " + last.to_string() + ")");
}

Result<FetchedResult> fetch_round_result_from(net::Client& client, const net::PeerAddress& holder,
                                              const std::string& round, const Bytes& schema_hash,
                                              std::span<float> into, const ElementRanges& ranges, Deadline deadline) {
  auto fetched = fetch_from(client, Holder{holder, 0}, round, schema_hash, into, ranges, deadline);
  if (!fetched) return fetched.status().with_context(holder.to_string());
  return FetchedResult{holder.to_string(), *fetched};
}

}  // namespace dedloc::avg
