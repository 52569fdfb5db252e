"""The full road of argmin / argmax / nanarg* / hardmax, as cupyops._call runs it on a miss:
place the input, apply the argument rules, take the trivial branch, the NumPy path or the
kernel path, and hand back the result with the runners that may serve later calls.

Each function returns ``(result, entry, class_entry)``:

* ``entry(x, workspace)``: the same call on a later array of the same layout (the NumPy
  composition, or the kernel path's prepared launches), or None where none may (an input the
  call copied, NumPy input on "cuda", tests' planner options, the engine's own paths);
* ``class_entry``: the first-call runner of the layout class (:func:`argreduce_class` below),
  or None.

Whether and how long they are kept is cupyops._call's decision alone.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from cupyops.core import args as _args
from cupyops.core import dtypes as _dtypes
from cupyops.core import placement as _place
from cupyops.core.backend import backend_for
from cupyops.core.arrays import data_ptr, shares_memory
from cupyops.core.dtypes import element_alignment
from cupyops.core.placement import force_64bit, read_only_view
from cupyops.core.trace import planner_options_set as _planner_options_set
from cupyops.core.workspace import check_workspace
from cupyops.ops.argreduce import launch as _launch
from cupyops.ops.argreduce import numpy_entries as _entries
from cupyops.ops.argreduce import numpy_path as _numpy
from cupyops.ops.argreduce.plan import plan_argreduce_contiguous
from cupyops.ops.argreduce.nan_groups import all_nan_error
from cupyops.ops.argreduce.rules import ValuesIndices, argreduce_rules, hardmax_rules

__all__ = ["argreduce_call", "hardmax_call", "values_call", "argreduce_class", "ValuesIndices"]


def argreduce_call(kind, skip_nan, x, axis, keepdims, tie, dtype, out, device, workspace):
    """argmin (``kind="min"``) / argmax (``"max"``), nanarg* with ``skip_nan``."""
    opname = ("nanarg" if skip_nan else "arg") + kind
    x, placement = _place.place(x, device)
    call = argreduce_rules(x, opname, axis, keepdims, tie, dtype, out)
    workspace = check_workspace(workspace, placement, opname)
    _place.require_available(placement)
    xp = _place.array_module(placement)
    entry = cls = None
    with _place.device_context(placement):
        if not call.axes or math.prod(call.kept_shape) == 0:
            # (nanarg*: a group of one NaN is all NaN, as NumPy says)
            if skip_nan and not call.axes and x.dtype.kind in "fcV" and bool(xp.isnan(x).any()):
                raise all_nan_error(opname, x, call.axes)
            res = xp.zeros(call.kept_shape, call.index_dtype)
        elif placement.kind == "cpu":
            entry = _entries.cpu_argreduce_entry(
                x, call.axes, kind=kind, skip_nan=skip_nan, tie=tie,
                index_dtype=call.index_dtype, result_shape=call.result_shape)
            res = entry(x, None)       # (the same runner as every later call)
            if call.out is None:
                return res, entry, None
            _place.deliver(res.reshape(call.kept_shape), call.out_kept)
            return call.out, entry, None
        else:
            res, entry, cls = _kernel_argreduce(kind, skip_nan, x, call, tie, placement,
                                                workspace)
        if call.out is not None:
            _place.deliver(res, call.out_kept)
            return call.out, entry, cls
    res = xp.asarray(res)
    return (res.reshape(call.result_shape) if call.keepdims else res), entry, cls


def _kernel_argreduce(kind, skip_nan, x, call, tie, placement, workspace):
    backend = backend_for(placement)
    datetime = x.dtype.kind in "mM"
    kx = _dtypes.datetime_as_int64(x) if datetime else x
    kin = _place.to_kernel_input(kx, placement, call.opname)
    cx, launches = _launch.prepare_argreduce(
        backend, kin, call.axes, kind=kind, tie=tie, index_dtype=call.index_dtype,
        force_64bit=force_64bit.get(), skip_nan=skip_nan, datetime=datetime)
    run = _launch.runner(backend, launches)
    res = _launch.execute_into(run, cx, _place.kernel_out(call.out_kept, placement), workspace)
    entry = cls = None
    ok, prep = _place.entry_prep(placement, x, kin)
    if ok and cx is kin and not datetime and not _planner_options_set():
        reshape = call.result_shape if call.keepdims else None
        entry = _launch.runner(backend, launches, entry=(prep, reshape))
        cls = argreduce_class(
            backend, placement, call.axes, hardmax=False, kind=kind, tie=tie,
            index_dtype=call.index_dtype, skip_nan=skip_nan, keepdims=call.keepdims)
    return _place.from_kernel_result(res, placement), entry, cls


def values_call(kind, x, axis, keepdims, tie, dtype, out, device, workspace):
    """max_and_argmax (``kind="max"``) / min_and_argmin: argmax's indices and the elements at
    them, bit for bit, from the same single reduction on the kernel path."""
    opname = f"{kind}_and_arg{kind}"
    x, placement = _place.place(x, device)
    vout, iout = _values_out_pair(out, opname)
    call = argreduce_rules(x, opname, axis, keepdims, tie, dtype, iout)
    vout, vout_kept = _values_out(vout, x, call, opname)
    workspace = check_workspace(workspace, placement, opname)
    _place.require_available(placement)
    xp = _place.array_module(placement)
    entry = cls = None
    with _place.device_context(placement):
        if not call.axes or math.prod(call.kept_shape) == 0:
            # every element its own group (axis=()), or no group at all
            vals = x.copy() if not call.axes else xp.empty(call.kept_shape, x.dtype)
            res = ValuesIndices(vals, xp.zeros(call.kept_shape, call.index_dtype))
        elif placement.kind == "cpu":
            entry = _entries.cpu_values_entry(
                x, call.axes, kind=kind, tie=tie, index_dtype=call.index_dtype,
                kept_shape=call.kept_shape, result_shape=call.result_shape, pair=ValuesIndices)
            res = entry(x, None)
            if call.out is None:
                return res, entry, None
            res = ValuesIndices(res.values.reshape(call.kept_shape),
                                res.indices.reshape(call.kept_shape))
        else:
            res, entry, cls = _kernel_values(kind, x, call, tie, placement, workspace,
                                             vout_kept)
        if call.out is not None:
            _place.deliver(res.values, vout_kept)
            _place.deliver(res.indices, call.out_kept)
            return ValuesIndices(vout, call.out), entry, cls
    res = ValuesIndices(xp.asarray(res.values), xp.asarray(res.indices))
    if call.keepdims:
        res = ValuesIndices(res.values.reshape(call.result_shape),
                            res.indices.reshape(call.result_shape))
    return res, entry, cls


def _values_out_pair(out, opname):
    """``out=(values, indices)``, or ``(None, None)``."""
    if out is None:
        return None, None
    if not isinstance(out, tuple) or len(out) != 2:
        raise TypeError(f"{opname}: out must be a pair (values, indices), got "
                        f"{type(out).__name__}")
    if out[0] is None or out[1] is None:
        raise TypeError(f"{opname}: out must hold two arrays (values, indices), got "
                        f"{tuple(type(o).__name__ for o in out)}")
    return out


def _values_out(vout, x, call, opname):
    """The values' out (x's dtype, the result's shape, apart from x and from the indices'
    out) and its kept-shape view."""
    if vout is None:
        return None, None
    vout = _args.check_out(vout, x, call.result_shape, x.dtype, f"{opname} (out[0], values)",
                           f"{x.dtype}, x's dtype (the values are x's elements)")
    if call.out is not None and shares_memory(vout, call.out):
        raise ValueError(f"{opname}: out[0] (values) and out[1] (indices) overlap")
    kept = vout[tuple(0 if i in call.axes else slice(None) for i in range(x.ndim))
                + (Ellipsis,)] if call.keepdims else vout
    return vout, kept


def _kernel_values(kind, x, call, tie, placement, workspace, vout_kept):
    """The kernel path: one reduction writing the values and the indices."""
    backend = backend_for(placement)
    datetime = x.dtype.kind in "mM"
    kx = _dtypes.datetime_as_int64(x) if datetime else x
    kin = _place.to_kernel_input(kx, placement, call.opname)
    cx, launches = _launch.prepare_argreduce(
        backend, kin, call.axes, kind=kind, tie=tie, index_dtype=call.index_dtype,
        force_64bit=force_64bit.get(), datetime=datetime, values=True)
    run = _launch.runner(backend, launches)
    outs = None
    if vout_kept is not None:
        outs = (_place.kernel_out(vout_kept, placement),
                _place.kernel_out(call.out_kept, placement))
        if outs[0] is None or outs[1] is None or outs[0].dtype != kin.dtype:
            outs = None
    vals, idx = _launch.execute_into(run, cx, outs, workspace)
    entry = cls = None
    ok, prep = _place.entry_prep(placement, x, kin)
    if ok and cx is kin and not datetime and not _planner_options_set():
        entry = functools.partial(_values_entry_call, _launch.runner(
            backend, launches, entry=(prep, None)), call.result_shape if call.keepdims else None)
        cls = argreduce_class(backend, placement, call.axes, hardmax=False, kind=kind, tie=tie,
                              index_dtype=call.index_dtype, keepdims=call.keepdims,
                              values=True)
    vals, idx = _place.from_kernel_result((vals, idx), placement)
    return ValuesIndices(_as_dtype_of(vals, x), idx), entry, cls


def _values_entry_call(run, reshape, x, workspace):
    vals, idx = run(x, workspace)
    if reshape is not None:
        vals, idx = vals.reshape(reshape), idx.reshape(reshape)
    return ValuesIndices(vals, idx)


def _as_dtype_of(vals, x):
    """The values in x's own dtype: datetime from its int64 bits, x's byte order (the
    kernels read and write native order)."""
    if vals.dtype == x.dtype:
        return vals
    if x.dtype.kind in "mM":
        vals = vals.view(x.dtype.newbyteorder("="))
    return vals if vals.dtype == x.dtype else vals.astype(x.dtype)


def hardmax_call(x, axis, tie, out, device, workspace):
    """hardmax over ``axis``."""
    opname = "hardmax"
    x, placement = _place.place(x, device)
    axes, out = hardmax_rules(x, axis, tie, out)
    workspace = check_workspace(workspace, placement, opname)
    _place.require_available(placement)
    xp = _place.array_module(placement)
    entry = cls = None
    with _place.device_context(placement):
        if x.size == 0:
            res = xp.empty(x.shape, x.dtype)
        elif not axes:
            res = xp.ones(x.shape, x.dtype)
        elif placement.kind == "cpu":
            entry = _entries.cpu_hardmax_entry(x, axes, tie=tie)
            if entry is not None:
                res = entry(x, None)
            elif x.dtype.kind == "V":   # bfloat16: the one-hot of the exact float32 widening
                res = _dtypes.narrow(_numpy.hardmax(_dtypes.widen(x), axes, tie=tie), x.dtype)
            else:
                res = _numpy.hardmax(x, axes, tie=tie, out=out)
        else:
            res, entry, cls = _kernel_hardmax(x, axes, tie, out, placement, workspace)
        if out is not None:
            return _place.deliver(res, out), entry, cls
    return res, entry, cls


def _kernel_hardmax(x, axes, tie, out, placement, workspace):
    backend = backend_for(placement)
    kx = _place.to_kernel_input(x, placement, "hardmax")
    kout = _place.kernel_out(out, placement) if kx.dtype == x.dtype else None
    cx, launches = _launch.prepare_hardmax(backend, kx, axes, tie=tie,
                                           force_64bit=force_64bit.get(), out=kout)
    run = _launch.runner(backend, launches)
    res = _launch.execute_into(run, cx, kout, workspace)
    entry = cls = None
    ok, prep = _place.entry_prep(placement, x, kx)
    if ok and cx is kx and not _planner_options_set():
        entry = _launch.runner(backend, launches, entry=(prep, None))
        cls = argreduce_class(backend, placement, axes, hardmax=True, tie=tie)
    res = _place.from_kernel_result(res, placement)
    if res.dtype != x.dtype:  # non-native input: give back the caller's byte order
        res = res.astype(x.dtype)
    return res, entry, cls


# ------------------------------------------------------------------------------ first calls
#
# The first call of a new layout in a layout class seen before: argmin / argmax / nanarg* /
# hardmax.
#
# cupyops._call hands a call whose layout it has not seen, but whose layout class it has (a
# C-contiguous input with every other part of the call's key seen before: operator, arguments
# as given, input type, dtype, number of dimensions, device, data pointer mod 16, workspace
# type, ``force_64bit``), to the class entry the first such call left. Those very arguments
# were accepted for that dtype and rank, so only the rules that read the shape are left: an
# empty reduced axis or output, a group too long for the index dtype. A class entry checks
# those and hands any doubt back (returns None: the full road decides and fails with its usual
# message or takes its trivial branch), plans the new shape with the contiguous planner and
# runs it.
#
# ``first(x, workspace, keep) -> (result, entry)``: ``entry`` is the runner of this layout
# when ``keep`` (cupyops._call's decision to keep it), else None. Class entries hold the
# validated arguments and the backend: no plan, no memory. Only kernel paths (simt; CuPy
# input).


def argreduce_class(backend, placement, axes, *, hardmax, kind="max", tie="first",
                    index_dtype=None, skip_nan=False, keepdims=False, values=False):
    """The class entry of argmin/argmax/nanarg* (``hardmax=False``), max_and_argmax /
    min_and_argmin (``values``) or hardmax over ``axes`` (sorted, non-empty), planned with the
    contiguous planner."""
    top = int(np.iinfo(index_dtype).max) if not hardmax else None
    out_dtype = None if hardmax else np.dtype(index_dtype)
    prep = None if placement.cupy_input else read_only_view
    props = backend.props
    launches_of, run_state, run = _launch.launches_of, _launch.run_state, _launch.run
    align_of = {}

    def runner_for(x, force):
        # the rules that read the shape (an empty reduced axis or output: core.placement's
        # class_entry; below, a group too long for the index dtype): anything else is the full
        # road's to say
        shape, vdt = x.shape, x.dtype
        align = align_of.get(vdt)
        if align is None:
            align = align_of[vdt] = element_alignment(vdt)
        try:
            plan = plan_argreduce_contiguous(shape, vdt.itemsize, axes, props, force, hardmax,
                                             data_ptr(x) % 4096, align)
        except ValueError:            # too many dimensions after merging: the full road's
            return None
        if top is not None and plan.group_full - 1 > top:
            return None
        launches = launches_of(
            backend, plan, vdt, shape, axes, hardmax=hardmax, kind=kind, tie=tie,
            out_dtype=vdt if hardmax else out_dtype,
            nan_skip=bool(skip_nan) and vdt.kind in "fcV", **({"values": True} if values else {}))
        reshape = tuple(1 if i in axes else n for i, n in enumerate(shape)) \
            if keepdims else None
        if values:       # (a pair: _values_entry_call reshapes both and names them)
            return functools.partial(_values_entry_call, functools.partial(
                run, run_state(backend, launches, (prep, None))), reshape)
        # (runs prep and records the plan itself: what runner builds)
        return functools.partial(run, run_state(backend, launches, (prep, reshape)))
    return _place.class_entry(runner_for)
