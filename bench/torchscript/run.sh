#!/usr/bin/env bash
# bench/torchscript: dedloc-train's torchscript task against the same training in PyTorch (Python), on the
# GPT of examples/gpt: one dedloc peer alone (time_dedloc.py) and python_train.py, eager and on the
# scripted file, with the same recipe, shards, micro-batch, threads, optimizer and schedule,
# alternating the sides PAIRS times so that noise from other work on the machine hits them alike. Prints
# the median samples/s of each side over every timed window (one window = one global step), the CPU time per
# sample, the machine's idle share during each side's runs, and dedloc / PyTorch.
#
#   bench/torchscript/run.sh [BUILD_DIR]        (default: build; needs dedloc-train and Debian's python3-torch)
# Environment: PAIRS (3); THREADS (1): torch threads on both sides, and OpenBLAS's (OPENBLAS_NUM_THREADS;
# torch's set_num_threads does not reach Debian's OpenBLAS, which otherwise runs one thread per core on both
# sides); EPOCHS (7) global steps per run of which WARMUP (2) untimed; SIDES ("dedloc pytorch-eager
# pytorch-scripted") what to run; PREPARED a folder examples/gpt/prepare.py wrote (default: one is prepared in a temporary
# folder); OUT a file to keep the JSON lines in.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="${1:-build}"
train="$build/tools/dedloc-train/dedloc-train"
pairs="${PAIRS:-3}"
threads="${THREADS:-1}"
epochs="${EPOCHS:-7}"
warmup="${WARMUP:-2}"
python=/usr/bin/python3
sides="${SIDES:-dedloc pytorch-eager pytorch-scripted}"
[[ " $sides " != *" dedloc "* ]] || [ -x "$train" ] || { echo "run.sh: $train not built (ninja -C $build dedloc-train)" >&2; exit 1; }
"$python" -c "import torch, yaml" 2>/dev/null || { echo "run.sh: $python lacks torch or yaml: apt-get install python3-torch python3-yaml" >&2; exit 1; }
export OPENBLAS_NUM_THREADS="$threads"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
prepared="${PREPARED:-$work/gpt}"
if [ -z "${PREPARED:-}" ]; then
  "$python" "$root/examples/gpt/prepare.py" --out "$prepared" >&2
fi
recipe="$prepared/recipe.yaml"

# shellcheck source=bench/idle_share.sh
source "$here/../idle_share.sh"
print_idle_share_before

# Runs one side and appends its JSON line, with the machine's idle share over the run added, to $out.
out="$work/runs.jsonl"
run_side() {
  local side="$1" before line
  before="$(cpu_sample)"
  case "$side" in
    dedloc) line="$("$python" "$here/time_dedloc.py" --dedloc "$train" --recipe "$recipe" --threads "$threads" \
                     --epochs "$epochs" --warmup "$warmup")" ;;
    pytorch-eager) line="$("$python" "$here/python_train.py" --recipe "$recipe" --threads "$threads" \
                            --warmup "$warmup" --windows $((epochs - warmup)))" ;;
    pytorch-scripted) line="$("$python" "$here/python_train.py" --recipe "$recipe" --threads "$threads" \
                               --warmup "$warmup" --windows $((epochs - warmup)) --scripted)" ;;
    *) echo "run.sh: unknown side '$side' in SIDES (dedloc, pytorch-eager, pytorch-scripted)" >&2; exit 1 ;;
  esac
  echo "${line%\}}, \"idle_pct\": $(idle_share "$before" "$(cpu_sample)")}" >> "$out"
  echo "run.sh: $side: $(echo "$line" | sed -nE 's/.*"samples_per_s": *([0-9.]+).*/\1/p') samples/s" >&2
}

for i in $(seq "$pairs"); do
  # Rotate which side goes first.
  read -ra side_list <<< "$sides"
  order="$(printf '%s\n' "${side_list[@]}" | awk -v k="$i" '{ a[NR] = $0 } END { for (j = 0; j < NR; j++) print a[(j + k - 1) % NR + 1] }')"
  for side in $order; do
    echo "run.sh: pair $i/$pairs: $side" >&2
    run_side "$side"
  done
done
[ -n "${OUT:-}" ] && cp "$out" "$OUT"

"$python" - "$out" "$threads" <<'EOF'
import json, statistics, sys
runs = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
sides = {}
for r in runs:
    s = sides.setdefault(r["impl"], {"rates": [], "cpu": [], "idle": [], "loss": []})
    s["rates"] += [n / w for n, w in zip(r["samples_per_window"], r["windows_s"])]
    s["cpu"].append(r["cpu_per_sample_ms"])
    s["idle"].append(r["idle_pct"])
    s["loss"].append(r["loss_last"])
print()
print(f"| side | samples/s (median window) | CPU ms / sample | idle % during runs | last loss | threads {sys.argv[2]} |")
print("|---|---:|---:|---:|---:|---|")
medians = {}
for impl, s in sides.items():
    medians[impl] = statistics.median(s["rates"])
    print(f"| {impl} | {medians[impl]:.1f} | {statistics.median(s['cpu']):.2f} | "
          f"{', '.join(str(i) for i in s['idle'])} | {statistics.median(s['loss']):.3f} | {len(s['rates'])} windows |")
if "dedloc" in medians:
    for impl in medians:
        if impl != "dedloc":
            print(f"dedloc / {impl}: {medians['dedloc'] / medians[impl]:.2f}x samples/s")
EOF
