"""The benchmark of the segment family (cupyops.core.operator.Bench; cupyops.bench runs it):
four length distributions over a long 1-D x and short segments over rows of 64, tie first (the
peers' rule), and what a NumPy / CuPy or PyTorch user writes instead:

* NumPy: the segments' extremes by ``ufunc.reduceat`` over the non-empty segments, then
  the first position holding it by a ``minimum.reduceat`` of the positions where x equals it
  (NaN equal to NaN: the extreme NaN wins, as in argmax); empty segments set to -1 after;
* CuPy (no ``maximum.reduceat``: NotImplementedError in CuPy 14.2, seen on the H200): each
  row's segment by ``searchsorted``, the extremes by ``cupyx.scatter_max`` / ``scatter_min``,
  the first position holding each by ``scatter_min`` (:func:`scatter_composition`);
* PyTorch: the extreme by ``torch.segment_reduce`` (floating dtypes; it takes no integers) or
  ``scatter_reduce`` ("amax"/"amin") over a segment id per row (``repeat_interleave``), then the
  first position holding it by ``scatter_reduce`` "amin", as PyTorch has no segmented argmax
  (``segment_reduce`` gives the values only; torch_scatter, a separate package with a compiled
  extension, is not a peer here).
"""
from __future__ import annotations

import functools
import zlib

import numpy as np

from cupyops.core.operator import Bench, BenchCase, PeerUnavailable

__all__ = ["segment_bench", "lengths_for", "offsets_for_case", "reduceat_composition",
           "scatter_composition", "cupy_scatters", "torch_composition"]

#: the length distributions (:func:`lengths_for`)
DISTRIBUTIONS = ("short", "long", "power-law", "huge+tiny")
LEGEND = (("short", "uniform segment lengths of 1 to 16 rows"),
          ("long", "uniform segment lengths of 512 to 1536 rows"),
          ("power-law", "lengths from a Pareto law (many short, a few very long)"),
          ("huge+tiny", "one segment of half the rows, the rest of length 0 to 2"),
          ("R=", "the trailing positions reduced independently (x of shape (n, R))"))


def lengths_for(dist, n, rng):
    """Segment lengths summing to ``n`` (empty segments included) for a distribution."""
    if dist == "short":
        raw = rng.integers(1, 17, n // 8 + 2)
    elif dist == "long":
        raw = rng.integers(512, 1537, n // 1000 + 2)
    elif dist == "power-law":
        raw = np.minimum((rng.pareto(1.2, n // 16 + 2) * 4).astype(np.int64), n)
    else:
        raw = np.concatenate([[n // 2], rng.integers(0, 3, n // 2)])
    ends = np.minimum(np.cumsum(raw), n)
    ends = ends[: int(np.searchsorted(ends, n)) + 1]
    ends[-1] = n
    return np.diff(np.concatenate([[0], ends]))


def offsets_for_case(case):
    """The case's offsets (int64, from a seed of its name): same offsets for every peer."""
    rng = np.random.default_rng(zlib.crc32(case.case.encode()) & 0xFFFF)
    lengths = lengths_for(case.params["dist"], case.shape[0], rng)
    return np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)


#: the cases of each benchmarked operator (the GPU run's bench step has 90 s for every
#: operator's quick cases: segment_argmin's and segment_min_and_argmin's would time the same
#: kernels again, so they have none)
CASES = {"index": ("short R=1", "long R=1", "power-law R=1", "short R=64"),
         "values": ("short R=1", "power-law R=1")}


def _cases(names, sizes, dtype):
    n = int(np.prod(sizes["2d"]))
    every = [BenchCase(f"{d} R=1", (n,), {"dist": d}) for d in DISTRIBUTIONS] + \
        [BenchCase("short R=64", (n // 64, 64), {"dist": "short"})]
    return [c for c in every if c.case in names]


def _call(f, case, device):
    offsets = offsets_for_case(case)
    kept = {}

    def fn(x):
        o = offsets
        if type(x) is not np.ndarray:       # a GPU x: its offsets on the GPU once (untimed)
            o = kept.get("o")
            if o is None:
                import cupy
                o = kept["o"] = cupy.asarray(offsets)
        return f(x, o, device=device if type(x) is np.ndarray else None)
    fn.traffic_inputs = (offsets,)      # read besides x (the simt traffic model's minimum)
    return fn


def reduceat_composition(xp, x, offsets, kind, values):
    """What a NumPy / CuPy user writes: the module docstring's first item."""
    if not hasattr(xp.maximum, "reduceat"):
        raise PeerUnavailable(f"{xp.__name__} has no ufunc.reduceat")
    starts, lengths = offsets[:-1], xp.diff(offsets)
    full = lengths > 0
    idx_shape = (len(starts),) + x.shape[1:]
    nonempty = starts[full]
    ext = (xp.maximum if kind == "max" else xp.minimum).reduceat(x, nonempty, axis=0) \
        if len(nonempty) else x[:0]
    seg = xp.repeat(xp.arange(len(nonempty)), lengths[full])
    span = x[int(offsets[0]):int(offsets[-1])]
    hit = span == ext[seg]
    if x.dtype.kind in "fc":
        hit |= xp.isnan(span) & xp.isnan(ext[seg])
    pos = xp.arange(int(offsets[0]), int(offsets[-1])).reshape((-1,) + (1,) * (x.ndim - 1))
    big = xp.iinfo(xp.int64).max
    first = xp.minimum.reduceat(xp.where(hit, pos, big), nonempty - offsets[0], axis=0) \
        if len(nonempty) else xp.zeros((0,) + x.shape[1:], xp.int64)
    idx = xp.full(idx_shape, -1, xp.int64)
    idx[full] = first
    if not values:
        return idx
    vals = xp.empty(idx_shape, x.dtype)
    vals[full] = ext
    return vals, idx


def scatter_composition(xp, x, offsets, kind, values, scatter_max, scatter_min):
    """What a CuPy user writes, as CuPy has no ``maximum.reduceat`` (CuPy 14.2 raises
    NotImplementedError): each row's segment by ``searchsorted`` over the ends, the extremes by
    ``scatter_max`` / ``scatter_min`` (``cupyx``'s; NumPy's ``ufunc.at`` in the tests), then the
    first position holding each by ``scatter_min`` of the positions (NaN is not ordered by the
    scatters: the peer's own rule); empty segments -1. No host read: rows outside
    ``[offsets[0], offsets[-1])`` go to a dummy segment S, dropped at the end."""
    n_seg = len(offsets) - 1
    pos = xp.arange(x.shape[0])
    seg = xp.searchsorted(offsets[1:], pos, side="right")
    seg = xp.where(pos < offsets[0], n_seg, seg)         # (a 0-d array: no sync)
    dt = x.dtype
    if dt.kind == "f":
        start = -np.inf if kind == "max" else np.inf
    elif dt.kind in "iu":
        start = np.iinfo(dt).min if kind == "max" else np.iinfo(dt).max
    else:
        raise PeerUnavailable(f"no scatter_{kind} of {dt}")
    shape = (n_seg + 1,) + x.shape[1:]
    ext = xp.full(shape, start, dt)
    (scatter_max if kind == "max" else scatter_min)(ext, seg, x)
    big = np.iinfo(np.int64).max
    posb = xp.broadcast_to(pos.reshape((-1,) + (1,) * (x.ndim - 1)), x.shape)
    first = xp.full(shape, big, np.int64)
    scatter_min(first, seg, xp.where(x == ext[seg], posb, big))
    idx = xp.where(first[:n_seg] == big, -1, first[:n_seg])
    return (ext[:n_seg], idx) if values else idx


def cupy_scatters():
    try:
        import cupyx
    except ImportError as exc:
        raise PeerUnavailable("no cupyx") from exc
    return cupyx.scatter_max, cupyx.scatter_min


def _compose(kind, values, xp, case):
    offsets = offsets_for_case(case)
    if xp is np:
        return lambda x: reduceat_composition(xp, x, offsets, kind, values)
    o = xp.asarray(offsets)
    smax, smin = cupy_scatters()
    return lambda x: scatter_composition(xp, x, o, kind, values, smax, smin)


def torch_composition(torch, x, lengths, kind, values):
    """What a PyTorch user writes (the module doc's third item): ``lengths`` an int64 tensor on
    x's device, summing to x's rows."""
    if x.dtype == torch.bool or x.is_complex():
        raise PeerUnavailable(f"torch scatter_reduce takes no {x.dtype}")
    dev = x.device
    n_seg = len(lengths)
    seg = torch.repeat_interleave(torch.arange(n_seg, device=dev), lengths,
                                  output_size=x.shape[0])
    idx_of = seg.reshape((-1,) + (1,) * (x.dim() - 1)).expand_as(x)
    shape = (n_seg,) + tuple(x.shape[1:])
    if x.is_floating_point():       # PyTorch's segmented reduction (floats only; NaN wins)
        ext = torch.segment_reduce(x, kind, lengths=lengths, axis=0, unsafe=True)
    else:
        ext = torch.empty(shape, dtype=x.dtype, device=dev).scatter_reduce(
            0, idx_of, x, "amax" if kind == "max" else "amin", include_self=False)
    hit = x == ext.index_select(0, seg)
    if x.is_floating_point():
        hit |= x.isnan() & ext.index_select(0, seg).isnan()
    pos = torch.arange(x.shape[0], device=dev).reshape((-1,) + (1,) * (x.dim() - 1))
    big = torch.iinfo(torch.int64).max
    first = torch.full(shape, big, dtype=torch.int64, device=dev).scatter_reduce(
        0, idx_of, torch.where(hit, pos, big).expand_as(x), "amin")
    idx = torch.where(first == big, -1, first)
    return (ext, idx) if values else idx


def _torch(kind, values, torch, case):
    lengths = np.diff(offsets_for_case(case))
    return lambda x: torch_composition(torch, x, torch.as_tensor(lengths, device=x.device),
                                       kind, values)


def _as_numpy(values, kind, r):
    """Empty segments' values are not compared (each peer fills them its own way)."""
    if not values:
        return np.asarray(r)
    vals, idx = (np.asarray(v) for v in r)
    return np.where(idx >= 0, vals, np.zeros((), vals.dtype)), idx


def segment_bench(kind, values, names=None):
    """segment_argmax's (``kind`` "max") or segment_argmin's benchmark (``values``: the
    ``*_and_arg*`` forms); ``names``: its cases (default :data:`CASES`), or None: no benchmark
    for the min forms."""
    if kind == "min" and names is None:
        return None
    names = CASES["values" if values else "index"] if names is None else names
    return Bench(functools.partial(_cases, names), _call, functools.partial(_compose, kind, values),
                 torch=functools.partial(_torch, kind, values),
                 as_numpy=functools.partial(_as_numpy, values, kind), legend=LEGEND)
