"""The common argument rules (docs/api.md), shared by every operator and by the Dask layer:
value dtypes, axes, index dtypes (from the operator's own set), ties, bools and ``out=``. Each
takes the operator's name for its messages and knows nothing else about it; an operator's own
rules live in its folder (``cupyops/ops/<family>/rules.py``)."""
from __future__ import annotations

import operator
import sys

import numpy as np

from cupyops.core.arrays import is_cupy_array
from cupyops.core.dtypes import DATETIME_NAMES, VALUE_DTYPES
from cupyops.core.arrays import check_cupy_alignment

TIES = ("first", "last")


def dtype_names(dtypes) -> str:
    return ", ".join(d.name for d in dtypes)


def check_value_dtype(x, opname, datetime=False, allowed=VALUE_DTYPES):
    dt = x.dtype
    if dt.kind in "biufc" and dt.newbyteorder("=") in allowed:
        return
    if datetime and dt.kind in "mM":
        return
    if dt.kind == "V" and dt.name == "bfloat16":   # ml_dtypes' (NumPy or CuPy)
        return
    names = dtype_names(allowed) + ", bfloat16" + (", " + ", ".join(DATETIME_NAMES) if datetime else "")
    why = (" (a one-hot of datetime64 or timedelta64 values means nothing)"
           if dt.kind in "mM" else "")
    raise TypeError(f"{opname}: x has dtype {dt}, which is not supported{why}; supported "
                    f"dtypes are {names}")


def check_index_dtype(dtype, allowed, argname="dtype", opname=""):
    """An index dtype among ``allowed`` (the operator's set); None gives int64."""
    if dtype is None:
        return np.dtype(np.int64)
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"{opname}: {argname} must be one of {dtype_names(allowed)}, "
                        f"got {dtype!r}") from None
    if dt not in allowed:
        raise TypeError(f"{opname}: {argname} must be one of {dtype_names(allowed)}, got {dt}")
    return dt


def index_fits(n_positions: int, dt: np.dtype) -> bool:
    """An index dtype fits a group of n elements when n - 1 <= its maximum."""
    return n_positions - 1 <= np.iinfo(dt).max


def normalize_axes(axis, ndim, opname, zero_d=False):
    """None → every axis; int or tuple of ints → sorted tuple of distinct non-negative axes.
    ``zero_d``: a 0-d input takes axis 0 or -1 (once, and nothing else) and reduces nothing,
    as NumPy's argmax does (argmin/argmax/hardmax)."""
    if axis is None:
        return tuple(range(ndim))
    if zero_d and ndim == 0:
        for a in (axis if isinstance(axis, tuple) else (axis,)):
            if isinstance(a, (bool, np.bool_)) or isinstance(axis, list):
                break
            try:
                a = operator.index(a)
            except TypeError:
                break
            if a not in (0, -1):
                raise np.exceptions.AxisError(a, 0, msg_prefix=opname)
        else:
            if isinstance(axis, tuple) and len(axis) > 1:    # 0 and -1 name the same axis
                raise ValueError(f"{opname}: axis {axis!r} repeats an axis")
            return ()
    items = axis if isinstance(axis, tuple) else (axis,)
    if isinstance(axis, list):
        raise TypeError(f"{opname}: axis must be None, an int or a tuple of ints, got a list")
    out = []
    for a in items:
        if isinstance(a, (bool, np.bool_)):
            raise TypeError(f"{opname}: axis must be None, an int or a tuple of ints, got {a!r}")
        try:
            a = operator.index(a)
        except TypeError:
            raise TypeError(f"{opname}: axis must be None, an int or a tuple of ints, got {a!r}") from None
        if not -ndim <= a < ndim:
            raise np.exceptions.AxisError(a, ndim, msg_prefix=opname)
        out.append(a % ndim)
    if len(set(out)) != len(out):
        raise ValueError(f"{opname}: axis {axis!r} repeats an axis")
    return tuple(sorted(out))


def check_tie(tie, opname):
    if not isinstance(tie, str) or tie not in TIES:
        raise ValueError(f"{opname}: tie must be 'first' or 'last', got {tie!r}")


def check_bool(value, argname, opname):
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{opname}: {argname} must be a bool, got {value!r}")
    return bool(value)


def module_of(arr):
    return "cupy" if is_cupy_array(arr) else ("numpy" if isinstance(arr, np.ndarray) else None)


def check_out(out, x, shape, dtype, opname, accepted=None):
    """out must have exactly the result's shape, module and dtype, be writable, and not overlap x.
    ``accepted``: what the error lists as the dtypes out may have, when that is more than one."""
    if out is None:
        return None
    want = module_of(x)
    got = module_of(out)
    if got != want:
        raise TypeError(f"{opname}: out must be a {want} array like x, got {type(out).__name__}")
    if tuple(out.shape) != tuple(shape):
        raise ValueError(f"{opname}: out has shape {tuple(out.shape)}, expected {tuple(shape)}")
    if out.dtype != dtype:
        raise TypeError(f"{opname}: out has dtype {out.dtype}, expected {accepted or dtype}")
    if want == "numpy":
        if not out.flags.writeable:
            raise ValueError(f"{opname}: out is read-only")
        if np.may_share_memory(x, out):
            try:
                overlap = np.shares_memory(x, out, max_work=10**6)
            except np.exceptions.TooHardError:
                overlap = True  # cannot prove them apart: refuse rather than risk it
            if overlap:
                raise ValueError(f"{opname}: out overlaps the input x")
    else:
        cupy = sys.modules["cupy"]
        if out.device != x.device:
            raise ValueError(f"{opname}: out is on {out.device}, x on {x.device}")
        check_cupy_alignment(out, "out", opname)
        if cupy.may_share_memory(x, out):
            raise ValueError(f"{opname}: out overlaps the input x")
    return out
