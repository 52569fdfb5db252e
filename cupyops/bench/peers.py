"""The peers the benchmark compares cupyops with: what a user would write instead.

Each peer builder returns ``(fn, to_ours)`` for a case, or raises :class:`PeerUnavailable`:
``fn(x)`` computes the result the peer's way (this is what is timed) and ``to_ours(result)``
turns it into cupyops' result format for the correctness check (not timed).

* ``numpy``: the NumPy composition (``np.argmax``; tie "last" as argmax of a flipped view mapped
  back; several axes as moveaxis + reshape, then argmax; hardmax as argmax + put_along_axis;
  ``np.argwhere`` / ``np.nonzero`` / ``np.count_nonzero``).
* ``onnxruntime``: tiny one-operator ONNX models (ArgMax/ArgMin with select_last_index, Hardmax,
  NonZero) built with ``onnx.helper``, run single-threaded on the CPU.
* ``torch`` on the CPU (when installed): the same compositions with PyTorch, on as many
  threads as cupyops uses in the run.
* ``cupy`` and ``torch`` on a GPU: the same compositions with those libraries.
"""
from __future__ import annotations

import functools
import math

import numpy as np


class PeerUnavailable(Exception):
    """The peer cannot run this case (not installed, dtype not supported, ...)."""


# --------------------------------------------------------------------------------------------
# array-module compositions (NumPy and CuPy share them)
# --------------------------------------------------------------------------------------------

def _kept_reduced(ndim, axes):
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
    kept, red = _kept_reduced(nd, axes)
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


def _compose(xp, case):
    p = case.params
    op = case.op
    if op in ("argmax", "argmin"):
        kind = op[3:]
        return lambda x: argreduce_composition(xp, x, p["axes"], kind, p["tie"])
    if op == "hardmax":
        if xp is np:
            return lambda x: hardmax_numpy(x, p["axes"][0], p["tie"])
        return lambda x: hardmax_onehot(xp, x, p["axes"][0], p["tie"])
    if op == "argwhere":
        return xp.argwhere
    if op == "nonzero":
        return xp.nonzero
    if op == "count_nonzero":
        return xp.count_nonzero
    if op == "nonzero_coordinates":
        size = p.get("size")
        return lambda x: nonzero_coordinates_composition(xp, x, None if size is None else x.size)
    raise PeerUnavailable(f"no composition for {op}")


def numpy_peer(case):
    fn = _compose(np, case)
    return fn, functools.partial(numpy_result, case)


def cupy_peer(case):
    import cupy
    fn = _compose(cupy, case)
    return fn, functools.partial(numpy_result, case)


def to_numpy(r):
    """A result (CuPy, torch, NumPy, or a tuple of them) as NumPy."""
    if isinstance(r, tuple):
        return tuple(to_numpy(v) for v in r)
    if hasattr(r, "get"):
        return r.get()
    if hasattr(r, "cpu"):
        r = r.cpu()
        if str(r.dtype) == "torch.bfloat16":    # (NumPy has no bfloat16 of its own)
            r = r.float()
        return r.numpy()
    return r


def numpy_result(case, r):
    """A result in cupyops' format as NumPy, for the comparisons: (coordinates, count) for
    nonzero_coordinates, a tuple of arrays for nonzero, else an array (CuPy and torch results
    are copied to the host first)."""
    r = to_numpy(r)
    if case.op == "nonzero_coordinates":
        return (np.asarray(r[0]), int(np.asarray(r[1])))
    if isinstance(r, tuple):
        return tuple(np.asarray(v) for v in r)
    return np.asarray(r)


# --------------------------------------------------------------------------------------------
# PyTorch (CPU and GPU)
# --------------------------------------------------------------------------------------------

def _torch_from_cupy(x):
    import torch
    if x.dtype.name == "bfloat16":    # through its bits: DLPack bf16 needs no ml_dtypes this way
        return torch.from_dlpack(x.view("uint16")).view(torch.bfloat16)
    return torch.from_dlpack(x)


def _torch_from_numpy(x):
    import torch
    if x.dtype.name == "bfloat16":
        return torch.from_numpy(x.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(x)


def _torch_composition(case):
    """What a PyTorch user writes for ``case`` (on the tensor's device)."""
    try:
        import torch
    except ImportError as exc:
        raise PeerUnavailable("torch not installed") from exc
    p = case.params
    op = case.op

    def argred(x, axes, kind, tie):
        f = torch.argmax if kind == "max" else torch.argmin
        nd = x.ndim
        if len(axes) == 1:
            a = axes[0]
            if tie == "first":
                return f(x, dim=a)
            return x.shape[a] - 1 - f(torch.flip(x, (a,)), dim=a)
        kept, red = _kept_reduced(nd, axes)
        flat = x.permute(*kept, *red).reshape(*[x.shape[i] for i in kept], -1)
        if tie == "first":
            return f(flat, dim=-1)
        return flat.shape[-1] - 1 - f(torch.flip(flat, (-1,)), dim=-1)

    if op in ("argmax", "argmin"):
        def fn(x):
            return argred(x, p["axes"], op[3:], p["tie"])
    elif op == "hardmax":
        a = p["axes"][0]

        def fn(x):
            idx = argred(x, (a,), "max", p["tie"])
            return torch.zeros_like(x).scatter_(a, idx.unsqueeze(a), 1)
    elif op == "argwhere":
        def fn(x):
            return torch.argwhere(x)
    elif op == "nonzero":
        def fn(x):
            return torch.nonzero(x, as_tuple=True)
    elif op == "count_nonzero":
        def fn(x):
            return torch.count_nonzero(x)
    elif op == "nonzero_coordinates":
        size = p.get("size")

        def fn(x):
            c = torch.argwhere(x)
            if size is None:
                return c, c.shape[0]
            out = torch.zeros((x.numel(), x.ndim), dtype=c.dtype, device=x.device)
            out[:c.shape[0]] = c
            return out, c.shape[0]
    else:
        raise PeerUnavailable(f"no torch composition for {op}")
    return fn


def torch_peer(case):
    """PyTorch on the GPU: the input shared zero-copy from CuPy through DLPack."""
    fn = _torch_composition(case)
    fn.prepare = _torch_from_cupy      # CuPy array -> torch tensor, zero-copy (not timed)
    return fn, functools.partial(numpy_result, case)


def torch_cpu_peer(case):
    """PyTorch on the CPU, on as many threads as cupyops (the benchmark sets
    ``torch.set_num_threads``): the NumPy input shared zero-copy (``torch.from_numpy``)."""
    fn = _torch_composition(case)
    fn.prepare = _torch_from_numpy     # not timed
    return fn, functools.partial(numpy_result, case)


# --------------------------------------------------------------------------------------------
# onnxruntime (CPU)
# --------------------------------------------------------------------------------------------

_ORT_SESSIONS: dict = {}


def _onnx_type(dtype):
    from onnx import TensorProto
    table = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.float16): TensorProto.FLOAT16,
             np.dtype(np.float64): TensorProto.DOUBLE, np.dtype(np.int8): TensorProto.INT8,
             np.dtype(np.uint8): TensorProto.UINT8, np.dtype(np.int32): TensorProto.INT32,
             np.dtype(np.int64): TensorProto.INT64, np.dtype(np.bool_): TensorProto.BOOL}
    try:
        return table[np.dtype(dtype)]
    except KeyError:
        raise PeerUnavailable(f"no ONNX type for {dtype}") from None


def _dims(rank):
    return [f"d{i}" for i in range(rank)]


def _ort_model(case):
    """(model, output adapter) for ``case``: a tiny graph of what an ONNX user would write."""
    import onnx
    from onnx import TensorProto, helper

    p = case.params
    op = case.op
    shape = list(case.shape)
    nd = len(shape)
    t = _onnx_type(case.dtype)
    nodes, inits = [], []
    x_in = helper.make_tensor_value_info("x", t, shape)
    if op in ("argmax", "argmin"):
        onnx_op = "ArgMax" if op == "argmax" else "ArgMin"
        axes = p["axes"]
        last = 1 if p["tie"] == "last" else 0
        if len(axes) == 1:
            nodes.append(helper.make_node(onnx_op, ["x"], ["y"], axis=axes[0], keepdims=0,
                                          select_last_index=last))
        else:   # moveaxis + reshape, then one ArgMax
            kept, red = _kept_reduced(nd, axes)
            src = "x"
            if kept and (kept + red) != list(range(nd)):
                nodes.append(helper.make_node("Transpose", ["x"], ["xt"], perm=kept + red))
                src = "xt"
            new_shape = [shape[i] for i in kept] + [-1]
            inits.append(helper.make_tensor("shp", TensorProto.INT64, [len(new_shape)], new_shape))
            nodes.append(helper.make_node("Reshape", [src, "shp"], ["xr"]))
            nodes.append(helper.make_node(onnx_op, ["xr"], ["y"], axis=len(kept), keepdims=0,
                                          select_last_index=last))
        y_out = helper.make_tensor_value_info("y", TensorProto.INT64, _dims(nd - len(axes)))
        adapt = np.asarray
    elif op == "hardmax":
        if p["tie"] != "first":
            raise PeerUnavailable("ONNX Hardmax has no tie='last'")
        nodes.append(helper.make_node("Hardmax", ["x"], ["y"], axis=p["axes"][0]))
        y_out = helper.make_tensor_value_info("y", t, shape)
        adapt = np.asarray
    elif op in ("argwhere", "nonzero"):
        if op == "argwhere":
            nodes.append(helper.make_node("NonZero", ["x"], ["nz"]))
            nodes.append(helper.make_node("Transpose", ["nz"], ["y"], perm=[1, 0]))
            adapt = np.asarray
        else:
            nodes.append(helper.make_node("NonZero", ["x"], ["y"]))
            adapt = lambda r: tuple(np.asarray(r))  # noqa: E731
        y_out = helper.make_tensor_value_info("y", TensorProto.INT64, _dims(2))
    elif op == "count_nonzero":
        zero = np.zeros((), case.dtype)
        inits.append(helper.make_tensor("zero", t, [], [zero.item()]))
        nodes += [helper.make_node("Equal", ["x", "zero"], ["eq"]),
                  helper.make_node("Not", ["eq"], ["ne"]),
                  helper.make_node("Cast", ["ne"], ["ne64"], to=TensorProto.INT64),
                  helper.make_node("ReduceSum", ["ne64"], ["y"], keepdims=0)]
        y_out = helper.make_tensor_value_info("y", TensorProto.INT64, [])
        adapt = np.asarray
    else:
        raise PeerUnavailable(f"no ONNX composition for {op}")
    graph = helper.make_graph(nodes, f"cupyops_bench_{op}", [x_in], [y_out], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model, adapt


def onnxruntime_peer(case):
    try:
        import onnxruntime as ort
        import onnx  # noqa: F401
    except ImportError as exc:
        raise PeerUnavailable(f"{exc.name or 'onnxruntime'} is not installed "
                              "(pip install onnxruntime onnx)") from exc
    model, adapt = _ort_model(case)
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    try:
        sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    except Exception as exc:   # NOT_IMPLEMENTED for a dtype, typically
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise PeerUnavailable(f"onnxruntime: {msg[:160]}") from None
    run = sess.run

    def fn(x):
        return run(None, {"x": x})[0]
    return fn, adapt


CPU_PEERS = {"numpy": numpy_peer, "onnxruntime": onnxruntime_peer, "torch": torch_cpu_peer}
GPU_PEERS = {"cupy": cupy_peer, "torch": torch_peer}


def prod(shape):
    return math.prod(shape)
