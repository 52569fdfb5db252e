"""Push recorded kernel launches through real CuPy's launch marshalling, without a GPU.

``record_sweep()`` runs every public op over every dtype, layout case and pass on the simt
backend with ``recording(args=True)`` and returns the launches as plain descriptors (buffers
by size, by-value arguments as the objects the launch code passed). ``marshal(launches)``
rebuilds them, converts the arguments exactly as the CUDA backend does
(``cupyops.core.backend.cupy_kernel_args``), wraps each buffer in a ``cupy.ndarray`` over host
memory (never dereferenced) and calls ``cupy.cuda.function.Function.__call__`` with an explicit null stream: CuPy's own
``_pointer`` marshalling runs on every argument, then the launch reaches the driver, which is
missing here. Any other error is a marshalling failure.

Every converted argument is checked first: a NumPy array or scalar of a structured dtype
(whose marshalling walks the fields in Python) is a failure, and so is a by-value struct whose
bytes did not survive the conversion. ``marshal_ratios(launches)`` times the marshalling of each
kernel's arguments against a launch of the same arity with only pointers and ints.

Run as a script (``python cupy_marshal.py launches.pkl [--ratios]``) it marshals (and times) a
pickled list in this process, so the test can run it against another CuPy (``pip install
--target``) in a subprocess. Prints one JSON line: {"cupy": version, "ok": n, "failures": [...],
"ratios": {kernel: [ratio, us, baseline us]}}.
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


def _field_walker(arg) -> bool:
    """Whether CuPy's marshalling of ``arg`` would walk fields in Python: a NumPy array or
    scalar of a structured dtype (NumPy builds its ``__array_interface__`` field by field)."""
    return isinstance(arg, (np.ndarray, np.generic)) and arg.dtype.fields is not None


def _check_by_value(expr, given, conv) -> list:
    """Failures of the by-value conversion of one launch: a structured argument reaching CuPy,
    or a struct whose bytes did not survive the conversion."""
    from cupyops.core.backend import struct_arg_bytes
    out = []
    for g, c in zip(given, conv):
        if _field_walker(c):
            out.append(f"{expr}: a {type(c).__name__} of structured dtype {c.dtype} reached "
                       "CuPy (its marshalling walks the fields in Python)")
        elif isinstance(g, np.void) and struct_arg_bytes(c) != g.tobytes():
            out.append(f"{expr}: the by-value struct's bytes changed in the conversion")
    return out


def _rebuild(descs, keep):
    """(the launch's arguments as recorded, as the CUDA backend converts them)."""
    from cupyops.core.backend import cupy_kernel_args
    given = tuple(_cupy_buffer(d[1], d[2], keep) if d[0] == "buffer" else d[1] for d in descs)
    # ("raw", obj): a control that skips the backend's conversion
    conv = tuple(a if d[0] == "raw" else c
                 for d, a, c in zip(descs, given, cupy_kernel_args(given)))
    return given, conv


def marshal(launches) -> dict:
    """Run CuPy's launch marshalling over ``launches``; {"cupy", "ok", "failures"}."""
    import cupy
    from cupy.cuda.function import Function

    ok = 0
    failures = []
    seen = set()
    for expr, grid, block, smem, descs in launches:
        keep = []
        given, args = _rebuild(descs, keep)
        key = (expr, tuple(type(a).__name__ for a in args))
        bad = _check_by_value(expr, given, args)
        if bad:
            if key not in seen:
                seen.add(key)
                failures.extend(bad)
            continue
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


def _time_marshal(fn, args, calls, rounds) -> list:
    """Seconds per marshalling of ``args`` (up to the missing driver), one figure a round."""
    import time
    out = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(calls):
            try:
                fn((1,), (1,), args, stream=_NULL_STREAM)
            except Exception:   # noqa: BLE001 - the missing driver, checked by marshal()
                pass
        out.append((time.perf_counter() - t0) / calls)
    return out


def marshal_ratios(launches, calls=400, rounds=9) -> dict:
    """Per kernel (name before the template arguments): the marshalling time of one of its
    recorded launches, converted as the CUDA backend converts them, over that of a launch of
    the same arity with only pointers and ints (each buffer a CuPy array, each by-value
    argument an ``np.int64``), both through real CuPy's ``Function.__call__`` up to the missing
    driver. Interleaved rounds, the minimum of each: {kernel: (ratio, us, baseline us)}."""
    from cupy.cuda.function import Function
    fn = Function.__new__(Function)
    picked = {}
    for expr, grid, block, smem, descs in launches:
        name = expr.split("<")[0]
        if name not in picked and all(d[0] in ("buffer", "value") for d in descs):
            picked[name] = descs
    out = {}
    for name, descs in sorted(picked.items()):
        keep = []
        _, args = _rebuild(descs, keep)
        base = tuple(a if d[0] == "buffer" else np.int64(1) for d, a in zip(descs, args))
        ta, tb = [], []
        for _ in range(rounds):
            ta += _time_marshal(fn, args, calls, 1)
            tb += _time_marshal(fn, base, calls, 1)
        out[name] = (min(ta) / min(tb), min(ta) * 1e6, min(tb) * 1e6)
    return out


if __name__ == "__main__":
    # python cupy_marshal.py launches.pkl [--ratios]: marshal (and time) a pickled sweep here
    with open(sys.argv[1], "rb") as f:
        recorded = pickle.load(f)
    res = marshal(recorded)
    if "--ratios" in sys.argv[2:]:
        res["ratios"] = marshal_ratios([r for r in recorded if not r[0].startswith("control")])
    print(json.dumps(res))
