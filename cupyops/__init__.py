"""cupyops: index-tracking reductions and nonzero compaction as raw CUDA kernels.

argmax / argmin / hardmax over any set of axes with a tie direction, and the nonzero family
(argwhere, nonzero, count_nonzero, nonzero_coordinates). NumPy inputs run on the CPU by default
(``device="cpu"``), CuPy inputs run the CUDA kernels on their GPU, and ``device="simt"`` runs the
same kernels on the CPU's emulation of CUDA. Importing cupyops imports no cupy and compiles
nothing.
"""
# _api's functions behind the adapter layer (_adapt): NumPy and CuPy pass straight through,
# other DLPack arrays (torch, JAX, array_api_strict) come back as their own type
from cupyops.interop.dlpack import (argmax, argmin, argwhere, count_nonzero, hardmax, nanargmax, nanargmin,
                     nonzero, nonzero_coordinates)
from cupyops.interop.namespace import array_namespace
from cupyops.core.workspace import Workspace

__version__ = "0.1.0"

__all__ = ["argmax", "argmin", "nanargmax", "nanargmin", "hardmax", "argwhere", "nonzero",
           "count_nonzero",
           "nonzero_coordinates", "array_namespace", "precompile", "available_devices", "Workspace"]


def precompile(families=None, dtypes=None, *, device=None):
    """Compile the kernel modules ahead of time (cold starts, CUDA-graph capture)."""
    from cupyops.core.precompile import precompile as _precompile
    return _precompile(families, dtypes, device=device)


def available_devices():
    """The devices this process can run on, as strings usable for ``device=``."""
    from cupyops.core.devices import available_devices as _available
    return _available()
