"""The packed paths of the nonzero family (issue 15): 1- and 2-byte types over one contiguous run
are read as aligned 16-byte words and tested 4 or 2 elements per instruction
(kernels/nonzero.cuh, nz_packed; nonzero_tiles with params.vec, count_nonzero_axes mode 0 with
params.vec). On simt, against NumPy and the brute-force reference (tests/ref_nonzero.py):
every position of a nonzero inside a word, the float zero rules inside a word, misaligned heads
and tails, all-zero and all-nonzero words, warp and tile boundaries, schedules, 64-bit indexing,
and that the packed path is the one that ran. Then nonzero_tiles_t (F-order, transposed,
permuted and reversed inputs read in memory order through a shared bit mask), its 4-byte word
reads, and the traffic goals of issue 15 (sectors / minimum, cupyops/bench/traffic.py)."""
import numpy as np
import pytest

from cupyops import simt
from cupyops.core import backend as _backend
from cupyops.core import trace as _trace
from cupyops.ops.nonzero import launch as G
from cupyops.core import modules as _modules
from ref_nonzero import ref_argwhere, ref_count_nonzero

NARROW = [np.dtype(t) for t in (np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.float16)]
if _modules.CTYPES.get(_modules._bf16.dtype()):
    NARROW.append(_modules._bf16.dtype())
BITS = {1: np.uint8, 2: np.uint16}


@pytest.fixture(scope="module")
def be():
    return _backend.get_backend("simt")


def buffer(nbytes, offset):
    """Zeroed bytes whose element 0 sits `offset` bytes past a 64-byte boundary."""
    raw = np.zeros(nbytes + 128, np.uint8)
    start = (-raw.__array_interface__["data"][0]) % 64 + offset
    return raw[start:start + nbytes]


def from_bits(bits, dtype, offset=0):
    """An array of `dtype` with the given bit patterns, starting `offset` bytes past a 64-byte
    boundary (offset a multiple of the item size)."""
    dtype = np.dtype(dtype)
    b = np.asarray(bits, BITS[dtype.itemsize])
    out = buffer(b.nbytes, offset).view(b.dtype)
    out[...] = b
    return out.view(dtype)


def coord_plans(t):
    return [p for p in t.plans if hasattr(p, "num_tiles")]


def count_plans(t):
    return [p for p in t.plans if hasattr(p, "n_chunks")]


def check(be, x, *, packed=True, index_dtype=np.int64, sizes=(), head=None, **kw):
    """Every coordinate form and the full count against NumPy (and the reference for small
    inputs); asserts whether the packed path ran (and its head, when given). Returns the
    count."""
    want = np.argwhere(x)
    if x.size <= 256:
        np.testing.assert_array_equal(want, ref_argwhere(x))
    n = len(want)
    with _trace.recording() as t:
        np.testing.assert_array_equal(G.argwhere(be, x, index_dtype, **kw), want)
        for g, w in zip(G.nonzero(be, x, index_dtype, **kw), np.nonzero(x)):
            np.testing.assert_array_equal(g, w)
        coords, count = G.nonzero_coordinates(be, x, None, 0, index_dtype, **kw)
        np.testing.assert_array_equal(coords, want)
        assert int(count) == n
        for k in sizes or (0, max(n // 2, 1), n, n + 7):
            c, cnt = G.nonzero_coordinates(be, x, k, -3, index_dtype, **kw)
            m = min(k, n)
            np.testing.assert_array_equal(c[:m], want[:m])
            assert (c[m:] == np.asarray(-3).astype(index_dtype)).all() and int(cnt) == n
        assert int(G.count_nonzero(be, x, tuple(range(x.ndim)), **kw)) == n
    check.trace = t                      # for callers that assert more about the launches
    plans = coord_plans(t)
    assert plans and all(p.vec == packed for p in plans), [p.vec for p in plans]
    if head is not None:
        assert {p.head for p in plans} == {head}
    cps = count_plans(t)
    if x.ndim == 1:
        assert cps and all(p.vec == packed for p in cps)
    return n


# ------------------------------------------------------------------------------ positions

@pytest.mark.parametrize("dtype", NARROW, ids=str)
def test_each_position_in_a_word(be, dtype):
    """One nonzero at every element position of a 16-byte word (and so of each 32-bit word),
    with the smallest and the largest nonzero bit patterns (the low bit alone, the top bit
    alone: the packed test's two halves), in a 3-word run; then every pair of positions."""
    s = dtype.itemsize
    vec = 16 // s
    n = 3 * vec
    lows = [1, 1 << (8 * s - 1)] if dtype.kind != "f" and dtype.name != "bfloat16" else [1, 0x7c00 if dtype == np.float16 else 0x7f80]
    if dtype == np.bool_:
        lows = [1, 2, 0x80, 0xff]        # bool bytes other than 1 are True too (as in NumPy)
    for v in lows:
        for pos in range(vec, 2 * vec):             # the middle word: aligned, whole
            bits = np.zeros(n, BITS[s])
            bits[pos] = v
            x = from_bits(bits, dtype)
            assert check(be, x, sizes=(1, 2)) == 1
    bits = np.zeros(n, BITS[s])
    for i in range(vec):
        for j in range(i + 1, vec):
            bits[:] = 0
            bits[vec + i] = bits[vec + j] = 1
            x = from_bits(bits, dtype)
            np.testing.assert_array_equal(G.argwhere(be, x, np.int64), [[vec + i], [vec + j]])
            assert int(G.count_nonzero(be, x, (0,))) == 2


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_float_zero_rules_inside_a_word(be, dtype):
    """-0.0 is zero, NaN (either sign, quiet or signalling), inf and the subnormals are
    nonzero, in every position of a word."""
    if dtype == "bfloat16":
        if not _modules.CTYPES.get(_modules._bf16.dtype()):
            pytest.skip("ml_dtypes not installed")
        dt = _modules._bf16.dtype()
        nan, snan, inf = 0x7fc0, 0x7f81, 0x7f80
    else:
        dt = np.dtype(np.float16)
        nan, snan, inf = 0x7e00, 0x7c01, 0x7c00
    pats = [0x8000, 0x0000, nan, 0x8000 | nan, snan, 0x0001, 0x8001, inf, 0x8000 | inf]
    nonzero = [p & 0x7fff != 0 for p in pats]
    for rot in range(8):                            # each pattern at each of the 8 positions
        bits = np.zeros(32, np.uint16)
        for i, p in enumerate(pats):
            bits[8 + (i + rot) % 8 + 8 * (i // 8)] = p
        x = from_bits(bits, dt)
        want = np.flatnonzero(bits & 0x7fff)
        np.testing.assert_array_equal(G.argwhere(be, x, np.int64)[:, 0], want)
        assert int(G.count_nonzero(be, x, (0,))) == len(want) == sum(nonzero)
    negzero = from_bits(np.full(64, 0x8000, np.uint16), dt)
    assert check(be, negzero) == 0


@pytest.mark.parametrize("dtype", NARROW, ids=str)
def test_all_zero_and_all_nonzero_words(be, dtype):
    s = dtype.itemsize
    for n in (16, 4096 // s, 3 * 4096 + 16 // s):
        for fill in (0, 1, 2, 0x80, 0xff, 0x8000, 0xffff):   # bool: any nonzero byte is True
            if fill >> (8 * s):
                continue
            zero = fill == 0 or (fill == 0x8000 and s == 2 and dtype.kind not in "iu")  # -0.0
            x = from_bits(np.full(n, fill, BITS[s]), dtype)
            assert check(be, x, sizes=(0, n // 3, n + 1)) == (0 if zero else n)
        # alternating whole words of zeros and of nonzeros
        bits = np.zeros(n, BITS[s])
        w = 16 // s
        for i in range(0, n, 2 * w):
            bits[i:i + w] = 1
        assert check(be, from_bits(bits, dtype)) == int(np.count_nonzero(bits))


# ------------------------------------------------------------------------------ alignment

@pytest.mark.parametrize("dtype", NARROW, ids=str)
def test_misaligned_head_and_tail(be, dtype):
    """Views starting 1..15 bytes past a 16-byte boundary (every element offset), lengths not
    a multiple of 16: the words straddling the ends are read element by element."""
    s = dtype.itemsize
    rng = np.random.default_rng(1)
    for off in range(0, 16, s):
        for n in (1, 3, 15 // s + 2, 17, 45, 4096 // s - 1, 4096 // s + 5, 2 * 4096 // s + 13):
            # (bool: bytes 1..255, all True)
            bits = (rng.random(n) < 0.5) * rng.integers(1, 256 if dtype == np.bool_ else
                                                        1 << (8 * s - 1), n)
            bits[:2] = 1                               # nonzeros in the head word
            bits[-2:] = 1                              # and in the tail word
            x = from_bits(bits.astype(BITS[s]), dtype, offset=off)
            assert x.__array_interface__["data"][0] % 16 == off
            check(be, x, sizes=(n // 2 + 1,), head=off // s)


@pytest.mark.parametrize("dtype", [np.uint8, np.float16], ids=str)
@pytest.mark.parametrize("n", [31, 32, 33, 1023, 1025, 4095, 4097])
def test_warp_and_tile_boundaries(be, dtype, n):
    dtype = np.dtype(dtype)
    rng = np.random.default_rng(n)
    for off in (0, dtype.itemsize, 16 - dtype.itemsize):
        raw = (rng.random(n) < 0.4) * rng.integers(1, 100, n)
        x = buffer(n * dtype.itemsize, off).view(dtype)
        x[...] = raw
        check(be, x)


@pytest.mark.parametrize("sched", ["reverse", 5, 77])
def test_schedules_many_tiles(be, sched):
    """Many packed tiles, a misaligned head, sparse and dense stretches, under interleaved
    schedules (the look-back meets running predecessors)."""
    rng = np.random.default_rng(3)
    n = 12 * 4096 + 77
    bits = (rng.random(n) < np.repeat([0.001, 0.9, 0.3], -(-n // 3))[:n]).astype(np.uint8)
    x = from_bits(bits, np.int8, offset=5)
    with simt.schedule(sched):
        check(be, x, sizes=(n, 100, 10 ** 6))


@pytest.mark.parametrize("dtype", [np.bool_, np.int16], ids=str)
def test_force_64bit(be, dtype):
    dtype = np.dtype(dtype)
    rng = np.random.default_rng(4)
    n = 3 * 4096 + 9
    x = buffer(n * dtype.itemsize, 2 * dtype.itemsize).view(dtype)
    x[...] = rng.random(n) < 0.5
    check(be, x, force_64bit=True, index_dtype=np.uint32, head=2)
    with _trace.recording() as t:
        G.nonzero_coordinates(be, x, 5, 0, np.int64, force_64bit=True)
        G.count_nonzero(be, x, (0,), force_64bit=True)
    assert all(p.wide and p.vec for p in t.plans)
    assert all(name.endswith("true>") for name, *_ in t.launches)


# ------------------------------------------------------------------------------ other layouts

def _views(a):
    out = {"F": np.asfortranarray(a), "transposed": np.ascontiguousarray(a.T).T,
           "negative": a[::-1, ::-1].copy()[::-1, ::-1],
           "sliced": np.repeat(a, 2, axis=-1)[..., ::2]}
    if a.ndim == 3:
        out["permuted"] = np.ascontiguousarray(a.transpose(2, 0, 1)).transpose(1, 2, 0)
    return out


@pytest.mark.parametrize("dtype", [np.bool_, np.uint8, np.int16, np.float16], ids=str)
def test_other_layouts(be, dtype):
    """Layouts that are not one contiguous run take the element path; both forms stay exact
    (size smaller than the count, fill rows), and a C-order input with whole contiguous rows
    still merges into one packed run."""
    rng = np.random.default_rng(5)
    dtype = np.dtype(dtype)
    for shape in ((37, 45), (5, 33, 19)):
        a = ((rng.random(shape) < 0.4) * rng.integers(1, 100, shape)).astype(dtype)
        for name, x in _views(a).items():
            n = int(np.count_nonzero(a))
            check(be, x, packed=False, sizes=(n // 3, n, n + 5))
        check(be, np.ascontiguousarray(a), packed=True)


# ------------------------------------------------------------------------------ count_nonzero

@pytest.mark.parametrize("dtype", NARROW, ids=str)
def test_count_over_axes(be, dtype):
    """count_nonzero over the innermost axes of C-order inputs: each row starts at another
    alignment (rows of 1..40 elements), rows split over several chunks, and the axes whose
    reduced run is not contiguous (element path)."""
    rng = np.random.default_rng(6)
    dtype = np.dtype(dtype)
    for shape in ((7, 1), (5, 3), (9, 17), (4, 40), (3, 7, 45), (2, 20000)):
        a = ((rng.random(shape) < 0.5) * rng.integers(1, 100, shape)).astype(dtype)
        a.flat[-1] = 1
        for x in (a, buffer(a.nbytes, dtype.itemsize).view(dtype).reshape(shape)):
            x[...] = a
            ndim = len(shape)
            for axes in [(ndim - 1,), tuple(range(ndim)), tuple(range(1, ndim))] + \
                    [(i,) for i in range(ndim - 1)]:
                with _trace.recording() as t:
                    got = G.count_nonzero(be, x, axes)
                np.testing.assert_array_equal(got, np.count_nonzero(x, axis=axes),
                                              err_msg=f"{shape} {axes}")
                (p,) = t.plans
                if axes == tuple(range(ndim)) or (p.mode == 0 and axes == (ndim - 1,)):
                    assert p.vec, (shape, axes)           # one contiguous reduced run
                elif len(axes) == 1 and axes[0] < ndim - 1 and shape[-1] > 1:
                    assert not p.vec, (shape, axes)       # strided reduced run
                if x.size <= 256:
                    np.testing.assert_array_equal(got, ref_count_nonzero(x, axes))
    big = from_bits((rng.random(300_001) < 0.3).astype(np.uint8), np.uint8, offset=3)
    with _trace.recording() as t:
        assert int(G.count_nonzero(be, big, (0,))) == int(np.count_nonzero(big))
    assert t.plans[0].vec and t.plans[0].n_chunks > 1


def test_count_dense_row_under_schedules(be):
    x = from_bits(np.ones(70_000, np.uint16), np.float16, offset=6)
    for sched in ("reverse", 9):
        with simt.schedule(sched):
            assert int(G.count_nonzero(be, x, (0,))) == 70_000


# ------------------------------------------------------------------------------ memory order

T_DTYPES = [np.dtype(t) for t in (np.bool_, np.int8, np.int16, np.float16, np.float32,
                                  np.float64, np.complex64, np.complex128)]


def _memory_order_views(a):
    """Views of `a` whose memory-innermost dim is not the last logical one."""
    out = {"F": np.asfortranarray(a), "transposed": np.ascontiguousarray(a.T).T,
           "negative_F": np.asfortranarray(a[::-1])[::-1]}
    if a.ndim == 3:
        out["permuted"] = np.ascontiguousarray(a.transpose(2, 0, 1)).transpose(1, 2, 0)
        out["permuted_mid"] = np.ascontiguousarray(a.transpose(0, 2, 1)).transpose(0, 2, 1)
    return out


def _check_t(be, x, sizes, index_dtype=np.int64, expect=True, **kw):
    """`check`, and that nonzero_tiles_t ran (`expect`), or the element path where the
    memory-innermost runs are shorter than a sector (`expect=None`: whichever the plan says)."""
    from cupyops.ops.nonzero import plan as P
    if expect is None:
        expect = bool(P.transposed_tiles(P.reading_dims(x.shape, x.strides), x.itemsize))
    n = check(be, x, packed=False, sizes=sizes, index_dtype=index_dtype, **kw)
    t = check.trace
    assert all(bool(p.tr) == expect for p in coord_plans(t))
    names = {name.split("<")[0] for name, *_ in t.launches}
    assert ("nonzero_tiles_t" in names) == expect and ("nonzero_tiles" in names) != expect, names
    return n


@pytest.mark.parametrize("dtype", T_DTYPES, ids=str)
def test_memory_order_tiles(be, dtype):
    """F-order, transposed, permuted and reversed inputs go through nonzero_tiles_t (tiles read
    in memory order, emitted in row-major order): both forms exact, size below the count, fill
    rows, a partial last chunk along the memory-innermost dim, several tiles per row block."""
    rng = np.random.default_rng(7)
    for shape in ((37, 45), (300, 70), (5, 33, 19), (9, 40, 130)):
        a = np.zeros(shape, dtype)
        mask = rng.random(shape) < 0.35
        a[mask] = 1
        for name, x in _memory_order_views(a).items():
            n = int(np.count_nonzero(a))
            # 2-D and the permuted views have long memory-innermost runs; a 3-D F-order
            # input's first dim (5 or 9) holds a run of a sector only for wide types
            sure = len(shape) == 2 or name.startswith("permuted")
            _check_t(be, x, sizes=(n // 3, n + 5), expect=True if sure else None)


@pytest.mark.parametrize("sched", ["reverse", 3, 2024])
def test_memory_order_tiles_schedules(be, sched):
    rng = np.random.default_rng(8)
    a = (rng.random((700, 96)) < 0.2).astype(np.float32)
    x = np.asfortranarray(a)
    with simt.schedule(sched):
        _check_t(be, x, sizes=(100, 20000))
        _check_t(be, x, sizes=(5,), force_64bit=True, index_dtype=np.uint32)


def test_memory_order_plan():
    """The memory-innermost dim, K (runs of 32..128 bytes, a power of two) and the tiles."""
    from cupyops.ops.nonzero import plan as P
    # off a sector: runs of 128 bytes (1.25 requests a sector)
    p = P.plan_coordinates((256, 1024), (4, 1024), 4, np.int64, base_address=16)
    m, k, inner, chunks = p.tr[:4]
    assert (m, k, inner, chunks) == (0, 32, 1024, 8) and p.num_tiles == 8
    # on a sector: runs down to 32 bytes while there are fewer than T_TILES_GOAL tiles, tiles
    # of 16384 elements or more
    p = P.plan_coordinates((256, 1024), (4, 1024), 4, np.int64)
    assert p.tr[:4] == (0, 16, 1024, 16) and p.num_tiles == 16
    p = P.plan_coordinates((1024, 4096), (4, 4096), 4, np.int64)
    assert p.tr[:4] == (0, 8, 4096, 128) and p.num_tiles == 128
    p = P.plan_coordinates((16, 64, 256), (256, 1, 1024), 1, np.int64)   # permuted
    assert p.tr[:4] == (1, 64, 256, 1) and p.num_tiles == 16
    assert not P.plan_coordinates((256, 1024), (1024, 1), 1, np.int64).tr   # C order
    assert not P.plan_coordinates((3, 1024), (1, 3), 4, np.int64).tr        # runs < 32 bytes
    assert not P.plan_coordinates((256, 1024), (2, 512), 1, np.int64).tr    # no unit stride


# ------------------------------------------------------------------------------ traffic

def _ratio(x, form):
    import cupyops
    from cupyops.bench import traffic
    from cupyops.bench.bench import cupy_like_simt_allocations, _launch_list
    with cupy_like_simt_allocations(), simt.record_traffic() as rec:
        if form == "exact":
            res = cupyops.argwhere(x, device="simt")
        elif form == "nonzero":
            res = cupyops.nonzero(x, device="simt")
        else:
            res = cupyops.nonzero_coordinates(x, size=x.size, device="simt")
    outs = list(res) if isinstance(res, tuple) else [res]
    return traffic.traffic_fields(_launch_list(rec), [x], outs)["sectors_ratio"]


def _traffic_views(dtype, d, rng):
    from cupyops.bench.bench import _aligned_empty
    shape = (128, 512)

    def make(shape):
        x = _aligned_empty(shape, dtype)
        x[...] = rng.random(shape) < d
        return x
    out = {"C": make(shape), "F": make(shape[::-1]).T,
           "negative": make(shape)[::-1, ::-1],
           "permuted": make((512, 8, 16)).transpose(1, 2, 0)}
    return out


@pytest.mark.parametrize("dtype", [np.int8, np.float16, np.float32], ids=str)
def test_traffic_goals(be, dtype):
    """Sectors touched / the minimum (cupyops/bench/traffic.py), issue 15's goals at every
    density: C order (and reversed) size=n <= 1.15, F order and permuted (nonzero_tiles_t)
    <= 2.15 (today about 1.02-1.05; the element path read them at 2.3-2.9 and up to 63); the
    exact forms, whose writing pass reads the counting pass's mask instead of the input
    (issue 32), <= 1.35 in every layout (1.07-1.33 today; 1.2-2.03 when they read it twice)."""
    rng = np.random.default_rng(9)
    for d in (0.001, 0.1, 0.5):
        for name, x in _traffic_views(np.dtype(dtype), d, rng).items():
            size_goal = 1.15 if name in ("C", "negative") else 2.15
            for form, goal in (("exact", 1.35), ("nonzero", 1.35), ("size", size_goal)):
                r = _ratio(x, form)
                assert r <= goal, (name, d, form, r)


@pytest.mark.parametrize("dtype", [np.bool_, np.int8, np.int16, np.float16, np.float32,
                                   np.int32], ids=str)
def test_memory_order_words(be, dtype):
    """nonzero_tiles_t reading 4-byte words along the memory-innermost dim (a 1- or 2-byte
    type, 4-byte aligned data and strides; 4-byte types one element a load): whole runs, a
    last chunk that ends inside a word (read
    element by element), an offset along the other dim, a permuted 3-D view; and an
    unaligned view of the same data, read one element a lane."""
    from cupyops.bench.bench import _aligned_empty
    dtype = np.dtype(dtype)
    rng = np.random.default_rng(10)
    f = _aligned_empty((40, 208), dtype).T           # F order (208, 40), column stride 208
    f[...] = (rng.random(f.shape) < 0.4).astype(dtype)
    f[-1, -1] = f[0, 0] = f[199, 7] = 1
    p3 = _aligned_empty((24, 3, 160), dtype)         # permuted: memory-innermost dim 160
    p3[...] = (rng.random(p3.shape) < 0.3).astype(dtype)
    views = {"F": f, "F_partial": f[:200], "F_offset": f[:, 3:], "permuted":
             p3.transpose(1, 2, 0), "F_tail": f[:203, 1:]}
    for name, x in views.items():
        n = int(np.count_nonzero(x))
        _check_t(be, x, sizes=(n // 2, n + 3))
        # the 4-byte word path (1- and 2-byte types)
        assert bool(check.trace.plans[0].tr[4]) == (dtype.itemsize <= 2), name
        with simt.schedule(5):
            _check_t(be, x, sizes=(7,), force_64bit=True)
    odd = f[:, 1:][1:]                                # data 1 element past the alignment
    _check_t(be, odd, sizes=(5,))
    assert not check.trace.plans[0].tr[4]


@pytest.mark.parametrize("dtype", [np.bool_, np.uint8, np.float16, np.float32, np.complex64],
                         ids=str)
def test_count_one_reduced_dim(be, dtype):
    """count_nonzero over one strided reduced dim steps a pointer: a warp per output (strided
    1-D views, chunked) and a thread per output (the kept axis innermost, chunked)."""
    dtype = np.dtype(dtype)
    rng = np.random.default_rng(11)
    big = (rng.random(90_001) < 0.3).astype(dtype)
    for x, axes, mode in ((big[::3], (0,), 0), (big[::-7], (0,), 0), (big[5::2], (0,), 0),
                          (big[:60_000].reshape(2000, 30), (0,), 1),
                          (big[:60_000].reshape(20, 3000)[:, ::-1], (0,), 1)):
        with _trace.recording() as t:
            got = G.count_nonzero(be, x, axes)
        np.testing.assert_array_equal(got, np.count_nonzero(x, axis=axes))
        (p,) = t.plans
        assert p.mode == mode and len(p.red_dims) == 1 and not p.vec, p


# ------------------------------------------------------------------------------ zero-test values

def _zero_test_patterns(dtype):
    """``(zero patterns, nonzero patterns)``: unsigned bit patterns of `dtype`'s size that the
    zero tests (nz_is_nonzero, nz_packed, nz_wordtest) could get wrong. Floats: -0.0 is zero;
    NaN (both signs, quiet and signalling), +-inf and subnormals are nonzero. Integers: the
    top bit alone (0x80, 0x8000, ...) and each byte alone are nonzero. bool: any nonzero byte
    is True (NumPy's reading, e.g. np.array([0, 2, 0x80, 0xff], np.uint8).view(np.bool_))."""
    dtype = np.dtype(dtype)
    s = dtype.itemsize
    if dtype == np.bool_:
        return [0], [1, 2, 0x40, 0x7f, 0x80, 0xff]
    if dtype.kind in "iu":
        return [0], sorted({1, (1 << 8 * s) - 1, 1 << (8 * s - 1), (1 << (8 * s - 1)) - 1}
                           | {1 << 8 * b for b in range(s)} | {0x80 << 8 * b for b in range(s)})
    if dtype == np.float16:
        return [0, 0x8000], [0x7e00, 0xfe00, 0x7c01, 0xfc01, 0x7c00, 0xfc00, 0x0001, 0x8001,
                             0x3c00, 0xbc00]
    if dtype.name == "bfloat16":
        return [0, 0x8000], [0x7fc0, 0xffc0, 0x7f81, 0xff81, 0x7f80, 0xff80, 0x0001, 0x8001,
                             0x3f80, 0xbf80]
    if dtype == np.float32:
        return [0, 1 << 31], [0x7fc00000, 0xffc00000, 0x7f800001, 0xff800001, 0x7f800000,
                              0xff800000, 1, 0x80000001, 0x3f800000, 0xbf800000]
    if dtype == np.float64:
        return [0, 1 << 63], [0x7ff8 << 48, 0xfff8 << 48, (0x7ff0 << 48) | 1, 0x7ff0 << 48,
                              0xfff0 << 48, 1, (1 << 63) | 1, 0x3ff0 << 48, 0xbff0 << 48]
    if dtype == np.complex64:   # (real, imag) pairs of float32 patterns
        z, nz = _zero_test_patterns(np.float32)
        zeros = [a | b << 32 for a in z for b in z]
        return zeros, [a | b << 32 for a in z + nz for b in nz] + [a | b << 32 for a in nz
                                                                     for b in z]
    raise AssertionError(dtype)


_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def _fill_patterns(x, rng):
    """Fill `x` (any layout) with the zero-test patterns of its dtype, half of the elements
    zeros (each zero pattern alike), at random positions; returns the expected nonzero mask,
    checked against NumPy's own reading of the values."""
    zeros, nonzeros = _zero_test_patterns(x.dtype)
    pats = np.array(zeros + nonzeros, np.uint64)
    weights = np.r_[np.full(len(zeros), 0.5 / len(zeros)),
                    np.full(len(nonzeros), 0.5 / len(nonzeros))]
    pick = rng.choice(len(pats), size=x.shape, p=weights)
    x.view(_UINT[x.itemsize])[...] = pats[pick].astype(_UINT[x.itemsize])
    want = pick >= len(zeros)
    np.testing.assert_array_equal(np.argwhere(x), np.argwhere(want))   # NumPy agrees
    return want


ZT_DTYPES = [np.dtype(t) for t in (np.bool_, np.int8, np.uint8, np.int16, np.float16,
                                   np.int32, np.float32, np.float64, np.complex64)]
if _modules.CTYPES.get(_modules._bf16.dtype()):
    ZT_DTYPES.insert(5, _modules._bf16.dtype())


@pytest.mark.filterwarnings("ignore:invalid value encountered in cast:RuntimeWarning")
@pytest.mark.parametrize("dtype", ZT_DTYPES, ids=str)
def test_memory_order_zero_test_values(be, dtype):
    """nonzero_tiles_t over -0.0, NaN, +-inf, subnormals, top-bit-only integers and bool bytes
    other than 0/1, at every position of the 4-byte words it reads (1- and 2-byte types:
    nz_wordtest, whole and partial words) and one element a lane (4- and 8-byte types, and an
    unaligned view: nz_is_nonzero); all forms and count_nonzero over each axis against NumPy
    (the counts along the memory-innermost axis take the packed count path for 1- and 2-byte
    types)."""
    from cupyops.bench.bench import _aligned_empty
    rng = np.random.default_rng(12)
    f = _aligned_empty((40, 208), dtype).T             # F order (208, 40)
    _fill_patterns(f, rng)
    p3 = _aligned_empty((24, 3, 160), dtype)            # permuted: memory-innermost dim 160
    _fill_patterns(p3, rng)
    words = dtype.itemsize in (1, 2)
    views = {"F": (f, words), "F_tail": (f[:203, 1:], words),
             "permuted": (p3.transpose(1, 2, 0), words), "odd": (f[:, 1:][1:], False)}
    for name, (x, word_path) in views.items():
        n = int(np.count_nonzero(x))
        _check_t(be, x, sizes=(n // 2, n + 3))
        assert bool(check.trace.plans[0].tr[4]) == word_path, name
        for ax in range(x.ndim):
            with _trace.recording() as t:
                got = G.count_nonzero(be, x, (ax,))
            np.testing.assert_array_equal(got, np.count_nonzero(x, axis=ax), err_msg=name)
            if name == "F" and ax == 0 and dtype.itemsize <= 2:
                assert t.plans[0].vec, name                # the packed count path ran
    with simt.schedule(5):
        _check_t(be, f, sizes=(9,), force_64bit=True)


# ------------------------------------------------------------------------------ 32-bit indexing

def test_count_plan_32bit_margin():
    """count_nonzero_axes forms byte offsets in int32 unless the plan is wide. Mode 0 over one
    reduced dim of stride st reaches (lo + lane) * st for lanes past the end and steps 32 * st
    past the last element: the plan keeps 32-bit indexing only while (red_size - 1 + 32) * st
    fits. The packed path adds the kept offset to a chunk's end (and 32 elements of ragged-end
    lanes). The other paths form the offsets of in-range elements only (no margin)."""
    from cupyops.ops.nonzero import plan as P
    I32 = 2**31 - 1

    def plan(shape, strides, itemsize, axes):
        return P.plan_count(shape, strides, itemsize, axes)

    # one strided reduced dim, a warp per output: every element fits in all of these
    st = 4096
    edge = 2**31 // st - 31                         # (edge - 1 + 32) * st == 2**31
    for n, wide in ((edge, True), (edge + 20, True), (edge - 1, False), (edge - 1000, False)):
        assert (n - 1) * st <= I32
        p = plan((n,), (st,), 4, (0,))
        assert p.mode == 0 and p.red_dims == ((n, st),) and not p.vec
        assert p.wide == wide, (n, wide)
    # fewer elements than a warp: lane 31 would form 31 * st (and the step 32 * st) past 2**31
    p = plan((16,), (2**27,), 1, (0,))              # 15 * 2**27 < 2**31 <= 31 * 2**27
    assert p.mode == 0 and p.wide
    assert not plan((16,), (2**25,), 1, (0,)).wide  # 47 * 2**25 < 2**31
    # ... while a thread per output (mode 1) only forms in-range offsets: no margin
    st = I32 // 15
    p = plan((16, 64), (st, 1), 1, (0,))
    assert p.mode == 1 and p.red_dims == ((16, st),) and not p.wide
    assert plan((17, 64), (st, 1), 1, (0,)).wide    # the last element itself is past 2**31
    # nor does nonzero_tiles (offsets of elements inside the input only)
    assert not P.plan_coordinates((16,), (st,), 1, np.int64).wide
    # the packed path: contiguous runs, the end of the last chunk and 31 lanes past it
    for dtype, n in ((np.uint8, 2**31 - 32), (np.float16, 2**30 - 32)):
        s = np.dtype(dtype).itemsize
        assert (n - 1 + 32) * s <= I32 < (n + 32) * s
        p = plan((n,), (s,), s, (0,))
        assert p.vec and not p.wide
        assert plan((n + 1,), (s,), s, (0,)).wide
    p = plan((2**30,), (2,), 2, (0,))               # float16: the end 2**30 * 2 wrapped
    assert p.vec and p.wide
    # ... where the kept offset and the reduced one add up (spans that fit one by one)
    p = plan((2, 2**30), (3 * 2**29, 1), 1, (1,))
    assert p.mode == 0 and p.vec and p.wide
    assert not plan((2, 2**29), (2**30, 1), 1, (1,)).wide
    # the element path adds them as pointers: only each side must fit
    p = plan((2, 2**28), (3 * 2**29, 4), 4, (1,))
    assert p.mode == 0 and not p.vec and not p.wide


def test_tile_launch_names_the_instantiation_of_its_plans_path(be):
    """Issue 33: the tile kernel's packed path is a template parameter: a contiguous 1-byte
    input launches the packed instantiation (both passes), a strided one the other."""
    from cupyops.ops.nonzero import family as F
    x = from_bits(np.arange(4096) % 3, np.uint8)
    for arr, vec in ((x, True), (x[::2], False)):
        with _trace.recording() as t:
            np.testing.assert_array_equal(G.argwhere(be, arr, np.int64), np.argwhere(arr))
        names = [launch[0] for launch in t.launches]
        assert names == [F.expression(F.TILES, arr.dtype, False, vec)] * 2, names
    assert F.vecs(F.TILES, np.float32) == (False,)
    with pytest.raises(ValueError, match="vec must be one of"):
        F.expression(F.TILES, np.float32, False, True)
