"""The peers the benchmark compares cupyops with: what a user would write instead.

Each peer builder returns ``(fn, to_ours)`` for a case, or raises :class:`PeerUnavailable`:
``fn(x)`` computes the result the peer's way (this is what is timed) and ``to_ours(result)``
turns it into cupyops' result format for the correctness check (not timed). What each peer
writes for an operator is in the operator's descriptor (``Operator.bench``, the op folder's
``bench.py``); this module holds what every operator shares:

* ``numpy``: the NumPy composition (``Bench.compose`` with NumPy).
* ``onnxruntime``: a tiny one-operator ONNX model (``Bench.onnx``'s nodes, built with
  ``onnx.helper``), run single-threaded on the CPU.
* ``torch`` on the CPU (when installed): the PyTorch composition (``Bench.torch``), on as many
  threads as cupyops uses in the run.
* ``cupy`` and ``torch`` on a GPU: the same compositions with those libraries.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from cupyops.core.operator import PeerUnavailable

from .cases import bench_of

__all__ = ["PeerUnavailable", "numpy_peer", "cupy_peer", "torch_peer", "torch_cpu_peer",
           "onnxruntime_peer", "to_numpy", "numpy_result", "CPU_PEERS", "GPU_PEERS",
           "not_installed"]


def _compose(xp, case):
    return bench_of(case).compose(xp, case)


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
    """A result in cupyops' format as NumPy, for the comparisons: a tuple of arrays, an array,
    or the operator's own form (``Bench.as_numpy``). CuPy and torch results are copied to the
    host first."""
    r = to_numpy(r)
    as_numpy = bench_of(case).as_numpy
    if as_numpy is not None:
        return as_numpy(r)
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
    compose = bench_of(case).torch
    if compose is None:
        raise PeerUnavailable(f"no torch composition for {case.op}")
    return compose(torch, case)


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


def _ort_model(case):
    """(model, output adapter) for ``case``: a tiny graph of what an ONNX user would write."""
    import onnx
    from onnx import helper

    t = _onnx_type(case.dtype)
    build = bench_of(case).onnx
    if build is None:
        raise PeerUnavailable(f"no ONNX composition for {case.op}")
    nodes, inits, y_out, adapt = build(case, t)
    x_in = helper.make_tensor_value_info("x", t, list(case.shape))
    graph = helper.make_graph(nodes, f"cupyops_bench_{case.op}", [x_in], [y_out],
                              initializer=inits)
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
    except Exception as exc:   # NOT_IMPLEMENTED for a dtype, typically: said whole
        msg = " ".join(str(exc).split()) or type(exc).__name__
        raise PeerUnavailable(f"onnxruntime: {msg}") from None
    run = sess.run

    def fn(x):
        return run(None, {"x": x})[0]
    return fn, adapt


CPU_PEERS = {"numpy": numpy_peer, "onnxruntime": onnxruntime_peer, "torch": torch_cpu_peer}
GPU_PEERS = {"cupy": cupy_peer, "torch": torch_peer}

#: what each optional peer imports, and how to install it
PEER_PACKAGES = {"onnxruntime": (("onnxruntime", "onnx"), "pip install onnxruntime onnx"),
                 "torch": (("torch",), "pip install torch")}


def not_installed(names) -> dict:
    """``{peer: how to install it}`` for the peers among ``names`` whose packages are not
    installed (found without importing them)."""
    import importlib.util
    out = {}
    for name in names:
        mods, how = PEER_PACKAGES.get(name, ((), ""))
        if any(importlib.util.find_spec(m) is None for m in mods):
            out[name] = how
    return out


def prod(shape):
    return math.prod(shape)
