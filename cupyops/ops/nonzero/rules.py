"""The argument rules of the nonzero family (docs/api.md) that are its own: the coordinate
dtypes (DirectML's four), a dimension too long for them, and the fixed-size form's
``size`` / ``fill_value``. Built from the common rules of cupyops.core.args."""
from __future__ import annotations

import operator

import numpy as np

from cupyops.core import args as _args

__all__ = ["COORDINATE_DTYPES", "check_size_fill", "check_size_memory",
           "check_coordinate_dtype", "count_args", "check_nonzero_input"]

_MAX_INTP = int(np.iinfo(np.intp).max)
#: DirectML's four index dtypes: the coordinates of argwhere and nonzero_coordinates
COORDINATE_DTYPES = tuple(np.dtype(t) for t in (np.int64, np.int32, np.uint32, np.uint64))


def check_size_fill(size, fill_value, index_dtype, opname):
    """nonzero_coordinates' ``size`` (None or a non-negative int) and ``fill_value`` (an int
    that ``index_dtype`` holds), normalised to Python ints; the Dask path checks the same."""
    if size is not None:
        if isinstance(size, (bool, np.bool_)):
            raise TypeError(f"{opname}: size must be None or a non-negative int, got {size!r}")
        try:
            size = operator.index(size)
        except TypeError:
            raise TypeError(f"{opname}: size must be None or a non-negative int, got {size!r}") from None
        if size < 0:
            raise ValueError(f"{opname}: size must be non-negative, got {size}")
        if size > _MAX_INTP:
            raise ValueError(f"{opname}: size must be at most {_MAX_INTP} (the largest array "
                             f"dimension), got {size}")
    if isinstance(fill_value, (bool, np.bool_)):
        raise TypeError(f"{opname}: fill_value must be an int, got {fill_value!r}")
    try:
        fill_value = operator.index(fill_value)
    except TypeError:
        raise TypeError(f"{opname}: fill_value must be an int, got {fill_value!r}") from None
    info = np.iinfo(index_dtype)
    if not info.min <= fill_value <= info.max:
        raise ValueError(f"{opname}: fill_value {fill_value} does not fit index dtype {index_dtype} "
                         f"[{info.min}, {info.max}]")
    return size, fill_value


def check_size_memory(size, ndim, index_dtype, opname, memory=None, where="this machine"):
    """nonzero_coordinates' ``size=k`` against its ``(k, ndim)`` coordinates: within the largest
    array (``intp``'s maximum in bytes, counted as NumPy does: a dimension of 0 as 1) and,
    where ``memory`` is given, within that many bytes (the memory of ``where``). Checked
    before anything is made."""
    if size is None:
        return
    dt = np.dtype(index_dtype)
    row = int(ndim) * dt.itemsize
    what = f"{opname}: size={size} is too large: ({size}, {ndim}) {dt} coordinates"
    if size * max(row, dt.itemsize) > _MAX_INTP:
        raise ValueError(f"{what} are over the largest array ({_MAX_INTP} bytes); size must be "
                         f"at most {_MAX_INTP // max(row, dt.itemsize)}")
    if memory is not None and size * row > memory:
        raise ValueError(f"{what} take {size * row} bytes, over the memory of {where} ({memory} "
                         f"bytes); size must be at most {memory // row}")


def check_coordinate_dtype(x, dtype, opname):
    index_dtype = _args.check_index_dtype(dtype, COORDINATE_DTYPES, "dtype", opname)
    longest = max(x.shape, default=0)
    if not _args.index_fits(longest, index_dtype):
        raise ValueError(f"{opname}: a dimension of length {longest} is too long for index dtype "
                         f"{index_dtype} (its maximum is {np.iinfo(index_dtype).max})")
    return index_dtype


def count_args(x, axis, keepdims) -> tuple:
    """count_nonzero's rules (any array with dtype, ndim: NumPy, CuPy, Dask): ``(axes,
    keepdims)``."""
    _args.check_value_dtype(x, "count_nonzero", datetime=True)
    axes = _args.normalize_axes(axis, x.ndim, "count_nonzero")
    return axes, _args.check_bool(keepdims, "keepdims", "count_nonzero")


def check_nonzero_input(x) -> None:
    """nonzero's rules: a supported dtype, and not 0-d (the array API leaves it undefined)."""
    _args.check_value_dtype(x, "nonzero", datetime=True)
    if x.ndim == 0:
        raise ValueError("nonzero: x is 0-d; the array API does not define nonzero for 0-d arrays "
                         "(use argwhere, or x.reshape(1))")
