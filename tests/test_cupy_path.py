"""The CuPy path without a GPU: what real CuPy does with our launches, scratch lifetimes
(CUDA-graph capture safety), alignment, device choice. The same checks on a real GPU are in
tests/test_cupy_gpu.py."""
import gc
import json
import os
import pickle
import subprocess
import sys
import weakref
from pathlib import Path

import numpy as np
import pytest

import cupyops
from cupyops.core import backend as _backend
from cupyops.core import trace as _trace
from cupyops.testing import recording

import cupy_marshal
from _cupy_extras import cupy_floor, cupy_target
from _devices import KERNEL_DEVICES, device_kw, host, ops, to_device, workspace

HERE = Path(__file__).resolve().parent
OLDEST_PACKAGE, OLDEST_CUPY = cupy_floor("cuda13")   # the floor of the extras (pyproject.toml)


@pytest.fixture(scope="module")
def sweep():
    launches = cupy_marshal.record_sweep()
    exprs = {e.split("<")[0] for e, *_ in launches}
    # every kernel and pass is in the sweep
    assert {"argreduce_row", "argreduce_col", "argreduce_finish", "nonzero_tiles",
            "count_nonzero_axes"} <= exprs, exprs
    return launches


def _cupy_or_skip():
    try:
        import cupy  # noqa: F401
    except Exception as exc:   # the test extra installs cupy-cuda13x; a bare install may not
        pytest.skip(f"cupy not importable: {exc}")
    return cupy


#: the goal of issue 32: marshalling a launch's arguments costs at most this much more than
#: marshalling a launch of the same arity with only pointers and ints
MARSHAL_RATIO = 1.5


def _check_ratios(ratios, version):
    """Every kernel of the sweep timed, each at most MARSHAL_RATIO (the figures in the message
    are what the report quotes)."""
    assert set(ratios) >= {"argreduce_row", "argreduce_col", "argreduce_finish",
                           "nonzero_tiles", "nonzero_tiles_t", "count_nonzero_axes"}, ratios
    table = ", ".join(f"{k} {r:.2f}x ({us:.1f} vs {base:.1f} us)"
                      for k, (r, us, base) in sorted(ratios.items()))
    assert all(r <= MARSHAL_RATIO for r, _, _ in ratios.values()), f"CuPy {version}: {table}"


def test_installed_cupy_marshals_every_launch(sweep):
    cupy = _cupy_or_skip()
    res = cupy_marshal.marshal(sweep)
    assert res["cupy"] == cupy.__version__
    assert not res["failures"], "\n".join(res["failures"][:20])
    assert res["ok"] == len(sweep)
    _check_ratios(cupy_marshal.marshal_ratios(sweep), cupy.__version__)


def test_marshalling_check_can_fail():
    _cupy_or_skip()
    bad = [("control", (1,), (1,), 0, [("value", np.ones(2, np.int64))])]
    res = cupy_marshal.marshal(bad)
    assert res["ok"] == 0 and len(res["failures"]) == 1
    assert "numpy.ndarray of shape (2,)" in res["failures"][0]
    # a struct handed to CuPy as a structured array (the old conversion) is refused before
    # CuPy sees it: its marshalling walks the fields in Python
    p = np.zeros((), np.dtype([("a", np.int64), ("b", np.int32)], align=True))
    for old in (p, p[()]):
        res = cupy_marshal.marshal([("control-structured", (1,), (1,), 0, [("raw", old)])])
        assert res["ok"] == 0 and "structured dtype" in res["failures"][0], res


def _oldest_cupy_target() -> Path:
    """The extras' floor CuPy installed with pip --target, once (cached across runs)."""
    return cupy_target(OLDEST_PACKAGE, OLDEST_CUPY)


def test_oldest_cupy_marshals_every_launch(sweep, tmp_path):
    target = _oldest_cupy_target()
    # a control that must fail: a numpy array of two elements. (A raw np.void, the old
    # parameter passing, failed under CuPy 13.6; CuPy 14 takes structured scalars.)
    controls = [("control-array", (1,), (1,), 0, [("value", np.ones(2, np.int64))])]
    pkl = tmp_path / "launches.pkl"
    pkl.write_bytes(pickle.dumps(list(sweep) + controls))
    # (this checkout's cupyops behind the target: not an installed one)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(target), str(HERE.parent)]))
    proc = subprocess.run([sys.executable, str(HERE / "cupy_marshal.py"), str(pkl), "--ratios"],
                          capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    assert res["cupy"] == OLDEST_CUPY
    failures = [f for f in res["failures"] if not f.startswith("control")]
    assert not failures, "\n".join(failures[:20])
    assert res["ok"] == len(sweep)
    ctl = [f for f in res["failures"] if f.startswith("control")]
    assert len(ctl) == 1 and "numpy.ndarray of shape (2,)" in ctl[0], ctl
    _check_ratios({k: tuple(v) for k, v in res["ratios"].items()}, OLDEST_CUPY)


# ------------------------------------------------------------------------------------------
# CuPy argument conversion
# ------------------------------------------------------------------------------------------

def test_struct_goes_to_cupy_without_fields():
    """One conversion (cupy_by_value) for cupy_kernel_args and CupyBackend.struct_arg: the
    struct's bytes, in an object CuPy passes through (or a plain void array), never a
    structured NumPy array or scalar."""
    _cupy_or_skip()
    p = np.zeros((), np.dtype([("a", np.int64), ("b", np.int32)], align=True))
    p["a"], p["b"] = 5, 7
    buf = np.zeros(3, np.float32)
    conv = _backend.cupy_kernel_args((buf, p[()], np.int64(3)))
    assert conv[0] is buf and conv[2] == 3 and type(conv[2]) is np.int64
    assert not cupy_marshal._field_walker(conv[1])
    assert _backend.struct_arg_bytes(conv[1]) == p.tobytes()          # same bytes, same layout
    one = _backend.cupy_by_value(p[()])
    assert type(one) is type(conv[1]) and _backend.cupy_kernel_args((one,))[0] is one
    from cupy.cuda.function import CPointer
    assert isinstance(one, CPointer)        # CuPy 14 passes it through unconverted


# ------------------------------------------------------------------------------------------
# Scratch lifetimes (CUDA-graph capture safety), on every kernel device
# ------------------------------------------------------------------------------------------

def _is_memory(a, device) -> bool:
    """Whether launch argument ``a`` is memory of ``device``'s kernels (simt: NumPy arrays; a
    GPU: CuPy arrays, not the host-side parameter structs)."""
    if device == "simt":
        return isinstance(a, np.ndarray)
    import cupy     # (a by-value struct's StructBytes, of cupyops.core.backend, is no array)
    return isinstance(a, cupy.ndarray)


def _root(a):
    """The array that owns a view's memory (NumPy or CuPy)."""
    while hasattr(a.base, "base") and hasattr(a.base, "shape"):
        a = a.base
    return a


def _address(a) -> int:
    return a.__array_interface__["data"][0] if isinstance(a, np.ndarray) else int(a.data.ptr)


def _holds(a, host_arrays) -> bool:
    """Whether GPU array ``a`` holds one of ``host_arrays`` (same dtype, size and values in
    order): NumPy input on "cuda" reaches the kernels as a copy made inside the call, and its
    results are GPU arrays before they are read back; neither is scratch."""
    got = np.ravel(host(a))
    return any(got.dtype == h.dtype and got.size == h.size and np.array_equal(got, np.ravel(h))
               for h in host_arrays)


def _scratch_roots(trace, x, results, device):
    """Weak references to the root buffers of every launch argument that is neither the
    input nor a result (scratch), and their addresses."""
    skip = {id(_root(r)) for r in results} | {id(_root(x))}
    mine = host((x, *results)) if device == "cuda" else ()
    refs, addrs = [], []
    for args in trace.launch_args:
        for a in args:
            if not _is_memory(a, device) or id(_root(a)) in skip:
                continue
            if device == "cuda" and _holds(a, mine):
                continue
            refs.append(weakref.ref(_root(a)))
            addrs.append(_address(a))
    return refs, addrs


SPLIT = {"min_split_elements": 0, "min_work_per_thread": 1, "min_block_team_vecs": 64,
         "min_scratch_ratio": 0}


def _calls(ws, device):
    """(name, input, call) of each scratch-using call; the calls' own results (CuPy arrays
    for CuPy input)."""
    kw = dict(device_kw(device), workspace=ws)
    x2 = to_device(np.random.default_rng(1).integers(0, 3, (64, 96)).astype(np.float32), device)
    xn = to_device((np.arange(5000) % 7 == 0).astype(np.float32), device)
    return [
        ("argmax split", x2, lambda: (cupyops.argmax(x2, axis=0, **kw),)),
        ("argmin one pass", x2, lambda: (cupyops.argmin(x2, axis=1, **kw),)),
        ("hardmax", x2, lambda: (cupyops.hardmax(x2, axis=0, **kw),)),
        ("size=", xn, lambda: cupyops.nonzero_coordinates(xn, size=100, **kw)),
        ("exact", xn, lambda: cupyops.nonzero_coordinates(xn, **kw)),
    ]


def _drop_exact_mask(name, trace):
    """The mask the exact forms' counting pass records for their writing pass (the last
    argument) is CuPy's for the call: an exact call reads a count to the host, so it can never
    be captured (test_cupy_steady_calls.py::test_host_reads_refuse_capture)."""
    if name == "exact":
        assert all(len(a) == 8 and a[7].dtype == np.uint32 for a in trace.launch_args)
        trace.launch_args[:] = [a[:7] for a in trace.launch_args]


@pytest.mark.parametrize("device", KERNEL_DEVICES)
@pytest.mark.parametrize("with_workspace", [False, True])
def test_scratch_outlives_the_call(monkeypatch, with_workspace, device):
    from cupyops.ops.argreduce import launch as G
    from cupyops.ops.argreduce import plan as GP
    monkeypatch.setattr(GP, "PLAN_OPTIONS", dict(SPLIT))
    ws = workspace(1 << 20, device) if with_workspace else None
    for name, x, call in _calls(ws, device):
        with recording(args=True) as t:
            res = call()
        _drop_exact_mask(name, t)
        refs, addrs = _scratch_roots(t, x, res, device)
        assert refs, f"{name}: no scratch argument was recorded"
        del res, t
        gc.collect()
        dead = [i for i, r in enumerate(refs) if r() is None]
        assert not dead, f"{name}: scratch freed after the call (a captured graph would write it)"
        with recording(args=True) as t2:
            res2 = call()
        _drop_exact_mask(name, t2)
        _, addrs2 = _scratch_roots(t2, x, res2, device)
        if with_workspace:
            assert addrs2 == addrs, f"{name}: the same workspace gave other scratch addresses"


@pytest.mark.parametrize("sched", ["forward", "reverse", 3])
def test_simt_zero_state_is_zero_after_every_call(sched):
    """Decode tickets (atomicInc wraps the last one to 0), the all-NaN flag (zeroed before the
    call raises) and count_nonzero's chunk sums leave the zero state as they found it, so no
    call zeroes it: repeated calls are right, and the words are 0 after each."""
    from cupyops import simt
    from cupyops.core import workspace as _workspace
    from cupyops.ops.argreduce import launch as AL
    be = _backend.get_backend("simt")
    rng = np.random.default_rng(3)
    x = rng.standard_normal((8, 131072)).astype(np.float32)
    nan = np.full((4, 70000), np.nan, np.float32)
    nan[1:, 5] = 1.0
    with simt.schedule(sched):
        for _ in range(2):
            with recording() as t:
                got = cupyops.argmax(x, axis=1, device="simt")
            assert t.plans[0].case == "decode"
            np.testing.assert_array_equal(got, np.argmax(x, axis=1))
            with pytest.raises(ValueError, match="All-NaN"):
                cupyops.nanargmax(nan, axis=1, device="simt")
            np.testing.assert_array_equal(
                cupyops.count_nonzero(x > 0, axis=1, device="simt"),
                np.count_nonzero(x > 0, axis=1))
            zero = _workspace.arena_for(be).state(AL.STATE_ZERO, 0, lambda b: b)
            assert not zero.any()


@pytest.mark.parametrize("device", KERNEL_DEVICES)
def test_split_plan_really_splits(monkeypatch, device):
    from cupyops.ops.argreduce import launch as G
    from cupyops.ops.argreduce import plan as GP
    monkeypatch.setattr(GP, "PLAN_OPTIONS", dict(SPLIT))
    x = np.random.default_rng(1).integers(0, 3, (64, 96)).astype(np.float32)
    with recording() as t:
        r = ops(device).argmax(x, axis=0)
    assert t.plans[0].passes == 2 and [l[0].split("<")[0] for l in t.launches] == [
        "argreduce_col", "argreduce_finish"]
    np.testing.assert_array_equal(r, np.argmax(x, axis=0))


@pytest.mark.parametrize("device", KERNEL_DEVICES)
def test_scratch_is_rezeroed_on_every_call(device):
    ws = workspace(1 << 16, device)
    a = (np.arange(3000) % 5 == 0).astype(np.int32)
    b = (np.arange(3000) % 3 == 0).astype(np.int32)
    for x in (a, b, a):
        coords, count = ops(device).nonzero_coordinates(x, size=2000, workspace=ws)
        assert int(count) == np.count_nonzero(x)
        np.testing.assert_array_equal(coords[:int(count), 0], np.flatnonzero(x))


@pytest.mark.parametrize("device", KERNEL_DEVICES)
def test_workspace_errors(device):
    x = np.ones((4, 4), np.float32)
    o = ops(device)
    ws = workspace(16, device)
    with pytest.raises(ValueError, match="needs .* bytes of scratch"):
        o.nonzero_coordinates(np.ones(100_000, np.float32), size=4, workspace=ws)
    with pytest.raises(TypeError, match="workspace must be None or a cupyops.Workspace"):
        o.argmax(x, workspace=bytearray(16))
    with pytest.raises(ValueError, match="NumPy path"):
        cupyops.argmax(x, device="cpu", workspace=workspace(1024, device))
    with pytest.raises(ValueError, match="device must be"):
        cupyops.Workspace(1024, device="cpu")
    with pytest.raises(ValueError, match="non-negative"):
        workspace(-1, device)


def test_nonzero_coordinates_out(monkeypatch):
    x = (np.arange(600).reshape(20, 30) % 7 == 0).astype(np.float32)
    want, wn = cupyops.nonzero_coordinates(x, size=50, fill_value=-1, dtype=np.int32)
    for device in ["cpu"] + KERNEL_DEVICES:
        oc, on = np.zeros((50, 2), np.int32), np.zeros((), np.int64)
        c, n = ops(device).nonzero_coordinates(x, size=50, fill_value=-1, out=(oc, on))
        assert c is oc and n is on
        np.testing.assert_array_equal(c, want)
        assert int(n) == int(wn)
    with pytest.raises(ValueError, match="needs size="):
        cupyops.nonzero_coordinates(x, out=(oc, on))
    with pytest.raises(TypeError, match="tuple"):
        cupyops.nonzero_coordinates(x, size=50, out=oc)
    with pytest.raises(ValueError, match="shape"):
        cupyops.nonzero_coordinates(x, size=49, out=(oc, on))


@pytest.mark.parametrize("device", KERNEL_DEVICES)
def test_zero_d_fixed_size_makes_no_host_read(device):
    with recording() as t:
        c, n = ops(device).nonzero_coordinates(np.array(2.5, np.float32), size=3)
    assert t.d2h_reads == 0 and c.shape == (3, 0) and int(n) == 1


# ------------------------------------------------------------------------------------------
# Alignment
# ------------------------------------------------------------------------------------------

def _complex64_at_4(n, shape=None):
    buf = np.zeros(2 * n + 2, np.float32)
    x = buf[1:-1].view(np.complex64)
    assert x.__array_interface__["data"][0] % 8 == 4
    x[:] = (np.arange(n) % 7 == 0) * (1 + 0j) + (np.arange(n) % 11 == 0) * 1j
    return x if shape is None else x.reshape(shape)


@pytest.mark.parametrize("device", KERNEL_DEVICES)
@pytest.mark.parametrize("shape", [(1025,), (33, 31), (3, 5, 7)])
def test_complex64_at_4_byte_offset_every_nonzero_op(shape, device):
    """(CuPy input keeps the 4-byte offset; NumPy input on "cuda" reaches the kernels as a
    fresh GPU copy, 8-byte aligned: planned as the aligned input.)"""
    n = int(np.prod(shape))
    x = _complex64_at_4(n, shape)
    ref = x.copy()                   # 8-byte aligned: the plain path
    o = ops(device)
    calls = {
        "argwhere": lambda a: o.argwhere(a),
        "nonzero": lambda a: np.stack(o.nonzero(a)),
        "count_nonzero": lambda a: o.count_nonzero(a, axis=-1),
        "count_all": lambda a: o.count_nonzero(a),
        "size=": lambda a: o.nonzero_coordinates(a, size=n)[0],
        "exact": lambda a: o.nonzero_coordinates(a)[0],
    }
    narrow = device != "cuda"
    for name, f in calls.items():
        with recording() as t:
            got = f(x)
        assert t.plans and all(p.narrow_loads == narrow for p in t.plans), \
            f"{name}: not planned with {'4-byte' if narrow else 'whole'} loads"
        with recording() as t:
            want = f(ref)
        assert not any(p.narrow_loads for p in t.plans), f"{name}: aligned input planned narrow"
        np.testing.assert_array_equal(got, want, err_msg=name)
        np.testing.assert_array_equal(got, np.asarray(getattr(np, "argwhere")(ref)) if name ==
                                      "argwhere" else want)


def test_narrow_loads_planning():
    from cupyops.ops.nonzero.plan import narrow_loads
    assert not narrow_loads((4,), (8,), 8, 0x1000)
    assert narrow_loads((4,), (8,), 8, 0x1004)
    assert narrow_loads((3, 4), (12 * 8 + 4, 8), 8, 0x1000)     # odd row stride
    assert not narrow_loads((1, 4), (12 * 8 + 4, 8), 8, 0x1000)  # unit dim: stride unused
    assert not narrow_loads((4,), (4,), 4, 0x1002)               # only 8-byte elements


def test_cupy_input_not_element_aligned_is_refused():
    from cupyops.core.arrays import check_cupy_alignment
    cupy = _cupy_or_skip()
    from cupy.cuda import memory
    host = np.zeros(64, np.uint8)
    mem = memory.UnownedMemory(host.ctypes.data, host.nbytes, host, 0)
    for dtype, off in (("float32", 2), ("complex64", 2), ("float64", 4), ("int16", 1)):
        a = cupy.ndarray((4,), dtype, memptr=memory.MemoryPointer(mem, off))
        with pytest.raises(ValueError, match="not a multiple of"):
            check_cupy_alignment(a, "x", "argmax")
    # complex64 needs 4, not 8
    ok = cupy.ndarray((4,), "complex64", memptr=memory.MemoryPointer(mem, 4))
    check_cupy_alignment(ok, "x", "argmax")


# ------------------------------------------------------------------------------------------
# Device choice
# ------------------------------------------------------------------------------------------

def test_device_cuda_means_cupys_current_device(monkeypatch):
    """device="cuda" with NumPy input: the CuPy device context is CuPy's current device (no
    device id), "cuda:N" names N."""
    cupy = _cupy_or_skip()
    from cupyops.core import placement as _dispatch
    from cupyops.core.placement import device_context
    seen = []

    class FakeDevice:
        def __init__(self, *args):
            seen.append(args)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    monkeypatch.setattr(cupy.cuda, "Device", FakeDevice)
    device_context(_dispatch.Placement("cuda", False, None))
    device_context(_dispatch.Placement("cuda", False, 1))
    assert seen == [(), (1,)]


def test_cupy_strides_not_element_aligned_are_refused():
    cupy = _cupy_or_skip()
    from cupy.cuda import memory
    from cupyops.core.arrays import check_cupy_alignment
    host = np.zeros(4096, np.uint8)
    mem = memory.UnownedMemory(host.ctypes.data, host.nbytes, host, 0)
    ptr = memory.MemoryPointer(mem, 0)
    # float64 stepping by 12 bytes (a [:, :2] view of float32 data seen as float64)
    bad = cupy.ndarray((4, 1), "float64", memptr=ptr, strides=(12, 8))
    with pytest.raises(ValueError, match="strides"):
        check_cupy_alignment(bad, "x", "count_nonzero")
    # a unit dimension's stride is never used
    check_cupy_alignment(cupy.ndarray((1, 4), "float64", memptr=ptr, strides=(12, 8)),
                               "x", "argmax")
    # complex64 at a stride of 12 is element-aligned (4 bytes): taken (narrow loads / a copy
    # through its real view)
    check_cupy_alignment(cupy.ndarray((4,), "complex64", memptr=ptr, strides=(12,)),
                               "x", "argmax")


def test_simt_checks_whole_vector_loads_of_the_kernels():
    """argreduce's vector loads (after cuo::vec_align_check) are checked as one access of the whole vector:
    a plan whose vector width the data pointer does not allow would be reported, even where the
    host compiler splits the copy."""
    import cupyops.simt as simt
    src = r'''
#include "common.cuh"
extern "C" __global__ void k(const unsigned char* x, unsigned long long* out, int off) {
    cuo::vec_align_check<cuo::vec_bytes<16>>(x + off);
    const cuo::vec_bytes<16> v = *reinterpret_cast<const cuo::vec_bytes<16>*>(x + off);
    out[0] = v.w[0] + v.w[1];
}
'''
    from cupyops.core import modules as _modules
    code = _modules.inline_includes(src, "t.cu")
    fn = simt.RawModule(code=code).get_function("k")
    x = np.zeros(64, np.uint8)
    x = x[-x.ctypes.data % 16:][:32]
    out = np.zeros(1, np.uint64)
    fn((1,), (1,), (x, out, np.int32(0)))
    with pytest.raises(simt.SimtError, match="misaligned address"):
        fn((1,), (1,), (x, out, np.int32(8)))
