// The SwAV task for dedloc-train: Fashion-MNIST, multi-crop views prepared on a prefetch thread, the small
// ResNet of models/swav.hpp and its swapped-prediction loss, behind the Task interface (train/task.hpp).
//
// Recipe sections (every key optional except `kind`; defaults shown):
//
//   model:
//     kind: swav
//     widths: [16, 32, 64]        # channels of the ResNet stages (the first keeps 28x28, each next halves it)
//     blocks_per_stage: 1         # residual basic blocks per stage
//     projection_hidden: 128      # projection MLP: features -> hidden (BN, ReLU) -> projection_dim
//     projection_dim: 64          # the unit-length embedding
//     prototypes: 100             # K
//     temperature: 0.1            # of the predicting softmax
//     epsilon: 0.05               # Sinkhorn's entropic regularization
//     sinkhorn_iterations: 3
//     queue_length: 0             # past embeddings per global crop used for the codes once full; 0 = none
//     global_crops: 2             # views that provide codes (>= 1)
//     global_crop_size: 28        # pixels (side) of a global view
//     global_crop_scale: [0.4, 1.0]    # area fraction of the image a global crop covers
//     small_crops: 2              # low-resolution views that only predict
//     small_crop_size: 16
//     small_crop_scale: [0.15, 0.4]
//     flip: true                  # random horizontal flips
//     brightness: 0.4             # jitter factors in [1 - x, 1 + x]
//     contrast: 0.4
//   data:
//     kind: fashion-mnist
//     dir: /usr/share/datasets/fashion-mnist
//     split: train                # or test
//     max_samples: 0              # use only the first N images; 0 = all
//     prefetch_batches: 4         # micro-batches prepared ahead
//
// A Batch holds the views of micro_batch_size images as tensors, in this order:
//   tensors[0 .. global_crops)                          B x 1 x global_crop_size^2 floats, normalized
//   tensors[global_crops .. global_crops + small_crops) B x 1 x small_crop_size^2 floats, normalized
// and sample_ids[b] is the index of image b in the split (all views of it share that id). The sequence of
// batches (images and augmentations) depends only on data_seed: epochs are Fisher-Yates permutations drawn
// from a 64-bit Mersenne Twister seeded with it, which also draws every crop box, flip and jitter factor.
//
// State: named_parameters() are the backbone, projection and prototypes ("backbone.stage1.block0.conv1.weight",
// "backbone.stage1.block0.bn1.weight", "projection.fc1.weight", "prototypes.weight", ...); named_buffers()
// are the BatchNorm running means and variances (floats; the integer num_batches_tracked counters are
// left out: with a fixed momentum torch never reads them) and, when queue_length > 0, "queue"
// (global_crops x queue_length x projection_dim). Both return the live tensors, which training updates in
// place, so a state download or checkpoint restore copies into them. Weight decay skips biases and BatchNorm
// (modules named "bn*" or "*_bn").
//
// Thread-safety: like every Task, used from one thread; the prefetch thread touches only the data set
// (read-only) and its own random generator.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "dedloc/core/config.hpp"
#include "dedloc/core/status.hpp"
#include "dedloc/train/data/fashion_mnist.hpp"
#include "dedloc/train/models/swav.hpp"
#include "dedloc/train/prefetcher.hpp"
#include "dedloc/train/task.hpp"

namespace dedloc::train::models {

struct SwavTaskOptions {
  SwavNetOptions net;
  SwavLossOptions loss;
  MultiCropOptions crops;
  std::int64_t queue_length = 0;
  data::FashionMnistOptions data;
  std::int64_t prefetch_batches = 4;
};

// Reads the two recipe sections (see above) and checks the values; unknown keys in them are errors too.
Result<SwavTaskOptions> read_swav_options(ConfigReader model, ConfigReader data);

class SwavTask final : public Task {
 public:
  // Loads the data set, builds the network under torch::manual_seed(init_seed) and starts prefetching.
  static Result<std::unique_ptr<SwavTask>> create(const SwavTaskOptions& options, const TaskContext& context);
  ~SwavTask() override;

  NamedTensors named_parameters() override;
  NamedTensors named_buffers() override;
  bool decays(const std::string& parameter_name) const override;
  Result<Batch> next_batch() override;
  torch::Tensor loss(const Batch& batch) override;
  void after_step(std::uint64_t epoch) override;  // renormalizes the prototypes
  std::string describe() const override;

  // For evaluation (k-NN, linear probes): the network and the images.
  SwavNet& network() { return net_; }
  const data::FashionMnist& dataset() const { return *data_; }
  const SwavTaskOptions& options() const { return options_; }
  // Images [first, first + count) of the split as B x 1 x 28 x 28 normalized floats on the task's device,
  // without augmentation.
  torch::Tensor images(std::int64_t first, std::int64_t count) const;

 private:
  SwavTask(SwavTaskOptions options, const TaskContext& context, std::shared_ptr<const data::FashionMnist> data);
  Result<Batch> make_batch();  // on the prefetch thread

  SwavTaskOptions options_;
  TaskContext context_;
  std::shared_ptr<const data::FashionMnist> data_;
  SwavNet net_{nullptr};
  torch::Tensor queue_;  // undefined without a queue
  // Prefetch thread only:
  std::mt19937_64 rng_;
  std::vector<std::uint32_t> order_;
  std::size_t cursor_ = 0;
  // Last, so that it stops before the members its producer uses are destroyed.
  std::unique_ptr<Prefetcher<Batch>> prefetcher_;
};

// The factory dedloc-train calls for `model: {kind: swav}`.
Result<std::unique_ptr<Task>> make_swav_task(ConfigReader model, ConfigReader data, const TaskContext& context);
// The same from options already read (read_swav_options).
Result<std::unique_ptr<Task>> make_swav_task(const SwavTaskOptions& options, const TaskContext& context);

}  // namespace dedloc::train::models
