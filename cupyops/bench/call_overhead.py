"""The large-call overhead of the NumPy path (issue 36): how much longer a large cupyops call
takes than the NumPy routine it ends in, in one process.

    python -m cupyops.bench.call_overhead [--rounds 41] [--threads N] [--json PATH]

Each case is a large input whose cupyops call ends in one NumPy routine (``ndarray.argmax``
along rows or over everything, NumPy's count of nonzeros): cupyops and the routine alone
(called as cupyops calls it: the C method, no Python wrapper) alternate in rounds of a few
milliseconds each; the difference of each pair of neighbouring rounds is one sample, and the
**median** of the samples is the overhead (the machine's noise moves both sides of a pair
alike). On one thread the clock is the calling thread's CPU time (``--clock``): on a busy
machine other processes take the cores in slices of a few milliseconds, which the wall clock
would lay on whichever side a round falls. The noise stated is half the spread between the
samples' quartiles. Goal: at most 1.5 µs. On the library's threads (default: its setting) a
call splits among the threads where its layout measured that faster
(cupyops.core.threads.Choice), so the overhead may be negative.
"""
from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time

import numpy as np

GOAL_US = 1.5


def _cases():
    """(name, input maker, cupyops call, the NumPy routine it ends in)."""
    import inspect

    import cupyops as co
    rng = np.random.default_rng(5)
    f32 = lambda n: rng.standard_normal((n, n)).astype(np.float32)  # noqa: E731
    early = lambda: rng.random((1024, 1024)) < 0.5                  # noqa: E731 (a True first)
    argmax = np.ndarray.argmax
    count = inspect.unwrap(np.count_nonzero)   # (no __array_function__ dispatch, as cupyops)
    return [
        ("argmax last axis, float32 1024x1024", lambda: f32(1024),
         lambda x: co.argmax(x, axis=1), lambda x: argmax(x, 1)),
        ("argmax last axis, float32 4096x4096", lambda: f32(4096),
         lambda x: co.argmax(x, axis=1), lambda x: argmax(x, 1)),
        ("argmax all axes, float32 1024x1024", lambda: f32(1024),
         lambda x: co.argmax(x), lambda x: argmax(x)),
        ("argmax all axes, bool 1024x1024, an early True", early,
         lambda x: co.argmax(x), lambda x: argmax(x)),
        ("argmin all axes, bool 1024x1024, an early False", lambda: ~early(),
         lambda x: co.argmin(x), lambda x: np.ndarray.argmin(x)),
        ("count_nonzero, int8 1024x1024", lambda: early().astype(np.int8),
         lambda x: co.count_nonzero(x), count),
        ("count_nonzero, bool 1024x1024", early, lambda x: co.count_nonzero(x), count),
        ("argmax decode, float32 1x131072",
         lambda: rng.standard_normal((1, 131072)).astype(np.float32),
         lambda x: co.argmax(x, axis=1), lambda x: argmax(x, 1)),
    ]


def _round(fn, x, n, clock=time.perf_counter):
    t0 = clock()
    for _ in range(n):
        fn(x)
    return (clock() - t0) / n


def measure(name, x, ours, routine, rounds, target=3e-3, clock=time.perf_counter):
    """One row: the median and quartile noise of (cupyops - routine) per call, in µs, by
    ``clock`` (the wall clock, or this thread's CPU time: other processes' time slices, which
    a busy machine deals in rounds of a few ms, then fall on neither side)."""
    for _ in range(3):
        ours(x), routine(x)
    n = max(1, min(20000, int(target / max(_round(routine, x, 3), 1e-7))))
    diffs, mine, theirs = [], [], []
    gc_was = gc.isenabled()
    gc.disable()
    try:
        for r in range(rounds):
            a, b = (ours, routine) if r % 2 == 0 else (routine, ours)
            ta, tb = _round(a, x, n, clock), _round(b, x, n, clock)
            t_ours, t_routine = (ta, tb) if a is ours else (tb, ta)
            mine.append(t_ours)
            theirs.append(t_routine)
            diffs.append(t_ours - t_routine)
    finally:
        if gc_was:
            gc.enable()
    q = statistics.quantiles(diffs, n=4)
    over = statistics.median(diffs) * 1e6
    return {"case": name, "us": statistics.median(mine) * 1e6,
            "routine_us": statistics.median(theirs) * 1e6, "over_us": over,
            "noise_us": (q[2] - q[0]) / 2 * 1e6, "rounds": rounds, "calls_per_round": n,
            "met": over <= GOAL_US}


def format_rows(rows, threads, clock="wall"):
    out = [f"large-call overhead on {threads} thread(s), {clock} clock: median over rounds of "
           f"(cupyops - the NumPy routine it ends in), goal <= {GOAL_US} µs"]
    w = max(len(r["case"]) for r in rows)
    for r in rows:
        out.append(f"  {r['case']:<{w}}  cupyops {r['us']:9.2f} µs  "
                   f"routine {r['routine_us']:9.2f} µs"
                   f"  over {r['over_us']:+6.2f} µs ± {r['noise_us']:.2f}  "
                   f"{'ok' if r['met'] else 'MISSED'}")
    out.append(f"goals met: {sum(r['met'] for r in rows)} of {len(rows)}")
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m cupyops.bench.call_overhead",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=41)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--cases", default=None, help="substring of the case names")
    p.add_argument("--clock", choices=("wall", "cpu"), default=None,
                   help="wall clock, or the calling thread's CPU time (default: cpu on one "
                   "thread, where a busy machine's time slices would otherwise land in the "
                   "rounds; wall on several)")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    from cupyops.core import threads as _threads
    with _threads.using(args.threads) as n:
        kind = args.clock or ("cpu" if n == 1 else "wall")
        clock = time.thread_time if kind == "cpu" else time.perf_counter
        rows = [measure(name, make(), ours, routine, args.rounds, clock=clock)
                for name, make, ours, routine in _cases()
                if args.cases is None or args.cases in name]
    print("\n".join(format_rows(rows, n, kind)))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"threads": n, "clock": kind, "rows": rows}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
