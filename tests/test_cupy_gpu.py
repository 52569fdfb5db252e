"""CuPy arrays on a real GPU. Every test here needs a CUDA device and skips without one."""
import numpy as np
import pytest

import cupyops
from cupyops.testing import recording

pytestmark = pytest.mark.gpu


@pytest.fixture
def cp():
    import cupy
    return cupy


def test_cupy_in_cupy_out(cp):
    x = cp.asarray(np.array([[1, 2, 3], [3, 0, 4], [2, 5, 2]], np.float32))
    r = cupyops.argmin(x)
    assert isinstance(r, cp.ndarray) and r.shape == () and int(r) == 4
    h = cupyops.hardmax(x, axis=0)
    assert isinstance(h, cp.ndarray)
    np.testing.assert_array_equal(h.get(), cupyops.hardmax(x.get(), axis=0))


def test_other_device_with_cupy_input_is_refused(cp):
    x = cp.zeros(3, cp.float32)
    for bad in ("cpu", "simt", "cuda:7"):
        with pytest.raises(ValueError, match="hidden transfers"):
            cupyops.argmax(x, device=bad)


def test_fixed_size_nonzero_has_no_host_read(cp):
    x = cp.asarray((np.arange(4096) % 7 == 0).astype(np.float32))
    with recording() as t:
        coords, count = cupyops.nonzero_coordinates(x, size=100)
    assert t.d2h_reads == 0 and isinstance(count, cp.ndarray)
    with recording() as t:
        cupyops.argwhere(x)
    assert t.d2h_reads == 1


@pytest.mark.parametrize("op", ["argmax", "argmin"])
@pytest.mark.parametrize("axis", [None, 0, 1, (0, 2)])
def test_cuda_matches_numpy_path(cp, op, axis):
    rng = np.random.default_rng(0)
    x = rng.integers(0, 3, (33, 1025, 3)).astype(np.float32)
    for tie in ("first", "last"):
        want = getattr(cupyops, op)(x, axis=axis, tie=tie)
        got = getattr(cupyops, op)(cp.asarray(x), axis=axis, tie=tie).get()
        np.testing.assert_array_equal(got, want)
        got2 = getattr(cupyops, op)(x, axis=axis, tie=tie, device="cuda")
        assert isinstance(got2, np.ndarray)
        np.testing.assert_array_equal(got2, want)


# ------------------------------------------------------------------------------------------
# Streams, CUDA-graph capture, several GPUs
# ------------------------------------------------------------------------------------------

SPLIT = {"min_split_elements": 0, "min_work_per_thread": 1, "min_block_team_vecs": 64,
         "min_scratch_ratio": 0}


def _data(rng):
    x = rng.integers(0, 3, (64, 4096)).astype(np.float32)
    mask = (rng.random((256, 512)) < 0.01).astype(np.float32)
    return x, mask


@pytest.mark.parametrize("with_workspace", [True, False])
def test_graph_capture_and_replay(cp, monkeypatch, with_workspace):
    """argmax split across blocks and nonzero_coordinates(size=) captured on a non-default
    stream, replayed with new data and other allocations in between: every replay is right."""
    from cupyops.ops.argreduce import launch as G
    from cupyops.ops.argreduce import plan as GP
    monkeypatch.setattr(GP, "PLAN_OPTIONS", dict(SPLIT))
    rng = np.random.default_rng(0)
    hx, hmask = _data(rng)
    x, mask = cp.asarray(hx), cp.asarray(hmask)
    idx = cp.empty((4096,), cp.int64)
    coords, count = cp.empty((2000, 2), cp.int64), cp.empty((), cp.int64)
    cupyops.precompile(device="cuda")
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        ws = cupyops.Workspace(1 << 22, device="cuda") if with_workspace else None

        def calls():
            cupyops.argmax(x, axis=0, out=idx, workspace=ws)
            cupyops.nonzero_coordinates(mask, size=2000, fill_value=-1, out=(coords, count),
                                        workspace=ws)
        with recording() as t:
            calls()                                  # warm-up: plans, module loads, arena
        assert t.plans[0].passes == 2                # the split plan is what gets captured
        stream.synchronize()
        stream.begin_capture()
        calls()
        graph = stream.end_capture()
    for rep in range(4):
        hx, hmask = _data(rng)
        x[...] = cp.asarray(hx)
        mask[...] = cp.asarray(hmask)
        junk = [cp.full((1 << 20,), rep, cp.uint8) for _ in range(4)]   # the pool moves on
        cp.cuda.Device().synchronize()
        graph.launch(stream)
        stream.synchronize()
        np.testing.assert_array_equal(idx.get(), np.argmax(hx, axis=0), err_msg=f"replay {rep}")
        want = np.argwhere(hmask)
        assert int(count.get()) == len(want)
        got = coords.get()
        assert len(want) < 2000                      # the fill rows are checked too
        np.testing.assert_array_equal(got[:len(want)], want)
        assert (got[len(want):] == -1).all()
        del junk


def test_non_default_stream(cp):
    rng = np.random.default_rng(1)
    hx, hmask = _data(rng)
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        x, mask = cp.asarray(hx), cp.asarray(hmask)
        r = cupyops.argmin(x, axis=1, tie="last")
        c, n = cupyops.nonzero_coordinates(mask, size=5000)
        a = cupyops.argwhere(mask)
        k = cupyops.count_nonzero(mask, axis=0)
    stream.synchronize()
    np.testing.assert_array_equal(r.get(), cupyops.argmin(hx, axis=1, tie="last"))
    np.testing.assert_array_equal(a.get(), np.argwhere(hmask))
    np.testing.assert_array_equal(k.get(), np.count_nonzero(hmask, axis=0))
    assert int(n.get()) == len(np.argwhere(hmask))


def test_workspace_bound_to_its_stream(cp):
    x = cp.zeros((8, 8), cp.float32)
    ws = cupyops.Workspace(1 << 16)
    cupyops.argmax(x, axis=0, workspace=ws)
    with cp.cuda.Stream(non_blocking=True):
        with pytest.raises(ValueError, match="stream"):
            cupyops.argmax(x, axis=0, workspace=ws)
    small = cupyops.Workspace(8)
    with pytest.raises(ValueError, match="bytes of scratch"):
        cupyops.nonzero_coordinates(cp.ones(1 << 20, cp.float32), size=4, workspace=small)


def test_misaligned_cupy_input_is_refused(cp):
    raw = cp.zeros(2 * 1000 + 2, cp.float32)
    ok = raw[1:-1].view(cp.complex64)                 # 4-byte aligned complex64: fine
    assert ok.data.ptr % 8 == 4
    c = cupyops.count_nonzero(ok)
    assert int(c) == 0
    bad = cp.zeros(4001, cp.uint8)[1:].view(cp.float32)
    with pytest.raises(ValueError, match="not a multiple of 4"):
        cupyops.argmax(bad)


def test_two_gpus(cp, monkeypatch):
    if cp.cuda.runtime.getDeviceCount() < 2:
        pytest.skip("needs two GPUs")
    from cupyops.core import backend as _backend
    from cupyops.ops.argreduce import calls as _calls
    used = []
    real = _backend.backend_for
    monkeypatch.setattr(_calls, "backend_for",
                        lambda p: used.append(real(p).device_id) or real(p))
    hx = np.random.default_rng(2).integers(0, 3, (33, 1025)).astype(np.float32)
    want = np.argmax(hx, axis=1)
    with cp.cuda.Device(1):
        x1 = cp.asarray(hx)
        np.testing.assert_array_equal(cupyops.argmax(hx, axis=1, device="cuda"), want)
        ws1 = cupyops.Workspace(1 << 16)
    assert used[-1] == 1, "device='cuda' must mean CuPy's current device"
    r = cupyops.argmax(x1, axis=1)                      # current device 0, array on 1
    assert r.device.id == 1 and used[-1] == 1
    np.testing.assert_array_equal(r.get(), want)
    np.testing.assert_array_equal(cupyops.argmax(hx, axis=1, device="cuda:1"), want)
    assert used[-1] == 1
    with pytest.raises(ValueError, match="made for cuda:1"):
        cupyops.argmax(cp.asarray(hx), axis=1, workspace=ws1)
