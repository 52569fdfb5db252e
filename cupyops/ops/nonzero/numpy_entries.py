"""The NumPy path's entries for count_nonzero, argwhere, nonzero and nonzero_coordinates: what
cupyops._call runs for a layout it has seen, every argument rule checked once.

* **Small C-contiguous inputs** (at most CPU_SMALL elements): NumPy's own ``x.nonzero()``,
  whose coordinates already sit in one (count, ndim) array (the views' base, checked at
  import: see :data:`_NONZERO_BASE`); argwhere returns it, nonzero its transpose's rows.
* **Large C-contiguous inputs**: a chunk at a time (threaded over chunks), a bool mask (x != 0
  with SIMD: NumPy tests a float's nonzero one element at a time; float16 and bfloat16
  through their bits) whose flat nonzero indices NumPy finds fast; the coordinates come from
  the flat indices by division (shifts for powers of two), written straight into the result.
  ``nonzero_coordinates(size=k)``'s padding with 0 comes from ``np.zeros`` (calloc: the
  pages of the padding are never written).
* **Whole-array counts**: NumPy's count for bool and integers (SIMD), masks for floats and
  complex (cupyops.ops.nonzero.numpy_path.count_all), chunks among the threads when large.
* **Anything else**: the chunked paths of cupyops.ops.nonzero.numpy_path.

Every entry is ``functools.partial(runner, state)``: ``entry(x, workspace)``.
"""
from __future__ import annotations

import functools

import numpy as np

from cupyops.core import dtypes as _dtypes
from cupyops.core import threads as _threads
from cupyops.core.arrays import readable
from cupyops.core.placement import CPU_SMALL
from cupyops.ops.nonzero import numpy_path as _numpy

__all__ = ["cpu_count_entry", "cpu_argwhere_entry", "cpu_nonzero_entry",
           "cpu_coordinates_entry"]

CHUNK = 1 << 18            # elements per mask (a 256 KiB bool buffer)
_INTP = np.dtype(np.intp)
_I64 = np.dtype(np.int64)


def _probe_nonzero_base() -> bool:
    """Whether ``x.nonzero()`` of a 2-D and a 3-D array gives views of one C-contiguous
    (count, ndim) intp array (NumPy builds its result so); else the entries stack."""
    try:
        for x in (np.eye(3, dtype=bool), np.ones((2, 1, 3), np.int8)):
            r = x.nonzero()
            b = r[0].base
            if not (isinstance(b, np.ndarray) and b.shape == (len(r[0]), x.ndim)
                    and b.dtype == _INTP and b.flags.c_contiguous
                    and all(np.array_equal(b[:, i], r[i]) for i in range(x.ndim))):
                return False
        return True
    except Exception:  # pragma: no cover - another NumPy
        return False


_NONZERO_BASE = _probe_nonzero_base()


def _coordinate_matrix(x):
    """The (count, ndim) intp coordinates of the nonzeros of a small ``x`` (ndim >= 1)."""
    r = x.nonzero()
    if x.ndim == 1:
        return r[0].reshape(-1, 1)
    if _NONZERO_BASE:
        return r[0].base
    return np.stack(r, axis=1)  # pragma: no cover - another NumPy


# ------------------------------------------------------------------------------ masks

def _mask_of(dtype):
    """``mask(chunk, out)``: ``out`` (bool) set where a chunk of ``dtype`` is nonzero, or
    the chunk itself for bool (no mask needed)."""
    if dtype == np.bool_:
        return None
    if dtype == np.float16 or _dtypes.is_bf16(dtype):
        def mask(c, out, tmp):
            np.bitwise_and(c.view(np.uint16), 0x7FFF, out=tmp)   # -0.0 is zero, NaN is not
            return np.not_equal(tmp, 0, out=out)
        return mask
    return lambda c, out, tmp: np.not_equal(c, 0, out=out)


def _flat_indices(flat, dtype, s, e):
    """The flat indices of the nonzeros of flat[s:e] (intp, ascending)."""
    mask = _mask_of(dtype)
    out = []
    if mask is None:
        for c0 in range(s, e, CHUNK):
            i = flat[c0:min(e, c0 + CHUNK)].nonzero()[0]
            i += c0
            out.append(i)
    else:
        m = np.empty(min(CHUNK, e - s), np.bool_)
        tmp = np.empty(min(CHUNK, e - s), np.uint16) if dtype.itemsize == 2 else None
        for c0 in range(s, e, CHUNK):
            c = flat[c0:min(e, c0 + CHUNK)]
            i = mask(c, m[:c.size], None if tmp is None else tmp[:c.size]).nonzero()[0]
            i += c0
            out.append(i)
    return out[0] if len(out) == 1 else np.concatenate(out)


def _parts(n, itemsize):
    """(threads, [(start, stop)]) of a flat input of ``n`` elements: whole chunks."""
    threads = _threads.threads_for(n * itemsize)
    nch = -(-n // CHUNK)
    k = min(nch, 1 if threads == 1 else 4 * threads)
    bounds = [round(i * nch / k) * CHUNK for i in range(k + 1)]
    return threads, [(bounds[i], min(n, bounds[i + 1])) for i in range(k)]


def _all_indices(x):
    """(threads, [flat indices of each part's nonzeros]) of a C-contiguous ``x``."""
    flat = readable(x).reshape(-1)
    threads, parts = _parts(flat.size, x.itemsize)
    idx = _threads.run_parts(lambda p: _flat_indices(flat, x.dtype, *p), parts, threads)
    return threads, idx


def _write_coordinates(shape, flat, cols):
    """Split the flat indices ``flat`` into coordinates over ``shape``: ``cols[d]`` (1-D,
    any stride) receives those of axis d."""
    rem = flat
    for d in range(len(shape) - 1, 0, -1):
        n = shape[d]
        if (n & (n - 1)) == 0:                 # a power of two: shift and mask
            b = n.bit_length() - 1
            np.bitwise_and(rem, n - 1, out=cols[d], casting="unsafe")
            rem = np.right_shift(rem, b)
        else:
            q = np.empty(rem.shape, np.intp)
            np.divmod(rem, n, out=(q, cols[d]), casting="unsafe")
            rem = q
    np.copyto(cols[0], rem, casting="unsafe")


def _coordinates_into(shape, threads, idx, out, rows_layout):
    """Write every part's coordinates: ``out`` is (count, ndim) (``rows_layout`` False) or
    (ndim, count) (True), at least as long as needed; parts past its end are cut."""
    limit = out.shape[1] if rows_layout else out.shape[0]
    offs = np.cumsum([0] + [len(i) for i in idx]).tolist()
    jobs = [(i, o) for i, o in zip(idx, offs) if o < limit and len(i)]

    def write(job):
        flat, o = job
        flat = flat[:limit - o]
        part = out[:, o:o + len(flat)] if rows_layout else out[o:o + len(flat)]
        cols = [part[d] for d in range(len(shape))] if rows_layout else \
            [part[:, d] for d in range(len(shape))]
        _write_coordinates(shape, flat, cols)
    _threads.run_parts(write, jobs, threads)
    return offs[-1]


# ------------------------------------------------------------------------------ entries

def _nonzero_ok(x) -> bool:
    return (x.dtype.kind in "biufcV" and x.dtype.isnative and x.ndim >= 1 and x.size > 0
            and x.flags.c_contiguous and x.flags.aligned
            and (x.dtype.kind != "V" or _dtypes.is_bf16(x.dtype)))


def _small_ok(x) -> bool:
    return x.size <= CPU_SMALL and x.dtype.kind in "biufc"


def _argwhere_small(state, x, workspace):
    dt = state
    a = _coordinate_matrix(x)
    return a if dt is None else a.astype(dt)


def _argwhere_large(state, x, workspace):
    shape, dt = state
    threads, idx = _all_indices(x)
    out = np.empty((sum(len(i) for i in idx), len(shape)), dt)
    _coordinates_into(shape, threads, idx, out, False)
    return out


def cpu_argwhere_entry(x, index_dtype):
    """(count, ndim) coordinates, C-contiguous, for C-contiguous inputs (memory: the output
    and one flat index array)."""
    if not _nonzero_ok(x):
        return None
    dt = np.dtype(index_dtype)
    if _small_ok(x):
        return functools.partial(_argwhere_small, None if dt == _INTP else dt)
    return functools.partial(_argwhere_large, (x.shape, dt))


def _nonzero_small(state, x, workspace):
    if x.ndim == 1:
        return x.nonzero()
    return tuple(_coordinate_matrix(x).T.copy())


def _nonzero_large(state, x, workspace):
    shape = state
    threads, idx = _all_indices(x)
    out = np.empty((len(shape), sum(len(i) for i in idx)), _I64)
    _coordinates_into(shape, threads, idx, out, True)
    return tuple(out)


def cpu_nonzero_entry(x):
    """A tuple of ndim contiguous int64 arrays."""
    if not _nonzero_ok(x):
        return None
    if _small_ok(x):
        return functools.partial(_nonzero_small, None)
    return functools.partial(_nonzero_large, x.shape)


def _coordinates_run(state, x, workspace):
    shape, size, fill, dt, small = state
    if size is None:
        a = _argwhere_small(None if dt == _INTP else dt, x, None) if small else \
            _argwhere_large((shape, dt), x, None)
        return a, np.array(len(a), _I64)
    coords = np.zeros((size, len(shape)), dt) if fill == 0 else \
        np.full((size, len(shape)), fill, dt)
    if small:
        a = _coordinate_matrix(x)
        n = len(a)
        m = min(n, size)
        coords[:m] = a[:m]
    else:
        threads, idx = _all_indices(x)
        n = _coordinates_into(shape, threads, idx, coords, False)
    return coords, np.array(n, _I64)


def cpu_coordinates_entry(x, size, fill_value, index_dtype):
    if not _nonzero_ok(x):
        return None
    dt = np.dtype(index_dtype)
    return functools.partial(_coordinates_run, (x.shape, size, fill_value, dt, _small_ok(x)))


# ------------------------------------------------------------------------------ counts

def _count_part(flat, dtype, s, e):
    mask = _mask_of(dtype)
    if mask is None or dtype.kind in "iu":
        return int(np.count_nonzero(flat[s:e]))
    if dtype.kind in "fc" and dtype.itemsize >= 4:
        return _numpy.count_all(flat[s:e])
    total = 0
    m = np.empty(min(CHUNK, e - s), np.bool_)
    tmp = np.empty(min(CHUNK, e - s), np.uint16)
    for c0 in range(s, e, CHUNK):
        c = flat[c0:min(e, c0 + CHUNK)]
        total += int(np.count_nonzero(mask(c, m[:c.size], tmp[:c.size])))
    return total


def _count_all_run(state, x, workspace):
    shape, small = state
    if small:
        c = np.array(np.count_nonzero(x), _I64)
        return c if shape is None else c.reshape(shape)
    flat = readable(x).reshape(-1)
    threads, parts = _parts(flat.size, x.itemsize)
    counts = _threads.run_parts(lambda p: _count_part(flat, x.dtype, *p), parts, threads)
    c = np.array(sum(counts), _I64)
    return c if shape is None else c.reshape(shape)


def _count_axes_run(state, x, workspace):
    ax, shape = state
    # C order, as the engine's result (np.count_nonzero follows x's layout)
    return np.count_nonzero(x, axis=ax).astype(np.int64, order="C").reshape(shape)


def _count_engine_run(state, x, workspace):
    axes, shape = state
    return _numpy.count_nonzero(x, axes).reshape(shape)


def cpu_count_entry(x, axes, *, result_shape):
    """Whole-array counts of any size (bounded memory, threads over chunks of a
    C-contiguous input); counts over some axes: NumPy's for small inputs, the chunked engine
    for large ones."""
    dt = x.dtype
    if dt.kind not in "biufcmMV" or not dt.isnative or not axes or x.size == 0:
        return None
    if dt.kind == "V" and not _dtypes.is_bf16(dt):
        return None
    if len(axes) == x.ndim:
        if dt.kind in "mM" or not (x.flags.c_contiguous and x.flags.aligned):
            return functools.partial(_count_engine_run, (tuple(axes), result_shape))
        small = x.size <= CPU_SMALL and dt.kind != "V" or (
            dt.kind in "biu" and x.nbytes < _threads.MIN_BYTES)
        return functools.partial(_count_all_run, (result_shape or None, small))
    if x.size > CPU_SMALL or dt.kind in "mMV":
        return functools.partial(_count_engine_run, (tuple(axes), result_shape))
    return functools.partial(_count_axes_run, (tuple(axes), result_shape))
