"""The operators of the nonzero family, one descriptor each (cupyops.core.operator):
count_nonzero, argwhere, nonzero and nonzero_coordinates. The functions below are their
public signatures and documentation; cupyops._call generates the public functions from them."""
from __future__ import annotations

from cupyops.core.annotations import ArrayT, Axis, Device, IndexDType
from cupyops.core.operator import Operator
from cupyops.core.workspace import Workspace
from cupyops.ops.nonzero import bench as _bench
from cupyops.ops.nonzero import checks as _checks
from cupyops.ops.nonzero import dask as _dask
from cupyops.ops.nonzero.calls import (argwhere_call, count_nonzero_call, nonzero_call,
                                       nonzero_coordinates_call)

__all__ = ["OPERATORS"]

#: the kernel families of the kernel path (cupyops.ops.nonzero.family)
FAMILIES = ("nonzero",)


def count_nonzero(x: ArrayT, /, axis: Axis = None, *, keepdims: bool = False,
                  device: Device = None) -> ArrayT:
    """Number of elements with ``x != 0`` over ``axis`` (int64, as the array API asks)."""


def argwhere(x: ArrayT, /, *, dtype: IndexDType = None, device: Device = None) -> ArrayT:
    """Coordinates of the nonzero elements, shape (count, ndim), in ascending row-major order."""


def nonzero(x: ArrayT, /, *, device: Device = None) -> tuple[ArrayT, ...]:
    """Array API nonzero: a tuple of ndim 1-D int64 index arrays, in row-major order."""


def nonzero_coordinates(x: ArrayT, /, *, size: int | None = None, fill_value: int = 0,
                        dtype: IndexDType = None, out: tuple[ArrayT, ArrayT] | None = None,
                        device: Device = None,
                        workspace: Workspace | None = None) -> tuple[ArrayT, ArrayT]:
    """DirectML's NonZeroCoordinates: returns ``(coords, count)``.

    ``size=None`` gives exactly ``count`` rows. ``size=k`` always gives ``k`` rows: the first
    ``min(count, k)`` are coordinates, the rest ``fill_value``; no host synchronisation is needed,
    and ``count`` is a 0-d int64 array on the input's device.

    ``out=(coords, count)`` (``size=k`` only) receives the result; with it and a ``workspace``
    the GPU call allocates nothing and never synchronises: the CUDA-graph capture form.
    """


OPERATORS = (
    Operator(argwhere, argwhere_call, families=FAMILIES, dask=_dask.argwhere,
             selftest=_checks.argwhere_calls, bench=_bench.ARGWHERE_BENCH,
             examples=_checks.ARGWHERE_EXAMPLES),
    Operator(nonzero, nonzero_call, families=FAMILIES, dask=_dask.nonzero,
             selftest=_checks.nonzero_calls, bench=_bench.NONZERO_BENCH, array_api=True),
    Operator(count_nonzero, count_nonzero_call, families=FAMILIES, dask=_dask.count_nonzero,
             selftest=_checks.count_calls, bench=_bench.COUNT_BENCH, array_api=True),
    Operator(nonzero_coordinates, nonzero_coordinates_call, families=FAMILIES,
             dask=_dask.nonzero_coordinates, selftest=_checks.coordinates_calls,
             bench=_bench.COORDINATES_BENCH, examples=_checks.COORDINATES_EXAMPLES),
)
