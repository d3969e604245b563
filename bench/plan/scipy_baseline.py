#!/usr/bin/env python3
"""Solves plan_bench's group instances with SciPy's linprog(method="highs") and prints both side by side.

Reads plan_bench's JSON (path or stdin). The LP is hivemind's group program (group_shares.hpp), with the
same bandwidth scaling as dedloc's lpsolve reference (b' = b / max b), sparse constraint matrices, and
only the linprog call timed (matrix construction excluded: the most favourable setting for SciPy).
Run by Debian's /usr/bin/python3 with python3-scipy.
"""
import json
import statistics
import sys
import time

import numpy as np
import scipy
from scipy.optimize import linprog
from scipy.sparse import csr_matrix

NODE, CLIENT, AUX = 0, 1, 2


def group_lp(group):
    n = len(group)
    b = np.array([m["bandwidth"] for m in group], dtype=float)
    scale = b.max()
    b = b / scale
    roles = [m["role"] for m in group]
    senders = sum(1 for r in roles if r != AUX)
    rows, cols, vals, rhs = [], [], [], []
    for i, role in enumerate(roles):  # variables: w_0..w_{n-1}, xi'
        if role == NODE:
            rows += [i, i]; cols += [i, n]; vals += [senders - 2, -b[i]]; rhs.append(-1.0)
        elif role == CLIENT:
            rows += [i]; cols += [n]; vals += [-b[i]]; rhs.append(-1.0)
        else:
            rows += [i, i]; cols += [i, n]; vals += [senders, -b[i]]; rhs.append(0.0)
    a_ub = csr_matrix((vals, (rows, cols)), shape=(n, n + 1))
    a_eq = csr_matrix(np.concatenate([np.ones(n), [0.0]]).reshape(1, -1))
    bounds = [(0.0, 0.0) if r == CLIENT else (0.0, None) for r in roles] + [(0.0, None)]
    c = np.zeros(n + 1)
    c[n] = 1.0
    return dict(c=c, A_ub=a_ub, b_ub=np.array(rhs), A_eq=a_eq, b_eq=np.array([1.0]), bounds=bounds), scale


def main():
    data = json.load(open(sys.argv[1]) if len(sys.argv) > 1 else sys.stdin)
    repeats = data["repeats"]
    print(f"SciPy {scipy.__version__}, linprog(method='highs'); medians over {repeats} runs "
          f"(lpsolve LP and full plan: fewer, see plan_bench.cpp)\n")
    print("| n | dedloc group program (closed form) | dedloc group program (lpsolve LP) | SciPy HiGHS "
          "| SciPy / closed form | objective rel. diff (closed vs HiGHS) | full plan | plan method |")
    print("|---|---|---|---|---|---|---|---|")
    worst = 0.0
    for entry in data["sizes"]:
        kwargs, scale = group_lp(entry["group"])
        samples = []
        result = None
        for _ in range(repeats):
            start = time.perf_counter()
            result = linprog(method="highs", **kwargs)
            samples.append(time.perf_counter() - start)
        if result.status != 0:
            print(f"SciPy failed at n={entry['n']}: {result.message}", file=sys.stderr)
            return 1
        scipy_s = statistics.median(samples)
        xi_scipy = result.x[-1] / scale
        diff = abs(xi_scipy - entry["group_xi"]) / entry["group_xi"]
        worst = max(worst, diff)
        closed = entry["group_closed_form_seconds"]
        print(f"| {entry['n']} | {closed * 1e6:.2f} µs | {entry['group_lpsolve_seconds'] * 1e3:.3f} ms "
              f"| {scipy_s * 1e3:.3f} ms | {scipy_s / closed:,.0f}x | {diff:.1e} "
              f"| {entry['plan_seconds'] * 1e3:.2f} ms | {entry['plan_method']} |")
    print("\nexact MILP alone (no heuristic bound) and as planned (seeded with the heuristic's rate):\n")
    print("| n | MILP alone | MILP seeded | method |")
    print("|---|---|---|---|")
    for m in data["milp"]:
        print(f"| {m['n']} | {m['seconds'] * 1e3:.1f} ms | {m['seeded_seconds'] * 1e3:.1f} ms | {m['method']} |")
    if worst > 1e-6:
        print(f"objectives differ by {worst:.1e} (relative)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
