#!/usr/bin/env bash
# Runs the dedloc DHT benchmark and OpenDHT (opendht_bench.py) on the same shapes, alternating, and prints a
# markdown table of the medians across rounds.
#   bench/dht/run.sh [BUILD_DIR]      (default: build; needs python3-opendht from Debian)
# Environment: ROUNDS (3) rounds per size; NODES ("16 64") sizes for both; BIG (256) one dedloc-only run at
# that size, 0 to skip; KEYS (the benchmarks' default, 1000) keys per run; OUT a file to keep the JSON lines in.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="${1:-build}"
bench="$build/bench/dht/bench_dht"
rounds="${ROUNDS:-3}"
sizes="${NODES:-16 64}"
big="${BIG:-256}"
keys=()
[ -n "${KEYS:-}" ] && keys=(--keys "$KEYS")
[ -x "$bench" ] || { echo "run.sh: $bench not built (ninja -C $build bench_dht)" >&2; exit 1; }
/usr/bin/python3 -c "import opendht" 2>/dev/null || { echo "run.sh: python3-opendht missing (scripts/setup-deps installs it)" >&2; exit 1; }
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
for nodes in $sizes; do
  for round in $(seq 1 "$rounds"); do
    # The same seed for both in a round: the same keys, values and choice of nodes.
    echo "run.sh: $nodes nodes, round $round/$rounds" >&2
    "$bench" --nodes "$nodes" --seed "$round" "${keys[@]}" >> "$out"
    /usr/bin/python3 "$here/opendht_bench.py" --nodes "$nodes" --seed "$round" "${keys[@]}" >> "$out"
  done
done
if [ "$big" != 0 ]; then
  echo "run.sh: $big nodes, dedloc only" >&2
  # One process holds every node here, so every connection costs this process three descriptors; closing
  # idle ones after 2 s keeps 256 nodes under a 20,000-descriptor limit (real peers run one node each).
  "$bench" --nodes "$big" --seed 1 --idle-close 2 "${keys[@]}" >> "$out"
fi
[ -n "${OUT:-}" ] && cp "$out" "$OUT"
/usr/bin/python3 "$here/summarize.py" "$out"
