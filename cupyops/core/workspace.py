"""Scratch memory for the kernel path that outlives every launch (safe under CUDA-graph capture).

A captured CUDA graph keeps the raw pointers of every buffer its kernels touched and writes
them again at each replay. Scratch (the tile counter and status words of the nonzero scan, the
per-chunk partials of split argmin/argmax) must therefore never go back to CuPy's pool when a
call returns. It lives in one of two places:

* a :class:`Workspace` the caller owns and passes as ``workspace=`` (fixed size, bound to one
  device and one stream: the capture recipe of docs/api.md), or
* the arena of the (backend, device, stream) the call runs on: grown on demand outside capture
  and never freed, so a later capture of the same call on the same stream reuses its memory.

Scratch that must start at zero is zeroed in-stream by the launch code on every call
(``Backend.zero_fill``), so replays start clean too. Holding the holder's lock for the whole
carve-and-launch section keeps two host threads that share a stream from interleaving their
launches over the same scratch.

Each holder also keeps :data:`ZEROED_WORDS` 4-byte words apart from that scratch
(:meth:`_Holder.zeroed`), zeroed once when made (a Workspace at construction, an arena on its
first use outside capture) and never carved: kernels that use them (tickets, flags) leave them
zero when they end, but for error codes that the host reads and clears
(``Backend.arm_flag``). So those kernels need no memset per call, and a replay of a captured
graph finds them as the capture did.
"""
from __future__ import annotations

import os
import threading
import weakref

import numpy as np

from cupyops.core import backend as _backend
from cupyops.core import devices as _devices

__all__ = ["Workspace", "holder_for", "arena_for", "check_workspace", "ALIGN", "ZEROED_WORDS"]

#: every carved array starts on this boundary (as CuPy's allocator does)
ALIGN = 256
#: uint32 words of each holder's zeroed region (16 KiB)
ZEROED_WORDS = 4096


def _layout(specs) -> tuple:
    """Byte offsets of ``specs`` ((shape, dtype), ...) packed at ALIGN, and the total."""
    offsets = []
    total = 0
    for shape, dtype in specs:
        total = -(-total // ALIGN) * ALIGN
        offsets.append(total)
        n = 1
        for d in shape:
            n *= int(d)
        total += max(n, 1) * (dtype if isinstance(dtype, np.dtype) else np.dtype(dtype)).itemsize
    return tuple(offsets), total


def _carve(buf, specs, offsets) -> list:
    if type(buf) is np.ndarray:
        # one constructor call a view: a third of slicing, viewing and reshaping
        return [np.ndarray(shape, dtype, buf, off) for (shape, dtype), off in zip(specs, offsets)]
    out = []
    for (shape, dtype), off in zip(specs, offsets):
        dt = np.dtype(dtype)
        n = 1
        for d in shape:
            n *= int(d)
        out.append(buf[off:off + n * dt.itemsize].view(dt).reshape(shape))
    return out


#: every Workspace and arena of the process, for the fork handler
_holders: weakref.WeakSet = weakref.WeakSet()


class _Holder:
    """Common part: a lock, and ``take(*specs)`` returning arrays carved from one buffer."""

    def __init__(self):
        #: held over a call's carve-and-launch section (see the module docstring); a new one
        #: in a forked child, whose parent's holder thread is gone
        self.lock = threading.RLock()
        self._carved: dict = {}
        _holders.add(self)

    def take(self, *specs) -> list:
        offsets, total = _layout(specs)
        buf = self._buffer(total)
        return _carve(buf, specs, offsets)

    def carve(self, specs: tuple) -> list:
        """``take(*specs)`` for a hashable tuple of specs, the views kept per buffer (the same
        memory every time, without carving it again). ``specs`` may also be ``(specs, derive)``
        with a function of the carved arrays whose result is kept instead (views of them)."""
        hit = self._carved.get(specs)
        if hit is not None and hit[0] is self._current():
            return hit[1]
        if callable(specs[-1]):
            arrays = specs[-1](self.take(*specs[0]))
        else:
            arrays = self.take(*specs)
        if len(self._carved) > 256:
            self._carved.clear()
        self._carved[specs] = (self._current(), arrays)
        return arrays

    def _buffer(self, nbytes: int):
        raise NotImplementedError

    def _current(self):
        raise NotImplementedError

    def zeroed(self):
        """The holder's :data:`ZEROED_WORDS` uint32 words that every kernel using them leaves
        zero (see the module docstring)."""
        return self._zeroed


class Workspace(_Holder):
    """Caller-owned scratch for kernel-path calls, for CUDA-graph capture.

    ``Workspace(nbytes, device=None)`` allocates ``nbytes`` on ``device`` ("cuda" = CuPy's
    current device, "cuda:N", or "simt"; ``None``: ``CUPYOPS_DEVICE`` when it names one of
    those, else "cuda") and binds it to that device's current CuPy stream (and thread, for the
    per-thread default stream). Pass it as ``workspace=`` to argmin, argmax, hardmax or
    nonzero_coordinates. It is never reallocated: a call that needs more than ``nbytes``, or
    runs on another device or stream, is a ``ValueError``. The memory lives as long as the
    object (keep it alive as long as any graph that captured a call with it).
    """

    def __init__(self, nbytes: int = 1 << 20, *, device=None):
        super().__init__()
        if isinstance(nbytes, (bool, np.bool_)) or not isinstance(nbytes, (int, np.integer)):
            raise TypeError(f"Workspace: nbytes must be an int, got {nbytes!r}")
        nbytes = int(nbytes)
        if nbytes < 0:
            raise ValueError(f"Workspace: nbytes must be non-negative, got {nbytes}")
        if device is None:
            env = _devices.default_device()
            device = env if _devices.parse_device_name(env)[0] != "cpu" else "cuda"
        kind, dev_id = _devices.parse_device_name(device)
        if kind == "cpu":
            raise ValueError("Workspace: device must be 'cuda', 'cuda:N' or 'simt' (the NumPy "
                             "path needs no scratch), got 'cpu'")
        _devices.require(kind, f"Workspace(device={device!r})")
        self._backend = _backend.get_backend(kind, dev_id)
        self.device = (f"cuda:{self._backend.device_id}" if kind == "cuda" else "simt")
        self.stream = self._backend.stream_key()
        self.nbytes = nbytes
        self._buf = self._backend.empty((max(nbytes, 1),), np.uint8)
        self._zeroed = self._backend.zeros((ZEROED_WORDS,), np.uint32)

    def check(self, backend) -> None:
        """ValueError unless ``backend`` and its current stream are this workspace's."""
        if backend is not self._backend:
            raise ValueError(f"workspace: it was made for {self.device}, but this call runs on "
                             f"{backend.name}:{backend.device_id}; make one Workspace per device")
        stream = backend.stream_key()
        if stream != self.stream:
            raise ValueError(f"workspace: it is bound to stream {self.stream!r}, but the "
                             f"current stream is {stream!r}; make the Workspace with the stream "
                             f"you launch on current (one Workspace per stream and thread)")

    def _buffer(self, nbytes: int):
        if nbytes > self.nbytes:
            raise ValueError(f"workspace: this call needs {nbytes} bytes of scratch, the "
                             f"workspace has {self.nbytes}; make it with Workspace({nbytes}) "
                             f"or more (never reallocated, so a captured graph stays valid)")
        return self._buf

    def _current(self):
        return self._buf

    def __repr__(self):
        return f"<cupyops.Workspace {self.nbytes} bytes on {self.device}, stream {self.stream!r}>"


class _Arena(_Holder):
    """Scratch of one (backend, device, stream) when the call has no workspace: grows outside
    capture, never frees (a graph captured earlier may still point at an older buffer)."""

    def __init__(self, backend, stream):
        super().__init__()
        self._backend = backend
        self._stream = stream
        self._buffers: list = []         # every buffer ever made; the last is the current one
        self._zeroed = None

    def zeroed(self):
        if self._zeroed is None:
            if self._backend.stream_capturing():
                raise ValueError(
                    "the call needs this stream's zeroed scratch words, which are made on the "
                    "stream's first such call, during CUDA-graph capture, where nothing may be "
                    "allocated: run the same call once before capture, or pass "
                    "workspace=cupyops.Workspace(...)")
            self._zeroed = self._backend.zeros((ZEROED_WORDS,), np.uint32)
        return self._zeroed

    def _current(self):
        return self._buffers[-1] if self._buffers else None

    def _buffer(self, nbytes: int):
        cur = self._buffers[-1] if self._buffers else None
        if cur is not None and cur.nbytes >= nbytes:
            return cur
        if self._backend.stream_capturing():
            raise ValueError(
                f"the call needs {nbytes} bytes of scratch, more than this stream's arena holds, "
                "during CUDA-graph capture, where nothing may be allocated: run the same call "
                "once before capture, or pass workspace=cupyops.Workspace(...)")
        size = max(nbytes, 2 * (cur.nbytes if cur is not None else 0), 4096)
        buf = self._backend.empty((size,), np.uint8)
        self._buffers.append(buf)
        return buf


_arenas: dict = {}
_arenas_lock = threading.Lock()


def _new_locks_in_child():
    global _arenas_lock
    _arenas_lock = threading.Lock()
    for holder in list(_holders):
        holder.lock = threading.RLock()


os.register_at_fork(after_in_child=_new_locks_in_child)


def arena_for(backend) -> _Arena:
    arena = backend.only_arena
    if arena is not None:          # a backend with one stream (simt): its arena, kept on it
        return arena
    key = (backend.name, backend.device_id, backend.stream_key())
    arena = _arenas.get(key)
    if arena is None:
        with _arenas_lock:
            arena = _arenas.get(key)
            if arena is None:
                arena = _arenas[key] = _Arena(backend, key[2])
                if getattr(backend, "one_stream", False):
                    backend.only_arena = arena
    return arena


def holder_for(backend, workspace=None):
    """The scratch holder of one call: ``workspace`` (checked against the backend and its
    current stream), else the arena of that stream. Hold its ``lock`` over the call's
    carve-and-launch section."""
    if workspace is not None:
        workspace.check(backend)
        return workspace
    return arena_for(backend)


def check_workspace(workspace, placement, opname):
    if workspace is None:
        return None
    if not isinstance(workspace, Workspace):
        raise TypeError(f"{opname}: workspace must be None or a cupyops.Workspace, got "
                        f"{type(workspace).__name__}")
    if placement.kind == "cpu":
        raise ValueError(f"{opname}: workspace= holds kernel scratch, but this call runs on the "
                         f"NumPy path (device='cpu'); leave it out or run on 'cuda' / 'simt'")
    return workspace
