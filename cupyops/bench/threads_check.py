"""The NumPy path's threads against the memory's limit (issue 27), in one process.

    python -m cupyops.bench.threads_check [--sizes full] [--rounds 7] [--json PATH]

For each case of the full size set (4096 x 4096 float32 unless said), interleaved in rounds
(each round starts with the next callable) and the best round kept:

* ``limit``: a 2-thread ``np.max`` over the same bytes (halves of the input, one
  ``concurrent.futures`` worker and the calling thread): what the memory gives two threads;
* ``cupyops``: the call on the library's threads (``--threads``, default its setting);
* ``1 thread``: the same call with ``cupyops.set_num_threads(1)``;
* ``numpy``: the composition a user would write (cupyops.bench.peers).

Goals (docs/performance.md, "Threads"): argmax over all axes and argmin over the last axis
within 10 % of the limit; count_nonzero of float32 within 50 % of it; argwhere and
nonzero_coordinates(size=n) at density 0.1 at least 1.15x NumPy; no case slower than NumPy
or than cupyops on one thread.
"""
from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from . import bench, peers

#: (op, case, dtype, goal): goal is ("limit", factor) or ("numpy", ratio) or None
CASES = (
    ("argmax", "all tie=first", "float32", ("limit", 1.10)),
    ("argmin", "last tie=first", "float32", ("limit", 1.10)),
    ("count_nonzero", "d=0.1", "float32", ("limit", 1.50)),
    ("argwhere", "d=0.1", "float32", ("numpy", 1.15)),
    ("nonzero_coordinates", "d=0.1 size=n", "float32", ("numpy", 1.15)),
)


def _limit(x, pool):
    """2-thread np.max over the halves of ``x``'s bytes."""
    flat = x.reshape(-1)
    h = flat.size // 2

    def run():
        other = pool.submit(np.max, flat[h:])
        np.max(flat[:h])
        other.result()
    return run


def _one_thread(call):
    from cupyops.core import threads as _threads

    def run():
        with _threads.using(1):
            call()
    return run


def time_rounds(fns, rounds):
    """Best seconds per call of each callable: batches of at least 20 ms, interleaved, each
    round starting with the next callable."""
    batch = []
    for f in fns:
        f()
        t0 = time.perf_counter()
        f()
        batch.append(max(1, min(200, int(0.02 / max(time.perf_counter() - t0, 1e-7)))))
    best = [float("inf")] * len(fns)
    gc_was = gc.isenabled()
    gc.disable()
    try:
        for r in range(rounds):
            for j in range(len(fns)):
                i = (j + r) % len(fns)
                t0 = time.perf_counter()
                for _ in range(batch[i]):
                    fns[i]()
                best[i] = min(best[i], (time.perf_counter() - t0) / batch[i])
    finally:
        if gc_was:
            gc.enable()
    return best


def measure(op, case, dtype, goal, mode, rounds, pool):
    """One row: seconds of each callable, the ratios and whether the goal is met."""
    c = next(c for c in bench.make_cases(mode, [dtype]) if c.op == op and c.case == case)
    x = bench.make_input(c)
    ours = bench.cupyops_call(c, "cpu")
    npf = peers.numpy_peer(c)[0]
    t, t1, tn, tl = time_rounds([lambda: ours(x), _one_thread(lambda: ours(x)),
                                 lambda: npf(x), _limit(x, pool)], rounds)
    row = {"op": op, "case": case, "dtype": dtype, "shape": list(x.shape),
           "seconds": t, "one_thread_seconds": t1, "numpy_seconds": tn, "limit_seconds": tl,
           "over_limit": t / tl, "vs_numpy": tn / t, "vs_one_thread": t1 / t}
    row["not_slower"] = row["vs_numpy"] >= 1.0 and row["vs_one_thread"] >= 1.0
    met = True
    if goal is not None:
        kind, v = goal
        row["goal"] = f"time <= {v:.2f} x limit" if kind == "limit" else f">= {v:.2f}x numpy"
        met = row["over_limit"] <= v if kind == "limit" else row["vs_numpy"] >= v
    row["met"] = met and row["not_slower"]
    return row


def format_rows(rows, threads):
    out = [f"NumPy path on {threads} threads; limit = 2-thread np.max over the same bytes"]
    for r in rows:
        out.append(f"  {r['op']:20s} {r['case']:14s} {r['dtype']:8s} "
                   f"{r['seconds'] * 1e3:8.2f} ms  limit {r['limit_seconds'] * 1e3:7.2f}  "
                   f"x limit {r['over_limit']:5.2f}  vs numpy {r['vs_numpy']:5.2f}x  "
                   f"vs 1 thread {r['vs_one_thread']:5.2f}x  {r.get('goal', '')}  "
                   f"{'ok' if r['met'] else 'MISSED'}"
                   f"{'' if r['not_slower'] else ' (slower than numpy or 1 thread)'}")
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m cupyops.bench.threads_check",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="full", choices=tuple(bench.SIZES))
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    from cupyops.core import threads as _threads
    with _threads.using(args.threads) as n, ThreadPoolExecutor(1) as pool:
        rows = [measure(*c, args.sizes, args.rounds, pool) for c in CASES]
    print("\n".join(format_rows(rows, n)))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"threads": n, "rows": rows}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
