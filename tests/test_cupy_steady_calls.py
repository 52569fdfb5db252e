"""The CuPy backend in the steady state, against a counting stand-in for CuPy (no GPU needed).

A repeated call of each op and plan kind (issue 32) asks CuPy and the GPU only for what its
algorithm needs, and the tests fail on any more:

* one-launch plans: one output allocation (none with ``out=``), one launch, no memset, no host
  read, one current-device query and one current-stream query;
* split plans: their two launches; the decode plan one (its tickets reset themselves);
* nanarg*: one launch and the one host read of the all-NaN flag (with the capture check that
  read needs), no memset;
* ``size=k`` nonzero: one launch, no memset (the look-back state resets itself);
* exact nonzero: two launches and one host read of the count (and the mask of the nonzeros that
  the first records for the second, which then does not read the input again);
* no ``cupy.cuda.Device`` context while the device is current (one per call when it is not);
* every launch is handed the call's stream (CuPy would ask for the current one again) and
  the parameter structs built once per prepared launch, none of them a structured NumPy
  object (whose marshalling walks the fields in Python).
"""
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

    def __len__(self):
        return self.shape[0]

    def view(self, dtype):
        dt = np.dtype(dtype)
        return FakeArray(self.counts, (self.nbytes // dt.itemsize,), dt, self.data.ptr)

    def get(self, stream=None):
        self.counts.hit("device_to_host")
        return np.full(self.shape, 3, self.dtype)


class FakeCPointer:
    """cupy.cuda.function.CPointer: an address CuPy passes to the driver as it is."""

    def __init__(self, p=0):
        self.ptr = p


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

    def is_capturing():
        counts.hit("capture_query")
        return False

    # (a stream of its own per test: the scratch arenas are kept per device and stream)
    stream = types.SimpleNamespace(ptr=id(counts), is_capturing=is_capturing)

    def get_device():
        counts.hit("device_query")
        return state["current"]

    def get_current_stream(i=None):
        counts.hit("stream_query")
        return stream

    runtime = types.SimpleNamespace(
        getDevice=get_device, streamPerThread=2, runtimeGetVersion=lambda: 13000,
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

    def zeros(shape, dtype=None):
        a = empty(shape, dtype)
        a.fill(0)
        return a

    function = types.SimpleNamespace(CPointer=FakeCPointer)
    cuda = types.SimpleNamespace(Device=device, runtime=runtime, function=function,
                                 get_current_stream=get_current_stream,
                                 nvrtc=types.SimpleNamespace(getVersion=lambda: (13, 0)))
    return types.SimpleNamespace(cuda=cuda, empty=empty, zeros=zeros, ndarray=FakeArray,
                                 state=state, stream=stream)


def _walks_fields(a) -> bool:
    return isinstance(a, (np.ndarray, np.generic)) and a.dtype.fields is not None


class FakeKernel:
    def __init__(self, counts, expr, stream):
        self.counts, self.expr, self.stream = counts, expr, stream

    def __call__(self, grid, block, args, shared_mem=0, stream=None):
        self.counts.hit("launch")
        if stream is not self.stream:
            self.counts.hit("launch without the call's stream")
        for a in args:
            assert not _walks_fields(a), f"a structured {type(a).__name__} reached CuPy"
            if isinstance(a, (np.ndarray, np.generic, FakeCPointer)):
                self.counts.hit("struct_arg_ids:" + str(id(a)))


@pytest.fixture
def fake(monkeypatch):
    counts = Counter()
    cp = fake_cupy(counts)
    monkeypatch.setitem(sys.modules, "cupy", cp)
    monkeypatch.setitem(sys.modules, "cupy.cuda", cp.cuda)
    monkeypatch.setitem(sys.modules, "cupy.cuda.function", cp.cuda.function)
    # (the by-value conversion probes CuPy once: the fake's CPointer for these tests only)
    monkeypatch.setattr(_backend, "_by_value_state", [])

    class Module:
        def get_function(self, expr):
            return FakeKernel(counts, expr, cp.stream)
    real = _modules.module_factory("cuda")
    _modules.register_module_factory("cuda", lambda *a: Module())
    try:
        yield _backend.CupyBackend(0), counts, cp
    finally:
        _modules.register_module_factory("cuda", real)
        _modules.clear_cache()


#: what every steady call asks for, whatever its plan: one query of each
QUERIES = {"device_query": 1, "stream_query": 1}


def _steady(run, counts, calls=3):
    run()                               # the first run: arena, state, kernels
    counts.clear()
    for _ in range(calls):
        run()
    per_call = {k: v / calls for k, v in counts.items() if not k.startswith("struct_arg_ids")}
    return per_call, {k for k in counts if k.startswith("struct_arg_ids")}


def _argreduce(be, x, axes=(1,), **kw):
    kw = dict(dict(kind="max", tie="first", index_dtype=np.dtype(np.int64)), **kw)
    return AL.prepare_argreduce(be, x, axes, **kw)[1]


def test_argmax_one_launch(fake):
    be, counts, cp = fake
    x = FakeArray(counts, (64, 1000), np.float32)
    launches = _argreduce(be, x)
    assert launches.plan.passes == 1 and not launches.plan.last_block
    run = AL.runner(be, launches)
    per_call, structs = _steady(lambda: run(x), counts)
    assert per_call == {"alloc": 1, "launch": 1, **QUERIES}, per_call
    assert len(structs) == 1, "the struct is built once per prepared launch, not per launch"
    out = FakeArray(counts, (64,), np.int64)
    per_call, _ = _steady(lambda: run(x, None, out), counts)
    assert per_call == {"launch": 1, **QUERIES}, per_call


def test_hardmax_one_launch(fake):
    be, counts, cp = fake
    x = FakeArray(counts, (64, 1000), np.float32)
    launches = AL.prepare_hardmax(be, x, (1,), tie="first")[1]
    assert launches.plan.passes == 1
    per_call, _ = _steady(lambda: AL.runner(be, launches)(x), counts)
    assert per_call == {"alloc": 1, "launch": 1, **QUERIES}, per_call


def test_nanargmax_reads_its_flag_once(fake, monkeypatch):
    be, counts, cp = fake
    x = FakeArray(counts, (64, 1000), np.float32)
    launches = _argreduce(be, x, skip_nan=True)
    run = AL.runner(be, launches)
    # (the fake's host read gives 3: a set flag, so the call raises and zeroes the flag)
    with pytest.raises(ValueError, match="All-NaN"):
        run(x)
    counts.clear()
    with pytest.raises(ValueError, match="All-NaN"):
        run(x)
    got = {k: v for k, v in counts.items() if not k.startswith("struct_arg_ids")}
    assert got == {"alloc": 1, "launch": 1, "capture_query": 1, "device_to_host": 1,
                   "memset": 1, **QUERIES}, got
    # a flag that stays 0: no memset
    monkeypatch.setattr(FakeArray, "get", lambda self, stream=None: (
        self.counts.hit("device_to_host"), np.zeros(self.shape, self.dtype))[1])
    per_call, _ = _steady(lambda: run(x), counts)
    assert per_call == {"alloc": 1, "launch": 1, "capture_query": 1, "device_to_host": 1,
                        **QUERIES}, per_call


def test_an_interrupted_flag_read_discards_the_zero_state(fake, monkeypatch):
    """A host read of the all-NaN flag that raises (an interrupt, a capture) leaves the flag as
    the kernel wrote it: the call discards its zero state, so no later call finds the flag set
    (and count_nonzero's sums, which share those words, start from zero)."""
    from cupyops.core import workspace as W
    be, counts, cp = fake
    x = FakeArray(counts, (64, 1000), np.float32)
    run = AL.runner(be, _argreduce(be, x, skip_nan=True))
    with pytest.raises(ValueError, match="All-NaN"):
        run(x)                                  # (the state exists: made by the first call)
    discarded = []
    real = W._Holder.discard_state
    monkeypatch.setattr(W._Holder, "discard_state",
                        lambda self, *k: discarded.append(k) or real(self, *k))

    def interrupted(*a, **k):
        raise KeyboardInterrupt
    monkeypatch.setattr(be, "read_flag", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run(x)
    assert discarded == [(AL.STATE_ZERO,)], discarded


def test_split_and_decode_plans(fake):
    be, counts, cp = fake
    x = FakeArray(counts, (4, 1 << 20), np.float32)           # split: two launches
    launches = _argreduce(be, x)
    assert launches.plan.case == "split"
    per_call, structs = _steady(lambda: AL.runner(be, launches)(x), counts)
    assert per_call == {"alloc": 1, "launch": 2, **QUERIES} and len(structs) == 2, per_call
    x = FakeArray(counts, (1, 131072), np.float32)            # decode: tickets reset themselves
    launches = _argreduce(be, x)
    assert launches.plan.case == "decode"
    per_call, _ = _steady(lambda: AL.runner(be, launches)(x), counts)
    assert per_call == {"alloc": 1, "launch": 1, **QUERIES}, per_call
    launches = AL.prepare_hardmax(be, x, (1,), tie="first")[1]
    assert launches.plan.case == "decode"
    per_call, _ = _steady(lambda: AL.runner(be, launches)(x), counts)
    assert per_call == {"alloc": 1, "launch": 1, **QUERIES}, per_call


def test_count_nonzero(fake):
    be, counts, cp = fake
    x = FakeArray(counts, (64, 1000), np.float32)
    run = NL.count_runner(be, x, (1,))
    per_call, _ = _steady(lambda: run(x), counts)
    assert per_call == {"alloc": 1, "launch": 1, **QUERIES}, per_call
    x = FakeArray(counts, (1 << 22,), np.float32)             # chunks add up: no memset
    run = NL.count_runner(be, x, (0,))
    assert run.args[0][2], "not an atomic (several chunks) plan"
    per_call, _ = _steady(lambda: run(x), counts)
    assert per_call == {"alloc": 1, "launch": 1, **QUERIES}, per_call


def test_nonzero_fixed_size(fake):
    be, counts, cp = fake
    x = FakeArray(counts, (64, 1000), np.float32)
    run = NL.fixed_runner(be, x, 100, -1, np.int64)
    per_call, _ = _steady(lambda: run(x), counts)
    # the coords and the 0-d count; the look-back state resets itself: no memset, no host read
    assert per_call == {"alloc": 2, "launch": 1, **QUERIES}, per_call
    out = (FakeArray(counts, (100, 2), np.int64), FakeArray(counts, (), np.int64))
    per_call, _ = _steady(lambda: run(x, None, out), counts)
    assert per_call == {"launch": 1, **QUERIES}, per_call


@pytest.mark.parametrize("layout, keep_count, result, allocs", [
    (NL.LAYOUT_ROWS, False, NL.RESULT_COORDS, 2),        # argwhere
    (NL.LAYOUT_COLS, False, NL.RESULT_ROWS, 2),          # nonzero
    (NL.LAYOUT_ROWS, True, NL.RESULT_COORDS_COUNT, 3),   # nonzero_coordinates(size=None)
])
def test_nonzero_exact(fake, layout, keep_count, result, allocs):
    be, counts, cp = fake
    for shape, order in (((64, 1000), "C"), ((1000, 64), "F")):
        x = FakeArray(counts, shape, np.float32)
        if order == "F":                 # a transposed view: nonzero_tiles_t
            x = FakeArray(counts, shape[::-1], np.float32)
            x.shape, x.strides = x.shape[::-1], x.strides[::-1]
            x.flags = types.SimpleNamespace(c_contiguous=False, f_contiguous=True)
        run = NL.exact_runner(be, x, np.int64, layout, keep_count=keep_count, result=result)
        scan_expr = run.args[0][6]
        assert scan_expr.startswith("nonzero_tiles_t<" if order == "F" else "nonzero_tiles<")
        per_call, _ = _steady(lambda: run(x), counts)
        # (the fake's count is 3) SCAN, the one host read (and its capture check), PLACE; the
        # output, the count where the caller keeps it, and the mask SCAN records for PLACE
        # (CuPy's pool, for the call: an exact call cannot be captured)
        assert per_call == {"alloc": allocs, "launch": 2, "device_to_host": 1,
                            "capture_query": 1, **QUERIES}, (order, per_call)


def _f_order(counts, shape, dtype):
    """A FakeArray laid out as the transpose of a C-order array of ``shape[::-1]``."""
    x = FakeArray(counts, shape[::-1], dtype)
    x.shape, x.strides = x.shape[::-1], x.strides[::-1]
    x.flags = types.SimpleNamespace(c_contiguous=False, f_contiguous=True)
    return x


def test_nonzero_inner_chunks(fake):
    """An F-order input whose tile would pass its bit budget: nonzero_tiles_t over inner
    chunks records their bits, a second launch writes the rows: size= is two launches (its
    records in the scratch arena, as size= may be captured), exact two and the one host read."""
    be, counts, cp = fake
    x = _f_order(counts, (8, 32768), np.int16)
    run = NL.fixed_runner(be, x, 100, -1, np.int64)
    assert run.args[0][0].chunked
    per_call, structs = _steady(lambda: run(x), counts)
    assert per_call == {"alloc": 2, "launch": 2, **QUERIES} and len(structs) == 2, per_call
    run = NL.exact_runner(be, x, np.int64, NL.LAYOUT_ROWS, keep_count=False,
                          result=NL.RESULT_COORDS)
    per_call, _ = _steady(lambda: run(x), counts)
    assert per_call == {"alloc": 2, "launch": 2, "device_to_host": 1, "capture_query": 1,
                        **QUERIES}, per_call


def test_another_current_device_gets_one_context_per_call(fake):
    be, counts, cp = fake
    x = FakeArray(counts, (64, 1000), np.float32)
    run = AL.runner(be, _argreduce(be, x))
    run(x)
    cp.state["current"] = 1                  # the array's device (0) is not current
    per_call, _ = _steady(lambda: run(x), counts)
    assert per_call == {"alloc": 1, "launch": 1, "Device": 1, **QUERIES}, per_call


def test_the_counts_can_fail(fake):
    """A runner that zeroes its scratch every call (the old way) is seen."""
    be, counts, cp = fake
    x = FakeArray(counts, (64, 1000), np.float32)
    run = NL.fixed_runner(be, x, 100, -1, np.int64)

    def old_way():
        run(x)
        be.zero_fill(FakeArray(counts, (8,), np.uint64))
    per_call, _ = _steady(old_way, counts)
    assert per_call["memset"] == 1 and per_call["device_query"] == 2


def test_host_reads_refuse_capture(fake):
    """During capture (the fake stream says so) the exact forms and nanarg* refuse their host
    read with a clear error before they read, and state is never made (a first call's arena
    would have to allocate): the capture recipe runs a call once before capturing it."""
    be, counts, cp = fake
    x = FakeArray(counts, (64, 1000), np.float32)
    exact = NL.exact_runner(be, x, np.int64, NL.LAYOUT_ROWS, keep_count=False,
                            result=NL.RESULT_COORDS)
    nan = AL.runner(be, _argreduce(be, x, skip_nan=True))
    fixed = NL.fixed_runner(be, x, 100, -1, np.int64)
    capturing = {"on": True}
    cp.stream.is_capturing = lambda: capturing["on"]
    with pytest.raises(ValueError, match="during CUDA-graph capture"):
        fixed(x)                               # its first look-back state: not made
    capturing["on"] = False
    exact(x)
    fixed(x)
    with pytest.raises(ValueError, match="All-NaN"):   # (the fake's flag reads 3)
        nan(x)
    capturing["on"] = True
    counts.clear()
    with pytest.raises(ValueError, match="CUDA-graph capture cannot hold"):
        exact(x)
    with pytest.raises(ValueError, match="CUDA-graph capture cannot hold"):
        nan(x)
    assert "device_to_host" not in counts
    counts.clear()
    fixed(x)                                   # size=k: fine, its state exists
    assert counts.get("launch") == 1 and "alloc" in counts
