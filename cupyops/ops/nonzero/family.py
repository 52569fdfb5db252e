"""The kernel family of the nonzero operators: kernels/nonzero.cu, registered with
cupyops.core.modules at import.

Per value dtype, the entry points ``nonzero_tiles`` (tiles in logical row-major order),
``nonzero_tiles_t`` (the same, tiles read in memory order: F-order, transposed and permuted
inputs) and ``count_nonzero_axes``, each with 32- and 64-bit indexing, the tile kernel of 1-
and 2-byte types also with and without its packed path (plan.vec, a template parameter: 6 or 8
name expressions), each compiled as a module of its own (the registry's default grouping): a
first call compiles the one kernel it launches (:func:`first_calls`).
Bool and the integers are instantiated on the unsigned type of their size (the nonzero test
reads only bits). No other module names these entry points.
"""
from __future__ import annotations

import numpy as np

from cupyops.core import dtypes as _dtypes
from cupyops.core import modules as _modules
from cupyops.ops.nonzero.plan import NZ_BLOCK

__all__ = ["FAMILY", "NONZERO_DTYPES", "TILES", "TILES_T", "COUNT", "expression",
           "expressions", "vecs", "first_calls", "kernel_value_dtype"]

NONZERO_DTYPES = tuple(np.dtype(t) for t in (
    np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64,
    np.float16, np.float32, np.float64, np.complex64, np.complex128))
if _dtypes.dtype() is not None:   # bfloat16 when ml_dtypes is installed
    NONZERO_DTYPES += (_dtypes.dtype(),)

TILES = "nonzero_tiles"
TILES_T = "nonzero_tiles_t"   # the same, for inputs read in memory order (plan.tr)
COUNT = "count_nonzero_axes"


def kernel_value_dtype(dtype) -> np.dtype:
    """The type the kernels are instantiated on for ``dtype``. For bool and integers the
    nonzero test only looks at the bit pattern, so each size shares one unsigned
    instantiation (bool/int8/uint8 -> unsigned char, ...): 9 distinct instantiations per
    kernel instead of 14, and identical modules hit the compile caches. Floats and complex
    keep their own type (the sign bit of -0.0 is masked)."""
    dt = np.dtype(dtype)
    if dt.kind in "biu":
        return np.dtype(f"u{dt.itemsize}")
    return dt


_EXPRS: dict = {}     # (kernel, dtype, wide, vec) -> name expression: a few dozen in all


def vecs(kernel: str, dtype) -> tuple:
    """The tile kernel's ``vec`` values (the packed path of 1- and 2-byte types, plan.vec,
    packed first): each an instantiation of its own, so a first call compiles only the read its
    plan runs. The other kernels have none: ``(None,)``."""
    if kernel != TILES:
        return (None,)
    return (True, False) if np.dtype(dtype).itemsize <= 2 else (False,)


def expression(kernel: str, dtype, wide: bool, vec: bool | None = None) -> str:
    """The name expression of entry point ``kernel`` for ``dtype`` (any of the family's) and
    (the tile kernel) ``vec`` (one of :func:`vecs`; ``ValueError`` otherwise)."""
    key = (kernel, dtype, wide, vec)
    expr = _EXPRS.get(key)
    if expr is None:
        if vec not in vecs(kernel, dtype):
            raise ValueError(f"{kernel} for {np.dtype(dtype)}: vec must be one of "
                             f"{vecs(kernel, dtype)}, got {vec!r}")
        args = (kernel_value_dtype(dtype), wide) + (() if vec is None else (bool(vec),))
        expr = _EXPRS[key] = _modules.name_expression(kernel, *args)
    return expr


def expressions(dtype) -> tuple:
    """Every name expression of the family for one value dtype: 3 kernels x {32, 64}-bit, the
    tile kernel of 1- and 2-byte types also with and without the packed path."""
    return tuple(expression(k, dtype, wide, v) for k in (TILES, TILES_T, COUNT)
                 for wide in (False, True) for v in vecs(k, dtype))


def first_calls(dtype) -> tuple:
    """The kernel a first call of each plan kind launches (for the NVRTC timing tool): argwhere,
    nonzero and nonzero_coordinates the tile kernel (both passes), transposed for inputs read
    in memory order; count_nonzero its own."""
    tiles = "argwhere / nonzero / nonzero_coordinates"
    plans = []
    for wide in (False, True):
        plans += [_modules.FirstCall(tiles, "row-major order" + (", packed" if v else ""), wide,
                                     (expression(TILES, dtype, wide, v),))
                  for v in vecs(TILES, dtype)]
        plans += [_modules.FirstCall(tiles, "memory order (F, transposed)", wide,
                                     (expression(TILES_T, dtype, wide),)),
                  _modules.FirstCall("count_nonzero", "any", wide,
                                     (expression(COUNT, dtype, wide),))]
    return tuple(plans)


FAMILY = _modules.register_family(_modules.KernelFamily(
    name="nonzero",
    source="nonzero.cu",
    dtypes=NONZERO_DTYPES,
    expressions=expressions,
    block_sizes=(NZ_BLOCK,),
    dynamic_shared=0,
    min_occupancy=0.5,
    first_calls=first_calls,
))
