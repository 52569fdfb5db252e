"""Switches for tests and host-cost measurements: force the kernels' 64-bit indexing on small
inputs; record plans and launches; dry runs of the kernel path."""
from __future__ import annotations

import contextlib

from cupyops.core.placement import force_64bit as _force_64bit
from cupyops.core.trace import dry_running
from cupyops.core.trace import recording  # plans, launches, device-to-host reads

__all__ = ["force_64bit", "dry_run", "recording"]


@contextlib.contextmanager
def force_64bit(enabled: bool = True):
    """Make the kernel path plan 64-bit internal indexing even where 32 bits would do."""
    token = _force_64bit.set(bool(enabled))
    try:
        yield
    finally:
        _force_64bit.reset(token)


@contextlib.contextmanager
def dry_run(count: int = 1):
    """Kernel-path calls inside the block (``device="simt"``; ``"cuda"`` and CuPy input on a
    GPU) validate, plan and pack exactly as usual, then hand each launch to the recorder this
    yields (``.launches``: ``(expr, grid, block, shared_mem, args)``) instead of running it.
    Nothing is compiled. Results have the right shape, dtype and type; their contents are
    unspecified. A device-to-host read of a count (argwhere, nonzero,
    ``nonzero_coordinates(size=None)``) returns ``count``, so both passes are planned."""
    with dry_running(count) as rec:
        yield rec
