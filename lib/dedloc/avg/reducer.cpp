#include "dedloc/avg/reducer.hpp"

#include "dedloc/avg/float_ops.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace dedloc::avg {

using net::bytes_of;

namespace {

constexpr size_t kNotASender = std::numeric_limits<size_t>::max();

}  // namespace

ReducerRound::ReducerRound(const Group& group, size_t me, std::span<float> mine, double my_weight,
                           std::span<float> workspace, std::span<float> scratch, Duration sender_timeout,
                           std::optional<CenteredClipOptions> centered_clip, std::optional<Codec> own_answer,
                           TimePoint now, std::function<void()> on_done, std::optional<std::uint64_t> own_order)
    : group_(group),
      me_(me),
      parts_(group.parts_of(me)),
      own_values_(group.member(me).sends()),
      my_weight_(my_weight),
      centered_clip_(centered_clip),
      own_answer_(own_values_ && own_answer && *own_answer != Codec::kNone ? own_answer : std::nullopt),
      own_order_(own_order),
      mine_(mine),
      workspace_(workspace),
      scratch_(scratch),
      sender_timeout_(sender_timeout),
      slot_of_member_(group.size(), kNotASender),
      on_done_(std::move(on_done)) {
  const auto& senders = group.senders();
  for (size_t slot = 0; slot < senders.size(); ++slot) slot_of_member_[senders[slot]] = slot;
  last_heard_.assign(senders.size(), now);
  banned_.assign(senders.size(), false);
  heard_.assign(senders.size(), false);
  owed_.assign(senders.size(), parts_.size());
  unanswered_.assign(senders.size(), 0);
  states_.resize(parts_.size());
  incomplete_ = parts_.size();
  if (own_values_) owed_[slot_of_member_[me]] = 0;

  for (size_t local = 0; local < parts_.size(); ++local) {
    PartState& state = states_[local];
    state.delivered.assign(senders.size(), 0);
    state.waiting_for = senders.size();
    std::span<float> acc = accumulator(parts_[local]);
    if (own_values_) {
      // Our own contribution, in place: the accumulator is our values, scaled by our weight with the first
      // contribution that arrives (accumulate) or at completion (left as they are with centered clip and in
      // an ordered round, which read them at completion).
      state.own_unscaled = !centered_clip_ && !own_order_;
      state.delivered[slot_of_member_[me]] = 1;
      state.weight = my_weight;
      state.contributions = 1;
      --state.waiting_for;
    } else {
      std::fill(acc.begin(), acc.end(), 0.0f);
    }
  }
  for (size_t local = 0; local < parts_.size(); ++local) {
    if (states_[local].waiting_for == 0) complete(states_[local], local, now);  // nobody else sends
  }
}

zmq::message_t ReducerRound::encoded_zeros(Codec codec, std::span<float> scratch) {
  std::fill(scratch.begin(), scratch.end(), 0.0f);
  zmq::message_t frame(encoded_bytes(codec, scratch.size()));
  encode(codec, scratch, {static_cast<std::uint8_t*>(frame.data()), frame.size()});
  return frame;
}

std::span<float> ReducerRound::accumulator(const Part& part) {
  const std::uint64_t range_begin = parts_.front().begin;
  return (own_values_ ? mine_ : workspace_).subspan(static_cast<size_t>(part.begin - range_begin), part.size());
}

void ReducerRound::on_part(size_t sender, const wire::AvgPart& part, zmq::message_t payload, net::Replier replier,
                           TimePoint now) {
  std::lock_guard lock(mutex_);
  const size_t slot = sender < slot_of_member_.size() ? slot_of_member_[sender] : kNotASender;
  if (slot == kNotASender || sender == me_) {
    return replier.fail(error(Code::kRefused, "not a sender of this group"));
  }
  if (parts_.empty() || part.part < parts_.front().index || part.part >= parts_.front().index + parts_.size()) {
    return replier.fail(error(Code::kInvalidArgument, "part " + std::to_string(part.part) + " is not reduced here"));
  }
  if (banned_[slot]) {
    return replier.fail(error(Code::kRefused, "banned from this round: silent for longer than the sender timeout"));
  }
  const size_t local = static_cast<size_t>(part.part - parts_.front().index);
  PartState& state = states_[local];
  if (state.delivered[slot]) {
    return replier.fail(error(Code::kInvalidArgument, "part " + std::to_string(part.part) + " sent twice"));
  }
  if (!first_part_at_ && part.weight > 0) {
    first_part_at_ = now;
    // The senders have begun: from here on each one's silence counts.
    if (silence_from_first_part_) std::fill(last_heard_.begin(), last_heard_.end(), now);
  }
  last_heard_[slot] = now;
  heard_[slot] = true;
  state.delivered[slot] = 1;
  --state.waiting_for;
  --owed_[slot];

  // Anything wrong with the contribution excludes it (the sender keeps its own values for this part) but
  // counts as delivered, so the part does not wait for it.
  const Part& grid = parts_[local];
  std::span<float> values = scratch_.first(grid.size());
  auto codec = codec_from_wire(part.codec);
  if (codec && payload.size() == 0 && part.weight == 0) payload = encoded_zeros(*codec, values);
  // none and fp16 are read straight from the frame (fp16 a chunk at a time): no part-sized decoding pass.
  const bool streamed = codec && (*codec == Codec::kNone || *codec == Codec::kFloat16);
  const auto* bytes = static_cast<const std::uint8_t*>(payload.data());
  Status usable = [&]() -> Status {
    if (!codec) return codec.status();
    if (streamed) {
      if (payload.size() != encoded_bytes(*codec, grid.size())) {
        return error(Code::kMalformed, std::string(codec_name(*codec)) + ": " + std::to_string(payload.size()) +
                                           " bytes for " + std::to_string(grid.size()) + " values");
      }
      const bool finite = *codec == Codec::kNone ? float_ops::all_finite(bytes, grid.size())
                                                 : float_ops::all_finite_half(bytes, grid.size());
      if (!finite) return error(Code::kRefused, "the part holds NaN or Inf values");
      return {};
    }
    DEDLOC_RETURN_IF_ERROR(decode(*codec, bytes_of(payload), values));
    if (!float_ops::all_finite(reinterpret_cast<const std::uint8_t*>(values.data()), values.size())) {
      return error(Code::kRefused, "the part holds NaN or Inf values");
    }
    return {};
  }();
  if (!usable.is_ok()) {
    replier.fail(usable);
  } else {
    // Summed as it arrives; with centered clip or in an ordered round it is only kept, and summed when the
    // part completes.
    if (!centered_clip_ && !own_order_) accumulate(state, grid, *codec, part.weight, bytes, values);
    state.weight += part.weight;
    ++state.contributions;
    ++unanswered_[slot];
    state.pending.push_back(
        Pending{sender, *codec, part.weight, part.answer, part.order, std::move(payload), std::move(replier)});
  }
  if (state.waiting_for == 0) complete(state, local, now);
}

void ReducerRound::accumulate(PartState& state, const Part& grid, Codec codec, double weight,
                              const std::uint8_t* bytes, std::span<const float> decoded) {
  std::span<float> acc = accumulator(grid);
  const float w = static_cast<float>(weight);
  // acc += w · src, or acc = v · acc + w · src while our own values still wait for their weight v.
  const bool own = state.own_unscaled;
  const float v = static_cast<float>(my_weight_);
  state.own_unscaled = false;
  auto add = [&](std::span<float> target, const std::uint8_t* src) {
    if (own) {
      float_ops::scale_add_scaled(target, v, w, src);
    } else {
      float_ops::add_scaled(target, w, src);
    }
  };
  if (codec == Codec::kNone) {
    add(acc, bytes);
  } else if (codec == Codec::kFloat16) {
    float_ops::for_each_fp16_chunk(bytes, grid.size(), [&](size_t at, std::span<const float> chunk) {
      add(acc.subspan(at, chunk.size()), reinterpret_cast<const std::uint8_t*>(chunk.data()));
    });
  } else {
    add(acc, reinterpret_cast<const std::uint8_t*>(decoded.data()));
  }
}

void ReducerRound::clip_average(const PartState& state, std::span<float> avg) {
  const size_t dim = avg.size();
  const size_t count = state.pending.size() + (own_values_ ? 1 : 0);
  clip_points_.resize(count * dim);
  clip_weights_.clear();
  size_t row = 0;
  if (own_values_) {  // our values are still in place in the accumulator
    std::copy(avg.begin(), avg.end(), clip_points_.begin());
    clip_weights_.push_back(my_weight_);
    ++row;
  }
  for (const auto& pending : state.pending) {
    std::span<float> point(clip_points_.data() + row * dim, dim);
    // on_part checked the frame's size and values, so decoding cannot fail here
    if (!decode(pending.codec, bytes_of(pending.payload), point).is_ok()) std::fill(point.begin(), point.end(), 0.0f);
    clip_weights_.push_back(pending.weight);
    ++row;
  }
  centered_clip(clip_points_, dim, clip_weights_, *centered_clip_, avg, clip_scratch_);
}

bool ReducerRound::ordered_sum(const PartState& state, const Part& grid, std::span<float> sum) {
  struct Term {
    std::uint64_t order;
    double weight;
    const Pending* pending;  // null: our own values
  };
  std::vector<Term> terms;
  if (own_values_ && my_weight_ > 0) terms.push_back({*own_order_, my_weight_, nullptr});
  for (const auto& pending : state.pending) {
    if (pending.weight > 0) terms.push_back({pending.order, pending.weight, &pending});
  }
  if (terms.size() == 1) {
    // One contribution with weight: its values are the average, exactly (a broadcast), with none of the
    // rounding, or the sign of a zero, that a sum and a division would bring.
    if (!terms.front().pending) return false;  // ours, in place in `sum` already
    const Pending& only = *terms.front().pending;
    // on_part checked the frame's size and values, so decoding cannot fail here
    if (!decode(only.codec, bytes_of(only.payload), sum).is_ok()) std::fill(sum.begin(), sum.end(), 0.0f);
    return false;
  }
  // Equal keys hold equal values where the keys mean anything (one bucket's average), so their order
  // among themselves does not change the sum.
  std::stable_sort(terms.begin(), terms.end(), [](const Term& a, const Term& b) { return a.order < b.order; });
  if (own_values_) own_copy_.assign(sum.begin(), sum.end());  // our values are in place in `sum`
  std::fill(sum.begin(), sum.end(), 0.0f);
  std::span<float> decoded = scratch_.first(grid.size());
  for (const Term& term : terms) {
    const float w = static_cast<float>(term.weight);
    if (!term.pending) {
      float_ops::add_scaled(sum, w, reinterpret_cast<const std::uint8_t*>(own_copy_.data()));
      continue;
    }
    const auto* bytes = static_cast<const std::uint8_t*>(term.pending->payload.data());
    if (term.pending->codec == Codec::kNone) {
      float_ops::add_scaled(sum, w, bytes);
    } else if (term.pending->codec == Codec::kFloat16) {
      float_ops::for_each_fp16_chunk(bytes, grid.size(), [&](size_t at, std::span<const float> chunk) {
        float_ops::add_scaled(sum.subspan(at, chunk.size()), w, reinterpret_cast<const std::uint8_t*>(chunk.data()));
      });
    } else if (decode(term.pending->codec, bytes_of(term.pending->payload), decoded).is_ok()) {  // on_part checked it
      float_ops::add_scaled(sum, w, reinterpret_cast<const std::uint8_t*>(decoded.data()));
    }
  }
  return true;
}

void ReducerRound::complete(PartState& state, size_t local, TimePoint now) {
  const Part& grid = parts_[local];
  std::span<float> avg = accumulator(grid);
  const bool weighed = state.weight > 0;
  const float inverse = weighed ? static_cast<float>(1.0 / state.weight) : 0.0f;
  bool sum_to_scale = false;  // the accumulator holds the weighted sum, to be divided by the total weight
  if (weighed && centered_clip_) {
    clip_average(state, avg);
  } else if (own_order_) {
    if (weighed) {
      sum_to_scale = ordered_sum(state, grid, avg);
    } else {
      std::fill(avg.begin(), avg.end(), 0.0f);  // what the sum of weight-0 contributions comes to
    }
  } else if (state.own_unscaled) {  // nothing arrived but our own values (so nobody waits for a delta)
    if (weighed) {
      float_ops::scale_twice(avg, static_cast<float>(my_weight_), inverse);
    } else {
      float_ops::scale(avg, static_cast<float>(my_weight_));  // as if scaled on arrival: nothing weighed
    }
  } else {
    sum_to_scale = weighed;
  }
  state.own_unscaled = false;
  answer_codec_.reset();
  // Our own values as the senders that asked for the average receive it: rounded through the codec, the
  // whole part at once (so before the block pass below takes anyone's delta from it).
  if (weighed && own_answer_) {
    if (sum_to_scale) float_ops::scale(avg, inverse);
    sum_to_scale = false;
    // Decoding our own encoding of `avg.size()` values cannot fail.
    (void)decode(*own_answer_, encoded_average(*own_answer_, avg), avg);
  }
  // The sum becomes the average, and each codec-none sender's delta is written over its frame, in one pass
  // over the part a block at a time: the block stays in L1 while every sender's delta is taken from it.
  auto wants_delta = [&](const Pending& pending) { return pending.answer == wire::PartAnswer::kDelta || !weighed; };
  if (weighed) {
    for (size_t at = 0; at < avg.size(); at += float_ops::kChunk) {
      const std::span<float> block = avg.subspan(at, std::min(float_ops::kChunk, avg.size() - at));
      if (sum_to_scale) float_ops::scale(block, inverse);
      for (auto& pending : state.pending) {
        if (pending.codec == Codec::kNone && wants_delta(pending)) {
          float_ops::subtract_from(block, static_cast<std::uint8_t*>(pending.payload.data()) + sizeof(float) * at);
        }
      }
    }
  }
  std::span<float> delta = scratch_.first(grid.size());
  for (auto& pending : state.pending) {
    const size_t slot = slot_of_member_[pending.sender];
    // The answer goes back in the sender's own frame, overwritten in place: same codec, same size (on_part
    // decoded it), and no allocation or fresh page per reply.
    auto* bytes = static_cast<std::uint8_t*>(pending.payload.data());
    const std::span<std::uint8_t> frame(bytes, pending.payload.size());
    const wire::PartAnswer answer = wants_delta(pending) ? wire::PartAnswer::kDelta : wire::PartAnswer::kAverage;
    if (answer == wire::PartAnswer::kAverage) {
      // Every sender that asked gets the same bytes, encoded once per codec.
      ByteSpan encoded = encoded_average(pending.codec, avg);
      if (frame.size() != encoded.size()) pending.payload = zmq::message_t(encoded.size());
      std::copy(encoded.begin(), encoded.end(), static_cast<std::uint8_t*>(pending.payload.data()));
    } else if (weighed && pending.codec == Codec::kNone) {
      // its delta is written already (above)
    } else if (weighed && pending.codec == Codec::kFloat16) {
      float_ops::transform_fp16_chunks(bytes, avg.size(), [&](size_t at, std::span<float> chunk) {
        float_ops::subtract_from(avg.subspan(at, chunk.size()), reinterpret_cast<std::uint8_t*>(chunk.data()));
      });
    } else {
      if (weighed && decode(pending.codec, frame, delta).is_ok()) {
        float_ops::subtract_from(avg, reinterpret_cast<std::uint8_t*>(delta.data()));
      } else {
        std::fill(delta.begin(), delta.end(), 0.0f);  // nothing weighed: everyone keeps its values
      }
      if (frame.size() != encoded_bytes(pending.codec, delta.size())) {
        pending.payload = zmq::message_t(encoded_bytes(pending.codec, delta.size()));
      }
      encode(pending.codec, delta, {static_cast<std::uint8_t*>(pending.payload.data()), pending.payload.size()});
    }
    bytes_sent_ += pending.payload.size();
    std::vector<zmq::message_t> frames;
    frames.push_back(std::move(pending.payload));
    pending.replier.reply(wire::AvgPartDelta{grid.index, static_cast<std::uint64_t>(pending.codec), state.contributions,
                                             answer, weighed ? state.weight : 0.0},
                          std::move(frames));
    --unanswered_[slot];
    last_heard_[slot] = now;  // its window has room again: from now on, silence is its own
  }
  state.pending.clear();
  state.pending.shrink_to_fit();
  state.complete = true;
  if (!first_weight_) {
    first_weight_ = state.weight;
  } else if (*first_weight_ != state.weight) {
    weights_differ_ = true;
  }
  if (state.weight > 0) least_weight_ = std::min(least_weight_.value_or(state.weight), state.weight);
  if (on_part_complete_) on_part_complete_();
  if (--incomplete_ == 0 && on_done_) on_done_();
}

ByteSpan ReducerRound::encoded_average(Codec codec, std::span<const float> avg) {
  if (answer_codec_ != codec) {
    answer_bytes_.resize(encoded_bytes(codec, avg.size()));
    encode(codec, avg, answer_bytes_);
    answer_codec_ = codec;
  }
  return answer_bytes_;
}

void ReducerRound::check_senders(TimePoint now) {
  std::lock_guard lock(mutex_);
  if (silence_from_first_part_ && !first_part_at_) return;
  for (size_t slot = 0; slot < banned_.size(); ++slot) {
    if (!banned_[slot] && owed_[slot] > 0 && unanswered_[slot] == 0 && now - last_heard_[slot] > sender_timeout_) {
      ban(slot, now);
    }
  }
}

void ReducerRound::finish_now(TimePoint now) {
  std::lock_guard lock(mutex_);
  for (size_t slot = 0; slot < banned_.size(); ++slot) {
    if (!banned_[slot] && owed_[slot] > 0) ban(slot, now);
  }
}

bool ReducerRound::drop(size_t member, TimePoint now) {
  std::lock_guard lock(mutex_);
  if (member >= slot_of_member_.size() || slot_of_member_[member] == kNotASender) return false;
  const size_t slot = slot_of_member_[member];
  if (banned_[slot] || owed_[slot] == 0) return false;
  ban(slot, now);
  return true;
}

std::optional<TimePoint> ReducerRound::first_part_at() const {
  std::lock_guard lock(mutex_);
  return first_part_at_;
}

bool ReducerRound::owes(size_t member) const {
  std::lock_guard lock(mutex_);
  if (member >= slot_of_member_.size() || slot_of_member_[member] == kNotASender) return false;
  const size_t slot = slot_of_member_[member];
  return !banned_[slot] && owed_[slot] > 0;
}

void ReducerRound::ban(size_t slot, TimePoint now) {
  banned_[slot] = true;
  for (size_t local = 0; local < states_.size(); ++local) {
    PartState& state = states_[local];
    if (state.complete || state.delivered[slot]) continue;
    state.delivered[slot] = 1;
    --state.waiting_for;
    if (state.waiting_for == 0) complete(state, local, now);
  }
  owed_[slot] = 0;
}

bool ReducerRound::done() const {
  std::lock_guard lock(mutex_);
  return incomplete_ == 0;
}

std::uint64_t ReducerRound::bytes_sent() const {
  std::lock_guard lock(mutex_);
  return bytes_sent_;
}

std::optional<double> ReducerRound::common_weight() const {
  std::lock_guard lock(mutex_);
  if (weights_differ_) return std::nullopt;
  return first_weight_;
}

std::optional<double> ReducerRound::least_weight() const {
  std::lock_guard lock(mutex_);
  return least_weight_;
}

std::vector<size_t> ReducerRound::banned_unheard() const {
  std::lock_guard lock(mutex_);
  std::vector<size_t> out;
  for (size_t slot = 0; slot < banned_.size(); ++slot) {
    if (banned_[slot] && !heard_[slot]) out.push_back(group_.senders()[slot]);
  }
  return out;
}

std::vector<size_t> ReducerRound::banned() const {
  std::lock_guard lock(mutex_);
  std::vector<size_t> out;
  for (size_t slot = 0; slot < banned_.size(); ++slot) {
    if (banned_[slot]) out.push_back(group_.senders()[slot]);
  }
  return out;
}

}  // namespace dedloc::avg
