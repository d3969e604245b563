#!/usr/bin/env bash
# The DeDLOC paper's experiments in the internet lab, scaled to this machine (bench/lab/README.md, "The DeDLOC
# paper's experiments", says how and why):
#   ALBERT-large (§4.2): bench/lab/scenarios/paper-albert-{fast,naive,balanced,aux,parttime}.yaml, each a
#     whole collaboration of synthetic trainers (dedloc-lab run), compared by samples/s with the
#     high-bandwidth baseline (fast); and paper-albert-delayed.yaml, the balanced run with delayed updates
#     (not in the paper: the step the planner's prediction assumes); paper-albert-parttime-adaptive.yaml, the
#     part-time run with adaptive all-reduce deadlines (not in the default list);
#   SwAV hybrid (§4.1): `dedloc-avg bench --emulate-links`, 8 fast + 16 slow peers, the all-reduce time with
#     equal shares against the planner's.
# Every lab run holds /tmp/dedloc-lab.lock (flock), so that it never overlaps another engineer's. REPEATS > 1
# runs the scenarios again in the reverse order, then forward, and so on (drift in the machine's load then
# falls on every scenario alike); the table shows the median of the repeats.
#   bench/lab/paper.sh [BUILD_DIR]     (root; default build)
# Environment: OUT (a folder for the reports; default a temporary one), REPEATS (1), SCENARIOS (the six
# above, by their suffix), SWAV (1; 0 skips it), SWAV_ROUNDS (5 timed rounds per bench), WORK (the runs'
# work directories with every program's output; default a temporary one), RUN (1; 0 only prints the table
# of the reports already in OUT), PEER_LOG_LEVEL (every peer's --log-level, e.g. debug; default theirs).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="${1:-build}"
lab="$build/tools/dedloc-lab/dedloc-lab"
avg="$build/tools/dedloc-avg/dedloc-avg"
for tool in "$lab" "$avg"; do [ -x "$tool" ] || { echo "paper.sh: $tool not built" >&2; exit 1; }; done
out="${OUT:-$(mktemp -d)}"
work="${WORK:-$(mktemp -d)}"
mkdir -p "$out" "$work"
lock=/tmp/dedloc-lab.lock
# shellcheck source=bench/idle_share.sh
source "$here/../idle_share.sh"
[ "${RUN:-1}" = 1 ] && print_idle_share_before

# The mean idle share of the machine during one command (others' work included), into "$out/$2.idle".
timed_idle() {
  local before
  before="$(cpu_sample)"
  "${@:3}"
  idle_share "$before" "$(cpu_sample)" > "$out/$2.idle"
  echo "paper.sh: $2 done ($(cat "$out/$2.idle")% idle during it)" >&2
}

read -r -a scenarios <<< "${SCENARIOS:-fast naive balanced aux parttime delayed}"
log_flag=()
[ -n "${PEER_LOG_LEVEL:-}" ] && log_flag=(--peer-log-level "$PEER_LOG_LEVEL")
repeats="${REPEATS:-1}"
run_them="${RUN:-1}"
for ((r = 1; r <= repeats && run_them == 1; r++)); do
  order=("${scenarios[@]}")
  if ((r % 2 == 0)); then
    order=()
    for ((i = ${#scenarios[@]} - 1; i >= 0; i--)); do order+=("${scenarios[i]}"); done
  fi
  for name in "${order[@]}"; do
    run="albert-$name-r$r"
    echo "paper.sh: $run (waiting for the lab lock)" >&2
    timed_idle "$run" "$run" flock "$lock" "$lab" run "$here/scenarios/paper-albert-$name.yaml" \
      --work-dir "$work/$run" --report "$out/$run.json" "${log_flag[@]}" > "$out/$run.txt" 2>&1 \
      || { cat "$out/$run.txt" >&2; exit 1; }
  done
done

if [ "${SWAV:-1}" = 1 ] && [ "$run_them" = 1 ]; then
  # ResNet-50's 25.6 M parameters at 1/4 (6.4 M values, fp16 on the wire) over links at 1/4 of the paper's
  # 1 Gbit/s and 200 Mbit/s: the same transfer times as the paper's.
  rates="$(printf '250Mbit,%.0s' 1 2 3 4 5 6 7 8)$(printf '50Mbit,%.0s' $(seq 16))"
  rates="${rates%,}"
  for ((r = 1; r <= repeats; r++)); do
    for shares in uniform planned; do
      run="swav-$shares-r$r"
      flag=()
      [ "$shares" = uniform ] && flag=(--uniform)
      echo "paper.sh: $run (waiting for the lab lock)" >&2
      timed_idle "$run" "$run" flock "$lock" "$avg" --plaintext --json bench --peers 24 --size 25600000 --codec fp16 \
        --rounds "${SWAV_ROUNDS:-5}" --bandwidths "$rates" --emulate-links --rtt 20ms --mtu 9000 "${flag[@]}" \
        > "$out/$run.json" 2> "$out/$run.err" || { cat "$out/$run.err" >&2; exit 1; }
    done
  done
fi

/usr/bin/python3 - "$out" "$repeats" "${scenarios[@]}" <<'PY'
import json, os, statistics, sys
out, repeats, names = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
# The paper's figures as speeds relative to its high-bandwidth run: the naive heterogeneous run 2.5x slower,
# load balancing +47% on it, aux peers more than +60%, part-time peers 74% of the high-bandwidth speed.
paper = {"fast": 1.0, "naive": 1 / 2.5, "balanced": 1.47 / 2.5, "aux": 1.60 / 2.5, "parttime": 0.74, "parttime-adaptive": 0.74}
label = {"fast": "high-bandwidth (16 × 1 Gbit/s)", "naive": "heterogeneous, equal shares",
         "balanced": "heterogeneous, planner's shares", "aux": "+ 4 aux peers (1 Gbit/s)",
         "parttime": "+ 8 part-time peers (100 Mbit/s)", "delayed": "planner's shares, delayed updates (not the paper's)",
         "parttime-adaptive": "+ part-time peers, adaptive deadlines"}

def median_of(name, key):
    values = []
    for r in range(1, repeats + 1):
        path = f"{out}/albert-{name}-r{r}.json"
        if os.path.exists(path):
            values.append(json.load(open(path)).get(key, 0.0))
    return statistics.median(values) if values else None

def idle(run):
    path = f"{out}/{run}.idle"
    return open(path).read().strip() + "%" if os.path.exists(path) else "?"

base = median_of("fast", "samples_per_s")
print("| scenario | samples/s | global steps/s | predicted steps/s | measured/predicted | predicted without overlap | "
      "measured/that | averaged | vs high-bandwidth | paper | measured/paper | queue drops | idle CPU |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
for name in names:
    samples = median_of(name, "samples_per_s")
    if samples is None:
        continue
    steps, predicted = median_of(name, "global_steps_per_s"), median_of(name, "predicted_steps_per_s")
    averaged = median_of(name, "averaged_fraction")
    serial = median_of(name, "predicted_synchronous_steps_per_s")
    serial_text = f"{serial:.3f} | {steps / serial:.2f}" if serial else "— | —"
    drops = [json.load(open(f"{out}/albert-{name}-r{r}.json"))["emulator"].get("dropped_queue", "?")
             for r in range(1, repeats + 1) if os.path.exists(f"{out}/albert-{name}-r{r}.json")]
    ratio = samples / base if base else float("nan")
    want = paper.get(name)
    versus = "—" if want is None else f"{want:.2f} | {ratio / want:.2f}{'' if 0.75 <= ratio / want <= 1.25 else ' (outside ±25%)'}"
    idles = ", ".join(idle(f"albert-{name}-r{r}") for r in range(1, repeats + 1))
    print(f"| {label.get(name, name)} | {samples:.1f} | {steps:.3f} | {predicted:.3f} | {steps / predicted:.2f} | "
          f"{serial_text} | {100 * averaged:.0f}% | **{ratio:.2f}** | {versus if want is not None else '— | —'} | "
          f"{', '.join(str(d) for d in drops)} | {idles} |")

times = {}
for shares in ("uniform", "planned"):
    for r in range(1, repeats + 1):
        path = f"{out}/swav-{shares}-r{r}.json"
        lines = open(path).read().strip().splitlines() if os.path.exists(path) else []
        if lines:
            times.setdefault(shares, []).extend(json.loads(lines[-1])["times_s"])
if len(times) == 2:
    u, p = statistics.median(times["uniform"]), statistics.median(times["planned"])
    print()
    print("| SwAV hybrid all-reduce (8 × 1 Gbit/s + 16 × 200 Mbit/s, at 1/4) | median round | rounds |")
    print("|---|---:|---:|")
    print(f"| equal shares | {u:.2f} s | {len(times['uniform'])} |")
    print(f"| planner's shares | {p:.2f} s | {len(times['planned'])} |")
    print(f"| **speed-up** | **{u / p:.2f}x** (paper 1.9x, measured/paper {u / p / 1.9:.2f}) | |")
PY
