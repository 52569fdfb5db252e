"""The NumPy path's entries for count_nonzero, argwhere, nonzero and nonzero_coordinates: NumPy
compositions (flat indices split by divmod; whole-array counts with bounded memory) that
cupyops._call runs on repeated calls. None where cupyops.ops.nonzero.numpy_path must serve."""
from __future__ import annotations

import numpy as np

from cupyops.core.placement import CPU_SMALL
from cupyops.ops.nonzero.numpy_path import count_all as _count_all

__all__ = ["cpu_count_entry", "cpu_argwhere_entry", "cpu_nonzero_entry",
           "cpu_coordinates_entry"]


def cpu_count_entry(x, axes, *, result_shape):
    """A whole-array count (cupyops.ops.nonzero.numpy_path.count_all): any size over all axes (bounded
    memory); np.count_nonzero over some axes: small inputs."""
    if x.dtype.kind not in "biufcmM" or not x.dtype.isnative or not axes or x.size == 0:
        return None
    if len(axes) == x.ndim:
        def entry(x, workspace):
            return np.asarray(_count_all(x), np.int64).reshape(result_shape)
        return entry
    if x.size > CPU_SMALL:
        return None
    ax = tuple(axes)

    def entry(x, workspace):
        # C order, as the slow path's result (np.count_nonzero follows x's layout)
        return np.count_nonzero(x, axis=ax).astype(np.int64, order="C").reshape(result_shape)
    return entry


def _nonzero_ok(x) -> bool:
    return (x.dtype.kind in "biufcmM" and x.dtype.isnative and x.ndim >= 1 and x.size > 0
            and x.flags.c_contiguous)


def _coordinates(x, out=None, dtype=np.intp):
    """The coordinates of x's nonzeros (C-contiguous x), row-major: the flat indices
    (np.flatnonzero) split by divmod straight into one array per axis (``out(count)`` gives
    them, e.g. the columns of argwhere's result), which beats np.nonzero's coordinate walk and
    gives contiguous arrays."""
    flat = np.flatnonzero(x)
    n = len(flat)
    if x.ndim == 1 and out is None:
        return [flat]
    cols = out(n) if out is not None else [np.empty(n, dtype) for _ in range(x.ndim)]
    if x.ndim == 1:
        cols[0][...] = flat
        return cols
    rem = flat
    for i in range(x.ndim - 1, 0, -1):
        q = cols[0] if i == 1 else np.empty(n, np.intp)
        np.divmod(rem, x.shape[i], out=(q, cols[i]), casting="unsafe")
        rem = q
    return cols


def cpu_argwhere_entry(x, index_dtype):
    """(count, ndim) coordinates, C-contiguous, for C-contiguous inputs of any size (memory:
    the output's and one flat index array)."""
    if not _nonzero_ok(x):
        return None
    dt = np.dtype(index_dtype)
    ndim = x.ndim

    def entry(x, workspace):
        if ndim == 1 and dt == np.intp:
            return np.flatnonzero(x).reshape(-1, 1)
        res = []

        def columns(n):
            res.append(np.empty((n, ndim), dt))
            return [res[0][:, i] for i in range(ndim)]
        _coordinates(x, columns)
        return res[0]
    return entry


def cpu_nonzero_entry(x):
    if not _nonzero_ok(x):
        return None

    def entry(x, workspace):
        return tuple(_coordinates(x))
    return entry


def cpu_coordinates_entry(x, size, fill_value, index_dtype):
    if not _nonzero_ok(x):
        return None
    dt = np.dtype(index_dtype)
    argwhere = cpu_argwhere_entry(x, dt)

    def entry(x, workspace):
        a = argwhere(x, workspace)
        n = len(a)
        count = np.asarray(n, np.int64)
        if size is None:
            return a, count
        coords = np.empty((size, a.shape[1]), dt)
        m = min(size, n)
        coords[:m] = a[:m]
        coords[m:] = fill_value
        return coords, count
    return entry
