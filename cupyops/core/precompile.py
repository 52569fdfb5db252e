"""Ahead-of-time compilation (exported as ``cupyops.precompile``; from the shell:
``python -m cupyops precompile``).

Kernels are otherwise compiled on first use, one module per kernel (the registry's grouping,
:mod:`cupyops.core.modules`). ``precompile()`` builds (or loads from CuPy's disk cache) every
module of the chosen families and dtypes for one device, in threads over the usable cores, and
resolves every kernel function, so that

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

__all__ = ["precompile", "module_list", "compile_modules"]


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
    ``"cuda:N"`` or ``N`` a given GPU, ``"simt"`` the CPU emulation, ``"cpu"`` nothing. Each
    module (one a kernel, :mod:`cupyops.core.modules`) is built once, in ``max_workers``
    threads (default: the usable cores; ``CUPYOPS_PRECOMPILE_SERIAL=1`` forces one for CUDA).
    Returns the ``(family, dtype)`` pairs made ready, in order. When compiling takes more than
    about a second, one line on stderr says so, and on a terminal a counter follows the modules
    (``CUPYOPS_PROGRESS=0`` silences both).

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
    modules = module_list(work)
    if max_workers is None:
        max_workers = _usable_cores()
    if backend_name == "cuda" and _needs_serial_cuda():
        max_workers = 1
    with _progress.batch(len(modules), backend_name) as bar:
        compile_modules(backend_name, modules, backend.device_id, max_workers, bar.advance)
        for fam, dt in work:          # load each function (the modules are built)
            for expr in fam.expressions_for(dt):
                backend.kernel(fam.name, dt, expr)
    return [(fam.name, dt) for fam, dt in work]


def module_list(work) -> list:
    """``[(family name, name expressions), ...]``: every module of the ``(family, dtype)``
    pairs of ``work``, each once (dtypes whose kernels are one instantiation share modules)."""
    return list(dict.fromkeys((fam.name, group) for fam, dt in work
                              for group in fam.modules_for(dt)))


def compile_modules(backend_name: str, modules, device_id: int = 0, max_workers: int = 1,
                    done=None) -> None:
    """Build ``modules`` (:func:`module_list`) with :func:`cupyops.core.modules.compiled_module`
    in ``max_workers`` threads (NVRTC and the C++ compiler's subprocesses release the GIL);
    ``done(family, exprs)`` as each is ready. The first failure is raised once all have run."""
    def build(item):
        _modules.compiled_module(backend_name, item[0], item[1], device_id)
        return item

    workers = max(1, min(int(max_workers), len(modules)))
    if workers == 1:
        for item in modules:
            build(item)
            if done is not None:
                done(*item)
        return
    errors = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as ex:
        for fut in concurrent.futures.as_completed([ex.submit(build, m) for m in modules]):
            if fut.exception() is not None:
                errors.append(fut.exception())
            elif done is not None:
                done(*fut.result())
    if errors:
        raise errors[0]


def _usable_cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def _needs_serial_cuda() -> bool:
    # Threads compile with NVRTC in parallel; loading modules needs the device current in each
    # thread, which CuPy's Device context does per call. Kept as a hook for drivers that
    # misbehave: CUPYOPS_PRECOMPILE_SERIAL=1 forces one thread (a first call's modules too:
    # cupyops.core.modules.serial_cuda).
    return _modules.serial_cuda()
