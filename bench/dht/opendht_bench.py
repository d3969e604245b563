#!/usr/bin/python3
"""The OpenDHT side of bench/dht (run.sh puts it beside build/bench/dht/bench_dht).

Same shape as dht_bench.cpp: N OpenDHT nodes (DhtRunner) in this process on 127.0.0.1, node i joining through a
random earlier node; then `keys` keys of `value_bytes` random bytes stored one at a time from random nodes, and
each read back once, one at a time, from another random node. Prints one JSON object, the same shape bench_dht
prints, with "impl":"opendht":
  {"impl":"opendht","nodes":64,"keys":1000,"value_bytes":100,"bootstrap_s":..,"put_ms":{"median":..,"p99":..},
   "get_ms":{..},"put_ops_per_s":..,"get_ops_per_s":..,"put_ok":..,"get_ok":..,"rpcs_per_put":..,
   "rpcs_per_get":..,"rss_kib_per_node":..,"settle_s":..}

Needs Debian's python3-opendht (scripts/setup-deps installs it); run it with /usr/bin/python3.

How OpenDHT is driven, and why (kept fair to it):
  * IPv4 only: run(ipv4="127.0.0.1") binds one IPv4 socket on loopback and no IPv6 one, and peers are
    bootstrapped by "127.0.0.1", so nothing waits on IPv6 (the default run(port) binds both families).
  * Rate limits off: OpenDHT limits the requests it accepts per source IP (200/s by default) and in all
    (1600/s). Every peer here shares 127.0.0.1, so the per-IP limit would throttle the whole swarm as if it
    were one abusive host; DhtConfig.setRateLimit(-1, -1) turns both off (dedloc has no such limiter).
  * Joining: like LocalSwarm::launch, nodes join one at a time, node i bootstrapping through a random earlier
    node; a join is done when the new node has a good (replied) node in its routing table, which is what
    OpenDHT calls "connected". bootstrap_s is the time until every node has joined.
  * Settling (not counted in bootstrap_s, reported as settle_s): OpenDHT fills its routing table with a lookup
    of its own id from a maintenance timer (confirmNodes) about 3 s after each node starts, not when it joins.
    Before measuring, we wait until every node's own-id lookup is done (node 0, which joined through nobody,
    never runs one; in small swarms a lookup may never step, so also enough: every lookup started and no
    routing table grew for 1 s), so operations run on filled routing tables and not in the middle of that
    burst (dedloc's join includes its own lookups and it runs without background maintenance). OpenDHT's other maintenance cannot be turned off and keeps running.
  * Operations use OpenDHT's asynchronous put/get with a threading.Event, so that --timeout applies to each
    one (the bindings' blocking forms have no timeout). A put is done at its done callback (OpenDHT reports
    the value announced to the nodes nearest the key); ok is the callback's flag. By default a get stops at
    the first value found (the get callback returns False), like dedloc's GetMode::kFirst; --get-mode all
    waits for OpenDHT's full lookup instead. A get is ok if the value returned is exactly the stored bytes.
    Going through the Python bindings costs each operation a hop to the runner's thread and back through the
    GIL: about 0.1 ms (a put or a get on a one-node swarm, all local, takes 0.08-0.14 ms median).
  * rpcs_per_put/get: requests sent by all nodes in that phase (OpenDHT's outgoing message stats: ping, find,
    get, listen, put), divided by the keys; unlike dedloc's they include OpenDHT's background maintenance.
  * rss_kib_per_node: (VmRSS at the end, after the gets, minus VmRSS before the first node started) / nodes,
    as dht_bench.cpp measures it. The Python interpreter and the bindings are loaded before the first reading.
"""
import argparse
import json
import os
import random
import socket
import sys
import threading
import time

try:
    import opendht as dht
except ImportError:
    sys.exit("opendht_bench.py: python3-opendht missing (scripts/setup-deps installs it; run with /usr/bin/python3)")

LOOPBACK = "127.0.0.1"


def rss_kib():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def summary_ms(ms):
    """Median and p99 the way dht_bench.cpp picks them: sorted[min(n - 1, floor(q * n))]."""
    if not ms:
        return {"median": None, "p99": None}
    ms = sorted(ms)
    at = lambda q: ms[min(len(ms) - 1, int(q * len(ms)))]
    return {"median": at(0.5), "p99": at(0.99)}


def good_nodes(runner):
    return runner.getRoutingTablesLog(socket.AF_INET).count("[good]")


def own_lookup(runner):
    """The state of this node's lookup of its own id (OpenDHT's routing-table fill): None before it starts,
    then "running", then "done"."""
    me = "Search IPv4 " + runner.getNodeId().decode()
    for line in runner.getSearchesLog(socket.AF_INET).splitlines():
        if line.startswith(me):
            return "done" if "[done]" in line else "running"
    return None


def known_nodes(runner):
    return runner.getRoutingTablesLog(socket.AF_INET).count("Node ")


class InFlight:
    """Operations whose done callback has not run yet.

    The bindings call into OpenDHT holding the GIL, and OpenDHT runs our Python callbacks holding its own lock,
    which they then need the GIL under. So a call that takes that lock (the stats and log getters, shutdown,
    join) while a callback may still come can deadlock; we make them only once nothing is in flight."""

    def __init__(self):
        self._count = 0
        self._cv = threading.Condition()

    def start(self):
        with self._cv:
            self._count += 1

    def end(self):
        with self._cv:
            self._count -= 1
            self._cv.notify_all()

    def wait_idle(self, timeout_s):
        with self._cv:
            return self._cv.wait_for(lambda: self._count == 0, timeout_s)


def sent_requests(runners):
    """Requests sent by every node since the last call (reading OpenDHT's stats resets them)."""
    return sum(sum(r.getNodeMessageStats()) for r in runners)


def put(runner, key, value, timeout_s, in_flight):
    done = threading.Event()
    outcome = [False]

    def on_done(ok, _nodes):
        outcome[0] = ok
        done.set()
        in_flight.end()

    in_flight.start()
    runner.put(key, dht.Value(value), done_cb=on_done)
    return done.wait(timeout_s) and outcome[0]


def get(runner, key, timeout_s, first, in_flight):
    done = threading.Event()
    found = []

    def on_value(v):
        found.append(v.data)
        if first:
            done.set()
            return False  # stop the lookup at the first value
        return True

    def on_done(_ok, _nodes):
        done.set()
        in_flight.end()

    in_flight.start()
    runner.get(key, get_cb=on_value, done_cb=on_done)
    done.wait(timeout_s)
    return list(found)


def shut_down(runners, in_flight, timeout_s):
    if not in_flight.wait_idle(timeout_s):
        # Joining now could deadlock (see InFlight); leave without tearing the runners down.
        print("opendht_bench.py: operations still in flight at exit; not joining the nodes", file=sys.stderr)
        sys.stdout.flush()
        os._exit(1)
    stopped = []
    for runner in runners:
        event = threading.Event()
        runner.shutdown(event.set)  # its callback needs the GIL: wait for it before join() takes the GIL
        stopped.append(event)
    for event in stopped:
        event.wait(timeout_s)
    for runner in runners:
        runner.join()


def main():
    parser = argparse.ArgumentParser(description="OpenDHT baseline of bench/dht: store/get latency, bootstrap time "
                                                 "and memory of an in-process swarm on loopback")
    parser.add_argument("--nodes", type=int, default=64)
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=10, help="seconds per operation")
    parser.add_argument("--get-mode", choices=["first", "all"], default="first",
                        help="stop a get at the first value (like dedloc's kFirst) or wait for OpenDHT's whole lookup")
    parser.add_argument("--settle-timeout", type=float, default=30,
                        help="most seconds to wait for every node's own-id lookup before measuring")
    args = parser.parse_args()
    nodes, keys = args.nodes, args.keys

    config = dht.DhtConfig()
    config.setRateLimit(-1, -1)  # see the module docstring: every peer shares one IP here

    rng = random.Random(args.seed)
    runners = []
    in_flight = InFlight()
    rss_before = rss_kib()
    started = time.monotonic()
    try:
        for i in range(nodes):
            runner = dht.DhtRunner()
            runner.run(port=0, ipv4=LOOPBACK, config=config)
            runners.append(runner)
            if i == 0:
                continue
            through = runners[rng.randrange(i)]
            runner.bootstrap(LOOPBACK, str(through.getBound(socket.AF_INET).getPort()))
            join_deadline = time.monotonic() + args.timeout
            while good_nodes(runner) == 0:
                if time.monotonic() > join_deadline:
                    sys.exit(f"opendht_bench.py: node {i} did not join within {args.timeout} s")
                time.sleep(0.0002)
        bootstrap_s = time.monotonic() - started

        # Node 0 joined through nobody and OpenDHT never runs its own-id lookup; it learns peers from requests.
        # In small swarms a node's own-id lookup is sometimes created but never stepped ("last step: never");
        # so settled also means: every lookup started and no routing table grew for a second.
        settle_deadline = time.monotonic() + args.settle_timeout
        last_sizes, last_change = None, time.monotonic()
        while True:
            states = [own_lookup(r) for r in runners[1:]]
            sizes = [known_nodes(r) for r in runners]
            now = time.monotonic()
            if sizes != last_sizes:
                last_sizes, last_change = sizes, now
            if None not in states and (all(s == "done" for s in states) or now - last_change >= 1.0):
                break
            if now > settle_deadline:
                print(f"opendht_bench.py: {sum(s != 'done' for s in states)} nodes had not finished their own-id "
                      f"lookup after {args.settle_timeout} s; measuring anyway", file=sys.stderr)
                break
            time.sleep(0.05)
        settle_s = time.monotonic() - started - bootstrap_s

        values = []
        putter = []
        put_ms, get_ms = [], []
        put_ok = get_ok = 0
        hashes = [dht.InfoHash.get(f"bench-{k}") for k in range(keys)]

        sent_requests(runners)  # reset the counters
        puts_started = time.monotonic()
        for k in range(keys):
            values.append(bytes(rng.randrange(256) for _ in range(args.value_bytes)))
            putter.append(rng.randrange(nodes))
            t = time.monotonic()
            ok = put(runners[putter[k]], hashes[k], values[k], args.timeout, in_flight)
            put_ms.append((time.monotonic() - t) * 1000)
            put_ok += 1 if ok else 0
        puts_s = time.monotonic() - puts_started
        put_requests = sent_requests(runners) if in_flight.wait_idle(args.timeout) else None

        gets_started = time.monotonic()
        for k in range(keys):
            getter = rng.randrange(nodes)
            while nodes > 1 and getter == putter[k]:
                getter = rng.randrange(nodes)
            t = time.monotonic()
            found = get(runners[getter], hashes[k], args.timeout, args.get_mode == "first", in_flight)
            get_ms.append((time.monotonic() - t) * 1000)
            get_ok += 1 if found == [values[k]] else 0
        gets_s = time.monotonic() - gets_started
        get_requests = sent_requests(runners) if in_flight.wait_idle(args.timeout) else None

        out = {"impl": "opendht",
               "nodes": nodes,
               "keys": keys,
               "value_bytes": args.value_bytes,
               "bootstrap_s": bootstrap_s,
               "put_ms": summary_ms(put_ms),
               "get_ms": summary_ms(get_ms),
               "put_ops_per_s": keys / puts_s if puts_s > 0 else None,
               "get_ops_per_s": keys / gets_s if gets_s > 0 else None,
               "put_ok": put_ok,
               "get_ok": get_ok,
               "rpcs_per_put": put_requests / keys if keys and put_requests is not None else None,
               "rpcs_per_get": get_requests / keys if keys and get_requests is not None else None,
               "rss_kib_per_node": (rss_kib() - rss_before) / nodes,
               "settle_s": settle_s}
        print(json.dumps(out, separators=(",", ":")), flush=True)
    finally:
        shut_down(runners, in_flight, args.timeout)


if __name__ == "__main__":
    main()
