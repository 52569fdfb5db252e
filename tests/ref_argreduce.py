"""Brute-force reference for argmin / argmax / hardmax (independent of every cupyops module).

Plain Python loops over ``np.ndindex`` of the kept and the reduced coordinates; values become
Python objects (ints as exact Python ints, floats -- float16 included -- as Python floats, bool
as 0/1) and are compared with Python's operators. Slow on purpose: use it on small arrays.

Rules (docs: SPEC.md, "argmax / argmin"):
- the answer is the row-major linear index inside the sub-array spanned by the reduced axes,
  taken in increasing axis order;
- tie="first" keeps the smallest index among equal extremes, tie="last" the largest;
- NaN is the extreme for both argmax and argmin: the first NaN (tie first) or last NaN (tie last);
- -0.0 == 0.0 is a tie.

Signatures (other test modules reuse them to check the GPU kernels):
    ref_argreduce(x, axes, kind, tie) -> int64 ndarray of the kept shape
    ref_hardmax(x, axes, tie)          -> ndarray of x's shape and dtype
``axes`` is an iterable of non-negative (or negative) ints, or None for all axes.
"""
from __future__ import annotations

import math

import numpy as np

__all__ = ["ref_argreduce", "ref_hardmax", "py_value"]


def py_value(v):
    """A NumPy scalar as a Python value with exact comparisons."""
    if isinstance(v, (np.bool_, bool)):
        return int(bool(v))
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, np.floating):
        return float(v)
    raise TypeError(f"unsupported scalar {v!r} of type {type(v)}")


def _is_nan(v) -> bool:
    return isinstance(v, float) and math.isnan(v)


def _better(a, b, kind: str) -> bool:
    """Is value a strictly more extreme than b (neither NaN)?"""
    return a > b if kind == "max" else a < b


def _norm_axes(x, axes):
    if axes is None:
        return tuple(range(x.ndim))
    if isinstance(axes, int):
        axes = (axes,)
    return tuple(sorted(a % x.ndim for a in axes)) if x.ndim else tuple(axes)


def _group_index(x, kept_axes, red_axes, kcoord, kind, tie):
    rshape = tuple(x.shape[a] for a in red_axes)
    best_i = None
    best_v = None
    best_nan = False
    for lin, rcoord in enumerate(np.ndindex(*rshape)):
        full = [0] * x.ndim
        for a, c in zip(kept_axes, kcoord):
            full[a] = c
        for a, c in zip(red_axes, rcoord):
            full[a] = c
        v = py_value(x[tuple(full)])
        if _is_nan(v):
            if not best_nan or tie == "last":
                best_i, best_v, best_nan = lin, v, True
            continue
        if best_nan:
            continue
        if best_i is None or _better(v, best_v, kind) or (tie == "last" and v == best_v):
            best_i, best_v = lin, v
    if best_i is None:
        raise ValueError("attempt to get argmax of an empty sequence")
    return best_i


def ref_argreduce(x, axes, kind: str = "max", tie: str = "first") -> np.ndarray:
    """Linear index (int64) of the max / min inside each reduced group; shape = kept dims."""
    x = np.asarray(x)
    red_axes = _norm_axes(x, axes)
    assert kind in ("max", "min") and tie in ("first", "last")
    kept_axes = tuple(a for a in range(x.ndim) if a not in red_axes)
    kshape = tuple(x.shape[a] for a in kept_axes)
    res = np.zeros(kshape, dtype=np.int64)
    for kcoord in np.ndindex(*kshape):
        res[kcoord] = _group_index(x, kept_axes, red_axes, kcoord, kind, tie)
    return res


def ref_hardmax(x, axes, tie: str = "first") -> np.ndarray:
    """x-shaped array of x's dtype: 1 (True) at argmax(tie) of each group, 0 elsewhere."""
    x = np.asarray(x)
    red_axes = _norm_axes(x, axes)
    kept_axes = tuple(a for a in range(x.ndim) if a not in red_axes)
    kshape = tuple(x.shape[a] for a in kept_axes)
    rshape = tuple(x.shape[a] for a in red_axes)
    res = np.zeros(x.shape, dtype=x.dtype)
    if x.size == 0:
        return res
    for kcoord in np.ndindex(*kshape):
        lin = _group_index(x, kept_axes, red_axes, kcoord, "max", tie)
        rcoord = np.unravel_index(lin, rshape) if rshape else ()
        full = [0] * x.ndim
        for a, c in zip(kept_axes, kcoord):
            full[a] = c
        for a, c in zip(red_axes, rcoord):
            full[a] = int(c)
        res[tuple(full)] = 1
    return res
