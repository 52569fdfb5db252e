"""RawModule / kernel launch / schedule / traffic recording for cupyops.simt."""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import os
import threading
from pathlib import Path

import numpy as np

from . import _build
from ._errors import (
    BarrierError, CompileError, DataRaceError, DeadlockError, LaunchConfigError, MisalignedAddressError,
    OutOfBoundsError, ReadOnlyWriteError, SimtError, StackOverflowError, UndefinedBehaviorError, WarpCollectiveError,
    WatchdogError,
)

_LOCK = threading.RLock()


def _new_lock_in_child():
    """After ``fork``: a new lock. A parent thread that held it (compiling, launching) is not in
    the child, and every launch sets up the runtime's state afresh."""
    global _LOCK
    _LOCK = threading.RLock()


os.register_at_fork(after_in_child=_new_lock_in_child)

MAX_THREADS_PER_BLOCK = 1024
DEFAULT_SHARED_LIMIT = 48 * 1024
MAX_SHARED_OPTIN = 227 * 1024

u64 = ctypes.c_uint64


class _LaunchDesc(ctypes.Structure):
    _fields_ = [
        ("entry", ctypes.c_void_p), ("args", ctypes.c_void_p),
        ("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3),
        ("dyn_shared", u64), ("module", ctypes.c_int),
        ("regions", ctypes.c_void_p), ("nregions", ctypes.c_int),
        ("mode", ctypes.c_int), ("seed", u64), ("record", ctypes.c_int),
        ("max_spins", u64), ("timeout_s", ctypes.c_double),
        ("checks", ctypes.c_int), ("mxcsr", ctypes.c_uint), ("stack_bytes", u64),
    ]


class _Stats(ctypes.Structure):
    _fields_ = [(n, u64) for n in (
        "switches", "rounds", "blocks", "threads", "spin_points", "req_load", "req_store", "sectors_load",
        "sectors_store", "uniq_load", "uniq_store", "uniq_total", "shared_accesses",
        "shared_wavefronts")] + [("seconds", ctypes.c_double), ("fp_traps", u64), ("nan_canonical", u64)]


class _Err(ctypes.Structure):
    _fields_ = [
        ("code", ctypes.c_int), ("has_thread", ctypes.c_int),
        ("block", ctypes.c_uint * 3), ("thread", ctypes.c_uint * 3),
        ("warp", ctypes.c_int), ("lane", ctypes.c_int),
        ("addr", u64), ("size", u64), ("is_write", ctypes.c_int), ("region_index", ctypes.c_int),
        ("pc", u64), ("pc_offset", u64),
        ("func", ctypes.c_char * 512), ("msg", ctypes.c_char * 8192),
        ("pc2", u64), ("pc2_offset", u64),
    ]


_ERROR_CLASSES = {
    1: OutOfBoundsError, 2: ReadOnlyWriteError, 3: WarpCollectiveError, 4: BarrierError, 5: DeadlockError,
    6: WatchdogError, 7: StackOverflowError, 8: SimtError, 9: SimtError, 10: LaunchConfigError, 11: SimtError,
    12: DataRaceError, 13: MisalignedAddressError, 14: UndefinedBehaviorError,
}

MAX_PARAM_BYTES = 32764
DEFAULT_STACK = int(os.environ.get("CUPYOPS_SIMT_STACK_KB", 64)) * 1024

# ---------------------------------------------------------------- checks
_checks = {
    "race": os.environ.get("CUPYOPS_SIMT_RACECHECK", "1") != "0",
    "align": os.environ.get("CUPYOPS_SIMT_ALIGNCHECK", "1") != "0",
    # -ftz=true flushes float32 subnormals (float64 kept): trapping MXCSR, float32 instructions
    # re-executed with FTZ/DAZ (CUPYOPS_SIMT_FTZ=0 turns it off)
    "ftz": os.environ.get("CUPYOPS_SIMT_FTZ", "1") != "0",
    # -ftz=true through MXCSR FTZ/DAZ for the whole launch: flushes float64 subnormals too (opt-in)
    "ftz_mxcsr": os.environ.get("CUPYOPS_SIMT_FTZ", "1") == "mxcsr",
    # NVRTC as a front end when installed (off by default: the g++ checks need no CUDA at all)
    "nvrtc": os.environ.get("CUPYOPS_SIMT_NVRTC", "0") == "1",
    # the canonical NaN 0x7fffffff from float32 arithmetic that makes a NaN (0/0, inf-inf):
    # trapping MXCSR, the result's NaN lanes rewritten (CUPYOPS_SIMT_NAN=0 turns it off)
    "nan": os.environ.get("CUPYOPS_SIMT_NAN", "1") != "0",
}

_MXCSR_DEFAULT = 0x1F80        # every exception masked, round to nearest


def set_checks(race: bool | None = None, align: bool | None = None, ftz_mxcsr: bool | None = None,
               nvrtc: bool | None = None, ftz: bool | None = None, nan: bool | None = None) -> dict:
    """Turn the happens-before checker (``race``) and the alignment check (``align``) on or off
    (both on by default); ``ftz``: under -ftz=true, flush float32 subnormals in arithmetic and
    compares as a GPU does (on by default; float64 is never flushed); ``ftz_mxcsr``: instead flush
    through MXCSR for the whole launch (float64 too, as before); ``nvrtc``: use NVRTC as a front end
    when it is installed (its compile errors become CompileError, its ``.maxntid`` a launch bound);
    ``nan``: float32 arithmetic that makes a NaN returns the canonical 0x7fffffff as a GPU's
    (on by default; each such instruction, and each ordered compare of a NaN, costs a trap).
    Returns the previous settings."""
    prev = dict(_checks)
    for k, v in (("race", race), ("align", align), ("ftz_mxcsr", ftz_mxcsr), ("nvrtc", nvrtc), ("ftz", ftz),
                 ("nan", nan)):
        if v is not None:
            _checks[k] = bool(v)
    return prev


def get_checks() -> dict:
    return dict(_checks)


def _launch_mxcsr(ftz: bool) -> int:
    """The fibers' MXCSR for a launch (0: the default, no trap): -ftz=true as the checks say,
    and the invalid-operation exception unmasked for the canonical NaN (simt_runtime.cpp)."""
    m = _MXCSR_DEFAULT
    if ftz and _checks["ftz_mxcsr"]:
        m |= 0x8040                     # FTZ + DAZ: float64 flushed too
    elif ftz and _checks["ftz"]:
        m &= ~0x0900                    # denormal-operand and underflow exceptions unmasked
    if _checks["nan"]:
        m &= ~0x0080                    # invalid-operation exception unmasked
    return 0 if m == _MXCSR_DEFAULT else m

# ---------------------------------------------------------------- runtime library
_runtime = None


def _rt():
    global _runtime
    if _runtime is None:
        with _LOCK:
            if _runtime is None:
                _, lib = _build.load_library(_build.build_runtime(), lambda: _build.build_runtime(force=True),
                                             symbol="simt_launch", mode=ctypes.RTLD_GLOBAL)
                lib.simt_launch.argtypes = [ctypes.POINTER(_LaunchDesc), ctypes.POINTER(_Err),
                                            ctypes.POINTER(_Stats)]
                lib.simt_launch.restype = ctypes.c_int
                lib.simt_register_module.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
                lib.simt_register_module.restype = ctypes.c_int
                lib.simt_module_static_shared.argtypes = [ctypes.c_int]
                lib.simt_module_static_shared.restype = ctypes.c_longlong
                lib.simt_symbol_name.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int]
                lib.simt_context_switch_benchmark.argtypes = [ctypes.c_longlong, ctypes.POINTER(ctypes.c_double)]
                _runtime = lib
    return _runtime


def context_switch_rate(n: int = 2_000_000) -> float:
    """Measured fiber context switches per second (each iteration switches twice)."""
    secs = ctypes.c_double()
    _rt().simt_context_switch_benchmark(n, ctypes.byref(secs))
    return 2 * n / secs.value


# ---------------------------------------------------------------- schedule
_schedule: "str | int" = "forward"


def _check_schedule(s):
    if isinstance(s, str):
        if s not in ("forward", "reverse"):
            raise ValueError(f"schedule must be 'forward', 'reverse' or an int seed, not {s!r}")
        return s
    if isinstance(s, (bool, np.bool_)) or not isinstance(s, (int, np.integer)):
        raise TypeError(f"schedule must be 'forward', 'reverse' or an int seed, not {s!r}")
    return int(s)


def set_schedule(s) -> None:
    """Process-wide schedule: "forward" (default), "reverse" or an int seed (shuffled threads and
    interleaved resident blocks)."""
    global _schedule
    _schedule = _check_schedule(s)


def get_schedule():
    return _schedule


@contextlib.contextmanager
def schedule(s):
    """``with schedule(seed): ...`` runs launches under that schedule, then restores the previous one."""
    prev = get_schedule()
    set_schedule(s)
    try:
        yield
    finally:
        set_schedule(prev)


# ---------------------------------------------------------------- watchdog
_watchdog = {
    "max_spins": int(os.environ.get("CUPYOPS_SIMT_MAX_SPINS", 1 << 22)),
    "timeout_s": float(os.environ.get("CUPYOPS_SIMT_TIMEOUT", 300.0)),
}


def set_watchdog(max_spins: int | None = None, timeout_s: float | None = None) -> dict:
    """Set the watchdog limits (spin-wait points without progress; wall-clock seconds per launch,
    0 disables).  Returns the previous settings."""
    prev = dict(_watchdog)
    if max_spins is not None:
        _watchdog["max_spins"] = int(max_spins)
    if timeout_s is not None:
        _watchdog["timeout_s"] = float(timeout_s)
    return prev


# ---------------------------------------------------------------- traffic
@dataclasses.dataclass
class LaunchTraffic:
    kernel: str
    grid: tuple
    block: tuple
    shared_mem: int
    requested_bytes_load: int
    requested_bytes_store: int
    sectors_load: int
    sectors_store: int
    sectors: int
    unique_sectors_load: int
    unique_sectors_store: int
    unique_sectors: int
    shared_accesses: int = 0       # warp-wide shared-memory instructions
    shared_wavefronts: int = 0     # their replays: per instruction the most distinct words of a bank

    def __getitem__(self, key):
        return getattr(self, key)

    def keys(self):
        return [f.name for f in dataclasses.fields(self)]

    def as_dict(self):
        return dataclasses.asdict(self)


class TrafficRecorder:
    """Collects one LaunchTraffic per launch inside ``with record_traffic() as rec``.

    ``sectors``: for every warp-wide access (accesses to device buffers grouped by warp, access
    site and per-lane occurrence number of that site), the number of distinct 32-byte sectors,
    summed.  ``unique_sectors``: distinct sectors touched by the launch.  Atomics count as one
    load and one store.  ``shared_accesses``: warp-wide shared-memory accesses (grouped the same
    way, atomics included); ``shared_wavefronts``: their replays, for each the largest number of
    distinct 4-byte words that one of the 32 banks serves (at least 1): ``shared_wavefronts /
    shared_accesses`` is the average bank-conflict degree."""

    def __init__(self):
        self.launches: list[LaunchTraffic] = []

    def total(self, field: str) -> int:
        return sum(getattr(x, field) for x in self.launches)


_recorders: list[TrafficRecorder] = []


@contextlib.contextmanager
def record_traffic():
    rec = TrafficRecorder()
    _recorders.append(rec)
    try:
        yield rec
    finally:
        _recorders.remove(rec)


_last_stats: dict = {}


def last_launch_stats() -> dict:
    """Counters of the last launch: context switches, scheduler rounds, blocks, threads, seconds..."""
    return dict(_last_stats)


# ---------------------------------------------------------------- launch helpers
def _dims(v, what):
    if isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)):
        t = (int(v),)
    elif isinstance(v, tuple) and 1 <= len(v) <= 3:
        t = tuple(v)
        for x in t:
            if not isinstance(x, (int, np.integer)) or isinstance(x, (bool, np.bool_)):
                raise LaunchConfigError(f"{what} must be an int or a tuple of 1-3 ints, got {v!r}")
        t = tuple(int(x) for x in t)
    else:
        raise LaunchConfigError(f"{what} must be an int or a tuple of 1-3 ints, got {v!r}")
    for x in t:
        if x <= 0:
            raise LaunchConfigError(f"{what} dimensions must be positive, got {v!r}")
    return t + (1,) * (3 - len(t))


def _extent(a: np.ndarray):
    if a.size == 0:
        return None
    lo = hi = 0
    for n, s in zip(a.shape, a.strides):
        if s < 0:
            lo += (n - 1) * s
        else:
            hi += (n - 1) * s
    return lo, hi + a.itemsize


def _describe_arg(a) -> str:
    if isinstance(a, np.ndarray):
        return f"{a.dtype} array of shape {a.shape}"
    return type(a).__name__


class Function:
    """A kernel of a RawModule: ``fn(grid, block, args, shared_mem=0)``."""

    def __init__(self, module: "RawModule", name: str, index: int):
        self._module = module
        self.name = name
        self.kernel_name = name
        # the compiled library this function lives in (a module may be rebuilt with more entries)
        self._lib, self._mid, self._path = module._lib, module._id, module._path
        self._static_shared = module._static_shared_of(index)
        self._entry = ctypes.cast(getattr(self._lib, f"__simt_entry_{index}"), ctypes.c_void_p).value
        sigfn = getattr(self._lib, f"__simt_sig_{index}")
        sigfn.restype = ctypes.c_int
        sigfn.argtypes = [ctypes.POINTER(u64), ctypes.c_int]
        buf = (u64 * 512)()
        n = sigfn(buf, 512)
        self._params = [(int(buf[2 * i]), bool(buf[2 * i + 1])) for i in range(n)]
        self._max_dyn = None
        if self._static_shared > DEFAULT_SHARED_LIMIT:
            raise CompileError(f"kernel {name!r} uses {self._static_shared} bytes of static __shared__ memory, more "
                               f"than the {DEFAULT_SHARED_LIMIT} bytes a kernel may declare statically (ptxas: "
                               f"\"uses too much shared data\"); use dynamic shared memory and opt in")
        total = 0
        for size, _ in self._params:
            al = min(16, size & -size) if size else 1
            total = (total + al - 1) // al * al + size
        if total > MAX_PARAM_BYTES:
            raise CompileError(f"kernel {name!r} has {total} bytes of parameters, more than the {MAX_PARAM_BYTES} "
                               f"bytes a kernel may take (NVRTC: \"too large\")")
        try:
            cr = _build.const_restrict_params(module.code, name)
        except Exception:  # pragma: no cover - a parse failure only loses the check
            cr = []
        self._const_restrict = cr if len(cr) == len(self._params) else [False] * len(self._params)
        self._stack = max(DEFAULT_STACK, (2 * _build.stack_need(self._path) + 32 * 1024 + 4095) // 4096 * 4096)
        self._maxntid = module._nvrtc_bounds.get(name, 0)
        # as CUDA's cuFuncGetAttribute: __launch_bounds__(N) caps the block (NVRTC's .maxntid too)
        bound = min(b for b in (MAX_THREADS_PER_BLOCK, module._launch_bound_of(index), self._maxntid) if b > 0)
        self.max_threads_per_block = bound
        self.num_regs = 0
        self.local_size_bytes = 0

    # CuPy-compatible attributes
    @property
    def shared_size_bytes(self) -> int:
        """Static __shared__ bytes: the kernel's own __shared__ variables plus those of the module
        that do not belong to any kernel body (device helpers, namespace scope)."""
        return self._static_shared

    @property
    def max_dynamic_shared_size_bytes(self) -> int:
        if self._max_dyn is None:
            return max(0, DEFAULT_SHARED_LIMIT - self.shared_size_bytes)
        return self._max_dyn

    @max_dynamic_shared_size_bytes.setter
    def max_dynamic_shared_size_bytes(self, v):
        v = int(v)
        if v < 0 or v + self.shared_size_bytes > MAX_SHARED_OPTIN:
            raise LaunchConfigError(
                f"max_dynamic_shared_size_bytes={v} plus {self.shared_size_bytes} bytes of static shared memory "
                f"exceeds the {MAX_SHARED_OPTIN} bytes per block of the device")
        self._max_dyn = v

    @property
    def attributes(self) -> dict:
        """CuPy-like function attributes."""
        return {
            "max_threads_per_block": self.max_threads_per_block, "shared_size_bytes": self.shared_size_bytes,
            "max_dynamic_shared_size_bytes": self.max_dynamic_shared_size_bytes, "num_regs": self.num_regs,
            "local_size_bytes": 0, "const_size_bytes": 0, "ptx_version": 0, "binary_version": 0,
        }

    @property
    def param_sizes(self):
        return [s for s, _ in self._params]

    def __repr__(self):
        return f"<cupyops.simt.Function {self.name!r}>"

    def _marshal(self, args):
        if not isinstance(args, (tuple, list)):
            raise TypeError(f"kernel {self.name!r}: args must be a tuple, got {type(args).__name__}")
        if len(args) != len(self._params):
            raise TypeError(f"kernel {self.name!r} takes {len(self._params)} arguments, got {len(args)}")
        n = len(args)
        slot = 0
        offs = []
        blobs = []
        regions = []
        for i, (a, (psize, pptr)) in enumerate(zip(args, self._params)):
            if isinstance(a, np.ndarray):
                if not pptr:
                    raise TypeError(f"kernel {self.name!r}: argument #{i} is an array but parameter #{i} is not a "
                                    f"pointer (sizeof {psize})")
                ptr = a.__array_interface__["data"][0]
                ext = _extent(a)
                if ext is not None:
                    nc = 2 if self._const_restrict[i] else 0
                    regions.append((ptr + ext[0], ptr + ext[1], (1 if a.flags.writeable else 0) | nc | (i << 8)))
                blob = int(ptr).to_bytes(8, "little")
            elif isinstance(a, np.generic):
                blob = a.tobytes()
                if pptr:
                    raise TypeError(f"kernel {self.name!r}: argument #{i} is a scalar ({a.dtype}) but parameter #{i} "
                                    f"is a pointer: pass an ndarray")
            else:
                raise TypeError(f"kernel {self.name!r}: argument #{i} has unsupported type {type(a).__name__}; "
                                f"pass a NumPy array or a NumPy scalar (e.g. np.int32(5))")
            if len(blob) != psize:
                raise TypeError(f"kernel {self.name!r}: argument #{i} ({_describe_arg(a)}) has {len(blob)} bytes "
                                f"but parameter #{i} has sizeof {psize}")
            offs.append(slot)
            blobs.append(blob)
            slot += (len(blob) + 15) // 16 * 16
        storage = ctypes.create_string_buffer(max(slot, 16) + 16)
        base = ctypes.addressof(storage)
        pad = (-base) % 16
        ptrs = (ctypes.c_void_p * max(n, 1))()
        for i, (o, b) in enumerate(zip(offs, blobs)):
            ctypes.memmove(base + pad + o, b, len(b))
            ptrs[i] = base + pad + o
        regs = (u64 * max(3 * len(regions), 3))()
        for k, (lo, hi, fl) in enumerate(regions):
            regs[3 * k], regs[3 * k + 1], regs[3 * k + 2] = lo, hi, fl
        return storage, ptrs, regs, len(regions), regions

    def __call__(self, grid, block, args, *, shared_mem=0, stream=None, enable_cooperative_groups=False):
        g = _dims(grid, "grid")
        b = _dims(block, "block")
        if b[0] > 1024 or b[1] > 1024 or b[2] > 64:
            raise LaunchConfigError(f"block {block!r} exceeds the per-dimension limits (1024, 1024, 64)")
        nthreads = b[0] * b[1] * b[2]
        if self._maxntid and nthreads > self._maxntid:
            raise LaunchConfigError(f"kernel {self.name!r}: block {block!r} has {nthreads} threads, more than its "
                                    f".maxntid {self._maxntid} (__launch_bounds__, from NVRTC's PTX)")
        if nthreads > MAX_THREADS_PER_BLOCK:
            raise LaunchConfigError(f"block {block!r} has {nthreads} threads; the limit is {MAX_THREADS_PER_BLOCK}")
        if g[0] > 2**31 - 1 or g[1] > 65535 or g[2] > 65535:
            raise LaunchConfigError(f"grid {grid!r} exceeds the limits (2**31-1, 65535, 65535)")
        if not isinstance(shared_mem, (int, np.integer)) or isinstance(shared_mem, bool) or shared_mem < 0:
            raise LaunchConfigError(f"shared_mem must be a non-negative int, got {shared_mem!r}")
        shared_mem = int(shared_mem)
        static = self.shared_size_bytes
        if shared_mem > self.max_dynamic_shared_size_bytes:
            if self._max_dyn is None:
                raise LaunchConfigError(
                    f"kernel {self.name!r}: {shared_mem} bytes of dynamic shared memory plus {static} static exceed "
                    f"the default limit of {DEFAULT_SHARED_LIMIT} bytes; opt in with "
                    f"fn.max_dynamic_shared_size_bytes (up to {MAX_SHARED_OPTIN})")
            raise LaunchConfigError(
                f"kernel {self.name!r}: {shared_mem} bytes of dynamic shared memory exceed "
                f"max_dynamic_shared_size_bytes={self._max_dyn}")
        storage, ptrs, regs, nreg, regions = self._marshal(args)
        sched = get_schedule()
        d = _LaunchDesc()
        d.entry = self._entry
        d.args = ctypes.addressof(ptrs)
        d.grid[:] = g
        d.block[:] = b
        d.dyn_shared = shared_mem
        d.module = self._mid
        d.regions = ctypes.addressof(regs)
        d.nregions = nreg
        if sched == "forward":
            d.mode, d.seed = 0, 0
        elif sched == "reverse":
            d.mode, d.seed = 1, 0
        else:
            d.mode, d.seed = 2, sched & 0xFFFFFFFFFFFFFFFF
        recording = bool(_recorders)
        d.record = 1 if recording else 0
        d.max_spins = _watchdog["max_spins"]
        d.timeout_s = _watchdog["timeout_s"]
        d.checks = (1 if _checks["race"] else 0) | (2 if _checks["align"] else 0)
        d.mxcsr = _launch_mxcsr(self._module._ftz)
        d.stack_bytes = self._stack
        err = _Err()
        st = _Stats()
        rt = _rt()
        with _LOCK:
            rc = rt.simt_launch(ctypes.byref(d), ctypes.byref(err), ctypes.byref(st))
        del storage
        _last_stats.clear()
        _last_stats.update({f: getattr(st, f) for f, _ in _Stats._fields_})
        _last_stats["kernel"] = self.name
        if rc != 0:
            raise self._error(err, g, b, regions, args)
        if recording:
            t = LaunchTraffic(
                kernel=self.name, grid=g, block=b, shared_mem=shared_mem,
                requested_bytes_load=st.req_load, requested_bytes_store=st.req_store,
                sectors_load=st.sectors_load, sectors_store=st.sectors_store,
                sectors=st.sectors_load + st.sectors_store,
                unique_sectors_load=st.uniq_load, unique_sectors_store=st.uniq_store,
                unique_sectors=st.uniq_total, shared_accesses=st.shared_accesses,
                shared_wavefronts=st.shared_wavefronts)
            for r in _recorders:
                r.launches.append(t)

    def _error(self, err, g, b, regions, args):
        cls = _ERROR_CLASSES.get(err.code, SimtError)
        msg = err.msg.decode(errors="replace")
        block = tuple(err.block) if err.has_thread else None
        thread = tuple(err.thread) if err.has_thread else None
        where = ""
        if err.has_thread:
            where = f" [block {block}, thread {thread}, warp {err.warp} lane {err.lane}]"
        func = err.func.decode(errors="replace")
        if func:
            where += f" in {func}"
        if err.pc_offset:
            loc = _build.source_location(self._path, int(err.pc_offset) - 1, self._module.name)
            where += f" at {loc}" if loc else f" (pc {self._path.name}+0x{err.pc_offset:x})"
        extra = {}
        if cls in (OutOfBoundsError, ReadOnlyWriteError, DataRaceError, MisalignedAddressError) or err.code in (1, 2):
            addr = int(err.addr)
            extra.update(address=addr, size=int(err.size), is_write=bool(err.is_write), buffer=None, offset=None)
            best = None
            for lo, hi, fl in regions:
                dist = 0 if lo <= addr < hi else (lo - addr if addr < lo else addr - hi + 1)
                if best is None or dist < best[0]:
                    best = (dist, lo, hi, fl)
            if best is not None:
                _, lo, hi, fl = best
                idx = fl >> 8
                off = addr - lo
                extra.update(buffer=idx, offset=off)
                a = args[idx]
                rel = (f"{off} bytes into it" if 0 <= off < hi - lo else
                       f"{addr - hi} bytes past its end" if addr >= hi else f"{lo - addr} bytes before its start")
                ro = "" if fl & 1 else ", read-only"
                msg += (f"; nearest device buffer: argument #{idx} ({_describe_arg(a)}, {hi - lo} bytes at "
                        f"0x{lo:x}{ro}), address is {rel}")
            else:
                msg += "; no device buffer was passed"
        return cls(f"kernel {self.name!r} grid={g} block={b}: {msg}{where}", kernel=self.name, block=block,
                   thread=thread, **extra)


class RawModule:
    """CPU counterpart of ``cupy.RawModule``: compiles CUDA C++ with g++ against cupyops.simt's
    emulation headers.  Compilation happens on first use (``get_function`` or ``compile``)."""

    _memo: dict = {}
    _tls_info: dict = {}
    _bounds_info: dict = {}

    def __init__(self, code=None, *, path=None, options=(), name_expressions=None, backend="nvrtc",
                 translate_cucomplex=False, enable_cooperative_groups=False, jitify=False, name=None):
        if code is None and path is None:
            raise TypeError("RawModule needs code or path")
        if code is None:
            code = Path(path).read_text()
        self.code = code
        self.options = tuple(options or ())
        self.name_expressions = tuple(name_expressions or ())
        self.name = name or "kernel.cu"
        self._ftz = _build.ftz_option(self.options)
        self._nvrtc_bounds: dict = {}
        self._lib = None
        self._functions = {}
        self._extra = []

    def compile(self, log_stream=None):
        if self._lib is not None:
            return
        _rt()
        # The checks and the build (the C++ compiler: seconds) run outside the lock, so threads
        # building other modules at once run their compilers side by side (cupyops.core.modules.
        # ensure_modules) and launches in other threads go on meanwhile: the cache's per-entry
        # file lock makes concurrent builds of one library wait for one (_cache.Cache.entry).
        # Loading and registering the library, and this module's state, are under the lock.
        c_names = _build.extern_c_kernels(self.code)
        entries = list(self.name_expressions) + [n for n in c_names if n not in self.name_expressions]
        nvrtc_bounds = {}
        if _checks["nvrtc"]:
            from . import _nvrtc_front
            nvrtc_bounds = _nvrtc_front.check(self.code, self.options, self.name_expressions, self.name,
                                              _build.cache_dir())
        entries += [n for n in self._extra if n not in entries]
        path = _build.build_module(self.code, self.options, entries, self.name)
        with _LOCK:
            if self._lib is not None:
                return
            self._nvrtc_bounds = nvrtc_bounds
            key = str(path)
            if key not in RawModule._memo:
                path, lib = _build.load_library(
                    path, lambda: _build.build_module(self.code, self.options, entries, self.name, force=True),
                    symbol="__simt_tls_anchor")
                anchor = ctypes.cast(getattr(lib, "__simt_tls_anchor"), ctypes.c_void_p).value
                mid = _rt().simt_register_module(anchor, anchor)
                if mid < 0:
                    raise SimtError(f"cannot register module {path}")
                static = int(_rt().simt_module_static_shared(mid))
                RawModule._memo[key] = (lib, mid, max(0, static - 1 if static else 0))
            self._lib, self._id, self._static_shared = RawModule._memo[key]
            self._path = path
            self._entries = {e: i for i, e in enumerate(entries)}

    def _static_shared_of(self, index: int) -> int:
        """Static shared bytes attributed to entry `index` (see Function.shared_size_bytes)."""
        key = str(self._path)
        info = RawModule._tls_info.get(key)
        if info is None:
            syms = [(n, sz) for n, sz in _build.tls_symbols(self._path) if "__simt_tls_anchor" not in n]
            prefixes = {}
            for i in range(len(self._entries)):
                buf = ctypes.create_string_buffer(4096)
                addr = ctypes.cast(getattr(self._lib, f"__simt_kaddr_{i}"), ctypes.CFUNCTYPE(ctypes.c_void_p))()
                if _rt().simt_symbol_name(addr, buf, 4096):
                    prefixes[i] = _build.function_prefix(buf.value.decode())
            info = RawModule._tls_info[key] = (syms, prefixes)
        syms, prefixes = info
        own = prefixes.get(index)
        if own is None:
            return self._static_shared
        kernel_prefixes = set(prefixes.values())
        total = 0
        for n, sz in syms:
            if n.startswith(own):
                total += sz
            elif not any(n.startswith(p) for p in kernel_prefixes):
                total += sz  # a device helper's or namespace-scope __shared__: may be used by any kernel
        return total

    def _kernel_prefix(self, index: int) -> str | None:
        """The mangled-name prefix of the static locals of entry `index` (None if unknown)."""
        buf = ctypes.create_string_buffer(4096)
        addr = ctypes.cast(getattr(self._lib, f"__simt_kaddr_{index}"), ctypes.CFUNCTYPE(ctypes.c_void_p))()
        if not _rt().simt_symbol_name(addr, buf, 4096):
            return None
        return _build.function_prefix(buf.value.decode())

    def _launch_bound_of(self, index: int) -> int:
        """The N of entry `index`'s ``__launch_bounds__(N, ...)``, 0 for none: the kernel's static
        ``__simt_lb`` (simt_cuda.h's __simt_launch_bounds), read from the module's symbol table."""
        key = str(self._path)
        bounds = RawModule._bounds_info.get(key)
        if bounds is None:
            bounds = RawModule._bounds_info[key] = _launch_bound_records(self._path)
        if not bounds:
            return 0
        own = self._kernel_prefix(index)
        return bounds.get(own, 0) if own else 0

    def get_function(self, name: str) -> Function:
        self.compile()
        fn = self._functions.get(name)
        if fn is None:
            idx = self._entries.get(name)
            if idx is None and name not in self._extra and name.strip():
                # not found by the source scan (e.g. declared through a macro): rebuild with the name
                # as one more entry expression
                self._extra.append(name)
                old = (self._lib, self._id, self._static_shared, self._path, self._entries)
                self._lib = None
                try:
                    self.compile()
                    idx = self._entries.get(name)
                except CompileError:
                    self._extra.remove(name)
                    self._lib, self._id, self._static_shared, self._path, self._entries = old
                    idx = None
            if idx is None:
                raise SimtError(f"kernel {name!r} not found: it is neither a name expression of the module "
                                f"{list(self.name_expressions)} nor an extern \"C\" __global__ function "
                                f"{[e for e in self._entries if e not in self.name_expressions]}")
            fn = Function(self, name, idx)
            self._functions[name] = fn
        return fn


_BOUND_SYMBOL = "E9__simt_lb"


def _launch_bound_records(so_path) -> dict:
    """{mangled prefix of a kernel's static locals: its __launch_bounds__ max threads} from the
    ``__simt_lb`` statics (STT_OBJECT) of an ELF64 shared object: their bytes, read from the
    section that holds them (a record is three int64: max threads, min blocks, max blocks)."""
    import struct
    data = Path(so_path).read_bytes()
    if data[:4] != b"\x7fELF" or data[4] != 2 or _BOUND_SYMBOL.encode() not in data:
        return {}
    e_shoff, = struct.unpack_from("<Q", data, 0x28)
    e_shentsize, e_shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, e_shoff + i * e_shentsize) for i in range(e_shnum)]
    out = {}
    for sh in sections:
        if sh[1] != 2 or not sh[9]:  # SHT_SYMTAB
            continue
        str_off = sections[sh[6]][4]
        for k in range(sh[5] // sh[9]):
            st_name, st_info, _, st_shndx, st_value, st_size = struct.unpack_from("<IBBHQQ", data, sh[4] + k * sh[9])
            if st_info & 0xF != 1 or st_size < 8 or not 0 < st_shndx < len(sections):  # STT_OBJECT
                continue
            end = data.index(b"\0", str_off + st_name)
            name = data[str_off + st_name:end].decode(errors="replace")
            if not (name.startswith("_ZZ") and name.endswith(_BOUND_SYMBOL)):
                continue
            home = sections[st_shndx]
            if home[1] == 8:  # SHT_NOBITS: zeros
                continue
            n, = struct.unpack_from("<q", data, home[4] + st_value - home[3])
            out[name[:-len(_BOUND_SYMBOL) + 1]] = n
    return out


def RawKernel(code, name, options=(), **kw):
    """Like ``cupy.RawKernel``: one extern "C" kernel of a source."""
    return RawModule(code=code, options=options, **kw).get_function(name)
