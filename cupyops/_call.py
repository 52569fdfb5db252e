"""The public functions: argument rules (docs/api.md), trivial cases, and the choice of path.

Every check happens here, before any work, so the NumPy path and the kernel path receive the
same normalised arguments (see docs/design.md, "Contracts between the layers").
"""
from __future__ import annotations

import math
import operator
import sys

import numpy as np

from cupyops.core import dtypes as _bf16
from cupyops.core import placement as _dispatch
from cupyops.ops.argreduce import numpy_entries as _fast
from cupyops.ops.argreduce import first_call as _first

HARDMAX_DTYPES = tuple(np.dtype(t) for t in (
    np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
    np.float16, np.float32, np.float64, np.complex64, np.complex128))
#: datetime64 / timedelta64 (any unit) are accepted where ``datetime=True`` is passed to
#: _check_value_dtype: argmin/argmax/nanarg* and the nonzero family, not hardmax
DATETIME_NAMES = ("datetime64", "timedelta64")
ARGREDUCE_DTYPES = HARDMAX_DTYPES
NONZERO_DTYPES = HARDMAX_DTYPES
#: index dtypes of argmin / argmax / nanargmin / nanargmax: every integer dtype (as CuPy)
INDEX_DTYPES = tuple(np.dtype(t) for t in (np.int64, np.int32, np.uint32, np.uint64, np.int8,
                                           np.int16, np.uint8, np.uint16))
#: coordinate dtypes of argwhere / nonzero_coordinates: DirectML's four
COORD_DTYPES = INDEX_DTYPES[:4]
TIES = ("first", "last")

_DTYPE_NAMES = lambda dts: ", ".join(d.name for d in dts)  # noqa: E731


def _as_int64_bits(x):
    """A datetime64 / timedelta64 array (any unit, any byte order) viewed as int64: the kernels
    and the nonzero test read these bits (NaT = INT64_MIN, nonzero, the extreme of argmin/max)."""
    bo = x.dtype.byteorder
    return x.view(np.dtype(np.int64).newbyteorder(bo if bo in "<>" else "="))


# --------------------------------------------------------------------------- argument checks

def _check_value_dtype(x, allowed, opname, datetime=False):
    dt = x.dtype
    if dt.kind in "biufc" and dt.newbyteorder("=") in allowed:
        return
    if datetime and dt.kind in "mM":
        return
    if dt.kind == "V" and dt.name == "bfloat16":   # ml_dtypes' (NumPy or CuPy); see _bf16
        return
    names = _DTYPE_NAMES(allowed) + ", bfloat16" + (", " + ", ".join(DATETIME_NAMES) if datetime else "")
    why = (" (a one-hot of datetime64 or timedelta64 values means nothing)"
           if dt.kind in "mM" else "")
    raise TypeError(f"{opname}: x has dtype {dt}, which is not supported{why}; supported "
                    f"dtypes are {names}")


def _check_index_dtype(dtype, argname="dtype", opname="", allowed=INDEX_DTYPES):
    if dtype is None:
        return np.dtype(np.int64)
    try:
        dt = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"{opname}: {argname} must be one of {_DTYPE_NAMES(allowed)}, "
                        f"got {dtype!r}") from None
    if dt not in allowed:
        raise TypeError(f"{opname}: {argname} must be one of {_DTYPE_NAMES(allowed)}, got {dt}")
    return dt


def _index_fits(n_positions: int, dt: np.dtype) -> bool:
    """An index dtype fits a group of n elements when n - 1 <= its maximum."""
    return n_positions - 1 <= np.iinfo(dt).max


def _normalize_axes(axis, ndim, opname, zero_d=False):
    """None → every axis; int or tuple of ints → sorted tuple of distinct non-negative axes.
    ``zero_d``: a 0-d input takes axis 0 or -1 (and nothing else) and reduces nothing, as
    NumPy's argmax does (argmin/argmax/hardmax)."""
    if axis is None:
        return tuple(range(ndim))
    if zero_d and ndim == 0:
        for a in (axis if isinstance(axis, tuple) else (axis,)):
            if isinstance(a, (bool, np.bool_)) or isinstance(axis, list):
                break
            try:
                a = operator.index(a)
            except TypeError:
                break
            if a not in (0, -1):
                raise np.exceptions.AxisError(a, 0, msg_prefix=opname)
        else:
            return ()
    items = axis if isinstance(axis, tuple) else (axis,)
    if isinstance(axis, list):
        raise TypeError(f"{opname}: axis must be None, an int or a tuple of ints, got a list")
    out = []
    for a in items:
        if isinstance(a, (bool, np.bool_)):
            raise TypeError(f"{opname}: axis must be None, an int or a tuple of ints, got {a!r}")
        try:
            a = operator.index(a)
        except TypeError:
            raise TypeError(f"{opname}: axis must be None, an int or a tuple of ints, got {a!r}") from None
        if not -ndim <= a < ndim:
            raise np.exceptions.AxisError(a, ndim, msg_prefix=opname)
        out.append(a % ndim)
    if len(set(out)) != len(out):
        raise ValueError(f"{opname}: axis {axis!r} repeats an axis")
    return tuple(sorted(out))


def _check_tie(tie, opname):
    if not isinstance(tie, str) or tie not in TIES:
        raise ValueError(f"{opname}: tie must be 'first' or 'last', got {tie!r}")


def _check_bool(value, argname, opname):
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{opname}: {argname} must be a bool, got {value!r}")
    return bool(value)


def _module_of(arr):
    return "cupy" if _dispatch.is_cupy_array(arr) else ("numpy" if isinstance(arr, np.ndarray) else None)


def _check_out(out, x, shape, dtype, opname, accepted=None):
    """out must have exactly the result's shape, module and dtype, be writable, and not overlap x.
    ``accepted``: what the error lists as the dtypes out may have, when that is more than one."""
    if out is None:
        return None
    want = _module_of(x)
    got = _module_of(out)
    if got != want:
        raise TypeError(f"{opname}: out must be a {want} array like x, got {type(out).__name__}")
    if tuple(out.shape) != tuple(shape):
        raise ValueError(f"{opname}: out has shape {tuple(out.shape)}, expected {tuple(shape)}")
    if out.dtype != dtype:
        raise TypeError(f"{opname}: out has dtype {out.dtype}, expected {accepted or dtype}")
    if want == "numpy":
        if not out.flags.writeable:
            raise ValueError(f"{opname}: out is read-only")
        if np.may_share_memory(x, out):
            try:
                overlap = np.shares_memory(x, out, max_work=10**6)
            except np.exceptions.TooHardError:
                overlap = True  # cannot prove them apart: refuse rather than risk it
            if overlap:
                raise ValueError(f"{opname}: out overlaps the input x")
    else:
        cupy = sys.modules["cupy"]
        if out.device != x.device:
            raise ValueError(f"{opname}: out is on {out.device}, x on {x.device}")
        _check_cupy_alignment(out, "out", opname)
        if cupy.may_share_memory(x, out):
            raise ValueError(f"{opname}: out overlaps the input x")
    return out


# --------------------------------------------------------------------------- path selection

def element_alignment(dtype) -> int:
    """The alignment every element of ``dtype`` must have on a GPU: its size, half of it for
    complex (two floats)."""
    dt = np.dtype(dtype)
    return dt.itemsize // 2 if dt.kind == "c" else max(dt.itemsize, 1)


def _check_cupy_alignment(arr, argname, opname):
    """A CuPy array whose data pointer is not element-aligned cannot be read or written by any
    kernel without a misaligned-address fault, which kills the CUDA context: refuse it."""
    align = element_alignment(arr.dtype)
    ptr = int(arr.data.ptr)
    if arr.size and ptr % align:
        raise ValueError(f"{opname}: {argname}'s data pointer {ptr:#x} is not a multiple of "
                         f"{align} bytes, the alignment of {arr.dtype} elements on a GPU; copy "
                         f"it (cupy.ascontiguousarray on an aligned allocation) first")
    # a view of other-typed data (x[:, :2].view(float64) of float32) can step by a stride that
    # is not: every element after the first would be misaligned
    bad = [s for n, s in zip(arr.shape, arr.strides) if n > 1 and s % align]
    if arr.size and bad:
        raise ValueError(f"{opname}: {argname} has strides {tuple(arr.strides)}; {bad[0]} is not "
                         f"a multiple of {align} bytes, the alignment of {arr.dtype} elements on "
                         f"a GPU, so its elements cannot all be aligned: copy it first")


def _check_workspace(workspace, placement, opname):
    if workspace is None:
        return None
    from cupyops.core.workspace import Workspace
    if not isinstance(workspace, Workspace):
        raise TypeError(f"{opname}: workspace must be None or a cupyops.Workspace, got "
                        f"{type(workspace).__name__}")
    if placement.kind == "cpu":
        raise ValueError(f"{opname}: workspace= holds kernel scratch, but this call runs on the "
                         f"NumPy path (device='cpu'); leave it out or run on 'cuda' / 'simt'")
    return workspace


def _cuda_device(placement):
    """The CuPy device of a "cuda" placement: the one named, else CuPy's current device."""
    cupy = _import_cupy()
    if placement.device_id is None:
        return cupy.cuda.Device()
    return cupy.cuda.Device(placement.device_id)


def _kernel_backend(placement):
    from cupyops.core import backend as _backend
    if placement.kind == "simt":
        return _backend.get_backend("simt")
    return _backend.get_backend("cuda", placement.device_id)


def _to_kernel_input(x, placement, opname=""):
    """The array the kernel path reads: native byte order; NumPy input for device='cuda' goes to
    the GPU. Only a non-native or unaligned NumPy array is copied (a GPU cannot read either)."""
    if placement.cupy_input:
        _check_cupy_alignment(x, "x", opname)
        return x
    if not x.dtype.isnative or not x.flags.aligned:
        x = x.astype(x.dtype.newbyteorder("="), copy=True)
    if placement.kind == "cuda":
        cupy = _import_cupy()
        with _cuda_device(placement):
            return cupy.asarray(x)
    view = x.view()
    view.flags.writeable = False  # SIMT then reports any kernel write to the input
    return view


def _import_cupy():
    try:
        import cupy
    except ImportError as exc:  # pragma: no cover - depends on the machine
        from cupyops.core.devices import CUPY_INSTALL_HINT
        raise RuntimeError(f"device='cuda' needs CuPy: {CUPY_INSTALL_HINT}") from exc
    return cupy


def _from_kernel_result(res, placement):
    if placement.kind == "cuda" and not placement.cupy_input:
        if isinstance(res, tuple):
            return tuple(r.get() for r in res)
        return res.get()
    return res


def _device_ctx(placement):
    if placement.kind == "cuda":
        return _cuda_device(placement)
    import contextlib
    return contextlib.nullcontext()


def _deliver(res, out):
    """Copy a result into out when the implementation did not write it there."""
    if out is None or res is out:
        return res
    out[...] = res
    return out


def _kernel_out(out, placement):
    """The out the kernel implementation may write directly: a C-contiguous array on the same
    device. Anything else is filled afterwards by one copy."""
    if out is None or (placement.kind == "cuda" and not placement.cupy_input):
        return None
    return out if out.flags.c_contiguous and _element_aligned(out) else None


def _element_aligned(out) -> bool:
    """A NumPy out need not be element-aligned (np.ndarray(buffer, offset=4)), and a kernel's
    store there would fault on a GPU (and is reported by simt): such outs take the copy path.
    CuPy outs were checked by _check_out (CuPy's flags have no ``aligned``)."""
    return not isinstance(out, np.ndarray) or out.flags.aligned


def _xp(placement):
    if placement.cupy_input:
        return sys.modules["cupy"]
    return np


# --------------------------------------------------------------------------- argmax / argmin

def _argreduce(kind, x, axis, keepdims, tie, dtype, out, device, workspace, skip_nan=False,
               fast_key=None):
    opname = ("nanarg" if skip_nan else "arg") + kind
    res = _first.serve(fast_key, x, workspace)   # a new layout of a layout class seen before
    if res is not None:
        return res
    x, placement = _dispatch.place(x, device)
    _check_value_dtype(x, ARGREDUCE_DTYPES, opname, datetime=True)
    axes = _normalize_axes(axis, x.ndim, opname, zero_d=True)
    keepdims = _check_bool(keepdims, "keepdims", opname)
    _check_tie(tie, opname)
    if dtype is None and getattr(out, "dtype", None) in INDEX_DTYPES:
        dtype = out.dtype  # with dtype=None, out's dtype is the result dtype
    index_dtype = _check_index_dtype(dtype, "dtype", opname)

    shape = tuple(x.shape)
    kept_shape = tuple(n for i, n in enumerate(shape) if i not in axes)
    result_shape = tuple(1 if i in axes else n for i, n in enumerate(shape)) if keepdims else kept_shape
    group = math.prod(shape[a] for a in axes)
    if any(shape[a] == 0 for a in axes):
        raise ValueError(f"attempt to get arg{kind} of an empty sequence ({opname}: reduced axes "
                         f"{axes} of shape {shape})")
    if not _index_fits(group, index_dtype):
        raise ValueError(f"{opname}: the reduced group has {group} elements, too many for index "
                         f"dtype {index_dtype} (its maximum is {np.iinfo(index_dtype).max})")
    if out is not None:
        accepted = (f"one of {_DTYPE_NAMES(INDEX_DTYPES)} (with dtype=None, out's dtype is the "
                    "result dtype)") if dtype is None else (
            f"{index_dtype}, as dtype={index_dtype.name} was given (with dtype=None, out may have "
            f"any of {_DTYPE_NAMES(INDEX_DTYPES)})")
        out = _check_out(out, x, result_shape, index_dtype, opname, accepted)
    workspace = _check_workspace(workspace, placement, opname)
    xp = _xp(placement)

    out_kept = None
    if out is not None:
        out_kept = out[tuple(0 if i in axes else slice(None) for i in range(len(shape))) + (Ellipsis,)] \
            if keepdims else out

    with _device_ctx(placement):
        if not axes or math.prod(kept_shape) == 0:
            # (nanarg*: a group of one NaN is all NaN, as NumPy says)
            if skip_nan and not axes and x.dtype.kind in "fcV" and bool(xp.isnan(x).any()):
                raise ValueError("All-NaN slice encountered")
            res = xp.zeros(kept_shape, index_dtype)
        elif placement.kind == "cpu":
            from cupyops.ops.argreduce import numpy_path as _cpu_argreduce
            _fast.remember(fast_key, _fast.cpu_argreduce_entry(
                x, axes, kind=kind, skip_nan=skip_nan, tie=tie, index_dtype=index_dtype,
                result_shape=result_shape))
            f = _cpu_argreduce.nanargreduce if skip_nan else _cpu_argreduce.argreduce
            res = f(_bf16.widen(x) if x.dtype.kind == "V" else x, axes, kind=kind, tie=tie,
                    index_dtype=index_dtype, out=out_kept)
        else:
            from cupyops.ops.argreduce import launch as _gpu_argreduce
            backend = _kernel_backend(placement)
            datetime = x.dtype.kind in "mM"
            kx = _as_int64_bits(x) if datetime else x
            kin = _to_kernel_input(kx, placement, opname)
            cx, launches = _gpu_argreduce.prepare_argreduce(
                backend, kin, axes, kind=kind, tie=tie, index_dtype=index_dtype,
                force_64bit=_dispatch.force_64bit.get(), skip_nan=skip_nan, datetime=datetime)
            run = _gpu_argreduce.runner(backend, launches)
            res = _gpu_argreduce.execute_into(run, cx, _kernel_out(out_kept, placement),
                                              workspace)
            cached, prep = _fast.kernel_prep(placement, x, kin)
            if cached and cx is kin and not datetime:
                _fast.remember(fast_key, _gpu_argreduce.runner(
                    backend, launches, entry=(prep, result_shape if keepdims else None)))
                _first.remember(fast_key, x, _first.argreduce_class(
                    backend, placement, axes, hardmax=False, kind=kind, tie=tie,
                    index_dtype=index_dtype, skip_nan=skip_nan, keepdims=keepdims))
            res = _from_kernel_result(res, placement)
        if out is not None:
            _deliver(res, out_kept)
            return out
    res = xp.asarray(res)
    return res.reshape(result_shape) if keepdims else res


def argmax(x, /, axis=None, *, keepdims=False, tie="first", dtype=None, out=None, device=None,
           workspace=None):
    """Index of the largest element over ``axis`` (row-major index within the reduced axes).

    ``tie="first"`` returns the smallest index among equal maxima, ``"last"`` the largest. NaN
    (complex: a NaN in either part) and NaT count as the maximum. Complex values order on
    (real, imag). ``dtype`` is the index dtype: any integer dtype the group's last index fits.
    ``workspace``: a :class:`cupyops.Workspace` for the kernel path's scratch (CUDA-graph
    capture; docs/api.md).
    """
    k, hit = _fast.lookup(x, device, workspace, out, "argmax", axis, keepdims, tie, dtype)
    if hit is not None:
        return hit(x, workspace)
    return _argreduce("max", x, axis, keepdims, tie, dtype, out, device, workspace, fast_key=k)


def argmin(x, /, axis=None, *, keepdims=False, tie="first", dtype=None, out=None, device=None,
           workspace=None):
    """Index of the smallest element over ``axis``; NaN counts as the minimum. See argmax."""
    k, hit = _fast.lookup(x, device, workspace, out, "argmin", axis, keepdims, tie, dtype)
    if hit is not None:
        return hit(x, workspace)
    return _argreduce("min", x, axis, keepdims, tie, dtype, out, device, workspace, fast_key=k)


def nanargmax(x, /, axis=None, *, keepdims=False, tie="first", dtype=None, out=None, device=None,
              workspace=None):
    """argmax that skips NaN (NaT is not skipped, as in NumPy). A group of only NaN is
    ``ValueError("All-NaN slice encountered")``; on the kernel path that costs one host read of
    a flag the same single pass sets. Arguments as argmax."""
    k, hit = _fast.lookup(x, device, workspace, out, "nanargmax", axis, keepdims, tie, dtype)
    if hit is not None:
        return hit(x, workspace)
    return _argreduce("max", x, axis, keepdims, tie, dtype, out, device, workspace, True, k)


def nanargmin(x, /, axis=None, *, keepdims=False, tie="first", dtype=None, out=None, device=None,
              workspace=None):
    """argmin that skips NaN; see nanargmax."""
    k, hit = _fast.lookup(x, device, workspace, out, "nanargmin", axis, keepdims, tie, dtype)
    if hit is not None:
        return hit(x, workspace)
    return _argreduce("min", x, axis, keepdims, tie, dtype, out, device, workspace, True, k)


# --------------------------------------------------------------------------- hardmax

def hardmax(x, /, axis=-1, *, tie="first", out=None, device=None, workspace=None):
    """One-hot of the element ``argmax(..., tie=tie)`` picks in each group spanned by ``axis``.

    The output has x's shape and dtype (``True`` at the chosen place for bool). ``workspace``:
    see argmax.
    """
    k, hit = _fast.lookup(x, device, workspace, out, "hardmax", axis, tie)
    if hit is not None:
        return hit(x, workspace)
    return _hardmax(x, axis, tie, out, device, workspace, k)


def _hardmax(x, axis, tie, out, device, workspace, fast_key):
    opname = "hardmax"
    res = _first.serve(fast_key, x, workspace)   # a new layout of a layout class seen before
    if res is not None:
        return res
    x, placement = _dispatch.place(x, device)
    _check_value_dtype(x, HARDMAX_DTYPES, opname)
    axes = _normalize_axes(axis, x.ndim, opname, zero_d=True)
    _check_tie(tie, opname)
    if out is not None:
        out = _check_out(out, x, x.shape, x.dtype, opname,
                         f"{x.dtype}, x's dtype (hardmax's result has it)")
    workspace = _check_workspace(workspace, placement, opname)
    xp = _xp(placement)
    with _device_ctx(placement):
        if x.size == 0:
            res = xp.empty(x.shape, x.dtype)
        elif not axes:
            res = xp.ones(x.shape, x.dtype)
        elif placement.kind == "cpu":
            from cupyops.ops.argreduce import numpy_path as _cpu_argreduce
            if x.dtype.kind == "V":   # bfloat16: the one-hot of the exact float32 widening
                res = _bf16.narrow(_cpu_argreduce.hardmax(_bf16.widen(x), axes, tie=tie), x.dtype)
            else:
                _fast.remember(fast_key, _fast.cpu_hardmax_entry(x, axes, tie=tie))
                res = _cpu_argreduce.hardmax(x, axes, tie=tie, out=out)
        else:
            from cupyops.ops.argreduce import launch as _gpu_argreduce
            backend = _kernel_backend(placement)
            kx = _to_kernel_input(x, placement, opname)
            kout = _kernel_out(out, placement) if kx.dtype == x.dtype else None
            cx, launches = _gpu_argreduce.prepare_hardmax(
                backend, kx, axes, tie=tie, force_64bit=_dispatch.force_64bit.get(), out=kout)
            run = _gpu_argreduce.runner(backend, launches)
            res = _gpu_argreduce.execute_into(run, cx, kout, workspace)
            cached, prep = _fast.kernel_prep(placement, x, kx)
            if cached and cx is kx:
                _fast.remember(fast_key, _gpu_argreduce.runner(backend, launches,
                                                               entry=(prep, None)))
                _first.remember(fast_key, x, _first.argreduce_class(
                    backend, placement, axes, hardmax=True, tie=tie))
            res = _from_kernel_result(res, placement)
            if res.dtype != x.dtype:  # non-native input: give back the caller's byte order
                res = res.astype(x.dtype)
        if out is not None:
            return _deliver(res, out)
    return res


# --------------------------------------------------------------------------- nonzero family

def _check_size_fill(size, fill_value, index_dtype, opname):
    """nonzero_coordinates' ``size`` (None or a non-negative int) and ``fill_value`` (an int
    that ``index_dtype`` holds), normalised to Python ints; the Dask path checks the same."""
    if size is not None:
        if isinstance(size, (bool, np.bool_)):
            raise TypeError(f"{opname}: size must be None or a non-negative int, got {size!r}")
        try:
            size = operator.index(size)
        except TypeError:
            raise TypeError(f"{opname}: size must be None or a non-negative int, got {size!r}") from None
        if size < 0:
            raise ValueError(f"{opname}: size must be non-negative, got {size}")
    if isinstance(fill_value, (bool, np.bool_)):
        raise TypeError(f"{opname}: fill_value must be an int, got {fill_value!r}")
    try:
        fill_value = operator.index(fill_value)
    except TypeError:
        raise TypeError(f"{opname}: fill_value must be an int, got {fill_value!r}") from None
    info = np.iinfo(index_dtype)
    if not info.min <= fill_value <= info.max:
        raise ValueError(f"{opname}: fill_value {fill_value} does not fit index dtype {index_dtype} "
                         f"[{info.min}, {info.max}]")
    return size, fill_value


def _check_coordinate_dtype(x, dtype, opname):
    index_dtype = _check_index_dtype(dtype, "dtype", opname, COORD_DTYPES)
    longest = max(x.shape, default=0)
    if not _index_fits(longest, index_dtype):
        raise ValueError(f"{opname}: a dimension of length {longest} is too long for index dtype "
                         f"{index_dtype} (its maximum is {np.iinfo(index_dtype).max})")
    return index_dtype


def count_nonzero(x, /, axis=None, *, keepdims=False, device=None):
    """Number of elements with ``x != 0`` over ``axis`` (int64, as the array API asks)."""
    k, hit = _fast.lookup(x, device, None, None, "count_nonzero", axis, keepdims)
    if hit is not None:
        return hit(x, None)
    return _count_nonzero(x, axis, keepdims, device, k)


def _count_nonzero(x, axis, keepdims, device, fast_key):
    opname = "count_nonzero"
    res = _first.serve(fast_key, x, None)    # a new layout of a layout class seen before
    if res is not None:
        return res
    x, placement = _dispatch.place(x, device)
    x0 = x
    _check_value_dtype(x, NONZERO_DTYPES, opname, datetime=True)
    if x.dtype.kind in "mM":
        x = _as_int64_bits(x)   # NaT (INT64_MIN) is nonzero, the epoch is zero
    axes = _normalize_axes(axis, x.ndim, opname)
    keepdims = _check_bool(keepdims, "keepdims", opname)
    shape = tuple(x.shape)
    kept_shape = tuple(n for i, n in enumerate(shape) if i not in axes)
    result_shape = tuple(1 if i in axes else n for i, n in enumerate(shape)) if keepdims else kept_shape
    xp = _xp(placement)
    # broadcast (zero-stride) axes repeat the same elements: count the distinct ones once, then
    # multiply by the repeats of the reduced ones and broadcast along the kept ones
    bro = [i for i in range(x.ndim) if shape[i] > 1 and x.strides[i] == 0]
    with _device_ctx(placement):
        if not axes:  # reduces nothing (also every 0-d input): x != 0 itself
            res = (x != 0).astype(np.int64)
        elif x.size == 0:
            res = xp.zeros(kept_shape, np.int64)
        elif bro:
            sub = x[tuple(slice(0, 1) if i in bro else slice(None) for i in range(x.ndim))]
            res = xp.asarray(_count_nonzero_distinct(sub, axes, placement, opname))
            full = xp.empty(kept_shape, np.int64)        # a fresh array, as always
            full[...] = res * math.prod(shape[i] for i in bro if i in axes)
            res = full
        else:
            res = _count_nonzero_distinct(x, axes, placement, opname, fast_key if x is x0 else None,
                                          result_shape, keepdims)
    res = xp.asarray(res)
    return res.reshape(result_shape)


def _count_nonzero_distinct(x, axes, placement, opname, fast_key=None, result_shape=None,
                            keepdims=False):
    """count_nonzero over ``axes`` (non-empty) of a non-empty x on its placement."""
    if placement.kind == "cpu":
        from cupyops.ops.nonzero import numpy_path as _cpu_nonzero
        _fast.remember(fast_key, _fast.cpu_count_entry(x, axes, result_shape=result_shape))
        return _cpu_nonzero.count_nonzero(x, axes)
    from cupyops.ops.nonzero import launch as _gpu_nonzero
    backend = _kernel_backend(placement)
    kin = _to_kernel_input(x, placement, opname)
    force = _dispatch.force_64bit.get()
    run = _gpu_nonzero.count_runner(backend, kin, axes, force_64bit=force)
    res = run(kin)
    if fast_key is not None:
        entry = _fast.kernel_entry(backend, placement, x, kin, run, reshape=result_shape)
        _fast.remember(fast_key, entry)
        if entry is not None:
            _first.remember(fast_key, x, _first.count_class(backend, placement, axes, keepdims))
    return _from_kernel_result(res, placement)


def argwhere(x, /, *, dtype=None, device=None):
    """Coordinates of the nonzero elements, shape (count, ndim), in ascending row-major order."""
    k, hit = _fast.lookup(x, device, None, None, "argwhere", dtype)
    if hit is not None:
        return hit(x, None)
    return _argwhere(x, dtype, device, k)


def _argwhere(x, dtype, device, fast_key):
    opname = "argwhere"
    res = _first.serve(fast_key, x, None)    # a new layout of a layout class seen before
    if res is not None:
        return res
    x, placement = _dispatch.place(x, device)
    x0 = x
    _check_value_dtype(x, NONZERO_DTYPES, opname, datetime=True)
    if x.dtype.kind in "mM":
        x = _as_int64_bits(x)   # NaT (INT64_MIN) is nonzero, the epoch is zero
    index_dtype = _check_coordinate_dtype(x, dtype, opname)
    xp = _xp(placement)
    with _device_ctx(placement):
        if x.ndim == 0:
            return xp.zeros((int(bool(x != 0)), 0), index_dtype)
        if x.size == 0:
            return xp.zeros((0, x.ndim), index_dtype)
        if x is not x0:
            fast_key = None
        if placement.kind == "cpu":
            from cupyops.ops.nonzero import numpy_path as _cpu_nonzero
            _fast.remember(fast_key, _fast.cpu_argwhere_entry(x, index_dtype))
            return _cpu_nonzero.argwhere(x, index_dtype)
        from cupyops.ops.nonzero import launch as _gpu_nonzero
        backend = _kernel_backend(placement)
        kin = _to_kernel_input(x, placement, opname)
        force = _dispatch.force_64bit.get()
        run = _gpu_nonzero.exact_runner(backend, kin, index_dtype, _gpu_nonzero.LAYOUT_ROWS,
                                        force, keep_count=False,
                                        result=_gpu_nonzero.RESULT_COORDS)
        res = run(kin)
        if fast_key is not None:
            entry = _fast.kernel_entry(backend, placement, x, kin, run)
            _fast.remember(fast_key, entry)
            if entry is not None:
                _first.remember(fast_key, x, _first.coordinates_class(
                    backend, placement, index_dtype, layout=_gpu_nonzero.LAYOUT_ROWS))
        return _from_kernel_result(res, placement)


def nonzero(x, /, *, device=None):
    """Array API nonzero: a tuple of ndim 1-D int64 index arrays, in row-major order."""
    k, hit = _fast.lookup(x, device, None, None, "nonzero")
    if hit is not None:
        return hit(x, None)
    return _nonzero(x, device, k)


def _nonzero(x, device, fast_key):
    opname = "nonzero"
    res = _first.serve(fast_key, x, None)    # a new layout of a layout class seen before
    if res is not None:
        return res
    x, placement = _dispatch.place(x, device)
    x0 = x
    _check_value_dtype(x, NONZERO_DTYPES, opname, datetime=True)
    if x.dtype.kind in "mM":
        x = _as_int64_bits(x)   # NaT (INT64_MIN) is nonzero, the epoch is zero
    if x.ndim == 0:
        raise ValueError("nonzero: x is 0-d; the array API does not define nonzero for 0-d arrays "
                         "(use argwhere, or x.reshape(1))")
    index_dtype = np.dtype(np.int64)
    xp = _xp(placement)
    with _device_ctx(placement):
        if x.size == 0:
            return tuple(xp.zeros((0,), index_dtype) for _ in range(x.ndim))
        if x is not x0:
            fast_key = None
        if placement.kind == "cpu":
            from cupyops.ops.nonzero import numpy_path as _cpu_nonzero
            _fast.remember(fast_key, _fast.cpu_nonzero_entry(x))
            return _cpu_nonzero.nonzero(x, index_dtype)
        from cupyops.ops.nonzero import launch as _gpu_nonzero
        backend = _kernel_backend(placement)
        kin = _to_kernel_input(x, placement, opname)
        force = _dispatch.force_64bit.get()
        run = _gpu_nonzero.exact_runner(backend, kin, index_dtype, _gpu_nonzero.LAYOUT_COLS,
                                        force, keep_count=False,
                                        result=_gpu_nonzero.RESULT_ROWS)
        res = run(kin)
        if fast_key is not None:
            entry = _fast.kernel_entry(backend, placement, x, kin, run)
            _fast.remember(fast_key, entry)
            if entry is not None:
                _first.remember(fast_key, x, _first.coordinates_class(
                    backend, placement, index_dtype, layout=_gpu_nonzero.LAYOUT_COLS))
        return _from_kernel_result(tuple(res), placement)


def nonzero_coordinates(x, /, *, size=None, fill_value=0, dtype=None, out=None, device=None,
                        workspace=None):
    """DirectML's NonZeroCoordinates: returns ``(coords, count)``.

    ``size=None`` gives exactly ``count`` rows. ``size=k`` always gives ``k`` rows: the first
    ``min(count, k)`` are coordinates, the rest ``fill_value``; no host synchronisation is needed,
    and ``count`` is a 0-d int64 array on the input's device.

    ``out=(coords, count)`` (``size=k`` only) receives the result; with it and a ``workspace``
    the GPU call allocates nothing and never synchronises: the CUDA-graph capture form.
    """
    k, hit = _fast.lookup(x, device, workspace, out, "nonzero_coordinates", size, fill_value, dtype)
    if hit is not None:
        return hit(x, workspace)
    return _nonzero_coordinates(x, size, fill_value, dtype, out, device, workspace, k)


def _nonzero_coordinates(x, size, fill_value, dtype, out, device, workspace, fast_key):
    opname = "nonzero_coordinates"
    res = _first.serve(fast_key, x, workspace)   # a new layout of a layout class seen before
    if res is not None:
        return res
    x, placement = _dispatch.place(x, device)
    x0 = x
    _check_value_dtype(x, NONZERO_DTYPES, opname, datetime=True)
    if x.dtype.kind in "mM":
        x = _as_int64_bits(x)   # NaT (INT64_MIN) is nonzero, the epoch is zero
    if out is not None:
        if not isinstance(out, tuple) or len(out) != 2:
            raise TypeError(f"{opname}: out must be a tuple (coords, count), got "
                            f"{type(out).__name__}")
        if size is None:
            raise ValueError(f"{opname}: out= needs size=k: the exact-size result's shape is not "
                             f"known before the count is read")
        if dtype is None and getattr(out[0], "dtype", None) in COORD_DTYPES:
            dtype = out[0].dtype  # with dtype=None, out's dtype is the result dtype
    index_dtype = _check_coordinate_dtype(x, dtype, opname)
    size, fill_value = _check_size_fill(size, fill_value, index_dtype, opname)
    if out is not None:
        out = (_check_out(out[0], x, (size, x.ndim), index_dtype, f"{opname} (out[0], coords)",
                          f"one of {_DTYPE_NAMES(COORD_DTYPES)}" if dtype is None else None),
               _check_out(out[1], x, (), np.dtype(np.int64), f"{opname} (out[1], count)"))
    workspace = _check_workspace(workspace, placement, opname)
    xp = _xp(placement)
    with _device_ctx(placement):
        if x.ndim == 0 or x.size == 0:
            rows = size
            if x.ndim == 0:
                # on the device: the size= form makes no host read, even for a 0-d input
                count = xp.asarray(x != 0).astype(np.int64)
                if size is None:
                    rows = int(count)             # the exact form's one host read
            else:
                count = xp.zeros((), np.int64)
                rows = 0 if size is None else size
            coords = xp.full((rows, x.ndim), fill_value, index_dtype)
            return _deliver_all((coords, count), out)
        if x is not x0:
            fast_key = None
        if placement.kind == "cpu":
            from cupyops.ops.nonzero import numpy_path as _cpu_nonzero
            _fast.remember(fast_key, _fast.cpu_coordinates_entry(x, size, fill_value, index_dtype))
            return _deliver_all(_cpu_nonzero.nonzero_coordinates(x, size, fill_value, index_dtype),
                                out)
        from cupyops.ops.nonzero import launch as _gpu_nonzero
        backend = _kernel_backend(placement)
        kernel_out = None
        if out is not None and not (placement.kind == "cuda" and not placement.cupy_input) \
                and out[0].flags.c_contiguous and _element_aligned(out[0]) \
                and _element_aligned(out[1]):
            kernel_out = out
        kin = _to_kernel_input(x, placement, opname)
        force = _dispatch.force_64bit.get()
        if size is None:
            run = _gpu_nonzero.exact_runner(backend, kin, index_dtype, _gpu_nonzero.LAYOUT_ROWS,
                                            force, result=_gpu_nonzero.RESULT_COORDS_COUNT)
            coords, count = run(kin, workspace)
        else:
            run = _gpu_nonzero.fixed_runner(backend, kin, size, fill_value, index_dtype, force)
            coords, count = run(kin, workspace, kernel_out)
        if fast_key is not None:
            stored = _fast.kernel_entry(backend, placement, x, kin, run)
            _fast.remember(fast_key, stored)
            if stored is not None:
                _first.remember(fast_key, x, _first.coordinates_class(
                    backend, placement, index_dtype, size=size, fill_value=fill_value,
                    exact_count=size is None))
        return _deliver_all(_from_kernel_result((coords, count), placement), out)


def _deliver_all(results, outs):
    """``_deliver`` for a tuple of results."""
    if outs is None:
        return results
    return tuple(_deliver(r, o) for r, o in zip(results, outs))
