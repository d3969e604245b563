# Sourced by the lab's benchmark scripts: one `dedloc-lab up` at a time in the background.
#   lab_up DEDLOC_LAB OUT_FILE FLAGS...   starts it (stdout to OUT_FILE, stderr to OUT_FILE.err) and waits for
#                                         its ready line (10 s); on failure prints its errors and exits 1
#   lab_hosts OUT_FILE [N]                the first N hosts (default all) as NETNS@ADDRESS,...
#   lab_down                              SIGTERM and wait: the lab removes its hosts and prints its counters
lab_pid=""

lab_up() {
  local lab="$1" out="$2"
  shift 2
  "$lab" up "$@" > "$out" 2> "$out.err" &
  lab_pid=$!
  for _ in $(seq 100); do grep -q '"ready"' "$out" 2>/dev/null && break; sleep 0.1; done
  grep -q '"ready"' "$out" || { cat "$out.err" >&2; echo "the lab did not start" >&2; exit 1; }
}

lab_hosts() {
  /usr/bin/python3 -c 'import json, sys
hosts = json.loads(open(sys.argv[1]).readline())["hosts"][:int(sys.argv[2]) if len(sys.argv) > 2 else None]
print(",".join(h["netns"] + "@" + h["address"] for h in hosts))' "$@"
}

lab_down() {
  if [ -n "$lab_pid" ]; then kill -TERM "$lab_pid" 2>/dev/null || true; wait "$lab_pid" 2>/dev/null || true; fi
  lab_pid=""
}
