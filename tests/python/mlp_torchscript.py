#!/usr/bin/python3
"""The built-in MLP task's network (lib/dedloc/train/models/mlp_task.cpp) written in PyTorch and saved as
TorchScript, for the equivalence test (tests/torch/train_equivalence_test.cpp): Linear, Tanh, ..., Linear,
trained on the batch {"inputs", "targets"} with the mean squared error, parameters in the built-in task's
order (layer by layer, weight then bias).

    /usr/bin/python3 tests/python/mlp_torchscript.py --inputs 16 --hidden 32 --layers 2 --outputs 1 --out mlp.pt
"""
import argparse
import os
from typing import Dict

import torch


class Mlp(torch.nn.Module):
    def __init__(self, inputs: int, hidden: int, layers: int, outputs: int):
        super().__init__()
        modules = []
        width = inputs
        for _ in range(layers):
            modules += [torch.nn.Linear(width, hidden), torch.nn.Tanh()]
            width = hidden
        modules.append(torch.nn.Linear(width, outputs))
        self.net = torch.nn.Sequential(*modules)

    def forward(self, batch: Dict[str, torch.Tensor]) -> torch.Tensor:
        return torch.nn.functional.mse_loss(self.net(batch["inputs"]), batch["targets"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--inputs", type=int, default=16)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2, help="hidden layers")
    parser.add_argument("--outputs", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0, help="the initial parameters")
    parser.add_argument("--out", required=True, help="the TorchScript file to write")
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    module = torch.jit.script(Mlp(args.inputs, args.hidden, args.layers, args.outputs))
    torch.jit.save(module, args.out + ".tmp")
    os.replace(args.out + ".tmp", args.out)
    for name, parameter in module.named_parameters():
        print(name, list(parameter.shape))


if __name__ == "__main__":
    main()
