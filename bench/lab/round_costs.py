#!/usr/bin/python3
"""Where a lab run's averaging rounds spend their time, from a run with peer logs at debug level:

    build/tools/dedloc-lab/dedloc-lab run bench/lab/scenarios/volunteers-churn.yaml \
        --work-dir D --report D.json --peer-log-level debug
    bench/lab/round_costs.py D [D2 ...]

For each work directory (the peers' .err logs and lines.jsonl), over the measured window:
  - a trainer's cycle between two averaged steps: computing (step to the next step's round) and the round;
  - the round split: waiting for the group after our batch, the group's all-reduce, and the rest (the
    cross-bucket stage: the carriers' round and the hand-on, docs/recipes.md "Group buckets");
  - how the groups formed: every expected sender in, a quorum's grace over, or the deadline (the leaders'
    debug lines, avg/matchmaking.cpp), for the buckets' rounds (grad.N.bK) and the carriers' (grad.N.x);
  - the carriers: how far apart they came out of their buckets, their matchmaking and the rest;
  - step reports with part of the vector not averaged, aux peers that cut senders off, resyncs, missed
    rounds whose result was taken.
Reading it: bench/lab/README.md, "Where churn's cost lies".
"""
import argparse
import collections
import glob
import json
import os
import re
import statistics
from datetime import datetime

INFRA = re.compile(r"^(dht|relay|aux)-")
LOOK = re.compile(r"looking for a group under '[^']*_grad\.(\d+)\.(b\d+|x)'")
LEAD = re.compile(r"leading a group of (\d+) \((\d+) of (\d+) expected senders; ([^)]*)\)")
JOINED = re.compile(r"joined a group of (\d+)")
STEP = re.compile(r" I train: epoch (\d+): \d+ samples here, averaged in a group")
ACROSS = re.compile(r" D train: epoch (\d+): across \d+ buckets: (carrying|received)")


def wall(line):
    return datetime.fromisoformat(line[:23]).timestamp()


def summary(values):
    if not values:
        return "n 0"
    ordered = sorted(values)
    return "median %.2f, mean %.2f, p90 %.2f (n %d)" % (
        statistics.median(ordered), statistics.mean(ordered), ordered[int(0.9 * (len(ordered) - 1))], len(ordered))


def peer_logs(work):
    for path in sorted(glob.glob(os.path.join(work, "*.err"))):
        name = os.path.basename(path)[:-4]
        lines = [l for l in open(path, errors="replace") if l[:2] == "20"]
        yield name, lines


def step_reports(work):
    """lines.jsonl's averaged steps: (seconds since the lab started, peer, report)."""
    out = []
    for line in open(os.path.join(work, "lines.jsonl"), errors="replace"):
        parts = line.split(" ", 2)
        if len(parts) < 3:
            continue
        try:
            report = json.loads(parts[2])
        except ValueError:
            continue
        if report.get("event") == "averaged":
            out.append((float(parts[0]), parts[1], report))
    return out


def lab_start(work, reports):
    """The wall time of the lab's start: step lines in the logs against the same steps in lines.jsonl."""
    at = {(p, r["epoch"]): t for t, p, r in reports}
    offsets = []
    for name, lines in peer_logs(work):
        for line in lines:
            m = STEP.search(line)
            if m and (name, int(m.group(1))) in at:
                offsets.append(wall(line) - at[(name, int(m.group(1)))])
    return statistics.median(offsets) if offsets else None


def analyse(work, window):
    if not os.path.exists(os.path.join(work, "lines.jsonl")):
        print(work, ": no lines.jsonl (dedloc-lab writes it when the run ends)")
        return
    reports = step_reports(work)
    start = lab_start(work, reports)
    if start is None:
        print(work, ": no step lines to align the logs with (were the peers at --peer-log-level debug?)")
        return
    lo, hi = window
    inside = lambda t: lo <= t - start <= hi
    print(work)

    # The cycle between two averaged steps, from the step reports.
    last, cycle, rounds = {}, [], []
    for t, peer, r in sorted(reports, key=lambda x: x[0]):
        if INFRA.match(peer):
            continue
        if peer in last and last[peer][1] == r["epoch"] - 1 and lo <= t <= hi:
            gap = t - last[peer][0]
            cycle.append(gap - r["round_seconds"])
            rounds.append(r["round_seconds"])
        last[peer] = (t, r["epoch"])
    print("  a trainer's cycle: computing", summary(cycle))
    print("                     round    ", summary(rounds))

    formed, carriers_out, carrier_mm, carrier_rest = collections.Counter(), collections.defaultdict(list), [], []
    after_batch, all_reduce, rest = [], [], []
    aux_rounds = aux_cut = 0
    for name, lines in peer_logs(work):
        if name.startswith("aux-"):
            for line in lines:
                if " I aux: reduced for a group" in line and inside(wall(line)):
                    aux_rounds += 1
                    aux_cut += "without" in line
        if INFRA.match(name):
            continue
        look = None  # (epoch, stage, wall time)
        group_at = {}  # epoch -> when our bucket's group formed
        x_formed = None
        for line in lines:
            t = wall(line)
            m = LOOK.search(line)
            if m:
                look = (int(m.group(1)), m.group(2)[0], t)
                if look[1] == "x" and inside(t):
                    carriers_out[look[0]].append(t)
                x_formed = None
                continue
            m = LEAD.search(line)
            if (m or JOINED.search(line)) and look:
                if look[1] == "b":
                    group_at.setdefault(look[0], t)
                else:
                    x_formed = t
                    if inside(t):
                        carrier_mm.append(t - look[2])
                if m and inside(t):
                    formed[("bucket" if look[1] == "b" else "carriers'", m.group(4))] += 1
                continue
            m = ACROSS.search(line)
            if m and m.group(2) == "carrying" and x_formed and inside(t):
                carrier_rest.append(t - x_formed)
        # The round split, per step report: its batch ended round_seconds before the step line.
        for t_rel, peer, r in reports:
            if peer != name or not (lo <= t_rel <= hi) or (r["epoch"] - 1) not in group_at:
                continue
            step_wall = start + t_rel
            batch_end = step_wall - r["round_seconds"]
            waited = max(0.0, group_at[r["epoch"] - 1] - batch_end)
            after_batch.append(waited)
            all_reduce.append(r["averaging_seconds"])
            rest.append(max(0.0, r["round_seconds"] - waited - r["averaging_seconds"]))
    print("  the round: waiting for the group after our batch", summary(after_batch))
    print("             our bucket's all-reduce               ", summary(all_reduce))
    print("             the rest (the cross-bucket stage)     ", summary(rest))
    for stage in ("bucket", "carriers'"):
        counts = {why: n for (s, why), n in formed.items() if s == stage}
        total = sum(counts.values())
        if total:
            print("  %s groups formed: %s" % (stage, ", ".join(
                "%s %d (%.0f%%)" % (why, n, 100.0 * n / total) for why, n in sorted(counts.items(), key=lambda kv: -kv[1]))))
    spreads = [max(ts) - min(ts) for ts in carriers_out.values() if len(ts) >= 2]
    print("  carriers: first to last out of their buckets", summary(spreads))
    print("            matchmaking among them            ", summary(carrier_mm))
    print("            their round, the rest             ", summary(carrier_rest))

    partial = [r for t, p, r in reports if lo <= t <= hi and not INFRA.match(p) and r.get("averaged_fraction", 1) < 1]
    measured = [r for t, p, r in reports if lo <= t <= hi and not INFRA.match(p)]
    below_half = sum(1 for r in partial if r["averaged_fraction"] < 0.5)
    taken = sum(1 for r in measured if "took_result_from" in r)
    print("  step reports: %d, %d with part of the vector not averaged (%d below half), %d results of missed rounds taken"
          % (len(measured), len(partial), below_half, taken))
    resyncs = sum(1 for name, lines in peer_logs(work) if not INFRA.match(name)
                  for line in lines if " I train: resynced:" in line and inside(wall(line)))
    print("  resyncs (a trainer's parameters left the majority's): %d; aux peers' rounds: %d, %d of them cut senders off"
          % (resyncs, aux_rounds, aux_cut))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("work", nargs="+", help="a dedloc-lab --work-dir of a run at --peer-log-level debug")
    parser.add_argument("--window", nargs=2, type=float, default=(60, 300), metavar=("FROM", "TO"),
                        help="seconds since the lab's start to measure over (default: 60 300, the scenarios' "
                             "warm-up and duration)")
    args = parser.parse_args()
    for work in args.work:
        analyse(work, tuple(args.window))


if __name__ == "__main__":
    main()
