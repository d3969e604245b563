#include "dedloc/avg/training_state.hpp"

#include <set>

#include "dedloc/crypto/hash.hpp"

namespace dedloc::avg {

namespace {

void hash_u64(crypto::Hasher& h, std::uint64_t v) {
  std::uint8_t le[8];
  for (int i = 0; i < 8; ++i) le[i] = static_cast<std::uint8_t>(v >> (8 * i));
  h.update(le);
}

Status invalid(const std::string& problem) { return error(Code::kInvalidArgument, "training state: " + problem); }

}  // namespace

Bytes schema_hash(std::span<const TensorSpec> tensors) {
  crypto::Hasher h;
  h.update(as_bytes("dedloc-schema-v1"));
  hash_u64(h, tensors.size());
  for (const auto& t : tensors) {
    hash_u64(h, t.name.size());
    h.update(as_bytes(t.name));
    hash_u64(h, t.shape.size());
    for (std::uint64_t d : t.shape) hash_u64(h, d);
  }
  auto digest = h.finish();
  return Bytes(digest.begin(), digest.end());
}

Status check_tensors(std::span<const TensorSpec> tensors) {
  if (tensors.size() > wire::kMaxStateTensors) {
    return invalid(std::to_string(tensors.size()) + " tensors, over the limit of " + std::to_string(wire::kMaxStateTensors));
  }
  std::set<std::string_view> names;
  std::uint64_t total = 0;
  for (const auto& t : tensors) {
    if (t.name.empty() || t.name.size() > wire::kMaxTensorNameBytes) {
      return invalid("tensor names must have 1 to " + std::to_string(wire::kMaxTensorNameBytes) + " bytes");
    }
    if (!names.insert(t.name).second) return invalid("tensor '" + t.name + "' appears twice");
    if (t.shape.size() > wire::kMaxTensorRank) return invalid("tensor '" + t.name + "' has too many dimensions");
    auto n = t.elements();
    if (!n || *n > wire::kMaxStateElements - total) return invalid("more elements than a state can hold");
    total += *n;
  }
  return {};
}

Status check_metadata(const StateMetadata& metadata) {
  if (metadata.entries.size() > wire::kMaxStateEntries) return invalid("too many metadata entries");
  for (const auto& [key, value] : metadata.entries) {
    if (key.empty() || key.size() > wire::kMaxStateEntryKeyBytes) return invalid("metadata key of bad length");
    const auto* text = std::get_if<std::string>(&value);
    if (text && text->size() > wire::kMaxStateEntryStringBytes) return invalid("metadata '" + key + "' is too long");
  }
  return {};
}

Result<TrainingState> TrainingState::with_tensors(std::vector<TensorSpec> tensors, StateMetadata metadata) {
  DEDLOC_RETURN_IF_ERROR(check_tensors(tensors));
  DEDLOC_RETURN_IF_ERROR(check_metadata(metadata));
  TrainingState state;
  state.metadata = std::move(metadata);
  state.offsets_.reserve(tensors.size() + 1);
  std::uint64_t total = 0;
  for (const auto& t : tensors) {
    state.offsets_.push_back(total);
    total += *t.elements();
  }
  state.offsets_.push_back(total);
  state.data_.assign(static_cast<size_t>(total), 0.0f);
  state.schema_hash_ = avg::schema_hash(tensors);
  state.tensors_ = std::move(tensors);
  return state;
}

Status TrainingState::add_tensor(std::string name, std::vector<std::uint64_t> shape, std::span<const float> data) {
  TensorSpec spec{std::move(name), std::move(shape)};
  tensors_.push_back(spec);
  Status ok = check_tensors(tensors_);
  tensors_.pop_back();
  DEDLOC_RETURN_IF_ERROR(ok);
  if (*spec.elements() != data.size()) {
    return invalid("tensor '" + spec.name + "' has " + std::to_string(data.size()) + " values for a shape of " +
                   std::to_string(*spec.elements()) + " elements");
  }
  if (offsets_.empty()) offsets_.push_back(0);
  data_.insert(data_.end(), data.begin(), data.end());
  offsets_.push_back(data_.size());
  tensors_.push_back(std::move(spec));
  schema_hash_ = avg::schema_hash(tensors_);
  return {};
}

std::optional<size_t> TrainingState::find(std::string_view name) const {
  for (size_t i = 0; i < tensors_.size(); ++i) {
    if (tensors_[i].name == name) return i;
  }
  return std::nullopt;
}

std::span<float> TrainingState::tensor(size_t i) {
  return std::span<float>(data_).subspan(static_cast<size_t>(offsets_.at(i)),
                                         static_cast<size_t>(offsets_.at(i + 1) - offsets_.at(i)));
}

std::span<const float> TrainingState::tensor(size_t i) const {
  return std::span<const float>(data_).subspan(static_cast<size_t>(offsets_.at(i)),
                                               static_cast<size_t>(offsets_.at(i + 1) - offsets_.at(i)));
}

std::uint64_t parameters_hash(const TrainingState& state) {
  crypto::Hasher hasher;
  for (size_t i = 0; i < state.size(); ++i) {
    if (state.tensors()[i].name.rfind("param/", 0) != 0) continue;
    auto values = state.tensor(i);
    hasher.update(ByteSpan(reinterpret_cast<const std::uint8_t*>(values.data()), values.size_bytes()));
  }
  const auto digest = hasher.finish();
  std::uint64_t hash = 0;
  for (size_t k = 0; k < 8; ++k) hash |= static_cast<std::uint64_t>(digest[k]) << (8 * k);
  return hash == 0 ? 1 : hash;
}

std::string parameters_hash_hex(std::uint64_t hash) {
  std::uint8_t bytes[8];
  for (size_t k = 0; k < 8; ++k) bytes[k] = static_cast<std::uint8_t>(hash >> (8 * k));
  return to_hex(ByteSpan(bytes, sizeof bytes));
}

}  // namespace dedloc::avg
