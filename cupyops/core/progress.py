"""A word on stderr when kernel compilation keeps the user waiting.

The first SIMT call of a process compiles its kernel module with g++ (0.5 to 2 s; the shared
object is cached on disk after that), the first CUDA call compiles with NVRTC, and
``precompile(device="simt")`` compiles every module (about 15 s). Nothing is printed when a
compile is quick. When one takes longer than :data:`THRESHOLD_S`:

* a call's first such compile prints one line when the threshold passes and one when it is done,
  once per process (later compiles stay silent: the user knows what the pause is);
* ``precompile`` prints one line for its whole batch and one when the batch is done; on a
  terminal, a counter of the modules done in between (rewritten in place).

``CUPYOPS_PROGRESS=0`` silences both. cupyops.core.modules runs each compile inside
:func:`compiling`, and the modules one call builds at once (``ensure_modules``, each in a
thread) inside one :func:`compiling` and :func:`grouped`: one notice for the group.
"""
from __future__ import annotations

import os
import sys
import threading
import time

THRESHOLD_S = 1.0

_lock = threading.Lock()
_announced = False     # a call's compile has been announced in this process
_batches = 0           # precompile batches and call groups running (announced as a whole)


def _reset_in_child():
    """After ``fork``: the batches other threads ran stay in the parent; a new lock."""
    global _lock, _batches
    _lock, _batches = threading.Lock(), 0


os.register_at_fork(after_in_child=_reset_in_child)

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

    def write(self, text):
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
            self.write(f"cupyops: {self.message} ...")

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
            self.write(f"cupyops: {'done in' if exc_type is None else 'failed after'} {took:.1f} s")
        return False


class _Compiling:
    """One module's compile: a :class:`Notice` unless a compile was announced before in this
    process or a precompile batch runs."""

    def __init__(self, backend_name: str):
        self.notice = None
        if not (_announced or _batches):
            self.notice = Notice(_WHAT.get(backend_name, f"compiling kernels for {backend_name}"))

    def __enter__(self):
        if self.notice is not None:
            self.notice.__enter__()
        return self

    def __exit__(self, *exc):
        global _announced
        if self.notice is None:
            return False
        self.notice.__exit__(*exc)
        if self.notice.fired:
            _announced = True
        return False


def compiling(backend_name: str) -> _Compiling:
    """``with compiling("simt"):`` around the compile of one kernel module."""
    return _Compiling(backend_name)


class grouped:
    """``with compiling(backend), grouped():`` around the modules one call builds at once, in
    threads (cupyops.core.modules.ensure_modules): their own compiles announce nothing, the
    group's :func:`compiling` speaks for them."""

    def __enter__(self):
        global _batches
        with _lock:
            _batches += 1
        return self

    def __exit__(self, *exc):
        global _batches
        with _lock:
            _batches -= 1
        return False


class batch:
    """``with batch(n, backend) as b:`` around precompile's work: one notice for all its modules;
    ``b.advance()`` as each module is ready (a counter, on a terminal, once the notice shows)."""

    def __init__(self, n_modules: int, backend_name: str, stream=None):
        where = "the CPU emulation of CUDA (device='simt')" if backend_name == "simt" else "CUDA"
        self.n = n_modules
        self.done = 0
        self.stream = stream
        self._counting = False
        self._lock = threading.Lock()
        self.notice = Notice(f"precompile: compiling {n_modules} kernel modules for {where}",
                             stream=stream)

    def _tty(self) -> bool:
        try:
            return bool((self.stream or sys.stderr).isatty())
        except Exception:   # a closed or odd stream
            return False

    def advance(self, *what) -> None:
        """One more module ready (``what`` is ignored: precompile passes the module)."""
        with self._lock:
            self.done += 1
            if not (self.notice.fired and self._tty()):
                return
            self._counting = True
            try:
                stream = self.stream or sys.stderr
                stream.write(f"\rcupyops: precompile: {self.done}/{self.n} modules")
                stream.flush()
            except Exception:   # the counter is not worth an error
                pass

    def __enter__(self):
        global _batches
        with _lock:
            _batches += 1
        self.notice.__enter__()
        return self

    def __exit__(self, *exc):
        global _batches
        with _lock:
            _batches -= 1
        if self._counting:
            self.notice.write("")           # end the counter's line
        return self.notice.__exit__(*exc)
