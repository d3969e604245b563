#!/usr/bin/env bash
# Volunteer scale and churn in the lab: the 64 peers of bench/lab/scenarios/volunteers-churn.yaml (part-time
# volunteers behind NAT coming and going, public peers failing, a wave of 16 joining at once, a relay
# killed) against the same swarm without churn (volunteers-steady.yaml), alternating, ROUNDS times each.
# Prints per run: goodput (samples/s in averaged steps), steps averaged, joiners' time to an averaged step,
# the wave's spread over donors, the longest all-reduce against its deadline, non-finite losses and peak
# memory; then the churn/steady goodput ratio (medians).
#   bench/lab/volunteers.sh [BUILD_DIR]     (root; default build)
# Environment: ROUNDS (1), OUT (a folder for the reports and line logs; default a temporary one),
# CHURN / STEADY (other scenario files, e.g. volunteers-16.yaml for a short look).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="${1:-build}"
lab="$build/tools/dedloc-lab/dedloc-lab"
[ -x "$lab" ] || { echo "volunteers.sh: $lab not built" >&2; exit 1; }
out="${OUT:-$(mktemp -d)}"
mkdir -p "$out"
# shellcheck source=bench/idle_share.sh
source "$here/../idle_share.sh"
print_idle_share_before

churn="${CHURN:-$here/scenarios/volunteers-churn.yaml}"
steady="${STEADY:-$here/scenarios/volunteers-steady.yaml}"
for round in $(seq 1 "${ROUNDS:-1}"); do
  for kind in churn steady; do
    scenario="$churn"; [ "$kind" = steady ] && scenario="$steady"
    name="$kind-$round"
    echo "volunteers.sh: $name ($scenario)" >&2
    "$lab" run "$scenario" --work-dir "$out/$name" --report "$out/$name.json" > "$out/$name.txt" 2>&1 \
      || { cat "$out/$name.txt" >&2; exit 1; }
    tail -n 12 "$out/$name.txt" >&2
  done
done

/usr/bin/python3 - "$out" "${ROUNDS:-1}" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
print("| run | global steps/s | samples/s | goodput (averaged samples/s) | steps averaged | rounds sat out "
      "| steps and rounds sat out averaged | joiners' median s to an averaged step "
      "| wave: joins' donors / most from one; downloads in all / donors / most from one | longest round / deadline | non-finite losses | peak RSS per trainer (MiB) |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|")
goodput = {"churn": [], "steady": []}
for r in range(1, rounds + 1):
    for kind in ("churn", "steady"):
        rep = json.load(open(f"{out}/{kind}-{r}.json"))
        goodput[kind].append(rep["averaged_samples_per_s"])
        waves = rep.get("waves", {})
        wave = next(iter(waves.values()), None)
        wave_text = (f'{wave["join"]["donors"]} / {wave["join"]["max_per_donor"]}; '
                     f'{wave["downloads"]} / {wave["donors"]} / {wave["max_per_donor"]}') if wave else "-"
        peak = max(g["peak_rss_mib"] for g in rep["groups"].values() if g["role"] != "aux")
        print(f'| {kind} {r} | {rep["global_steps_per_s"]:.3f} | {rep["samples_per_s"]:.0f} | {rep["averaged_samples_per_s"]:.0f} '
              f'| {100 * rep["averaged_fraction"]:.1f}% | {rep.get("missed_rounds", 0)} '
              f'| {100 * rep.get("averaged_fraction_of_rounds", rep["averaged_fraction"]):.1f}% '
              f'| {rep["joiner_to_averaged_step_median_s"]:.1f} | {wave_text} '
              f'| {rep["longest_round_over_deadline"]:.2f} | {rep["nonfinite_losses"]} | {peak:.0f} |')
c, s = statistics.median(goodput["churn"]), statistics.median(goodput["steady"])
print(f"\ngoodput under churn / without: {c:.0f} / {s:.0f} = {c / s:.2f} (goal >= 0.75)")
PY
echo "volunteers.sh: reports and line logs in $out" >&2
