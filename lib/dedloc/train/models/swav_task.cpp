#include "dedloc/train/models/swav_task.hpp"

#include <cstdio>
#include <cstring>

namespace dedloc::train::models {
namespace {

Status key_error(const ConfigReader& reader, std::string_view key, std::string_view what) {
  return error(Code::kInvalidArgument,
               reader.where() + ": key '" + std::string(key) + "' must be " + std::string(what));
}

// A YAML list of numbers ("widths: [16, 32, 64]"), which ConfigReader has no typed read for. Absent: `out`
// stays as it is.
Status read_numbers(ConfigReader& reader, std::string_view key, std::vector<double>& out, bool integers) {
  const YAML::Node node = reader.raw(key);
  if (!node.IsDefined() || node.IsNull()) return Status::ok();
  const char* what = integers ? "a list of integers" : "a list of numbers";
  if (!node.IsSequence()) return key_error(reader, key, what);
  std::vector<double> values;
  for (const auto& item : node) {
    if (!item.IsScalar()) return key_error(reader, key, what);
    try {
      values.push_back(integers ? static_cast<double>(item.as<std::int64_t>()) : item.as<double>());
    } catch (const YAML::Exception&) {
      return key_error(reader, key, what);
    }
  }
  out = std::move(values);
  return Status::ok();
}

Status read_scale(ConfigReader& reader, std::string_view key, double& min_scale, double& max_scale) {
  std::vector<double> pair = {min_scale, max_scale};
  DEDLOC_RETURN_IF_ERROR(read_numbers(reader, key, pair, /*integers=*/false));
  if (pair.size() != 2 || !(pair[0] > 0) || !(pair[0] <= pair[1]) || !(pair[1] <= 1)) {
    return key_error(reader, key, "[min, max] area fractions with 0 < min <= max <= 1");
  }
  min_scale = pair[0];
  max_scale = pair[1];
  return Status::ok();
}

std::string count_text(std::int64_t n) {
  char buf[32];
  if (n >= 1'000'000) {
    std::snprintf(buf, sizeof buf, "%.1f M", static_cast<double>(n) / 1e6);
  } else if (n >= 1'000) {
    std::snprintf(buf, sizeof buf, "%.1f K", static_cast<double>(n) / 1e3);
  } else {
    std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(n));
  }
  return buf;
}

}  // namespace

Result<SwavTaskOptions> read_swav_options(ConfigReader model, ConfigReader data) {
  SwavTaskOptions o;
  std::string kind;
  model.read("kind", kind);
  std::vector<double> widths(o.net.widths.begin(), o.net.widths.end());
  DEDLOC_RETURN_IF_ERROR(read_numbers(model, "widths", widths, /*integers=*/true));
  model.read("blocks_per_stage", o.net.blocks_per_stage);
  model.read("projection_hidden", o.net.projection_hidden);
  model.read("projection_dim", o.net.projection_dim);
  model.read("prototypes", o.net.prototypes);
  model.read("temperature", o.loss.temperature);
  model.read("epsilon", o.loss.epsilon);
  model.read("sinkhorn_iterations", o.loss.sinkhorn_iterations);
  model.read("queue_length", o.queue_length);
  model.read("global_crops", o.crops.global_crops);
  model.read("global_crop_size", o.crops.global_size);
  DEDLOC_RETURN_IF_ERROR(read_scale(model, "global_crop_scale", o.crops.global_min_scale, o.crops.global_max_scale));
  model.read("small_crops", o.crops.small_crops);
  model.read("small_crop_size", o.crops.small_size);
  DEDLOC_RETURN_IF_ERROR(read_scale(model, "small_crop_scale", o.crops.small_min_scale, o.crops.small_max_scale));
  model.read("flip", o.crops.flip);
  model.read("brightness", o.crops.brightness);
  model.read("contrast", o.crops.contrast);

  std::string data_kind;
  data.read("kind", data_kind);
  data.read("dir", o.data.dir);
  data.read("split", o.data.split);
  data.read("max_samples", o.data.max_samples);
  data.read("prefetch_batches", o.prefetch_batches);

  // Wrong types and unknown keys first: they explain a bad value better than the checks below.
  DEDLOC_RETURN_IF_ERROR(model.finish());
  DEDLOC_RETURN_IF_ERROR(data.finish());

  if (kind != "swav") return key_error(model, "kind", "swav (got '" + kind + "')");
  if (data_kind != "fashion-mnist") return key_error(data, "kind", "fashion-mnist (got '" + data_kind + "')");
  if (widths.empty()) return key_error(model, "widths", "a non-empty list of channel counts");
  o.net.widths.clear();
  for (double w : widths) {
    if (w < 1 || w > 4096) return key_error(model, "widths", "channel counts in 1..4096");
    o.net.widths.push_back(static_cast<std::int64_t>(w));
  }
  if (o.net.blocks_per_stage < 1) return key_error(model, "blocks_per_stage", ">= 1");
  if (o.net.projection_hidden < 1) return key_error(model, "projection_hidden", ">= 1");
  if (o.net.projection_dim < 1) return key_error(model, "projection_dim", ">= 1");
  if (o.net.prototypes < 2) return key_error(model, "prototypes", ">= 2");
  if (!(o.loss.temperature > 0)) return key_error(model, "temperature", "> 0");
  if (!(o.loss.epsilon > 0)) return key_error(model, "epsilon", "> 0");
  if (o.loss.sinkhorn_iterations < 1) return key_error(model, "sinkhorn_iterations", ">= 1");
  if (o.queue_length < 0) return key_error(model, "queue_length", ">= 0 (0 = no queue)");
  if (o.crops.global_crops < 1) return key_error(model, "global_crops", ">= 1");
  if (o.crops.small_crops < 0) return key_error(model, "small_crops", ">= 0");
  if (o.crops.global_crops + o.crops.small_crops < 2) {
    return key_error(model, "small_crops", ">= 1 with a single global crop (a view needs another to predict)");
  }
  if (o.crops.global_size < 4 || o.crops.global_size > 1024) return key_error(model, "global_crop_size", "in 4..1024");
  if (o.crops.small_size < 4 || o.crops.small_size > 1024) return key_error(model, "small_crop_size", "in 4..1024");
  if (o.crops.brightness < 0 || o.crops.brightness >= 1) return key_error(model, "brightness", "in [0, 1)");
  if (o.crops.contrast < 0 || o.crops.contrast >= 1) return key_error(model, "contrast", "in [0, 1)");
  if (o.data.split != "train" && o.data.split != "test") return key_error(data, "split", "train or test");
  if (o.data.max_samples < 0) return key_error(data, "max_samples", ">= 0 (0 = all)");
  if (o.prefetch_batches < 1 || o.prefetch_batches > 1024) return key_error(data, "prefetch_batches", "in 1..1024");
  return o;
}

SwavTask::SwavTask(SwavTaskOptions options, const TaskContext& context,
                   std::shared_ptr<const data::FashionMnist> data)
    : options_(std::move(options)), context_(context), data_(std::move(data)), rng_(context.data_seed) {
  // Every peer of a run builds the same initial parameters; nothing else may draw from torch's generator
  // between the seed and the modules.
  torch::manual_seed(context.init_seed);
  net_ = SwavNet(options_.net);
  net_->to(context_.device);
  net_->train();
  if (options_.queue_length > 0) {
    queue_ = torch::zeros({options_.crops.global_crops, options_.queue_length, options_.net.projection_dim},
                          torch::TensorOptions().dtype(torch::kFloat32).device(context_.device));
  }
  prefetcher_ = std::make_unique<Prefetcher<Batch>>(static_cast<std::size_t>(options_.prefetch_batches),
                                                    [this] { return make_batch(); });
}

SwavTask::~SwavTask() = default;

Result<std::unique_ptr<SwavTask>> SwavTask::create(const SwavTaskOptions& options, const TaskContext& context) {
  if (context.micro_batch_size < 2) {
    return error(Code::kInvalidArgument, "swav: micro_batch_size must be >= 2 (BatchNorm needs two samples)");
  }
  auto loaded = data::load_fashion_mnist(options.data);
  if (!loaded) return loaded.status().with_context("swav: loading fashion-mnist");
  auto data = std::make_shared<const data::FashionMnist>(std::move(*loaded));
  try {
    return std::unique_ptr<SwavTask>(new SwavTask(options, context, std::move(data)));
  } catch (const c10::Error& e) {
    return error(Code::kInternal, std::string("swav: building the model: ") + e.what_without_backtrace());
  }
}

Result<Batch> SwavTask::make_batch() {
  try {
    const std::int64_t batch = context_.micro_batch_size;
    const std::int64_t image_size = data_->image_size();
    Batch out;
    out.sample_ids.reserve(static_cast<std::size_t>(batch));
    torch::Tensor pixels = torch::empty({batch, 1, data_->rows, data_->cols}, torch::kUInt8);
    std::uint8_t* dst = pixels.data_ptr<std::uint8_t>();
    for (std::int64_t b = 0; b < batch; ++b) {
      if (cursor_ == order_.size()) {  // a new epoch: a fresh permutation (Fisher-Yates)
        order_.resize(static_cast<std::size_t>(data_->count));
        for (std::size_t i = 0; i < order_.size(); ++i) order_[i] = static_cast<std::uint32_t>(i);
        for (std::size_t i = order_.size(); i > 1; --i) {
          const auto j = static_cast<std::size_t>(uniform01(rng_) * static_cast<double>(i));
          std::swap(order_[i - 1], order_[std::min(j, i - 1)]);
        }
        cursor_ = 0;
      }
      const std::uint32_t index = order_[cursor_++];
      std::memcpy(dst + b * image_size, data_->image(index), static_cast<std::size_t>(image_size));
      out.sample_ids.push_back(index);
    }
    torch::Tensor images = pixels.to(torch::kFloat32).div_(255.0);
    for (auto& view : multi_crop(images, options_.crops, rng_)) out.tensors.push_back(view.to(context_.device));
    return out;
  } catch (const c10::Error& e) {
    return error(Code::kInternal, std::string("swav: preparing a batch: ") + e.what_without_backtrace());
  }
}

torch::Tensor SwavTask::images(std::int64_t first, std::int64_t count) const {
  TORCH_CHECK(first >= 0 && count >= 0 && first + count <= data_->count, "swav: images out of range");
  torch::Tensor pixels = torch::from_blob(const_cast<std::uint8_t*>(data_->image(first)),
                                          {count, 1, data_->rows, data_->cols}, torch::kUInt8);
  torch::Tensor x = pixels.to(torch::kFloat32).div_(255.0);
  return ((x - options_.crops.mean) / options_.crops.std).to(context_.device);
}

NamedTensors SwavTask::named_parameters() {
  NamedTensors out;
  for (const auto& item : net_->named_parameters(/*recurse=*/true)) out.emplace_back(item.key(), item.value());
  return out;
}

NamedTensors SwavTask::named_buffers() {
  NamedTensors out;
  for (const auto& item : net_->named_buffers(/*recurse=*/true)) {
    if (!item.value().is_floating_point()) continue;  // num_batches_tracked: unused with a fixed momentum
    out.emplace_back(item.key(), item.value());
  }
  if (queue_.defined()) out.emplace_back("queue", queue_);
  return out;
}

bool SwavTask::decays(const std::string& parameter_name) const {
  if (!Task::decays(parameter_name)) return false;
  // "....bn1.weight", "....stem_bn.bias", "projection.bn.weight": the module segment names a BatchNorm.
  const auto last_dot = parameter_name.rfind('.');
  if (last_dot == std::string::npos || last_dot == 0) return true;
  const auto previous_dot = parameter_name.rfind('.', last_dot - 1);
  const std::size_t start = previous_dot == std::string::npos ? 0 : previous_dot + 1;
  const std::string module = parameter_name.substr(start, last_dot - start);
  const bool batch_norm = module.starts_with("bn") || module.ends_with("_bn");
  return !batch_norm;
}

Result<Batch> SwavTask::next_batch() { return prefetcher_->next(); }

torch::Tensor SwavTask::loss(const Batch& batch) {
  const auto views = static_cast<std::int64_t>(batch.tensors.size());
  TORCH_CHECK(views == options_.crops.global_crops + options_.crops.small_crops,
              "swav: a batch must hold global_crops + small_crops views");
  net_->train();
  return swav_loss(net_, batch.tensors, options_.crops.global_crops, options_.loss, queue_);
}

void SwavTask::after_step(std::uint64_t /*epoch*/) { net_->normalize_prototypes(); }

std::string SwavTask::describe() const {
  std::int64_t count = 0;
  for (const auto& p : net_->parameters()) count += p.numel();
  std::string widths;
  for (auto w : options_.net.widths) widths += (widths.empty() ? "" : "/") + std::to_string(w);
  return "swav (" + count_text(count) + " parameters: ResNet " + widths + " x" +
         std::to_string(options_.net.blocks_per_stage) + ", " + std::to_string(options_.net.prototypes) +
         " prototypes, " + std::to_string(options_.crops.global_crops) + "+" +
         std::to_string(options_.crops.small_crops) + " crops" +
         (options_.queue_length > 0 ? ", queue " + std::to_string(options_.queue_length) : std::string()) + ")";
}

Result<std::unique_ptr<Task>> make_swav_task(ConfigReader model, ConfigReader data, const TaskContext& context) {
  auto options = read_swav_options(std::move(model), std::move(data));
  if (!options) return options.status();
  return make_swav_task(*options, context);
}

Result<std::unique_ptr<Task>> make_swav_task(const SwavTaskOptions& options, const TaskContext& context) {
  auto task = SwavTask::create(options, context);
  if (!task) return task.status();
  context.log->info("swav") << (*task)->describe() << ", " << (*task)->dataset().count << " "
                            << options.data.split << " images";
  return std::unique_ptr<Task>(std::move(*task));
}

}  // namespace dedloc::train::models
