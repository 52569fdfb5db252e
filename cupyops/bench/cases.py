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

__all__ = ["DTYPES", "SIZES", "Case", "benchmarked", "make_cases", "aligned_empty",
           "random_values", "nonzero_values", "make_input", "bench_of", "cupyops_call",
           "cupy_like_simt_allocations"]

DTYPES = ("float32", "float16", "int8", "bool")

# Shapes per size mode, by kind (2-D, 4-D, 3-D, and nz for the density cases): each operator's
# cases (cupyops.core.operator.Bench.cases) choose among them.
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


def benchmarked():
    """The descriptors of the operators that have benchmark cases, in the registry's order."""
    from cupyops.ops import operators
    return [op for op in operators() if op.bench is not None]


def make_cases(mode, dtypes=DTYPES):
    """Every operator's cases (``Operator.bench.cases``) in each of ``dtypes``, by their
    ``order`` within a dtype, then the cases in dtypes of their own (``extra_cases``)."""
    sizes = SIZES[mode]
    ops = benchmarked()
    cases = []
    for dt in dtypes:
        dt = np.dtype(dt)
        ordered = [(bc.order, Case(op.name, bc.case, dt, bc.shape, bc.params))
                   for op in ops for bc in op.bench.cases(sizes, dt)]
        cases += [c for _, c in sorted(ordered, key=lambda oc: oc[0])]   # (a stable sort)
    for op in ops:
        if op.bench.extra_cases is not None:
            cases += [Case(op.name, bc.case, dt, bc.shape, bc.params)
                      for dt, bc in op.bench.extra_cases()]
    return cases


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


def bench_of(case):
    """The benchmark functions of ``case``'s operator (cupyops.core.operator.Bench)."""
    from cupyops.ops import operator
    bench = operator(case.op).bench
    if bench is None:
        raise ValueError(f"{case.op} has no benchmark cases (its descriptor's bench is None)")
    return bench


def cupyops_call(case, device):
    """``fn(x)``: the call ``case`` times, on ``device`` ("cpu", "simt" or "cuda")."""
    import cupyops
    return bench_of(case).call(getattr(cupyops, case.op), case,
                               None if device == "cuda" else device)


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
