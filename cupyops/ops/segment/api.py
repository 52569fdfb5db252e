"""The operators of the segment family, one descriptor each (cupyops.core.operator):
segment_argmax, segment_argmin, segment_max_and_argmax and segment_min_and_argmin. The
functions below are their public signatures and documentation; cupyops._call generates the
public functions from them."""
from __future__ import annotations

import functools

from cupyops.core.annotations import ArrayT, Device, IndexDType, Tie
from cupyops.core.operator import Operator
from cupyops.core.workspace import Workspace
from cupyops.ops.segment import bench as _bench
from cupyops.ops.segment import checks as _checks
from cupyops.ops.segment import dask as _dask
from cupyops.ops.segment.calls import segment_call
from cupyops.ops.segment.rules import ValuesIndices

__all__ = ["OPERATORS", "ValuesIndices", "FAMILIES"]

#: the kernel families of the kernel path (cupyops.ops.segment.family)
FAMILIES = ("segment", "segment_flat")


def segment_argmax(x: ArrayT, offsets: ArrayT, /, *, tie: Tie = "first", relative: bool = False,
                   empty_index: int | None = None, dtype: IndexDType = None,
                   out: ArrayT | None = None, device: Device = None,
                   workspace: Workspace | None = None) -> ArrayT:
    """Index of the largest element of each segment ``x[offsets[s]:offsets[s + 1]]`` along
    axis 0, for every trailing position: shape ``(S, *x.shape[1:])``.

    ``offsets``: 1-D integers, S + 1 of them, non-decreasing, ``offsets[0] >= 0`` and
    ``offsets[-1] <= x.shape[0]``. Indices are along axis 0 of x (``relative=True``: from the
    segment's start, as CUB's). An empty segment gives ``empty_index`` (default -1; required
    for an unsigned ``dtype``). Ties, NaN and index dtypes as argmax. Host offsets are checked
    at every call; offsets already on the GPU are checked by the kernel (docs/api.md).
    """


def segment_argmin(x: ArrayT, offsets: ArrayT, /, *, tie: Tie = "first", relative: bool = False,
                   empty_index: int | None = None, dtype: IndexDType = None,
                   out: ArrayT | None = None, device: Device = None,
                   workspace: Workspace | None = None) -> ArrayT:
    """Index of the smallest element of each segment; NaN counts as the minimum. See
    segment_argmax."""


def segment_max_and_argmax(x: ArrayT, offsets: ArrayT, /, *, tie: Tie = "first",
                           relative: bool = False, empty_index: int | None = None,
                           dtype: IndexDType = None, out: tuple[ArrayT, ArrayT] | None = None,
                           device: Device = None,
                           workspace: Workspace | None = None) -> ValuesIndices:
    """Each segment's largest element and its index, ``(values, indices)``, from one pass:
    indices as segment_argmax, values the elements there bit for bit (an empty segment's value
    is the lowest of x's dtype: -inf, the smallest integer, False). ``out=(values, indices)``."""


def segment_min_and_argmin(x: ArrayT, offsets: ArrayT, /, *, tie: Tie = "first",
                           relative: bool = False, empty_index: int | None = None,
                           dtype: IndexDType = None, out: tuple[ArrayT, ArrayT] | None = None,
                           device: Device = None,
                           workspace: Workspace | None = None) -> ValuesIndices:
    """Each segment's smallest element and its index; an empty segment's value is the highest
    of x's dtype. See segment_max_and_argmax."""


def _segment(spec, kind, values):
    # (FAMILIES: with the flat fast path's family, kernels/segment_flat.cu)
    return Operator(spec, functools.partial(segment_call, kind, values), families=FAMILIES,
                    dask=functools.partial(_dask.segment, kind, values),
                    selftest=functools.partial(_checks.segment_calls, kind, values),
                    bench=_bench.segment_bench(kind, values),
                    array_args=("offsets",), tuple_args=())


OPERATORS = (
    _segment(segment_argmax, "max", False),
    _segment(segment_argmin, "min", False),
    _segment(segment_max_and_argmax, "max", True),
    _segment(segment_min_and_argmin, "min", True),
)
