"""The NumPy path's threads against one thread and the memory's limit (issues 27, 36), in one
process.

    python -m cupyops.bench.threads_check [--sizes full] [--rounds 8] [--cases REGEX]
                                          [--dtypes float32,...] [--goals-only] [--json PATH]

Every case of the benchmark's size set (cupyops.bench.cases, default dtypes, the decode cases
too; 4096 x 4096 at the full sizes), each callable timed in interleaved rounds (each round
in an order where each callable follows every other equally often), the best round kept:

* ``cupyops``: the call on the library's threads (``--threads``, default its setting);
* ``1 thread``: the same call with ``cupyops.set_num_threads(1)``;
* ``numpy``: the composition a user would write (cupyops.bench.peers);
* ``limit``: a 2-thread ``np.max`` over the same bytes (halves of the input, one
  ``concurrent.futures`` worker and the calling thread): what the memory gives two threads.

Every case: threads never slow a call down (``vs 1 thread`` >= 1, within the run's noise: the
median over callables of (median round / best round - 1), stated in the output). The goals of
issue 27 (docs/performance.md, "Threads"): argmax over all axes and argmin over the last axis
within 10 % of the limit; count_nonzero of float32 within 50 % of it; argwhere and
nonzero_coordinates(size=n) at density 0.1 at least 1.15x NumPy.
"""
from __future__ import annotations

import argparse
import gc
import json
import re
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from . import bench, peers

#: (op, case, dtype, goal): goal is ("limit", factor) or ("numpy", ratio)
CASES = (
    ("argmax", "all tie=first", "float32", ("limit", 1.10)),
    ("argmin", "last tie=first", "float32", ("limit", 1.10)),
    ("count_nonzero", "d=0.1", "float32", ("limit", 1.50)),
    ("argwhere", "d=0.1", "float32", ("numpy", 1.15)),
    ("nonzero_coordinates", "d=0.1 size=n", "float32", ("numpy", 1.15)),
)
GOALS = {(op, case, dtype): goal for op, case, dtype, goal in CASES}


def _limit(x, pool):
    """2-thread np.max over the halves of ``x``'s bytes (any dtype: read as bytes)."""
    import numpy as np
    flat = x.reshape(-1).view(np.uint8)
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


def balanced_orders(n: int) -> list:
    """Orders of ``n`` callables in which each follows every other equally often (a Williams
    design: ``n`` orders for even ``n``, ``2n`` for odd). A plain rotation (each round
    starting with the next callable) gives each callable the same predecessor in every round:
    here the library's call always ran right after the 2-thread ``np.max`` limit, and the
    one-thread call always after the library's, on the data it had just read."""
    first, lo, hi = [0], 1, n - 1
    while len(first) < n:
        first.append(lo)
        lo += 1
        if len(first) < n:
            first.append(hi)
            hi -= 1
    orders = [[(v + i) % n for v in first] for i in range(n)]
    return orders + [o[::-1] for o in orders] if n % 2 else orders


def time_rounds(fns, rounds):
    """``(best, rounds)``: the best seconds per call of each callable and every round's
    seconds, batches of at least 20 ms, interleaved, the rounds in the orders of
    :func:`balanced_orders`."""
    batch = []
    for f in fns:
        f()
        t0 = time.perf_counter()
        f()
        batch.append(max(1, min(200, int(0.02 / max(time.perf_counter() - t0, 1e-7)))))
    seen = [[] for _ in fns]
    gc_was = gc.isenabled()
    gc.disable()
    try:
        orders = balanced_orders(len(fns))
        for r in range(rounds):
            for i in orders[r % len(orders)]:
                t0 = time.perf_counter()
                for _ in range(batch[i]):
                    fns[i]()
                seen[i].append((time.perf_counter() - t0) / batch[i])
    finally:
        if gc_was:
            gc.enable()
    return [min(s) for s in seen], seen


def noise_of(seen) -> float:
    """The run's noise: the median over callables of (median round / best round - 1)."""
    return statistics.median(statistics.median(s) / min(s) - 1 for s in seen)


def measure(case, rounds, pool):
    """One row: seconds of each callable, the ratios, the noise and the verdicts."""
    x = bench.make_input(case)
    ours = bench.cupyops_call(case, "cpu")
    npf = peers.numpy_peer(case)[0]
    (t, t1, tn, tl), seen = time_rounds([lambda: ours(x), _one_thread(lambda: ours(x)),
                                         lambda: npf(x), _limit(x, pool)], rounds)
    noise = noise_of(seen)
    row = {"op": case.op, "case": case.case, "dtype": case.dtype.name,
           "shape": list(x.shape), "seconds": t, "one_thread_seconds": t1,
           "numpy_seconds": tn, "limit_seconds": tl, "over_limit": t / tl,
           "vs_numpy": tn / t, "vs_one_thread": t1 / t, "noise": noise}
    # threads never slow a call down: no slower than one thread beyond the run's noise
    row["not_slower"] = row["vs_one_thread"] >= 1 / (1 + noise)
    met = row["not_slower"]
    goal = GOALS.get((case.op, case.case, case.dtype.name))
    if goal is not None:
        kind, v = goal
        row["goal"] = f"time <= {v:.2f} x limit" if kind == "limit" else f">= {v:.2f}x numpy"
        met = met and (row["over_limit"] <= v if kind == "limit" else row["vs_numpy"] >= v)
    row["met"] = met
    return row


def format_rows(rows, threads):
    out = [f"NumPy path on {threads} threads; limit = 2-thread np.max over the same bytes; "
           f"noise = median over callables of (median round / best round - 1)"]
    for r in rows:
        shape = "x".join(map(str, r["shape"]))
        out.append(f"  {r['op']:20s} {r['case']:17s} {r['dtype']:9s} {shape:12s} "
                   f"{r['seconds'] * 1e3:8.3f} ms  x limit {r['over_limit']:5.2f}  "
                   f"vs numpy {r['vs_numpy']:6.2f}x  vs 1 thread {r['vs_one_thread']:5.2f}x  "
                   f"noise {100 * r['noise']:4.1f}%  {r.get('goal', '')}  "
                   f"{'ok' if r['met'] else 'MISSED'}"
                   f"{'' if r['not_slower'] else ' (slower than 1 thread)'}")
    slower = [r for r in rows if not r["not_slower"]]
    goals = [r for r in rows if "goal" in r]
    out.append(f"{len(rows)} cases: {len(rows) - len(slower)} at least as fast on {threads} "
               f"threads as on one (within the noise); goals met: "
               f"{sum(r['met'] for r in goals)} of {len(goals)}")
    return out


def select(args):
    """The cases to run: every case of the size set for the dtypes (the goal rows alone with
    ``--goals-only``), filtered by ``--cases``."""
    dtypes = args.dtypes.split(",") if args.dtypes else list(bench.DTYPES)
    if args.goals_only:
        dtypes = sorted({d for _, _, d, _ in CASES})
    cases = bench.make_cases(args.sizes, dtypes)
    if args.goals_only:
        cases = [c for c in cases if (c.op, c.case, c.dtype.name) in GOALS]
    if args.cases:
        pat = re.compile(args.cases)
        cases = [c for c in cases if pat.search(c.id)]
    return cases


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m cupyops.bench.threads_check",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="full", choices=tuple(bench.SIZES))
    p.add_argument("--rounds", type=int, default=8)   # (each order of 4 callables twice)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--cases", default=None, help="regex on the case id op/case/dtype")
    p.add_argument("--dtypes", default=None, help="comma-separated dtypes (default: the "
                   "benchmark's)")
    p.add_argument("--goals-only", action="store_true", help="issue 27's goal rows only")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    from cupyops.core import threads as _threads
    cases = select(args)
    with _threads.using(args.threads) as n, ThreadPoolExecutor(1) as pool:
        rows = []
        for c in cases:
            rows.append(measure(c, args.rounds, pool))
            print("\n".join(format_rows(rows[-1:], n)[1:2]), file=sys.stderr, flush=True)
    print("\n".join(format_rows(rows, n)))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"threads": n, "rows": rows}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
