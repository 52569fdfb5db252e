"""The argument rules of argmin / argmax / nanargmin / nanargmax and hardmax (docs/api.md):
what a call accepts, normalised, before any work. Built from the common rules of
cupyops.core.args; each function raises the error a bad argument gets, naming it."""
from __future__ import annotations

import math
import typing

import numpy as np

from cupyops.core import args as _args


#: index dtypes of argmin / argmax / nanargmin / nanargmax: every integer dtype (as CuPy)
INDEX_DTYPES = tuple(np.dtype(t) for t in (np.int64, np.int32, np.uint32, np.uint64, np.int8,
                                           np.int16, np.uint8, np.uint16))


class ValuesIndices(typing.NamedTuple):
    """What max_and_argmax / min_and_argmin return: the extremes and their indices (the
    fields of ``torch.max(x, dim)``'s result)."""

    values: object
    indices: object


class ArgreduceCall(typing.NamedTuple):
    """A checked argmin/argmax/nanarg* call."""

    opname: str
    axes: tuple            # sorted, distinct
    keepdims: bool
    index_dtype: np.dtype
    kept_shape: tuple
    result_shape: tuple
    out: object            # checked, or None
    out_kept: object       # out as the kept shape (keepdims: a view), or None


def argreduce_args(x, opname, axis, keepdims, tie, dtype):
    """The rules of an argmin/argmax/nanarg* call that read no extent of ``x`` (a NumPy, CuPy
    or Dask array): ``(axes, keepdims, index dtype)``."""
    _args.check_value_dtype(x, opname, datetime=True)
    axes = _args.normalize_axes(axis, x.ndim, opname, zero_d=True)
    keepdims = _args.check_bool(keepdims, "keepdims", opname)
    _args.check_tie(tie, opname)
    index_dtype = _args.check_index_dtype(dtype, INDEX_DTYPES, "dtype", opname)
    return axes, keepdims, index_dtype


def argreduce_rules(x, opname, axis, keepdims, tie, dtype, out) -> ArgreduceCall:
    """Check an argmin/argmax/nanarg* call on ``x`` (a NumPy or CuPy array)."""
    if dtype is None and getattr(out, "dtype", None) in INDEX_DTYPES:
        dtype = out.dtype  # with dtype=None, out's dtype is the result dtype
    axes, keepdims, index_dtype = argreduce_args(x, opname, axis, keepdims, tie, dtype)
    shape = tuple(x.shape)
    kept_shape = tuple(n for i, n in enumerate(shape) if i not in axes)
    result_shape = tuple(1 if i in axes else n for i, n in enumerate(shape)) \
        if keepdims else kept_shape
    check_group(shape, axes, index_dtype, opname)
    out_kept = None
    if out is not None:
        out = _args.check_out(out, x, result_shape, index_dtype, opname,
                              _out_dtypes_accepted(dtype, index_dtype))
        out_kept = out[tuple(0 if i in axes else slice(None) for i in range(len(shape)))
                       + (Ellipsis,)] if keepdims else out
    return ArgreduceCall(opname, axes, keepdims, index_dtype, kept_shape, result_shape, out,
                         out_kept)


def check_group(shape, axes, index_dtype, opname) -> None:
    """An empty reduced axis is NumPy's error; a group whose last index the index dtype cannot
    hold is a ValueError before any work."""
    kind = "max" if opname.endswith("max") else "min"
    if any(shape[a] == 0 for a in axes):
        raise ValueError(f"attempt to get arg{kind} of an empty sequence ({opname}: reduced axes "
                         f"{axes} of shape {shape})")
    group = math.prod(shape[a] for a in axes)
    if not _args.index_fits(group, index_dtype):
        raise ValueError(f"{opname}: the reduced group has {group} elements, too many for index "
                         f"dtype {index_dtype} (its maximum is {np.iinfo(index_dtype).max})")


def _out_dtypes_accepted(dtype, index_dtype) -> str:
    names = _args.dtype_names(INDEX_DTYPES)
    if dtype is None:
        return f"one of {names} (with dtype=None, out's dtype is the result dtype)"
    return (f"{index_dtype}, as dtype={index_dtype.name} was given (with dtype=None, out may "
            f"have any of {names})")


def hardmax_args(x, axis, tie) -> tuple:
    """The rules of a hardmax call that read no extent of ``x`` (NumPy, CuPy or Dask): its
    sorted axes."""
    _args.check_value_dtype(x, "hardmax")
    axes = _args.normalize_axes(axis, x.ndim, "hardmax", zero_d=True)
    _args.check_tie(tie, "hardmax")
    return axes


def hardmax_rules(x, axis, tie, out) -> tuple:
    """Check a hardmax call on ``x``: ``(axes, out)``."""
    axes = hardmax_args(x, axis, tie)
    if out is not None:
        out = _args.check_out(out, x, x.shape, x.dtype, "hardmax",
                              f"{x.dtype}, x's dtype (hardmax's result has it)")
    return axes, out
