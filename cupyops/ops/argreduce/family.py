"""The kernel family of argmin / argmax / nanarg* / hardmax: kernels/argreduce.cu, registered
with cupyops.core.modules at import.

Per value dtype, the entry points ``argreduce_row``, ``argreduce_col`` and
``argreduce_finish``, and their values-mode twins ``*_values`` (max_and_argmax /
min_and_argmin: the winner's value too, from the same reduction), each for ``I = int`` and
``I = long long``, the row and column kernels also for each ``vec`` the planner may pick
(:func:`vecs`: a template parameter, so that an instantiation holds one scan; 12 to 24 name
expressions a dtype), each compiled as a module of its own (the registry's default grouping): a
first call compiles the one or two kernels its plan launches (:func:`first_calls`).
datetime64 and timedelta64 of every unit run the module of the one canonical dtype
``timedelta64[ns]`` (``cupyops_datetime``: int64 counts, NaT the extreme) on the input viewed
as int64 (CuPy has no datetime dtypes). No other module names these entry points.
"""
from __future__ import annotations

import numpy as np

from cupyops.core import dtypes as _dtypes
from cupyops.core import modules as _modules
from cupyops.ops.argreduce import plan as _plan

__all__ = ["FAMILY", "FAMILY_DEF", "DTYPES", "DATETIME", "KERNELS", "expression",
           "expressions", "vecs", "first_calls", "ROW", "COL", "FINISH", "VALUE_KERNELS", "ROW_V",
           "COL_V", "FINISH_V"]

FAMILY = "argreduce"
#: every datetime64 / timedelta64 unit runs as this dtype (same bits: int64, NaT = INT64_MIN)
DATETIME = np.dtype("m8[ns]")
DTYPES = _dtypes.VALUE_DTYPES + (DATETIME,)
if _dtypes.dtype() is not None:   # bfloat16 when ml_dtypes is installed
    DTYPES += (_dtypes.dtype(),)
ROW, COL, FINISH = "argreduce_row", "argreduce_col", "argreduce_finish"
KERNELS = (ROW, COL, FINISH)
#: values mode: the same kernels, also storing the winner's value (a separate instantiation,
#: so the index-mode kernels' code is unchanged)
ROW_V, COL_V, FINISH_V = (k + "_values" for k in KERNELS)
VALUE_KERNELS = (ROW_V, COL_V, FINISH_V)
INDEX_CTYPES = {False: "int", True: "long long"}

_EXPRS: dict = {}     # (kernel, dtype, 64-bit, vec) -> name expression: a few hundred in all


def vecs(kernel: str, dtype) -> tuple:
    """The ``vec`` values (the row kernel's elements per vector load, the column kernel's groups
    a thread owns) the planner picks for ``kernel`` and ``dtype``, widest first: each is an
    instantiation of its own (a template parameter), so a first call compiles the one scan its
    plan runs. The finish kernel has none: ``(None,)``."""
    size = np.dtype(dtype).itemsize
    if kernel in (ROW, ROW_V):
        return _plan.row_vec_widths(size) + (1,)
    if kernel in (COL, COL_V):
        return _plan.col_vec_widths(size) + (1,)
    return (None,)


def expression(kernel: str, dtype, use_64bit: bool, vec: int | None = None) -> str:
    """The name expression of entry point ``kernel`` for value ``dtype``, index width and (row
    and column kernels) ``vec`` (one of :func:`vecs`; ``ValueError`` otherwise)."""
    key = (kernel, dtype, use_64bit, vec)
    expr = _EXPRS.get(key)
    if expr is None:
        if vec not in vecs(kernel, dtype):
            raise ValueError(f"{kernel} for {np.dtype(dtype)}: vec must be one of "
                             f"{vecs(kernel, dtype)}, got {vec!r}")
        args = (np.dtype(dtype), INDEX_CTYPES[bool(use_64bit)]) + (() if vec is None else (vec,))
        expr = _EXPRS[key] = _modules.name_expression(kernel, *args)
    return expr


def expressions(dtype) -> tuple:
    """Every name expression of the family for one value dtype."""
    return tuple(expression(k, dtype, b, v) for k in KERNELS + VALUE_KERNELS
                 for b in (False, True) for v in vecs(k, dtype))


OPS = "argmin / argmax / nanarg* / hardmax"
VALUE_OPS = "max_and_argmax / min_and_argmin"


def first_calls(dtype) -> tuple:
    """The kernels a first call of each plan kind launches (for the NVRTC timing tool): row
    and decode plans the row kernel of their vec, column plans the column kernel of theirs,
    split plans either one and the finish, at each index width. The first is the common one (a
    row plan with the widest vectors, 32-bit indexing)."""
    plans = []
    for ops, (row, col, finish) in ((OPS, KERNELS), (VALUE_OPS, VALUE_KERNELS)):
        for wide in (False, True):
            fin = expression(finish, dtype, wide)
            for kernel, kind in ((row, "row"), (col, "column")):
                for v in vecs(kernel, dtype):
                    e = expression(kernel, dtype, wide, v)
                    name = (f"{kind} or decode" if kind == "row" else kind) + f", vec {v}"
                    plans += [_modules.FirstCall(ops, name, wide, (e,)),
                              _modules.FirstCall(ops, f"split {kind}s, vec {v}", wide, (e, fin))]
    return tuple(plans)


def _block_sizes(expr: str) -> tuple:
    return (256,)


def _dynamic_shared(dtype, expr: str, block: int) -> int:
    # column combine: up to 4 (key, index) pairs per thread (one for values of 4 bytes or more);
    # finish: one pair per thread; row: (block/32 + 1) pairs. A pair is at most 16 bytes, 24
    # for complex128's 16-byte keys.
    pair = 24 if dtype.itemsize == 16 else 16
    if expr.startswith(COL):
        return block * (4 if dtype.itemsize < 4 else 1) * pair
    if expr.startswith(FINISH):
        return block * pair
    return (block // 32 + 1) * pair


FAMILY_DEF = _modules.register_family(_modules.KernelFamily(
    name=FAMILY, source="argreduce.cu", dtypes=DTYPES, expressions=expressions,
    block_sizes=_block_sizes, dynamic_shared=_dynamic_shared, min_occupancy=0.5,
    first_calls=first_calls))
