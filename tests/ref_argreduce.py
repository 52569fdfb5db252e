"""Brute-force reference for argmin / argmax / hardmax (independent of every cupyops module).

Plain Python loops over ``np.ndindex`` of the kept and the reduced coordinates; values become
Python objects (ints as exact Python ints, floats -- float16 included -- as Python floats, bool
as 0/1) and are compared with Python's operators. Slow on purpose: use it on small arrays.

Rules (docs: SPEC.md, "argmax / argmin"):
- the answer is the row-major linear index inside the sub-array spanned by the reduced axes,
  taken in increasing axis order;
- tie="first" keeps the smallest index among equal extremes, tie="last" the largest;
- NaN is the extreme for both argmax and argmin: the first NaN (tie first) or last NaN (tie last);
  a complex value with a NaN in either part is NaN; NaT (datetime64/timedelta64) is NaN-like;
- complex values compare as the Python tuple (real, imag): lexicographic;
- -0.0 == 0.0 is a tie (in each part of a complex);
- nan=True (nanargmin/nanargmax): NaN is skipped, NaT is not; a group of only NaN raises
  ValueError("All-NaN slice encountered").

Signatures (other test modules reuse them to check the GPU kernels):
    ref_argreduce(x, axes, kind, tie, nan=False) -> int64 ndarray of the kept shape
    ref_hardmax(x, axes, tie)                    -> ndarray of x's shape and dtype
``axes`` is an iterable of non-negative (or negative) ints, or None for all axes.
"""
from __future__ import annotations

import math

import numpy as np

__all__ = ["ref_argreduce", "ref_hardmax", "py_value"]


class _NaT:
    """NaT: like NaN, the extreme, but never skipped."""


NAT = _NaT()


def py_value(v):
    """A NumPy scalar as a Python value with exact comparisons: int, float, a (real, imag)
    tuple of floats for complex, NAT for NaT."""
    if isinstance(v, (np.datetime64, np.timedelta64)):     # (timedelta64 is an np.integer)
        return NAT if np.isnat(v) else int(v.astype(np.int64))
    if isinstance(v, (np.bool_, bool)):
        return int(bool(v))
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, np.floating):
        return float(v)
    if isinstance(v, np.complexfloating):
        return (float(v.real), float(v.imag))
    raise TypeError(f"unsupported scalar {v!r} of type {type(v)}")


def _is_nan(v) -> bool:
    if isinstance(v, tuple):
        return math.isnan(v[0]) or math.isnan(v[1])
    return v is NAT or (isinstance(v, float) and math.isnan(v))


def _better(a, b, kind: str) -> bool:
    """Is value a strictly more extreme than b (neither NaN)?"""
    return a > b if kind == "max" else a < b


def _norm_axes(x, axes):
    if axes is None:
        return tuple(range(x.ndim))
    if isinstance(axes, int):
        axes = (axes,)
    return tuple(sorted(a % x.ndim for a in axes)) if x.ndim else tuple(axes)


def _group_index(x, kept_axes, red_axes, kcoord, kind, tie, nan=False):
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
        if nan and _is_nan(v) and v is not NAT:
            continue                      # nanarg*: NaN skipped (NaT is not)
        if _is_nan(v):
            if not best_nan or tie == "last":
                best_i, best_v, best_nan = lin, v, True
            continue
        if best_nan:
            continue
        if best_i is None or _better(v, best_v, kind) or (tie == "last" and v == best_v):
            best_i, best_v = lin, v
    if best_i is None:
        if nan and math.prod(rshape) > 0:
            raise ValueError("All-NaN slice encountered")
        raise ValueError("attempt to get argmax of an empty sequence")
    return best_i


def ref_argreduce(x, axes, kind: str = "max", tie: str = "first", nan: bool = False) -> np.ndarray:
    """Linear index (int64) of the max / min inside each reduced group; shape = kept dims."""
    x = np.asarray(x)
    red_axes = _norm_axes(x, axes)
    assert kind in ("max", "min") and tie in ("first", "last")
    kept_axes = tuple(a for a in range(x.ndim) if a not in red_axes)
    kshape = tuple(x.shape[a] for a in kept_axes)
    res = np.zeros(kshape, dtype=np.int64)
    for kcoord in np.ndindex(*kshape):
        res[kcoord] = _group_index(x, kept_axes, red_axes, kcoord, kind, tie, nan)
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
