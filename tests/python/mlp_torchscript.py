#!/usr/bin/python3
"""Writes dedloc's built-in MLP task as a TorchScript model, for tests of the torchscript task against it.

The built-in task (lib/dedloc/train/models/mlp_task.cpp) is a torch::nn::Sequential of `layers` times
[Linear(width, hidden), Tanh] then Linear(width, outputs), trained on mse_loss(model(inputs), targets).
This script builds the same Sequential in Python -- same modules in the same order, so the same parameter
names ("0.weight", "0.bias", "2.weight", ...) in the same order, layer by layer, weight then bias -- with a
forward that takes dedloc's batch dict:

    forward(batch) = mse_loss(model(batch["inputs"]), batch["targets"])

and saves torch.jit.script of it to --out. Its initial parameters are drawn after torch.manual_seed(--seed)
with torch's default Linear initialization, in construction order, as the C++ task draws them after
torch::manual_seed(recipe seed): both use the one CPU generator and the same draws (kaiming_uniform_ with
a = sqrt(5) for each weight, then uniform(±1/sqrt(fan_in)) for its bias), so --seed S gives the parameters
of a recipe with `seed: S` (recipes/mlp.yaml: 1; checked bitwise against the model.safetensors of a
dedloc-train run of that recipe whose first step had learning rate 0). --weights also writes them as a safetensors
file (F32, under the parameter names) for a test to compare with a dedloc checkpoint's model.safetensors.

--data FILE writes the built-in task's regression data (RegressionData in mlp_task.cpp: inputs, a random
tanh teacher network, targets with noise, all drawn from one CPU generator seeded with --data-seed, the
recipe's data.seed) as a tensors shard: `inputs` [samples, inputs] and `targets` [samples, outputs], F32,
for `data: {kind: tensors, paths: [FILE]}`. The draws are the C++ ones in the same order, and the values are
the built-in task's (checked bitwise against that code compiled with libtorch, for recipes/mlp.yaml's data).

Prints the parameter names and shapes, one per line ("0.weight [64, 16]").
Run with Debian's python3-torch:
  /usr/bin/python3 tests/python/mlp_torchscript.py --inputs 16 --hidden 64 --layers 2 --outputs 1 --out mlp.pt
"""
import argparse
import math
import os
import sys
from typing import Dict

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "gpt"))
import safetensors_file  # noqa: E402


class MlpLoss(nn.Sequential):
    """The built-in MLP's Sequential, whose forward is the task's loss on a batch dict."""

    def forward(self, batch: Dict[str, torch.Tensor]) -> torch.Tensor:
        x = batch["inputs"]
        for layer in self:
            x = layer(x)
        return F.mse_loss(x, batch["targets"])


def build(inputs, hidden, layers, outputs, seed):
    torch.manual_seed(seed)
    modules = []
    width = inputs
    for _ in range(layers):
        modules += [nn.Linear(width, hidden), nn.Tanh()]
        width = hidden
    modules.append(nn.Linear(width, outputs))
    return MlpLoss(*modules)


def regression_data(inputs, outputs, samples, noise, seed, teacher_hidden):
    """RegressionData's tensors (lib/dedloc/train/models/mlp_task.cpp), drawn in its order."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(samples, inputs, generator=generator)
    w1 = torch.randn(inputs, teacher_hidden, generator=generator) / math.sqrt(inputs)
    w2 = torch.randn(teacher_hidden, outputs, generator=generator) / math.sqrt(teacher_hidden)
    y = torch.tanh(x.mm(w1)).mm(w2) + noise * torch.randn(samples, outputs, generator=generator)
    return {"inputs": x, "targets": y}


def main():
    parser = argparse.ArgumentParser(description="Writes the built-in MLP task as TorchScript (see the file's head).")
    parser.add_argument("--inputs", type=int, required=True)
    parser.add_argument("--hidden", type=int, required=True)
    parser.add_argument("--layers", type=int, required=True, help="hidden layers (Linear + Tanh), as model.layers")
    parser.add_argument("--outputs", type=int, required=True)
    parser.add_argument("--seed", type=int, default=1, help="the recipe's seed (default %(default)s)")
    parser.add_argument("--out", required=True, help="the TorchScript file to write")
    parser.add_argument("--weights", help="also write the initial parameters here, as safetensors")
    parser.add_argument("--data", help="also write the regression data here, as a tensors shard")
    parser.add_argument("--samples", type=int, default=8192, help="data.samples (default %(default)s)")
    parser.add_argument("--noise", type=float, default=0.01, help="data.noise (default %(default)s)")
    parser.add_argument("--data-seed", type=int, default=7, help="data.seed (default %(default)s)")
    parser.add_argument("--teacher-hidden", type=int, default=32, help="data.teacher_hidden (default %(default)s)")
    args = parser.parse_args()
    if min(args.inputs, args.hidden, args.outputs) < 1 or args.layers < 0:
        parser.error("inputs, hidden, outputs must be >= 1 and layers >= 0")

    model = build(args.inputs, args.hidden, args.layers, args.outputs, args.seed)
    torch.jit.save(torch.jit.script(model), args.out)
    if args.weights:
        safetensors_file.write(args.weights, {name: p.detach() for name, p in model.named_parameters()})
    if args.data:
        safetensors_file.write(args.data, regression_data(args.inputs, args.outputs, args.samples, args.noise,
                                                          args.data_seed, args.teacher_hidden))
    for name, p in model.named_parameters():
        print(f"{name} {list(p.shape)}")


if __name__ == "__main__":
    main()
