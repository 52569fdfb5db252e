"""NumPy path of the nonzero family: count_nonzero, argwhere, nonzero, nonzero_coordinates.

The input is walked in row-major chunks of at most ``CHUNK_ELEMENTS`` elements, read through
its own strides, so extra memory stays at the output plus one chunk's temporaries whatever the
input's layout (``np.argwhere`` on a strided view would build a full mask first).
"""
from __future__ import annotations

import math

import numpy as np

CHUNK_ELEMENTS = 1 << 20  # tests monkeypatch this small to exercise the chunk seams


def row_major_chunks(shape, max_elements):
    """Yield index tuples (ints, then one slice, then nothing) that cover an array of ``shape``
    in ascending row-major order, each selecting at most ``max_elements`` elements (or one
    element row of the innermost axis when that alone is longer)."""
    ndim = len(shape)
    if ndim == 0 or math.prod(shape) == 0:
        return
    # the first axis k whose trailing block fits: chunk along axis k-1 ... or slice the last axis
    trailing = 1
    k = ndim
    while k > 0 and trailing * shape[k - 1] <= max_elements:
        trailing *= shape[k - 1]
        k -= 1
    if k == 0:
        yield (slice(0, shape[0]),) if ndim else ()
        return
    split = k - 1                      # slice this axis, iterate every axis before it
    step = max(1, max_elements // trailing)
    for prefix in np.ndindex(*shape[:split]):
        for start in range(0, shape[split], step):
            yield tuple(prefix) + (slice(start, min(start + step, shape[split])),)


#: a whole contiguous float (4 bytes or more) or complex array of at least this many elements is
#: counted through a mask (count_all)
MASK_COUNT_MIN = 1 << 14
MASK_COUNT_CHUNK = 1 << 18        # elements per mask: a 256 KiB bool buffer


def count_all(x) -> int:
    """``np.count_nonzero(x)`` (the whole array). NumPy counts floats and complex one element
    at a time through their dtype's nonzero function (4 to 5 times slower than comparing them
    with SIMD and counting the bool mask); a large contiguous float32/64 or complex array is
    therefore compared with 0 (NaN is nonzero, -0.0 is zero) into a bounded mask, a chunk at a
    time, and the masks counted. (float16 compares no faster; other layouts keep NumPy's count,
    which reads them in place.)"""
    dt = x.dtype
    if (x.size < MASK_COUNT_MIN or not (dt.kind == "c" or dt.kind == "f" and dt.itemsize >= 4)
            or not (x.flags.c_contiguous or x.flags.f_contiguous)):
        return np.count_nonzero(x)
    flat = x.ravel(order="K")                      # a view: x is contiguous
    n = flat.size
    mask = np.empty(min(n, MASK_COUNT_CHUNK), np.bool_)
    total = 0
    for start in range(0, n, mask.size):
        part = flat[start:start + mask.size]
        m = mask[:part.size]
        np.not_equal(part, 0, out=m)
        total += np.count_nonzero(m)
    return total


def count_nonzero(x, axes):
    """int64 counts of x != 0 over ``axes`` (sorted, non-empty), shape of the kept axes."""
    if len(axes) == x.ndim:
        # a whole array is counted with bounded memory (NumPy's count of any layout needs no
        # mask; count_all's masks are chunks); only NumPy's axis= form builds a full boolean
        # copy, which the chunks below avoid
        return np.asarray(count_all(x), dtype=np.int64)
    kept = [i for i in range(x.ndim) if i not in axes]
    out = np.zeros([x.shape[i] for i in kept], np.int64)
    for idx in row_major_chunks(x.shape, CHUNK_ELEMENTS):
        chunk = x[idx]
        split = len(idx) - 1           # the axis idx slices; earlier ones are fixed ints
        # axes of `chunk` are x's axes split.. ndim-1; reduce the reduced ones among them
        chunk_axes = tuple(a - split for a in axes if a >= split)
        if len(chunk_axes) == chunk.ndim:
            part = count_all(chunk)              # the whole chunk
        elif chunk_axes:
            part = count_along(chunk, chunk_axes)
        else:
            part = chunk != 0
        where = []
        for i in kept:
            if i < split:
                where.append(idx[i])
            elif i == split:
                where.append(idx[i])
            else:
                where.append(slice(None))
        out[tuple(where)] += part
    return out


def count_along(x, axes):
    """``np.count_nonzero(x, axis=axes)`` (``axes``: some of x's axes, not all). NumPy sums
    its boolean mask in intp; the mask's bytes summed in uint16 (uint32) are exact up to
    65,535 (2**32 - 1) elements per count and three to four times faster. Other dtypes than
    bool, integers, floats and complex keep NumPy's own count."""
    if x.dtype.kind not in "biufc":
        return np.count_nonzero(x, axis=axes)
    n = 1
    for a in axes:
        n *= x.shape[a]
    acc = np.uint16 if n <= 0xFFFF else np.uint32 if n <= 0xFFFFFFFF else np.int64
    return np.add.reduce((x != 0).view(np.uint8), axis=axes, dtype=acc)


def _chunk_coordinates(x, idx, index_dtype):
    """Coordinates (n, ndim) of the nonzeros of x[idx], in row-major order."""
    chunk = x[idx]
    local = np.nonzero(chunk)            # one array per axis of chunk, row-major order
    n = local[0].shape[0] if local else 0
    coords = np.empty((n, x.ndim), index_dtype)
    split = len(idx) - 1
    for axis in range(x.ndim):
        if axis < split:
            coords[:, axis] = idx[axis]
        elif axis == split:
            coords[:, axis] = local[0] + idx[axis].start
        else:
            coords[:, axis] = local[axis - split]
    return coords


def _count_total(x):
    total = 0
    for idx in row_major_chunks(x.shape, CHUNK_ELEMENTS):
        total += int(np.count_nonzero(x[idx]))
    return total


def _fill_coordinates(x, dest, index_dtype):
    """Write the first dest.shape[0] coordinates into dest; return the total count."""
    filled = 0
    total = 0
    limit = dest.shape[0]
    for idx in row_major_chunks(x.shape, CHUNK_ELEMENTS):
        if filled < limit:
            coords = _chunk_coordinates(x, idx, index_dtype)
            take = min(coords.shape[0], limit - filled)
            dest[filled:filled + take] = coords[:take]
            filled += take
            total += coords.shape[0]
        else:
            total += int(np.count_nonzero(x[idx]))
    return total


def argwhere(x, index_dtype):
    coords = np.empty((_count_total(x), x.ndim), index_dtype)
    _fill_coordinates(x, coords, index_dtype)
    return coords


def nonzero(x, index_dtype):
    """Tuple of contiguous 1-D arrays: rows of one (ndim, count) array, filled chunk by chunk."""
    count = _count_total(x)
    rows = np.empty((x.ndim, count), index_dtype)
    filled = 0
    for idx in row_major_chunks(x.shape, CHUNK_ELEMENTS):
        coords = _chunk_coordinates(x, idx, index_dtype)
        n = coords.shape[0]
        rows[:, filled:filled + n] = coords.T
        filled += n
    return tuple(rows[i] for i in range(x.ndim))


def nonzero_coordinates(x, size, fill_value, index_dtype):
    if size is None:
        coords = argwhere(x, index_dtype)
        return coords, np.asarray(coords.shape[0], dtype=np.int64)
    coords = np.full((size, x.ndim), fill_value, index_dtype)
    total = _fill_coordinates(x, coords, index_dtype)
    return coords, np.asarray(total, dtype=np.int64)
