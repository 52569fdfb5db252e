"""Kernel path of argmin / argmax / hardmax (backend-generic launch code).

Plans with :func:`cupyops.ops.argreduce.plan.plan_argreduce`, records the plan in
:mod:`cupyops.core.trace`, packs the plan into the ``ArParams`` struct of ``kernels/argreduce.cu``
and launches at most two kernels. No host synchronisation, no copy of the input.

Family ``"argreduce"`` (registered at import): per value dtype, the kernels ``argreduce_row``,
``argreduce_col`` and ``argreduce_finish``, each for ``I = int`` and ``I = long long``, the row
and column kernels also for the plan's ``vec`` (a template parameter: the launch names the
instantiation of its plan's; cupyops/ops/argreduce/family.py). datetime64 and timedelta64 of every unit run the module of
the one canonical dtype ``timedelta64[ns]`` (``cupyops_datetime``: int64 counts, NaT the
extreme) on the input viewed as int64 (CuPy has no datetime dtypes): ``datetime=True``.

nanargmin / nanargmax (``nan_skip=True``) are the same single pass with NaN mapped to the weakest
key; the kernel that stores an index sets a 4-byte all-NaN flag (zeroed before the launch) when
the group's winner is NaN, and :func:`argreduce` reads that flag once to raise NumPy's
"All-NaN slice encountered" (rules.all_nan_error, which names the group): one host read, only
for float and complex dtypes.

The ``"decode"`` plan (few big contiguous groups) is one launch of ``argreduce_row`` in mode
``MODE_DECODE``: the last block of each group, found with an atomic ticket, combines the
group's partials (hardmax, ``MODE_DECODE_HARDMAX``: every block zeroes its share of the one-hot
first, and the last block writes the 1). The tickets (one uint32 per group) follow the all-NaN
flag in state memory (cupyops.core.workspace: zeroed once, when it is made): the block that
draws a group's last ticket resets it to 0, and the all-NaN flag is set only for an all-NaN
group (then the host zeroes it again before raising), so each call, and each replay of a
captured CUDA graph, finds them 0 without a memset.

Values mode (``values=True``: max_and_argmax / min_and_argmin) runs the ``*_values`` twins of
the same kernels, which store the winner's value (x's raw bits at the index) next to its index
from the same single reduction: the runner returns ``(values, indices)``, both of the kept
shape, values in the kernel input's dtype (datetime: its int64 view). The partials of split and
decode plans carry the value's bits in the key slot (the finish pass and the last block
recompute the key), so a values output adds only its own stores. No nan_skip.
"""
from __future__ import annotations

import functools
import typing

import numpy as np

from cupyops.core import trace as _trace
from cupyops.core import workspace as _workspace
from cupyops.core.arrays import data_ptr
from cupyops.core.dtypes import datetime_as_int64, element_alignment
from cupyops.ops.argreduce import plan as _plan_module
from cupyops.ops.argreduce.family import (COL, COL_V, DATETIME, FAMILY, FINISH, FINISH_V, ROW,
                                          ROW_V, expression)
from cupyops.ops.argreduce.params import (MODE_DECODE, MODE_DECODE_HARDMAX, MODE_HARDMAX,
                                          MODE_INDEX, MODE_PARTIAL, build_params)
from cupyops.ops.argreduce.plan import ArgreducePlan
from cupyops.ops.argreduce.nan_groups import all_nan_error

__all__ = ["argreduce", "values_argreduce", "hardmax", "prepare", "launches_of", "runner",
           "run_state", "run", "execute", "execute_into", "prepare_argreduce", "prepare_hardmax",
           "ArgreduceLaunches", "RunState", "ROUNDED_SLOTS"]


def _plan(backend, x, axes, hardmax: bool, force_64bit: bool) -> ArgreducePlan:
    """The plan of ``x`` (non-empty) over ``axes`` (sorted), recorded in the trace."""
    plan = _plan_module.plan_for(x.shape, x.strides, x.dtype, data_ptr(x), axes, backend.props,
                                 hardmax=hardmax, force_64bit=force_64bit,
                                 c_contiguous=x.flags.c_contiguous)
    _trace.record_plan(plan)
    return plan


def _canonical(x, datetime):
    """(array the kernels read, value dtype of the module). datetime64 / timedelta64 of any
    unit (or their int64 view with ``datetime=True``) run as DATETIME. A complex array with a
    stride that is not a multiple of its itemsize (possible for complex64 views of float32 data)
    is the one layout the planner's element strides cannot express: it is copied."""
    if x.dtype.kind in "mM":
        x, datetime = datetime_as_int64(x), True
    if any(n > 1 and s % x.dtype.itemsize for n, s in zip(x.shape, x.strides)):
        x = _dense_copy(x)
    return x, (DATETIME if datetime else x.dtype)


def _dense_copy(x):
    """A C-contiguous copy of a complex array whose strides are only half-itemsize aligned.
    A CuPy copy goes through the real view (shape + (2,)): CuPy's own complex copy kernel would
    load each value with one itemsize-aligned load and fault."""
    if isinstance(x, np.ndarray):
        return x.copy()
    import cupy
    real = np.empty(0, x.dtype).real.dtype
    parts = cupy.ndarray(x.shape + (2,), real, memptr=x.data,
                         strides=tuple(x.strides) + (real.itemsize,))
    return cupy.ascontiguousarray(parts).view(x.dtype).reshape(x.shape)


_UINT32 = np.dtype(np.uint32)
_INT64 = np.dtype(np.int64)     # values of DATETIME: the kernel input's int64 view
#: split/decode partials: slot counts up to this are rounded up to a power of two
ROUNDED_SLOTS = 1024
_UINT = {1: np.dtype(np.uint8), 2: np.dtype(np.uint16), 4: np.dtype(np.uint32),
         8: np.dtype(np.uint64)}


def _partial_specs(plan, slots):
    """(shape, dtype) of the partial keys and of the partial indices, ``slots`` of each:
    keys at the value's own width (complex128: two uint64 words), indices relative to their
    chunk at the plan's compact width."""
    kbytes = plan.key_itemsize
    if kbytes == 16:
        return ((slots, 2), _UINT[8]), ((slots,), _UINT[plan.pidx_itemsize])
    return ((slots,), _UINT[kbytes]), ((slots,), _UINT[plan.pidx_itemsize])


class ArgreduceLaunches(typing.NamedTuple):
    """Everything one call does that follows from its layout and options: the plan, the
    kernels, the packed parameters and the scratch it carves. Built once per layout by
    :func:`prepare` for one layout (cupyops._call keeps the runner built from it), run by
    :func:`execute` on any array of that layout.
    (A named tuple: a first call of a new layout builds one, in a third of a frozen
    dataclass's time.)"""

    plan: ArgreducePlan
    value_dtype: np.dtype
    main: tuple            # (family, value dtype, expr) of the first launch
    main_cfg: tuple        # its (grid, block, shared_mem), checked
    params: np.void
    finish: tuple | None   # (family, value dtype, expr) of the finish launch, or None
    finish_cfg: tuple | None
    finish_params: np.void | None
    scratch: tuple         # (((shape, dtype), ...) of the partial keys and indices,
                           #  (bytes, derive) of the flag buffer (all-NaN flag + decode
                           #  tickets) in the zero state)
    out_shape: tuple
    out_dtype: np.dtype
    nan_skip: tuple | None     # nanarg*: (its name, the reduced axes) for the all-NaN error
    zero_flags: bool = False   # the plan uses the flag buffer (all-NaN flag, decode tickets)
    out_align: int = 1         # the alignment an out= must have (the kernels' store width)
    values_dtype: np.dtype | None = None   # values mode: the dtype of the values output


#: an ArgreduceLaunches from all its fields, in order (without the generated ``__new__``'s
#: argument binding)
_new_launches = functools.partial(tuple.__new__, ArgreduceLaunches)


#: the state kind of the all-NaN flag and the decode tickets (zero at rest)
STATE_ZERO = "zero"
_FLAG_VIEWS: dict = {}


def _flag_views(nflags):
    """(bytes, derive) of the flag buffer of ``nflags`` uint32 words in the state buffer:
    ``derive(buf)`` gives (the flag buffer as the kernels get it, the all-NaN flag)."""
    hit = _FLAG_VIEWS.get(nflags)
    if hit is None:
        hit = _FLAG_VIEWS[nflags] = (4 * nflags, functools.partial(_flags_of, nflags))
    return hit


def _flags_of(nflags, buf):
    flags = buf[:4 * nflags].view(_UINT32)
    return flags, flags[:1]


def prepare(backend, x, axes, *, hardmax: bool, kind: str, tie: str, out_dtype,
            force_64bit=False, nan_skip=False, narrow_out=False, value_dtype=None,
            values=False):
    """The launches of argmin/argmax (``hardmax=False``: ``out_dtype`` the index dtype; with
    ``values``, the extreme's value too) or hardmax (``out_dtype`` x's dtype) over ``axes`` of
    an array laid out like ``x`` (the canonical array the kernels read), planned for this call:
    nothing is kept here (cupyops._call keeps the runners it reuses)."""
    out_dtype = np.dtype(out_dtype)
    vdt = x.dtype if value_dtype is None else np.dtype(value_dtype)
    plan = _plan(backend, x, axes, hardmax, force_64bit)
    return launches_of(
        backend, plan, vdt, x.shape, axes, hardmax=hardmax, kind=kind, tie=tie,
        out_dtype=out_dtype, nan_skip=nan_skip, narrow_out=narrow_out, values=values)


def _check_values_mode(hardmax, nan_skip):
    if hardmax:
        raise ValueError("values=True: hardmax has no values output (argmin/argmax only)")
    if nan_skip:
        raise ValueError("values=True does not take skip_nan / nan_skip: the values kernels "
                         "treat NaN as the extreme (there is no nanmax_and_argmax)")


def launches_of(backend, plan, vdt, shape, axes, *, hardmax: bool, kind: str, tie: str,
                out_dtype, nan_skip=False, narrow_out=False,
                values=False) -> "ArgreduceLaunches":
    """The launches of ``plan`` (of an input of ``shape`` and value dtype ``vdt`` over
    ``axes``): kernels, checked configurations, packed parameters, scratch. ``values``: the
    values-mode kernels (the runner returns ``(values, indices)``). Nothing is kept here (see
    :func:`prepare`)."""
    if values:
        _check_values_mode(hardmax, nan_skip)
        row, col, fin = ROW_V, COL_V, FINISH_V
    else:
        row, col, fin = ROW, COL, FINISH
    main = (FAMILY, vdt, expression(row if plan.kernel == "row" else col, vdt, plan.use_64bit,
                                    plan.vec))
    arg = backend.struct_arg      # (the by-value struct as this backend passes it, made once)
    final_mode = MODE_HARDMAX if hardmax else MODE_INDEX
    out_width = 0 if hardmax else out_dtype.itemsize
    # the partials (one (key, index) slot per group and chunk, in two arrays of the plan's
    # compact widths, each carved at 256 bytes; a dummy slot for one pass) are
    # scratch: from the caller's workspace or the stream's never-freed arena, so a captured
    # graph's replays find them where the capture left them. Every slot is written by the
    # first launch before the finish reads it: no zeroing. The all-NaN flag and the decode
    # plan's tickets after it are state that is zero at rest (see the module docstring).
    # Up to ROUNDED_SLOTS, the partials get a power of two of slots (less than twice the
    # plan's; a few KiB): the carved views are kept per spec, so the new layouts of a pipeline
    # whose shapes vary reuse a few specs instead of carving views for every chunk count.
    slots = plan.n_out * plan.nchunks if (plan.passes > 1 or plan.last_block) else 1
    if slots <= ROUNDED_SLOTS:
        slots = 1 << (slots - 1).bit_length()
    nflags = 1 + (plan.n_out if plan.last_block else 0)
    scratch = (_partial_specs(plan, slots), _flag_views(nflags))
    main_cfg = backend.check_launch(main[2], plan.grid, plan.block, plan.shared_mem)
    finish = fparams = finish_cfg = None
    split = plan.passes > 1 and not plan.last_block
    if plan.last_block:
        mode = MODE_DECODE_HARDMAX if hardmax else MODE_DECODE
    else:
        mode = MODE_PARTIAL if split else final_mode
    params = arg(build_params(plan, kind=kind, tie=tie, mode=mode, out_width=out_width,
                              nan_skip=nan_skip, narrow_out=narrow_out))
    if split:
        finish = (FAMILY, vdt, expression(fin, vdt, plan.use_64bit))
        fparams = arg(build_params(plan, kind=kind, tie=tie, mode=final_mode,
                                   out_width=out_width, finish=True, nan_skip=nan_skip,
                                   narrow_out=narrow_out))
        finish_cfg = backend.check_launch(finish[2], plan.finish_grid, plan.finish_block,
                                          plan.finish_shared_mem)
        # two kernels, two modules: a first call builds both at once (threads), not the
        # finish's after the scan's launch
        backend.ensure_kernels((main, finish))
    if hardmax:
        out_shape = tuple(shape)
    else:
        out_shape = tuple([n for i, n in enumerate(shape) if i not in axes])
    return _new_launches((
        plan, vdt, main, main_cfg, params, finish, finish_cfg, fparams, scratch, out_shape,
        out_dtype, (f"nanarg{kind}", tuple(axes)) if nan_skip else None,
        bool(nan_skip) or plan.last_block,
        element_alignment(out_dtype) if narrow_out else out_dtype.itemsize,
        (_INT64 if vdt == DATETIME else vdt) if values else None))


def execute(backend, launches: ArgreduceLaunches, x, out=None, workspace=None):
    """Run ``launches`` on ``x`` (laid out as prepared) into ``out`` (C-contiguous, of the
    output shape and dtype) or a fresh array; returns it. nanarg*: one host read of the
    all-NaN flag, ``ValueError("nanargmax: All-NaN slice encountered: x[1, :] holds only
    NaN")`` when set (the group is found on the error path)."""
    return runner(backend, launches)(x, workspace, out)


def runner(backend, launches: ArgreduceLaunches, *, entry=None):
    """``run(x, workspace=None, out=None)``: :func:`execute` with everything it reads from
    ``launches`` bound once. ``entry=(prep, reshape)`` makes it a fast-path entry
    (cupyops.core.placement.entry_prep gives ``prep``) in the same call: it records the plan as the slow path
    does, reads ``prep(x)`` (prep None: x) and returns the result reshaped to ``reshape``
    (None: as it is).

    One ``functools.partial`` over one tuple, not a closure: a cached entry is then a handful
    of objects for the garbage collector to scan instead of a cell per bound name (a first
    call of a new layout adds one entry; full collections scan every entry)."""
    return functools.partial(run, run_state(backend, launches, entry))


class RunState(typing.NamedTuple):
    """What :func:`run` reads, named (``run`` unpacks it by position: a tuple's cost)."""

    plan: object           # the plan to record (a runner), or None (a first call records it)
    prep: object           # the input's preparation (cupyops.core.placement.entry_prep), or None
    reshape: tuple | None  # the result's shape (keepdims), or None
    out_shape: tuple
    out_dtype: np.dtype
    scratch: tuple         # the partials' specs and the zero state's (ArgreduceLaunches.scratch)
    nan_skip: tuple | None
    main: tuple            # (family, value dtype, expr) of the first launch
    params: object
    zero_flags: bool
    grid: tuple
    block: tuple
    shared_mem: int
    finish: tuple | None
    finish_params: object
    finish_grid: tuple | None
    finish_block: tuple | None
    finish_shared_mem: int | None
    out_align: int
    backend: object
    values_dtype: np.dtype | None


_new_run_state = functools.partial(tuple.__new__, RunState)


def run_state(backend, launches: ArgreduceLaunches, entry=None) -> RunState:
    """What :func:`run` reads (``run(state, x, workspace=None, out=None)``; a first call of a
    new layout runs it once without a runner)."""
    prep, reshape = entry if entry is not None else (None, None)
    finish_cfg = launches.finish_cfg or (None, None, None)
    return _new_run_state((
        launches.plan if entry is not None else None, prep, reshape, launches.out_shape,
        launches.out_dtype, launches.scratch, launches.nan_skip, launches.main, launches.params,
        launches.zero_flags, *launches.main_cfg, launches.finish, launches.finish_params,
        *finish_cfg, launches.out_align, backend, launches.values_dtype))


def run(state, x, workspace=None, out=None):
    """Run prepared launches on ``x``: the index array, or in values mode ``(values,
    indices)`` (``out``: None or such a pair, each None or C-contiguous; see
    :func:`_run_values`)."""
    (plan, prep, reshape, out_shape, out_dtype, scratch, nan_skip, main, params, zero_flags,
     grid, block, smem, finish, fparams, fgrid, fblock, fsmem, out_align, backend,
     values_dtype) = state
    if values_dtype is not None:
        return _run_values(state, x, workspace, out)
    if plan is not None:
        _record_plan(plan)
        if prep is not None:
            x = prep(x)
    if out is not None and data_ptr(out) % out_align:
        # the kernels store whole outputs (complex128 one-hots: 16 bytes) unless prepared
        # for a narrow out: a GPU faults on a store below its width's alignment
        raise ValueError(f"out's data pointer is not a multiple of {out_align} bytes, "
                         "which these launches were prepared for (prepare_hardmax "
                         "with this out)")
    scope, stream = backend.begin()
    with scope:
        res = backend.alloc(out_shape, out_dtype) if out is None else out
        holder = _holder_for(backend, workspace, backend.stream_key(stream))
        with holder.lock:
            pk, pi = holder.carve(scratch[0])
            flags, flag = holder.state(STATE_ZERO, *scratch[1])
            try:
                launcher = backend.launcher
                launcher(*main)(grid, block, (x, res, pk, pi, flags, params), smem, stream)
                if finish is not None:
                    launcher(*finish)(fgrid, fblock, (res, pk, pi, flags, fparams), fsmem,
                                      stream)
            except BaseException:
                holder.discard_state(STATE_ZERO)
                raise
            if nan_skip:
                _check_all_nan(backend, holder, flag, stream, nan_skip, x)
    return res if reshape is None else res.reshape(reshape)


def _check_all_nan(backend, holder, flag, stream, nan_skip, x):
    """Raise on an all-NaN group (the kernel set the flag); the flag is zero again after, also
    when the read itself raises (an interrupt, a capture): the zero state is then discarded,
    else the next call would find a stale flag (and count_nonzero's sums share those words)."""
    try:
        set_ = backend.read_flag(flag, "nanargmin/nanargmax", "to raise on an all-NaN group",
                                 "capture argmax/argmin, or check for NaN outside the graph",
                                 stream)
    except BaseException:
        holder.discard_state(STATE_ZERO)
        raise
    if set_:
        backend.zero_fill(flag, stream)     # (zero at rest for the next call)
        raise all_nan_error(nan_skip[0], x, nan_skip[1])


_record_plan = _trace.record_plan
_holder_for = _workspace.holder_for


def _run_values(state, x, workspace, out):
    """:func:`run` in values mode: one reduction stores the index and the value of each group
    (``(values, indices)``). ``out``: None or a pair ``(values_out, indices_out)``, each None
    (a fresh array) or C-contiguous of the kept shape and written directly; the values one
    aligned to its itemsize (the kernels store whole values)."""
    (plan, prep, reshape, out_shape, out_dtype, scratch, _, main, params, zero_flags,
     grid, block, smem, finish, fparams, fgrid, fblock, fsmem, out_align, backend,
     values_dtype) = state
    if plan is not None:
        _record_plan(plan)
        if prep is not None:
            x = prep(x)
    vout, iout = (None, None) if out is None else _pair(out)
    if vout is not None:
        _aligned(_fits(vout, out_shape, values_dtype, "values"), values_dtype.itemsize, "values")
    if iout is not None:
        _aligned(_fits(iout, out_shape, out_dtype, "indices"), out_align, "indices")
    if vout is not None and iout is not None and _may_overlap(vout, iout):
        raise ValueError("out's values and indices arrays overlap (the kernels store both)")
    scope, stream = backend.begin()
    with scope:
        vres = backend.alloc(out_shape, values_dtype) if vout is None else vout
        res = backend.alloc(out_shape, out_dtype) if iout is None else iout
        holder = _holder_for(backend, workspace, backend.stream_key(stream))
        with holder.lock:
            pk, pi = holder.carve(scratch[0])
            flags, _ = holder.state(STATE_ZERO, *scratch[1])
            try:
                launcher = backend.launcher
                launcher(*main)(grid, block, (x, res, vres, pk, pi, flags, params), smem, stream)
                if finish is not None:
                    launcher(*finish)(fgrid, fblock, (res, vres, pk, pi, flags, fparams), fsmem,
                                      stream)
            except BaseException:
                holder.discard_state(STATE_ZERO)
                raise
    if reshape is not None:
        return vres.reshape(reshape), res.reshape(reshape)
    return vres, res


def _pair(out):
    """A values-mode out: a pair (values, indices), each None or an array."""
    if not isinstance(out, tuple) or len(out) != 2:
        raise TypeError(f"values-mode launches take out=(values, indices), got "
                        f"{type(out).__name__}")
    return out


def _fits(out, shape, dtype, what):
    """A values-mode output must be of the kept shape and the dtype the kernels store."""
    if tuple(out.shape) != tuple(shape) or out.dtype.itemsize != dtype.itemsize \
            or out.dtype.kind not in (dtype.kind, "V", "M", "m"):
        raise ValueError(f"out's {what} array has shape {tuple(out.shape)} and dtype "
                         f"{out.dtype}; these launches store shape {tuple(shape)}, {dtype}")
    return out


def _may_overlap(a, b) -> bool:
    """Whether two outputs' byte ranges meet (both C-contiguous here)."""
    pa, pb = data_ptr(a), data_ptr(b)
    return pa < pb + b.nbytes and pb < pa + a.nbytes


def _aligned(out, align, what):
    if data_ptr(out) % align:
        raise ValueError(f"out's {what} array: its data pointer is not a multiple of {align} "
                         "bytes, which the kernels store at (execute_into copies instead)")
    return out


def argreduce(backend, x, axes, *, kind, tie, index_dtype, out=None, force_64bit=False,
              workspace=None, skip_nan=False, datetime=False):
    """argmin (``kind="min"``) / argmax (``"max"``) over ``axes`` (sorted, non-empty); the
    result has the kept shape and ``index_dtype`` (any integer dtype of 1 to 8 bytes). ``out``,
    when given, is C-contiguous of that shape and dtype and is written directly.

    ``skip_nan``: nanargmin / nanargmax — NaN is skipped (NaT is not, as in NumPy); a group of
    only NaN is ``ValueError("All-NaN slice encountered")``, found by one host read of the
    kernel's all-NaN flag (float and complex dtypes only; the others hold no NaN).
    ``datetime``: x is the int64 view of datetime64 / timedelta64 values (NaT the extreme)."""
    x, launches = prepare_argreduce(backend, x, axes, kind=kind, tie=tie,
                                    index_dtype=index_dtype, force_64bit=force_64bit,
                                    skip_nan=skip_nan, datetime=datetime)
    return execute_into(runner(backend, launches), x, out, workspace)


def prepare_argreduce(backend, x, axes, *, kind, tie, index_dtype, force_64bit=False,
                      skip_nan=False, datetime=False, values=False):
    """(the array the kernels read, its launches) for :func:`argreduce`'s arguments
    (``values``: :func:`values_argreduce`'s, which take no ``skip_nan``)."""
    if values and skip_nan:
        _check_values_mode(False, True)
    axes = tuple(int(a) for a in axes)
    x, vdt = _canonical(x, datetime)
    nan_skip = bool(skip_nan) and vdt.kind in "fcV"   # V: bfloat16
    return x, prepare(backend, x, axes, hardmax=False, kind=kind, tie=tie,
                      out_dtype=index_dtype, force_64bit=force_64bit, nan_skip=nan_skip,
                      value_dtype=vdt, values=values)


def values_argreduce(backend, x, axes, *, kind, tie, index_dtype, out=None, force_64bit=False,
                     workspace=None, datetime=False):
    """``(values, indices)`` of max (``kind="max"``) / min (``"min"``) over ``axes`` (sorted,
    non-empty), from one reduction: ``indices`` exactly :func:`argreduce`'s (tie and NaN rules
    included), ``values`` the raw bits of x at those indices (the sign of zero and NaN payloads
    kept), in the kernel input's dtype (``datetime``: x is the int64 view of datetime64 /
    timedelta64 values, and so are the values). ``out``: None or a pair ``(values_out,
    indices_out)`` (each may be None), written directly where C-contiguous and aligned, else
    through a copy."""
    x, launches = prepare_argreduce(backend, x, axes, kind=kind, tie=tie,
                                    index_dtype=index_dtype, force_64bit=force_64bit,
                                    datetime=datetime, values=True)
    return execute_into(runner(backend, launches), x, out, workspace)


def execute_into(run, x, out, workspace):
    """``run`` (a :func:`runner`) into ``out`` when it is C-contiguous, else a fresh array
    copied there. Values mode: ``out`` a pair (:func:`_execute_pair`)."""
    if isinstance(out, tuple):
        return _execute_pair(run, x, out, workspace)
    if out is None or not _c_contiguous(out):
        res = run(x, workspace)
        if out is None:
            return res
        out[...] = res
        return out
    return run(x, workspace, out)


def _execute_pair(run, x, out, workspace):
    """Values mode into ``out = (values_out, indices_out)``: each written directly where it is
    C-contiguous (values: and aligned to its itemsize), else a fresh array copied there (either
    may be None: a fresh array returned)."""
    vout, iout = _pair(out)
    direct_v = vout if vout is not None and _c_contiguous(vout) and \
        data_ptr(vout) % vout.dtype.itemsize == 0 else None
    direct_i = iout if iout is not None and _c_contiguous(iout) and \
        data_ptr(iout) % iout.dtype.itemsize == 0 else None
    vres, ires = run(x, workspace, (direct_v, direct_i))
    if vout is not None and direct_v is None:
        vout[...] = vres
        vres = vout
    if iout is not None and direct_i is None:
        iout[...] = ires
        ires = iout
    return vres, ires


def hardmax(backend, x, axes, *, tie, out=None, force_64bit=False, workspace=None):
    """One-hot of argmax over ``axes`` (tie and NaN rules of argmax), x's shape and dtype.
    ``out`` must not overlap ``x`` (the public API refuses it: core.args.check_out): the
    one-launch decode plan zeroes one-hot positions that other blocks may not have read yet."""
    x, launches = prepare_hardmax(backend, x, axes, tie=tie, force_64bit=force_64bit, out=out)
    return execute_into(runner(backend, launches), x, out, workspace)


def prepare_hardmax(backend, x, axes, *, tie, force_64bit=False, out=None):
    """(the array the kernels read, its launches) for :func:`hardmax`'s arguments."""
    axes = tuple(int(a) for a in axes)
    if x.dtype.kind in "mM":
        raise TypeError(f"hardmax: x has dtype {x.dtype}; a one-hot of datetime64 or "
                        "timedelta64 values means nothing")
    x, _ = _canonical(x, False)
    # a complex64 output only 4-byte aligned is written as two 4-byte words (fresh outputs
    # are 256-byte aligned, or 16 for at most 16 bytes)
    narrow_out = (out is not None and _c_contiguous(out)
                  and element_alignment(out.dtype) < out.dtype.itemsize
                  and data_ptr(out) % out.dtype.itemsize != 0)
    return x, prepare(backend, x, axes, hardmax=True, kind="max", tie=tie, out_dtype=x.dtype,
                      force_64bit=force_64bit, narrow_out=narrow_out)


def _c_contiguous(a) -> bool:
    return bool(a.flags.c_contiguous)
