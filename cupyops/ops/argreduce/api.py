"""The operators of the argreduce family, one descriptor each (cupyops.core.operator):
argmax, argmin, nanargmax, nanargmin and hardmax. The functions below are their public
signatures and documentation; cupyops._call generates the public functions from them."""
from __future__ import annotations

import functools

from cupyops.core.annotations import ArrayT, Axis, Device, IndexDType, Tie
from cupyops.core.operator import Operator
from cupyops.core.workspace import Workspace
from cupyops.ops.argreduce import bench as _bench
from cupyops.ops.argreduce import checks as _checks
from cupyops.ops.argreduce import dask as _dask
from cupyops.ops.argreduce.calls import argreduce_call, hardmax_call, values_call
from cupyops.ops.argreduce.rules import ValuesIndices

__all__ = ["OPERATORS", "ValuesIndices"]

#: the kernel families of the kernel path (cupyops.ops.argreduce.family)
FAMILIES = ("argreduce",)


def argmax(x: ArrayT, /, axis: Axis = None, *, keepdims: bool = False, tie: Tie = "first",
           dtype: IndexDType = None, out: ArrayT | None = None, device: Device = None,
           workspace: Workspace | None = None) -> ArrayT:
    """Index of the largest element over ``axis`` (row-major index within the reduced axes).

    ``tie="first"`` returns the smallest index among equal maxima, ``"last"`` the largest. NaN
    (complex: a NaN in either part) and NaT count as the maximum. Complex values order on
    (real, imag). ``dtype`` is the index dtype: any integer dtype the group's last index fits.
    ``workspace``: a :class:`cupyops.Workspace` for the kernel path's scratch (CUDA-graph
    capture; docs/api.md).
    """


def argmin(x: ArrayT, /, axis: Axis = None, *, keepdims: bool = False, tie: Tie = "first",
           dtype: IndexDType = None, out: ArrayT | None = None, device: Device = None,
           workspace: Workspace | None = None) -> ArrayT:
    """Index of the smallest element over ``axis``; NaN counts as the minimum. See argmax."""


def nanargmax(x: ArrayT, /, axis: Axis = None, *, keepdims: bool = False, tie: Tie = "first",
              dtype: IndexDType = None, out: ArrayT | None = None, device: Device = None,
              workspace: Workspace | None = None) -> ArrayT:
    """argmax that skips NaN (NaT is not skipped, as in NumPy). A group of only NaN is
    ``ValueError("All-NaN slice encountered")``; on the kernel path that costs one host read of
    a flag the same single pass sets. Arguments as argmax."""


def nanargmin(x: ArrayT, /, axis: Axis = None, *, keepdims: bool = False, tie: Tie = "first",
              dtype: IndexDType = None, out: ArrayT | None = None, device: Device = None,
              workspace: Workspace | None = None) -> ArrayT:
    """argmin that skips NaN; see nanargmax."""


def hardmax(x: ArrayT, /, axis: Axis = -1, *, tie: Tie = "first", out: ArrayT | None = None,
            device: Device = None, workspace: Workspace | None = None) -> ArrayT:
    """One-hot of the element ``argmax(..., tie=tie)`` picks in each group spanned by ``axis``.

    The output has x's shape and dtype (``True`` at the chosen place for bool). ``workspace``:
    see argmax.
    """


def max_and_argmax(x: ArrayT, /, axis: Axis = None, *, keepdims: bool = False,
                   tie: Tie = "first", dtype: IndexDType = None,
                   out: tuple[ArrayT, ArrayT] | None = None, device: Device = None,
                   workspace: Workspace | None = None) -> ValuesIndices:
    """The largest element over ``axis`` and its index, as ``(values, indices)`` (a named
    tuple, as ``torch.max(x, dim)`` returns).

    ``indices`` is exactly ``argmax(x, axis, keepdims=keepdims, tie=tie, dtype=dtype)``;
    ``values`` has x's dtype and holds the element at that index bit for bit (the sign of zero
    and NaN payloads are kept). On the kernel path both come from the same single reduction.
    ``out=(values_out, indices_out)`` receives them. Other arguments as argmax.
    """


def min_and_argmin(x: ArrayT, /, axis: Axis = None, *, keepdims: bool = False,
                   tie: Tie = "first", dtype: IndexDType = None,
                   out: tuple[ArrayT, ArrayT] | None = None, device: Device = None,
                   workspace: Workspace | None = None) -> ValuesIndices:
    """The smallest element over ``axis`` and its index; NaN counts as the minimum. See
    max_and_argmax."""


def _values(spec, kind):
    return Operator(spec, functools.partial(values_call, kind), families=FAMILIES,
                    dask=functools.partial(_dask.values, kind),
                    selftest=functools.partial(_checks.values_calls, kind),
                    bench=_bench.values_bench(kind))


def _argreduce(spec, kind, skip_nan, *, bench=None, array_api=False, examples=()):
    return Operator(spec, functools.partial(argreduce_call, kind, skip_nan), families=FAMILIES,
                    dask=functools.partial(_dask.argreduce, kind, skip_nan),
                    selftest=functools.partial(_checks.argreduce_calls, kind, skip_nan),
                    bench=bench, array_api=array_api, examples=examples)


OPERATORS = (
    _argreduce(argmax, "max", False, array_api=True, examples=_checks.ARGMAX_EXAMPLES,
               bench=_bench.argreduce_bench("max", decode=True, cold=True)),
    _argreduce(argmin, "min", False, array_api=True, examples=_checks.ARGMIN_EXAMPLES,
               bench=_bench.argreduce_bench("min")),
    _argreduce(nanargmax, "max", True),
    _argreduce(nanargmin, "min", True),
    Operator(hardmax, hardmax_call, families=FAMILIES, dask=_dask.hardmax,
             selftest=_checks.hardmax_calls, bench=_bench.HARDMAX_BENCH,
             examples=_checks.HARDMAX_EXAMPLES),
    _values(max_and_argmax, "max"),
    _values(min_and_argmin, "min"),
)
