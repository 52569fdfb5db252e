"""Switches for tests: force the kernels' 64-bit indexing on small inputs."""
from __future__ import annotations

import contextlib

from ._dispatch import force_64bit as _force_64bit
from ._trace import recording  # noqa: F401  (re-exported: plans, launches, device-to-host reads)


@contextlib.contextmanager
def force_64bit(enabled: bool = True):
    """Make the kernel path plan 64-bit internal indexing even where 32 bits would do."""
    token = _force_64bit.set(bool(enabled))
    try:
        yield
    finally:
        _force_64bit.reset(token)
