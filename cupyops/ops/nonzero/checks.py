"""The selftest's references for the nonzero family (cupyops.tools.selftest runs them through
each operator's descriptor): NumPy's own nonzero routines on a mask built here (datetime as
its int64 bits, bfloat16 by its bits: -0.0 is zero), never cupyops' own NumPy path."""
from __future__ import annotations

import numpy as np

from cupyops.core.operator import SelftestCall

__all__ = ["nonzero_mask", "count_calls", "argwhere_calls", "nonzero_calls",
           "coordinates_calls", "COORDINATES_EXAMPLES", "ARGWHERE_EXAMPLES"]

# DirectML's worked example (DML_NONZERO_COORDINATES_OPERATOR_DESC) and the spec's ordering
# example: (label, call(function, device), expected)
_NZ = np.array([[[[1.0, 0.0, 0.0, 2.0], [-0.0, 3.5, 0.0, -5.2]]]], np.float32)


def _unordered():
    a = np.zeros((2, 6), np.float32)   # nonzeros set out of order: {1,0}, {1,2}, {0,5}
    a[1, 0], a[1, 2], a[0, 5] = 1, 2, 3
    return a


COORDINATES_EXAMPLES = (
    ("count", lambda f, d: f(_NZ, device=d)[1], 4),
    ("coords", lambda f, d: f(_NZ, device=d)[0],
     [[0, 0, 0, 0], [0, 0, 0, 3], [0, 0, 1, 1], [0, 0, 1, 3]]),
)
ARGWHERE_EXAMPLES = (
    ("sorted {1,0},{1,2},{0,5}", lambda f, d: f(_unordered(), device=d), [[0, 5], [1, 0], [1, 2]]),
)


def nonzero_mask(x):
    if x.dtype.kind in "mM":
        return x.view(np.int64) != 0
    if x.dtype.kind == "V":
        return (x.view(np.uint16) & 0x7FFF) != 0
    return x != 0


def count_calls(case, rng):
    x, axis = case.x, case.axes
    return [SelftestCall(f"axis={axis}", dict(axis=axis, keepdims=k),
                         lambda k=k: np.count_nonzero(nonzero_mask(x), axis=axis,
                                                      keepdims=k).astype(np.int64))
            for k in (False, True)]


def argwhere_calls(case, rng):
    x = case.x
    return [SelftestCall("int32", dict(dtype=np.int32),
                         lambda: np.argwhere(nonzero_mask(x)).astype(np.int32))]


def nonzero_calls(case, rng):
    x = case.x
    return [] if x.ndim == 0 else [SelftestCall("", {}, lambda: np.nonzero(nonzero_mask(x)))]


def coordinates_calls(case, rng):
    """The exact form (uint32 coordinates) and a fixed size drawn around the count (cut,
    exact or padded with -1)."""
    x = case.x
    coords = np.argwhere(nonzero_mask(x))
    k = int(rng.integers(0, max(1, len(coords) + 2)))

    def fixed():
        filled = np.full((k, x.ndim), -1, np.int64)
        filled[:min(k, len(coords))] = coords[:k]
        return filled, len(coords)
    return [SelftestCall("exact", dict(dtype=np.uint32),
                         lambda: (coords.astype(np.uint32), len(coords))),
            SelftestCall(f"size={k}", dict(size=k, fill_value=-1), fixed)]
