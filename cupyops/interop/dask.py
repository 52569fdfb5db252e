"""Dask arrays in, lazy Dask arrays out (issue 16).

``cupyops.<op>(dask_array, ...)`` lands here from cupyops._call, only when ``dask.array`` is
already imported and ``x`` is its ``Array``: dask is never imported by cupyops itself. Every
argument is checked when the graph is built, by the common argument rules (cupyops.core.args:
the same messages as the single-array call). Each chunk then runs the public function for its
type
(NumPy path or ``device=`` for NumPy chunks, the CUDA kernels for CuPy chunks), and the
per-chunk results are combined so that the answer is the single-array call's on the computed
array:

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
* count_nonzero: per-chunk counts, summed in the tree.
* argwhere / nonzero / nonzero_coordinates: per-chunk coordinates plus the chunk's offsets; the
  chunks of one row band (same block along axis 0) are merged into row-major order, one output
  chunk of unknown length per band. ``nonzero_coordinates(size=k)`` trims every band to k rows
  and has one (k, ndim) chunk; its count is a 0-d Dask array (a tree sum of band counts).
"""
from __future__ import annotations

import math
import sys
from functools import partial

import numpy as np

from cupyops.core import args as _args
from cupyops.core import dtypes as _bf16
from cupyops.core import devices as _dispatch
from cupyops.core import threads as _threads

__all__ = ["is_dask_array", "call", "use_public", "arg_chunk"]

_INT64_MIN = np.iinfo(np.int64).min


def is_dask_array(x) -> bool:
    da = sys.modules.get("dask.array")
    return da is not None and isinstance(x, da.Array)


class _PublicFunctions:
    """The public functions the chunks call (``_public.argmax``, ...), as cupyops._call hands
    them over when it is imported (also on a Dask worker, which imports cupyops to unpickle a
    chunk's function)."""

    def __init__(self):
        self.functions: dict = {}

    def __getattr__(self, name):
        try:
            return self.__dict__["functions"][name]
        except KeyError:
            raise AttributeError(name) from None


_public = _PublicFunctions()


def use_public(functions: dict) -> None:
    """Take the public functions by name (cupyops._call.PUBLIC)."""
    _public.functions.update(functions)


def call(fn, x, kw, functions=None):
    """``fn`` (a public function) on the Dask array ``x`` with keywords ``kw``: a lazy Dask
    result."""
    if functions:
        use_public(functions)
    return _IMPLS[fn.__name__](x, **kw)


# --------------------------------------------------------------------------------------------
# shared helpers (graph build time)


def _da():
    import dask.array as da
    return da


def _refuse_out(out, workspace, opname):
    if out is not None:
        raise TypeError(f"{opname}: out= cannot be used with a Dask array x: the result is a new "
                        f"lazy Dask array; leave out=None (store the result with dask.array.store "
                        f"if needed)")
    if workspace is not None:
        raise ValueError(f"{opname}: workspace= cannot be used with a Dask array x: each chunk "
                         f"runs as its own call on its own worker; leave workspace=None")


def _check_device(device):
    if device is not None:
        _dispatch.resolve_device(device)   # a bad name fails now, with the usual message


def _need_known(x, axes, opname):
    for a in axes:
        if any(math.isnan(c) for c in x.chunks[a]):
            raise ValueError(f"{opname}: x (a Dask array) has chunks of unknown size along axis "
                             f"{a}, which {opname} needs to know (chunk offsets, the group's "
                             f"index range); call x.compute_chunk_sizes() first")


def _meta(x, ndim, dtype):
    """An empty array of the chunks' type (NumPy or CuPy) for a result's ``meta``."""
    import warnings
    from dask.array.utils import meta_from_array
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = meta_from_array(x)          # x's meta (an empty array of its chunks' type)
        xp = _xp_of(m)
        if xp is not None and not isinstance(m, np.ma.MaskedArray):
            return xp.empty((0,) * ndim, dtype)
        return meta_from_array(m, ndim=ndim, dtype=dtype)


def _split_every():
    import dask
    return dask.config.get("split_every", None)


# --------------------------------------------------------------------------------------------
# chunk-side helpers (run on the workers)


def _xp_of(a):
    if isinstance(a, np.ndarray):
        return np
    cupy = sys.modules.get("cupy")
    if cupy is not None and isinstance(a, cupy.ndarray):
        return cupy
    return None


def _check_chunk(c, opname):
    """A chunk must be a NumPy or CuPy array; anything else is a TypeError naming its type."""
    t = type(c)
    if isinstance(c, np.ma.MaskedArray):
        raise TypeError(f"{opname}: a chunk of the Dask array x is a numpy.ma.MaskedArray; masked "
                        f"arrays are not supported: their mask has no meaning here; use "
                        f"x.map_blocks(numpy.ma.getdata) or fill them first")
    if _xp_of(c) is None:
        raise TypeError(f"{opname}: a chunk of the Dask array x is a {t.__module__}.{t.__qualname__}, "
                        f"which cupyops does not support; chunks must be numpy.ndarray or "
                        f"cupy.ndarray")
    return c


# --------------------------------------------------------------------------------------------
# argmax / argmin / nanargmax / nanargmin


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
def arg_chunk(c, axis, keepdims=True, *, kind, tie, skip_nan, device, opname,
               computing_meta=False):
    """One chunk's partial (the chunk step of ``dask.array.reduction``): per group, the
    winner's value (comparable form) ``v``, NaN mask ``n``, index ``i`` (row-major over this
    chunk's part of the reduced axes) and 'empty' mask ``e`` (no candidate in this chunk); ``x``
    is the box ``i`` counts in: the chunk's extents along the reduced axes."""
    if computing_meta:               # dask asks for a meta: the input's empty array serves
        return c
    _check_chunk(c, opname)
    xp = _xp_of(c)
    axes = tuple(axis)
    ext = tuple(int(c.shape[a]) for a in axes)
    kshape = tuple(1 if a in axes else n for a, n in enumerate(c.shape))
    if any(c.shape[a] == 0 for a in axes) or c.size == 0:
        v, n = _comparable(xp.zeros(kshape, c.dtype), xp)
        return {"v": v, "n": n, "i": xp.zeros(kshape, np.int64), "e": xp.ones(kshape, bool),
                "x": ext}
    empty = None
    src = c
    fn = _public.argmax if kind == "max" else _public.argmin
    if skip_nan:
        fn = _public.nanargmax if kind == "max" else _public.nanargmin
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
    v = xp.take_along_axis(flat, li.reshape(tuple(c.shape[a] for a in kept) + (1,)), axis=-1)
    v, n = _comparable(v.reshape(kshape), xp)
    if empty is None:
        empty = xp.zeros(kshape, bool)
    return {"v": v, "n": n, "i": li, "e": empty, "x": ext}


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
        xp = _xp_of(acc["i"])
        w = _beats(b, acc, kind, tie, xp)
        acc = {"v": xp.where(w, b["v"], acc["v"]), "n": xp.where(w, b["n"], acc["n"]),
               "i": xp.where(w, b["i"], acc["i"]), "e": acc["e"] & b["e"]}
    acc["x"] = box
    return acc


def _arg_combine(parts, axis, keepdims=True, *, kind, tie, computing_meta=False):
    if computing_meta:     # dask's array-expr mode asks for a meta, handing the result's own:
        return parts.reshape(-1)[:0]       # any empty array (dask gives it the partials' ndim)
    return _merge(parts, kind, tie, len(axis))


def _arg_aggregate(parts, axis, keepdims=False, *, kind, tie, index_dtype, extents,
                   computing_meta=False):
    if computing_meta:     # (array-expr mode) the result's meta, as handed to dask.reduction
        return parts
    acc = _merge(parts, kind, tie, len(axis))
    if acc["x"] != extents:              # the box is x's reduced extents: the index is global
        raise RuntimeError(f"cupyops: the combined partials cover {acc['x']} along the reduced "
                           f"axes, not {extents}")
    if bool(acc["e"].any()):
        raise ValueError("All-NaN slice encountered")
    res = acc["i"].astype(index_dtype)
    if not keepdims:
        res = res.reshape(tuple(n for a, n in enumerate(res.shape) if a not in axis))
    return res


@_threads.one_thread
def _arg_whole(c, *, fn, axes, keepdims, tie, index_dtype, device, opname):
    _check_chunk(c, opname)
    return fn(c, axes, keepdims=keepdims, tie=tie, dtype=index_dtype, device=device)


def _arg_graph(x, kind, axes, keepdims, tie, index_dtype, device, skip_nan, opname):
    """The lazy index array (checks done)."""
    da = _da()
    meta = _meta(x, x.ndim if keepdims else x.ndim - len(axes), index_dtype)
    if all(x.numblocks[a] == 1 for a in axes):
        # each group lies in one chunk: one cupyops call per chunk
        fn = {("max", False): _public.argmax, ("min", False): _public.argmin,
              ("max", True): _public.nanargmax, ("min", True): _public.nanargmin}[kind, skip_nan]
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
                extents=tuple(int(x.shape[a]) for a in axes)),
        axis=axes, keepdims=keepdims, dtype=index_dtype, split_every=_split_every(),
        combine=partial(_arg_combine, kind=kind, tie=tie), name=f"cupyops-{opname}",
        concatenate=False, meta=meta)


def _argreduce(kind, x, axis, keepdims, tie, dtype, out, device, workspace, skip_nan):
    opname = ("nanarg" if skip_nan else "arg") + kind
    _refuse_out(out, workspace, opname)
    _check_device(device)
    _args.check_value_dtype(x, opname, datetime=True)
    axes = _args.normalize_axes(axis, x.ndim, opname, zero_d=True)
    keepdims = _args.check_bool(keepdims, "keepdims", opname)
    _args.check_tie(tie, opname)
    index_dtype = _args.check_index_dtype(dtype, "dtype", opname)
    _need_known(x, axes, opname)
    shape = tuple(x.shape)
    group = math.prod(shape[a] for a in axes)
    if any(shape[a] == 0 for a in axes):
        raise ValueError(f"attempt to get arg{kind} of an empty sequence ({opname}: reduced axes "
                         f"{axes} of shape {shape})")
    if not _args.index_fits(group, index_dtype):
        raise ValueError(f"{opname}: the reduced group has {group} elements, too many for index "
                         f"dtype {index_dtype} (its maximum is {np.iinfo(index_dtype).max})")
    return _arg_graph(x, kind, axes, keepdims, tie, index_dtype, device, skip_nan, opname)


def argmax(x, /, axis=None, *, keepdims=False, tie="first", dtype=None, out=None, device=None,
           workspace=None):
    return _argreduce("max", x, axis, keepdims, tie, dtype, out, device, workspace, False)


def argmin(x, /, axis=None, *, keepdims=False, tie="first", dtype=None, out=None, device=None,
           workspace=None):
    return _argreduce("min", x, axis, keepdims, tie, dtype, out, device, workspace, False)


def nanargmax(x, /, axis=None, *, keepdims=False, tie="first", dtype=None, out=None, device=None,
              workspace=None):
    return _argreduce("max", x, axis, keepdims, tie, dtype, out, device, workspace, True)


def nanargmin(x, /, axis=None, *, keepdims=False, tie="first", dtype=None, out=None, device=None,
              workspace=None):
    return _argreduce("min", x, axis, keepdims, tie, dtype, out, device, workspace, True)


# --------------------------------------------------------------------------------------------
# hardmax


@_threads.one_thread
def _hardmax_whole(c, *, axes, tie, device, dtype):
    _check_chunk(c, "hardmax")
    out = _public.hardmax(c, axes, tie=tie, device=device)
    return out if out.dtype == dtype else out.astype(dtype)   # (see _onehot_chunk)


def _onehot_chunk(c, w, block_info=None, *, axes, shape, dtype):
    """This chunk's part of the one-hot: 1 where the element's global index over the reduced
    axes is its group's winner ``w`` (keepdims shape)."""
    _check_chunk(c, "hardmax")
    xp = _xp_of(c)
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


def hardmax(x, /, axis=-1, *, tie="first", out=None, device=None, workspace=None):
    opname = "hardmax"
    _refuse_out(out, workspace, opname)
    _check_device(device)
    _args.check_value_dtype(x, opname)
    axes = _args.normalize_axes(axis, x.ndim, opname, zero_d=True)
    _args.check_tie(tie, opname)
    da = _da()
    if all(x.numblocks[a] == 1 for a in axes) or any(n == 0 for n in x.shape):
        # each group in one chunk (or nothing to pick from): cupyops' hardmax per chunk
        return da.map_blocks(partial(_hardmax_whole, axes=axes, tie=tie, device=device,
                                     dtype=x.dtype), x,
                             dtype=x.dtype, meta=_meta(x, x.ndim, x.dtype),
                             token="cupyops-hardmax")
    _need_known(x, axes, opname)
    w = _arg_graph(x, "max", axes, True, tie, np.dtype(np.int64), device, False, opname)
    return da.map_blocks(partial(_onehot_chunk, axes=axes, shape=tuple(x.shape), dtype=x.dtype),
                         x, w,
                         dtype=x.dtype, meta=_meta(x, x.ndim, x.dtype),
                         token="cupyops-hardmax-onehot")


# --------------------------------------------------------------------------------------------
# count_nonzero


@_threads.one_thread
def _count_whole(c, *, axes, device):
    _check_chunk(c, "count_nonzero")
    return _public.count_nonzero(c, axes, device=device)


@_threads.one_thread
def _count_chunk(c, axis, keepdims, *, device):
    _check_chunk(c, "count_nonzero")
    return _public.count_nonzero(c, axis, keepdims=True, device=device)


def _count_sum(c, axis, keepdims):
    return _xp_of(c).asarray(c.sum(axis=axis, keepdims=keepdims, dtype=np.int64))


def count_nonzero(x, /, axis=None, *, keepdims=False, device=None):
    opname = "count_nonzero"
    _check_device(device)
    _args.check_value_dtype(x, opname, datetime=True)
    axes = _args.normalize_axes(axis, x.ndim, opname)
    keepdims = _args.check_bool(keepdims, "keepdims", opname)
    da = _da()
    i64 = np.dtype(np.int64)
    if not axes:      # reduces nothing: x != 0 as int64, chunk by chunk
        return da.map_blocks(partial(_count_whole, axes=(), device=device), x, dtype=i64,
                             meta=_meta(x, x.ndim, i64), token="cupyops-count_nonzero")
    from dask.array.reductions import reduction
    return reduction(x, partial(_count_chunk, device=device), _count_sum, axis=axes,
                     keepdims=keepdims, dtype=i64, split_every=_split_every(),
                     combine=_count_sum, name="cupyops-count_nonzero",
                     meta=_meta(x, x.ndim if keepdims else x.ndim - len(axes), i64))


# --------------------------------------------------------------------------------------------
# argwhere / nonzero / nonzero_coordinates


@_threads.one_thread
def _coords_chunk(c, starts, index_dtype, device, opname):
    """This chunk's nonzero coordinates in x's coordinates (row-major within the chunk)."""
    _check_chunk(c, opname)
    xp = _xp_of(c)
    local = _public.argwhere(c, dtype=index_dtype, device=device)
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
        xp = _xp_of(parts[0])
        allc = xp.concatenate(parts, axis=0)
        lin = xp.zeros(allc.shape[0], np.int64)
        for d in range(len(shape)):
            lin = lin * shape[d] + allc[:, d].astype(np.int64)
        out = allc[xp.argsort(lin)]
    if size is not None:
        return {"c": out[:size], "n": out.shape[0]}
    return out


def _band_count(band):
    xp = _xp_of(band) if not isinstance(band, dict) else _xp_of(band["c"])
    n = band["n"] if isinstance(band, dict) else band.shape[0]
    return xp.full((1,), n, np.int64)


def _fixed_coords(bands, size, fill_value, ndim, index_dtype):
    xp = _xp_of(bands[0]["c"])
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
    _need_known(x, range(x.ndim), opname)
    return _args.check_coordinate_dtype(x, dtype, opname)


def _bands_graph(x, index_dtype, device, opname, size=None):
    from dask.highlevelgraph import HighLevelGraph
    (bname, cname), chunk_layer, band_layer, nbands = _coordinate_bands(
        x, index_dtype, device, opname, size)
    layers = {cname: chunk_layer, bname: band_layer}
    deps = {cname: {x.name}, bname: {cname}}
    hlg = HighLevelGraph.merge(HighLevelGraph(layers, deps), x.dask)
    return bname, hlg, nbands


def argwhere(x, /, *, dtype=None, device=None):
    opname = "argwhere"
    _check_device(device)
    index_dtype = _coords_check(x, dtype, opname)
    da = _da()
    bname, hlg, nbands = _bands_graph(x, index_dtype, device, opname)
    return da.Array(hlg, bname, ((math.nan,) * nbands, (x.ndim,)),
                    meta=_meta(x, 2, index_dtype))


def _column(c, d):
    return c[:, d]


def nonzero(x, /, *, device=None):
    opname = "nonzero"
    _check_device(device)
    _args.check_value_dtype(x, opname, datetime=True)
    if x.ndim == 0:
        raise ValueError("nonzero: x is 0-d; the array API does not define nonzero for 0-d arrays "
                         "(use argwhere, or x.reshape(1))")
    _need_known(x, range(x.ndim), opname)
    i64 = np.dtype(np.int64)
    da = _da()
    bname, hlg, nbands = _bands_graph(x, i64, device, opname)
    coords = da.Array(hlg, bname, ((math.nan,) * nbands, (x.ndim,)), meta=_meta(x, 2, i64))
    return tuple(coords.map_blocks(_column, d, drop_axis=1, dtype=i64, meta=_meta(x, 1, i64),
                                   chunks=(coords.chunks[0],), token=f"cupyops-nonzero-{d}")
                 for d in range(x.ndim))


def nonzero_coordinates(x, /, *, size=None, fill_value=0, dtype=None, out=None, device=None,
                        workspace=None):
    opname = "nonzero_coordinates"
    _refuse_out(out, workspace, opname)
    _check_device(device)
    index_dtype = _coords_check(x, dtype, opname)
    size, fill_value = _args.check_size_fill(size, fill_value, index_dtype, opname)
    da = _da()
    from dask.highlevelgraph import HighLevelGraph
    bname, hlg, nbands = _bands_graph(x, index_dtype, device, opname, size)
    i64 = np.dtype(np.int64)
    nname = f"{bname}-count"
    counts_layer = {(nname, b): (_band_count, (bname, b, 0)) for b in range(nbands)}
    hlg_n = HighLevelGraph.merge(HighLevelGraph({nname: counts_layer}, {nname: {bname}}), hlg)
    counts = da.Array(hlg_n, nname, ((1,) * nbands,), meta=_meta(x, 1, i64))
    from dask.array.reductions import reduction
    count = reduction(counts, _count_sum, _count_sum, axis=0, keepdims=False, dtype=i64,
                      split_every=_split_every(), combine=_count_sum,
                      name=f"cupyops-{opname}-count", meta=_meta(x, 0, i64))
    if size is None:
        coords = da.Array(hlg, bname, ((math.nan,) * nbands, (x.ndim,)),
                          meta=_meta(x, 2, index_dtype))
        return coords, count
    from dask.base import tokenize
    fname = f"{bname}-fixed-{tokenize(fill_value)}"
    fixed = {(fname, 0, 0): (_fixed_coords, [(bname, b, 0) for b in range(nbands)], size,
                             fill_value, x.ndim, index_dtype)}
    hlg_f = HighLevelGraph.merge(HighLevelGraph({fname: fixed}, {fname: {bname}}), hlg)
    coords = da.Array(hlg_f, fname, ((size,), (x.ndim,)), meta=_meta(x, 2, index_dtype))
    return coords, count


_IMPLS = {f.__name__: f for f in (argmax, argmin, nanargmax, nanargmin, hardmax, count_nonzero,
                                  argwhere, nonzero, nonzero_coordinates)}
