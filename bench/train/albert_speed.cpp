// bench/train: training speed of dedloc's ALBERT (lib/dedloc/train/models/albert.hpp) on the CPU or a CUDA
// device, the C++ side of bench/train/pytorch_mlm.py.
//
// The same shape (4 shared layers, H256, E128, 4 heads, 1024, vocab 8000, seq 128), the same batch (16),
// the same threads (2) and the same step as the Python script: random-token batches drawn before each
// step's clock starts (ids uniform in [5, vocab), segment B from the middle on, 15% of the positions
// predicted, random order labels), then zero_grad, AlbertModel::pretraining_losses (MLM + SOP), backward,
// Adam step. After --warmup untimed steps, --steps steps are timed one by one and the median reported.
// The process keeps freed memory mapped (core/memory.hpp), as dedloc-train does.
//
// --device cuda[:N]: the model, the optimizer and each batch live on that device (the batch is drawn on the
// CPU, as before, and copied before the clock starts); the clock is read after torch::cuda::synchronize().
// --precision bf16 (CUDA only): the forward pass (losses included) runs under autocast to bfloat16, as
// torch.autocast("cuda", dtype=torch.bfloat16) does in the Python script; parameters, gradients and Adam
// stay float32, and the cast weights are dropped after every step (at::autocast::clear_cache()).
//
// Output: one JSON line, "impl": "dedloc", the same fields as the Python script's.
// Usage: bench_albert_speed [--steps N] [--warmup N] [--threads N] [--batch N] [--seq N] [--layers N] ...
//                           [--device cpu|cuda[:N]] [--precision fp32|bf16]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/autocast_mode.h>
#include <torch/cuda.h>
#include <torch/version.h>

#include "dedloc/core/memory.hpp"
#include "dedloc/train/models/albert.hpp"

using namespace dedloc::train;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

std::vector<torch::Tensor> random_batch(torch::Generator& g, std::int64_t batch, std::int64_t length,
                                        std::int64_t vocab, double mlm_probability) {
  auto ids = torch::randint(5, vocab, {batch, length}, g, torch::kLong);
  auto types = torch::zeros({batch, length}, torch::kLong);
  types.slice(1, length / 2).fill_(1);
  auto mask = torch::ones({batch, length}, torch::kLong);
  auto predicted = torch::rand({batch, length}, g) < mlm_probability;
  auto labels = torch::where(predicted, ids, torch::full_like(ids, kIgnoreLabel));
  ids = torch::where(predicted, torch::full_like(ids, 4), ids);
  auto order = torch::randint(0, 2, {batch}, g, torch::kLong);
  return {ids, types, mask, labels, order};
}

// CUDA autocast on or off for this thread. libtorch 2.4 made the calls per device type (the old ones were
// deprecated, then removed); Debian's 1.13 has only the CUDA ("gpu") ones.
void set_cuda_autocast(bool enabled, at::ScalarType dtype) {
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
  at::autocast::set_autocast_dtype(at::kCUDA, dtype);
  at::autocast::set_autocast_enabled(at::kCUDA, enabled);
#else
  at::autocast::set_autocast_gpu_dtype(dtype);
  at::autocast::set_enabled(enabled);
#endif
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Training steps per second of dedloc's ALBERT masked-LM (compare: bench/train/pytorch_mlm.py)"};
  AlbertConfig config;  // the tiny shape: H256 E128, 4 layers, 4 heads, 1024, vocab 8000, 128 positions
  std::int64_t batch = 16;
  int threads = 2, warmup = 3, steps = 20;
  double lr = 1e-4;
  std::string device_name = "cpu", precision = "fp32";
  app.add_option("--layers", config.num_layers)->check(CLI::PositiveNumber);
  app.add_option("--hidden", config.hidden_size)->check(CLI::PositiveNumber);
  app.add_option("--embedding", config.embedding_size)->check(CLI::PositiveNumber);
  app.add_option("--heads", config.num_heads)->check(CLI::PositiveNumber);
  app.add_option("--intermediate", config.intermediate_size)->check(CLI::PositiveNumber);
  app.add_option("--vocab", config.vocab_size)->check(CLI::PositiveNumber);
  app.add_option("--seq", config.max_length, "sequence length (all positions real)")->check(CLI::PositiveNumber);
  app.add_option("--batch", batch)->check(CLI::PositiveNumber);
  app.add_option("--threads", threads, "torch intra-op threads")->check(CLI::PositiveNumber);
  app.add_option("--warmup", warmup, "untimed steps first")->check(CLI::NonNegativeNumber);
  app.add_option("--steps", steps, "timed steps; the median is reported")->check(CLI::PositiveNumber);
  app.add_option("--lr", lr, "Adam learning rate");
  app.add_option("--device", device_name, "cpu, cuda or cuda:N")->capture_default_str();
  app.add_option("--precision", precision, "fp32, or bf16: the forward pass under CUDA autocast to bfloat16")
      ->check(CLI::IsMember({"fp32", "bf16"}))
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (auto status = validate_albert_config(config); !status) {
    std::fprintf(stderr, "bench_albert_speed: %s\n", status.to_string().c_str());
    return 2;
  }
  std::optional<torch::Device> parsed;
  try {
    parsed.emplace(device_name);
  } catch (const std::exception&) {
    std::fprintf(stderr, "bench_albert_speed: --device %s: expected cpu, cuda or cuda:N\n", device_name.c_str());
    return 2;
  }
  const torch::Device device = *parsed;
  if (device.is_cuda() && !torch::cuda::is_available()) {
    std::fprintf(stderr, "bench_albert_speed: --device %s: this libtorch build or machine has no CUDA device\n",
                 device_name.c_str());
    return 2;
  }
  if (!device.is_cpu() && !device.is_cuda()) {
    std::fprintf(stderr, "bench_albert_speed: --device %s: expected cpu, cuda or cuda:N\n", device_name.c_str());
    return 2;
  }
  const bool bf16 = precision == "bf16";
  if (bf16 && !device.is_cuda()) {
    std::fprintf(stderr, "bench_albert_speed: --precision bf16 needs --device cuda\n");
    return 2;
  }

  torch::set_num_threads(threads);
  dedloc::keep_freed_memory();  // as dedloc-train does (core/memory.hpp)
  torch::manual_seed(0);
  auto g = at::make_generator<at::CPUGeneratorImpl>(1);
  AlbertModel model(config, 0);
  model->to(device);
  model->train();
  // Built after the move, so that Adam's statistics live on the device too.
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(lr));
  const auto sync = [&] {
    if (device.is_cuda()) torch::cuda::synchronize(device.has_index() ? device.index() : -1);
  };
  std::vector<double> times;
  double loss = 0;
  for (int step = 0; step < warmup + steps; ++step) {
    auto t = random_batch(g, batch, config.max_length, config.vocab_size, 0.15);
    if (!device.is_cpu()) {
      for (auto& x : t) x = x.to(device);
    }
    sync();
    auto start = std::chrono::steady_clock::now();
    optimizer.zero_grad();
    if (bf16) set_cuda_autocast(true, at::kBFloat16);
    auto losses = model->pretraining_losses(t[0], t[1], t[2], t[3], t[4]);
    if (bf16) {
      set_cuda_autocast(false, at::kBFloat16);
      at::autocast::clear_cache();
    }
    losses.total.backward();
    optimizer.step();
    loss = losses.total.item<double>();
    sync();
    auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (step >= warmup) times.push_back(seconds);
  }
  const double step_s = median(times);
  nlohmann::json out = {{"impl", "dedloc"},
                        {"torch", TORCH_VERSION},
                        {"device", device.str()},
                        {"precision", precision},
                        {"threads", threads},
                        {"layers", config.num_layers},
                        {"hidden", config.hidden_size},
                        {"embedding", config.embedding_size},
                        {"heads", config.num_heads},
                        {"intermediate", config.intermediate_size},
                        {"vocab", config.vocab_size},
                        {"seq", config.max_length},
                        {"batch", batch},
                        {"parameters", albert_parameter_count(config)},
                        {"steps", steps},
                        {"median_step_s", std::round(step_s * 1e5) / 1e5},
                        {"samples_per_s", std::round(static_cast<double>(batch) / step_s * 100) / 100},
                        {"final_loss", std::round(loss * 1e4) / 1e4}};
  std::printf("%s\n", out.dump().c_str());
  return 0;
}
