"""First call of a new layout in a layout class seen before.

:mod:`cupyops.ops.argreduce.numpy_entries` serves a call that repeats a layout. A call with a *new* layout may
still repeat a *layout class*: a C-contiguous input with every other part of the fast-path key
seen before (operator, arguments as given, input type, dtype, number of dimensions, device,
data pointer mod 16, workspace type, ``force_64bit``). The slow path accepted those very
arguments for that dtype and rank, so only the rules that read the shape are left: an empty
reduced axis or output, a group too long for the index dtype. A class entry checks those and
hands any doubt back to the slow path (which fails with its usual message or takes its
trivial branch), plans the new shape with the contiguous planner and runs it. The layout's
own fast-path entry is stored on its second call (``_second_call``): a layout seen once leaves
nothing behind.

Class entries hold the validated arguments and the backend: no plan, no memory. Only kernel
paths (simt; CuPy input), and only where the slow path stored a fast-path entry too. Every
public op: argmin/argmax/nanarg*/hardmax plan with the contiguous planner
(cupyops.ops.argreduce.plan.plan_argreduce_contiguous, any set of axes); the nonzero family's
runners plan through their own planners (cached from the second call).
"""
from __future__ import annotations

import functools

import numpy as np

from cupyops.ops.argreduce import numpy_entries as _fast
from cupyops.ops.argreduce import launch as _G
from cupyops.ops.nonzero import launch as _N
from cupyops.ops.argreduce import plan as _P
from cupyops.core.backend import data_ptr as _data_ptr
from cupyops.core.lru import LRU

__all__ = ["lookup", "serve", "remember", "argreduce_class", "count_class", "coordinates_class",
           "clear"]

_classes = LRU(1024)
_get, _move_to_end = _classes._d.get, _classes._d.move_to_end     # (LRU.get without a call)


def lookup(k, x):
    """The class entry ``first(x, workspace, k)`` for a call whose fast-path key ``k`` missed,
    or None. ``first`` returns None where the slow path must decide."""
    if k is None or not x.flags.c_contiguous:
        return None
    ck = _fast.layout_class(k)
    first = None if ck is None else _get(ck)
    if first is not None:
        try:
            _move_to_end(ck)     # LRU order (evicted in between by another thread: still valid)
        except KeyError:
            pass
    return first


def remember(k, x, entry) -> None:
    """Store ``entry`` for the class of ``k`` (the key of a C-contiguous ``x`` that the slow
    path just served and stored)."""
    if k is None or entry is None or not x.flags.c_contiguous:
        return
    ck = _fast.layout_class(k)
    if ck is not None:
        _classes.put(ck, entry)


def clear() -> None:
    _classes.clear()
    _served_once.clear()


# Fast-path keys a class entry served once, without storing anything for them: a layout is
# cached on its second call. A first call then leaves no entry behind, so its objects are
# freed at once and their memory reused while it is still in the CPU's caches (storing every
# first call in the LRU, and evicting another entry for it, cost a fifth of a first call);
# shapes that never repeat, as in a pipeline whose shapes vary, never fill the caches.
# Bounded: emptied when it reaches _SERVED_ONCE_MAX keys (those layouts are then cached on
# their third call). Dict operations are atomic under the GIL.
_served_once: dict = {}
_SERVED_ONCE_MAX = 4096


def _second_call(k) -> bool:
    """Whether the layout of key ``k`` was served once before (then cache it now); else
    note that it has been served once."""
    if _served_once.pop(k, False):
        return True
    if len(_served_once) >= _SERVED_ONCE_MAX:
        _served_once.clear()
    _served_once[k] = True
    return False


def argreduce_class(backend, placement, axes, *, hardmax, kind="max", tie="first",
                    index_dtype=None, skip_nan=False, keepdims=False):
    """The class entry of argmin/argmax/nanarg* (``hardmax=False``) or hardmax over ``axes``
    (sorted, non-empty), planned with the contiguous planner."""
    top = int(np.iinfo(index_dtype).max) if not hardmax else None
    out_dtype = None if hardmax else np.dtype(index_dtype)
    force_64bit = _fast._force_64bit
    prep = None if placement.cupy_input else _fast._read_only_view
    props = backend.props
    plan_contiguous, launches_of = _P.plan_argreduce_contiguous, _G.launches_of
    run_state, run = _G.run_state, _G._run
    align_of = {}

    def first(x, workspace, k):
        shape = x.shape
        # the rules that read the shape (an empty reduced axis or output; below, a group too
        # long for the index dtype): anything else is the slow path's to say
        if 0 in shape:
            return None
        vdt = x.dtype
        align = align_of.get(vdt)
        if align is None:
            align = align_of[vdt] = _G._element_align(vdt)
        try:
            plan = plan_contiguous(shape, vdt.itemsize, axes, props, force_64bit.get(), hardmax,
                                   _data_ptr(x) % 4096, align)
        except ValueError:            # too many dimensions after merging: the slow path's
            return None
        if top is not None and plan.group_full - 1 > top:
            return None
        launches = launches_of(
            backend, plan, vdt, shape, axes, hardmax=hardmax, kind=kind, tie=tie,
            out_dtype=vdt if hardmax else out_dtype,
            nan_skip=bool(skip_nan) and vdt.kind in "fcV")
        reshape = tuple(1 if i in axes else n for i, n in enumerate(shape)) \
            if keepdims else None
        state = run_state(backend, launches, (prep, reshape))
        res = run(state, x, workspace)    # records the plan; raises for an all-NaN group
        if _second_call(k):
            _fast.remember(k, functools.partial(run, state))     # (what _G.runner builds)
        return res
    return first


def serve(k, x, workspace):
    """The result of a new layout of a seen class, or None (the slow path decides)."""
    first = lookup(k, x)
    return None if first is None else first(x, workspace, k)


def nonzero_family_class(backend, placement, build, *, index_dtype=None):
    """The class entry of count_nonzero / argwhere / nonzero / nonzero_coordinates:
    ``build(kx, force_64bit, keep) -> (run, reshape)``: the runner the slow path builds for the
    array the kernels read (``run(kx, workspace)``; ``keep``: its plan may be cached) and the
    shape its result takes (None: as it is).
    Shape rules: a non-empty input whose longest dimension's last index fits ``index_dtype``
    (None: no such rule)."""
    top = None if index_dtype is None else int(np.iinfo(index_dtype).max)
    force_64bit = _fast._force_64bit
    prep = None if placement.cupy_input else _fast._read_only_view

    def first(x, workspace, k):
        shape = x.shape
        if 0 in shape or (top is not None and max(shape) - 1 > top):
            return None
        kx = x if prep is None else prep(x)
        keep = _second_call(k)
        run, reshape = build(kx, force_64bit.get(), keep)
        res = run(kx, workspace)
        if keep:
            _fast.remember(k, _fast.kernel_entry(backend, placement, x, kx, run,
                                                 reshape=reshape))
        return res if reshape is None else res.reshape(reshape)
    return first


def count_class(backend, placement, axes, keepdims):
    """count_nonzero over ``axes`` (non-empty)."""
    def build(kx, force_64bit, keep):
        shape = tuple(1 if i in axes else n for i, n in enumerate(kx.shape)) if keepdims \
            else None
        return _N.count_runner(backend, kx, axes, force_64bit=force_64bit,
                               cache_plan=keep), shape
    return nonzero_family_class(backend, placement, build)


def coordinates_class(backend, placement, index_dtype, *, layout=None, size=None,
                      fill_value=0, exact_count=False):
    """argwhere (``layout`` rows), nonzero (``layout`` columns: a tuple of rows),
    nonzero_coordinates (``size=None``: ``exact_count``; else ``size=k``)."""
    def build(kx, force_64bit, keep):
        if size is not None:
            return _N.fixed_runner(backend, kx, size, fill_value, index_dtype, force_64bit,
                                   cache_plan=keep), None
        if exact_count:
            return _N.exact_runner(backend, kx, index_dtype, _N.LAYOUT_ROWS, force_64bit,
                                   result=_N.RESULT_COORDS_COUNT, cache_plan=keep), None
        return _N.exact_runner(backend, kx, index_dtype, layout, force_64bit, keep_count=False,
                               result=_N.RESULT_ROWS if layout == _N.LAYOUT_COLS
                               else _N.RESULT_COORDS, cache_plan=keep), None
    return nonzero_family_class(backend, placement, build, index_dtype=index_dtype)
