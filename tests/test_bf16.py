"""bfloat16 (ml_dtypes) on every op: the kernels on simt (every layout case, tie x kind, NaN,
-0.0, split groups, schedules), the NumPy path, and the public API's rules; values are read as
bits, so the references are the exact float32 widening."""
import numpy as np
import pytest

ml_dtypes = pytest.importorskip("ml_dtypes")

import cupyops
from cupyops import simt
from cupyops.core import dtypes as _bf16
from cupyops.ops.argreduce import launch as G
from cupyops.ops.argreduce import plan as GP
from cupyops.ops.nonzero import launch as GN
from cupyops.core import trace as _trace
from cupyops.core.backend import get_backend
from test_gpu_argreduce import SPLIT_SMALL, fast_hardmax, fast_ref
from test_gpu_nonzero import check_all as nz_check_all, layouts
from _devices import KERNEL_DEVICES, device_kw, host, ops, to_device

BF16 = np.dtype(ml_dtypes.bfloat16)
BE = get_backend("simt")
KINDS, TIES = ("max", "min"), ("first", "last")
SCHEDULES = ("forward", "reverse", 4242)

# bit patterns: -inf, -1.5, -0.0, 0.0, 1.0, 2.0, +inf, a quiet NaN, a negative NaN with a
# payload, the smallest subnormal, and its negative
POOL_BITS = np.array([0xFF80, 0xBFC0, 0x8000, 0x0000, 0x3F80, 0x4000, 0x7F80, 0x7FC0, 0xFFC1,
                      0x0001, 0x8001], np.uint16)


def tiny_bf16(rng, shape, nan=0.02):
    """Values from a few bf16 bit patterns (ties everywhere), NaNs rarely."""
    pick = rng.integers(0, 7, shape)
    pick = np.where(rng.random(shape) < 0.1, rng.integers(9, 11, shape), pick)
    pick = np.where(rng.random(shape) < nan, rng.integers(7, 9, shape), pick)
    return POOL_BITS[pick].view(BF16)


def f32(x):
    return _bf16.widen(x)


def check_kernels(x, axes, hardmax=True):
    cases = set()
    for kind in KINDS:
        for tie in TIES:
            with _trace.recording() as t:
                r = G.argreduce(BE, x, tuple(axes), kind=kind, tie=tie,
                                index_dtype=np.dtype(np.int64))
            np.testing.assert_array_equal(r, fast_ref(f32(x), axes, kind, tie),
                                          err_msg=f"{kind} {tie} {t.plans[0]}")
            cases.add(t.plans[0].case)
    if hardmax:
        for tie in TIES:
            h = G.hardmax(BE, x, tuple(axes), tie=tie)
            assert h.dtype == BF16 and h.shape == x.shape
            np.testing.assert_array_equal(h.view(np.uint16),
                                          (fast_hardmax(f32(x), axes, tie) * 0x3F80).astype(np.uint16))
    return cases


def test_widening_is_exact():
    bits = np.arange(1 << 16, dtype=np.uint16)
    w = _bf16.widen(bits.view(BF16))
    np.testing.assert_array_equal(w, bits.view(BF16).astype(np.float32))
    assert np.isnan(w[POOL_BITS[7:9]]).all()


def test_kernels_every_case(monkeypatch):
    rng = np.random.default_rng(1)
    a = tiny_bf16(rng, (9, 70))
    assert check_kernels(a, (1,)) == {"row"}
    assert check_kernels(np.ascontiguousarray(a.T), (0,)) == {"column"}
    assert check_kernels(a[::-1, ::-2], (1,)) == {"general"}
    assert check_kernels(a, (0, 1)) == {"row"}
    monkeypatch.setattr(GP, "PLAN_OPTIONS", dict(SPLIT_SMALL))
    assert check_kernels(tiny_bf16(rng, (4099,)), (0,)) == {"split"}
    assert check_kernels(np.ascontiguousarray(a.T), (0,)) == {"split"}


def test_compact_partials(monkeypatch):
    """Split plans keep bf16 partial keys in 2 bytes (NaN's all-ones key truncates above every
    number's) and relative indices in 1 or 2: NaN, infinities and ties across chunks."""
    monkeypatch.setattr(GP, "PLAN_OPTIONS", dict(SPLIT_SMALL))
    rng = np.random.default_rng(2)
    widths = set()
    for x, axes in ((tiny_bf16(rng, (1025, 8), nan=0.001), (0,)),
                    (tiny_bf16(rng, (3, 1025), nan=0.0), (1,)),
                    (tiny_bf16(rng, (1025, 8))[::-1], (0,))):
        with _trace.recording() as t:
            G.argreduce(BE, x, axes, kind="max", tie="first", index_dtype=np.dtype(np.int64))
        plan = t.plans[0]
        assert plan.case == "split" and plan.key_itemsize == 2, plan
        widths.add(plan.pidx_itemsize)
        assert check_kernels(x, axes) == {"split"}
    assert widths >= {1, 2}


@pytest.mark.parametrize("schedule", SCHEDULES, ids=str)
def test_kernels_schedules(schedule, monkeypatch):
    x = tiny_bf16(np.random.default_rng(6), (4, 1500))
    with simt.schedule(schedule):
        check_kernels(x, (1,), hardmax=False)
        check_kernels(x[:, :40], (1,))
        monkeypatch.setattr(GP, "PLAN_OPTIONS", dict(SPLIT_SMALL))
        assert check_kernels(x, (0, 1), hardmax=False) == {"split"}


def test_nan_and_signed_zero_rules():
    # rows: ties of 0.0 and -0.0; NaN of both signs and payloads; infinities
    bits = np.array([[0x0000, 0x8000, 0x3F80, 0x7FC0, 0x3F80, 0xFFC1],
                     [0x8000, 0x0000, 0x8000, 0x0000, 0xBF80, 0xBF80],
                     [0x7FC0, 0x7F80, 0xFF80, 0x7FC1, 0x4040, 0x4040]], np.uint16)
    x = bits.view(BF16)
    want = {("max", "first"): [3, 0, 0], ("max", "last"): [5, 3, 3],
            ("min", "first"): [3, 4, 0], ("min", "last"): [5, 5, 3]}
    for device in ["cpu"] + KERNEL_DEVICES:
        o = ops(device)
        for (kind, tie), w in want.items():
            f = o.argmax if kind == "max" else o.argmin
            np.testing.assert_array_equal(f(x, axis=1, tie=tie), w, err_msg=device)
        np.testing.assert_array_equal(o.nanargmax(x, axis=1), [2, 0, 1])
        np.testing.assert_array_equal(o.nanargmin(x, axis=1, tie="last"), [1, 5, 2])
        with pytest.raises(ValueError, match="All-NaN"):
            o.nanargmax(np.array([0x7FC0, 0xFFC1], np.uint16).view(BF16))


def test_nonzero_kernels_layouts():
    rng = np.random.default_rng(3)
    a = tiny_bf16(rng, (5, 37))
    for name, v in layouts(a).items():
        assert nz_check_all(BE, v) == np.count_nonzero(f32(v)), name
    # -0.0 is zero, NaN and subnormals are nonzero
    x = np.array([0x8000, 0x0000, 0x7FC0, 0x0001, 0x8001], np.uint16).view(BF16)
    np.testing.assert_array_equal(GN.argwhere(BE, x, np.dtype(np.int64)).ravel(), [2, 3, 4])


@pytest.mark.parametrize("device", ["cpu"] + KERNEL_DEVICES)
def test_public_api(device):
    rng = np.random.default_rng(4)
    x = tiny_bf16(rng, (6, 33))
    ref = f32(x)
    o = ops(device)
    for axis in (None, 0, 1, (0, 1)):
        for tie in TIES:
            assert np.array_equal(o.argmax(x, axis=axis, tie=tie),
                                  cupyops.argmax(ref, axis=axis, tie=tie, device="cpu"))
            assert np.array_equal(o.argmin(x, axis=axis, tie=tie),
                                  cupyops.argmin(ref, axis=axis, tie=tie, device="cpu"))
    h = o.hardmax(x, axis=1, tie="last")
    assert h.dtype == BF16
    np.testing.assert_array_equal(h.astype(np.float32), cupyops.hardmax(ref, axis=1, tie="last"))
    out = np.full(x.shape, 7, BF16)
    assert o.hardmax(x, axis=0, out=out) is out
    np.testing.assert_array_equal(out.astype(np.float32), cupyops.hardmax(ref, axis=0))
    np.testing.assert_array_equal(o.argwhere(x), np.argwhere(ref))
    np.testing.assert_array_equal(o.count_nonzero(x, axis=0), np.count_nonzero(ref, axis=0))
    for g, w in zip(o.nonzero(x), np.nonzero(ref)):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("device", KERNEL_DEVICES)
def test_input_untouched_and_errors(device):
    x = tiny_bf16(np.random.default_rng(5), (4, 9))
    keep = x.view(np.uint16).copy()
    xd = to_device(x, device)          # the call's own input (a CuPy array for CuPy input)
    cupyops.hardmax(xd, **device_kw(device))
    cupyops.argmax(x, axis=0)
    np.testing.assert_array_equal(x.view(np.uint16), keep)
    np.testing.assert_array_equal(host(xd.view(np.uint16)), keep)
    with pytest.raises(TypeError, match="out has dtype bfloat16"):
        cupyops.argmax(x, axis=0, out=np.empty(9, BF16))
    with pytest.raises(TypeError, match="bfloat16"):     # the supported list names it
        cupyops.argmax(np.zeros(3, "S2"))


def test_registered_for_kernels():
    from cupyops.core import modules as _modules
    assert _modules.ctype(BF16) == "cupyops_bfloat16"
    from cupyops.ops.argreduce.family import DTYPES
    from cupyops.ops.nonzero.family import NONZERO_DTYPES
    assert BF16 in DTYPES and BF16 in NONZERO_DTYPES
