"""Every operator on Dask arrays against NumPy, on the threaded scheduler and a one-worker
LocalCluster (issue 32, part 6).

``python -m cupyops.tools.dask_check --chunks cupy [--json PATH]`` on a GPU machine: Dask arrays
whose chunks are CuPy arrays (uneven chunks, every reduced layout), each operator of
:func:`cupyops.ops.operators` with the calls of its selftest, computed on the threaded
scheduler and on a ``distributed.LocalCluster`` of one worker process, and compared with NumPy's
composition of the same result. ``--chunks numpy --device simt`` is the rehearsal without a GPU
(the very kernels on the CPU); ``--chunks numpy`` alone runs the NumPy path.

The calls and their NumPy references are each operator's own selftest calls (its descriptor's
``selftest``), on three inputs (ties, NaN, a mask) and two axis forms, compared bit for bit; an
operator with a Dask implementation but no selftest calls is a failure ("no reference"). Where distributed is missing or
its cluster does not start (no wheel of a compiled need, a sandbox without sockets), the check
runs the threaded scheduler only and says why (``CUPYOPS_DASK_NOTE`` from
:mod:`cupyops.tools.gpu_wheels` too); exit status 0 only when every run check passed.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

__all__ = ["references", "calls_for", "run_checks", "main"]


class _Input:
    """A selftest input (what an operator's ``selftest`` reads: ``x`` and ``axes``)."""

    def __init__(self, x, axes):
        self.x, self.axes = x, axes


def _inputs(rng):
    """(name, host array, chunks): uneven chunks; ties (small integers), NaN (no all-NaN
    group), a density of zeros for the nonzero family."""
    a = rng.integers(0, 5, (37, 50)).astype(np.float32)
    b = a.copy()
    b[rng.random(b.shape) < 0.2] = np.nan
    b[:, 0] = 1.0
    m = (rng.random((37, 50)) < 0.3).astype(np.int8)
    return [("values", a, (10, 17)), ("nan", b, (16, 23)), ("mask", m, (9, 21))]


def references():
    """The operators the check covers (each descriptor's Dask implementation and selftest
    calls), and those with a Dask implementation but no selftest references."""
    from cupyops import ops
    have = [op.name for op in ops.operators() if op.dask is not None]
    return (sorted(n for n in have if ops.operator(n).selftest is not None),
            sorted(n for n in have if ops.operator(n).selftest is None))


def calls_for(name, case, rng):
    """The operator's selftest calls on one input: label, arguments, its NumPy reference."""
    from cupyops import ops
    return ops.operator(name).selftest(case, rng)


def _host(x):
    if isinstance(x, (tuple, list)):
        return tuple(_host(v) for v in x)
    if hasattr(x, "get"):
        return x.get()
    return np.asarray(x)


def _compute(lazy, client):
    """A lazy result (an array or a tuple of them) computed on ``client``, else threads."""
    items = list(lazy) if isinstance(lazy, tuple) else [lazy]
    if client is not None:
        got = client.gather(client.compute(items))
    else:
        import dask
        got = dask.compute(*items, scheduler="threads")
    return tuple(got) if isinstance(lazy, tuple) else got[0]


def _check_one(fn, x, call, want, device, client) -> str:
    """"pass", "MISMATCH" or "ERROR ..." of one call on the Dask array ``x``."""
    from cupyops.tools.selftest import Raises, same
    kw = dict(call.kwargs, device=device) if device else call.kwargs
    try:
        got = _host(_compute(fn(x, *call.args, **kw), client))
    except Exception as exc:      # noqa: BLE001 - every outcome is judged
        if isinstance(want, Raises) and isinstance(exc, want.error):
            return "pass"
        return f"ERROR {type(exc).__name__}: {str(exc)[:160]}"
    if isinstance(want, Raises):
        return f"MISMATCH: returned instead of raising {want.error.__name__}"
    return "pass" if same(got, want) else "MISMATCH"


def run_checks(chunks: str, device, scheduler, client=None) -> list:
    """One row per operator, input and call: computed on ``scheduler`` (``"threads"``, or
    ``"cluster"`` with ``client``) from chunks of ``chunks`` ("cupy" or "numpy"), against the
    operator's own NumPy reference (its descriptor's selftest calls), bit for bit."""
    import dask.array as da

    import cupyops
    from cupyops.tools.selftest import expect
    xp = __import__("cupy") if chunks == "cupy" else np
    rng = np.random.default_rng(0)
    rows = []
    for name in references()[0]:
        fn = getattr(cupyops, name)
        for input_name, host, chunk in _inputs(rng):
            x = da.from_array(host, chunks=chunk).map_blocks(xp.asarray, dtype=host.dtype)
            for axes in (None, 1):
                for call in calls_for(name, _Input(host, axes), rng):
                    t0 = time.perf_counter()
                    status = _check_one(fn, x, call, expect(call.reference), device, client)
                    rows.append({"op": name, "call": f"{input_name} {call.label}",
                                 "scheduler": scheduler, "chunks": chunks, "status": status,
                                 "seconds": time.perf_counter() - t0})
    return rows


def _cluster(chunks):
    """(client, cluster, note): a one-worker LocalCluster, or None and why not."""
    note = os.environ.get("CUPYOPS_DASK_NOTE", "")
    if note:                      # gpu_wheels could not install distributed
        return None, None, note
    try:
        from distributed import Client, LocalCluster
    except ImportError as exc:
        return None, None, note or f"distributed is not installed ({exc})"
    try:
        cluster = LocalCluster(n_workers=1, threads_per_worker=2, processes=True,
                               dashboard_address=None, silence_logs=40)
        return Client(cluster), cluster, note
    except Exception as exc:
        return None, None, f"LocalCluster did not start ({type(exc).__name__}: {exc})"[:300]


def _gpu_ok(chunks) -> str | None:
    if chunks != "cupy":
        return None
    from cupyops.core.devices import cuda_status
    ok, why = cuda_status()
    return None if ok else f"no GPU: {why}"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m cupyops.tools.dask_check",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--chunks", choices=("cupy", "numpy"), default="cupy")
    p.add_argument("--device", default=None, help="cupyops' device for NumPy chunks (simt)")
    p.add_argument("--schedulers", default="threads,cluster")
    p.add_argument("--json", metavar="PATH")
    args = p.parse_args(argv)
    why = _gpu_ok(args.chunks)
    if why:
        print(why, file=sys.stderr)
        return 2
    try:
        import dask
    except ImportError:
        print("dask is not installed (on the GPU machine: python -m cupyops.tools.gpu_wheels run "
              "--wheels gpu-wheels -- python -m cupyops.tools.dask_check)", file=sys.stderr)
        return 2
    covered, missing = references()
    rows = [{"op": op, "call": "", "scheduler": "-", "chunks": args.chunks,
             "status": "FAIL: no selftest references in its descriptor"} for op in missing]
    notes = [f"dask {dask.__version__} from {os.path.dirname(dask.__file__)}"]
    scheds = [s.strip() for s in args.schedulers.split(",") if s.strip()]
    if "threads" in scheds:
        rows += run_checks(args.chunks, args.device, "threads")
    if "cluster" in scheds:
        rows += _cluster_rows(args, notes)
    return _report(rows, notes, args.json)


def _cluster_rows(args, notes) -> list:
    client, cluster, note = _cluster(args.chunks)
    if note:
        notes.append(note)
    if client is None:
        notes.append("threaded scheduler only: the one-worker LocalCluster was not checked")
        return [{"op": "-", "call": "", "scheduler": "cluster", "chunks": args.chunks,
                 "status": f"skipped: {note}"}]
    try:
        return run_checks(args.chunks, args.device, "cluster", client)
    finally:
        client.close()
        cluster.close()


def _report(rows, notes, path) -> int:
    for r in rows:
        print(f"{r['scheduler']:<8} {r['op']:<20} {r['call']:<20} {r['status']}")
    bad = [r for r in rows if not r["status"].startswith(("pass", "skipped"))]
    checked = sum(1 for r in rows if r["status"] == "pass")
    for n in notes:
        print(f"note: {n}")
    print(f"dask check: {checked} passed, {len(bad)} failed")
    if path:
        with open(path, "w") as fh:
            json.dump({"rows": rows, "notes": notes}, fh, indent=1)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
