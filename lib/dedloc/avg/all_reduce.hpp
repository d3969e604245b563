// The butterfly all-reduce: every member averages the parts of the vector its plan share
// assigned to it (ReducerRound), while it streams its own parts to the other reducers and takes back what
// they answer. Senders keep a window of parts in flight per reducer, so sending, reducing and returning
// overlap.
//
// The answer (AllReduceOptions::answer): by default each reducer sends every member the same encoding of
// its part's average, and a reducer's own values become what that encoding decodes to, so every member
// that sends in the same codec ends the round with bit-identical values (which is what lets peers compare
// parameter hashes: docs/architecture.md). Asking for the delta (average minus own values) instead keeps
// each member's own precision under a lossy codec, at the price of members differing in the last bits:
// right for averaging parameters in 8 bits, where the values are large and the differences small.
//
// The window: a sender keeps between `window` and `max_window` parts in flight per reducer, sized during
// the round from the delivery rate and part round trip it measures (in_flight_window.hpp), and starting
// where the previous round ended. On loopback the measured bandwidth-delay product is tiny and `window`
// holds: larger windows there cost CPU without gaining bandwidth (parts wait longer in queues and go cold
// in cache: bench/allreduce/README.md, window 8 took about 1.5x the CPU of window 2). On long paths a
// part takes hundreds of milliseconds to come back averaged, and the window grows to keep the link busy
// (bench/lab/README.md). max_window == window fixes it.
//
// Faults never make a member wait longer than its timeouts: a reducer bans senders silent past
// `sender_timeout` (their missing parts are averaged without them); a sender gives up on a reducer that
// does not answer a part within `reducer_timeout` (it keeps its own values for that reducer's remaining
// parts and reports the fraction it got averaged, and where the rest lies: AllReduceResult::unaveraged).
// `reducer_timeout` should exceed `sender_timeout`: a reducer legitimately holds a part's answer while it
// waits for a slow sender.
//
// A member known gone ends both waits at once instead: with `liveness_timeout` set, every member we still
// wait on (its parts, or its answers) is pinged about once a second, one ping in flight at a time
// (net::Server answers Ping on every server, from its loop thread, whatever the member is computing), and
// one whose ping fails is gone. A failure can be certain at once: a SIGKILLed process's port refuses the
// connection, which the averager's client reports then (net::ClientOptions::fail_when_refused); a
// client-mode member cannot be dialled and is pinged through its relay (Member::relay, from its join),
// which answers at once that a client whose link closed is not attached (a client without one is waited
// for only until sender_timeout). Otherwise a member is gone when a ping has had no answer within
// liveness_timeout (a machine that went away). Its parts are averaged without it (our reducer bans it) and
// we keep our own values for its share (our sender gives up on it, closing the connection so that the
// parts in flight to it resolve now). A ping to a member that reduces rides the connection that carries
// our parts to it, behind what is still queued: liveness_timeout must cover a part's round trip under load
// (the trainer derives it from the round trips it measured, collab/averaging_timeouts.hpp).
//
// Without compression our parts are sent straight from the caller's vector (ZeroMQ zero-copy frames): run()
// returns only once ZeroMQ has let go of all of them, and to that end closes its client's connections to
// the reducers it gave up on (net::Client::disconnect: what is queued to them is dropped, and other calls in
// flight to those peers fail with kCancelled).
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "dedloc/avg/centered_clip.hpp"
#include "dedloc/avg/codec.hpp"
#include "dedloc/avg/group.hpp"
#include "dedloc/core/log.hpp"
#include "dedloc/net/client.hpp"
#include "dedloc/net/server.hpp"

namespace dedloc::avg {

struct AllReduceOptions {
  Codec codec = Codec::kNone;                        // of the parts we send (answers come back in it too)
  wire::PartAnswer answer = wire::PartAnswer::kAverage;  // what our parts come back as (see above)
  size_t window = 2;                                 // parts in flight to each reducer, at least (see above)
  size_t max_window = 32;                            // ... and at most
  size_t max_in_flight = 0;                          // parts in flight to all reducers together; 0: no cap
  Duration sender_timeout = std::chrono::seconds(15);
  Duration reducer_timeout = std::chrono::seconds(30);
  // How long a member we wait on may leave a ping unanswered before it is known gone (see above); zero:
  // no pings, only the timeouts above end the waits.
  Duration liveness_timeout{};
  // A member that adds no weight (an aux peer, a trainer at weight 0 while it downloads the state) may run
  // a group found ahead of time long before the senders do: they send when their batch is complete, and a
  // group sought ahead forms at its leader's matchmaking deadline, which an underestimated batch ETA puts
  // seconds before that. Set (> 0), our reducer's clocks (the round's deadline, the senders' silence) start
  // at the first part another member sends us, waited for at most this long; zero: they start with run().
  // Our own parts (a member at weight 0 sends zeros) keep the deadline run() was given.
  Duration senders_start_within{};
  // Robust aggregation of the parts our reducer averages (avg/centered_clip.hpp); unset: the weighted mean.
  // It guards the parts this member reduces: every honest reducer should set it.
  std::optional<CenteredClipOptions> centered_clip;
  // Set (on every member of a round): the contributions are summed in ascending order of their senders'
  // keys once a part is complete, not as they arrive, and contributions at weight 0 are left out. Float
  // sums depend on their order: groups that hold the same contributions under the same keys then compute
  // bit-identical averages, whoever reduces and whatever the network's timing. The trainer's cross-bucket
  // stage hands its result on in such a round, where the one contribution with weight is taken as it is
  // (Averager::broadcast). Incompatible with centered_clip.
  std::optional<std::uint64_t> order_key;
  // Progress: called after each part we send and each part our reducer completes (under the round's
  // locks: keep it short). Tests use it to kill a member at an exact point of a round.
  std::function<void()> on_progress;
};

struct AllReduceResult {
  double averaged_fraction = 0;                  // of our vector's elements that came back averaged
  std::vector<crypto::PeerId> banned_senders;    // members our reducer stopped waiting for
  std::vector<crypto::PeerId> unheard_senders;   // ... of which delivered it no part at all
  std::vector<crypto::PeerId> failed_reducers;   // reducers we gave up on (we kept our values there)
  // Where our vector kept our own values: the [begin, end) element ranges of the parts that did not come
  // back averaged (their reducer was given up on, or its answer refused), ascending, adjacent ones merged;
  // empty when averaged_fraction is 1 or we sent nothing. A trainer zeroes them in its gradient rounds, so
  // that the members that lost the same reducer step alike (Trainer::run_gradient_round).
  std::vector<std::pair<std::uint64_t, std::uint64_t>> unaveraged;
  // Parts we asked the average of that came back as a zero delta: their reducer weighed nothing (every
  // contribution it kept had weight 0, the senders with weight banned). A member at weight 0 holds its own
  // zeros there, not the others' average.
  std::uint64_t unweighed_parts = 0;
  // Payload bytes this peer put on the wire in the round: its parts to the reducers (a part resent, to a
  // reducer that had not yet heard of the round, counts twice) and its reducer's deltas back to the
  // senders (codec bytes; message headers and transport framing not counted).
  std::uint64_t bytes_sent = 0;
  // The total weight averaged into our vector, when every part came back averaged (reducers tell it with
  // their answers) with one total: the weight of the group's senders; 0 otherwise (a part averaged
  // without a sender, a reducer given up on, an older peer's answer).
  double weight = 0;
  // The smallest total weight a part of our vector that came back weighed was averaged with, ours included
  // (0 when none did; parts answered unweighed are unweighed_parts): with every part back, the group's
  // weight where they agree (`weight`), and less where a sender was banned midway (its parts reduced before
  // the ban hold its weight, the rest do not). Every part is then a proper average of at least this much
  // weight: what a bucket's carrier brings across buckets. In a broadcast, the weight the broadcaster told,
  // also when some parts did not come.
  double least_weight = 0;
  // Members found gone by their pings (their waits ended then).
  std::vector<crypto::PeerId> gone;
  // The longest a part of ours took to come back averaged, among those that did (zero when none did):
  // what a sender or reducer timeout must cover on this network.
  Duration slowest_part{};
  // With senders_start_within: how long after run() the first part with weight from another member came
  // (the round's own time is the rest), or the whole round when none came; zero otherwise.
  Duration waited_for_senders{};
};

// Zeroes in `vector` the whole share of every reducer `reduced` gave up on in `group` (the round's) and
// returns how many members dropped out of the round (reducers given up on, senders banned). A reducer that
// died leaves every other member the average in the parts it answered before, and its own values in the
// rest, a different mixture on each: zeroed, the members agree again (the cross-bucket stage's carriers,
// train/trainer.cpp, which hand their values on to their groups).
size_t zero_failed_shares(const AllReduceResult& reduced, const Group& group, std::span<float> vector);

class ReducerRound;
class FramePool;  // all_reduce.cpp

// One peer's averaging endpoint: answers other members' parts for the round in progress, and runs rounds.
// Buffers are kept between rounds (touching fresh memory costs more than the network here: docs/architecture.md).
class AllReduce {
 public:
  // Registers the part handler on `server` (before server.start()); `client` sends our parts.
  // The first AllReduce in a process also tells malloc to keep freed memory instead of returning it to the
  // system (all_reduce.cpp says why): ZeroMQ mallocs every part it receives, and a fresh page costs more
  // here than the network takes to fill it.
  AllReduce(net::Server& server, net::Client& client, crypto::PeerId self, Logger* log = &Logger::global());
  ~AllReduce();
  AllReduce(const AllReduce&) = delete;
  AllReduce& operator=(const AllReduce&) = delete;

  // Averages `vector` (length group.length(); empty for an aux member) with the group, weighted by
  // `weight` (>= 0 for members that send). Returns when our parts came back and our reducer's parts are
  // done, or at `deadline` (then with what was averaged by then). Errors: we are not in the group, the
  // vector's length is wrong.
  //
  // Weight 0 takes part without contributing: our reducer averages its share of the others' vectors, and
  // our vector (which must then be finite, zeros say) comes back as their average. A member that found a
  // group but has nothing to give (its gradients are not finite, its round moved on) serves the group
  // this way rather than leaving the others to wait out their sender timeout.
  Result<AllReduceResult> run(const Group& group, std::span<float> vector, double weight,
                              const AllReduceOptions& options, Deadline deadline);

  // A group we are in whose round we will run() later (a group found ahead of time, while we still
  // compute): parts its members send meanwhile are held and handed to our reducer when run() starts,
  // instead of being refused as "no such round (yet)", which makes their senders retry every few
  // milliseconds, costing both sides CPU while we compute. Held parts are bounded (kHeldPartsPerSender
  // per member, the latest few expected rounds). A member that will not contribute should still run()
  // the round, with weight 0 (Averager::withdraw).
  void expect(const Group& group);

  // A round we will not run (the hand-on of a group we withdrew from, Averager::withdraw): parts for it are
  // refused at once as a round over here, those already held included, so that its members give up on our
  // slice at once and mend it elsewhere, instead of waiting for it to their deadline. Not for a round that
  // is running.
  void forgo(const Bytes& group_id);

  // For a peer shutting down: rounds in progress end within a few milliseconds (each returns what was
  // averaged by then, as at its deadline), and later rounds are refused with kCancelled.
  void stop() { stopping_ = true; }

 private:
  struct Active {
    std::shared_ptr<const Group> group;  // what the handler checks senders against
    std::shared_ptr<ReducerRound> reducer;
  };
  struct HeldPart {
    size_t sender = 0;
    wire::AvgPart part;
    zmq::message_t frame;
    net::Replier replier;
  };
  struct Expected {
    std::shared_ptr<const Group> group;
    std::vector<HeldPart> held;
  };
  void on_part(wire::AvgPart&& part, net::Incoming&& request, net::Replier replier);
  void hold_locked(Expected& expected, wire::AvgPart&& part, net::Incoming&& request, net::Replier replier);
  std::span<float> buffer(std::vector<float>& storage, size_t elements);

  net::Client& client_;
  crypto::PeerId self_;
  Logger* log_;

  std::atomic<bool> stopping_{false};
  std::mutex mutex_;  // guards rounds_, expected_ and finished_
  std::map<Bytes, Active> rounds_;
  std::map<Bytes, Expected> expected_;
  std::vector<Bytes> finished_;  // recent rounds: a late part is told the round is over (bounded)

  // Reused between rounds; only one round runs at a time.
  std::mutex run_mutex_;
  std::vector<float> workspace_;       // an aux member's accumulators
  std::vector<float> reduce_scratch_;  // the reducer's decoded parts
  std::vector<float> send_scratch_;    // decoded deltas (on the client's loop thread)
  std::shared_ptr<FramePool> frames_;  // the memory of the compressed parts we send (lent to ZeroMQ, given back)
  size_t learned_window_ = 0;          // the window the last round ended with: the next one starts there
};

}  // namespace dedloc::avg
