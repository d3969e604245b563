#!/usr/bin/python3
"""Markdown table of bench/dht results: reads the JSON lines bench_dht and opendht_bench.py printed (one run
each, run.sh adds idle_cpu_pct), groups them by (nodes, impl) and prints the median of every figure across the
rounds ("conns/node": a dedloc node's open outgoing connections at the end), then the ratios
dedloc / OpenDHT (and dedloc-zmq / OpenDHT: every RPC over ZeroMQ) of the median put and get latencies and of
the memory per node where both ran at that size (below 1: dedloc faster or smaller).
    bench/dht/summarize.py RESULTS.jsonl
"""
import json
import statistics
import sys


def median(runs, get):
    values = [v for v in (get(r) for r in runs) if v is not None]
    return statistics.median(values) if values else None


def fmt(v, digits=2):
    if v is None:
        return "–"
    return f"{v:,.{digits}f}"


def pct(v):
    return "–" if v is None else f"{v:.0f}%"


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: summarize.py RESULTS.jsonl")
    groups = {}
    with open(sys.argv[1]) as f:
        for line in f:
            line = line.strip()
            if not line.startswith("{"):
                continue
            run = json.loads(line)
            groups.setdefault((run["nodes"], run["impl"]), []).append(run)
    if not groups:
        sys.exit("summarize.py: no results")

    order = {"dedloc": 0, "dedloc-zmq": 1, "opendht": 2}
    rows = sorted(groups, key=lambda g: (g[0], order.get(g[1], 2), g[1]))
    print("| nodes | impl | rounds | keys | bootstrap s | put median ms | put p99 ms | get median ms | get p99 ms "
          "| put ops/s | get ops/s | put ok | get ok | RSS KiB/node | conns/node | RPCs/put | RPCs/get | idle CPU |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for nodes, impl in rows:
        runs = groups[(nodes, impl)]
        keys = runs[0]["keys"]
        ok = lambda field: median(runs, lambda r: r[field] / r["keys"] if r["keys"] else None)
        print(f"| {nodes} | {impl} | {len(runs)} | {keys} "
              f"| {fmt(median(runs, lambda r: r['bootstrap_s']), 3)} "
              f"| {fmt(median(runs, lambda r: r['put_ms']['median']), 3)} "
              f"| {fmt(median(runs, lambda r: r['put_ms']['p99']), 3)} "
              f"| {fmt(median(runs, lambda r: r['get_ms']['median']), 3)} "
              f"| {fmt(median(runs, lambda r: r['get_ms']['p99']), 3)} "
              f"| {fmt(median(runs, lambda r: r['put_ops_per_s']), 0)} "
              f"| {fmt(median(runs, lambda r: r['get_ops_per_s']), 0)} "
              f"| {fmt(100 * ok('put_ok'), 1)}% "
              f"| {fmt(100 * ok('get_ok'), 1)}% "
              f"| {fmt(median(runs, lambda r: r['rss_kib_per_node']), 0)} "
              f"| {fmt(median(runs, lambda r: r.get('connections_per_node')), 1)} "
              f"| {fmt(median(runs, lambda r: r.get('rpcs_per_put')), 1)} "
              f"| {fmt(median(runs, lambda r: r.get('rpcs_per_get')), 1)} "
              f"| {pct(median(runs, lambda r: r.get('idle_cpu_pct')))} |")

    both = sorted({n for n, _ in groups if (n, "dedloc") in groups and (n, "opendht") in groups})
    if both:
        print()
        print("| nodes | impl | put median / OpenDHT | get median / OpenDHT | RSS per node / OpenDHT |")
        print("|---|---|---|---|---|")
        for n in both:
            for impl in ("dedloc", "dedloc-zmq"):
                if (n, impl) not in groups:
                    continue
                ratios = []
                for get in (lambda r: r["put_ms"]["median"], lambda r: r["get_ms"]["median"],
                            lambda r: r["rss_kib_per_node"]):
                    d = median(groups[(n, impl)], get)
                    o = median(groups[(n, "opendht")], get)
                    ratios.append(f"{d / o:.3g}x" if d is not None and o else "–")
                print(f"| {n} | {impl} | {ratios[0]} | {ratios[1]} | {ratios[2]} |")

    settle = {n: median(runs, lambda r: r.get("settle_s")) for (n, impl), runs in groups.items() if impl == "opendht"}
    if any(v is not None for v in settle.values()):
        print()
        print("OpenDHT settle (own-id lookups after joining, not in bootstrap s): " +
              ", ".join(f"{n} nodes {fmt(v, 1)} s" for n, v in sorted(settle.items()) if v is not None))


if __name__ == "__main__":
    main()
