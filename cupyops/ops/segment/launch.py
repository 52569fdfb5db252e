"""Kernel path of segment_argmax / segment_argmin and their values forms (backend-generic).

One launch of ``segment_reduce<T, I>`` (or ``segment_reduce_values``) for any mix of segment
lengths (kernels/segment.cu): planned from x's layout, S and the offsets' layout
(cupyops.ops.segment.plan), the plan recorded in :mod:`cupyops.core.trace`, ``SegParams``
packed once per runner. No host synchronisation, no copy of x, no memset:

* scratch from the caller's Workspace or the stream's arena: the chain partials (per block
  and column: a wire word and a row) and each block's consumed range, written before they are
  read in every launch;
* the holder's zero state of kind ``"segment"`` (cupyops.core.workspace: zeroed once, when it
  is made): the chain tickets, the grid's ticket and the launch's error flag, which the
  kernel's last block resets, and the error code of the first bad offset found on the device,
  which the host clears when it reads it set.

Offsets checked on the host (``checked=True``: host offsets, every simt call) cannot set the
code. Offsets already on the GPU (``checked=False``) are checked by the kernel: the call arms
the code with its backend (``Backend.arm_flag``), so the next host read of the library
(``Backend.read_scalar``, ``cupyops.core.backend.check_device_errors()``) raises the
``ValueError`` that names the call and the first bad position; the kernel then set that call's whole result to
empty_index (values: the empty value).
"""
from __future__ import annotations

import functools
import typing

import numpy as np

from cupyops.core import trace as _trace
from cupyops.core import workspace as _workspace
from cupyops.core.arrays import data_ptr
from cupyops.ops.segment import family as _family
from cupyops.ops.segment import plan as _plan
from cupyops.ops.segment.numpy_path import empty_value
from cupyops.ops.segment.params import build_params

__all__ = ["runner", "run", "prepare", "SegLaunch", "describe_code", "kernel_offsets"]

_INT64 = np.dtype(np.int64)
#: grid.y's limit: strips of 256 trailing positions
MAX_STRIPS = 65535
#: state words before the chain tickets (kernels/segment.cu, SG_ZW_CHAINS)
STATE_HEAD = 4
_U8 = np.dtype(np.uint8)
#: error kinds of the code (SG_ERR_*), by priority at one position
_KINDS = {3: "is negative", 2: "is smaller than offsets[{prev}]", 1: "is past the end of x's "
          "axis 0 (length {n})"}


class SegLaunch(typing.NamedTuple):
    """One call's launch, from its layout and options."""

    plan: _plan.SegPlan
    main: tuple              # (family, value dtype, expr)
    cfg: tuple               # checked (grid, block, shared_mem)
    params: object           # the packed SegParams, as the backend passes it
    out_shape: tuple
    out_dtype: np.dtype
    values_dtype: np.dtype | None
    scratch: tuple           # ((shape, dtype), ...): partial words, partial rows, ranges
    opname: str
    state: tuple             # (bytes, derive) of the state words (tickets, error code)


def _empty_bits(dtype, kind, datetime) -> tuple:
    """(lo, hi) uint64 words of an empty segment's value: x's bits of numpy_path.empty_value."""
    raw = np.asarray(empty_value(np.dtype("m8[ns]") if datetime else dtype, kind)).tobytes()
    raw += bytes(16 - len(raw))
    return int.from_bytes(raw[:8], "little"), int.from_bytes(raw[8:], "little")


def kernel_offsets(offsets):
    """The offsets as the kernel reads them: native byte order, a data pointer and a stride that
    are multiples of their itemsize (a copy otherwise; a few bytes a segment: the kernel reads
    each offset with one load of its width, which a GPU faults on when misaligned)."""
    isz = offsets.dtype.itemsize
    if not offsets.dtype.isnative or offsets.strides[0] % isz or data_ptr(offsets) % isz:
        xp = np if isinstance(offsets, np.ndarray) else __import__("cupy")
        return xp.array(offsets, dtype=offsets.dtype.newbyteorder("="), copy=True, order="C")
    return offsets


def prepare(backend, x, offsets, call, *, kind, tie, values, force_64bit=False,
            datetime=False) -> SegLaunch:
    """The launch for kernel input ``x`` (non-empty), kernel ``offsets`` (1-D, S + 1 >= 2
    values) and ``call`` (cupyops.ops.segment.rules.SegmentCall)."""
    isz = offsets.dtype.itemsize
    plan = _plan.plan_for(x.shape, x.strides, x.dtype, data_ptr(x), call.n_segments,
                          offsets.dtype, offsets.strides[0] // isz, values=values,
                          force_64bit=force_64bit)
    if plan.ny > MAX_STRIPS:
        raise ValueError(f"{call.opname}: x has {plan.ncols} positions after axis 0, more than "
                         f"the kernel's {MAX_STRIPS << 8} (grid.y strips of 256 columns); "
                         f"reduce them in parts, or on device='cpu'")
    vdt = _family.DATETIME if datetime else x.dtype
    main = ((_family.FLAT_FAMILY, vdt,
             _family.flat_expression(vdt, plan.use_64bit, tie == "last", values, plan.cols,
                                     plan.staged, plan.strips))
            if plan.flat or plan.cols
            else (_family.FAMILY, vdt, _family.expression(values, vdt, plan.use_64bit)))
    cfg = backend.check_launch(main[2], plan.grid, plan.block, plan.shared_mem)
    params = backend.struct_arg(build_params(
        plan, kind=kind, tie=tie, relative=call.relative, empty_index=call.empty_index,
        empty_bits=_empty_bits(x.dtype, kind, datetime) if values else (0, 0),
        out_width=call.index_dtype.itemsize))
    slots = 2 * plan.ny * plan.nblocks << plan.cw_log2
    scratch = (((slots * _family.key_itemsize(plan.itemsize),), _U8),
               ((slots * (8 if plan.use_64bit else 4),), _U8), ((2 * plan.nblocks,), _INT64))
    return SegLaunch(plan, main, cfg, params, tuple(call.result_shape), call.index_dtype,
                     (_INT64 if datetime else x.dtype) if values else None, scratch, call.opname,
                     _state_views(STATE_HEAD + plan.ny * plan.nblocks))


def runner(backend, x, offsets, call, *, kind, tie, values, force_64bit=False, datetime=False):
    """``run(x, offsets, workspace=None, out=None, checked=True)`` for arrays laid out like
    ``x`` and ``offsets`` (see :func:`run`)."""
    launch = prepare(backend, x, offsets, call, kind=kind, tie=tie, values=values,
                     force_64bit=force_64bit, datetime=datetime)
    return functools.partial(run, run_state(backend, launch))


class RunState(typing.NamedTuple):
    """What :func:`run` reads, flat (``run`` unpacks it by position: a tuple's cost)."""

    backend: object
    plan: _plan.SegPlan
    main: tuple              # (family, value dtype, expr)
    grid: tuple
    block: tuple
    shared_mem: int
    params: object
    out_shape: tuple
    out_dtype: np.dtype
    values_dtype: np.dtype | None
    scratch: tuple
    state: tuple
    describe: object         # the error of a device error code (offsets on the GPU)


def run_state(backend, launch: SegLaunch) -> RunState:
    """What :func:`run` reads of ``launch``, bound once per runner."""
    return RunState(backend, launch.plan, launch.main, *launch.cfg, launch.params,
                    launch.out_shape, launch.out_dtype, launch.values_dtype, launch.scratch,
                    launch.state, functools.partial(describe_code, launch.opname, launch.plan.n))


def describe_code(opname, n, code) -> str:
    """The error of a device error code (kernels/segment.cu, sg_bad_offsets)."""
    pos = (1 << 62) - 1 - (int(code) >> 2)
    what = _KINDS.get(int(code) & 3, "breaks the rules").format(prev=pos - 1, n=n)
    return (f"{opname}: offsets on the GPU break the rules: offsets[{pos}] {what} (offsets must "
            f"be non-decreasing, with offsets[0] >= 0 and offsets[-1] <= n); the kernel set "
            f"that call's whole result to empty_index (values: the empty value)")


def run(state, x, offsets, workspace=None, out=None, checked=True):
    """One launch: the indices (values mode: ``(values, indices)``) of shape (S, *rest).
    ``out``: None, or (values mode: a pair of) C-contiguous arrays of that shape written
    directly (each may be None). ``checked=False``: offsets already on the device, whose
    error code is armed for the next host read."""
    (backend, plan, main, grid, block, smem, params, out_shape, out_dtype, values_dtype,
     scratch, state_spec, describe) = state
    _trace.record_plan(plan)
    vout = iout = None
    if out is not None:
        vout, iout = out if type(out) is tuple else (None, out)
    scope, stream = backend.begin()
    with scope:
        res = iout if iout is not None else backend.alloc(out_shape, out_dtype)
        vres = None
        if values_dtype is not None:
            vres = vout if vout is not None else backend.alloc(out_shape, values_dtype)
        holder = _workspace.holder_for(backend, workspace, backend.stream_key(stream))
        with holder.lock:
            pk, pi, cons = holder.carve(scratch)
            zw, code = holder.state(STATE_KIND, *state_spec)
            args = (x, offsets, res, pk, pi, cons, zw, params) if vres is None else \
                (x, offsets, res, vres, pk, pi, cons, zw, params)
            try:
                backend.launcher(*main)(grid, block, args, smem, stream)
            except BaseException:
                holder.discard_state(STATE_KIND)
                raise
            if not checked:
                # offsets already on the GPU: the next host read of this backend checks the
                # launch's error code, on its stream (one entry per state buffer: a later
                # call's arming replaces it); a launch captured into a CUDA graph keeps its
                # entry armed, so every later host read checks what its replays recorded
                backend.arm_flag(code, describe, (STATE_KIND, id(code)), stream,
                                 backend.stream_capturing(stream))
    return res if vres is None else (vres, res)


#: the state kind of the segment kernels' tickets and error code (zero at rest, but for a
#: code the host has not read yet)
STATE_KIND = "segment"
_STATE_VIEWS: dict = {}


def _state_views(nwords):
    """(bytes, derive) of ``nwords`` uint32 state words: ``derive(buf)`` gives (the words as
    the kernel gets them, the error code as one uint64)."""
    hit = _STATE_VIEWS.get(nwords)
    if hit is None:
        hit = _STATE_VIEWS[nwords] = (4 * nwords, functools.partial(_words_of, nwords))
    return hit


def _words_of(nwords, buf):
    zw = buf[:4 * nwords].view(np.uint32)
    return zw, zw[:2].view(np.uint64)
