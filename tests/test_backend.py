"""cupyops.core.backend: the SIMT and CUDA backends behind the launch code."""
import dataclasses

import numpy as np
import pytest

from cupyops.core import backend as _backend
from cupyops.core import modules as _modules
from cupyops.core import trace as _trace

try:
    from cupyops.simt import RawModule as _SimtRawModule  # noqa: F401
    HAVE_SIMT = True
except ImportError:
    HAVE_SIMT = False

needs_simt = pytest.mark.skipif(not HAVE_SIMT, reason="cupyops.simt.RawModule is not there yet")


# ------------------------------------------------------------------------------------------
# Properties and the registry
# ------------------------------------------------------------------------------------------

def test_h100_props():
    p = _backend.H100_PROPS
    assert p.cc == (9, 0)
    assert p.sm_count == 132
    assert p.max_threads_per_sm == 2048
    assert p.max_shared_per_sm == 228 * 1024
    assert p.max_shared_per_block == 48 * 1024
    assert p.max_shared_per_block_optin == 227 * 1024
    assert p.regs_per_sm == 65536
    assert p.max_blocks_per_sm == 32
    assert p.warp_size == 32
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.sm_count = 1


def test_get_backend_simt_cached():
    be = _backend.get_backend("simt")
    assert be.name == "simt"
    assert be.xp is np
    assert be.props is _backend.H100_PROPS
    assert be.device_id == 0
    assert _backend.get_backend("simt") is be
    assert _backend.get_backend("simt", 0) is be


def test_get_backend_unknown():
    with pytest.raises(ValueError, match="unknown backend"):
        _backend.get_backend("metal")


# ------------------------------------------------------------------------------------------
# SIMT backend: arrays, reads, inputs
# ------------------------------------------------------------------------------------------

def test_simt_arrays():
    be = _backend.get_backend("simt")
    a = be.empty((2, 3), np.int64)
    assert isinstance(a, np.ndarray) and a.shape == (2, 3) and a.dtype == np.int64
    z = be.zeros((4,), np.uint32)
    assert (z == 0).all() and z.dtype == np.uint32
    f = be.full((2,), -1, np.int32)
    assert (f == -1).all()


def test_simt_allocations_never_straddle_a_sector_more_than_a_gpu_buffer():
    """Arrays start on 256 bytes, as CuPy's do; at most 16 bytes (a few indices) take NumPy's
    own 16-byte aligned buffer, which keeps them inside one 32-byte sector as well."""
    be = _backend.get_backend("simt")
    for shape, dt in (((2, 3), np.int64), ((17,), np.uint8), ((5,), np.float32),
                      ((1, 3), np.float64), ((0, 4), np.int32)):
        for _ in range(20):
            a = be.empty(shape, dt)
            assert a.shape == shape and a.dtype == dt and a.flags.c_contiguous
            assert a.flags.writeable
            assert a.size == 0 or a.__array_interface__["data"][0] % 256 == 0
    for shape, dt in (((2,), np.int64), ((1,), np.complex128), ((16,), np.uint8),
                      ((3,), np.int32), ((), np.float64)):
        for _ in range(20):
            a = be.empty(shape, dt)
            ptr = a.__array_interface__["data"][0]
            assert a.shape == shape and a.dtype == dt and a.flags.writeable
            assert ptr % 16 == 0 and ptr // 32 == (ptr + a.nbytes - 1) // 32


def test_simt_read_scalar_counted():
    be = _backend.get_backend("simt")
    with _trace.recording() as t:
        assert be.read_scalar(np.array(7, dtype=np.int64)) == 7
        assert be.read_scalar(np.array([5], dtype=np.uint64)) == 5
    assert t.d2h_reads == 2
    with pytest.raises(ValueError):
        be.read_scalar(np.zeros(2))


def test_simt_asarray_input_read_only_view():
    be = _backend.get_backend("simt")
    x = np.arange(24, dtype=np.float32).reshape(4, 6)[::2, ::-3]
    v = be.asarray_input(x)
    assert np.shares_memory(v, x)
    assert v.__array_interface__["data"][0] == x.__array_interface__["data"][0]
    assert v.strides == x.strides and v.shape == x.shape
    assert not v.flags.writeable
    assert x.flags.writeable                     # the caller's array is untouched
    with pytest.raises(ValueError):
        v[0, 0] = 1


# ------------------------------------------------------------------------------------------
# kernel(): trace and launch checks, with a fake simt module
# ------------------------------------------------------------------------------------------

class _FakeKernel:
    def __init__(self, expr):
        self.expr = expr
        self.calls = []

    def __call__(self, grid, block, args, shared_mem=0):
        self.calls.append((grid, block, args, shared_mem))


class _FakeModule:
    def __init__(self, exprs):
        self.fns = {e: _FakeKernel(e) for e in exprs}

    def get_function(self, expr):
        return self.fns[expr]


@pytest.fixture
def fake_simt(selftest_family, monkeypatch):
    monkeypatch.setitem(_modules._factories, "simt",
                        lambda src, opts, exprs, dev: _FakeModule(exprs))
    _modules.clear_cache()
    be = _backend.SimtBackend()          # a fresh backend: no launchers cached from real runs
    yield be
    _modules.clear_cache()


def test_kernel_records_and_launches(fake_simt):
    be = fake_simt
    expr = "selftest_iota<float, 3>"
    fn = be.kernel("selftest", np.float32, expr)
    assert be.kernel("selftest", np.dtype("float32"), expr) is fn
    y = be.empty((10,), np.float32)
    with _trace.recording() as t:
        fn(4, 256, (y, np.int64(10)))
        fn((2, 1), (32, 2), [y, np.int64(10)], shared_mem=1024)
    assert t.launches == [(expr, (4,), (256,), 0), (expr, (2, 1), (32, 2), 1024)]
    calls = fn.raw.calls
    assert calls[0][:2] == ((4,), (256,)) and calls[0][3] == 0
    assert isinstance(calls[1][2], tuple) and calls[1][3] == 1024


def test_kernel_undeclared_expression(fake_simt):
    with pytest.raises(KeyError, match="does not declare"):
        fake_simt.kernel("selftest", np.float32, "selftest_iota<float, 5>")


@pytest.mark.parametrize("grid, block, smem", [
    (1, 2048, 0), (1, (32, 32, 2), 0), (0, 32, 0), ((1, 70000), 32, 0), (1, 32, 300 * 1024),
    (1, 32, -1), ((1, 1, 1, 1), 32, 0),
])
def test_kernel_bad_launch(fake_simt, grid, block, smem):
    fn = fake_simt.kernel("selftest", np.float32, "selftest_iota<float, 3>")
    with pytest.raises(ValueError):
        fn(grid, block, (), shared_mem=smem)
    assert fn.raw.calls == []


# ------------------------------------------------------------------------------------------
# The real SIMT layer
# ------------------------------------------------------------------------------------------

@needs_simt
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.uint8, np.float64])
def test_simt_selftest_iota(selftest_family, dtype):
    be = _backend.get_backend("simt")
    n = 1000
    y = be.zeros((n,), dtype)
    fn = be.kernel("selftest", dtype, _modules.name_expression("selftest_iota", dtype, 3))
    with _trace.recording() as t:
        fn((2,), (128,), (y, np.int64(n)))
    np.testing.assert_array_equal(y, (np.arange(n) * 3).astype(dtype))
    assert len(t.launches) == 1


@needs_simt
@pytest.mark.parametrize("invert", [False, True])
def test_simt_selftest_count_struct_arg(selftest_family, invert):
    be = _backend.get_backend("simt")
    x = np.zeros(1000, np.float32)
    x[::7] = 1.5
    x[3] = np.float32(1e-45)          # subnormal: nonzero
    x[5] = -0.0                       # zero
    xs = be.asarray_input(x[::2])     # a strided read-only view
    n = xs.shape[0]
    params = np.zeros((), dtype=np.dtype([("n", np.int64), ("stride", np.int64)], align=True))
    params["n"], params["stride"] = n, 2
    count = be.zeros((1,), np.uint64)
    fn = be.kernel("selftest", np.float32,
                   _modules.name_expression("selftest_count", np.float32, invert))
    fn(((n + 255) // 256,), (256,), (xs, params[()], count))
    nz = int(np.count_nonzero(x[::2]))
    assert be.read_scalar(count) == (n - nz if invert else nz)


# ------------------------------------------------------------------------------------------
# CUDA backend
# ------------------------------------------------------------------------------------------

def test_check_supported_refuses_old_gpu(monkeypatch):
    cupy = pytest.importorskip("cupy")
    monkeypatch.setattr(cupy.cuda.runtime, "runtimeGetVersion", lambda: 13000)
    monkeypatch.setattr(cupy.cuda.nvrtc, "getVersion", lambda: (13, 0))
    old = dataclasses.replace(_backend.H100_PROPS, name="Tesla V100", cc=(7, 0))
    with pytest.raises(_backend.UnsupportedDeviceError, match="sm_75"):
        _backend._check_supported(old)
    _backend._check_supported(dataclasses.replace(old, cc=(7, 5)))
    monkeypatch.setattr(cupy.cuda.runtime, "runtimeGetVersion", lambda: 12080)
    monkeypatch.setattr(cupy.cuda.nvrtc, "getVersion", lambda: (12, 8))
    _backend._check_supported(old)
    with pytest.raises(_backend.UnsupportedDeviceError, match="sm_70"):
        _backend._check_supported(dataclasses.replace(old, cc=(6, 1)))


@pytest.mark.gpu
def test_cuda_backend_props():
    import cupy
    be = _backend.get_backend("cuda")
    assert be.name == "cuda" and be.xp is cupy
    assert be.device_id == cupy.cuda.runtime.getDevice()
    assert _backend.get_backend("cuda", be.device_id) is be
    p = be.props
    assert p.sm_count > 0 and p.warp_size == 32 and p.cc >= (7, 5)
    assert p.max_shared_per_block_optin >= p.max_shared_per_block == 48 * 1024


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int64, np.bool_])
def test_cuda_selftest(selftest_family, dtype):
    import cupy
    be = _backend.get_backend("cuda")
    n = 5000
    y = be.zeros((n,), dtype)
    fn = be.kernel("selftest", dtype, _modules.name_expression("selftest_iota", dtype, 3))
    with _trace.recording() as t:
        fn((4,), (256,), (y, np.int64(n)))
    np.testing.assert_array_equal(cupy.asnumpy(y), (np.arange(n) * 3).astype(dtype))
    assert t.launches[0][0] == "selftest_iota<%s, 3>" % _modules.ctype(dtype)

    x = cupy.asarray(np.arange(n) % 3 == 0).astype(dtype)
    params = np.zeros((), dtype=np.dtype([("n", np.int64), ("stride", np.int64)], align=True))
    params["n"], params["stride"] = n, 1
    count = be.zeros((1,), np.uint64)
    cnt = be.kernel("selftest", dtype, _modules.name_expression("selftest_count", dtype, False))
    cnt(((n + 255) // 256,), (256,), (x, params[()], count))
    with _trace.recording() as t:
        assert be.read_scalar(count) == int(np.count_nonzero(np.arange(n) % 3 == 0))
    assert t.d2h_reads == 1


@pytest.mark.gpu
def test_cuda_subnormal_is_nonzero(selftest_family):
    """CuPy compiles with -ftz=true; the selftest compares bit patterns, so a subnormal float
    still counts as nonzero."""
    import cupy
    be = _backend.get_backend("cuda")
    x = cupy.asarray(np.array([0.0, 1e-45, -0.0, 1e-40] + [0.0] * 28, np.float32))
    params = np.zeros((), dtype=np.dtype([("n", np.int64), ("stride", np.int64)], align=True))
    params["n"], params["stride"] = x.size, 1
    count = be.zeros((1,), np.uint64)
    be.kernel("selftest", np.float32, "selftest_count<float, false>")((1,), (32,), (x, params[()], count))
    assert be.read_scalar(count) == 2


@pytest.mark.gpu
def test_cuda_asarray_input():
    import cupy
    be = _backend.get_backend("cuda")
    c = cupy.arange(5)
    assert be.asarray_input(c) is c
    h = np.arange(5, dtype=">i4")
    d = be.asarray_input(h)
    assert isinstance(d, cupy.ndarray) and d.dtype == np.int32
    np.testing.assert_array_equal(cupy.asnumpy(d), h)


# ------------------------------------------------------------------------------------------
# CUDA backend logic without a GPU: CuPy imports, device calls are faked
# ------------------------------------------------------------------------------------------

class _NullDevice:
    entered = []

    def __init__(self, i=0):
        self.id = i

    def __enter__(self):
        _NullDevice.entered.append(self.id)
        return self

    def __exit__(self, *exc):
        return False


class _FakeRawKernel(_FakeKernel):
    max_dynamic_shared_size_bytes = 48 * 1024


@pytest.fixture
def fake_cuda(selftest_family, monkeypatch):
    cupy = pytest.importorskip("cupy")
    monkeypatch.setattr(cupy.cuda, "Device", _NullDevice)
    # the current device is another one (0): launches enter device 3's context
    monkeypatch.setattr(cupy.cuda.runtime, "getDevice", lambda: 0)
    props = dataclasses.replace(_backend.H100_PROPS, name="fake H100")
    monkeypatch.setattr(_backend, "_cupy_device_props", lambda dev: props)
    monkeypatch.setattr(_backend, "_check_supported", lambda p: None)

    class Mod:
        def __init__(self, exprs):
            self.fns = {e: _FakeRawKernel(e) for e in exprs}

        def get_function(self, e):
            return self.fns[e]

    real = _modules.module_factory("cuda")
    _modules.register_module_factory("cuda", lambda s, o, exprs, dev: Mod(exprs))
    _modules.clear_cache()
    _NullDevice.entered = []
    yield _backend.CupyBackend(3)
    _modules.register_module_factory("cuda", real)
    _modules.clear_cache()


def test_cuda_launcher_without_gpu(fake_cuda):
    be = fake_cuda
    assert be.name == "cuda" and be.device_id == 3 and be.props.name == "fake H100"
    fn = be.kernel("selftest", np.float32, "selftest_iota<float, 3>")
    with _trace.recording() as t:
        fn(2, 128, ("y", np.int64(5)))
        fn(1, 256, ("y", np.int64(5)), shared_mem=100 * 1024)    # above 48 KiB: opt in
        fn(1, 256, ("y", np.int64(5)), shared_mem=64 * 1024)     # already opted into more
    assert [launch[3] for launch in t.launches] == [0, 100 * 1024, 64 * 1024]
    assert fn.raw.max_dynamic_shared_size_bytes == 100 * 1024
    assert [c[3] for c in fn.raw.calls] == [0, 100 * 1024, 64 * 1024]
    assert _NullDevice.entered and set(_NullDevice.entered) == {3}   # launched on its device
    with pytest.raises(ValueError):
        fn(1, 256, (), shared_mem=228 * 1024)


def test_cuda_compile_exception_is_wrapped(selftest_family, monkeypatch):
    cupy = pytest.importorskip("cupy")
    from cupy.cuda.compiler import CompileException

    class BadModule:
        def __init__(self, code, options, name_expressions):
            self.options = options

        def compile(self):
            raise CompileException("kernel.cu(3): error: expected a \";\"", "src", "kernel.cu",
                                   self.options + ("-ftz=true", "-arch=sm_90"))

    monkeypatch.setattr(cupy, "RawModule", BadModule)
    monkeypatch.setattr(cupy.cuda, "Device", _NullDevice)
    _modules.clear_cache()
    try:
        with pytest.raises(_modules.KernelCompileError) as info:
            _modules.get_module("cuda", "selftest", np.float32, device_id=0)
        err = info.value
        assert 'expected a ";"' in err.log and 'expected a ";"' in str(err)
        assert "-arch=sm_90" in str(err) and "--std=c++17" in str(err)
        assert isinstance(err.__cause__.__cause__, CompileException)
    finally:
        _modules.clear_cache()


def test_check_launch_refuses_bad_configurations_before_and_after_good_ones():
    """check_launch memoises accepted configurations and accepted (block, shared) pairs; a bad
    grid, block or shared size is refused with its message whether or not a good
    configuration with the same block came first, and lists are checked like tuples."""
    from cupyops.core import backend as B
    be = B.SimtBackend(B.H100_PROPS)
    for warm in (False, True):
        if warm:
            assert be.check_launch("k", (4, 1, 1), (256, 1, 1), 1024) == ((4, 1, 1),
                                                                         (256, 1, 1), 1024)
            assert be.check_launch("k", [7], [256, 1, 1], 1024) == ((7,), (256, 1, 1), 1024)
        with pytest.raises(ValueError, match=r"k: grid \(0, 1, 1\) is out of range"):
            be.check_launch("k", (0, 1, 1), (256, 1, 1), 1024)
        with pytest.raises(ValueError, match=r"grid \(1, 65536\) is out of range"):
            be.check_launch("k", (1, 65536), (256, 1, 1), 1024)
        with pytest.raises(ValueError, match=r"block \(2048, 1, 1\) \(2048 threads\) is invalid"):
            be.check_launch("k", (4, 1, 1), (2048, 1, 1), 1024)
        with pytest.raises(ValueError, match="shared_mem=10000000 bytes exceeds"):
            be.check_launch("k", (4, 1, 1), (256, 1, 1), 10_000_000)
        with pytest.raises(ValueError, match="grid must have 1 to 3 dimensions"):
            be.check_launch("k", (1, 1, 1, 1), (256, 1, 1), 1024)


# ------------------------------------------------------------------------------------------
# Device error flags armed and checked from several threads
# ------------------------------------------------------------------------------------------

class _CountingFlags(_backend.SimtBackend):
    """A simt backend whose flag reads are counted (host arrays as flags: no kernel needed)."""

    def __init__(self):
        super().__init__()
        self.reads = {}

    def _read_one(self, arr, stream=None) -> int:
        self.reads[id(arr)] = self.reads.get(id(arr), 0) + 1
        return int(arr[0])


def test_flags_armed_while_another_thread_checks_are_all_read(monkeypatch):
    """Every flag armed by one thread while another checks is read once: none is lost between
    the checker's copy of the armed set and its clearing (the set was a bare dict)."""
    import sys
    import threading
    monkeypatch.setattr(sys, "getswitchinterval", sys.getswitchinterval)
    sys.setswitchinterval(1e-6)
    import time

    class SlowItems(dict):       # widens the window between the copy and the clearing
        def items(self):
            out = list(super().items())
            time.sleep(0.0002)
            return out

    be = _CountingFlags()
    be._armed = SlowItems()
    flags = [np.zeros(1, np.uint64) for _ in range(5000)]
    done = threading.Event()

    def arm():
        for f in flags:
            be.arm_flag(f, str)
        done.set()

    def check():
        while not done.is_set():
            be.check_flags()

    threads = [threading.Thread(target=arm), threading.Thread(target=check)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(0.005)
    be.check_flags()
    missing = [i for i, f in enumerate(flags) if be.reads.get(id(f)) != 1]
    assert not missing, f"{len(missing)} of {len(flags)} armed flags never read (or read twice)"
