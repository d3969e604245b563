// A finished round's result, for a member that missed the round.
//
// Group buckets' second stage (collab/group_buckets.hpp) is a round among the buckets' carriers. A carrier
// whose bucket finished late looks for the others after they formed their group without it: it finds nobody
// ("no group ... nobody else is looking"), and its whole group would step on its own bucket's average, a
// model of its own, until the divergence check downloads the leading state into every one of its members.
// Instead the late carrier fetches the round's result from a carrier that took part, and hands that on:
// its group steps with the rest of the swarm (its own bucket's samples are not in that average; it loses
// them, not the model). Late carriers that meet one another form a second, smaller round of their own;
// each of them then takes a result listed with more contributions than theirs, where one is. A trainer
// that missed its bucket's group altogether takes the result the same way and steps with it
// (Trainer::take_missed_round_result), instead of waiting for the round's end to download the state.
//
// Holders. A member whose round averaged everything holds a copy of the result (RoundResultShelf::hold, one
// round at a time) and lists itself under round_result_key(round) in the DHT (subkey: its address; value:
// the schema hash, length and how many weighed contributions the result holds: wire/records.hpp). It
// answers AvgResultRequest for that round, one stripe at a time, on its averaging server.
//
// Fetching (fetch_round_result): read the listing, ask the holders with the most contributions first, one
// after another, each reader in an order of its own among holders of as many (in the listing's order, the
// receivers of a dead carrier and a bucket's latecomers, 8 to 24 at once in the lab's churn runs, all took
// the whole result from one carrier while it handed it on to its own group); a holder that fails (gone,
// holds another round by now, answers with another schema or length, or is not the peer its address
// names) is passed over. While nobody is listed the round may still
// be running: the listing is read again every 300 ms until the deadline.
//
// Mending a hand-on. A carrier hands its values to its group's trainers in a round where each of them
// reduces a slice (Averager::broadcast); a member that dies in it costs every receiver that slice, and each
// would step on the carrier's values in some ranges and its own elsewhere, a mixture that puts the group on
// parameters of its own. So the carrier keeps what it hands on (RoundResultShelf::keep: held, not listed),
// and a receiver fetches the ranges that did not come through from it directly
// (fetch_round_result_from).
#pragma once

#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "dedloc/core/clock.hpp"
#include "dedloc/dht/node.hpp"
#include "dedloc/net/client.hpp"
#include "dedloc/net/peer_address.hpp"
#include "dedloc/net/server.hpp"

namespace dedloc::avg {

class RoundResultShelf {
 public:
  // Registers the AvgResultRequest handler on `server` (before server.start()). `dht` outlives the shelf.
  RoundResultShelf(net::Server& server, dht::Node& dht);
  // Waits for a listing still being stored (bounded by its deadline, 3 s).
  ~RoundResultShelf();
  RoundResultShelf(const RoundResultShelf&) = delete;
  RoundResultShelf& operator=(const RoundResultShelf&) = delete;

  // Holds a copy of `values`, the result of `round` with `contributions` weighed contributions in it, in
  // place of the result held before, and lists `self` as its holder until `ttl` from now. The listing is
  // stored in the background: the caller (a carrier about to hand the result on) does not wait for it.
  void hold(const std::string& round, const Bytes& schema_hash, std::span<const float> values,
            std::uint64_t contributions, const net::PeerAddress& self, Duration ttl);
  // Holds a copy of `values` as hold() does, without listing it: for peers that know to ask us.
  void keep(const std::string& round, const Bytes& schema_hash, std::span<const float> values,
            std::uint64_t contributions);
  // Whether the result held now is `round`'s.
  bool holds(const std::string& round) const;

  struct Core;  // round_result.cpp

 private:
  dht::Node& dht_;
  std::shared_ptr<Core> core_;
  std::future<void> listing_;
};

// Registers the schema of round result listings ("_held") with a node's validator (before node.start()).
void add_round_result_schema(dht::RecordValidator& validator);

struct FetchedResult {
  std::string holder;               // the address it came from
  std::uint64_t contributions = 0;  // weighed contributions averaged into it
};

// [begin, end) element ranges of a result, ascending and disjoint.
using ElementRanges = std::vector<std::pair<std::uint64_t, std::uint64_t>>;

// Fetches `round`'s result, of `schema_hash` and `into.size()` elements, into `into` from a holder listed in
// the DHT (see above) with more than `more_than` contributions, never from `self_endpoint`. kTimeout when
// none answered whole by `deadline` (`into` may then hold a part of a result: the caller's values are not
// to be trusted after a failure). With `more_than` > 0 the caller holds a result of its own and asks for a
// larger one: the listing is read once, and nobody listed (kNotFound) means nobody has one. `none_coming`,
// asked each time the listing names nobody: true ends the wait at once (kNotFound), where the caller knows
// that nobody will list one (every member of the round moved on without listing it).
Result<FetchedResult> fetch_round_result(dht::Node& dht, net::Client& client, const std::string& round,
                                         const Bytes& schema_hash, std::span<float> into, Deadline deadline,
                                         const std::string& self_endpoint = "", std::uint64_t more_than = 0,
                                         const std::function<bool()>& none_coming = {});

// Fetches the `ranges` of `round`'s result into the same ranges of `into`, from a holder listed with exactly
// `contributions` (the rest of `into` is left as it is): a receiver whose carrier died in its hand-on, from
// the carriers that averaged with it, which hold what it handed on. Each caller asks the holders in an order
// of its own, so that a group's receivers, all missing the same ranges at once, spread over them. kTimeout
// when none answered by `deadline` (`into` may then hold some of the ranges from a holder of that size).
Result<FetchedResult> fetch_round_result_ranges(dht::Node& dht, net::Client& client, const std::string& round,
                                                const Bytes& schema_hash, std::span<float> into,
                                                const ElementRanges& ranges, std::uint64_t contributions,
                                                Deadline deadline, const std::string& self_endpoint = "");

// Fetches the `ranges` of `round`'s result, of `schema_hash` and `into.size()` elements, from `holder`, a peer
// known to hold it (no listing is read), into the same ranges of `into`; the rest of `into` is left as it is.
// Errors: the holder is gone or holds something else, a range is out of bounds, or `deadline` passed (`into`
// may then hold some of the ranges).
Result<FetchedResult> fetch_round_result_from(net::Client& client, const net::PeerAddress& holder,
                                              const std::string& round, const Bytes& schema_hash,
                                              std::span<float> into, const ElementRanges& ranges, Deadline deadline);

}  // namespace dedloc::avg
