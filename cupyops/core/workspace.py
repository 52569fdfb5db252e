"""Scratch memory for the kernel path that outlives every launch (safe under CUDA-graph capture).

A captured CUDA graph keeps the raw pointers of every buffer its kernels touched and writes
them again at each replay. Scratch (the tile counter and status words of the nonzero scan, the
per-chunk partials of split argmin/argmax) must therefore never go back to CuPy's pool when a
call returns. It lives in one of two places:

* a :class:`Workspace` the caller owns and passes as ``workspace=`` (fixed size, bound to one
  device and one stream: the capture recipe of docs/api.md), or
* the arena of the (backend, device, stream) the call runs on: grown on demand outside capture
  and never freed, so a later capture of the same call on the same stream reuses its memory.

Scratch comes in two kinds:

* ``carve(specs)``: memory every launch writes before it reads it (split partials, a count
  slot), carved from one growing buffer;
* ``state(kind, ...)``: memory the kernels keep *between* calls, zeroed once when it is made
  and never again by the host: tickets and counters that the kernel which last uses them in a
  launch resets (argreduce's decode tickets, count_nonzero's chunk sums, the all-NaN flag), and
  the nonzero look-back's counter and status words, which carry a per-launch epoch in device
  memory (kernels/nonzero.cu, NZ_HDR_DRAW). Each kind has buffers of its own, since a kind's
  state at rest is its kernels' affair. A steady call therefore makes no memset, and a captured
  graph's replays find the state as the kernels left it (all in stream order).

A launch that fails between its draws and its resets would leave state behind. On a GPU that
is a sticky error (the context, and every buffer of it, is gone: a new process starts from
fresh, zeroed state); a launch refused before it runs touches nothing. Still, the launch code
calls :meth:`_Holder.discard_state` on any exception, so the next call starts from a fresh
zeroed buffer (the simt backend can raise from inside a kernel). The old buffers stay alive.

Holding the holder's lock for the whole carve-and-launch section keeps two host threads that
share a stream from interleaving their launches over the same scratch. Two streams never share
a holder (a Workspace is bound to one stream, an arena is per stream); a graph replayed on
another stream while calls on its holder run is the caller's race (docs/api.md).
"""
from __future__ import annotations

import os
import threading
import weakref

import numpy as np

from cupyops.core import backend as _backend
from cupyops.core import devices as _devices

__all__ = ["Workspace", "holder_for", "arena_for", "check_workspace", "ALIGN"]

#: every carved array starts on this boundary (as CuPy's allocator does)
ALIGN = 256


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
        self._states: dict = {}            # kind -> the current zeroed state buffer
        self._old_states: list = []        # every state buffer replaced (graphs may use them)
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

    def state(self, kind: str, nbytes: int, derive):
        """``derive(buffer)`` of this holder's state buffer of ``kind`` (uint8, at least
        ``nbytes``, zeroed when made; see the module docstring), kept per buffer: a cached call
        costs one dict lookup. A larger need makes a new zeroed buffer (never during capture:
        run the call once before capturing it)."""
        key = (kind, nbytes, derive)
        hit = self._carved.get(key)
        cur = self._states.get(kind)
        if hit is not None and hit[0] is cur:
            return hit[1]
        if cur is None or cur.nbytes < nbytes:
            cur = self._new_state(kind, nbytes, cur)
        views = derive(cur)
        if len(self._carved) > 256:
            self._carved.clear()
        self._carved[key] = (cur, views)
        return views

    def _new_state(self, kind, nbytes, old):
        backend = self._backend
        if backend.stream_capturing():
            raise ValueError(
                f"the call needs {nbytes} bytes of {kind} state, more than this stream's "
                "scratch holds, during CUDA-graph capture, where nothing may be allocated: run "
                "the same call once before capture")
        size = max(int(nbytes), 2 * (old.nbytes if old is not None else 0), 4096)
        size = -(-size // 8) * 8                     # (viewed as 8-byte words by some kernels)
        buf = backend.zeros((size,), np.uint8)       # zeroed once, here (in stream order)
        if old is not None:
            self._old_states.append(old)
        self._states[kind] = buf
        return buf

    def discard_state(self, *kinds) -> None:
        """Forget the state buffers of ``kinds`` (a launch that used them failed): the next call
        gets fresh zeroed ones. The old buffers stay alive (a captured graph may use them)."""
        for kind in kinds:
            old = self._states.pop(kind, None)
            if old is not None:
                self._old_states.append(old)

    def _buffer(self, nbytes: int):
        raise NotImplementedError

    def _current(self):
        raise NotImplementedError


class Workspace(_Holder):
    """Caller-owned scratch for kernel-path calls, for CUDA-graph capture.

    ``Workspace(nbytes, device=None)`` allocates ``nbytes`` on ``device`` ("cuda" = CuPy's
    current device, "cuda:N", or "simt"; ``None``: ``CUPYOPS_DEVICE`` when it names one of
    those, else "cuda") and binds it to that device's current CuPy stream (and thread, for the
    per-thread default stream). Pass it as ``workspace=`` to argmin, argmax, hardmax or
    nonzero_coordinates. It is never reallocated: a call that needs more than ``nbytes``, or
    runs on another device or stream, is a ``ValueError``. The memory lives as long as the
    object (keep it alive as long as any graph that captured a call with it).

    The buffer is zeroed once, when it is made. Scratch that calls write before they read is
    carved from its start; state the kernels keep between calls (see the module docstring) is
    reserved from its end, a region per kind, in memory no call has written yet, so that it is
    zero without a memset (during capture too). A kind that needs more moves to a larger region
    below; the old one stays reserved (a captured graph may use it).
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
        self._buf = self._backend.zeros((max(nbytes, 1),), np.uint8)
        self._top = nbytes               # state regions lie in [_top, nbytes)
        self._dirty = 0                  # scratch carved so far lies in [0, _dirty)

    def check(self, backend, stream=None) -> None:
        """ValueError unless ``backend`` and its current stream (``stream``: its key, when the
        caller has it) are this workspace's."""
        if backend is not self._backend:
            raise ValueError(f"workspace: it was made for {self.device}, but this call runs on "
                             f"{backend.name}:{backend.device_id}; make one Workspace per device")
        if stream is None:
            stream = backend.stream_key()
        if stream != self.stream:
            raise ValueError(f"workspace: it is bound to stream {self.stream!r}, but the "
                             f"current stream is {stream!r}; make the Workspace with the stream "
                             f"you launch on current (one Workspace per stream and thread)")

    def _buffer(self, nbytes: int):
        if nbytes > self._top:
            self._too_small(nbytes + self.nbytes - self._top)
        self._dirty = max(self._dirty, nbytes)
        return self._buf

    def _new_state(self, kind, nbytes, old):
        size = max(512, 1 << (int(nbytes) - 1).bit_length())
        lo = (self._top - size) // ALIGN * ALIGN
        if lo < self._dirty:
            self._too_small(self._dirty + self.nbytes - self._top + size + ALIGN)
        self._top = lo
        region = self._buf[lo:lo + size]        # never written: zero
        self._states[kind] = region
        return region

    def _too_small(self, need):
        raise ValueError(f"workspace: this call needs {need} bytes of scratch, the "
                         f"workspace has {self.nbytes}; make it with Workspace({need}) "
                         f"or more (never reallocated, so a captured graph stays valid)")

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


def arena_for(backend, stream=None) -> _Arena:
    """The arena of ``backend``'s current stream (``stream``: its key, when the caller has
    it)."""
    arena = backend.only_arena
    if arena is not None:          # a backend with one stream (simt): its arena, kept on it
        return arena
    key = (backend.name, backend.device_id,
           backend.stream_key() if stream is None else stream)
    arena = _arenas.get(key)
    if arena is None:
        with _arenas_lock:
            arena = _arenas.get(key)
            if arena is None:
                arena = _arenas[key] = _Arena(backend, key[2])
                if getattr(backend, "one_stream", False):
                    backend.only_arena = arena
    return arena


def holder_for(backend, workspace=None, stream=None):
    """The scratch holder of one call: ``workspace`` (checked against the backend and its
    current stream), else the arena of that stream. ``stream``: the key of the current stream
    (``Backend.stream_key``), when the caller asked for it already. Hold the holder's ``lock``
    over the call's carve-and-launch section."""
    if workspace is not None:
        workspace.check(backend, stream)
        return workspace
    return arena_for(backend, stream)


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
