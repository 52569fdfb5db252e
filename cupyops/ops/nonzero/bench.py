"""The benchmark of the nonzero family (cupyops.core.operator.Bench; cupyops.bench runs it):
one case per density for argwhere, nonzero, count_nonzero and nonzero_coordinates (its
fixed-size form, ``size=x.size``), their calls, and what a NumPy / CuPy, PyTorch or ONNX user
writes instead:

* NumPy / CuPy: ``argwhere`` / ``nonzero`` / ``count_nonzero``; nonzero_coordinates as argwhere
  padded to ``size`` rows;
* PyTorch: ``torch.argwhere`` / ``torch.nonzero(as_tuple=True)`` / ``torch.count_nonzero``;
* ONNX: NonZero (transposed for argwhere), and ``x != 0`` summed for count_nonzero; nothing for
  nonzero_coordinates.
"""
from __future__ import annotations

import numpy as np

from cupyops.core.operator import Bench, BenchCase

__all__ = ["DENSITIES", "ARGWHERE_BENCH", "NONZERO_BENCH", "COUNT_BENCH", "COORDINATES_BENCH",
           "nonzero_coordinates_composition"]

#: the fractions of nonzero elements of the cases' inputs (cupyops.bench.cases.make_input)
DENSITIES = (0.001, 0.1, 0.5)


#: the words of the case names (cupyops.core.operator.Bench.legend)
DENSITY_LEGEND = (("d=", "the share of nonzero elements in the input (d=0.1: one in ten)"),)
COORDINATES_LEGEND = DENSITY_LEGEND + (
    ("size=n", "the fixed-size form: size = n, the input's element count (DirectML's "
               "worst-case buffer)"),)


def _density_cases(sizes, dtype):
    return [BenchCase(f"d={d}", sizes["nz"], {"density": d}, order=i)
            for i, d in enumerate(DENSITIES)]


def _coordinates_cases(sizes, dtype):
    return [BenchCase(f"d={d} size=n", sizes["nz"], {"density": d, "size": "n"}, order=i)
            for i, d in enumerate(DENSITIES)]


def _plain_call(f, case, device):
    return lambda x: f(x, device=device)


def _coordinates_call(f, case, device):
    p = case.params
    return lambda x: f(x, size=x.size if p.get("size") else None, device=device)


def _cold_call(f, x, device):
    # (on the GPU the float input itself: a comparison there would compile a CuPy kernel)
    dev = None if device == "cuda" else device
    return lambda: f(x > 0 if device != "cuda" else x, device=dev)


# --------------------------------------------------------------------------------------------
# NumPy / CuPy
# --------------------------------------------------------------------------------------------

def nonzero_coordinates_composition(xp, x, size, fill_value=0):
    """argwhere, then padded / cut to ``size`` rows (what a NumPy user writes for DirectML's
    fixed-size form)."""
    c = xp.argwhere(x)
    count = c.shape[0]
    if size is None:
        return c, count
    out = xp.full((size, x.ndim), fill_value, dtype=c.dtype)
    k = min(size, count)
    out[:k] = c[:k]
    return out, count


def _coordinates_compose(xp, case):
    size = case.params.get("size")
    return lambda x: nonzero_coordinates_composition(xp, x, None if size is None else x.size)


def _coordinates_as_numpy(r):
    return (np.asarray(r[0]), int(np.asarray(r[1])))


# --------------------------------------------------------------------------------------------
# PyTorch
# --------------------------------------------------------------------------------------------

def _argwhere_torch(torch, case):
    def fn(x):
        return torch.argwhere(x)
    return fn


def _nonzero_torch(torch, case):
    def fn(x):
        return torch.nonzero(x, as_tuple=True)
    return fn


def _count_torch(torch, case):
    def fn(x):
        return torch.count_nonzero(x)
    return fn


def _coordinates_torch(torch, case):
    size = case.params.get("size")

    def fn(x):
        c = torch.argwhere(x)
        if size is None:
            return c, c.shape[0]
        out = torch.zeros((x.numel(), x.ndim), dtype=c.dtype, device=x.device)
        out[:c.shape[0]] = c
        return out, c.shape[0]
    return fn


# --------------------------------------------------------------------------------------------
# ONNX
# --------------------------------------------------------------------------------------------

def _index_value_info():
    from onnx import TensorProto, helper
    return helper.make_tensor_value_info("y", TensorProto.INT64, ["d0", "d1"])


def _argwhere_onnx(case, elem_type):
    from onnx import helper
    nodes = [helper.make_node("NonZero", ["x"], ["nz"]),
             helper.make_node("Transpose", ["nz"], ["y"], perm=[1, 0])]
    return nodes, [], _index_value_info(), np.asarray


def _nonzero_onnx(case, elem_type):
    from onnx import helper
    return ([helper.make_node("NonZero", ["x"], ["y"])], [], _index_value_info(),
            lambda r: tuple(np.asarray(r)))


def _count_onnx(case, elem_type):
    from onnx import TensorProto, helper
    zero = np.zeros((), case.dtype)
    inits = [helper.make_tensor("zero", elem_type, [], [zero.item()])]
    nodes = [helper.make_node("Equal", ["x", "zero"], ["eq"]),
             helper.make_node("Not", ["eq"], ["ne"]),
             helper.make_node("Cast", ["ne"], ["ne64"], to=TensorProto.INT64),
             helper.make_node("ReduceSum", ["ne64"], ["y"], keepdims=0)]
    return nodes, inits, helper.make_tensor_value_info("y", TensorProto.INT64, []), np.asarray


# --------------------------------------------------------------------------------------------
# the descriptors' benchmarks
# --------------------------------------------------------------------------------------------

ARGWHERE_BENCH = Bench(_density_cases, _plain_call, lambda xp, case: xp.argwhere,
                       torch=_argwhere_torch, onnx=_argwhere_onnx, cold=_cold_call,
                       legend=DENSITY_LEGEND)
NONZERO_BENCH = Bench(_density_cases, _plain_call, lambda xp, case: xp.nonzero,
                      torch=_nonzero_torch, onnx=_nonzero_onnx, legend=DENSITY_LEGEND)
COUNT_BENCH = Bench(_density_cases, _plain_call, lambda xp, case: xp.count_nonzero,
                    torch=_count_torch, onnx=_count_onnx, legend=DENSITY_LEGEND)
COORDINATES_BENCH = Bench(_coordinates_cases, _coordinates_call, _coordinates_compose,
                          torch=_coordinates_torch, as_numpy=_coordinates_as_numpy,
                          legend=COORDINATES_LEGEND)
