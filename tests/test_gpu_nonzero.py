"""The nonzero family's kernels (kernels/nonzero.cu through cupyops/_gpu_nonzero.py) on the
SIMT backend, against NumPy: every dtype and layout, densities, tile / warp / block boundaries,
the decoupled look-back under interleaved schedules, 64-bit indexing, size=k, device-to-host
read counts and memory traffic."""
import numpy as np
import pytest

from cupyops import simt
from cupyops.core import backend as _backend
from cupyops.core import trace as _trace
from cupyops.ops.nonzero import family as GF
from cupyops.ops.nonzero import launch as G
from cupyops.ops.nonzero import plan as P
from _devices import KERNEL_DEVICES, ops

DTYPES = [np.dtype(t) for t in (np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32,
                                np.uint32, np.int64, np.uint64, np.float16, np.float32,
                                np.float64, np.complex64, np.complex128)]
INDEX_DTYPES = [np.dtype(t) for t in (np.int64, np.int32, np.uint32, np.uint64)]


@pytest.fixture(scope="module")
def be():
    return _backend.get_backend("simt")


def values(dtype, shape, density, rng):
    """Random array: nonzero with probability `density`. Floats mix +0.0 / -0.0 for zeros and
    NaN, inf and subnormals among the nonzeros; complex has nonzeros in either part only."""
    dtype = np.dtype(dtype)
    mask = rng.random(shape) < density
    if dtype == np.bool_:
        return mask
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        v = rng.integers(max(info.min, -100), min(info.max, 100), shape, endpoint=True).astype(dtype)
        v[v == 0] = 1
        v.flat[:1] = info.max if v.size else 0
        return np.where(mask, v, 0).astype(dtype)
    real = np.dtype(np.float32) if dtype == np.complex64 else (
        np.dtype(np.float64) if dtype == np.complex128 else dtype)
    fi = np.finfo(real)
    v = rng.standard_normal(shape).astype(real)
    v[v == 0] = 1
    special = np.array([np.nan, np.inf, -np.inf, fi.smallest_subnormal, -fi.smallest_subnormal],
                       real)
    pick = rng.random(shape) < 0.1
    v[pick] = special[rng.integers(0, len(special), int(pick.sum()))]
    zero = np.where(rng.random(shape) < 0.5, real.type(0.0), real.type(-0.0))
    v = np.where(mask, v, zero).astype(real)
    if dtype.kind == "f":
        return v
    # complex: each nonzero has a nonzero real part, imaginary part, or both
    which = rng.integers(0, 3, shape)
    re = np.where(which != 1, v, zero)
    im = np.where(which != 0, v, zero)
    out = np.empty(shape, dtype)
    out.real, out.imag = re, im
    return out


def layouts(a):
    """Views with the logical shape of `a` (2-D or more) in several memory layouts."""
    out = {"C": a.copy(), "F": np.asfortranarray(a)}
    big = np.zeros(tuple(2 * n + 1 for n in a.shape), a.dtype)
    sl = tuple(slice(1, 1 + 2 * n, 2) for n in a.shape)
    big[sl] = a
    out["sliced"] = big[sl]
    rev = np.ascontiguousarray(a[(slice(None, None, -1),) * a.ndim])
    out["negative"] = rev[(slice(None, None, -1),) * a.ndim]
    out["transposed"] = np.ascontiguousarray(np.moveaxis(a, -1, 0)).transpose(
        tuple(range(1, a.ndim)) + (0,))
    row = a[..., :1, :] if a.ndim >= 2 else a[:1]
    out["broadcast"] = np.broadcast_to(row, a.shape)
    for v in out.values():
        assert v.shape == a.shape
    return out


def check_all(be, x, index_dtype=np.int64, **kw):
    """argwhere / nonzero / nonzero_coordinates / count_nonzero against NumPy."""
    want = np.argwhere(x)
    got = G.argwhere(be, x, index_dtype, **kw)
    assert got.dtype == index_dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    nz = G.nonzero(be, x, index_dtype, **kw)
    assert len(nz) == x.ndim
    for g, w in zip(nz, np.nonzero(x)):
        assert g.flags.c_contiguous and g.dtype == index_dtype
        np.testing.assert_array_equal(g, w)
    coords, count = G.nonzero_coordinates(be, x, None, 0, index_dtype, **kw)
    assert count.shape == () and count.dtype == np.int64 and int(count) == len(want)
    np.testing.assert_array_equal(coords, want)
    axes = tuple(range(x.ndim))
    c = G.count_nonzero(be, x, axes, **kw)
    assert c.shape == () and int(c) == len(want)
    return len(want)


# ------------------------------------------------------------------------------ dtypes

@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_every_dtype(be, dtype):
    rng = np.random.default_rng(1)
    x = values(dtype, (3, 700), 0.5, rng)
    check_all(be, x)
    for ax in ((0,), (1,)):
        np.testing.assert_array_equal(G.count_nonzero(be, x, ax), np.count_nonzero(x, axis=ax))


def test_registered_expressions():
    """Bool and integers share an unsigned instantiation per size: 9 value types x 3 kernels x
    {32, 64}-bit = 54 distinct instantiations behind the 14 dtype modules, and the tile kernel
    of the 3 value types of 1 and 2 bytes also with its packed path (issue 33: a template
    parameter) at both widths: 60."""
    exprs = {e for dt in DTYPES for e in GF.FAMILY.expressions_for(dt)}
    assert len(exprs) == 54 + 6
    assert all(len(GF.FAMILY.expressions_for(dt)) == (8 if dt.itemsize <= 2 else 6)
               for dt in DTYPES)
    assert GF.expressions(np.int32) == GF.expressions(np.uint32)
    assert GF.expressions(np.bool_) == GF.expressions(np.int8)
    assert "nonzero_tiles<float, true, false>" in GF.expressions(np.float32)
    assert "nonzero_tiles<unsigned char, false, true>" in GF.expressions(np.bool_)


def test_zero_rules():
    be = _backend.get_backend("simt")
    x = np.array([0.0, -0.0, np.nan, 1e-45, -np.inf, 0.0], np.float32)
    np.testing.assert_array_equal(G.argwhere(be, x, np.int64), [[2], [3], [4]])
    h = np.array([0, 0x8000, 0x0001, 0x7e00], np.uint16).view(np.float16)   # 0, -0, subnormal, NaN
    np.testing.assert_array_equal(G.argwhere(be, h, np.int64), [[2], [3]])
    c = np.array([0, -0.0 - 0.0j, complex(0, -0.0), 1j, complex(np.nan, 0), 2], np.complex128)
    np.testing.assert_array_equal(G.argwhere(be, c, np.int64), [[3], [4], [5]])
    c64 = c.astype(np.complex64)
    np.testing.assert_array_equal(G.argwhere(be, c64, np.int64), [[3], [4], [5]])


# ------------------------------------------------------------------------------ layouts

@pytest.mark.parametrize("dtype", [np.float32, np.int8, np.complex128], ids=str)
def test_layouts(be, dtype):
    rng = np.random.default_rng(2)
    a = values(dtype, (5, 33, 41), 0.3, rng)
    for name, x in layouts(a).items():
        check_all(be, x)
        for ax in ((0,), (1,), (2,), (0, 1), (0, 2), (1, 2)):
            np.testing.assert_array_equal(G.count_nonzero(be, x, ax),
                                          np.count_nonzero(x, axis=ax), err_msg=f"{name} {ax}")
        k = 50
        coords, count = G.nonzero_coordinates(be, x, k, -7, np.int32)
        want = np.argwhere(x)
        m = min(k, len(want))
        np.testing.assert_array_equal(coords[:m], want[:m])
        assert (coords[m:] == -7).all() and int(count) == len(want)


def test_unit_dims_high_rank_and_1d(be):
    rng = np.random.default_rng(3)
    a = values(np.float64, (1, 3, 1, 1, 5, 1, 4, 1, 1, 2), 0.5, rng)    # 10-d, 4 non-unit
    check_all(be, a)
    b = values(np.int16, (4097,), 0.5, rng)
    check_all(be, b[::-3])
    s = np.broadcast_to(np.float32(2.0), (3, 4, 5))                      # all strides zero
    assert check_all(be, s) == 60


# ------------------------------------------------------------------------------ densities, sizes

@pytest.mark.parametrize("density", [0.0, 1e-3, 0.5, 1.0])
def test_densities_multi_tile(be, density):
    rng = np.random.default_rng(4)
    x = values(np.float32, (3 * 4096 + 77,), density, rng)       # 3 full tiles + a partial one
    n = check_all(be, x)
    if density == 0.0:
        assert n == 0
    if density == 1.0:
        assert n == x.size
    y = values(np.uint16, (97, 131), density, rng)              # 2-D, 4 tiles
    check_all(be, y, np.uint32)


@pytest.mark.parametrize("dtype", [np.float32, np.complex128], ids=str)
def test_warp_block_tile_boundaries(be, dtype):
    rng = np.random.default_rng(5)
    tile = P.tile_elements(np.dtype(dtype).itemsize)
    warp_items = tile // 8
    sizes = {1, 31, 32, 33, 255, 256, 257, warp_items - 1, warp_items, warp_items + 1,
             tile - 1, tile, tile + 1, 2 * tile + 31}
    for n in sorted(sizes):
        for density in (0.5, 1.0):
            check_all(be, values(dtype, (n,), density, rng))
    # a single nonzero at each side of each boundary
    n = 2 * tile + 40
    for pos in (0, 31, 32, warp_items - 1, warp_items, tile - 1, tile, 2 * tile, n - 1):
        x = np.zeros(n, dtype)
        x[pos] = 1
        np.testing.assert_array_equal(G.argwhere(be, x, np.int64), [[pos]])
        c, cnt = G.nonzero_coordinates(be, x, 3, 9, np.int64)
        np.testing.assert_array_equal(c, [[pos], [9], [9]])


# ------------------------------------------------------------------------------ index dtypes

@pytest.mark.parametrize("index_dtype", INDEX_DTYPES, ids=str)
def test_index_dtypes(be, index_dtype):
    rng = np.random.default_rng(6)
    x = values(np.int32, (7, 9, 130), 0.2, rng)
    check_all(be, x, index_dtype)
    info = np.iinfo(index_dtype)
    for fill in (info.min, info.max, 0):
        c, cnt = G.nonzero_coordinates(be, x, 2000, fill, index_dtype)
        want = np.argwhere(x)
        assert c.dtype == index_dtype and c.shape == (2000, 3)
        np.testing.assert_array_equal(c[:len(want)], want)
        assert (c[len(want):] == fill).all()


# ------------------------------------------------------------------------------ size=k

@pytest.mark.parametrize("where", ["below", "equal", "above", "zero", "huge"])
def test_fixed_size(be, where):
    rng = np.random.default_rng(7)
    x = values(np.float32, (3, 3001), 0.4, rng)
    want = np.argwhere(x)
    n = len(want)
    k = {"below": n // 3, "equal": n, "above": n + 1000, "zero": 0, "huge": 3 * x.size}[where]
    with _trace.recording() as t:
        coords, count = G.nonzero_coordinates(be, x, k, -1, np.int64)
    assert t.d2h_reads == 0 and len(t.launches) == 1
    assert coords.shape == (k, 2) and count.shape == () and count.dtype == np.int64
    assert int(count) == n
    m = min(k, n)
    np.testing.assert_array_equal(coords[:m], want[:m])
    assert (coords[m:] == -1).all()


def test_fixed_size_empty_result(be):
    x = np.zeros((5, 4096), np.int8)
    coords, count = G.nonzero_coordinates(be, x, 10, 3, np.uint32)
    assert int(count) == 0 and (coords == 3).all() and coords.shape == (10, 2)


# ------------------------------------------------------------------------------ host reads

def test_device_to_host_reads(be):
    rng = np.random.default_rng(8)
    x = values(np.float32, (40, 300), 0.5, rng)
    for fn in (lambda: G.argwhere(be, x, np.int64), lambda: G.nonzero(be, x, np.int64),
               lambda: G.nonzero_coordinates(be, x, None, 0, np.int64)):
        with _trace.recording() as t:
            fn()
        assert t.d2h_reads == 1
        assert [name.split("<")[0] for name, *_ in t.launches] == ["nonzero_tiles"] * 2
        modes = [p for p in t.plans if isinstance(p, P.CoordinatePlan)]
        assert len(modes) == 1
    with _trace.recording() as t:
        G.count_nonzero(be, x, (0, 1))
        G.count_nonzero(be, x, (1,))
    assert t.d2h_reads == 0 and len(t.launches) == 2


def test_nonzero_rows_share_one_array(be):
    x = np.eye(5, 7, dtype=np.int8)
    rows = G.nonzero(be, x, np.int64)
    assert rows[0].base is not None and rows[0].base is rows[1].base
    # rows of one (ndim, count) array: each contiguous, row 1 right after row 0
    assert all(r.shape == (5,) and r.flags.c_contiguous for r in rows)
    start = [r.__array_interface__["data"][0] for r in rows]
    assert start[1] - start[0] == 5 * rows[0].itemsize


# ------------------------------------------------------------------------------ look-back

@pytest.mark.parametrize("seed", [1, 2, 3])
def test_lookback_meets_running_predecessors(be, seed):
    """Under an interleaved schedule the look-back must wait for predecessors that have no
    status yet and sum chains of several partial aggregates; the result stays exact."""
    rng = np.random.default_rng(10 + seed)
    x = values(np.complex128, (48 * 1024 + 5,), 0.5, rng)        # 49 tiles of 1024
    stats = np.zeros(4, np.uint64)
    with simt.schedule(seed):
        coords, count = G.nonzero_coordinates(be, x, x.size, -1, np.int64, stats=stats)
    want = np.argwhere(x)
    assert int(count) == len(want)
    np.testing.assert_array_equal(coords[:len(want)], want)
    assert (coords[len(want):] == -1).all()
    partial_sum, waits, longest, tiles_with_partial = (int(s) for s in stats)
    assert partial_sum > 0 and tiles_with_partial > 0
    assert longest >= 2           # one tile summed a chain of at least two aggregates
    assert waits > 0              # and found a predecessor that had posted nothing yet
    # the exact forms use the same look-back in their counting pass
    stats2 = np.zeros(4, np.uint64)
    with simt.schedule(seed + 100):
        coords2, count2 = G.nonzero_coordinates(be, x, None, 0, np.int64, stats=stats2)
    np.testing.assert_array_equal(coords2, want)
    assert int(stats2[0]) > 0


def _lookback_state(ws):
    """(header words, status words) of a holder's look-back state (kernels/nonzero.cu,
    NZ_HDR_DRAW), as the kernels left it."""
    return ws.state(G.STATE_LOOKBACK, 0, G._lookback_views)


def _status(words, parity, n):
    """The first ``n`` status words of one parity (nz_sw: runs of 32 tiles a parity)."""
    t = np.arange(n)
    return words[t + (t >> 5 << 5) + 32 * parity]


@pytest.mark.parametrize("sched", ["forward", "reverse", 5])
def test_lookback_state_resets_itself(sched):
    """No memset between calls: a sequence of size= and exact calls of growing and shrinking
    tile counts on one workspace, each right, and after each drawing launch the state is what
    the next one needs: the epoch moved on, the draw count is 0, the words of the parity the
    launch used hold its tiles' inclusive prefixes, and the other parity is all zero."""
    import cupyops
    rng = np.random.default_rng(30)
    ws = cupyops.Workspace(1 << 20, device="simt")
    epoch = where = None
    with simt.schedule(sched):
        for n in (40000, 3000, 300000, 5, 20000, 150000, 1):
            x = values(np.float32, (n,), 0.4, rng)
            want = np.argwhere(x)
            k = n // 2 + 1
            coords, count = G.nonzero_coordinates(be_simt(), x, k, -1, np.int64, workspace=ws)
            assert int(count) == len(want)
            np.testing.assert_array_equal(coords[:min(k, len(want))], want[:k])
            head, words = _lookback_state(ws)
            tiles = -(-n // 4096)
            e = int(head[0]) >> 32
            if head.ctypes.data != where:       # a larger region, fresh (zero) state
                where, epoch = head.ctypes.data, 0
            assert int(head[0]) & 0xffffffff == 0 and e == epoch + 1
            q = (e - 1) & 1                     # the launch's parity
            assert int(head[1 + q]) == tiles
            assert not _status(words, 1 - q, len(words) // 64 * 32).any()
            inc = _status(words, q, tiles)
            assert (inc >> np.uint64(63)).all()   # every tile's inclusive prefix
            assert int(inc[-1]) & ((1 << 62) - 1) == len(want)
            got, _ = G.nonzero_coordinates(be_simt(), x, None, 0, np.int64, workspace=ws)
            np.testing.assert_array_equal(got, want)
            epoch = e + 1                       # (the exact call's counting pass drew too)
            assert int(_lookback_state(ws)[0][0]) >> 32 == epoch


def be_simt():
    return _backend.get_backend("simt")


def test_count_sums_reset_themselves():
    """count_nonzero of several chunks a call adds into state words that the last chunk of
    each output zeroes again: repeated calls are right and leave the words zero."""
    rng = np.random.default_rng(31)
    be = be_simt()
    from cupyops.core import workspace as _workspace
    for shape, axis in (((300000,), (0,)), ((3000, 40), (0,)), ((64, 70000), (1,))):
        x = values(np.int8, shape, 0.3, rng)
        for _ in range(3):
            with _trace.recording() as t:
                got = G.count_nonzero(be, x, axis)
            assert t.plans[0].atomic, shape
            np.testing.assert_array_equal(got, np.count_nonzero(x, axis=axis))
            sums = _workspace.arena_for(be).state(G.STATE_ZERO, 0, G._whole_u64)
            assert not sums.any()


@pytest.mark.parametrize("sched", ["forward", "reverse", 7, 12345])
def test_schedules(be, sched):
    rng = np.random.default_rng(11)
    x = values(np.int8, (5, 4000), 0.3, rng)[:, ::-1]
    with simt.schedule(sched):
        check_all(be, x, np.uint32)
        c, cnt = G.nonzero_coordinates(be, x, 4000, 5, np.int64)
        np.testing.assert_array_equal(G.count_nonzero(be, x, (1,)), np.count_nonzero(x, axis=1))
    want = np.argwhere(x)
    np.testing.assert_array_equal(c[:min(4000, len(want))], want[:4000])


# ------------------------------------------------------------------------------ 64-bit

@pytest.mark.parametrize("dtype", [np.float32, np.uint8, np.complex64], ids=str)
def test_force_64bit(be, dtype):
    rng = np.random.default_rng(12)
    x = values(dtype, (9, 1000), 0.5, rng)[::-1, 3:]
    with _trace.recording() as t:
        check_all(be, x, force_64bit=True)
        c, cnt = G.nonzero_coordinates(be, x, 100, 1, np.int64, force_64bit=True)
        for ax in ((0,), (1,)):
            np.testing.assert_array_equal(G.count_nonzero(be, x, ax, force_64bit=True),
                                          np.count_nonzero(x, axis=ax))
    np.testing.assert_array_equal(c[:100], np.argwhere(x)[:100])
    assert all(p.wide for p in t.plans)
    # (the Wide template argument, the second: the tile kernel's third is its packed path)
    assert all(name[:-1].split("<", 1)[1].split(", ")[1] == "true" for name, *_ in t.launches)


# ------------------------------------------------------------------------------ count_nonzero

def test_count_nonzero_plans(be):
    rng = np.random.default_rng(13)
    x = values(np.float32, (3, 50, 700), 0.5, rng)
    for ax in ((2,), (0,), (0, 2), (1,), (0, 1, 2)):
        with _trace.recording() as t:
            got = G.count_nonzero(be, x, ax)
        np.testing.assert_array_equal(got, np.count_nonzero(x, axis=ax))
        (plan,) = t.plans
        assert plan.mode == (1 if ax in ((0,), (1,)) else 0), ax
    big = values(np.int8, (200_000,), 0.01, rng)
    with _trace.recording() as t:
        assert int(G.count_nonzero(be, big, (0,))) == np.count_nonzero(big)
    assert t.plans[0].n_chunks > 1 and t.plans[0].atomic      # chunks add atomically
    tall = values(np.int16, (3000, 3), 0.5, rng)
    with _trace.recording() as t:
        np.testing.assert_array_equal(G.count_nonzero(be, tall, (0,)), np.count_nonzero(tall, axis=0))
    assert t.plans[0].mode == 1 and t.plans[0].n_chunks > 1


# ------------------------------------------------------------------------------ traffic

def _aligned(a, align=256):
    buf = np.empty(a.nbytes + align, np.uint8)
    start = -buf.__array_interface__["data"][0] % align
    out = buf[start:start + a.nbytes].view(a.dtype).reshape(a.shape)
    out[...] = a
    return out


def test_memory_traffic(be):
    """size=k reads each input element once and writes each coordinate once, with warp-wide
    accesses on the fewest 32-byte sectors."""
    rng = np.random.default_rng(14)
    x = _aligned(values(np.float32, (8 * 4096,), 0.5, rng))
    n = int(np.count_nonzero(x))
    tiles = 8
    # (a launch also clears the status words the launch before it posted, in place of a
    # memset: the same call first, so that those are 8 tiles' too)
    G.nonzero_coordinates(be, x, n, 0, np.int64)
    with simt.record_traffic() as rec:
        coords, _ = G.nonzero_coordinates(be, x, n, 0, np.int64)
    (launch,) = rec.launches
    lookback = tiles * 16 * 8         # per tile: at most a few 32-lane windows of status words
    assert x.nbytes <= launch.requested_bytes_load <= x.nbytes + lookback
    assert launch.unique_sectors_load <= x.nbytes // 32 + 8
    # each warp-wide load of 32 consecutive floats is 4 sectors: the input costs bytes / 32
    assert launch.sectors_load <= x.nbytes // 32 + lookback // 32 * 4
    # each coordinate is written once, by warp-wide stores of 32 consecutive 8-byte entries
    # (8 sectors, 9 when a tile's rows start inside a sector); besides, 8-byte words of the
    # look-back state: a tile's aggregate and prefix, its share of the clearing of the last
    # launch's status words, a draw a block, the epoch's bump, the header's tile count, the count
    state = 8 * (3 * tiles + launch.grid[0] + 3)
    assert coords.nbytes <= launch.requested_bytes_store <= coords.nbytes + state
    assert launch.unique_sectors_store <= coords.nbytes // 32 + 2 * tiles
    assert launch.sectors_store <= coords.nbytes // 32 * 9 // 8 + 2 * tiles * 4
    # exact form: the counting pass reads the input once and records a bit an element and
    # each tile's prefix (a mask record: 4096 bits and a sector a tile); the writing pass reads
    # those records, not the input
    record = 4096 // 8 + 32
    with simt.record_traffic() as rec:
        G.argwhere(be, x, np.int64)
    scan, place = rec.launches
    assert scan.unique_sectors_load <= x.nbytes // 32 + 8
    assert scan.sectors_load <= x.nbytes // 32 + lookback // 32 * 4
    assert scan.requested_bytes_store >= tiles * (record - 24)
    assert tiles * (record - 24) <= place.requested_bytes_load <= tiles * record
    assert place.sectors_load == place.unique_sectors_load == tiles * record // 32


# ------------------------------------------------------------------------------ public API

@pytest.mark.parametrize("device", KERNEL_DEVICES)
def test_public_api_on_every_kernel_device(device):
    o = ops(device)
    x = np.array([[1.0, 0.0, 0.0, 2.0], [-0.0, 3.5, 0.0, -5.2]], np.float32).reshape(1, 1, 2, 4)
    c, n = o.nonzero_coordinates(x)
    np.testing.assert_array_equal(c, [[0, 0, 0, 0], [0, 0, 0, 3], [0, 0, 1, 1], [0, 0, 1, 3]])
    assert int(n) == 4
    np.testing.assert_array_equal(o.argwhere(x[0, 0]), np.argwhere(x[0, 0]))
    assert int(o.count_nonzero(x)) == 4


# ------------------------------------------------------------------------------ slow sweep

@pytest.mark.slow
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_sweep(be, dtype):
    """Every dtype x layout x density x a few sizes x schedules x 32/64-bit (--run-slow)."""
    rng = np.random.default_rng(99)
    for shape in ((2, 3, 1, 700), (129, 67), (5 * 4096 + 3,)):
        for density in (0.0, 1e-3, 0.5, 1.0):
            a = values(dtype, shape, density, rng)
            views = layouts(a) if a.ndim >= 2 else {"C": a, "negative": a[::-1], "sliced": a[1::3]}
            for name, x in views.items():
                for sched, force in (("forward", False), (3, True), ("reverse", False)):
                    with simt.schedule(sched):
                        n = check_all(be, x, force_64bit=force)
                        for k in (0, n // 2, n + 5):
                            c, cnt = G.nonzero_coordinates(be, x, k, -2, np.int32,
                                                           force_64bit=force)
                            m = min(k, n)
                            np.testing.assert_array_equal(c[:m], np.argwhere(x)[:m])
                            assert (c[m:] == -2).all() and int(cnt) == n
                        for ax in range(x.ndim):
                            np.testing.assert_array_equal(
                                G.count_nonzero(be, x, (ax,), force_64bit=force),
                                np.count_nonzero(x, axis=ax), err_msg=f"{name} {ax}")
