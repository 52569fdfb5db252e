"""Errors that name their argument (issue 38): ``nonzero_coordinates(size=k)`` too large for an
array, for memory or for a launch is a ValueError naming ``size`` and the limit, on every
device, before anything is allocated; a 0-d input refuses a repeated axis as an n-d one does.

Before: ``size=2**64`` said "Maximum allowed dimension exceeded", ``size=2**62`` "array is too
big", ``size=2**40`` raised a bare MemoryError, simt's ``size=2**63`` "grid (...) is out of
range"; ``argmax(np.float32(3), axis=(0, 0))`` returned 0."""
import tracemalloc

import numpy as np
import pytest

import cupyops
import cupyops.testing
from cupyops.core import placement as _place
from _devices import KERNEL_DEVICES, device_kw, ops, to_device

DEVICES = ["cpu"] + KERNEL_DEVICES
MAX_INTP = np.iinfo(np.intp).max


def _raises_before_allocating(fn, match):
    """fn() raises ValueError matching ``match``, having allocated under 16 MiB (traced: a
    first call's imports and plans, nothing of the size asked)."""
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match=match) as info:
            fn()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20, peak
    return str(info.value)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("size", [2**64, 2**63, 2**70])
def test_a_size_over_the_largest_dimension(device, size):
    f = ops(device)
    x = np.ones(10, np.float32)
    msg = _raises_before_allocating(lambda: f.nonzero_coordinates(x, size=size), "size")
    assert f"at most {MAX_INTP}" in msg and str(size) in msg, msg


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape, dtype, size", [((10,), None, 2**62), ((2, 5), "int32", 2**61),
                                                ((), None, 2**62)])
def test_a_size_over_the_largest_array(device, shape, dtype, size):
    """(size, ndim) coordinates of more than 2**63 - 1 bytes (NumPy counts a 0-d input's
    (size, 0) as (size, 1))."""
    f = ops(device)
    x = np.ones(shape, np.float32)
    msg = _raises_before_allocating(lambda: f.nonzero_coordinates(x, size=size, dtype=dtype),
                                    r"size=\d+ is too large")
    row = max(len(shape), 1) * np.dtype(dtype or np.int64).itemsize
    assert "largest array" in msg and f"size must be at most {MAX_INTP // row}" in msg, msg
    ok = f.nonzero_coordinates(np.ones((), np.float32), size=MAX_INTP // 8)   # 0 bytes
    assert ok[0].shape == (MAX_INTP // 8, 0)


@pytest.mark.parametrize("device", DEVICES)
def test_a_size_over_the_memory(device):
    """2**40 rows of int64: 8 TiB, over any machine's memory here."""
    f = ops(device)
    x = np.ones((3, 4), np.float32)
    msg = _raises_before_allocating(lambda: f.nonzero_coordinates(x, size=2**40),
                                    r"size=1099511627776 is too large")
    assert "over the memory of" in msg and "size must be at most" in msg, msg
    limit = int(msg.rsplit("at most ", 1)[1])
    assert 0 < limit * 2 * 8 <= _place.memory_bytes(_place.place(to_device(x, device),
                                                                 device_kw(device).get("device"))[1])


def test_the_memory_limit_of_a_gpu_without_one(monkeypatch):
    """device='cuda': the GPU's memory is the limit (a GPU stands in: availability and memory
    patched; the check comes before anything touches the device)."""
    monkeypatch.setattr(_place, "require_available", lambda placement: None)
    monkeypatch.setattr(_place, "_gpu_memory", lambda device_id: 80 << 30)
    x = np.ones((3, 4), np.float32)
    msg = _raises_before_allocating(
        lambda: cupyops.nonzero_coordinates(x, size=2**33, device="cuda:0"), "size=8589934592")
    assert "over the memory of the GPU cuda:0" in msg and f"({min(80 << 30, _place._host_memory())} bytes)" in msg, msg


@pytest.mark.gpu
def test_the_memory_limit_on_the_gpu():
    import cupy
    total = cupy.cuda.runtime.getDeviceProperties(0)["totalGlobalMem"]
    for x in (np.ones(4, np.float32), cupy.ones(4, cupy.float32)):
        with pytest.raises(ValueError, match="over the memory of the GPU"):
            cupyops.nonzero_coordinates(x, size=total // 8 + 1, device="cuda:0"
                                        if isinstance(x, np.ndarray) else None)


@pytest.mark.parametrize("device", KERNEL_DEVICES)
def test_a_size_over_one_launch(device, monkeypatch):
    """With memory no limit, the fixed form's fill grid is: a ValueError naming size, not the
    grid (its limit: (2**31 - 1 - tiles) * fill rows, fill rows 16384 // ndim)."""
    monkeypatch.setattr(_place, "memory_bytes", lambda placement: None)
    f = ops(device)
    x = np.ones(4, np.float32)
    with cupyops.testing.dry_run():
        msg = _raises_before_allocating(
            lambda: f.nonzero_coordinates(x, size=2**46, dtype="int32"),
            "size=70368744177664 is too large for one launch")
    assert "grid's limit (2147483647)" in msg and "size must be at most" in msg, msg
    most = int(msg.split("at most ")[1].split()[0])
    assert most == (2**31 - 1 - 1) * 16384                # one scan tile


def test_a_dask_size_over_the_largest_dimension():
    da = pytest.importorskip("dask.array")
    x = da.ones((10,), chunks=5)
    with pytest.raises(ValueError, match=f"size must be at most {MAX_INTP}"):
        cupyops.nonzero_coordinates(x, size=2**64)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op", ["argmax", "argmin", "nanargmax", "nanargmin", "hardmax"])
@pytest.mark.parametrize("axis", [(0, 0), (0, -1), (-1, -1, 0)])
def test_a_repeated_axis_of_a_0d_input(device, op, axis):
    f = getattr(ops(device), op)
    x = np.float32(3)
    with pytest.raises(ValueError, match=r"axis .* repeats an axis"):
        f(np.asarray(x), axis=axis)
    assert int(np.asarray(f(np.asarray(x), axis=(0,))).reshape(-1)[0]) in (0, 1)
