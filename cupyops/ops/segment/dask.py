"""Dask arrays for the segment family (cupyops.interop.dask hands a call here through the
operator's descriptor).

``x`` is a Dask array chunked along axis 0 (and any trailing axes); ``offsets`` are known on
the host (a NumPy array or a list: a Dask or CuPy offsets array is refused). Row block k holds
rows ``[c_k, c_k+1)``; the segments that meet it are reduced there by one public
``segment_max_and_argmax`` / ``segment_min_and_argmin`` call on the chunk with the offsets
clipped to it, giving each segment's (value, row) *partial*. Output block k holds the segments
that start in row block k (with an empty segment at the end of x in the last block); it folds
the partials of the row blocks its segments cover, in row order, under argmax's rules (NaN
first, then the value, then the tie). A segment crossing chunk boundaries is so combined from
several partials, and every output block reads only the row blocks its own segments cover:
the graph stays O(chunks) edges.
"""
from __future__ import annotations

import math

import numpy as np

from cupyops.core import dtypes as _dtypes
from cupyops.core import threads as _threads
from cupyops.interop import dask as _shared
from cupyops.ops.segment import numpy_path as _numpy
from cupyops.ops.segment import rules as _rules

__all__ = ["segment"]


def _order(v, xp):
    """(values in an order NumPy compares as the rules do, NaN/NaT mask)."""
    if _dtypes.is_bf16(v.dtype):
        v = _dtypes.widen(v)
    if v.dtype.kind in "mM":
        bits = _dtypes.datetime_as_int64(v).astype(np.int64)
        return bits, bits == np.iinfo(np.int64).min
    if v.dtype.kind in "fc":
        return v, xp.isnan(v)
    return v, xp.zeros(v.shape, bool)


@_threads.one_thread
def _partial(c, local, start, *, kind, tie, device, opname):
    """The partials of the segments that meet this chunk: values and absolute rows (-1:
    none in this chunk)."""
    _shared.check_chunk(c, opname)
    fn = _shared.public.segment_max_and_argmax if kind == "max" else \
        _shared.public.segment_min_and_argmin
    vals, idx = fn(c, local, tie=tie, empty_index=-1, dtype=np.int64, device=device)
    return {"r": vals, "i": np.where(idx < 0, -1, idx + start) if idx.size else idx}


def _fold(parts, first, *, kind, tie, n_segments):
    """The output block's segments ``first:first + n_segments`` from its row blocks'
    partials (each ``(partial, its first segment)``), in row order."""
    best = None
    for part, s0 in parts:
        lo, hi = max(first, s0), min(first + n_segments, s0 + len(part["i"]))
        if hi <= lo:
            continue
        r = part["r"][lo - s0:hi - s0]
        i = part["i"][lo - s0:hi - s0]
        if best is None:
            best = {"r": _blank(r, n_segments), "i": np.full((n_segments,) + i.shape[1:], -1,
                                                               np.int64)}
        br, bi = best["r"][lo - first:hi - first], best["i"][lo - first:hi - first]
        take = (i >= 0) & ((bi < 0) | _beats(r, br, kind, tie))
        br[...] = np.where(take, r, br)
        bi[...] = np.where(take, i, bi)
    return best


def _blank(r, n):
    return np.zeros((n,) + r.shape[1:], r.dtype)


def _beats(new, old, kind, tie):
    """Where the later rows' ``new`` beat the earlier ``old`` (NaN first, value, tie)."""
    vn, nn = _order(new, np)
    vo, no = _order(old, np)
    gt = vn > vo if kind == "max" else vn < vo
    eq = (vn == vo) | (nn & no)
    gt = (gt & ~no) | (nn & ~no)
    return gt | eq if tie == "last" else gt


def _finish(parts, first, starts, *, kind, tie, n_segments, call_state, dtype, trailing):
    """The output block: indices (and values) of segments ``first:first + n_segments``
    (``trailing``: the block's extents after axis 0)."""
    relative, empty_index, index_dtype, values = call_state
    best = _fold(parts, first, kind=kind, tie=tie, n_segments=n_segments)
    if best is None:
        shape = (n_segments,) + tuple(trailing)
        best = {"i": np.full(shape, -1, np.int64), "r": np.zeros(shape, dtype)}
    rows = best["i"]
    empty = rows < 0
    st = np.asarray(starts[first:first + n_segments], np.int64).reshape(
        (-1,) + (1,) * (rows.ndim - 1))
    idx = np.where(empty, empty_index, rows - st if relative else rows).astype(index_dtype)
    if not values:
        return idx
    vals = np.where(empty, _numpy.empty_value(dtype, kind), best["r"]).astype(dtype)
    return {"values": vals, "indices": idx}


def _field(pair, name):
    return pair[name]


def segment(kind, values, x, offsets, tie="first", relative=False, empty_index=None,
            dtype=None, out=None, device=None, workspace=None):
    """A segmented call on the Dask array ``x`` with host ``offsets``."""
    opname = f"segment_{kind}_and_arg{kind}" if values else f"segment_arg{kind}"
    _shared.refuse_out(out, workspace, opname)
    _shared.check_device(device)
    if _shared.is_dask_array(offsets) or not isinstance(offsets, (np.ndarray, list, tuple)):
        raise TypeError(f"{opname}: with a Dask array x, offsets must be known on the host: a "
                        f"NumPy array or a list, got {type(offsets).__name__}")
    offsets = np.asarray(offsets)
    n_segments, relative, index_dtype, empty_index = _rules.segment_args(
        x, offsets, opname, tie, relative, empty_index, dtype)
    _shared.need_known(x, (0,), opname)
    n = int(x.shape[0])
    _rules.check_offset_values(offsets, n, opname)
    _rules.check_index_fits(n, n_segments, relative, index_dtype, opname)
    graph = _graph(x, offsets.astype(np.int64), kind, tie, device, opname,
                   (relative, empty_index, index_dtype, values))
    if not values:
        return graph
    meta_v = _shared.meta(x, x.ndim, x.dtype)
    meta_i = _shared.meta(x, x.ndim, index_dtype)
    return _rules.ValuesIndices(
        graph.map_blocks(_field, "values", dtype=x.dtype, meta=meta_v,
                         token=f"cupyops-{opname}-values"),
        graph.map_blocks(_field, "indices", dtype=index_dtype, meta=meta_i,
                         token=f"cupyops-{opname}-indices"))


def _graph(x, o, kind, tie, device, opname, call_state):
    """The lazy result: one partial task per chunk, one fold task per output block."""
    import itertools
    from dask.base import tokenize
    from dask.highlevelgraph import HighLevelGraph
    da = _shared.da()
    bounds = np.concatenate([[0], np.cumsum(x.chunks[0])]).astype(np.int64)
    starts, ends = o[:-1], o[1:]
    K, S = len(bounds) - 1, len(starts)
    token = tokenize(x, o, kind, tie, device, call_state)
    pname, fname = f"cupyops-{opname}-part-{token}", f"cupyops-{opname}-{token}"
    # output block k: the segments starting in row block k (the last block takes those at n)
    owner = np.minimum(np.searchsorted(bounds, starts, side="right") - 1, K - 1) if K else \
        np.zeros(S, np.int64)
    first = np.searchsorted(owner, np.arange(K + 1))
    trailing = list(itertools.product(*(range(n) for n in x.numblocks[1:])))
    parts, folds = {}, {}
    for k in range(K):
        c0, c1 = bounds[k], bounds[k + 1]
        s_lo = int(np.searchsorted(ends, c0, side="right"))
        s_hi = int(np.searchsorted(starts, c1, side="left"))
        local = np.clip(o[s_lo:max(s_hi, s_lo) + 1] - c0, 0, c1 - c0)
        if s_hi <= s_lo:
            local = np.zeros(1, np.int64)
        for t in trailing:
            parts[(pname, k) + t] = (_partial_task, (x.name, k) + t, local, c0, s_lo, kind, tie,
                                     device, opname)
    for k in range(K):
        seg0, seg1 = int(first[k]), int(first[k + 1])
        last_row = int(ends[seg1 - 1]) if seg1 > seg0 else int(bounds[k])
        k_end = max(k, int(np.searchsorted(bounds, last_row, side="left")) - 1)
        for t in trailing:
            deps = [(pname, j) + t for j in range(k, min(k_end, K - 1) + 1)] if seg1 > seg0 \
                else []
            extents = tuple(x.chunks[d + 1][j] for d, j in enumerate(t))
            folds[(fname, k) + t] = (_finish_task, deps, seg0, starts, kind, tie, seg1 - seg0,
                                     call_state, x.dtype, extents)
    hlg = HighLevelGraph({pname: parts, fname: folds, **x.dask.layers},
                         {pname: {x.name}, fname: {pname}, **x.dask.dependencies})
    chunks = (tuple(int(first[k + 1] - first[k]) for k in range(K)),) + x.chunks[1:]
    meta = _shared.meta(x, x.ndim, call_state[2])
    return da.Array(hlg, fname, chunks, meta=meta)


def _partial_task(c, local, c0, s_lo, kind, tie, device, opname):
    return _partial(c, local, int(c0), kind=kind, tie=tie, device=device, opname=opname), s_lo


def _finish_task(parts, first, starts, kind, tie, n_segments, call_state, dtype, trailing):
    return _finish(parts, first, starts, kind=kind, tie=tie, n_segments=n_segments,
                   call_state=call_state, dtype=dtype, trailing=trailing)
