"""The full road of count_nonzero, argwhere, nonzero and nonzero_coordinates, as
cupyops._call runs it on a miss (the contract of cupyops.ops.argreduce.calls): each returns
``(result, entry, class_entry)``."""
from __future__ import annotations

import math

import numpy as np

from cupyops.core import args as _args
from cupyops.core import dtypes as _dtypes
from cupyops.core import placement as _place
from cupyops.core.backend import backend_for
from cupyops.core.placement import force_64bit, kernel_entry, read_only_view
from cupyops.core.workspace import check_workspace
from cupyops.ops.nonzero import launch as _launch
from cupyops.ops.nonzero import numpy_entries as _entries
from cupyops.ops.nonzero import numpy_path as _numpy
from cupyops.ops.nonzero import rules as _rules

__all__ = ["count_nonzero_call", "argwhere_call", "nonzero_call", "nonzero_coordinates_call",
           "family_class", "count_class", "coordinates_class", "coordinates_runner"]

_I64 = np.dtype(np.int64)


def _enter(x, device, opname):
    """``(x as given, x as the nonzero test reads it, placement)``."""
    x, placement = _place.place(x, device)
    _args.check_value_dtype(x, opname, datetime=True)
    return x, _int64_bits(x), placement


def _int64_bits(x):
    """x as the nonzero test reads it: datetime64 and timedelta64 as their int64 bits (NaT,
    INT64_MIN, is nonzero; the epoch is zero)."""
    return _dtypes.datetime_as_int64(x) if x.dtype.kind in "mM" else x


# ------------------------------------------------------------------------------ count_nonzero

def count_nonzero_call(x, axis, keepdims, device):
    opname = "count_nonzero"
    x, placement = _place.place(x, device)
    axes, keepdims = _rules.count_args(x, axis, keepdims)
    x0, x = x, _int64_bits(x)
    _place.require_available(placement)
    shape = tuple(x.shape)
    kept_shape = tuple(n for i, n in enumerate(shape) if i not in axes)
    result_shape = tuple(1 if i in axes else n for i, n in enumerate(shape)) if keepdims \
        else kept_shape
    xp = _place.array_module(placement)
    # broadcast (zero-stride) axes repeat the same elements: count the distinct ones once, then
    # multiply by the repeats of the reduced ones and broadcast along the kept ones
    bro = [i for i in range(x.ndim) if shape[i] > 1 and x.strides[i] == 0]
    entry = cls = None
    with _place.device_context(placement):
        if not axes:  # reduces nothing (also every 0-d input): x != 0 itself
            res = (x != 0).astype(np.int64)
        elif x.size == 0:
            res = xp.zeros(kept_shape, np.int64)
        elif bro:
            sub = x[tuple(slice(0, 1) if i in bro else slice(None) for i in range(x.ndim))]
            res = xp.asarray(_count_distinct(sub, axes, placement, opname)[0])
            full = xp.empty(kept_shape, np.int64)        # a fresh array, as always
            full[...] = res * math.prod(shape[i] for i in bro if i in axes)
            res = full
        else:
            res, entry, cls = _count_distinct(x, axes, placement, opname, result_shape, keepdims)
            if x is not x0:
                entry = cls = None
    return xp.asarray(res).reshape(result_shape), entry, cls


def _count_distinct(x, axes, placement, opname, result_shape=None, keepdims=False):
    """count_nonzero over ``axes`` (non-empty) of a non-empty x on its placement, with the
    runners of that call."""
    if placement.kind == "cpu":
        entry = _entries.cpu_count_entry(x, axes, result_shape=result_shape)
        if entry is not None and result_shape is not None:
            return entry(x, None), entry, None
        return _numpy.count_nonzero(x, axes), entry, None
    backend = backend_for(placement)
    kin = _place.to_kernel_input(x, placement, opname)
    run = _launch.count_runner(backend, kin, axes, force_64bit=force_64bit.get())
    res = run(kin)
    entry = kernel_entry(placement, x, kin, run, reshape=result_shape)
    cls = None if entry is None else count_class(backend, placement, axes, keepdims)
    return _place.from_kernel_result(res, placement), entry, cls


# ------------------------------------------------------------------------------ coordinates

def _kernel_coordinates(x, x0, placement, opname, index_dtype, workspace=None, out=None, *,
                        layout=None, size=None, fill_value=0, exact_count=False):
    """The coordinate ops on the kernel path: ``(result, entry, class_entry)``."""
    backend = backend_for(placement)
    kin = _place.to_kernel_input(x, placement, opname)
    opts = dict(layout=layout, size=size, fill_value=fill_value, exact_count=exact_count)
    run = coordinates_runner(backend, kin, index_dtype, force_64bit.get(), **opts)
    res = run(kin, workspace, out) if size is not None else run(kin, workspace)
    entry = cls = None
    if x is x0:
        entry = kernel_entry(placement, x, kin, run)
        if entry is not None:
            cls = coordinates_class(backend, placement, index_dtype, **opts)
    return _place.from_kernel_result(res, placement), entry, cls


def argwhere_call(x, dtype, device):
    opname = "argwhere"
    x0, x, placement = _enter(x, device, opname)
    index_dtype = _rules.check_coordinate_dtype(x, dtype, opname)
    _place.require_available(placement)
    xp = _place.array_module(placement)
    with _place.device_context(placement):
        if x.ndim == 0:
            return xp.zeros((int(bool(x != 0)), 0), index_dtype), None, None
        if x.size == 0:
            return xp.zeros((0, x.ndim), index_dtype), None, None
        if placement.kind == "cpu":
            entry = _entries.cpu_argwhere_entry(x, index_dtype) if x is x0 else None
            if entry is not None:
                return entry(x, None), entry, None
            return _numpy.argwhere(x, index_dtype), entry, None
        return _kernel_coordinates(x, x0, placement, opname, index_dtype,
                                   layout=_launch.LAYOUT_ROWS)


def nonzero_call(x, device):
    opname = "nonzero"
    x, placement = _place.place(x, device)
    _rules.check_nonzero_input(x)
    x0, x = x, _int64_bits(x)
    _place.require_available(placement)
    index_dtype = _I64
    xp = _place.array_module(placement)
    with _place.device_context(placement):
        if x.size == 0:
            return tuple(xp.zeros((0,), index_dtype) for _ in range(x.ndim)), None, None
        if placement.kind == "cpu":
            entry = _entries.cpu_nonzero_entry(x) if x is x0 else None
            if entry is not None:
                return entry(x, None), entry, None
            return _numpy.nonzero(x, index_dtype), entry, None
        res, entry, cls = _kernel_coordinates(x, x0, placement, opname, index_dtype,
                                              layout=_launch.LAYOUT_COLS)
        return tuple(res), entry, cls


def nonzero_coordinates_call(x, size, fill_value, dtype, out, device, workspace):
    opname = "nonzero_coordinates"
    x0, x, placement = _enter(x, device, opname)
    dtype = _coordinates_out_rules(out, size, dtype, opname)
    index_dtype = _rules.check_coordinate_dtype(x, dtype, opname)
    size, fill_value = _rules.check_size_fill(size, fill_value, index_dtype, opname)
    _rules.check_size_memory(size, x.ndim, index_dtype, opname)
    if out is not None:
        out = (_args.check_out(out[0], x, (size, x.ndim), index_dtype,
                               f"{opname} (out[0], coords)",
                               f"one of {_args.dtype_names(_rules.COORDINATE_DTYPES)}"
                               if dtype is None else None),
               _args.check_out(out[1], x, (), _I64, f"{opname} (out[1], count)"))
    workspace = check_workspace(workspace, placement, opname)
    _place.require_available(placement)
    if out is None and size is not None:      # (before anything is made)
        _rules.check_size_memory(size, x.ndim, index_dtype, opname,
                                 _place.memory_bytes(placement), _memory_of(placement))
    xp = _place.array_module(placement)
    with _place.device_context(placement):
        if x.ndim == 0 or x.size == 0:
            return _place.deliver_all(_empty_coordinates(x, xp, size, fill_value, index_dtype),
                                      out), None, None
        if placement.kind == "cpu":
            entry = _entries.cpu_coordinates_entry(x, size, fill_value, index_dtype) \
                if x is x0 else None
            res = entry(x, None) if entry is not None else \
                _numpy.nonzero_coordinates(x, size, fill_value, index_dtype)
            return _place.deliver_all(res, out), entry, None
        kernel_out = out if out is not None and all(
            _place.kernel_out(o, placement) is not None for o in out) else None
        res, entry, cls = _kernel_coordinates(
            x, x0, placement, opname, index_dtype, workspace, kernel_out, size=size,
            fill_value=fill_value, exact_count=size is None)
        return _place.deliver_all(res, out), entry, cls


def _memory_of(placement) -> str:
    if placement.kind == "cuda":
        return "the GPU" + ("" if placement.device_id is None else f" cuda:{placement.device_id}")
    return f"this machine (device {placement.kind!r})"


def _coordinates_out_rules(out, size, dtype, opname):
    """nonzero_coordinates' ``out=``: a (coords, count) tuple, with ``size=k`` only; with
    ``dtype=None`` its coords' dtype is the result dtype. Returns the dtype to check."""
    if out is None:
        return dtype
    if not isinstance(out, tuple) or len(out) != 2:
        raise TypeError(f"{opname}: out must be a tuple (coords, count), got "
                        f"{type(out).__name__}")
    if size is None:
        raise ValueError(f"{opname}: out= needs size=k: the exact-size result's shape is not "
                         f"known before the count is read")
    if dtype is None and getattr(out[0], "dtype", None) in _rules.COORDINATE_DTYPES:
        return out[0].dtype
    return dtype


def _empty_coordinates(x, xp, size, fill_value, index_dtype):
    """``(coords, count)`` of a 0-d or empty input."""
    rows = size
    if x.ndim == 0:
        # on the device: the size= form makes no host read, even for a 0-d input
        count = xp.asarray(x != 0).astype(np.int64)
        if size is None:
            rows = int(count)             # the exact form's one host read
    else:
        count = xp.zeros((), np.int64)
        rows = 0 if size is None else size
    return xp.full((rows, x.ndim), fill_value, index_dtype), count


# ------------------------------------------------------------------------------ first calls
#
# The first call of a new layout in a layout class seen before: count_nonzero, argwhere,
# nonzero and nonzero_coordinates (see cupyops.ops.argreduce.calls, "first calls", for the
# contract).
#
# The class entry re-plans the new shape through the family's own planners; its only shape rule
# is a non-empty input whose longest dimension's last index fits the coordinate dtype.


def family_class(placement, build, *, index_dtype=None):
    """The class entry of one op (core.placement's class_entry): ``build(kx, force_64bit) ->
    (run, reshape)``: the runner for the array the kernels read (``run(kx, workspace)``) and
    the shape its result takes (None: as it is). Its only shape rule: the longest dimension's
    last index fits the coordinate dtype."""
    top = None if index_dtype is None else int(np.iinfo(index_dtype).max)
    prep = None if placement.cupy_input else read_only_view

    def runner_for(x, force):
        if top is not None and max(x.shape) - 1 > top:
            return None
        kx = x if prep is None else prep(x)
        run, reshape = build(kx, force)
        return kernel_entry(placement, x, kx, run, reshape=reshape)
    return _place.class_entry(runner_for)


def count_class(backend, placement, axes, keepdims):
    """count_nonzero over ``axes`` (non-empty)."""
    def build(kx, force):
        shape = tuple(1 if i in axes else n for i, n in enumerate(kx.shape)) if keepdims \
            else None
        return _launch.count_runner(backend, kx, axes, force_64bit=force), shape
    return family_class(placement, build)


def coordinates_class(backend, placement, index_dtype, *, layout=None, size=None,
                      fill_value=0, exact_count=False):
    """argwhere (``layout`` rows), nonzero (``layout`` columns: a tuple of rows),
    nonzero_coordinates (``size=None``: ``exact_count``; else ``size=k``)."""
    def build(kx, force):
        return coordinates_runner(backend, kx, index_dtype, force, layout=layout, size=size,
                                  fill_value=fill_value, exact_count=exact_count), None
    return family_class(placement, build, index_dtype=index_dtype)


def coordinates_runner(backend, kx, index_dtype, force, *, layout=None, size=None,
                       fill_value=0, exact_count=False):
    """The runner of one coordinate op (see :func:`coordinates_class`) for ``kx``'s layout."""
    if size is not None:
        return _launch.fixed_runner(backend, kx, size, fill_value, index_dtype, force)
    if exact_count:
        return _launch.exact_runner(backend, kx, index_dtype, _launch.LAYOUT_ROWS, force,
                                    result=_launch.RESULT_COORDS_COUNT)
    return _launch.exact_runner(backend, kx, index_dtype, layout, force, keep_count=False,
                                result=_launch.RESULT_ROWS if layout == _launch.LAYOUT_COLS
                                else _launch.RESULT_COORDS)
