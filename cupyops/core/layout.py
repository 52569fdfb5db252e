"""Dimension normalisation shared by the kernel planners (argreduce, count_nonzero, ...).

A strided traversal of an n-d array is described by a list of :class:`Dim`: a size and one
stride per *operand*. Operand 0 is the primary one (normally the input, strides in elements);
further operands are whatever else moves in lock-step with it, for instance an output array's
strides, or a "weight" that turns the position into a logical (row-major) index. The helpers
below rewrite such a list without changing the set of (offset_0, offset_1, ...) tuples it
visits, so a kernel can walk the simplified list instead of the original one:

* :func:`drop_unit` removes size-1 dimensions (they contribute offset 0 to every operand);
* :func:`flip_negative` makes every primary stride non-negative: a dimension of stride ``s < 0``
  and size ``n`` is walked backwards, which moves every operand's base by ``(n - 1) * stride``
  and negates all its strides (the element at the lowest address becomes the base);
* :func:`sort_by_stride` orders dimensions innermost first (smallest primary stride first);
  zero-stride (broadcast) dimensions go outermost by default, so the innermost dimension is a
  real memory dimension;
* :func:`merge` fuses neighbours ``inner, outer`` when, for every operand,
  ``stride_outer == stride_inner * size_inner``: the two then form one dimension of size
  ``size_inner * size_outer`` and stride ``stride_inner``.

:func:`normalize` chains them. Lists are innermost-first throughout (index 0 is the dimension
whose index varies fastest). A linear position ``p`` over a list ``dims`` is the mixed-radix
number with digit ``d`` in ``[0, dims[d].size)``, digit 0 least significant; merging keeps that
numbering (a merged dimension's digit is the inner digit plus the outer digit times the inner
size), and so does any coarser partition of the same sorted list — which is what lets a kernel
address memory through a merged list while decoding logical indices through a finer one.

Pure Python, no GPU: the planners are tested on any machine.
"""
from __future__ import annotations

import math
import operator
from typing import Iterable, Sequence

__all__ = ["Dim", "drop_unit", "flip_negative", "sort_by_stride", "merge", "normalize",
           "row_major_strides", "split_by_zero_stride", "span", "coarsen_to",
           "kept_and_reduced_sizes", "run_sizes"]


class Dim(tuple):
    """One dimension: ``size`` and one stride per operand (any unit the caller chooses).

    ``axis`` is the original logical axis (or the outermost logical axis of a merged
    dimension), kept for messages and tests; it takes no part in the arithmetic.

    An immutable ``(size, strides, axis)`` tuple: planners build dozens per first call of a
    layout, and a frozen dataclass costs twice as much to construct.
    """

    __slots__ = ()

    def __new__(cls, size: int, strides: tuple, axis: int = -1):
        if size < 0:
            raise ValueError(f"negative dimension size {size}")
        return tuple.__new__(cls, (size, tuple(map(int, strides)), axis))

    size = property(operator.itemgetter(0))
    strides = property(operator.itemgetter(1))
    axis = property(operator.itemgetter(2))

    def __repr__(self):
        return f"Dim(size={self[0]!r}, strides={self[1]!r}, axis={self[2]!r})"


def dims_from(shape: Sequence[int], *operand_strides: Sequence[int],
              axes: Iterable[int] | None = None) -> list:
    """Build :class:`Dim` objects for the logical ``axes`` (default: all) of a shape.

    ``operand_strides[k][i]`` is operand k's stride along axis i. The result is in logical
    order, *innermost first* (the last axis first), ready for :func:`normalize`.
    """
    axes = range(len(shape)) if axes is None else list(axes)
    out = [Dim(int(shape[a]), tuple(st[a] for st in operand_strides), int(a)) for a in axes]
    return out[::-1]


def row_major_strides(shape: Sequence[int]) -> tuple:
    """C-order strides in elements of ``shape`` (the weight of each axis in a row-major index)."""
    st = [0] * len(shape)
    acc = 1
    for i in range(len(shape) - 1, -1, -1):
        st[i] = acc
        acc *= max(int(shape[i]), 1)
    return tuple(st)


def drop_unit(dims: Sequence[Dim]) -> list:
    """Remove size-1 dimensions."""
    return [d for d in dims if d.size != 1]


def flip_negative(dims: Sequence[Dim], key: int = 0) -> tuple:
    """Make operand ``key``'s strides non-negative.

    Returns ``(dims, base_offsets)``: ``base_offsets[k]`` is what to add to operand k's base so
    that the flipped list visits the same tuples of offsets.
    """
    nops = len(dims[0].strides) if dims else 0
    base = [0] * nops
    out = []
    for d in dims:
        if d.strides[key] < 0:
            for k in range(nops):
                base[k] += (d.size - 1) * d.strides[k]
            d = Dim(d.size, tuple(-s for s in d.strides), d.axis)
        out.append(d)
    return out, tuple(base)


def sort_by_stride(dims: Sequence[Dim], key: int = 0, zeros: str = "outer") -> list:
    """Order innermost first by ``|stride|`` of operand ``key``.

    Equal strides keep their relative order (the input is innermost-first, so the logically
    inner axis stays inner). Zero-stride dimensions go ``"outer"`` (default) or ``"inner"``
    (ordinary sorting).
    """
    if zeros not in ("outer", "inner"):
        raise ValueError(f"zeros must be 'outer' or 'inner', got {zeros!r}")
    idx = list(range(len(dims)))

    def rank(i):
        s = abs(dims[i].strides[key])
        if s == 0 and zeros == "outer":
            return (1, 0, i)
        return (0, s, i)

    return [dims[i] for i in sorted(idx, key=rank)]


def merge(dims: Sequence[Dim], operands: Sequence[int] | None = None) -> list:
    """Fuse neighbours (innermost first) that are contiguous in every operand of ``operands``
    (default: all). Strides of the other operands are taken from the inner dimension, so only
    pass a subset when the caller does not need the others to stay exact."""
    out: list = []
    for d in dims:
        if out:
            inner = out[-1]
            ops = range(len(d.strides)) if operands is None else operands
            if all(d.strides[k] == inner.strides[k] * inner.size for k in ops):
                out[-1] = Dim(inner.size * d.size, inner.strides, d.axis)
                continue
        out.append(d)
    return out


def split_by_zero_stride(dims: Sequence[Dim], key: int = 0) -> tuple:
    """``(nonzero, zero)``: the dimensions whose operand-``key`` stride is not / is zero."""
    return ([d for d in dims if d.strides[key] != 0], [d for d in dims if d.strides[key] == 0])


def span(dims: Sequence[Dim], key: int = 0) -> int:
    """Largest |offset| reachable from the base through operand ``key``: sum of (n-1)*|s|."""
    return sum((d.size - 1) * abs(d.strides[key]) for d in dims)


def coarsen_to(fine: Sequence[Dim], coarse_sizes: Sequence[int]) -> list:
    """Group ``fine`` (innermost first) into runs whose size products are ``coarse_sizes``.

    Returns a list of lists of fine dimensions, one per coarse dimension. ``ValueError`` when
    ``coarse_sizes`` is not a coarser partition of ``fine``.
    """
    groups, i = [], 0
    for cs in coarse_sizes:
        run, prod = [], 1
        while prod < cs and i < len(fine):
            run.append(fine[i])
            prod *= fine[i].size
            i += 1
        if prod != cs:
            raise ValueError("not a coarser partition")
        groups.append(run)
    if i != len(fine):
        raise ValueError("not a coarser partition")
    return groups


def normalize(dims: Sequence[Dim], *, key: int = 0, merge_operands: Sequence[int] | None = None,
              zeros: str = "outer", nops: int | None = None) -> tuple:
    """drop_unit → flip_negative → sort_by_stride → merge.

    Returns ``(dims, base_offsets)`` (innermost first). ``merge_operands`` limits which
    operands must be contiguous for a merge (default: all). The number of elements is
    unchanged: ``math.prod(d.size for d in dims)``. ``nops`` (the number of operands) sizes
    ``base_offsets`` when ``dims`` may be empty.
    """
    if nops is None:
        nops = len(dims[0].strides) if dims else 0
    d = drop_unit(dims)
    d, base = flip_negative(d, key) if d else (d, (0,) * nops)
    d = sort_by_stride(d, key, zeros)
    d = merge(d, merge_operands)
    return d, base


def kept_and_reduced_sizes(shape: Sequence[int], axes) -> tuple:
    """``(product of the kept extents, product of the reduced ones)`` of ``shape`` over
    ``axes`` (a container of axis numbers)."""
    kept = reduced = 1
    for i, n in enumerate(shape):
        if i in axes:
            reduced *= n
        else:
            kept *= n
    return kept, reduced


def run_sizes(shape: Sequence[int], a0: int, a1: int) -> tuple:
    """``(outer, run, inner)``: the products of the extents before axis ``a0``, of axes
    ``a0 .. a1 - 1`` and after them."""
    outer = run = inner = 1
    for n in shape[:a0]:
        outer *= n
    for n in shape[a0:a1]:
        run *= n
    for n in shape[a1:]:
        inner *= n
    return outer, run, inner


def size_of(dims: Sequence[Dim]) -> int:
    return math.prod(d.size for d in dims)
