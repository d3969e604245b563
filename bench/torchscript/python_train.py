#!/usr/bin/python3
"""bench/torchscript: the PyTorch side of the speed comparison with dedloc-train's torchscript task.

Trains what a recipe prepared by examples/gpt/prepare.py names -- the GPT of examples/gpt/gpt.py, eager
(rebuilt from the saved file's config and parameters) or, with --scripted, the saved file itself through
torch.jit.load -- on the same shards, with the same micro-batch size, per-micro-batch gradient clipping,
optimizer and schedule as dedloc-train does alone (recipe_optim.py transcribes dedloc's LAMB and SGD):

  per global step: ceil(target_batch_size / micro_batch_size) micro-batches, each forward, backward,
  clip_grad_norm_(max_grad_norm) and added to an accumulator (lib/dedloc/train/gradient_buffer.cpp), then
  the accumulated mean becomes .grad and the optimizer steps at the schedule's rate for the epoch.

One timed window is one global step, as one step line of `dedloc-train --json` is on the other side
(time_dedloc.py), so the two report samples/s over the same unit of work. --accumulate 1 steps after every
micro-batch instead. After --warmup untimed steps, --windows steps are timed; the median window gives
samples/s. Samples are drawn without replacement in a shuffled order per pass (--data-seed), as a dedloc
peer draws them.

Output: one JSON line {"impl": "pytorch-eager" | "pytorch-scripted", "samples_per_s": median, "windows_s":
[...], "cpu_s": process CPU time over the timed windows, "cpu_per_sample_ms", "losses": the mean micro-batch loss of every step, warm-up included, ...}.
Run with Debian's python3-torch:
  /usr/bin/python3 bench/torchscript/python_train.py --recipe runs/gpt/recipe.yaml --threads 2
"""
import argparse
import glob
import json
import math
import os
import statistics
import sys
import time

import torch
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples", "gpt"))
import gpt  # noqa: E402
import recipe_optim  # noqa: E402
import safetensors_file  # noqa: E402


def shard_files(paths, base):
    """The files a `data: {kind: tensors, paths: [...]}` section names: files as they are, folders as their
    *.safetensors in name order; relative paths against the recipe's folder."""
    files = []
    for path in paths:
        full = path if os.path.isabs(path) else os.path.join(base, path)
        if os.path.isdir(full):
            found = sorted(glob.glob(os.path.join(full, "*.safetensors")))
            if not found:
                raise SystemExit(f"python_train.py: no *.safetensors in {full}")
            files += found
        else:
            files.append(full)
    return files


def load_samples(files):
    """dict name -> every file's rows of that tensor, concatenated."""
    parts = {}
    for file in files:
        tensors, _ = safetensors_file.read(file)
        counts = {t.size(0) for t in tensors.values()}
        if len(counts) != 1:
            raise SystemExit(f"python_train.py: {file}: tensors of different sample counts {sorted(counts)}")
        if parts and set(tensors) != set(parts):
            raise SystemExit(f"python_train.py: {file} holds {sorted(tensors)}, earlier files {sorted(parts)}")
        for name, t in tensors.items():
            parts.setdefault(name, []).append(t)
    return {name: torch.cat(ts) for name, ts in parts.items()}


class Sampler:
    """Micro-batches of rows without replacement, a fresh permutation per pass over the data."""

    def __init__(self, samples, batch, seed):
        self.samples, self.batch = samples, batch
        self.count = next(iter(samples.values())).size(0)
        self.generator = torch.Generator().manual_seed(seed)
        self.order, self.position = torch.randperm(self.count, generator=self.generator), 0

    def next(self):
        parts, taken = [], 0
        while taken < self.batch:
            if self.position == self.count:
                self.order, self.position = torch.randperm(self.count, generator=self.generator), 0
            take = min(self.batch - taken, self.count - self.position)
            parts.append(self.order[self.position:self.position + take])
            self.position += take
            taken += take
        index = torch.cat(parts)
        return {name: t.index_select(0, index) for name, t in self.samples.items()}


def main():
    parser = argparse.ArgumentParser(description="Times the recipe's training step in PyTorch (see the file's head).")
    parser.add_argument("--recipe", required=True, help="a recipe.yaml that examples/gpt/prepare.py wrote")
    parser.add_argument("--scripted", action="store_true", help="train the saved TorchScript file, not the eager model")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (default %(default)s)")
    parser.add_argument("--batch-size", type=int, help="samples per micro-batch (default: the recipe's)")
    parser.add_argument("--accumulate", type=int, help="micro-batches per optimizer step "
                                                       "(default: ceil(target_batch_size / micro_batch_size))")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps first (default %(default)s)")
    parser.add_argument("--windows", type=int, default=5, help="timed steps (default %(default)s)")
    parser.add_argument("--data-seed", type=int, default=0, help="the order samples are drawn in (default %(default)s)")
    args = parser.parse_args()
    if args.threads < 1 or args.windows < 1 or args.warmup < 0:
        parser.error("--threads and --windows must be >= 1, --warmup >= 0")
    torch.set_num_threads(args.threads)

    with open(args.recipe) as f:
        recipe = yaml.safe_load(f)
    base = os.path.dirname(os.path.abspath(args.recipe))
    model_section, training = recipe["model"], recipe["training"]
    if model_section.get("kind") != "torchscript" or recipe["data"].get("kind") != "tensors":
        raise SystemExit(f"python_train.py: {args.recipe} is not a torchscript model on tensors data")
    model_path = model_section["path"] if os.path.isabs(model_section["path"]) else os.path.join(base, model_section["path"])
    model = torch.jit.load(model_path) if args.scripted else gpt.load_eager(model_path)
    model.train()
    named = list(model.named_parameters())
    parameters = [p for _, p in named]
    optimizer = recipe_optim.RecipeOptimizer(recipe.get("optimizer", {}), named,
                                             recipe_optim.decay_rule(model_section.get("no_decay")))
    schedule = recipe.get("schedule", {})
    micro = args.batch_size or int(training.get("micro_batch_size", 32))
    accumulate = args.accumulate or math.ceil(int(training["target_batch_size"]) / micro)
    max_grad_norm = float(training.get("max_grad_norm", 0))
    sampler = Sampler(load_samples(shard_files(recipe["data"]["paths"], base)), micro, args.data_seed)
    accumulators = [torch.zeros_like(p) for p in parameters]

    windows, losses = [], []
    cpu = 0.0
    for epoch in range(args.warmup + args.windows):
        wall_begin, cpu_begin = time.perf_counter(), time.process_time()
        loss_sum = 0.0
        for _ in range(accumulate):
            loss = model(sampler.next())
            loss_sum += loss.item()
            loss.backward()
            with torch.no_grad():
                if max_grad_norm > 0:
                    torch.nn.utils.clip_grad_norm_(parameters, max_grad_norm)
                for p, a in zip(parameters, accumulators):
                    if p.grad is not None:
                        a.add_(p.grad)
                        p.grad.zero_()
        with torch.no_grad():
            for p, a in zip(parameters, accumulators):
                a.div_(accumulate)
                p.grad.copy_(a)
                a.zero_()
        optimizer.step(recipe_optim.learning_rate(schedule, epoch))
        for p in parameters:
            p.grad.zero_()
        if epoch >= args.warmup:
            windows.append(time.perf_counter() - wall_begin)
            cpu += time.process_time() - cpu_begin
        losses.append(loss_sum / accumulate)

    samples = micro * accumulate
    median = statistics.median(windows)
    print(json.dumps({
        "impl": "pytorch-scripted" if args.scripted else "pytorch-eager",
        "samples_per_s": samples / median, "windows_s": windows, "samples_per_window": [samples] * len(windows),
        "cpu_s": cpu, "cpu_per_sample_ms": 1000 * cpu / (samples * len(windows)),
        "threads": args.threads, "micro_batch_size": micro, "accumulate": accumulate,
        "parameters": sum(p.numel() for p in parameters), "loss_first": losses[0], "loss_last": losses[-1],
        "losses": [round(x, 4) for x in losses],
        "torch": torch.__version__,
    }))


if __name__ == "__main__":
    main()
