"""The NumPy path's entries for argmin / argmax / nanarg* / hardmax: the NumPy composition a
user would write, where it gives docs/api.md's answer as fast as NumPy can (small inputs; the
last axis of a large C-contiguous input), for cupyops._call to run on repeated calls. None
where the NumPy path's own engine (cupyops.ops.argreduce.numpy_path) must serve."""
from __future__ import annotations

import functools

import numpy as np

from cupyops.core.placement import CPU_SMALL
from cupyops.ops.argreduce import numpy_path as _numpy

__all__ = ["cpu_argreduce_entry", "cpu_hardmax_entry"]

# (ndarray's own methods for argmax/argmin: np.argmax's Python wrapper costs half a µs)
_ARG = {("max", False): np.ndarray.argmax, ("min", False): np.ndarray.argmin,
        ("max", True): np.nanargmax, ("min", True): np.nanargmin}


def _numpy_semantics(dtype) -> bool:
    # NumPy's argmax/argmin/nonzero agree with docs/api.md for these (NaN first, -0.0 == 0.0);
    # complex, datetime and bfloat16 keep the library's own paths
    return dtype.kind in "biuf" and dtype.isnative


def cpu_argreduce_entry(x, axes, *, kind, skip_nan, tie, index_dtype, result_shape):
    """The NumPy composition a user would write for a small input, or None."""
    if x.size == 0 or not axes or not _numpy_semantics(x.dtype):
        return None
    # larger inputs only where NumPy reads in place: the last axis of a C-contiguous input
    # (np.argmax copies any other layout whole, padded rows included; the library's chunked
    # path bounds that); tie "last" by rows (_cpu_argreduce.last_extreme_rows)
    if x.size > CPU_SMALL:
        if not (axes == (x.ndim - 1,) and not skip_nan and x.flags.c_contiguous):
            return None
        if tie == "last":
            return _last_extreme_entry(x, kind, index_dtype, result_shape)
    f = _ARG[(kind, skip_nan)]
    last = tie == "last"
    ndim = x.ndim
    index_dtype = np.dtype(index_dtype)
    kept = tuple(i for i in range(ndim) if i not in axes)
    if len(axes) == ndim:
        n = x.size

        def run(x):
            if last:
                return n - 1 - f(x.reshape(-1)[::-1])
            return f(x)
    elif len(axes) == 1:
        (a,) = axes
        n = x.shape[a]
        flip = tuple(slice(None, None, -1) if i == a else slice(None) for i in range(ndim))

        def run(x):
            if last:
                return n - 1 - f(x[flip], axis=a)
            return f(x, axis=a)
    else:
        perm = kept + tuple(axes)
        flat = tuple(x.shape[i] for i in kept) + (-1,)
        n = int(np.prod([x.shape[i] for i in axes]))

        def run(x):
            y = x.transpose(perm).reshape(flat)
            if last:
                return n - 1 - f(y[..., ::-1], axis=-1)
            return f(y, axis=-1)
    same = index_dtype == np.dtype(np.intp)

    def entry(x, workspace):
        r = run(x)
        r = np.asarray(r) if same else np.asarray(r).astype(index_dtype)
        return r.reshape(result_shape) if r.shape != result_shape else r
    return entry


def _row_tails_serve(rows: int, n: int) -> bool:
    """Whether ``rows`` rows of ``n`` elements find their last extremes with
    last_extreme_rows: many rows, none longer than a chunk. A few long rows keep the engine,
    whose blocks of ~sqrt(16 n) read a long row once (the tails searched from the end would
    read the part after each row's first extreme twice)."""
    return rows >= 2 * _numpy.SAMPLE_ROWS and n <= _numpy.CHUNK_ELEMS


def _last_extreme_entry(x, kind, index_dtype, result_shape):
    """argmin/argmax with tie "last" along the last axis of a large C-contiguous input (a
    view), where :func:`_row_tails_serve`; else None."""
    n = x.shape[-1]
    if not _row_tails_serve(x.size // n, n):
        return None
    index_dtype = np.dtype(index_dtype)

    def entry(x, workspace):
        r = _numpy.last_extreme_rows(x.reshape(-1, n), kind)
        return r.astype(index_dtype, copy=False).reshape(result_shape)
    return entry


def cpu_hardmax_entry(x, axes, *, tie):
    """np.argmax then np.put_along_axis over one axis, or over all of them, for a small
    input; the rows' extremes scattered into zeros over the last axis of a large C-contiguous
    one; or None."""
    if x.size == 0 or not axes or not _numpy_semantics(x.dtype):
        return None
    if x.size > CPU_SMALL:
        if axes == (x.ndim - 1,) and x.flags.c_contiguous:
            return _rows_hardmax_entry(x, tie)
        return None
    ndim = x.ndim
    last = tie == "last"
    shape, dtype = x.shape, x.dtype
    if len(axes) == ndim:
        n = x.size

        def entry(x, workspace):
            i = n - 1 - np.argmax(x.reshape(-1)[::-1]) if last else np.argmax(x)
            out = np.zeros(shape, dtype)
            out.reshape(-1)[i] = 1
            return out
        return entry
    if len(axes) != 1:
        return None
    (a,) = axes
    n = x.shape[a]
    flip = tuple(slice(None, None, -1) if i == a else slice(None) for i in range(ndim))

    def entry(x, workspace):
        if last:
            i = n - 1 - np.argmax(x[flip], axis=a, keepdims=True)
        else:
            i = np.argmax(x, axis=a, keepdims=True)
        out = np.zeros(shape, dtype)
        np.put_along_axis(out, i, 1, axis=a)
        return out
    return entry


def _rows_hardmax_entry(x, tie):
    """hardmax over the last axis of a large C-contiguous input, as rows: NumPy's argmax reads
    them in place (tie "last": last_extreme_rows where :func:`_row_tails_serve`, else None);
    the ones go into np.zeros (calloc: faster than np.zeros_like's fill) by one row-wise
    scatter (put_along_axis builds its index arrays in Python)."""
    shape, dtype = x.shape, x.dtype
    n = shape[-1]
    rows = x.size // n
    if tie == "last":
        if not _row_tails_serve(rows, n):
            return None

        def extremes(x2):
            return _numpy.last_extreme_rows(x2, "max")
    else:
        extremes = functools.partial(_ARG[("max", False)], axis=1)

    def entry(x, workspace):
        i = extremes(x.reshape(rows, n))
        out = np.zeros(shape, dtype)
        out.reshape(rows, n)[np.arange(rows), i] = 1
        return out
    return entry
