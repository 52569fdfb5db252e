"""The NumPy path of segment_argmax / segment_argmin and their values forms.

``x`` (n, *rest) is read as rows (n, R), R = prod(rest); segment s is rows
``offsets[s]:offsets[s + 1]``, each of its R columns reduced on its own with argmax's rules
(NaN and NaT the extreme, -0.0 == 0.0, complex lexicographic, tie first or last), which are
NumPy's own for ``argmax``, ``maximum.reduceat`` and ``==``.

The segments are cut into *pieces* of about :data:`PIECE` elements, in order:

* a run of short segments is one piece, reduced for all of them at once: the extremes by
  ``np.maximum.reduceat`` (one pass), the rows that hold them by one comparison, the first or
  last such row by a second ``reduceat``: a handful of passes over the piece, whatever the
  number of segments in it (a Python loop over segments pays a call per segment);
* a long segment is one piece or more of its own, reduced by ``argmax`` over its rows (one
  pass, NumPy's own routine: what a loop over segments does), the pieces of one segment
  combined under the same rules.

Pieces run in the NumPy path's threads (cupyops.core.threads) when the input is large; the
result never depends on how it was cut. Extra memory is a few pieces' temporaries.
"""
from __future__ import annotations

import numpy as np

from cupyops.core import dtypes as _dtypes
from cupyops.core import threads as _threads

__all__ = ["segment_argreduce", "PIECE", "empty_value"]

#: elements per piece (short segments are grouped up to it; longer segments are cut at it)
PIECE = 1 << 16


def _as_rows(x):
    """(x as (n, R) rows in comparable form, the dtype of the values as given). bfloat16 is
    read as its exact float32 widening; every other dtype as it is."""
    y = _dtypes.widen(x) if _dtypes.is_bf16(x.dtype) else x
    return y.reshape(x.shape[0], int(np.prod(x.shape[1:], dtype=np.int64)))


def _nan_mask(a):
    if a.dtype.kind in "fc":
        return np.isnan(a)
    if a.dtype.kind in "mM":
        return np.isnat(a)
    return None


def _pieces(starts, ends, R):
    """[(first segment, last segment + 1, row from, row to)]: runs of whole short segments of
    about PIECE elements, and long segments cut into pieces of about PIECE elements."""
    rows = max(1, PIECE // max(R, 1))
    out, s, S = [], 0, len(starts)
    while s < S:
        a = int(starts[s])
        if ends[s] - starts[s] > rows:              # a long segment: pieces of its own
            b = int(ends[s])
            out.extend((s, s + 1, r, min(r + rows, b)) for r in range(a, b, rows))
            s += 1
            continue
        t = int(np.searchsorted(ends, a + rows, side="right"))
        t = max(t, s + 1)
        while t > s + 1 and ends[t - 1] - starts[t - 1] > rows:
            t -= 1
        out.append((s, t, a, int(ends[t - 1])))
        s = t
    return out


def _short_run(y, starts, ends, kind, tie, lo):
    """One piece of whole short segments (rows ``lo`` on, starts/ends absolute): the winning
    row of every segment and column (-1 for an empty segment)."""
    S = len(starts)
    R = y.shape[1]
    best = np.full((S, R), -1, np.int64)
    full = np.flatnonzero(ends > starts)
    if not full.size:
        return best
    rel = (starts[full] - lo).astype(np.intp)
    block = y[lo:int(ends[full[-1]])]
    red = np.maximum if kind == "max" else np.minimum
    ext = red.reduceat(block, rel, axis=0)
    seg = np.repeat(np.arange(full.size), (ends[full] - starts[full]).astype(np.intp))
    hit = block == ext[seg]
    nan = _nan_mask(block)
    if nan is not None:
        hit |= nan & _nan_mask(ext)[seg]
    rows = np.arange(lo, lo + block.shape[0], dtype=np.int64)[:, None]
    if tie == "first":
        pick = np.minimum.reduceat(np.where(hit, rows, np.iinfo(np.int64).max), rel, axis=0)
    else:
        pick = np.maximum.reduceat(np.where(hit, rows, -1), rel, axis=0)
    best[full] = pick
    return best


def _long_piece(y, a, b, kind, tie):
    """Rows a:b of one segment: the winning row of each column."""
    part = y[a:b]
    f = np.argmax if kind == "max" else np.argmin
    if tie == "first":
        return a + f(part, axis=0).astype(np.int64)
    return b - 1 - f(part[::-1], axis=0).astype(np.int64)


def _better(y, r_new, r_old, kind, tie):
    """Where row r_new beats row r_old (per column; rows of one segment, r_old < r_new) under
    the rules: NaN first, then the value, then the tie."""
    cols = np.arange(y.shape[1])
    vn, vo = y[r_new, cols], y[r_old, cols]
    nn, no = _nan_mask(vn), _nan_mask(vo)
    gt = vn > vo if kind == "max" else vn < vo
    eq = vn == vo
    if nn is not None:
        eq = eq | (nn & no)
        gt = (gt & ~no) | (nn & ~no)
    return gt | (eq if tie == "last" else np.zeros_like(eq))


def segment_argreduce(x, offsets, *, kind, tie):
    """The winning row (absolute, along axis 0) of every segment and trailing position:
    an int64 array (S, *rest), -1 where the segment is empty."""
    y = _as_rows(x)
    o = np.asarray(offsets).astype(np.int64)
    starts, ends = o[:-1], o[1:]
    S, R = len(starts), y.shape[1]
    best = np.full((S, R), -1, np.int64)
    if S and R and y.shape[0]:
        pieces = _pieces(starts, ends, R)

        def run(piece):
            s, t, a, b = piece
            if t == s + 1 and ends[s] - starts[s] > max(1, PIECE // R):
                return _long_piece(y, a, b, kind, tie)
            return _short_run(y, starts[s:t], ends[s:t], kind, tie, a)
        results = _threads.run_parts(run, pieces, _threads.threads_for(y.nbytes))
        for (s, t, a, b), r in zip(pieces, results):
            if t == s + 1 and r.ndim == 1:          # a piece of a long segment
                old = best[s]
                take = old < 0
                if not take.all():
                    take |= _better(y, r, np.where(take, r, old), kind, tie)
                best[s] = np.where(take, r, old)
            else:
                best[s:t] = r
    return best.reshape((S,) + tuple(x.shape[1:]))


def empty_value(dtype, kind):
    """The values' entry of an empty segment: the reduction's identity, the lowest value of
    x's dtype for the maxima (-inf, the smallest integer, False) and the highest for the
    minima (complex: both parts)."""
    dt = np.dtype(dtype)
    if _dtypes.is_bf16(dt):
        return np.array(0xFF80 if kind == "max" else 0x7F80, np.uint16).view(dt)
    if dt.kind in "fc":
        inf = -np.inf if kind == "max" else np.inf
        return np.array(complex(inf, inf) if dt.kind == "c" else inf, dt)
    if dt.kind in "mM":
        bits = np.iinfo(np.int64).min + 1 if kind == "max" else np.iinfo(np.int64).max
        return np.array(bits, np.int64).view(dt.newbyteorder("=")).astype(dt)
    if dt.kind == "b":
        return np.array(kind == "min", dt)
    info = np.iinfo(dt)
    return np.array(info.min if kind == "max" else info.max, dt)
