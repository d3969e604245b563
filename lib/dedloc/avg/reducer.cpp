#include "dedloc/avg/reducer.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace dedloc::avg {

namespace {
constexpr size_t kNotASender = std::numeric_limits<size_t>::max();

ByteSpan bytes_of(const zmq::message_t& message) {
  return {static_cast<const std::uint8_t*>(message.data()), message.size()};
}
}  // namespace

ReducerRound::ReducerRound(const Group& group, size_t me, std::span<float> mine, double my_weight,
                           std::span<float> workspace, std::span<float> scratch, Duration sender_timeout,
                           TimePoint now, std::function<void()> on_done)
    : group_(group),
      me_(me),
      parts_(group.parts_of(me)),
      own_values_(group.member(me).sends()),
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
      // Our own contribution, in place: the accumulator is our values scaled by our weight.
      for (float& v : acc) v *= static_cast<float>(my_weight);
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
  last_heard_[slot] = now;
  state.delivered[slot] = 1;
  --state.waiting_for;
  --owed_[slot];

  // Anything wrong with the contribution excludes it (the sender keeps its own values for this part) but
  // counts as delivered, so the part does not wait for it.
  const Part& grid = parts_[local];
  std::span<float> values = scratch_.first(grid.size());
  Status usable = [&]() -> Status {
    auto codec = codec_from_wire(part.codec);
    if (!codec) return codec.status();
    DEDLOC_RETURN_IF_ERROR(decode(*codec, bytes_of(payload), values));
    for (float v : values) {
      if (!std::isfinite(v)) return error(Code::kRefused, "the part holds NaN or Inf values");
    }
    return {};
  }();
  if (!usable.is_ok()) {
    replier.fail(usable);
  } else {
    std::span<float> acc = accumulator(grid);
    const float w = static_cast<float>(part.weight);
    for (size_t i = 0; i < acc.size(); ++i) acc[i] += w * values[i];
    state.weight += part.weight;
    ++state.contributions;
    ++unanswered_[slot];
    state.pending.push_back(Pending{sender, *codec_from_wire(part.codec), std::move(payload), std::move(replier)});
  }
  if (state.waiting_for == 0) complete(state, local, now);
}

void ReducerRound::complete(PartState& state, size_t local, TimePoint now) {
  const Part& grid = parts_[local];
  std::span<float> avg = accumulator(grid);
  if (state.weight > 0) {
    const float inverse = static_cast<float>(1.0 / state.weight);
    for (float& v : avg) v *= inverse;
  }
  std::span<float> delta = scratch_.first(grid.size());
  for (auto& pending : state.pending) {
    const size_t slot = slot_of_member_[pending.sender];
    if (state.weight > 0 && decode(pending.codec, bytes_of(pending.payload), delta).is_ok()) {
      for (size_t i = 0; i < delta.size(); ++i) delta[i] = avg[i] - delta[i];
    } else {
      std::fill(delta.begin(), delta.end(), 0.0f);  // nothing weighed: everyone keeps its values
    }
    zmq::message_t frame(encoded_bytes(pending.codec, delta.size()));
    encode(pending.codec, delta, {static_cast<std::uint8_t*>(frame.data()), frame.size()});
    std::vector<zmq::message_t> frames;
    frames.push_back(std::move(frame));
    pending.replier.reply(
        wire::AvgPartDelta{grid.index, static_cast<std::uint64_t>(pending.codec), state.contributions},
        std::move(frames));
    --unanswered_[slot];
    last_heard_[slot] = now;  // its window has room again: from now on, silence is its own
  }
  state.pending.clear();
  state.pending.shrink_to_fit();
  state.complete = true;
  if (--incomplete_ == 0 && on_done_) on_done_();
}

void ReducerRound::check_senders(TimePoint now) {
  std::lock_guard lock(mutex_);
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

std::vector<size_t> ReducerRound::banned() const {
  std::lock_guard lock(mutex_);
  std::vector<size_t> out;
  for (size_t slot = 0; slot < banned_.size(); ++slot) {
    if (banned_[slot]) out.push_back(group_.senders()[slot]);
  }
  return out;
}

std::vector<size_t> ReducerRound::contributors() const {
  std::lock_guard lock(mutex_);
  std::vector<size_t> out;
  for (const auto& state : states_) out.push_back(state.contributions);
  return out;
}

}  // namespace dedloc::avg
