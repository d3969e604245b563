#!/usr/bin/env bash
# The lab emulator's self-check (docs/lab.md): does it give the links it is asked for? Measured with tools
# nobody here wrote (ping, iperf3), between two lab hosts made by `dedloc-lab up`:
#   - round trips: ping at one-way delays of 10, 50 and 150 ms (--rtt 20, 100, 300 ms): the average must be
#     within 10% (or 1 ms) of twice the one-way delay;
#   - throughput: iperf3 TCP at 10, 100 and 1000 Mbit/s (20 ms round trip): within 10% of the rate;
#   - loss: iperf3 UDP with 1% loss configured: the measured loss within 4 binomial standard deviations;
#   - the emulator's CPU seconds per Gbit/s delivered, from its own counters during the 1 Gbit/s run.
# Prints a markdown table and exits 1 if any check fails. Root only.
#   bench/lab/selfcheck.sh [BUILD_DIR]        (default: build; needs iputils-ping and iperf3: scripts/setup-deps)
set -euo pipefail
build="${1:-build}"
lab="$build/tools/dedloc-lab/dedloc-lab"
[ -x "$lab" ] || { echo "selfcheck: $lab not built (ninja -C $build dedloc-lab)" >&2; exit 1; }
for tool in ping iperf3; do
  command -v "$tool" >/dev/null || { echo "selfcheck: $tool missing (scripts/setup-deps installs it)" >&2; exit 1; }
done

# shellcheck source=bench/lab/lab.sh
source "$(dirname "$0")/lab.sh"
work="$(mktemp -d)"
trap 'lab_down; rm -rf "$work"' EXIT

# Starts a 2-host lab with the given dedloc-lab up flags; sets ns0, ns1, addr1.
start_lab() {
  lab_up "$lab" "$work/lab.out" --hosts 2 --json "$@"
  IFS=', ' read -r host0 host1 <<< "$(lab_hosts "$work/lab.out")"
  ns0="${host0%@*}" ns1="${host1%@*}" addr1="${host1#*@}"
}
stop_lab() { lab_down; }
# The emulator's counters, printed on stdout when it stops.
lab_stats() { lab_down; tail -n 1 "$work/lab.out"; }

failures=0
row() {  # check, configured, measured, ok
  printf '| %s | %s | %s | %s |\n' "$1" "$2" "$3" "$([ "$4" = 1 ] && echo ok || echo FAIL)"
  [ "$4" = 1 ] || failures=$((failures + 1))
}

echo "| check | configured | measured | |"
echo "|---|---|---|---|"
for one_way in 10 50 150; do
  start_lab --rtt "$((2 * one_way))ms" --rate 100Mbit
  avg=$(ip netns exec "$ns0" ping -n -q -c 20 -i 0.1 "$addr1" | awk -F/ '/^rtt/ { print $5 }')
  stop_lab
  ok=$(awk -v a="$avg" -v e=$((2 * one_way)) 'BEGIN { d = a - e; if (d < 0) d = -d; print (d <= 0.1 * e || d <= 1) ? 1 : 0 }')
  row "ping round trip" "$((2 * one_way)) ms (one way $one_way ms)" "$avg ms" "$ok"
done

for rate in 10 100 1000; do
  start_lab --rtt 20ms --rate "${rate}Mbit"
  ip netns exec "$ns1" iperf3 -s -1 -D --pidfile "$work/iperf.pid"
  sleep 0.3
  ip netns exec "$ns0" iperf3 -c "$addr1" -t 8 -O 2 -J > "$work/tcp.json"
  measured=$(/usr/bin/python3 -c 'import json,sys; print("%.1f" % (json.load(open(sys.argv[1]))["end"]["sum_received"]["bits_per_second"] / 1e6))' "$work/tcp.json")
  stats="$(lab_stats)"
  ok=$(awk -v m="$measured" -v r="$rate" 'BEGIN { d = m - r; if (d < 0) d = -d; print (d <= 0.1 * r) ? 1 : 0 }')
  row "iperf3 TCP throughput" "$rate Mbit/s" "$measured Mbit/s" "$ok"
  if [ "$rate" = 1000 ]; then
    cpu=$(/usr/bin/python3 -c 'import json,sys; s=json.loads(sys.argv[1]); print("%.3f s CPU per Gbit (%.2f s CPU, %.2f Gbit)" % (s["cpu_s_per_gbit"], s["cpu_s"], s["bytes"] * 8 / 1e9))' "$stats")
  fi
done

start_lab --rtt 20ms --rate 100Mbit --loss 1%
ip netns exec "$ns1" iperf3 -s -1 -D --pidfile "$work/iperf.pid"
sleep 0.3
ip netns exec "$ns0" iperf3 -c "$addr1" -u -b 10M -l 1000 -t 10 -J > "$work/udp.json"
stop_lab
read -r lost total < <(/usr/bin/python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))["end"]["sum"]; print(s["lost_packets"], s["packets"])' "$work/udp.json")
ok=$(awk -v l="$lost" -v n="$total" 'BEGIN { e = 0.01 * n; s = sqrt(n * 0.01 * 0.99); d = l - e; if (d < 0) d = -d; print (d <= 4 * s) ? 1 : 0 }')
row "UDP loss" "1% of $total datagrams" "$lost lost ($(awk -v l="$lost" -v n="$total" 'BEGIN { printf "%.2f%%", 100 * l / n }'))" "$ok"

echo
echo "emulator CPU during the 1 Gbit/s TCP run: $cpu"
[ "$failures" = 0 ] || { echo "selfcheck: $failures check(s) failed" >&2; exit 1; }
