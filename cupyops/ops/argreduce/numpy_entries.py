"""The NumPy path's entries for argmin / argmax / nanarg* / hardmax: what cupyops._call runs
for a layout it has seen, with every argument rule and every choice made once.

* **Small inputs** (at most CPU_SMALL elements) of the types NumPy orders as docs/api.md
  does: the NumPy composition a user would write (``x.argmax(axis=a)``; tie "last" on the
  reversed view), whose cost is NumPy's own.
* **A reduction over a consecutive run of axes of a C-contiguous input** (any size): the
  routines of cupyops.ops.argreduce.numpy_blocks over its flat, rows or fold view, threaded,
  on bool, integers, float16/32/64 and bfloat16 (as int16 keys). A read-only input is read
  through a writeable alias of its memory (cupyops.core.arrays.readable), never copied.
* **Anything else** (other layouts, complex, datetime, byte-swapped or unaligned input): the
  chunked engine (cupyops.ops.argreduce.numpy_path), its argument rules already checked.

Every entry is ``functools.partial(runner, state)``: ``entry(x, workspace)``.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from cupyops.core import dtypes as _dtypes
from cupyops.core import threads as _threads
from cupyops.core.arrays import readable
from cupyops.ops.argreduce import numpy_blocks as _blocks
from cupyops.ops.argreduce import numpy_path as _numpy

#: NumPy's own compositions serve inputs of at most this many elements where they would
#: copy (larger ones keep the chunked routines, whose extra memory is bounded)
CPU_SMALL = 4096

__all__ = ["cpu_argreduce_entry", "cpu_hardmax_entry", "cpu_values_entry", "fast_layout", "winners"]

_INTP = np.dtype(np.intp)
#: several axes (not all) of an input of at most this many elements: NumPy's composition (its
#: copy is at most 128 KiB; the fold's fixed cost is larger below it)
COMPOSE_MAX = 4 * CPU_SMALL
# (ndarray's own methods for argmax/argmin: np.argmax's Python wrapper costs half a µs)
_ARG = {("max", False): np.ndarray.argmax, ("min", False): np.ndarray.argmin}
_NAN_MAG = {np.dtype(np.float16): 0x7C00}


def _keyed(dtype):
    """``(ok, keyed)``: whether the block routines take ``dtype``, and the NaN magnitude of
    a 16-bit float type they compare as int16 keys (None for the others)."""
    if dtype.kind in "biuc" or dtype.kind == "f" and dtype.itemsize in (4, 8):
        return dtype.isnative, None
    if dtype == np.float16:
        return dtype.isnative, 0x7C00
    if _dtypes.is_bf16(dtype):
        return True, 0x7F80
    return False, None


def _slow_for_complex(layout, tie):
    """Whether a complex input laid out so is better left to the engine: NumPy orders complex
    values by scalar loops (its comparisons and max run at a fraction of argmax's speed), so
    of the block routines only those that end in argmax serve it: rows, flat with tie
    "first", and folds of narrow slabs (copied transposed, then argmax)."""
    how, dims = layout
    if how == "fold":
        return dims[2] > _blocks.TRANSPOSE_MAX_C
    return how == "flat" and tie == "last"


def fast_layout(x, axes):
    """``("flat", (n,))``, ``("rows", (rows, n))``, ``("fold", (A, R, C))`` for a reduction
    over the consecutive ``axes`` of a C-contiguous, aligned ``x``; else None."""
    if not (x.flags.c_contiguous and x.flags.aligned) or x.size == 0:
        return None
    p, q = axes[0], axes[-1]
    if q - p + 1 != len(axes):
        return None
    A = math.prod(x.shape[:p])
    R = math.prod(x.shape[p:q + 1])
    C = math.prod(x.shape[q + 1:])
    if A == 1 and C == 1:
        return "flat", (R,)
    if C == 1:
        return "rows", (A, R)
    return "fold", (A, R, C)


# ------------------------------------------------------------------------------ small inputs

def _small_runner(state, x, workspace):
    f, axis, flip, n, idt, shape = state
    r = f(x, axis) if flip is None else n - 1 - f(x[flip], axis)
    if type(r) is not np.ndarray:
        r = np.asarray(r)
    if idt is not None:
        r = r.astype(idt)
    return r if shape is None else r.reshape(shape)


def _small_all_first(state, x, workspace):
    # (argmax with keepdims: the result an array already; squeezed to 0-d unless keepdims)
    f, keep = state
    r = f(x, keepdims=True)
    return r if keep else r.squeeze()


def _small_entry(x, axes, kind, skip_nan, tie, index_dtype, result_shape):
    """The NumPy composition a user would write, for a small input."""
    ndim = x.ndim
    if skip_nan and x.dtype.kind == "f":
        return None      # (np.nanargmax answers 0 for [nan, -inf]: NaN is skipped here)
    f = _ARG[(kind, False)]
    idt = None if np.dtype(index_dtype) == _INTP else np.dtype(index_dtype)
    if len(axes) == ndim:
        if tie == "first" and idt is None and not skip_nan:
            return functools.partial(_small_all_first, (f, result_shape != ()))
        # reversing every axis reverses the row-major order
        axis, n, shape = None, x.size, result_shape
        flip = (slice(None, None, -1),) * ndim if tie == "last" else None
    elif len(axes) == 1:
        (axis,) = axes
        n = x.shape[axis]
        flip = tuple(slice(None, None, -1) if i == axis else slice(None)
                     for i in range(ndim)) if tie == "last" else None
        kept = tuple(m for i, m in enumerate(x.shape) if i != axis)
        shape = None if result_shape == kept else result_shape
    else:
        # kept axes first, the reduced ones flattened last (a copy of a small input)
        kept = tuple(i for i in range(ndim) if i not in axes)
        perm = kept + tuple(axes)
        flat = tuple(x.shape[i] for i in kept) + (-1,)
        n = math.prod(x.shape[i] for i in axes)
        return functools.partial(_small_moved, (f, perm, flat, n, tie == "last", idt,
                                                result_shape))
    return functools.partial(_small_runner, (f, axis, flip, n, idt, shape))


def _small_moved(state, x, workspace):
    f, perm, flat, n, last, idt, shape = state
    y = x.transpose(perm).reshape(flat)
    r = n - 1 - f(y[..., ::-1], -1) if last else f(y, -1)
    if idt is not None:
        r = r.astype(idt)
    return r.reshape(shape)


# ------------------------------------------------------------------------------ large inputs

def _result(r, idt, shape):
    if r.dtype != idt:
        r = r.astype(idt)
    return r if shape is None else r.reshape(shape)


def _run_flat_first(state, x, workspace):
    """tie "first" over every axis: NumPy's argmax/argmin of the whole input (a bool input
    split among threads is probed first: NumPy stops at the first True/False)."""
    f, kind, idt, shape, nan, work, probe = state
    if not x.flags.writeable:
        x = readable(x)
    if work and _threads.threads_for(work) > 1:
        # (on one thread NumPy's own argmax is the probe: it stops at the first True/False)
        if probe is not None:
            i = int(f(x[:probe]))
            if x.item(i) is (kind == "max"):
                return np.array(i, idt).reshape(shape)
        i = _blocks.flat_arg(x.reshape(-1), kind, "first")
        if nan is not None and nan(x.reshape(-1)[i:i + 1]):
            return nan(None, x)
        return np.array(i, idt).reshape(shape)
    r = f(x, keepdims=True)
    if nan is not None and nan(x.reshape(-1)[r.reshape(1)]):
        return nan(None, x)
    if r.dtype != idt:
        r = r.astype(idt)
    # (r: ones of x's rank; the result: (), those ones (keepdims), or kept axes of length 1)
    return r.squeeze() if shape == () else r if r.shape == shape else r.reshape(shape)


def _run_flat_numpy(state, x, workspace):
    """:func:`_run_flat_first` on one thread, intp indices, no NaN to skip: NumPy's call."""
    f, keep = state
    if not x.flags.writeable:
        x = readable(x)
    r = f(x, keepdims=True)
    return r if keep else r.squeeze()


def _run_flat(state, x, workspace):
    n, kind, tie, keyed, idt, shape, nan = state
    flat = readable(x).reshape(n)
    i = _blocks.flat_arg(flat, kind, tie, keyed)
    if nan is not None and nan(flat[i:i + 1]):
        return nan(None, x)
    return np.array(i, idt).reshape(shape)


def _run_rows_first(state, x, workspace):
    """tie "first" over trailing axes: NumPy's argmax/argmin along the rows, in place (row
    blocks among the threads)."""
    f, kind, rows, n, axis, idt, shape, result_shape, nan, work = state
    if not x.flags.writeable:
        x = readable(x)
    if work and _threads.threads_for(work) > 1:
        x2 = x.reshape(rows, n)
        r = _blocks.rows_arg(x2, kind, "first", np.empty(rows, np.intp))
    elif axis is not None:
        r = f(x, axis)                    # (shape: None where r has the result's shape)
        if nan is None:
            return _result(r, idt, shape)
        x2, r = x.reshape(rows, n), r.reshape(rows)
    else:
        x2 = x.reshape(rows, n)
        r = f(x2, 1)
    if nan is not None and nan(x2[np.arange(rows), r]):
        return nan(None, x)
    return _result(r, idt, result_shape)


def _run_rows_numpy(state, x, workspace):
    """:func:`_run_rows_first` on one thread over the last axis, intp indices, no NaN to skip:
    NumPy's call along the rows."""
    f, axis, shape = state
    if not x.flags.writeable:
        x = readable(x)
    r = f(x, axis)
    return r if shape is None else r.reshape(shape)


def _run_rows(state, x, workspace):
    rows, n, kind, tie, keyed, idt, shape, nan = state
    x2 = readable(x).reshape(rows, n)
    out = np.empty(rows, np.intp)
    _blocks.rows_arg(x2, kind, tie, out, keyed)
    if nan is not None and nan(x2[np.arange(rows), out]):
        return nan(None, x)
    return _result(out, idt, shape)


def _run_fold(state, x, workspace):
    A, R, C, kind, tie, keyed, idt, shape, nan = state
    V = readable(x).reshape(A, R, C)
    pos = _blocks.fold_arg(V, kind, tie, keyed)
    if nan is not None and nan(np.take_along_axis(V, pos[:, None, :], axis=1)):
        return nan(None, x)
    return _result(pos, idt, shape)


def _nan_check(state, winners, x=None):
    """nanarg*: whether any winner is NaN (then the engine, which skips NaN, answers: call
    with ``winners=None`` and the input)."""
    axes, kind, tie, idt, shape, nan_mag = state
    if winners is not None:
        if nan_mag is None:
            return bool(np.isnan(winners).any())
        return bool(((winners.view(np.uint16) & 0x7FFF) > nan_mag).any())
    xe = _dtypes.widen(x) if x.dtype.kind == "V" else x
    res = _numpy.nanargreduce(xe, axes, kind=kind, tie=tie, index_dtype=idt)
    return np.asarray(res).reshape(shape)


def _block_entry(x, axes, kind, skip_nan, tie, index_dtype, result_shape):
    """An entry over the block routines, or None where they do not apply."""
    ok, keyed = _keyed(x.dtype)
    layout = fast_layout(x, axes) if ok else None
    if layout is None or x.dtype.kind == "c" and _slow_for_complex(layout, tie):
        return None, None
    idt = np.dtype(index_dtype)
    nan = None
    if skip_nan and (x.dtype.kind in "fc" or keyed is not None):
        nan = functools.partial(_nan_check, (axes, kind, tie, idt, result_shape, keyed))
    how, dims = layout
    big = x.nbytes >= _threads.MIN_BYTES
    f = _ARG[(kind, False)]
    if how == "flat" and tie == "first" and keyed is None:
        probe = None
        if x.dtype == np.bool_ and big:
            probe = max(1, _blocks.BOOL_PROBE * x.shape[0] // x.nbytes)
        work = _blocks.work(x, "first", None) if big else 0     # (bytes as threads weigh them)
        work = work if work >= _threads.MIN_BYTES else 0         # (0: one thread, no question)
        alone = None
        if nan is None and idt == _INTP and result_shape in ((), (1,) * x.ndim):
            # NumPy's argmax/argmin of the whole input and nothing else to do
            alone = functools.partial(_run_flat_numpy, (f, result_shape != ()))
            if not work:
                return alone, None
        return functools.partial(_run_flat_first, (f, kind, idt, result_shape, nan, work,
                                                   probe)), alone
    if how == "rows" and tie == "first" and keyed is None:
        axis = x.ndim - 1 if axes == (x.ndim - 1,) else None
        kept = x.shape[:x.ndim - len(axes)]
        shape = None if axis is not None and result_shape == kept else result_shape
        # (bool: NumPy stops each row at its first True/False; the rows are no work to split)
        work = _blocks.work(x, "first", None) if big and x.dtype != np.bool_ else 0
        alone = functools.partial(_run_rows_numpy, (f, axis, shape)) \
            if nan is None and idt == _INTP and axis is not None else None
        return functools.partial(_run_rows_first, (f, kind) + dims + (
            axis, idt, shape, result_shape, nan, work if work >= _threads.MIN_BYTES else 0)), \
            alone
    run = {"flat": _run_flat, "rows": _run_rows, "fold": _run_fold}[how]
    return functools.partial(run, dims + (kind, tie, keyed, idt, result_shape, nan)), None


def _stops_early(x, axes, tie) -> bool:
    """Whether a bool reduction over every axis, or over the rows with tie "first", is one
    whose block routine stops at the first True/False (flat tie "first": a probe, then ranges
    that double; tie "last": from the end; rows: NumPy's per-row stop, never split): a call
    often takes microseconds, which timing it would weigh down."""
    return x.dtype == np.bool_ and (len(axes) == x.ndim or
                                    tie == "first" and axes[-1] == x.ndim - 1)


def _engine_runner(state, x, workspace):
    axes, kind, skip_nan, tie, idt, shape = state
    f = _numpy.nanargreduce if skip_nan else _numpy.argreduce
    res = f(_dtypes.widen(x) if x.dtype.kind == "V" else x, axes, kind=kind, tie=tie,
            index_dtype=idt)
    return np.asarray(res).reshape(shape)


def cpu_argreduce_entry(x, axes, *, kind, skip_nan, tie, index_dtype, result_shape):
    """``entry(x, workspace)`` of argmin/argmax (``skip_nan``: nanarg*) over ``axes`` (sorted,
    non-empty) for inputs laid out as ``x`` (non-empty, rules checked); None for none."""
    if x.size == 0 or not axes:
        return None
    small = x.size <= (CPU_SMALL if len(axes) in (1, x.ndim) else COMPOSE_MAX) and \
        x.dtype.kind in "biuf" and x.dtype.isnative
    entry = _small_entry(x, axes, kind, skip_nan, tie, index_dtype, result_shape) \
        if small else None
    if entry is None:
        entry, alone = _block_entry(x, axes, kind, skip_nan, tie, index_dtype, result_shape)
        if entry is not None and not _stops_early(x, axes, tie):
            # (threads where they have been faster: measured)
            entry = _threads.measured(entry, _blocks.work(x, tie, _keyed(x.dtype)[1]), alone)
    if entry is None:
        entry = functools.partial(_engine_runner, (axes, kind, skip_nan, tie,
                                                   np.dtype(index_dtype), result_shape))
    return entry


# ------------------------------------------------------------------------------ hardmax

def _one(dtype):
    """The one of a one-hot in ``dtype`` (bfloat16: its bits, 0x3F80, as uint16)."""
    if _dtypes.is_bf16(dtype):
        return np.uint16(_dtypes.ONE_BITS), np.dtype(np.uint16)
    return np.ones((), dtype), dtype


def _run_hardmax(state, x, workspace):
    how, dims, tie, keyed, dtype = state
    one, store = _one(dtype)
    out = np.zeros(x.shape, store)       # calloc: the zeros cost nothing until read
    flat_out = out.reshape(-1)
    src = readable(x)
    if how == "flat":
        flat_out[_blocks.flat_arg(src.reshape(dims), "max", tie, keyed)] = one
    elif how == "rows":
        rows, n = dims
        idx = _blocks.rows_arg(src.reshape(dims), "max", tie, np.empty(rows, np.intp), keyed)
        idx += np.arange(0, rows * n, n)
        flat_out[idx] = one
    else:
        A, R, C = dims
        pos = _blocks.fold_arg(src.reshape(dims), "max", tie, keyed)
        pos *= C
        pos += np.arange(0, A * R * C, R * C)[:, None]
        pos += np.arange(C)
        flat_out[pos.reshape(-1)] = one
    return out if store == dtype else out.view(dtype)


def _small_hardmax(state, x, workspace):
    axis, n, flip, shape, dtype = state
    if flip is None:
        i = x.argmax(axis, keepdims=True) if axis is not None else x.argmax()
    else:
        i = n - 1 - x[flip].argmax(axis, keepdims=True)
    out = np.zeros(shape, dtype)
    if axis is None:
        out.reshape(-1)[i] = 1
    else:
        np.put_along_axis(out, i, 1, axis=axis)
    return out


def cpu_hardmax_entry(x, axes, *, tie):
    """``entry(x, workspace)`` of hardmax over ``axes`` for inputs laid out as ``x``; None
    for none (the full road's engine then serves every call)."""
    if x.size == 0 or not axes:
        return None
    ndim = x.ndim
    if x.size <= CPU_SMALL and x.dtype.kind in "biuf" and x.dtype.isnative and (
            len(axes) == 1 or len(axes) == ndim):
        axis = axes[0] if len(axes) == 1 else None
        n = x.shape[axis] if axis is not None else x.size
        flip = None if tie == "first" else tuple(
            slice(None, None, -1) if axis is None or i == axis else slice(None)
            for i in range(ndim))
        return functools.partial(_small_hardmax, (axis, n, flip, x.shape, x.dtype))
    ok, keyed = _keyed(x.dtype)
    layout = fast_layout(x, axes) if ok else None
    if layout is None or x.dtype.kind == "c" and _slow_for_complex(layout, tie):
        return None
    return _threads.measured(functools.partial(_run_hardmax, layout + (tie, keyed, x.dtype)),
                             _blocks.work(x, tie, keyed))


# ------------------------------------------------------------------------------ values

def winners(x, axes, indices):
    """The elements of ``x`` at ``indices`` (row-major over the sorted reduced ``axes``, in
    the kept shape): a fresh array of x's dtype holding them bit for bit (NaN payloads, the
    sign of zero). Fancy indexing of the winners alone: no pass over ``x``."""
    if len(axes) == x.ndim:           # one group: its coordinates by divmod, a basic index
        i, coords = int(indices), []
        for n in reversed(x.shape):
            i, c = divmod(i, n)
            coords.append(c)
        return np.copy(x[tuple(reversed(coords)) + (np.newaxis,)]).reshape(())
    kept = [i for i in range(x.ndim) if i not in axes]
    coords = np.unravel_index(np.asarray(indices, np.intp), [x.shape[a] for a in axes])
    index, j = [], 0
    for i in range(x.ndim):
        if i in axes:
            index.append(coords[j])
            j += 1
        else:
            k = kept.index(i)
            index.append(np.arange(x.shape[i]).reshape(
                [-1 if m == k else 1 for m in range(len(kept))]))
    return x[tuple(index)]


def _one_contiguous(x, axes, index):
    """The winner of the one group of a C-contiguous x: a 0-d copy of its element."""
    return np.ndarray((), x.dtype, x, int(index) * x.itemsize).copy()


def _run_values(state, x, workspace):
    indices_entry, gather, axes, kept_shape, result_shape, pair = state
    idx = indices_entry(x, None)
    vals = gather(x, axes, idx if kept_shape is None else idx.reshape(kept_shape))
    return pair(vals if kept_shape is None else vals.reshape(result_shape), idx)


def cpu_values_entry(x, axes, *, kind, tie, index_dtype, kept_shape, result_shape, pair):
    """``entry(x, workspace)`` of max_and_argmax / min_and_argmin over ``axes`` (sorted,
    non-empty) for inputs laid out as ``x`` (non-empty, rules checked): argmax's entry, then
    the winners read from x (one element a group). ``pair(values, indices)`` makes the
    result."""
    idx_entry = cpu_argreduce_entry(x, axes, kind=kind, skip_nan=False, tie=tie,
                                    index_dtype=index_dtype, result_shape=result_shape)
    if idx_entry is None:
        return None
    one = len(axes) == x.ndim
    gather = _one_contiguous if one and x.flags.c_contiguous else winners
    shapes = (None, None) if one and math.prod(result_shape) == 1 and len(result_shape) == 0 \
        else (kept_shape, result_shape)
    return functools.partial(_run_values, (idx_entry, gather, axes, *shapes, pair))
