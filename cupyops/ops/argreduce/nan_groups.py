"""nanargmin / nanargmax's error for a group of only NaN: NumPy's words after the function's
name, then the group, as an index of x (``nanargmax: All-NaN slice encountered: x[1, :] holds
only NaN``). The NumPy path's engine, the kernel path's runner, the trivial branch and Dask
raise it; it is worked out on the error path only. Imports nothing of cupyops: the engine
(numpy_path.py) stays a leaf."""
from __future__ import annotations

import numpy as np

__all__ = ["ALL_NAN", "all_nan_error", "all_nan_groups_error"]


ALL_NAN = "All-NaN slice encountered"


def all_nan_error(opname, x, axes, offset=None) -> ValueError:
    """nanargmin / nanargmax's error for a group of only NaN: NumPy's words after the
    function's name, then the first such group as an index of ``x`` (``x[1, :]``) and how many
    more there are. ``x``: the call's input (NumPy or CuPy; bfloat16 read by its bits);
    ``axes``: the reduced axes; ``offset``: x's start in a bigger array the message is about
    (a Dask chunk's). Found on the error path only (one pass over x)."""
    try:
        empty = _nan_mask(x).all(axis=tuple(axes))
    except Exception:    # (the message without the group rather than a second error)
        return ValueError(f"{opname}: {ALL_NAN}")
    return all_nan_groups_error(opname, empty, x.ndim, axes, offset)


def all_nan_groups_error(opname, empty, ndim, axes, offset=None, note="") -> ValueError:
    """:func:`all_nan_error` from ``empty``, the groups of only NaN as a bool array of the
    kept shape (NumPy or CuPy)."""
    empty = np.asarray(empty.get() if hasattr(empty, "get") else empty).reshape(
        tuple(n for a, n in enumerate(empty.shape) if a not in axes) if empty.ndim == ndim
        else empty.shape)
    count = int(empty.sum())
    if not count:
        return ValueError(f"{opname}: {ALL_NAN}")
    kept = [int(c) for c in np.unravel_index(int(np.argmax(empty.reshape(-1))), empty.shape)]
    kept_axes = [a for a in range(ndim) if a not in axes]
    if offset is not None:
        kept = [c + int(offset[a]) for c, a in zip(kept, kept_axes)]
    where = "x" if not kept_axes else "x[" + ", ".join(
        str(kept.pop(0)) if a in kept_axes else ":" for a in range(ndim)) + "]"
    more = "" if count == 1 else f" (and {count - 1} more group{'s' if count > 2 else ''})"
    return ValueError(f"{opname}: {ALL_NAN}: {where} holds only NaN{more}{note}")


def _nan_mask(x):
    """Where ``x`` (NumPy or CuPy) is NaN; bfloat16 by its bits."""
    if x.dtype.kind == "V":
        return (x.view(np.uint16) & 0x7FFF) > 0x7F80
    if isinstance(x, np.ndarray):
        return np.isnan(x)
    import cupy                          # (the kernel path's CuPy input)
    return cupy.isnan(x)
