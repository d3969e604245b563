#!/usr/bin/python3
"""TorchScript modules for the TorchScript task's tests (tests/torch/torchscript_task_test.cpp): one that
trains, and one for each way a user's module can be wrong, plus tensor shards they train on.

    /usr/bin/python3 tests/python/torchscript_modules.py OUT_DIR

writes OUT_DIR/{regression.pt, wider.pt, normalized.pt, wrong_signature.pt, not_scalar.pt, detached.pt, missing_key.pt,
no_parameters.pt} and OUT_DIR/shards/regression.safetensors (inputs F32 [512, 8], targets F32 [512, 1]).
"""
import json
import os
import struct
import sys
from typing import Dict

import torch


class Regression(torch.nn.Module):
    def __init__(self, hidden: int = 16):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(8, hidden), torch.nn.Tanh(), torch.nn.Linear(hidden, 1))

    def forward(self, batch: Dict[str, torch.Tensor]) -> torch.Tensor:
        return torch.nn.functional.mse_loss(self.net(batch["inputs"]), batch["targets"])


class Normalized(torch.nn.Module):
    """BatchNorm: running statistics are buffers, which travel with the state but are not averaged."""

    def __init__(self):
        super().__init__()
        self.norm = torch.nn.BatchNorm1d(8)
        self.out = torch.nn.Linear(8, 1)

    def forward(self, batch: Dict[str, torch.Tensor]) -> torch.Tensor:
        return torch.nn.functional.mse_loss(self.out(self.norm(batch["inputs"])), batch["targets"])


class WrongSignature(Regression):
    def forward(self, inputs: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        return self.net(inputs).mean()


class NotScalar(Regression):
    def forward(self, batch: Dict[str, torch.Tensor]) -> torch.Tensor:
        return (self.net(batch["inputs"]) - batch["targets"]) ** 2


class Detached(Regression):
    def forward(self, batch: Dict[str, torch.Tensor]) -> torch.Tensor:
        return torch.nn.functional.mse_loss(self.net(batch["inputs"]), batch["targets"]).detach()


class MissingKey(Regression):
    def forward(self, batch: Dict[str, torch.Tensor]) -> torch.Tensor:
        return torch.nn.functional.mse_loss(self.net(batch["features"]), batch["targets"])


class NoParameters(torch.nn.Module):
    def forward(self, batch: Dict[str, torch.Tensor]) -> torch.Tensor:
        return batch["inputs"].mean()


def write_safetensors(path: str, tensors: Dict[str, torch.Tensor]) -> None:
    """The safetensors layout by hand (Debian has no safetensors package): length, JSON header, data."""
    names = {torch.float32: "F32", torch.int64: "I64"}
    header, blobs, offset = {}, [], 0
    for name, tensor in tensors.items():
        data = tensor.contiguous().numpy().tobytes()
        header[name] = {"dtype": names[tensor.dtype], "shape": list(tensor.shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path + ".tmp", "wb") as out:
        out.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
    os.replace(path + ".tmp", path)


def main() -> None:
    out = sys.argv[1]
    os.makedirs(os.path.join(out, "shards"), exist_ok=True)
    torch.manual_seed(5)
    modules = {"regression": Regression(), "wider": Regression(hidden=24), "normalized": Normalized(), "wrong_signature": WrongSignature(),
               "not_scalar": NotScalar(), "detached": Detached(), "missing_key": MissingKey(),
               "no_parameters": NoParameters()}
    for name, module in modules.items():
        torch.jit.save(torch.jit.script(module), os.path.join(out, name + ".pt"))
    generator = torch.Generator().manual_seed(9)
    inputs = torch.randn(512, 8, generator=generator)
    targets = torch.tanh(inputs[:, :2].sum(dim=1, keepdim=True))
    write_safetensors(os.path.join(out, "shards", "regression.safetensors"), {"inputs": inputs, "targets": targets})


if __name__ == "__main__":
    main()
