"""The one place where the benchmark and the tools reach runtime internals that have no public
name yet. Nothing else in ``cupyops/bench/`` or ``cupyops/tools/`` reads a ``_`` name of
another module.

Each entry says which public name it waits for; once the runtime has it, the entry imports
that instead and its callers do not change.
"""
from __future__ import annotations

__all__ = ["argmax_chunk_partial"]


def argmax_chunk_partial(chunk):
    """The partial that cupyops' Dask argmax over all axes makes of one NumPy chunk (the
    chunk taken as the whole array), as dask's combine receives it: ``bench --dask`` sizes it
    for its bytes-moved table.

    Waits for: ``cupyops.interop.dask._arg_chunk`` under a public name (the partial of one
    chunk)."""
    from cupyops.interop.dask import _arg_chunk   # the private read, here only
    shape = tuple(chunk.shape)
    return _arg_chunk(chunk, [{"array-location": [(0, n) for n in shape]}], kind="max",
                      axes=tuple(range(len(shape))), tie="first", skip_nan=False, device="cpu",
                      shape=shape, opname="argmax")
