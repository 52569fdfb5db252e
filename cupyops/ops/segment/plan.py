"""The planner of the segment kernels (kernels/segment.cu): from x's layout, S and the offsets'
layout, everything a launch needs that the host can know without reading the offsets.

* x is ``(n, *rest)``: its rows are read at their byte stride (any sign), and the trailing
  positions (R = prod(rest), in row-major order) through their own byte strides: ``rest``, the
  trailing dimensions innermost first, size-1 ones dropped and neighbours merged where x's
  memory is contiguous across them (their logical order is kept: the outputs are row-major).
  More than :data:`~cupyops.ops.segment.params.MAX_DIMS` after merging is a ``ValueError``.
* A block covers ``CW = 2**cw_log2`` consecutive trailing positions (the least power of two
  >= R, at most 256; ``ny`` = ceil(R / CW) strips on grid.y) with ``256 / CW`` partitions of
  CW threads.
* ``nblocks`` blocks share the merge path of rows and segment ends (at most n + S items): about
  :data:`BLOCK_BYTES` of x a block, at most :data:`MAX_CHAINS` blocks in all (the chain tickets
  the zeroed words hold) and no more than items.
* ``flat``: contiguous R = 1 x (row stride == itemsize, aligned to its values) of a real value
  type of 1 to 8 bytes (``family.FLAT_DTYPES``) with 32-bit indexing runs the flat fast path
  (segment_reduce_flat and segment_reduce_flat_values of kernels/segment_flat.cu); every other
  layout the merge-path kernel segment_reduce(_values). ``cols``: contiguous rows (row stride
  R x itemsize) of R = ``family.FLAT_COLS_MIN`` .. 256 float32 / int32 / uint32 values
  (``family.FLAT_COLS_DTYPES``) run the flat path of rows (segment_reduce_flat_cols, and
  segment_reduce_flat_cols_values for the values forms: one strip of CW columns;
  ``staged`` where rows are off 32-byte boundaries, for CW < 32 and for the values forms);
  ``strips``: rows wider than 256 of those dtypes on 32-byte boundaries, index mode, run its
  straight walk in strips of 256 columns on grid.y (segment_reduce_flat_strips). The flat path
  keeps the same merge-path block split, scratch and state words, with larger blocks
  (:data:`FLAT_BLOCK_BYTES`).
* 32-bit internal indexing where rows, segments, merge positions and x's byte offsets stay
  below 2**31 (``force_64bit`` for tests).
"""
from __future__ import annotations

import os

import math
import typing

import numpy as np

from cupyops.core import layout as _layout
from cupyops.ops.segment import family as _family
from cupyops.ops.segment.params import MAX_DIMS

__all__ = ["SegPlan", "plan_for", "BLOCK_BYTES", "FLAT_BLOCK_BYTES", "MAX_CHAINS", "CHUNK"]

#: bytes of x a block reads, about (the merge path's share)
BLOCK_BYTES = 32 * 1024
#: a block's share is at least this many times the bytes of its chain partials (two of CW
#: columns, each written once and read once): at most about 3 % more traffic for them
PARTIAL_SHARE = 32


def partials_floor(width: int, itemsize: int, index_size: int) -> int:
    """The least bytes of x a block of a strip of ``width`` columns reads so that its chain
    partials (a key of max(4, itemsize) bytes and an index per column, each written and read
    twice) cost at most 1 / PARTIAL_SHARE of the traffic (review 1, F5: 25 % at CW = 256)."""
    return PARTIAL_SHARE * 4 * width * (max(4, itemsize) + index_size)


def block_bytes(width: int, itemsize: int, index_size: int) -> int:
    """The bytes of x a block of the merge path reads: BLOCK_BYTES, or more for wide strips
    (partials_floor)."""
    return max(BLOCK_BYTES, partials_floor(width, itemsize, index_size))


#: whether the flat fast path is planned at all: ``CUPYOPS_SEGMENT_FLAT=0`` (read at import)
#: plans every call on the merge-path kernel (the way back if the flat path misbehaves on a
#: GPU, and the other side of a comparison)
FLAT = os.environ.get("CUPYOPS_SEGMENT_FLAT", "1").strip() != "0"
#: bytes of x a block of the flat path reads, about: 8 of its tiles of 4,096 rows (its first and
#: last tiles, partial, take the slower masked loads)
FLAT_BLOCK_BYTES = 128 * 1024
#: blocks of a launch (nblocks x ny), each a chain ticket in the state words (launch.py)
MAX_CHAINS = 4092
#: the window's first load (ends)
CHUNK = 32
_I32_LIMIT = 2**31 - 2


class SegPlan(typing.NamedTuple):
    """One launch of the segment kernel (see the module docstring)."""

    n: int
    nseg: int
    ncols: int
    itemsize: int
    row_stride: int          # bytes
    rest: tuple              # ((size, byte stride), ...) innermost first
    off_stride: int          # elements
    off_width: int
    off_signed: bool
    nblocks: int
    ny: int
    cw_log2: int
    wcap: int
    chunk: int
    narrow: bool
    use_64bit: bool
    values: bool
    shared_mem: int
    flat: bool = False       # the flat fast path (segment_reduce_flat)
    cols: bool = False       # the flat path of rows (segment_reduce_flat_cols)
    staged: bool = False     # ... its rows not on 32-byte boundaries: staged in shared memory
    strips: bool = False     # ... rows wider than 256: strips of 256 columns on grid.y

    @property
    def grid(self) -> tuple:
        return (self.nblocks, self.ny, 1)

    @property
    def block(self) -> tuple:
        return (_family.THREADS, 1, 1)


def trailing_dims(shape, strides) -> tuple:
    """x's trailing dimensions as ``((size, byte stride), ...)``, innermost first: size-1 ones
    dropped, neighbours merged where contiguous in memory (logical order kept)."""
    dims = _layout.drop_unit(_layout.dims_from(shape[1:], strides[1:]))
    out: list = []
    for d in dims:
        if out and d.strides[0] == out[-1][1] * out[-1][0]:
            out[-1] = (out[-1][0] * d.size, out[-1][1])
        else:
            out.append((d.size, d.strides[0]))
    if len(out) > MAX_DIMS:
        raise ValueError(f"x's trailing dimensions merge into {len(out)}, more than the "
                         f"{MAX_DIMS} the GPU kernels walk (no hidden copy is made): copy x to "
                         f"a contiguous layout first")
    return tuple(out)


def _span(shape, strides, itemsize) -> int:
    return sum((n - 1) * abs(s) for n, s in zip(shape, strides) if n > 0) + itemsize


def plan_for(shape, strides, dtype, data_ptr, nseg: int, offsets_dtype, offsets_stride: int,
             *, values: bool, force_64bit: bool = False) -> SegPlan:
    """The plan of x (``shape``, byte ``strides``, ``dtype``, non-empty) with ``nseg`` >= 1
    segments and offsets of ``offsets_dtype`` at element stride ``offsets_stride``."""
    dt, odt = np.dtype(dtype), np.dtype(offsets_dtype)
    n, isz = int(shape[0]), dt.itemsize
    rest = trailing_dims(shape, strides)
    ncols = math.prod(shape[1:])
    cw_log2 = min(8, max(0, (ncols - 1).bit_length()))
    ny = -(-ncols // (1 << cw_log2))
    use_64bit = bool(force_64bit) or n + nseg + 2 > _I32_LIMIT or \
        _span(shape, strides, isz) > _I32_LIMIT
    index_size = 8 if use_64bit else 4
    width = min(ncols, 1 << cw_log2)
    want = -(-(n + nseg) * width * isz // block_bytes(width, isz, index_size))
    nblocks = max(1, min(want, MAX_CHAINS // ny, n + nseg))
    narrow = dt.kind == "c" and (data_ptr % isz != 0 or any(
        s % isz for m, s in zip(shape, strides) if m > 1))
    wcap = _family.wcap_for(isz, index_size, values, cw_log2)
    # (a tile's end, r0 + 256 K rows, stays an int: 1-byte x below 2**31 rows could pass it;
    # review of 57d49a7, H1: the block's last tile never ended)
    flat = (FLAT and not use_64bit and ncols == 1 and
            dt in _family.FLAT_DTYPES and (n == 1 or int(strides[0]) == isz) and
            data_ptr % isz == 0 and n + 2 * _family.THREADS * _family.flat_rows(isz) <= _I32_LIMIT)
    cols = (FLAT and not use_64bit and
            _family.FLAT_COLS_MIN <= ncols <= 256 and dt in _family.FLAT_COLS_DTYPES and
            rest == ((ncols, isz),) and (n == 1 or int(strides[0]) == ncols * isz) and
            data_ptr % 4 == 0)
    # rows wider than 256, index mode, on 32-byte boundaries: the rows kernel's straight walk
    # in strips of 256 columns (grid.y), chains per strip
    strips = (FLAT and not use_64bit and not values and ncols > 256 and
              dt in _family.FLAT_COLS_DTYPES and rest == ((ncols, isz),) and
              (n == 1 or int(strides[0]) == ncols * isz) and data_ptr % 32 == 0 and
              ncols * isz % 32 == 0)
    cols = cols or strips
    if flat or cols:
        # (rows: each block's chain partials, two of CW columns, kept to 1 / PARTIAL_SHARE of
        # its share, as the merge path's)
        share = max(FLAT_BLOCK_BYTES, partials_floor(1 << cw_log2, isz, index_size)) if cols \
            else FLAT_BLOCK_BYTES
        want = -(-(n + nseg) * width * isz // share)
        nblocks = max(1, min(want, MAX_CHAINS // ny, n + nseg))
    # (rows on 32-byte boundaries are read straight into registers, whole sectors a warp;
    # others, and the values form, which reads its values there, staged through shared memory
    # from 128-byte boundaries; and CW < 32, whose warps hold several partitions: the staged
    # kernel alone has their prefix walk, so that the straight kernel's code is what it was)
    staged = cols and not strips and (values or cw_log2 < 5 or data_ptr % 32 != 0 or
                                      ncols * isz % 32 != 0)
    smem = _family.flat_shared_bytes(isz, index_size) if flat else \
        _family.flat_cols_shared_bytes(index_size, staged) if cols else \
        _family.shared_bytes(isz, index_size, values, cw_log2, wcap)
    return SegPlan(n, int(nseg), ncols, isz, int(strides[0]), rest, int(offsets_stride),
                   odt.itemsize, odt.kind == "i", nblocks, ny, cw_log2, wcap, CHUNK, narrow,
                   use_64bit, bool(values), smem, flat, cols, staged, strips)
