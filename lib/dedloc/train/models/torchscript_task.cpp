#include "dedloc/train/models/torchscript_task.hpp"

#include <cstring>
#include <filesystem>
#include <sstream>

#include <torch/script.h>

#include "dedloc/core/files.hpp"
#include "dedloc/train/data/sample_order.hpp"
#include "dedloc/train/data/tensor_shards.hpp"
#include "dedloc/train/prefetcher.hpp"
#include "dedloc/train/torch_errors.hpp"

namespace dedloc::train {

namespace {

constexpr size_t kPrefetchDepth = 4;

torch::ScalarType torch_type(safetensors::DType dtype) {
  using safetensors::DType;
  switch (dtype) {
    case DType::kF64: return torch::kFloat64;
    case DType::kF32: return torch::kFloat32;
    case DType::kF16: return torch::kFloat16;
    case DType::kBF16: return torch::kBFloat16;
    case DType::kI64: return torch::kInt64;
    case DType::kI32: return torch::kInt32;
    case DType::kI16: return torch::kInt16;
    case DType::kI8: return torch::kInt8;
    case DType::kU8: return torch::kUInt8;
    case DType::kBool: return torch::kBool;
  }
  return torch::kFloat32;
}

// One line of what libtorch threw. Its messages carry a C++ backtrace after the first line; an error inside
// the TorchScript interpreter opens with a fixed sentence and ends with the Python error, after a traceback
// whose last "File" line is where in the user's source it happened.
std::string one_line(const std::exception& e) {
  const std::string what = e.what();
  if (!what.starts_with("The following operation failed in the TorchScript interpreter")) return what.substr(0, what.find('\n'));
  std::string last, where;
  size_t start = 0;
  while (start < what.size()) {
    size_t end = what.find('\n', start);
    if (end == std::string::npos) end = what.size();
    std::string line = what.substr(start, end - start);
    const size_t text = line.find_first_not_of(' ');
    if (text != std::string::npos) {
      if (line.compare(text, 5, "File ") == 0) where = line.substr(text + 5);
      last = line.substr(text);
    }
    start = end + 1;
  }
  return where.empty() ? last : last + " (" + where + ")";
}

std::string shape_text(const torch::Tensor& t) {
  std::ostringstream out;
  out << t.sizes();
  return out.str();
}

// forward(self, batch: Dict[str, Tensor]) -> Tensor, or why not.
Status check_forward_signature(torch::jit::Module& module, const std::string& path) {
  auto forward = module.find_method("forward");
  if (!forward) return error(Code::kInvalidArgument, path + ": the module has no forward method");
  const c10::FunctionSchema& schema = forward->function().getSchema();
  auto is_batch = [](const c10::TypePtr& type) {
    auto dict = type->cast<c10::DictType>();
    return dict && dict->getKeyType()->kind() == c10::TypeKind::StringType &&
           dict->getValueType()->kind() == c10::TypeKind::TensorType;
  };
  const auto& arguments = schema.arguments();
  const auto& returns = schema.returns();
  if (arguments.size() != 2 || !is_batch(arguments[1].type()) || returns.size() != 1 ||
      returns[0].type()->kind() != c10::TypeKind::TensorType) {
    std::ostringstream text;
    text << schema;
    return error(Code::kInvalidArgument, path + ": forward must be forward(self, batch: Dict[str, Tensor]) -> Tensor "
                                                "(the batch's mean loss); this module's is " + text.str());
  }
  return {};
}

class TorchScriptTask final : public Task {
 public:
  TorchScriptTask(torch::jit::Module module, TensorShards shards, const TorchScriptOptions& options,
                  const TaskContext& context)
      : module_(std::move(module)),
        shards_(std::move(shards)),
        options_(options),
        context_(context),
        order_(shards_.samples(), context.data_seed) {
    module_.train(true);
    for (const auto& item : module_.named_parameters(/*recurse=*/true)) parameters_.emplace_back(item.name, item.value);
    for (const auto& item : module_.named_buffers(/*recurse=*/true)) buffers_.emplace_back(item.name, item.value);
  }

  // Called once before the prefetch thread starts: the checks that need a real batch.
  Status check_forward() {
    if (parameters_.empty()) return error(Code::kInvalidArgument, options_.path + ": the module has no parameters to train");
    std::vector<std::uint64_t> ids;
    for (std::int64_t i = 0; i < context_.micro_batch_size; ++i) ids.push_back(static_cast<std::uint64_t>(i) % shards_.samples());
    Batch batch = make_batch(ids);
    torch::Tensor result;
    try {
      result = loss(batch);
    } catch (const std::exception& e) {
      return error(Code::kInvalidArgument, options_.path + ": forward failed on a batch of " + describe_batch(batch) + ": " + one_line(e));
    }
    if (result.dim() != 0 || !result.is_floating_point()) {
      return error(Code::kInvalidArgument, options_.path + ": forward returned a " + std::string(c10::toString(result.scalar_type())) +
                                               " tensor of shape " + shape_text(result) +
                                               ", not the batch's mean loss (a floating-point scalar)");
    }
    if (!result.requires_grad()) {
      return error(Code::kInvalidArgument, options_.path + ": forward returned a loss that does not depend on any "
                                                           "parameter (requires_grad is false: detached, or computed under no_grad?)");
    }
    prefetcher_ = std::make_unique<Prefetcher<Batch>>(kPrefetchDepth, [this] { return next_in_order(); });
    return {};
  }

  NamedTensors named_parameters() override { return parameters_; }
  NamedTensors named_buffers() override { return buffers_; }

  bool decays(const std::string& name) const override {
    if (!options_.no_decay) return Task::decays(name);
    for (const auto& pattern : *options_.no_decay) {
      if (name.find(pattern) != std::string::npos) return false;
    }
    return true;
  }

  Result<Batch> next_batch() override { return prefetcher_->next(); }

  torch::Tensor loss(const Batch& batch) override {
    c10::Dict<std::string, torch::Tensor> named;
    for (size_t i = 0; i < batch.tensors.size(); ++i) named.insert(shards_.columns()[i].name, batch.tensors[i]);
    return module_.forward({c10::IValue(named)}).toTensor();
  }

  Result<std::string> export_model(const std::string& dir) override {
    // The module with its trained parameters, loadable by torch.jit.load; written beside and renamed, so a
    // reader never sees half a file.
    const std::string path = dir + "/model.pt";
    const std::string temporary = path + ".tmp";
    auto saved = guard_torch("saving the TorchScript module", [&] { module_.save(temporary); });
    if (!saved.is_ok()) return saved;
    std::error_code ec;
    std::filesystem::rename(temporary, path, ec);
    if (ec) return error(Code::kIo, "renaming " + temporary + " to " + path + ": " + ec.message());
    return path;
  }

  std::string describe() const override {
    std::int64_t count = 0;
    for (const auto& [name, p] : parameters_) count += p.numel();
    std::string columns;
    for (const auto& c : shards_.columns()) columns += (columns.empty() ? "" : ", ") + c.name + ": " + describe_column(c);
    return "torchscript " + std::filesystem::path(options_.path).filename().string() + " (" + std::to_string(count) +
           " parameters) on " + std::to_string(shards_.samples()) + " samples {" + columns + "}";
  }

 private:
  // Runs on the prefetch thread.
  Result<Batch> next_in_order() {
    std::vector<std::uint64_t> ids;
    for (std::int64_t i = 0; i < context_.micro_batch_size; ++i) ids.push_back(order_.next());
    return make_batch(ids);
  }

  Batch make_batch(const std::vector<std::uint64_t>& ids) const {
    Batch batch;
    batch.sample_ids = ids;
    const auto rows = static_cast<std::int64_t>(ids.size());
    for (size_t c = 0; c < shards_.columns().size(); ++c) {
      const auto& column = shards_.columns()[c];
      std::vector<std::int64_t> shape{rows};
      for (auto d : column.sample_shape) shape.push_back(static_cast<std::int64_t>(d));
      auto tensor = torch::empty(shape, torch::TensorOptions().dtype(torch_type(column.dtype)));
      auto* out = static_cast<std::uint8_t*>(tensor.data_ptr());
      for (size_t r = 0; r < ids.size(); ++r) {
        ByteSpan row = shards_.sample(c, ids[r]);
        if (!row.empty()) std::memcpy(out + r * column.sample_bytes, row.data(), row.size());
      }
      batch.tensors.push_back(context_.device == torch::kCPU ? tensor : tensor.to(context_.device));
    }
    return batch;
  }

  std::string describe_batch(const Batch& batch) const {
    std::string out = "{";
    for (size_t i = 0; i < batch.tensors.size(); ++i) {
      out += (i ? ", " : "") + shards_.columns()[i].name + ": " + std::string(c10::toString(batch.tensors[i].scalar_type())) +
             " " + shape_text(batch.tensors[i]);
    }
    return out + "}";
  }

  torch::jit::Module module_;
  TensorShards shards_;
  TorchScriptOptions options_;
  TaskContext context_;
  SampleOrder order_;  // used by the prefetch thread only
  NamedTensors parameters_, buffers_;
  std::unique_ptr<Prefetcher<Batch>> prefetcher_;  // last: stopped before what it reads
};

}  // namespace

Result<TorchScriptOptions> read_torchscript_options(ConfigReader model, ConfigReader data) {
  std::string model_kind, data_kind;
  TorchScriptOptions options;
  model.read("kind", model_kind);
  model.read("path", options.path);
  if (model.has("no_decay")) {
    options.no_decay.emplace();
    model.read("no_decay", *options.no_decay);
  }
  data.read("kind", data_kind);
  data.read("paths", options.data_paths);
  auto bad = [](const ConfigReader& where, const std::string& what) {
    return error(Code::kInvalidArgument, where.where() + ": " + what);
  };
  if (model_kind != kTorchScriptTaskKind) return bad(model, "kind: expected 'torchscript', got '" + model_kind + "'");
  if (options.path.empty()) return bad(model, "path: the TorchScript module to train (a file torch.jit.save wrote) is required");
  if (data_kind != "tensors") return bad(data, "kind: a torchscript model trains on 'tensors' data (safetensors shards), got '" + data_kind + "'");
  if (options.data_paths.empty()) return bad(data, "paths: the tensor shard files or directories are required");
  options.path = path_beside(model.source(), options.path);
  for (auto& path : options.data_paths) path = path_beside(data.source(), path);
  return options;
}

Result<std::unique_ptr<Task>> make_torchscript_task(const TorchScriptOptions& options, const TaskContext& context) {
  if (context.micro_batch_size < 1) return error(Code::kInvalidArgument, "micro_batch_size must be >= 1");
  std::error_code ec;
  if (!std::filesystem::is_regular_file(options.path, ec)) return error(Code::kNotFound, options.path + ": no such TorchScript file");
  torch::jit::Module module;
  try {
    module = torch::jit::load(options.path, context.device);
  } catch (const std::exception& e) {
    return error(Code::kInvalidArgument, options.path + ": not a TorchScript module (save one with torch.jit.save(torch.jit.script(model), path)): " +
                                             one_line(e));
  }
  DEDLOC_RETURN_IF_ERROR(check_forward_signature(module, options.path));
  auto shards = TensorShards::open(options.data_paths);
  if (!shards) return shards.status();
  auto task = std::make_unique<TorchScriptTask>(std::move(module), std::move(*shards), options, context);
  DEDLOC_RETURN_IF_ERROR(task->check_forward());
  return std::unique_ptr<Task>(std::move(task));
}

}  // namespace dedloc::train
