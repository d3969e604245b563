// One iterative Kademlia lookup, sans-IO: it decides whom to ask next; the caller does the asking.
//
// The lookup keeps the candidates it has heard of in XOR order from the target. It asks the nearest ones it
// has not asked, at most `alpha` at a time; every answer may bring nearer candidates; a candidate that fails
// (its RPC deadline passed, or it answered garbage) is dropped. It is done when the `k` nearest live
// candidates have all answered, or when nobody is left to ask.
//
// Dead nodes must not cost a round each. A query unanswered for a stall time is *stalled*: it gives its
// slot to the next candidate and the lookup stops waiting for it (its answer is still taken if it comes), so
// a lookup pays a stall time per dead node it waits on, not an RPC deadline. The stall time follows the
// answers: `stall_multiple` times the slowest answer so far, within [min_stall_after, stall_after] (the
// upper bound alone until the first answer), so on a fast network dead nodes cost little, and on a slow or
// overloaded one live nodes are not given up on early. A candidate the caller marks as a suspect (it failed
// recently) is asked as if already stalled: never waited for, so responsive nodes decide when the lookup
// ends. Stalled queries are only waited for when fewer than `k` nodes have answered: then they may be all
// there is (a small swarm, or an overloaded one where every answer is slow), or, in a value lookup
// (wait_for_nearest), when they are among the k nearest and not suspects. Even then, once some node has
// answered, a suspect is not waited for, and a stalled query is given up a second stall time after it
// stalled: in a swarm smaller than `k` a node that just died would otherwise cost every lookup its RPC
// deadline until all routing tables dropped it. Time is an input (`now`), never read here; each RPC's
// deadline is the caller's business, and a failure is just another input.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "dedloc/core/clock.hpp"
#include "dedloc/dht/routing_table.hpp"

namespace dedloc::dht {

struct LookupOptions {
  size_t k = 20;      // how many nearest nodes the lookup must hear from before it is done
  size_t alpha = 4;   // requests in flight at once
  size_t max_candidates = 256;  // bound on what hostile answers can make us remember
  // The longest a query holds a slot and is waited for (see above). Zero: no stalls (every query is waited
  // for until it answers or fails).
  Duration stall_after = Duration::zero();
  // The shortest (the stall time once answers have come, however fast). Zero: stall_after always.
  Duration min_stall_after = Duration::zero();
  double stall_multiple = 4;  // of the slowest answer so far
  // A value lookup: a stalled query to one of the k nearest candidates (not a suspect) still holds the
  // lookup open until it answers, fails or is given up (a second stall time, once some node answered). The
  // nearest nodes are where the value is stored, and a holder that is merely slow (loaded, far) must not be
  // passed over at once for farther nodes that answer fast; a dead one costs two stall times once, and is
  // a suspect afterwards.
  bool wait_for_nearest = false;
};

class Lookup {
 public:
  // `self` is never asked or returned (a node does not query itself).
  Lookup(PeerId target, PeerId self, const std::vector<Contact>& seeds, LookupOptions options = {});

  // The contacts to ask now (marked in flight, asked at `now`); empty when `alpha` are already in flight or
  // none is left.
  std::vector<Contact> next_queries(TimePoint now = {});
  // Stalls the queries asked a stall time or more before `now` (their slots go to the next candidates) and
  // returns who they went to: slow or gone, worth not waiting for in other lookups either. Gives up (no
  // longer waits for) stalled queries asked two stall times before `now`, once some node has answered.
  std::vector<PeerId> stall_overdue(TimePoint now);
  // When the next query in flight stalls, or the next stalled one is given up (call stall_overdue then);
  // TimePoint::max() when none can.
  TimePoint next_stall() const;
  // How long a query is waited for now (zero: for ever).
  Duration stall_time() const;
  // `id` failed recently (the caller remembers it): if asked, it is asked stalled, never waited for.
  void suspect(const PeerId& id) { suspects_.insert(id); }
  // `from` answered with these contacts (nearest to the target, in any order), at `now`.
  void on_answer(const PeerId& from, const std::vector<Contact>& contacts, TimePoint now = {});
  // `from` failed to answer in time, or answered something unusable.
  void on_failure(const PeerId& from);
  // Stop early (e.g. a value was found and the first one is enough).
  void finish() { finished_ = true; }

  bool done() const;
  // Queries that hold a slot (asked, not yet answered, failed or stalled).
  size_t in_flight() const { return in_flight_; }
  // Queries stalled and not yet answered or failed: an answer may still come.
  size_t stalled() const { return stalled_; }
  // Up to `count` contacts that answered, nearest first.
  std::vector<Contact> nearest_answered(size_t count) const;
  const PeerId& target() const { return target_; }

 private:
  enum class State { kFresh, kInFlight, kStalled, kAnswered, kFailed };
  struct Candidate {
    Contact contact;
    State state = State::kFresh;
    TimePoint asked_at{};
    bool waited_for = false;  // kStalled: still counted in waited_stalled_ (not a suspect, not given up)
  };
  // Leaves the in-flight or stalled state for `to` (counters kept); false when it was in neither.
  bool settle(Candidate& candidate, State to);
  void add(const Contact& contact);

  PeerId target_;
  PeerId self_;
  LookupOptions options_;
  std::map<PeerId, Candidate> candidates_;  // keyed by XOR distance to the target: nearest first
  std::set<PeerId> suspects_;
  std::optional<Duration> slowest_answer_;
  size_t in_flight_ = 0;
  size_t stalled_ = 0;
  size_t waited_stalled_ = 0;  // stalled queries the lookup still waits for, when fewer than k answered
  size_t answered_ = 0;
  bool finished_ = false;
};

}  // namespace dedloc::dht
