"""What this process can run on: the NumPy path always, SIMT when a C++ compiler is present,
CUDA when CuPy is installed and finds a GPU."""
from __future__ import annotations

import functools
import shutil


@functools.lru_cache(maxsize=None)
def cuda_status():
    """(True, description) when a CUDA GPU is usable through CuPy, else (False, reason)."""
    try:
        import cupy
    except Exception as exc:  # ImportError, or a broken install
        return False, f"cupy not importable ({type(exc).__name__})"
    try:
        n = cupy.cuda.runtime.getDeviceCount()
        if n == 0:
            return False, "no CUDA device"
        props = cupy.cuda.runtime.getDeviceProperties(0)
        name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
        return True, f"{n} device(s), cuda:0 = {name} (sm_{props['major']}{props['minor']})"
    except Exception as exc:
        return False, f"CuPy found no usable GPU: {type(exc).__name__}: {exc}".splitlines()[0][:200]


def simt_status():
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        return False, "no C++ compiler (g++) on PATH"
    return True, f"CPU emulation of CUDA, compiled with {cxx}"


def available_devices():
    devices = ["cpu"]
    if simt_status()[0]:
        devices.append("simt")
    if cuda_status()[0]:
        devices.append("cuda")
    return devices
