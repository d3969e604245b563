#!/usr/bin/env bash
# Times dedloc's butterfly all-reduce (`dedloc-avg bench`, without compression and with fp16) beside
# torch.distributed's gloo (gloo_bench.py) on the same shapes, alternating them so that noise from other
# work on the machine hits all three alike, then prints a markdown table of the medians and the codec
# throughput table (bench_codecs). dedloc runs with --plaintext, as gloo does not encrypt (what CURVE, the
# tools' default, costs is measured apart: bench/README.md).
#   bench/allreduce/run.sh [BUILD_DIR]      (default: build; needs python3-torch from Debian)
# Environment: ROUNDS (5) timed rounds per run; REPEATS (1) times each (peers, size) trio is run, medians
# are over every round of every repeat; PEERS ("2 4"); SIZES ("64MiB 256MiB"); PART_KIB, WINDOW (dedloc's
# defaults) passed to dedloc-avg; OUT a file to keep the JSON lines in; CODECS=0 skips bench_codecs.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="${1:-build}"
avg="$build/tools/dedloc-avg/dedloc-avg"
codecs="$build/bench/allreduce/bench_codecs"
rounds="${ROUNDS:-5}"
repeats="${REPEATS:-1}"
peers_list="${PEERS:-2 4}"
sizes="${SIZES:-64MiB 256MiB}"
extra=()
[ -n "${PART_KIB:-}" ] && extra+=(--part-kib "$PART_KIB")
[ -n "${WINDOW:-}" ] && extra+=(--window "$WINDOW")
[ -x "$avg" ] || { echo "run.sh: $avg not built (ninja -C $build dedloc-avg bench_codecs)" >&2; exit 1; }
if ! /usr/bin/python3 -c "import torch.distributed as d; assert d.is_available() and d.is_gloo_available()" 2>/dev/null; then
  echo "run.sh: /usr/bin/python3 cannot import torch.distributed with gloo: install Debian's python3-torch" \
       "(apt-get install python3-torch)" >&2
  exit 1
fi

# The benchmarks below need every core, so a busy machine shows in every number.
# shellcheck source=bench/idle_share.sh
source "$here/../idle_share.sh"
print_idle_share_before

out="$(mktemp)"
trap 'rm -f "$out"' EXIT
for peers in $peers_list; do
  for size in $sizes; do
    for repeat in $(seq 1 "$repeats"); do
      echo "run.sh: $peers peers, $size, repeat $repeat/$repeats" >&2
      "$avg" --plaintext bench --peers "$peers" --size "$size" --rounds "$rounds" --codec none "${extra[@]}" --json >> "$out"
      "$avg" --plaintext bench --peers "$peers" --size "$size" --rounds "$rounds" --codec fp16 "${extra[@]}" --json >> "$out"
      /usr/bin/python3 "$here/gloo_bench.py" --peers "$peers" --size "$size" --rounds "$rounds" --json >> "$out"
    done
  done
done
[ -n "${OUT:-}" ] && cp "$out" "$OUT"

/usr/bin/python3 - "$out" <<'EOF'
import json, statistics, sys
runs = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
groups = {}
for r in runs:
    key = (r["peers"], r["bytes"], r["impl"] if r["impl"] == "gloo" else "dedloc " + r["codec"])
    g = groups.setdefault(key, {"times": [], "cpu": [], "ok": True})
    g["times"] += r["times_s"]
    g["cpu"] += r.get("cpu_s", [])
    g["ok"] = g["ok"] and r["ok"]
def cell(key):
    g = groups.get(key)
    if not g:
        return None, "—"
    t = statistics.median(g["times"])
    n = key[0]
    busbw = key[1] / t / 1e9 * 2 * (n - 1) / n
    cpu = statistics.median(g["cpu"]) if g["cpu"] else float("nan")
    return t, f"{t:.3f} s · {busbw:.2f} GB/s · cpu {cpu:.2f} s" + ("" if g["ok"] else " (WRONG)")
print()
print("| peers | size | dedloc none | dedloc fp16 | gloo | none speed-up | fp16 speed-up |")
print("|---:|---:|---|---|---|---:|---:|")
for n, size in sorted({(k[0], k[1]) for k in groups}):
    t_none, c_none = cell((n, size, "dedloc none"))
    t_fp16, c_fp16 = cell((n, size, "dedloc fp16"))
    t_gloo, c_gloo = cell((n, size, "gloo"))
    ratio = lambda t: f"**{t_gloo / t:.2f}x**" if t and t_gloo else "—"
    print(f"| {n} | {size >> 20} MiB | {c_none} | {c_fp16} | {c_gloo} | {ratio(t_none)} | {ratio(t_fp16)} |")
print()
print("Each cell: median time per all-reduce (slowest peer), bus bandwidth 2(n-1)/n x bytes / time, median CPU")
print("time of all peer processes per round. Speed-up = gloo time / dedloc time.")
EOF

if [ "${CODECS:-1}" != 0 ]; then
  echo
  if [ -x "$codecs" ]; then
    echo "bench_codecs (encode / decode GB/s of float32 input per codec):"
    "$codecs"
  else
    echo "run.sh: $codecs not built (ninja -C $build bench_codecs); codec table skipped" >&2
  fi
fi
