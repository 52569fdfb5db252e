"""The kernel family of argmin / argmax / nanarg* / hardmax: kernels/argreduce.cu, registered
with cupyops.core.modules at import.

Per value dtype, the entry points ``argreduce_row``, ``argreduce_col`` and
``argreduce_finish``, and their values-mode twins ``*_values`` (max_and_argmax /
min_and_argmin: the winner's value too, from the same reduction), each for ``I = int`` and
``I = long long`` (12 name expressions a dtype), each compiled as a module of its own (the
registry's default grouping): a first call compiles the one or two kernels its plan launches
(:func:`first_calls`).
datetime64 and timedelta64 of every unit run the module of the one canonical dtype
``timedelta64[ns]`` (``cupyops_datetime``: int64 counts, NaT the extreme) on the input viewed
as int64 (CuPy has no datetime dtypes). No other module names these entry points.
"""
from __future__ import annotations

import numpy as np

from cupyops.core import dtypes as _dtypes
from cupyops.core import modules as _modules

__all__ = ["FAMILY", "FAMILY_DEF", "DTYPES", "DATETIME", "KERNELS", "expression",
           "expressions", "first_calls", "ROW", "COL", "FINISH", "VALUE_KERNELS", "ROW_V",
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

_EXPRS: dict = {}     # (kernel, dtype, 64-bit) -> name expression: a few dozen in all


def expression(kernel: str, dtype, use_64bit: bool) -> str:
    """The name expression of entry point ``kernel`` for value ``dtype`` and index width."""
    key = (kernel, dtype, use_64bit)
    expr = _EXPRS.get(key)
    if expr is None:
        expr = _EXPRS[key] = _modules.name_expression(kernel, np.dtype(dtype),
                                                      INDEX_CTYPES[bool(use_64bit)])
    return expr


def expressions(dtype) -> tuple:
    """Every name expression of the module for one value dtype."""
    return tuple(expression(k, dtype, b) for k in KERNELS + VALUE_KERNELS
                 for b in (False, True))


OPS = "argmin / argmax / nanarg* / hardmax"
VALUE_OPS = "max_and_argmax / min_and_argmin"


def first_calls(dtype) -> tuple:
    """The kernels a first call of each plan kind launches (for the NVRTC timing tool): row
    and decode plans the row kernel, column plans the column kernel, split plans either one and
    the finish, at each index width."""
    plans = []
    for ops, kernels in ((OPS, KERNELS), (VALUE_OPS, VALUE_KERNELS)):
        for wide in (False, True):
            row, col, finish = (expression(k, dtype, wide) for k in kernels)
            plans += [_modules.FirstCall(ops, "row or decode", wide, (row,)),
                      _modules.FirstCall(ops, "column", wide, (col,)),
                      _modules.FirstCall(ops, "split rows", wide, (row, finish)),
                      _modules.FirstCall(ops, "split columns", wide, (col, finish))]
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
