"""``SegParams``, the one parameter struct of the segment kernels (kernels/segment.cu, where
``static_assert``s pin the same size and offsets), and its packing from a plan
(cupyops.ops.segment.plan)."""
from __future__ import annotations

import numpy as np

from cupyops.core.structs import Struct

__all__ = ["SEG_PARAMS", "PARAMS_DTYPE", "MAX_DIMS", "build_params"]

#: trailing dimensions a kernel walks (SG_MAX_DIMS)
MAX_DIMS = 8

_I64, _U64, _I32 = "<i8", "<u8", "<i4"
#: ``struct SegParams`` of kernels/segment.cu, member for member
SEG_PARAMS = Struct("SegParams", [
    ("n", _I64), ("nseg", _I64), ("ncols", _I64), ("row_stride", _I64), ("off_stride", _I64),
    ("empty_index", _I64), ("empty_lo", _U64), ("empty_hi", _U64),
    ("off_width", _I32), ("off_signed", _I32), ("nblocks", _I32), ("cw_log2", _I32),
    ("wcap", _I32), ("chunk", _I32), ("is_min", _I32), ("last", _I32), ("relative", _I32),
    ("out_width", _I32), ("narrow", _I32), ("nr", _I32),
    ("r_size", _I64, MAX_DIMS), ("r_in", _I64, MAX_DIMS),
])
PARAMS_DTYPE = SEG_PARAMS.dtype


def build_params(plan, *, kind: str, tie: str, relative: bool, empty_index: int,
                 empty_bits: tuple, out_width: int) -> np.void:
    """The ``SegParams`` of one launch of ``plan`` (a NumPy structured scalar)."""
    empty = int(empty_index)
    if empty >= 1 << 63:          # a uint64 index's bits, as the int64 field holds them
        empty -= 1 << 64
    sizes = tuple(d[0] for d in plan.rest)
    strides = tuple(d[1] for d in plan.rest)
    return SEG_PARAMS.pack((
        plan.n, plan.nseg, plan.ncols, plan.row_stride, plan.off_stride, empty,
        empty_bits[0], empty_bits[1], plan.off_width, plan.off_signed, plan.nblocks,
        plan.cw_log2, plan.wcap, plan.chunk, kind == "min", tie == "last", bool(relative),
        out_width, plan.narrow, len(plan.rest), sizes, strides))
