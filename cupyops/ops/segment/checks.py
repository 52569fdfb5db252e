"""The selftest's references for the segment family: each segment reduced by NumPy's own
argmax / argmin over its rows (a loop over segments: NumPy's rules are the spec's for NaN,
NaT, -0.0 and complex), tie "last" on the reversed rows; never cupyops' own NumPy path."""
from __future__ import annotations

import numpy as np

from cupyops.core.operator import SelftestCall

__all__ = ["ref_segment", "segment_calls", "offsets_for"]


def ref_segment(x, offsets, kind, tie, relative=False, empty_index=-1, dtype=np.int64,
                values=False):
    """The reference result of a segmented call (NumPy input, host offsets)."""
    o = np.asarray(offsets, np.int64)
    y = x.view(np.uint16).astype(np.uint32) << 16 if x.dtype.kind == "V" else x
    y = y.view(np.float32) if x.dtype.kind == "V" else y
    rows = y.reshape(len(y), -1) if len(x) else np.empty((0, int(np.prod(x.shape[1:]))), y.dtype)
    f = np.argmax if kind == "max" else np.argmin
    idx = np.full((len(o) - 1, rows.shape[1]), empty_index, dtype)
    vals = np.zeros(idx.shape, x.dtype)
    flat = x.reshape(len(x), -1) if len(x) else np.empty(rows.shape, x.dtype)
    for s in range(len(o) - 1):
        a, b = o[s], o[s + 1]
        if b <= a or not rows.shape[1]:
            continue
        part = rows[a:b]
        r = a + f(part, axis=0) if tie == "first" else b - 1 - f(part[::-1], axis=0)
        idx[s] = (r - a if relative else r).astype(dtype)
        vals[s] = flat[r, np.arange(rows.shape[1])]
    shape = (len(o) - 1,) + tuple(x.shape[1:])
    if not values:
        return idx.reshape(shape)
    empty = (o[1:] <= o[:-1])
    if empty.any():
        from cupyops.ops.segment.numpy_path import empty_value
        vals[empty] = empty_value(x.dtype, kind)
    return vals.reshape(shape), idx.reshape(shape)


def offsets_for(n, rng):
    """Offsets over n rows with empty, short and long segments."""
    cuts = np.sort(rng.integers(0, n + 1, int(rng.integers(1, 6))))
    return np.concatenate([[0], cuts, [n, n]]).astype(np.int64)


def segment_calls(kind, values, case, rng):
    """Segmented calls on one selftest input of at least one dimension: offsets with empty
    segments, ties both ways, absolute and relative indices."""
    x = case.x
    if x.ndim == 0:
        return []
    o = offsets_for(x.shape[0], rng)
    out = []
    for tie, relative, dt in (("first", False, np.int64), ("last", True, np.int32)):
        kw = dict(tie=tie, relative=relative, dtype=dt)
        out.append(SelftestCall(f"offsets={o.tolist()} tie={tie} relative={relative}", kw,
                                lambda kw=kw: ref_segment(x, o, kind, kw["tie"], kw["relative"],
                                                          -1, kw["dtype"], values), (o,)))
    return out
