"""Dask arrays for the nonzero family (cupyops.interop.dask hands a call here through the
operator's descriptor): count_nonzero, argwhere, nonzero and nonzero_coordinates.

* count_nonzero: per-chunk counts, summed in the tree.
* argwhere / nonzero / nonzero_coordinates: per-chunk coordinates plus the chunk's offsets; the
  chunks of one row band (same block along axis 0) are merged into row-major order, one output
  chunk of unknown length per band. ``nonzero_coordinates(size=k)`` trims every band to k rows
  and has one (k, ndim) chunk; its count is a 0-d Dask array (a tree sum of band counts).

The arguments are checked by the family's own rules (cupyops.ops.nonzero.rules, and the
common rules of cupyops.core.args) when the graph is built.
"""
from __future__ import annotations

import math
from functools import partial

import numpy as np

from cupyops.core import args as _args
from cupyops.core import threads as _threads
from cupyops.interop import dask as _shared
from cupyops.ops.nonzero import rules as _rules

__all__ = ["count_nonzero", "argwhere", "nonzero", "nonzero_coordinates"]



@_threads.one_thread
def _count_whole(c, *, axes, device):
    _shared.check_chunk(c, "count_nonzero")
    return _shared.public.count_nonzero(c, axes, device=device)


@_threads.one_thread
def _count_chunk(c, axis, keepdims, *, device):
    _shared.check_chunk(c, "count_nonzero")
    return _shared.public.count_nonzero(c, axis, keepdims=True, device=device)


def _count_sum(c, axis, keepdims):
    return _shared.xp_of(c).asarray(c.sum(axis=axis, keepdims=keepdims, dtype=np.int64))


def count_nonzero(x, axis=None, keepdims=False, device=None):
    opname = "count_nonzero"
    _shared.check_device(device)
    axes, keepdims = _rules.count_args(x, axis, keepdims)
    da = _shared.da()
    i64 = np.dtype(np.int64)
    if not axes:      # reduces nothing: x != 0 as int64, chunk by chunk
        return da.map_blocks(partial(_count_whole, axes=(), device=device), x, dtype=i64,
                             meta=_shared.meta(x, x.ndim, i64), token="cupyops-count_nonzero")
    from dask.array.reductions import reduction
    return reduction(x, partial(_count_chunk, device=device), _count_sum, axis=axes,
                     keepdims=keepdims, dtype=i64, split_every=_shared.split_every(),
                     combine=_count_sum, name="cupyops-count_nonzero",
                     meta=_shared.meta(x, x.ndim if keepdims else x.ndim - len(axes), i64))


# --------------------------------------------------------------------------------------------
# argwhere / nonzero / nonzero_coordinates


@_threads.one_thread
def _coords_chunk(c, starts, index_dtype, device, opname):
    """This chunk's nonzero coordinates in x's coordinates (row-major within the chunk)."""
    _shared.check_chunk(c, opname)
    xp = _shared.xp_of(c)
    local = _shared.public.argwhere(c, dtype=index_dtype, device=device)
    if not starts or not any(starts):
        return local
    return local + xp.asarray(starts, dtype=index_dtype)


def _band(parts, shape, index_dtype, size):
    """The coordinates of one row band (the chunks sharing a block along axis 0) in row-major
    order: concatenated, then ordered by their row-major linear index (they are already sorted
    within each chunk, and along axis 0 the band's chunks do not interleave when the band has
    one chunk)."""
    if len(parts) == 1:
        out = parts[0]
    else:
        xp = _shared.xp_of(parts[0])
        allc = xp.concatenate(parts, axis=0)
        lin = xp.zeros(allc.shape[0], np.int64)
        for d in range(len(shape)):
            lin = lin * shape[d] + allc[:, d].astype(np.int64)
        out = allc[xp.argsort(lin)]
    if size is not None:
        return {"c": out[:size], "n": out.shape[0]}
    return out


def _band_count(band):
    xp = _shared.xp_of(band) if not isinstance(band, dict) else _shared.xp_of(band["c"])
    n = band["n"] if isinstance(band, dict) else band.shape[0]
    return xp.full((1,), n, np.int64)


def _fixed_coords(bands, size, fill_value, ndim, index_dtype):
    xp = _shared.xp_of(bands[0]["c"])
    out = xp.full((size, ndim), fill_value, index_dtype)
    at = 0
    for b in bands:
        if at >= size:
            break
        take = b["c"][: size - at]
        out[at:at + take.shape[0]] = take
        at += take.shape[0]
    return out


def _coordinate_bands(x, index_dtype, device, opname, size=None):
    """((band name, chunk name), chunk layer, band layer, number of bands): one task per chunk
    (its coordinates), one per row band (their merge)."""
    from dask.base import tokenize
    token = tokenize(x, index_dtype, device, size)
    cname = f"cupyops-{opname}-chunk-{token}"
    bname = f"cupyops-{opname}-band-{token}"
    starts = [np.concatenate([[0], np.cumsum(c)[:-1]]).astype(int) if len(c) else [0]
              for c in x.chunks]
    chunk_layer, band_layer = {}, {}
    shape = tuple(int(n) for n in x.shape)
    if x.ndim == 0:
        chunk_layer[(cname,)] = (_coords_chunk, (x.name,), (), index_dtype, device, opname)
        band_layer[(bname, 0, 0)] = (_band, [(cname,)], shape, index_dtype, size)
        return (bname, cname), chunk_layer, band_layer, 1
    import itertools
    nb = x.numblocks
    for b0 in range(nb[0]):
        keys = []
        for rest in itertools.product(*(range(n) for n in nb[1:])):
            idx = (b0,) + rest
            st = tuple(int(starts[d][i]) for d, i in enumerate(idx))
            chunk_layer[(cname,) + idx] = (_coords_chunk, (x.name,) + idx, st, index_dtype,
                                          device, opname)
            keys.append((cname,) + idx)
        band_layer[(bname, b0, 0)] = (_band, keys, shape, index_dtype, size)
    return (bname, cname), chunk_layer, band_layer, nb[0]


def _coords_check(x, dtype, opname):
    _args.check_value_dtype(x, opname, datetime=True)
    _shared.need_known(x, range(x.ndim), opname)
    return _rules.check_coordinate_dtype(x, dtype, opname)


def _bands_graph(x, index_dtype, device, opname, size=None):
    from dask.highlevelgraph import HighLevelGraph
    (bname, cname), chunk_layer, band_layer, nbands = _coordinate_bands(
        x, index_dtype, device, opname, size)
    layers = {cname: chunk_layer, bname: band_layer}
    deps = {cname: {x.name}, bname: {cname}}
    hlg = HighLevelGraph.merge(HighLevelGraph(layers, deps), x.dask)
    return bname, hlg, nbands


def argwhere(x, dtype=None, device=None):
    opname = "argwhere"
    _shared.check_device(device)
    index_dtype = _coords_check(x, dtype, opname)
    da = _shared.da()
    bname, hlg, nbands = _bands_graph(x, index_dtype, device, opname)
    return da.Array(hlg, bname, ((math.nan,) * nbands, (x.ndim,)),
                    meta=_shared.meta(x, 2, index_dtype))


def _column(c, d):
    return c[:, d]


def nonzero(x, device=None):
    opname = "nonzero"
    _shared.check_device(device)
    _rules.check_nonzero_input(x)
    _shared.need_known(x, range(x.ndim), opname)
    i64 = np.dtype(np.int64)
    da = _shared.da()
    bname, hlg, nbands = _bands_graph(x, i64, device, opname)
    coords = da.Array(hlg, bname, ((math.nan,) * nbands, (x.ndim,)), meta=_shared.meta(x, 2, i64))
    return tuple(coords.map_blocks(_column, d, drop_axis=1, dtype=i64, meta=_shared.meta(x, 1, i64),
                                   chunks=(coords.chunks[0],), token=f"cupyops-nonzero-{d}")
                 for d in range(x.ndim))


def nonzero_coordinates(x, size=None, fill_value=0, dtype=None, out=None, device=None,
                        workspace=None):
    opname = "nonzero_coordinates"
    _shared.refuse_out(out, workspace, opname)
    _shared.check_device(device)
    index_dtype = _coords_check(x, dtype, opname)
    size, fill_value = _rules.check_size_fill(size, fill_value, index_dtype, opname)
    _rules.check_size_memory(size, x.ndim, index_dtype, opname)
    da = _shared.da()
    from dask.highlevelgraph import HighLevelGraph
    bname, hlg, nbands = _bands_graph(x, index_dtype, device, opname, size)
    i64 = np.dtype(np.int64)
    nname = f"{bname}-count"
    counts_layer = {(nname, b): (_band_count, (bname, b, 0)) for b in range(nbands)}
    hlg_n = HighLevelGraph.merge(HighLevelGraph({nname: counts_layer}, {nname: {bname}}), hlg)
    counts = da.Array(hlg_n, nname, ((1,) * nbands,), meta=_shared.meta(x, 1, i64))
    from dask.array.reductions import reduction
    count = reduction(counts, _count_sum, _count_sum, axis=0, keepdims=False, dtype=i64,
                      split_every=_shared.split_every(), combine=_count_sum,
                      name=f"cupyops-{opname}-count", meta=_shared.meta(x, 0, i64))
    if size is None:
        coords = da.Array(hlg, bname, ((math.nan,) * nbands, (x.ndim,)),
                          meta=_shared.meta(x, 2, index_dtype))
        return coords, count
    from dask.base import tokenize
    fname = f"{bname}-fixed-{tokenize(fill_value)}"
    fixed = {(fname, 0, 0): (_fixed_coords, [(bname, b, 0) for b in range(nbands)], size,
                             fill_value, x.ndim, index_dtype)}
    hlg_f = HighLevelGraph.merge(HighLevelGraph({fname: fixed}, {fname: {bname}}), hlg)
    coords = da.Array(hlg_f, fname, ((size,), (x.ndim,)), meta=_shared.meta(x, 2, index_dtype))
    return coords, count


