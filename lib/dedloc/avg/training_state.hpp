// A peer's training state as donors serve it and joiners download it (docs/architecture.md): named float32 tensors
// (parameters, optimizer statistics, ...) in one flat buffer, plus metadata (the epoch and free-form
// entries such as the learning-rate scheduler's position). Plain buffers: no torch here; the trainer copies
// its tensors in and out with a thin adapter.
//
// The tensors are stored back to back in the order they were added; that flattening is what a state
// download stripes over, and the schema hash pins it: two states with the same hash have the same tensor
// names, shapes and order, so element k means the same thing in both.
//
// Schema hash (wire format; peers must agree): BLAKE2b-256 over
//   "dedloc-schema-v1", u64 tensor count, then per tensor: u64 name length, the name's bytes,
//   u64 rank, each dimension as u64
// (every u64 little-endian). The epoch and the metadata are not part of it.
//
// Thread-safety: a plain value. Donors share one as std::shared_ptr<const TrainingState> and never change it
// after publishing it (they publish a new one instead).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "dedloc/core/bytes.hpp"
#include "dedloc/core/status.hpp"
#include "dedloc/wire/avg_messages.hpp"

namespace dedloc::avg {

using TensorSpec = wire::StateTensor;
using MetadataValue = wire::StateValue;  // a number (double) or a string

struct StateMetadata {
  std::uint64_t epoch = 0;     // global steps taken: what a joiner catches up to
  wire::StateEntries entries;  // free-form: "lr", "scheduler_step", "optimizer" = "lamb", ...

  bool operator==(const StateMetadata&) const = default;
};

// The schema hash of `tensors` (kSchemaHashBytes bytes; the format above).
Bytes schema_hash(std::span<const TensorSpec> tensors);

// kInvalidArgument naming the problem when `tensors` cannot travel: an empty, over-long or repeated name, a
// rank over wire::kMaxTensorRank, more than wire::kMaxStateTensors tensors, more than wire::kMaxStateElements
// elements in all.
Status check_tensors(std::span<const TensorSpec> tensors);
// The same for metadata (entry count, key and string lengths of avg_messages.hpp).
Status check_metadata(const StateMetadata& metadata);

class TrainingState {
 public:
  TrainingState() = default;

  // A state with these tensors, zero-filled (one allocation). Errors: check_tensors / check_metadata.
  static Result<TrainingState> with_tensors(std::vector<TensorSpec> tensors, StateMetadata metadata = {});

  // Appends a tensor holding `data` (whose size must be the shape's element count). Errors: as
  // check_tensors for the state with the tensor added; the state is then unchanged.
  Status add_tensor(std::string name, std::vector<std::uint64_t> shape, std::span<const float> data);

  StateMetadata metadata;
  std::uint64_t epoch() const { return metadata.epoch; }

  const std::vector<TensorSpec>& tensors() const { return tensors_; }
  size_t size() const { return tensors_.size(); }
  std::optional<size_t> find(std::string_view name) const;
  std::span<float> tensor(size_t i);
  std::span<const float> tensor(size_t i) const;
  // All tensors back to back, in order: what downloads stripe over.
  std::span<float> flat() { return data_; }
  std::span<const float> flat() const { return data_; }
  std::uint64_t total_elements() const { return data_.size(); }

  const Bytes& schema_hash() const { return schema_hash_; }

 private:
  std::vector<TensorSpec> tensors_;
  std::vector<std::uint64_t> offsets_;  // per tensor, plus the end
  std::vector<float> data_;
  Bytes schema_hash_ = avg::schema_hash({});
};

// A fingerprint of the state's parameters: the first 8 bytes (little-endian) of the BLAKE2b of its "param/"
// tensors' float32 values, in order. Peers publish it in their progress records at each epoch, so that one
// whose parameters left the swarm's notices (collab/divergence.hpp); equal parameters, equal hashes, and a
// single flipped bit changes it. Never 0 (0 means "none" on the wire).
std::uint64_t parameters_hash(const TrainingState& state);
// The hash as 16 hex digits, the digest's bytes in order: what `dedloc-train --params-hash` prints for the
// same parameters.
std::string parameters_hash_hex(std::uint64_t hash);

}  // namespace dedloc::avg
