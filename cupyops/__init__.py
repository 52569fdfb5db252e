"""cupyops: index-tracking reductions and nonzero compaction as raw CUDA kernels.

argmax / argmin / hardmax over any set of axes with a tie direction, and the nonzero family
(argwhere, nonzero, count_nonzero, nonzero_coordinates). NumPy inputs run on the CPU by default
(``device="cpu"``), CuPy inputs run the CUDA kernels on their GPU, and ``device="simt"`` runs the
same kernels on the CPU's emulation of CUDA. Importing cupyops imports no cupy and compiles
nothing.
"""
from cupyops._call import (PUBLIC, argmax, argmin, argwhere, count_nonzero, hardmax, nanargmax,
                           nanargmin, nonzero, nonzero_coordinates)
from cupyops.core.devices import available_devices
from cupyops.core.precompile import precompile
from cupyops.core.threads import get_num_threads, set_num_threads
from cupyops.core.workspace import Workspace
from cupyops.interop import namespace as _namespace

__version__ = "0.1.0"

__all__ = ["argmax", "argmin", "nanargmax", "nanargmin", "hardmax", "argwhere", "nonzero",
           "count_nonzero", "nonzero_coordinates", "array_namespace", "precompile",
           "available_devices", "Workspace", "set_num_threads", "get_num_threads"]


def array_namespace(*arrays, api_version=None):
    """The array-API namespace of ``arrays`` (NumPy, CuPy, torch, array_api_strict, ... as
    array-api-compat knows them) whose argmax, argmin, nonzero and count_nonzero (plus
    nanargmax, nanargmin, hardmax, argwhere, nonzero_coordinates) are cupyops'; every other
    name is the library's own. Arrays of different libraries are a ``TypeError``."""
    return _namespace.array_namespace(arrays, api_version, PUBLIC)
