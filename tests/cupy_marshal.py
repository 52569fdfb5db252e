"""Push recorded kernel launches through real CuPy's launch marshalling, without a GPU.

``record_sweep()`` runs every public op over every dtype, layout case and pass on the simt
backend with ``recording(args=True)`` and returns the launches as plain descriptors (buffers
by size, by-value arguments as the objects the launch code passed). ``marshal(launches)``
rebuilds them, converts the arguments exactly as the CUDA backend does
(``cupyops.core.backend.cupy_kernel_args``), wraps each buffer in a ``cupy.ndarray`` over host
memory (never dereferenced) and calls ``cupy.cuda.function.Function.__call__`` with an explicit null stream: CuPy's own
``_pointer`` marshalling runs on every argument, then the launch reaches the driver, which is
missing here. Any other error is a marshalling failure.

Run as a script (``python cupy_marshal.py launches.pkl``) it marshals a pickled list in this
process, so the test can run it against another CuPy (``pip install --target``) in a
subprocess. Prints one JSON line: {"cupy": version, "ok": n, "failures": [...]}.
"""
from __future__ import annotations

import json
import pickle
import sys

import numpy as np

DRIVER_MISSING = ("cudaErrorInsufficientDriver", "cudaErrorNoDevice", "CUDA_ERROR_NO_DEVICE",
                  "CUDA_ERROR_NOT_INITIALIZED", "cudaErrorInitializationError")


def _describe(arg):
    if isinstance(arg, np.ndarray):
        return ("buffer", int(arg.nbytes), arg.dtype.str)
    return ("value", arg)


def record_sweep() -> list:
    """[(expr, grid, block, shared_mem, [descriptor, ...]), ...] of a sweep on simt."""
    import cupyops
    from cupyops.ops.argreduce import launch as G
    from cupyops.ops.argreduce import plan as GP
    from cupyops.testing import force_64bit, recording

    split_small = {"min_split_elements": 0, "min_work_per_thread": 1, "min_block_team_vecs": 64,
                   "min_scratch_ratio": 0}
    rng = np.random.default_rng(7)
    ar_dtypes = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                 "float16", "float32", "float64", "complex64", "complex128"]
    nz_dtypes = ar_dtypes + ["datetime64[s]"]
    launches = []

    def run(fn):
        with recording(args=True) as t:
            fn()
        for (expr, grid, block, smem), args in zip(t.launches, t.launch_args):
            launches.append((expr, grid, block, smem, [_describe(a) for a in args]))

    base = rng.integers(0, 3, (33, 40, 3))
    layouts = {"C": lambda a: a, "F": np.asfortranarray, "neg": lambda a: a[::-1, :, ::-2],
               "T": lambda a: a.transpose(2, 0, 1)}
    saved = dict(GP.PLAN_OPTIONS)
    try:
        for split in (False, True):
            GP.PLAN_OPTIONS.clear()
            GP.PLAN_OPTIONS.update(split_small if split else saved)
            for wide in (False, True):
                with force_64bit(wide):
                    for dt in ar_dtypes:
                        for lname, lay in layouts.items():
                            x = lay(base.astype(dt))
                            for axis in (None, 0, 2, (0, 2)):
                                for tie in ("first", "last"):
                                    run(lambda: cupyops.argmax(x, axis=axis, tie=tie,
                                                               device="simt"))
                                run(lambda: cupyops.argmin(x, axis=axis, dtype="int8"
                                                           if axis == 2 else "int32",
                                                           device="simt"))
                                run(lambda: cupyops.hardmax(x, axis=axis, device="simt"))
                                if np.dtype(dt).kind in "fc":
                                    run(lambda: cupyops.nanargmax(x, axis=axis, device="simt"))
    finally:
        GP.PLAN_OPTIONS.clear()
        GP.PLAN_OPTIONS.update(saved)
    # datetime argreduce; complex one-hot into an out that is only element-aligned
    t = (base.reshape(-1)[:99] * 1000).astype("datetime64[s]")
    run(lambda: cupyops.argmax(t, device="simt"))
    for dt in ("complex64", "complex128"):
        x = base[:, :, 0].astype(dt)
        raw = np.zeros(x.nbytes + x.itemsize, np.uint8)
        half = x.itemsize // 2
        out = raw[half:half + x.nbytes].view(dt).reshape(x.shape)
        run(lambda: cupyops.hardmax(x, axis=1, out=out, device="simt"))
    for wide in (False, True):
        with force_64bit(wide):
            for dt in nz_dtypes:
                for lname, lay in layouts.items():
                    x = lay((rng.random((33, 40, 3)) < 0.3).astype(dt))
                    run(lambda: cupyops.argwhere(x, dtype="int32", device="simt"))
                    run(lambda: cupyops.nonzero(x, device="simt"))
                    run(lambda: cupyops.nonzero_coordinates(x, size=50, fill_value=-1,
                                                            device="simt"))
                    for axis in (None, 0, (1, 2)):
                        run(lambda: cupyops.count_nonzero(x, axis=axis, device="simt"))
    big = np.ones(300_000, np.float32)       # count_nonzero split over chunks (atomic)
    run(lambda: cupyops.count_nonzero(big, device="simt"))
    return launches


def _cupy_buffer(nbytes, dtype, keep):
    import cupy
    from cupy.cuda import memory
    host = np.zeros(max(nbytes, 16), np.uint8)
    keep.append(host)
    mem = memory.UnownedMemory(host.ctypes.data, host.nbytes, host, 0)
    dt = np.dtype(dtype)
    return cupy.ndarray((nbytes // dt.itemsize,), dt, memptr=memory.MemoryPointer(mem, 0))


class _Stream:
    """A stream handle for ``Function.__call__(stream=...)``: CuPy reads only ``.ptr``. Without
    it CuPy 14 asks the driver for the current stream first and fails before marshalling."""
    ptr = 0


_NULL_STREAM = _Stream()


def marshal(launches) -> dict:
    """Run CuPy's launch marshalling over ``launches``; {"cupy", "ok", "failures"}."""
    import cupy
    from cupy.cuda.function import Function

    from cupyops.core.backend import cupy_kernel_args

    ok = 0
    failures = []
    seen = set()
    for expr, grid, block, smem, descs in launches:
        keep = []
        args = tuple(_cupy_buffer(d[1], d[2], keep) if d[0] == "buffer" else d[1] for d in descs)
        # ("raw", obj): a control that skips the backend's conversion
        args = tuple(a if d[0] == "raw" else c
                     for d, a, c in zip(descs, args, cupy_kernel_args(args)))
        key = (expr, tuple(type(a).__name__ for a in args))
        try:
            Function.__new__(Function)(tuple(grid), tuple(block), args, shared_mem=smem,
                                       stream=_NULL_STREAM)
        except Exception as exc:   # noqa: BLE001 - every outcome is classified below
            text = f"{type(exc).__name__}: {exc}"
            if any(s in text for s in DRIVER_MISSING):
                ok += 1
                continue
            if key not in seen:
                seen.add(key)
                failures.append(f"{expr} grid={grid} block={block} args="
                                f"{[type(a).__name__ for a in args]}: {text[:300]}")
            continue
        failures.append(f"{expr}: the launch returned without reaching a driver")
    return {"cupy": cupy.__version__, "ok": ok, "failures": failures}


if __name__ == "__main__":
    with open(sys.argv[1], "rb") as f:
        recorded = pickle.load(f)
    print(json.dumps(marshal(recorded)))
