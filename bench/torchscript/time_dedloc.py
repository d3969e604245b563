#!/usr/bin/python3
"""bench/torchscript: the dedloc side of the speed comparison -- one `dedloc-train` peer alone, timed.

Runs `dedloc-train --recipe R --min-peers 1 --max-epochs E --threads T --json` on loopback with nobody else
in the run, so every global step is an "alone" step: ceil(target_batch_size / micro_batch_size)
micro-batches (forward, backward, clipping, accumulation), then the optimizer step -- the same work per
step as python_train.py does. No other peer means no all-reduce, but the collaborative machinery still runs
(progress records, the swarm's ETA, the matchmaking check before a step): that is part of what is measured.

stdout carries one JSON line per global step after the ready line (docs/recipes.md, `--json`:
{"event": "alone", "epoch", "loss", "samples"}); this script stamps each line with the time it arrived
and the process's CPU time then (/proc/PID/stat), so a window is the time between two step lines:
samples/s = the step's samples / the window. The first --warmup steps (the first from the ready line on)
are not timed. The exit line's compute_seconds (time in micro-batches only) gives a second rate,
compute_samples_per_s, over every step.

Output: one JSON line shaped as python_train.py's, with "impl": "dedloc".
  /usr/bin/python3 bench/torchscript/time_dedloc.py --dedloc build/tools/dedloc-train/dedloc-train \
      --recipe runs/gpt/recipe.yaml --threads 1 --epochs 7 --warmup 2
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

TICKS = os.sysconf("SC_CLK_TCK")
STEP_EVENTS = ("alone", "local", "averaged", "skipped")


def cpu_seconds(pid):
    """utime + stime of a live process (every thread), from /proc/PID/stat."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # fields 14 and 15 of stat(5), counted after "comm)"


def main():
    parser = argparse.ArgumentParser(description="Times one dedloc-train peer alone (see the file's head).")
    parser.add_argument("--dedloc", required=True, help="the dedloc-train binary")
    parser.add_argument("--recipe", required=True, help="a recipe.yaml that examples/gpt/prepare.py wrote")
    parser.add_argument("--threads", type=int, default=1, help="dedloc-train --threads (default %(default)s)")
    parser.add_argument("--epochs", type=int, default=7, help="global steps to run, warm-up included (default %(default)s)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps first (default %(default)s)")
    parser.add_argument("--timeout", type=float, default=600, help="seconds before the run is killed (default %(default)s)")
    args = parser.parse_args()
    if args.epochs <= args.warmup:
        parser.error("--epochs must exceed --warmup")

    command = [args.dedloc, "--recipe", args.recipe, "--plaintext", "--listen", "tcp://127.0.0.1:0",
               "--avg-listen", "tcp://127.0.0.1:0", "--min-peers", "1", "--max-epochs", str(args.epochs),
               "--threads", str(args.threads), "--json"]
    with tempfile.TemporaryFile(mode="w+") as log:
        begin = time.monotonic()
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log, text=True)
        stamps, steps, exit_line = [], [], None
        for line in process.stdout:
            now, cpu = time.monotonic(), cpu_seconds(process.pid)
            record = json.loads(line)
            if record.get("ready"):
                stamps.append((now, cpu))
            elif record.get("event") in STEP_EVENTS:
                stamps.append((now, cpu))
                steps.append(record)
            elif record.get("event") == "exit":
                exit_line = record
            if time.monotonic() - begin > args.timeout:
                process.kill()
                break
        code = process.wait()
        if code != 0 or exit_line is None or len(steps) < args.epochs:
            log.seek(0)
            sys.stderr.write(log.read()[-4000:])
            raise SystemExit(f"time_dedloc.py: {' '.join(command)} exited {code} after {len(steps)} step lines")

    windows = [stamps[i + 1][0] - stamps[i][0] for i in range(args.warmup, args.epochs)]
    cpu = stamps[args.epochs][1] - stamps[args.warmup][1]
    samples = [steps[i]["samples"] for i in range(args.warmup, args.epochs)]
    rates = [s / w for s, w in zip(samples, windows)]
    all_samples = sum(step["samples"] for step in steps)
    print(json.dumps({
        "impl": "dedloc", "samples_per_s": statistics.median(rates), "windows_s": windows,
        "samples_per_window": samples, "cpu_s": cpu, "cpu_per_sample_ms": 1000 * cpu / sum(samples),
        "compute_samples_per_s": all_samples / exit_line["compute_seconds"], "threads": args.threads,
        "events": sorted({step["event"] for step in steps}), "loss_first": steps[0]["loss"],
        "loss_last": steps[-1]["loss"], "losses": [round(step["loss"], 4) for step in steps],
    }))


if __name__ == "__main__":
    main()
