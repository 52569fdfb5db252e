"""Exceptions raised by cupyops.simt."""

__all__ = [
    "SimtError", "CompileError", "LaunchConfigError", "WarpCollectiveError", "BarrierError",
    "DeadlockError", "OutOfBoundsError", "ReadOnlyWriteError", "WatchdogError", "StackOverflowError",
    "DataRaceError", "MisalignedAddressError", "UndefinedBehaviorError",
]


class SimtError(RuntimeError):
    """Base class of every error of the CPU emulation of CUDA.

    Launch errors carry ``kernel``, ``block`` and ``thread`` (tuples or None)."""

    def __init__(self, message, *, kernel=None, block=None, thread=None, **extra):
        super().__init__(message)
        self.kernel = kernel
        self.block = block
        self.thread = thread
        for k, v in extra.items():
            setattr(self, k, v)


class CompileError(SimtError):
    """g++ rejected the kernel source; ``log`` holds the full compiler output."""

    def __init__(self, message, log=""):
        super().__init__(message)
        self.log = log


class LaunchConfigError(SimtError, ValueError):
    """Bad grid/block/shared-memory configuration."""


class WarpCollectiveError(SimtError):
    """A warp collective whose mask lanes cannot all arrive (exited, diverged, mismatched)."""


class BarrierError(SimtError):
    """Threads of one block wait at different __syncthreads call sites."""


class DeadlockError(SimtError):
    """No thread of a block can make progress."""


class OutOfBoundsError(SimtError):
    """An access outside every allowed region (device buffers, shared memory, stack, static data).

    Attributes: ``address``, ``size``, ``is_write``, ``buffer`` (argument index of the nearest
    device buffer or None) and ``offset`` (address minus that buffer's start)."""


class ReadOnlyWriteError(OutOfBoundsError):
    """A write to a read-only device buffer (``a.flags.writeable`` is False)."""


class WatchdogError(SimtError):
    """A spin that never ends (spin-wait limit or wall-clock limit reached)."""


class StackOverflowError(SimtError):
    """A thread overflowed its fiber stack (set CUPYOPS_SIMT_STACK_KB for bigger stacks)."""


class DataRaceError(SimtError):
    """Two conflicting accesses (at least one a plain write, or a plain access against a volatile or
    atomic write) that no happens-before edge orders (PTX memory model): a missing __syncthreads,
    a flag published without __threadfence, a plain-load spin, a non-atomic read-modify-write by
    several threads, or a non-coherent (__ldg / const __restrict__) read of memory written during
    the kernel.  Attributes as OutOfBoundsError: ``address``, ``size``, ``is_write``."""


class MisalignedAddressError(SimtError):
    """A load or store whose address is not a multiple of its size ("misaligned address" on a
    GPU).  Attributes: ``address``, ``size``, ``is_write``, ``buffer``, ``offset``."""


class UndefinedBehaviorError(SimtError):
    """C++ undefined behaviour that a GPU defines differently: a shift by the operand width or more,
    an out-of-range float-to-integer conversion."""
