"""Which array module an input belongs to, and where a call runs.

Detection follows array-api-compat: look the input's type up in ``sys.modules`` so that
``import cupyops`` and every NumPy call stay free of a cupy import.
"""
from __future__ import annotations

import os
import sys

import numpy as np

from cupyops.core import progress as _progress

DEVICES = ("cpu", "cuda", "simt")


def is_cupy_array(x) -> bool:
    cupy = sys.modules.get("cupy")
    return cupy is not None and isinstance(x, cupy.ndarray)


class Placement:
    """Where one call runs: ``kind`` is "cpu", "cuda" or "simt"; ``cupy_input`` tells whether the
    caller gave a CuPy array (results then stay CuPy arrays on its device)."""

    __slots__ = ("kind", "cupy_input", "device_id")

    def __init__(self, kind: str, cupy_input: bool, device_id: int | None):
        self.kind = kind
        self.cupy_input = cupy_input
        self.device_id = device_id

    def __repr__(self):
        return f"Placement({self.kind!r}, cupy_input={self.cupy_input}, device_id={self.device_id})"


def _parse_device_name(device, argname="device"):
    """Return (kind, device_id or None) from "cpu", "cuda", "cuda:N", "simt" or a cupy Device."""
    cupy = sys.modules.get("cupy")
    if cupy is not None and isinstance(device, cupy.cuda.Device):
        return "cuda", int(device.id)
    if not isinstance(device, str):
        raise TypeError(f"{argname} must be None, one of {DEVICES} or 'cuda:N', got {device!r}")
    name = device.strip().lower()
    if name in DEVICES:
        return name, None
    if name.startswith("cuda:") and name[5:].isdigit():
        return "cuda", int(name[5:])
    raise ValueError(f"{argname} must be None, one of {DEVICES} or 'cuda:N', got {device!r}")


def default_device() -> str:
    env = os.environ.get("CUPYOPS_DEVICE")
    if env is None or env.strip() == "":
        return "cpu"
    kind, _ = _parse_device_name(env, "CUPYOPS_DEVICE")
    return env


def resolve_device(device):
    """``(kind, device id or None, asked)`` for a ``device=`` argument: ``None`` takes
    ``$CUPYOPS_DEVICE``, else "cpu". ``asked`` names where the choice came from, as the user
    wrote it (``device='cuda'`` or ``CUPYOPS_DEVICE='cuda'``), for error messages."""
    if device is None:
        name = default_device()
        kind, dev_id = _parse_device_name(name, "CUPYOPS_DEVICE")
        asked = f"CUPYOPS_DEVICE={os.environ.get('CUPYOPS_DEVICE')!r}"
        return kind, dev_id, asked
    kind, dev_id = _parse_device_name(device)
    return kind, dev_id, f"device={device!r}"


def place(x, device):
    """Convert ``x`` for the call and decide where it runs. Returns (array, Placement)."""
    if is_cupy_array(x):
        held = int(x.device.id)
        if device is not None:
            kind, dev_id = _parse_device_name(device)
            if kind != "cuda" or (dev_id is not None and dev_id != held):
                raise ValueError(
                    f"device={device!r} was asked for a CuPy array on cuda:{held}; cupyops makes no "
                    "hidden transfers: move the array yourself or leave device=None")
        _progress.install()
        return x, Placement("cuda", True, held)
    if isinstance(x, np.ma.MaskedArray):
        raise TypeError("masked arrays are not supported: their mask has no meaning here; "
                        "pass x.filled(...) or x.data")
    if type(x) is not np.ndarray:
        # Lists, scalars, buffers, objects with __array__ / __array_interface__, and ndarray
        # subclasses (np.matrix, np.memmap, user subclasses) become a plain ndarray: a view, no
        # copy, for a subclass. A subclass's own methods (np.matrix.argmax keeps 2-D) then
        # never reach the NumPy path, and results are plain ndarrays.
        x = np.asarray(x)
    kind, dev_id, asked = resolve_device(device)
    if kind == "cuda":
        from cupyops.core.devices import require
        require("cuda", asked)
    elif kind == "simt":
        from cupyops.core.devices import require, simt_compiler_found
        if not simt_compiler_found():
            require("simt", asked)
    if kind != "cpu":
        _progress.install()     # a word on stderr if the first compile keeps the user waiting
    return x, Placement(kind, False, dev_id)


# Tests set this (cupyops.testing.force_64bit) to run the kernels' 64-bit indexing on small inputs.
import contextvars  # noqa: E402

force_64bit: contextvars.ContextVar[bool] = contextvars.ContextVar("cupyops_force_64bit", default=False)
