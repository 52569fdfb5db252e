"""The full road of segment_argmax / segment_argmin and their values forms, as cupyops._call
runs it on a miss: place the input, apply the argument rules, check or carry the offsets, take
the trivial branch, the NumPy path or the kernel path; returns ``(result, entry,
class_entry)`` (the contract of cupyops.ops.argreduce.calls). Entries take the offsets at each
call (the descriptors' ``array_args``): ``entry(x, workspace, offsets)``.

Offsets on the host (NumPy, or a list) are checked at every call, on every device; with a CuPy
``x`` they are copied to its GPU once per call. Offsets already on the GPU are checked by the
kernel itself, without a host synchronisation (cupyops.ops.segment.launch)."""
from __future__ import annotations

import functools

import numpy as np

from cupyops.core import dtypes as _dtypes
from cupyops.core import placement as _place
from cupyops.core import threads as _threads
from cupyops.core.arrays import is_cupy_array
from cupyops.core.backend import backend_for
from cupyops.core.placement import force_64bit
from cupyops.core.arrays import data_ptr as _data_ptr
from cupyops.core.workspace import check_workspace
from cupyops.ops.segment import family as _family  # noqa: F401  (registers the kernels)
from cupyops.ops.segment import numpy_path as _numpy
from cupyops.ops.segment.rules import ValuesIndices, check_offset_values, segment_rules

__all__ = ["segment_call", "host_offsets_for_kernel"]


def segment_call(kind, values, x, offsets, tie, relative, empty_index, dtype, out, device,
                 workspace):
    """segment_argmin (``kind="min"``) / segment_argmax; with ``values`` the values forms."""
    opname = f"segment_{kind}_and_arg{kind}" if values else f"segment_arg{kind}"
    x, placement = _place.place(x, device)
    offsets = _offsets_as_given(offsets, x, placement, opname)
    call = segment_rules(x, offsets, opname, tie, relative, empty_index, dtype, out, values)
    workspace = check_workspace(workspace, placement, opname)
    host = not is_cupy_array(offsets)
    if host:
        check_offset_values(offsets, int(x.shape[0]), opname)
    _place.require_available(placement)
    state = (kind, tie, call, values, opname)
    with _place.device_context(placement):
        if placement.kind == "cpu" or call.n_segments == 0 or x.size == 0:
            entry = functools.partial(_cpu_entry, state, placement)
            res = entry(x, workspace, offsets, checked=host)
            if call.out is not None or placement.kind != "cpu":
                return _deliver(res, call, values), (entry if call.out is None else None), None
            # later calls on the threads or on one, whichever its calls found faster (a
            # Python loop over long segments ran at 0.64x one thread on two: threads_check)
            return _deliver(res, call, values), \
                _threads.measured(entry, x.nbytes, more_args=True), None
        return _kernel_call(state, x, offsets, placement, workspace, host)


def _offsets_as_given(offsets, x, placement, opname):
    """offsets as an array: a CuPy array stays one (it must be on x's GPU, with CuPy x); any
    other array-like becomes a NumPy array (checked as such by the rules)."""
    if is_cupy_array(offsets):
        if not placement.cupy_input:
            raise ValueError(f"{opname}: offsets is a CuPy array but x is not; cupyops makes no "
                             f"hidden transfers: pass NumPy offsets, or a CuPy x")
        if offsets.device != x.device:
            raise ValueError(f"{opname}: offsets is on {offsets.device}, x on {x.device}")
        return offsets
    if isinstance(offsets, np.ndarray) or hasattr(offsets, "__array__") \
            or isinstance(offsets, (list, tuple)):
        try:
            return np.asarray(offsets)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"{opname}: offsets must be a 1-D integer array: {exc}") from None
    return offsets        # the rules say what is wrong with it


def _cpu_entry(state, placement, x, workspace, offsets, checked=False):
    """The NumPy path (and every call with no segment or no row): ``entry(x, workspace,
    offsets)``, the offsets checked at each call."""
    kind, tie, call, values, opname = state
    xp = _place.array_module(placement)
    if not checked:               # (GPU offsets too: this branch reads them on the host)
        offsets = offsets.get() if is_cupy_array(offsets) else np.asarray(offsets)
        check_offset_values(offsets, int(x.shape[0]), opname)
    if xp is not np:              # no segment, or no row: nothing to reduce on the GPU
        x = x.get() if x.size else np.empty(x.shape, x.dtype)
        offsets = offsets.get() if is_cupy_array(offsets) else offsets
    rows = _numpy.segment_argreduce(x, offsets, kind=kind, tie=tie)
    return _result(xp, x, offsets, rows, state)


def _result(xp, x, offsets, rows, state):
    """Indices (and values) from the winning rows (-1: an empty segment)."""
    kind, tie, call, values, opname = state
    empty = rows < 0
    if not call.relative and call.empty_index == -1:
        idx = rows.astype(call.index_dtype, copy=False)     # (-1 marks the empty ones already)
    else:
        idx = rows
        if call.relative:
            start = np.asarray(offsets, np.int64)[:-1].reshape((-1,) + (1,) * (rows.ndim - 1))
            idx = rows - start
        idx = np.where(empty, call.empty_index, idx).astype(call.index_dtype)
    if not values:
        return xp.asarray(idx)
    y = _as_rows(x)
    flat = _as_rows(rows)
    if not y.size:
        vals = np.empty(flat.shape, x.dtype)
    elif flat.shape[1] == 1:      # one column: a 1-D take, a third of a 2-D fancy index
        vals = y[:, 0].take(flat[:, 0], mode="clip")[:, None]   # (-1 clipped: filled below)
    else:
        vals = y[np.where(flat < 0, 0, flat), np.arange(flat.shape[1])]
    vals = np.where(empty.reshape(flat.shape), _numpy.empty_value(x.dtype, kind), vals) \
        if empty.any() else vals
    vals = np.asarray(vals, x.dtype).reshape(idx.shape)
    return ValuesIndices(xp.asarray(vals), xp.asarray(idx))


def _as_rows(a):
    """``a`` as (len, prod(rest)): also when a dimension is 0."""
    return a.reshape(a.shape[0], int(np.prod(a.shape[1:], dtype=np.int64)))


def _deliver(res, call, values):
    if values:
        if call.out is None:
            return res
        _place.deliver(res.values, call.values_out)
        _place.deliver(res.indices, call.out)
        return ValuesIndices(call.values_out, call.out)
    return _place.deliver(res, call.out)


def _kernel_call(state, x, offsets, placement, workspace, host):
    """The kernel path: one launch (cupyops.ops.segment.launch). Host offsets go to the device
    once per call (a copy for CUDA; simt reads them in place); offsets already on the GPU are
    checked by the kernel (its error code armed for the next host read). The entry returned
    (no ``out=``) serves later calls of the same layout: ``entry(x, workspace, offsets)``."""
    kind, tie, call, values, opname = state
    kst = [state, placement, backend_for(placement), x.dtype.kind in "mM", force_64bit.get(),
           None]
    res = _kernel_run(kst, x, offsets, workspace, host,
                      _kernel_outs(call, placement, values, kst[3]))
    entry = None
    if call.out is None:
        entry = _prepared_entry(kst, x, offsets, host) or functools.partial(_kernel_entry, kst)
    return _deliver(res, call, values), entry, None


def _prepared_entry(kst, x, offsets, host):
    """The entry of later calls of this layout where the first call passed x and the offsets
    to the kernel as they are (a CuPy x, or NumPy x on simt; offsets already on the GPU, or
    host offsets on simt, which reads them in place): the runner reused with no layout
    question but the offsets' alignment, which the call's key does not hold. None otherwise
    (a datetime x, NumPy x on "cuda", host offsets on "cuda": a copy each call)."""
    (kind, tie, call, values, opname), placement, backend, datetime, wide, kept = kst
    if datetime or kept is None or not kept[2] or (host and placement.kind == "cuda"):
        return None
    isz = offsets.dtype.itemsize
    if not offsets.dtype.isnative or offsets.strides[0] % isz or \
            kept[0][2:] != (offsets.strides, offsets.dtype):
        # (the runner was planned for a copy of these offsets, e.g. a misaligned record
        # field copied contiguous: later offsets laid out as these are not read as it reads)
        return None
    return functools.partial(_prepared_call, (kept[1], kept[3], isz, int(x.shape[0]), opname,
                                              host, values, kst))


def _prepared_call(st, x, workspace, offsets):
    """A later call through :func:`_prepared_entry`'s runner: host offsets checked again."""
    run, prep, isz, n, opname, host, values, kst = st
    if host:
        if type(offsets) is not np.ndarray:   # (a tuple, a tensor: the key holds it as given)
            return _kernel_entry(kst, x, workspace, offsets)
        check_offset_values(offsets, n, opname)
        offsets = _place.read_only_view(offsets)
    if _data_ptr(offsets) % isz:        # misaligned offsets: copied, another runner
        return _kernel_entry(kst, x, workspace, offsets)
    res = run(x if prep is None else prep(x), offsets, workspace, None, host)
    return ValuesIndices(*res) if values else res


def _kernel_entry(kst, x, workspace, offsets):
    """A later call of the same layout (cupyops._call's key: x's and offsets' layouts, the
    options): the offsets' values checked again (host), no rules, no planning."""
    host = not is_cupy_array(offsets)
    if host:
        offsets = np.asarray(offsets)
        check_offset_values(offsets, int(x.shape[0]), kst[0][4])
    return _kernel_run(kst, x, offsets, workspace, host, None)


def _kernel_run(kst, x, offsets, workspace, host, outs):
    """One launch; the runner of ``kst`` reused where the arrays the kernel reads are laid out
    as it was planned for (a copied input, misaligned or strided offsets, may not be)."""
    from cupyops.ops.segment import launch as _launch
    (kind, tie, call, values, opname), placement, backend, datetime, wide, kept = kst
    kx = _dtypes.datetime_as_int64(x) if datetime else x
    kin = _place.to_kernel_input(kx, placement, opname)
    koffs = _launch.kernel_offsets(
        host_offsets_for_kernel(offsets, kin, placement, opname) if host else offsets)
    layout = (kin.strides, _data_ptr(kin) % 16, koffs.strides, koffs.dtype)
    if kept is None or kept[0] != layout:
        kept = kst[5] = (layout, _launch.runner(backend, kin, koffs, call, kind=kind, tie=tie,
                                                 values=values, force_64bit=wide,
                                                 datetime=datetime),
                                *_place.entry_prep(placement, x, kin))
    res = _place.from_kernel_result(kept[1](kin, koffs, workspace, out=outs, checked=host),
                                    placement)
    if values:
        vals, idx = res
        res = ValuesIndices(_as_dtype_of(vals, x), idx)
    return res


def host_offsets_for_kernel(offsets, kin, placement, opname):
    """Host offsets (checked) as the kernel reads them: on a GPU, a copy on kernel input
    ``kin``'s device, once per call (NumPy or CuPy x alike); on simt, read in place."""
    if placement.kind != "cuda":
        return _place.to_kernel_input(offsets, placement, opname)
    native = np.ascontiguousarray(offsets, dtype=offsets.dtype.newbyteorder("="))
    cupy = _place.import_cupy()
    with cupy.cuda.Device(kin.device.id):
        if cupy.cuda.get_current_stream().is_capturing():
            raise ValueError(f"{opname}: offsets on the host must be copied to the GPU, which "
                             "a CUDA-graph capture cannot hold: pass offsets already on the GPU "
                             "(a CuPy array) inside the capture")
        return cupy.asarray(native)


def _kernel_outs(call, placement, values, datetime):
    """The outs the kernel writes directly: C-contiguous, aligned, on its device (values: not
    datetime, whose kernel values are int64)."""
    iout = _place.kernel_out(call.out, placement)
    if not values:
        return iout
    vout = None if datetime else _place.kernel_out(call.values_out, placement)
    if vout is not None and _data_ptr(vout) % vout.dtype.itemsize:
        vout = None
    return (vout, iout)


def _as_dtype_of(vals, x):
    if vals.dtype == x.dtype:
        return vals
    if x.dtype.kind in "mM":
        vals = vals.view(x.dtype.newbyteorder("="))
    return vals if vals.dtype == x.dtype else vals.astype(x.dtype)
