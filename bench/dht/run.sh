#!/usr/bin/env bash
# Runs the dedloc DHT benchmark and OpenDHT (opendht_bench.py) on the same shapes, alternating, and prints a
# markdown table of the medians across rounds.
#   bench/dht/run.sh [BUILD_DIR]      (default: build; needs python3-opendht from Debian)
# Environment: ROUNDS (3) rounds per size; NODES ("16 64") sizes for both, "" for none; KEYS (the benchmarks'
# default, 1000) keys per run; BIG (256) a dedloc-only size, 0 to skip, with BIG_ROUNDS (1) rounds of BIG_KEYS
# (KEYS) keys; DEDLOC_ARGS more arguments for every bench_dht run (e.g. "--max-connections 16"); ZMQ (1) also
# runs dedloc with every RPC over ZeroMQ connections (--datagrams false, "dedloc-zmq": how nodes talked before
# datagrams) in each round, 0 to skip; OUT a file to keep the JSON lines in. Every JSON line gets "idle_cpu_pct": the machine's idle CPU share during that run
# (bench/idle_share.sh), since the benchmark shares its cores with whatever runs.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
build="${1:-build}"
bench="$build/bench/dht/bench_dht"
rounds="${ROUNDS:-3}"
sizes="${NODES-16 64}"
big="${BIG:-256}"
big_rounds="${BIG_ROUNDS:-1}"
keys=()
[ -n "${KEYS:-}" ] && keys=(--keys "$KEYS")
big_keys=("${keys[@]}")
read -r -a dedloc_args <<< "${DEDLOC_ARGS:-}"
[ -n "${BIG_KEYS:-}" ] && big_keys=(--keys "$BIG_KEYS")
[ -x "$bench" ] || { echo "run.sh: $bench not built (ninja -C $build bench_dht)" >&2; exit 1; }
if [ -n "$sizes" ]; then
  /usr/bin/python3 -c "import opendht" 2>/dev/null || { echo "run.sh: python3-opendht missing (scripts/setup-deps installs it)" >&2; exit 1; }
fi
# shellcheck source=bench/idle_share.sh
source "$here/../idle_share.sh"
out="$(mktemp)"
trap 'rm -f "$out"' EXIT

# Runs one benchmark command and appends its JSON line with the idle CPU share during it.
measure() {
  local before line
  before="$(cpu_sample)"
  line="$("$@")"
  /usr/bin/python3 -c 'import json, sys; d = json.loads(sys.argv[1]); d["idle_cpu_pct"] = float(sys.argv[2]); print(json.dumps(d))' \
    "$line" "$(idle_share "$before" "$(cpu_sample)")" >> "$out"
}

for nodes in $sizes; do
  for round in $(seq 1 "$rounds"); do
    # The same seed for both in a round: the same keys, values and choice of nodes.
    echo "run.sh: $nodes nodes, round $round/$rounds" >&2
    measure "$bench" --nodes "$nodes" --seed "$round" "${keys[@]}" "${dedloc_args[@]}"
    measure /usr/bin/python3 "$here/opendht_bench.py" --nodes "$nodes" --seed "$round" "${keys[@]}"
    if [ "${ZMQ:-1}" != 0 ]; then
      measure "$bench" --nodes "$nodes" --seed "$round" "${keys[@]}" "${dedloc_args[@]}" --datagrams false
    fi
  done
done
if [ "$big" != 0 ]; then
  for round in $(seq 1 "$big_rounds"); do
    echo "run.sh: $big nodes, dedloc only, round $round/$big_rounds" >&2
    # One process holds every node here. With datagrams a node holds no connections; with --datagrams false
    # (DEDLOC_ARGS) every connection costs it three descriptors, and LocalSwarm bounds each node's open
    # connections to fit the descriptor limit (the output's max_connections_per_node).
    measure "$bench" --nodes "$big" --seed "$round" "${big_keys[@]}" "${dedloc_args[@]}"
  done
fi
[ -n "${OUT:-}" ] && cp "$out" "$OUT"
/usr/bin/python3 "$here/summarize.py" "$out"
