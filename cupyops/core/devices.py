"""What this process can run on: the NumPy path always, SIMT when a C++ compiler works, CUDA when
CuPy is installed and finds a GPU. Also the one wording of "this device is not available here"
that every entry point (the functions, ``precompile``, the benchmark) raises."""
from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

#: How to get CuPy: cupyops is not on a package index, so from the checkout, with a CUDA extra.
CUPY_INSTALL_HINT = ("install cupyops with the CuPy extra for your CUDA version, from the "
                     "checkout: pip install '.[cuda13]' (CUDA 13) or pip install '.[cuda12]' "
                     "(CUDA 12)")


@functools.lru_cache(maxsize=None)
def cuda_status():
    """(True, description) when a CUDA GPU is usable through CuPy, else (False, reason). The
    reason tells a missing CuPy (and which extra installs it) from a machine with no GPU
    ("no GPU found", then CuPy's own words) and from a GPU that CuPy cannot use."""
    try:
        import cupy
    except ImportError:
        return False, f"CuPy is not installed; {CUPY_INSTALL_HINT}"
    except Exception as exc:  # a broken install
        return False, (f"CuPy is installed but does not import ({type(exc).__name__}: "
                       f"{exc})".splitlines()[0][:300])
    try:
        n = cupy.cuda.runtime.getDeviceCount()
        if n == 0:
            return False, "no GPU found (CuPy finds 0 CUDA devices)"
        props = cupy.cuda.runtime.getDeviceProperties(0)
        name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
        return True, f"{n} device(s), cuda:0 = {name} (sm_{props['major']}{props['minor']})"
    except Exception as exc:
        said = f"{type(exc).__name__}: {exc}".splitlines()[0][:240]
        return False, _no_usable_gpu(said)


def _no_usable_gpu(said: str) -> str:
    """Why CuPy's runtime call failed, in the user's terms, CuPy's words ``said`` after it.
    Without an NVIDIA driver CuPy says "driver version is insufficient": there is no GPU."""
    if "cudaErrorNoDevice" in said or ("cudaErrorInsufficientDriver" in said
                                       and not _nvidia_driver_found()):
        return f"no GPU found (CuPy: {said})"
    if "cudaErrorInsufficientDriver" in said:
        return (f"CuPy is installed but the NVIDIA driver is too old for its CUDA runtime "
                f"(CuPy: {said})")
    return f"CuPy is installed but cannot use a CUDA GPU (CuPy: {said})"


def _nvidia_driver_found() -> bool:
    """Whether the NVIDIA driver's library loads (libcuda; nvcuda.dll on Windows)."""
    import ctypes
    try:
        ctypes.CDLL("nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1")
    except OSError:
        return False
    return True


def simt_compiler() -> str:
    """The C++ compiler the SIMT layer runs (cupyops.simt._build.compiler: $CUPYOPS_SIMT_CXX,
    else g++), without importing the SIMT layer."""
    return os.environ.get("CUPYOPS_SIMT_CXX", "g++")


_TRIVIAL_PROGRAM = "#include <cstddef>\nextern \"C\" int cupyops_probe(int x) { return x + 1; }\n"


@functools.lru_cache(maxsize=None)
def _compiler_works(cxx: str) -> tuple[bool, str]:
    """Compile and link a trivial C++17 shared object with ``cxx``, as the SIMT layer builds its
    modules. Once per process and compiler (cached)."""
    path = shutil.which(cxx)
    if path is None:
        return False, f"no C++ compiler: {cxx!r} is not on PATH (set CUPYOPS_SIMT_CXX, or install g++)"
    with tempfile.TemporaryDirectory(prefix="cupyops-cxx-probe-") as d:
        src = os.path.join(d, "probe.cpp")
        with open(src, "w") as fh:
            fh.write(_TRIVIAL_PROGRAM)
        cmd = [path, "-std=c++17", "-O0", "-fPIC", "-shared", src, "-o", os.path.join(d, "probe.so")]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        except (OSError, subprocess.SubprocessError) as exc:
            return False, f"the C++ compiler {path} does not run: {type(exc).__name__}: {exc}"[:300]
        if r.returncode != 0:
            first = next((ln for ln in (r.stderr + r.stdout).splitlines() if ln.strip()), "")
            return False, (f"the C++ compiler {path} cannot compile a trivial C++17 program "
                           f"(exit {r.returncode}): {first}")[:300]
    return True, f"CPU emulation of CUDA, compiled with {path}"


@functools.lru_cache(maxsize=None)
def _on_path(cxx: str) -> bool:
    return shutil.which(cxx) is not None


def simt_compiler_found() -> bool:
    """Quick check for the calls (no compile): the SIMT compiler is on PATH. A compiler that is
    there but broken shows in the first compile's error, with its log."""
    return _on_path(simt_compiler())


def simt_status():
    """(True, description) when the SIMT layer's C++ compiler compiles a trivial program, else
    (False, reason). The check runs once per process and compiler."""
    return _compiler_works(simt_compiler())


def available_devices():
    devices = ["cpu"]
    if simt_status()[0]:
        devices.append("simt")
    if cuda_status()[0]:
        devices.append("cuda")
    return devices


def require(kind: str, asked: str) -> None:
    """Raise ``RuntimeError`` when device ``kind`` ("cuda" or "simt") cannot run here. ``asked``
    says who asked for it, as the user wrote it: ``"device='cuda'"`` or
    ``"CUPYOPS_DEVICE='cuda'"``; the message names it and says what to do."""
    ok, why = cuda_status() if kind == "cuda" else simt_status()
    if ok:
        return
    if asked.startswith("CUPYOPS_DEVICE"):
        instead = ("unset CUPYOPS_DEVICE (the NumPy path) or set it to 'cpu' or 'simt'"
                   if kind == "cuda" else "unset CUPYOPS_DEVICE (the NumPy path) or set it to 'cpu'")
    else:
        instead = ("use device='cpu' (NumPy) or device='simt' (the CUDA kernels on the CPU)"
                   if kind == "cuda" else "use device='cpu' (NumPy)")
    what = "a CUDA GPU through CuPy" if kind == "cuda" else "the CPU emulation of CUDA"
    raise RuntimeError(f"{asked} asks for {what}, which is not available here: {why}. "
                       f"To run without it, {instead}.")


# --------------------------------------------------------------------------- device names

DEVICES = ("cpu", "cuda", "simt")


def parse_device_name(device, argname="device"):
    """``(kind, device id or None)`` from "cpu", "cuda", "cuda:N", "simt" (any case, spaces
    around), an int N (the GPU N, as torch takes it) or a ``cupy.cuda.Device``: the one parser
    of every entry point (the public functions, precompile, the command line, Dask)."""
    cupy = sys.modules.get("cupy")
    if cupy is not None and isinstance(device, cupy.cuda.Device):
        return "cuda", int(device.id)
    if isinstance(device, (int, np.integer)) and not isinstance(device, (bool, np.bool_)):
        if device < 0:
            raise ValueError(f"{argname} must be a GPU number >= 0, got {device}")
        return "cuda", int(device)
    if not isinstance(device, str):
        raise TypeError(f"{argname} must be None, one of {DEVICES}, 'cuda:N', a GPU number or a "
                        f"cupy.cuda.Device, got {device!r}")
    name = device.strip().lower()
    if name in DEVICES:
        return name, None
    if name.startswith("cuda:") and name[5:].isdigit():
        return "cuda", int(name[5:])
    raise ValueError(f"{argname} must be None, one of {DEVICES}, 'cuda:N', a GPU number or a "
                     f"cupy.cuda.Device, got {device!r}")


def default_device() -> str:
    env = os.environ.get("CUPYOPS_DEVICE")
    if env is None or env.strip() == "":
        return "cpu"
    kind, _ = parse_device_name(env, "CUPYOPS_DEVICE")
    return env


def resolve_device(device):
    """``(kind, device id or None, asked)`` for a ``device=`` argument: ``None`` takes
    ``$CUPYOPS_DEVICE``, else "cpu". ``asked`` names where the choice came from, as the user
    wrote it (``device='cuda'`` or ``CUPYOPS_DEVICE='cuda'``), for error messages."""
    if device is None:
        name = default_device()
        kind, dev_id = parse_device_name(name, "CUPYOPS_DEVICE")
        asked = f"CUPYOPS_DEVICE={os.environ.get('CUPYOPS_DEVICE')!r}"
        return kind, dev_id, asked
    kind, dev_id = parse_device_name(device)
    return kind, dev_id, f"device={device!r}"
