"""Which array module an input belongs to, and where a call runs.

Detection follows array-api-compat: look the input's type up in ``sys.modules`` so that
``import cupyops`` and every NumPy call stay free of a cupy import.
"""
from __future__ import annotations

import os
import sys

import contextlib
import contextvars
import functools

import numpy as np

from cupyops.core import trace as _trace
from cupyops.core.arrays import check_cupy_alignment, is_cupy_array
from cupyops.core.devices import (CUPY_INSTALL_HINT, parse_device_name, require,
                                  resolve_device, simt_compiler_found)



class Placement:
    """Where one call runs: ``kind`` is "cpu", "cuda" or "simt"; ``cupy_input`` tells whether the
    caller gave a CuPy array (results then stay CuPy arrays on its device); ``asked`` says who
    chose the device, as the user wrote it (``device='cuda'``, ``CUPYOPS_DEVICE='cuda'``)."""

    __slots__ = ("kind", "cupy_input", "device_id", "asked")

    def __init__(self, kind: str, cupy_input: bool, device_id: int | None, asked: str = ""):
        self.kind = kind
        self.cupy_input = cupy_input
        self.device_id = device_id
        self.asked = asked

    def __repr__(self):
        return f"Placement({self.kind!r}, cupy_input={self.cupy_input}, device_id={self.device_id})"


def place(x, device):
    """Convert ``x`` for the call and decide where it runs. Returns (array, Placement). Whether
    that device is available here is :func:`require_available`'s to say, after the argument
    rules (a bad argument gets its own error on any machine)."""
    if is_cupy_array(x):
        held = int(x.device.id)
        if device is not None:
            kind, dev_id = parse_device_name(device)
            if kind != "cuda" or (dev_id is not None and dev_id != held):
                raise ValueError(
                    f"device={device!r} was asked for a CuPy array on cuda:{held}; cupyops makes no "
                    "hidden transfers: move the array yourself or leave device=None")
        return x, Placement("cuda", True, held, "a CuPy array")
    if isinstance(x, np.ma.MaskedArray):
        raise TypeError("masked arrays are not supported: their mask has no meaning here; "
                        "pass x.filled(...) or x.data")
    if type(x) is not np.ndarray:
        # Lists, scalars, buffers, objects with __array__ / __array_interface__, and ndarray
        # subclasses (np.matrix, np.memmap, user subclasses) become a plain ndarray: a view, no
        # copy, for a subclass. A subclass's own methods (np.matrix.argmax keeps 2-D) then
        # never reach the NumPy path, and results are plain ndarrays.
        x = as_array(x)
    kind, dev_id, asked = resolve_device(device)
    return x, Placement(kind, False, dev_id, asked)


def as_array(x) -> np.ndarray:
    """``np.asarray(x)``, with errors that say what ``x`` was (the public function's name is
    put in front by cupyops._call)."""
    if x is None:
        raise TypeError("x is None; expected an array (NumPy, CuPy, a DLPack array such as a "
                        "torch tensor) or a nested sequence of numbers")
    try:
        return np.asarray(x)
    except (ValueError, TypeError) as exc:
        what = f"x (a {type(x).__module__}.{type(x).__qualname__})".replace("builtins.", "")
        if "inhomogeneous" in str(exc):
            raise ValueError(f"{what} is ragged: its nested sequences differ in length, so it "
                             f"makes no array (NumPy: {exc})") from exc
        cls = TypeError if isinstance(exc, TypeError) else ValueError
        raise cls(f"{what} cannot be made an array (NumPy: {exc})") from exc


def require_available(placement) -> None:
    """``RuntimeError`` when the placement's device cannot run here (no CuPy or GPU; no C++
    compiler for simt), naming who asked for it."""
    kind = placement.kind
    if kind == "cpu":
        return
    if kind == "cuda" and not placement.cupy_input:
        require("cuda", placement.asked)
    elif kind == "simt" and not simt_compiler_found():
        require("simt", placement.asked)



# Tests set this (cupyops.testing.force_64bit) to run the kernels' 64-bit indexing on small inputs.
force_64bit: contextvars.ContextVar[bool] = contextvars.ContextVar("cupyops_force_64bit", default=False)


# --------------------------------------------------------------------------- kernel paths

def cuda_device(placement):
    """The CuPy device of a "cuda" placement: the one named, else CuPy's current device."""
    cupy = import_cupy()
    if placement.device_id is None:
        return cupy.cuda.Device()
    return cupy.cuda.Device(placement.device_id)


def to_kernel_input(x, placement, opname=""):
    """The array the kernel path reads: native byte order; NumPy input for device='cuda' goes to
    the GPU. Only a non-native or unaligned NumPy array is copied (a GPU cannot read either)."""
    if placement.cupy_input:
        check_cupy_alignment(x, "x", opname)
        return x
    if not x.dtype.isnative or not x.flags.aligned:
        x = x.astype(x.dtype.newbyteorder("="), copy=True)
    if placement.kind == "cuda":
        cupy = import_cupy()
        with cuda_device(placement):
            if x.ndim == 0:     # CuPy 14.2's asarray of a 0-d array drops -0.0's sign (H200 run)
                return cupy.asarray(x.reshape(1)).reshape(())
            return cupy.asarray(x)
    view = x.view()
    view.flags.writeable = False  # SIMT then reports any kernel write to the input
    return view


def import_cupy():
    try:
        import cupy
    except ImportError as exc:  # pragma: no cover - depends on the machine
        raise RuntimeError(f"device='cuda' needs CuPy: {CUPY_INSTALL_HINT}") from exc
    return cupy


def from_kernel_result(res, placement):
    if placement.kind == "cuda" and not placement.cupy_input:
        if isinstance(res, tuple):
            return tuple(r.get() for r in res)
        return res.get()
    return res


def memory_bytes(placement) -> int | None:
    """The memory a result of the placement must fit in, in bytes: the GPU's (and, for NumPy
    input, the host's too: the result comes back) for "cuda", the host's physical memory
    otherwise; None where the system does not say."""
    host = _host_memory()
    if placement.kind != "cuda":
        return host
    device_id = placement.device_id
    if device_id is None:
        device_id = import_cupy().cuda.runtime.getDevice()
    gpu = _gpu_memory(device_id)
    return gpu if placement.cupy_input or host is None else min(gpu, host)


@functools.lru_cache(maxsize=1)
def _host_memory() -> int | None:
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):  # pragma: no cover - another OS
        return None


@functools.lru_cache(maxsize=None)
def _gpu_memory(device_id: int) -> int:
    return int(import_cupy().cuda.runtime.getDeviceProperties(device_id)["totalGlobalMem"])


def device_context(placement):
    if placement.kind == "cuda":
        return cuda_device(placement)
    return contextlib.nullcontext()


def deliver(res, out):
    """Copy a result into out when the implementation did not write it there."""
    if out is None or res is out:
        return res
    out[...] = res
    return out


def kernel_out(out, placement):
    """The out the kernel implementation may write directly: a C-contiguous array on the same
    device. Anything else is filled afterwards by one copy."""
    if out is None or (placement.kind == "cuda" and not placement.cupy_input):
        return None
    return out if out.flags.c_contiguous and element_aligned(out) else None


def element_aligned(out) -> bool:
    """A NumPy out need not be element-aligned (np.ndarray(buffer, offset=4)), and a kernel's
    store there would fault on a GPU (and is reported by simt): such outs take the copy path.
    CuPy outs were checked by _check_out (CuPy's flags have no ``aligned``)."""
    return not isinstance(out, np.ndarray) or out.flags.aligned


def array_module(placement):
    if placement.cupy_input:
        return sys.modules["cupy"]
    return np


def deliver_all(results, outs):
    """``deliver`` for a tuple of results."""
    if outs is None:
        return results
    return tuple(deliver(r, o) for r, o in zip(results, outs))


# --------------------------------------------------------------------------- reusable runners

def entry_prep(placement, x, kx):
    """``(True, prep)`` where the kernel-path runner of a call on ``x`` can serve later calls
    on arrays laid out like it: ``prep(x)`` gives the array the kernels read (None: x itself,
    as for CuPy input; :func:`read_only_view` for NumPy input on simt). ``kx`` is what the
    call passed the kernels. ``(False, None)`` for NumPy input on "cuda" (host-to-device and
    back each call) and inputs the call copied (byte order, alignment)."""
    if placement.kind == "cuda" and not placement.cupy_input:
        return False, None
    if placement.cupy_input:
        return kx is x, None
    if not (kx.base is x or kx.base is x.base) or kx.dtype != x.dtype:
        return False, None
    return True, read_only_view


def kernel_entry(placement, x, kx, run, *, reshape=None):
    """``entry(x, workspace)`` running ``run(kx, workspace)`` on later arrays laid out like
    ``x``, or None where :func:`entry_prep` says no."""
    ok, prep = entry_prep(placement, x, kx)
    if not ok:
        return None
    # (a partial, not a closure: fewer objects per cached entry for the garbage collector)
    return functools.partial(_kernel_entry_call, run, prep, reshape)


def class_entry(runner_for):
    """The class entry of a layout class (cupyops._call: the first call of a new layout of a
    C-contiguous input whose every other key part was seen), the one mechanism of every
    family: ``first(x, workspace, keep) -> (result, entry)``. ``runner_for(x, force_64bit)``
    plans the new shape and gives its runner, ``entry(x, workspace)`` (the entry kept when
    ``keep``), or None where the shape is the full road's to judge (then ``first`` hands the
    call back: None). An input with a zero extent is always handed back (the rules' empty
    cases)."""
    def first(x, workspace, keep):
        if 0 in x.shape:
            return None
        runner = runner_for(x, force_64bit.get())
        if runner is None:
            return None
        return runner(x, workspace), (runner if keep else None)
    return first


def _kernel_entry_call(run, prep, reshape, x, workspace):
    res = run(x if prep is None else prep(x), workspace)
    return res if reshape is None else res.reshape(reshape)


_dry_run_state = _trace.dry_run_state


def read_only_view(x):
    """A read-only view of NumPy input: SIMT then reports any kernel write to it. In a dry run
    no kernel runs: the input itself (the cached call then costs what it does on a GPU, where
    CuPy input is passed as it is)."""
    if _dry_run_state.get() is not None:
        return x
    v = x.view()
    v.flags.writeable = False
    return v
