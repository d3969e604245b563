#!/usr/bin/env bash
# The all-reduce over internet-like links (docs/lab.md): dedloc's butterfly all-reduce and torch.distributed's
# gloo, alternating, in the same lab hosts (`dedloc-lab up`: every peer a network namespace behind the
# user-space link emulator), next to the link-bound time the planner's cost model predicts for the same
# peers (`dedloc-plan`, butterfly all-reduce, compute taken as free). Prints a markdown table of medians.
#   bench/lab/run.sh [BUILD_DIR]         (default: build; root; Debian's python3-torch for gloo)
# Environment: PEERS ("4 8"), RTTS ("20 100 200", ms), LOSSES ("0 0.5%"), RATE (100Mbit), ROUNDS (2) timed
# rounds per run, SHAPES ("64MiB:none" — SIZE:CODEC pairs; "72MB:fp16" is ALBERT-large's 18M-parameter
# gradient sent in fp16, where gloo all-reduces an fp16 tensor of the same values), OUT (keep JSON lines).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="${1:-build}"
lab="$build/tools/dedloc-lab/dedloc-lab"
avg="$build/tools/dedloc-avg/dedloc-avg"
plan="$build/tools/dedloc-plan/dedloc-plan"
for b in "$lab" "$avg" "$plan"; do [ -x "$b" ] || { echo "run.sh: $b not built" >&2; exit 1; }; done
peers_list="${PEERS:-4 8}"
rtts="${RTTS:-20 100 200}"
losses="${LOSSES:-0 0.5%}"
rate="${RATE:-100Mbit}"
rounds="${ROUNDS:-2}"
shapes="${SHAPES:-64MiB:none}"
max_peers=$(echo $peers_list | tr ' ' '\n' | sort -n | tail -1)

# shellcheck source=bench/idle_share.sh
source "$here/../idle_share.sh"
# shellcheck source=bench/lab/lab.sh
source "$here/lab.sh"
print_idle_share_before

work="$(mktemp -d)"
trap 'lab_down; rm -rf "$work"' EXIT
out="$work/runs.jsonl"

for rtt in $rtts; do
  for loss in $losses; do
    lab_up "$lab" "$work/lab.out" --hosts "$max_peers" --rtt "${rtt}ms" --rate "$rate" --loss "$loss"
    for peers in $peers_list; do
      hosts=$(lab_hosts "$work/lab.out" "$peers")
      for shape in $shapes; do
        size="${shape%%:*}"; codec="${shape##*:}"
        echo "run.sh: rtt ${rtt} ms, loss $loss, $peers peers, $size $codec" >&2
        tag="{\"rtt_ms\": $rtt, \"loss\": \"$loss\", \"rate\": \"$rate\"}"
        dtype=float32; [ "$codec" = fp16 ] && dtype=float16
        if line=$("$avg" --plaintext bench --peers "$peers" --size "$size" --codec "$codec" --rounds "$rounds" --timeout 300 --lab-hosts "$hosts" --json); then
          echo "$line" | /usr/bin/python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); d.update(json.loads(sys.argv[1])); print(json.dumps(d))' "$tag" >> "$out"
        fi
        if line=$(/usr/bin/python3 "$here/../allreduce/gloo_bench.py" --peers "$peers" --size "$size" --dtype "$dtype" --rounds "$rounds" --timeout 900 --lab-hosts "$hosts" --json); then
          echo "$line" | /usr/bin/python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); d.update(json.loads(sys.argv[1])); print(json.dumps(d))' "$tag" >> "$out"
        fi
      done
    done
    lab_down
  done
done
[ -n "${OUT:-}" ] && cp "$out" "$OUT"

# The planner's link-bound time for each (peers, size, codec): all peers at RATE, compute free.
/usr/bin/python3 - "$out" "$plan" "$rate" <<'PY'
import json, statistics, subprocess, sys, tempfile
runs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
plan, rate = sys.argv[2], sys.argv[3]
def link_bound(peers, values, codec):
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        f.write(f"batch: 4096\nparams: {values}\ncodec: {codec}\npeers:\n  - name: lab\n    count: {peers}\n"
                f"    compute: 1e12\n    bandwidth: {rate}\n")
    d = json.loads(subprocess.run([plan, "--peers", f.name, "--json"], check=True, capture_output=True, text=True).stdout)
    return next(s for s in d["strategies"] if s["name"] == "butterfly all-reduce")["prediction"]["step_seconds"]
cells = {}
for r in runs:
    codec = r.get("codec", "none")
    key = (r["rtt_ms"], r["loss"], r["peers"], r["bytes"], codec)
    cells.setdefault(key, {}).setdefault(r["impl"], []).extend(r["times_s"] if r["ok"] else [float("nan")])
print()
print("| round trip | loss | peers | size | codec | link-bound (planner) | dedloc | gloo | dedloc / link-bound | gloo / dedloc |")
print("|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|")
for key in sorted(cells):
    rtt, loss, peers, size, codec = key
    bound = link_bound(peers, size // 4, codec)
    d = statistics.median(cells[key].get("dedloc", [float("nan")]))
    g = statistics.median(cells[key].get("gloo", [float("nan")]))
    print(f"| {rtt} ms | {loss} | {peers} | {size / 2**20:.0f} MiB | {codec} | {bound:.2f} s | {d:.2f} s | {g:.2f} s | "
          f"**{d / bound:.2f}x** | **{g / d:.2f}x** |")
PY
