"""The one LRU type: a small thread-safe map for what is derived from a layout (cached call
entries, layout classes).

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
    equal key, never for another layout. Reads take no lock (they are on the hot path of every
    call): dict lookups and ``move_to_end`` are atomic under the GIL; ``put`` locks to keep the
    size bounded.

    The hot path reads through two bound methods, without a Python frame of its own:
    ``peek(key)`` (the value or None, no reordering) and ``touch(key)`` (mark it recently used;
    ``KeyError`` when another thread evicted it in between, which leaves the value read
    valid). ``get`` is the two in one call."""

    __slots__ = ("maxsize", "peek", "touch", "_d", "_lock")

    def __init__(self, maxsize: int = 4096):
        self.maxsize = int(maxsize)
        self._d: OrderedDict = OrderedDict()
        self._lock = threading.Lock()
        self.peek = self._d.get
        self.touch = self._d.move_to_end

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
