#!/usr/bin/env bash
# bench/train: the trainer's speed and what collaborating costs, side by side in one run.
#
# 1. Raw speed: an ALBERT masked-LM training step in dedloc (bench_albert_speed, C++) and in PyTorch
#    (pytorch_mlm.py under Debian's python3-torch): the same shape, batch and threads, alternating the two
#    PAIRS times so that noise hits both alike. Prints the medians and dedloc / PyTorch in samples/s.
# 2. Collaboration overhead: TRAINERS dedloc-train peers (scripts/train-local, no aux peer) on the default
#    recipe for SECONDS on loopback; per peer, the fraction of its wall time not spent computing
#    micro-batches (1 - compute_seconds / seconds from its exit line): averaging, matchmaking, waiting.
#    Once with matchmaking ahead of time (the recipe's default) and once without (averaging.match_ahead:
#    false), one after the other in the same session.
#
#   bench/train/run.sh [BUILD_DIR]        (default: build)
# Environment: PAIRS (3), STEPS (10) timed steps per speed run, THREADS (2), BATCH (16), SEQ (128);
# SECONDS_RUN (120), TRAINERS (2), RECIPE (recipes/albert-tiny.yaml), MATCH_AHEAD ("on off": the overhead
# runs, in order); SKIP_SPEED=1 / SKIP_OVERHEAD=1.
set -euo pipefail
cd "$(dirname "$0")/../.."
build="${1:-build}"
pairs="${PAIRS:-3}"
steps="${STEPS:-10}"
threads="${THREADS:-2}"
shape=(--batch "${BATCH:-16}" --seq "${SEQ:-128}" --threads "$threads")
speed="$build/bench/train/bench_albert_speed"

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
field() { sed -nE "s/.*\"$1\": *([-0-9.e+]+).*/\\1/p"; }

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores"
if [ "${SKIP_SPEED:-0}" != 1 ]; then
  [ -x "$speed" ] || { echo "run.sh: $speed not built (ninja -C $build bench_albert_speed)" >&2; exit 1; }
  /usr/bin/python3 -c "import torch" 2>/dev/null || { echo "run.sh: /usr/bin/python3 has no torch: apt-get install python3-torch" >&2; exit 1; }
  out=$(mktemp)
  for i in $(seq "$pairs"); do
    # Alternate which side goes first.
    if [ $((i % 2)) = 1 ]; then order="dedloc pytorch"; else order="pytorch dedloc"; fi
    for side in $order; do
      if [ "$side" = dedloc ]; then
        "$speed" --steps "$steps" --warmup 2 "${shape[@]}" | tee -a "$out"
      else
        /usr/bin/python3 bench/train/pytorch_mlm.py --steps "$steps" --warmup 2 "${shape[@]}" | tee -a "$out"
      fi
    done
  done
  d=$(grep '"impl": *"dedloc"' "$out" | field samples_per_s | median)
  p=$(grep '"impl": *"pytorch"' "$out" | field samples_per_s | median)
  echo "speed: dedloc $d samples/s, PyTorch $p samples/s (medians of $pairs runs of $steps steps): $(awk -v d="$d" -v p="$p" 'BEGIN { printf "%.2fx", d / p }')"
  rm -f "$out"
fi

if [ "${SKIP_OVERHEAD:-0}" != 1 ]; then
  recipe="${RECIPE:-recipes/albert-tiny.yaml}"
  for ahead in ${MATCH_AHEAD:-on off}; do
    run=$(mktemp -d)
    run_recipe="$recipe"
    if [ "$ahead" = off ]; then
      run_recipe="$run/recipe.yaml"
      sed '/^averaging:/a\  match_ahead: false' "$recipe" > "$run_recipe"
    fi
    scripts/train-local --build "$build" --recipe "$run_recipe" --peers "${TRAINERS:-2}" --aux 0 \
      --seconds "${SECONDS_RUN:-120}" --run "$run/train" --wait > /dev/null
    fractions=()
    for exit_line in "$run"/train/peer*/events.jsonl; do
      line=$(grep '"event":"exit"' "$exit_line")
      c=$(echo "$line" | field compute_seconds)
      s=$(echo "$line" | field seconds)
      steps_done=$(echo "$line" | field epoch)
      averaged=$(echo "$line" | field steps_averaged)
      found_ahead=$(grep -c '"found_ahead":true' "$exit_line" || true)
      f=$(awk -v c="$c" -v s="$s" 'BEGIN { printf "%.4f", 1 - c / s }')
      fractions+=("$f")
      echo "overhead (match ahead $ahead): $(dirname "$exit_line" | xargs basename): $s s, computing $c s, not computing $(awk -v f="$f" 'BEGIN { printf "%.1f%%", 100 * f }'); $steps_done steps, $averaged averaged, $found_ahead groups found ahead"
    done
    echo "overhead (match ahead $ahead): median $(printf '%s\n' "${fractions[@]}" | median | awk '{ printf "%.1f%%", 100 * $1 }') of wall time not computing (goal < 10%)"
    rm -rf "$run"
  done
fi
