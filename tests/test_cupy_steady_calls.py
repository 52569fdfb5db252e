"""The CuPy backend in the steady state, against a counting stand-in for CuPy (no GPU needed):
each op's prepared runner makes only the CuPy calls it must (argmax: one output allocation and
one launch), enters no ``cupy.cuda.Device`` context while its device is current (one when it is
not), and hands CuPy the parameter struct it built once per prepared launch."""
import contextlib
import sys
import types

import numpy as np
import pytest

from cupyops.core import backend as _backend
from cupyops.core import modules as _modules
from cupyops.ops.argreduce import launch as AL
from cupyops.ops.nonzero import launch as NL


class Counter(dict):
    def hit(self, what):
        self[what] = self.get(what, 0) + 1


class FakeArray:
    """What the launch code reads of a CuPy array: shape, strides, dtype, flags, data.ptr."""

    def __init__(self, counts, shape, dtype, ptr=1 << 20):
        self.counts = counts
        self.dtype = np.dtype(dtype)
        self.shape = tuple(shape)
        self.ndim = len(shape)
        self.size = int(np.prod(shape))
        st, acc = [], self.dtype.itemsize
        for n in reversed(shape):
            st.append(acc)
            acc *= n
        self.strides = tuple(reversed(st))
        self.itemsize = self.dtype.itemsize
        self.nbytes = self.size * self.itemsize
        self.flags = types.SimpleNamespace(c_contiguous=True, f_contiguous=self.ndim <= 1)
        self.data = types.SimpleNamespace(ptr=ptr, device_id=0)

    def fill(self, v):
        self.counts.hit("memset")

    def reshape(self, shape):
        return FakeArray(self.counts, shape, self.dtype, self.data.ptr)

    def __getitem__(self, key):
        if isinstance(key, slice):
            start, stop, _ = key.indices(self.size)
            return FakeArray(self.counts, (max(stop - start, 0),), self.dtype,
                             self.data.ptr + start * self.itemsize)
        return FakeArray(self.counts, (1,), self.dtype, self.data.ptr)

    def view(self, dtype):
        dt = np.dtype(dtype)
        return FakeArray(self.counts, (self.nbytes // dt.itemsize,), dt, self.data.ptr)

    def get(self):
        self.counts.hit("device_to_host")
        return np.full(self.shape, 3, self.dtype)


def fake_cupy(counts, current=0):
    state = {"current": current}

    @contextlib.contextmanager
    def device(i=None):
        counts.hit("Device")
        old, state["current"] = state["current"], (state["current"] if i is None else i)
        try:
            yield
        finally:
            state["current"] = old

    # (a stream of its own per test: the scratch arenas are kept per device and stream)
    stream = types.SimpleNamespace(ptr=id(counts), is_capturing=lambda: False)
    runtime = types.SimpleNamespace(
        getDevice=lambda: state["current"], streamPerThread=2, runtimeGetVersion=lambda: 13000,
        getDeviceProperties=lambda i: {"name": b"Fake GPU", "major": 9, "minor": 0,
                                       "multiProcessorCount": 132, "maxThreadsPerBlock": 1024,
                                       "sharedMemPerBlock": 49152,
                                       "sharedMemPerBlockOptin": 232448,
                                       "maxThreadsPerMultiProcessor": 2048,
                                       "sharedMemPerMultiprocessor": 233472,
                                       "regsPerMultiprocessor": 65536,
                                       "maxBlocksPerMultiProcessor": 32, "warpSize": 32})

    def empty(shape, dtype=None):
        counts.hit("alloc")
        return FakeArray(counts, (shape,) if isinstance(shape, int) else shape, dtype,
                         ptr=(1 << 24) * (counts.get("alloc", 0) + 1))
    cuda = types.SimpleNamespace(Device=device, runtime=runtime,
                                 get_current_stream=lambda i=None: stream,
                                 nvrtc=types.SimpleNamespace(getVersion=lambda: (13, 0)))
    return types.SimpleNamespace(cuda=cuda, empty=empty, ndarray=FakeArray, state=state)


class FakeKernel:
    def __init__(self, counts, expr):
        self.counts, self.expr = counts, expr
        self.args = []

    def __call__(self, grid, block, args, shared_mem=0):
        self.counts.hit("launch")
        for a in args:
            assert not isinstance(a, np.void), "a struct reached CuPy as np.void"
            if isinstance(a, np.ndarray):
                assert a.ndim == 0 and a.dtype.fields, a
                self.counts.hit("struct_arg_ids:" + str(id(a)))


@pytest.fixture
def fake(monkeypatch):
    counts = Counter()
    cp = fake_cupy(counts)
    monkeypatch.setitem(sys.modules, "cupy", cp)
    monkeypatch.setitem(sys.modules, "cupy.cuda", cp.cuda)

    class Module:
        def get_function(self, expr):
            return FakeKernel(counts, expr)
    real = _modules.module_factory("cuda")
    _modules.register_module_factory("cuda", lambda *a: Module())
    try:
        yield _backend.CupyBackend(0), counts, cp
    finally:
        _modules.register_module_factory("cuda", real)
        _modules.clear_cache()


def _steady(run, counts, calls=3):
    run()                               # the first run: arena, kernels
    counts.clear()
    for _ in range(calls):
        run()
    return {k: v / calls for k, v in counts.items() if not k.startswith("struct_arg_ids")}, \
        {k for k in counts if k.startswith("struct_arg_ids")}


def test_argmax_steady_state_is_one_allocation_and_one_launch(fake):
    be, counts, cp = fake
    x = FakeArray(counts, (64, 1000), np.float32)
    _, launches = AL.prepare_argreduce(be, x, (1,), kind="max", tie="first",
                                       index_dtype=np.dtype(np.int64))
    run = AL.runner(be, launches)
    per_call, structs = _steady(lambda: run(x), counts)
    assert per_call == {"alloc": 1, "launch": 1}, per_call
    assert len(structs) == 1, "the struct is built once per prepared launch, not per launch"


def test_split_and_decode_plans(fake):
    be, counts, cp = fake
    x = FakeArray(counts, (4, 1 << 20), np.float32)           # split: two launches
    _, launches = AL.prepare_argreduce(be, x, (1,), kind="max", tie="first",
                                       index_dtype=np.dtype(np.int64))
    assert launches.plan.case == "split"
    per_call, structs = _steady(lambda: AL.runner(be, launches)(x), counts)
    assert per_call == {"alloc": 1, "launch": 2} and len(structs) == 2, per_call
    x = FakeArray(counts, (1, 131072), np.float32)            # decode: tickets zeroed, 1 launch
    _, launches = AL.prepare_argreduce(be, x, (1,), kind="max", tie="first",
                                       index_dtype=np.dtype(np.int64))
    assert launches.plan.case == "decode"
    per_call, _ = _steady(lambda: AL.runner(be, launches)(x), counts)
    assert per_call == {"alloc": 1, "memset": 1, "launch": 1}, per_call


def test_nonzero_family_steady_state(fake):
    be, counts, cp = fake
    x = FakeArray(counts, (64, 1000), np.float32)
    run = NL.count_runner(be, x, (1,))
    per_call, _ = _steady(lambda: run(x), counts)
    assert per_call == {"alloc": 1, "launch": 1}, per_call
    run = NL.fixed_runner(be, x, 100, -1, np.int64)
    per_call, _ = _steady(lambda: run(x), counts)
    # the coords and the 0-d count, the scratch zeroed in stream order, one launch, no host read
    assert per_call == {"alloc": 2, "memset": 1, "launch": 1}, per_call
    run = NL.exact_runner(be, x, np.int64, NL.LAYOUT_ROWS, keep_count=False,
                          result=NL.RESULT_COORDS)
    per_call, _ = _steady(lambda: run(x), counts)
    assert per_call == {"alloc": 1, "memset": 1, "launch": 2, "device_to_host": 1}, per_call


def test_another_current_device_gets_one_context_per_call(fake):
    be, counts, cp = fake
    x = FakeArray(counts, (64, 1000), np.float32)
    _, launches = AL.prepare_argreduce(be, x, (1,), kind="max", tie="first",
                                       index_dtype=np.dtype(np.int64))
    run = AL.runner(be, launches)
    run(x)
    cp.state["current"] = 1                  # the array's device (0) is not current
    per_call, _ = _steady(lambda: run(x), counts)
    assert per_call == {"alloc": 1, "launch": 1, "Device": 2}, per_call
