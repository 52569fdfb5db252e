"""argmin / argmax / hardmax kernels (cupyops.ops.argreduce.launch) run on the CPU through the SIMT
backend, against references: every dtype, each layout case (checked through _trace), tie x NaN
x kind, group sizes around warp and block multiples, groups split across blocks, several thread
schedules, 64-bit indexing on small inputs and on offsets past 2**31, the one-hot output, the
launch count and the memory traffic."""
import math

import numpy as np
import pytest

from cupyops.ops.argreduce import launch as G

from cupyops.ops.argreduce import plan as GP
from cupyops import simt
from cupyops.core import trace as _trace
from cupyops.core.backend import get_backend
from ref_argreduce import ref_argreduce, ref_hardmax
from _devices import KERNEL_DEVICES, ops, workspace

BE = get_backend("simt")
DTYPES = [np.dtype(t) for t in ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16",
                                "uint32", "uint64", "float16", "float32", "float64", "complex64",
                                "complex128", "datetime64[D]", "timedelta64[ns]")]
NAN_DTYPES = [np.dtype(t) for t in ("float16", "float32", "float64", "complex64", "complex128")]
INDEX_DTYPES = [np.dtype(t) for t in ("int8", "int16", "int32", "int64", "uint8", "uint16",
                                      "uint32", "uint64")]
KINDS = ("max", "min")
TIES = ("first", "last")
SCHEDULES = ("forward", "reverse", 12345)
SPLIT_SMALL = {"min_split_elements": 0, "min_work_per_thread": 1, "min_block_team_vecs": 64,
               "min_scratch_ratio": 0}


# ---------------------------------------------------------------------------- helpers

def tiny_values(rng, shape, dtype):
    """Values from a small set (ties everywhere), with the type's extremes; floats add
    -0.0/0.0, infinities and a few NaNs."""
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, shape).astype(bool)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        pool = np.array([info.min, info.min + 1, 0, 1, 2, info.max - 1, info.max], dtype=object)
        return pool[rng.integers(0, len(pool), shape)].astype(dtype)
    if dtype.kind in "mM":
        # int64 extremes next to NaT (INT64_MIN), which is the extreme of both kinds
        i64 = np.iinfo(np.int64)
        pool = np.array([i64.min + 1, i64.min + 2, -1, 0, 0, 1, i64.max - 1, i64.max], np.int64)
        v = pool[rng.integers(0, len(pool), shape)]
        v[rng.random(shape) < 0.02] = i64.min
        return v.view(dtype)
    parts = np.array([-np.inf, -1.5, -0.0, 0.0, 0.0, 2.0, 2.0, np.inf])
    if dtype.kind == "c":
        # few distinct (real, imag) pairs so that ties in one part and both parts happen; a NaN
        # in either part
        v = np.empty(shape, dtype)
        v.real = parts[rng.integers(2, 6, shape)] if shape else parts[3]
        v.imag = parts[rng.integers(0, len(parts), shape)]
        v.real[rng.random(shape) < 0.01] = np.nan
        v.imag[rng.random(shape) < 0.01] = np.nan
        return v
    pool = parts.astype(dtype)
    v = pool[rng.integers(0, len(pool), shape)]
    v[rng.random(shape) < 0.02] = np.nan
    return v


def fast_ref(x, axes, kind, tie):
    """Vectorised reference (cross-checked with the brute-force ref_argreduce below):
    NumPy's argmax/argmin already give the first NaN and treat -0.0 == 0.0; "last" is the
    first on the reversed group."""
    axes = tuple(axes)
    kept = [a for a in range(x.ndim) if a not in axes]
    n_out = math.prod(x.shape[a] for a in kept)
    g = math.prod(x.shape[a] for a in axes)
    y = np.transpose(x, kept + list(axes)).reshape(n_out, g)
    if y.dtype == bool:
        y = y.astype(np.int8)
    elif y.dtype == np.float16:
        y = y.astype(np.float32)
    f = np.argmax if kind == "max" else np.argmin
    if y.dtype.kind == "f":
        nan = np.isnan(y)
        y = np.where(nan, np.inf if kind == "max" else -np.inf, y)
        # NaN beats infinities: give NaN rows their first/last NaN
    if tie == "first":
        r = f(y, axis=1)
    else:
        r = g - 1 - f(y[:, ::-1], axis=1)
    if x.dtype.kind == "f":
        has = nan.any(axis=1)
        first = np.argmax(nan, axis=1)
        lastn = g - 1 - np.argmax(nan[:, ::-1], axis=1)
        r = np.where(has, first if tie == "first" else lastn, r)
    return r.reshape([x.shape[a] for a in kept]).astype(np.int64)


def fast_hardmax(x, axes, tie):
    idx = fast_ref(x, axes, "max", tie)
    kept = [a for a in range(x.ndim) if a not in axes]
    g = math.prod(x.shape[a] for a in axes)
    oh = (np.arange(g)[None, :] == idx.reshape(-1, 1))
    perm = kept + list(axes)
    oh = oh.reshape([x.shape[a] for a in perm])
    return np.transpose(oh, np.argsort(perm)).astype(x.dtype)


def run(x, axes, kind="max", tie="first", index_dtype=np.int64, **kw):
    with _trace.recording() as t:
        r = G.argreduce(BE, x, tuple(axes), kind=kind, tie=tie, index_dtype=np.dtype(index_dtype),
                        **kw)
    return r, t


def run_hm(x, axes, tie="first", **kw):
    with _trace.recording() as t:
        r = G.hardmax(BE, x, tuple(axes), tie=tie, **kw)
    return r, t


def check_all(x, axes, *, hardmax=True, index_dtype=np.int64, **kw):
    """Every kind x tie against the reference; returns the set of cases that ran."""
    cases = set()
    for kind in KINDS:
        for tie in TIES:
            r, t = run(x, axes, kind, tie, index_dtype, **kw)
            want = fast_ref(x, axes, kind, tie)
            assert r.dtype == np.dtype(index_dtype) and r.shape == want.shape
            np.testing.assert_array_equal(r.astype(np.int64), want,
                                          err_msg=f"{kind} {tie} {t.plans[0]}")
            assert len(t.launches) == t.plans[0].passes <= 2 and t.d2h_reads == 0
            cases.add(t.plans[0].case)
    if hardmax and x.dtype.kind not in "mM":
        for tie in TIES:
            r, t = run_hm(x, axes, tie, **kw)
            assert r.dtype == x.dtype and r.shape == x.shape
            np.testing.assert_array_equal(r, fast_hardmax(x, axes, tie), err_msg=f"hardmax {tie}")
            assert len(t.launches) <= 2 and t.d2h_reads == 0
    return cases


def aligned(a, alignment=256):
    """A copy of ``a`` whose data starts on an ``alignment``-byte boundary (as CuPy's are)."""
    raw = np.empty(a.nbytes + alignment, np.uint8)
    start = -raw.__array_interface__["data"][0] % alignment
    out = raw[start:start + a.nbytes].view(a.dtype).reshape(a.shape)
    out[...] = a
    return out


@pytest.fixture
def split_small(monkeypatch):
    monkeypatch.setattr(GP, "PLAN_OPTIONS", dict(SPLIT_SMALL))


# ---------------------------------------------------------------------------- the reference

def test_fast_reference_matches_brute_force():
    rng = np.random.default_rng(0)
    for dt in DTYPES:
        x = tiny_values(rng, (3, 4, 5), dt)
        for axes in ((0,), (1, 2), (0, 2), (0, 1, 2)):
            for kind in KINDS:
                for tie in TIES:
                    np.testing.assert_array_equal(fast_ref(x, axes, kind, tie),
                                                  ref_argreduce(x, axes, kind, tie))
            np.testing.assert_array_equal(fast_hardmax(x, axes, "last"),
                                          ref_hardmax(x, axes, "last"))


# ---------------------------------------------------------------------------- dtypes

@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_every_dtype_every_case(dtype, monkeypatch):
    rng = np.random.default_rng(1)
    a = tiny_values(rng, (9, 70), dtype)
    assert check_all(a, (1,)) == {"row"}
    assert check_all(np.ascontiguousarray(a.T), (0,)) == {"column"}
    assert check_all(a[::-1, ::-2], (1,)) == {"general"}
    assert check_all(a, (0, 1)) == {"row"}
    b = tiny_values(rng, (4099,), dtype)
    monkeypatch.setattr(GP, "PLAN_OPTIONS", dict(SPLIT_SMALL))
    assert check_all(b, (0,)) == {"split"}
    assert check_all(np.ascontiguousarray(a.T), (0,)) == {"split"}


def test_nan_and_signed_zero_rules():
    x = np.array([[0.0, -0.0, 1.0, np.nan, 1.0, np.nan],
                  [-0.0, 0.0, -0.0, 0.0, -1.0, -1.0],
                  [np.nan, np.inf, -np.inf, np.nan, 3.0, 3.0]], np.float32)
    for dt in (np.float16, np.float32, np.float64):
        y = x.astype(dt)
        np.testing.assert_array_equal(run(y, (1,), "max", "first")[0], [3, 0, 0])
        np.testing.assert_array_equal(run(y, (1,), "max", "last")[0], [5, 3, 3])
        np.testing.assert_array_equal(run(y, (1,), "min", "first")[0], [3, 4, 0])
        np.testing.assert_array_equal(run(y, (1,), "min", "last")[0], [5, 5, 3])


def test_subnormals_and_extremes_are_exact():
    tiny = np.float32(1e-45)
    x = np.array([[0.0, tiny, -tiny, 0.0]], np.float32)
    assert run(x, (1,), "max")[0][0] == 1 and run(x, (1,), "min")[0][0] == 2
    big = np.array([[2**63 - 2, 2**63 - 1, 2**63 - 1, -2**63, -2**63 + 1]], np.int64)
    assert run(big, (1,), "max", "first")[0][0] == 1 and run(big, (1,), "max", "last")[0][0] == 2
    assert run(big, (1,), "min")[0][0] == 3
    u = np.array([[2**64 - 2, 2**64 - 1, 0, 2**63]], np.uint64)
    assert run(u, (1,), "max")[0][0] == 1 and run(u, (1,), "min")[0][0] == 2


# ---------------------------------------------------------------------------- layouts

def _layout_cases():
    rng = np.random.default_rng(2)
    c = tiny_values(rng, (6, 7, 40), np.float32)
    f = np.asfortranarray(c)
    return [
        ("C last", c, (2,), "row"),
        ("C last two", c, (1, 2), "row"),
        ("C first", c, (0,), "column"),
        ("C middle", c, (1,), "column"),
        ("C outer two", c, (0, 2), "row"),
        ("C all", c, (0, 1, 2), "row"),
        ("F first", f, (0,), "row"),
        ("F last", f, (2,), "column"),
        ("F all", f, (0, 1, 2), "row"),
        ("F first two", f, (0, 1), "row"),
        ("transposed", c.transpose(2, 0, 1), (0,), "row"),
        ("transposed kept inner", c.transpose(1, 2, 0), (0, 2), "column"),
        ("sliced", c[:, ::2, 1::3], (2,), "general"),
        ("sliced column", c[::2, :, ::2], (0,), "general"),
        ("negative", c[::-1, :, ::-1], (2,), "row"),
        ("negative strided", c[:, ::-1, ::-3], (1, 2), "general"),
        ("broadcast reduced", np.broadcast_to(c[:, :1, :], (6, 7, 40)), (1,), "column"),
        ("broadcast reduced all", np.broadcast_to(c[:1, :, :1], (6, 7, 40)), (0, 1, 2), "general"),
        ("broadcast kept", np.broadcast_to(c[:1], (6, 7, 40)), (2,), "row"),
        ("overlapping", np.lib.stride_tricks.as_strided(c, (30, 20), (8, 4)), (1,), "row"),
        ("size-one dims", c.reshape(6, 1, 7, 1, 40), (1, 4), "row"),
    ]


LAYOUT_CASES = _layout_cases()


@pytest.mark.parametrize("name,x,axes,case", LAYOUT_CASES, ids=[c[0] for c in LAYOUT_CASES])
def test_layout_cases(name, x, axes, case):
    assert check_all(x, axes) == {case}


def test_broadcast_reduced_axis_is_not_read():
    base = np.arange(6, dtype=np.float32).reshape(6, 1)
    x = np.broadcast_to(base, (6, 1000))
    with simt.record_traffic() as rec:
        r, t = run(x, (1,), "max", "last")
    np.testing.assert_array_equal(r, np.full(6, 999))
    assert t.plans[0].group == 1
    assert rec.total("requested_bytes_load") == 6 * 4


def test_eight_dims_a_side():
    rng = np.random.default_rng(3)
    x = tiny_values(rng, (2, 3) * 8, np.int16)
    axes = tuple(range(0, 16, 2))
    r, t = run(x, axes, "max", "last")
    np.testing.assert_array_equal(r, fast_ref(x, axes, "max", "last"))
    assert len(t.plans[0].red) == 8 and len(t.plans[0].kept) == 8
    with pytest.raises(ValueError, match="at most 8 dimensions"):
        G.argreduce(BE, tiny_values(rng, (2,) * 18, np.int8), tuple(range(0, 18, 2)),
                    kind="max", tie="first", index_dtype=np.int64)


def test_random_layouts():
    rng = np.random.default_rng(4)
    for it in range(60):
        ndim = int(rng.integers(1, 5))
        shape = tuple(int(n) for n in rng.integers(1, 7, ndim))
        dt = DTYPES[it % len(DTYPES)]
        x = tiny_values(rng, tuple(n * 2 for n in shape), dt)
        x = x[tuple(slice(None, None, int(rng.choice([1, 2, -1, -2]))) for _ in shape)]
        x = np.transpose(x, rng.permutation(ndim))
        if rng.random() < 0.3:
            a = int(rng.integers(0, ndim))
            x = np.broadcast_to(np.take(x, [0], axis=a), x.shape)
        axes = tuple(sorted(int(a) for a in rng.choice(ndim, int(rng.integers(1, ndim + 1)),
                                                       replace=False)))
        check_all(x, axes)


@pytest.mark.parametrize("dtype", ["bool", "int8", "uint8", "int16", "uint16", "float16"])
def test_column_loads_several_groups_per_thread(dtype, monkeypatch):
    rng = np.random.default_rng(14)
    itemsize = np.dtype(dtype).itemsize
    a = aligned(tiny_values(rng, (37, 5, 24), dtype))
    for x, axes in ((a, (0,)), (a, (0, 1)), (a[:, ::-1, :], (1,))):
        r, t = run(x, axes)
        assert t.plans[0].case == "column" and t.plans[0].vec == 4 // itemsize
        assert check_all(x, axes) == {"column"}
    r, t = run(a[:, :, 1:], (0,))        # misaligned rows: one group per thread
    assert t.plans[0].vec == 1
    check_all(a[:, :, 1:], (0,))
    monkeypatch.setattr(GP, "PLAN_OPTIONS", dict(SPLIT_SMALL))
    b = aligned(tiny_values(rng, (700, 8), dtype))
    r, t = run(b, (0,))
    assert t.plans[0].case == "split" and t.plans[0].kernel == "col" and t.plans[0].vec > 1
    assert check_all(b, (0,)) == {"split"}


# ---------------------------------------------------------------------------- sizes, splits

@pytest.mark.parametrize("n", [31, 32, 33, 1023, 1025])
@pytest.mark.parametrize("dtype", ["float32", "int8", "float64"])
def test_group_sizes(n, dtype, monkeypatch):
    rng = np.random.default_rng(n)
    x = tiny_values(rng, (3, n), dtype)
    check_all(x, (1,))
    check_all(np.ascontiguousarray(x.T), (0,))
    check_all(np.asfortranarray(x), (0, 1), hardmax=False)
    monkeypatch.setattr(GP, "PLAN_OPTIONS", dict(SPLIT_SMALL))
    cases = check_all(x, (1,)) | check_all(np.ascontiguousarray(x.T), (0,))
    if n > 256:
        assert cases == {"split"}


def test_split_over_many_blocks(split_small):
    rng = np.random.default_rng(5)
    x = tiny_values(rng, (5000,), np.float32)
    r, t = run(x, (0,), "min", "last")
    assert t.plans[0].case == "split" and t.plans[0].nchunks >= 4 and len(t.launches) == 2
    np.testing.assert_array_equal(r, fast_ref(x, (0,), "min", "last"))
    h, t = run_hm(x.reshape(50, 100), (0, 1), "last")
    assert t.plans[0].case == "split" and len(t.launches) == 2
    np.testing.assert_array_equal(h, fast_hardmax(x.reshape(50, 100), (0, 1), "last"))


@pytest.mark.parametrize("schedule", SCHEDULES, ids=str)
def test_schedules(schedule, monkeypatch):
    rng = np.random.default_rng(6)
    x = tiny_values(rng, (4, 1500), np.float16)
    with simt.schedule(schedule):
        check_all(x, (1,))                                   # block teams
        check_all(np.ascontiguousarray(x.T), (0,))           # column combine across y
        check_all(x[:, :40], (1,))                           # warp teams
        monkeypatch.setattr(GP, "PLAN_OPTIONS", dict(SPLIT_SMALL))
        assert check_all(x, (0, 1)) == {"split"}
        assert check_all(np.ascontiguousarray(x.T), (0,)) == {"split"}


# ---------------------------------------------------------------------------- 64-bit indexing

def test_force_64bit_on_small_inputs(monkeypatch):
    rng = np.random.default_rng(7)
    x = tiny_values(rng, (5, 300), np.float32)
    for xx, axes in ((x, (1,)), (x, (0,)), (x[::-1, ::3], (0, 1))):
        r, t = run(xx, axes, "max", "last", force_64bit=True)
        assert t.plans[0].use_64bit and "long long" in t.launches[0][0]
        np.testing.assert_array_equal(r, fast_ref(xx, axes, "max", "last"))
        h, t = run_hm(xx, axes, "first", force_64bit=True)
        np.testing.assert_array_equal(h, fast_hardmax(xx, axes, "first"))
    monkeypatch.setattr(GP, "PLAN_OPTIONS", dict(SPLIT_SMALL))
    y = tiny_values(rng, (5, 1501), np.float32)
    for xx, axes in ((y, (0, 1)), (y.T, (0,)), (np.ascontiguousarray(y.T), (0,))):
        r, t = run(xx, axes, "min", "first", force_64bit=True)
        assert t.plans[0].case == "split" and t.plans[0].use_64bit
        np.testing.assert_array_equal(r, fast_ref(xx, axes, "min", "first"))
        h, t = run_hm(xx, axes, "last", force_64bit=True)
        np.testing.assert_array_equal(h, fast_hardmax(xx, axes, "last"))


@pytest.fixture(scope="module")
def big_buffer():
    # 2**31 + 4096 bytes, lazily allocated: only the pages written below take memory
    buf = np.zeros(2**31 + 4096, np.uint8)
    rng = np.random.default_rng(8)
    buf[:1000] = rng.integers(0, 5, 1000)
    buf[2**31:2**31 + 4096] = rng.integers(0, 5, 4096)
    return buf


def test_view_past_2_31_bytes(big_buffer):
    y = big_buffer[2**31:].view(np.float32)
    r, t = run(y, (0,), "max", "first")
    assert r == fast_ref(y, (0,), "max", "first")


def test_offsets_past_2_31_elements(big_buffer):
    x = np.lib.stride_tricks.as_strided(big_buffer, shape=(2, 1000), strides=(2**31, 1))
    x.flags.writeable = False
    for xx in (x, x[::-1], x[:, ::-1], x.T):
        dense = np.ascontiguousarray(xx)
        for axes in ((0,), (1,), (0, 1)):
            for kind in KINDS:
                r, t = run(xx, axes, kind, "last", np.uint32)
                assert t.plans[0].use_64bit
                np.testing.assert_array_equal(r, fast_ref(dense, axes, kind, "last"))
            h, t = run_hm(xx, axes, "first")
            np.testing.assert_array_equal(h, fast_hardmax(dense, axes, "first"))


# ---------------------------------------------------------------------------- outputs

@pytest.mark.parametrize("index_dtype", ["int32", "uint32", "int64", "uint64"])
def test_index_dtypes_written_directly(index_dtype):
    rng = np.random.default_rng(9)
    x = tiny_values(rng, (7, 50), np.int32)
    out = np.full((7,), 99, index_dtype)
    r, t = run(x, (1,), "max", "last", index_dtype, out=out)
    assert r is out and len(t.launches) == 1
    np.testing.assert_array_equal(out, fast_ref(x, (1,), "max", "last"))


def test_hardmax_fused_is_one_launch_and_writes_out():
    rng = np.random.default_rng(10)
    x = tiny_values(rng, (6, 5, 33), np.float32)
    for axes in ((2,), (0,), (0, 2), (1,)):
        out = np.full(x.shape, 7, x.dtype)
        r, t = run_hm(x, axes, "first", out=out)
        assert r is out and len(t.launches) == 1 and t.plans[0].passes == 1
        np.testing.assert_array_equal(out, fast_hardmax(x, axes, "first"))


@pytest.mark.parametrize("split", [False, True], ids=["fused", "split"])
@pytest.mark.parametrize("dtype", ["uint8", "float32", "complex128"])
def test_hardmax_writes_each_output_once_in_whole_sectors(dtype, split, monkeypatch):
    if split:
        monkeypatch.setattr(GP, "PLAN_OPTIONS", dict(SPLIT_SMALL))
    rng = np.random.default_rng(11)
    a = aligned(tiny_values(rng, (512, 64), dtype))
    for x, axes in ((a, (0,)), (a, (1,)), (a, (0, 1)), (a.reshape(64, 512), (1,))):
        out = aligned(np.zeros(x.shape, x.dtype))
        with simt.record_traffic() as rec:
            r, t = run_hm(x, axes, out=out)
        np.testing.assert_array_equal(out, fast_hardmax(x, axes, "first"))
        write = rec.launches[-1]     # the launch that writes the one-hot output
        p = t.plans[0]
        assert len(rec.launches) == p.passes
        # the one-launch decode also stores each block's partial (key, index) and draws its
        # ticket (a 4-byte atomic), one sector each, and its last block stores the 1 again
        # (a complex one as its real part)
        slots = p.n_out * p.nchunks if p.last_block else 0
        one = (x.itemsize // (2 if x.dtype.kind == "c" else 1)) if p.last_block else 0
        extra = slots * (p.key_itemsize + p.pidx_itemsize + 4) + p.n_out * one
        assert write.requested_bytes_store == x.nbytes + extra    # each output element once
        assert write.sectors_store == x.nbytes // 32 + 3 * slots + (p.n_out if one else 0), \
            (axes, p.case, write)


# ---------------------------------------------------------------------------- traffic

@pytest.mark.parametrize("dtype", ["uint8", "float16", "float32", "float64"])
def test_input_read_once_with_few_sectors(dtype, monkeypatch):
    rng = np.random.default_rng(12)
    a = aligned(tiny_values(rng, (64, 512), dtype))
    for x, axes in ((a, (1,)), (a, (0,)), (a, (0, 1)), (a.T, (0,)), (a.reshape(64, 32, 16), (0, 2))):
        with simt.record_traffic() as rec:
            _, t = run(x, axes)
        first = rec.launches[0]
        # (a one-launch decode's last block also loads the partials, and each block draws its
        # ticket: a 4-byte atomic)
        p = t.plans[0]
        slots = p.n_out * p.nchunks if p.last_block else 0
        assert first.requested_bytes_load == x.nbytes + slots * (p.key_itemsize
                                                                 + p.pidx_itemsize + 4)
        # every warp-wide load touches the fewest 32-byte sectors: the sum over warp loads is
        # the number of sectors of the input
        assert x.nbytes // 32 <= first.sectors_load <= x.nbytes // 32 + 3 * slots, (axes, first)


# ---------------------------------------------------------------------------- larger sweep

@pytest.mark.slow
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_larger_sweep(dtype):
    rng = np.random.default_rng(13)
    for shape, axes in (((64, 4099), (1,)), ((4099, 64), (0,)), ((3, 70000), (1,)),
                        ((70000, 3), (0,)), ((33, 65, 129), (0, 2)), ((1 << 20,), (0,))):
        x = tiny_values(rng, shape, dtype)
        check_all(x, axes)
        with simt.schedule(99):
            check_all(np.asfortranarray(x), axes, hardmax=False)


# ---------------------------------------------------------------------------- issue 13:
# complex, datetime, nanargmin/nanargmax, every index dtype, narrow complex loads

def run_nan(x, axes, kind="max", tie="first", index_dtype=np.int64, **kw):
    with _trace.recording() as t:
        r = G.argreduce(BE, x, tuple(axes), kind=kind, tie=tie,
                        index_dtype=np.dtype(index_dtype), skip_nan=True, **kw)
    return r, t


def check_nan(x, axes, **kw):
    """nanargmin/nanargmax, every kind x tie, against the brute-force reference (NaN skipped);
    one host read of the all-NaN flag for float/complex values, none otherwise. Returns the
    cases that ran."""
    cases = set()
    for kind in KINDS:
        for tie in TIES:
            want = ref_argreduce(x, axes, kind, tie, nan=True)
            r, t = run_nan(x, axes, kind, tie, **kw)
            np.testing.assert_array_equal(r, want, err_msg=f"nan{kind} {tie} {t.plans[0]}")
            assert t.d2h_reads == (1 if x.dtype.kind in "fc" else 0)
            assert len(t.launches) == t.plans[0].passes
            cases.add(t.plans[0].case)
    return cases


def nan_values(rng, shape, dtype, frac=0.3):
    """tiny_values with many NaN (but no all-NaN group for the shapes used)."""
    v = tiny_values(rng, shape, dtype)
    m = rng.random(shape) < frac
    if np.dtype(dtype).kind == "c":
        v.imag[m] = np.nan
    else:
        v[m] = np.nan
    return v


def test_complex_order_nan_and_signed_zero():
    for dt in (np.complex64, np.complex128):
        x = np.array([[1 + 1j, 1 + 2j, 1 + 2j, complex(2, -np.inf), 0j],
                      [-0.0 - 1j, 0.0 - 1j, -1j, complex(-0.0, -1.0), complex(-1, 5)],
                      [complex(np.nan, 0), 3, complex(0, np.nan), 3, complex(-np.inf, 0)],
                      [complex(1, np.inf), complex(np.inf, -np.inf), complex(np.inf, -np.inf),
                       1j, complex(-np.inf, -np.inf)]], dt)
        for kind in KINDS:
            for tie in TIES:
                np.testing.assert_array_equal(run(x, (1,), kind, tie)[0],
                                              ref_argreduce(x, (1,), kind, tie))
        np.testing.assert_array_equal(run(x, (1,), "max", "first")[0], [3, 0, 0, 1])
        np.testing.assert_array_equal(run(x, (1,), "max", "last")[0], [3, 3, 2, 2])
        np.testing.assert_array_equal(run(x, (1,), "min", "first")[0], [4, 4, 0, 4])
        np.testing.assert_array_equal(run_nan(x, (1,), "max", "last")[0], [3, 3, 3, 2])
        np.testing.assert_array_equal(run_nan(x, (1,), "min", "first")[0], [4, 4, 4, 4])
        h = run_hm(x, (1,), "first")[0]
        assert h.dtype == dt and h[0, 3] == 1 + 0j and np.count_nonzero(h) == 4
        assert h.imag.sum() == 0


def test_datetime_nat_is_the_extreme_and_not_skipped():
    i64 = np.iinfo(np.int64)
    raw = np.array([[5, i64.min, i64.max, i64.min, i64.min + 1],
                    [i64.max, i64.min + 1, i64.max, i64.min + 1, 0]], np.int64)
    for dt in ("datetime64[s]", "timedelta64[D]"):
        x = raw.view(dt)
        np.testing.assert_array_equal(run(x, (1,), "max", "first")[0], [1, 0])
        np.testing.assert_array_equal(run(x, (1,), "max", "last")[0], [3, 2])
        np.testing.assert_array_equal(run(x, (1,), "min", "first")[0], [1, 1])
        np.testing.assert_array_equal(run(x, (1,), "min", "last")[0], [3, 3])
        # nanarg* do not skip NaT, and make no host read
        r, t = run_nan(x, (1,), "min", "last")
        np.testing.assert_array_equal(r, [3, 3])
        assert t.d2h_reads == 0
        with pytest.raises(TypeError, match="datetime"):
            G.hardmax(BE, x, (1,), tie="first")
    # the int64 view with datetime=True is the API's form (CuPy has no datetime dtype)
    r, t = run(raw, (1,), "max", "first", datetime=True)
    np.testing.assert_array_equal(r, [1, 0])
    assert "cupyops_datetime" in t.launches[0][0]


@pytest.mark.parametrize("dtype", NAN_DTYPES, ids=str)
def test_nanarg_every_case(dtype, monkeypatch):
    rng = np.random.default_rng(21)
    a = nan_values(rng, (5, 70), dtype)
    assert check_nan(a, (1,)) == {"row"}
    assert check_nan(np.ascontiguousarray(a.T), (0,)) == {"column"}
    assert check_nan(a[::-1, ::-2], (1,)) == {"general"}
    monkeypatch.setattr(GP, "PLAN_OPTIONS", dict(SPLIT_SMALL))
    b = nan_values(rng, (3, 1101), dtype)
    assert check_nan(b, (1,)) == {"split"}
    assert check_nan(np.ascontiguousarray(b.T), (0,)) == {"split"}


@pytest.mark.parametrize("split", [False, True], ids=["fused", "split"])
@pytest.mark.parametrize("dtype", ["float16", "float32", "complex64", "complex128"])
def test_nanarg_all_nan_group_raises(dtype, split, monkeypatch):
    if split:
        monkeypatch.setattr(GP, "PLAN_OPTIONS", dict(SPLIT_SMALL))
    rng = np.random.default_rng(22)
    x = nan_values(rng, (4, 601), dtype)
    x[2] = np.nan
    cases = set()
    for xx, axes in ((x, (1,)), (np.ascontiguousarray(x.T), (0,)), (x, (0, 1))):
        if axes == (0, 1):
            xx = np.full_like(x, np.nan)
        for kind in KINDS:
            with _trace.recording() as t:
                with pytest.raises(ValueError, match="All-NaN slice encountered"):
                    G.argreduce(BE, xx, axes, kind=kind, tie="last", index_dtype=np.int64,
                                skip_nan=True)
            assert t.d2h_reads == 1
            cases.add(t.plans[0].case)
    assert ("split" in cases) == split
    # the flag is zeroed on every call: a clean call after an all-NaN one passes
    ok = nan_values(rng, (4, 601), dtype, frac=0.1)
    np.testing.assert_array_equal(run_nan(ok, (1,))[0], ref_argreduce(ok, (1,), "max", "first",
                                                                       nan=True))


@pytest.mark.parametrize("schedule", SCHEDULES, ids=str)
def test_new_dtypes_under_schedules(schedule, monkeypatch):
    rng = np.random.default_rng(23)
    with simt.schedule(schedule):
        for dt in ("complex64", "complex128", "timedelta64[ns]"):
            x = tiny_values(rng, (3, 1100), dt)
            check_all(x, (1,))
            check_all(np.ascontiguousarray(x.T), (0,))
        check_nan(nan_values(rng, (3, 300), "complex64"), (1,))
        monkeypatch.setattr(GP, "PLAN_OPTIONS", dict(SPLIT_SMALL))
        x = tiny_values(rng, (2, 1500), "complex128")
        assert check_all(x, (0, 1)) == {"split"}
        assert check_nan(nan_values(rng, (2, 1501), "float32"), (1,)) == {"split"}


@pytest.mark.parametrize("n", [1, 31, 32, 33, 1023, 1025])
@pytest.mark.parametrize("dtype", ["complex64", "complex128", "datetime64[ms]"])
def test_new_dtypes_group_sizes(n, dtype, monkeypatch):
    rng = np.random.default_rng(n + 100)
    x = tiny_values(rng, (3, n), dtype)
    check_all(x, (1,))
    check_all(np.ascontiguousarray(x.T), (0,))
    check_all(x[:, ::-1], (1,))
    monkeypatch.setattr(GP, "PLAN_OPTIONS", dict(SPLIT_SMALL))
    cases = check_all(x, (1,)) | check_all(np.ascontiguousarray(x.T), (0,))
    if n > 256:
        assert cases == {"split"}


def test_new_dtypes_force_64bit(monkeypatch):
    rng = np.random.default_rng(24)
    for dt in ("complex64", "complex128", "timedelta64[s]"):
        x = tiny_values(rng, (5, 300), dt)
        for xx, axes in ((x, (1,)), (x, (0,)), (x[::-1, ::3], (0, 1))):
            r, t = run(xx, axes, "max", "last", force_64bit=True)
            assert t.plans[0].use_64bit and "long long" in t.launches[0][0]
            np.testing.assert_array_equal(r, fast_ref(xx, axes, "max", "last"))
    y = nan_values(rng, (5, 300), "complex128")
    r, t = run_nan(y, (0, 1), "min", "last", force_64bit=True)
    assert t.plans[0].use_64bit
    np.testing.assert_array_equal(r, ref_argreduce(y, (0, 1), "min", "last", nan=True))


@pytest.mark.parametrize("index_dtype", INDEX_DTYPES, ids=str)
def test_every_index_dtype_stored_at_its_width(index_dtype, monkeypatch):
    """1- and 2-byte indices: neighbouring outputs are written by neighbouring threads; a wrong
    width would clobber them. Largest index that fits: 127 / 255 / 32767 / 65535."""
    rng = np.random.default_rng(25)
    info = np.iinfo(index_dtype)
    n = int(min(info.max, 40000)) + 1
    x = tiny_values(rng, (3, n), "int16")
    x[:, -1] = np.iinfo(np.int16).max          # the last index wins for max/last
    cases = set()
    for xx, axes in ((x, (1,)), (np.ascontiguousarray(x.T), (0,))):
        for kind in KINDS:
            out = np.full(3, info.max // 3, index_dtype)
            r, t = run(xx, axes, kind, "last", index_dtype, out=out)
            assert r is out and r.dtype == index_dtype
            np.testing.assert_array_equal(out.astype(np.int64), fast_ref(xx, axes, kind, "last"))
            cases.add(t.plans[0].case)
    assert run(x, (1,), "max", "last", index_dtype)[0].tolist() == [n - 1] * 3
    y = tiny_values(rng, (37, 9), "uint8")          # many outputs, short groups: column kernel
    r, t = run(y, (0,), "min", "first", index_dtype)
    assert t.plans[0].case == "column" and r.dtype == index_dtype
    np.testing.assert_array_equal(r.astype(np.int64), fast_ref(y, (0,), "min", "first"))
    monkeypatch.setattr(GP, "PLAN_OPTIONS", dict(SPLIT_SMALL))
    r, t = run(x, (1,), "max", "last", index_dtype)
    assert (t.plans[0].case == "split") == (n > 256)
    assert r.tolist() == [n - 1] * 3


def _offset_view(a, offset):
    """A copy of ``a`` whose data starts ``offset`` bytes past a 256-byte boundary."""
    raw = np.empty(a.nbytes + 512, np.uint8)
    start = (-raw.__array_interface__["data"][0] % 256) + offset
    out = raw[start:start + a.nbytes].view(a.dtype).reshape(a.shape)
    out[...] = a
    return out


@pytest.mark.parametrize("dtype,offset", [("complex64", 4), ("complex128", 8)])
def test_complex_only_element_aligned_uses_narrow_loads(dtype, offset, monkeypatch):
    rng = np.random.default_rng(26)
    a = _offset_view(tiny_values(rng, (6, 40), dtype), offset)
    assert a.__array_interface__["data"][0] % a.itemsize == offset
    for x, axes in ((a, (1,)), (a, (0,)), (a[:, ::-1], (1,)), (a, (0, 1))):
        r, t = run(x, axes)
        assert t.plans[0].narrow_loads and t.plans[0].vec == 1
        assert check_all(x, axes)
    good = aligned(a)
    assert not run(good, (1,))[1].plans[0].narrow_loads
    # hardmax into an out that is only element-aligned: narrow stores
    out = _offset_view(np.zeros(a.shape, dtype), offset)
    r, t = run_hm(aligned(a), (1,), "first", out=out)
    assert r is out
    np.testing.assert_array_equal(out, fast_hardmax(a, (1,), "first"))
    monkeypatch.setattr(GP, "PLAN_OPTIONS", dict(SPLIT_SMALL))
    b = _offset_view(tiny_values(rng, (2, 1200), dtype), offset)
    assert check_all(b, (1,)) == {"split"}
    assert check_nan(nan_values(rng, (2, 1200), dtype)[:, :600], (1,))


def test_complex64_stride_not_a_multiple_of_itemsize_is_copied():
    rng = np.random.default_rng(27)
    f = tiny_values(rng, (60,), "float32")
    x = np.lib.stride_tricks.as_strided(f.view(np.complex64), (19,), (12,))
    assert x.flags.aligned
    dense = np.ascontiguousarray(x)
    for kind in KINDS:
        np.testing.assert_array_equal(run(x, (0,), kind, "last")[0],
                                      fast_ref(dense, (0,), kind, "last"))
    np.testing.assert_array_equal(run_hm(x, (0,))[0], fast_hardmax(dense, (0,), "first"))


# ---------------------------------------------------------------------------- decode shapes

def decode_run(x, kind="max", tie="first", *, nan=False, out=None, **kw):
    """argmin/argmax (nanarg* with ``nan``) over the last axis; asserts the one-launch decode
    plan ran with at least half the H100's SMs in blocks. Returns (result, trace)."""
    with _trace.recording() as t:
        r = G.argreduce(BE, x, (x.ndim - 1,), kind=kind, tie=tie, index_dtype=np.dtype(np.int64),
                        skip_nan=nan, out=out, **kw)
    plan = t.plans[0]
    assert plan.case == "decode" and plan.last_block and plan.passes == 1, plan
    assert len(t.launches) == 1 and t.launches[0][0].startswith("argreduce_row<")
    grid = t.launches[0][1]
    assert grid[0] * grid[1] * grid[2] >= -(-BE.props.sm_count // 2) >= 66, grid
    assert grid[1] == plan.nchunks > 1
    return r, t


def decode_check(x, *, nan=False, **kw):
    for kind in KINDS:
        for tie in TIES:
            r, t = decode_run(x, kind, tie, nan=nan, **kw)
            want = (ref_argreduce(x, (x.ndim - 1,), kind, tie, nan=True) if nan
                    else fast_ref(x, (x.ndim - 1,), kind, tie))
            np.testing.assert_array_equal(r, want, err_msg=f"{kind} {tie} {t.plans[0]}")
            assert t.d2h_reads == (1 if nan else 0)


@pytest.mark.parametrize("shape", [(1, 131072), (8, 131072), (1, 131076), (1, 100003),
                                   (8, 70001)], ids=str)
def test_decode_shapes_one_launch_over_half_the_sms(shape):
    rng = np.random.default_rng(31)
    x = tiny_values(rng, shape, np.float32)
    r, t = decode_run(x)
    plan = t.plans[0]
    # N not a multiple of the block's chunk (all but the first two)
    if shape[1] % 131072:
        assert shape[1] % plan.chunk != 0
    decode_check(x)
    # hardmax too: one launch, every block zeroes its share, the last block writes the 1
    for tie in TIES:
        h, t = run_hm(x, (1,), tie)
        assert t.plans[0].case == "decode" and len(t.launches) == 1
        np.testing.assert_array_equal(h, fast_hardmax(x, (1,), tie))


def test_decode_plan_for_h100():
    from cupyops.ops.argreduce.plan import plan_argreduce
    props = BE.props
    for shape, blocks in (((1, 131072), 128), ((8, 131072), 264)):
        p = plan_argreduce(shape, (shape[1] * 4, 4), 4, (1,), props)
        assert (p.case, p.passes, p.grid[0] * p.grid[1]) == ("decode", 1, blocks)
    # hardmax decodes too (one launch); many groups keep their plans
    assert plan_argreduce((1, 131072), (4 * 131072, 4), 4, (1,), props, hardmax=True).case == "decode"
    assert plan_argreduce((512, 131072), (4 * 131072, 4), 4, (1,), props).case != "decode"


@pytest.mark.parametrize("schedule", SCHEDULES + tuple(
    pytest.param(seed, marks=pytest.mark.slow) for seed in (7, 99)), ids=str)
def test_decode_last_block_combine_under_schedules(schedule):
    """Ties across blocks (the winner's first and last occurrence in different blocks), a NaN
    in one block, random tiny values: the answer does not depend on which block is last."""
    rng = np.random.default_rng(32)
    n = 70001
    with simt.schedule(schedule):
        x = np.zeros((8, n), np.float32)
        x[0, [5, 40000, n - 1]] = 3.0          # first block, a middle one, the last one
        x[1, [1500, 33333]] = -2.0               # argmin ties in two middle blocks
        x[2, :] = 1.0                            # all equal: first 0, last n - 1
        x[3, 50000] = np.nan                     # NaN in one block beats everything
        x[4] = tiny_values(rng, (n,), np.float32)
        x[5, [0, n - 1]] = 1.0                   # the very first and very last element
        x[6, 12345] = np.inf
        x[7] = -np.inf
        x[7, [777, 66666]] = -0.0
        r, _ = decode_run(x, "max", "first")
        assert list(r[[0, 2, 3, 5, 6]]) == [5, 0, 50000, 0, 12345]
        r, _ = decode_run(x, "max", "last")
        assert list(r[[0, 2, 3, 5, 6, 7]]) == [n - 1, n - 1, 50000, n - 1, 12345, 66666]
        r, _ = decode_run(x, "min", "first")
        assert list(r[[1, 2, 3]]) == [1500, 0, 50000]
        r, _ = decode_run(x, "min", "last")
        assert list(r[[1, 2]]) == [33333, n - 1]
        decode_check(x)
        x[3, 50000] = 0.0
        x[4, rng.random(n) < 0.3] = np.nan
        decode_check(x, nan=True)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "complex128", "int8"])
def test_decode_dtypes_and_nan_in_one_block(dtype):
    rng = np.random.default_rng(33)
    n = 100004                                    # vector loads (of 2, 4 or 16 bytes)
    x = tiny_values(rng, (2, n), dtype)
    decode_check(x)
    if np.dtype(dtype).kind in "fc":
        y = np.zeros((2, n), dtype)
        y[0, 60000] = np.nan                      # one NaN in one block
        y[1, [3, 90000]] = 1
        y[1, 90001] = np.nan
        r, _ = decode_run(y, "min", "first")
        assert list(r) == [60000, 90001]
        r, _ = decode_run(y, "max", "last", nan=True)
        assert list(r) == [n - 1, 90000]
        decode_check(nan_values(rng, (2, n), dtype), nan=True)


@pytest.mark.parametrize("dtype", ["float32", "complex64"])
def test_decode_all_nan_group_raises_and_tickets_restart(dtype):
    rng = np.random.default_rng(34)
    n = 70001
    x = nan_values(rng, (8, n), dtype, frac=0.2)
    x[5] = np.nan
    for kind in KINDS:
        with _trace.recording() as t:
            with pytest.raises(ValueError, match="All-NaN slice encountered"):
                G.argreduce(BE, x, (1,), kind=kind, tie="last", index_dtype=np.int64,
                            skip_nan=True)
        assert t.plans[0].case == "decode" and len(t.launches) == 1 and t.d2h_reads == 1
    # one all-NaN row (1, n)
    with pytest.raises(ValueError, match="All-NaN slice encountered"):
        G.argreduce(BE, np.full((1, 131072), np.nan, dtype), (1,), kind="max", tie="first",
                    index_dtype=np.int64, skip_nan=True)
    # the flag and the tickets are zeroed on every call: clean calls after it pass, each
    # storing every index (out prefilled with a sentinel)
    ok = nan_values(rng, (8, n), dtype, frac=0.1)
    for _ in range(3):
        out = np.full((8,), -7, np.int64)
        decode_run(ok, "max", "first", nan=True, out=out)
        np.testing.assert_array_equal(out, ref_argreduce(ok, (1,), "max", "first", nan=True))


def _sm_count(device) -> int:
    """The SM count the kernel path plans for on ``device`` (simt: the H100's)."""
    return get_backend("cuda" if device in ("cuda", "cupy") else device).props.sm_count


@pytest.mark.parametrize("device", KERNEL_DEVICES)
def test_decode_tickets_zeroed_with_a_workspace(device):
    """The public call's one-launch decode plan, three calls on one Workspace: the tickets in
    its scratch are zeroed on every call (out prefilled with a sentinel)."""
    rng = np.random.default_rng(35)
    ws = workspace(1 << 20, device)
    for i in range(3):
        x = tiny_values(rng, (8, 70001), np.float32)
        out = np.full((8,), -7, np.int64)
        with _trace.recording() as t:
            assert ops(device).argmax(x, axis=1, tie="last", out=out, workspace=ws) is out
        plan = t.plans[0]
        assert plan.case == "decode" and plan.last_block and plan.passes == 1, plan
        assert len(t.launches) == 1 and t.launches[0][0].startswith("argreduce_row<")
        grid = t.launches[0][1]
        assert grid[0] * grid[1] * grid[2] >= -(-_sm_count(device) // 2), grid
        np.testing.assert_array_equal(out, fast_ref(x, (1,), "max", "last"))


def test_decode_64bit_indexing():
    from cupyops.testing import force_64bit
    rng = np.random.default_rng(36)
    for shape in ((1, 131076), (8, 70001)):
        x = tiny_values(rng, shape, np.float32)
        for kind in KINDS:
            for tie in TIES:
                for device in KERNEL_DEVICES:
                    with force_64bit(), _trace.recording() as t:
                        f = getattr(ops(device), "arg" + kind)
                        r = f(x, axis=1, tie=tie)
                    p = t.plans[0]
                    assert p.case == "decode" and p.use_64bit and len(t.launches) == 1
                    assert "long long" in t.launches[0][0]
                    assert t.launches[0][1][0] * t.launches[0][1][1] >= \
                        -(-_sm_count(device) // 2), device
                    np.testing.assert_array_equal(r, fast_ref(x, (1,), kind, tie),
                                                  err_msg=device)
        with force_64bit():
            y = nan_values(rng, shape, np.float64)
            r, t = decode_run(y, "min", "last", nan=True, force_64bit=True)
            np.testing.assert_array_equal(r, ref_argreduce(y, (1,), "min", "last", nan=True))


# ---------------------------------------------------------------------------- compact partials
# Split plans store per-chunk partials as the key at the value's own width and the index
# relative to the chunk's first position at 1, 2, 4 or 8 bytes (kernels/argreduce.cu).

COMPACT_DTYPES = ["bool", "int8", "uint8", "int16", "uint16", "float16", "float32"]


def split_run(x, axes, kind="max", tie="first", **kw):
    """argmin/argmax that must take the split path; returns (result, plan)."""
    r, t = run(x, axes, kind, tie, **kw)
    plan = t.plans[0]
    assert plan.case == "split" and plan.passes == 2 and len(t.launches) == 2, plan
    assert t.launches[1][0].startswith("argreduce_finish<")
    assert plan.key_itemsize == x.dtype.itemsize
    return r, plan


def _compact_layouts(rng, dtype):
    """(array, axes) whose split plans cover: the column kernel with several groups a thread,
    one group a thread, the row kernel (block teams), a flipped axis (negative relative
    indices), and two reduced dimensions with permuted weights (digits that wrap)."""
    a = aligned(tiny_values(rng, (1025, 8), dtype))
    b = aligned(tiny_values(rng, (3, 1025), dtype))
    c = aligned(tiny_values(rng, (40, 33, 3), dtype))
    return ((a, (0,)), (a[:, :3], (0,)), (a[::-1], (0,)), (b, (1,)), (b[:, ::-1], (1,)),
            (c.transpose(1, 0, 2), (0, 1)), (np.asfortranarray(b), (0, 1)))


@pytest.mark.parametrize("dtype", COMPACT_DTYPES)
def test_compact_partials_every_narrow_dtype(dtype, monkeypatch):
    monkeypatch.setattr(GP, "PLAN_OPTIONS", dict(SPLIT_SMALL))
    rng = np.random.default_rng(40)
    widths = set()
    for x, axes in _compact_layouts(rng, dtype):
        _, plan = split_run(x, axes)
        widths.add(plan.pidx_itemsize)
        assert check_all(x, axes) == {"split"}
    assert widths >= {1, 2}, widths         # 1- and 2-byte relative indices both ran


@pytest.mark.parametrize("schedule", SCHEDULES, ids=str)
def test_compact_partials_under_schedules(schedule, monkeypatch):
    monkeypatch.setattr(GP, "PLAN_OPTIONS", dict(SPLIT_SMALL))
    rng = np.random.default_rng(41)
    with simt.schedule(schedule):
        for dtype in ("int8", "float16", "uint16"):
            for x, axes in _compact_layouts(rng, dtype)[:4]:
                split_run(x, axes)
                assert check_all(x, axes) == {"split"}


@pytest.mark.parametrize("n", [31, 32, 33, 1023, 1025])
@pytest.mark.parametrize("dtype", ["bool", "int8", "float16"])
def test_compact_partials_chunk_boundaries(n, dtype, monkeypatch):
    """Group sizes around warp and block multiples with small chunks (every split the planner
    can make with one position per thread): the winner and its ties on either side of a chunk
    boundary."""
    opts = dict(SPLIT_SMALL)
    monkeypatch.setattr(GP, "PLAN_OPTIONS", opts)
    rng = np.random.default_rng(n)
    x = aligned(tiny_values(rng, (n, 128), dtype))    # 8 threads along y: chunks of n / 8
    _, plan = split_run(x, (0,))
    assert plan.nchunks > 1 and plan.chunk < n
    for c in range(1, plan.nchunks):          # ties straddling every chunk boundary
        lo = c * plan.chunk
        x[lo - 1:lo + 1, 1] = x[:, 1].max()
        x[lo - 1:lo + 1, 2] = x[:, 2].min()
    assert check_all(x, (0,)) == {"split"}
    y = aligned(tiny_values(rng, (4, n), dtype))
    r, t = run(y, (1,))
    if t.plans[0].case == "split":
        assert check_all(y, (1,)) == {"split"}


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_compact_partials_nanarg_all_nan_chunks(dtype, monkeypatch):
    """nanargmin/nanargmax: chunks of only NaN (key 0 at the value's width) lose to any number
    of another chunk; a group of only NaN still raises."""
    monkeypatch.setattr(GP, "PLAN_OPTIONS", dict(SPLIT_SMALL))
    rng = np.random.default_rng(42)
    x = aligned(nan_values(rng, (1025, 4), dtype, frac=0.2))
    x[:, 0] = np.nan
    x[1000, 0] = -np.inf                       # the only number: in the last chunk
    x[:, 1] = np.nan
    x[[2, 5], 1] = 0.0                         # numbers in the first chunk only
    x[:, 2] = np.nan
    x[[300, 900], 2] = np.inf
    _, plan = split_run(x, (0,))
    assert plan.nchunks >= 3
    assert check_nan(x, (0,)) == {"split"}
    r, _ = run_nan(x, (0,), "max", "first")
    assert list(r[:3]) == [1000, 2, 300]
    x[:, 3] = np.nan
    for kind in KINDS:
        with pytest.raises(ValueError, match="All-NaN slice encountered"):
            run_nan(x, (0,), kind, "last")


def test_compact_partials_64bit_indexing(monkeypatch):
    monkeypatch.setattr(GP, "PLAN_OPTIONS", dict(SPLIT_SMALL))
    rng = np.random.default_rng(43)
    widths = set()
    for dtype in ("int8", "float16", "float64"):
        for x, axes in _compact_layouts(rng, dtype):
            _, plan = split_run(x, axes, force_64bit=True)
            assert plan.use_64bit
            widths.add(plan.pidx_itemsize)
            for kind in KINDS:
                for tie in TIES:
                    r, t = run(x, axes, kind, tie, force_64bit=True)
                    assert "long long" in t.launches[0][0]
                    np.testing.assert_array_equal(r, fast_ref(x, axes, kind, tie))
            h, _ = run_hm(x, axes, "last", force_64bit=True)
            np.testing.assert_array_equal(h, fast_hardmax(x, axes, "last"))
    assert widths >= {1, 2}, widths


def test_compact_partials_stored_coalesced(monkeypatch):
    """The column kernel's partials (4 groups a thread for int8) are stored from shared memory
    one group a lane: each warp's store covers the fewest sectors, and the finish reads them
    the same way."""
    monkeypatch.setattr(GP, "PLAN_OPTIONS", dict(SPLIT_SMALL))
    rng = np.random.default_rng(44)
    x = aligned(tiny_values(rng, (1025, 256), np.int8))
    with simt.record_traffic() as rec, _trace.recording() as t:
        r = G.argreduce(BE, x, (0,), kind="max", tie="first", index_dtype=np.dtype(np.int64))
    np.testing.assert_array_equal(r, fast_ref(x, (0,), "max", "first"))
    plan = t.plans[0]
    assert plan.case == "split" and plan.vec == 4 and plan.pidx_itemsize == 1
    first, finish = rec.launches
    # the partials: nchunks rows of 256 one-byte keys and 256 one-byte indices
    assert first.requested_bytes_store == plan.nchunks * 256 * 2
    assert first.sectors_store == plan.nchunks * 256 * 2 // 32
    assert finish.requested_bytes_load == plan.nchunks * 256 * 2
    assert finish.sectors_load == plan.nchunks * 256 * 2 // 32


@pytest.mark.parametrize("index_dtype", ["int64", "int32", "uint8"])
@pytest.mark.parametrize("dtype", ["int8", "float16"])
def test_column_indices_stored_coalesced(dtype, index_dtype):
    """The column kernel with several groups a thread (4-byte loads of 1- and 2-byte values)
    stores its indices one group a lane: every output byte once, in the fewest sectors."""
    rng = np.random.default_rng(45)
    x = aligned(tiny_values(rng, (64, 512), dtype))
    out = aligned(np.zeros((512,), index_dtype))
    with simt.record_traffic() as rec:
        r, t = run(x, (0,), "min", "last", index_dtype, out=out)
    assert r is out
    np.testing.assert_array_equal(out.astype(np.int64), fast_ref(x, (0,), "min", "last"))
    plan = t.plans[0]
    assert plan.case == "column" and plan.vec == 4 // x.dtype.itemsize
    (launch,) = rec.launches
    assert launch.requested_bytes_store == out.nbytes
    assert launch.sectors_store == out.nbytes // 32


@pytest.mark.parametrize("n", [1, 2, 3, 5])
@pytest.mark.parametrize("dtype", ["int8", "bool", "uint16", "float16"])
def test_column_short_groups_store_every_index(n, dtype):
    """Groups of 2 give a column block fewer y threads (2) than groups a thread (4 for 1-byte
    values): the block's indices are still all stored from shared memory."""
    rng = np.random.default_rng(46)
    x = aligned(tiny_values(rng, (n, 256), dtype))
    r, t = run(x, (0,))
    assert t.plans[0].case == "column" and t.plans[0].vec == 4 // x.dtype.itemsize
    assert check_all(x, (0,)) == {"column"}
    if x.dtype.kind == "f":
        check_nan(aligned(nan_values(rng, (n, 256), dtype, frac=0.2)) if n > 3 else
                  aligned(np.where(np.isnan(x), 0, x).astype(dtype)), (0,))
