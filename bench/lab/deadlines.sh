#!/usr/bin/env bash
# Fixed against adaptive all-reduce deadlines in the lab (averaging.adaptive_timeout, docs/recipes.md): four
# synthetic peers (bench/lab/scenarios/deadline.yaml) at each round trip of RTTS, one SIGKILLed at 60 s, once
# with the recipe's fixed timeouts and once adaptive. Per run: the steps averaged, the median interval
# between a surviving peer's steps, and the longest interval after the kill (what the dead member cost),
# with the deadline the survivors' all-reduces had then.
#   bench/lab/deadlines.sh [BUILD_DIR]     (root; default build)
# Environment: RTTS ("20 300", ms), OUT (a folder for the reports and line logs; default a temporary one),
# SCENARIO (deadline: the kill above; deadline-straggler: no kill, one peer on a link 3x slower than the rest;
# deadline-netchange: no kill, every link moves from RTTS to 300 ms at 55 s), MODES ("fixed adaptive").
# With the kill, the table also gives the longest step interval after it over the median interval before
# it (goal: at most 2); without, the steps averaged after the change (goal: at least 95%).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="${1:-build}"
lab="$build/tools/dedloc-lab/dedloc-lab"
[ -x "$lab" ] || { echo "deadlines.sh: $lab not built" >&2; exit 1; }
out="${OUT:-$(mktemp -d)}"
mkdir -p "$out"
# shellcheck source=bench/idle_share.sh
source "$here/../idle_share.sh"
print_idle_share_before

scenario="${SCENARIO:-deadline}"
for rtt in ${RTTS:-20 300}; do
  for mode in ${MODES:-fixed adaptive}; do
    name="rtt${rtt}-$mode"
    sed -e "s/^    rtt: 100ms/    rtt: ${rtt}ms/" -e "s/deadline-fixed-recipe.yaml/deadline-$mode-recipe.yaml/" \
        "$here/scenarios/$scenario.yaml" > "$here/scenarios/.deadline-$name.yaml"
    echo "deadlines.sh: $name" >&2
    "$lab" run "$here/scenarios/.deadline-$name.yaml" --work-dir "$out/$name" --report "$out/$name.json" > "$out/$name.txt" 2>&1 \
      || { rm -f "$here/scenarios/.deadline-$name.yaml"; cat "$out/$name.txt" >&2; exit 1; }
    rm -f "$here/scenarios/.deadline-$name.yaml"
  done
done

/usr/bin/python3 - "$out" "$scenario" "${MODES:-fixed adaptive}" ${RTTS:-20 300} <<'PY'
import json, statistics, sys
out, scenario, modes, rtts = sys.argv[1], sys.argv[2], sys.argv[3].split(), sys.argv[4:]
killed = scenario == "deadline"
event_at = 55.0 if scenario == "deadline-netchange" else 60.0
print("| rtt | waits | steps averaged (survivors) | after the event | median step interval before | "
      "longest interval after | longest / median | deadline then |")
print("|---|---|---:|---:|---:|---:|---:|---:|")
for rtt in rtts:
    for mode in modes:
        steps = {}
        for line in open(f"{out}/rtt{rtt}-{mode}/lines.jsonl"):
            t, who, text = line.split(" ", 2)
            if (killed and who == "node-3") or not (who.startswith("node-") or who.startswith("straggler-")) \
                    or not text.startswith("{"):
                continue
            e = json.loads(text)
            if e.get("event") in ("averaged", "alone", "local", "skipped"):
                steps.setdefault(who, []).append((float(t), e))
        averaged = sum(e["event"] == "averaged" for s in steps.values() for _, e in s)
        total = sum(len(s) for s in steps.values())
        late = [e for s in steps.values() for t, e in s if t > event_at]
        late_averaged = sum(e["event"] == "averaged" for e in late)
        times = [t for t, _ in steps["node-0"]]
        intervals = [b - a for a, b in zip(times, times[1:]) if b <= event_at]
        after = [(b - a, e) for (a, _), (b, e) in zip(steps["node-0"], steps["node-0"][1:]) if b > event_at]
        longest, event = max(after, key=lambda x: x[0]) if after else (0, {})
        median = statistics.median(intervals)
        print(f"| {rtt} ms | {mode} | {averaged}/{total} | {late_averaged}/{len(late)} "
              f"({100 * late_averaged / max(1, len(late)):.0f}%) | {median:.2f} s | {longest:.2f} s | "
              f"{longest / median:.1f}x | {event.get('averaging_deadline', 0):.1f} s |")
PY
