#!/usr/bin/python3
"""bench/allreduce: the baseline for `dedloc-avg bench` -- torch.distributed's gloo all-reduce.

N ranks (processes, forked before torch.distributed starts anything) meet at tcp://127.0.0.1:PORT, then
all-reduce (sum) one float32 tensor of --size bytes: one warm-up round, then --rounds timed rounds, each
after a barrier. Every rank times its all_reduce call; a round takes as long as its slowest rank. Rank r
holds r+1 everywhere, so every element of the sum must be n(n+1)/2 (checked after each round, untimed;
the tensor is refilled for the next round). The tensor is allocated and touched once.

Output: the same figures (and, with --json, the same JSON shape) as `dedloc-avg bench`, with
"impl": "gloo": algbw = bytes / time, busbw = algbw * 2(n-1)/n (nccl-tests' definition), GB = 1e9 bytes.

Run with Debian's python3-torch:  /usr/bin/python3 bench/allreduce/gloo_bench.py --peers 4 --size 64MiB
Exit codes: 0 ok, 1 wrong results or a rank failed, 2 usage.
"""
import argparse
import json
import multiprocessing as mp
import os
import queue
import re
import resource
import socket
import statistics
import sys
import time

UNITS = {"": 1, "B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "kB": 10**3, "KB": 10**3, "MB": 10**6, "GB": 10**9}


def parse_size(text):
    m = re.fullmatch(r"([0-9]*\.?[0-9]+)\s*([A-Za-z]*)", text)
    if not m or m.group(2) not in UNITS:
        raise argparse.ArgumentTypeError(f"--size '{text}': expected a size such as 64MiB, 256MiB or 100MB")
    size = int(round(float(m.group(1)) * UNITS[m.group(2)]))
    if size <= 0 or size % 4:
        raise argparse.ArgumentTypeError("--size must be a positive multiple of 4 bytes (float32)")
    return size


def cpu_seconds():
    """User + system CPU time of this process, all threads (gloo's included)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def enter_lab_host(netns):
    """Moves this process into a lab host's network namespace (`dedloc-lab up`, docs/lab.md) and points
    gloo at its one link: gloo otherwise picks its interface from the hostname, which resolves to loopback."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    with open(f"/run/netns/{netns}") as f:
        if libc.setns(f.fileno(), 0x40000000) != 0:  # CLONE_NEWNET
            raise OSError(ctypes.get_errno(), f"setns into {netns}")
    os.environ["GLOO_SOCKET_IFNAME"] = next(name for _, name in socket.if_nameindex() if name != "lo")


def rank_main(rank, world, port, elements, rounds, timeout, results, lab_hosts=None, dtype="float32"):
    try:
        master = "127.0.0.1"
        if lab_hosts:
            enter_lab_host(lab_hosts[rank][0])
            master = lab_hosts[0][1]
        import torch
        import torch.distributed as dist
        from datetime import timedelta

        dist.init_process_group("gloo", init_method=f"tcp://{master}:{port}", rank=rank, world_size=world,
                                timeout=timedelta(seconds=timeout))
        tensor = torch.full((elements,), float(rank + 1), dtype=getattr(torch, dtype))
        expected = world * (world + 1) / 2
        times, cpu, worst = [], [], 0.0
        for r in range(rounds + 1):
            dist.barrier()
            cpu_start = cpu_seconds()
            start = time.perf_counter()
            dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
            took = time.perf_counter() - start
            cpu_took = cpu_seconds() - cpu_start
            worst = max(worst, float(tensor.sub_(expected).abs_().max()) / expected)  # in place: no fresh pages
            tensor.fill_(float(rank + 1))
            if r > 0:
                times.append(took)
                cpu.append(cpu_took)
        dist.barrier()
        dist.destroy_process_group()
        results.put((rank, times, cpu, worst, None))
    except Exception as e:  # reported by the parent, which names the rank
        results.put((rank, [], [], 0.0, f"{type(e).__name__}: {e}"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--peers", type=int, default=4, help="ranks (processes), 2-64")
    parser.add_argument("--size", type=parse_size, default=parse_size("64MiB"), help="float32 tensor bytes: 64MiB, 256MiB")
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds (after one warm-up round)")
    parser.add_argument("--timeout", type=float, default=120, help="seconds the whole run may take")
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    parser.add_argument("--dtype", choices=["float32", "float16"], default="float32",
                        help="the tensor's type: --size/4 values of it (float16: what dedloc's fp16 codec sends)")
    parser.add_argument("--lab-hosts", default="", help="run rank i in the i-th lab host of a running `dedloc-lab up`, "
                        "given as NETNS@ADDRESS,... (root; bench/lab/run.sh)")
    args = parser.parse_args()
    lab_hosts = [tuple(h.split("@", 1)) for h in args.lab_hosts.split(",")] if args.lab_hosts else None
    if lab_hosts and (len(lab_hosts) != args.peers or any(len(h) != 2 for h in lab_hosts)):
        parser.error(f"--lab-hosts needs one NETNS@ADDRESS per rank ({args.peers})")
    if not 2 <= args.peers <= 64 or args.rounds < 1:
        parser.error("--peers must be 2-64 and --rounds at least 1")
    try:
        import torch  # noqa: F401  (checked here so that a missing package is one clear line)
        import torch.distributed as dist
        if not dist.is_available() or not dist.is_gloo_available():
            raise ImportError("torch.distributed with gloo is not available in this build")
    except ImportError as e:
        print(f"gloo_bench: error: cannot import torch.distributed ({e}); install Debian's python3-torch "
              "(apt-get install python3-torch) and run with /usr/bin/python3", file=sys.stderr)
        return 1

    elements = args.size // 4
    ctx = mp.get_context("fork")
    results = ctx.Queue()
    port = free_port() if not lab_hosts else 29500  # a lab host is a fresh namespace: the port is free
    procs = [ctx.Process(target=rank_main, args=(r, args.peers, port, elements, args.rounds, args.timeout, results, lab_hosts, args.dtype),
                         daemon=True) for r in range(args.peers)]
    for p in procs:
        p.start()
    deadline = time.monotonic() + args.timeout
    got, failure = {}, None
    while len(got) < args.peers and failure is None:
        try:
            rank, times, cpu, worst, err = results.get(timeout=0.2)
        except queue.Empty:
            dead = [r for r, p in enumerate(procs) if p.exitcode not in (None, 0) and r not in got]
            if dead:
                failure = f"rank {dead[0]} died (exit code {procs[dead[0]].exitcode})"
            elif time.monotonic() > deadline:
                failure = f"no result before the {args.timeout:g} s deadline"
            continue
        if err:
            failure = f"rank {rank}: {err}"
        got[rank] = (times, worst, cpu)
    if failure:
        for p in procs:
            if p.is_alive():
                p.kill()
        print(f"gloo_bench: error: {failure}", file=sys.stderr)
        return 1
    for p in procs:
        p.join(timeout=10)

    n = args.peers
    round_times = [max(got[r][0][i] for r in range(n)) for i in range(args.rounds)]
    med = statistics.median(round_times)
    round_cpu = [sum(got[r][2][i] for r in range(n)) for i in range(args.rounds)]
    algbw = args.size / med / 1e9
    busbw = algbw * 2 * (n - 1) / n
    worst = max(got[r][1] for r in range(n))
    ok = worst <= 1e-6
    if args.json:
        print(json.dumps({"impl": "gloo", "peers": n, "bytes": args.size, "codec": "none" if args.dtype == "float32" else "fp16", "rounds": args.rounds,
                          "times_s": round_times, "peer_times_s": [[got[r][0][i] for r in range(n)] for i in range(args.rounds)],
                          "median_s": med, "cpu_s": round_cpu,
                          "median_cpu_s": statistics.median(round_cpu), "algbw_gbps": algbw, "busbw_gbps": busbw, "max_rel_error": worst,
                          "tolerance_rel": 1e-6, "ok": ok}))
    else:
        print(f"gloo all-reduce: {n} ranks, {args.size / (1 << 20):g} MiB float32, torch {torch.__version__}")
        print(f"{'round':>6} {'time_s':>10} {'algbw_GB/s':>12} {'busbw_GB/s':>12} {'cpu_s':>8}")
        for i, t in enumerate(round_times):
            a = args.size / t / 1e9
            print(f"{i + 1:>6} {t:>10.4f} {a:>12.3f} {a * 2 * (n - 1) / n:>12.3f} {round_cpu[i]:>8.3f}")
        print(f"median {med:.4f} s, algbw {algbw:.3f} GB/s, busbw {busbw:.3f} GB/s, cpu {statistics.median(round_cpu):.3f} s; "
              f"max relative error {worst:.3g}")
    if not ok:
        print(f"gloo_bench: wrong results: relative error {worst:.3g}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
