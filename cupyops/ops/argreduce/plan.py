"""Planning of the argmin / argmax / hardmax kernels: a pure function of shape, strides, axes and
the device properties. No GPU is needed, so the SIMT backend plans exactly as an H100 would and
the planner is tested anywhere (tests/test_plan_argreduce.py).

Vocabulary (all lists innermost first, strides in elements; see cupyops.core.layout):

* ``kept``  — the kept (output) dimensions after normalisation: ``(size, in_stride, out_stride)``.
  ``out_stride`` is the stride of the result array (argmin/argmax: a C-contiguous array of the
  kept shape; hardmax: a C-contiguous array of x's shape, taken along the kept axes).
* ``red``   — the reduced dimensions that are read (zero-stride ones removed), sorted by memory
  stride, negative strides flipped, merged only where both the memory stride *and* the logical
  index weight are contiguous: ``(size, in_stride, weight)``. A position ``p`` in
  ``[0, group)`` is the mixed-radix number over these sizes; element ``p`` sits at
  ``in_base + kept_offset + sum(digit * in_stride)`` and has logical index
  ``index_base + sum(digit * weight)`` — the row-major index over the reduced axes in
  increasing axis order, whatever the memory order.
* ``red_mem`` — the same list merged on memory strides alone (a coarser partition): how
  contiguous the group is in memory. It decides the case, not the arithmetic.
* ``write`` — hardmax only: the reduced axes in logical order with the result's strides and
  the logical weights, merged where contiguous: ``(size, out_stride, weight)``. The one-hot
  write walks it and compares each element's logical index with the winner.

The kernels walk both lists with 32-bit digits for every dimension but the outermost, so a
dimension of 2**31 elements or more is moved outermost (the walking order is free).

A reduced axis of stride 0 holds equal values: it is not read; the tie rule picks index 0 along
it (``tie="first"``) or its last index (``"last"``): ``zero_last_offset`` is added to
``index_base`` for ``tie="last"``.

Cases (``plan.case``) and kernels (``plan.kernel``):

* ``"row"``     — kernel ``row``: the innermost memory dimension is reduced and contiguous. A
  *team* of ``team`` threads (1..32 lanes of a warp, or the whole block) reduces one group,
  with vector loads of ``vec`` elements; warp shuffles, then shared memory across warps.
* ``"column"``  — kernel ``col``: the innermost memory dimension is kept and contiguous.
  Threads ``x`` run over outputs (coalesced loads across the warp), threads ``y`` interleave
  over the group; combine across ``y`` in shared memory.
* ``"general"`` — the same two kernels when the innermost stride is not 1 (strided, sliced,
  broadcast): offsets are decoded per dimension (at most 8 a side).
* ``"split"``   — either kernel with the group cut into ``nchunks`` chunks along grid.y (few
  outputs, big groups): pass 1 writes per-chunk (key, index) partials, pass 2 (kernel
  ``finish``) reduces them in a fixed order and writes the index — or, for hardmax, the one-hot
  output. Two launches. The partials are compact (kernels/argreduce.cu): the key at the value's
  own width (``key_itemsize``), the index relative to the logical index of its chunk's first
  position at ``pidx_itemsize`` bytes, the fewest that hold any such difference in a chunk
  (:func:`partial_index_width`). Chunks of a contiguous reduction start on 32-byte sectors.
* ``"decode"``  — kernel ``row`` with a whole block per group, the group cut into ``nchunks``
  chunks along grid.y, and **one launch** (``last_block``): each block stores its partial and
  draws an atomic ticket of its group; the last block to finish combines the group's partials
  (the same comparison, so any block count and any order give the same answer) and stores the
  index. For argmin/argmax and hardmax over few groups with big contiguous reductions, where
  the other plans would leave more than half of the SMs idle (decode shapes: ``(1, 131072)``,
  ``(8, 131072)``) or launch fewer than :func:`busy_blocks`: the grid has at least half as
  many blocks as SMs (or ``busy_blocks``), up to two per SM. hardmax (a write list of one
  dimension): each block zeroes ``write_chunk`` positions of the one-hot before its ticket and
  the last block writes the 1. Scratch: the partials, plus one 4-byte ticket per group after the
  all-NaN flag, zeroed in stream order before every launch.
"""
from __future__ import annotations

import functools
import math
import sys
import typing

from cupyops.core import layout as _layout
from cupyops.core import trace as _trace
from cupyops.core.dtypes import element_alignment
from cupyops.core.layout import Dim

__all__ = ["ArgreducePlan", "plan_argreduce", "plan_argreduce_contiguous", "MAX_DIMS", "LIMIT_32"]

#: dimensions a side the kernels decode
MAX_DIMS = 8
#: 32-bit indexing is used when every offset, position and index stays below this (headroom
#: for a thread's last stride past the end of its range).
LIMIT_32 = 2**31 - 2**20
#: threads per block of every launch
BLOCK = 256
#: the finish pass's block size
FINISH_BLOCK = 256
#: minimum positions per thread before splitting a group across blocks pays
MIN_WORK_PER_THREAD = 16
#: a group of at least this many vector loads gets a whole block (else 1..32 lanes)
MIN_BLOCK_TEAM_VECS = 1024
#: below this many elements read, one launch beats splitting groups across blocks
MIN_SPLIT_ELEMENTS = 1 << 20
#: the largest grid.y
MAX_GRID_Y = 65535
#: a split must keep its scratch traffic (the partials' stores, plus their loads by every
#: finish block that reads them) at most 1 / this of the input bytes: with 1-byte values and a
#: short group, 8-16 byte partials per chunk would otherwise cost a large part of the input
MIN_SCRATCH_RATIO = 64
#: the decode plan gives each block at least this many vector loads (one per thread)
MIN_DECODE_BLOCK_VECS = 256
#: a plan reading at least BUSY_MIN_BYTES launches at least min(SM count, bytes /
#: BUSY_BLOCK_BYTES) blocks for its reading pass (:func:`busy_blocks`). (The goal is set from
#: 64 KiB; from 32 KiB, shapes just below it, such as (21845, 3) uint8, get the floor too.)
BUSY_MIN_BYTES = 32 * 1024
BUSY_BLOCK_BYTES = 16 * 1024


class ArgreducePlan(typing.NamedTuple):
    """How one argmin/argmax/hardmax call runs (a named tuple: a first call of a new layout
    builds one, in a third of a frozen dataclass's time)."""

    case: str                    # "row" | "column" | "general" | "split"
    kernel: str                  # "row" | "col"
    hardmax: bool
    use_64bit: bool
    itemsize: int
    n_out: int                   # number of groups (outputs of argmin/argmax)
    group: int                   # positions read per group (zero-stride axes removed)
    group_full: int              # logical group size (product of the reduced axes)
    in_base: int                 # element offset of the walk's base from x's element 0
    out_base: int                # element offset in the result array
    index_base: int              # logical index of position 0 (flips included)
    zero_last_offset: int        # added to index_base for tie="last" (zero-stride reduced axes)
    kept: tuple                  # ((size, in_stride, out_stride), ...) innermost first
    red: tuple                   # ((size, in_stride, weight), ...) innermost first
    red_mem: tuple               # ((size, in_stride), ...) memory-merged view of red
    write: tuple                 # ((size, out_stride, weight), ...) hardmax write side
    vec: int                     # row kernel: elements per vector load; column kernel: groups
                                 # per thread (one load of vec * itemsize bytes per position)
    team: int                    # row kernel: threads per group (block size = whole block)
    step: int                    # positions a thread advances per iteration (main kernel)
    write_step: int              # positions q a thread advances in the fused one-hot write
    block: tuple                 # main kernel block (x, y, z)
    grid: tuple                  # main kernel grid (x, y, z)
    shared_mem: int              # main kernel dynamic shared memory, bytes
    chunk: int                   # positions per grid.y chunk (== group when not split)
    nchunks: int
    passes: int                  # launches: 1, or 2 for "split"
    finish_block: tuple = (1, 1, 1)
    finish_grid: tuple = (1, 1, 1)
    finish_shared_mem: int = 0
    write_chunk: int = 0         # hardmax split: positions q per finish block
    key_itemsize: int = 4        # bytes of a partial's ordering key: the value's itemsize
    pidx_itemsize: int = 4       # bytes of a partial's relative index (1, 2, 4 or 8)
    narrow_loads: bool = False   # complex elements only element-aligned (complex64 at 4 bytes,
                                 # complex128 at 8): the kernels read each as two half-width
                                 # words, as a wider load at a smaller alignment faults on a GPU
    last_block: bool = False     # "decode": one launch, the group's last block combines the
                                 # partials (tickets in scratch)

    @property
    def index_itemsize(self) -> int:
        return 8 if self.use_64bit else 4

    @property
    def fused(self) -> bool:
        return self.passes == 1


#: the kernels' odometer keeps 32-bit digits for every dimension but the outermost
MAX_INNER_DIM = 2**31 - 1


def _outermost_big(dims: list) -> list:
    """Move a dimension too long for a 32-bit digit (>= 2**31 elements) to the outermost place.

    The order in which a group is walked is free (the comparison is a total order, and the
    logical index travels with each position), so this only costs the vector loads of that
    layout. Two such dimensions would make a group of 2**62 elements."""
    for i in range(len(dims) - 1):       # (Dims or (size, ...) tuples)
        if dims[i][0] > MAX_INNER_DIM:
            return [*dims[:i], *dims[i + 1:], dims[i]]
    return dims


def _too_many_dims(shape, strides_bytes, axes, kept, red, write) -> ValueError:
    """The error of a layout that leaves more than MAX_DIMS dimensions on a side."""
    for what, lst in (("kept", kept), ("reduced", red), ("hardmax write", write)):
        if len(lst) > MAX_DIMS:
            return ValueError(
                f"the GPU kernels handle at most {MAX_DIMS} dimensions a side after merging; "
                f"this layout (shape {shape}, strides {tuple(strides_bytes)}, axes {axes}) "
                f"leaves {len(lst)} {what} dimensions")


def _pow2ceil(n: int) -> int:
    return 1 << max(0, int(n) - 1).bit_length()


def _smem(entries: int, key_size: int, idx_size: int) -> int:
    keys = (entries * key_size + 7) // 8 * 8
    return keys + entries * idx_size


def partial_index_bound(red, chunk: int) -> int:
    """An upper bound of |logical index - logical index of the chunk's first position| over every
    chunk of ``chunk`` consecutive positions (chunk c starts at position c * chunk), for the
    reduced list ``red`` ((size, in_stride, weight), innermost first; weights may be negative).

    Digit d of a position (P: the product of the inner sizes) moves from the chunk's first
    position by at most floor or ceil((chunk - 1) / P), capped at size - 1, when it cannot wrap:
    it is the outermost digit, or every chunk starts where digits 0..d are 0 (chunk a multiple
    of P * size). Otherwise a wrap may move it by up to size - 1 either way."""
    if len(red) == 1:              # the outermost digit alone: it cannot wrap
        size, _, weight = red[0]
        return (min(size, chunk) - 1) * abs(weight) if chunk > 1 and size > 1 else 0
    bound = 0
    inner = 1
    for d, (size, _, weight) in enumerate(red):
        if chunk <= 1 or size <= 1:
            moves = 0
        elif d == len(red) - 1 or chunk % (inner * size) == 0:
            q, r = divmod(chunk - 1, inner)
            moves = min(size - 1, q + (1 if (r and chunk % inner) else 0))
        else:
            moves = size - 1
        bound += moves * abs(weight)
        inner *= size
    return bound


def partial_index_width(red, chunk: int, index_bytes: int) -> int:
    """Bytes of a partial's relative index (two's complement): the fewest of 1, 2, 4, 8 (at
    most ``index_bytes``, the kernel's index width) holding :func:`partial_index_bound`."""
    return _index_width(partial_index_bound(red, chunk), index_bytes)


def _index_width(bound: int, index_bytes: int) -> int:
    for w in (1, 2, 4):
        if w < index_bytes and bound < 1 << (8 * w - 1):
            return w
    return index_bytes


def _digits(value: int, sizes) -> tuple:
    """Mixed-radix digits of ``value`` over ``sizes`` (innermost first), top digit unbounded."""
    out = []
    for i, n in enumerate(sizes):
        if i == len(sizes) - 1:
            out.append(value)
        else:
            out.append(value % n)
            value //= n
    return tuple(out)


def plan_argreduce(shape, strides_bytes, itemsize, axes, props, *, force_64bit=False,
                   hardmax=False, base_address=0, min_split_elements=MIN_SPLIT_ELEMENTS,
                   min_work_per_thread=MIN_WORK_PER_THREAD,
                   min_block_team_vecs=MIN_BLOCK_TEAM_VECS,
                   min_scratch_ratio=MIN_SCRATCH_RATIO, element_align=None,
                   min_decode_block_vecs=MIN_DECODE_BLOCK_VECS) -> ArgreducePlan:
    """Plan argmin/argmax (``hardmax=False``) or hardmax over ``axes`` of an array.

    shape, strides_bytes: the input's (any strides: negative, zero, overlapping).
    itemsize: bytes per element; every stride must be a multiple of it.
    axes: the reduced axes (non-empty); every axis must be non-empty, and so must the output.
    props: a DeviceProps (sm_count, max_threads_per_sm, max_threads_per_block, ...).
    force_64bit: plan 64-bit internal indexing even where 32 bits would do (tests).
    base_address: the data pointer of element 0 (only its low bits matter: vector loads need
        the walk's base aligned to a vector).
    element_align: the alignment every element is guaranteed (bytes; default: the itemsize).
        Complex values have half their size: when the data is not itemsize-aligned the plan
        asks for narrow loads (``narrow_loads``).
    min_split_elements, min_work_per_thread, min_block_team_vecs: when a block per group and
        splitting groups across blocks pay (the defaults); tests lower them to exercise those
        paths on small inputs.
    min_scratch_ratio: a split keeps the bytes of its partials (stored once, loaded by every
        finish block of the group) at most 1 / this of the bytes it reads, cutting chunks
        (down to no split: the fused one-launch path) where they would cost more; 0 disables.
    min_decode_block_vecs: vector loads per block at least in the one-launch ``"decode"`` plan
        (tests lower it to get many blocks on small inputs).

    ``ValueError`` when more than 8 dimensions a side remain after merging.
    """
    shape = tuple(int(n) for n in shape)
    ndim = len(shape)
    itemsize = int(itemsize)
    if len(strides_bytes) != ndim:
        raise ValueError("strides and shape differ in length")
    axes = tuple(sorted(set(int(a) for a in axes)))
    if not axes:
        raise ValueError("plan_argreduce needs at least one reduced axis")
    if axes[0] < 0 or axes[-1] >= ndim:
        raise ValueError(f"axes {axes} out of range for {ndim} dimensions")
    if any(n <= 0 for n in shape):
        raise ValueError(f"plan_argreduce needs a non-empty array, got shape {shape}")
    strides = []
    for s in strides_bytes:
        s = int(s)
        if s % itemsize:
            raise ValueError(f"stride {s} is not a multiple of the itemsize {itemsize}")
        strides.append(s // itemsize)
    layout = _strided_layout(shape, strides, axes, hardmax, strides_bytes)
    return _decide(layout, itemsize, props, force_64bit=force_64bit, hardmax=hardmax,
                   base_address=base_address, min_split_elements=min_split_elements,
                   min_work_per_thread=min_work_per_thread,
                   min_block_team_vecs=min_block_team_vecs, min_scratch_ratio=min_scratch_ratio,
                   element_align=element_align, min_decode_block_vecs=min_decode_block_vecs)


def plan_argreduce_contiguous(shape, itemsize, axes, props, force_64bit=False,
                              hardmax=False, base_address=0, element_align=None,
                              **options) -> ArgreducePlan:
    """:func:`plan_argreduce` of a C-contiguous array (every dimension non-empty) reduced over
    ``axes`` (sorted): over a run of neighbouring axes, the common layout case, the normalised
    lists follow from three products (:func:`_contiguous_layout`); over others from one walk
    over the dims (:func:`_c_contiguous_layout`); neither sorts and merges as the general
    planner does. The same plan as plan_argreduce (tests/test_plan_argreduce.py compares the
    two over every such layout up to 4 dimensions)."""
    if axes[-1] - axes[0] + 1 == len(axes):
        layout = _contiguous_layout(shape, axes[0], axes[-1] + 1, hardmax)
    else:
        layout = _c_contiguous_layout(shape, axes, hardmax, itemsize)
    if options:                   # (tests' planner options; passing none costs a dict)
        return _decide(layout, itemsize, props, force_64bit, hardmax, base_address,
                       element_align, **options)
    return _decide(layout, itemsize, props, force_64bit, hardmax, base_address, element_align)


def _c_contiguous_layout(shape, axes, hardmax, itemsize):
    """:func:`_strided_layout` of a C-contiguous array reduced over any sorted ``axes``. Its
    strides fall with the axis, so the sort is the identity; unit dims drop out; two
    dims of one side with only unit dims between them are neighbours in memory, in the
    row-major weights of the reduced side, in the kept side's output strides and in the
    hardmax output (the input's own strides): they merge, and no others do."""
    nd = len(shape)
    kept, red = [], []             # (size, in_stride, out_stride / weight), innermost first
    side = None                    # the side of the last dim kept in a list
    stride = weight = out = 1      # element stride; reduced weight; kept output stride
    n_out = group = 1
    for i in range(nd - 1, -1, -1):
        n = shape[i]
        if i in axes:
            if n != 1:
                if side == "red":
                    d = red[-1]
                    red[-1] = (d[0] * n, d[1], d[2])
                else:
                    red.append((n, stride, weight))
                side = "red"
            weight *= n
            group *= n
        else:
            if n != 1:
                if side == "kept":
                    d = kept[-1]
                    kept[-1] = (d[0] * n, d[1], d[2])
                else:
                    kept.append((n, stride, stride if hardmax else out))
                side = "kept"
            out *= n
            n_out *= n
        stride *= n
    red_mem = tuple([(n, s) for n, s, _ in red])          # memory order, as it is
    red = tuple(_outermost_big(red))
    write = red if hardmax else ()
    if len(kept) > MAX_DIMS or len(red) > MAX_DIMS:
        raise _too_many_dims(tuple(shape), [itemsize * math.prod(shape[i + 1:])
                                            for i in range(nd)], axes, kept, red, write)
    return (tuple(kept), red, red_mem, write, 0, 0, 0, 0, stride - 1, n_out, group)


def _contiguous_layout(shape, a0, a1, hardmax):
    """:func:`_strided_layout` of a C-contiguous array reduced over axes ``a0 .. a1 - 1``: the
    kept dimensions merge into at most two (inner, then outer), the reduced ones into one."""
    outer, group, inner = _layout.run_sizes(shape, a0, a1)
    total = outer * group * inner
    if group == 1:     # nothing is read along the reduced axes: the kept ones merge into one
        n_out = outer * inner
        return (((n_out, 1, 1),) if n_out > 1 else (), (), (), (), 0, 0, 0, 0, total - 1,
                n_out, 1)
    kept = []
    if inner > 1:
        kept.append((inner, 1, 1))
    if outer > 1:
        kept.append((outer, group * inner, group * inner if hardmax else inner))
    red = ((group, inner, 1),)
    write = ((group, inner, 1),) if hardmax else ()
    # (kept, red, red_mem, write, in_base, out_base, index_base, zero_last, span of the input,
    #  n_out, group_full)
    return (tuple(kept), red, ((group, inner),), write, 0, 0, 0, 0, total - 1, outer * inner,
            group)


def _strided_layout(shape, strides, axes, hardmax, strides_bytes):
    """The normalised lists of any layout (strides in elements, axes sorted and valid):
    ``(kept, red, red_mem, write, in_base, out_base, index_base, zero_last, span, n_out,
    group_full)`` — see the module docstring; ``span`` is the largest element offset of the
    input from element 0."""
    ndim = len(shape)
    kept_axes = tuple(a for a in range(ndim) if a not in axes)
    red_shape = [shape[a] for a in axes]
    kept_shape = [shape[a] for a in kept_axes]
    weights = _layout.row_major_strides(red_shape)
    if hardmax:
        xs = _layout.row_major_strides(shape)
        kout = [xs[a] for a in kept_axes]
    else:
        kout = list(_layout.row_major_strides(kept_shape))

    # ---- kept side: (in_stride, out_stride), merged on both ---------------------------------
    kdims = [Dim(shape[a], (strides[a], kout[i]), a) for i, a in enumerate(kept_axes)][::-1]
    kdims, (in_base_k, out_base) = _layout.normalize(kdims, zeros="outer", nops=2)

    # ---- reduced side: (in_stride, weight) -------------------------------------------------
    rdims = [Dim(shape[a], (strides[a], weights[i]), a) for i, a in enumerate(axes)][::-1]
    rdims = _layout.drop_unit(rdims)
    rdims, zdims = _layout.split_by_zero_stride(rdims)
    zero_last = sum((d.size - 1) * d.strides[1] for d in zdims)
    rdims, (in_base_r, index_base) = _layout.flip_negative(rdims) if rdims else ([], (0, 0))
    rdims = _layout.sort_by_stride(rdims)
    red = _layout.merge(rdims)                    # finer: memory and weight contiguous
    red_mem = _layout.merge(rdims, operands=[0])  # coarser: memory contiguous
    red = _outermost_big(red)

    # ---- hardmax write side: logical order, (out_stride, weight) ---------------------------
    write: list = []
    if hardmax:
        xs = _layout.row_major_strides(shape)
        wdims = [Dim(shape[a], (xs[a], weights[i]), a) for i, a in enumerate(axes)][::-1]
        write = _outermost_big(_layout.merge(_layout.drop_unit(wdims)))

    if max(len(kdims), len(red), len(write)) > MAX_DIMS:
        raise _too_many_dims(shape, strides_bytes, axes, kdims, red, write)
    span = sum((n - 1) * abs(s) for n, s in zip(shape, strides))
    return (tuple((d.size, d.strides[0], d.strides[1]) for d in kdims),
            tuple((d.size, d.strides[0], d.strides[1]) for d in red),
            tuple((d.size, d.strides[0]) for d in red_mem),
            tuple((d.size, d.strides[0], d.strides[1]) for d in write),
            in_base_k + in_base_r, out_base, index_base, zero_last, span,
            math.prod(kept_shape), math.prod(red_shape))


def _decide(layout, itemsize, props, force_64bit=False, hardmax=False, base_address=0,
            element_align=None, *, min_split_elements=MIN_SPLIT_ELEMENTS,
            min_work_per_thread=MIN_WORK_PER_THREAD, min_block_team_vecs=MIN_BLOCK_TEAM_VECS,
            min_scratch_ratio=MIN_SCRATCH_RATIO,
            min_decode_block_vecs=MIN_DECODE_BLOCK_VECS) -> ArgreducePlan:
    """The plan of a normalised layout (the tuple of :func:`_strided_layout`), by layout case:
    the kernel and its threads (:func:`_row_team`: the innermost dimension read is reduced;
    else :func:`_column`), a split's chunks cut to its scratch budget (:func:`_split_chunks`)
    or turned into one launch (:func:`_decode_chunks`), then the finish pass of a split
    (:func:`_finish_layout`) and the index width (:func:`_needs_64bit`). Every part is a pure
    function of its arguments; the fields go into the plan positionally (:data:`_new_plan`)."""
    (kept, red, red_mem, write, in_base, out_base, index_base, zero_last, _span, n_out,
     group_full) = layout
    # positions a group reads, and the span of their logical indices
    if len(red) == 1:                   # (the common case: no loop)
        group, red_span = red[0][0], (red[0][0] - 1) * abs(red[0][2])
    else:
        group, red_span = 1, 0
        for d in red:
            group *= d[0]
            red_span += (d[0] - 1) * abs(d[2])
    smem_key = 16 if itemsize == 16 else (8 if itemsize == 8 else 4)   # keys in registers
    base_byte = int(base_address) + in_base * itemsize
    align = itemsize if element_align is None else int(element_align)
    narrow = align < itemsize and base_byte % itemsize != 0
    target_threads = props.sm_count * props.max_threads_per_sm
    block_threads = min(BLOCK, props.max_threads_per_block)
    busy = busy_blocks(n_out * group * itemsize, props.sm_count)
    r0 = red[0][1] if red else None
    k0 = kept[0][1] if kept else None
    if r0 is not None and (k0 is None or k0 == 0 or r0 < k0):
        kernel, case = "row", ("row" if r0 == 1 else "general")
        vec, team, block, grid_x, step, nchunks, shared, write_step = _row_team(
            kept, red, red_mem, itemsize, group, n_out, hardmax, base_byte, smem_key,
            target_threads, block_threads, min_block_team_vecs, min_split_elements,
            min_work_per_thread, busy)
    else:
        kernel, case = "col", ("column" if k0 == 1 else "general")
        vec, team, block, grid_x, step, nchunks, shared, write_step = _column(
            kept, red, k0, itemsize, group, n_out, (write, out_base) if hardmax else None,
            base_byte, smem_key, target_threads, block_threads, min_split_elements,
            min_work_per_thread, busy)
    if nchunks > 1 and min_scratch_ratio > 0:
        nchunks = _split_chunks(kernel, hardmax, force_64bit, red, write, itemsize, group,
                                group_full, n_out, grid_x, nchunks, props.sm_count,
                                target_threads, min_scratch_ratio, busy)
    case, chunk, nchunks, passes, finish, write_chunk, decoded = _chunks_of(
        case, kernel, hardmax, team == block_threads, write, group, group_full, n_out, grid_x,
        nchunks, r0, vec, itemsize, smem_key, props.sm_count, target_threads, busy,
        min_decode_block_vecs, min_scratch_ratio)
    finish_block, finish_grid, finish_shared = finish
    use_64bit = _needs_64bit(force_64bit, hardmax, layout, vec, group, step, chunk, write_step,
                             write_chunk, nchunks, red_span)
    return _new_plan((
        case, kernel, bool(hardmax), use_64bit, itemsize, n_out, group, group_full, in_base,
        out_base, index_base, zero_last, kept, red, red_mem, write, vec, team, step, write_step,
        block, (grid_x, nchunks, 1), shared, chunk, nchunks, passes, finish_block, finish_grid,
        finish_shared, write_chunk, itemsize,     # (partial keys at the value's own width)
        # (one chunk is the whole group: the bound of its relative indices is the group's span)
        _index_width(red_span if nchunks == 1 else partial_index_bound(red, chunk),
                     8 if use_64bit else 4), bool(narrow), decoded))


def _row_team(kept, red, red_mem, itemsize, group, n_out, hardmax, base_byte, smem_key,
              target_threads, block_threads, min_block_team_vecs, min_split_elements,
              min_work_per_thread, busy):
    """Kernel ``row`` (case ``"row"``, or ``"general"`` when the innermost reduced stride is not
    1): a team of 1..32 lanes, or the whole block, reduces each group with vector loads of
    ``vec`` elements. Returns ``(vec, team, block, grid_x, step, nchunks, shared,
    write_step)``; ``nchunks`` > 1 asks to split few big groups across blocks along grid.y.
    ``busy``: the blocks the reading pass should have (:func:`busy_blocks`): warp teams that
    would give fewer become whole blocks, which the decode plan then splits."""
    vec = 1
    if red[0][1] == 1:
        # vector loads of 16 or 4 bytes (the widths the kernel compiles), else scalars: every
        # other input stride a multiple of the width (a power of two, so of the strides'
        # bitwise or; negative strides too)
        others = 0
        for d in kept:
            others |= d[1]
        for d in red[1:]:
            others |= d[1]
        for v in row_vec_widths(itemsize):
            if red[0][0] % v == 0 and base_byte % (v * itemsize) == 0 and others % v == 0:
                vec = v
                break
        inner_vecs = red_mem[0][0] // vec
    else:
        inner_vecs = red[0][0]
    group_vecs = group // vec
    # hardmax writes its group with the same team, one element per lane: size the team by
    # elements so a warp's stores cover whole sectors (team: a power of two, as _pow2ceil)
    n = red_mem[0][0] if hardmax else inner_vecs
    team = min(32, (1 << (n - 1).bit_length()) if n > 1 else 1)
    # (a warp already spans a row: a block team's warps read whole rows too)
    few = team == 32 and -(-n_out // (block_threads // 32)) < busy
    if (group_vecs >= min_block_team_vecs or few) and n_out * team < target_threads:
        team = block_threads
    grid_x = -(-n_out // max(1, block_threads // team))
    nchunks, shared = 1, 0
    if team == block_threads:
        threads = n_out * team
        # split across blocks: few outputs, big groups
        if threads < target_threads and n_out * group >= min_split_elements:
            want = -(-target_threads // threads)
            most = group_vecs // (block_threads * min_work_per_thread)
            nchunks = max(1, min(want, most, MAX_GRID_Y))
        shared = _smem(block_threads // 32 + 1, smem_key, 8)
    return vec, team, (block_threads, 1, 1), grid_x, team * vec, nchunks, shared, team


def _column(kept, red, k0, itemsize, group, n_out, hardmax, base_byte, smem_key,
            target_threads, block_threads, min_split_elements, min_work_per_thread, busy):
    """Kernel ``col`` (case ``"column"``, or ``"general"`` when the innermost kept stride ``k0``
    is not 1): threads x run over outputs (coalesced loads across the warp), threads y
    interleave over the group and combine in shared memory. Returns :func:`_row_team`'s tuple
    (team 1; ``vec``: neighbouring groups a thread owns). A grid of fewer than ``busy`` blocks
    is split along grid.y into at least that many, down to one position a thread.
    ``hardmax``: None, or hardmax's ``(write list, output base)``."""
    vec = 1
    k0n = kept[0][0] if kept else 1
    # values narrower than 4 bytes: a thread owns 4 // itemsize neighbouring groups of the
    # contiguous innermost kept dimension and reads them with one 4-byte load (hardmax: and
    # writes their one-hots a 4-byte word a position, where the output is laid out so too)
    for v in (col_vec_widths(itemsize) if k0 == 1 else ()):
        if (k0n % v == 0 and all(d[1] % v == 0 for d in kept[1:])
                and all(d[1] % v == 0 for d in red)
                and base_byte % (v * itemsize) == 0
                and (not hardmax or _packed_out(kept, *hardmax, v))):
            vec = v
            break
    n_vec_out = n_out // vec
    n = min(k0n // vec, n_vec_out)          # (powers of two, as _pow2ceil)
    bx = min(32, (1 << (n - 1).bit_length()) if n > 1 else 1)
    # narrower blocks instead of a split where that brings the grid up to ``busy``: a row of a
    # warp's load still covers whole 32-byte sectors
    narrow_bx = bx
    while -(-n_vec_out // narrow_bx) < busy and narrow_bx * vec * itemsize > 32:
        narrow_bx //= 2
    if -(-n_vec_out // bx) < busy <= -(-n_vec_out // narrow_bx):
        bx = narrow_bx
    by = max(1, min(block_threads // bx, (1 << (group - 1).bit_length()) if group > 1 else 1))
    grid_x = -(-n_vec_out // bx)
    threads = grid_x * bx * by
    nchunks = 1
    if threads < target_threads and (n_out * group >= min_split_elements or grid_x < busy):
        want = -(-target_threads // threads)
        most = max(group // (by * min_work_per_thread), min(-(-busy // grid_x), group // by))
        nchunks = max(1, min(want, most, MAX_GRID_Y))
    shared = _smem(bx * by * vec, smem_key, 8) if by > 1 else 0
    return vec, 1, (bx, by, 1), grid_x, by, nchunks, shared, by


def _packed_out(kept, write, out_base, v) -> bool:
    """Whether a hardmax output takes one word of ``v`` neighbouring groups a position: the
    innermost kept dimension is contiguous in the output too, and every other output offset
    (kept strides, write strides, the base) is a multiple of ``v`` elements."""
    return (kept[0][2] == 1 and all(d[2] % v == 0 for d in kept[1:])
            and all(d[1] % v == 0 for d in write) and out_base % v == 0)


def _split_chunks(kernel, hardmax, force_64bit, red, write, itemsize, group, group_full, n_out,
                  grid_x, nchunks, sm_count, target_threads, min_scratch_ratio, busy) -> int:
    """Case ``"split"``: the chunks of a group split ``nchunks`` ways along grid.y, fewer where
    the partials' traffic would pass 1 / ``min_scratch_ratio`` of the input bytes.

    Scratch bytes per group: nchunks partials stored, then loaded by each finish block of the
    group (hardmax: every write block of grid.y re-reduces them); the index width grows with
    the chunk, so the two are settled together."""
    idx_bytes = 8 if (force_64bit or n_out * group >= LIMIT_32) else 4   # (a first guess)
    # finish blocks per group (grid.y of the finish pass): argmin/argmax's one, hardmax's
    # write blocks
    reads = _finish_layout(kernel, hardmax, n_out, group_full, target_threads, nchunks,
                           _most_writers(hardmax, group, itemsize, nchunks, min_scratch_ratio),
                           _write_unit(write, itemsize))[3] if hardmax else 1
    most_chunks = nchunks                   # (> 1 here, and never below 1)
    for _ in range(4):
        width = partial_index_width(red, -(-group // most_chunks), idx_bytes)
        per_chunk = (itemsize + width) * (1 + reads) * min_scratch_ratio   # keys: itemsize
        fewer = min(most_chunks, (group * itemsize) // per_chunk)
        if fewer == most_chunks:
            break
        most_chunks = max(1, fewer)
    # ...but argmin/argmax never go below two blocks per SM: a grid that leaves SMs idle
    # loses more bandwidth to memory latency than the partials cost in traffic. (hardmax
    # keeps the limit: its finish pass rereads the partials, and a group that fits a block
    # is best served by the fused kernel that reads it once and writes it once.)
    # (and no plan goes below ``busy`` blocks, :func:`busy_blocks`)
    keep_busy = min(nchunks, max(-(-busy // max(1, grid_x)),
                                 1 if hardmax else -(-2 * sm_count // max(1, grid_x))))
    return max(1, keep_busy, min(nchunks, most_chunks))


def _decode_chunks(group, n_out, sm_count, r0, vec, itemsize, min_decode_block_vecs,
                   busy=0):
    """Case ``"decode"``: argmin/argmax over few big groups, each reduced by whole blocks of the
    row kernel, that the plan so far spreads over fewer blocks than half the SMs: one launch of
    up to two blocks per SM, at least half the SMs, the last block of each group combining its
    partials. Returns ``(chunk, nchunks)`` (:func:`_chunking`, which gives the same pair again
    for these ``nchunks``), or None where that does not reach half the SMs, or ``busy`` blocks
    where that is fewer (> 0: the plan so far has fewer than :func:`busy_blocks`)."""
    most = min(group // vec // min_decode_block_vecs, MAX_GRID_Y)
    per_group = min(-(-2 * sm_count // n_out), most)
    if per_group > 1:
        chunks = _chunking(group, per_group, "row", r0, vec, itemsize)
        half = -(-sm_count // 2)
        if n_out * chunks[1] >= (min(half, busy) if busy else half):
            return chunks
    return None


def busy_blocks(nbytes: int, sm_count: int) -> int:
    """The blocks at least that the reading pass of a plan reading ``nbytes`` launches:
    min(SM count, one per :data:`BUSY_BLOCK_BYTES`) from :data:`BUSY_MIN_BYTES` on, else 0 (no
    floor). Fewer blocks leave SMs idle, and the few that run cannot keep enough loads in flight
    to cover the memory latency (a block keeps a few KiB in flight)."""
    if nbytes < BUSY_MIN_BYTES:
        return 0
    return min(int(sm_count), nbytes // BUSY_BLOCK_BYTES)


def _logical_write(write) -> bool:
    """Whether the hardmax write list is one dimension of weight 1: position q has logical
    index q, which the one-launch hardmax needs, as its last block writes the winner's 1 at
    q = the winning index (group offset + winner x the write stride: no odometer)."""
    return len(write) == 1 and write[0][2] == 1


def _chunks_of(case, kernel, hardmax, block_team, write, group, group_full, n_out, grid_x,
               nchunks, r0, vec, itemsize, smem_key, sm_count, target_threads, busy,
               min_decode_block_vecs, min_scratch_ratio) -> tuple:
    """``(case, chunk, nchunks, passes, (finish block, grid, shared), write_chunk, decode)``:
    the one-launch ``"decode"`` plan where the row kernel's block teams would leave SMs idle
    (fewer blocks than half the SMs or than ``busy``), else ``nchunks`` > 1 is a two-launch
    ``"split"`` (:func:`_chunking`, :func:`_finish_layout`). A hardmax decode zeroes its one-hot
    in ``write_chunk`` positions a block and the group's last block writes the 1."""
    decoded = None
    if (block_team and kernel == "row" and min_decode_block_vecs > 0
            and grid_x * nchunks < max(-(-sm_count // 2), busy)
            and (not hardmax or _logical_write(write))):
        decoded = _decode_chunks(group, n_out, sm_count, r0, vec, itemsize,
                                 min_decode_block_vecs, busy if grid_x * nchunks < busy else 0)
    if decoded is not None:
        chunk, nchunks = decoded
        write_chunk = 0
        if hardmax:        # (whole sectors a block where the output is contiguous)
            unit = max(1, 32 // itemsize)
            write_chunk = -(-(-(-group_full // nchunks)) // unit) * unit
        return "decode", chunk, nchunks, 1, _NO_FINISH[:3], write_chunk, True
    if nchunks > 1:
        chunk, nchunks = _chunking(group, nchunks, kernel, r0, vec, itemsize)
        if nchunks > 1:
            fbx, fby, fgx, wsplit, write_chunk = _finish_layout(
                kernel, hardmax, n_out, group_full, target_threads, nchunks,
                _most_writers(hardmax, group, itemsize, nchunks, min_scratch_ratio),
                _write_unit(write, itemsize))
            finish_shared = _smem(fbx * fby, smem_key, 8) if fby > 1 else 0
            return ("split", chunk, nchunks, 2, ((fbx, fby, 1), (fgx, wsplit, 1), finish_shared),
                    write_chunk, False)
    return case, group, 1, 1, _NO_FINISH[:3], 0, False


def _chunking(group, nchunks, kernel, r0, vec, itemsize) -> tuple:
    """``(chunk, nchunks)``: ``group`` positions cut into about ``nchunks`` chunks, ``(group,
    1)`` where that leaves one. A chunk of the row kernel holds whole vectors, and one of a
    contiguous reduction (``r0``, the innermost reduced stride, is 1) starts on a 32-byte
    sector, as the group does: a warp's vector load straddling one more sector would cost
    1/16 more traffic. A column chunk holds a multiple of the rows that span whole sectors
    (``r0`` x itemsize bytes a row), so a warp's rows do not straddle one more either."""
    if kernel == "row":
        unit = math.lcm(vec, max(1, 32 // itemsize)) if r0 == 1 else vec
    else:                # column: a chunk's first row (r0 elements apart) starts on a sector
        unit = 32 // math.gcd(32, abs(r0 or 1) * itemsize)
    chunk = -(-group // nchunks)
    chunk = -(-chunk // unit) * unit
    nchunks = -(-group // chunk)
    if nchunks <= 1:
        return group, 1
    # every chunk holds at least one position: a partial of an empty chunk would carry
    # ArBest's "empty" marker, whose index a compact relative partial cannot represent
    if (nchunks - 1) * chunk >= group:                     # pragma: no cover - an invariant
        raise RuntimeError(f"plan_argreduce: chunk {chunk} x {nchunks} leaves an empty chunk "
                           f"of a group of {group}")
    return chunk, nchunks


def _needs_64bit(force_64bit, hardmax, layout, vec, group, step, chunk, write_step, write_chunk,
                 nchunks, red_span) -> bool:
    """32 or 64-bit internal indexing: 64 bits where any offset, position, index or count the
    kernels compute (plus a thread's last stride past its range) reaches :data:`LIMIT_32`, or
    where ``force_64bit`` asks for it."""
    (_, _, _, _, in_base, _, index_base, zero_last, span_in, n_out, group_full) = layout
    return bool(force_64bit) or max(
        span_in + abs(in_base) + vec,
        group + step + chunk,
        group_full + max(write_step, FINISH_BLOCK) + write_chunk,
        n_out * nchunks + n_out,
        (n_out * group_full if hardmax else n_out),
        abs(index_base) + abs(zero_last) + red_span,
    ) >= LIMIT_32


#: an ArgreducePlan from all its fields, in order (the named tuple's generated ``__new__``
#: binds its 34 arguments by name: 0.4 µs more per plan)
_new_plan = functools.partial(tuple.__new__, ArgreducePlan)


#: the row kernel's vector widths in elements, widest first, per itemsize (16- and 4-byte
#: loads; a width of 1 element is no vector)
def _vec_widths(itemsize):
    return tuple(v for v in (16 // itemsize, 4 // itemsize) if v > 1)


_VEC_WIDTHS = {s: _vec_widths(s) for s in (1, 2, 4, 8, 16)}


def row_vec_widths(itemsize: int) -> tuple:
    """The row kernel's vector widths above 1 element the planner may pick (widest first)."""
    return _VEC_WIDTHS.get(itemsize) or _vec_widths(itemsize)


def col_vec_widths(itemsize: int) -> tuple:
    """The column kernel's groups a thread above 1 the planner may pick (:func:`_column`)."""
    return (4 // itemsize,) if itemsize < 4 else ()


def _write_unit(write, itemsize) -> int:
    """The one-hot positions of a hardmax finish write block that span whole 32-byte sectors
    (by the output stride of the write list's first dimension), 1 without one: the same figure
    where the split is cut (:func:`_split_chunks`) and where its finish is laid out."""
    return 32 // math.gcd(32, abs(write[0][1]) * itemsize) if write else 1


def _most_writers(hardmax, group, itemsize, nchunks, min_scratch_ratio) -> int:
    """The most write blocks a group of a hardmax split's finish pass gets: each rereads the
    group's ``nchunks`` partials (a key of ``itemsize`` bytes and an index of at most 8), and
    together they read at most 1 / ``min_scratch_ratio`` of the group's bytes (0: no limit)."""
    if not hardmax or min_scratch_ratio <= 0:
        return MAX_GRID_Y
    return max(1, group * itemsize // (min_scratch_ratio * nchunks * (itemsize + 8)))


def _finish_layout(kernel, hardmax, n_out, group_full, target_threads, nchunks,
                   most_writers=MAX_GRID_Y, write_unit=1) -> tuple:
    """The finish pass of a ``"split"`` plan (its second launch): ``(block x, block y, grid x,
    grid y, write_chunk)``. Threads x run over groups, y over the partials (and the one-hot
    positions): a group of a row layout is written along y (contiguous positions), a column
    layout along x. argmin/argmax give a group no more threads y than it has partials
    (``nchunks``); hardmax cuts each group's one-hot write into grid.y blocks of
    ``write_chunk`` positions (grid y: write blocks per group), at most ``most_writers``
    (:func:`_most_writers`: each rereads the group's partials), a multiple of ``write_unit``
    (positions whose one-hot spans whole sectors)."""
    if hardmax and kernel == "row":
        fbx = 1
    else:
        fbx = min(32, _pow2ceil(n_out))
    fby = FINISH_BLOCK // fbx
    fgx = -(-n_out // fbx)
    write_chunk = 0
    wsplit = 1
    if hardmax:
        wblocks_want = max(1, -(-target_threads // (FINISH_BLOCK * fgx)))
        wblocks_most = max(1, group_full // (fby * 4))
        wsplit = max(1, min(wblocks_want, wblocks_most, most_writers, MAX_GRID_Y))
        write_chunk = -(-(-(-group_full // wsplit)) // write_unit) * write_unit
        wsplit = -(-group_full // write_chunk)
    else:
        fby = max(1, min(fby, _pow2ceil(nchunks)))
    return fbx, fby, fgx, wsplit, write_chunk


#: the finish fields of a plan without a finish pass: block, grid, shared memory, write_chunk
_NO_FINISH = ((1, 1, 1), (1, 1, 1), 0, 0)


def step_digits(step: int, sizes) -> tuple:
    """The mixed-radix digits of a constant per-thread stride over ``sizes`` (what the kernels'
    odometer adds each iteration)."""
    if len(sizes) == 1:
        return (int(step),)
    if sizes and 0 <= step < sizes[0]:      # (the common case: the step stays in digit 0)
        return (int(step),) + _ZEROS[len(sizes) - 1]
    return _digits(int(step), list(sizes)) if sizes else ()


_ZEROS = tuple((0,) * n for n in range(MAX_DIMS))


# ------------------------------------------------------------------------- plan of an array

#: extra keywords for the planners (tests set e.g. ``min_split_elements=0`` to split small
#: inputs across blocks); empty in normal use. While it is set, no call has a key
#: (cupyops.core.trace.planner_options_set).
PLAN_OPTIONS: dict = {}
_trace.PLANNER_OPTION_HOLDERS.append(sys.modules[__name__])


def plan_for(shape, strides, dtype, address, axes, props, *, hardmax, force_64bit,
             c_contiguous) -> ArgreducePlan:
    """The plan of an array (non-empty) over ``axes`` (sorted): a C-contiguous array, the
    common case, skips the general normalisation. ``address``: its data pointer."""
    base = address % 4096
    align = element_alignment(dtype)
    if c_contiguous:
        return plan_argreduce_contiguous(
            shape, dtype.itemsize, axes, props, force_64bit=force_64bit, hardmax=hardmax,
            base_address=base, element_align=align, **PLAN_OPTIONS)
    return plan_argreduce(shape, strides, dtype.itemsize, axes, props, force_64bit=force_64bit,
                          hardmax=hardmax, base_address=base, element_align=align,
                          **PLAN_OPTIONS)
