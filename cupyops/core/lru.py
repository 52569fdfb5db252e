"""A small thread-safe LRU map for what is derived from a layout (plans, packed parameters).

Never for memory: scratch belongs to a Workspace or a stream's arena (cupyops.core.workspace),
because a captured CUDA graph keeps writing it after any cache would have dropped it.
"""
from __future__ import annotations

import threading
from collections import OrderedDict

__all__ = ["LRU"]


class LRU:
    """``get(key)`` / ``put(key, value)``, at most ``maxsize`` entries, least recently used out.

    Keys must hold everything the value depends on: a hit returns the value stored for an
    equal key, never for another layout. ``get`` takes no lock (it is on the hot path of every
    call): dict lookups and ``move_to_end`` are atomic under the GIL; ``put`` locks to keep
    the size bounded."""

    __slots__ = ("maxsize", "_d", "_lock")

    def __init__(self, maxsize: int = 4096):
        self.maxsize = int(maxsize)
        self._d: OrderedDict = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key):
        d = self._d
        value = d.get(key)
        if value is not None:
            try:
                d.move_to_end(key)
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

    def clear(self):
        with self._lock:
            self._d.clear()

    def __len__(self):
        return len(self._d)
