"""Execution tracing for tests and the benchmark.

Planning and launch code report here what they did (the plan chosen, each kernel launch,
each device-to-host read). Nothing is recorded unless a caller opened ``recording()``, so the
cost on the hot path is one context-variable lookup.
"""
from __future__ import annotations

import contextlib
import collections
import contextvars
import dataclasses


@dataclasses.dataclass
class Trace:
    plans: list = dataclasses.field(default_factory=list)
    launches: list = dataclasses.field(default_factory=list)   # (kernel name, grid, block, shared_mem)
    d2h_reads: int = 0
    keep_args: bool = False
    launch_args: list = dataclasses.field(default_factory=list)  # each launch's argument tuple


_current: contextvars.ContextVar[Trace | None] = contextvars.ContextVar("cupyops_trace", default=None)


@contextlib.contextmanager
def recording(*, args: bool = False):
    """Collect plans, launches and device-to-host reads made inside the block; with
    ``args=True`` also each launch's argument tuple, as the launch code passed it (tests: the
    CuPy marshalling check, scratch lifetimes)."""
    trace = Trace(keep_args=args)
    token = _current.set(trace)
    try:
        yield trace
    finally:
        _current.reset(token)


def record_plan(plan) -> None:
    trace = _current.get()
    if trace is not None:
        trace.plans.append(plan)


def record_launch(name: str, grid, block, shared_mem: int, args=()) -> None:
    trace = _current.get()
    if trace is not None:
        trace.launches.append((name, tuple(grid), tuple(block), int(shared_mem)))
        if trace.keep_args:
            trace.launch_args.append(tuple(args))


def record_d2h() -> None:
    trace = _current.get()
    if trace is not None:
        trace.d2h_reads += 1


# --------------------------------------------------------------------------- dry runs

#: launches a dry run keeps (the most recent)
DRY_RUN_KEEP = 64


@dataclasses.dataclass
class DryRun:
    """What ``cupyops.testing.dry_run`` recorded: each launch handed over instead of run."""
    count: int = 1
    # (expr, grid, block, smem, args) of the most recent launches: bounded, so a benchmark's
    # millions of calls do not keep every output and scratch view alive (which would also
    # make each allocation slower than in a real pipeline)
    launches: collections.deque = dataclasses.field(
        default_factory=lambda: collections.deque(maxlen=DRY_RUN_KEEP))
    d2h_reads: int = 0


#: the DryRun of the dry run in progress in this context, or None (read on the hot path)
dry_run_state: contextvars.ContextVar[DryRun | None] = contextvars.ContextVar(
    "cupyops_dry_run", default=None)


def dry_run_active() -> DryRun | None:
    return dry_run_state.get()


@contextlib.contextmanager
def dry_running(count: int = 1):
    rec = DryRun(count=int(count))
    token = dry_run_state.set(rec)
    try:
        yield rec
    finally:
        dry_run_state.reset(token)


# --------------------------------------------------------------------------- planner options

#: modules whose ``PLAN_OPTIONS`` dict tests fill to force a plan (an op's planner registers
#: itself); while any is set, no call has a key, so nothing planned that way is kept
PLANNER_OPTION_HOLDERS: list = []


def planner_options_set() -> bool:
    """Whether a test has set any planner's options (see :data:`PLANNER_OPTION_HOLDERS`)."""
    for holder in PLANNER_OPTION_HOLDERS:
        if holder.PLAN_OPTIONS:
            return True
    return False
