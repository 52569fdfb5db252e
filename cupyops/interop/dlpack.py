"""Arrays of other libraries through DLPack: how they enter a call and how results leave.

cupyops._call sends here the inputs that are neither NumPy nor CuPy arrays nor Dask arrays nor
array-likes (cupyops.core.arrays tells which), with the public function to call:

* Any object with ``__dlpack__`` (torch, JAX, array_api_strict, ...): taken zero-copy
  through DLPack. Host memory becomes a NumPy view and follows the ``device=`` rules of NumPy
  input; CUDA memory becomes a CuPy view and runs on its GPU, on the consumer's stream (torch's
  current stream for a torch tensor, CuPy's current stream otherwise), which is passed to
  ``__dlpack__``. Results come back as the input's own array type on its device (torch in,
  torch out), through DLPack again: zero-copy. ``out=`` of the input's type is viewed the same
  way and written in place; JAX arrays are immutable, so JAX ``out=`` is a ``ValueError``, and
  so is a read-only export.
* bfloat16: torch and JAX bf16 memory is read as its uint16 bits and viewed as ml_dtypes'
  bfloat16 (no copy). Without ml_dtypes, host memory is widened exactly to float32 for the
  call (NumPy has no bf16 dtype then) and a hardmax result is narrowed back to bf16 bits, built
  as a torch tensor; on a GPU, bf16 needs ml_dtypes (CuPy's bf16 dtype).
"""
from __future__ import annotations

import sys

import numpy as np

from cupyops.core import dtypes as _bf16
from cupyops.core.arrays import library_of
from cupyops.core.devices import parse_device_name

__all__ = ["call", "DLPACK_DEVICES"]

#: DLPack device types (dlpack.h ``DLDeviceType``), for error messages
DLPACK_DEVICES = {1: "CPU", 2: "CUDA", 3: "CUDAHost", 4: "OpenCL", 7: "Vulkan", 8: "Metal",
                  9: "VPI", 10: "ROCm", 11: "ROCmHost", 12: "ExtDev", 13: "CUDAManaged",
                  14: "OneAPI", 15: "WebGPU", 16: "Hexagon", 17: "MAIA"}
_CPU, _CUDA, _CUDA_MANAGED = 1, 2, 13


# --------------------------------------------------------------------------------------------
# entering


class _Call:
    """What one DLPack call needs to send results back: the library, the input, its device."""

    __slots__ = ("lib", "x", "dev_type", "dev_id", "stream", "widened")

    def __init__(self, lib, x, dev_type, dev_id):
        self.lib = lib
        self.x = x
        self.dev_type = dev_type
        self.dev_id = dev_id
        self.stream = None        # a cupy.cuda.ExternalStream for torch CUDA input
        self.widened = False      # bf16 host input widened to float32 (no ml_dtypes)

    @property
    def cuda(self):
        return self.dev_type != _CPU


def _type_name(x) -> str:
    t = type(x)
    mod = t.__module__.partition(".")[0]
    return f"{mod}.{t.__name__}" if mod not in ("builtins",) else t.__name__


def _torch_plain(t, argname, opname):
    """A torch tensor DLPack can export: no autograd graph (detach: a view), conj/neg bits
    resolved (those lazy views have no memory of their own to share)."""
    if t.requires_grad:
        t = t.detach()
    if t.is_conj():
        t = t.resolve_conj()
    if t.is_neg():
        t = t.resolve_neg()
    return t


def _is_torch_bf16(t):
    torch = sys.modules["torch"]
    return t.dtype == torch.bfloat16


def _import_cupy(x, argname, opname):
    try:
        import cupy
    except ImportError:
        from cupyops.core.devices import CUPY_INSTALL_HINT
        raise RuntimeError(f"{opname}: {argname} is a {_type_name(x)} in CUDA memory, which "
                           f"cupyops runs on its GPU through CuPy, and CuPy is not installed; "
                           f"{CUPY_INSTALL_HINT}") from None
    return cupy


def _dlpack_device(x, argname, opname):
    try:
        dev_type, dev_id = x.__dlpack_device__()
    except Exception as exc:
        raise TypeError(f"{opname}: {argname} ({_type_name(x)}) has __dlpack__ but its "
                        f"__dlpack_device__() failed: {exc}") from exc
    dev_type, dev_id = int(dev_type), int(dev_id)
    if dev_type not in (_CPU, _CUDA, _CUDA_MANAGED):
        name = DLPACK_DEVICES.get(dev_type, f"device type {dev_type}")
        raise ValueError(f"{opname}: {argname} is a {_type_name(x)} on DLPack device {name} "
                         f"(type {dev_type}, id {dev_id}); cupyops runs on CPU and CUDA memory "
                         f"only and makes no hidden transfers: move it to the CPU or a CUDA GPU "
                         f"yourself")
    return dev_type, dev_id


def _host_view(x, call, argname, opname):
    """A NumPy view of host memory x (bf16: ml_dtypes view of the bits, or float32 widening)."""
    lib = call.lib
    try:
        if lib == "torch" and _is_torch_bf16(x):
            bits = np.from_dlpack(x.view(sys.modules["torch"].uint16))
            return _bf16_from_bits(bits, call)
        if lib == "jax" and str(x.dtype) == "bfloat16":
            return np.asarray(x)   # jax's own view (ml_dtypes is a JAX dependency)
        return np.from_dlpack(x)
    except (TypeError, BufferError, RuntimeError) as exc:
        raise TypeError(f"{opname}: {argname} ({_type_name(x)}, dtype "
                        f"{getattr(x, 'dtype', '?')}) cannot be read through DLPack: {exc}") from exc


def _bf16_from_bits(bits, call):
    dt = _bf16.dtype()
    if dt is not None:
        return bits.view(dt)
    call.widened = True            # no NumPy bf16 dtype: exact float32 widening (a new array)
    return _bf16.widen(bits)


def _cuda_view(x, call, argname, opname, device):
    cupy = _import_cupy(x, argname, opname)
    if device is not None:
        kind, dev_id = parse_device_name(device)
        if kind != "cuda" or (dev_id is not None and dev_id != call.dev_id):
            raise ValueError(f"{opname}: device={device!r} was asked for a {_type_name(x)} on "
                             f"cuda:{call.dev_id}; cupyops makes no hidden transfers: move the "
                             f"array yourself or leave device=None")
    if call.lib == "torch":
        torch = sys.modules["torch"]
        s = torch.cuda.current_stream(x.device)
        call.stream = cupy.cuda.ExternalStream(int(s.cuda_stream), call.dev_id)
    with cupy.cuda.Device(call.dev_id), (call.stream or cupy.cuda.get_current_stream()):
        # cupy.from_dlpack hands the current stream to __dlpack__(stream=...)
        if call.lib == "torch" and _is_torch_bf16(x):
            dt = _bf16.dtype()
            if dt is None:
                raise TypeError(f"{opname}: {argname} is a torch.bfloat16 tensor on a GPU; "
                                f"bfloat16 on a GPU needs ml_dtypes (CuPy's bfloat16 dtype): "
                                f"pip install ml_dtypes")
            return cupy.from_dlpack(x.view(torch.uint16)).view(dt)
        return cupy.from_dlpack(x)


def _enter(x, call, argname, opname, device):
    if call.lib == "torch":
        x = _torch_plain(x, argname, opname)
    if call.cuda:
        return _cuda_view(x, call, argname, opname, device)
    return _host_view(x, call, argname, opname)


def _enter_out(out, call, opname):
    """out= of the input's library, viewed like the input (a tuple: each element)."""
    if out is None:
        return None
    if isinstance(out, tuple):
        return tuple(_enter_out(o, call, opname) for o in out)
    if call.lib == "jax":
        raise ValueError(f"{opname}: out= cannot be used with JAX arrays: they are immutable; "
                         f"leave out=None and use the result")
    if library_of(out) != call.lib:
        raise TypeError(f"{opname}: out must be a {_type_name(call.x)} like x, got "
                        f"{_type_name(out)}")
    if call.lib == "torch" and out.requires_grad:
        out = out.detach()   # written outside autograd, like torch's own out= of an index op
    dev = _dlpack_device(out, "out", opname)
    if dev != (call.dev_type, call.dev_id):
        raise ValueError(f"{opname}: out is on DLPack device {dev}, x on "
                         f"{(call.dev_type, call.dev_id)}; they must be on the same device")
    sub = _Call(call.lib, out, call.dev_type, call.dev_id)
    sub.stream = call.stream
    if call.widened and call.lib == "torch" and _is_torch_bf16(out):
        return _BitsOut(out)
    v = _enter(out, sub, "out", opname, None)
    if sub.widened:               # bf16 out of a non-bf16 call: the usual dtype error
        raise TypeError(f"{opname}: out has dtype {out.dtype}, which is not the result's dtype")
    if not call.cuda and not v.flags.writeable:
        raise ValueError(f"{opname}: out ({_type_name(out)}) is exported read-only through "
                         f"DLPack, so cupyops cannot write it")
    return v


class _BitsOut:
    """A torch bf16 out= of a call whose host input was widened (no ml_dtypes): the call writes a
    float32 result, then its bf16 bits go into the tensor."""

    def __init__(self, t):
        self.t = t


# --------------------------------------------------------------------------------------------
# leaving


def _leave(res, call):
    if isinstance(res, tuple):
        return tuple(_leave(r, call) for r in res)
    lib = call.lib
    bf16 = res.dtype.kind == "V"   # ml_dtypes' bfloat16 (hardmax of bf16)
    if lib == "torch":
        torch = sys.modules["torch"]
        if call.cuda:
            with call.stream or _nullctx():
                return _torch_from(res.view(np.uint16) if bf16 else res, torch, bf16)
        if call.widened and res.dtype == np.float32 and _is_torch_bf16(call.x):
            return torch.from_dlpack(_bf16.narrow_bits(res)).view(torch.bfloat16)
        return _torch_from(res.view(np.uint16) if bf16 else res, torch, bf16)
    if lib == "array_api_strict":
        xps = sys.modules["array_api_strict"]
        return xps.asarray(res, device=call.x.device)
    if lib == "jax":
        import jax
        if call.cuda:
            return jax.dlpack.from_dlpack(res)
        return jax.device_put(res, next(iter(call.x.devices())))
    # another DLPack library: its own from_dlpack through array-api-compat, if it has one
    try:
        import array_api_compat
        xp = array_api_compat.array_namespace(call.x)
        return xp.from_dlpack(res)
    except Exception:
        return res


def _torch_from(res, torch, bf16):
    t = torch.from_dlpack(res)
    return t.view(torch.bfloat16) if bf16 else t


class _nullctx:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def _leave_out(res, out_orig, out_view, call):
    """The caller's out object(s), once the call has written the views."""
    if isinstance(out_orig, tuple):
        return tuple(_leave_out(r, o, v, call) for r, o, v in zip(res, out_orig, out_view))
    if isinstance(out_view, _BitsOut):
        torch = sys.modules["torch"]
        bits = out_view.t.detach().view(torch.uint16)
        np.from_dlpack(bits)[...] = _bf16.narrow_bits(res)
    return out_orig


# --------------------------------------------------------------------------------------------
# the call


def call(fn, lib, x, kw):
    """``fn(x, **kw)`` for an ``x`` of library ``lib`` (cupyops.core.arrays.library_of):
    the call runs on NumPy or CuPy views of x (and of out=), results come back as lib's."""
    opname = fn.__name__
    dev_type, dev_id = _dlpack_device(x, "x", opname)
    dl = _Call(lib, x, dev_type, dev_id)
    device = kw.get("device")
    xin = _enter(x, dl, "x", opname, device)
    out = kw.get("out")
    out_view = _enter_out(out, dl, opname)
    if out is not None:
        kw = dict(kw, out=None if _has_bits_out(out_view) else out_view)
    if dl.cuda:
        cupy = sys.modules["cupy"]
        with cupy.cuda.Device(dev_id), (dl.stream or _nullctx()):
            res = fn(xin, **kw)
    else:
        res = fn(xin, **kw)
    if out is not None:
        return _leave_out(res, out, out_view, dl)
    return _leave(res, dl)


def _has_bits_out(v):
    return isinstance(v, _BitsOut) or (isinstance(v, tuple) and any(map(_has_bits_out, v)))
