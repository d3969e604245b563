#include "dedloc/train/models/swav.hpp"

#include <cmath>
#include <string>

namespace dedloc::train::models {

namespace nn = torch::nn;
namespace F = torch::nn::functional;

ResidualBlockImpl::ResidualBlockImpl(std::int64_t in_channels, std::int64_t out_channels, std::int64_t stride) {
  conv1_ = register_module(
      "conv1", nn::Conv2d(nn::Conv2dOptions(in_channels, out_channels, 3).stride(stride).padding(1).bias(false)));
  bn1_ = register_module("bn1", nn::BatchNorm2d(out_channels));
  conv2_ =
      register_module("conv2", nn::Conv2d(nn::Conv2dOptions(out_channels, out_channels, 3).padding(1).bias(false)));
  bn2_ = register_module("bn2", nn::BatchNorm2d(out_channels));
  if (stride != 1 || in_channels != out_channels) {
    shortcut_conv_ = register_module(
        "shortcut_conv", nn::Conv2d(nn::Conv2dOptions(in_channels, out_channels, 1).stride(stride).bias(false)));
    shortcut_bn_ = register_module("shortcut_bn", nn::BatchNorm2d(out_channels));
  }
}

torch::Tensor ResidualBlockImpl::forward(const torch::Tensor& x) {
  torch::Tensor y = torch::relu(bn1_(conv1_(x)));
  y = bn2_(conv2_(y));
  torch::Tensor skip = shortcut_conv_ ? shortcut_bn_(shortcut_conv_(x)) : x;
  return torch::relu(y + skip);
}

BackboneImpl::BackboneImpl(const SwavNetOptions& options) {
  TORCH_CHECK(!options.widths.empty() && options.blocks_per_stage >= 1, "SwavNet: needs widths and blocks");
  std::int64_t channels = options.widths.front();
  stem_conv_ = register_module("stem_conv", nn::Conv2d(nn::Conv2dOptions(1, channels, 3).padding(1).bias(false)));
  stem_bn_ = register_module("stem_bn", nn::BatchNorm2d(channels));
  for (std::size_t s = 0; s < options.widths.size(); ++s) {
    // A plain Module groups the blocks so that their names read "stage2.block0.conv1.weight".
    auto stage = register_module("stage" + std::to_string(s + 1), std::make_shared<nn::Module>());
    std::vector<ResidualBlock> blocks;
    for (std::int64_t b = 0; b < options.blocks_per_stage; ++b) {
      const std::int64_t stride = (s > 0 && b == 0) ? 2 : 1;
      blocks.push_back(stage->register_module("block" + std::to_string(b),
                                              ResidualBlock(channels, options.widths[s], stride)));
      channels = options.widths[s];
    }
    stages_.push_back(std::move(blocks));
  }
  // He initialization for the convolutions (ResNet's own); BatchNorm starts as the identity.
  for (auto& module : modules(/*include_self=*/false)) {
    if (auto* conv = module->as<nn::Conv2d>()) {
      nn::init::kaiming_normal_(conv->weight, 0.0, torch::kFanOut, torch::kReLU);
    }
  }
}

torch::Tensor BackboneImpl::forward(const torch::Tensor& images) {
  torch::Tensor x = torch::relu(stem_bn_(stem_conv_(images)));
  for (auto& blocks : stages_) {
    for (auto& block : blocks) x = block(x);
  }
  return x.mean({2, 3});
}

SwavNetImpl::SwavNetImpl(const SwavNetOptions& options) : options_(options) {
  backbone_ = register_module("backbone", Backbone(options));
  auto projection = register_module("projection", std::make_shared<nn::Module>());
  fc1_ = projection->register_module("fc1", nn::Linear(options.widths.back(), options.projection_hidden));
  bn_ = projection->register_module("bn", nn::BatchNorm1d(options.projection_hidden));
  fc2_ = projection->register_module("fc2", nn::Linear(options.projection_hidden, options.projection_dim));
  prototypes_ = register_module(
      "prototypes", nn::Linear(nn::LinearOptions(options.projection_dim, options.prototypes).bias(false)));
  normalize_prototypes();
}

torch::Tensor SwavNetImpl::features(const torch::Tensor& images) { return backbone_(images); }

torch::Tensor SwavNetImpl::embed(const torch::Tensor& images) {
  torch::Tensor h = torch::relu(bn_(fc1_(features(images))));
  return F::normalize(fc2_(h), F::NormalizeFuncOptions().p(2).dim(1));
}

torch::Tensor SwavNetImpl::scores(const torch::Tensor& embeddings) { return prototypes_(embeddings); }

void SwavNetImpl::normalize_prototypes() {
  torch::NoGradGuard no_grad;
  torch::Tensor& w = prototypes_->weight;
  w.div_(w.norm(2, /*dim=*/1, /*keepdim=*/true).clamp_min(1e-12));
}

torch::Tensor sinkhorn(const torch::Tensor& scores, double epsilon, std::int64_t iterations) {
  TORCH_CHECK(scores.dim() == 2 && scores.size(0) > 0 && scores.size(1) > 0, "sinkhorn: scores must be N x K");
  TORCH_CHECK(epsilon > 0 && iterations >= 1, "sinkhorn: needs epsilon > 0 and at least one iteration");
  torch::NoGradGuard no_grad;
  const double log_n = std::log(static_cast<double>(scores.size(0)));
  const double log_k = std::log(static_cast<double>(scores.size(1)));
  // In the log domain, so that no score range can underflow a whole row or column to zero:
  // log Q = S / eps, then alternately subtract log(column sum) + log K and log(row sum) + log N.
  torch::Tensor log_q = scores.detach().to(torch::kFloat64) / epsilon;
  for (std::int64_t it = 0; it < iterations; ++it) {
    log_q -= torch::logsumexp(log_q, /*dim=*/0, /*keepdim=*/true) + log_k;  // each prototype's mass -> 1/K
    log_q -= torch::logsumexp(log_q, /*dim=*/1, /*keepdim=*/true) + log_n;  // each sample's mass -> 1/N
  }
  return torch::exp(log_q + log_n).to(scores.scalar_type());  // each sample's code sums to 1
}

torch::Tensor swav_loss(SwavNet& net, const std::vector<torch::Tensor>& views, std::int64_t global_views,
                        const SwavLossOptions& options, torch::Tensor queue) {
  const auto view_count = static_cast<std::int64_t>(views.size());
  TORCH_CHECK(view_count >= 2 && global_views >= 1 && global_views <= view_count,
              "swav_loss: needs at least two views, the first global_views of them global");
  const std::int64_t batch = views.front().size(0);

  // Embed runs of equally sized views together: one forward for the global crops, one for the small ones.
  std::vector<torch::Tensor> embeddings;
  for (std::int64_t v = 0; v < view_count;) {
    std::int64_t end = v + 1;
    while (end < view_count && views[end].sizes() == views[v].sizes()) ++end;
    std::vector<torch::Tensor> run(views.begin() + v, views.begin() + end);
    for (auto& z : net->embed(torch::cat(run)).chunk(end - v)) embeddings.push_back(z);
    v = end;
  }
  const std::vector<torch::Tensor> scores = net->scores(torch::cat(embeddings)).chunk(view_count);

  torch::Tensor loss = torch::zeros({}, scores.front().options());
  for (std::int64_t i = 0; i < global_views; ++i) {
    torch::Tensor codes;
    {
      torch::NoGradGuard no_grad;
      torch::Tensor out = scores[i].detach();
      const bool queue_full = queue.defined() && queue[i][queue.size(1) - 1].ne(0).any().item<bool>();
      if (queue_full) out = torch::cat({torch::mm(queue[i], net->prototype_weights().t()), out});
      codes = sinkhorn(out, options.epsilon, options.sinkhorn_iterations).narrow(0, out.size(0) - batch, batch);
    }
    torch::Tensor prediction_loss = torch::zeros({}, loss.options());
    for (std::int64_t v = 0; v < view_count; ++v) {
      if (v == i) continue;
      torch::Tensor log_p = torch::log_softmax(scores[v] / options.temperature, /*dim=*/1);
      prediction_loss = prediction_loss - (codes * log_p).sum(1).mean();
    }
    loss = loss + prediction_loss / static_cast<double>(view_count - 1);
  }
  loss = loss / static_cast<double>(global_views);

  if (queue.defined()) {
    torch::NoGradGuard no_grad;
    const std::int64_t length = queue.size(1);
    for (std::int64_t i = 0; i < global_views; ++i) {
      torch::Tensor shifted = torch::cat({embeddings[i].detach(), queue[i]}).narrow(0, 0, length);
      queue[i].copy_(shifted);
    }
  }
  return loss;
}

double uniform01(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

namespace {

// One view of every image: a random box per image, resampled to size x size, flipped and jittered.
torch::Tensor crop_view(const torch::Tensor& images, std::int64_t size, double min_scale, double max_scale,
                        const MultiCropOptions& options, std::mt19937_64& rng) {
  const std::int64_t batch = images.size(0);
  const double height = static_cast<double>(images.size(2));
  const double width = static_cast<double>(images.size(3));
  const double log_min_ratio = std::log(3.0 / 4.0), log_max_ratio = std::log(4.0 / 3.0);
  std::vector<float> theta(static_cast<std::size_t>(batch) * 6);
  std::vector<float> brightness(static_cast<std::size_t>(batch)), contrast(static_cast<std::size_t>(batch));
  for (std::int64_t b = 0; b < batch; ++b) {
    // torchvision's RandomResizedCrop, with a continuous box: up to 10 tries, else the whole image.
    double w = width, h = height, x0 = 0, y0 = 0;
    for (int attempt = 0; attempt < 10; ++attempt) {
      const double area = width * height * (min_scale + (max_scale - min_scale) * uniform01(rng));
      const double ratio = std::exp(log_min_ratio + (log_max_ratio - log_min_ratio) * uniform01(rng));
      const double cw = std::sqrt(area * ratio), ch = std::sqrt(area / ratio);
      if (cw <= width && ch <= height) {
        w = cw;
        h = ch;
        x0 = (width - w) * uniform01(rng);
        y0 = (height - h) * uniform01(rng);
        break;
      }
    }
    const bool flip = options.flip && uniform01(rng) < 0.5;
    // affine_grid maps output coordinates in [-1, 1] to input ones: x_in = sx * x_out + cx.
    float* t = theta.data() + 6 * b;
    t[0] = static_cast<float>((flip ? -1.0 : 1.0) * w / width);
    t[1] = 0;
    t[2] = static_cast<float>((x0 + w / 2) / width * 2 - 1);
    t[3] = 0;
    t[4] = static_cast<float>(h / height);
    t[5] = static_cast<float>((y0 + h / 2) / height * 2 - 1);
    brightness[b] = static_cast<float>(1 + options.brightness * (2 * uniform01(rng) - 1));
    contrast[b] = static_cast<float>(1 + options.contrast * (2 * uniform01(rng) - 1));
  }
  const auto floats = torch::TensorOptions().dtype(torch::kFloat32);
  torch::Tensor affine = torch::from_blob(theta.data(), {batch, 2, 3}, floats).clone().to(images.dtype());
  torch::Tensor grid = F::affine_grid(affine, {batch, images.size(1), size, size}, /*align_corners=*/false);
  torch::Tensor x = F::grid_sample(images, grid,
                                   F::GridSampleFuncOptions()
                                       .mode(torch::kBilinear)
                                       .padding_mode(torch::kBorder)
                                       .align_corners(false));
  x = x * torch::from_blob(brightness.data(), {batch, 1, 1, 1}, floats).clone().to(x.dtype());
  torch::Tensor mean = x.mean({1, 2, 3}, /*keepdim=*/true);
  x = (x - mean) * torch::from_blob(contrast.data(), {batch, 1, 1, 1}, floats).clone().to(x.dtype()) + mean;
  return (x.clamp(0, 1) - options.mean) / options.std;
}

}  // namespace

std::vector<torch::Tensor> multi_crop(const torch::Tensor& images, const MultiCropOptions& options,
                                      std::mt19937_64& rng) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> views;
  for (std::int64_t i = 0; i < options.global_crops; ++i) {
    views.push_back(
        crop_view(images, options.global_size, options.global_min_scale, options.global_max_scale, options, rng));
  }
  for (std::int64_t i = 0; i < options.small_crops; ++i) {
    views.push_back(
        crop_view(images, options.small_size, options.small_min_scale, options.small_max_scale, options, rng));
  }
  return views;
}

}  // namespace dedloc::train::models
