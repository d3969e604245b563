// Your own PyTorch model, trained by dedloc without writing C++: a module saved with torch.jit.save whose
// forward takes a batch (a dict of named tensors) and returns the mean loss, trained on tensor shards
// (data/tensor_shards.hpp). examples/gpt/ is a worked example; docs/recipes.md "Bring your own model".
//
//   class Model(torch.nn.Module):
//       def forward(self, batch: Dict[str, torch.Tensor]) -> torch.Tensor:
//           ...                                   # batch["tokens"]: [B, ...] rows of the shards
//           return loss                           # the mean over the batch, a scalar
//   torch.jit.save(torch.jit.script(Model()), "model.pt")
//
// The module's parameters (named_parameters, recursively) are what the swarm averages and steps; its
// buffers travel with state downloads and checkpoints. Every peer loads the same file, so every peer starts
// from the same parameters (init_seed plays no part). The batch dict holds one entry per shard tensor, named
// as in the files, [micro_batch_size, ...] in the stored dtype, on the task's device.
//
// Recipe sections:
//   model:  kind: torchscript   path: FILE (relative: to the recipe's directory)
//           no_decay: [name substrings]  parameters whose name contains one skip weight decay (default:
//                                         biases and normalization weights, Task::decays)
//   data:   kind: tensors       paths: [files or directories of *.safetensors] (relative: to the recipe's)
//
// Everything is checked when the task is built, each failure one line naming the file: a file that is not
// TorchScript, a forward whose signature is not forward(self, batch: Dict[str, Tensor]) -> Tensor, a
// forward that fails on a real batch or returns something other than a scalar loss that autograd can
// follow, a module without trainable parameters. (A parameter set that differs from the swarm's is refused
// when the peer joins: the run's schema hash, train/swarm_presence.hpp.)
#pragma once

#include <string>
#include <vector>

#include "dedloc/train/task.hpp"

namespace dedloc::train {

inline constexpr std::string_view kTorchScriptTaskKind = "torchscript";

struct TorchScriptOptions {
  std::string path;                         // the module, resolved against the recipe's directory
  std::vector<std::string> data_paths;      // the shards, likewise
  std::optional<std::vector<std::string>> no_decay;  // name substrings; absent: Task::decays's rule
};

Result<TorchScriptOptions> read_torchscript_options(ConfigReader model, ConfigReader data);
Result<std::unique_ptr<Task>> make_torchscript_task(const TorchScriptOptions& options, const TaskContext& context);

}  // namespace dedloc::train
