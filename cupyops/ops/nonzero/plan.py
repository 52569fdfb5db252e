"""Planning for the nonzero family's kernels (kernels/nonzero.cu). Pure Python, no GPU.

Two planners:

* :func:`plan_coordinates` for ``nonzero_tiles`` (argwhere, nonzero, nonzero_coordinates):
  tiles of ``NZ_BLOCK * items`` elements of the *logical* row-major order, 32- or 64-bit
  indexing, the reading dimensions (unit dims dropped, row-major neighbours merged, order kept),
  the coordinate divisors, and the launch grids of the three modes (SCAN + PLACE for the exact
  forms, FIXED for ``size=k``).
* :func:`plan_count` for ``count_nonzero_axes``: kept dims (merged, order kept), reduced dims
  normalised through :mod:`cupyops.core.layout` (sorted by stride, flipped, merged), a warp or a
  thread per output, and how the reduced range is split over chunks.

A plan's launch parameters are packed from it by cupyops.ops.nonzero.params (``memo`` keeps
them).
"""
from __future__ import annotations

import functools
import math
import typing

import numpy as np

from cupyops.core import layout as _layout

NZ_BLOCK = 256
NZ_WARPS = NZ_BLOCK // 32
MAX_DIMS = 8            # per side after merging (reading dims, non-unit coordinate dims, kept, reduced)
MAX_OUT_NDIM = 64       # columns of the coordinate output (a 64-bit unit mask)

MODE_SCAN, MODE_PLACE, MODE_FIXED, MODE_SEGMENTS = 0, 1, 2, 3
#: the SEGMENTS pass of the exact forms writes every row: its k
K_ALL = 2**62
LAYOUT_ROWS, LAYOUT_COLS = 0, 1

_I32_MAX = 2**31 - 1

def items_per_thread(itemsize: int) -> int:
    """``nz_items<T>`` of the kernel."""
    return 16 if itemsize <= 4 else (8 if itemsize == 8 else 4)


def tile_elements(itemsize: int) -> int:
    return NZ_BLOCK * items_per_thread(itemsize)


def _byte_strides(x_strides, itemsize):
    return tuple(map(int, x_strides))


def narrow_loads(shape, strides, itemsize, base_address) -> bool:
    """Whether an 8- or 16-byte element (complex64: two floats, only 4-byte aligned;
    complex128: two doubles, 8-byte aligned) may sit at an address that is not a multiple of
    its size: the data pointer or a stride of a dim longer than 1 is not. Then the kernels
    read it as two 4- or 8-byte words; a misaligned 8- or 16-byte load would fault on a GPU.
    (Every other type is loaded at its own size, which the API guarantees to be aligned.)"""
    itemsize = int(itemsize)
    if itemsize not in (8, 16):
        return False
    if int(base_address) % itemsize:
        return True
    return any(int(s) % itemsize for n, s in zip(shape, strides) if int(n) > 1)


# ---------------------------------------------------------------------------------- coordinates

# The plans are named tuples whose last field, ``memo``, caches packed parameters: plans
# compare, hash and print on every other field, equal no other tuple and have no order (as
# the frozen dataclasses they were). (``_replace`` would share the memo: plans are never
# replaced, only planned.)
def _plan_eq(self, other):
    if type(other) is type(self):
        return self[:-1] == other[:-1]
    return False if isinstance(other, tuple) else NotImplemented


def _plan_ne(self, other):
    equal = _plan_eq(self, other)
    return equal if equal is NotImplemented else not equal


def _plan_no_order(self, other):
    if isinstance(other, tuple):      # (else tuple's own order would take a plan)
        raise TypeError(f"{type(self).__name__} plans have no order")
    return NotImplemented


def _plan_hash(self):
    return hash(self[:-1])


def _plan_repr(self):
    fields = ", ".join(f"{n}={v!r}" for n, v in zip(self._fields[:-1], self))
    return f"{type(self).__name__}({fields})"


class CoordinatePlan(typing.NamedTuple):
    """How ``nonzero_tiles`` runs over one input. (A named tuple built from every field by
    :data:`_new_coordinate_plan`: a first call of a new layout builds one in a tenth of a
    frozen dataclass's time.)"""

    case = "coordinates"      # (the plan case, as the selftest and the trace name it)

    shape: tuple
    strides: tuple            # bytes
    itemsize: int
    wide: bool                # 64-bit linear indices and offsets
    forced_64bit: bool
    items: int                # per thread
    tile: int                 # elements per tile
    num_tiles: int
    read_dims: tuple          # ((size, byte stride), ...) outermost first, merged, order kept
    coord_dims: tuple         # ((size, suffix), ...) of the non-unit dims, in order
    unit_mask: int
    index_bytes: int
    narrow_loads: bool        # 8-/16-byte elements read as two 4-/8-byte words (see narrow_loads())
    vec: bool                 # packed path: one contiguous run of a 1-/2-byte type (packed_run())
    head: int                 # packed path: elements between the 16-byte boundary below x and x
    tr: tuple                 # nonzero_tiles_t: (dim m, K, inner elements I, chunks along m a
                              # prefix index, vec, inner chunk width, inner chunks C); C > 1:
                              # tiles of one inner chunk (a first pass records, SEGMENTS writes)
    block: int
    # packed parameters already built for this plan (the hot path packs each set once): a
    # new dict per plan, left out of comparisons, hashes and the repr
    memo: dict

    __eq__, __ne__, __hash__, __repr__ = _plan_eq, _plan_ne, _plan_hash, _plan_repr
    __lt__ = __le__ = __gt__ = __ge__ = _plan_no_order

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def fill_rows(self) -> int:
        """Rows written by one fill tile (FIXED)."""
        return max(1, 16384 // max(self.ndim, 1))

    def fill_tiles(self, k: int) -> int:
        return -(-int(k) // self.fill_rows())

    @property
    def chunked(self) -> bool:
        """nonzero_tiles_t over inner chunks: SCAN records, SEGMENTS writes (every mode)."""
        return bool(self.tr) and self.tr[6] > 1

    def segments(self) -> int:
        """Tiles of the SEGMENTS pass: every row over the dims up to m, times the inner chunks."""
        m, c = self.tr[0], self.tr[6]
        return math.prod(n for n, _ in self.read_dims[:m + 1]) * c

    def grid(self, mode: int, k: int = 0) -> int:
        if mode == MODE_FIXED:
            return self.num_tiles + self.fill_tiles(k)
        if mode == MODE_SEGMENTS:
            return self.segments() + (self.fill_tiles(k) if k else 0)
        return self.num_tiles


def packed_run(dims, itemsize) -> bool:
    """Whether the packed kernels apply: a 1- or 2-byte type whose dims ``((size, byte stride),
    ...)`` (merged) are one run of consecutive elements. They then read aligned 16-byte words
    and test 4 or 2 elements per instruction (kernels/nonzero.cuh, nz_packed)."""
    return (int(itemsize) in (1, 2) and len(dims) == 1
            and (int(dims[0][1]) == int(itemsize) or int(dims[0][0]) == 1))


T_BITS = 131072         # NZ_T_BITS: elements per tile of nonzero_tiles_t, at most
T_TILES_GOAL = 512      # nonzero_tiles_t: tiles (blocks) wanted, about 4 per SM


def transposed_tiles(read, itemsize, base_address=0) -> tuple:
    """``(m, K, I, chunks, vec, Ic, C)`` when ``nonzero_tiles_t`` should read the input, else
    ``()``: the
    memory-innermost reading dim m (stride one element, either sign) is not the last one, so
    logical order would give each lane its own sector. A tile is K (a power of two) indices
    along m times the I elements of the dims after m, read in memory order: runs of
    K * itemsize bytes, at least one 32-byte sector or all of m (at most 128 bytes), with
    K * I <= T_BITS (the tile's shared mask). ``vec``: 2, a 1- or 2-byte type read as aligned
    4-byte words along m (stride +itemsize, runs of a sector or more, or all of m in 8 bytes
    or more: two words or more a column, so a unit is at most 16 loads; the data pointer and
    every other stride multiples of 4 bytes), 4 or 2 elements a load; 0, one element a load.

    Where K * I would not fit the mask with runs of a sector (an F-order input with a long
    inner extent), the tile is K indices along m times one chunk of ``Ic`` inner indices
    (``C`` chunks a row; :func:`inner_chunks`): such tiles are not ranges of the row-major
    order, so they only count and record their bits, and a second pass (MODE_SEGMENTS) writes
    the rows. ``Ic, C`` is ``I, 1`` otherwise."""
    itemsize = int(itemsize)
    if len(read) < 2:
        return ()
    m = min(range(len(read)), key=lambda i: (abs(read[i][1]), -i))
    if m == len(read) - 1 or abs(read[m][1]) != itemsize:
        return ()
    inner = math.prod(n for n, _ in read[m + 1:])
    nm = read[m][0]
    k = max(1, 128 // itemsize)
    while k > 1 and (k * inner > T_BITS or k >= 2 * nm):
        k //= 2
    ic, c = inner, 1
    # a run shorter than a sector is fine when it is all of m: no other tile reads its sectors
    if (k * itemsize < 32 and k < nm) or k * inner > T_BITS:
        chunks = inner_chunks(read, m, itemsize)
        if not chunks:
            return ()
        k, ic, c = chunks
    else:
        # few tiles (one block each) leave SMs idle: shorter runs where they still start on a
        # sector (the data pointer and the other strides multiples of 32 bytes; off a sector, a
        # 32-byte run is 2 requests a sector, 128 bytes 1.25)
        pre = math.prod(n for n, _ in read[:m])
        aligned = int(base_address) % 32 == 0 and all(
            s % 32 == 0 for i, (_, s) in enumerate(read) if i != m)
        # (tiles of 16384 elements or more: a small input's tiles would spend more requests
        # on the look-back's status words than on its data)
        while (aligned and k // 2 * itemsize >= 32 and k // 2 * inner >= 16384
               and pre * -(-nm // k) < T_TILES_GOAL):
            k //= 2
    # 4-byte words: 8 loads of 4 bytes in flight a thread, and a warp-wide load of 1-byte
    # elements spans 128 bytes, not one sector (a run off a sector boundary: 2 requests a sector)
    vec = 2 if (itemsize in (1, 2) and read[m][1] == itemsize
                and (k * itemsize >= 32 or (k >= nm and k * itemsize >= 8))
                and k * itemsize % 4 == 0 and int(base_address) % 4 == 0
                and all(s % 4 == 0 for i, (_, s) in enumerate(read) if i != m)) else 0
    return (m, k, inner, -(-nm // k), vec, ic, c)


def inner_chunks(read, m, itemsize):
    """``(K, Ic, C)`` of :func:`transposed_tiles`' chunked tiles, or None: runs along m of 128
    bytes (all of m when shorter), and the widest chunk of the inner indices whose K * Ic bits
    fit the mask, a multiple of 32 (whole mask words: a unit reads 32 inner indices) and of the
    extents of every inner dim but the outermost (so that a chunk's first index is a multiple of
    them, and its offset plus a unit's own is the offset of their sum: nz_t_locate)."""
    nm, inner = read[m][0], math.prod(n for n, _ in read[m + 1:])
    k = max(1, 128 // int(itemsize))
    while k > 1 and k >= 2 * nm:
        k //= 2
    lower = math.prod(n for n, _ in read[m + 2:])
    unit = 32 * lower // math.gcd(32, lower)
    ic = T_BITS // k // unit * unit
    if ic == 0 or (k * itemsize < 32 and k < nm) or inner > 2**31 - 1:
        return None
    return k, ic, -(-inner // ic)


def reading_dims(shape, strides) -> tuple:
    """Logical dims with unit dims dropped and row-major neighbours merged, order kept:
    ``((size, byte stride), ...)`` outermost first (at least one dim)."""
    dims = _layout.dims_from(shape, strides)          # innermost first
    dims = _layout.merge(_layout.drop_unit(dims))
    if not dims:
        return ((1, 0),)
    return tuple((d.size, d.strides[0]) for d in reversed(dims))


def plan_coordinates(shape, strides, itemsize, index_dtype, *, force_64bit=False,
                     base_address=0) -> CoordinatePlan:
    """Plan ``nonzero_tiles`` for an input of ``shape`` / byte ``strides`` (size > 0, ndim >= 1)
    whose data pointer is ``base_address`` (only its alignment matters)."""
    shape = tuple(map(int, shape))
    strides = _byte_strides(strides, itemsize)
    itemsize = int(itemsize)
    size = math.prod(shape)
    if size <= 0 or not shape:
        raise ValueError("plan_coordinates needs a non-empty input of at least one dimension")
    if len(shape) > MAX_OUT_NDIM:
        raise ValueError(f"the GPU nonzero path handles at most {MAX_OUT_NDIM} dimensions")
    if c_contiguous(shape, strides, itemsize):     # one run, as reading_dims merges it
        read = ((size, itemsize),) if size > 1 else ((1, 0),)
    else:
        read = reading_dims(shape, strides)
    if len(read) > MAX_DIMS:
        raise ValueError(f"the GPU nonzero path handles at most {MAX_DIMS} dimensions after "
                         f"merging; this layout has {len(read)}")
    coord, unit_mask = _coordinate_dims(shape)
    items = items_per_thread(itemsize)
    tile = NZ_BLOCK * items
    vec = packed_run(read, itemsize)
    # the packed path cuts tiles at 16-byte boundaries: the first tile starts `head` elements
    # before x. The kernel reads it from params.head (computed here, not from its pointer: see
    # nz_count_run_vec on casts); plan caches and fast-path keys include the pointer mod 16.
    head = (int(base_address) % 16) // itemsize if vec else 0
    num_tiles = -(-(size + head) // tile)
    tr = () if vec else transposed_tiles(read, itemsize, base_address)
    if tr:
        m, kk, inner, chunks, _, ic, c = tr
        tile = kk * ic                  # (bits of a tile's mask and record)
        num_tiles = math.prod(n for n, _ in read[:m]) * chunks * c
    wide = bool(force_64bit) or size > 2**31 or _spanb(read) > _I32_MAX
    return _new_coordinate_plan((
        shape, strides, itemsize, wide, bool(force_64bit), items, tile, num_tiles, read,
        coord, unit_mask, _index_bytes(index_dtype),
        narrow_loads(shape, strides, itemsize, base_address), vec, head, tr, NZ_BLOCK, {}))


def plan_coordinates_contiguous(shape, strides, itemsize, index_dtype, *, force_64bit=False,
                                base_address=0) -> CoordinatePlan:
    """:func:`plan_coordinates` of a C-contiguous input (the array's own int ``shape`` and
    ``strides``; size > 0, ndim >= 1), a first call's planner (cupyops.ops.nonzero.launch._plan):
    its elements are one reading run, so the packed path is the 1-/2-byte types', no
    transposed tiles, narrow loads only off the itemsize boundary (8 or 16), and the largest
    offset is the last element's. The same plan (tests/test_plan_nonzero.py compares the two)."""
    size = math.prod(shape)
    if size <= 0 or not shape or len(shape) > MAX_OUT_NDIM:
        return plan_coordinates(shape, strides, itemsize, index_dtype,
                                force_64bit=force_64bit, base_address=base_address)
    coord, unit_mask = _coordinate_dims(shape)
    items = items_per_thread(itemsize)
    vec = itemsize <= 2                             # packed_run of the one run
    head = (base_address % 16) // itemsize if vec else 0
    tile = NZ_BLOCK * items
    return _new_coordinate_plan((
        shape, strides, itemsize,
        bool(force_64bit) or size > 2**31 or (size - 1) * itemsize > _I32_MAX,
        bool(force_64bit), items, tile, -(-(size + head) // tile),
        ((size, itemsize),) if size > 1 else ((1, 0),), coord, unit_mask,
        _index_bytes(index_dtype), itemsize in (8, 16) and base_address % itemsize != 0, vec,
        head, (),
        NZ_BLOCK, {}))


def _index_bytes(index_dtype) -> int:
    return index_dtype.itemsize if isinstance(index_dtype, np.dtype) else \
        np.dtype(index_dtype).itemsize


def _coordinate_dims(shape) -> tuple:
    """``(coord_dims, unit_mask)`` of a plan: ``((size, suffix), ...)`` of the dims longer than
    1 in order (suffix: the product of the later ones), and a bit per unit dim."""
    nonunit = [n for n in shape if n != 1]
    if len(nonunit) > MAX_DIMS:
        raise ValueError(f"the GPU nonzero path handles at most {MAX_DIMS} dimensions of extent "
                         f"> 1; this input has {len(nonunit)}")
    coord = []
    suffix = 1
    for n in reversed(nonunit):
        coord.append((n, suffix))
        suffix *= n
    coord.reverse()
    unit_mask = 0
    if len(nonunit) < len(shape):
        for i, n in enumerate(shape):
            if n == 1:
                unit_mask |= 1 << i
    return tuple(coord), unit_mask


# ---------------------------------------------------------------------------------- count_nonzero

class CountPlan(typing.NamedTuple):
    """How ``count_nonzero_axes`` runs (a named tuple, as :class:`CoordinatePlan`)."""

    case = "count"            # (the plan case, as the selftest and the trace name it)

    shape: tuple
    strides: tuple            # bytes
    axes: tuple
    itemsize: int
    wide: bool
    forced_64bit: bool
    kept_dims: tuple          # ((size, byte stride >= 0), ...) outermost first, memory order
    red_dims: tuple           # ((size, byte stride >= 0), ...) outermost first, sorted by stride
    base: int                 # bytes added to x (reduced dims flipped)
    n_out: int
    red_size: int
    mode: int                 # 0: warp per (output, chunk); 1: thread per (output, chunk);
                              # 2: warp per 32 neighbouring outputs read in memory order
    chunk_len: int
    n_chunks: int
    narrow_loads: bool        # 8-/16-byte elements read as two 4-/8-byte words (see narrow_loads())
    vec: bool                 # mode 0 over one contiguous reduced run of a 1-/2-byte type: packed
    align: int                # the data pointer mod 32 (packed words, mode 2's windows aligned)
    out_strides: tuple        # per kept dim: its stride in the (row-major) output, elements
    out_base: int             # output position of kept offset 0 (kept dims flipped)
    groups: int               # mode 2: groups of 32 outputs per row of the innermost kept dim
    o_head: int               # mode 1: idle units before output 0 (warps start on a sector)
    split: int                # mode 1: units a chunk (n_out + o_head, whole warps when aligned)
    block: int
    memo: dict                # the packed parameters (a new dict per plan; see CoordinatePlan)

    __eq__, __ne__, __hash__, __repr__ = _plan_eq, _plan_ne, _plan_hash, _plan_repr
    __lt__ = __le__ = __gt__ = __ge__ = _plan_no_order

    @property
    def units(self) -> int:
        if self.mode == 2:
            return self.n_out // self.kept_dims[-1][0] * self.groups
        return self.split * self.n_chunks

    @property
    def atomic(self) -> bool:
        return self.n_chunks > 1

    @property
    def grid(self) -> int:
        per_block = NZ_BLOCK if self.mode == 1 else NZ_WARPS
        return -(-self.units // per_block)


def _spanb(dims) -> int:
    """The largest |byte offset| of an element over dims ``((size, byte stride), ...)``."""
    span = 0
    for n, s in dims:
        span += (n - 1) * abs(s)
    return span


def count_offset_bound(mode, kept_dims, red_dims, itemsize) -> int:
    """An upper bound of the |byte offsets| that ``count_nonzero_axes`` forms in its offset
    type (``off_t``: int32 unless the plan is wide), every intermediate included:

    * a kept offset (``u.off``, added to x + base as a pointer) and a reduced one of an
      element in range (added to ``u.xo``): the spans of the two sides;
    * mode 0 over one reduced dim of stride ``st``: lane l of a warp starts at
      ``(lo + l) * st`` whether or not ``lo + l`` is in range (``lo + l`` up to
      ``red_size - 1 + 31``: a chunk shorter than a warp), and steps its pointer by
      ``32 * st``, once more after its last element; both are below
      ``(red_size - 1 + 32) * st``;
    * the packed path (mode 0, one contiguous reduced run; ``nz_count_run_vec``) adds the
      kept offset and the reduced one (``u.off + u.hi * sizeof(T)``: the end of the last
      chunk, one element past the last) and its ragged-end lanes form ``lo + lane * S``
      (up to 31 elements past the end; never dereferenced there).

    Mode 0 with one reduced dim therefore gets a margin of 32 strides (32 elements for the
    packed path); the other paths form the offsets of in-range elements only."""
    kept, red = _spanb(kept_dims), _spanb(red_dims)
    if mode != 0 or len(red_dims) != 1:
        return max(kept, red)
    margin = 32 * max(abs(int(red_dims[0][1])), int(itemsize))
    if packed_run(red_dims, itemsize):
        return kept + red + margin
    return max(kept, red + margin)


def count_dims(shape, strides, axes, kept_axes):
    """``(kept_dims, red_dims, base, out_strides, out_base)`` of plan_count: both sides
    normalised (flipped to positive strides, sorted by stride, merged; ``base``: bytes added to
    x), the kept dims with their strides in the row-major output, so that outputs are read in
    memory order whatever the kept axes' order (a permuted input's outputs would otherwise be
    whole sectors apart)."""
    out_st = _layout.row_major_strides([shape[a] for a in kept_axes])
    full = [0] * len(shape)
    for a, st in zip(kept_axes, out_st):
        full[a] = st
    kept, kb = _layout.normalize(_layout.dims_from(shape, strides, full, axes=kept_axes),
                                 nops=2)
    kept_dims = tuple((d.size, d.strides[0]) for d in reversed(kept)) or ((1, 0),)
    out_strides = tuple(d.strides[1] for d in reversed(kept)) or (0,)
    red, base = _layout.normalize(_layout.dims_from(shape, strides, axes=axes))
    red_dims = tuple((d.size, d.strides[0]) for d in reversed(red)) or ((1, 0),)
    return (kept_dims, red_dims, (int(base[0]) if base else 0) + int(kb[0]), out_strides,
            int(kb[1]))


def count_dims_contiguous(shape, axes, itemsize):
    """:func:`count_dims` of a C-contiguous input reduced over a run of neighbouring axes,
    from three products: the kept dims merge into at most two (outer, inner), the reduced
    ones into one (tests/test_plan_nonzero.py compares the two)."""
    outer, group, inner = _layout.run_sizes(shape, axes[0], axes[-1] + 1)
    if group == 1:     # the kept dims are neighbours in memory: one
        n = outer * inner
        return ((n, itemsize),) if n > 1 else ((1, 0),), ((1, 0),), 0, (1 if n > 1 else 0,), 0
    kept, out = [], []
    if outer > 1:
        kept.append((outer, group * inner * itemsize))
        out.append(inner)
    if inner > 1:
        kept.append((inner, itemsize))
        out.append(1)
    return tuple(kept) or ((1, 0),), ((group, inner * itemsize),), 0, tuple(out) or (0,), 0


def c_contiguous(shape, strides, itemsize) -> bool:
    """Row-major and dense, unit dims' strides aside (NumPy's C-contiguous flag)."""
    expect = itemsize
    for n, s in zip(reversed(shape), reversed(strides)):
        if n != 1 and s != expect:
            return False
        expect *= n
    return True


def plan_count(shape, strides, itemsize, axes, *, sm_count=132, max_threads_per_sm=2048,
               force_64bit=False, base_address=0) -> CountPlan:
    """Plan ``count_nonzero_axes`` over ``axes`` (sorted, distinct, non-empty) of a non-empty input."""
    shape = tuple(map(int, shape))
    strides = _byte_strides(strides, itemsize)
    itemsize = int(itemsize)
    axes = tuple(sorted(map(int, axes)))
    kept_axes = [i for i in range(len(shape)) if i not in axes]
    if axes[-1] - axes[0] + 1 == len(axes) and c_contiguous(shape, strides, itemsize):
        kept_dims, red_dims, base, out_strides, out_base = count_dims_contiguous(
            shape, axes, itemsize)
    else:
        kept_dims, red_dims, base, out_strides, out_base = count_dims(shape, strides, axes,
                                                                      kept_axes)
    if len(kept_dims) > MAX_DIMS or len(red_dims) > MAX_DIMS:
        raise ValueError(f"the GPU count_nonzero path handles at most {MAX_DIMS} kept and "
                         f"{MAX_DIMS} reduced dimensions after merging; this layout has "
                         f"{len(kept_dims)} and {len(red_dims)}")
    n_out, red_size = _layout.kept_and_reduced_sizes(shape, axes)

    red_inner = abs(red_dims[-1][1])
    kept_inner = abs(kept_dims[-1][1])
    # a warp per output reads the reduced range 32 consecutive positions a round: best when the
    # reduced dims hold the smallest stride (or there is one output); else a thread per output,
    # lanes on consecutive outputs.
    groups = 0
    if runs_in_memory_order(kept_dims, red_dims, n_out, itemsize):
        mode, n_chunks, chunk_len = 2, 1, red_size
        groups = -(-kept_dims[-1][0] // 32)
    elif n_out == 1 or (red_size >= 32 and (kept_inner == 0 or 0 < red_inner <= kept_inner)):
        mode = 0
        target = sm_count * (max_threads_per_sm // 32) * 2            # warps for ~2 waves
        min_chunk = max(1024, 8192 // itemsize)                       # atomics stay <= 1 %
        n_chunks = max(1, min(-(-target // n_out), -(-red_size // min_chunk)))
        chunk_len = -(-red_size // n_chunks)
        chunk_len = -(-chunk_len // 32) * 32
    else:
        mode = 1
        target = sm_count * max_threads_per_sm * 2
        n_chunks = max(1, min(-(-target // n_out), -(-red_size // 256)))
        chunk_len = -(-red_size // n_chunks)
    n_chunks = -(-red_size // chunk_len)
    o_head, split = 0, n_out
    if mode == 1 and len(kept_dims) == 1 and kept_dims[0][1] == itemsize <= 2:
        # lanes on neighbouring outputs of 1-/2-byte types: a warp's 32 start on a sector,
        # every chunk's (a chunk is whole warps)
        a = (int(base_address) + base) % 32
        o_head = 0 if a % itemsize else a // itemsize
        split = -(-(n_out + o_head) // 32) * 32 if n_chunks > 1 else n_out + o_head

    # several chunks add into a word an output: (ticket << 40 | count), kernels/nonzero.cu
    # NZ_ACC_SHIFT (neither bound is near: a GPU holds far fewer elements, the chunks are few)
    if n_chunks > 1 and (red_size >= 1 << 40 or n_chunks >= 1 << 24):
        raise ValueError(f"count_nonzero: {red_size} elements an output in {n_chunks} chunks "
                         "is past what the GPU path's per-output sums hold (2**40, 2**24)")
    units = split * n_chunks
    wide = (bool(force_64bit) or max(n_out, red_size, units * 32) > _I32_MAX
            or abs(out_base) + _spanb(zip((n for n, _ in kept_dims), out_strides)) > _I32_MAX
            or count_offset_bound(mode, kept_dims, red_dims, itemsize) > _I32_MAX
            or abs(base) > _I32_MAX)
    return _new_count_plan((
        shape, strides, axes, itemsize, wide, bool(force_64bit), kept_dims, red_dims, base,
        n_out, red_size, mode, chunk_len, n_chunks,
        narrow_loads(shape, strides, itemsize, base_address),
        mode == 0 and packed_run(red_dims, itemsize), int(base_address) % 32, out_strides,
        out_base, groups, o_head, split, NZ_BLOCK, {}))


#: mode 2's longest run of one output (bytes): longer runs read well a warp per output
RUN_IN_ORDER_BYTES = 128


def runs_in_memory_order(kept_dims, red_dims, n_out, itemsize) -> bool:
    """Mode 2: one contiguous reduced run per output, shorter than RUN_IN_ORDER_BYTES, the
    runs of the innermost kept dim side by side (its stride = the run's bytes). Lanes on
    outputs would read each sector once per element of a run; a warp per output would leave
    most lanes idle and split the sectors of runs that do not start on one."""
    if n_out == 1 or len(red_dims) != 1 or red_dims[0][1] != itemsize:
        return False
    run = red_dims[0][0] * itemsize
    # (1-/2-byte types read a byte or two a lane here: mode 0's packed words from 64 bytes;
    # a row of the kept dim under 128 bytes would spend a warp's set-up on a few bytes)
    longest = RUN_IN_ORDER_BYTES if itemsize > 2 else RUN_IN_ORDER_BYTES // 2
    return (run <= longest and kept_dims[-1][1] == run
            and kept_dims[-1][0] * run >= RUN_IN_ORDER_BYTES)


#: plans from every field's value, in order, memo included (the named tuples' generated
#: ``__new__`` binds its 18 or 19 arguments by name)
_new_coordinate_plan = functools.partial(tuple.__new__, CoordinatePlan)
_new_count_plan = functools.partial(tuple.__new__, CountPlan)

