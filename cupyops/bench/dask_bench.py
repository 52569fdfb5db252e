"""The benchmark's Dask section (issue 16): cupyops on Dask arrays.

    python -m cupyops bench --dask [--tiny | --full] [--json PATH]
    python -m cupyops.bench.dask_bench [--tiny | --full] [--json PATH]

Three tables:

* **tasks per chunk**: the tasks each op adds to the input's graph, divided by the number of
  input chunks (the graph is built, nothing runs), and the most input chunks any one task reads
  (1: no task gathers input). ``split_every`` is dask's default.
* **1 vs 2 workers**: wall time of each op on a ``distributed.LocalCluster`` of 1 and then 2
  worker processes (1 thread each), on the same input (the same seeded ``dask.array.random``
  array, persisted on the workers before timing, so only the op is timed); median of
  ``--repeat`` runs; ``ratio = t(1 worker) / t(2 workers)`` (> 1: two workers are faster).
  The machine's cores bound the ratio: on 2 shared cores do not expect 2.
* **bytes moved** for ``argmax`` over all axes on the 2-worker cluster: each worker's
  ``transfer_outgoing_bytes_total`` (distributed's own transfer metric) over the op, against
  the input's bytes and against (number of chunks) x (the size of one chunk's partial, a
  (value, index, NaN flag, empty flag) record as dask's ``sizeof`` counts it): the combine moves
  O(chunks) pairs, never the input.

Chunks are NumPy arrays here (``--device`` picks their path: cpu, or simt for the kernels on
the CPU's emulation of CUDA, which is slow); a GPU run would use CuPy chunks through dask-cuda
(docs/api.md, "Dask arrays").
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import numpy as np

SIZES = {"tiny": ((512, 512), (128, 128)), "quick": ((2048, 2048), (256, 256)),
         "full": ((8192, 8192), (1024, 1024))}


def _ops(cupyops, device):
    """(label, builder of the lazy result from (x, sparse x))."""
    return [
        ("argmax axis=None", lambda x, s: cupyops.argmax(x, device=device)),
        ("argmax axis=0", lambda x, s: cupyops.argmax(x, 0, device=device)),
        ("argmin axis=(0,1) tie=last", lambda x, s: cupyops.argmin(x, (0, 1), tie="last",
                                                                   device=device)),
        ("nanargmax axis=1", lambda x, s: cupyops.nanargmax(x, 1, device=device)),
        ("hardmax axis=0", lambda x, s: cupyops.hardmax(x, 0, device=device)),
        ("count_nonzero axis=None", lambda x, s: cupyops.count_nonzero(s, device=device)),
        ("argwhere (0.1% nonzero)", lambda x, s: cupyops.argwhere(s, device=device)),
        ("nonzero (0.1% nonzero)", lambda x, s: cupyops.nonzero(s, device=device)),
        ("nonzero_coordinates size=1000", lambda x, s: cupyops.nonzero_coordinates(
            s, size=1000, device=device)),
    ]


def _inputs(shape, chunks):
    import dask.array as da
    x = da.random.default_rng(16).random(shape, chunks=chunks)
    s = da.where(x > 0.999, x, 0.0)
    return x, s


def _as_list(r):
    return list(r) if isinstance(r, tuple) else [r]


def tasks_per_chunk(shape, chunks, device="cpu"):
    import dask.array as da

    import cupyops
    from dask.core import get_dependencies
    rows = []
    base = da.from_array(np.zeros(shape), chunks=chunks)
    row_chunks = da.from_array(np.zeros(shape), chunks=(chunks[0], shape[1]))
    cases = [(label, f, base) for label, f in _ops(cupyops, device)]
    cases.insert(4, ("argmax axis=1, rows unsplit", lambda x, s: cupyops.argmax(x, 1), row_chunks))
    for label, f, x in cases:
        rs = _as_list(f(x, x))
        graph = {}
        for r in rs:
            graph.update(dict(r.__dask_graph__()))
        inputs = set(dict(x.__dask_graph__()))
        mine = [k for k in graph if k not in inputs]
        most = max((len(get_dependencies(graph, k) & inputs) for k in mine), default=0)
        rows.append({"op": label, "chunks": x.npartitions, "tasks": len(mine),
                     "tasks_per_chunk": len(mine) / x.npartitions, "max_input_chunks_per_task": most})
    return rows


def _cluster(n_workers):
    import distributed
    cluster = distributed.LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True,
                                       dashboard_address=":0", silence_logs=40)
    return cluster, distributed.Client(cluster)   # the default while it lives (wait, persist)


def _outgoing(client):
    return client.run(lambda dask_worker: dask_worker.transfer_outgoing_bytes_total)


def _partial_bytes(chunk_shape):
    """dask's sizeof of one chunk's argmax partial (axis=None), as the combine receives it."""
    from dask.sizeof import sizeof

    from cupyops.interop import dask as _dask
    c = np.random.default_rng(0).random(chunk_shape)
    p = _dask.arg_chunk(c, tuple(range(len(chunk_shape))), kind="max", tie="first",
                        skip_nan=False, device="cpu", opname="argmax")
    return sizeof(p)


def scaling(shape, chunks, device="cpu", repeat=3, workers=(1, 2)):
    """{op: {n_workers: seconds}} and the bytes-moved record of argmax over all axes."""
    import distributed

    import cupyops
    times = {}
    moved = None
    for n in workers:
        cluster, client = _cluster(n)
        try:
            x, s = _inputs(shape, chunks)
            x, s = client.persist([x, s])
            distributed.wait([x, s])
            for label, f in _ops(cupyops, device):
                rs = _as_list(f(x, s))
                client.compute(rs, sync=True)          # warm-up (imports, first compile)
                ts = []
                for _ in range(repeat):
                    t0 = time.perf_counter()
                    client.compute(rs, sync=True)
                    ts.append(time.perf_counter() - t0)
                times.setdefault(label, {})[n] = statistics.median(ts)
            if n == max(workers):
                before = _outgoing(client)
                r = cupyops.argmax(x, device=device)
                client.compute(r, sync=True)
                after = _outgoing(client)
                per = {w: after[w] - before[w] for w in after}
                nchunks = x.npartitions
                moved = {"workers": len(per), "chunks": nchunks,
                         "input_bytes": int(np.prod(shape)) * 8,
                         "per_worker_outgoing_bytes": sorted(per.values()),
                         "total_bytes": sum(per.values()),
                         "partial_bytes": _partial_bytes(chunks),
                         "chunks_x_partial_bytes": nchunks * _partial_bytes(chunks)}
        finally:
            client.close()
            cluster.close()
    return times, moved


def format_tables(tasks, times, moved, shape, chunks):
    out = [f"Dask: input {shape} float64 in chunks of {chunks} (NumPy chunks)", "",
           "tasks per chunk (graph only):",
           f"  {'op':34s} {'chunks':>6s} {'tasks':>6s} {'per chunk':>9s} {'max input/task':>14s}"]
    for r in tasks:
        out.append(f"  {r['op']:34s} {r['chunks']:6d} {r['tasks']:6d} {r['tasks_per_chunk']:9.2f} "
                   f"{r['max_input_chunks_per_task']:14d}")
    if times:
        ws = sorted(next(iter(times.values())))
        out += ["", f"time with {' and '.join(map(str, ws))} worker processes (1 thread each), "
                    f"{os.cpu_count()} cores on this machine:",
                f"  {'op':34s} " + " ".join(f"{f'{w} worker(s)':>12s}" for w in ws) +
                f" {'ratio t1/t2':>11s}"]
        for label, t in times.items():
            ratio = t[ws[0]] / t[ws[-1]] if len(ws) > 1 else float("nan")
            out.append(f"  {label:34s} " + " ".join(f"{t[w] * 1e3:10.1f}ms" for w in ws) +
                       f" {ratio:11.2f}")
    if moved:
        out += ["", "bytes moved between workers, argmax over all axes "
                    f"({moved['workers']} workers, {moved['chunks']} chunks):",
                f"  per worker (outgoing): {moved['per_worker_outgoing_bytes']} B; total "
                f"{moved['total_bytes']} B",
                f"  input: {moved['input_bytes']} B; chunks x one partial: {moved['chunks']} x "
                f"{moved['partial_bytes']} B = {moved['chunks_x_partial_bytes']} B; moved/input = "
                f"{moved['total_bytes'] / moved['input_bytes']:.2e}"]
    return out


def run(mode="quick", device="cpu", repeat=3, timing=True):
    shape, chunks = SIZES[mode]
    tasks = tasks_per_chunk(shape, chunks, device)
    times, moved = scaling(shape, chunks, device, repeat) if timing else ({}, None)
    return {"shape": shape, "chunks": chunks, "device": device, "tasks": tasks,
            "times": {k: {str(n): v for n, v in t.items()} for k, t in times.items()},
            "moved": moved}, format_tables(tasks, times, moved, shape, chunks)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m cupyops bench --dask", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    size = p.add_mutually_exclusive_group()
    size.add_argument("--tiny", action="store_true")
    size.add_argument("--full", action="store_true")
    p.add_argument("--device", default="cpu", choices=("cpu", "simt"),
                   help="path of the NumPy chunks (default cpu)")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--no-timing", action="store_true", help="tasks per chunk only (no cluster)")
    p.add_argument("--json", default=None)
    args, _ = p.parse_known_args(argv)
    try:
        import dask.array  # noqa: F401
        import distributed  # noqa: F401
    except ImportError as exc:
        print(f"bench --dask needs dask[array] and distributed ({exc}); "
              f"pip install 'dask[array]' distributed", file=sys.stderr)
        return 2
    mode = "tiny" if args.tiny else "full" if args.full else "quick"
    # workers must import cupyops from the installation, not from this directory
    old = os.getcwd()
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)
        try:
            record, text = run(mode, args.device, args.repeat, not args.no_timing)
        finally:
            os.chdir(old)
    print("\n".join(text))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(record, fh, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
