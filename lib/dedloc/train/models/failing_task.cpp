#include "dedloc/train/models/failing_task.hpp"

#include <stdexcept>

#include <c10/util/Exception.h>

namespace dedloc::train {

namespace {

class FailingTask : public Task {
 public:
  FailingTask(std::unique_ptr<Task> inner, FailingTaskOptions options)
      : inner_(std::move(inner)), options_(std::move(options)) {}

  NamedTensors named_parameters() override { return inner_->named_parameters(); }
  NamedTensors named_buffers() override { return inner_->named_buffers(); }
  bool decays(const std::string& name) const override { return inner_->decays(name); }
  Result<Batch> next_batch() override { return inner_->next_batch(); }
  torch::Tensor loss(const Batch& batch) override {
    if (computed_++ >= options_.fail_after) {
      switch (options_.error) {
        case FailingTaskOptions::Error::kOutOfMemory:
          // What the CUDA caching allocator throws, in its words.
          TORCH_CHECK_WITH(OutOfMemoryError, false, "CUDA out of memory. Tried to allocate 2.00 GiB (",
                           kFailingTaskKind, " after ", options_.fail_after, " micro-batches)");
          break;
        case FailingTaskOptions::Error::kLibtorch:
          TORCH_CHECK(false, "mat1 and mat2 shapes cannot be multiplied (", kFailingTaskKind, ")");
          break;
        case FailingTaskOptions::Error::kStd:
          throw std::runtime_error(std::string(kFailingTaskKind) + " threw");
      }
    }
    return inner_->loss(batch);
  }
  void after_step(std::uint64_t epoch) override { inner_->after_step(epoch); }
  std::string describe() const override {
    std::string text(kFailingTaskKind);
    text.append(" around ").append(inner_->describe());
    return text;
  }

 private:
  std::unique_ptr<Task> inner_;
  FailingTaskOptions options_;
  std::uint64_t computed_ = 0;
};

}  // namespace

Result<FailingTaskOptions> read_failing_task_options(ConfigReader model, ConfigReader data) {
  FailingTaskOptions options;
  std::string error = "out_of_memory";
  model.read("fail_after", options.fail_after);
  model.read("error", error);
  if (error == "out_of_memory") {
    options.error = FailingTaskOptions::Error::kOutOfMemory;
  } else if (error == "libtorch") {
    options.error = FailingTaskOptions::Error::kLibtorch;
  } else if (error == "std") {
    options.error = FailingTaskOptions::Error::kStd;
  } else {
    return dedloc::error(Code::kInvalidArgument, model.where() + ": error: one of out_of_memory, libtorch, std");
  }
  auto mlp = read_mlp_options(std::move(model), std::move(data), kFailingTaskKind);
  if (!mlp) return mlp.status();
  options.mlp = *mlp;
  return options;
}

Result<std::unique_ptr<Task>> make_failing_task(const FailingTaskOptions& options, const TaskContext& context) {
  auto inner = make_mlp_task(options.mlp, context);
  if (!inner) return inner.status();
  return std::unique_ptr<Task>(std::make_unique<FailingTask>(std::move(*inner), options));
}

}  // namespace dedloc::train
