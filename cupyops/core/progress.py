"""A word on stderr when kernel compilation keeps the user waiting.

The first SIMT call of a process compiles its kernel module with g++ (0.5 to 2 s; the shared
object is cached on disk after that), the first CUDA call compiles with NVRTC, and
``precompile(device="simt")`` compiles every module (about 15 s). Nothing is printed when a
compile is quick. When one takes longer than :data:`THRESHOLD_S`:

* a call's first such compile prints one line when the threshold passes and one when it is done,
  once per process (later compiles stay silent: the user knows what the pause is);
* ``precompile`` prints one line for its whole batch and one when the batch is done.

``CUPYOPS_PROGRESS=0`` silences both. The compiles are seen through the module factories of
``cupyops.core.modules`` (:func:`install` wraps them once; a wrapped factory just times the call).
"""
from __future__ import annotations

import os
import sys
import threading
import time

THRESHOLD_S = 1.0

_lock = threading.Lock()
_announced = False     # a call's compile has been announced in this process
_batches = 0           # precompile batches running (their modules are announced as a batch)

_WHAT = {
    "simt": "compiling kernels for the CPU emulation of CUDA (device='simt') with the C++ "
            "compiler; first use only, cached on disk after that",
    "cuda": "compiling CUDA kernels with NVRTC; first use only, cached on disk after that",
}


def enabled() -> bool:
    return os.environ.get("CUPYOPS_PROGRESS", "1").strip().lower() not in ("0", "false", "no", "off")


class Notice:
    """Context manager: if the block still runs after ``after`` seconds, print ``message`` on
    ``stream`` (stderr); at its end, if that happened, print how long it took. ``fired`` tells
    whether it printed."""

    def __init__(self, message: str, after: float | None = None, stream=None):
        self.message = message
        self.after = THRESHOLD_S if after is None else after
        self.stream = stream
        self.fired = False
        self._timer = None
        self._t0 = 0.0
        self._guard = threading.Lock()

    def _write(self, text):
        stream = self.stream or sys.stderr
        try:
            stream.write(text + "\n")
            stream.flush()
        except Exception:   # a closed or odd stream: the notice is not worth an error
            pass

    def _fire(self):
        with self._guard:
            if self._timer is None:     # the block ended meanwhile
                return
            self.fired = True
            self._write(f"cupyops: {self.message} ...")

    def __enter__(self):
        self._t0 = time.perf_counter()
        if enabled():
            self._timer = threading.Timer(self.after, self._fire)
            self._timer.daemon = True
            self._timer.start()
        return self

    def __exit__(self, exc_type, exc, tb):
        with self._guard:
            timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
        if self.fired:
            took = time.perf_counter() - self._t0
            self._write(f"cupyops: {'done in' if exc_type is None else 'failed after'} {took:.1f} s")
        return False


def _wrap(backend_name: str, inner):
    def factory(source, options, name_expressions, device_id):
        global _announced
        if _announced or _batches:
            return inner(source, options, name_expressions, device_id)
        with Notice(_WHAT.get(backend_name, f"compiling kernels for {backend_name}")) as notice:
            mod = inner(source, options, name_expressions, device_id)
        if notice.fired:
            _announced = True
        return mod
    factory.cupyops_progress_inner = inner
    return factory


def install() -> None:
    """Wrap the SIMT and CUDA module factories (cheap when they already are: a dict lookup each;
    a factory put in later, e.g. by a test, is wrapped at the next call)."""
    global _factories
    factories = _factories
    if factories is None:
        from cupyops.core import modules as _modules
        factories = _factories = getattr(_modules, "_factories", None) or {}
    for name in ("simt", "cuda"):
        inner = factories.get(name)
        if inner is not None and not hasattr(inner, "cupyops_progress_inner"):
            with _lock:
                inner = factories.get(name)
                if inner is not None and not hasattr(inner, "cupyops_progress_inner"):
                    factories[name] = _wrap(name, inner)


_factories = None     # cupyops.core.modules._factories, once imported


class batch:
    """``with batch(n, backend):`` around precompile's work: one notice for all its modules."""

    def __init__(self, n_modules: int, backend_name: str, stream=None):
        where = "the CPU emulation of CUDA (device='simt')" if backend_name == "simt" else "CUDA"
        self.notice = Notice(f"precompile: compiling {n_modules} kernel modules for {where}",
                             stream=stream)

    def __enter__(self):
        global _batches
        install()
        with _lock:
            _batches += 1
        self.notice.__enter__()
        return self

    def __exit__(self, *exc):
        global _batches
        with _lock:
            _batches -= 1
        return self.notice.__exit__(*exc)
