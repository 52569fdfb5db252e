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

#: elements of a run of short segments reduced at once
PIECE = 1 << 16
#: a segment of at least this many rows, or :data:`LONG_ELEMENTS` elements, is reduced by
#: argmax over its rows (NumPy's own routine: a fraction of a nanosecond an element, against
#: a few for the run's passes, plus about a microsecond a call). Rows, not elements: a few
#: rows of a wide x stay in the run (short segments over rows of 64 ran at 0.45x the
#: ufunc.reduceat composition when 4 rows of 64 counted as long, 1.1x now)
LONG = 256
LONG_ELEMENTS = 1 << 14
#: where segments average fewer than LONG rows, a segment is long from this many rows: each
#: long one cuts the run of short ones around it into another piece (a handful of NumPy calls),
#: so a few scattered ones cost more than their argmax saves (power-law lengths ran at 0.5x
#: the ufunc.reduceat composition with LONG alone)
LONG_AMONG_SHORT = 4096
#: elements per piece of a long segment (its pieces run in threads)
PIECE_LONG = 1 << 20


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


def _long_rows(rows):
    """The rows from which a segment is long: LONG, or LONG_AMONG_SHORT where the non-empty
    segments (``rows``: the segments' row counts, which sum to the span's rows) average fewer
    than LONG rows."""
    nonempty = int(np.count_nonzero(rows))
    return LONG if nonempty and int(rows.sum()) >= LONG * nonempty else LONG_AMONG_SHORT


def _is_long(rows, R, long_rows):
    """Whether segments of ``rows`` rows of R elements are reduced by argmax (``long_rows``
    rows or LONG_ELEMENTS elements: one threshold on the rows, one pass)."""
    return rows >= min(long_rows, -(-LONG_ELEMENTS // max(R, 1)))


def _pieces(starts, ends, rows, R, long_rows):
    """The work: ``[(first segment, last segment + 1, row from, row to)]``, runs of whole
    short segments of about PIECE elements each, then each long segment (``long_rows`` rows or
    LONG_ELEMENTS elements) on its own, cut into pieces of about PIECE_LONG elements. Found
    without a Python loop over segments, in a few passes over them: the runs are cut at the
    long segments and where a segment's first row crosses a multiple of PIECE elements (a
    binary search in the sorted starts for each multiple)."""
    S = len(starts)
    is_long = _is_long(rows, R, long_rows)
    longs = np.flatnonzero(is_long)
    span = int(ends[-1] - starts[0])
    marks = starts[0] + np.arange(1, span * max(R, 1) // PIECE + 1) * PIECE // max(R, 1)
    cut = np.zeros(S + 1, bool)             # (a mask, not np.unique: O(S), no sort or hash)
    cut[[0, S]] = True
    cut[np.searchsorted(starts, marks)] = True
    cut[longs] = True
    cut[longs + 1] = True
    cuts = np.flatnonzero(cut)
    a, b = cuts[:-1], cuts[1:]
    runs = ~((b == a + 1) & is_long[a])     # (a long segment alone is no run)
    a, b = a[runs], b[runs]
    out = list(zip(a.tolist(), b.tolist(), starts[a].tolist(), ends[b - 1].tolist()))
    long_rows = max(1, PIECE_LONG // max(R, 1))
    rows = rows[longs]
    huge = rows > long_rows
    for s in longs[huge].tolist():                   # cut into pieces of long_rows rows
        a, b = int(starts[s]), int(ends[s])
        out.extend((s, s + 1, r, min(r + long_rows, b)) for r in range(a, b, long_rows))
    whole, rows = longs[~huge], rows[~huge]          # the others in batches of long_rows rows
    if whole.size:
        label = (np.cumsum(rows) - rows) // long_rows
        out += [(batch, None, None, None)
                for batch in np.split(whole, np.flatnonzero(np.diff(label)) + 1)]
    return out


def _short_run(y, starts, ends, kind, tie, lo):
    """One piece of whole short segments (rows ``lo`` on, starts/ends absolute): the winning
    row of every segment and column (-1 for an empty segment)."""
    S = len(starts)
    R = y.shape[1]
    lengths = ends - starts
    full = None if lengths.all() else np.flatnonzero(lengths)    # (None: no empty segment)
    if full is not None:
        if not full.size:
            return np.full((S, R), -1, np.int64)
        starts, lengths = starts[full], lengths[full]
    rel = (starts - lo).astype(np.intp)
    block = y[lo:int(starts[-1] + lengths[-1])]
    if R == 1:                    # 1-D: reduceat's inner loop then runs along the rows
        block = block[:, 0]
    red = np.maximum if kind == "max" else np.minimum
    ext = red.reduceat(block, rel, axis=0)
    hit = block == np.repeat(ext, lengths.astype(np.intp), axis=0)    # (values, not an index)
    nan = _nan_mask(ext)
    if nan is not None and nan.any():
        # NaN (NaT) propagates through the reduction: a segment's extreme is NaN exactly where
        # it holds one, and then its NaN rows are its hits (no NaN row lies elsewhere)
        hit |= _nan_mask(block)
    # rows from the piece's start: 4 bytes where they fit (half the passes' bytes)
    rdt = np.int32 if block.shape[0] < np.iinfo(np.int32).max else np.int64
    rows = np.arange(block.shape[0], dtype=rdt)
    if R != 1:
        rows = rows[:, None]
    if tie == "first":
        pick = np.minimum.reduceat(np.where(hit, rows, np.iinfo(rdt).max), rel, axis=0)
    else:
        pick = np.maximum.reduceat(np.where(hit, rows, rdt(-1)), rel, axis=0)
    pick = np.add(pick.reshape(len(rel), R), lo, dtype=np.int64)
    if full is None:
        return pick
    best = np.full((S, R), -1, np.int64)
    best[full] = pick
    return best


def _long_piece(y, a, b, kind, tie):
    """Rows a:b of one segment: the winning row of each column (NumPy's argmax over the rows;
    for several columns the extremes first, then the first or last row holding them, so that
    no transposed copy of the rows is made)."""
    part = y[a:b]
    if part.shape[1] == 1:
        col = part[:, 0]
        f = col.argmax if kind == "max" else col.argmin
        if tie == "first":
            return np.array([a + f()], np.int64)
        return np.array([b - 1 - (col[::-1].argmax() if kind == "max" else col[::-1].argmin())],
                        np.int64)
    ext = part.max(axis=0) if kind == "max" else part.min(axis=0)
    hit = part == ext
    nan = _nan_mask(ext)
    if nan is not None and nan.any():
        hit |= _nan_mask(part) & nan
    if tie == "first":
        return a + hit.argmax(axis=0).astype(np.int64)
    return b - 1 - hit[::-1].argmax(axis=0).astype(np.int64)


def _long_batch(y, segments, starts, ends, kind, tie):
    """Whole long segments, one after the other: their winning rows, (segments, R)."""
    if y.shape[1] == 1:                 # one column: NumPy's argmax on each 1-D slice
        col = y[:, 0]
        if tie == "last":
            col = col[::-1]
        n = len(col)
        bounds = zip(starts[segments].tolist(), ends[segments].tolist())
        if tie == "first":
            rows = [a + col[a:b].argmax() if kind == "max" else a + col[a:b].argmin()
                    for a, b in bounds]
        else:
            rows = [b - 1 - (col[n - b:n - a].argmax() if kind == "max"
                             else col[n - b:n - a].argmin()) for a, b in bounds]
        return np.array(rows, np.int64)[:, None]
    return np.stack([_long_piece(y, int(starts[s]), int(ends[s]), kind, tie) for s in segments])


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
    o = np.asarray(offsets).astype(np.int64, copy=False)
    starts, ends = o[:-1], o[1:]
    S, R = len(starts), y.shape[1]
    best = np.full((S, R), -1, np.int64)
    if S and R and y.shape[0]:
        rows = ends - starts
        long_rows = _long_rows(rows)
        pieces = _pieces(starts, ends, rows, R, long_rows)

        def run(piece):
            s, t, a, b = piece
            if t is None:
                return _long_batch(y, s, starts, ends, kind, tie)
            if t == s + 1 and _is_long(ends[s] - starts[s], R, long_rows):
                return _long_piece(y, a, b, kind, tie)
            return _short_run(y, starts[s:t], ends[s:t], kind, tie, a)
        results = _threads.run_parts(run, pieces, _threads.threads_for(y.nbytes))
        for (s, t, a, b), r in zip(pieces, results):
            if t is None:                            # a batch of whole long segments
                best[s] = r
            elif r.ndim == 2:                        # a run of short segments
                best[s:t] = r
            elif a == starts[s]:                     # a long segment's first piece
                best[s] = r
            else:                                    # a later piece: the rules decide
                old = best[s]
                best[s] = np.where(_better(y, r, old, kind, tie), r, old)
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
