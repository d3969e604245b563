#!/usr/bin/env bash
# Join time and get latency of the real `dedloc-dht` binary when half the contacts it is given are dead.
#   bench/dht/dead_contacts.sh [DEDLOC_DHT]      (default: build/tools/dedloc-dht/dedloc-dht)
# One round: a bootstrap node and 10 `dedloc-dht serve` nodes on 127.0.0.1, each joined through the
# bootstrap; 5 of the 10 are SIGKILLed; then GETS (3) `dedloc-dht get` of a key nobody stored, through the
# bootstrap, one after another, and a new `serve` node joining through the bootstrap (the time until it
# prints its ready line). Prints one line per measurement and, over ROUNDS (3) rounds, the medians.
# Every node keeps the tool's defaults (2 s RPC deadline, 10 s --timeout).
set -euo pipefail
bin="${1:-build/tools/dedloc-dht/dedloc-dht}"
rounds="${ROUNDS:-3}"
gets="${GETS:-3}"
[ -x "$bin" ] || { echo "dead_contacts.sh: $bin not built (ninja -C build dedloc-dht)" >&2; exit 1; }
work="$(mktemp -d)"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }

# Starts `serve` in the background with the rest of the arguments; waits for its ready line (10 s at most)
# and sets $pid and $address.
serve() {
  local log="$work/serve.$RANDOM.$RANDOM"
  "$bin" serve --listen tcp://127.0.0.1:0 --log-level error "$@" > "$log.out" 2> "$log.err" &
  pid=$!
  pids+=("$pid")
  for _ in $(seq 1 1000); do
    if [ -s "$log.out" ]; then
      address="$(sed -n 's/.*"endpoints":\["\([^"]*\)".*/\1/p' "$log.out" | head -n 1)"
      [ -n "$address" ] && return 0
    fi
    kill -0 "$pid" 2>/dev/null || { echo "dead_contacts.sh: serve exited: $(cat "$log.err")" >&2; exit 1; }
    sleep 0.01
  done
  echo "dead_contacts.sh: no ready line within 10 s" >&2
  exit 1
}

# The machine's idle CPU share over the run (the bench shares its cores with whatever runs).
# shellcheck source=bench/idle_share.sh
source "$(dirname "$0")/../idle_share.sh"
cpu_before="$(cpu_sample)"

median() { sort -n | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.2f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

get_times=()
join_times=()
for round in $(seq 1 "$rounds"); do
  serve
  boot="$address"
  members=()
  for _ in $(seq 1 10); do
    serve --initial-peers "$boot"
    members+=("$pid")
  done
  for victim in "${members[@]:0:5}"; do kill -9 "$victim"; done
  for victim in "${members[@]:0:5}"; do wait "$victim" 2>/dev/null || true; done
  for i in $(seq 1 "$gets"); do
    start="$(now)"
    "$bin" get "nobody-stored-this-$round-$i" --initial-peers "$boot" --log-level error > "$work/get.out" 2> "$work/get.err" || true
    if grep -q 'not found' "$work/get.out"; then status="not found"; else status="$(head -c 200 "$work/get.err")"; fi
    t="$(elapsed "$start" "$(now)")"
    get_times+=("$t")
    echo "round $round: get $i took $t s ($status)"
  done
  start="$(now)"
  serve --initial-peers "$boot"
  t="$(elapsed "$start" "$(now)")"
  join_times+=("$t")
  echo "round $round: a new node printed its ready line after $t s"
  for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  pids=()
done
echo "median get: $(printf '%s\n' "${get_times[@]}" | median) s over ${#get_times[@]} gets ($(echo "${get_times[@]}"))"
echo "median join: $(printf '%s\n' "${join_times[@]}" | median) s over ${#join_times[@]} joins ($(echo "${join_times[@]}"))"
echo "idle CPU during the run: $(idle_share "$cpu_before" "$(cpu_sample)")% of $(nproc) cores"
