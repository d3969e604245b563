// libFuzzer target: what averaging builds from a peer's decoded messages, past the message decoders that
// envelope_target covers: the part grid of a leader's AvgBegin (avg::Group::from_begin), and a donor's state
// description and stripe (AvgStateReply -> TrainingState, the stripe's frame decoded into place).
//
// Input: a selector byte, a 2-byte little-endian body length, the message body (a msgpack map), then the
// frame that travels beside the message (state stripes only).
//   0  AvgBegin       Group::from_begin; an accepted group's parts tile [0, length) member by member, no part
//                     is over part_elements, parts_of(i) covers count i; the BEGIN re-encodes to the same group
//   1  AvgStateReply  a description the decoder accepts passes check_tensors and check_metadata; for states of
//                     up to 2^16 elements the TrainingState is built and its tensors tile the flat buffer, and
//                     the stripe's frame is decoded into [offset, offset + length) with the reply's codec
#include <algorithm>
#include <vector>

#include "dedloc/avg/codec.hpp"
#include "dedloc/avg/group.hpp"
#include "dedloc/avg/training_state.hpp"
#include "dedloc/wire/avg_messages.hpp"
#include "dedloc/wire/map_codec.hpp"
#include "dedloc/wire/unpack.hpp"
#include "fuzz/fuzz_target.hpp"

namespace {

using namespace dedloc;

template <class Message>
Result<Message> decode_body(ByteSpan body) {
  auto object = wire::unpack_bounded(body, wire::Limits{}, "body");
  if (!object) return object.status();
  auto reader = wire::MapReader::of((*object)->get(), Message::kName);
  if (!reader) return reader.status();
  return Message::decode(*reader);
}

template <class Message>
Bytes encode_body(const Message& m) {
  wire::MapWriter out;
  m.encode(out);
  return out.to_bytes();
}

void check_group(const wire::AvgBegin& begin) {
  auto group = avg::Group::from_begin(begin);
  if (!group) return;
  DEDLOC_FUZZ_CHECK(group->size() == begin.ids.size());
  DEDLOC_FUZZ_CHECK(group->parts().size() <= avg::kMaxParts);
  DEDLOC_FUZZ_CHECK(!group->senders().empty());
  std::uint64_t at = 0;
  size_t largest = 0;
  for (size_t i = 0; i < group->parts().size(); ++i) {
    const avg::Part& part = group->parts()[i];
    DEDLOC_FUZZ_CHECK(part.index == i && part.begin == at && part.end > part.begin);
    DEDLOC_FUZZ_CHECK(part.end - part.begin <= begin.part_elements);
    DEDLOC_FUZZ_CHECK(part.reducer < group->size());
    largest = std::max(largest, part.size());
    at = part.end;
  }
  DEDLOC_FUZZ_CHECK(at == begin.length);
  DEDLOC_FUZZ_CHECK(largest == group->largest_part());
  for (size_t r = 0; r < group->size(); ++r) {
    std::uint64_t covered = 0;
    for (const avg::Part& part : group->parts_of(r)) {
      DEDLOC_FUZZ_CHECK(part.reducer == r);
      covered += part.end - part.begin;
    }
    DEDLOC_FUZZ_CHECK(covered == begin.counts[r]);
    DEDLOC_FUZZ_CHECK(group->index_of(begin.ids[r]) == r);
  }
  // The same BEGIN, through the wire again, gives the same grid.
  auto again = decode_body<wire::AvgBegin>(encode_body(begin));
  DEDLOC_FUZZ_CHECK(again.is_ok());
  auto regroup = avg::Group::from_begin(*again);
  DEDLOC_FUZZ_CHECK(regroup.is_ok() && regroup->parts().size() == group->parts().size());
}

void check_state(const wire::AvgStateReply& reply, ByteSpan frame) {
  if (!reply.described) return;
  DEDLOC_FUZZ_CHECK(avg::check_tensors(reply.tensors).is_ok());
  avg::StateMetadata metadata{reply.epoch, reply.metadata};
  DEDLOC_FUZZ_CHECK(avg::check_metadata(metadata).is_ok());
  const Bytes hash = avg::schema_hash(reply.tensors);
  DEDLOC_FUZZ_CHECK(hash.size() == wire::kSchemaHashBytes);
  if (reply.total > (std::uint64_t{1} << 16)) return;  // a joiner allocates what a donor describes
  auto state = avg::TrainingState::with_tensors(reply.tensors, metadata);
  DEDLOC_FUZZ_CHECK(state.is_ok());
  DEDLOC_FUZZ_CHECK(state->total_elements() == reply.total && state->schema_hash() == hash);
  const float* next = state->flat().data();
  for (size_t i = 0; i < state->size(); ++i) {
    DEDLOC_FUZZ_CHECK(state->find(reply.tensors[i].name) == i);
    DEDLOC_FUZZ_CHECK(state->tensor(i).data() == next);
    DEDLOC_FUZZ_CHECK(state->tensor(i).size() == *reply.tensors[i].elements());
    next += state->tensor(i).size();
  }
  DEDLOC_FUZZ_CHECK(next == state->flat().data() + state->flat().size());
  auto codec = avg::codec_from_wire(reply.codec);
  if (!codec || reply.length == 0) return;
  // The decoder bounds the stripe by the total.
  DEDLOC_FUZZ_CHECK(reply.offset + reply.length <= reply.total);
  auto target = state->flat().subspan(static_cast<size_t>(reply.offset), static_cast<size_t>(reply.length));
  (void)avg::decode(*codec, frame, target);
}

}  // namespace

DEDLOC_FUZZ_TARGET(avg_state) {
  fuzz::Input in(data, size);
  const std::uint8_t selector = in.byte() % 2;
  const ByteSpan body = in.bytes(in.u16());
  const ByteSpan frame = in.rest();
  if (selector == 0) {
    if (auto begin = decode_body<wire::AvgBegin>(body)) check_group(*begin);
  } else {
    if (auto reply = decode_body<wire::AvgStateReply>(body)) {
      // Re-encoding what was accepted decodes to the same message.
      auto again = decode_body<wire::AvgStateReply>(encode_body(*reply));
      DEDLOC_FUZZ_CHECK(again.is_ok() && again->tensors == reply->tensors && again->total == reply->total &&
                        again->described == reply->described);
      check_state(*reply, frame);
    }
  }
  return 0;
}
