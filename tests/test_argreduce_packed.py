"""The packed-key paths of argreduce_row and argreduce_col for 1- and 2-byte values
(kernels/argreduce.cu: ar_pack_key, ar_pack_reach, ar_scan_packed, ar_scan_cols_packed), on
device="simt", against an independent NumPy reference.

The packed paths only skip vectors (row) or positions (column) whose packed keys prove that
nothing in them beats the running best; everything else takes the exact ar_better path. So the
tests aim at what a wrong skip would break: the winner in every lane of a word, ties inside a
word and across words, NaN and -0.0 inside a word, the tie-side index of a vector (negative
strides), misaligned heads and tails, several groups per word in the column kernel, and both
index widths. The key and threshold arithmetic itself is checked exhaustively against ar_key.

Which path ran is read from the plan: ar_scan takes the packed path for values of 1 or 2 bytes
whenever the row plan's vector is 4 or 16 bytes, and ar_col whenever the column plan puts
4 / itemsize groups in a thread (:func:`packed`)."""
import math

import numpy as np
import pytest

from cupyops.ops.argreduce import launch as G

from cupyops.ops.argreduce import plan as GP
from cupyops import simt
from cupyops.core import modules as _modules
from cupyops.core import trace as _trace
from cupyops.core.backend import get_backend

ml_dtypes = pytest.importorskip("ml_dtypes")

BE = get_backend("simt")
BF16 = np.dtype(ml_dtypes.bfloat16)
NARROW = [np.dtype(t) for t in ("bool", "int8", "uint8", "int16", "uint16", "float16")] + [BF16]
FLOATS = [np.dtype(np.float16), BF16]
KINDS = ("max", "min")
TIES = ("first", "last")
SPLIT_SMALL = {"min_split_elements": 0, "min_work_per_thread": 1, "min_block_team_vecs": 64,
               "min_scratch_ratio": 0}


# ---------------------------------------------------------------------------- reference

def _comparable(x):
    """x as float64 (floats; bfloat16 widened from its bits) or int64, exactly."""
    with np.errstate(invalid="ignore"):          # (signalling NaN patterns)
        if x.dtype == BF16:
            return (x.view(np.uint16).astype(np.uint32) << 16).view(np.float32).astype(np.float64)
        if x.dtype.kind == "f":
            return x.astype(np.float64)
    return x.astype(np.int64)


def ref(x, axes, kind, tie, nan=False):
    """Row-major index over ``axes`` of the extreme of each group: NaN is the extreme (skipped
    for ``nan``), -0.0 == 0.0, ties to the first or last index. ValueError for an all-NaN group
    with ``nan``."""
    axes = tuple(axes)
    kept = [a for a in range(x.ndim) if a not in axes]
    g = math.prod(x.shape[a] for a in axes)
    y = np.transpose(_comparable(x), kept + list(axes)).reshape(-1, g)
    isn = np.isnan(y) if y.dtype.kind == "f" else np.zeros(y.shape, bool)
    yk = -y if kind == "min" else y
    vals = np.where(isn, -np.inf, yk) if y.dtype.kind == "f" else yk
    best = np.max(np.where(isn, -np.inf, vals), axis=1, keepdims=True) if y.dtype.kind == "f" \
        else np.max(vals, axis=1, keepdims=True)
    cand = (vals == best) & ~isn
    if nan:
        if isn.all(axis=1).any():
            raise ValueError("All-NaN slice encountered")
    else:
        cand = np.where(isn.any(axis=1, keepdims=True), isn, cand)
    if tie == "first":
        r = np.argmax(cand, axis=1)
    else:
        r = g - 1 - np.argmax(cand[:, ::-1], axis=1)
    return r.reshape([x.shape[a] for a in kept]).astype(np.int64)


def aligned(a, alignment=256, offset=0):
    """A copy of ``a`` whose data starts ``offset`` bytes past an ``alignment`` boundary."""
    raw = np.empty(a.nbytes + alignment + offset, np.uint8)
    start = -raw.__array_interface__["data"][0] % alignment + offset
    out = raw[start:start + a.nbytes].view(a.dtype).reshape(a.shape)
    out[...] = a
    return out


def packed(plan) -> bool:
    """Did the packed path run? (ar_scan / ar_col's dispatch on the plan's fields.)"""
    s = plan.itemsize
    if s > 2:
        return False
    if plan.kernel == "row":
        return plan.vec in (4 // s, 16 // s)
    return plan.kernel == "col" and plan.vec == 4 // s


def run(x, axes, kind="max", tie="first", *, nan=False, index_dtype=np.int64, force_64bit=False):
    with _trace.recording() as t:
        r = G.argreduce(BE, x, tuple(axes), kind=kind, tie=tie, index_dtype=np.dtype(index_dtype),
                        skip_nan=nan, force_64bit=force_64bit)
    return r, t.plans[0]


def check(x, axes, *, kinds=KINDS, ties=TIES, nan=False, want_packed=True, force_64bit=False,
          index_dtype=np.int64):
    """Every kind x tie against ``ref``; returns the set of (case, vec) that ran."""
    seen = set()
    for kind in kinds:
        for tie in ties:
            try:
                expect = ref(x, axes, kind, tie, nan)
            except ValueError:
                with pytest.raises(ValueError, match="All-NaN"):
                    run(x, axes, kind, tie, nan=nan, force_64bit=force_64bit)
                continue
            r, plan = run(x, axes, kind, tie, nan=nan, index_dtype=index_dtype,
                          force_64bit=force_64bit)
            np.testing.assert_array_equal(r, expect, err_msg=f"{x.dtype} {kind} {tie} nan={nan} "
                                                             f"{plan}")
            assert plan.use_64bit == bool(force_64bit)
            if want_packed:
                assert packed(plan), plan
            seen.add((plan.case, plan.vec))
    return seen


def background(dtype, shape, rng=None):
    """Values strictly between the low and the high marker of ``marks``."""
    if dtype == np.bool_:
        return np.zeros(shape, bool)
    if rng is None:
        return np.full(shape, 1, dtype) if dtype != BF16 else np.full(shape, 1.0, np.float32).astype(BF16)
    v = rng.integers(1, 8, shape) if dtype.kind == "u" else rng.integers(-3, 4, shape)
    return v.astype(np.float32).astype(dtype) if dtype == BF16 else v.astype(dtype)


def marks(dtype):
    """(a value above every background value, one below)."""
    if dtype == np.bool_:
        return True, None
    if dtype.kind == "u":
        return np.iinfo(dtype).max, 0
    if dtype.kind == "i":
        return np.iinfo(dtype).max, np.iinfo(dtype).min
    if dtype == BF16:
        return np.float32(100).astype(BF16), np.float32(-100).astype(BF16)
    return dtype.type(100), dtype.type(-100)


# ---------------------------------------------------------------------------- key arithmetic

_TEST_KERNELS = r"""
// lane keys of ar_pack_key next to ar_lane_key(ar_key(...)) of each element, for the four
// (flip, NaN key) pairs: out[4 * i + c], c = is_min + 2 * nan_skip
template <class T>
__global__ void ar_test_pack(const unsigned int* words, unsigned int* got, unsigned int* want,
                             int n)
{
    typedef typename ArType<T>::key K;
    typedef typename ArType<T>::bits B;
    constexpr int S = (int)sizeof(T);
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const unsigned int w = words[i];
    for (int c = 0; c < 4; ++c) {
        const K flip = (c & 1) ? ~K() : K();
        const bool nan_skip = (c & 2) != 0;
        got[4 * i + c] = ar_pack_key<T>(w, ar_pack_xor<T>(flip), nan_skip ? 0u : 0xffffffffu);
        unsigned int e = 0;
        for (int j = 0; j < 4 / S; ++j)
            e |= ar_lane_key<T>(ar_key<T>((B)(w >> (8 * S * j)), flip, nan_skip ? K() : ~K()))
                 << (8 * S * j);
        want[4 * i + c] = e;
    }
}

// ar_pack_reach of a word against one lane threshold (the same in every lane)
template <int S>
__global__ void ar_test_reach(const unsigned int* words, const unsigned int* thr,
                              unsigned int* out, int n)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const unsigned int t = ar_pack_thr<S>(thr[i]);
    out[i] = ar_pack_reach<S>(words[i], t, t) != 0 ? 1u : 0u;
}
"""

_TYPES = {np.dtype(np.bool_): "bool", np.dtype(np.int8): "signed char",
          np.dtype(np.uint8): "unsigned char", np.dtype(np.int16): "short",
          np.dtype(np.uint16): "unsigned short", np.dtype(np.float16): "cupyops_half",
          BF16: "cupyops_bfloat16"}


@pytest.fixture(scope="module")
def test_module():
    exprs = tuple(f"ar_test_pack<{c}>" for c in _TYPES.values()) + ("ar_test_reach<1>",
                                                                     "ar_test_reach<2>")
    src = _modules.module_source("argreduce") + _TEST_KERNELS
    return simt.RawModule(code=src, name_expressions=exprs)


def _launch(fn, n, *args):
    fn(((n + 255) // 256,), (256,), args + (np.int32(n),))


def _all_words(itemsize, rng):
    """Words in which every bit pattern of a lane appears in every lane."""
    if itemsize == 2:
        p = np.arange(1 << 16, dtype=np.uint32)
        return p | (rng.permutation(p) << 16)
    p = np.arange(256, dtype=np.uint32)
    return p | (rng.permutation(p) << 8) | (rng.permutation(p) << 16) | (rng.permutation(p) << 24)


@pytest.mark.parametrize("dtype", NARROW, ids=str)
def test_pack_key_is_ar_key_on_every_pattern(dtype, test_module):
    rng = np.random.default_rng(1)
    words = _all_words(dtype.itemsize, rng)
    n = len(words)
    got = np.zeros(4 * n, np.uint32)
    want = np.zeros(4 * n, np.uint32)
    _launch(test_module.get_function(f"ar_test_pack<{_TYPES[dtype]}>"), n, words, got, want)
    np.testing.assert_array_equal(got, want)
    if dtype.itemsize != 2 or dtype.kind in "iu":
        return
    # and independently of ar_key: the lane keys order the values as floats (-0.0 == 0.0),
    # NaN the all-ones lane (0 for nanarg*), for argmax and (reversed) argmin
    lanes = got.reshape(n, 4) & 0xffff                 # lane 0 holds pattern i of word i
    v = _comparable(np.arange(1 << 16, dtype=np.uint16).view(dtype))
    isn = np.isnan(v)
    for c, sign in ((0, 1), (1, -1), (2, 1), (3, -1)):
        k = lanes[:, c].astype(np.int64)
        assert (k[isn] == (0 if c >= 2 else 0xffff)).all()
        order = np.argsort(sign * v[~isn], kind="stable")
        ks, vs = k[~isn][order], sign * v[~isn][order]
        assert (np.diff(ks) >= 0).all()
        assert ((np.diff(ks) == 0) == (np.diff(vs) == 0)).all()
        assert (ks > 0).all() and (ks < 0xffff).all()


@pytest.mark.parametrize("itemsize", [1, 2])
def test_reach_is_exact_and_never_misses(itemsize, test_module):
    rng = np.random.default_rng(2)
    lanes, lmax = 4 // itemsize, (1 << (8 * itemsize)) - 1
    edge = np.array([0, 1, 2, lmax // 2, lmax // 2 + 1, lmax - 1, lmax], np.uint32)
    pick = np.concatenate([rng.integers(0, lmax + 1, (20000, lanes)),
                           edge[rng.integers(0, len(edge), (20000, lanes))]]).astype(np.uint32)
    thr = np.concatenate([rng.integers(0, lmax + 2, 20000),
                          np.r_[edge, lmax + 1][rng.integers(0, len(edge) + 1, 20000)]])
    thr = thr.astype(np.uint32)
    if itemsize == 1:      # every (lane value, threshold) pair, in each lane
        v, t = np.meshgrid(np.arange(256, dtype=np.uint32), np.arange(257, dtype=np.uint32))
        for j in range(4):
            w = np.zeros((v.size, 4), np.uint32)
            w[:, j] = v.ravel()
            pick = np.concatenate([pick, w])
            thr = np.concatenate([thr, t.ravel()])
    words = np.zeros(len(pick), np.uint32)
    for j in range(lanes):
        words |= pick[:, j] << (8 * itemsize * j)
    out = np.zeros(len(words), np.uint32)
    _launch(test_module.get_function(f"ar_test_reach<{itemsize}>"), len(words), words, thr, out)
    want = (pick >= thr[:, None]).any(axis=1)
    assert out[want].all(), "a lane at or above its threshold was missed"
    # exact, but for the saturated threshold 2**16 (2-byte lanes), where an all-ones word may
    # ask for the exact path
    loose = (itemsize == 2) & (thr == 1 << 16) & (words == 0xffffffff)
    np.testing.assert_array_equal(out[~loose].astype(bool), want[~loose])


# ---------------------------------------------------------------------------- winners and ties

@pytest.mark.parametrize("dtype", NARROW, ids=str)
def test_winner_in_every_lane_row(dtype):
    """A single extreme at each position of a 3-vector window (every lane of every word of a
    16-byte and of a 4-byte vector), for argmax and argmin, with a background of ties."""
    hi, lo = marks(dtype)
    for elems in (64 // dtype.itemsize, 4 // dtype.itemsize + 32):   # 16-byte, 4-byte vectors
        n = elems
        x = aligned(background(dtype, (n, n)))
        np.fill_diagonal(x, hi)          # row r: the maximum at position r
        for tie in TIES:
            r, plan = run(x, (1,), "max", tie)
            assert packed(plan) and plan.case == "row", plan
            np.testing.assert_array_equal(r, np.arange(n))
        if lo is not None:
            y = aligned(background(dtype, (n, n)))
            np.fill_diagonal(y, lo)
            for tie in TIES:
                r, plan = run(y, (1,), "min", tie)
                assert packed(plan)
                np.testing.assert_array_equal(r, np.arange(n))
        else:                            # bool argmin: the one False
            y = aligned(np.ones((n, n), bool))
            np.fill_diagonal(y, False)
            r, plan = run(y, (1,), "min", "last")
            assert packed(plan)
            np.testing.assert_array_equal(r, np.arange(n))


@pytest.mark.parametrize("dtype", NARROW, ids=str)
def test_winner_in_every_lane_column(dtype):
    """Several groups per word: group c's extreme at row (c * 7) % rows, so each lane of the
    word wins at a different position; every lane in turn holds a strictly later winner."""
    hi, lo = marks(dtype)
    rows, cols = 29, 8 * (4 // dtype.itemsize)
    for kind, mark in (("max", hi), ("min", lo)):
        if mark is None:
            continue
        x = aligned(background(dtype, (rows, cols)))
        where = (np.arange(cols) * 7) % rows
        x[where, np.arange(cols)] = mark
        for tie in TIES:
            r, plan = run(x, (0,), kind, tie)
            assert packed(plan) and plan.case == "column" and plan.vec == 4 // dtype.itemsize
            np.testing.assert_array_equal(r, where)


@pytest.mark.parametrize("dtype", NARROW, ids=str)
def test_ties_inside_and_across_words(dtype):
    rng = np.random.default_rng(3)
    hi, _ = marks(dtype)
    v = 16 // dtype.itemsize
    n = 4 * v
    # pairs of equal maxima: both in one word, in two words of one vector, in two vectors
    pairs = [(1, 2), (0, 4 // dtype.itemsize - 1), (1, v - 1), (2, v + 3), (v - 1, v),
             (0, n - 1), (3, 3 + 2 * v)]
    x = aligned(background(dtype, (len(pairs), n), rng if dtype != np.bool_ else None))
    for k, (a, b) in enumerate(pairs):
        x[k, [a, b]] = hi
    for tie, pick in (("first", 0), ("last", 1)):
        r, plan = run(x, (1,), "max", tie)
        assert packed(plan) and plan.vec == v
        np.testing.assert_array_equal(r, [p[pick] for p in pairs])
    # all equal: the first and the last index of the row, and of the column
    z = aligned(background(dtype, (6, n)))
    check(z, (1,))
    check(z, (0,))
    np.testing.assert_array_equal(run(z, (1,), "min", "last")[0], [n - 1] * 6)
    np.testing.assert_array_equal(run(z, (0,), "max", "first")[0], [0] * n)
    # tie-heavy random data, rows and columns, both index widths
    w = aligned(background(dtype, (13, 3 * n), rng))
    for f64 in (False, True):
        check(w, (1,), force_64bit=f64)
        check(w, (0,), force_64bit=f64)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_nan_and_signed_zero_inside_a_word(dtype):
    v = 16 // dtype.itemsize
    n = 3 * v
    z = _bits(dtype, 0x8000)                              # -0.0
    nan = np.array(np.nan, np.float32).astype(dtype)
    neg_nan = _bits(dtype, 0xffff)                        # a NaN with the sign bit and a payload
    # -0.0 next to 0.0 in one word (a tie), with every other value negative
    x = aligned(np.full((4, n), -1, np.float32).astype(dtype))
    x[0, [4, 5]] = [z, 0]
    x[1, [4, 5]] = [0, z]
    x[2, [1, v + 1]] = [z, z]
    x[3, :] = z
    x[3, [0, n - 1]] = 0
    np.testing.assert_array_equal(run(x, (1,), "max", "first")[0], [4, 4, 1, 0])
    np.testing.assert_array_equal(run(x, (1,), "max", "last")[0], [5, 5, v + 1, n - 1])
    check(x, (1,))
    check(x, (0,))
    # NaN in every lane of a word, next to +inf (which NaN beats) and to the other lane
    for lane in range(2 * (4 // dtype.itemsize) + 1):
        y = aligned(np.full((3, n), np.inf, np.float32).astype(dtype))
        y[0, lane] = nan
        y[1, lane] = neg_nan
        y[2, [lane, lane + 1]] = [nan, neg_nan]
        for kind in KINDS:
            np.testing.assert_array_equal(run(y, (1,), kind, "first")[0], [lane] * 3)
            np.testing.assert_array_equal(run(y, (1,), kind, "last")[0], [lane, lane, lane + 1])
        check(y, (1,))
        check(y, (1,), nan=True)
        check(np.ascontiguousarray(np.tile(y.T, 2)[:, :4]), (0,), nan=True)
    # nanargmax / nanargmin: NaN skipped inside a word, -inf still beats it; all-NaN raises
    q = aligned(np.full((4, n), np.nan, np.float32).astype(dtype))
    q[0, 3] = -np.inf
    q[1, [2, 3]] = [z, 0]
    q[2, n - 2] = np.inf
    q[3, 0] = 1
    for tie in TIES:
        np.testing.assert_array_equal(run(q, (1,), "max", tie, nan=True)[0],
                                      [3, 2 if tie == "first" else 3, n - 2, 0])
        np.testing.assert_array_equal(run(q, (1,), "min", tie, nan=True)[0],
                                      [3, 2 if tie == "first" else 3, n - 2, 0])
    check(q, (1,), nan=True)
    check(np.ascontiguousarray(q.T), (0,), nan=True)
    allnan = aligned(np.full((2, n), np.nan, np.float32).astype(dtype))
    with pytest.raises(ValueError, match="All-NaN"):
        run(allnan, (1,), "max", nan=True)
    with pytest.raises(ValueError, match="All-NaN"):
        run(np.ascontiguousarray(allnan.T), (0,), "min", nan=True)


def _bits(dtype, b):
    return np.array(b, np.uint16).view(dtype)[()]


# ---------------------------------------------------------------------------- layouts

@pytest.mark.parametrize("dtype", NARROW, ids=str)
def test_misaligned_heads_and_tails(dtype):
    """Views starting 1..3 elements past a 16-byte boundary (and at 4 bytes), lengths that are
    not a multiple of the vector: the planner picks 16-byte, 4-byte or scalar loads; every
    result is exact, and the packed path runs wherever a 4- or 16-byte vector does."""
    rng = np.random.default_rng(4)
    base = aligned(background(dtype, (6, 320), rng))
    vecs = set()
    for off in (0, 1, 2, 3, 4 // dtype.itemsize):
        for n in (16 // dtype.itemsize * 5, 16 // dtype.itemsize * 5 + 1, 37, 4 // dtype.itemsize * 9):
            x = base[:, off:off + n]
            for f64 in (False, True):
                seen = check(x, (1,), want_packed=False, force_64bit=f64)
                vecs |= {v for _, v in seen}
            r, plan = run(x, (1,))
            assert packed(plan) == (plan.vec > 1)
    assert {1, 4 // dtype.itemsize, 16 // dtype.itemsize} <= vecs
    # the column kernel: groups per word only where the kept row is aligned
    for off in (0, 1, 4 // dtype.itemsize):
        y = base[:, off:off + 8 * (4 // dtype.itemsize)]
        check(y, (0,), want_packed=off % (4 // dtype.itemsize) == 0)


@pytest.mark.parametrize("dtype", NARROW, ids=str)
def test_negative_strides(dtype):
    """Reversed rows (the vector's logical indices fall: its tie-side index is its last
    element) and reversed columns (the walk's logical index falls)."""
    rng = np.random.default_rng(5)
    hi, _ = marks(dtype)
    v = 16 // dtype.itemsize
    x = aligned(background(dtype, (5, 4 * v), rng))
    x[0, [2, 3]] = hi                      # a tie inside one word
    x[1, [1, v + 2]] = hi                  # across vectors
    x[2, :] = hi
    r = x[:, ::-1]
    for kind in KINDS:
        for tie in TIES:
            got, plan = run(r, (1,), kind, tie)
            assert packed(plan) and plan.vec == v, plan
            np.testing.assert_array_equal(got, ref(r, (1,), kind, tie))
    check(r, (1,), force_64bit=True)
    c = aligned(background(dtype, (4 * v, 4 * (4 // dtype.itemsize)), rng))
    c[[3, 5], 1] = hi
    c[:, 2] = hi
    check(c[::-1], (0,))
    check(c[::-1], (0,), force_64bit=True)
    check(c[::-1, ::-1][:, ::-1], (0,))
    check(x[::-1, ::-1], (0, 1), want_packed=True)


@pytest.mark.parametrize("dtype", NARROW, ids=str)
def test_column_several_groups_per_word(dtype):
    rng = np.random.default_rng(6)
    vc = 4 // dtype.itemsize
    a = aligned(background(dtype, (45, 3, 8 * vc), rng))
    hi, lo = marks(dtype)
    a[7, 1, ::3] = hi
    if lo is not None:
        a[40, 2, 1::3] = lo
    for idx, f64 in ((np.int32, False), (np.int64, True)):
        seen = check(a, (0,), index_dtype=idx, force_64bit=f64)
        seen |= check(a, (0, 1), index_dtype=idx, force_64bit=f64)         # one merged dim
        seen |= check(a[:, :2], (0, 1), index_dtype=idx, force_64bit=f64)  # two dims (odometer)
        assert seen == {("column", vc)}
    # a later, equal key in one lane only (tie last moves that lane alone)
    b = aligned(background(dtype, (20, 4 * vc)))
    b[[2, 9], 1] = hi
    b[[5], 0] = hi
    np.testing.assert_array_equal(run(b, (0,), "max", "last")[0][:2], [5, 9])
    np.testing.assert_array_equal(run(b, (0,), "max", "first")[0][:2], [5, 2])


@pytest.mark.parametrize("dtype", NARROW, ids=str)
def test_sorted_inputs_take_the_exact_path_every_time(dtype):
    """Increasing values: every vector beats the best (the worst case of the skip test);
    decreasing: none after the first."""
    n = 4 * 16 // dtype.itemsize
    if dtype == np.bool_:
        inc = np.arange(n) >= n // 2
    else:
        inc = np.linspace(-50, 50, n).astype(np.float32).astype(dtype) if dtype.kind == "V" \
            else np.linspace(max(-50, np.iinfo(dtype).min) if dtype.kind in "iu" else -50, 50,
                             n).astype(dtype)
    x = aligned(np.stack([inc, inc[::-1]]))
    check(x, (1,))
    check(np.ascontiguousarray(np.repeat(x.T, 4 // dtype.itemsize * 2, axis=1)), (0,))


@pytest.mark.parametrize("dtype", ["int8", "float16", "uint16", "bool"])
def test_split_and_decode_chunks(dtype, monkeypatch):
    """Groups cut into chunks (split and one-launch decode): each chunk's scan starts clear."""
    dtype = np.dtype(dtype)
    rng = np.random.default_rng(7)
    x = aligned(background(dtype, (8, 40000), rng))
    hi, _ = marks(dtype)
    x[0, [7, 39000]] = hi
    with _trace.recording() as t:
        r = G.argreduce(BE, x, (1,), kind="max", tie="last", index_dtype=np.dtype(np.int64))
    assert t.plans[0].case == "decode" and packed(t.plans[0])
    np.testing.assert_array_equal(r, ref(x, (1,), "max", "last"))
    check(x, (1,))
    monkeypatch.setattr(GP, "PLAN_OPTIONS", dict(SPLIT_SMALL))
    y = aligned(background(dtype, (700, 8 * (4 // dtype.itemsize)), rng))
    seen = check(y, (0,)) | check(x[:2, :4000], (1,))
    assert "split" in {c for c, _ in seen}


@pytest.mark.parametrize("schedule", ["reverse", 31337])
def test_under_schedules(schedule):
    rng = np.random.default_rng(8)
    with simt.schedule(schedule):
        for dtype in (np.dtype(np.uint8), np.dtype(np.float16)):
            x = aligned(background(dtype, (8, 600), rng))
            check(x, (1,))
            check(np.ascontiguousarray(x.T), (0,))


@pytest.mark.parametrize("dtype", NARROW, ids=str)
def test_interleaved_vectors(dtype):
    """F-ordered groups reduced over both axes: a vector runs down a column (logical stride c),
    so a thread's next vector (the next column) interleaves with the indices of the last one,
    and whether it can win a tie depends on its tie-side index; reversed axes make that its
    last element."""
    rng = np.random.default_rng(9)
    v = 16 // dtype.itemsize
    r, c = 32 * v, 4                          # one warp team: a thread's next vector is the next column
    hi, _ = marks(dtype)
    f = aligned(background(dtype, (c, r), rng)).T          # shape (r, c), axis 0 innermost
    views = (f, f[::-1], f[:, ::-1], f[::-1, ::-1])
    for x in views:
        seen = check(x, (0, 1))
        assert {vec for _, vec in seen} == {v}
    # the same extreme at the tie-side end of two neighbouring vectors of one thread
    for x in views:
        y = aligned(background(dtype, (c, r))).T
        y[v - 1, 0] = hi
        y[0, 1] = hi
        y = y[::-1] if x.strides[0] < 0 else y
        y = y[:, ::-1] if x.strides[1] < 0 else y
        check(y, (0, 1), kinds=("max",))


# ---------------------------------------------------------------------------- the walk's direction

@pytest.mark.parametrize("dtype", ["int32", "uint32", "float32", "int64", "float64", "complex64",
                                   "int8", "float16"])
def test_column_walk_direction(dtype):
    """ar_scan_cols (one group per thread: values of 4 bytes or more, and narrow values whose
    rows are not 4-byte aligned) compares keys alone after its first position, letting equal
    keys win when the walk runs towards the tie side: reversed reduced axes run it backwards."""
    dtype = np.dtype(dtype)
    rng = np.random.default_rng(10)
    v = rng.integers(-2, 3, (70, 9))
    x = aligned(v.astype(dtype) if dtype.kind != "c" else (v + 1j * (v % 2)).astype(dtype))
    if dtype.kind == "f":
        x[5, 1] = np.nan
    views = [x[:, 1:] if dtype.itemsize < 4 else x, x[::-1, 1:] if dtype.itemsize < 4 else x[::-1]]
    for y in views:
        for f64 in (False, True):
            for kind in KINDS:
                for tie in TIES:
                    r, plan = run(y, (0,), kind, tie, force_64bit=f64)
                    assert plan.kernel == "col" and plan.vec == 1 and len(plan.red) == 1
                    np.testing.assert_array_equal(r, _ref_any(y, (0,), kind, tie))


@pytest.mark.parametrize("dtype", ["int32", "float32", "int64", "float64", "complex64"])
def test_row_walk_direction(dtype):
    """ar_scan_v (values of 4 bytes or more) likewise compares keys alone after its first
    vector: reversed rows walk towards lower logical indices, also inside each vector."""
    dtype = np.dtype(dtype)
    rng = np.random.default_rng(11)
    v = rng.integers(-2, 3, (6, 1000))      # several vectors per thread of a 32-lane team
    x = aligned(v.astype(dtype) if dtype.kind != "c" else (v + 1j * (v % 2)).astype(dtype))
    if dtype.kind == "f":
        x[2, [7, 50]] = np.nan
    for y in (x, x[:, ::-1], x[:, 1:]):
        for f64 in (False, True):
            for kind in KINDS:
                for tie in TIES:
                    r, plan = run(y, (1,), kind, tie, force_64bit=f64)
                    assert plan.kernel == "row" and len(plan.red) == 1
                    np.testing.assert_array_equal(r, _ref_any(y, (1,), kind, tie))


def _ref_any(x, axes, kind, tie):
    if x.dtype.kind == "c":     # lexicographic (real, imag), NaN in either part the extreme
        re, im = _comparable(x.real), _comparable(x.imag)
        key = np.where(np.isnan(re) | np.isnan(im), np.nan, re * 8 + im)   # parts are small ints
        return ref(key, axes, kind, tie)
    return ref(x, axes, kind, tie)


# ---------------------------------------------------------------------------- hardmax, column

def onehot(x, axes, tie):
    """hardmax's reference: 1 at ref's argmax of each group, in x's shape and dtype."""
    axes = tuple(axes)
    kept = [a for a in range(x.ndim) if a not in axes]
    g = math.prod(x.shape[a] for a in axes)
    oh = np.arange(g)[None, :] == ref(x, axes, "max", tie).reshape(-1, 1)
    oh = oh.reshape([x.shape[a] for a in kept + list(axes)])
    oh = np.transpose(oh, np.argsort(kept + list(axes)))
    one = np.ones((), np.float32).astype(x.dtype) if x.dtype == BF16 else np.ones((), x.dtype)
    return np.ascontiguousarray(np.where(oh, one, np.zeros((), x.dtype)).astype(x.dtype))


def run_hm(x, axes, tie, out=None):
    with _trace.recording() as t:
        r = G.hardmax(BE, x, tuple(axes), tie=tie, out=out)
    return r, t.plans[0]


@pytest.mark.parametrize("dtype", NARROW, ids=str)
def test_hardmax_column_reads_and_writes_words(dtype):
    """hardmax over a first or middle axis of 1- and 2-byte values takes the packed column scan
    (4 / itemsize groups a thread, one 4-byte load a position) and writes each position's
    one-hots as one 4-byte word: the warp's stores cover whole sectors, each output byte once.
    An out= aligned to its element only takes element stores, with the same result."""
    rng = np.random.default_rng(21)
    vc = 4 // dtype.itemsize
    hi, _ = marks(dtype)
    a = aligned(background(dtype, (6, 45, 8 * vc), rng))
    a[2, 7, ::3] = hi
    a[2, 30, ::5] = hi              # (ties with the row above in some lanes)
    for x, axes in ((a, (1,)), (a[0], (0,)), (a, (0, 1)), (a[:, :, :2 * vc], (1,))):
        for tie in TIES:
            out = aligned(np.zeros(x.shape, x.dtype))
            with simt.record_traffic() as rec:
                r, plan = run_hm(x, axes, tie, out=out)
            assert r is out and packed(plan) and plan.case == "column", plan
            np.testing.assert_array_equal(out.view(np.uint8), onehot(x, axes, tie).view(np.uint8))
            if plan.passes == 1:
                w = rec.launches[0]
                assert w.requested_bytes_store == x.nbytes
                # (element stores of 4 / itemsize groups a thread would each touch the
                # sectors of the whole warp's range: 2 to 4 times these)
                assert w.sectors_store <= 1.25 * w.unique_sectors_store, w
            odd = aligned(np.zeros(x.shape, x.dtype), offset=dtype.itemsize)
            run_hm(x, axes, tie, out=odd)
            np.testing.assert_array_equal(odd.view(np.uint8), onehot(x, axes, tie).view(np.uint8))
    # outputs that are not a word of neighbours a position: one element a lane, as before
    t = aligned(background(dtype, (8 * vc, 45), rng)).T
    r, plan = run_hm(t, (0,), "first")
    np.testing.assert_array_equal(r.view(np.uint8), onehot(t, (0,), "first").view(np.uint8))


@pytest.mark.parametrize("dtype", ["int8", "float16", "bool"])
def test_hardmax_column_split_and_schedules(dtype, monkeypatch):
    dtype = np.dtype(dtype)
    rng = np.random.default_rng(22)
    x = aligned(background(dtype, (3, 700, 8 * (4 // dtype.itemsize)), rng))
    x[1, 650, 3] = marks(dtype)[0]
    with simt.schedule(99):
        r, plan = run_hm(x, (1,), "last")
    assert packed(plan)
    np.testing.assert_array_equal(r.view(np.uint8), onehot(x, (1,), "last").view(np.uint8))
    monkeypatch.setattr(GP, "PLAN_OPTIONS", dict(SPLIT_SMALL))
    for schedule in ("reverse", 7):
        with simt.schedule(schedule):
            r, plan = run_hm(x, (1,), "first")
        assert plan.case == "split" and packed(plan)
        np.testing.assert_array_equal(r.view(np.uint8), onehot(x, (1,), "first").view(np.uint8))


@pytest.mark.parametrize("dtype", [np.int8, np.bool_, np.float16])
@pytest.mark.parametrize("shape,axis", [((1024, 256), 0), ((64, 128, 32), 1)])
def test_column_combine_is_not_bank_conflicted(dtype, shape, axis):
    """Issue 26: the packed column combine stores each thread's VC bests at t * VC + j; its
    slots are swizzled so a warp's stores hit 32 banks (simt: wavefronts / accesses <= 2)."""
    import cupyops
    from cupyops import simt
    x = np.random.default_rng(3).integers(0, 3, shape).astype(dtype)
    with simt.record_traffic() as rec:
        got = cupyops.argmax(x, axis=axis, device="simt")
    np.testing.assert_array_equal(got, np.argmax(x, axis=axis))
    cols = [r for r in rec.launches if r.kernel.startswith("argreduce_col") and r.shared_accesses]
    assert cols, [r.kernel for r in rec.launches]
    for r in cols:
        assert r.shared_wavefronts / r.shared_accesses <= 2, (r.kernel, r.shared_wavefronts,
                                                              r.shared_accesses)


@pytest.mark.parametrize("dtype", [np.dtype(np.int8), np.dtype(np.float16), np.dtype(np.float32)],
                         ids=str)
def test_launch_names_the_instantiation_of_its_plans_vec(dtype):
    """Issue 33: the row and column kernels' vec is a template parameter (an instantiation
    holds one scan): each launch names the instantiation of its plan's vec, and every vec the
    family declares is one some layout's plan picks."""
    from cupyops.ops.argreduce import family as F
    x = aligned(background(dtype, (8, 64), np.random.default_rng(3)))
    seen = set()
    # rows: widest vectors, a 4-byte-aligned start, one element; columns: packed, misaligned
    for arr, axis in ((x, 1), (x[:, 4:], 1), (x[:, 1:], 1), (x, 0), (x[:, 1:], 0)):
        with _trace.recording() as t:
            r = G.argreduce(BE, arr, (axis,), kind="max", tie="first",
                            index_dtype=np.dtype(np.int64))
        plan = t.plans[0]
        kernel = {"row": F.ROW, "col": F.COL}[plan.kernel]
        assert t.launches[0][0] == F.expression(kernel, dtype, plan.use_64bit, plan.vec)
        np.testing.assert_array_equal(r, np.argmax(arr, axis=axis))
        seen.add((plan.kernel, plan.vec))
    want = {("row", v) for v in F.vecs(F.ROW, dtype)} | {("col", v) for v in F.vecs(F.COL, dtype)}
    assert seen == want, seen
    with pytest.raises(ValueError, match="vec must be one of"):
        F.expression(F.ROW, dtype, False, 3)
