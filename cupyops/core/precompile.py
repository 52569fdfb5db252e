"""Ahead-of-time compilation (exported as ``cupyops.precompile``).

Kernels are otherwise compiled on first use. ``precompile()`` builds (or loads from CuPy's
disk cache) every module of the chosen families and dtypes for one device and resolves every
kernel function, so that

* the first real call pays no NVRTC time (cold starts, benchmarks), and
* nothing is compiled or loaded while a CUDA graph is being captured.
"""
from __future__ import annotations

import concurrent.futures
import os

import numpy as np

from cupyops.core import backend as _backend
from cupyops.core import devices as _devices
from cupyops.core import modules as _modules
from cupyops.core import progress as _progress

__all__ = ["precompile"]


def _resolve_device(device):
    """-> (backend name, device id or None); None for "cpu". For an explicit ``device``, read
    by the one device parser of every entry point (cupyops.core.devices.parse_device_name):
    :func:`precompile` resolves ``device=None`` first, as every function does
    (``$CUPYOPS_DEVICE``, else "cpu")."""
    kind, dev_id = _devices.parse_device_name(device)
    if kind == "cpu":
        return None, None
    if kind == "simt":
        return "simt", 0
    return "cuda", dev_id


def precompile(families=None, dtypes=None, *, device=None, max_workers: int | None = None):
    """Compile every module of ``families`` (names; default: all registered, which importing
    cupyops does) for ``dtypes``
    (default: every dtype each family serves) on ``device``: ``None`` means what it means for
    every function (``$CUPYOPS_DEVICE``, else ``"cpu"``); ``"cuda"`` is CuPy's current device,
    ``"cuda:N"`` or ``N`` a given GPU, ``"simt"`` the CPU emulation, ``"cpu"`` nothing. Returns
    the ``(family, dtype)`` pairs made ready, in order. When compiling takes more than about a
    second, one line on stderr says so (``CUPYOPS_PROGRESS=0`` silences it).

    Raises ``RuntimeError`` when the device is not available here (no CuPy, no GPU, no working
    C++ compiler: the same message as the functions give), ``KeyError`` for an unknown family,
    ``TypeError`` for a dtype that none of the chosen families serves, and
    ``cupyops.core.modules.KernelCompileError`` (with the compiler log) if a module does not compile.
    """

    if device is None:
        kind, dev_id, asked = _devices.resolve_device(None)
        device = "cpu" if kind == "cpu" else kind if dev_id is None else f"{kind}:{dev_id}"
    else:
        asked = f"device={device!r}"
    backend_name, device_id = _resolve_device(device)
    if backend_name is None:
        return []
    if backend_name == "cuda" or not _devices.simt_compiler_found():
        _devices.require(backend_name, asked)     # the functions' message, naming `asked`
    registry = _modules.families()
    if isinstance(families, str):
        families = (families,)
    names = list(registry) if families is None else list(families)
    fams = [_modules.get_family(n) for n in names]
    if isinstance(dtypes, (str, np.dtype, type)):
        dtypes = (dtypes,)
    wanted = None if dtypes is None else [np.dtype(d) for d in dtypes]
    if wanted is not None:
        served = {d for f in fams for d in f.dtypes}
        unserved = [str(d) for d in wanted if d.newbyteorder("=") not in served]
        if unserved:
            raise TypeError(f"no chosen kernel family serves dtype {', '.join(unserved)}")

    work = []
    for fam in fams:
        for dt in fam.dtypes:
            if wanted is None or dt in {w.newbyteorder("=") for w in wanted}:
                work.append((fam, dt))
    if not work:
        return []

    backend = _backend.get_backend(backend_name, device_id)

    def build(item):
        fam, dt = item
        for expr in fam.expressions_for(dt):
            backend.kernel(fam.name, dt, expr)     # compiles the module once, loads each function
        return fam.name, dt

    # modules with the same source and name expressions (the nonzero family's bool, int8 and
    # uint8, ...) compile once: the first of each in parallel, then the others, which the
    # compilers' caches serve
    firsts, rest, seen = [], [], set()
    for fam, dt in work:
        same = (fam.name, fam.expressions_for(dt))
        (rest if same in seen else firsts).append((fam, dt))
        seen.add(same)
    if max_workers is None:
        max_workers = min(_usable_cores(), len(firsts))
    with _progress.batch(len(work), backend_name):
        if max_workers <= 1 or backend_name == "cuda" and _needs_serial_cuda():
            done = [build(item) for item in firsts]
        else:
            with concurrent.futures.ThreadPoolExecutor(max_workers=max_workers) as ex:
                done = list(ex.map(build, firsts))
        done += [build(item) for item in rest]
    order = {(f.name, d): i for i, (f, d) in enumerate(work)}
    return sorted(done, key=order.get)


def _usable_cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def _needs_serial_cuda() -> bool:
    # Threads compile with NVRTC in parallel; loading modules needs the device current in each
    # thread, which CuPy's Device context does per call. Kept as a hook for drivers that
    # misbehave: CUPYOPS_PRECOMPILE_SERIAL=1 forces one thread.
    return os.environ.get("CUPYOPS_PRECOMPILE_SERIAL", "") not in ("", "0")
