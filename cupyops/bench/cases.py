"""The benchmark's cases (:mod:`cupyops.bench.bench`) and their inputs: shapes per size set,
the case list, seeded inputs aligned as CuPy allocates, the call each case makes, and the simt
allocations made CuPy-like. Shared by the benchmark and the memory terms of the kernel model
(:mod:`cupyops.bench.issue_rate`), which runs every case on simt.
"""
from __future__ import annotations

import contextlib
import math
import zlib

import numpy as np

__all__ = ["DTYPES", "DENSITIES", "SIZES", "Case", "make_cases", "DECODE_SHAPES",
           "DECODE_DTYPES", "decode_cases", "aligned_empty", "random_values", "nonzero_values",
           "make_input", "cupyops_call", "cupy_like_simt_allocations"]

DTYPES = ("float32", "float16", "int8", "bool")
DENSITIES = (0.001, 0.1, 0.5)

# Shapes per size mode: 2-D (last/first/all axes, nonzero), 4-D (middle axes of argmax/argmin),
# 3-D (middle axis of hardmax).
SIZES = {
    "tiny":  {"2d": (32, 128), "4d": (4, 16, 16, 4), "3d": (8, 32, 16), "nz": (64, 64)},
    "small": {"2d": (256, 1024), "4d": (8, 64, 64, 8), "3d": (32, 128, 64), "nz": (256, 1024)},
    "quick": {"2d": (1024, 1024), "4d": (16, 64, 64, 16), "3d": (64, 256, 64), "nz": (1024, 1024)},
    "full":  {"2d": (4096, 4096), "4d": (32, 128, 128, 32), "3d": (256, 256, 256),
              "nz": (4096, 4096)},
}

# --------------------------------------------------------------------------------------------
# cases
# --------------------------------------------------------------------------------------------

class Case:
    """One benchmark case."""

    __slots__ = ("op", "case", "dtype", "shape", "params")

    def __init__(self, op, case, dtype, shape, params):
        self.op, self.case, self.dtype = op, case, np.dtype(dtype)
        self.shape, self.params = tuple(shape), dict(params)

    def __repr__(self):
        return f"Case({self.id!r}, shape={self.shape})"

    @property
    def id(self):
        return f"{self.op}/{self.case}/{self.dtype.name}"


def make_cases(mode, dtypes=DTYPES):
    sz = SIZES[mode]
    cases = []
    for dt in dtypes:
        dt = np.dtype(dt)
        for op in ("argmax", "argmin"):
            for layout, shape, axes in (("last", sz["2d"], (1,)), ("first", sz["2d"], (0,)),
                                        ("middle", sz["4d"], (1, 2)), ("all", sz["2d"], (0, 1))):
                for tie in ("first", "last"):
                    cases.append(Case(op, f"{layout} tie={tie}", dt, shape,
                                      {"axes": axes, "tie": tie, "layout": layout}))
        for layout, shape, axes in (("last", sz["2d"], (1,)), ("middle", sz["3d"], (1,))):
            for tie in ("first", "last"):
                cases.append(Case("hardmax", f"{layout} tie={tie}", dt, shape,
                                  {"axes": axes, "tie": tie, "layout": layout}))
        for d in DENSITIES:
            cases.append(Case("argwhere", f"d={d}", dt, sz["nz"], {"density": d}))
            cases.append(Case("nonzero", f"d={d}", dt, sz["nz"], {"density": d}))
            cases.append(Case("count_nonzero", f"d={d}", dt, sz["nz"], {"density": d}))
            cases.append(Case("nonzero_coordinates", f"d={d} size=n", dt, sz["nz"],
                              {"density": d, "size": "n"}))
    cases += decode_cases()
    return cases


#: greedy decoding: argmax over the last axis of (batch, vocabulary) logits
DECODE_SHAPES = ((1, 131072), (128, 131072))
DECODE_DTYPES = ("bfloat16", "float16", "float32")


def decode_cases():
    """The decode case in bfloat16 (when ml_dtypes is installed), float16 and float32, whatever
    --dtypes says; select them with --cases decode."""
    out = []
    for name in DECODE_DTYPES:
        if name == "bfloat16":
            from cupyops.core import dtypes as _bf16
            dt = _bf16.dtype()
            if dt is None:
                continue
        else:
            dt = np.dtype(name)
        for shape in DECODE_SHAPES:
            out.append(Case("argmax", f"decode {shape[0]}x{shape[1]}", dt, shape,
                            {"axes": (1,), "tie": "first", "layout": "decode"}))
    return out


def aligned_empty(shape, dtype, align=256):
    """A C-contiguous NumPy array whose data starts on an ``align``-byte boundary, as CuPy's
    allocations do (so SIMT sector counts match a GPU's)."""
    dtype = np.dtype(dtype)
    nbytes = max(1, math.prod(shape) * dtype.itemsize)
    raw = np.empty(nbytes + align, np.uint8)
    off = (-raw.__array_interface__["data"][0]) % align
    return raw[off:off + nbytes].view(dtype).reshape(shape)


def random_values(rng, dt, shape):
    """Random values of any dtype the library takes: ints over their whole range, floats and
    complex normal, datetime64 / timedelta64 as int64 ticks (no NaT)."""
    if dt == np.bool_:
        return rng.random(shape) < 0.5
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return rng.integers(info.min, info.max, shape, dtype=dt, endpoint=True)
    if dt.kind == "f" or dt.name == "bfloat16":
        return rng.standard_normal(shape).astype(dt)
    if dt.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dt)
    if dt.kind in "mM":
        ticks = rng.integers(-2**40, 2**40, shape, dtype=np.int64)
        return ticks.view(dt)
    raise TypeError(f"the benchmark cannot make inputs of dtype {dt}")


def nonzero_values(rng, dt, shape):
    """Values that are all nonzero (for the density cases)."""
    if dt.kind == "f":
        return (rng.uniform(0.5, 2.0, shape) * rng.choice([-1.0, 1.0], shape)).astype(dt)
    if dt.kind == "c":
        return (rng.uniform(0.5, 2.0, shape) * np.exp(1j * rng.uniform(0, 6.28, shape))).astype(dt)
    if dt.kind in "mM":
        return rng.integers(1, 2**40, shape, dtype=np.int64).view(dt)
    vals = rng.integers(1, 100, shape)
    if dt.kind == "i":
        vals = vals * rng.choice([-1, 1], shape)
    return vals.astype(dt)


def make_input(case, seed=0):
    rng = np.random.default_rng(seed + (zlib.crc32(case.id.encode()) & 0xFFFF))
    shape, dt = case.shape, case.dtype
    x = aligned_empty(shape, dt)
    if "density" in case.params:
        mask = rng.random(shape) < case.params["density"]
        if dt == np.bool_:
            x[...] = mask
        else:
            x[...] = nonzero_values(rng, dt, shape)
            x[~mask] = np.zeros((), dt)
        return x
    x[...] = random_values(rng, dt, shape)
    return x


def cupyops_call(case, device):
    import cupyops as co
    p = case.params
    op = case.op
    dev = None if device == "cuda" else device
    if op in ("argmax", "argmin"):
        f = co.argmax if op == "argmax" else co.argmin
        axes = p["axes"]
        axis = None if len(axes) == len(case.shape) else (axes[0] if len(axes) == 1 else axes)
        return lambda x: f(x, axis=axis, tie=p["tie"], device=dev)
    if op == "hardmax":
        return lambda x: co.hardmax(x, axis=p["axes"][0], tie=p["tie"], device=dev)
    if op == "argwhere":
        return lambda x: co.argwhere(x, device=dev)
    if op == "nonzero":
        return lambda x: co.nonzero(x, device=dev)
    if op == "count_nonzero":
        return lambda x: co.count_nonzero(x, device=dev)
    if op == "nonzero_coordinates":
        return lambda x: co.nonzero_coordinates(x, size=x.size if p.get("size") else None, device=dev)
    raise ValueError(op)


@contextlib.contextmanager
def cupy_like_simt_allocations(align=256):
    """Make the SIMT backend's ``empty`` / ``zeros`` / ``full`` return ``align``-byte aligned
    NumPy arrays for the duration, as CuPy's allocator does on a GPU (NumPy's own buffers are
    only 16-byte aligned, which would make a warp's 128-byte store straddle 5 sectors instead of
    4 and charge the kernel for the emulator's allocator). Benchmark-local: the backend object
    gets instance attributes that shadow its methods (``unittest.mock.patch.object``), removed
    afterwards."""
    from unittest import mock

    from cupyops.core import backend as _backend
    be = _backend.get_backend("simt")

    def empty(shape, dtype):
        shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
        return aligned_empty(shape, dtype, align)

    def zeros(shape, dtype):
        a = empty(shape, dtype)
        a[...] = 0
        return a

    def full(shape, fill, dtype):
        a = empty(shape, dtype)
        a[...] = fill
        return a

    with contextlib.ExitStack() as stack:
        for name, fn in (("empty", empty), ("zeros", zeros), ("full", full)):
            stack.enter_context(mock.patch.object(be, name, fn))
        yield be
