"""The benchmark's ``overhead`` section: host time per call, against NumPy in the same process.

The tables of the device the benchmark runs on, each value the median of 21 interleaved rounds
(cupyops and its peer alternate, so a change in the machine's load hits both). The rounds' spread
is the measurement's noise: half the interquartile range of the rounds' ratios, as a share of
their median, printed beside each ratio. A goal is **missed** only when it is missed by more than
that noise (even the rounds' upper quartile misses it); a miss within the noise is **too close to
call**: the machine was too busy to judge that goal.

* **kernel path** (``simt`` on simt, or ``cuda`` with CuPy input on a GPU), inside
  ``cupyops.testing.dry_run()``: validation, planning and packing, with each launch handed to a
  recorder. Steady state (a layout seen before) and the first call of a new layout, both against
  ``np.argmax`` of 8 float32 elements. Goals: ratio ≥ 1/6 steady, ≥ 1/25 first call.
* **CPU path, small inputs** (≤ 4,096 elements; the ``cpu`` device): cupyops against the NumPy
  composition a NumPy user would write. Goal: ratio ≥ 0.4, or cupyops within NumPy + 2 µs.
* **CPU path at 1 M elements** (``cpu``): the same, goal ratio ≥ 0.95.
* **GPU full call** (``cuda`` only): cupyops on CuPy input against ``cupy.argmax`` /
  ``cupy.nonzero`` and ``torch.argmax`` / ``torch.nonzero_static``, host + launch + kernel.

Ratios follow the benchmark's convention: peer time / cupyops time (> 1: cupyops is faster).
"""
from __future__ import annotations

import statistics
import time

import numpy as np

__all__ = ["run", "format_tables", "GOALS", "ROUNDS", "judge"]

GOALS = {"steady": 1 / 6, "first": 1 / 25, "small": 0.4, "large": 0.95}
SMALL_SLACK_S = 2e-6
#: interleaved rounds per row: enough for the quartiles of the rounds' ratios
ROUNDS = 21


def _per_call(fn, number):
    t0 = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - t0) / number


def _interleaved(a, b, repeats, number):
    """Seconds per call of ``a`` and ``b`` in each of ``repeats`` alternating rounds."""
    ta, tb = [], []
    for _ in range(repeats):
        ta.append(_per_call(a, number))
        tb.append(_per_call(b, number))
    return ta, tb


def _quartiles(v):
    v = sorted(v)
    return tuple(v[int(q * (len(v) - 1) + 0.5)] for q in (0.25, 0.5, 0.75))


def judge(ours, peer, goal, slack=None):
    """``(verdict, noise)`` of a goal "peer / ours >= goal (or ours <= peer + slack)" from the
    seconds per call of each round: "met" on the medians; else "missed" when even the rounds'
    upper quartile of the ratio (lower quartile of ours - peer) misses it, and "busy" (too
    close to call) when only the noise separates it from the goal. ``noise``: half the
    interquartile range of the rounds' ratios over their median."""
    ratios = [p / o for o, p in zip(ours, peer)]
    q1, med, q3 = _quartiles(ratios)
    noise = (q3 - q1) / 2 / med

    def meets(ratio, excess):
        return ratio >= goal or (slack is not None and excess <= slack)
    if meets(statistics.median(peer) / statistics.median(ours),
             statistics.median(ours) - statistics.median(peer)):
        return "met", noise
    best_excess = _quartiles([o - p for o, p in zip(ours, peer)])[0]
    return ("busy" if meets(q3, best_excess) else "missed"), noise


def _row(section, op, device, ta, tb, peer, goal, slack=None, **extra):
    """One row from the rounds ``ta`` (cupyops) and ``tb`` (the peer)."""
    t, tp = statistics.median(ta), statistics.median(tb)
    verdict, noise = judge(ta, tb, goal, slack)
    return {"section": section, "op": op, "device": device, "us": t * 1e6, "peer": peer,
            "peer_us": tp * 1e6, "ratio": tp / t, "goal": goal, "noise": noise,
            "verdict": verdict, "met": verdict == "met", **extra}


def _number(fn, target=2e-3):
    """Calls per round so that a round takes about ``target`` seconds."""
    t = _per_call(fn, 3)
    return max(3, min(20000, int(target / max(t, 1e-7))))


def _kernel_cases(rng, xp):
    x = xp.asarray(rng.random((8, 1000)).astype(np.float32))
    y = xp.asarray(rng.random((64, 32, 128)).astype(np.float32))
    m = xp.asarray((rng.random((64, 64)) < 0.3).astype(np.float32))
    import cupyops as co
    return [
        ("argmax (8, 1000) last axis", lambda d: co.argmax(x, axis=1, device=d)),
        ("argmax axes (0, 2) of (64, 32, 128)", lambda d: co.argmax(y, axis=(0, 2), device=d)),
        ("argmin (8, 1000) tie last", lambda d: co.argmin(x, axis=1, tie="last", device=d)),
        ("nanargmax (8, 1000) last axis", lambda d: co.nanargmax(x, axis=1, device=d)),
        ("nanargmin (8, 1000) last axis", lambda d: co.nanargmin(x, axis=1, device=d)),
        ("hardmax (8, 1000) last axis", lambda d: co.hardmax(x, axis=1, device=d)),
        ("count_nonzero (8, 1000) axis 1", lambda d: co.count_nonzero(x, axis=1, device=d)),
        ("argwhere (64, 64)", lambda d: co.argwhere(m, device=d)),
        ("nonzero (64, 64)", lambda d: co.nonzero(m, device=d)),
        ("nonzero_coordinates(size=100)", lambda d: co.nonzero_coordinates(m, size=100,
                                                                           device=d)),
        ("nonzero_coordinates (exact)", lambda d: co.nonzero_coordinates(m, device=d)),
    ]


def kernel_path(device="simt", repeats=ROUNDS, xp=np):
    """Rows (op, steady µs, ratio, first-call µs, ratio) under dry_run on ``device``."""
    from cupyops.testing import dry_run
    rng = np.random.default_rng(0)
    y8 = np.random.default_rng(1).random(8).astype(np.float32)
    ref = lambda: np.argmax(y8)  # noqa: E731
    dev = None if xp is not np else device
    rows = []
    with dry_run(count=1000):
        for name, call in _kernel_cases(rng, xp):
            fn = lambda c=call: c(dev)  # noqa: E731
            fn()
            n = _number(fn)
            ta, tb = _interleaved(fn, ref, repeats, n)
            rows.append(_row("kernel", name, device, ta, tb, "np.argmax(8 x float32)",
                             GOALS["steady"]))
        rows += _first_calls(device, dev, xp, ref, repeats)
    return rows


def _first_cases():
    import cupyops as co
    return [
        ("argmax (8, n) last axis", lambda x, d: co.argmax(x, axis=1, device=d)),
        ("argmin (8, n) tie last", lambda x, d: co.argmin(x, axis=1, tie="last", device=d)),
        ("nanargmax (8, n) last axis", lambda x, d: co.nanargmax(x, axis=1, device=d)),
        ("hardmax (8, n) last axis", lambda x, d: co.hardmax(x, axis=1, device=d)),
        ("count_nonzero (8, n) axis 1", lambda x, d: co.count_nonzero(x, axis=1, device=d)),
        ("argwhere (8, n)", lambda x, d: co.argwhere(x, device=d)),
        ("nonzero (8, n)", lambda x, d: co.nonzero(x, device=d)),
        ("nonzero_coordinates(size=100) (8, n)",
         lambda x, d: co.nonzero_coordinates(x, size=100, device=d)),
        # axes that are not neighbours: the contiguous planner's walk over the dims
        ("argmax axes (0, 2) of (4, 2, n)",
         lambda x, d: co.argmax(x, axis=(0, 2), device=d)),
    ]


def _first_view(name, flat, n):
    """The input of a first-call case: a view of ``flat`` (8 * n elements), made before the
    round as every case's inputs are."""
    return flat.reshape(4, 2, n) if "(4, 2, n)" in name else flat.reshape(8, n)


_FIRST_BATCH = 20
_first_width = [2000]      # every first call gets a width never used before in this process


def _first_calls(device, dev, xp, ref, repeats):
    """The first call of a new layout, per op: each round times a batch of calls on shapes
    never seen before (float32 (8, n), a new n every call; the op was called once before on
    another shape, as in a pipeline whose shapes vary), against np.argmax(8) in between.

    The inputs are views of one zeroed buffer, made before the round: a dry run never reads
    them. (Fresh random arrays made between rounds timed the harness: the call after NumPy's
    vectorised generation of a round's inputs took 5 to 10 times a warm first call, the CPU
    slowed by that work, a fifth of the batch's mean; the peer, timed after the batch, never
    saw it.)"""
    rows = []
    rng = np.random.default_rng(2)
    per_case = repeats * _FIRST_BATCH * 4
    widest = _first_width[0] + per_case * len(_first_cases())
    pool = xp.zeros(8 * widest, np.float32)
    for name, call in _first_cases():
        call(_first_view(name, xp.asarray(rng.random(8 * 1000).astype(np.float32)), 1000), dev)
        firsts, refs = [], []
        for _ in range(repeats):
            xs = []
            for _ in range(_FIRST_BATCH):
                _first_width[0] += 4
                n = _first_width[0]
                xs.append(_first_view(name, pool[:8 * n], n))
            t0 = time.perf_counter()
            for x in xs:
                call(x, dev)
            firsts.append((time.perf_counter() - t0) / _FIRST_BATCH)
            refs.append(_per_call(ref, 200))
        rows.append(_row("kernel-first", name, device, firsts, refs, "np.argmax(8 x float32)",
                         GOALS["first"]))
    return rows


def _cpu_cases(n_side, rng):
    """(name, cupyops call, NumPy composition) on the CPU path."""
    import cupyops as co
    a = rng.integers(0, 4, (n_side, n_side)).astype(np.float32)
    v = rng.random(n_side * n_side).astype(np.float32)
    m = (rng.random((n_side, n_side)) < 0.3).astype(np.float32)
    last = n_side - 1

    def hardmax_np():
        out = np.zeros_like(a)
        np.put_along_axis(out, np.argmax(a, axis=1, keepdims=True), 1, axis=1)
        return out
    return [
        ("argmax axis 1", lambda: co.argmax(a, axis=1, device="cpu"),
         lambda: np.argmax(a, axis=1)),
        ("argmin axis 0", lambda: co.argmin(a, axis=0, device="cpu"),
         lambda: np.argmin(a, axis=0)),
        ("argmax axis 1 tie last", lambda: co.argmax(a, axis=1, tie="last", device="cpu"),
         lambda: last - np.argmax(a[:, ::-1], axis=1)),
        ("argmin all, tie last", lambda: co.argmin(v, tie="last", device="cpu"),
         lambda: v.size - 1 - np.argmin(v[::-1])),
        ("nanargmax axis 1", lambda: co.nanargmax(a, axis=1, device="cpu"),
         lambda: np.nanargmax(a, axis=1)),
        ("hardmax axis 1", lambda: co.hardmax(a, axis=1, device="cpu"), hardmax_np),
        ("count_nonzero axis 1", lambda: co.count_nonzero(m, axis=1, device="cpu"),
         lambda: np.count_nonzero(m, axis=1)),
        ("count_nonzero all", lambda: co.count_nonzero(m, device="cpu"),
         lambda: np.count_nonzero(m)),
        ("argwhere", lambda: co.argwhere(m, device="cpu"), lambda: np.argwhere(m)),
        ("nonzero", lambda: co.nonzero(m, device="cpu"), lambda: np.nonzero(m)),
        ("nonzero_coordinates", lambda: co.nonzero_coordinates(m, device="cpu"),
         lambda: (np.argwhere(m), np.count_nonzero(m))),
    ]


def cpu_path(repeats=ROUNDS):
    rows = []
    for section, side in (("cpu-small", 64), ("cpu-1M", 1024)):
        rng = np.random.default_rng(2)
        small = section == "cpu-small"
        for name, ours, peer in _cpu_cases(side, rng):
            ours()
            n = _number(ours)
            ta, tb = _interleaved(ours, peer, repeats, n)
            rows.append(_row(section, name, "cpu", ta, tb, "numpy",
                             GOALS["small" if small else "large"],
                             SMALL_SLACK_S if small else None, elements=side * side))
    return rows


def gpu_full_calls(repeats=ROUNDS):
    """On a GPU: the full call (host + launch + kernel, synchronised per round) of cupyops on
    CuPy input against CuPy's own argmax/nonzero and torch.argmax/torch.nonzero_static (when
    torch with CUDA is installed), side by side. Rows as the other sections'."""
    import cupy
    import cupyops as co
    rng = np.random.default_rng(3)
    x = cupy.asarray(rng.random((8, 1000)).astype(np.float32))
    m = cupy.asarray((rng.random((64, 64)) < 0.3).astype(np.float32))
    k = int(cupy.count_nonzero(m))
    sync = cupy.cuda.get_current_stream().synchronize
    peers = {"argmax (8, 1000) last axis": [("cupy.argmax", lambda: cupy.argmax(x, axis=1))],
             "nonzero (64, 64)": [("cupy.nonzero", lambda: cupy.nonzero(m))]}
    try:
        import torch
        if torch.cuda.is_available():
            tx, tm = torch.from_dlpack(x), torch.from_dlpack(m)
            peers["argmax (8, 1000) last axis"].append(
                ("torch.argmax", lambda: torch.argmax(tx, dim=1)))
            peers["nonzero (64, 64)"].append(
                ("torch.nonzero_static", lambda: torch.nonzero_static(tm, size=k)))
    except ImportError:
        pass
    ours = {"argmax (8, 1000) last axis": lambda: co.argmax(x, axis=1),
            "nonzero (64, 64)": lambda: co.nonzero(m)}
    rows = []
    for name, fn in ours.items():
        def timed(f):
            def g():
                f()
                sync()
            return g
        a = timed(fn)
        a()
        n = _number(a)
        for peer, pf in peers[name]:
            b = timed(pf)
            b()
            ta, tb = _interleaved(a, b, repeats, n)
            rows.append(_row("gpu-full", name, "cuda", ta, tb, peer, 0.0))
    return rows


def run(device="cpu", repeats=ROUNDS):
    """The overhead rows of ``device``'s paths: the NumPy path's for ``cpu``, the kernel
    path's under dry_run() for ``simt``, and for ``cuda`` the kernel path's with CuPy input
    and the GPU's full calls (when a GPU is there)."""
    from cupyops.core.devices import cuda_status, simt_status
    if device == "cpu":
        return cpu_path(repeats)
    if device == "simt":
        return kernel_path("simt", repeats) if simt_status()[0] else []
    if device == "cuda" and cuda_status()[0]:
        import cupy
        return kernel_path("cuda", repeats, xp=cupy) + gpu_full_calls(repeats)
    return []


_MARK = {"met": "ok", "missed": "MISSED", "busy": "too close to call"}


def format_tables(rows) -> list:
    """Text lines: one table per section, then the tally."""
    titles = {
        "kernel": "kernel path under dry_run(), steady state: µs per call, ratio = "
                  "np.argmax(8 float32) / cupyops, the cost of a minimal NumPy call as the "
                  "unit for every op (goal ≥ 1/6 = 0.167)",
        "kernel-first": "kernel path under dry_run(), first call of a new layout (a shape never "
                        "seen, the op called before): ratio (goal ≥ 1/25 = 0.04)",
        "cpu-small": "NumPy path, 4,096 elements: ratio = NumPy / cupyops (goal ≥ 0.4, or "
                     "within NumPy + 2 µs)",
        "cpu-1M": "NumPy path, 1 M elements: ratio = NumPy / cupyops (goal ≥ 0.95)",
        "gpu-full": "GPU, the full call (host + launch + kernel, synchronised): ratio = peer / "
                    "cupyops (no goal: side by side)",
    }
    lines = [f"overhead (host time per call; medians of {ROUNDS} interleaved rounds, ± their "
             "noise):"]
    for sec, title in titles.items():
        part = [r for r in rows if r["section"] == sec]
        if not part:
            continue
        lines += ["", title]
        w = max(len(r["op"]) for r in part)
        for r in part:
            noise = r.get("noise")
            spread = f" ±{noise:.0%}".ljust(6) if noise is not None else ""
            lines.append(f"  {r['op']:<{w}}  {r['device']:<5} {r['us']:9.2f} µs   "
                         f"{r['peer']} {r['peer_us']:9.2f} µs   ratio {r['ratio']:6.3f}"
                         f"{spread}  {_MARK[_verdict(r)]}")
    lines += ["", tally(rows)]
    return lines


def _verdict(r) -> str:
    """A row's verdict (rows of an older JSON have only ``met``)."""
    return r.get("verdict") or ("met" if r["met"] else "missed")


def tally(rows) -> str:
    """``overhead goals: N met, M missed, K too close to call ...``."""
    n = {v: sum(1 for r in rows if _verdict(r) == v) for v in _MARK}
    line = f"overhead goals: {n['met']} of {len(rows)} met, {n['missed']} missed"
    if n["busy"]:
        line += (f", {n['busy']} too close to call: missed by less than the rounds' noise, "
                 "the machine was too busy to judge them")
    return line
