#!/usr/bin/python3
"""Checks the GPT example end to end in plain PyTorch, before dedloc is involved:

1. prepare.py runs into a temporary folder (or --out, a folder it already wrote with default sizes);
2. a micro-batch is read back from the first shard with safetensors_file.py's reader and compared with the
   text it was cut from;
3. the scripted model (torch.jit.load of OUT/gpt.pt) and the eager one (gpt.build with the same seed) give
   the same loss, the same gradients, and the same loss again after one AdamW step each;
4. 50 AdamW steps on the shards make the loss fall.

Prints one line per check and exits 1 at the first that fails (77, skipped, where python has no torch).
Run:  /usr/bin/python3 examples/gpt/check.py [--steps 50] [--threads 2]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

try:
    import torch
except ImportError:
    print("SKIPPED: this python has no torch (use Debian's /usr/bin/python3 with python3-torch)")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gpt  # noqa: E402
import prepare  # noqa: E402
import safetensors_file  # noqa: E402


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def training_step(model, batch, lr):
    """One AdamW step; returns (loss before it, gradients by name, loss after it on the same batch)."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    loss = model(batch)
    loss.backward()
    grads = {name: p.grad.clone() for name, p in model.named_parameters()}
    optimizer.step()
    with torch.no_grad():
        after = model(batch)
    return loss.item(), grads, after.item()


def main():
    parser = argparse.ArgumentParser(description="Checks examples/gpt in plain PyTorch (see the file's head).")
    parser.add_argument("--out", help="a folder prepare.py wrote with its default model sizes and seed "
                                      "(default: run prepare.py into a temporary folder)")
    parser.add_argument("--steps", type=int, default=50, help="AdamW steps of the training check (default %(default)s)")
    parser.add_argument("--batch", type=int, default=16, help="samples per step (default %(default)s)")
    parser.add_argument("--lr", type=float, default=3e-3, help="AdamW learning rate (default %(default)s)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default %(default)s)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    temporary = None
    out = args.out
    if out is None:
        temporary = tempfile.TemporaryDirectory(prefix="gpt-check-")
        out = temporary.name
        subprocess.run([sys.executable, os.path.join(HERE, "prepare.py"), "--out", out, "--max-samples", "4096",
                        "--samples-per-shard", "1024"], check=True, stdout=subprocess.DEVNULL)

    # 2. The shard holds the text, cut as prepare.py says.
    shard_path = os.path.join(out, "shards", "tokens-00000.safetensors")
    tensors, metadata = safetensors_file.read(shard_path)
    tokens = tensors["tokens"]
    config = gpt.GPTConfig()
    if tokens.dtype != torch.int64 or tokens.dim() != 2 or tokens.size(1) != config.context + 1:
        fail(f"{shard_path}: tokens is {tokens.dtype} {list(tokens.shape)}, expected int64 [N, {config.context + 1}]")
    if not torch.equal(tokens[1:, 0], tokens[:-1, -1]):
        fail("consecutive samples do not overlap by one byte")
    text, _ = prepare.read_text(json.loads(metadata["source"]))
    expected = torch.tensor(list(text[:tokens.size(0) * config.context + 1]), dtype=torch.int64)
    if not torch.equal(tokens[:, :-1].reshape(-1), expected[:-1]):
        fail("the shard's tokens are not the text's bytes")
    print(f"ok: {shard_path}: {tokens.size(0)} samples of {tokens.size(1)} tokens, the text's bytes in order")

    # 3. Scripted and eager agree: loss, gradients, and the loss after one step.
    batch = {"tokens": tokens[:args.batch]}
    eager = gpt.build(config, seed=1)
    scripted = torch.jit.load(os.path.join(out, "gpt.pt"))
    names = [name for name, _ in eager.named_parameters()]
    if [name for name, _ in scripted.named_parameters()] != names:
        fail("the scripted model's parameters differ in name or order from the eager model's")
    for (name, a), (_, b) in zip(eager.named_parameters(), scripted.named_parameters()):
        if not torch.equal(a, b):
            fail(f"initial parameter {name} differs between gpt.pt and gpt.build(seed=1)")
    loss_e, grads_e, after_e = training_step(eager, batch, args.lr)
    loss_s, grads_s, after_s = training_step(scripted, batch, args.lr)
    grad_diff = max((grads_e[n] - grads_s[n]).abs().max().item() for n in names)
    print(f"ok? eager loss {loss_e:.7f}, scripted {loss_s:.7f}; after one AdamW step {after_e:.7f} and "
          f"{after_s:.7f}; largest gradient difference {grad_diff:.3g}")
    if abs(loss_e - loss_s) > 1e-6 or abs(after_e - after_s) > 1e-5 or grad_diff > 1e-6:
        fail("the scripted model does not compute what the eager one does")
    print(f"ok: {len(names)} parameter tensors, {gpt.parameter_count(eager):,} parameters, the same in both")

    # 4. The loss falls in plain PyTorch (the scripted model, as dedloc will run it).
    model = torch.jit.load(os.path.join(out, "gpt.pt"))
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    generator = torch.Generator().manual_seed(0)
    losses = []
    begin = time.monotonic()
    for _ in range(args.steps):
        rows = torch.randint(0, tokens.size(0), (args.batch,), generator=generator)
        loss = model({"tokens": tokens[rows]})
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    window = max(1, args.steps // 10)
    first, last = sum(losses[:window]) / window, sum(losses[-window:]) / window
    print(f"ok? {args.steps} AdamW steps (lr {args.lr}, batch {args.batch}) in {time.monotonic() - begin:.1f} s: "
          f"loss {losses[0]:.3f} -> {losses[-1]:.3f} (mean of the first {window}: {first:.3f}, of the last: {last:.3f})")
    if not last < first - 0.5:
        fail("the loss did not fall by 0.5 nats")
    print("ok: the loss falls")


if __name__ == "__main__":
    main()
