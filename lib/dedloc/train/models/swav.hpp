// SwAV (Caron et al. 2020, "Unsupervised Learning of Visual Features by Contrasting Cluster Assignments"),
// the self-supervised method of the DeDLOC paper's vision experiment, scaled down to 28x28 grayscale on CPU.
//
// The idea: several random views ("crops") of one image should land in the same cluster. Each view is
// embedded (backbone -> projection MLP -> unit vector z) and scored against K learned prototypes c_k (unit
// vectors too): s = z . c. For a batch of B images, the *codes* Q (B x K) of one view are soft cluster
// assignments computed without gradient by Sinkhorn-Knopp, which forces the B samples to spread evenly over
// the K prototypes (that equipartition is what prevents the trivial collapse onto one cluster). Every other
// view of the same image must then *predict* those codes from its own scores:
//
//   loss = 1 / (V_g (V - 1)) * sum_{i global} sum_{v != i} mean_b [ - sum_k Q_i[b,k] log softmax(s_v[b] / T)_k ]
//
// (the "swapped prediction"; V views of which V_g are global crops; codes come from global crops only).
//
// Sinkhorn-Knopp (SwAV §3.1, Cuturi 2013): Q = diag(u) exp(S / eps) diag(v) is the entropic optimal transport
// between the B samples (each with mass 1/B) and the K prototypes (each 1/K). Alternately rescaling the
// prototype sums to 1/K and the sample sums to 1/B converges to it; SwAV stops after 3 iterations and
// rescales so that each sample's code sums to 1. The last rescale is the per-sample one, so rows sum to 1
// exactly and prototype columns sum to B/K approximately (exactly in the limit).
//
// Multi-crop (SwAV §3.2): besides 2 global crops (a large random region, resized to full resolution) each
// image gives N small crops (a small region at low resolution) that are cheap to process; small crops only
// predict, they never provide codes. Crops of one resolution go through the network together, so BatchNorm
// sees the statistics of one resolution at a time as in the reference implementation.
//
// The queue (SwAV §4, small batches): with batches much smaller than K, Sinkhorn cannot spread B samples over
// K prototypes meaningfully, so the embeddings of the last L samples of each global crop are kept and scored
// with the batch when computing codes (only the batch's codes are used). As in the paper the queue is used
// only once it is full (its last row non-zero), so its early zeros never act as samples.
//
// Prototypes are a bias-free linear layer whose rows are renormalized to unit length after every optimizer
// step (normalize_prototypes(); the task calls it from Task::after_step) and at construction.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include <torch/torch.h>

namespace dedloc::train::models {

// The network: a small ResNet for 1-channel images, the projection head and the prototypes.
struct SwavNetOptions {
  std::vector<std::int64_t> widths = {16, 32, 64};  // channels per stage; stages after the first halve the size
  std::int64_t blocks_per_stage = 1;                // residual basic blocks (two 3x3 convs) per stage
  std::int64_t projection_hidden = 128;             // the projection MLP's hidden width
  std::int64_t projection_dim = 64;                 // the embedding z (unit length)
  std::int64_t prototypes = 100;                    // K
};

// conv3x3 -> BN -> ReLU -> conv3x3 -> BN, plus the input (through a 1x1 conv + BN where the shape changes),
// then ReLU (He et al. 2016).
class ResidualBlockImpl : public torch::nn::Module {
 public:
  ResidualBlockImpl(std::int64_t in_channels, std::int64_t out_channels, std::int64_t stride);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  torch::nn::Conv2d conv1_{nullptr}, conv2_{nullptr}, shortcut_conv_{nullptr};
  torch::nn::BatchNorm2d bn1_{nullptr}, bn2_{nullptr}, shortcut_bn_{nullptr};
};
TORCH_MODULE(ResidualBlock);

// stem (conv3x3 + BN + ReLU) -> stage1 .. stageN -> global average pool: B x widths.back() features.
// Any input size works (the small crops are 16x16); parameters "backbone.stage2.block0.conv1.weight", ...
class BackboneImpl : public torch::nn::Module {
 public:
  explicit BackboneImpl(const SwavNetOptions& options);
  torch::Tensor forward(const torch::Tensor& images);  // B x 1 x H x W -> B x widths.back()

 private:
  torch::nn::Conv2d stem_conv_{nullptr};
  torch::nn::BatchNorm2d stem_bn_{nullptr};
  std::vector<std::vector<ResidualBlock>> stages_;  // registered as "stage<i>.block<j>" (1-based stages)
};
TORCH_MODULE(Backbone);

class SwavNetImpl : public torch::nn::Module {
 public:
  explicit SwavNetImpl(const SwavNetOptions& options);

  // The representation that a downstream task uses (linear probe, k-NN): B x widths.back().
  torch::Tensor features(const torch::Tensor& images);
  // The unit-length embedding z: B x projection_dim.
  torch::Tensor embed(const torch::Tensor& images);
  // Scores against the prototypes, z . c_k: B x K.
  torch::Tensor scores(const torch::Tensor& embeddings);
  // Rescales every prototype to unit length (no gradient).
  void normalize_prototypes();

  const SwavNetOptions& options() const { return options_; }
  const torch::Tensor& prototype_weights() const { return prototypes_->weight; }  // K x projection_dim

 private:
  SwavNetOptions options_;
  Backbone backbone_{nullptr};
  torch::nn::Linear fc1_{nullptr}, fc2_{nullptr};
  torch::nn::BatchNorm1d bn_{nullptr};
  torch::nn::Linear prototypes_{nullptr};
};
TORCH_MODULE(SwavNet);

struct SwavLossOptions {
  double temperature = 0.1;              // T of the predicting softmax
  double epsilon = 0.05;                 // Sinkhorn's entropic regularization
  std::int64_t sinkhorn_iterations = 3;  // alternations of the two rescalings
};

// Sinkhorn-Knopp codes for scores S (N x K), without gradient: N x K, non-negative, every row sums to 1 and
// every column to about N / K (exactly as iterations grow). Stable for any score range (it iterates on
// log Q with logsumexp, the same arithmetic as SwAV's exp-and-divide); float64 inside, the scores' dtype out.
torch::Tensor sinkhorn(const torch::Tensor& scores, double epsilon, std::int64_t iterations);

// The swapped-prediction loss (formula above) for one batch of views, views[v]: B x 1 x H_v x W_v, the
// first `global_views` of them global. Consecutive views of equal size are embedded in one forward pass.
// `queue`, when defined, is global_views x L x projection_dim: it is read for the codes once full and then
// updated in place with this batch's global embeddings (newest first). Returns the mean loss (a scalar).
torch::Tensor swav_loss(SwavNet& net, const std::vector<torch::Tensor>& views, std::int64_t global_views,
                        const SwavLossOptions& options, torch::Tensor queue = {});

// Multi-crop augmentation on CPU with torch ops: random resized crops (area fraction in [min_scale,
// max_scale] of the image, aspect ratio in [3/4, 4/3], bilinear resampling via one affine grid per view),
// horizontal flips, brightness and contrast jitter, then normalization by the data set's mean and std.
struct MultiCropOptions {
  std::int64_t global_crops = 2;
  std::int64_t global_size = 28;  // output side in pixels
  double global_min_scale = 0.4, global_max_scale = 1.0;
  std::int64_t small_crops = 2;
  std::int64_t small_size = 16;
  double small_min_scale = 0.15, small_max_scale = 0.4;
  bool flip = true;                    // mirror left-right with probability 1/2
  double brightness = 0.4;             // pixel values scaled by a factor in [1 - b, 1 + b]
  double contrast = 0.4;               // distance to the image's mean scaled by a factor in [1 - c, 1 + c]
  double mean = 0.2860, std = 0.3530;  // Fashion-MNIST's pixel statistics (on [0, 1])
};

// images: B x 1 x H x W floats in [0, 1]. Returns the global crops, then the small crops, each
// B x 1 x size x size, normalized. Deterministic given the generator's state.
std::vector<torch::Tensor> multi_crop(const torch::Tensor& images, const MultiCropOptions& options,
                                      std::mt19937_64& rng);

// A uniform double in [0, 1) from 53 random bits, the same on every platform (std's distributions are not).
double uniform01(std::mt19937_64& rng);

}  // namespace dedloc::train::models
