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
import inspect
import operator

import numpy as np

from cupyops.core import dtypes as _dtypes
from cupyops.core import threads as _threads
from cupyops.core.arrays import readable
from cupyops.ops.nonzero import numpy_path as _numpy

#: NumPy's own compositions serve inputs of at most this many elements where they would
#: copy (larger ones keep the chunked routines, whose extra memory is bounded)
CPU_SMALL = 4096

__all__ = ["cpu_count_entry", "cpu_argwhere_entry", "cpu_nonzero_entry",
           "cpu_coordinates_entry"]

CHUNK = 1 << 18            # elements per mask (a 256 KiB bool buffer)
WRITE_CHUNK_MIN = 1 << 14  # least elements per chunk of the coordinate pass
MASK_MIN = 256             # smaller inputs: NumPy's nonzero of the input itself (no mask)
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
    """The (count, ndim) intp coordinates of the nonzeros of a small ``x`` (ndim >= 1):
    NumPy's nonzero of its mask above MASK_MIN elements (NumPy tests a float's nonzero one
    element at a time, a mask it reads with SIMD)."""
    if x.dtype != np.bool_ and x.size > MASK_MIN:
        x = _coordinate_mask(x)
    r = x.nonzero()
    if x.ndim == 1:
        return r[0].reshape(-1, 1)
    if _NONZERO_BASE:
        return r[0].base
    return np.stack(r, axis=1)  # pragma: no cover - another NumPy


# ------------------------------------------------------------------------------ masks

def _bits16_mask(c):
    return (c.view(np.uint16) & 0x7FFF) != 0          # -0.0 is zero, NaN is not


def _mask_bits16(c, out, tmp):
    np.bitwise_and(c.view(np.uint16), 0x7FFF, out=tmp)       # -0.0 is zero, NaN is not
    return np.not_equal(tmp, 0, out=out)


def _mask_ne(c, out, tmp):
    return np.not_equal(c, 0, out=out)


def _mask_of(dtype):
    """``mask(chunk, out, tmp)``: ``out`` (bool) set where a chunk of ``dtype`` is nonzero
    (``tmp``: uint16 scratch for 16-bit floats); None for bool (the chunk is the mask)."""
    if dtype == np.bool_:
        return None
    if dtype == np.float16 or _dtypes.is_bf16(dtype):
        return _mask_bits16
    return _mask_ne


class _Masks:
    """Per-thread buffers: the bool mask of a chunk (``of``), a chunk at a time."""

    __slots__ = ("mask", "m", "tmp")

    def __init__(self, dtype, size):
        self.mask = _mask_of(dtype)
        self.m = None if self.mask is None else np.empty(size, np.bool_)
        self.tmp = np.empty(size, np.uint16) if self.mask is _mask_bits16 else None

    def of(self, c):
        if self.mask is None:
            return c
        n = c.size
        return self.mask(c, self.m[:n], None if self.tmp is None else self.tmp[:n])


def _count_range(flat, dtype, s, e):
    """Nonzeros in flat[s:e]."""
    if dtype.kind in "biu":
        return int(np.count_nonzero(flat[s:e]))
    masks = _Masks(dtype, min(CHUNK, e - s))
    return sum(int(np.count_nonzero(masks.of(flat[c0:min(e, c0 + CHUNK)])))
               for c0 in range(s, e, CHUNK))


def _write_range(flat, dtype, s, e, shape, out, o, rows_layout, chunk):
    """The coordinates of the nonzeros of flat[s:e] into ``out`` from row (column, with
    ``rows_layout``) ``o`` on, ``chunk`` elements at a time, up to out's end."""
    limit = out.shape[1] if rows_layout else out.shape[0]
    masks = _Masks(dtype, min(chunk, e - s))
    for c0 in range(s, e, chunk):
        if o >= limit:
            return
        flat_idx = masks.of(flat[c0:min(e, c0 + chunk)]).nonzero()[0][:limit - o]
        flat_idx += c0
        k = len(flat_idx)
        part = out[:, o:o + k] if rows_layout else out[o:o + k]
        cols = [part[d] for d in range(len(shape))] if rows_layout else \
            [part[:, d] for d in range(len(shape))]
        _write_coordinates(shape, flat_idx, cols)
        o += k


def _parts(n, itemsize):
    """(threads, [(start, stop)]) of a flat input of ``n`` elements: whole chunks."""
    threads = _threads.threads_for(n * itemsize)
    nch = -(-n // CHUNK)
    return threads, [(s * CHUNK, min(n, e * CHUNK))
                     for s, e in _threads.split(nch, threads, n * itemsize)]


class _Coordinates:
    """The two passes over a C-contiguous input: the count of each part, then (once the
    result exists) every part's coordinates at its offset. Extra memory: a few chunks."""

    def __init__(self, x):
        self.flat = readable(x).reshape(-1)
        self.dtype, self.shape = x.dtype, x.shape
        self.threads, self.parts = _parts(self.flat.size, x.itemsize)
        counts = _threads.run_parts(lambda p: _count_range(self.flat, self.dtype, *p),
                                    self.parts, self.threads)
        self.offsets = np.cumsum([0] + counts).tolist()
        self.count = self.offsets[-1]

    def write(self, out, rows_layout=False):
        """Fill ``out`` ((count, ndim), or (ndim, count) with ``rows_layout``; shorter is
        cut, longer keeps its tail)."""
        jobs = [(p, o) for p, o in zip(self.parts, self.offsets)]
        # a chunk's flat indices and their quotients (8 bytes each, dense at worst) stay
        # under an eighth of the input over all threads
        chunk = self.flat.nbytes // (8 * 24 * self.threads)
        chunk = max(WRITE_CHUNK_MIN, min(CHUNK, chunk - chunk % 4096))
        _threads.run_parts(
            lambda j: _write_range(self.flat, self.dtype, *j[0], self.shape, out, j[1],
                                   rows_layout, chunk), jobs, self.threads)
        return out


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
    c = _Coordinates(x)
    return c.write(np.empty((c.count, len(shape)), dt))


def cpu_argwhere_entry(x, index_dtype):
    """(count, ndim) coordinates, C-contiguous, for C-contiguous inputs (memory: the output
    and one flat index array)."""
    if not _nonzero_ok(x):
        return None
    dt = np.dtype(index_dtype)
    if _small_ok(x):
        return functools.partial(_argwhere_small, None if dt == _INTP else dt)
    return _threads.measured(functools.partial(_argwhere_large, (x.shape, dt)), x.nbytes)


def _nonzero_small(rows, x, workspace):
    if x.dtype != np.bool_ and x.size > MASK_MIN:
        x = _coordinate_mask(x)
    r = x.nonzero()
    if rows is None:                  # 1-D: one contiguous array
        return r
    # NumPy's rows are strided views of one (count, ndim) matrix: its transpose, copied,
    # split by an itemgetter (tuple() of an array iterates it, 0.8 µs)
    return rows((r[0].base if _NONZERO_BASE else np.stack(r, axis=1)).T.copy())


def _coordinate_mask(x):
    return _bits16_mask(x) if x.dtype == np.float16 else x != 0


def _nonzero_large(state, x, workspace):
    shape = state
    c = _Coordinates(x)
    out = c.write(np.empty((len(shape), c.count), _I64), rows_layout=True)
    return tuple(out[i] for i in range(len(shape)))


def cpu_nonzero_entry(x):
    """A tuple of ndim contiguous int64 arrays."""
    if not _nonzero_ok(x):
        return None
    if _small_ok(x):
        rows = None if x.ndim == 1 else operator.itemgetter(*range(x.ndim))
        return functools.partial(_nonzero_small, rows)
    return _threads.measured(functools.partial(_nonzero_large, x.shape), x.nbytes)


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
        c = _Coordinates(x)
        c.write(coords)
        n = c.count
    return coords, np.array(n, _I64)


def cpu_coordinates_entry(x, size, fill_value, index_dtype):
    if not _nonzero_ok(x):
        return None
    dt = np.dtype(index_dtype)
    small = _small_ok(x)
    return _threads.measured(functools.partial(_coordinates_run, (x.shape, size, fill_value, dt,
                                                                  small)), 0 if small else x.nbytes)


# ------------------------------------------------------------------------------ counts

def _count_part(flat, dtype, s, e):
    if dtype.kind in "fc" and dtype.itemsize >= 4:
        return _numpy.count_all(flat[s:e])
    return _count_range(flat, dtype, s, e)


def _count_all_run(state, x, workspace):
    shape, simple, work = state
    threads = _threads.threads_for(work) if work >= _threads.MIN_BYTES else 1
    if threads == 1 and simple:
        c = _int64_array(_count_nonzero(x))
        return c if shape is None else c.reshape(shape)
    flat = readable(x).reshape(-1)
    if threads == 1:
        c = _int64_array(_count_part(flat, x.dtype, 0, flat.size))
    else:
        nch = -(-flat.size // CHUNK)
        parts = [(s * CHUNK, min(flat.size, e * CHUNK))
                 for s, e in _threads.split(nch, threads, work)]
        counts = _threads.run_parts(lambda p: _count_part(flat, x.dtype, *p), parts, threads)
        c = _int64_array(sum(counts))
    return c if shape is None else c.reshape(shape)


def _count_simple_run(shape, x, workspace):
    c = _int64_array(_count_nonzero(x))
    return c if shape is None else c.reshape(shape)


# a 0-d int64 array of a Python int: np.array(c) where the default integer is int64
# (0.06 µs less than naming the dtype)
_int64_array = np.array if np.array(0).dtype == _I64 else (lambda c: np.array(c, _I64))


def _unwrapped_count():
    """np.count_nonzero without its ``__array_function__`` dispatch (``inspect.unwrap``;
    0.14 µs less a call, for NumPy arrays only), where it counts as np.count_nonzero."""
    f = inspect.unwrap(np.count_nonzero)
    try:
        probe = np.array([[0, 1, 2], [0, 0, 3]])
        if f(probe) == 3 and f(probe.astype(bool)) == 3:
            return f
    except Exception:  # pragma: no cover - another NumPy
        pass
    return np.count_nonzero  # pragma: no cover


_count_nonzero = _unwrapped_count()


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
        # (NumPy counts bool and small integers with SIMD; floats of a small input too; it
        # counts 1- and 2-byte integers as fast per element as 4-byte ones: less work a byte)
        simple = dt.kind in "biu" or x.size <= CPU_SMALL and dt.kind != "V"
        work = x.nbytes * min(4, dt.itemsize) // 4 if simple else x.nbytes
        if simple and work < _threads.MIN_BYTES:      # NumPy's count, never threaded
            return functools.partial(_count_simple_run, result_shape or None)
        return _threads.measured(
            functools.partial(_count_all_run, (result_shape or None, simple, work)), work)
    if x.size > CPU_SMALL or dt.kind in "mMV":
        return functools.partial(_count_engine_run, (tuple(axes), result_shape))
    return functools.partial(_count_axes_run, (tuple(axes), result_shape))
