"""Per-call host cost: a call that repeats one seen before skips straight to the work.

A public function first builds a key (:func:`key`) of everything its argument rules and its
choice of path depend on: the input's type, shape, strides and dtype (and, for the kernel paths,
its data pointer's alignment and device), every argument as given, ``device`` and
``CUPYOPS_DEVICE`` (and ``CUPYOPS_SIMT_CXX`` for the kernels on NumPy input), and the
``force_64bit`` switch. On a hit the stored entry runs the call directly. The slow path stores
an entry (:func:`remember`) only once it has accepted the very same arguments and chosen the
path, so a bad input, which differs from every accepted one in some part of its key, always
takes the slow path and fails there with its usual message.

Entries hold what is derived from the layout (the kernels' prepared launches, or a NumPy
composition for small inputs on the CPU path), never memory: scratch comes from the caller's
Workspace or the stream's arena on every call, outputs are allocated on every call. Calls with
``out=``, other input types, and tests' plan options take the slow path.
"""
from __future__ import annotations

import functools
import os
import sys

import numpy as np

from cupyops.core import placement as _dispatch
from cupyops.core import trace as _trace
from cupyops.core.backend import numpy_data_ptr as _data_ptr
from cupyops.ops.nonzero.numpy_path import count_all as _count_all
from cupyops.core.lru import LRU

__all__ = ["key", "layout_class", "lookup", "remember", "clear", "kernel_prep", "kernel_entry",
           "CPU_SMALL"]

_ndarray = np.ndarray


def _env_reader(name):
    """Environment variable ``name`` as stored (bytes on POSIX), read straight from os.environ's
    mapping: os.environ.get encodes the key on every call (half a microsecond of a cached call)."""
    try:
        data, key = os.environ._data, os.environ.encodekey(name)
        data.get(key)
    except (AttributeError, TypeError):  # pragma: no cover - another platform's os.environ
        return lambda: os.environ.get(name)
    return lambda: data.get(key)


_env_device = _env_reader("CUPYOPS_DEVICE")
# the SIMT layer's compiler: a kernel-path call on NumPy input checks on the slow path that it
# works (cupyops.core.devices.require), so a key made under one compiler is no key under another
_env_simt_cxx = _env_reader("CUPYOPS_SIMT_CXX")
_force_64bit = _dispatch.force_64bit

#: the CPU path's NumPy compositions serve inputs of at most this many elements (larger ones
#: keep the chunked paths, whose extra memory is bounded)
CPU_SMALL = 4096

_entries = LRU(4096)
_get, _move_to_end = _entries._d.get, _entries._d.move_to_end

# tests' planner options (cupyops.ops.argreduce.launch.PLAN_OPTIONS, the same dict object for the
# process's life: tests mutate it or monkeypatch the attribute) turn the fast path off
from cupyops.ops.argreduce import launch as _G  # noqa: E402


_tuple = tuple


#: argument types seen that are no tuple subclass (tuple itself aside)
_flat_kinds = {tuple, int, bool, float, str, type(None)}


def _flat(kinds) -> bool:
    """Whether no type in ``kinds`` is a subclass of tuple (tuple itself aside): a named tuple
    or a nested tuple would hide its items' types from the key (``P(0, 2) == P(False, 2)``),
    so such calls take the slow path. Types found flat are remembered."""
    for k in kinds:
        if k not in _flat_kinds:
            if issubclass(k, tuple):
                return False
            if len(_flat_kinds) < 512:
                _flat_kinds.add(k)
    return True


def key(x, device, workspace, out, *args):
    """The call's key, or None where the fast path does not apply."""
    if out is not None or _G.PLAN_OPTIONS:
        return None
    t = type(x)
    # the arguments' types too: True == 1 == 1.0 as dict keys, but the rules accept only some
    # (a tuple argument, axis=(0, 2), by its items' types)
    kinds = tuple(map(type, args))
    if not _flat_kinds.issuperset(kinds) and not _flat(kinds):
        return None
    if _tuple in kinds:       # then the tuples' item types follow, in order
        items_kinds = tuple([tuple(map(type, a)) for a in args if type(a) is _tuple])
        for items in items_kinds:
            if _tuple in items or not _flat_kinds.issuperset(items) and not _flat(items):
                return None
        kinds = (kinds, *items_kinds)
    if t is _ndarray:
        if device is not None:
            dev = (device, None)
            cpu = device == "cpu"
        else:
            env = _env_device()              # bytes on POSIX, str elsewhere
            dev = (None, env)
            cpu = env is None or env == b"cpu" or env == "cpu"
        if cpu:
            if workspace is not None:
                return None
            k = (args, kinds, x.shape, x.strides, x.dtype, dev)
        else:
            k = (args, kinds, x.shape, x.strides, x.dtype, dev + (_env_simt_cxx(),),
                 type(workspace), _data_ptr(x) % 16, _force_64bit.get())
    else:
        cupy = sys.modules.get("cupy")
        if cupy is None or t is not cupy.ndarray:
            return None
        k = (args, kinds, t, x.shape, x.strides, x.dtype, device, type(workspace),
             x.data.ptr % 16, x.data.device_id, _force_64bit.get())
    return k


def layout_class(k):
    """The key ``k`` of a kernel-path call without its shape and strides, with the number of
    dimensions instead (cupyops.ops.argreduce.first_call): ``(args, kinds, [type,] shape, strides, ...)``
    as :func:`key` builds it, NumPy input (9 items) or CuPy input (11); None for the CPU path
    (6 items)."""
    n = len(k)
    if n == 9:
        return (k[0], k[1], len(k[2])) + k[4:]
    if n == 11:
        return (k[0], k[1], k[2], len(k[3])) + k[5:]
    return None


def lookup(x, device, workspace, out, *args):
    """``(key, entry)``: :func:`key` and :func:`get` in one call (the hot path of every public
    function); ``(None, None)`` where the fast path does not apply, ``(key, None)`` on a miss."""
    k = key(x, device, workspace, out, *args)
    if k is None:
        return None, None
    try:
        hit = _get(k)
    except TypeError:          # an unhashable argument: the slow path says what is wrong
        return None, None
    if hit is not None:
        try:
            _move_to_end(k)    # LRU order (evicted in between by another thread: still valid)
        except KeyError:
            pass
    return k, hit


def remember(k, entry) -> None:
    if k is not None and entry is not None:
        try:
            _entries.put(k, entry)
        except TypeError:
            pass


def clear() -> None:
    """Forget every entry, and every layout class of cupyops.ops.argreduce.first_call."""
    _entries.clear()
    from cupyops.ops.argreduce import first_call as _firstcall
    _firstcall.clear()


# --------------------------------------------------------------------------- kernel paths

def kernel_prep(placement, x, kx):
    """``(True, prep)`` where a kernel-path call on ``x`` can be served by an entry:
    ``prep(x)`` gives the array the kernels read (None: x itself, as for CuPy input;
    :func:`_read_only_view` for NumPy input on simt). ``kx`` is what the slow path passed the
    kernels. ``(False, None)`` for NumPy input on "cuda" (host-to-device and back), tests'
    plan options, and inputs the slow path copied (byte order, alignment)."""
    if placement.kind == "cuda" and not placement.cupy_input:
        return False, None
    if _G.PLAN_OPTIONS:
        return False, None
    if placement.cupy_input:
        return kx is x, None
    if not (kx.base is x or kx.base is x.base) or kx.dtype != x.dtype:
        return False, None
    return True, _read_only_view


def kernel_entry(backend, placement, x, kx, run, *, reshape=None):
    """An entry for the kernel path, or None (see :func:`kernel_prep`). ``run(kx, workspace)``
    does the launches on the array the kernels read; ``kx`` is what the slow path passed them,
    ``x`` the caller's array."""
    ok, prep = kernel_prep(placement, x, kx)
    if not ok:
        return None
    # (a partial, not a closure: fewer objects per cached entry for the garbage collector)
    return functools.partial(_kernel_entry_call, run, prep, reshape)


def _kernel_entry_call(run, prep, reshape, x, workspace):
    res = run(x if prep is None else prep(x), workspace)
    return res if reshape is None else res.reshape(reshape)


_dry_run = _trace._dry


def _read_only_view(x):
    """SIMT then reports any kernel write to the input. In a dry run no kernel runs: the input
    itself (the cached call then costs what it does on a GPU, where CuPy input is passed as
    it is)."""
    if _dry_run.get() is not None:
        return x
    v = x.view()
    v.flags.writeable = False
    return v


# --------------------------------------------------------------------------- CPU path

# (ndarray's own methods for argmax/argmin: np.argmax's Python wrapper costs half a µs)
_ARG = {("max", False): np.ndarray.argmax, ("min", False): np.ndarray.argmin,
        ("max", True): np.nanargmax, ("min", True): np.nanargmin}


def _numpy_semantics(dtype) -> bool:
    # NumPy's argmax/argmin/nonzero agree with docs/api.md for these (NaN first, -0.0 == 0.0);
    # complex, datetime and bfloat16 keep the library's own paths
    return dtype.kind in "biuf" and dtype.isnative


def cpu_argreduce_entry(x, axes, *, kind, skip_nan, tie, index_dtype, result_shape):
    """The NumPy composition a user would write for a small input, or None."""
    if x.size == 0 or not axes or not _numpy_semantics(x.dtype):
        return None
    # larger inputs only where NumPy reads in place: the last axis of a C-contiguous input
    # (np.argmax copies any other layout whole, padded rows included; the library's chunked
    # path bounds that); tie "last" by rows (_cpu_argreduce.last_extreme_rows)
    if x.size > CPU_SMALL:
        if not (axes == (x.ndim - 1,) and not skip_nan and x.flags.c_contiguous):
            return None
        if tie == "last":
            return _last_extreme_entry(x, kind, index_dtype, result_shape)
    f = _ARG[(kind, skip_nan)]
    last = tie == "last"
    ndim = x.ndim
    index_dtype = np.dtype(index_dtype)
    kept = tuple(i for i in range(ndim) if i not in axes)
    if len(axes) == ndim:
        n = x.size

        def run(x):
            if last:
                return n - 1 - f(x.reshape(-1)[::-1])
            return f(x)
    elif len(axes) == 1:
        (a,) = axes
        n = x.shape[a]
        flip = tuple(slice(None, None, -1) if i == a else slice(None) for i in range(ndim))

        def run(x):
            if last:
                return n - 1 - f(x[flip], axis=a)
            return f(x, axis=a)
    else:
        perm = kept + tuple(axes)
        flat = tuple(x.shape[i] for i in kept) + (-1,)
        n = int(np.prod([x.shape[i] for i in axes]))

        def run(x):
            y = x.transpose(perm).reshape(flat)
            if last:
                return n - 1 - f(y[..., ::-1], axis=-1)
            return f(y, axis=-1)
    same = index_dtype == np.dtype(np.intp)

    def entry(x, workspace):
        r = run(x)
        r = np.asarray(r) if same else np.asarray(r).astype(index_dtype)
        return r.reshape(result_shape) if r.shape != result_shape else r
    return entry


def _row_tails_serve(rows: int, n: int) -> bool:
    """Whether ``rows`` rows of ``n`` elements find their last extremes with
    last_extreme_rows: many rows, none longer than a chunk. A few long rows keep the engine,
    whose blocks of ~sqrt(16 n) read a long row once (the tails searched from the end would
    read the part after each row's first extreme twice)."""
    from cupyops.ops.argreduce.numpy_path import CHUNK_ELEMS, SAMPLE_ROWS
    return rows >= 2 * SAMPLE_ROWS and n <= CHUNK_ELEMS


def _last_extreme_entry(x, kind, index_dtype, result_shape):
    """argmin/argmax with tie "last" along the last axis of a large C-contiguous input (a
    view), where :func:`_row_tails_serve`; else None."""
    from cupyops.ops.argreduce.numpy_path import last_extreme_rows
    n = x.shape[-1]
    if not _row_tails_serve(x.size // n, n):
        return None
    index_dtype = np.dtype(index_dtype)

    def entry(x, workspace):
        r = last_extreme_rows(x.reshape(-1, n), kind)
        return r.astype(index_dtype, copy=False).reshape(result_shape)
    return entry


def cpu_hardmax_entry(x, axes, *, tie):
    """np.argmax then np.put_along_axis over one axis, or over all of them, for a small
    input; the rows' extremes scattered into zeros over the last axis of a large C-contiguous
    one; or None."""
    if x.size == 0 or not axes or not _numpy_semantics(x.dtype):
        return None
    if x.size > CPU_SMALL:
        if axes == (x.ndim - 1,) and x.flags.c_contiguous:
            return _rows_hardmax_entry(x, tie)
        return None
    ndim = x.ndim
    last = tie == "last"
    shape, dtype = x.shape, x.dtype
    if len(axes) == ndim:
        n = x.size

        def entry(x, workspace):
            i = n - 1 - np.argmax(x.reshape(-1)[::-1]) if last else np.argmax(x)
            out = np.zeros(shape, dtype)
            out.reshape(-1)[i] = 1
            return out
        return entry
    if len(axes) != 1:
        return None
    (a,) = axes
    n = x.shape[a]
    flip = tuple(slice(None, None, -1) if i == a else slice(None) for i in range(ndim))

    def entry(x, workspace):
        if last:
            i = n - 1 - np.argmax(x[flip], axis=a, keepdims=True)
        else:
            i = np.argmax(x, axis=a, keepdims=True)
        out = np.zeros(shape, dtype)
        np.put_along_axis(out, i, 1, axis=a)
        return out
    return entry


def _rows_hardmax_entry(x, tie):
    """hardmax over the last axis of a large C-contiguous input, as rows: NumPy's argmax reads
    them in place (tie "last": last_extreme_rows where :func:`_row_tails_serve`, else None);
    the ones go into np.zeros (calloc: faster than np.zeros_like's fill) by one row-wise
    scatter (put_along_axis builds its index arrays in Python)."""
    shape, dtype = x.shape, x.dtype
    n = shape[-1]
    rows = x.size // n
    if tie == "last":
        from cupyops.ops.argreduce.numpy_path import last_extreme_rows
        if not _row_tails_serve(rows, n):
            return None

        def extremes(x2):
            return last_extreme_rows(x2, "max")
    else:
        extremes = functools.partial(_ARG[("max", False)], axis=1)

    def entry(x, workspace):
        i = extremes(x.reshape(rows, n))
        out = np.zeros(shape, dtype)
        out.reshape(rows, n)[np.arange(rows), i] = 1
        return out
    return entry


def cpu_count_entry(x, axes, *, result_shape):
    """A whole-array count (cupyops.ops.nonzero.numpy_path.count_all): any size over all axes (bounded
    memory); np.count_nonzero over some axes: small inputs."""
    if x.dtype.kind not in "biufcmM" or not x.dtype.isnative or not axes or x.size == 0:
        return None
    if len(axes) == x.ndim:
        def entry(x, workspace):
            return np.asarray(_count_all(x), np.int64).reshape(result_shape)
        return entry
    if x.size > CPU_SMALL:
        return None
    ax = tuple(axes)

    def entry(x, workspace):
        # C order, as the slow path's result (np.count_nonzero follows x's layout)
        return np.count_nonzero(x, axis=ax).astype(np.int64, order="C").reshape(result_shape)
    return entry


def _nonzero_ok(x) -> bool:
    return (x.dtype.kind in "biufcmM" and x.dtype.isnative and x.ndim >= 1 and x.size > 0
            and x.flags.c_contiguous)


def _coordinates(x, out=None, dtype=np.intp):
    """The coordinates of x's nonzeros (C-contiguous x), row-major: the flat indices
    (np.flatnonzero) split by divmod straight into one array per axis (``out(count)`` gives
    them, e.g. the columns of argwhere's result), which beats np.nonzero's coordinate walk and
    gives contiguous arrays."""
    flat = np.flatnonzero(x)
    n = len(flat)
    if x.ndim == 1 and out is None:
        return [flat]
    cols = out(n) if out is not None else [np.empty(n, dtype) for _ in range(x.ndim)]
    if x.ndim == 1:
        cols[0][...] = flat
        return cols
    rem = flat
    for i in range(x.ndim - 1, 0, -1):
        q = cols[0] if i == 1 else np.empty(n, np.intp)
        np.divmod(rem, x.shape[i], out=(q, cols[i]), casting="unsafe")
        rem = q
    return cols


def cpu_argwhere_entry(x, index_dtype):
    """(count, ndim) coordinates, C-contiguous, for C-contiguous inputs of any size (memory:
    the output's and one flat index array)."""
    if not _nonzero_ok(x):
        return None
    dt = np.dtype(index_dtype)
    ndim = x.ndim

    def entry(x, workspace):
        if ndim == 1 and dt == np.intp:
            return np.flatnonzero(x).reshape(-1, 1)
        res = []

        def columns(n):
            res.append(np.empty((n, ndim), dt))
            return [res[0][:, i] for i in range(ndim)]
        _coordinates(x, columns)
        return res[0]
    return entry


def cpu_nonzero_entry(x):
    if not _nonzero_ok(x):
        return None

    def entry(x, workspace):
        return tuple(_coordinates(x))
    return entry


def cpu_coordinates_entry(x, size, fill_value, index_dtype):
    if not _nonzero_ok(x):
        return None
    dt = np.dtype(index_dtype)
    argwhere = cpu_argwhere_entry(x, dt)

    def entry(x, workspace):
        a = argwhere(x, workspace)
        n = len(a)
        count = np.asarray(n, np.int64)
        if size is None:
            return a, count
        coords = np.empty((size, a.shape[1]), dt)
        m = min(size, n)
        coords[:m] = a[:m]
        coords[m:] = fill_value
        return coords, count
    return entry
