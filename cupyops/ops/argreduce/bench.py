"""The benchmark of the argreduce family (cupyops.core.operator.Bench; cupyops.bench runs it):
argmax's and argmin's cases (four layouts, both ties; argmax's greedy-decoding cases too) and
hardmax's, their calls, and what a NumPy / CuPy, PyTorch or ONNX user writes instead:

* NumPy / CuPy: ``argmax`` / ``argmin``; tie "last" as argmax of a flipped view mapped back;
  several axes as moveaxis + reshape, then argmax; hardmax as argmax + ``put_along_axis``
  (NumPy) or a comparison with an arange (CuPy);
* PyTorch: the same with ``torch.argmax`` / ``torch.flip`` / ``permute``, hardmax by
  ``scatter_``;
* ONNX: ArgMax / ArgMin with ``select_last_index`` (after Transpose + Reshape for several
  axes), Hardmax (no tie "last").
"""
from __future__ import annotations

import functools

import numpy as np

from cupyops.core.operator import Bench, BenchCase, PeerUnavailable

__all__ = ["argreduce_bench", "HARDMAX_BENCH", "values_bench", "DECODE_SHAPES", "DECODE_DTYPES",
           "kept_reduced", "argreduce_composition", "hardmax_numpy", "hardmax_onehot"]

#: greedy decoding: argmax over the last axis of (batch, vocabulary) logits
DECODE_SHAPES = ((1, 131072), (128, 131072))
DECODE_DTYPES = ("bfloat16", "float16", "float32")

TIES = ("first", "last")

_AXES_WORDS = "last, first, all"
_TIE_WORDS = ("tie=first, tie=last", "which of equal extremes counts: the first (NumPy's rule) or "
              "the last")
#: the words of the case names (cupyops.core.operator.Bench.legend)
ARGREDUCE_LEGEND = (
    (_AXES_WORDS, "the axes reduced: the last, the first, or every axis of a matrix"),
    ("middle", "the two middle axes of a 4-D array"), _TIE_WORDS)
HARDMAX_LEGEND = (
    (_AXES_WORDS, "the axes reduced: the last, the first, or every axis of a matrix"),
    ("middle", "the middle axis of a 3-D array"), _TIE_WORDS)
DECODE_LEGEND = (("decode", "greedy decoding: argmax over the last axis of B x V logits "
                            "(B sequences, a vocabulary of V)"),)


# --------------------------------------------------------------------------------------------
# cases and calls
# --------------------------------------------------------------------------------------------

def _argreduce_cases(sizes, dtype):
    """Last, first, middle (two axes of a 4-D array) and all axes, each with both ties."""
    return [BenchCase(f"{layout} tie={tie}", shape, {"axes": axes, "tie": tie, "layout": layout})
            for layout, shape, axes in (("last", sizes["2d"], (1,)), ("first", sizes["2d"], (0,)),
                                        ("middle", sizes["4d"], (1, 2)),
                                        ("all", sizes["2d"], (0, 1)))
            for tie in TIES]


def _decode_cases():
    """The decode case in bfloat16 (when ml_dtypes is installed), float16 and float32, whatever
    --dtypes says; select them with --cases decode."""
    from cupyops.core import dtypes as _bf16
    out = []
    for name in DECODE_DTYPES:
        dt = _bf16.dtype() if name == "bfloat16" else np.dtype(name)
        if dt is None:
            continue
        out += [(dt, BenchCase(f"decode {shape[0]}x{shape[1]}", shape,
                               {"axes": (1,), "tie": "first", "layout": "decode"}))
                for shape in DECODE_SHAPES]
    return out


def _hardmax_cases(sizes, dtype):
    """The last axis of a matrix and the middle axis of a 3-D array, each with both ties."""
    return [BenchCase(f"{layout} tie={tie}", shape, {"axes": axes, "tie": tie, "layout": layout})
            for layout, shape, axes in (("last", sizes["2d"], (1,)), ("middle", sizes["3d"], (1,)))
            for tie in TIES]


def _argreduce_call(f, case, device):
    p = case.params
    axes = p["axes"]
    axis = None if len(axes) == len(case.shape) else (axes[0] if len(axes) == 1 else axes)
    return lambda x: f(x, axis=axis, tie=p["tie"], device=device)


def _hardmax_call(f, case, device):
    p = case.params
    return lambda x: f(x, axis=p["axes"][0], tie=p["tie"], device=device)


def _cold_call(f, x, device):
    dev = None if device == "cuda" else device
    return lambda: f(x, axis=-1, device=dev)


# --------------------------------------------------------------------------------------------
# NumPy / CuPy compositions
# --------------------------------------------------------------------------------------------

def kept_reduced(ndim, axes):
    """(the kept axes, the reduced axes), each in order."""
    return [i for i in range(ndim) if i not in axes], list(axes)


def argreduce_composition(xp, x, axes, kind, tie):
    """What a NumPy / CuPy user writes for argmax/argmin over ``axes`` with a tie rule."""
    f = xp.argmax if kind == "max" else xp.argmin
    nd = x.ndim
    if len(axes) == nd:
        flat = x.reshape(-1)
        if tie == "first":
            return f(flat)
        return flat.size - 1 - f(flat[::-1])
    if len(axes) == 1:
        a = axes[0]
        if tie == "first":
            return f(x, axis=a)
        n = x.shape[a]
        flipped = xp.flip(x, axis=a)
        return n - 1 - f(flipped, axis=a)
    kept, red = kept_reduced(nd, axes)
    moved = xp.moveaxis(x, red, list(range(nd - len(red), nd)))
    kept_shape = tuple(x.shape[i] for i in kept)
    flat = moved.reshape(kept_shape + (-1,))
    if tie == "first":
        return f(flat, axis=-1)
    n = flat.shape[-1]
    return n - 1 - f(flat[..., ::-1], axis=-1)


def hardmax_numpy(x, axis, tie):
    """argmax (with the tie rule) + put_along_axis into zeros."""
    idx = argreduce_composition(np, x, (axis,), "max", tie)
    out = np.zeros_like(x)
    np.put_along_axis(out, np.expand_dims(idx, axis), np.ones((), x.dtype), axis)
    return out


def hardmax_onehot(xp, x, axis, tie):
    """argmax (with the tie rule) + one-hot by comparison with an arange (CuPy users)."""
    idx = argreduce_composition(xp, x, (axis,), "max", tie)
    n = x.shape[axis]
    shape = [1] * x.ndim
    shape[axis] = n
    ar = xp.arange(n).reshape(shape)
    return (ar == xp.expand_dims(idx, axis)).astype(x.dtype)


def _argreduce_compose(kind, xp, case):
    p = case.params
    return lambda x: argreduce_composition(xp, x, p["axes"], kind, p["tie"])


def _hardmax_compose(xp, case):
    p = case.params
    if xp is np:
        return lambda x: hardmax_numpy(x, p["axes"][0], p["tie"])
    return lambda x: hardmax_onehot(xp, x, p["axes"][0], p["tie"])


# --------------------------------------------------------------------------------------------
# PyTorch
# --------------------------------------------------------------------------------------------

def _torch_argreduce(torch, x, axes, kind, tie):
    f = torch.argmax if kind == "max" else torch.argmin
    nd = x.ndim
    if len(axes) == 1:
        a = axes[0]
        if tie == "first":
            return f(x, dim=a)
        return x.shape[a] - 1 - f(torch.flip(x, (a,)), dim=a)
    kept, red = kept_reduced(nd, axes)
    flat = x.permute(*kept, *red).reshape(*[x.shape[i] for i in kept], -1)
    if tie == "first":
        return f(flat, dim=-1)
    return flat.shape[-1] - 1 - f(torch.flip(flat, (-1,)), dim=-1)


def _argreduce_torch(kind, torch, case):
    p = case.params

    def fn(x):
        return _torch_argreduce(torch, x, p["axes"], kind, p["tie"])
    return fn


def _hardmax_torch(torch, case):
    p = case.params
    a = p["axes"][0]

    def fn(x):
        idx = _torch_argreduce(torch, x, (a,), "max", p["tie"])
        return torch.zeros_like(x).scatter_(a, idx.unsqueeze(a), 1)
    return fn


# --------------------------------------------------------------------------------------------
# ONNX
# --------------------------------------------------------------------------------------------

def _argreduce_onnx(kind, case, elem_type):
    """ArgMax / ArgMin; over several axes after Transpose (moveaxis) + Reshape."""
    from onnx import TensorProto, helper
    p = case.params
    onnx_op = "ArgMax" if kind == "max" else "ArgMin"
    axes, shape = p["axes"], list(case.shape)
    nd = len(shape)
    last = 1 if p["tie"] == "last" else 0
    nodes, inits = [], []
    if len(axes) == 1:
        nodes.append(helper.make_node(onnx_op, ["x"], ["y"], axis=axes[0], keepdims=0,
                                      select_last_index=last))
    else:
        kept, red = kept_reduced(nd, axes)
        src = "x"
        if kept and (kept + red) != list(range(nd)):
            nodes.append(helper.make_node("Transpose", ["x"], ["xt"], perm=kept + red))
            src = "xt"
        new_shape = [shape[i] for i in kept] + [-1]
        inits.append(helper.make_tensor("shp", TensorProto.INT64, [len(new_shape)], new_shape))
        nodes.append(helper.make_node("Reshape", [src, "shp"], ["xr"]))
        nodes.append(helper.make_node(onnx_op, ["xr"], ["y"], axis=len(kept), keepdims=0,
                                      select_last_index=last))
    y_out = helper.make_tensor_value_info("y", TensorProto.INT64,
                                          [f"d{i}" for i in range(nd - len(axes))])
    return nodes, inits, y_out, np.asarray


def _hardmax_onnx(case, elem_type):
    from onnx import helper
    p = case.params
    if p["tie"] != "first":
        raise PeerUnavailable("ONNX Hardmax has no tie='last'")
    nodes = [helper.make_node("Hardmax", ["x"], ["y"], axis=p["axes"][0])]
    return nodes, [], helper.make_tensor_value_info("y", elem_type, list(case.shape)), np.asarray


# --------------------------------------------------------------------------------------------
# the descriptors' benchmarks
# --------------------------------------------------------------------------------------------

def argreduce_bench(kind, *, decode=False, cold=False):
    """argmax's (``kind`` "max") or argmin's benchmark; ``decode``: with the greedy-decoding
    cases, ``cold``: in the cold-start table."""
    return Bench(_argreduce_cases, _argreduce_call, functools.partial(_argreduce_compose, kind),
                 torch=functools.partial(_argreduce_torch, kind),
                 onnx=functools.partial(_argreduce_onnx, kind),
                 extra_cases=_decode_cases if decode else None,
                 cold=_cold_call if cold else None,
                 legend=ARGREDUCE_LEGEND + (DECODE_LEGEND if decode else ()))


HARDMAX_BENCH = Bench(_hardmax_cases, _hardmax_call, _hardmax_compose, torch=_hardmax_torch,
                      onnx=_hardmax_onnx, legend=HARDMAX_LEGEND)


# --------------------------------------------------------------------------------------------
# max_and_argmax / min_and_argmin: the value with its index
# --------------------------------------------------------------------------------------------

def _values_cases(sizes, dtype):
    """The last, first and all axes of a matrix (tie first: the peers' own rule)."""
    return [BenchCase(f"{layout} tie=first", sizes["2d"], {"axes": axes, "tie": "first",
                                                           "layout": layout})
            for layout, axes in (("last", (1,)), ("first", (0,)), ("all", (0, 1)))]


def _values_compose(kind, xp, case):
    """NumPy's (CuPy's) ``max`` plus ``argmax``: two passes over x."""
    axes = case.params["axes"]
    axis = None if len(axes) == len(case.shape) else axes[0]
    ext, arg = (xp.max, xp.argmax) if kind == "max" else (xp.min, xp.argmin)
    return lambda x: (ext(x, axis=axis), arg(x, axis=axis))


def _values_torch(kind, torch, case):
    """``torch.max(x, dim)`` (the flattened tensor for all axes)."""
    axes = case.params["axes"]
    f = torch.max if kind == "max" else torch.min
    if len(axes) == len(case.shape):
        return lambda x: tuple(f(x.reshape(-1), dim=0))
    return lambda x: tuple(f(x, dim=axes[0]))


def values_bench(kind):
    """max_and_argmax's (``kind`` "max") or min_and_argmin's benchmark: peers NumPy's
    max + argmax and ``torch.max(x, dim)``; ONNX has no single operator for both."""
    return Bench(_values_cases, _argreduce_call, functools.partial(_values_compose, kind),
                 torch=functools.partial(_values_torch, kind), legend=ARGREDUCE_LEGEND)
