"""Backends: where kernels run — a GPU through CuPy (``"cuda"``), or the CPU through
``cupyops.simt`` (``"simt"``).

Launch code is written once against :class:`Backend`::

    be = get_backend("simt")                      # or "cuda"
    out = be.empty((n,), np.int64)
    fn = be.kernel("argreduce", x.dtype, expr)    # expr: a name expression the family declares
    fn(grid, block, (x, out, params), shared_mem=0)
    count = be.read_scalar(count_arr)             # the only device-to-host read

``kernel()`` returns a launcher that records the launch in :mod:`cupyops.core.trace` and then runs
it: on the current CuPy stream for ``"cuda"``, synchronously on the CPU for ``"simt"``.
CuPy is imported only when the ``"cuda"`` backend is asked for.
"""
from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import threading

import numpy as np

from cupyops.core import modules as _modules
from cupyops.core import trace as _trace
from cupyops.core.arrays import data_ptr  # noqa: F401  (re-exported)
from cupyops.core.fastread import numpy_data_ptr

__all__ = ["DeviceProps", "H100_PROPS", "Backend", "SimtBackend", "CupyBackend", "get_backend",
           "UnsupportedDeviceError", "MIN_CC_FOR_CUDA_MAJOR", "cupy_kernel_args", "cupy_by_value",
           "struct_arg_bytes", "data_ptr", "check_device_errors"]


@dataclasses.dataclass(frozen=True)
class DeviceProps:
    name: str
    cc: tuple                       # (major, minor)
    sm_count: int
    max_threads_per_block: int
    max_shared_per_block: int       # without opt-in (48 KiB on every arch we support)
    max_shared_per_block_optin: int
    max_threads_per_sm: int
    max_shared_per_sm: int
    regs_per_sm: int
    max_blocks_per_sm: int
    warp_size: int = 32


#: H100 SXM5 (sm_90): the SIMT backend plans with these.
H100_PROPS = DeviceProps(
    name="NVIDIA H100 80GB HBM3 (simulated)",
    cc=(9, 0),
    sm_count=132,
    max_threads_per_block=1024,
    max_shared_per_block=48 * 1024,
    max_shared_per_block_optin=227 * 1024,
    max_threads_per_sm=2048,
    max_shared_per_sm=228 * 1024,
    regs_per_sm=65536,
    max_blocks_per_sm=32,
    warp_size=32,
)

#: Oldest compute capability each CUDA major version still compiles for.
MIN_CC_FOR_CUDA_MAJOR = {11: (3, 5), 12: (7, 0), 13: (7, 5)}


class UnsupportedDeviceError(RuntimeError):
    """The GPU is older than the installed CUDA can compile for."""


_GRID_LIMITS = (2**31 - 1, 65535, 65535)
_BLOCK_LIMITS = (1024, 1024, 64)


def _dims(v, what: str) -> tuple:
    if type(v) is tuple and tuple(map(type, v)) in _INT_TUPLES:    # (the planners' own)
        return v
    if isinstance(v, (int, np.integer)):
        t = (int(v),)
    else:
        t = tuple(int(d) for d in v)
    if not 1 <= len(t) <= 3:
        raise ValueError(f"{what} must have 1 to 3 dimensions, got {v!r}")
    return t


_INT_TUPLES = frozenset({(int,), (int, int), (int, int, int)})


def _grid_out_of_range(grid) -> bool:
    if len(grid) == 3:              # (the planners' grids: one comparison chain)
        x, y, z = grid
        lx, ly, lz = _GRID_LIMITS
        return not (0 < x <= lx and 0 < y <= ly and 0 < z <= lz)
    return any(g < 1 or g > lim for g, lim in zip(grid, _GRID_LIMITS))


_ALIGN = 256                   # Backend.ALLOC_ALIGN
_U8 = np.dtype(np.uint8)
_dry_run_state = _trace.dry_run_state




class Backend:
    """Common interface; see the module docstring. Subclasses set ``name``, ``xp``, ``props``,
    ``device_id`` and implement ``_launcher``."""

    name: str
    xp: object
    props: DeviceProps
    device_id: int

    def read_scalar(self, arr, stream=None, capture_error=None) -> int:
        """The value of a one-element device array on the host (under ``dry_run``: the count the
        dry run was given, nothing read). ``stream``: the call's stream from :meth:`begin`,
        inside its device scope (then nothing is asked of CuPy again). During CUDA-graph
        capture, which cannot hold a host read, a ``ValueError(capture_error)``: the caller's
        words for what read and what to capture instead."""
        _trace.record_d2h()
        dry = _dry_run_state.get()
        if dry is not None:
            dry.d2h_reads += 1
            return dry.count
        if self._armed:
            self.check_flags()
        if arr.size != 1:
            raise ValueError(f"read_scalar needs a one-element array, got shape {arr.shape}")
        if self.stream_capturing(stream):
            raise ValueError(capture_error or _CAPTURE_ERROR)
        return self._read_one(arr, stream)

    def begin(self):
        """``(scope, stream)`` of one call: ``with scope:`` makes this backend's device current
        for the call (a no-op when it is), and ``stream`` is the stream its launches go to. A
        call asks for both once (one current-device query, one current-stream query) and passes
        ``stream`` to :meth:`alloc`'s allocations' launches, :meth:`stream_key`,
        :meth:`read_scalar` and the launchers. The simt backend has one stream: ``None``."""
        return _NO_SCOPE, None

    def alloc(self, shape, dtype):
        """:meth:`empty` inside :meth:`begin`'s scope (no device check)."""
        return self.empty(shape, dtype)

    def __init__(self):
        self._kernels: dict = {}
        self._dry_by_key: dict = {}
        self._dry_kernels: dict = {}
        #: (expr, grid, block, shared_mem) -> checked configuration: first calls of new
        #: layouts mostly repeat a configuration seen before
        self._launches_checked: dict = {}
        self._blocks_checked: dict = {}     # (block, shared_mem) -> checked (block, smem)
        #: the scratch arena of a backend with one stream (simt), kept here by
        #: cupyops.core.workspace.arena_for; None otherwise
        self.only_arena = None
        #: error flags kernels may have set since the last host read: key -> (flag, describe)
        self._armed: dict = {}
        #: guards ``_armed``: threads may arm and check flags on one backend at once
        self._armed_lock = threading.Lock()

    def renew_locks_after_fork(self) -> None:
        """In a forked child: a parent thread arming or checking a flag does not exist there."""
        self._armed_lock = threading.Lock()

    # -- device-side error flags -----------------------------------------------------------
    def arm_flag(self, flag, describe, key=None, stream=None, keep=False) -> None:
        """Have the next host read (:meth:`read_scalar`, :meth:`check_flags`) check ``flag``, a
        one-element uint64 device array that a kernel sets to a non-zero code on bad input the
        host could not check without a synchronisation (segment offsets already on the GPU):
        a set flag is cleared and raises ``ValueError(describe(code))``. ``key`` (default
        ``id(flag)``): arming the same key again replaces the entry. ``stream``: the stream of
        the launch that may set it (read and cleared on it, in order after the launch).
        ``keep``: the entry stays armed after a read (a launch captured into a CUDA graph: its
        replays may set the flag after any read)."""
        with self._armed_lock:
            self._armed[id(flag) if key is None else key] = (flag, describe, stream, keep)

    def check_flags(self) -> None:
        """Read every armed flag (a synchronisation), clear the set ones and raise the first
        one's error. During CUDA-graph capture or a dry run nothing is read: they stay armed."""
        if not self._armed or _dry_run_state.get() is not None or self.stream_capturing():
            return
        with self._armed_lock:       # (an entry armed meanwhile is read now or next time)
            armed = list(self._armed.items())
            self._armed.clear()
            self._armed.update((key, entry) for key, entry in armed if entry[3])
        errors = []
        for key, (flag, describe, stream, keep) in armed:
            with self._device_scope():
                code = self._read_one(flag, stream)
                if code:
                    with (stream if stream is not None else contextlib.nullcontext()):
                        self.zero_fill(flag, stream)    # (in order on the launch's stream)
                    errors.append(describe(code))
        if errors:
            raise ValueError(errors[0])

    # -- kernels ---------------------------------------------------------------------------
    def function(self, family: str, value_dtype, expr: str):
        """The raw compiled function (``cupy.RawKernel`` / simt kernel), compiled on first use."""
        family = getattr(family, "name", family)
        with self._device_scope():
            return _modules.get_function(self.name, family, value_dtype, expr, self.device_id)

    def _device_scope(self):
        """CuPy compiles and loads a module for its *current* device: make it this one."""
        return contextlib.nullcontext()

    def kernel(self, family: str, value_dtype, expr: str):
        """``fn(grid, block, args, shared_mem=0)`` for kernel ``expr`` of ``family``'s module
        for ``value_dtype``. Each call records ``(expr, grid, block, shared_mem)`` in the
        trace, checks the launch configuration against ``props`` and launches."""
        family = getattr(family, "name", family)       # a KernelFamily or its name
        key = (family, np.dtype(value_dtype), expr)
        if _dry_run_state.get() is not None:
            return self._dry_launcher(key)
        k = self._kernels.get(key)
        if k is None:
            raw = self.function(family, value_dtype, expr)
            k = self._launcher(raw, expr)
            self._kernels[key] = k
        return k

    def ensure_kernels(self, kernels) -> None:
        """Make ready every kernel of ``kernels`` (``(family, value dtype, expr)`` each, as
        :meth:`launcher` takes them: the launches of one plan), building the modules they need
        that are not built yet all at once, in threads
        (:func:`cupyops.core.modules.ensure_modules`): a first call whose plan launches kernels
        of two modules waits for the slower, not both one after the other. Nothing is compiled
        under ``dry_run``; kernels made ready before cost a lookup each."""
        if _dry_run_state.get() is not None:
            return
        keys = [(getattr(f, "name", f), np.dtype(dt), expr) for f, dt, expr in kernels]
        ready = self._kernels
        missing = [k for k in keys if k not in ready]
        if not missing:
            return
        if len(missing) > 1:
            groups = [(f, _modules.get_family(f).module_of(dt, expr)) for f, dt, expr in missing]
            with self._device_scope():
                _modules.ensure_modules(self.name, groups, self.device_id)
        for k in missing:
            self.kernel(*k)

    def launcher(self, family: str, value_dtype, expr: str):
        """Like :meth:`kernel`, but the launcher does not check the configuration again: for
        launches whose ``(grid, block, shared_mem)`` came from :meth:`check_launch` (the
        cached launch plans of the hot path)."""
        key = (family, value_dtype, expr)
        if _dry_run_state.get() is not None:
            k = self._dry_by_key.get(key)
            if k is None:
                k = self._dry_by_key[key] = self._dry_launcher(
                    (getattr(family, "name", family), np.dtype(value_dtype), expr))
            return k.unchecked
        k = self._kernels.get(key)
        if k is None:
            k = self.kernel(family, value_dtype, expr)
        return k.unchecked

    def check_launch(self, expr, grid, block, shared_mem) -> tuple:
        """``(grid, block, shared_mem)`` normalised (tuples, int), or ``ValueError`` when this
        device cannot launch it."""
        key = (expr, grid, block, shared_mem)
        try:
            hit = self._launches_checked.get(key)
        except TypeError:              # a list: checked (and converted) every time
            return self._check_launch(expr, grid, block, shared_mem)
        if hit is None:
            hit = self._check_launch(expr, grid, block, shared_mem)
            if len(self._launches_checked) >= 4096:
                self._launches_checked.clear()
            self._launches_checked[key] = hit
        return hit

    def _check_launch(self, expr, grid, block, shared_mem) -> tuple:
        grid = _dims(grid, "grid")
        # a block and shared size checked before with another grid (the grid follows the
        # input's size; the block rarely changes): only the grid is left to check. (The
        # checks below are the device's limits, the same for every kernel; a per-kernel limit
        # such as a register-bound block size would have to key this by expr too.)
        bkey = (block, shared_mem)
        try:
            checked = self._blocks_checked.get(bkey)
        except TypeError:              # a list
            checked = None
        if checked is not None:
            if _grid_out_of_range(grid):
                raise ValueError(f"{expr}: grid {grid} is out of range (limits {_GRID_LIMITS})")
            return (grid,) + checked
        block = _dims(block, "block")
        shared_mem = int(shared_mem)
        nthreads = 1
        for d in block:
            nthreads *= d
        if (nthreads > self.props.max_threads_per_block or nthreads < 1
                or any(b < 1 or b > lim for b, lim in zip(block, _BLOCK_LIMITS))):
            raise ValueError(f"{expr}: block {block} ({nthreads} threads) is invalid on "
                             f"{self.props.name} (at most {self.props.max_threads_per_block} "
                             f"threads, dimension limits {_BLOCK_LIMITS})")
        if _grid_out_of_range(grid):
            raise ValueError(f"{expr}: grid {grid} is out of range (limits {_GRID_LIMITS})")
        if shared_mem < 0 or shared_mem > self.props.max_shared_per_block_optin:
            raise ValueError(f"{expr}: shared_mem={shared_mem} bytes exceeds the "
                             f"{self.props.max_shared_per_block_optin} bytes a block may use")
        if len(self._blocks_checked) >= 256:
            self._blocks_checked.clear()
        try:
            self._blocks_checked[bkey] = (block, shared_mem)
        except TypeError:
            pass
        return grid, block, shared_mem

    def _launcher(self, raw, expr):
        raise NotImplementedError

    def struct_arg(self, value):
        """A kernel's by-value struct argument (a ``np.void``) as this backend's launches take
        it: the simt layer takes the ``np.void`` itself."""
        return value

    def _checked(self, expr, unchecked, raw=None):
        """``launch(grid, block, args, shared_mem=0)``: the launch configuration checked, then
        ``unchecked``; ``launch.unchecked`` skips the check (configurations checked before)."""
        check = self._check_launch

        def launch(grid, block, args, shared_mem=0, stream=None):
            grid, block, shared_mem = check(expr, grid, block, shared_mem)
            return unchecked(grid, block, args, shared_mem, stream)

        launch.__name__ = f"launch[{expr}]"
        launch.raw = raw
        launch.unchecked = unchecked
        return launch

    def _dry_launcher(self, key):
        """A launcher for ``cupyops.testing.dry_run``: the expression is checked against its
        family's declared list (nothing is compiled), the launch configuration is checked as
        usual, and the launch is handed to the recorder instead of running."""
        k = self._dry_kernels.get(key)
        if k is not None:
            return k
        family, dtype, expr = key
        if expr not in _modules.get_family(family).expressions_for(dtype):
            raise KeyError(f"{expr!r} is not an expression of kernel family {family!r} for {dtype}")

        def unchecked(grid, block, args, shared_mem=0, stream=None):
            _trace.record_launch(expr, grid, block, shared_mem, args)
            rec = _dry_run_state.get()
            if rec is not None:
                rec.launches.append((expr, grid, block, shared_mem, tuple(args)))

        launch = self._checked(expr, unchecked)
        launch.__name__ = f"dry_launch[{expr}]"
        self._dry_kernels[key] = launch
        return launch

    # -- arrays ----------------------------------------------------------------------------
    # Allocations start on a 256-byte boundary, as CuPy's allocator does on a GPU: NumPy's own
    # buffers are only 16-byte aligned, which would make a warp's 128-byte store straddle an
    # extra 32-byte sector and charge the kernels for the emulator's allocator. At most 16
    # bytes need only 16 (one sector either way).
    ALLOC_ALIGN = 256

    def empty(self, shape, dtype):
        if type(shape) is not tuple:
            shape = (int(shape),) if np.ndim(shape) == 0 else tuple(int(n) for n in shape)
        dt = dtype if isinstance(dtype, np.dtype) else np.dtype(dtype)
        nbytes = math.prod(shape) * dt.itemsize
        if nbytes <= 16:
            # NumPy's own buffer where it is 16-byte aligned (malloc's on glibc; checked, for
            # other allocators): at most 16 bytes then never straddle a sector (a few indices:
            # argmax of a row, of a few groups)
            small = np.empty(shape, dt)
            if nbytes == 0 or numpy_data_ptr(small) % 16 == 0:
                return small
        raw = np.empty(nbytes + _ALIGN, _U8)
        # one constructor call: a third of the time of slicing, viewing and reshaping
        return np.ndarray(shape, dt, raw, -numpy_data_ptr(raw) % _ALIGN)

    def empty_scalar(self, dtype):
        """A 0-d array (a count the kernels write). NumPy's own allocation is 16-byte aligned,
        so one value of at most 16 bytes never straddles a 32-byte sector: no alignment work."""
        return np.empty((), dtype)

    def zeros(self, shape, dtype):
        out = self.empty(shape, dtype)
        out[...] = 0
        return out

    def full(self, shape, fill, dtype):
        out = self.empty(shape, dtype)
        out[...] = fill
        return out

    def _read_one(self, arr, stream=None) -> int:
        """Read a one-element array to the host as an int."""
        raise NotImplementedError

    def zero_fill(self, arr, stream=None) -> None:
        """Zero ``arr`` in stream order (``stream``: the call's, inside :meth:`begin`'s
        scope)."""
        arr.fill(0)

    def read_flag(self, arr, what: str, why: str, capture_hint: str, stream=None) -> bool:
        """Read a one-element flag the kernels set to the host. In a dry run, 0; during
        CUDA-graph capture, a ``ValueError`` (a capture cannot hold a host read) naming
        ``what`` needs it, ``why``, and the caller's ``capture_hint``. ``stream``: as for
        :meth:`read_scalar`."""
        if _dry_run_state.get() is not None:
            return False
        return bool(self.read_scalar(
            arr, stream, f"{what} reads a flag to the host after its kernel ({why}), which "
            f"CUDA-graph capture cannot hold; {capture_hint}"))

    def stream_key(self, stream=None) -> int:
        """The key of the stream launches go to now (``stream``: the one :meth:`begin` gave):
        its handle; 0 for the simt backend."""
        return 0

    def stream_capturing(self, stream=None) -> bool:
        """Whether that stream (``stream``: the one :meth:`begin` gave) is being captured into
        a CUDA graph (nothing may allocate)."""
        return False

    def asarray_input(self, x):
        raise NotImplementedError

    def asnumpy(self, arr):
        """A NumPy array with the contents of ``arr`` (a copy from the device for CUDA)."""
        raise NotImplementedError

    def __repr__(self):
        return f"<{type(self).__name__} {self.name}:{self.device_id} {self.props.name}>"


class SimtBackend(Backend):
    """Kernels from ``cupyops.simt.RawModule``, run on the CPU; arrays are NumPy arrays."""

    name = "simt"
    one_stream = True       # stream_key() is always 0: the scratch arena can be kept on it

    def __init__(self, props: DeviceProps = H100_PROPS):
        super().__init__()
        self.xp = np
        self.props = props
        self.device_id = 0

    def _launcher(self, raw, expr):
        def unchecked(grid, block, args, shared_mem=0, stream=None):
            _trace.record_launch(expr, grid, block, shared_mem, args)
            return raw(grid, block, tuple(args), shared_mem=shared_mem)
        return self._checked(expr, unchecked, raw)

    def _read_one(self, arr, stream=None) -> int:
        return int(np.asarray(arr).reshape(()))

    def asarray_input(self, x):
        """A read-only view of the NumPy input (never a copy), so a kernel writing its input
        fails."""
        if not isinstance(x, np.ndarray):
            raise TypeError(f"the simt backend takes NumPy arrays, got {type(x).__name__}")
        v = x.view(np.ndarray)
        v.flags.writeable = False
        return v

    def asnumpy(self, arr):
        return np.asarray(arr)


class CupyBackend(Backend):
    """Kernels from ``cupy.RawModule`` on one GPU, launched on CuPy's current stream.

    The steady state makes no call it can avoid: no ``cupy.cuda.Device`` context when this
    device is already current (one ``cudaGetDevice`` tells), structs converted to what CuPy
    passes by value once per prepared launch (:meth:`struct_arg`), allocations from the
    current device's pool."""

    name = "cuda"

    def __init__(self, device_id: int):
        super().__init__()
        import cupy

        self.xp = cupy
        self._cupy = cupy
        self.device_id = int(device_id)
        self.props = _cupy_device_props(self.device_id)
        _check_supported(self.props)
        self._per_thread = int(getattr(cupy.cuda.runtime, "streamPerThread", 2))
        self._optin_set: dict = {}
        self._current_device = cupy.cuda.runtime.getDevice
        self._current_stream = cupy.cuda.get_current_stream
        self._empty = cupy.empty

    def _device_scope(self):
        return self._device()

    def _device(self):
        # a fresh Device per use: a Device object keeps its own stack of previous devices, so
        # one shared between threads would mix them up
        return self._cupy.cuda.Device(self.device_id)

    def _scope(self):
        """Nothing to do when this device is current, else a context that makes it so."""
        if self._current_device() == self.device_id:
            return _NO_SCOPE
        return self._device()

    def struct_arg(self, value):
        """A C struct passed by value, as CuPy takes it without walking its fields
        (:func:`cupy_by_value`); made once per prepared launch."""
        return cupy_by_value(value)

    def begin(self):
        """One current-device query and one current-stream query for a whole call."""
        stream = self._current_stream(self.device_id)
        if self._current_device() == self.device_id:
            return _NO_SCOPE, stream
        return self._device(), stream

    def alloc(self, shape, dtype):
        return self._empty(shape, dtype=dtype)

    def _launcher(self, raw, expr):
        Device = self._cupy.cuda.Device
        current = self._current_device
        device_id = self.device_id
        default_max = self.props.max_shared_per_block
        optin_set = self._optin_set

        def unchecked(grid, block, args, shared_mem=0, stream=None):
            _trace.record_launch(expr, grid, block, shared_mem, args)
            if shared_mem > default_max and optin_set.get(expr, 0) < shared_mem:
                # dynamic shared memory above 48 KiB must be opted into per function
                with Device(device_id):
                    raw.max_dynamic_shared_size_bytes = shared_mem
                optin_set[expr] = shared_mem
            if stream is not None:
                # inside a call's begin(): its device is current, its stream given (CuPy would
                # ask for the current stream again)
                return raw(grid, block, args, shared_mem=shared_mem, stream=stream)
            if current() == device_id:
                return raw(grid, block, args, shared_mem=shared_mem)
            with Device(device_id):
                return raw(grid, block, args, shared_mem=shared_mem)

        return self._checked(expr, unchecked, raw)

    def empty(self, shape, dtype):
        if self._current_device() == self.device_id:
            return self._cupy.empty(shape, dtype=dtype)
        with self._device():
            return self._cupy.empty(shape, dtype=dtype)

    def empty_scalar(self, dtype):
        return self.empty((), dtype)

    def zeros(self, shape, dtype):
        with self._scope():
            return self._cupy.zeros(shape, dtype=dtype)

    def full(self, shape, fill, dtype):
        with self._scope():
            return self._cupy.full(shape, fill, dtype=dtype)

    def zero_fill(self, arr, stream=None) -> None:
        if stream is not None or self._current_device() == self.device_id:
            arr.fill(0)            # a memset on the current stream: capturable, in order
            return
        with self._device():
            arr.fill(0)

    def stream_key(self, stream=None):
        """This device's current stream (CuPy keeps one per device; ``stream``: the one
        :meth:`begin` gave). Every thread's per-thread default stream has the same handle but
        is a stream of its own: keyed by thread too."""
        if stream is None:
            stream = self._current_stream(self.device_id)
        ptr = int(stream.ptr)
        if ptr == self._per_thread:
            return (ptr, threading.get_ident())
        return ptr

    def stream_capturing(self, stream=None) -> bool:
        if stream is None:
            stream = self._current_stream(self.device_id)
        try:
            return bool(stream.is_capturing())
        except Exception:  # pragma: no cover - CuPy without capture support
            return False

    def _read_one(self, arr, stream=None) -> int:
        """``int(arr.get())``: the one implicit synchronisation the library makes (``stream``:
        the call's, inside its device scope)."""
        if stream is not None:
            return int(arr.get(stream=stream).reshape(()))
        with self._scope():
            return int(arr.get().reshape(()))

    def asarray_input(self, x):
        """A CuPy array is used as it is; a NumPy array is copied to this device (native byte
        order)."""
        cp = self._cupy
        if isinstance(x, cp.ndarray):
            return x
        x = np.asarray(x)
        if x.dtype.byteorder not in ("=", "|"):
            x = x.astype(x.dtype.newbyteorder("="))
        with self._scope():
            return cp.asarray(x)

    def asnumpy(self, arr):
        with self._scope():
            return self._cupy.asnumpy(arr)


_NO_SCOPE = contextlib.nullcontext()
_CAPTURE_ERROR = ("this call reads a value to the host after its kernel, which CUDA-graph "
                  "capture cannot hold")


def cupy_kernel_args(args) -> tuple:
    """The launch arguments as the CUDA backend hands them to CuPy: each by-value struct
    (``np.void``) through :func:`cupy_by_value`, the one conversion (what
    :meth:`CupyBackend.struct_arg` gives); everything else (CuPy arrays, NumPy integer
    scalars, structs converted before) unchanged."""
    return tuple([cupy_by_value(a) if type(a) is np.void else a for a in args])


def cupy_by_value(value):
    """A C struct passed by value (the packer's ``np.void``) as the CUDA backend hands it to
    CuPy: an object whose marshalling runs no Python per field.

    CuPy 14 marshals a one-element NumPy array through its ``__array_interface__``, which NumPy
    builds by walking the fields of a structured dtype in Python (30-76 us a launch for
    ArParams and nz_params; docs/performance.md). Instead the struct's bytes are held in a
    NumPy buffer and handed over as a ``cupy.cuda.function.CPointer`` to them (subclassed to
    keep the buffer alive), which CuPy's ``_pointer`` passes through unconverted: the driver
    copies the bytes at launch (and a CUDA-graph capture copies them into its node). Where
    this CuPy has no such ``CPointer`` (probed once), a 0-d plain void array (``V<n>``) of the
    same bytes: one ``__array_interface__`` without fields. Anything but an ``np.void`` is
    returned unchanged."""
    if not isinstance(value, np.void):
        return value
    data = np.frombuffer(value.tobytes(), np.uint8).copy()      # a buffer of its own
    make = _by_value_maker()
    return make(data) if make is not None else data.view(f"V{data.size}").reshape(())


_by_value_state: list = []


def _by_value_maker():
    """``make(uint8 buffer) -> CPointer`` to its bytes, or None where this CuPy's ``CPointer``
    cannot be built that way (then :func:`cupy_by_value` uses a plain void array)."""
    if _by_value_state:
        return _by_value_state[0]
    make = None
    try:
        from cupy.cuda.function import CPointer

        class StructBytes(CPointer):
            """The address of a by-value struct's bytes, which it keeps alive."""

            def __init__(self, data):
                CPointer.__init__(self, numpy_data_ptr(data))
                self.data = data

        probe = np.arange(16, dtype=np.uint8)
        if int(StructBytes(probe).ptr) == numpy_data_ptr(probe):
            make = StructBytes
    except Exception:  # pragma: no cover - a CuPy without CPointer(address)
        make = None
    _by_value_state.append(make)
    return make


def struct_arg_bytes(arg) -> bytes:
    """The bytes a CUDA-backend by-value argument (:func:`cupy_by_value`) hands the driver."""
    data = getattr(arg, "data", None)
    if isinstance(data, np.ndarray) and not isinstance(arg, np.ndarray):
        return data.tobytes()
    return np.asarray(arg).tobytes()


def _check_supported(props: DeviceProps) -> None:
    import cupy

    majors = []
    try:
        majors.append(cupy.cuda.runtime.runtimeGetVersion() // 1000)
    except Exception:  # pragma: no cover - depends on the installation
        pass
    try:
        majors.append(cupy.cuda.nvrtc.getVersion()[0])
    except Exception:  # pragma: no cover
        pass
    if not majors:
        return
    need = max(MIN_CC_FOR_CUDA_MAJOR.get(m, (7, 5)) for m in majors)
    if tuple(props.cc) < need:
        raise UnsupportedDeviceError(
            f"GPU {props.name!r} has compute capability {props.cc[0]}.{props.cc[1]}, but the "
            f"installed CUDA {max(majors)} compiles for sm_{need[0]}{need[1]} and newer only; "
            f"use a CUDA {12 if need >= (7, 5) else 11} build of CuPy (cupy-cuda12x) for this "
            f"GPU, or device='cpu'")


def _cupy_device_props(device_id: int) -> DeviceProps:
    import cupy

    p = cupy.cuda.runtime.getDeviceProperties(device_id)
    attrs = None

    def get(key, attr, default=None):
        nonlocal attrs
        if key in p:
            return int(p[key])
        if attrs is None:
            attrs = cupy.cuda.Device(device_id).attributes
        if attr in attrs:
            return int(attrs[attr])
        if default is None:
            raise KeyError(f"device property {key!r} unavailable")
        return default

    name = p.get("name", b"CUDA device")
    if isinstance(name, bytes):
        name = name.decode("utf-8", "replace")
    return DeviceProps(
        name=str(name),
        cc=(int(p["major"]), int(p["minor"])),
        sm_count=get("multiProcessorCount", "MultiProcessorCount"),
        max_threads_per_block=get("maxThreadsPerBlock", "MaxThreadsPerBlock", 1024),
        max_shared_per_block=get("sharedMemPerBlock", "MaxSharedMemoryPerBlock", 48 * 1024),
        max_shared_per_block_optin=get("sharedMemPerBlockOptin",
                                       "MaxSharedMemoryPerBlockOptin", 48 * 1024),
        max_threads_per_sm=get("maxThreadsPerMultiProcessor",
                               "MaxThreadsPerMultiProcessor", 1024),
        max_shared_per_sm=get("sharedMemPerMultiprocessor",
                              "MaxSharedMemoryPerMultiprocessor", 64 * 1024),
        regs_per_sm=get("regsPerMultiprocessor", "MaxRegistersPerMultiprocessor", 65536),
        max_blocks_per_sm=get("maxBlocksPerMultiProcessor", "MaxBlocksPerMultiprocessor", 16),
        warp_size=get("warpSize", "WarpSize", 32),
    )


_backends: dict = {}
_backends_lock = threading.Lock()


def _new_lock_in_child():
    """After ``fork``: a parent thread making a backend does not exist in the child."""
    global _backends_lock
    _backends_lock = threading.Lock()
    for be in _backends.values():
        be.renew_locks_after_fork()


os.register_at_fork(after_in_child=_new_lock_in_child)


def get_backend(name: str, device_id: int | None = None) -> Backend:
    """The backend ``"simt"`` or ``"cuda"`` (CuPy's current device unless ``device_id``),
    cached per (name, device)."""
    if name == "simt":
        key = ("simt", 0)
    elif name == "cuda":
        if device_id is None:
            import cupy
            device_id = cupy.cuda.runtime.getDevice()
        key = ("cuda", int(device_id))
    else:
        raise ValueError(f"unknown backend {name!r}; expected 'cuda' or 'simt'")
    be = _backends.get(key)
    if be is not None:
        return be
    with _backends_lock:
        be = _backends.get(key)
        if be is None:
            be = SimtBackend() if name == "simt" else CupyBackend(key[1])
            _backends[key] = be
    return be


def check_device_errors(device=None) -> None:
    """Raise the error a kernel recorded on the device since the last host read (a segment
    call's offsets that were already on the GPU and break the rules): ``ValueError`` naming
    the call and the first bad position, the flag then cleared. ``device``: "simt", "cuda",
    "cuda:N", or None for every device this process launched on. A synchronisation of each
    armed flag's stream; nothing when none is armed."""
    if device is None:
        chosen = list(_backends.values())
    else:
        from cupyops.core.devices import parse_device_name
        kind, dev_id = parse_device_name(device)
        chosen = [be for (name, i), be in list(_backends.items())
                  if name == kind and (dev_id is None or i == dev_id)]
    for be in chosen:
        be.check_flags()


def backend_for(placement) -> Backend:
    """The backend of a kernel-path placement (cupyops.core.placement): simt, or the CUDA
    device it names (None: CuPy's current device)."""
    if placement.kind == "simt":
        return get_backend("simt")
    return get_backend("cuda", placement.device_id)
