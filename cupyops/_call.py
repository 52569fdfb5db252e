"""The one road of a call, and the public functions that take it.

Every public function builds its call's key (:func:`key`) and looks it up:

1. **a cached entry** (the same layout, arguments and device as a call before): it runs the
   work directly;
2. else **a layout class seen before** (a new shape of a C-contiguous input, everything else
   as before): the op's class entry re-plans the shape and runs; this layout's entry is kept
   from its second call on;
3. else **the full road**: the op's argument rules, then its plan and runner (its ``calls``
   module); the entry and class entry it hands back are kept.

Inputs that are no NumPy or CuPy array take the interop layer first: a Dask array becomes a
lazy Dask result (cupyops.interop.dask), any other DLPack array (torch, JAX, array_api_strict)
is viewed zero-copy as a NumPy or CuPy array and comes back as its own type
(cupyops.interop.dlpack); array-likes go down the full road, which converts them.

The caching lives here alone: the ops hand over runners and decide nothing about keeping
them. A key holds everything the argument rules and the choice of path read: the input's
type, shape, strides and dtype (and, for the kernel paths, its data pointer mod 16 and
device), every argument as given with its type, ``device`` and ``CUPYOPS_DEVICE`` (and
``CUPYOPS_SIMT_CXX`` for the kernels on NumPy input), the ``force_64bit`` switch and the
workspace's type. A bad call differs from every accepted one in some part of its key, so it
always takes the full road and fails there with its usual message. Calls with ``out=`` and
tests' planner options have no key. Entries hold what is derived from a layout, never memory
(scratch comes from the caller's Workspace or the stream's arena on every call).
"""
from __future__ import annotations

import functools
from typing import Literal, TypeVar

import numpy as np

from cupyops.core.arrays import library_of_type
from cupyops.core.fastread import env_reader, numpy_data_ptr
from cupyops.core.lru import LRU
from cupyops.core.placement import force_64bit
from cupyops.core.workspace import Workspace
from cupyops.interop import dask as _dask
from cupyops.interop import dlpack as _dlpack
from cupyops.ops.argreduce import calls as _argreduce
from cupyops.ops.argreduce import plan as _argreduce_plan
from cupyops.ops.nonzero import calls as _nonzero

__all__ = ["argmax", "argmin", "nanargmax", "nanargmin", "hardmax", "argwhere", "nonzero",
           "count_nonzero", "nonzero_coordinates", "key", "layout_class", "clear", "PUBLIC",
           "ArrayT", "Tie"]

#: an array of any supported library (NumPy, CuPy, torch, JAX, Dask, ...), or an array-like;
#: results have the input's array type (array-likes give NumPy arrays)
ArrayT = TypeVar("ArrayT")
Tie = Literal["first", "last"]
Axis = "int | tuple[int, ...] | None"
Device = "str | None"

_ndarray = np.ndarray
_tuple = tuple

# --------------------------------------------------------------------------- the key

_env_device = env_reader("CUPYOPS_DEVICE")
# the SIMT layer's compiler: a kernel-path call on NumPy input checks on the full road that it
# works (cupyops.core.devices.require), so a key made under one compiler is no key under another
_env_simt_cxx = env_reader("CUPYOPS_SIMT_CXX")

#: argument types seen that are no tuple subclass (tuple itself aside)
_flat_kinds = {tuple, int, bool, float, str, type(None)}


def _flat(kinds) -> bool:
    """Whether no type in ``kinds`` is a subclass of tuple (tuple itself aside): a named tuple
    or a nested tuple would hide its items' types from the key (``P(0, 2) == P(False, 2)``),
    so such calls have no key. Types found flat are remembered."""
    for k in kinds:
        if k not in _flat_kinds:
            if issubclass(k, tuple):
                return False
            if len(_flat_kinds) < 512:
                _flat_kinds.add(k)
    return True


def _arg_kinds(args):
    """The types of ``args`` (a tuple argument, ``axis=(0, 2)``, by its items' types too), or
    None where the key cannot tell them apart."""
    kinds = tuple(map(type, args))
    if not _flat_kinds.issuperset(kinds) and not _flat(kinds):
        return None
    if _tuple in kinds:       # then the tuples' item types follow, in order
        items_kinds = tuple([tuple(map(type, a)) for a in args if type(a) is _tuple])
        for items in items_kinds:
            if _tuple in items or not _flat_kinds.issuperset(items) and not _flat(items):
                return None
        kinds = (kinds, *items_kinds)
    return kinds


def key(x, device, workspace, out, *args):
    """The call's key, or None where no entry may serve it (see the module docstring).

    A NumPy-path call (NumPy input, device "cpu" by argument or environment) has the flat
    key ``(*args, shape, strides, dtype, device, environment's device, *kinds)`` that the
    public functions build inline for their common arguments (:data:`_PLAIN`); a kernel-path
    call the nested ``(args, kinds, ...)`` of :func:`layout_class`."""
    if out is not None:
        return None
    t = type(x)
    # the arguments' types too: True == 1 == 1.0 as dict keys, but the rules accept only some
    kinds = _arg_kinds(args[1:])
    if kinds is None:
        return None
    if t is _ndarray:
        if device is not None:
            env = None
            cpu = device == "cpu"
        else:
            env = _env_device()              # bytes on POSIX, str elsewhere
            cpu = env is None or env == b"cpu" or env == "cpu"
        if cpu:
            if workspace is not None:
                return None
            return (*args, x.shape, x.strides, x.dtype, device, env, *kinds)
        if _argreduce_plan.PLAN_OPTIONS:
            return None
        return (args, kinds, x.shape, x.strides, x.dtype, (device, env, _env_simt_cxx()),
                type(workspace), numpy_data_ptr(x) % 32, force_64bit.get())
    if library_of_type(t) != "cupy" or _argreduce_plan.PLAN_OPTIONS:
        return None
    return (args, kinds, t, x.shape, x.strides, x.dtype, device, type(workspace),
            x.data.ptr % 32, x.data.device_id, force_64bit.get())


#: argument types for which a public function builds its NumPy-path key inline
_PLAIN = frozenset({type(None), int})


def layout_class(k):
    """The key ``k`` of a kernel-path call without its shape and strides, with the number of
    dimensions instead: NumPy input (9 items) or CuPy input (11); None for the NumPy path
    (a flat key), which has no class entries."""
    if type(k[0]) is not tuple:
        return None
    n = len(k)
    # (the pointer mod 16, not the key's mod 32: a class entry plans each new array from its
    # own pointer, and NumPy's allocations agree only mod 16)
    if n == 9:
        return (k[0], k[1], len(k[2])) + k[4:7] + (k[7] % 16, k[8])
    if n == 11:
        return (k[0], k[1], k[2], len(k[3])) + k[5:8] + (k[8] % 16,) + k[9:]
    return None


# --------------------------------------------------------------------------- the caches

_entries = LRU(4096)
_entry_peek, _entry_touch = _entries.peek, _entries.touch
_classes = LRU(1024)

# Keys a class entry served once, without keeping anything for them: a layout is kept on its
# second call. A first call then leaves no entry behind, so its objects are freed at once and
# their memory reused while it is still in the CPU's caches (keeping every first call, and
# evicting another entry for it, cost a fifth of a first call); shapes that never repeat, as
# in a pipeline whose shapes vary, never fill the caches. Bounded: emptied when it reaches
# _SERVED_ONCE_MAX keys (those layouts are then kept on their third call). Dict operations
# are atomic under the GIL.
_served_once: dict = {}
_SERVED_ONCE_MAX = 4096


def _second_call(k) -> bool:
    """Whether the layout of key ``k`` was served once before (then keep it now); else note
    that it has been served once."""
    if _served_once.pop(k, False):
        return True
    if len(_served_once) >= _SERVED_ONCE_MAX:
        _served_once.clear()
    _served_once[k] = True
    return False


def lookup(x, device, workspace, out, *args):
    """``(key, entry)``: the key and its cached entry (None on a miss, or without a key)."""
    k = key(x, device, workspace, out, *args)
    if k is None:
        return None, None
    try:
        hit = _entry_peek(k)
    except TypeError:          # an unhashable argument: the full road says what is wrong
        return None, None
    if hit is not None and type(k[0]) is tuple:
        try:
            _entry_touch(k)    # LRU order (evicted in between by another thread: still valid)
        except KeyError:
            pass
    return k, hit


def clear() -> None:
    """Forget every cached entry and layout class."""
    _entries.clear()
    _classes.clear()
    _served_once.clear()


class _Op:
    """A public function's full road: ``call(x, *args)`` and the names of ``args``."""

    __slots__ = ("name", "call", "names")

    def __init__(self, name, call, names):
        self.name, self.call, self.names = name, call, names


def _road(op, k, x, workspace, args):
    """Steps 2 and 3 of the module docstring, after a miss."""
    if k is not None:
        if x.flags.c_contiguous:
            ck = layout_class(k)
            first = None if ck is None else _classes.get(ck)
            if first is not None:
                served = first(x, workspace, _second_call(k))
                if served is not None:
                    res, entry = served
                    if entry is not None:
                        _entries.put(k, entry)
                    return res
    elif type(x) is not _ndarray:
        lib = library_of_type(type(x))
        if lib not in (None, "numpy", "cupy"):
            return _other_library(op, lib, x, args)
    res, entry, cls = op.call(x, *args)
    if k is not None and entry is not None:
        try:
            _entries.put(k, entry)
        except TypeError:      # an unhashable argument the rules accepted
            return res
        if cls is not None and x.flags.c_contiguous:
            ck = layout_class(k)
            if ck is not None:
                _classes.put(ck, cls)
    return res


def _other_library(op, lib, x, args):
    """A Dask array, or a DLPack array of another library (see the module docstring)."""
    fn = PUBLIC[op.name]
    kw = dict(zip(op.names, args))
    if lib == "dask":
        return _dask.call(fn, x, kw, PUBLIC)
    return _dlpack.call(fn, lib, x, kw)


# --------------------------------------------------------------------------- argmax / argmin

def argmax(x: ArrayT, /, axis: Axis = None, *, keepdims: bool = False, tie: Tie = "first",
           dtype=None, out=None, device: Device = None,
           workspace: Workspace | None = None) -> ArrayT:
    """Index of the largest element over ``axis`` (row-major index within the reduced axes).

    ``tie="first"`` returns the smallest index among equal maxima, ``"last"`` the largest. NaN
    (complex: a NaN in either part) and NaT count as the maximum. Complex values order on
    (real, imag). ``dtype`` is the index dtype: any integer dtype the group's last index fits.
    ``workspace``: a :class:`cupyops.Workspace` for the kernel path's scratch (CUDA-graph
    capture; docs/api.md).
    """
    if (type(x) is _ndarray and out is None and workspace is None and type(axis) in _PLAIN
            and (device is None or device == "cpu")):
        try:
            hit = _entry_peek(("argmax", axis, keepdims, tie, dtype, x.shape, x.strides,
                               x.dtype, device, _env_device() if device is None else None,
                               type(axis), type(keepdims), type(tie), type(dtype)))
        except TypeError:      # an unhashable argument: the full road says what is wrong
            hit = None
        if hit is not None:
            return hit(x, None)
    k, hit = lookup(x, device, workspace, out, "argmax", axis, keepdims, tie, dtype)
    if hit is not None:
        return hit(x, workspace)
    return _road(_ARGMAX, k, x, workspace, (axis, keepdims, tie, dtype, out, device, workspace))


def argmin(x: ArrayT, /, axis: Axis = None, *, keepdims: bool = False, tie: Tie = "first",
           dtype=None, out=None, device: Device = None,
           workspace: Workspace | None = None) -> ArrayT:
    """Index of the smallest element over ``axis``; NaN counts as the minimum. See argmax."""
    if (type(x) is _ndarray and out is None and workspace is None and type(axis) in _PLAIN
            and (device is None or device == "cpu")):
        try:
            hit = _entry_peek(("argmin", axis, keepdims, tie, dtype, x.shape, x.strides,
                               x.dtype, device, _env_device() if device is None else None,
                               type(axis), type(keepdims), type(tie), type(dtype)))
        except TypeError:      # an unhashable argument: the full road says what is wrong
            hit = None
        if hit is not None:
            return hit(x, None)
    k, hit = lookup(x, device, workspace, out, "argmin", axis, keepdims, tie, dtype)
    if hit is not None:
        return hit(x, workspace)
    return _road(_ARGMIN, k, x, workspace, (axis, keepdims, tie, dtype, out, device, workspace))


def nanargmax(x: ArrayT, /, axis: Axis = None, *, keepdims: bool = False, tie: Tie = "first",
              dtype=None, out=None, device: Device = None,
              workspace: Workspace | None = None) -> ArrayT:
    """argmax that skips NaN (NaT is not skipped, as in NumPy). A group of only NaN is
    ``ValueError("All-NaN slice encountered")``; on the kernel path that costs one host read of
    a flag the same single pass sets. Arguments as argmax."""
    if (type(x) is _ndarray and out is None and workspace is None and type(axis) in _PLAIN
            and (device is None or device == "cpu")):
        try:
            hit = _entry_peek(("nanargmax", axis, keepdims, tie, dtype, x.shape, x.strides,
                               x.dtype, device, _env_device() if device is None else None,
                               type(axis), type(keepdims), type(tie), type(dtype)))
        except TypeError:      # an unhashable argument: the full road says what is wrong
            hit = None
        if hit is not None:
            return hit(x, None)
    k, hit = lookup(x, device, workspace, out, "nanargmax", axis, keepdims, tie, dtype)
    if hit is not None:
        return hit(x, workspace)
    return _road(_NANARGMAX, k, x, workspace,
                 (axis, keepdims, tie, dtype, out, device, workspace))


def nanargmin(x: ArrayT, /, axis: Axis = None, *, keepdims: bool = False, tie: Tie = "first",
              dtype=None, out=None, device: Device = None,
              workspace: Workspace | None = None) -> ArrayT:
    """argmin that skips NaN; see nanargmax."""
    if (type(x) is _ndarray and out is None and workspace is None and type(axis) in _PLAIN
            and (device is None or device == "cpu")):
        try:
            hit = _entry_peek(("nanargmin", axis, keepdims, tie, dtype, x.shape, x.strides,
                               x.dtype, device, _env_device() if device is None else None,
                               type(axis), type(keepdims), type(tie), type(dtype)))
        except TypeError:      # an unhashable argument: the full road says what is wrong
            hit = None
        if hit is not None:
            return hit(x, None)
    k, hit = lookup(x, device, workspace, out, "nanargmin", axis, keepdims, tie, dtype)
    if hit is not None:
        return hit(x, workspace)
    return _road(_NANARGMIN, k, x, workspace,
                 (axis, keepdims, tie, dtype, out, device, workspace))


def hardmax(x: ArrayT, /, axis: Axis = -1, *, tie: Tie = "first", out=None,
            device: Device = None, workspace: Workspace | None = None) -> ArrayT:
    """One-hot of the element ``argmax(..., tie=tie)`` picks in each group spanned by ``axis``.

    The output has x's shape and dtype (``True`` at the chosen place for bool). ``workspace``:
    see argmax.
    """
    if (type(x) is _ndarray and out is None and workspace is None and type(axis) in _PLAIN
            and (device is None or device == "cpu")):
        try:
            hit = _entry_peek(("hardmax", axis, tie, x.shape, x.strides, x.dtype, device,
                               _env_device() if device is None else None, type(axis), type(tie)))
        except TypeError:      # an unhashable argument: the full road says what is wrong
            hit = None
        if hit is not None:
            return hit(x, None)
    k, hit = lookup(x, device, workspace, out, "hardmax", axis, tie)
    if hit is not None:
        return hit(x, workspace)
    return _road(_HARDMAX, k, x, workspace, (axis, tie, out, device, workspace))


# --------------------------------------------------------------------------- nonzero family

def count_nonzero(x: ArrayT, /, axis: Axis = None, *, keepdims: bool = False,
                  device: Device = None) -> ArrayT:
    """Number of elements with ``x != 0`` over ``axis`` (int64, as the array API asks)."""
    if type(x) is _ndarray and type(axis) in _PLAIN and (device is None or device == "cpu"):
        try:
            hit = _entry_peek(("count_nonzero", axis, keepdims, x.shape, x.strides, x.dtype,
                               device, _env_device() if device is None else None, type(axis),
                               type(keepdims)))
        except TypeError:      # an unhashable argument: the full road says what is wrong
            hit = None
        if hit is not None:
            return hit(x, None)
    k, hit = lookup(x, device, None, None, "count_nonzero", axis, keepdims)
    if hit is not None:
        return hit(x, None)
    return _road(_COUNT_NONZERO, k, x, None, (axis, keepdims, device))


def argwhere(x: ArrayT, /, *, dtype=None, device: Device = None) -> ArrayT:
    """Coordinates of the nonzero elements, shape (count, ndim), in ascending row-major order."""
    if type(x) is _ndarray and (device is None or device == "cpu"):
        try:
            hit = _entry_peek(("argwhere", dtype, x.shape, x.strides, x.dtype, device,
                               _env_device() if device is None else None, type(dtype)))
        except TypeError:      # an unhashable argument: the full road says what is wrong
            hit = None
        if hit is not None:
            return hit(x, None)
    k, hit = lookup(x, device, None, None, "argwhere", dtype)
    if hit is not None:
        return hit(x, None)
    return _road(_ARGWHERE, k, x, None, (dtype, device))


def nonzero(x: ArrayT, /, *, device: Device = None) -> tuple[ArrayT, ...]:
    """Array API nonzero: a tuple of ndim 1-D int64 index arrays, in row-major order."""
    if type(x) is _ndarray and (device is None or device == "cpu"):
        try:
            hit = _entry_peek(("nonzero", x.shape, x.strides, x.dtype, device,
                               _env_device() if device is None else None))
        except TypeError:      # an unhashable argument: the full road says what is wrong
            hit = None
        if hit is not None:
            return hit(x, None)
    k, hit = lookup(x, device, None, None, "nonzero")
    if hit is not None:
        return hit(x, None)
    return _road(_NONZERO, k, x, None, (device,))


def nonzero_coordinates(x: ArrayT, /, *, size: int | None = None, fill_value: int = 0,
                        dtype=None, out=None, device: Device = None,
                        workspace: Workspace | None = None) -> tuple[ArrayT, ArrayT]:
    """DirectML's NonZeroCoordinates: returns ``(coords, count)``.

    ``size=None`` gives exactly ``count`` rows. ``size=k`` always gives ``k`` rows: the first
    ``min(count, k)`` are coordinates, the rest ``fill_value``; no host synchronisation is needed,
    and ``count`` is a 0-d int64 array on the input's device.

    ``out=(coords, count)`` (``size=k`` only) receives the result; with it and a ``workspace``
    the GPU call allocates nothing and never synchronises: the CUDA-graph capture form.
    """
    if (type(x) is _ndarray and out is None and workspace is None
            and (device is None or device == "cpu")):
        try:
            hit = _entry_peek(("nonzero_coordinates", size, fill_value, dtype, x.shape,
                               x.strides, x.dtype, device,
                               _env_device() if device is None else None, type(size),
                               type(fill_value), type(dtype)))
        except TypeError:      # an unhashable argument: the full road says what is wrong
            hit = None
        if hit is not None:
            return hit(x, None)
    k, hit = lookup(x, device, workspace, out, "nonzero_coordinates", size, fill_value, dtype)
    if hit is not None:
        return hit(x, workspace)
    return _road(_NONZERO_COORDINATES, k, x, workspace,
                 (size, fill_value, dtype, out, device, workspace))


_REDUCE_ARGS = ("axis", "keepdims", "tie", "dtype", "out", "device", "workspace")
_ARGMAX = _Op("argmax", functools.partial(_argreduce.argreduce_call, "max", False),
              _REDUCE_ARGS)
_ARGMIN = _Op("argmin", functools.partial(_argreduce.argreduce_call, "min", False),
              _REDUCE_ARGS)
_NANARGMAX = _Op("nanargmax", functools.partial(_argreduce.argreduce_call, "max", True),
                 _REDUCE_ARGS)
_NANARGMIN = _Op("nanargmin", functools.partial(_argreduce.argreduce_call, "min", True),
                 _REDUCE_ARGS)
_HARDMAX = _Op("hardmax", _argreduce.hardmax_call, ("axis", "tie", "out", "device", "workspace"))
_COUNT_NONZERO = _Op("count_nonzero", _nonzero.count_nonzero_call,
                     ("axis", "keepdims", "device"))
_ARGWHERE = _Op("argwhere", _nonzero.argwhere_call, ("dtype", "device"))
_NONZERO = _Op("nonzero", _nonzero.nonzero_call, ("device",))
_NONZERO_COORDINATES = _Op("nonzero_coordinates", _nonzero.nonzero_coordinates_call,
                           ("size", "fill_value", "dtype", "out", "device", "workspace"))

#: the public functions by name (the interop layer calls them on chunks and views)
PUBLIC = {f.__name__: f for f in (argmax, argmin, nanargmax, nanargmin, hardmax, argwhere,
                                  nonzero, count_nonzero, nonzero_coordinates)}
_dask.use_public(PUBLIC)
