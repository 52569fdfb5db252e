"""cupyops benchmark: throughput against the peers, cold start, and the SIMT traffic model.

Run it as ``python -m cupyops bench [options]`` (from an installed cupyops, in any directory) or
``python benchmarks/bench.py [options]`` from a checkout.

    --device cpu|simt|cuda   where cupyops runs (default: $CUPYOPS_DEVICE, else cpu)
    --full                   big sizes (default: a quick run)
    --tiny                   very small sizes and short timings (tests, smoke runs)
    --sizes tiny|small|quick|full  pick the size set directly (default quick)
    --cases REGEX            only the cases whose id "op/case/dtype" matches (re.search)
    --dtypes a,b             only these dtypes (default float32,float16,int8,bool)
    --json PATH              write the records (one per case and peer) as JSON
    --markdown PATH          write the tables as Markdown
    --plot PATH              write a bar plot (needs matplotlib)
    --no-peers / --no-cold   skip the peers / the cold-start measurement
    --no-overhead            skip the overhead section (host µs per call, cupyops/bench/overhead.py)
    --repeat N               time each case N times, keep the median (steadier, N times slower)
    --threads N              cupyops' NumPy path (and PyTorch's CPU peer) on N threads (default:
                             the library's setting, so CUPYOPS_NUM_THREADS=1 means one thread)
    --dask                   the Dask section only (cupyops/bench/dask_bench.py)
    --issue-rate             add the SASS issue-rate model (cupyops/bench/issue_rate.py; needs
                             NVRTC + cuobjdump, the test extra) to the output and the JSON
    --large / --no-large     the 256 MiB GPU cases and the host cost (cupyops/bench/gpu_cases.py;
                             on by default on cuda; elsewhere --large rehearses them at
                             --large-scale tiny on the device, NumPy arrays, host clock)
    --deadline S             cuda: refuse a run whose estimate passes S seconds, stop timing at S
                             (default 90 on cuda: cupyops/bench/gpu_bench.py)
    --compile-only           cuda: the cold-compile section only (first calls, cold start)
    --from-json PATH         no run: the tables of a run's JSON again (--markdown, --update-docs)

What each device measures:

* ``cpu``: cupyops' NumPy path against the NumPy composition a user would write and against
  onnxruntime and PyTorch on the CPU (when installed; PyTorch on as many threads as cupyops),
  timed in this process; ``ratio = peer_seconds / seconds``, so a
  ratio above 1 means cupyops is faster.
* ``cuda``: cupyops' kernels against CuPy's composition and PyTorch (when installed), timed with
  CUDA events after a warm-up, plus GB/s and percent of the device-to-device copy bandwidth
  measured in the same run.
* ``simt``: the kernels on the CPU emulation of CUDA. Its times mean nothing; what it gives is
  the traffic model (``cupyops/bench/traffic.py``): sectors touched against the minimum, coalescing,
  launches, and a modelled H100 time. 0.1 to 1 s per case at the quick sizes, depending on the
  machine's load; ``--sizes small`` is 4x faster but may pick fewer of the multi-launch plans.

The device may also be given as a word: ``python -m cupyops bench simt --json out.json``.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import gc
import importlib.util
import json
import math
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
import typing
from pathlib import Path

import numpy as np

from . import gpu_bench, peers, report, traffic
from .tables import format_markdown, format_text  # noqa: F401  (also read as bench.format_*)
# the cases (cupyops/bench/cases.py), also read as bench.make_cases, bench.make_input, ...
from .cases import (  # noqa: F401
    DTYPES, SIZES, Case, benchmarked, cupy_like_simt_allocations, cupyops_call, make_cases,
    make_input)
from .cases import aligned_empty as _aligned_empty  # noqa: F401
from .cases import nonzero_values as _nonzero_values  # noqa: F401
from .cases import random_values as _values  # noqa: F401

# seconds of timing per callable and case
BUDGET = {"tiny": 0.005, "small": 0.01, "quick": 0.05, "full": 0.3}


def unsupported_ops(cases):
    """``{(op, dtype name): reason}`` for the ops that do not take a dtype (yet): each op is
    called once on a tiny input of the dtype on the NumPy path, whose argument checks are the
    same on every device. Their cases are skipped with a note instead of failing."""
    out = {}
    seen = set()
    for c in cases:
        key = (c.op, c.dtype.name)
        if key in seen:
            continue
        seen.add(key)
        small = Case(c.op, c.case, c.dtype, (2,) * len(c.shape), c.params)
        try:
            cupyops_call(small, "cpu")(make_input(small))
        except TypeError as exc:
            out[key] = _short_err(exc)
    return out


def _same(a, b):
    if isinstance(a, tuple) or isinstance(b, tuple):
        if not (isinstance(a, tuple) and isinstance(b, tuple)) or len(a) != len(b):
            return False
        return all(_same(u, v) for u, v in zip(a, b))
    if isinstance(a, (int, np.integer)) or isinstance(b, (int, np.integer)):
        return int(np.asarray(a)) == int(np.asarray(b))
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and np.array_equal(a, b)


def output_arrays(result):
    """The arrays a call wrote (for the minimum traffic): flattens tuples."""
    if isinstance(result, tuple):
        out = []
        for r in result:
            out += output_arrays(r)
        return out
    if isinstance(result, np.ndarray) or hasattr(result, "data"):
        return [result]
    return []


def expected_bytes(case, x, result):
    """Bytes a call must move: every input element read once plus every output byte written."""
    nb = x.size * x.dtype.itemsize
    for r in output_arrays(result):
        nb += int(r.size) * r.dtype.itemsize
    return nb


# --------------------------------------------------------------------------------------------
# timing
# --------------------------------------------------------------------------------------------

def time_cpu(fns, budget, min_rounds=5, max_rounds=200, contexts=None, rounds=None):
    """Seconds per call of each callable: interleaved rounds, each a batch of calls long enough
    to read a clock (~1 ms), each round starting with the next callable; the best round of
    each. ``fns``: list of zero-argument callables (already warmed up). ``contexts``: for each
    callable, a context manager factory entered around each of its batches (None: none), so
    its cost is not the calls'; ``rounds``: a list that gets, per callable, its seconds per
    call in every round (the rounds' spread is the measurement's noise)."""
    contexts = contexts or [None] * len(fns)
    batch = []
    for f, ctx in zip(fns, contexts):
        with ctx() if ctx else contextlib.nullcontext():
            t0 = time.perf_counter()
            f()
            dt = time.perf_counter() - t0
        batch.append(max(1, min(1000, int(1e-3 / max(dt, 1e-7)))))
    per_round = [[] for _ in fns]
    spent, n = 0.0, 0
    gc_was = gc.isenabled()
    gc.disable()
    try:
        while n < min_rounds or (spent < budget * len(fns) and n < max_rounds):
            # each round starts with the next callable: none always follows the same one
            # (a peer that sweeps the caches would slow whatever comes after it)
            for j in range(len(fns)):
                i = (j + n) % len(fns)
                dt = _batch_seconds(fns[i], batch[i], contexts[i])
                spent += dt
                per_round[i].append(dt / batch[i])
            n += 1
    finally:
        if gc_was:
            gc.enable()
    if rounds is not None:
        rounds[:] = per_round
    return [min(r) for r in per_round]


def _batch_seconds(f, k, ctx):
    with ctx() if ctx else contextlib.nullcontext():
        t0 = time.perf_counter()
        for _ in range(k):
            f()
        return time.perf_counter() - t0


def ratio_noise(ours, peer) -> float | None:
    """The relative noise of a ratio measured in interleaved rounds (``ours`` and ``peer``:
    seconds per call in each round): half the interquartile range of the rounds' ratios over
    their median; None with fewer than 4 rounds."""
    rs = sorted(p / o for o, p in zip(ours, peer) if o > 0)
    if len(rs) < 4:
        return None
    q1, med, q3 = (rs[int(q * (len(rs) - 1) + 0.5)] for q in (0.25, 0.5, 0.75))
    return (q3 - q1) / 2 / med


def time_cuda(fns, budget, min_rounds=3, max_rounds=100, warmup=3):
    """Seconds per call of each callable with CUDA events on the current stream, after
    ``warmup`` calls; the best of interleaved rounds."""
    import cupy
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    batch = []
    for f in fns:
        for _ in range(warmup):
            f()
        cupy.cuda.Stream.null.synchronize()
        cupy.cuda.get_current_stream().synchronize()
        start.record()
        f()
        end.record()
        end.synchronize()
        dt = cupy.cuda.get_elapsed_time(start, end) / 1e3
        batch.append(max(1, min(1000, int(2e-3 / max(dt, 1e-7)))))
    best = [math.inf] * len(fns)
    spent, rounds = 0.0, 0
    while rounds < min_rounds or (spent < budget * len(fns) and rounds < max_rounds):
        for i, f in enumerate(fns):
            k = batch[i]
            start.record()
            for _ in range(k):
                f()
            end.record()
            end.synchronize()
            dt = cupy.cuda.get_elapsed_time(start, end) / 1e3
            spent += dt
            best[i] = min(best[i], dt / k)
        rounds += 1
    return best


def _copier(nbytes):
    """A callable copying ``nbytes`` bytes device to device on the current stream (it moves 2 x
    ``nbytes``: a case's minimum bytes when given half of them)."""
    import cupy
    src, dst = cupy.ones(max(1, nbytes), cupy.uint8), cupy.ones(max(1, nbytes), cupy.uint8)
    rt = cupy.cuda.runtime
    return lambda: rt.memcpyAsync(dst.data.ptr, src.data.ptr, nbytes, rt.memcpyDeviceToDevice,
                                  cupy.cuda.get_current_stream().ptr)


def copy_bandwidth(nbytes=256 << 20):
    """Device-to-device copy bandwidth in bytes/s (read + write counted), CUDA events."""
    import cupy
    src = cupy.ones(nbytes // 4, cupy.float32)
    dst = cupy.empty_like(src)
    rt = cupy.cuda.runtime

    def copy():
        rt.memcpyAsync(dst.data.ptr, src.data.ptr, nbytes, rt.memcpyDeviceToDevice,
                       cupy.cuda.get_current_stream().ptr)
    (t,) = time_cuda([copy], 0.2)
    return 2 * nbytes / t


# --------------------------------------------------------------------------------------------
# running the cases
# --------------------------------------------------------------------------------------------

def _short_err(exc):
    msg = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {msg}"[:200]


def _whole(exc) -> str:
    """An error's whole message on one line (a peer's: the report prints it whole)."""
    return " ".join(str(exc).split()) or type(exc).__name__


def _unavailable(base, why):
    """The record of a case that could not run: ``base`` with no figures, and why."""
    return dict(base, seconds=None, peer=None, peer_seconds=None, ratio=None, bytes=None,
                ok=None, status=f"unavailable: {why}")


def _record_traffic():
    """``cupyops.simt.record_traffic`` if this checkout has it, else None."""
    try:
        import cupyops.simt as simt
    except Exception:
        return None
    return getattr(simt, "record_traffic", None)


def _launch_list(rec):
    for name in ("launches", "records", "kernels"):
        v = getattr(rec, name, None)
        if v is not None:
            return list(v)
    if isinstance(rec, (list, tuple)):
        return list(rec)
    raise TypeError(f"cannot find the launches in {type(rec).__name__}")


def _run_simt_case(case, base, x, ours, ref):
    """One call on the emulator, under the traffic recorder and the launch trace: its result is
    checked, its launches give the traffic fields. (Its time means nothing and may include
    compiling the module on first use.)"""
    from cupyops.core import trace as _trace
    rt = _record_traffic()
    rec = None
    try:
        with contextlib.ExitStack() as stack:
            tr = stack.enter_context(_trace.recording())
            stack.enter_context(cupy_like_simt_allocations())
            if rt is not None:
                rec = stack.enter_context(rt())
            t0 = time.perf_counter()
            res = ours(x)
            seconds = time.perf_counter() - t0
        ok = _same(peers.numpy_result(case, res), ref)
    except Exception as exc:
        return _unavailable(base, _short_err(exc))
    base.update(bytes=expected_bytes(case, x, res), ok=bool(ok), status="ok" if ok else "MISMATCH",
                d2h_reads=tr.d2h_reads, trace_launches=len(tr.launches))
    if rec is None:
        base["traffic_status"] = "cupyops.simt.record_traffic not in this checkout"
    else:
        try:
            # (the arrays the call reads besides x, where its benchmark names them: the
            # segment family's offsets)
            inputs = [x, *getattr(ours, "traffic_inputs", ())]
            base.update(traffic.traffic_fields(_launch_list(rec), inputs, output_arrays(res),
                                               op=case.op, case=case.case))
        except Exception as exc:
            base["traffic_status"] = f"error: {_short_err(exc)}"
    return dict(base, seconds=seconds, peer=None, peer_seconds=None, ratio=None)


def run_case(case, device, mode, budget, use_peers, copy_bw=None, repeat=1, one_thread=False,
             peer_names=None):
    """Measure one case; returns a list of records (one per peer, at least one). With
    ``repeat`` > 1 the interleaved timing runs that many times and each callable gets the
    median of its best-round times (steadier on a shared machine). ``one_thread`` (cpu): time
    cupyops on one thread too, beside the threaded call (``seconds_1t``, and the NumPy
    record's ``ratio_1t``); ``peer_names``: the peers to time (default: the device's)."""
    base = {"op": case.op, "case": case.case, "dtype": case.dtype.name,
            "shape": list(case.shape), "device": device, "mode": mode}
    x_host = make_input(case)
    if device == "cuda":
        import cupy
        x = cupy.asarray(x_host)
    else:
        x = x_host
    ours = cupyops_call(case, device)
    try:
        reference = peers.numpy_peer(case)
        ref = reference[1](reference[0](x_host))
    except Exception as exc:   # NumPy cannot check this case: report it, do not crash the run
        return [_unavailable(base, f"no NumPy reference ({_short_err(exc)})")]

    if device == "simt":
        return [_run_simt_case(case, base, x, ours, ref)]

    # ours: correctness first (the first call also compiles on the kernel paths)
    try:
        res = ours(x)
        ok = _same(peers.numpy_result(case, res), ref)
    except Exception as exc:
        return [_unavailable(base, _short_err(exc))]
    nbytes = expected_bytes(case, x, res)
    base.update(bytes=nbytes, ok=bool(ok), status="ok" if ok else "MISMATCH")

    # cpu / cuda: time ours against each peer in the same process, interleaved
    peer_table = peers.CPU_PEERS if device == "cpu" else peers.GPU_PEERS
    if peer_names is not None:
        peer_table = {n: b for n, b in peer_table.items() if n in peer_names}
    names, fns, notes = _peer_calls(case, x, ref, peer_table) if use_peers else ([], [], {})
    calls = [lambda: ours(x)] + fns
    contexts = [None] * len(calls)
    if one_thread and device == "cpu":     # cupyops on one thread, a batch at a time
        from cupyops.core.threads import single_thread
        calls.append(lambda: ours(x))
        contexts.append(single_thread)
    if device == "cuda":        # the copy fraction's copy, timed with the others
        calls.append(_copier(nbytes // 2))
    times, rounds = _timed(calls, contexts, device, budget, repeat)
    if device == "cuda":
        base["copy_seconds"] = times.pop()
    if one_thread and device == "cpu":
        base["seconds_1t"] = times.pop()
    seconds = base["seconds"] = times[0]
    base["gbps"] = nbytes / seconds / 1e9 if seconds else None
    if copy_bw:
        base["pct_copy"] = 100 * (nbytes / seconds) / copy_bw
    if base.get("copy_seconds") is not None and seconds:
        base["copy_fraction"] = base["copy_seconds"] / seconds
    recs = []
    for i, (name, t) in enumerate(zip(names, times[1:]), 1):
        rec = dict(base, peer=name, peer_seconds=t, ratio=t / seconds,
                   peer_status=notes.get(name, "ok"),
                   noise=ratio_noise(rounds[0], rounds[i]) if rounds else None)
        if name == "numpy" and base.get("seconds_1t"):
            rec["ratio_1t"] = t / base["seconds_1t"]
        recs.append(rec)
    for name, note in notes.items():
        if name not in names:
            recs.append(dict(base, peer=name, peer_seconds=None, ratio=None, peer_status=note))
    if not recs:
        recs.append(dict(base, peer=None, peer_seconds=None, ratio=None))
    return recs


def _peer_calls(case, x, ref, peer_table):
    """(names, calls, notes) of the peers that run ``case`` on ``x``; a peer that cannot, or
    whose result differs from ``ref``, gets its note (its error whole)."""
    names, fns, notes = [], [], {}
    for name, builder in peer_table.items():
        try:
            fn, conv = builder(case)
            prepare = getattr(fn, "prepare", None)
            xp_ = prepare(x) if prepare is not None else x   # e.g. CuPy -> torch, not timed
            pres = fn(xp_)
            if not _same(conv(pres), ref):
                notes[name] = "peer result differs"
            names.append(name)
            fns.append((lambda f=fn, a=xp_: f(a)))
        except peers.PeerUnavailable as exc:
            notes[name] = f"n/a: {_whole(exc)}"
        except Exception as exc:
            notes[name] = f"n/a: {type(exc).__name__}: {_whole(exc)}"
    return names, fns, notes


def _timed(calls, contexts, device, budget, repeat):
    """(seconds per call of each callable: the median over ``repeat`` interleaved timings of
    the best rounds, the rounds of every timing joined per callable; [] on a GPU)."""
    rounds = [[] for _ in calls]
    sets = []
    for _ in range(max(1, repeat)):
        if device == "cpu":
            got = []
            sets.append(time_cpu(calls, budget, contexts=contexts, rounds=got))
            for mine, new in zip(rounds, got):
                mine += new
        else:
            sets.append(time_cuda(calls, budget))
    times = [float(np.median([t[i] for t in sets])) for i in range(len(calls))]
    return times, (rounds if device == "cpu" else [])


# --------------------------------------------------------------------------------------------
# cold start
# --------------------------------------------------------------------------------------------

_COLD_SCRIPT = r"""
import json, sys, time
t_start = time.perf_counter()
import numpy as np
import cupyops
t_import = time.perf_counter() - t_start
device = sys.argv[1]
what = sys.argv[2]
out = {"import_s": t_import}
x = np.random.default_rng(0).standard_normal((256, 256)).astype(np.float32)
if device == "cuda":
    import cupy
    x = cupy.asarray(x); cupy.cuda.Device().synchronize()

def sync():
    if device == "cuda":
        cupy.cuda.Device().synchronize()

if what == "precompile":
    t0 = time.perf_counter()
    try:
        cupyops.precompile(device=device)
        sync()
        out["precompile_s"] = time.perf_counter() - t0
    except Exception as exc:
        out["precompile_s"] = None
        out["precompile_error"] = f"{type(exc).__name__}: {exc}".splitlines()[0][:200]
from cupyops.ops import operators
for op in operators():
    if op.bench is None or op.bench.cold is None:
        continue
    name, call = op.name, op.bench.cold(getattr(cupyops, op.name), x, device)
    t0 = time.perf_counter()
    try:
        call(); sync()
        out[name + "_first_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        call(); sync()
        out[name + "_second_s"] = time.perf_counter() - t0
    except Exception as exc:
        out[name + "_first_s"] = None
        out[name + "_error"] = f"{type(exc).__name__}: {exc}".splitlines()[0][:200]
print(json.dumps(out))
"""


def _cache_env(cache_dir):
    from cupyops.core import caches
    env = dict(os.environ)
    # every kernel cache, pointed at one directory we control: CuPy's, and cupyops' root (a
    # cache's own variable would win over the root: unset)
    env["CUPY_CACHE_DIR"] = str(cache_dir)
    env["CUPYOPS_CACHE_DIR"] = str(cache_dir / "cupyops")
    for cache in caches.CACHES.values():
        if cache.variable:
            env.pop(cache.variable, None)
    import cupyops
    site = str(Path(cupyops.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join([site] + [p for p in [env.get("PYTHONPATH")] if p])
    return env


def _run_cold(device, what, env, timeout=600):
    t0 = time.perf_counter()
    # a neutral working directory, and the cupyops this process runs first on the path: the
    # child measures the same installation (a checkout or an installed wheel), from anywhere
    with tempfile.TemporaryDirectory(prefix="cupyops-bench-cwd-") as cwd:
        p = subprocess.run([sys.executable, "-c", _COLD_SCRIPT, device, what], env=env,
                           capture_output=True, text=True, timeout=timeout, cwd=cwd)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        tail = (p.stderr or p.stdout).strip().splitlines()[-1:] or ["?"]
        return {"error": tail[0][:200], "process_s": wall}
    res = json.loads(p.stdout.strip().splitlines()[-1])
    res["process_s"] = wall
    return res


def cold_start(device):
    """Fresh processes: (1) empty kernel caches, first call; (2) same caches, now filled;
    (3) empty caches, precompile() first, then the first call. The cpu device compiles
    nothing: one fresh process, whose first call is the NumPy path's."""
    out = []
    if device == "cpu":
        with tempfile.TemporaryDirectory(prefix="cupyops-bench-cold-") as d:
            return [dict(_run_cold(device, "first", _cache_env(Path(d))),
                         scenario="fresh process", device=device)]
    with tempfile.TemporaryDirectory(prefix="cupyops-bench-cold-") as d:
        env = _cache_env(Path(d))
        out.append(dict(_run_cold(device, "first", env), scenario="empty cache"))
        out.append(dict(_run_cold(device, "first", env), scenario="filled disk cache"))
    with tempfile.TemporaryDirectory(prefix="cupyops-bench-cold-") as d:
        env = _cache_env(Path(d))
        out.append(dict(_run_cold(device, "precompile", env), scenario="empty cache, precompile"))
    for r in out:
        r["device"] = device
    return out


# --------------------------------------------------------------------------------------------
# output
# --------------------------------------------------------------------------------------------

def _fmt_ratio(r):
    if r is None:
        return "n/a"
    return f"{r:.2f}x" if r < 100 else f"{r:.0f}x"


def _fmt_num(v, spec):
    return "n/a" if v is None else format(v, spec)


def _group(records):
    """{case key: [records]} in first-seen order."""
    groups = {}
    for r in records:
        groups.setdefault((r["op"], r["case"], r["dtype"]), []).append(r)
    return groups


def ratio_table(records, peer_names):
    """The cpu table: a ratio per peer; beside NumPy's, the one of cupyops on one thread
    (``vs numpy 1t``) when the run timed it."""
    one_thread = any(r.get("ratio_1t") for r in records)
    cols = [(p, "ratio") for p in peer_names]
    if one_thread and "numpy" in peer_names:
        cols.insert(peer_names.index("numpy") + 1, ("numpy", "ratio_1t"))
    header = ["op", "case", "dtype", "shape", "ok"] + [
        f"vs {p}" + (" 1t" if key == "ratio_1t" else "") for p, key in cols]
    rows = []
    for (op, case, dt), recs in _group(records).items():
        r0 = recs[0]
        if r0.get("status", "").startswith("unavailable"):
            rows.append([op, case, dt, "x".join(map(str, r0["shape"])), "unavailable"]
                        + ["-"] * len(cols))
            continue
        by_peer = {r.get("peer"): r for r in recs}
        cells = []
        for p, key in cols:
            r = by_peer.get(p)
            if r is None or r.get(key) is None:
                cells.append("n/a")
            else:
                note = "" if r.get("peer_status", "ok") == "ok" else " (!)"
                cells.append(_fmt_ratio(r[key]) + note)
        ok = {True: "yes", False: "NO"}.get(r0.get("ok"), "?")
        rows.append([op, case, dt, "x".join(map(str, r0["shape"])), ok] + cells)
    return header, rows


def cuda_table(records, peer_names):
    header = ["op", "case", "dtype", "shape", "ok", "us", "GB/s", "% copy", "copy frac"] + \
        [f"vs {p}" for p in peer_names]
    rows = []
    for (op, case, dt), recs in _group(records).items():
        r0 = recs[0]
        if r0.get("status", "").startswith(("unavailable", "not run")):
            rows.append([op, case, dt, "x".join(map(str, r0["shape"])),
                         r0["status"].split(":")[0], "", "", "", ""] + ["-"] * len(peer_names))
            continue
        by_peer = {r.get("peer"): r for r in recs}
        rows.append([op, case, dt, "x".join(map(str, r0["shape"])),
                     {True: "yes", False: "NO"}.get(r0.get("ok"), "?"),
                     _fmt_num(r0["seconds"] * 1e6, ".1f"), _fmt_num(r0.get("gbps"), ".0f"),
                     _fmt_num(r0.get("pct_copy"), ".0f"), _fmt_num(r0.get("copy_fraction"), ".2f")]
                    + [_fmt_ratio(by_peer[p]["ratio"]) if p in by_peer else "n/a" for p in peer_names])
    return header, rows


def traffic_table(records):
    header = ["op", "case", "dtype", "shape", "ok", "launches", "sectors", "min sectors",
              "sectors ratio", "goal", "coalescing", "model us", "min model us"]
    rows = []
    for (op, case, dt), recs in _group(records).items():
        r = recs[0]
        shape = "x".join(map(str, r["shape"]))
        if r.get("status", "").startswith("unavailable"):
            rows.append([op, case, dt, shape, "unavailable"] + [""] * 8)
            continue
        if "sectors" not in r:
            rows.append([op, case, dt, shape, {True: "yes", False: "NO"}.get(r.get("ok"), "?"),
                         r.get("traffic_status", "no traffic")] + [""] * 7)
            continue
        goal = r.get("goal")
        goal_s = "" if goal is None else f"<= {goal:.2f} {'met' if r['goal_met'] else 'MISSED'}"
        rows.append([op, case, dt, shape, {True: "yes", False: "NO"}.get(r.get("ok"), "?"),
                     str(r["launches"]), str(r["sectors"]), str(r["min_sectors"]),
                     f"{r['sectors_ratio']:.3f}", goal_s,
                     _fmt_num(r.get("coalescing"), ".3f"),
                     f"{r['model_seconds'] * 1e6:.2f}", f"{r['model_min_seconds'] * 1e6:.2f}"])
    return header, rows


def _pivot(records):
    """{(op, case): {dtype: [records]}} in first-seen order, and the dtypes seen."""
    table, dtypes = {}, []
    for (op, case, dt), recs in _group(records).items():
        table.setdefault((op, case), {})[dt] = recs
        if dt not in dtypes:
            dtypes.append(dt)
    return table, dtypes


def wide_ratio_table(records, peer_names):
    """One row per (op, case); per dtype, the ratio against each peer (compact, for docs), and
    beside NumPy's the one-thread ratio when the run timed it."""
    table, dtypes = _pivot(records)
    short = {"numpy": "np", "onnxruntime": "ort", "cupy": "cupy", "torch": "torch"}
    cols = [(p, "ratio") for p in peer_names]
    if any(r.get("ratio_1t") for r in records) and "numpy" in peer_names:
        cols.insert(peer_names.index("numpy") + 1, ("numpy", "ratio_1t"))
    header = ["op", "case", "shape"] + [
        f"{dt} {short.get(p, p)}" + (" 1t" if key == "ratio_1t" else "")
        for dt in dtypes for p, key in cols]
    rows = []
    for (op, case), per_dt in table.items():
        shape = "x".join(map(str, next(iter(per_dt.values()))[0]["shape"]))
        cells = []
        for dt in dtypes:
            recs = per_dt.get(dt, [])
            by_peer = {r.get("peer"): r for r in recs}
            for p, key in cols:
                r = by_peer.get(p)
                if recs and recs[0].get("status", "").startswith("unavailable"):
                    cells.append("unavail.")
                elif r is None or r.get(key) is None:
                    cells.append("n/a")
                else:
                    bad = "" if r.get("ok") else " (wrong)"
                    cells.append(_fmt_ratio(r[key]) + bad)
        rows.append([op, case, shape] + cells)
    return header, rows


def wide_traffic_table(records):
    """One row per (op, case): launches, sectors ratio per dtype (goal misses marked),
    coalescing and modelled time of the first dtype."""
    table, dtypes = _pivot(records)
    first = dtypes[0] if dtypes else ""
    header = ["op", "case", "shape", "launches"] + [f"ratio {dt}" for dt in dtypes] + \
        ["goal", f"coalescing {first}", f"model us {first}", f"min us {first}"]
    rows = []
    for (op, case), per_dt in table.items():
        r0 = next(iter(per_dt.values()))[0]
        shape = "x".join(map(str, r0["shape"]))
        launches = sorted({str(recs[0].get("launches")) for recs in per_dt.values()
                           if "launches" in recs[0]})
        cells = []
        for dt in dtypes:
            r = (per_dt.get(dt) or [{}])[0]
            if r.get("status", "").startswith("unavailable"):
                cells.append("unavail.")
            elif "sectors_ratio" not in r or r["sectors_ratio"] is None:
                cells.append("n/a")
            else:
                mark = " MISSED" if r.get("goal_met") is False else ""
                wrong = " (wrong)" if r.get("ok") is False else ""
                cells.append(f"{r['sectors_ratio']:.3f}{mark}{wrong}")
        rf = (per_dt.get(first) or [{}])[0]
        goal = traffic.goal_for(op, case)
        rows.append([op, case, shape, "/".join(launches) or "n/a"] + cells +
                    ["" if goal is None else f"<= {goal:.2f}",
                     _fmt_num(rf.get("coalescing"), ".3f"),
                     _fmt_num(None if rf.get("model_seconds") is None else rf["model_seconds"] * 1e6, ".2f"),
                     _fmt_num(None if rf.get("model_min_seconds") is None
                              else rf["model_min_seconds"] * 1e6, ".2f")])
    return header, rows


def cold_names():
    """The operators the cold-start table times: those with a cold-start call
    (``Bench.cold``), in the registry's order."""
    return [op.name for op in benchmarked() if op.bench.cold is not None]


def cold_table(cold):
    names = cold_names()
    # the first and second call of the first operator, the first call of the others
    cols = [(f"{n} 1st s", f"{n}_first_s", ".3f") for n in names]
    cols[1:1] = [(f"{n} 2nd s", f"{n}_second_s", ".4f") for n in names[:1]]
    # (precompile's column where a scenario ran it: not on the cpu device, which compiles nothing)
    pre_col = any(c.get("device") != "cpu" or "precompile_s" in c for c in cold)
    header = ["scenario", "import s"] + (["precompile s"] if pre_col else []) + \
        [c[0] for c in cols] + ["process s", "note"]
    errors = ["error", "precompile_error"] + [f"{n}_error" for n in names]
    rows = []
    for c in cold:
        note = "; ".join(str(c[k]) for k in errors if c.get(k))
        pre = c.get("precompile_s") if "precompile_s" in c else "-"
        rows.append([c["scenario"], _fmt_num(c.get("import_s"), ".3f")]
                    + ([pre if pre == "-" else _fmt_num(pre, ".3f")] if pre_col else [])
                    + [_fmt_num(c.get(key), fmt) for _, key, fmt in cols]
                    + [_fmt_num(c.get("process_s"), ".2f"), note or ""])
    return header, rows


def summary_lines(records, device, peer_names):
    """Geometric-mean ratio per op and peer (cpu/cuda), or goal tallies (simt)."""
    lines = []
    if device == "simt":
        with_goal = [r for r in _group(records).values() if r[0].get("goal") is not None]
        met = sum(1 for r in with_goal if r[0].get("goal_met"))
        if with_goal:
            lines.append(f"traffic goals met: {met}/{len(with_goal)} cases")
        return lines
    for p in peer_names:
        per_op = {}
        for r in records:
            if r.get("peer") == p and r.get("ratio"):
                per_op.setdefault(r["op"], []).append(r["ratio"])
        if per_op:
            parts = [f"{op} {math.exp(sum(map(math.log, v)) / len(v)):.2f}x"
                     for op, v in per_op.items()]
            lines.append(f"geometric mean ratio vs {p}: " + ", ".join(parts))
    return lines


#: SIMT plot: the zoomed panel ends here; bars use these colours, goals a colour none of them has
SIMT_PLOT_ZOOM = 1.35
SIMT_PLOT_COLORS = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown",
                    "tab:pink", "tab:olive", "tab:cyan")
SIMT_PLOT_GOAL_COLOR = "black"


def peer_na_lines(records, peer_names):
    """Why a peer's column shows n/a: its reasons, with the number of cases each (a peer that
    is not installed shows as one line for every case)."""
    lines = []
    for p in peer_names:
        reasons, total = {}, 0
        for key, recs in _group(records).items():
            if recs[0].get("status", "").startswith("unavailable"):
                continue
            total += 1
            r = next((r for r in recs if r.get("peer") == p), None)
            if r is None:
                reasons["not run"] = reasons.get("not run", 0) + 1
            elif r.get("ratio") is None:
                why = str(r.get("peer_status") or "n/a")
                why = why[5:] if why.startswith("n/a: ") else why
                reasons[why] = reasons.get(why, 0) + 1
        for why, n in reasons.items():
            scope = f"all {n} cases" if n == total else f"{n} of {total} cases"
            lines.append(f"vs {p}: n/a in {scope}: {why}")
    return lines


class _PlotRows(typing.NamedTuple):
    """What both plots share: the records grouped by case, the dtypes and (op, case) rows in
    first-seen order, the row labels and positions, and the figure's height."""
    groups: dict
    dtypes: list
    cases: list
    labels: list
    ys: np.ndarray
    fig_h: float


def make_plot(records, device, path, title=None):
    """Bars. cpu / cuda: the ratio against each peer (log scale), one panel per dtype.
    simt: sectors touched / minimum per case, one bar per dtype, with the goals marked."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = _group(records)
    cases = list(dict.fromkeys((k[0], k[1]) for k in groups))
    rows = _PlotRows(groups, list(dict.fromkeys(k[2] for k in groups)), cases,
                     [f"{op} {case}" for op, case in cases], np.arange(len(cases)),
                     max(3.0, 0.3 * len(cases) + 1.6))
    if device == "simt":        # a constrained layout
        fig = _simt_plot(plt, rows, title)
    else:
        fig = _ratio_plot(plt, rows, records, device, title)
        fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _simt_plot(plt, rows, title):
    """The SIMT figure. The differences sit between 1.0 and ~1.3 (the exact nonzero forms read
    twice, ~2): the axis starts just below 1.0, and values past SIMT_PLOT_ZOOM go to a second,
    narrower panel (a broken axis) instead of squashing the zoomed one."""
    vals_by_dt = {dt: [(rows.groups.get((op, case, dt)) or [{}])[0].get("sectors_ratio") or np.nan
                       for op, case in rows.cases] for dt in rows.dtypes}
    goals = [traffic.goal_for(op, case) for op, case in rows.cases]
    finite = [v for vs in vals_by_dt.values() for v in vs if np.isfinite(v)]
    finite += [g for g in goals if g]
    hi = max(finite, default=1.3)
    lo = min(0.97, min(finite, default=1.0) - 0.01)
    broken = hi > SIMT_PLOT_ZOOM
    if broken:
        fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, rows.fig_h), sharey=True,
                                      layout="constrained", gridspec_kw={"width_ratios": [3, 1]})
        panels = [(ax, (lo, SIMT_PLOT_ZOOM)), (ax2, (SIMT_PLOT_ZOOM, hi * 1.02 + 0.02))]
    else:
        fig, ax = plt.subplots(figsize=(10, rows.fig_h), layout="constrained")
        panels = [(ax, (lo, max(hi * 1.02, 1.1)))]
    for a, xlim in panels:
        _simt_panel(a, xlim, rows, vals_by_dt, goals)
    ax.set_yticks(rows.ys)
    ax.set_yticklabels(rows.labels, fontsize=7)
    ax.invert_yaxis()
    if broken:
        ax.spines["right"].set_visible(False)
        ax2.spines["left"].set_visible(False)
        ax2.tick_params(axis="y", left=False)
        ax2.legend(fontsize=8, loc="lower right")
    else:
        ax.legend(fontsize=8, loc="lower right")
    fig.supxlabel("sectors touched / minimum sectors (1.0 = minimum traffic; axis starts near "
                  "1.0" + (f", broken at {SIMT_PLOT_ZOOM}" if broken else "") + ")", fontsize=9)
    fig.suptitle(title or "cupyops kernels on the SIMT layer: traffic against the minimum",
                 fontsize=10)
    return fig


def _simt_panel(a, xlim, rows, vals_by_dt, goals):
    """One panel of the SIMT figure: a bar per dtype and case over ``xlim``, the goals."""
    x0, x1 = xlim
    h = 0.8 / max(1, len(rows.dtypes))
    for j, dt in enumerate(rows.dtypes):
        # bars start at the panel's left edge, so the zoomed axis does not hide them
        a.barh(rows.ys - 0.4 + h * (j + 0.5),
               [v - x0 if np.isfinite(v) else np.nan for v in vals_by_dt[dt]],
               left=x0, height=h, label=dt, color=SIMT_PLOT_COLORS[j % len(SIMT_PLOT_COLORS)])
    first_goal = True
    for y, g in zip(rows.ys, goals):
        if g:
            a.plot([g, g], [y - 0.45, y + 0.45], color=SIMT_PLOT_GOAL_COLOR, lw=2.0,
                   label="goal" if first_goal else None)
            first_goal = False
    a.axvline(1.0, color="0.4", lw=0.8, ls=":")
    a.set_xlim(x0, x1)
    a.tick_params(axis="x", labelsize=7)
    a.grid(axis="x", color="0.85", lw=0.5)


#: bar colours of the cpu / cuda figure, per peer
PEER_PLOT_COLORS = {"numpy": "tab:blue", "onnxruntime": "tab:orange", "cupy": "tab:green",
                    "torch": "tab:purple"}


def _ratio_plot(plt, rows, records, device, title):
    """The cpu / cuda figure: per dtype a panel, per peer a bar of its ratio (log scale)."""
    peer_names = list(dict.fromkeys(r["peer"] for r in records if r.get("peer")))
    fig, axes = plt.subplots(1, len(rows.dtypes), figsize=(3.2 * len(rows.dtypes) + 2.5, rows.fig_h),
                             sharey=True, sharex=True, squeeze=False)
    h = 0.8 / max(1, len(peer_names))
    for ax, dt in zip(axes[0], rows.dtypes):
        for j, p in enumerate(peer_names):
            vals = []
            for op, case in rows.cases:
                recs = rows.groups.get((op, case, dt)) or []
                r = next((r for r in recs if r.get("peer") == p), None)
                vals.append(r["ratio"] if r and r.get("ratio") else np.nan)
            ax.barh(rows.ys - 0.4 + h * (j + 0.5), vals, height=h, label=f"vs {p}",
                    color=PEER_PLOT_COLORS.get(p))
        ax.set_xscale("log")
        ax.axvline(1.0, color="k", lw=0.8)
        ax.set_title(dt, fontsize=9)
        ax.tick_params(axis="x", labelsize=7)
    axes[0][0].set_yticks(rows.ys)
    axes[0][0].set_yticklabels(rows.labels, fontsize=7)
    axes[0][0].invert_yaxis()
    if peer_names:
        axes[0][-1].legend(fontsize=8, loc="lower right")
    fig.supxlabel("peer time / cupyops time (log scale; > 1: cupyops faster)", fontsize=9)
    fig.suptitle(title or f"cupyops on {device} against its peers", fontsize=10)
    return fig


# --------------------------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------------------------

def _paths_available():
    def has(mod):
        try:
            return importlib.util.find_spec(mod) is not None
        except Exception:
            return False
    return {
        "cpu_argreduce": has("cupyops.ops.argreduce.numpy_path"),
        "cpu_nonzero": has("cupyops.ops.nonzero.numpy_path"),
        "gpu_argreduce": has("cupyops.ops.argreduce.launch"),
        "gpu_nonzero": has("cupyops.ops.nonzero.launch"),
        "simt_record_traffic": _record_traffic() is not None,
        "precompile": has("cupyops.core.precompile"),
    }


def _versions():
    v = {"python": platform.python_version(), "numpy": np.__version__}
    for mod in ("cupyops", "onnxruntime", "onnx", "cupy", "torch", "matplotlib"):
        try:
            m = __import__(mod)
            v[mod] = getattr(m, "__version__", "?")
        except Exception:
            v[mod] = None
    return v


class Progress:
    """One status line on stderr, rewritten in place on a terminal, a line per case otherwise."""

    def __init__(self, total, stream=None, quiet=False):
        self.total = total
        self.stream = stream or sys.stderr
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.quiet = quiet
        self.t0 = time.perf_counter()

    def update(self, i, label):
        if self.quiet:
            return
        el = time.perf_counter() - self.t0
        msg = f"[{i:3d}/{self.total}] {el:6.1f}s  {label}"
        if self.tty:
            self.stream.write("\r\033[K" + msg)
        else:
            self.stream.write(msg + "\n")
        self.stream.flush()

    def done(self):
        if not self.quiet and self.tty:
            self.stream.write("\r\033[K")
        if not self.quiet:
            self.stream.write(f"done: {self.total} cases in {time.perf_counter() - self.t0:.1f}s\n")
            self.stream.flush()


# --------------------------------------------------------------------------------------------
# the command line, as data
# --------------------------------------------------------------------------------------------

DEVICES = ("cpu", "simt", "cuda")


class Option(typing.NamedTuple):
    """One argument of the command line: its name or flag, its help text, the keywords
    ``add_argument`` takes besides, and the mutually exclusive group it belongs to (if any)."""
    flag: str
    help: str
    kwargs: dict
    group: str | None = None


def _opt(flag, help, group=None, **kwargs):
    return Option(flag, help, kwargs, group)


def _switch(flag, help, group=None):
    """``--flag``: sets ``args.flag`` to True."""
    return Option(flag, help, {"action": "store_true"}, group)


#: The benchmark's command line, in the order ``--help`` lists it. Tools outside the package
#: use these options and their defaults: change none of them.
OPTIONS = (
    _opt("device_pos", "same as --device (python -m cupyops bench simt --tiny)",
         nargs="?", metavar="DEVICE", choices=DEVICES),
    _opt("--device", "cpu, simt or cuda (default $CUPYOPS_DEVICE or cpu)", default=None),
    _switch("--full", "big sizes", group="size"),
    _switch("--tiny", "very small sizes, short timing", group="size"),
    _opt("--sizes", "size set, overriding --tiny/--full (default: quick)", choices=tuple(SIZES),
         default=None),
    _opt("--cases", "regex on the case id op/case/dtype", default=None),
    _opt("--dtypes", "comma-separated dtypes", default=",".join(DTYPES)),
    _opt("--json", "write the records as JSON to this path", default=None),
    _opt("--markdown", "write the tables as Markdown to this path", default=None),
    _opt("--update-docs", "replace this device's generated section of DOC (e.g. "
         "docs/performance.md, between its bench:DEVICE markers) with the tables",
         default=None, metavar="DOC"),
    _opt("--plot", "write a bar plot (PNG) to this path", default=None),
    _switch("--no-peers", "time cupyops only"),
    _switch("--no-cold", "skip the cold-start measurement"),
    _switch("--no-overhead", "skip the overhead section (host time per call against NumPy)"),
    _opt("--budget", "timing seconds per callable and case", type=float, default=None),
    _opt("--repeat", "time each case this many times and keep the median (cpu/cuda)", type=int,
         default=1),
    _opt("--threads", "threads of cupyops' NumPy path, and of PyTorch's CPU peer (default: "
         "the library's setting: set_num_threads, else CUPYOPS_NUM_THREADS, else the usable "
         "cores)", type=int, default=None, metavar="N"),
    _switch("--list", "list the case ids and exit"),
    _switch("--quiet", "no progress on stderr"),
    _switch("--dask", "the Dask section only (cupyops/bench/dask_bench.py: tasks per chunk, "
            "1 vs 2 workers, bytes moved)"),
    _switch("--issue-rate", "add the SASS issue-rate model of every kernel instantiation "
            "(sm_90, sm_80; cupyops/bench/issue_rate.py) to the output and JSON"),
    _switch("--large", "the large cases and host cost (default on cuda; elsewhere a rehearsal "
            "at --large-scale tiny)", group="large"),
    _switch("--no-large", "skip the large cases and the host cost", group="large"),
    _opt("--large-scale", "size of the large cases (default full on cuda, tiny elsewhere)",
         choices=("full", "small", "tiny"), default=None),
    _opt("--deadline", "seconds the run must fit in: a longer estimate is refused, cases past "
         "it are not run (default 90 on cuda, 0 = none)", type=float, default=None,
         metavar="S"),
    _switch("--compile-only", "cuda: the cold-compile section only (first calls of every case, "
            "cupyops and peers apart; cold start)"),
    _opt("--from-json", "measure nothing: print and write (--markdown, --update-docs) the "
         "tables of a run's JSON", default=None, metavar="PATH"),
)


def operators_epilog() -> str:
    """--help's list of the benchmarked operators (a case id starts with one), each with its
    descriptor's documentation line."""
    ops = benchmarked()
    width = max(len(op.name) for op in ops)
    return "operators (the first part of a case id):\n" + "\n".join(
        f"  {op.name.ljust(width)}  {op.doc}" for op in ops)


def build_parser(options=OPTIONS):
    """The argparse parser of ``options``."""
    p = argparse.ArgumentParser(prog="python -m cupyops bench",
                                description="cupyops benchmark (cupyops/bench/bench.py; docs/performance.md)",
                                epilog=operators_epilog(),
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    groups = {}
    for opt in options:
        where = p
        if opt.group is not None:
            where = groups.get(opt.group) or groups.setdefault(opt.group, p.add_mutually_exclusive_group())
        where.add_argument(opt.flag, help=opt.help, **opt.kwargs)
    return p


def parse_args(argv):
    if argv and argv[0] == "--":   # python -m cupyops bench -- --tiny ...
        argv = argv[1:]
    args = build_parser().parse_args(argv)
    if args.device is None:
        args.device = args.device_pos
    return args


class BenchError(Exception):
    """The run cannot go on: the message goes to stderr after "bench: ", the exit status is 2."""


def resolve_device(args) -> str:
    device = (args.device or os.environ.get("CUPYOPS_DEVICE") or "cpu").strip().lower()
    if device.startswith("cuda"):
        device = "cuda"
    if device not in DEVICES:
        raise BenchError(f"unknown device {device!r}; expected cpu, simt or cuda")
    return device


def size_mode(args) -> str:
    if args.sizes:
        return args.sizes
    return "tiny" if args.tiny else "full" if args.full else "quick"


def select_cases(args, mode) -> list:
    """The cases of ``mode`` in the asked dtypes whose ids match ``--cases``."""
    dtypes = [d.strip() for d in args.dtypes.split(",") if d.strip()]
    try:
        cases = make_cases(mode, dtypes)
    except TypeError as exc:
        raise BenchError(f"bad --dtypes: {exc}") from None
    if not args.cases:
        return cases
    try:
        rx = re.compile(args.cases)
    except re.error as exc:
        raise BenchError(f"bad --cases regex {args.cases!r}: {exc}") from None
    chosen = [c for c in cases if rx.search(c.id)]
    if not chosen:
        raise BenchError(f"--cases {args.cases!r} matches none of the {len(cases)} case ids "
                         f"(dtypes {', '.join(dtypes)}); python -m cupyops bench --list shows them")
    return chosen


def check_plot(args) -> None:
    """--plot needs matplotlib: fail before the run, not after it."""
    if not args.plot:
        return
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise BenchError("--plot needs matplotlib, which is not installed: pip install "
                         "matplotlib (or install cupyops with the plot extra, pip install '.[plot]' "
                         "from the checkout); nothing was run") from None


def drop_unsupported(cases, args):
    """(the cases an op takes the dtype of, {(op, dtype): why} of the others), said on stderr."""
    skipped = unsupported_ops(cases)
    if not skipped:
        return cases, skipped
    cases = [c for c in cases if (c.op, c.dtype.name) not in skipped]
    if not args.list and not args.quiet:
        for (op, dt), why in skipped.items():
            print(f"bench: skipping {op} for {dt}: cupyops does not take it yet ({why})",
                  file=sys.stderr)
    if not cases:
        raise BenchError("no case left to run: no op takes the dtypes asked for")
    return cases, skipped


def check_device(device, args) -> None:
    if device not in ("cuda", "simt"):
        return
    from cupyops.core import devices as _devices
    ok, why = _devices.cuda_status() if device == "cuda" else _devices.simt_status()
    if not ok:
        source = "asked for on the command line" if args.device else \
            f"from CUPYOPS_DEVICE={os.environ.get('CUPYOPS_DEVICE')!r}"
        raise BenchError(f"device {device} ({source}) is not available here: {why}")


@dataclasses.dataclass
class Run:
    """One benchmark run: what was asked, and what was measured (filled in as it goes)."""
    args: argparse.Namespace
    argv: list | None             # as main() got it (the Markdown names it)
    device: str
    mode: str
    budget: float
    cases: list
    skipped: dict
    meta: dict = dataclasses.field(default_factory=dict)
    copy_bw: float | None = None
    records: list = dataclasses.field(default_factory=list)
    cold: list = dataclasses.field(default_factory=list)
    overhead_rows: list = dataclasses.field(default_factory=list)
    issue_rate: dict | None = None
    gpu: dict = dataclasses.field(default_factory=dict)      # gpu_bench's sections
    deadline: gpu_bench.Deadline | None = None

    @property
    def peer_names(self) -> list:
        """The peers timed: the device's, but for those not installed."""
        if self.args.no_peers or self.device == "simt":
            return []
        table = peers.CPU_PEERS if self.device == "cpu" else peers.GPU_PEERS
        return [p for p in table if p not in self.missing_peers]

    @property
    def missing_peers(self) -> dict:
        """``{peer: how to install it}``: the device's peers that are not installed (named once
        in the report, never timed)."""
        if self.args.no_peers or self.device == "simt":
            return {}
        if "missing_peers" not in self.meta:
            table = peers.CPU_PEERS if self.device == "cpu" else peers.GPU_PEERS
            self.meta["missing_peers"] = peers.not_installed(table)
        return self.meta["missing_peers"]

    @property
    def one_thread(self) -> bool:
        """Whether cupyops is also timed on one thread (the NumPy path on several)."""
        return self.device == "cpu" and (self.meta.get("threads") or 1) > 1


def prepare(args, argv) -> Run:
    """Check the command line and choose the cases (raises BenchError)."""
    if args.threads is not None and args.threads < 1:
        raise BenchError(f"--threads must be at least 1, got {args.threads}")
    device = resolve_device(args)
    mode = size_mode(args)
    budget = BUDGET[mode] if args.budget is None else args.budget
    cases = select_cases(args, mode)
    check_plot(args)
    cases, skipped = drop_unsupported(cases, args)
    run = Run(args, argv, device, mode, budget, cases, skipped)
    plan_budget(run)
    return run


def large_on(run) -> bool:
    """The large section runs: on cuda unless --no-large, elsewhere with --large."""
    a = run.args
    return not a.no_large and (a.large or run.device == "cuda") and not a.compile_only


def large_scale(run) -> str:
    return run.args.large_scale or ("full" if run.device == "cuda" else "tiny")


def plan_budget(run) -> None:
    """The run's estimate and deadline (``run.gpu["budget"]``); a cuda run whose estimate passes
    its deadline is refused before anything runs (BenchError)."""
    a = run.args
    deadline = a.deadline if a.deadline is not None else (
        gpu_bench.CUDA_DEADLINE_S if run.device == "cuda" and not a.compile_only else None)
    large = gpu_bench.section_cases(large_scale(run)) if large_on(run) else []
    est = gpu_bench.estimate(0 if a.compile_only else len(run.cases), run.budget, a.repeat,
                             large, overhead=not a.no_overhead, host=bool(large))
    run.gpu["budget"] = {"estimate": est, "deadline_s": deadline or None,
                         "device_model": "H200, 4.3 TB/s of copy"}
    if deadline and run.device == "cuda" and est["total"] > deadline:
        raise BenchError(f"the run is estimated at {est['total']:.0f} s on an H200 ("
                         + ", ".join(f"{k} {v:.0f} s" for k, v in est.items() if k != "total")
                         + f"), over its deadline of {deadline:.0f} s: time fewer cases "
                         "(--cases, --dtypes), a smaller --budget or --repeat, or pass a longer "
                         "--deadline; nothing was run")
    run.deadline = gpu_bench.Deadline(deadline)


def run_meta(run) -> dict:
    from cupyops.core import devices as _devices
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "device": run.device, "mode": run.mode, "budget_s": run.budget,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.platform()}",
        "versions": _versions(), "paths": _paths_available(),
        "cuda_status": _devices.cuda_status()[1], "simt_status": _devices.simt_status()[1],
        "ratio": "peer_seconds / seconds (> 1: cupyops is faster)", "repeat": run.args.repeat,
        "skipped": [{"op": op, "dtype": dt, "reason": why} for (op, dt), why in run.skipped.items()],
        "simt_allocations": "256-byte aligned, as CuPy's allocator (bench.cupy_like_simt_allocations)",
        "traffic_model": {"sector_bytes": traffic.SECTOR_BYTES,
                          "bandwidth_bytes_per_s": traffic.H100_BANDWIDTH,
                          "launch_s": traffic.LAUNCH_SECONDS},
    }


@contextlib.contextmanager
def run_threads(run):
    """cupyops' NumPy path on ``--threads`` threads (default: the library's setting), and
    PyTorch's CPU peer on as many, for the run; their settings as they were afterwards. The
    counts go into ``run.meta`` (``threads``, ``torch_threads``)."""
    from cupyops.core import threads as _threads
    with _threads.using(run.args.threads) as n:
        run.meta["threads"] = n
        torch = None
        if run.device == "cpu" and not run.args.no_peers:
            try:
                import torch
            except ImportError:
                pass
        old = torch.get_num_threads() if torch is not None else None
        if torch is not None:
            torch.set_num_threads(n)
            run.meta["torch_threads"] = n
        try:
            yield n
        finally:
            if torch is not None:
                torch.set_num_threads(old)


def measure(run) -> None:
    """Every case, then the cold start, the overhead section and the issue-rate model, as
    asked; into ``run``."""
    with run_threads(run):
        _measure(run)
    budget = run.gpu["budget"]
    budget["elapsed_s"] = run.deadline.elapsed()
    large = (run.gpu.get("large") or {}).get("records") or []
    budget["not_run"] = sum(1 for r in run.records + large
                            if str(r.get("status", "")).startswith("not run"))


def _measure(run) -> None:
    args = run.args
    if run.device == "cuda":
        run.copy_bw = copy_bandwidth()
        run.meta["copy_bandwidth_gbps"] = run.copy_bw / 1e9
        from . import device_model
        run.meta["device_spec"] = device_model.from_cupy(copy_bandwidth=run.copy_bw).as_dict()
    if args.compile_only:
        run.gpu["compile"] = gpu_bench.compile_section(
            run.cases, run.device, {} if args.no_peers else (
                peers.GPU_PEERS if run.device == "cuda" else {"numpy": peers.numpy_peer}),
            _large_env(run), large_scale(run), cold_start if not args.no_cold else None)
        return
    _measure_cases(run)
    if large_on(run):
        run.gpu["large"] = gpu_bench.large_section(_large_env(run), large_scale(run),
                                                   args.repeat, run.deadline, args.quiet)
    if run.deadline.passed():
        return
    _measure_extras(run)


def _large_env(run):
    from . import gpu_cases
    if run.device == "cuda":
        return gpu_cases.cuda_env()
    return gpu_cases.rehearsal_env(run.device)


def _measure_cases(run) -> None:
    args = run.args
    prog = Progress(len(run.cases), quiet=args.quiet)
    for i, case in enumerate(run.cases, 1):
        if run.deadline.passed():
            base = {"op": case.op, "case": case.case, "dtype": case.dtype.name,
                    "shape": list(case.shape), "device": run.device, "mode": run.mode}
            run.records.append(gpu_bench.not_run(base, "past the deadline"))
            continue
        prog.update(i, f"{case.id} {'x'.join(map(str, case.shape))}")
        run.records += run_case(case, run.device, run.mode, run.budget, not args.no_peers,
                                run.copy_bw, args.repeat, one_thread=run.one_thread,
                                peer_names=run.peer_names)
    prog.done()


def _measure_extras(run) -> None:
    """The cold start, the overhead section and the issue-rate model, as asked."""
    args = run.args
    if not args.no_cold:
        if not args.quiet:
            print("cold start (fresh processes) ...", file=sys.stderr)
        try:
            run.cold = cold_start(run.device)
        except Exception as exc:
            run.cold = [{"scenario": "all", "device": run.device, "error": _short_err(exc)}]
    if not args.no_overhead:
        from . import overhead
        if not args.quiet:
            print("overhead (host time per call) ...", file=sys.stderr)
        run.overhead_rows = overhead.run(run.device)
    if args.issue_rate:
        run.issue_rate = issue_rate_section()


def issue_rate_section() -> dict:
    """The issue-rate model's summary and rows for sm_90 and sm_80, or why it is unavailable."""
    from . import issue_rate as _ir
    ok, why = _ir.available()
    if not ok:
        return {"unavailable": why}
    rows = _ir.instantiation_report((90, 80))
    return {"summary": _ir.summary(rows), "rows": rows}


def main_table(run):
    """(header, rows, title) of the run's main table."""
    if run.device == "simt":
        title = ("SIMT traffic model (times on the emulator mean nothing; model: sectors x 32 B "
                 f"/ {traffic.H100_BANDWIDTH / 1e12:.1f} TB/s + {traffic.LAUNCH_SECONDS * 1e6:.0f} us "
                 "per launch)")
        return (*traffic_table(run.records), title)
    if run.device == "cuda":
        bw = "n/a" if not run.copy_bw else f"{run.copy_bw / 1e9:.0f}"
        title = (f"CUDA, copy bandwidth {bw} GB/s (ratio = peer time / cupyops time; copy frac = "
                 "time of a copy moving the case's bytes / cupyops' time)")
        return (*cuda_table(run.records, run.peer_names), title)
    title = "CPU: ratio = peer time / cupyops time (> 1: cupyops faster)"
    return (*ratio_table(run.records, run.peer_names), title)


def _missing_paths(run) -> list:
    return [k for k, v in run.meta["paths"].items() if not v]


def _skipped_lines(run) -> list:
    return [f"skipped {op} for {dt}: cupyops does not take it yet ({why})"
            for (op, dt), why in run.skipped.items()]


def _gpu_sections(run) -> bool:
    """The run has gpu_bench's sections (a cuda run, a large or compile rehearsal)."""
    return run.device == "cuda" or bool(run.gpu.get("large") or run.gpu.get("compile"))


def case_names(run) -> list:
    """The run's ``(operator, case name)`` pairs (from its records: a --from-json run has no
    cases)."""
    return [(r["op"], r["case"]) for r in run.records]


def columns_legend(run) -> list:
    """``(column, meaning)`` of the cpu table's columns, for the legend."""
    if run.device != "cpu" or not run.peer_names:
        return []
    cols = [("ok", "yes: the result is NumPy's"),
            ("vs P", "P's time / cupyops' time (> 1: cupyops is faster)")]
    if any(r.get("ratio_1t") for r in run.records):
        cols.append(("vs numpy 1t", "the same with cupyops on one thread"))
    return cols


def text_report(run, table) -> list:
    """The lines printed at the end of a run, the verdict last."""
    header, rows, title = table
    text = [f"cupyops bench: device {run.device}, mode {run.mode}, {len(run.cases)} cases"
            + threads_note(run), title, ""]
    text += report.legend_lines(case_names(run), columns_legend(run))
    text += report.missing_peers_line(run.missing_peers)
    text += ["", format_text(header, rows), ""]
    text += summary_lines(run.records, run.device, run.peer_names)
    text += peer_na_lines(run.records, run.peer_names)
    text += _skipped_lines(run)
    missing = _missing_paths(run)
    if missing:
        text.append("not in this checkout: " + ", ".join(missing))
    if run.cold:
        text += ["", "cold start (fresh process each):", format_text(*cold_table(run.cold))]
    if not run.args.no_overhead:
        from . import overhead
        text += [""] + overhead.format_tables(run.overhead_rows)
    if _gpu_sections(run):
        text += [""] + gpu_bench.text_lines(run.gpu)
    ir = run.issue_rate
    if ir is not None and "unavailable" in ir:
        text += ["", f"issue-rate model unavailable: {ir['unavailable']}"]
    elif ir is not None:
        text += ["", "issue-rate model (busiest pipe, % of H100 copy bandwidth):"]
        text += [f"  {a}: {v['meet_goal']} of {v['modelled']} meet {v['goal']:.0%}"
                 for a, v in ir["summary"].items()]
    return text + ["", verdict(run)]


def verdict(run) -> str:
    """The report's closing line (cupyops/bench/report.py)."""
    return report.verdict_line(run.records, run.peer_names, run.overhead_rows,
                               traffic=run.device == "simt")


def threads_note(run) -> str:
    """``, cupyops on N threads ...`` for the report's first line ('' off the CPU path)."""
    n = run.meta.get("threads")
    if run.device != "cpu" or n is None:
        return ""
    torch = run.meta.get("torch_threads") if "torch" in run.peer_names else None
    single = " and ".join({"numpy": "NumPy", "onnxruntime": "onnxruntime"}[p]
                          for p in run.peer_names if p in ("numpy", "onnxruntime"))
    peers_ = "" if run.args.no_peers else (
        (f"; {single} on 1" if single else "") + (f", PyTorch on {torch}" if torch else ""))
    return f", cupyops on {n} thread{'s' if n != 1 else ''}{peers_}"


def markdown_report(run, table) -> list:
    """The lines of --markdown and --update-docs."""
    header, rows, title = table
    paths = run.meta["paths"]
    md = [f"<!-- generated by: python -m cupyops bench {' '.join(run.argv or [])} -->",
          f"Device `{run.device}`, mode `{run.mode}`, {run.meta['date']}, {run.meta['machine']}"
          f"{threads_note(run)}.",
          f"Kernel paths present: {', '.join(k for k, v in paths.items() if v) or 'none'}; "
          f"missing: {', '.join(_missing_paths(run)) or 'none'}.", "", title, ""]
    legend = report.legend_lines(case_names(run), columns_legend(run))
    if legend:
        md += ["```text"] + legend + ["```", ""]
    md += [f"{line}." for line in report.missing_peers_line(run.missing_peers)]
    if run.device == "simt":
        md.append(format_markdown(*wide_traffic_table(run.records)))
    elif run.device == "cpu":
        md.append(format_markdown(*wide_ratio_table(run.records, run.peer_names)))
    else:
        md.append(format_markdown(header, rows))
    md.append("")
    md += [f"- {line}" for line in summary_lines(run.records, run.device, run.peer_names)]
    md += [f"- {line}" for line in peer_na_lines(run.records, run.peer_names)]
    md += [f"- {line}" for line in _skipped_lines(run)]
    if run.cold:
        md += ["", "Cold start (fresh process each):", "", format_markdown(*cold_table(run.cold))]
    if _gpu_sections(run):
        md += [""] + gpu_bench.markdown_lines(run.gpu)
    if run.overhead_rows:
        from . import overhead
        md += ["", "```text"] + overhead.format_tables(run.overhead_rows) + ["```"]
    return md + ["", f"**{verdict(run)}**"]


def json_document(run) -> dict:
    """The --json file: these keys are read by tools outside the package."""
    doc = {"meta": run.meta, "records": run.records, "cold_start": run.cold,
           "overhead": run.overhead_rows}
    if run.issue_rate is not None:
        doc["issue_rate"] = run.issue_rate
    if _gpu_sections(run):
        doc["gpu"] = run.gpu
    return doc


def write_outputs(run, table) -> list:
    """Write what the options ask for; [(what, path)] of the files written."""
    args, written = run.args, []
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(_finite(json_document(run)), fh, indent=1, default=_json_default,
                      allow_nan=False)
        written.append(("records (JSON)", args.json))
    if args.markdown or args.update_docs:
        md = markdown_report(run, table)
        if args.markdown:
            Path(args.markdown).write_text("\n".join(md) + "\n")
            written.append(("tables (Markdown)", args.markdown))
        if args.update_docs:
            update_docs(args.update_docs, run.device, md)
            written.append((f"the {run.device} section of", args.update_docs))
    if args.plot:
        make_plot(run.records, run.device, args.plot)
        written.append(("plot (PNG)", args.plot))
    return written


def main(argv=None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    if "--dask" in words:   # its own options: dask_bench.py
        from . import dask_bench
        return dask_bench.main([a for a in words if a not in ("--dask", "--")])
    args = parse_args(words)
    if args.from_json:
        return _from_json(args, argv)
    try:
        run = prepare(args, argv)
        if args.list:
            for c in run.cases:
                print(c.id, "x".join(map(str, c.shape)))
            return 0
        run.meta = run_meta(run)
        check_device(run.device, args)
    except BenchError as exc:
        print(f"bench: {exc}", file=sys.stderr)
        return 2
    measure(run)
    table = main_table(run)
    print("\n".join(text_report(run, table)))
    written = write_outputs(run, table)
    if written:
        print()
        for what, path in written:
            print(f"wrote {what}: {os.path.abspath(path)}")
    missed = run.gpu["budget"].get("not_run")
    if missed:
        print(f"bench: {missed} cases were not run: the run passed its deadline of "
              f"{run.gpu['budget']['deadline_s']:.0f} s", file=sys.stderr)
        return 1
    return 0


def _from_json(args, argv) -> int:
    """--from-json: the tables of a run's JSON printed and written again (nothing measured)."""
    try:
        run = gpu_bench.load_run(args.from_json, args, Run)
    except (OSError, ValueError) as exc:
        print(f"bench: cannot read --from-json {args.from_json}: {exc}", file=sys.stderr)
        return 2
    run.meta.setdefault("missing_peers", {})      # (what that run found, not this machine)
    table = main_table(run)
    print("\n".join(text_report(run, table)))
    for what, path in write_outputs(run, table):
        print(f"wrote {what}: {os.path.abspath(path)}")
    return 0


def update_docs(path, device, md_lines) -> None:
    """Replace the block between ``<!-- bench:DEVICE:begin -->`` and ``<!-- bench:DEVICE:end -->``
    in ``path`` with ``md_lines``; append a section with the markers when the page has none."""
    begin, end = f"<!-- bench:{device}:begin -->", f"<!-- bench:{device}:end -->"
    text = Path(path).read_text()
    block = "\n".join([begin] + list(md_lines) + [end])
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        text = head + block + rest.split(end, 1)[1]
    else:
        text = text.rstrip("\n") + f"\n\n## Latest {device} tables\n\n{block}\n"
    Path(path).write_text(text)


def _finite(o):
    """JSON has no inf / NaN: write them as null."""
    if isinstance(o, float) and not math.isfinite(o):
        return None
    if isinstance(o, dict):
        return {k: _finite(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_finite(v) for v in o]
    return o


def _json_default(o):
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, tuple):
        return list(o)
    return str(o)


if __name__ == "__main__":
    sys.exit(main())
