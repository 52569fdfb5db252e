"""``ArParams``, the one parameter struct of the argmin / argmax / hardmax kernels
(kernels/argreduce.cu, where ``static_assert``s pin the same size and offsets), and its packing
from a plan.

The plan (cupyops.ops.argreduce.plan) says how a call runs; :func:`build_params` turns one of
its launches into the struct's bytes, once per layout (the launch code keeps them).
"""
from __future__ import annotations

import operator

import numpy as np

from cupyops.core.structs import Struct
from cupyops.ops.argreduce.plan import MAX_DIMS, ArgreducePlan, step_digits

__all__ = ["AR_PARAMS", "PARAMS_DTYPE", "build_params", "MODE_INDEX", "MODE_PARTIAL",
           "MODE_HARDMAX", "MODE_DECODE", "MODE_DECODE_HARDMAX"]

#: what the kernel writes: an index; a (key, index) partial per chunk; a one-hot; or partials
#: of which the last block of each group writes the index (the one-launch decode plan), or
#: for hardmax the 1 of a one-hot whose zeros every block wrote
MODE_INDEX, MODE_PARTIAL, MODE_HARDMAX, MODE_DECODE, MODE_DECODE_HARDMAX = 0, 1, 2, 3, 4

_I64, _I32 = "<i8", "<i4"
#: ``struct ArParams`` of kernels/argreduce.cu, member for member
AR_PARAMS = Struct("ArParams", [
    ("n_out", _I64), ("group", _I64), ("chunk", _I64), ("nchunks", _I64),
    ("in_base", _I64), ("out_base", _I64), ("index_base", _I64),
    ("wgroup", _I64), ("wchunk", _I64),
    ("nk", _I32), ("nd", _I32), ("nw", _I32), ("mode", _I32),
    ("last", _I32), ("is_min", _I32), ("out_width", _I32), ("team", _I32),
    ("vec", _I32), ("nan_skip", _I32), ("narrow_in", _I32), ("narrow_out", _I32),
    ("pidx_width", _I32),
    ("k_size", _I64, MAX_DIMS), ("k_in", _I64, MAX_DIMS), ("k_out", _I64, MAX_DIMS),
    ("d_size", _I64, MAX_DIMS), ("d_in", _I64, MAX_DIMS), ("d_w", _I64, MAX_DIMS),
    ("d_step", _I64, MAX_DIMS),
    ("w_size", _I64, MAX_DIMS), ("w_out", _I64, MAX_DIMS), ("w_w", _I64, MAX_DIMS),
    ("w_step", _I64, MAX_DIMS),
])
PARAMS_DTYPE = AR_PARAMS.dtype

_pack = AR_PARAMS.pack
_PLAN_HEAD = operator.attrgetter("n_out", "group", "chunk", "nchunks", "in_base", "out_base")
_NONE3 = ((), (), ())


def build_params(plan: ArgreducePlan, *, kind: str, tie: str, mode: int, out_width: int = 8,
                 finish: bool = False, nan_skip: bool = False,
                 narrow_out: bool = False) -> np.void:
    """The ``ArParams`` of one launch of ``plan`` (a NumPy structured scalar), its values in
    the struct's member order."""
    last = tie == "last"
    kept, red, write = plan.kept, plan.red, plan.write
    k_size, k_in, k_out = zip(*kept) if kept else _NONE3
    d_size, d_in, d_w = zip(*red) if red else _NONE3
    w_size, w_out, w_w = zip(*write) if write else _NONE3
    wstep = plan.finish_block[1] if finish else plan.write_step
    # (wchunk: the positions a block writes; the whole group where the plan does not cut it)
    # (the flags are bools: the struct packs them as 0 and 1)
    return _pack((
        *_PLAN_HEAD(plan), plan.index_base + (plan.zero_last_offset if last else 0),
        plan.group_full, plan.write_chunk or plan.group_full, len(kept), len(red), len(write), mode,
        last, kind == "min", out_width, plan.team, plan.vec, bool(nan_skip),
        bool(plan.narrow_loads), bool(narrow_out), plan.pidx_itemsize,
        k_size, k_in, k_out, d_size, d_in, d_w, step_digits(plan.step, d_size),
        w_size, w_out, w_w, step_digits(wstep, w_size)))
