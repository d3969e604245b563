#!/usr/bin/env bash
# bench/train/diloco.sh: DiLoCo against synchronous training at equal samples, with the bytes each sends.
#
# Two dedloc-train peers on loopback train recipes/albert-tiny.yaml twice, one run after the other:
#   synchronous  the recipe as shipped (global batch 128), STEPS global steps;
#   diloco       collaboration.mode diloco: inner LAMB steps every INNER samples of a peer's own, an outer
#                batch of OUTER_FACTOR x 128 samples, outer SGD lr 0.7 with Nesterov momentum 0.9 (DiLoCo's
#                defaults), as many outer steps as give the same samples; warm-up 0 (the schedule counts
#                outer steps, and five of them would be the whole run).
# Prints, per run, the loss against the samples both peers computed (the step lines of peer a: the mean
# micro-batch loss since the previous step), the averaging payload bytes the two peers sent (their exit
# lines' bytes_sent) and bytes per sample, then the ratio of the two runs' bytes per sample and of their
# final losses (mean over the last quarter of the samples).
#
#   bench/train/diloco.sh [BUILD_DIR]     (default: build)
# Environment: STEPS (100), OUTER_FACTOR (50), INNER (128), THREADS (1 per peer), OUT (a folder to keep the
# step lines and recipes in; default a temporary one).
set -euo pipefail
cd "$(dirname "$0")/../.."
build="${1:-build}"
train="$build/tools/dedloc-train/dedloc-train"
steps="${STEPS:-100}"
factor="${OUTER_FACTOR:-50}"
inner="${INNER:-128}"
threads="${THREADS:-1}"
[ -x "$train" ] || { echo "diloco.sh: $train not built (ninja -C $build dedloc-train)" >&2; exit 1; }
out="${OUT:-$(mktemp -d)}"
mkdir -p "$out"
outer_batch=$((128 * factor))
outer_steps=$(( (steps * 128 + outer_batch - 1) / outer_batch ))

sed -e "s/^run_id: albert-tiny/run_id: bench-synchronous/" recipes/albert-tiny.yaml > "$out/synchronous.yaml"
sed -e "s/^run_id: albert-tiny/run_id: bench-diloco/" \
    -e "s/^  target_batch_size: 128 .*/  target_batch_size: $outer_batch/" \
    -e "s/^  warmup_epochs: 5/  warmup_epochs: 0/" \
    -e "s/^optimizer: .*/collaboration: {mode: diloco, inner_batch_size: $inner, outer_lr: 0.7, outer_momentum: 0.9}\n&/" \
    recipes/albert-tiny.yaml > "$out/diloco.yaml"
grep -q "mode: diloco" "$out/diloco.yaml" && grep -q "target_batch_size: $outer_batch" "$out/diloco.yaml" \
  || { echo "diloco.sh: could not derive the DiLoCo recipe from recipes/albert-tiny.yaml" >&2; exit 1; }

# Runs two peers of recipe $1 for $2 global (or outer) steps; their step lines go to $out/$3-{a,b}.jsonl.
run_pair() {
  local recipe="$1" epochs="$2" name="$3" first address
  local common=(--recipe "$recipe" --listen tcp://127.0.0.1:0 --avg-listen tcp://127.0.0.1:0 --plaintext --json
                --threads "$threads" --max-epochs "$epochs" --checkpoint-dir "$out/$name-cache" --log-level warning)
  "$train" "${common[@]}" --min-peers 2 --data-seed 1 > "$out/$name-a.jsonl" &
  first=$!
  for _ in $(seq 600); do
    address="$(head -1 "$out/$name-a.jsonl" 2>/dev/null | sed -nE 's/.*"endpoints":\["([^"]+)".*/\1/p')"
    [ -n "$address" ] && break
    sleep 0.1
  done
  [ -n "$address" ] || { echo "diloco.sh: the first $name peer printed no ready line" >&2; kill "$first"; exit 1; }
  "$train" "${common[@]}" --data-seed 2 --initial-peers "$address" > "$out/$name-b.jsonl"
  wait "$first"
}

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores" >&2
start=$(date +%s)
run_pair "$out/synchronous.yaml" "$steps" synchronous
echo "diloco.sh: synchronous: $steps steps in $(( $(date +%s) - start )) s" >&2
start=$(date +%s)
run_pair "$out/diloco.yaml" "$outer_steps" diloco
echo "diloco.sh: diloco: $outer_steps outer steps in $(( $(date +%s) - start )) s" >&2

/usr/bin/python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
def lines(name, peer):
    return [json.loads(l) for l in open(f"{out}/{name}-{peer}.jsonl") if l.startswith("{")]
summary = {}
for name in ("synchronous", "diloco"):
    a, b = lines(name, "a"), lines(name, "b")
    steps = [e for e in a if "loss" in e and e.get("event") != "exit"]
    exits = [e for e in a + b if e.get("event") == "exit"]
    total_samples = sum(e["samples_computed"] for e in exits)
    total_bytes = sum(e["bytes_sent"] for e in exits)
    # Loss against the samples both peers had computed: peer a's computed samples times two.
    curve = [(2 * e["samples_computed"], e["loss"], e["event"]) for e in steps]
    quarter = [loss for s, loss, _ in curve if s >= 0.75 * curve[-1][0]] or [curve[-1][1]]
    summary[name] = (total_bytes / total_samples, sum(quarter) / len(quarter))
    print(f"\n{name}: {len(steps)} steps, {total_samples} samples, {total_bytes} bytes sent, "
          f"{total_bytes / total_samples:.1f} bytes/sample, averaged {sum(e['event'] == 'averaged' for e in steps)}/{len(steps)}")
    print("| samples (both peers) | loss | step |")
    print("|---:|---:|---|")
    every = max(1, len(curve) // 10)
    for i, (s, loss, event) in enumerate(curve):
        if i % every == 0 or i == len(curve) - 1:
            print(f"| {s} | {loss:.3f} | {event} |")
sync, dil = summary["synchronous"], summary["diloco"]
print(f"\nbytes per sample: synchronous / diloco = {sync[0] / dil[0]:.1f}x")
print(f"loss over the last quarter of the samples: synchronous {sync[1]:.3f}, diloco {dil[1]:.3f} "
      f"(diloco - synchronous = {dil[1] - sync[1]:+.3f})")
PY
