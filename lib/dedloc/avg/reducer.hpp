// One member's reducer side of one all-reduce round: it averages the parts of the vector the
// plan assigned to it, as the senders' parts arrive, and answers each sender with its delta as soon as a
// part is complete, so senders stream new parts while earlier ones come back (pipelined).
//
// A part is complete when every sender has delivered it or is banned. A sender is banned when it owes us
// parts, has none waiting here (then it would be waiting on us, not silent), and we have neither heard from
// it nor answered it for `sender_timeout`: its parts delivered before that still count; parts it never sent
// are averaged without it. The average
// is weighted by each sender's weight (its samples): sum(w_i x_i) / sum(w_i) over the contributions
// delivered. A contribution with NaN or Inf values is refused (that sender keeps its own values there).
// A part at weight 0 may come without its values (an empty frame: a sender whose values there are zeros);
// it is answered as if its zeros had come.
// With `centered_clip` set, a part's contributions are kept until it completes and averaged robustly
// (avg/centered_clip.hpp) instead of summed as they arrive: one poisoned sender moves the part's average by
// a bounded length, at the price of n × part floats decoded at completion and a few passes over them.
//
// Threads: parts arrive on the server's loop thread (on_part); the round's owner calls check_senders()
// periodically from its own thread. Both take the round's mutex; replies go out through thread-safe
// Repliers.
#pragma once

#include <functional>
#include <mutex>
#include <optional>
#include <span>
#include <vector>

#include <zmq.hpp>

#include "dedloc/avg/centered_clip.hpp"
#include "dedloc/avg/codec.hpp"
#include "dedloc/avg/group.hpp"
#include "dedloc/core/clock.hpp"
#include "dedloc/net/server.hpp"

namespace dedloc::avg {

class ReducerRound {
 public:
  // `mine`: our own values for our range when we send too (averaged in place: the average lands there);
  // empty for an aux member, which accumulates in `workspace` (at least our range's size).
  // `scratch`: at least the group's largest part. Both buffers outlive the round; the owner reuses them.
  // `on_done` runs (under the round's lock: keep it to a notify) when the last part completes.
  // `own_answer`: set when we send and asked our reducers for the average itself (wire::PartAnswer) in a
  // lossy codec: our own averaged values become what that codec's encoding of the average decodes to, the
  // values the senders that asked for it receive, so that members end the round bit-identical.
  // `own_order`: set when the round sums in a fixed order (AllReduceOptions::order_key): our key. The
  // senders' parts then carry theirs (a part without one goes last), and each part is summed at completion.
  ReducerRound(const Group& group, size_t me, std::span<float> mine, double my_weight, std::span<float> workspace,
               std::span<float> scratch, Duration sender_timeout, std::optional<CenteredClipOptions> centered_clip,
               std::optional<Codec> own_answer, TimePoint now, std::function<void()> on_done,
               std::optional<std::uint64_t> own_order = std::nullopt);

  // A part from member `sender`. Answers through `replier` now (a refusal) or when the part completes.
  void on_part(size_t sender, const wire::AvgPart& part, zmq::message_t payload, net::Replier replier, TimePoint now);
  // Bans senders silent past the timeout, and completes the parts that no longer wait for anyone.
  void check_senders(TimePoint now);
  // Gives up on every sender still owing parts (the round's deadline passed): completes every part with
  // what was delivered, so our values hold averages, never partial sums.
  void finish_now(TimePoint now);
  // Member `member` is known gone (it stopped answering pings: AllReduceOptions::liveness_timeout): bans it
  // now, as check_senders() would once it had been silent for the sender timeout. False when it owed us
  // nothing (not a sender, already banned, or done with us).
  bool drop(size_t member, TimePoint now);
  // Whether member `member` still owes us parts (we wait on it).
  bool owes(size_t member) const;

  // Called after each part completes (under the round's lock). Set before parts arrive.
  void set_progress_callback(std::function<void()> callback) { on_part_complete_ = std::move(callback); }
  // The senders' silence is counted from the first part with weight another member sends us, not from the
  // round's start (AllReduceOptions::senders_start_within): until one comes, nobody is banned by
  // check_senders(). Parts at weight 0 (members that only take the result) do not start it.
  // Set before parts arrive.
  void count_silence_from_first_part() { silence_from_first_part_ = true; }
  // When the first part from another member came; nullopt before.
  std::optional<TimePoint> first_part_at() const;

  bool done() const;
  std::vector<size_t> banned() const;
  // Of banned(), the members that delivered us no part at all (silent from the start, not cut off midway).
  std::vector<size_t> banned_unheard() const;
  // Payload bytes of the deltas sent back so far.
  std::uint64_t bytes_sent() const;
  // The total weight of every completed part when they all had the same (nullopt when they differ, or
  // none completed).
  std::optional<double> common_weight() const;
  // The smallest total weight among the completed parts that weighed anything (nullopt when none did).
  std::optional<double> least_weight() const;

 private:
  struct Pending {
    size_t sender;
    Codec codec;
    double weight;
    wire::PartAnswer answer;  // what the sender asked to receive
    std::uint64_t order;      // its key in an ordered round (wire::AvgPart::order)
    zmq::message_t payload;   // kept to compute this sender's delta when the part completes (then its answer)
    net::Replier replier;
  };
  struct PartState {
    std::vector<std::uint8_t> delivered;  // per sender slot: 0 not yet, 1 delivered (or refused)
    size_t waiting_for = 0;               // senders not delivered and not banned
    double weight = 0;
    size_t contributions = 0;
    bool complete = false;
    // Our own values are in the accumulator as they are, not yet scaled by our weight: the first
    // contribution's pass applies it (one pass over the part instead of a pass over our whole range when
    // the round starts, on memory gone cold by then).
    bool own_unscaled = false;
    std::vector<Pending> pending;
  };

  std::span<float> accumulator(const Part& part);
  // A frame of `scratch.size()` zeros in `codec`, for a weight-0 part that came without its values.
  static zmq::message_t encoded_zeros(Codec codec, std::span<float> scratch);
  // Adds a checked contribution to the part's accumulator: read straight from the frame (`bytes`) for none
  // and fp16, from `decoded` for the other codecs.
  void accumulate(PartState& state, const Part& grid, Codec codec, double weight, const std::uint8_t* bytes,
                  std::span<const float> decoded);
  // With centered clip: the part's contributions (ours first, then each pending sender's), robustly averaged
  // into `avg`.
  void clip_average(const PartState& state, std::span<float> avg);
  // In an ordered round: the part's weighted sum, in ascending order of the contributors' keys (ours
  // included), written over our values in `sum` (or the workspace); contributions at weight 0 left out.
  // With one contribution at weight, its values themselves. Returns whether `sum` holds a sum, still to be
  // divided by the part's weight.
  bool ordered_sum(const PartState& state, const Part& grid, std::span<float> sum);
  void complete(PartState& state, size_t local, TimePoint now);
  // The average in `codec`, encoded once per part into answer_bytes_ (answer_codec_ says for which codec).
  ByteSpan encoded_average(Codec codec, std::span<const float> avg);
  void ban(size_t slot, TimePoint now);

  mutable std::mutex mutex_;
  const Group& group_;
  size_t me_;
  std::span<const Part> parts_;
  bool own_values_;  // we send too: our contribution is already in the accumulator, in place in `mine`
  double my_weight_;
  std::optional<CenteredClipOptions> centered_clip_;
  std::optional<Codec> own_answer_;
  std::optional<std::uint64_t> own_order_;  // set: an ordered round (see the constructor)
  std::vector<float> own_copy_;             // ordered: our values of the part being summed
  std::optional<double> first_weight_;      // the first completed part's total weight
  bool weights_differ_ = false;             // ... and whether a later one had another
  std::optional<double> least_weight_;      // the smallest positive total weight of a completed part
  std::vector<std::uint8_t> answer_bytes_;  // a part's average, encoded for the senders that asked for it
  std::optional<Codec> answer_codec_;       // the codec answer_bytes_ holds the current part in; none: stale
  std::vector<float> clip_points_;   // centered clip: a part's contributions, decoded (reused between parts)
  std::vector<double> clip_weights_;
  std::vector<float> clip_scratch_;
  std::span<float> mine_;
  std::span<float> workspace_;
  std::span<float> scratch_;
  Duration sender_timeout_;
  std::vector<size_t> slot_of_member_;  // member index -> sender slot (SIZE_MAX: not a sender)
  std::vector<TimePoint> last_heard_;    // per sender slot
  std::vector<bool> banned_;             // per sender slot
  std::vector<bool> heard_;              // per sender slot: delivered us a part
  bool silence_from_first_part_ = false;
  std::optional<TimePoint> first_part_at_;
  std::uint64_t bytes_sent_ = 0;         // deltas' payloads
  std::vector<size_t> owed_;             // per sender slot: our parts it has not delivered
  std::vector<size_t> unanswered_;       // per sender slot: parts it delivered that still wait for others
  std::vector<PartState> states_;        // per part of ours
  size_t incomplete_ = 0;
  std::function<void()> on_done_;
  std::function<void()> on_part_complete_;
};

}  // namespace dedloc::avg
