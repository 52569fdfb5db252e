"""Dask arrays in, lazy Dask arrays out: what every operator's Dask implementation shares.

``cupyops.<op>(dask_array, ...)`` lands here from cupyops._call, only when ``dask.array`` is
already imported and ``x`` is its ``Array``: dask is never imported by cupyops itself.
:func:`call` hands the call to the operator's own Dask implementation (its descriptor's
``dask``, in its op folder: ``cupyops/ops/<family>/dask.py``), which checks every argument
with the operator's own rules when the graph is built (the single-array call's messages) and
builds the graph. Each chunk then runs the public function for its type (NumPy path or
``device=`` for NumPy chunks, the CUDA kernels for CuPy chunks), through :data:`public`, and
the per-chunk results are combined so that the answer is the single-array call's on the
computed array. Nothing runs on the client.

Shared here: recognising a Dask array, the public functions the chunks call, refusing
``out=`` / ``workspace=``, the device check, chunks of unknown size, the result's ``meta``,
dask's ``split_every``, and the chunk-side checks (NumPy or CuPy chunks only).
"""
from __future__ import annotations

import math
import sys

import numpy as np

from cupyops.core import devices as _devices

__all__ = ["is_dask_array", "call", "use_public", "public", "da", "refuse_out",
           "check_device", "need_known", "meta", "split_every", "xp_of", "check_chunk"]


def is_dask_array(x) -> bool:
    dask_array = sys.modules.get("dask.array")
    return dask_array is not None and isinstance(x, dask_array.Array)


class _PublicFunctions:
    """The public functions the chunks call (``public.argmax``, ...), as cupyops._call hands
    them over when it is imported (also on a Dask worker, which imports cupyops to unpickle a
    chunk's function)."""

    def __init__(self):
        self.functions: dict = {}

    def __getattr__(self, name):
        try:
            return self.__dict__["functions"][name]
        except KeyError:
            raise AttributeError(name) from None


#: the public functions by name, for the chunk functions of every operator
public = _PublicFunctions()


def use_public(functions: dict) -> None:
    """Take the public functions by name (cupyops._call.PUBLIC)."""
    public.functions.update(functions)


def call(implementation, x, kw, functions=None):
    """An operator's Dask ``implementation`` (its descriptor's ``dask``) on the Dask array
    ``x`` with keywords ``kw``: a lazy Dask result."""
    if functions:
        use_public(functions)
    return implementation(x, **kw)


# --------------------------------------------------------------------------------------------
# graph build time


def da():
    """``dask.array`` (imported only once a Dask array was given)."""
    import dask.array
    return dask.array


def refuse_out(out, workspace, opname):
    if out is not None:
        raise TypeError(f"{opname}: out= cannot be used with a Dask array x: the result is a new "
                        f"lazy Dask array; leave out=None (store the result with dask.array.store "
                        f"if needed)")
    if workspace is not None:
        raise ValueError(f"{opname}: workspace= cannot be used with a Dask array x: each chunk "
                         f"runs as its own call on its own worker; leave workspace=None")


def check_device(device):
    if device is not None:
        _devices.resolve_device(device)   # a bad name fails now, with the usual message


def need_known(x, axes, opname):
    for a in axes:
        if any(math.isnan(c) for c in x.chunks[a]):
            raise ValueError(f"{opname}: x (a Dask array) has chunks of unknown size along axis "
                             f"{a}, which {opname} needs to know (chunk offsets, the group's "
                             f"index range); call x.compute_chunk_sizes() first")


def meta(x, ndim, dtype):
    """An empty array of the chunks' type (NumPy or CuPy) for a result's ``meta``."""
    import warnings
    from dask.array.utils import meta_from_array
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = meta_from_array(x)          # x's meta (an empty array of its chunks' type)
        xp = xp_of(m)
        if xp is not None and not isinstance(m, np.ma.MaskedArray):
            return xp.empty((0,) * ndim, dtype)
        return meta_from_array(m, ndim=ndim, dtype=dtype)


def split_every():
    import dask
    return dask.config.get("split_every", None)


# --------------------------------------------------------------------------------------------
# chunk side (run on the workers)


def xp_of(a):
    if isinstance(a, np.ndarray):
        return np
    cupy = sys.modules.get("cupy")
    if cupy is not None and isinstance(a, cupy.ndarray):
        return cupy
    return None


def check_chunk(c, opname):
    """A chunk must be a NumPy or CuPy array; anything else is a TypeError naming its type."""
    t = type(c)
    if isinstance(c, np.ma.MaskedArray):
        raise TypeError(f"{opname}: a chunk of the Dask array x is a numpy.ma.MaskedArray; masked "
                        f"arrays are not supported: their mask has no meaning here; use "
                        f"x.map_blocks(numpy.ma.getdata) or fill them first")
    if xp_of(c) is None:
        raise TypeError(f"{opname}: a chunk of the Dask array x is a {t.__module__}.{t.__qualname__}, "
                        f"which cupyops does not support; chunks must be numpy.ndarray or "
                        f"cupy.ndarray")
    return c
