// What dedloc-train trains: a model, its data and its loss, behind one interface (docs/recipes.md).
//
// The collaborative loop (trainer.cpp) knows nothing about ALBERT or SwAV: it asks a Task for micro-batches,
// for the mean loss of one, and for the parameters to average and step. Each task reads its own recipe
// sections ("model:", "data:") with a ConfigReader, so a wrong key is an error naming the key and the file.
//
// Determinism matters: every peer of a run builds the same initial parameters from `init_seed` (a joiner
// then downloads the swarm's state anyway), while `data_seed` differs per peer so that peers see their data
// in different orders. Batches carry the ids of their samples, so a run can be replayed exactly (the
// equivalence test does that).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "dedloc/core/config.hpp"
#include "dedloc/core/log.hpp"
#include "dedloc/core/status.hpp"

namespace dedloc::train {

using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

// One micro-batch, on the task's device.
struct Batch {
  std::vector<torch::Tensor> tensors;     // the task's inputs and targets, in the task's own order
  std::vector<std::uint64_t> sample_ids;  // the dataset samples it holds (views of one sample share its id)
  std::int64_t size() const { return static_cast<std::int64_t>(sample_ids.size()); }
};

struct TaskContext {
  torch::Device device = torch::kCPU;
  std::uint64_t init_seed = 0;           // the same on every peer of a run: identical initial parameters
  std::uint64_t data_seed = 0;           // per peer: its own shuffling and augmentations
  std::int64_t micro_batch_size = 32;    // samples per next_batch()
  std::string work_dir;                  // where a task may cache what it derives (a tokenizer model, ...)
  double samples_per_second = 0;         // per peer, for a task that emulates its compute (synthetic); 0: the recipe's
  Logger* log = &Logger::global();
};

class Task {
 public:
  virtual ~Task() = default;

  // The trainable parameters, in a fixed order with stable names: they are what peers average, and their
  // names and shapes make the run's schema hash.
  virtual NamedTensors named_parameters() = 0;
  // State that is not trained by gradients but travels with a state download and a checkpoint (BatchNorm
  // statistics, SwAV's queue). Default: none.
  virtual NamedTensors named_buffers() { return {}; }
  // Whether weight decay applies to this parameter (not to biases and LayerNorm/BatchNorm weights).
  virtual bool decays(const std::string& parameter_name) const;

  // The next micro-batch of TaskContext::micro_batch_size samples. Data is prepared ahead on a prefetch
  // thread, so this normally returns at once. Errors only for data that cannot be read.
  virtual Result<Batch> next_batch() = 0;
  // Forward pass in training mode: the mean loss over the batch, a scalar that backward() can follow.
  virtual torch::Tensor loss(const Batch& batch) = 0;
  // Called after each optimizer step with the new epoch (SwAV renormalizes its prototypes here).
  virtual void after_step(std::uint64_t /*epoch*/) {}

  // Metadata entries that travel with the training state (every download, checkpoint and
  // `dedloc-avg export`), for tools that read a state without building the task: ALBERT publishes its
  // shape (collab/hf_export.hpp kAlbertConfigEntry). Default: none.
  virtual std::map<std::string, std::string> state_entries() const { return {}; }
  // Writes the trained model in the format its community loads into `dir`; returns what it wrote
  // (a path), or "" when the task has no such format.
  virtual Result<std::string> export_model(const std::string& /*dir*/) { return std::string(); }

  // For logs: "albert (11.7 M parameters)".
  virtual std::string describe() const = 0;
};

}  // namespace dedloc::train
