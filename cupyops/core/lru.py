"""The one LRU type: a small thread-safe map for what is derived from a layout (cached call
entries, layout classes).

Never for memory: scratch belongs to a Workspace or a stream's arena (cupyops.core.workspace),
because a captured CUDA graph keeps writing it after any cache would have dropped it.

Safe across ``fork``: a child gets a new lock in every LRU (``os.register_at_fork``), since
the thread that held the parent's lock (inside ``put``) does not exist in the child. The
contents stay: ``put`` changes them one atomic dict operation at a time, so the worst a fork
in the middle leaves is one entry over ``maxsize``, trimmed by the next ``put``.
"""
from __future__ import annotations

import os
import threading
import weakref
from collections import OrderedDict

__all__ = ["LRU"]

#: every LRU of the process, for the fork handler
_instances: weakref.WeakSet = weakref.WeakSet()


class LRU:
    """``get(key)`` / ``put(key, value)``, at most ``maxsize`` entries, least recently used out.

    Keys must hold everything the value depends on: a hit returns the value stored for an
    equal key, never for another layout. Reads take no lock (they are on the hot path of every
    call): dict lookups and ``move_to_end`` are atomic under the GIL; ``put`` locks to keep the
    size bounded.

    The hot path reads through two bound methods, without a Python frame of its own:
    ``peek(key)`` (the value or None, no reordering) and ``touch(key)`` (mark it recently used;
    ``KeyError`` when another thread evicted it in between, which leaves the value read
    valid). ``get`` is the two in one call."""

    __slots__ = ("maxsize", "peek", "touch", "_d", "_lock", "__weakref__")

    def __init__(self, maxsize: int = 4096):
        self.maxsize = int(maxsize)
        self._d: OrderedDict = OrderedDict()
        self._lock = threading.Lock()
        self.peek = self._d.get
        self.touch = self._d.move_to_end
        _instances.add(self)

    def get(self, key):
        value = self.peek(key)
        if value is not None:
            try:
                self.touch(key)
            except KeyError:       # evicted by another thread in between: still a valid value
                pass
        return value

    def put(self, key, value):
        with self._lock:
            self._d[key] = value
            self._d.move_to_end(key)
            while len(self._d) > self.maxsize:
                self._d.popitem(last=False)
        return value

    def after_fork_in_child(self):
        """A new lock (the fork handler's): the parent's holder is not in the child."""
        self._lock = threading.Lock()

    def clear(self):
        with self._lock:
            self._d.clear()

    def values(self) -> list:
        """The values, least recently used first (a copy)."""
        return list(self._d.values())

    def __len__(self):
        return len(self._d)

    def __contains__(self, key):
        return key in self._d


def _new_locks_in_child():
    for lru in list(_instances):
        lru.after_fork_in_child()


os.register_at_fork(after_in_child=_new_locks_in_child)
