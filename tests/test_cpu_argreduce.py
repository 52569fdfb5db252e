"""Tests of the NumPy path (cupyops/_cpu_argreduce.py) against the brute-force reference.

The implementation's contract is the one _api.py relies on (docs/design.md): validated input,
sorted non-empty axes, out of exactly the result shape / dtype. Values are drawn from tiny sets
so that ties, NaN, infinities and -0.0 occur in most groups.
"""
from __future__ import annotations

import contextlib
import importlib.util
import os
import sys
import time
import tracemalloc
import zlib

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ref_argreduce import ref_argreduce, ref_hardmax  # noqa: E402

try:  # the package imports _api.py, which another engineer may still be writing
    from cupyops.ops.argreduce import numpy_path as car
except Exception:  # pragma: no cover - fallback for a partially written package
    _p = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cupyops", "_cpu_argreduce.py")
    _spec = importlib.util.spec_from_file_location("_cpu_argreduce_standalone", _p)
    car = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(car)


DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64"]
INDEX_DTYPES = [np.int64, np.int32, np.uint32, np.uint64]

# tunable sets: the defaults, and tiny ones that make every chunk / block loop run many times
TUNINGS = [
    None,
    dict(CHUNK_ELEMS=8, BIG_ELEMS=16, BLOCKS_BUDGET=4, ROW_BLOCK=2, INNER_BLOCK=4, OUTER_BLOCK=2,
         MAX_BLOCKS=1 << 20, TWOLEVEL_MIN_BLOCKS=2, SCAN_MAX=1, SCAN_CHUNK=3, HARDMAX_CHUNK=3,
         KEPT_CHUNK=5),
    dict(CHUNK_ELEMS=1, BIG_ELEMS=1, BLOCKS_BUDGET=1, ROW_BLOCK=3, INNER_BLOCK=3, OUTER_BLOCK=3,
         MAX_BLOCKS=5, TWOLEVEL_MIN_BLOCKS=2, SCAN_MAX=0, SCAN_CHUNK=1, HARDMAX_CHUNK=1),
    dict(CHUNK_ELEMS=100, BIG_ELEMS=1000, BLOCKS_BUDGET=50, ROW_BLOCK=5, INNER_BLOCK=16,
         OUTER_BLOCK=4, MAX_BLOCKS=1 << 20, TWOLEVEL_MIN_BLOCKS=4, SCAN_MAX=3, SCAN_CHUNK=7,
         HARDMAX_CHUNK=7, COPY_RUN=0),
    dict(CHUNK_ELEMS=30, BIG_ELEMS=64, BLOCKS_BUDGET=9, ROW_BLOCK=1, ROW_K=1, INNER_BLOCK=2,
         OUTER_BLOCK=2, MAX_BLOCKS=3, TWOLEVEL_MIN_BLOCKS=1, SCAN_MAX=0, SCAN_CHUNK=2,
         HARDMAX_CHUNK=2, COPY_RUN=1 << 30),
]


@contextlib.contextmanager
def tuned(params):
    saved = {}
    try:
        if params:
            for k, v in params.items():
                saved[k] = getattr(car, k)
                setattr(car, k, v)
        yield
    finally:
        for k, v in saved.items():
            setattr(car, k, v)


def value_set(dtype: np.dtype):
    if dtype == np.bool_:
        return [False, True]
    if dtype.kind == "f":
        return [-1.0, 0.0, 1.0, 2.0, -0.0, np.nan, np.inf, -np.inf]
    if dtype.kind == "u":
        info = np.iinfo(dtype)
        return [0, 1, 2, int(info.max), int(info.max) - 1]
    info = np.iinfo(dtype)
    return [-1, 0, 1, 2, int(info.min), int(info.max)]


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


# ---------------------------------------------------------------------------------------------
# strategies
# ---------------------------------------------------------------------------------------------
@st.composite
def arrays(draw, max_elems=400, dims=st.integers(0, 5)):
    """An array of a supported dtype in one of many layouts, values from a tiny set."""
    dtype = np.dtype(draw(st.sampled_from(DTYPES)))
    ndim = draw(st.integers(1, 4))
    shape = tuple(draw(st.lists(dims, min_size=ndim, max_size=ndim)))
    if int(np.prod(shape)) > max_elems:
        shape = tuple(min(s, 3) for s in shape)
    vals = value_set(dtype)
    n = int(np.prod(shape))
    picks = draw(st.lists(st.integers(0, len(vals) - 1), min_size=n, max_size=n))
    base = np.array([vals[i] for i in picks], dtype=dtype).reshape(shape)
    layout = draw(st.sampled_from(["C", "F", "transpose", "negative", "step", "broadcast",
                                   "nonnative", "unaligned", "readonly", "mixed"]))
    x = base
    if layout == "F":
        x = np.asfortranarray(base)
    elif layout == "transpose":
        perm = draw(st.permutations(range(ndim)))
        x = np.transpose(np.ascontiguousarray(base.transpose(perm)), np.argsort(perm))
    elif layout == "negative":
        flips = draw(st.lists(st.booleans(), min_size=ndim, max_size=ndim))
        y = base[tuple(slice(None, None, -1) if f else slice(None) for f in flips)].copy()
        x = y[tuple(slice(None, None, -1) if f else slice(None) for f in flips)]
    elif layout == "step":
        steps = draw(st.lists(st.sampled_from([1, 2, 3, -2]), min_size=ndim, max_size=ndim))
        big = np.zeros(tuple(s * abs(k) for s, k in zip(shape, steps)), dtype=dtype)
        sl = tuple(slice(None, None, k) for k in steps)
        big[sl] = base
        x = big[sl]
    elif layout == "broadcast":
        # some axes of length n but stride 0
        which = draw(st.lists(st.booleans(), min_size=ndim, max_size=ndim))
        small = base[tuple(slice(0, 1) if w else slice(None) for w in which)]
        x = np.broadcast_to(small, shape)
    elif layout == "nonnative":
        x = base.astype(base.dtype.newbyteorder())
    elif layout == "unaligned":
        raw = np.zeros(base.nbytes + 1, dtype=np.uint8)
        x = raw[1:].view(dtype).reshape(shape) if base.nbytes else base
        x[...] = base
    elif layout == "readonly":
        x = base.copy()
        x.flags.writeable = False
    elif layout == "mixed":
        # non-native, F-ordered, reversed along the first axis, unaligned
        raw = np.zeros(base.nbytes + 1, dtype=np.uint8)
        nd = base.dtype.newbyteorder()
        y = raw[1:].view(nd)
        y = y.reshape(shape[::-1]).T if base.size else base.astype(nd)
        y[...] = base
        x = y[::-1]
    return x


@st.composite
def axes_for(draw, ndim):
    kind = draw(st.sampled_from(["single", "multi", "all"]))
    if kind == "all" or ndim == 1:
        return tuple(range(ndim))
    if kind == "single":
        return (draw(st.integers(0, ndim - 1)),)
    sub = draw(st.lists(st.integers(0, ndim - 1), min_size=1, max_size=ndim, unique=True))
    return tuple(sorted(sub))


def expected_ok(x, axes):
    """The caller refuses an empty group unless the output is empty."""
    kept = [x.shape[a] for a in range(x.ndim) if a not in axes]
    return not (any(x.shape[a] == 0 for a in axes) and int(np.prod(kept)) > 0)


def check_argreduce(x, axes, kind, tie, index_dtype=np.int64, tuning=None):
    assert expected_ok(x, axes)
    before = x.copy()
    with tuned(tuning):
        got = car.argreduce(x, axes, kind=kind, tie=tie, index_dtype=np.dtype(index_dtype))
    want = ref_argreduce(x, axes, kind, tie)
    assert isinstance(got, np.ndarray)
    assert got.dtype == np.dtype(index_dtype)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got.astype(np.int64), want,
                                  err_msg=f"{x.dtype} {x.shape} {x.strides} {axes} {kind} {tie}")
    assert same_bits(x, before)


SETTINGS = settings(max_examples=300, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# ---------------------------------------------------------------------------------------------
# property tests against the reference
# ---------------------------------------------------------------------------------------------
@SETTINGS
@given(data=st.data(), x=arrays(), kind=st.sampled_from(["max", "min"]),
       tie=st.sampled_from(["first", "last"]), tuning=st.sampled_from(TUNINGS),
       index_dtype=st.sampled_from(INDEX_DTYPES))
def test_argreduce_matches_reference(data, x, kind, tie, tuning, index_dtype):
    axes = data.draw(axes_for(x.ndim))
    assume(expected_ok(x, axes))
    check_argreduce(x, axes, kind, tie, index_dtype, tuning)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(),
       x=arrays(max_elems=3000, dims=st.sampled_from([1, 2, 3, 31, 32, 33])),
       kind=st.sampled_from(["max", "min"]), tie=st.sampled_from(["first", "last"]),
       tuning=st.sampled_from(TUNINGS))
def test_argreduce_odd_sizes(data, x, kind, tie, tuning):
    axes = data.draw(axes_for(x.ndim))
    assume(expected_ok(x, axes))
    check_argreduce(x, axes, kind, tie, np.int64, tuning)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), x=arrays(), tie=st.sampled_from(["first", "last"]),
       tuning=st.sampled_from(TUNINGS))
def test_hardmax_matches_reference(data, x, tie, tuning):
    axes = data.draw(axes_for(x.ndim))
    before = x.copy()
    with tuned(tuning):
        got = car.hardmax(x, axes, tie=tie)
    want = ref_hardmax(x, axes, tie)
    assert got.shape == x.shape and got.dtype == x.dtype
    np.testing.assert_array_equal(got, want)
    assert same_bits(x, before)


@pytest.mark.parametrize("n", [1, 31, 32, 33, 1023, 1025])
@pytest.mark.parametrize("dtype", ["float32", "float16", "int64", "uint64", "bool", ">f8"])
@pytest.mark.parametrize("tuning", [0, 1, 3])
def test_lengths_1d(n, dtype, tuning):
    rng = np.random.default_rng(n)
    vals = np.array(value_set(np.dtype(dtype).newbyteorder("=")), dtype=np.dtype(dtype))
    x = vals[rng.integers(0, len(vals), n)]
    for kind in ("max", "min"):
        for tie in ("first", "last"):
            for view in (x, x[::-1], x[::2]):
                check_argreduce(view, (0,), kind, tie, np.int64, TUNINGS[tuning])


@pytest.mark.parametrize("shape,axes", [((33, 31), (0,)), ((33, 31), (1,)), ((31, 33), (0, 1)),
                                        ((3, 1025), (1,)), ((1025, 2), (0,)), ((2, 32, 17), (0, 2)),
                                        ((5, 1, 7, 3), (1, 2)), ((1023, 3), (0, 1))])
@pytest.mark.parametrize("tuning", [0, 1, 3])
def test_shapes_2d(shape, axes, tuning):
    rng = np.random.default_rng(7)
    x = rng.integers(-1, 3, shape).astype(np.float32)
    x[rng.random(shape) < 0.01] = np.nan
    for view in (x, np.asfortranarray(x), x[::-1]):
        for kind in ("max", "min"):
            for tie in ("first", "last"):
                check_argreduce(view, axes, kind, tie, np.int64, TUNINGS[tuning])


# ---------------------------------------------------------------------------------------------
# larger inputs against an independent NumPy composition (exercise the default engines)
# ---------------------------------------------------------------------------------------------
def numpy_oracle(x, axes, kind, tie):
    kept = [a for a in range(x.ndim) if a not in axes]
    y = np.moveaxis(np.asarray(x), list(axes), list(range(len(kept), x.ndim)))
    y = y.reshape(y.shape[:len(kept)] + (-1,))
    if y.dtype == np.bool_:
        y = y.view(np.uint8)
    f = np.argmax if kind == "max" else np.argmin
    if tie == "first":
        return f(y, axis=-1)
    return y.shape[-1] - 1 - f(y[..., ::-1], axis=-1)


@pytest.mark.parametrize("shape,axes", [((300, 5000), (1,)), ((5000, 300), (0,)),
                                        ((40, 50, 300), (0, 2)), ((1 << 18,), (0,)),
                                        ((64, 64, 64), (0, 1, 2)), ((20, 9000), (0, 1)),
                                        ((9000, 20), (0,)), ((3, 70000), (1,))])
@pytest.mark.parametrize("dtype", ["float32", "int16", "float16", "uint64"])
def test_large_vs_numpy(shape, axes, dtype):
    rng = np.random.default_rng(3)
    if np.dtype(dtype).kind == "f":
        x = rng.integers(-50, 50, shape).astype(dtype)
        x.reshape(-1)[rng.integers(0, x.size, 3)] = np.nan if dtype != "float16" else np.float16("nan")
    else:
        x = rng.integers(0, 100, shape).astype(dtype)
    for view in (x, np.asfortranarray(x) if x.ndim > 1 else x[::-1]):
        for kind in ("max", "min"):
            for tie in ("first", "last"):
                got = car.argreduce(view, axes, kind=kind, tie=tie, index_dtype=np.dtype(np.int64))
                np.testing.assert_array_equal(got, numpy_oracle(view, axes, kind, tie))


FIND_DTYPES = ["int16", "uint16", "int32", "uint32", "int64", "uint64", "float32", "float64"]


@pytest.mark.parametrize("dtype", FIND_DTYPES)
def test_fold_finds_the_row_after_one_reduction(dtype, monkeypatch):
    """Tall, narrow slabs fold as one reduction and a lookup (numpy_blocks._fold_find): the
    extreme's chunks gathered where it sits in few slots (distinct values), searched chunk by
    chunk where it is frequent (values from a tiny set: ties, NaN, infinities, -0.0 against
    0.0, the integers' extremes; NaN alone at one end), against the brute-force reference, with
    a partial last chunk, one chunk only, and an extreme met in the last chunk only."""
    from cupyops.ops.argreduce import numpy_blocks as blocks
    monkeypatch.setattr(blocks, "CHUNK", 2048)      # 8-byte items: chunks of 1024 elements
    monkeypatch.setattr(blocks, "FOLD_MIN_BYTES", 0)
    ran = {"gathered": 0, "searched": 0, "other": 0}
    real_gather, real_chunk = blocks._rows_gathered, blocks._Search.chunk
    monkeypatch.setattr(blocks, "_rows_gathered", lambda *a: ran.__setitem__(
        "gathered", ran["gathered"] + 1) or real_gather(*a))
    monkeypatch.setattr(blocks._Search, "chunk", lambda *a: ran.__setitem__(
        "searched", ran["searched"] + 1) or real_chunk(*a))
    real_range = blocks._fold_range
    monkeypatch.setattr(blocks, "_fold_range", lambda *a, **k: ran.__setitem__(
        "other", ran["other"] + 1) or real_range(*a, **k))
    dt = np.dtype(dtype)
    rng = np.random.default_rng(zlib.crc32(dtype.encode()))
    vals = np.array(value_set(dt), dtype=dt)
    for A, R, C in ((1, 300, 1), (3, 257, 2), (2, 1000, 3), (5, 64, 4), (1, 1025, 1)):
        tiny = vals[rng.integers(0, len(vals), (A, R, C))]
        distinct = rng.permutation(A * R * C).reshape(A, R, C) % 30000
        late = np.zeros((A, R, C), dt)
        late[:, -3:, :] = vals[rng.integers(0, len(vals), (A, 3, C))]
        for variant, x in (("tiny", tiny), ("distinct", distinct.astype(dt)), ("late", late)):
            for kind in ("max", "min"):
                for tie in ("first", "last"):
                    got = blocks.fold_arg(x, kind, tie)
                    want = ref_argreduce(x, (1,), kind, tie)
                    np.testing.assert_array_equal(got, want, err_msg=f"{A}x{R}x{C} {variant} "
                                                                     f"{kind} {tie}")
    assert ran["gathered"] and ran["searched"] and not ran["other"], ran


def test_fold_lookup_memory_stays_bounded(monkeypatch):
    """The lookup gathers its holders a batch at a time: with 64 KiB of slots a tile and an
    extreme that recurs in thousands of slots, the call's extra memory stays within six times
    that (all of them at once took 1.4 MiB here, 93 MiB on a 128 MiB input)."""
    from cupyops.core import threads as _threads
    from cupyops.ops.argreduce import numpy_blocks as blocks
    monkeypatch.setattr(blocks, "FIND_SLOT_BYTES", 1 << 16)
    gathered = []
    real = blocks._rows_gathered
    monkeypatch.setattr(blocks, "_rows_gathered", lambda *a: gathered.append(a[1].size) or
                        real(*a))
    x = np.random.default_rng(12).integers(0, 400, (16, 4096, 16)).astype(np.int16)   # 2 MiB
    with _threads.single_thread():
        for tie in ("first", "last"):
            tracemalloc.start()
            try:
                got = blocks.fold_arg(x, "max", tie)
                peak = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
            assert peak <= 6 * blocks.FIND_SLOT_BYTES, peak
            np.testing.assert_array_equal(got, numpy_oracle(x, (1,), "max", tie))
    assert gathered and max(gathered) > 1000, gathered


def test_a_1_byte_fold_checks_for_the_extreme_while_chunks_are_left():
    """The running fold of a 1-byte type first checks whether every group holds the type's
    extreme after the chunks its odds ask for (here 9 of 16: 230 of 65,536 slots hold 255
    after the first chunk), not only when that is in the first half; never where fewer than
    two chunks would be left."""
    from cupyops.ops.argreduce import numpy_blocks as blocks
    m = np.zeros((16, 256, 16), np.uint8)
    m.reshape(-1)[np.random.default_rng(2).choice(m.size, 230, replace=False)] = 255
    scratch = np.empty(m.shape, np.bool_)
    assert blocks._first_check(m, "max", 16, scratch) == 9
    assert blocks._first_check(m, "max", 10, scratch) == 10


def test_running_fold_meets_nan_in_a_short_last_chunk(monkeypatch):
    """The running fold's NaN-aware pass finds a NaN that only the last, short chunk of a
    range holds, in slabs of one group (NumPy 2.4's isnan into a strided bool output, which
    that pass once used, writes wrong values)."""
    from cupyops.ops.argreduce import numpy_blocks as blocks
    monkeypatch.setattr(blocks, "CHUNK", 256)
    monkeypatch.setattr(blocks, "FOLD_MIN_BYTES", 0)
    monkeypatch.setattr(blocks, "FIND_MIN_ROWS", 1 << 30)        # not the lookup
    x = np.zeros((32, 301, 1))
    x[20, 300, 0] = np.nan
    x[5, 7, 0] = 1.0
    for kind in ("max", "min"):
        for tie in ("first", "last"):
            got = blocks.fold_arg(x, kind, tie)
            np.testing.assert_array_equal(got, ref_argreduce(x, (1,), kind, tie))


@pytest.mark.parametrize("tie", ["first", "last"])
def test_middle_axes_of_a_tall_slab_take_the_lookup(monkeypatch, tie):
    """argmax / argmin over the middle axes of a C-contiguous input above the composition's
    size (float64, int32: ties and NaN) run the fold's reduction and lookup, with the answer of
    NumPy's composition (test_cpu_threads.py's test_the_lookup_shares_the_threads: threads)."""
    import cupyops
    from cupyops import _call as _fastpath
    from cupyops.ops.argreduce import numpy_blocks as blocks
    calls = []
    real = blocks._fold_find
    monkeypatch.setattr(blocks, "_fold_find", lambda V, *a, **k: calls.append(V.shape) or
                        real(V, *a, **k))
    _fastpath.clear()
    rng = np.random.default_rng(8)
    f64 = rng.integers(0, 5, (4, 128, 128, 4)).astype(np.float64)          # 2 MiB
    f64[1, 3, 7, 2] = f64[2, 60, 1, 0] = np.nan
    i32 = rng.integers(-3, 3, (3, 64, 512, 5)).astype(np.int32)
    for x in (f64, i32):
        for f, kind in ((cupyops.argmax, "max"), (cupyops.argmin, "min")):
            calls.clear()
            got = f(x, axis=(1, 2), tie=tie, device="cpu")
            np.testing.assert_array_equal(got, numpy_oracle(x, (1, 2), kind, tie),
                                          err_msg=f"{x.dtype} {kind}")
            assert calls


@pytest.mark.parametrize("tie", ["first", "last"])
def test_large_narrow_slabs_are_copied_transposed(monkeypatch, tie):
    """A reduction over the middle axis of a large C-contiguous input with narrow slabs that
    are not tall (64 x 256 x 64 float32, 4 MiB; int16 with 8 groups a slab) is copied
    transposed a block at a time, not folded; 1-byte types keep the fold (it stops at the
    type's extreme)."""
    import cupyops
    from cupyops import _call as _fastpath
    from cupyops.ops.argreduce import numpy_blocks as blocks
    seen = []
    real_t, real_r = blocks._transposed, blocks._fold_part
    monkeypatch.setattr(blocks, "_transposed", lambda V, *a: seen.append("transposed") or
                        real_t(V, *a))
    monkeypatch.setattr(blocks, "_fold_part", lambda V, *a, **k: seen.append("fold") or
                        real_r(V, *a, **k))
    _fastpath.clear()
    rng = np.random.default_rng(11)
    for x, want in ((rng.integers(0, 9, (64, 256, 64)).astype(np.float32), "transposed"),
                    (rng.integers(-4, 4, (2048, 64, 8)).astype(np.int16), "transposed"),
                    (rng.integers(0, 9, (64, 256, 64)).astype(np.int8), "fold")):
        for f, kind in ((cupyops.argmax, "max"), (cupyops.argmin, "min")):
            seen.clear()
            got = f(x, axis=1, tie=tie, device="cpu")
            np.testing.assert_array_equal(got, numpy_oracle(x, (1,), kind, tie))
            assert seen and set(seen) == {want}, (x.dtype, seen[:3])


def test_large_nan_free_and_twolevel_remainder():
    rng = np.random.default_rng(5)
    x = rng.standard_normal(3 * 4096 * 4 + 77).astype(np.float64)
    x[::1000] = x.max()           # many ties of the maximum, spread over blocks
    for tie in ("first", "last"):
        for kind in ("max", "min"):
            got = car.argreduce(x, (0,), kind=kind, tie=tie, index_dtype=np.dtype(np.int64))
            assert int(got) == int(numpy_oracle(x, (0,), kind, tie))


def _layouts_2d(base):
    ro = base.copy()
    ro.flags.writeable = False
    gap = np.zeros((base.shape[0], base.shape[1] + 3), base.dtype)[:, 1:-2]
    gap[...] = base
    return {"C": base, "F": np.asfortranarray(base), "readonly": ro,
            "nonnative": base.astype(base.dtype.newbyteorder()), "gap": gap,
            "reversed": base[::-1, ::-1], "T": base.T}


@pytest.mark.parametrize("layout", ["C", "F", "readonly", "nonnative", "gap", "reversed", "T"])
def test_memory_bounded(layout):
    """No engine copies the input whole: extra memory stays far below the input size."""
    rng = np.random.default_rng(9)
    base = rng.integers(0, 1000, (1024, 4096)).astype(np.float32)     # 16 MiB, many ties
    x = _layouts_2d(base)[layout]
    for axes in [(0,), (1,), (0, 1)]:
        for tie in ("first", "last"):
            tracemalloc.start()
            try:
                r = car.argreduce(x, axes, kind="max", tie=tie, index_dtype=np.dtype(np.int64))
                _cur, peak = tracemalloc.get_traced_memory()
            finally:
                tracemalloc.stop()
            assert peak - r.nbytes < 4 * 2 ** 20, (layout, axes, tie, peak)   # < input / 4
            np.testing.assert_array_equal(r, numpy_oracle(x, axes, "max", tie))


@pytest.mark.parametrize("layout", ["readonly", "nonnative", "gap", "F"])
def test_long_rows_in_bounded_pieces(layout):
    """Rows longer than CHUNK_ELEMS that NumPy cannot scan in place are cut in sub-blocks."""
    rng = np.random.default_rng(10)
    base = rng.integers(0, 5, (3, 1000)).astype(np.float64)
    base[1, [17, 500, 999]] = np.nan
    x = _layouts_2d(base)[layout]
    params = dict(CHUNK_ELEMS=64, BIG_ELEMS=256, BLOCKS_BUDGET=16)
    with tuned(params):
        for axes in [(1,), (0, 1), (0,)]:
            for kind in ("max", "min"):
                for tie in ("first", "last"):
                    r = car.argreduce(x, axes, kind=kind, tie=tie, index_dtype=np.dtype(np.int64))
                    np.testing.assert_array_equal(r, numpy_oracle(x, axes, kind, tie))
        flat = _layouts_2d(base.reshape(1, -1))[layout][0]
        for tie in ("first", "last"):
            r = car.argreduce(flat, (0,), kind="max", tie=tie, index_dtype=np.dtype(np.int64))
            np.testing.assert_array_equal(r, numpy_oracle(flat, (0,), "max", tie))


# ---------------------------------------------------------------------------------------------
# special cases
# ---------------------------------------------------------------------------------------------
def test_seed_examples():
    a = np.array([[1, 2, 3], [3, 0, 4], [2, 5, 2]], dtype=np.float32)
    i64 = np.dtype(np.int64)
    am = lambda ax: car.argreduce(a, ax, kind="min", tie="first", index_dtype=i64).tolist()
    ax = lambda ax: car.argreduce(a, ax, kind="max", tie="first", index_dtype=i64).tolist()
    assert am((0,)) == [0, 1, 2] and am((1,)) == [0, 1, 0] and am((0, 1)) == 4
    assert ax((0,)) == [1, 2, 1] and ax((1,)) == [2, 2, 1] and ax((0, 1)) == 7
    v = np.array([1, 2, 3, 2, 1])
    assert car.argreduce(v, (0,), kind="min", tie="first", index_dtype=i64) == 0
    assert car.argreduce(v, (0,), kind="min", tie="last", index_dtype=i64) == 4
    w = np.array([3, 2, 1, 2, 3])
    assert car.argreduce(w, (0,), kind="max", tie="first", index_dtype=i64) == 0
    assert car.argreduce(w, (0,), kind="max", tie="last", index_dtype=i64) == 4
    h = np.array([[[12, 0], [-101, 11]], [[3, 234], [0, -101]]], dtype=np.float32)
    assert car.hardmax(h, (1,), tie="first").tolist() == [[[1, 0], [0, 1]], [[1, 1], [0, 0]]]
    assert car.hardmax(h, (0,), tie="first").tolist() == [[[1, 0], [0, 1]], [[0, 1], [1, 0]]]
    assert car.hardmax(h, (0, 2), tie="first").tolist() == [[[0, 0], [0, 1]], [[0, 1], [0, 0]]]


def test_full_reduction_is_0d_array():
    x = np.arange(6.0).reshape(2, 3)
    r = car.argreduce(x, (0, 1), kind="max", tie="first", index_dtype=np.dtype(np.int64))
    assert isinstance(r, np.ndarray) and r.shape == () and int(r) == 5


@pytest.mark.parametrize("tie,want", [("first", 0), ("last", 2 ** 32)])
def test_broadcast_axis_2_32_plus_1_is_instant(tie, want):
    x = np.broadcast_to(np.float32(1.5), (2 ** 32 + 1,))
    t = time.perf_counter()
    r = car.argreduce(x, (0,), kind="max", tie=tie, index_dtype=np.dtype(np.uint64))
    assert time.perf_counter() - t < 1.0
    assert r.dtype == np.uint64 and int(r) == want
    # with a real axis next to it: (3, 2**32+1), values differ along the real axis only
    y = np.broadcast_to(np.array([[1.0], [3.0], [3.0]]), (3, 2 ** 32 + 1))
    n = 2 ** 32 + 1
    r = car.argreduce(y, (0, 1), kind="max", tie=tie, index_dtype=np.dtype(np.int64))
    assert int(r) == (n if tie == "first" else 2 * n + n - 1)
    r = car.argreduce(y, (1,), kind="min", tie=tie, index_dtype=np.dtype(np.int64))
    assert r.tolist() == [want] * 3


@pytest.mark.parametrize("tie", ["first", "last"])
@pytest.mark.parametrize("kind", ["max", "min"])
def test_broadcast_reduced_axes_weights(tie, kind):
    rng = np.random.default_rng(2)
    base = rng.integers(0, 3, (4, 1, 5, 1, 3)).astype(np.float64)
    x = np.broadcast_to(base, (4, 3, 5, 2, 3))
    for axes in [(1, 2), (0, 1, 3, 4), (1, 3), (0, 1, 2, 3, 4), (1,), (3, 4)]:
        for view in (x, x[::-1, :, ::-1]):
            check_argreduce(view, axes, kind, tie, np.int64, None)
            check_argreduce(view, axes, kind, tie, np.int64, TUNINGS[1])


def test_broadcast_kept_axis():
    base = np.array([[3, 1, 3, 0]], dtype=np.int8)
    x = np.broadcast_to(base, (1000, 4))
    r = car.argreduce(x, (1,), kind="max", tie="last", index_dtype=np.dtype(np.int32))
    assert r.dtype == np.int32 and r.shape == (1000,) and (r == 2).all()


def test_empty_kept_axis():
    x = np.zeros((0, 5), dtype=np.float32)
    r = car.argreduce(x, (1,), kind="max", tie="first", index_dtype=np.dtype(np.int32))
    assert r.shape == (0,) and r.dtype == np.int32
    x = np.zeros((3, 0, 4), dtype=np.float32)       # reduced axis empty but output empty too
    r = car.argreduce(x, (0, 2), kind="min", tie="last", index_dtype=np.dtype(np.int64))
    assert r.shape == (0,)
    h = car.hardmax(np.zeros((0, 3), np.float16), (1,), tie="first")
    assert h.shape == (0, 3) and h.dtype == np.float16


@pytest.mark.parametrize("index_dtype", INDEX_DTYPES)
@pytest.mark.parametrize("contiguous", [True, False])
def test_out_is_written_and_returned(index_dtype, contiguous):
    rng = np.random.default_rng(11)
    x = rng.integers(0, 3, (6, 7, 5)).astype(np.float32)
    want = ref_argreduce(x, (1,), "max", "last")
    if contiguous:
        out = np.full((6, 5), 99, dtype=index_dtype)
    else:
        out = np.full((5, 6), 99, dtype=index_dtype).T
    r = car.argreduce(x, (1,), kind="max", tie="last", index_dtype=np.dtype(index_dtype), out=out)
    assert r is out
    np.testing.assert_array_equal(out, want)
    # full reduction into a 0-d out
    out0 = np.zeros((), dtype=index_dtype)
    r = car.argreduce(x, (0, 1, 2), kind="min", tie="first", index_dtype=np.dtype(index_dtype),
                      out=out0)
    assert r is out0 and int(out0) == int(ref_argreduce(x, (0, 1, 2), "min", "first"))


@pytest.mark.parametrize("contiguous", [True, False])
def test_hardmax_out(contiguous):
    rng = np.random.default_rng(12)
    x = rng.integers(0, 3, (4, 6)).astype(np.int16)
    out = np.full((4, 6), 7, np.int16) if contiguous else np.full((6, 4), 7, np.int16).T
    r = car.hardmax(x, (1,), tie="last", out=out)
    assert r is out
    np.testing.assert_array_equal(out, ref_hardmax(x, (1,), "last"))


def test_hardmax_bool_and_nonnative():
    x = np.array([[False, True, True], [False, False, False]])
    r = car.hardmax(x, (1,), tie="last")
    assert r.dtype == np.bool_ and r.tolist() == [[False, False, True], [False, False, True]]
    y = np.array([[1.0, np.nan, np.nan]], dtype=">f4")
    r = car.hardmax(y, (1,), tie="first")
    assert r.dtype == y.dtype and r.tolist() == [[0.0, 1.0, 0.0]]


MODERATE = dict(CHUNK_ELEMS=512, BIG_ELEMS=4096, BLOCKS_BUDGET=64, ROW_BLOCK=16, ROW_K=1,
                INNER_BLOCK=32, OUTER_BLOCK=4, TWOLEVEL_MIN_BLOCKS=2, SCAN_MAX=2, SCAN_CHUNK=64,
                HARDMAX_CHUNK=64)


@pytest.mark.parametrize("tuning", [None, MODERATE, TUNINGS[3]])
def test_float16_every_bit_pattern(tuning):
    """float16 is compared through int16 keys: check them on all 65536 values (NaNs of both
    signs and payloads, subnormals, +-0, +-inf), shuffled so that ties land anywhere."""
    rng = np.random.default_rng(13)
    bits = np.arange(1 << 16, dtype=np.uint16)
    rng.shuffle(bits)
    x = bits.view(np.float16).reshape(256, 256)
    y = x.copy()
    y[np.isnan(y)] = 0.0                      # also without NaN: ties of +-0 and of inf
    with tuned(tuning):
        for arr in (x, y, x.astype(">f2"), np.asfortranarray(y)):
            for axes in [(0,), (1,), (0, 1)]:
                for kind in ("max", "min"):
                    for tie in ("first", "last"):
                        got = car.argreduce(arr, axes, kind=kind, tie=tie,
                                            index_dtype=np.dtype(np.int64))
                        np.testing.assert_array_equal(got, numpy_oracle(arr, axes, kind, tie))


def test_exact_64bit_comparisons():
    big = np.array([2 ** 63 - 1, 2 ** 63 - 2, 2 ** 63 - 1], dtype=np.int64)
    assert int(car.argreduce(big, (0,), kind="max", tie="last", index_dtype=np.dtype(np.int64))) == 2
    assert int(car.argreduce(big, (0,), kind="min", tie="last", index_dtype=np.dtype(np.int64))) == 1
    ub = np.array([2 ** 64 - 2, 2 ** 64 - 1, 2 ** 64 - 2], dtype=np.uint64)
    assert int(car.argreduce(ub, (0,), kind="min", tie="last", index_dtype=np.dtype(np.int64))) == 2
    assert int(car.argreduce(ub, (0,), kind="max", tie="last", index_dtype=np.dtype(np.int64))) == 1


def test_nan_rules():
    x = np.array([1.0, np.nan, 5.0, np.nan, -0.0], dtype=np.float16)
    for kind in ("max", "min"):
        assert int(car.argreduce(x, (0,), kind=kind, tie="first", index_dtype=np.dtype(np.int64))) == 1
        assert int(car.argreduce(x, (0,), kind=kind, tie="last", index_dtype=np.dtype(np.int64))) == 3
    for dt in ("float16", "float32", "float64", ">f2"):
        z = np.array([0.0, -0.0, -1.0, 0.0, -0.0], dtype=dt)
        for reps in (1, 40):                  # short groups (scan) and long ones (block engines)
            zz = np.tile(z, reps)
            n = zz.size
            for view, first, last in ((zz, 0, n - 1), (zz.reshape(reps, 5).T.copy().T, 0, n - 1)):
                axes = tuple(range(view.ndim))
                i64 = np.dtype(np.int64)
                assert int(car.argreduce(view, axes, kind="max", tie="first", index_dtype=i64)) == first
                assert int(car.argreduce(view, axes, kind="max", tie="last", index_dtype=i64)) == last
            zm = -zz
            assert int(car.argreduce(zm, (0,), kind="min", tie="first", index_dtype=i64)) == 0
            assert int(car.argreduce(zm, (0,), kind="min", tie="last", index_dtype=i64)) == n - 1


# ---------------------------------------------------------------------- tie="last" by row tails

def _last_ref(x2, kind):
    """Independent reference: NumPy's first extreme of the reversed rows."""
    f = np.argmax if kind == "max" else np.argmin
    return x2.shape[1] - 1 - f(x2[:, ::-1].copy(), axis=1)


@pytest.mark.parametrize("dtype", ["bool", "int8", "uint16", "int64", "float16", "float32",
                                   "float64"])
def test_last_extreme_rows(dtype, monkeypatch):
    """Every route of last_extreme_rows (the tail block, wider blocks for few rows, the
    chunked whole-row compare for many, NumPy's reversed argmax when a sample shows distinct
    values) against the reversed-argmax reference: ties from tiny value ranges, NaN (the
    extreme, the last NaN wins), -0.0 against 0.0, rows sorted either way (the extreme at one
    end only), row counts below and above the sample's, lengths around the blocks."""
    rng = np.random.default_rng(3)
    routes = {"sampled out": 0, "tail": 0}
    real = car._recurs_near_the_end

    def spy(sample, kind):
        r = real(sample, kind)
        routes["tail" if r else "sampled out"] += 1
        return r
    monkeypatch.setattr(car, "_recurs_near_the_end", spy)
    for chunk in (car.CHUNK_ELEMS, 40):
        monkeypatch.setattr(car, "CHUNK_ELEMS", chunk)
        for rows in (1, 7, 31, 33, 70):
            for n in (1, 2, 63, 64, 65, 300, 1025):
                vals = int(rng.integers(1, 5))
                x = rng.integers(0, vals, (rows, n)).astype(dtype)
                if dtype.startswith("float"):
                    x[rng.random((rows, n)) < 0.02] = np.nan
                    x[rng.random((rows, n)) < 0.2] = -0.0
                for variant in ("as is", "ascending", "descending", "distinct"):
                    y = x
                    if variant == "ascending":
                        y = np.sort(x, axis=1)
                    elif variant == "descending":
                        y = np.ascontiguousarray(np.sort(x, axis=1)[:, ::-1])
                    elif variant == "distinct" and dtype in ("float32", "float64", "int64"):
                        y = rng.permutation(rows * n).reshape(rows, n).astype(dtype)
                    for kind in ("max", "min"):
                        got = car.last_extreme_rows(y, kind)
                        np.testing.assert_array_equal(got, _last_ref(y, kind),
                                                      err_msg=f"{rows}x{n} {variant} {kind}")
    assert routes["sampled out"] and routes["tail"], routes


def test_large_tie_last_last_axis_takes_the_rows_routine(monkeypatch):
    """argmin/argmax(tie="last") over the trailing axes of a C-contiguous input of more than
    CPU_SMALL elements is served by the rows routine (cupyops.ops.argreduce.numpy_blocks)
    from its first call on, with the engine's answer; other layouts keep the engine."""
    import cupyops
    from cupyops import _call as _fastpath
    from cupyops.ops.argreduce import numpy_blocks as blocks
    calls, engine = [], []
    real, real_engine = blocks.rows_arg, car.argreduce
    monkeypatch.setattr(blocks, "rows_arg", lambda x2, *a, **k: calls.append(x2.shape) or
                        real(x2, *a, **k))
    monkeypatch.setattr(car, "argreduce", lambda x, *a, **k: engine.append(x.shape) or
                        real_engine(x, *a, **k))
    _fastpath.clear()
    rng = np.random.default_rng(4)
    x3 = rng.integers(0, 3, (3, 60, 100)).astype(np.float32)     # above COMPOSE_MAX too
    m = rng.integers(0, 3, (64, 100)).astype(np.int16)
    for x, f, kw in ((x3, cupyops.argmax, dict(axis=2)), (x3, cupyops.argmin, dict(axis=-1)),
                     (x3, cupyops.argmax, dict(axis=(1, 2))),
                     (m, cupyops.argmax, dict(axis=1, dtype=np.int32)),
                     (m, cupyops.argmin, dict(axis=1, keepdims=True))):
        want = np.asarray(real_engine(x, tuple(sorted(a % x.ndim for a in np.atleast_1d(
            kw["axis"]))), kind="max" if f is cupyops.argmax else "min", tie="last",
            index_dtype=kw.get("dtype", np.int64)))
        for _ in range(2):
            calls.clear()
            got = f(x, tie="last", device="cpu", **kw)
            assert calls, kw
            np.testing.assert_array_equal(got.reshape(want.shape), want)
            assert got.dtype == np.dtype(kw.get("dtype", np.int64))
    engine.clear()
    calls.clear()
    padded = rng.integers(0, 3, (64, 200)).astype(np.int16)[:, :100]   # rows 400 B apart
    for x in (np.asfortranarray(x3), padded):
        for _ in range(2):
            got = cupyops.argmax(x, axis=-1, tie="last", device="cpu")
        np.testing.assert_array_equal(got, x.shape[-1] - 1 - np.argmax(x[..., ::-1], axis=-1))
    assert not calls and engine


@pytest.mark.parametrize("tie", ["first", "last"])
def test_large_hardmax_over_the_last_axis_scatters_rows(monkeypatch, tie):
    """hardmax over the last axis of a C-contiguous input of more than CPU_SMALL elements is
    served by the rows routine (no engine call), with the engine's result for ties, NaN (the
    maximum), -0.0 == 0.0, bool and integers; other layouts keep the engine."""
    import cupyops
    from cupyops import _call as _fastpath
    engine = []
    real = car.hardmax
    monkeypatch.setattr(car, "hardmax", lambda *a, **k: engine.append(a[0].shape) or
                        real(*a, **k))
    _fastpath.clear()
    rng = np.random.default_rng(21)
    f = rng.integers(0, 3, (40, 3, 101)).astype(np.float32)
    f[rng.random(f.shape) < 0.02] = np.nan
    z = np.where(rng.random((64, 80)) < 0.5, -0.0, 0.0)
    cases = [f, z, rng.random((64, 80)) < 0.1, rng.integers(-2, 2, (64, 80)).astype(np.int8),
             rng.integers(0, 2, (50, 100)).astype(np.uint64),
             rng.integers(0, 3, (8, 1000)).astype(np.float32)]
    for x in cases:
        want = ref_hardmax(x, (x.ndim - 1,), tie)
        for _ in range(2):
            engine.clear()
            got = cupyops.hardmax(x, axis=-1, tie=tie, device="cpu")
            assert not engine, x.shape
            np.testing.assert_array_equal(got, want)
            assert got.dtype == x.dtype and got.shape == x.shape and got.flags.c_contiguous
    fortran = np.asfortranarray(f)
    for _ in range(2):
        engine.clear()
        np.testing.assert_array_equal(cupyops.hardmax(fortran, axis=-1, tie=tie, device="cpu"),
                                      ref_hardmax(fortran, (2,), tie))
        assert engine


@pytest.mark.parametrize("case", ["ties", "distinct", "one long row", "padded rows"])
@pytest.mark.parametrize("tie", ["first", "last"])
def test_large_last_axis_cached_calls_stay_bounded(case, tie):
    """The cached (second) call of argmax over the last axis of a large input copies no more
    than the chunked engine would: far below the input size (NumPy's argmax copies reversed
    or padded rows whole; the entries avoid both)."""
    import cupyops
    from cupyops import _call as _fastpath
    _fastpath.clear()
    rng = np.random.default_rng(11)
    if case == "ties":                                # 32 MiB inputs
        x = rng.integers(0, 4, (1024, 4096)).astype(np.float64)
    elif case == "distinct":
        x = rng.permutation(1024 * 4096).reshape(1024, 4096).astype(np.float64)
    elif case == "one long row":
        x = np.zeros((1, 4 * 2**20), np.float64)
        x[0, 0] = 1.0                                # the only maximum, at the row's start
    else:
        x = rng.integers(0, 4, (1024, 4200)).astype(np.float64)[:, :4096]
    want = x.shape[-1] - 1 - np.argmax(x[..., ::-1], axis=-1) if tie == "last" \
        else np.argmax(x, axis=-1)
    for call in range(2):
        tracemalloc.start()
        try:
            r = cupyops.argmax(x, axis=-1, tie=tie, device="cpu")
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        np.testing.assert_array_equal(r, want)
        assert peak - r.nbytes < x.nbytes // 4, (case, tie, call, peak, x.nbytes)
