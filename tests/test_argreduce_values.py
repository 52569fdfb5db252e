"""Values mode of the argreduce kernels (kernels/argreduce.cu's ``*_values`` entry points, for
max_and_argmax / min_and_argmin), through cupyops.ops.argreduce.launch on the simt backend.

``values_argreduce`` returns ``(values, indices)`` from one reduction. Checked here:

* ``indices`` are exactly argmin/argmax's (the index-mode kernels on the same plan: tie and NaN
  rules, every index dtype and both internal index widths);
* ``values`` hold, bit for bit, the element of x at each index: signed zeros, NaN payloads
  (quiet and signalling patterns, both signs, in either part of a complex value), NaT, bool
  bytes other than 0 and 1;
* every plan kind: row (warp teams, block teams, packed 1-/2-byte scans), column (incl. packed
  columns, through shared memory and from registers), general (odometer), split (+ finish),
  decode (last block), under several thread schedules;
* traffic (simt): a values output adds only its own stores to index mode: the same loads in
  every launch, the same partial bytes, ``n_out * itemsize`` more bytes stored, and no more
  store sectors than the index stores of the same launch take at the value's width.

The default run keeps to a few dtypes per plan kind (simt compiles are slow; each dtype's
module holds both modes, so dtypes other tests compile cost nothing more); the sweep of every
dtype x plan x tie x kind x width is marked slow."""
import contextlib
import math

import numpy as np
import pytest

from cupyops import simt
from cupyops.bench import traffic
from cupyops.core import trace as _trace
from cupyops.core.backend import get_backend
from cupyops.ops.argreduce import launch as G
from cupyops.ops.argreduce import plan as GP

ml_dtypes = pytest.importorskip("ml_dtypes")

BE = get_backend("simt")
BF16 = np.dtype(ml_dtypes.bfloat16)
ALL_DTYPES = [np.dtype(t) for t in ("bool", "int8", "uint8", "int16", "uint16", "int32", "uint32",
                                    "int64", "uint64", "float16", "float32", "float64",
                                    "complex64", "complex128", "datetime64[s]",
                                    "timedelta64[ns]")] + [BF16]
KINDS = ("max", "min")
TIES = ("first", "last")
I64 = np.dtype(np.int64)

SPLIT_SMALL = {"min_split_elements": 0, "min_work_per_thread": 1, "min_block_team_vecs": 64,
               "min_scratch_ratio": 0}
DECODE_SMALL = {"min_split_elements": 0, "min_block_team_vecs": 1, "min_decode_block_vecs": 1}
BLOCK_TEAM = {"min_block_team_vecs": 1, "min_decode_block_vecs": 0}   # (no decode)

# NaN bit patterns: quiet and signalling, both signs, with payloads
_NAN_BITS = {2: (0x7E01, 0xFE02, 0x7C01, 0xFC03), 4: (0x7FC00001, 0xFFC00123, 0x7F800001,
                                                       0xFF800ABC),
             8: (0x7FF8000000000001, 0xFFF8000000000123, 0x7FF0000000000001,
                 0xFFF0000000000ABC)}
_BF16_NAN_BITS = (0x7FC1, 0xFFC2, 0x7F81, 0xFF83)


# ---------------------------------------------------------------------------- data

def _uint(itemsize):
    return np.dtype(f"u{itemsize}")


def _float_bits(dtype, shape, rng, nans):
    """Raw bits of a float array of small integers in [-3, 3] with -0.0 for about half of the
    zeros; rows alternate: mixed, all <= 0 (the max is a zero of either sign), with NaN
    payloads (``nans``), all >= 0 (the min is a zero)."""
    v = rng.integers(-3, 4, shape).astype(np.float32)
    rows = np.arange(shape[0]).reshape((-1,) + (1,) * (len(shape) - 1)) % 4 if shape else 0
    v = np.where(rows == 1, -np.abs(v), np.where(rows == 3, np.abs(v), v))
    neg_zero = (v == 0) & (rng.random(shape) < 0.5)
    v = np.where(neg_zero, -0.0, v).astype(np.float32)
    if dtype == BF16:
        bits = (v.view(np.uint32) >> 16).astype(np.uint16)
        pool = _BF16_NAN_BITS
    else:
        bits = v.astype(dtype).view(_uint(dtype.itemsize))
        pool = _NAN_BITS[dtype.itemsize]
    if nans:
        hit = (rows == 2) & (rng.random(shape) < 0.08)
        pick = np.array(pool, dtype=bits.dtype)[rng.integers(0, len(pool), shape)]
        bits = np.where(hit, pick, bits)
    return bits


def special(dtype, shape, rng, nans=True):
    """An array of ``dtype`` full of ties, signed zeros, NaN payloads, NaT, odd bool bytes."""
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        raw = (rng.random(shape) < 0.3).astype(np.uint8)
        raw[rng.random(shape) < 0.05] = 2          # true, but not the byte 1
        raw[rng.random(shape) < 0.05] = 255
        return raw.view(bool)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        v = rng.integers(max(info.min, -3), min(info.max, 3) + 1, shape).astype(dtype)
        v[rng.random(shape) < 0.02] = info.max
        v[rng.random(shape) < 0.02] = info.min
        return v
    if dtype.kind in "mM":
        v = rng.integers(-3, 4, shape).astype(np.int64)
        v[rng.random(shape) < 0.03] = np.iinfo(np.int64).min       # NaT
        return v.view(dtype)
    if dtype.kind == "c":
        half = np.dtype(f"f{dtype.itemsize // 2}")
        re = _float_bits(half, shape, rng, nans)
        im = _float_bits(half, shape, rng.spawn(1)[0], nans)
        out = np.empty(shape + (2,), re.dtype)
        out[..., 0], out[..., 1] = re, im
        return out.view(dtype).reshape(shape)
    return _float_bits(dtype, shape, rng, nans).view(dtype)


def aligned(a, align=256, offset=0):
    """A copy of ``a`` (its bytes) whose data starts ``offset`` bytes past an ``align`` boundary."""
    raw = np.empty(a.nbytes + align + offset, np.uint8)
    start = -raw.__array_interface__["data"][0] % align + offset
    out = raw[start:start + a.nbytes].view(a.dtype).reshape(a.shape)
    out.view(np.uint8).reshape(-1)[:] = np.ascontiguousarray(a).view(np.uint8).reshape(-1)
    return out


# ---------------------------------------------------------------------------- reference

def _bytes_view(a):
    """The bytes of each element of ``a`` (any strides): shape ``a.shape + (itemsize,)``."""
    a = np.asarray(a)
    return np.frombuffer(np.ascontiguousarray(a).tobytes(), np.uint8).reshape(
        a.shape + (a.dtype.itemsize,))


def at_indices(x, axes, idx):
    """The bytes of x at each group's logical index ``idx`` (row-major over ``axes``)."""
    kept = [a for a in range(x.ndim) if a not in axes]
    g = math.prod(x.shape[a] for a in axes)
    b = np.transpose(_bytes_view(x), kept + list(axes) + [x.ndim])
    b = b.reshape(-1, g, x.dtype.itemsize)
    flat = np.asarray(idx, np.int64).reshape(-1)
    return b[np.arange(b.shape[0]), flat].reshape(np.shape(idx) + (x.dtype.itemsize,))


@contextlib.contextmanager
def plan_options(opts):
    saved = dict(GP.PLAN_OPTIONS)
    GP.PLAN_OPTIONS.clear()
    GP.PLAN_OPTIONS.update(opts or {})
    try:
        yield
    finally:
        GP.PLAN_OPTIONS.clear()
        GP.PLAN_OPTIONS.update(saved)


def kernel_input(x):
    """What the kernels read (datetime64 / timedelta64: the int64 view) and ``datetime``."""
    if x.dtype.kind in "mM":
        return x.view(np.int64), True
    return x, False


def check(x, axes, *, kinds=KINDS, ties=TIES, index_dtype=I64, wide=False, opts=None):
    """Every kind x tie: indices equal index mode's, values are x's bytes there; returns the
    plans' cases."""
    kx, dt = kernel_input(x)
    seen = set()
    with plan_options(opts):
        for kind in kinds:
            for tie in ties:
                want = G.argreduce(BE, kx, axes, kind=kind, tie=tie, index_dtype=index_dtype,
                                   datetime=dt, force_64bit=wide)
                with _trace.recording() as t:
                    v, i = G.values_argreduce(BE, kx, axes, kind=kind, tie=tie,
                                              index_dtype=index_dtype, datetime=dt,
                                              force_64bit=wide)
                plan = t.plans[0]
                what = f"{x.dtype} {x.shape} {axes} {kind} {tie} {plan.case} {plan}"
                assert len(t.launches) == plan.passes, what
                assert t.launches[0][0].startswith(("argreduce_row_values",
                                                    "argreduce_col_values")), t.launches
                assert plan.use_64bit == bool(wide), what
                assert i.dtype == index_dtype and i.shape == want.shape, what
                np.testing.assert_array_equal(i, want, err_msg=what)
                assert v.dtype == kx.dtype and v.shape == want.shape, what
                np.testing.assert_array_equal(_bytes_view(v), at_indices(x, axes, i),
                                              err_msg=what)
                seen.add(plan.case)
    return seen


# ---------------------------------------------------------------------------- plan kinds

def _layouts(dtype, rng):
    """(name, x, axes, planner options, expected case) reaching each plan kind."""
    s = dtype.itemsize
    v = max(1, 16 // s)
    base = special(dtype, (37, 48 * v), rng)
    return [
        ("row warp teams", aligned(special(dtype, (37, 5 * v + 3), rng)), (1,), None, "row"),
        ("row vectors", aligned(base), (1,), None, "row"),
        ("row block teams", aligned(special(dtype, (5, 40 * v), rng)), (1,), BLOCK_TEAM, "row"),
        ("column", aligned(np.ascontiguousarray(base.T)), (0,), None, "column"),
        ("column misaligned", aligned(special(dtype, (40, 7), rng), offset=s), (0,), None,
         "column"),
        ("column one row", aligned(special(dtype, (1, 64), rng)), (0,), None, None),
        ("general strided", special(dtype, (9, 70), rng)[:, ::3], (1,), None, "general"),
        ("general odometer", special(dtype, (6, 5, 7), rng), (0, 2), None, None),
        ("general reversed", special(dtype, (12, 10), rng)[::-1, ::-2], (0, 1), None, None),
        ("split rows", aligned(special(dtype, (2, 1000 * v), rng)), (1,), SPLIT_SMALL, "split"),
        ("split columns", aligned(special(dtype, (700, 8 * max(1, 4 // s)), rng)), (0,),
         SPLIT_SMALL, "split"),
        ("decode", aligned(special(dtype, (3, 700 * v), rng)), (1,), DECODE_SMALL, "decode"),
    ]


def _run_layouts(dtype, names=None, *, wide=False, ties=TIES, kinds=KINDS):
    rng = np.random.default_rng(34)
    for name, x, axes, opts, case in _layouts(dtype, rng):
        if names is not None and name not in names:
            continue
        seen = check(x, axes, wide=wide, opts=opts, ties=ties, kinds=kinds)
        if case is not None:
            assert seen == {case}, (name, dtype, seen)


#: the default run: every plan kind for a few dtypes that take different kernel paths
#: (packed 1-/2-byte, 4-byte, 16-byte complex with a NaN in either part, NaT)
DEFAULT = [np.dtype("float32"), np.dtype("float16"), np.dtype("uint8"), np.dtype("complex128"),
           np.dtype("datetime64[s]")]


@pytest.mark.parametrize("dtype", DEFAULT, ids=str)
def test_every_plan_kind(dtype):
    _run_layouts(dtype)


@pytest.mark.parametrize("dtype", [d for d in ALL_DTYPES if d not in DEFAULT], ids=str)
def test_every_dtype_row_column_decode(dtype):
    """The other dtypes through the three kernels (row, column, decode's last block and the
    finish pass's partials in the split)."""
    _run_layouts(dtype, {"row vectors", "column", "split columns", "decode"}, ties=("last",))


@pytest.mark.parametrize("dtype", [np.dtype("int8"), np.dtype("float64"), BF16,
                                   np.dtype("complex64")], ids=str)
def test_64_bit_indexing(dtype):
    _run_layouts(dtype, {"row vectors", "column", "general odometer", "split rows", "decode"},
                 wide=True)


@pytest.mark.slow
@pytest.mark.parametrize("wide", [False, True])
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_sweep_every_dtype_plan_width(dtype, wide):
    _run_layouts(dtype, wide=wide)


# ---------------------------------------------------------------------------- the element itself

def _zero(dtype, negative):
    """0.0 or -0.0 of a float or complex dtype (complex: in both parts), built from its bytes."""
    part = dtype.itemsize // 2 if dtype.kind == "c" else dtype.itemsize
    one = bytes(part - 1) + (b"\x80" if negative else b"\x00")     # little-endian sign bit
    return np.frombuffer(one * (dtype.itemsize // part), np.uint8).view(dtype)[0]


@pytest.mark.parametrize("dtype", [np.dtype("float32"), np.dtype("float16"), BF16,
                                   np.dtype("float64"), np.dtype("complex64"),
                                   np.dtype("complex128")], ids=str)
def test_signed_zero_winners(dtype):
    """A group whose extreme is zero returns the zero at the index: -0.0 or 0.0 as it is there,
    the first or the last of the zeros by the tie rule, in the row and the column kernels."""
    for first_neg in (True, False):
        for kind, other in (("max", -1), ("min", 1)):
            x = np.full((3, 64), other, np.float32).astype(dtype)
            x[:, 5] = _zero(dtype, first_neg)
            x[:, 40] = _zero(dtype, not first_neg)
            for a, y in ((1, aligned(x)), (0, aligned(np.ascontiguousarray(x.T)))):
                for tie, col in (("first", 5), ("last", 40)):
                    v, i = G.values_argreduce(BE, y, (a,), kind=kind, tie=tie, index_dtype=I64)
                    np.testing.assert_array_equal(i, col)
                    want = _bytes_view(_zero(dtype, first_neg == (col == 5)))
                    assert (_bytes_view(v) == want).all(), (dtype, kind, tie, a, v)


@pytest.mark.parametrize("dtype", [np.dtype("float32"), np.dtype("float64"), np.dtype("float16"),
                                   BF16, np.dtype("complex64"), np.dtype("complex128")], ids=str)
def test_nan_payloads_come_back(dtype):
    """Every NaN pattern (quiet and signalling, both signs, payloads; complex: in either part)
    as the winner of argmax and argmin (NaN is the extreme), first and last by the tie rule."""
    itemsize = dtype.itemsize // (2 if dtype.kind == "c" else 1)
    pool = _BF16_NAN_BITS if dtype == BF16 else _NAN_BITS[itemsize]
    n = len(pool)
    x = np.ones((2 * n, 40), dtype)
    bits = _bytes_view(x).copy()
    for r in range(2 * n):
        nan = np.array(pool[r % n], _uint(itemsize)).tobytes()
        other = np.array(pool[(r + 1) % n], _uint(itemsize)).tobytes()
        part = (r // n) * itemsize if dtype.kind == "c" else 0   # real, then imaginary part
        bits[r, 3, part:part + itemsize] = np.frombuffer(nan, np.uint8)
        bits[r, 30, part:part + itemsize] = np.frombuffer(other, np.uint8)
    x = bits.reshape(-1).view(dtype).reshape(x.shape)
    for y, a in ((aligned(x), 1), (aligned(np.ascontiguousarray(x.T)), 0)):
        check(y, (a,))
        for tie, col in (("first", 3), ("last", 30)):
            for kind in KINDS:
                v, i = G.values_argreduce(BE, y, (a,), kind=kind, tie=tie, index_dtype=I64)
                np.testing.assert_array_equal(i, col)
                np.testing.assert_array_equal(_bytes_view(v), bits[:, col])


def test_nat_and_odd_bool_bytes():
    rng = np.random.default_rng(5)
    for dt in ("datetime64[ns]", "timedelta64[D]"):
        x = special(np.dtype(dt), (9, 33), rng)
        x.view(np.int64)[2] = 7
        x[2, [4, 20]] = np.datetime64("NaT") if dt[0] == "d" else np.timedelta64("NaT")
        check(x, (1,))
        v, i = G.values_argreduce(BE, x.view(np.int64), (1,), kind="min", tie="last",
                                  index_dtype=I64, datetime=True)
        assert i[2] == 20 and v[2] == np.iinfo(np.int64).min and v.dtype == np.int64
    raw = np.zeros((3, 50), np.uint8)
    raw[0, [7, 9]] = [2, 1]
    raw[1, [3, 4]] = [255, 254]
    raw[2] = 9
    x = raw.view(bool)
    v, i = G.values_argreduce(BE, x, (1,), kind="max", tie="first", index_dtype=I64)
    np.testing.assert_array_equal(i, [7, 3, 0])
    np.testing.assert_array_equal(v.view(np.uint8), [2, 255, 9])
    check(x, (1,))
    check(np.ascontiguousarray(x.T), (0,))


@pytest.mark.parametrize("index_dtype", ["int8", "uint8", "int16", "uint16", "int32", "uint64"])
def test_index_dtypes(index_dtype):
    rng = np.random.default_rng(6)
    x = aligned(special(np.dtype("float32"), (9, 100), rng))
    check(x, (1,), index_dtype=np.dtype(index_dtype))
    check(aligned(np.ascontiguousarray(x.T)), (0,), index_dtype=np.dtype(index_dtype))


@pytest.mark.parametrize("schedule", ["reverse", 77])
def test_decode_and_combines_under_schedules(schedule):
    rng = np.random.default_rng(9)
    with simt.schedule(schedule):
        for dt in (np.dtype("float32"), np.dtype("int16")):
            _run_layouts(dt, {"decode", "row block teams", "column"}, ties=("first",))


# ---------------------------------------------------------------------------- interface

def test_outputs_pair_direct_copied_and_aligned():
    rng = np.random.default_rng(11)
    x = aligned(special(np.dtype("complex128"), (6, 40), rng))
    v0, i0 = G.values_argreduce(BE, x, (1,), kind="max", tie="first", index_dtype=I64)
    vout, iout = np.empty(6, np.complex128), np.empty(6, np.int64)
    v, i = G.values_argreduce(BE, x, (1,), kind="max", tie="first", index_dtype=I64,
                              out=(vout, iout))
    assert v is vout and i is iout
    np.testing.assert_array_equal(_bytes_view(vout), _bytes_view(v0))
    np.testing.assert_array_equal(iout, i0)
    # non-contiguous outs, a values out only 8-byte aligned, one side fresh
    raw = np.zeros(6 * 16 + 16, np.uint8)
    start = -raw.__array_interface__["data"][0] % 16 + 8
    vnarrow = raw[start:start + 96].view(np.complex128)
    for out in ((np.empty(12, np.complex128)[::2], np.empty(12, np.int64)[::2]),
                (vnarrow, None), (None, np.empty(6, np.int64))):
        v, i = G.values_argreduce(BE, x, (1,), kind="max", tie="first", index_dtype=I64, out=out)
        for got, given in zip((v, i), out):
            if given is not None:
                assert got is given
        np.testing.assert_array_equal(_bytes_view(np.ascontiguousarray(v)), _bytes_view(v0))
        np.testing.assert_array_equal(i, i0)
    # run() itself refuses a misaligned values out rather than faulting
    x2, launches = G.prepare_argreduce(BE, x, (1,), kind="max", tie="first", index_dtype=I64,
                                       values=True)
    with pytest.raises(ValueError, match="values array"):
        G.runner(BE, launches)(x2, None, (vnarrow, None))


def test_runner_entry_reshapes_both_and_run_state():
    rng = np.random.default_rng(12)
    x = aligned(special(np.dtype("float32"), (4, 3, 50), rng))
    cx, launches = G.prepare_argreduce(BE, x, (2,), kind="min", tie="last", index_dtype=I64,
                                       values=True)
    assert launches.values_dtype == np.float32
    v, i = G.runner(BE, launches, entry=(None, (4, 3, 1)))(cx)
    assert v.shape == i.shape == (4, 3, 1)
    v2, i2 = G.run(G.run_state(BE, launches), cx)
    np.testing.assert_array_equal(i.reshape(4, 3), i2)
    np.testing.assert_array_equal(_bytes_view(v.reshape(4, 3)), _bytes_view(v2))
    # the first-call road: launches_of on a plan, values=True
    plan = launches.plan
    l2 = G.launches_of(BE, plan, x.dtype, x.shape, (2,), hardmax=False, kind="min", tie="last",
                       out_dtype=I64, values=True)
    v3, i3 = G.run(G.run_state(BE, l2), cx)
    np.testing.assert_array_equal(i3, i2)
    # index mode is untouched: one array back, the index kernels
    with _trace.recording() as t:
        r = G.argreduce(BE, x, (2,), kind="min", tie="last", index_dtype=I64)
    np.testing.assert_array_equal(r, i2)
    assert not t.launches[0][0].startswith("argreduce_row_values")


def test_values_mode_refuses_nan_skip_and_hardmax():
    x = np.ones((3, 8), np.float32)
    with pytest.raises(ValueError, match="skip_nan"):
        G.prepare_argreduce(BE, x, (1,), kind="max", tie="first", index_dtype=I64,
                            skip_nan=True, values=True)
    with pytest.raises(ValueError, match="skip_nan"):      # even for a dtype without NaN
        G.prepare_argreduce(BE, x.astype(np.int32), (1,), kind="max", tie="first",
                            index_dtype=I64, skip_nan=True, values=True)
    plan = G.prepare(BE, x, (1,), hardmax=True, kind="max", tie="first",
                     out_dtype=x.dtype).plan
    with pytest.raises(ValueError, match="hardmax"):
        G.launches_of(BE, plan, x.dtype, x.shape, (1,), hardmax=True, kind="max", tie="first",
                      out_dtype=x.dtype, values=True)


# ---------------------------------------------------------------------------- traffic

def _traffic(run):
    with simt.record_traffic() as rec:
        res = run()
    return res, [traffic.launch_counters(c) for c in rec.launches]


#: (name, shape, axis, planner options, case): every plan kind, on aligned inputs
TRAFFIC_LAYOUTS = [("row warp teams", (256, 40), 1, None, "row"),
                   ("row block team", (4, 4096), 1, BLOCK_TEAM, "row"),
                   ("column", (64, 512), 0, None, "column"),
                   ("general", (64, 130), 1, None, "general"),
                   ("split", (2048, 64), 0, SPLIT_SMALL, "split"),
                   ("decode", (3, 16384), 1, DECODE_SMALL, "decode")]
TRAFFIC_DTYPES = ["uint8", "float16", "float32", "float64", "complex64", "complex128"]


@pytest.mark.parametrize("dtype", TRAFFIC_DTYPES)
def test_values_add_only_their_own_traffic(dtype):
    """Per plan kind, values mode against index mode with an index dtype of the value's width
    (complex128: int64): the same launches, loads and partial traffic; the stores grow by the
    values' bytes exactly, in no more sectors than the index stores of the launch that stores
    the results (x 2 for 16-byte values over 8-byte indices; decode: a group's result is one
    thread's store, at most a sector a group)."""
    dt = np.dtype(dtype)
    idt = np.dtype(f"i{min(dt.itemsize, 8)}")
    rng = np.random.default_rng(15)
    for name, shape, axis, opts, case in TRAFFIC_LAYOUTS:
        x = aligned(special(dt, shape, rng, nans=False))
        if name == "general":
            x = x[:, ::2]
        n_out = x.size // x.shape[axis]
        if idt.itemsize == 1 and x.shape[axis] > 127:
            idt_here = np.dtype(np.int16)
        else:
            idt_here = idt
        with plan_options(opts), _trace.recording() as t:
            i0, a = _traffic(lambda: G.argreduce(BE, x, (axis,), kind="max", tie="first",
                                                 index_dtype=idt_here))
            (v, i1), b = _traffic(lambda: G.values_argreduce(BE, x, (axis,), kind="max",
                                                             tie="first", index_dtype=idt_here))
        assert [p.case for p in t.plans] == [case, case], (name, t.plans)
        np.testing.assert_array_equal(i0, i1)
        assert len(a) == len(b), name
        result_launch = len(a) - 1          # the launch that stores the results
        w = -(-dt.itemsize // idt_here.itemsize)
        for n, (ca, cb) in enumerate(zip(a, b)):
            what = (dtype, name, n, ca, cb)
            assert cb["requested_bytes_load"] == ca["requested_bytes_load"], what
            assert cb["sectors_load"] == ca["sectors_load"], what
            if n != result_launch:
                assert cb["sectors_store"] == ca["sectors_store"], what
                assert cb["requested_bytes_store"] == ca["requested_bytes_store"], what
                continue
            assert cb["requested_bytes_store"] - ca["requested_bytes_store"] == \
                n_out * dt.itemsize, what
            extra = cb["sectors_store"] - ca["sectors_store"]
            bound = n_out if case == "decode" else w * ca["sectors_store"]
            assert 0 < extra <= bound, what
