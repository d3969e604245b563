"""A recipe's optimizer and learning-rate schedule in PyTorch, transcribed from dedloc's C++ so that the
Python side of bench/torchscript does the same work per step as dedloc-train.

Optimizers: lib/dedloc/train/optimizer.hpp (update rules) and optimizer.cpp (the tensor operations, copied
here one for one, in-place, with LAMB's two norms read back per parameter as the C++ does). sgd and lamb;
lars is not transcribed (the GPT recipe does not use it). Schedules: lib/dedloc/train/schedule.hpp.
Which parameters take weight decay: the torchscript task's `model.no_decay` substrings, else
Task::decays's rule (lib/dedloc/train/task.cpp: not biases, not names holding "norm" or "LayerNorm").
tests/torch/reference/optimizers.py holds float64 transcriptions checked against torch.optim.
"""
import math

import torch

OPTIMIZER_DEFAULTS = {  # OptimizerOptions in lib/dedloc/train/optimizer.hpp
    "kind": "sgd", "momentum": 0.0, "nesterov": False, "weight_decay": 0.0, "beta1": 0.9, "beta2": 0.999,
    "epsilon": 1e-6, "bias_correction": True, "max_trust_ratio": 10.0, "lamb_exclude_no_decay": False,
}


def decay_rule(no_decay):
    """name -> whether weight decay applies."""
    if no_decay is not None:
        return lambda name: not any(part in name for part in no_decay)
    return lambda name: not name.endswith("bias") and "norm" not in name and "LayerNorm" not in name


class RecipeOptimizer:
    """step(lr) with the parameters' current .grad, as dedloc's Optimizer::step."""

    def __init__(self, section, named_parameters, decays):
        unknown = set(section) - set(OPTIMIZER_DEFAULTS)
        if unknown:
            raise ValueError(f"optimizer: keys not transcribed here: {sorted(unknown)}")
        self.o = dict(OPTIMIZER_DEFAULTS, **section)
        if self.o["kind"] not in ("sgd", "lamb"):
            raise ValueError(f"optimizer.kind {self.o['kind']!r}: only sgd and lamb are transcribed here")
        self.slots = []
        largest = max(p.numel() for _, p in named_parameters)
        scratch = torch.empty(largest, dtype=named_parameters[0][1].dtype)
        for name, p in named_parameters:
            slot = {"param": p, "decay": self.o["weight_decay"] if decays(name) else 0.0,
                    "adapts": decays(name) or not self.o["lamb_exclude_no_decay"],
                    "scratch": scratch[:p.numel()].view(p.shape),
                    "norms": torch.zeros(2, dtype=p.dtype), "norms_host": torch.zeros(2, dtype=torch.float64)}
            if self.o["kind"] == "lamb":
                slot["m"], slot["v"] = torch.zeros_like(p), torch.zeros_like(p)
            elif self.o["momentum"] > 0:
                slot["m"] = torch.zeros_like(p)
            self.slots.append(slot)
        self.t = 0

    @torch.no_grad()
    def step(self, lr):
        self.t += 1
        for slot in self.slots:
            if slot["param"].grad is None:
                continue
            (self._lamb if self.o["kind"] == "lamb" else self._sgd)(slot, slot["param"].grad, lr, float(self.t))

    def _sgd(self, slot, grad, lr, _t):
        o, p = self.o, slot["param"]
        d = grad
        if slot["decay"] != 0:
            torch.add(grad, p, alpha=slot["decay"], out=slot["scratch"])
            d = slot["scratch"]
        if o["momentum"] > 0:
            slot["m"].mul_(o["momentum"]).add_(d)
            if o["nesterov"]:
                torch.add(d, slot["m"], alpha=o["momentum"], out=slot["scratch"])
                d = slot["scratch"]
            else:
                d = slot["m"]
        p.add_(d, alpha=-lr)

    def _lamb(self, slot, grad, lr, t):
        o, p, m, v, u = self.o, slot["param"], slot["m"], slot["v"], slot["scratch"]
        m.mul_(o["beta1"]).add_(grad, alpha=1 - o["beta1"])
        v.mul_(o["beta2"]).addcmul_(grad, grad, value=1 - o["beta2"])
        torch.sqrt(v, out=u)
        if o["bias_correction"]:
            u.div_(math.sqrt(1 - o["beta2"] ** t))
        u.add_(o["epsilon"])
        torch.div(m, u, out=u)
        if o["bias_correction"]:
            u.div_(1 - o["beta1"] ** t)
        if slot["decay"] != 0:
            u.add_(p, alpha=slot["decay"])
        ratio = 1.0
        if slot["adapts"]:
            torch.linalg.vector_norm(p, out=slot["norms"][0])
            torch.linalg.vector_norm(u, out=slot["norms"][1])
            slot["norms_host"].copy_(slot["norms"])
            w_norm, u_norm = slot["norms_host"].tolist()
            if w_norm > 0 and u_norm > 0:
                ratio = w_norm / u_norm
            if o["max_trust_ratio"] > 0:
                ratio = min(ratio, o["max_trust_ratio"])
        p.add_(u, alpha=-lr * ratio)


def learning_rate(schedule, epoch):
    """The rate for the step taken at `epoch` (steps already taken): lib/dedloc/train/schedule.hpp."""
    kind = schedule.get("kind", "constant")
    lr = float(schedule.get("lr", 0.001))
    warmup = int(schedule.get("warmup_epochs", 0))
    total = int(schedule.get("total_epochs", 0))
    final = float(schedule.get("final_lr", 0.0))
    if epoch < warmup:
        return lr * epoch / warmup
    if kind == "constant":
        return lr
    if epoch >= total:
        return final
    if kind == "linear":
        return final + (lr - final) * (total - epoch) / (total - warmup)
    if kind == "cosine":
        return final + (lr - final) * 0.5 * (1 + math.cos(math.pi * (epoch - warmup) / (total - warmup)))
    raise ValueError(f"schedule.kind {kind!r}: one of constant, linear, cosine")
