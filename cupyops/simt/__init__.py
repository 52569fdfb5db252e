"""cupyops.simt: run CUDA C++ kernels unchanged on the CPU with CUDA's execution model.

Each GPU thread is a fiber (own stack, assembly context switch); blocks, warps, barriers,
warp collectives, shared memory and atomics are emulated by a cooperative scheduler.  Kernel
sources are compiled with g++ against emulation headers (``include/``) and with
``-fsanitize=kernel-address`` so that every memory access is bounds-checked against the device
buffers passed to the launch.

    import cupyops.simt as simt
    mod = simt.RawModule(code=src, options=("-DFOO=1",), name_expressions=("k<float>",))
    fn = mod.get_function("k<float>")
    fn(grid, block, (x, y, np.int32(n)), shared_mem=0)
"""

from ._errors import (
    BarrierError, CompileError, DataRaceError, DeadlockError, LaunchConfigError, MisalignedAddressError,
    OutOfBoundsError, ReadOnlyWriteError, SimtError, StackOverflowError, UndefinedBehaviorError,
    WarpCollectiveError, WatchdogError,
)
from ._core import (
    Function, LaunchTraffic, RawKernel, RawModule, TrafficRecorder, context_switch_rate, get_schedule,
    get_checks, last_launch_stats, record_traffic, schedule, set_checks, set_schedule, set_watchdog,
)
from ._build import INCLUDE_DIR as include_dir

__all__ = [
    "RawModule", "RawKernel", "Function", "set_schedule", "get_schedule", "schedule", "record_traffic",
    "TrafficRecorder", "LaunchTraffic", "set_watchdog", "last_launch_stats", "context_switch_rate",
    "include_dir",
    "SimtError", "CompileError", "LaunchConfigError", "WarpCollectiveError", "BarrierError", "DeadlockError",
    "OutOfBoundsError", "ReadOnlyWriteError", "WatchdogError", "StackOverflowError",
    "DataRaceError", "MisalignedAddressError", "UndefinedBehaviorError", "set_checks", "get_checks",
]
