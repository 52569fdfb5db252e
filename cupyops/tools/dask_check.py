"""Every operator on Dask arrays against NumPy, on the threaded scheduler and a one-worker
LocalCluster (issue 32, part 6).

``python -m cupyops.tools.dask_check --chunks cupy [--json PATH]`` on a GPU machine: Dask arrays
whose chunks are CuPy arrays (uneven chunks, every reduced layout), each public function of
:data:`cupyops._call.PUBLIC` with its arguments of :data:`CALLS`, computed on the threaded
scheduler and on a ``distributed.LocalCluster`` of one worker process, and compared with NumPy's
composition of the same result. ``--chunks numpy --device simt`` is the rehearsal without a GPU
(the very kernels on the CPU); ``--chunks numpy`` alone runs the NumPy path.

A public function with no entry in :data:`CALLS` is a failure ("no reference"): a new op (e.g.
``max_and_argmax``) adds its calls and NumPy reference there. Where distributed is missing or
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

__all__ = ["CALLS", "references", "run_checks", "main"]


def _flip_last(x, axis, fn):
    """NumPy's argmax/argmin with the last tie: over the flipped axis, mapped back."""
    if axis is None:
        return x.size - 1 - fn(x.reshape(-1)[::-1])
    n = x.shape[axis]
    return n - 1 - fn(np.flip(x, axis), axis=axis)


def _hardmax(x, axis):
    out = np.zeros_like(x)
    np.put_along_axis(out, np.expand_dims(np.argmax(x, axis=axis), axis), 1, axis)
    return out


def _coords(x, size):
    c = np.argwhere(x)
    out = np.zeros((size, x.ndim), c.dtype)
    out[:min(size, len(c))] = c[:size]
    return out, len(c)


#: op -> [(label, keyword arguments, NumPy reference(x))]
CALLS = {
    "argmax": [("axis=None", {}, np.argmax),
               ("axis=1", {"axis": 1}, lambda x: np.argmax(x, axis=1)),
               ("axis=0 tie=last", {"axis": 0, "tie": "last"},
                lambda x: _flip_last(x, 0, np.argmax))],
    "argmin": [("axis=-1", {"axis": -1}, lambda x: np.argmin(x, axis=-1)),
               ("axis=None tie=last", {"tie": "last"}, lambda x: _flip_last(x, None, np.argmin))],
    "nanargmax": [("axis=1", {"axis": 1}, lambda x: np.nanargmax(x, axis=1))],
    "nanargmin": [("axis=0", {"axis": 0}, lambda x: np.nanargmin(x, axis=0))],
    "hardmax": [("axis=-1", {}, lambda x: _hardmax(x, -1)),
                ("axis=0", {"axis": 0}, lambda x: _hardmax(x, 0))],
    "count_nonzero": [("axis=None", {}, np.count_nonzero),
                      ("axis=0", {"axis": 0}, lambda x: np.count_nonzero(x, axis=0))],
    "argwhere": [("", {}, np.argwhere)],
    "nonzero": [("", {}, np.nonzero)],
    "nonzero_coordinates": [("size=50", {"size": 50}, lambda x: _coords(x, 50))],
}


def references():
    """The public functions the check covers and those it has no reference for."""
    from cupyops._call import PUBLIC
    return sorted(n for n in PUBLIC if n in CALLS), sorted(n for n in PUBLIC if n not in CALLS)


def _host(x):
    if isinstance(x, (tuple, list)):
        return tuple(_host(v) for v in x)
    if hasattr(x, "get"):
        return x.get()
    return np.asarray(x)


def _same(a, b) -> bool:
    if isinstance(a, tuple) or isinstance(b, tuple):
        return (isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b)
                and all(_same(u, v) for u, v in zip(a, b)))
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and bool(np.array_equal(a, b, equal_nan=a.dtype.kind == "f"))


def _inputs(rng):
    """(name, host array, chunks): uneven chunks; ties (small integers), NaN for nanarg*, a
    density of zeros for the nonzero family."""
    a = rng.integers(0, 5, (37, 50)).astype(np.float32)
    b = a.copy()
    b[rng.random(b.shape) < 0.2] = np.nan
    b[:, 0] = 1.0                                      # no all-NaN group
    m = (rng.random((37, 50)) < 0.3).astype(np.int8)
    return {"values": (a, (10, 17)), "nan": (b, (16, 23)), "mask": (m, (9, 21))}


def _input_for(op):
    if op.startswith("nanarg"):
        return "nan"
    return "mask" if op in ("count_nonzero", "argwhere", "nonzero", "nonzero_coordinates") \
        else "values"


def _compute(lazy, client):
    """A lazy result (an array or a tuple of them) computed on ``client``, else threads."""
    items = list(lazy) if isinstance(lazy, tuple) else [lazy]
    if client is not None:
        got = client.gather(client.compute(items))
    else:
        import dask
        got = dask.compute(*items, scheduler="threads")
    return tuple(got) if isinstance(lazy, tuple) else got[0]


def run_checks(chunks: str, device, scheduler, client=None) -> list:
    """One row per op and call: computed on ``scheduler`` (``"threads"``, or ``"cluster"``
    with ``client``) from chunks of ``chunks`` ("cupy" or "numpy"), against NumPy."""
    import dask.array as da

    import cupyops
    xp = __import__("cupy") if chunks == "cupy" else np
    data = _inputs(np.random.default_rng(0))
    rows = []
    for op, calls in CALLS.items():
        host, chunk = data[_input_for(op)]
        x = da.from_array(host, chunks=chunk).map_blocks(xp.asarray, dtype=host.dtype)
        for label, kw, ref in calls:
            kw = dict(kw, device=device) if device else kw
            t0 = time.perf_counter()
            try:
                got = _host(_compute(getattr(cupyops, op)(x, **kw), client))
                ok = _same(got, _host(ref(host)))
                status = "pass" if ok else "MISMATCH"
            except Exception as exc:
                status = f"ERROR {type(exc).__name__}: {str(exc)[:160]}"
            rows.append({"op": op, "call": label, "scheduler": scheduler, "chunks": chunks,
                         "status": status, "seconds": time.perf_counter() - t0})
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
             "status": "FAIL: no reference in cupyops/tools/dask_check.py CALLS"} for op in missing]
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
