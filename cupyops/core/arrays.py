"""Which array library an object belongs to: the one such test of the package.

As array-api-compat does it: a library is recognised through ``sys.modules`` (so that
``import cupyops`` and every NumPy call stay free of a cupy, dask, torch or jax import: an
object of a library whose module was never imported cannot exist), and the answer is cached
per type. The names:

* ``"numpy"``: ``numpy.ndarray`` and its subclasses (np.matrix, np.memmap, masked arrays);
* ``"cupy"``: ``cupy.ndarray`` and its subclasses;
* ``"dask"``: ``dask.array.Array``;
* ``"torch"``, ``"jax"``, or the top-level module name of any other object with
  ``__dlpack__`` and ``__dlpack_device__`` (``"array_api_strict"``, ...): the DLPack route;
* ``None``: everything else (lists, scalars, NumPy scalars, objects with ``__array__``), which
  ``numpy.asarray`` converts.
"""
from __future__ import annotations

import sys

import numpy as np

from cupyops.core.dtypes import element_alignment
from cupyops.core.fastread import numpy_data_ptr

__all__ = ["library_of", "library_of_type", "is_cupy_array", "data_ptr", "check_cupy_alignment",
           "readable", "shares_memory", "DLPACK_LIBRARIES"]

_by_type: dict = {np.ndarray: "numpy"}
_MISSING = object()


def _classify(t) -> str | None:
    if issubclass(t, np.ndarray):
        return "numpy"
    if issubclass(t, np.generic):
        return None
    cupy = sys.modules.get("cupy")
    if cupy is not None and issubclass(t, cupy.ndarray):
        return "cupy"
    da = sys.modules.get("dask.array")
    if da is not None and issubclass(t, da.Array):
        return "dask"
    # subclasses defined elsewhere (a user's torch.Tensor subclass) are their base's arrays
    for lib, attr in (("torch", "Tensor"), ("jax", "Array")):
        base = getattr(sys.modules.get(lib), attr, None)
        if base is not None and issubclass(t, base):
            return lib
    if not hasattr(t, "__dlpack__") or not hasattr(t, "__dlpack_device__"):
        return None
    root = t.__module__.partition(".")[0]
    return "jax" if root in ("jax", "jaxlib") else root


def library_of_type(t) -> str | None:
    """The library name of objects of type ``t`` (see the module docstring), cached."""
    lib = _by_type.get(t, _MISSING)
    if lib is _MISSING:
        lib = _classify(t)
        if len(_by_type) < 1024:
            _by_type[t] = lib
    return lib


def library_of(x) -> str | None:
    """The library name of ``x`` (see the module docstring)."""
    return library_of_type(type(x))


def is_cupy_array(x) -> bool:
    return library_of_type(type(x)) == "cupy"


#: libraries whose arrays take the DLPack route (any other DLPack exporter too)
DLPACK_LIBRARIES = ("torch", "jax", "array_api_strict")


def data_ptr(x) -> int:
    """The data pointer of a NumPy or CuPy array (planners need its alignment)."""
    if isinstance(x, np.ndarray):   # (not .data, a memoryview, which refuses ml_dtypes' bfloat16)
        return numpy_data_ptr(x)
    return int(x.data.ptr)              # CuPy


def check_cupy_alignment(arr, argname, opname):
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


class _Alias:
    """An ``__array_interface__`` for ``np.asarray``; ``base`` keeps the aliased array (and
    through it the memory) alive as long as the alias."""

    __slots__ = ("__array_interface__", "base")


def readable(x):
    """``x`` (a NumPy array) as NumPy's routines read it in place: ``x`` itself when it is
    writeable, else a writeable-flagged alias of the same memory. NumPy's argmax, argmin
    and nonzero copy a read-only input whole before reading it (they ask for a writeable
    array); the NumPy path reads a read-only view, a read-only ``np.memmap``, a
    ``np.frombuffer`` buffer or a JAX array through the alias and never writes it."""
    if x.flags.writeable:
        return x
    alias = _Alias()
    alias.__array_interface__ = {"shape": x.shape, "typestr": x.dtype.str, "version": 3,
                                 "data": (numpy_data_ptr(x), False), "strides": x.strides}
    alias.base = x
    a = np.asarray(alias)
    return a if a.dtype == x.dtype else a.view(x.dtype)


def shares_memory(a, b) -> bool:
    """Whether arrays ``a`` and ``b`` (both NumPy, or both CuPy) share memory: NumPy's exact
    answer (bounded work) where their ranges meet; CuPy's range test."""
    if isinstance(a, np.ndarray):
        return bool(np.shares_memory(a, b, max_work=10**6)) if np.may_share_memory(a, b) \
            else False
    return bool(sys.modules["cupy"].may_share_memory(a, b))
