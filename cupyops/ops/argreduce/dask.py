"""Dask arrays for the argreduce family (cupyops.interop.dask hands a call here through the
operator's descriptor): argmin / argmax / nanarg* and hardmax.

* argmax / argmin / nanargmax / nanargmin: ``dask.array.reduction`` with ``concatenate=False``
  and dask's ``split_every`` tree. Each chunk gives, per group, its local winner (cupyops over
  the reduced axes of the chunk) and the winning value, the index counted row-major in the
  chunk's own box (its extents along the reduced axes, carried with the partial). A combine
  places its blocks side by side in one box (dask nests them by position, in the order of the
  reduced axes), moves each index into it, and keeps the winner under the kernels' total order:
  value order (complex lexicographic, NaN/NaT the extreme, -0.0 == 0.0, integers exact), ties by
  index, first or last. The last box is x's reduced extents, so its index is the global
  row-major one. A group with no candidate yet (an all-NaN chunk of a nanarg*, a zero-length
  chunk) loses to anything; only a group that stays empty after the last combine is
  ``ValueError("All-NaN slice encountered")``. When every reduced axis is one chunk, the groups
  never span chunks: one cupyops call per chunk, nothing to combine.
* hardmax: the tree above gives each group's global winner; each chunk then writes its own part
  of the one-hot (``map_blocks``).

The arguments are checked by the family's own rules (cupyops.ops.argreduce.rules) when the
graph is built.
"""
from __future__ import annotations

from functools import partial

import numpy as np

from cupyops.core import dtypes as _bf16
from cupyops.core import threads as _threads
from cupyops.interop import dask as _shared
from cupyops.ops.argreduce import nan_groups as _nan_groups
from cupyops.ops.argreduce import rules as _rules

__all__ = ["argreduce", "values", "hardmax", "arg_chunk"]

_INT64_MIN = np.iinfo(np.int64).min



def _comparable(v, xp):
    """(values that compare in the kernels' value order, NaN/NaT mask) of a chunk's winners."""
    dt = v.dtype
    if dt.kind in "mM":
        bits = _bf16.datetime_as_int64(v).astype(np.int64)
        return bits, bits == _INT64_MIN
    if dt.kind == "V":                 # bfloat16: its exact float32 widening
        v = _bf16.widen(v)
        dt = v.dtype
    if dt.kind in "fc":
        if dt.byteorder not in "=|":
            v = v.astype(dt.newbyteorder("="))
        return v, xp.isnan(v)
    if dt.kind == "b":
        v = v.astype(np.uint8)
    elif dt.byteorder not in "=|":
        v = v.astype(dt.newbyteorder("="))
    return v, xp.zeros(v.shape, bool)


@_threads.one_thread
def arg_chunk(c, axis, keepdims=True, *, kind, tie, skip_nan, device, opname, raw=False,
               computing_meta=False):
    """One chunk's partial (the chunk step of ``dask.array.reduction``): per group, the
    winner's value as it is ``r`` and in comparable form ``v``, NaN mask ``n``, index ``i``
    (row-major over this chunk's part of the reduced axes) and 'empty' mask ``e`` (no candidate
    in this chunk); ``x`` is the box ``i`` counts in: the chunk's extents along the reduced
    axes. argmin/argmax take the value and the index from one max_and_argmax / min_and_argmin
    call; nanarg* read the winners back (their NaN-skipping winner has no values call). ``r``
    only with ``raw`` (max_and_argmax's graph): the others send only what they compare."""
    if computing_meta:               # dask asks for a meta: the input's empty array serves
        return c
    _shared.check_chunk(c, opname)
    xp = _shared.xp_of(c)
    axes = tuple(axis)
    ext = tuple(int(c.shape[a]) for a in axes)
    kshape = tuple(1 if a in axes else n for a, n in enumerate(c.shape))
    if any(c.shape[a] == 0 for a in axes) or c.size == 0:
        r = xp.zeros(kshape, c.dtype)
        v, n = _comparable(r, xp)
        return _partial(v, n, r if raw else None, xp.zeros(kshape, np.int64),
                        xp.ones(kshape, bool), ext)
    if not skip_nan:              # the values come out of the same call: no re-read
        fn = _shared.public.max_and_argmax if kind == "max" else _shared.public.min_and_argmin
        r, li = fn(c, axes, keepdims=True, tie=tie, dtype=np.int64, device=device)
        v, n = _comparable(r, xp)
        return _partial(v, n, r if raw else None, li, xp.zeros(kshape, bool), ext)
    empty = None
    src = c
    fn = _shared.public.nanargmax if kind == "max" else _shared.public.nanargmin
    if c.dtype.kind in "fcV":
        nan = xp.isnan(_bf16.widen(c) if c.dtype.kind == "V" else c)
        empty = nan.all(axis=axes, keepdims=True)
        if bool(empty.any()):       # an all-NaN group in this chunk: no candidate here
            src = xp.where(empty, xp.zeros((), c.dtype), c)
        else:
            empty = None
    li = fn(src, axes, keepdims=True, tie=tie, dtype=np.int64, device=device)
    # the winners' values: reduced axes last, flattened in row-major order (the index's order)
    nd = c.ndim
    kept = [a for a in range(nd) if a not in axes]
    moved = xp.moveaxis(src, list(axes), list(range(nd - len(axes), nd)))
    flat = moved.reshape(tuple(c.shape[a] for a in kept) + (-1,))
    r = xp.take_along_axis(flat, li.reshape(tuple(c.shape[a] for a in kept) + (1,)), axis=-1)
    r = r.reshape(kshape)
    v, n = _comparable(r, xp)
    if empty is None:
        empty = xp.zeros(kshape, bool)
    return _partial(v, n, r if raw else None, li, empty, ext)


def _partial(v, n, r, i, e, x):
    """A chunk's partial; the raw winners ``r`` only where the graph returns values."""
    out = {"v": v, "n": n, "i": i, "e": e, "x": x}
    if r is not None:
        out["r"] = r
    return out


def _beats(b, a, kind, tie, xp):
    """Where pair b wins over pair a under the kernels' total order (``i`` in the same box)."""
    vb, va = b["v"], a["v"]
    if vb.dtype.kind == "c":
        rb, ra, jb, ja = vb.real, va.real, vb.imag, va.imag
        gt = (rb > ra) | ((rb == ra) & (jb > ja)) if kind == "max" else \
            (rb < ra) | ((rb == ra) & (jb < ja))
        eq = (rb == ra) & (jb == ja)
    else:
        gt = vb > va if kind == "max" else vb < va
        eq = vb == va
    tb = b["i"] < a["i"] if tie == "first" else b["i"] > a["i"]
    win = gt | (eq & tb)
    nb, na = b["n"], a["n"]
    win = xp.where(na | nb, nb & (~na | tb), win)      # NaN/NaT: the extreme; two NaN tie
    eb, ea = b["e"], a["e"]
    return xp.where(ea | eb, ea & ~eb, win)            # an empty side loses


def _grid(parts, depth):
    """{block position in this group (one coordinate per reduced axis): partial}. With
    ``concatenate=False`` dask hands combine/aggregate the partials as lists nested in the order
    of the sorted reduced axes (the nesting ``concatenate=True`` would join along them); a bare
    partial where a list is expected is a group of one along the axes left."""
    out = {}
    stack = [((), parts)]
    while stack:
        pos, p = stack.pop()
        if isinstance(p, dict) or len(pos) == depth:
            out[pos + (0,) * (depth - len(pos))] = p
        else:
            stack.extend((pos + (j,), q) for j, q in enumerate(p))
    return out


def _offsets(grid, depth):
    """Per reduced axis, {block position: its start in the group's box}, and the box's extents.
    The blocks of one position along an axis must all have the same extent there (a grid)."""
    starts, box = [], []
    for k in range(depth):
        ext = {}
        for pos, p in grid.items():
            if ext.setdefault(pos[k], p["x"][k]) != p["x"][k]:
                raise RuntimeError("cupyops: dask handed the combine step partials that do not "
                                   "form a grid of blocks (unexpected nesting)")
        at, s = 0, {}
        for j in sorted(ext):
            s[j] = at
            at += ext[j]
        starts.append(s)
        box.append(at)
    return starts, tuple(box)


def _reindex(i, ext, start, box):
    """Row-major index ``i`` in a block of extents ``ext`` -> row-major index in the group's
    ``box``, the block starting at ``start`` in it."""
    if tuple(ext) == box:
        return i
    coords = []
    for e in reversed(ext):
        coords.append(i % max(e, 1))
        i = i // max(e, 1)
    out = 0
    for c, s, n in zip(reversed(coords), start, box):
        out = out * n + (c + s)
    return out


def _merge(parts, kind, tie, depth):
    """One partial for a group of blocks: indices moved into the group's box, then folded under
    the kernels' total order (associative and commutative: the tree's shape does not matter)."""
    grid = _grid(parts, depth)
    starts, box = _offsets(grid, depth)
    acc = None
    for pos in sorted(grid):
        p = grid[pos]
        b = dict(p, i=_reindex(p["i"], p["x"], [starts[k][j] for k, j in enumerate(pos)], box))
        if acc is None:
            acc = b
            continue
        xp = _shared.xp_of(acc["i"])
        w = _beats(b, acc, kind, tie, xp)
        acc = _partial(xp.where(w, b["v"], acc["v"]), xp.where(w, b["n"], acc["n"]),
                       xp.where(w, b["r"], acc["r"]) if "r" in acc else None,
                       xp.where(w, b["i"], acc["i"]), acc["e"] & b["e"], None)
    acc["x"] = box
    return acc


def _arg_combine(parts, axis, keepdims=True, *, kind, tie, computing_meta=False):
    if computing_meta:     # dask's array-expr mode asks for a meta, handing the result's own:
        return parts.reshape(-1)[:0]       # any empty array (dask gives it the partials' ndim)
    return _merge(parts, kind, tie, len(axis))


def _arg_aggregate(parts, axis, keepdims=False, *, kind, tie, index_dtype, extents,
                   values_dtype=None, computing_meta=False, opname="", ndim=0,
                   kept_whole=True):
    if computing_meta:     # (array-expr mode) the result's meta, as handed to dask.reduction
        return parts
    acc = _merge(parts, kind, tie, len(axis))
    if acc["x"] != extents:              # the box is x's reduced extents: the index is global
        raise RuntimeError(f"cupyops: the combined partials cover {acc['x']} along the reduced "
                           f"axes, not {extents}")
    if bool(acc["e"].any()):
        # (the group's place is x's own where the kept axes are one chunk each)
        raise _nan_groups.all_nan_groups_error(
            opname, acc["e"], ndim, axis, note="" if kept_whole else
            " (counted within the output chunk that holds it)")
    res = acc["i"].astype(index_dtype)
    if not keepdims:
        res = res.reshape(tuple(n for a, n in enumerate(res.shape) if a not in axis))
    if values_dtype is None:
        return res
    # (the graph's dtype: a worker may hand over a byte-swapped chunk as native)
    return {"values": acc["r"].astype(values_dtype).reshape(res.shape), "indices": res}


@_threads.one_thread
def _arg_whole(c, *, fn, axes, keepdims, tie, index_dtype, device, opname, block_info=None):
    _shared.check_chunk(c, opname)
    try:
        return fn(c, axes, keepdims=keepdims, tie=tie, dtype=index_dtype, device=device)
    except ValueError as exc:
        if _nan_groups.ALL_NAN not in str(exc) or not block_info:
            raise
    # the group as x's, not the chunk's
    start = [lo for lo, _ in block_info[0]["array-location"]]
    raise _nan_groups.all_nan_error(opname, c, axes, offset=start)


def _arg_graph(x, kind, axes, keepdims, tie, index_dtype, device, skip_nan, opname):
    """The lazy index array (checks done)."""
    da = _shared.da()
    meta = _shared.meta(x, x.ndim if keepdims else x.ndim - len(axes), index_dtype)
    if all(x.numblocks[a] == 1 for a in axes):
        # each group lies in one chunk: one cupyops call per chunk
        fn = {("max", False): _shared.public.argmax, ("min", False): _shared.public.argmin,
              ("max", True): _shared.public.nanargmax, ("min", True): _shared.public.nanargmin}[kind, skip_nan]
        chunks = tuple((1,) if a in axes else c for a, c in enumerate(x.chunks))
        if not keepdims:
            chunks = tuple(c for a, c in enumerate(chunks) if a not in axes)
        return da.map_blocks(
            partial(_arg_whole, fn=fn, axes=axes, keepdims=keepdims, tie=tie,
                    index_dtype=index_dtype, device=device, opname=opname),
            x, chunks=chunks, drop_axis=() if keepdims else axes, dtype=index_dtype, meta=meta,
            token=f"cupyops-{opname}")
    # (value, index) partials, one per chunk, folded in dask's split_every tree
    return da.reduction(
        x, partial(arg_chunk, kind=kind, tie=tie, skip_nan=skip_nan, device=device,
                   opname=opname),
        partial(_arg_aggregate, kind=kind, tie=tie, index_dtype=index_dtype,
                extents=tuple(int(x.shape[a]) for a in axes), opname=opname, ndim=x.ndim,
                kept_whole=all(n == 1 for a, n in enumerate(x.numblocks) if a not in axes)),
        axis=axes, keepdims=keepdims, dtype=index_dtype, split_every=_shared.split_every(),
        combine=partial(_arg_combine, kind=kind, tie=tie), name=f"cupyops-{opname}",
        concatenate=False, meta=meta)


def argreduce(kind, skip_nan, x, axis=None, keepdims=False, tie="first", dtype=None, out=None,
              device=None, workspace=None):
    """argmin (``kind="min"``) / argmax, nanarg* with ``skip_nan``, on the Dask array ``x``."""
    opname = ("nanarg" if skip_nan else "arg") + kind
    _shared.refuse_out(out, workspace, opname)
    _shared.check_device(device)
    axes, keepdims, index_dtype = _rules.argreduce_args(x, opname, axis, keepdims, tie, dtype)
    _shared.need_known(x, axes, opname)
    _rules.check_group(tuple(x.shape), axes, index_dtype, opname)
    return _arg_graph(x, kind, axes, keepdims, tie, index_dtype, device, skip_nan, opname)


# --------------------------------------------------------------------------------------------
# max_and_argmax / min_and_argmin


@_threads.one_thread
def _values_whole(c, *, kind, axes, keepdims, tie, index_dtype, device, opname, dtype):
    _shared.check_chunk(c, opname)
    fn = _shared.public.max_and_argmax if kind == "max" else _shared.public.min_and_argmin
    vals, idx = fn(c, axes, keepdims=keepdims, tie=tie, dtype=index_dtype, device=device)
    return {"values": vals if vals.dtype == dtype else vals.astype(dtype), "indices": idx}


def _field(pair, name):
    return pair[name]


def values(kind, x, axis=None, keepdims=False, tie="first", dtype=None, out=None, device=None,
           workspace=None):
    """max_and_argmax (``kind="max"``) / min_and_argmin on the Dask array ``x``: two lazy
    arrays, values and indices, from one graph of (value, index) partials."""
    opname = f"{kind}_and_arg{kind}"
    _shared.refuse_out(out, workspace, opname)
    _shared.check_device(device)
    axes, keepdims, index_dtype = _rules.argreduce_args(x, opname, axis, keepdims, tie, dtype)
    _shared.need_known(x, axes, opname)
    _rules.check_group(tuple(x.shape), axes, index_dtype, opname)
    da = _shared.da()
    ndim = x.ndim if keepdims else x.ndim - len(axes)
    if all(x.numblocks[a] == 1 for a in axes):   # each group in one chunk: one call a chunk
        chunks = tuple((1,) if a in axes else c for a, c in enumerate(x.chunks))
        if not keepdims:
            chunks = tuple(c for a, c in enumerate(chunks) if a not in axes)
        pairs = da.map_blocks(
            partial(_values_whole, kind=kind, axes=axes, keepdims=keepdims, tie=tie,
                    index_dtype=index_dtype, device=device, opname=opname, dtype=x.dtype),
            x, chunks=chunks, drop_axis=() if keepdims else axes, dtype=index_dtype,
            meta=_shared.meta(x, ndim, index_dtype), token=f"cupyops-{opname}")
    else:                                         # (value, index) partials folded in a tree
        pairs = da.reduction(
            x, partial(arg_chunk, kind=kind, tie=tie, skip_nan=False, device=device,
                       opname=opname, raw=True),
            partial(_arg_aggregate, kind=kind, tie=tie, index_dtype=index_dtype,
                    extents=tuple(int(x.shape[a]) for a in axes), values_dtype=x.dtype),
            axis=axes, keepdims=keepdims, dtype=index_dtype, split_every=_shared.split_every(),
            combine=partial(_arg_combine, kind=kind, tie=tie), name=f"cupyops-{opname}",
            concatenate=False, meta=_shared.meta(x, ndim, index_dtype))
    return _rules.ValuesIndices(
        pairs.map_blocks(_field, "values", dtype=x.dtype, meta=_shared.meta(x, ndim, x.dtype),
                         token=f"cupyops-{opname}-values"),
        pairs.map_blocks(_field, "indices", dtype=index_dtype,
                         meta=_shared.meta(x, ndim, index_dtype),
                         token=f"cupyops-{opname}-indices"))


# --------------------------------------------------------------------------------------------
# hardmax


@_threads.one_thread
def _hardmax_whole(c, *, axes, tie, device, dtype):
    _shared.check_chunk(c, "hardmax")
    out = _shared.public.hardmax(c, axes, tie=tie, device=device)
    return out if out.dtype == dtype else out.astype(dtype)   # (see _onehot_chunk)


def _onehot_chunk(c, w, block_info=None, *, axes, shape, dtype):
    """This chunk's part of the one-hot: 1 where the element's global index over the reduced
    axes is its group's winner ``w`` (keepdims shape)."""
    _shared.check_chunk(c, "hardmax")
    xp = _shared.xp_of(c)
    loc = block_info[0]["array-location"]
    gi = xp.zeros((1,) * c.ndim, np.int64)
    stride = 1
    for a in reversed(axes):
        r = xp.arange(loc[a][0], loc[a][1], dtype=np.int64)
        gi = gi + r.reshape(tuple(-1 if b == a else 1 for b in range(c.ndim))) * stride
        stride *= shape[a]
    hit = gi == w
    hit = xp.broadcast_to(hit, c.shape)
    # (the graph's dtype, not the chunk's: a worker may hand over a byte-swapped chunk as native)
    if _bf16.is_bf16(dtype):
        return (hit.astype(np.uint16) * _bf16.ONE_BITS).astype(np.uint16).view(dtype)
    return hit.astype(dtype)


def hardmax(x, axis=-1, tie="first", out=None, device=None, workspace=None):
    """hardmax on the Dask array ``x``."""
    opname = "hardmax"
    _shared.refuse_out(out, workspace, opname)
    _shared.check_device(device)
    axes = _rules.hardmax_args(x, axis, tie)
    da = _shared.da()
    if all(x.numblocks[a] == 1 for a in axes) or any(n == 0 for n in x.shape):
        # each group in one chunk (or nothing to pick from): cupyops' hardmax per chunk
        return da.map_blocks(partial(_hardmax_whole, axes=axes, tie=tie, device=device,
                                     dtype=x.dtype), x,
                             dtype=x.dtype, meta=_shared.meta(x, x.ndim, x.dtype),
                             token="cupyops-hardmax")
    _shared.need_known(x, axes, opname)
    w = _arg_graph(x, "max", axes, True, tie, np.dtype(np.int64), device, False, opname)
    return da.map_blocks(partial(_onehot_chunk, axes=axes, shape=tuple(x.shape), dtype=x.dtype),
                         x, w,
                         dtype=x.dtype, meta=_shared.meta(x, x.ndim, x.dtype),
                         token="cupyops-hardmax-onehot")


