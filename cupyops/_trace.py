"""Execution tracing for tests and the benchmark.

Planning and launch code report here what they did (the plan chosen, each kernel launch,
each device-to-host read). Nothing is recorded unless a caller opened ``recording()``, so the
cost on the hot path is one context-variable lookup.
"""
from __future__ import annotations

import contextlib
import contextvars
import dataclasses


@dataclasses.dataclass
class Trace:
    plans: list = dataclasses.field(default_factory=list)
    launches: list = dataclasses.field(default_factory=list)   # (kernel name, grid, block, shared_mem)
    d2h_reads: int = 0


_current: contextvars.ContextVar[Trace | None] = contextvars.ContextVar("cupyops_trace", default=None)


@contextlib.contextmanager
def recording():
    """Collect plans, launches and device-to-host reads made inside the block."""
    trace = Trace()
    token = _current.set(trace)
    try:
        yield trace
    finally:
        _current.reset(token)


def record_plan(plan) -> None:
    trace = _current.get()
    if trace is not None:
        trace.plans.append(plan)


def record_launch(name: str, grid, block, shared_mem: int) -> None:
    trace = _current.get()
    if trace is not None:
        trace.launches.append((name, tuple(grid), tuple(block), int(shared_mem)))


def record_d2h() -> None:
    trace = _current.get()
    if trace is not None:
        trace.d2h_reads += 1
