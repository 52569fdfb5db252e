"""The argument rules of segment_argmax / segment_argmin and their values forms (docs/api.md):
``x`` of shape ``(n, *rest)``, ``offsets`` (1-D integers, S + 1 of them, non-decreasing, in
``[0, n]``), tie, ``relative``, ``empty_index``, the index dtype and ``out=``. Built from the
common rules of cupyops.core.args; each function raises the error a bad argument gets, naming
it."""
from __future__ import annotations

import math
import typing

import numpy as np

from cupyops.core import args as _args
from cupyops.core.arrays import shares_memory

__all__ = ["INDEX_DTYPES", "SegmentCall", "ValuesIndices", "segment_args", "check_offsets",
           "check_offset_values", "offsets_error", "segment_rules"]

#: the index dtypes (those of argmax: every integer dtype, as CuPy)
INDEX_DTYPES = tuple(np.dtype(t) for t in (np.int64, np.int32, np.uint32, np.uint64, np.int8,
                                           np.int16, np.uint8, np.uint16))


class ValuesIndices(typing.NamedTuple):
    """What segment_max_and_argmax / segment_min_and_argmin return: each segment's extremes
    and their indices."""

    values: object
    indices: object


class SegmentCall(typing.NamedTuple):
    """A checked segmented call (offsets' values not read: see :func:`check_offset_values`)."""

    opname: str
    n_segments: int
    result_shape: tuple     # (S, *rest)
    index_dtype: np.dtype
    empty_index: int
    relative: bool
    out: object             # the indices' out, checked, or None
    values_out: object      # the values' out (values forms), checked, or None


def segment_args(x, offsets, opname, tie, relative, empty_index, dtype) -> tuple:
    """The rules that read neither x's extent along axis 0 nor offsets' values (NumPy, CuPy or
    Dask arrays): ``(S, relative, index dtype, empty_index)``."""
    _args.check_value_dtype(x, opname, datetime=True)
    if x.ndim == 0:
        raise ValueError(f"{opname}: x is 0-d; segments run along axis 0 of an array of shape "
                         f"(n, *rest)")
    n_segments = check_offsets(offsets, opname)
    _args.check_tie(tie, opname)
    relative = _args.check_bool(relative, "relative", opname)
    index_dtype = _args.check_index_dtype(dtype, INDEX_DTYPES, "dtype", opname)
    info = np.iinfo(index_dtype)
    if empty_index is None:
        if info.min == 0:
            raise ValueError(f"{opname}: empty_index must be given with the unsigned index dtype "
                             f"{index_dtype} (an empty segment gets it; the default, -1, does "
                             f"not fit)")
        empty_index = -1
    elif isinstance(empty_index, (bool, np.bool_)) or not isinstance(
            empty_index, (int, np.integer)):
        raise TypeError(f"{opname}: empty_index must be None or an int, got {empty_index!r}")
    empty_index = int(empty_index)
    if not info.min <= empty_index <= info.max:
        raise ValueError(f"{opname}: empty_index {empty_index} does not fit index dtype "
                         f"{index_dtype} [{info.min}, {info.max}]")
    return n_segments, relative, index_dtype, empty_index


def check_offsets(offsets, opname) -> int:
    """offsets must be a 1-D array of integers with at least one element; returns S."""
    shape = getattr(offsets, "shape", None)
    dt = getattr(offsets, "dtype", None)
    if shape is None or dt is None:
        raise TypeError(f"{opname}: offsets must be a 1-D integer array (NumPy, CuPy, or any "
                        f"DLPack array), got {type(offsets).__name__}")
    if np.dtype(dt).kind not in "iu":
        raise TypeError(f"{opname}: offsets must hold integers, got dtype {dt}")
    if len(shape) != 1:
        raise ValueError(f"{opname}: offsets must be 1-D (S + 1 segment boundaries), got shape "
                         f"{tuple(shape)}")
    if shape[0] == 0:
        raise ValueError(f"{opname}: offsets must hold at least one element (S + 1 boundaries "
                         f"for S segments), got an empty array")
    return int(shape[0]) - 1


def offsets_error(offsets, n) -> str | None:
    """What is wrong with the values of host ``offsets`` (a NumPy array) for an x of ``n``
    rows, naming the first bad position (a negative value, one below its predecessor, or one
    past n; at one position in that order, as the kernel's device check), or None."""
    o = np.asarray(offsets)
    if o.size == 0:
        return None
    # valid offsets (the common case) in a few array operations: non-decreasing, so bounded
    # by the first and the last
    if o[0] >= 0 and o[-1] <= n and (o.size == 1 or bool((o[1:] >= o[:-1]).all())):
        return None
    negative = o < 0
    decreasing = np.zeros(o.shape, bool)
    decreasing[1:] = o[1:] < o[:-1]
    past = o > n
    bad = np.flatnonzero(negative | decreasing | past)
    if not bad.size:
        return None
    i = int(bad[0])
    if negative[i]:
        return f"offsets[{i}] is {int(o[i])}, below 0"
    if decreasing[i]:
        return (f"offsets decrease at position {i}: offsets[{i - 1}] = {int(o[i - 1])} > "
                f"offsets[{i}] = {int(o[i])}")
    return f"offsets[{i}] is {int(o[i])}, past the end of x's axis 0 (length {n})"


def check_offset_values(offsets, n, opname) -> None:
    """``ValueError`` naming offsets and the first bad position, for host offsets."""
    why = offsets_error(offsets, n)
    if why is not None:
        raise ValueError(f"{opname}: {why}; offsets must be non-decreasing, with offsets[0] >= 0 "
                         f"and offsets[-1] <= n")


def check_index_fits(n, n_segments, relative, index_dtype, opname) -> None:
    """Every index the call can return fits the index dtype: an index along axis 0 (or from
    a segment's start, ``relative``) is at most n - 1."""
    if n_segments and n and not _args.index_fits(n, index_dtype):
        what = "a segment's index from its start" if relative else "an index along axis 0"
        raise ValueError(f"{opname}: x has {n} rows, so {what} can reach {n - 1}, too large for "
                         f"index dtype {index_dtype} (its maximum is {np.iinfo(index_dtype).max})")


def segment_rules(x, offsets, opname, tie, relative, empty_index, dtype, out,
                  values=False) -> SegmentCall:
    """Check a segmented call on ``x`` (NumPy or CuPy), ``offsets``' values aside."""
    vout = None
    if values and out is not None:
        if not isinstance(out, tuple) or len(out) != 2 or out[0] is None or out[1] is None:
            raise TypeError(f"{opname}: out must be a pair (values, indices) of arrays, got "
                            f"{type(out).__name__}")
        vout, out = out
    if dtype is None and getattr(out, "dtype", None) in INDEX_DTYPES:
        dtype = out.dtype      # with dtype=None, out's dtype is the result dtype
    n_segments, relative, index_dtype, empty_index = segment_args(
        x, offsets, opname, tie, relative, empty_index, dtype)
    n = int(x.shape[0])
    check_index_fits(n, n_segments, relative, index_dtype, opname)
    shape = (n_segments,) + tuple(x.shape[1:])
    if out is not None:
        out = _args.check_out(out, x, shape, index_dtype, f"{opname} (out)" if not values
                              else f"{opname} (out[1], indices)")
    if vout is not None:
        vout = _args.check_out(vout, x, shape, x.dtype, f"{opname} (out[0], values)",
                               f"{x.dtype}, x's dtype (the values are x's elements)")
        if shares_memory(vout, out):
            raise ValueError(f"{opname}: out[0] (values) and out[1] (indices) overlap")
    for a, what in ((out, "out" if not values else "out[1]"), (vout, "out[0]")):
        if a is not None and type(a) is type(offsets) and shares_memory(a, offsets):
            raise ValueError(f"{opname}: {what} overlaps offsets, which the call reads while "
                             f"it writes {what}; pass offsets that {what} does not share")
    return SegmentCall(opname, n_segments, shape, index_dtype, empty_index, relative, out, vout)


def group_rows(shape) -> int:
    """The trailing positions each segment reduces independently: prod(rest)."""
    return math.prod(shape[1:])
