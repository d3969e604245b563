#!/usr/bin/python3
"""Prepares a byte-level GPT for dedloc-train: the scripted model, the token shards and the recipe.

Writes into OUT:
  gpt.pt                         the model of gpt.py with its initial parameters (drawn from --seed), saved
                                 by torch.jit.save(torch.jit.script(model)): dedloc's `model: {kind:
                                 torchscript, path: gpt.pt}` loads it with libtorch, no Python needed
                                 (gpt.load_eager rebuilds the eager model from it)
  shards/tokens-00000.safetensors, ...
                                 the text cut into samples of context+1 bytes, one tensor `tokens` (int64,
                                 [N, context+1]) per shard, --samples-per-shard rows each (the last fewer):
                                 `data: {kind: tensors, paths: [shards]}`
  recipe.yaml                    a copy of examples/gpt/recipe.yaml, whose relative paths (gpt.pt, shards)
                                 resolve against OUT, so that `dedloc-train --recipe OUT/recipe.yaml` trains it

Samples overlap by one byte (sample i is bytes [i·T, i·T + T]), so every pair of neighbouring bytes in the
text is one prediction of exactly one sample. Files are concatenated as they are, in the order given
(a directory contributes its regular files in name order, as dedloc's text corpus reads one:
lib/dedloc/train/data/text_corpus.hpp); the shards keep that order, and each dedloc peer shuffles the
samples itself.

Run with Debian's python3-torch:  /usr/bin/python3 examples/gpt/prepare.py --out runs/gpt
"""
import argparse
import dataclasses
import json
import os
import shutil
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gpt  # noqa: E402
import safetensors_file  # noqa: E402

FORTUNES = "/usr/share/games/fortunes"


def text_files(path):
    """`path` itself, or a directory's regular files in name order, skipping what is not text: hidden
    files, the fortune indexes (*.dat), the *.u8 links to the text files, symlinks, subdirectories."""
    if not os.path.isdir(path):
        if not os.path.isfile(path):
            raise SystemExit(f"prepare.py: {path}: no such file or directory")
        return [path]
    files = []
    for name in sorted(os.listdir(path)):
        full = os.path.join(path, name)
        if name.startswith(".") or name.endswith((".dat", ".u8")) or os.path.islink(full) or not os.path.isfile(full):
            continue
        files.append(full)
    return files


def read_text(paths):
    """The bytes of every text file under `paths`, concatenated, and how many files they came from. A
    directory's files holding NUL bytes (binary) are skipped; a named file that holds them is an error."""
    chunks = []
    for path in paths:
        named = not os.path.isdir(path)
        found = 0
        for file in text_files(path):
            with open(file, "rb") as f:
                data = f.read()
            if b"\0" in data:
                if named:
                    raise SystemExit(f"prepare.py: {file} holds binary data (NUL bytes), not text")
                continue
            chunks.append(data)
            found += 1
        if found == 0:
            raise SystemExit(f"prepare.py: no text files in {path} (hidden files, *.dat, *.u8, symlinks and "
                             "subdirectories are skipped)")
    return b"".join(chunks), len(chunks)


def cut_samples(text, context):
    """int64 [N, context+1]: N = (len - 1) // context windows, each starting where the last one's inputs end."""
    count = (len(text) - 1) // context
    if count < 1:
        raise SystemExit(f"prepare.py: {len(text)} bytes of text, too few for one sample of {context + 1}")
    data = torch.frombuffer(bytearray(text), dtype=torch.uint8).to(torch.int64)
    return data.unfold(0, context + 1, context)[:count].contiguous()


def write_shards(samples, directory, per_shard, metadata):
    """Writes tokens-00000.safetensors, ... into `directory`, removing shards an earlier run left there
    (dedloc reads every *.safetensors of the folder). Returns the file names."""
    os.makedirs(directory, exist_ok=True)
    for name in os.listdir(directory):
        if name.startswith("tokens-") and name.endswith(".safetensors"):
            os.remove(os.path.join(directory, name))
    names = []
    for index, begin in enumerate(range(0, samples.size(0), per_shard)):
        name = f"tokens-{index:05d}.safetensors"
        safetensors_file.write(os.path.join(directory, name), {"tokens": samples[begin:begin + per_shard]}, metadata)
        names.append(name)
    return names


def main():
    parser = argparse.ArgumentParser(
        description="Writes OUT/gpt.pt (a scripted byte-level GPT, gpt.py), OUT/shards/*.safetensors (the text "
                    "as int64 samples of context+1 bytes) and OUT/recipe.yaml, so that "
                    "`dedloc-train --recipe OUT/recipe.yaml` trains it (examples/gpt/README.md).")
    parser.add_argument("--out", required=True, help="the folder to write into (created if missing)")
    parser.add_argument("--text", nargs="+", default=[FORTUNES], metavar="PATH",
                        help="text files or folders of them (default: Debian's fortunes, %(default)s)")
    defaults = gpt.GPTConfig()
    parser.add_argument("--context", type=int, default=defaults.context, help="T: input bytes per sample (default %(default)s)")
    parser.add_argument("--width", type=int, default=defaults.width, help="residual stream width (default %(default)s)")
    parser.add_argument("--layers", type=int, default=defaults.layers, help="transformer blocks (default %(default)s)")
    parser.add_argument("--heads", type=int, default=defaults.heads, help="attention heads; divide --width (default %(default)s)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the initial parameters (default %(default)s)")
    parser.add_argument("--samples-per-shard", type=int, default=8192, help="rows per shard file (default %(default)s)")
    parser.add_argument("--max-samples", type=int, default=0, help="keep only the first N samples (default: all)")
    parser.add_argument("--recipe", default=os.path.join(HERE, "recipe.yaml"),
                        help="the recipe template copied to OUT/recipe.yaml (default: examples/gpt/recipe.yaml)")
    args = parser.parse_args()
    if args.samples_per_shard < 1 or args.max_samples < 0:
        parser.error("--samples-per-shard must be >= 1 and --max-samples >= 0")

    config = gpt.GPTConfig(context=args.context, width=args.width, layers=args.layers, heads=args.heads)
    try:
        model = gpt.build(config, args.seed)
    except ValueError as e:
        parser.error(str(e))
    # The text first: a missing or binary file stops the run before anything is written.
    text, files = read_text(args.text)
    samples = cut_samples(text, args.context)
    if args.max_samples:
        samples = samples[:args.max_samples]
    os.makedirs(args.out, exist_ok=True)
    model_path = os.path.join(args.out, "gpt.pt")
    # The shape rides along as an extra file, so that Python tools can rebuild the eager model
    # (bench/torchscript/python_train.py); libtorch ignores it.
    torch.jit.save(torch.jit.script(model), model_path,
                   _extra_files={gpt.CONFIG_FILE: json.dumps(dataclasses.asdict(config))})

    metadata = {"context": str(args.context), "source": json.dumps([os.path.abspath(p) for p in args.text])}
    shards = write_shards(samples, os.path.join(args.out, "shards"), args.samples_per_shard, metadata)
    recipe_path = os.path.join(args.out, "recipe.yaml")
    shutil.copyfile(args.recipe, recipe_path)

    print(f"model:   {model_path}: {gpt.parameter_count(model):,} parameters "
          f"(context {config.context}, width {config.width}, {config.layers} layers, {config.heads} heads, "
          f"seed {args.seed})")
    print(f"data:    {len(text):,} bytes from {files} files -> {samples.size(0):,} samples of {args.context + 1} "
          f"tokens in {len(shards)} shards: {os.path.join(args.out, 'shards', shards[0])} ...")
    print(f"recipe:  {recipe_path}")
    print(f"train:   dedloc-train --recipe {recipe_path} --listen tcp://0.0.0.0:31400")


if __name__ == "__main__":
    main()
