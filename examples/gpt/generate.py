#!/usr/bin/python3
"""Writes text with a GPT that dedloc trained: the model prepare.py saved, with the parameters of a
checkpoint (`dedloc-train --checkpoint-dir DIR` writes DIR/model.safetensors, the parameters under their
model names; `dedloc-avg export` writes the swarm's newest state the same way).

Sampling: one byte at a time from softmax(logits / temperature), the context cut to the model's last
`context` bytes; bytes that are not valid UTF-8 print as U+FFFD.
Run:  /usr/bin/python3 examples/gpt/generate.py --model runs/gpt/gpt.pt --checkpoint CKPT/model.safetensors
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt  # noqa: E402
import safetensors_file  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description="Samples text from a trained GPT (see the file's head).")
    parser.add_argument("--model", required=True, help="the gpt.pt that prepare.py wrote (the model's shape)")
    parser.add_argument("--checkpoint", help="a model.safetensors with trained parameters (default: gpt.pt's own, "
                                             "untrained)")
    parser.add_argument("--prompt", default="The ", help="text to start from (default %(default)r)")
    parser.add_argument("--bytes", type=int, default=300, help="bytes to generate (default %(default)s)")
    parser.add_argument("--temperature", type=float, default=0.8, help="(default %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="sampling seed (default %(default)s)")
    args = parser.parse_args()
    if args.temperature <= 0:
        parser.error("--temperature must be > 0")

    model = gpt.load_eager(args.model)
    if args.checkpoint:
        tensors, _ = safetensors_file.read(args.checkpoint)
        expected = set(model.state_dict())
        if set(tensors) != expected:
            raise SystemExit(f"generate.py: {args.checkpoint} holds {sorted(set(tensors) - expected) or 'no extra'} "
                             f"beyond the model and lacks {sorted(expected - set(tensors)) or 'nothing'}")
        model.load_state_dict(tensors)
    model.eval()
    generator = torch.Generator().manual_seed(args.seed)
    tokens = list(args.prompt.encode())
    if not tokens:
        parser.error("--prompt must not be empty")
    with torch.no_grad():
        for _ in range(args.bytes):
            window = torch.tensor([tokens[-model.context:]])
            logits = model.logits(window)[0, -1] / args.temperature
            tokens.append(int(torch.multinomial(torch.softmax(logits, -1), 1, generator=generator)))
    print(bytes(tokens).decode("utf-8", errors="replace"))


if __name__ == "__main__":
    main()
