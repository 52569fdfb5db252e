"""The flat fast path of the segment kernels (kernels/segment_flat.cu, segment_reduce_flat and
segment_reduce_flat_values): contiguous R = 1 x of float32 / int32 / uint32, indices and the values
forms (values compared bit for bit), on simt, against the NumPy path.

Which kernel a layout takes (the launched name expression); tiles of SGF_TILE = 4,096 rows: ends
exactly at tile boundaries, at a tile's first rows, runs of empty segments at tile edges, tiles
capped by their ends (more than SGF_CAP = 512 ends in one tile: many empty or tiny segments);
segments crossing tiles and blocks (chain tickets: blocks made small through
plan.FLAT_BLOCK_BYTES), one segment spanning everything, S = 1, a misaligned x start, every
offsets width and a strided view, index dtypes, relative, 64-bit indexing, ties both ways with
NaN and -0.0 (values from a tiny range), bad offsets on the device (the kernel's own check and
whole-result fill), and simt schedules."""
import os
import subprocess
import sys

import numpy as np
import pytest

import cupyops
import cupyops.simt as simt
from cupyops.core import backend as core_backend
from cupyops.core import trace as _trace
from cupyops.ops.segment import family as seg_family
from cupyops.ops.segment import launch as seg_launch
from cupyops.ops.segment import plan as seg_plan
from cupyops.ops.segment.rules import SegmentCall
from _devices import KERNEL_DEVICES, ops

TILE = 4096          # a tile's rows of 4-byte values (SgfShape<4>::TILE of kernels/segment_flat.cu)
CAP = 512            # SGF_CAP
FLAT = seg_family.REDUCE_FLAT
FLAT_V = seg_family.REDUCE_FLAT_V
FLAT_COLS = seg_family.REDUCE_FLAT_COLS
FLAT_COLS_V = seg_family.REDUCE_FLAT_COLS_V
FLAT_STRIPS = seg_family.REDUCE_FLAT_STRIPS


def tiny_values(rng, n, dtype, pad=0):
    """n values from a tiny range (ties everywhere), NaN and -0.0 for the floats; ``pad``
    elements before them in the same buffer (x's start misaligned by pad itemsizes)."""
    dt = np.dtype(dtype)
    buf = rng.integers(0 if dt.kind in "ub" else -2, 3, n + pad).astype(dt)
    x = buf[pad:]
    if dt.kind == "m":
        x[rng.random(n) < 0.03] = np.timedelta64("NaT")
    if dt.kind == "f" or dt.name == "bfloat16":
        x[rng.random(n) < 0.03] = np.nan
        x[(x == 0) & (rng.random(n) < 0.5)] = -0.0
    return x


def direct(x, o, kind, tie, *, relative=False, index_dtype=np.int64, empty_index=-7,
           force_64bit=False, checked=True, values=False):
    """The launch code called as the API calls it (a fresh plan: FLAT_BLOCK_BYTES as patched).
    The indices (``values``: the pair (values, indices)) and the launched kernels."""
    be = core_backend.get_backend("simt")
    call = SegmentCall(f"segment_arg{kind}", len(o) - 1, (len(o) - 1,) + x.shape[1:],
                       np.dtype(index_dtype), empty_index, relative, None, None)
    o = seg_launch.kernel_offsets(o)
    with _trace.recording() as t:
        run = seg_launch.runner(be, x, o, call, kind=kind, tie=tie, values=values,
                                force_64bit=force_64bit)
        r = run(x, o, None, None, checked=checked)
    r = tuple(np.asarray(a) for a in r) if values else np.asarray(r)
    return r, [l[0] for l in t.launches]


def same_bits(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def check_flat(x, o, *, relative=False, index_dtype=np.int64, force_64bit=False,
               kinds=("max", "min"), ties=("first", "last"), modes=None):
    """Each kind x tie x mode (``modes``: False indices, True the values form; default both)
    against the NumPy path; the values bit for bit (NaN payloads, -0.0)."""
    empty = -7 if np.dtype(index_dtype).kind == "i" else 65000
    cols = x.ndim > 1 and int(np.prod(x.shape[1:])) > 1
    for values in (modes or (False, True)):
        for kind in kinds:
            for tie in ties:
                got, names = direct(x, o, kind, tie, relative=relative, index_dtype=index_dtype,
                                    force_64bit=force_64bit, empty_index=empty, values=values)
                wide = cols and int(np.prod(x.shape[1:])) > 256
                name = FLAT_STRIPS if wide else \
                    (FLAT_COLS_V if values else FLAT_COLS) if cols else (FLAT_V if values else FLAT)
                assert len(names) == 1 and names[0].startswith(name + "<"), names
                fn = f"segment_{kind}_and_arg{kind}" if values else f"segment_arg{kind}"
                want = getattr(cupyops, fn)(x, o, tie=tie, relative=relative, empty_index=empty,
                                            dtype=index_dtype, device="cpu")
                where = (fn, tie, x.dtype, len(x), len(o), o.dtype, relative)
                if values:
                    (gv, got), (wv, want) = got, want
                    u = f"u{gv.itemsize}"
                    assert same_bits(gv, wv), (where, np.nonzero(gv.view(u) != wv.view(u))[0][:10])
                assert got.dtype == want.dtype and np.array_equal(got, want), \
                    (where, np.nonzero(got != want)[0][:10])


def edge_offsets(n, tile=TILE):
    """Ends at and around tile boundaries (block 0's tiles start at row 0 for an aligned x),
    runs of empty segments there, one run longer than a tile's cap."""
    ends = [0, 0, 1, 2, tile - 1, tile, tile, tile, tile + 1, 2 * tile - 8, 2 * tile - 1]
    ends += [2 * tile] * (CAP + 40)                      # capped: empties at a tile edge
    ends += [2 * tile + 1, 2 * tile + 2, 3 * tile, 3 * tile, n]
    return np.minimum(np.array(ends, np.int64), n)


def tiny_offsets(rng, n, start=0, end=None):
    """Segments of 0-2 rows (about a segment a row: tiles capped by their ends)."""
    end = n if end is None else end
    lens = rng.integers(0, 3, end - start)
    lens = lens[np.cumsum(lens) <= end - start]
    return (start + np.concatenate([[0], np.cumsum(lens)])).astype(np.int64)


def mixed_offsets(rng, n):
    """Short, long (across tiles) and empty segments mixed."""
    parts, total = [], 0
    while True:
        kind = rng.integers(0, 4)
        ln = int(rng.integers(0, 12) if kind == 0 else rng.integers(0, 3) if kind == 1
                 else rng.integers(2000, 9000) if kind == 2 else 0)
        if total + ln > n:
            break
        parts.append(ln)
        total += ln
    return np.concatenate([[0], np.cumsum(parts)]).astype(np.int64)


# ------------------------------------------------------------------------------------------
# which kernel runs
# ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("device", KERNEL_DEVICES)
def test_the_flat_path_runs_for_contiguous_r1_only(device):
    """Contiguous R = 1 x (1-D or trailing size 1) of a real dtype of 1 to 8 bytes launches
    segment_reduce_flat (values forms: segment_reduce_flat_values); every other layout (strided
    rows, R = 2; x off its values' alignment: test_flat_expressions_are_declared's plans) and
    dtype (complex) segment_reduce(_values)."""
    rng = np.random.default_rng(3)
    n = 3000
    o = np.array([0, 10, 10, 2000, n], np.int64)
    flat = [tiny_values(rng, n, np.float32), tiny_values(rng, n, np.float32).reshape(n, 1),
            tiny_values(rng, n, np.int32), tiny_values(rng, n, np.uint32),
            tiny_values(rng, n, np.float32, pad=1), tiny_values(rng, n, np.float64),
            tiny_values(rng, n, np.int8), tiny_values(rng, n, np.int64, pad=1),
            tiny_values(rng, n, np.int64).astype("m8[s]")]
    other = [np.repeat(tiny_values(rng, n, np.float32), 2)[::2],      # strided rows
             tiny_values(rng, 2 * n, np.float32).reshape(n, 2),        # R = 2
             (tiny_values(rng, n, np.float32) + 1j).astype(np.complex64)]
    for x, want_flat in [(x, True) for x in flat] + [(x, False) for x in other]:
        with _trace.recording() as t:
            got = ops(device).segment_argmax(x, o)
        names = [l[0] for l in t.launches]
        assert len(names) == 1 and names[0].startswith(FLAT + "<") == want_flat, \
            (x.dtype, x.shape, x.strides, names)
        assert np.array_equal(got, cupyops.segment_argmax(x, o, device="cpu"))
        with _trace.recording() as t:
            gv, gi = ops(device).segment_min_and_argmin(x, o)
        names = [l[0] for l in t.launches]
        assert len(names) == 1 and names[0].startswith(FLAT_V + "<") == want_flat, \
            (x.dtype, x.shape, x.strides, names)
        wv, wi = cupyops.segment_min_and_argmin(x, o, device="cpu")
        assert np.array_equal(np.asarray(gi), wi) and same_bits(np.asarray(gv), wv)


def test_flat_expressions_are_declared():
    """The flat entry points are modules of the family (precompile, NVRTC checks, simt) and
    first calls, for its dtypes only."""
    fam = seg_family.FLAT_FAMILY_DEF
    assert not any(e.startswith(FLAT) for dt in seg_family.DTYPES
                   for e in seg_family.FAMILY_DEF.expressions_for(dt))
    for dt in seg_family.FLAT_DTYPES:
        exprs = fam.expressions_for(dt)
        # (32-bit indexing only; a kernel per tie and mode, each a module and a first call;
        # the flat path of rows: index mode)
        want = [seg_family.flat_expression(dt, False, t, v) for t in (False, True)
                for v in (False, True)]
        cols = dt in seg_family.FLAT_COLS_DTYPES          # (float32, int32, uint32)
        if cols:
            want += [seg_family.flat_expression(dt, False, t, cols=True, staged=g)
                     for t in (False, True) for g in (False, True)]
            want += [seg_family.flat_expression(dt, False, t, True, cols=True, staged=True)
                     for t in (False, True)]
            want += [seg_family.flat_expression(dt, False, t, cols=True, strips=True)
                     for t in (False, True)]
        assert sorted(exprs) == sorted(want) and len(set(want)) == (12 if cols else 4)
        assert sum(e.startswith(FLAT_V + "<") for e in want) == 2
        assert sum(e.startswith(FLAT_COLS + "<") for e in want) == (4 if cols else 0)
        assert sum(e.startswith(FLAT_COLS_V + "<") for e in want) == (2 if cols else 0)
        assert sum(e.startswith(FLAT_STRIPS + "<") for e in want) == (2 if cols else 0)
        for e in want:
            assert (e,) in fam.modules_for(dt)
            assert any(c.exprs == (e,) for c in fam.first_calls_for(dt))
    assert set(fam.dtypes) == set(seg_family.FLAT_DTYPES)
    assert {d.name for d in seg_family.FLAT_DTYPES} >= {
        "bool", "int8", "uint8", "int16", "uint16", "float16", "int32", "uint32", "float32",
        "int64", "uint64", "float64"}
    assert not any(d.kind == "c" for d in seg_family.FLAT_DTYPES)
    assert seg_family.DATETIME in seg_family.FLAT_DTYPES
    assert set(seg_family.FLAT_COLS_DTYPES) <= set(seg_family.FLAT_DTYPES)
    for dt, isz, shared in ((np.float16, 2, 34960), (np.int8, 1, 26768), (np.float64, 8, 28048)):
        p = seg_plan.plan_for((5000,), (isz,), dt, 256 + isz, 7, np.int64, 1, values=True)
        assert p.flat and p.shared_mem == seg_family.flat_shared_bytes(isz, 4) == shared
    assert not seg_plan.plan_for((5000,), (8,), np.float64, 260, 7, np.int64, 1,
                                 values=False).flat            # x not 8-byte aligned
    # 1-byte x of nearly 2**31 rows: 32-bit indexing, but a tile's end would pass an int
    # (review H1: the last tile never ended); the merge-path kernel
    for n, flat in ((2**31 - 8, False), (2**31 - 20000, True)):
        p = seg_plan.plan_for((n,), (1,), np.bool_, 256, 1, np.int64, 1, values=False)
        assert not p.use_64bit and p.flat == flat, (n, p)
    assert not seg_plan.plan_for((500, 16), (32, 2), np.float16, 256, 7, np.int64, 1,
                                 values=False).cols            # rows: 4-byte dtypes only
    for values in (False, True):
        p = seg_plan.plan_for((5000,), (4,), np.float32, 256, 7, np.int64, 1, values=values)
        assert p.flat and p.shared_mem == seg_family.flat_shared_bytes(4, 4)
    p = seg_plan.plan_for((5000,), (4,), np.float32, 258, 7, np.int64, 1, values=False)
    assert not p.flat                                  # x not 4-byte aligned
    p = seg_plan.plan_for((500, 40), (160, 4), np.float32, 256, 7, np.int64, 1, values=False)
    assert p.cols and not p.flat and p.cw_log2 == 6 and p.ny == 1 and not p.staged
    assert p.shared_mem == seg_family.flat_cols_shared_bytes(4, False)
    p = seg_plan.plan_for((500, 16), (64, 4), np.int32, 272, 7, np.int64, 1, values=False)
    assert p.cols and p.cw_log2 == 4 and p.staged      # (a warp: 16 columns of 2 rows)
    p = seg_plan.plan_for((500, 3), (12, 4), np.float32, 256, 7, np.int64, 1, values=False)
    assert p.cols and p.cw_log2 == 2 and p.staged      # (4 columns, one idle, of 8 rows)
    assert p.shared_mem == seg_family.flat_cols_shared_bytes(4, True)
    p = seg_plan.plan_for((500, 20), (80, 4), np.int32, 256, 7, np.int64, 1, values=False)
    assert p.cols and p.staged                         # (rows of 80 bytes)
    p = seg_plan.plan_for((500, 64), (256, 4), np.int32, 256, 7, np.int64, 1, values=True)
    assert p.cols and p.staged                         # (values: always staged)


def test_the_flat_path_can_be_turned_off(monkeypatch):
    """CUPYOPS_SEGMENT_FLAT=0 (plan.FLAT, read at import) plans the merge-path kernel, whose
    results for the flat layouts are right in both modes (the way back if the flat path
    misbehaves on a GPU)."""
    args = ((5000,), (4,), np.float32, 256, 7, np.int64, 1)
    assert seg_plan.plan_for(*args, values=False).flat
    monkeypatch.setattr(seg_plan, "FLAT", False)
    assert not seg_plan.plan_for(*args, values=False).flat
    assert not seg_plan.plan_for(*args, values=True).flat
    rng = np.random.default_rng(12)
    n = 2 * TILE + 33
    x, o = tiny_values(rng, n, np.float32), mixed_offsets(rng, n)
    for values in (False, True):
        got, names = direct(x, o, "min", "last", values=values)
        assert names == [seg_family.expression(values, np.float32, False)], names
        fn = "segment_min_and_argmin" if values else "segment_argmin"
        want = getattr(cupyops, fn)(x, o, tie="last", empty_index=-7, device="cpu")
        if values:
            assert same_bits(got[0], want[0])
            got, want = got[1], want[1]
        assert np.array_equal(got, want)
    code = ("import cupyops.ops.segment.plan as p; import sys; sys.exit(0 if p.FLAT else 3)")
    env = dict(os.environ, CUPYOPS_SEGMENT_FLAT="0")
    assert subprocess.run([sys.executable, "-c", code], env=env).returncode == 3


# ------------------------------------------------------------------------------------------
# tiles, blocks, ends
# ------------------------------------------------------------------------------------------

# block shares: one block; about 2.5 tiles a block (block boundaries inside tiles); under a
# tile (many blocks, most segments chains)
BLOCKS = [128 * 1024, int(2.5 * TILE * 4), 1500]


@pytest.mark.parametrize("block_bytes", BLOCKS)
def test_tile_edges(block_bytes, monkeypatch):
    monkeypatch.setattr(seg_plan, "FLAT_BLOCK_BYTES", block_bytes)
    rng = np.random.default_rng(block_bytes)
    n = 3 * TILE + 123
    x = tiny_values(rng, n, np.float32)
    check_flat(x, edge_offsets(n))
    check_flat(x, tiny_offsets(rng, n))
    check_flat(x, mixed_offsets(rng, n), relative=True)
    y = np.nan_to_num(x, nan=1.0)                  # ties of the largest value, not of NaN
    check_flat(y, mixed_offsets(rng, n))


@pytest.mark.parametrize("block_bytes", BLOCKS)
def test_spans_and_single_segments(block_bytes, monkeypatch):
    monkeypatch.setattr(seg_plan, "FLAT_BLOCK_BYTES", block_bytes)
    rng = np.random.default_rng(1 + block_bytes)
    n = 2 * TILE + 77
    x = tiny_values(rng, n, np.float32)
    check_flat(x, np.array([0, n], np.int64))                       # one segment, everything
    check_flat(x, np.array([5, n - 3], np.int64), relative=True)    # S = 1 inside x
    check_flat(x, np.array([0, 0, n, n], np.int64))                 # empties around it
    check_flat(x, np.array([TILE, TILE], np.int64))                 # S = 1, empty
    check_flat(x, np.array([3, 3, 3, TILE + 5], np.int64))
    check_flat(x[:1], np.array([0, 1], np.int64))                   # one row
    check_flat(x, np.zeros(CAP * 3, np.int64))                      # all empty, at row 0
    check_flat(x, np.full(CAP + 1, n, np.int64))                    # all empty, at the end


@pytest.mark.parametrize("pad", [1, 2, 3, 5, 7])
def test_misaligned_x(pad, monkeypatch):
    """x's start not on a 16- (or 32-) byte boundary: the tiles are aligned to x's memory, the
    block's first tile masked."""
    monkeypatch.setattr(seg_plan, "FLAT_BLOCK_BYTES", int(1.5 * TILE * 4))
    rng = np.random.default_rng(pad)
    n = 3 * TILE + 9
    x = tiny_values(rng, n, np.float32, pad=pad)
    check_flat(x, edge_offsets(n))
    check_flat(x, mixed_offsets(rng, n), ties=("last",))


@pytest.mark.parametrize("dtype", ["int32", "uint32"])
def test_integer_values(dtype, monkeypatch):
    monkeypatch.setattr(seg_plan, "FLAT_BLOCK_BYTES", int(1.5 * TILE * 4))
    rng = np.random.default_rng(5)
    n = 2 * TILE + 300
    x = tiny_values(rng, n, dtype)
    x[rng.random(n) < 0.01] = np.iinfo(dtype).min        # the smallest key: a real element
    x[rng.random(n) < 0.01] = np.iinfo(dtype).max
    # (a tie each: every simt module is a compile in a cold CI run; float32 runs both)
    tie = ("first",) if dtype == "int32" else ("last",)
    check_flat(x, mixed_offsets(rng, n), ties=tie)
    check_flat(x, edge_offsets(n), ties=tie)


# the other widths: tiles of 8,192 rows for 1- and 2-byte values (32 a thread), 2,048 for 8-byte
# ones (8 a thread); both ties for a float of each new width, one tie for an integer of each
# and for bool and timedelta (NaT): each instantiation is a simt compile in a cold CI run (the
# walk depends on the width; the key rule, ar_key, is the merge path's, tested there for every
# dtype, and the simt selftest runs every dtype through this path)
WIDTHS = [("float16", ("first", "last")), ("float64", ("first", "last")), ("bool", ("first",)),
          ("int8", ("last",)), ("uint16", ("first",)), ("int64", ("first",)),
          ("timedelta64[ns]", ("last",))]


@pytest.mark.parametrize("dtype,ties", WIDTHS, ids=[w[0] for w in WIDTHS])
def test_other_widths(dtype, ties, monkeypatch):
    """1-, 2- and 8-byte values: tile edges, capped tiles, chains (about 1.5 tiles a block), x
    off a 32-byte boundary (the first tile masked), the integers' extremes, NaN and -0.0."""
    dt = next(d for d in seg_family.FLAT_DTYPES if d.name == dtype)
    tile = 256 * seg_family.flat_rows(dt.itemsize)
    monkeypatch.setattr(seg_plan, "FLAT_BLOCK_BYTES", int(1.5 * tile * dt.itemsize))
    rng = np.random.default_rng(dt.itemsize * 31 + len(dtype))
    n = 3 * tile + 21
    x = tiny_values(rng, n, dt)
    if dt.kind in "iu":
        x[rng.random(n) < 0.01] = np.iinfo(dt).min
        x[rng.random(n) < 0.01] = np.iinfo(dt).max
    check_flat(x, edge_offsets(n, tile), ties=ties)
    check_flat(x, tiny_offsets(rng, n), ties=ties, relative=True)
    y = tiny_values(rng, n, dt, pad=3)                     # x 3 values past an aligned start
    check_flat(y, mixed_offsets(rng, n), ties=ties)
    check_flat(y, np.array([0, n], np.int64), ties=ties, kinds=("min",))   # one chain


def test_offsets_and_index_dtypes(monkeypatch):
    monkeypatch.setattr(seg_plan, "FLAT_BLOCK_BYTES", int(1.5 * TILE * 4))
    rng = np.random.default_rng(6)
    n = 2 * TILE + 40
    x = tiny_values(rng, n, np.float32)
    o = mixed_offsets(rng, n)
    for odt in (np.int16, np.uint16, np.int32, np.uint32, np.uint64):
        check_flat(x, o.astype(odt), ties=("first",))
    wide = np.zeros(2 * len(o), np.int64)
    wide[::2] = o
    check_flat(x, wide[::2], ties=("last",))                          # strided offsets
    check_flat(x, o, index_dtype=np.int32, relative=True)
    check_flat(x, o, index_dtype=np.uint16, kinds=("min",))
    # 64-bit indexing: the merge-path kernel (the flat path is 32-bit only)
    got, names = direct(x, o, "max", "last", force_64bit=True)
    assert names == [seg_family.expression(False, np.float32, True)], names
    assert np.array_equal(got, cupyops.segment_argmax(x, o, tie="last", empty_index=-7,
                                                      device="cpu"))


@pytest.mark.parametrize("schedule", ["reverse", 31337, 7])
def test_flat_under_schedules(schedule, monkeypatch):
    """Chains, tickets and the last block under other block / warp orders."""
    monkeypatch.setattr(seg_plan, "FLAT_BLOCK_BYTES", 3000)
    rng = np.random.default_rng(8)
    n = 2 * TILE + 500
    x = tiny_values(rng, n, np.float32)
    with simt.schedule(schedule):
        check_flat(x, mixed_offsets(rng, n))
        check_flat(x, edge_offsets(n), ties=("last",))
        check_flat(x, np.array([0, n], np.int64), kinds=("min",))


# ------------------------------------------------------------------------------------------
# the flat path of rows (R = 2 .. 256)
# ------------------------------------------------------------------------------------------

def rows_of(rng, n, r, dtype=np.float32, pad=0):
    """(n, r) values from a tiny range (as tiny_values), starting ``pad`` elements past a
    256-byte boundary (pad = 0 and rows of a multiple of 32 bytes: the kernel that reads rows
    straight; other layouts stage them)."""
    v = tiny_values(rng, n * r, dtype)
    buf = np.zeros(n * r + 64 + pad, v.dtype)
    at = (-buf.ctypes.data % 256) // v.itemsize + pad
    x = buf[at:at + n * r].reshape(n, r)
    x[...] = v.reshape(n, r)
    return x


def rows_blocks(monkeypatch, nbytes):
    """Blocks of the flat path of rows of about ``nbytes`` of x (FLAT_BLOCK_BYTES, and no
    floor for the chain partials' share, plan.partials_floor: many blocks, chains)."""
    monkeypatch.setattr(seg_plan, "FLAT_BLOCK_BYTES", nbytes)
    monkeypatch.setattr(seg_plan, "PARTIAL_SHARE", 0)


def staged_kernel(x):
    """Whether x's rows take the staged kernel (segment_reduce_flat_cols<..., true>): off
    32-byte boundaries, or R <= 16 (CW < 32: several partitions a warp)."""
    return x.ctypes.data % 32 != 0 or x.shape[1] * x.itemsize % 32 != 0 or x.shape[1] <= 16


@pytest.mark.parametrize("device", KERNEL_DEVICES)
def test_the_flat_path_of_rows_runs_for_contiguous_rows_only(device):
    """Contiguous rows of R = 2 .. 256 float32 / int32 / uint32 launch segment_reduce_flat_cols
    (values forms: segment_reduce_flat_cols_values); wider rows, strided rows or columns and
    other dtypes the merge-path kernel."""
    rng = np.random.default_rng(13)
    n = 700
    o = np.array([0, 5, 5, 300, n], np.int64)
    cols = [rows_of(rng, n, 16), rows_of(rng, n, 64, np.int32), rows_of(rng, n, 256, np.uint32),
            rows_of(rng, n, 33).reshape(n, 3, 11), rows_of(rng, n, 40, pad=1), rows_of(rng, n, 2),
            rows_of(rng, n, 15).reshape(n, 3, 5)]
    other = [rows_of(rng, n, 257), rows_of(rng, n, 64)[:, ::2],
             rows_of(rng, 2 * n, 32)[::2], rows_of(rng, n, 64, np.float64),
             rows_of(rng, n, 64).reshape(n, 8, 8).transpose(0, 2, 1)]
    for x, want_cols in [(x, True) for x in cols] + [(x, False) for x in other]:
        with _trace.recording() as t:
            got = ops(device).segment_argmin(x, o, tie="last")
        names = [l[0] for l in t.launches]
        assert len(names) == 1 and names[0].startswith(FLAT_COLS + "<") == want_cols, \
            (x.dtype, x.shape, x.strides, names)
        assert np.array_equal(got, cupyops.segment_argmin(x, o, tie="last", device="cpu"))
        with _trace.recording() as t:
            gv, gi = ops(device).segment_max_and_argmax(x, o)
        names = [l[0] for l in t.launches]
        assert len(names) == 1 and names[0].startswith(FLAT_COLS_V + "<") == want_cols, names
        wv, wi = cupyops.segment_max_and_argmax(x, o, device="cpu")
        assert np.array_equal(np.asarray(gi), wi) and same_bits(np.asarray(gv), wv)


# rows a tile: 16 x the partitions (256 / CW, CW the least power of two >= R): 2,048 rows for
# R = 2, 128 for R = 17 .. 32, 16 for R > 128; rows read straight (R >= 32 a multiple of 8,
# pad 0) or staged (other R, or x off a 32-byte boundary; R <= 16: CW < 32, several partitions
# a warp, sgfc_small_prefix)
@pytest.mark.parametrize("r,pad", [(2, 0), (3, 0), (8, 0), (8, 3), (13, 0), (16, 0), (17, 0),
                                   (32, 0), (33, 0), (64, 0), (64, 3), (100, 0), (256, 0),
                                   (256, 4)])
def test_rows_tiles_and_blocks(r, pad, monkeypatch):
    """Segments ending at and around tile edges, empty ones there, runs of empty segments
    longer than a tile's cap, segments across tiles and blocks (small blocks: chains)."""
    rng = np.random.default_rng(r + pad)
    tile = 16 * (256 // (1 << (r - 1).bit_length()))
    n = 5 * tile + 37
    rows_blocks(monkeypatch, 4 * r * (n // 4))                         # about 4 blocks
    x = rows_of(rng, n, r, pad=pad)
    got, names = direct(x, np.array([0, n], np.int64), "max", "first")
    assert names[0].endswith(f"{str(staged_kernel(x)).lower()}>"), names
    plan = seg_plan.plan_for(x.shape, x.strides, x.dtype, x.ctypes.data, 1, np.int64, 1,
                             values=False)
    assert plan.cols and plan.nblocks >= 3, plan                 # (one segment: a chain)
    ends = [0, 0, 1, tile - 1, tile, tile, tile + 1, 2 * tile - 1, 2 * tile + 1]
    ends += [3 * tile] * (CAP + 20) + [3 * tile + 2, 4 * tile, n]
    check_flat(x, np.minimum(np.array(ends, np.int64), n))
    check_flat(x, tiny_offsets(rng, n), relative=True)
    check_flat(x, mixed_offsets(rng, n), ties=("last",))
    check_flat(x, np.array([0, n], np.int64), kinds=("min",))      # one segment: a chain
    check_flat(x, np.array([3, 3, n - 2], np.int64), ties=("first",))


def test_rows_misaligned_dtypes_and_offsets(monkeypatch):
    """x starting 1 element past a 16-byte boundary, int32 / uint32 with their extremes,
    offsets of other widths and strides, index dtypes, 64-bit indexing (the merge path)."""
    rows_blocks(monkeypatch, 4 * 48 * 150)
    rng = np.random.default_rng(17)
    n = 1000
    x = rows_of(rng, n, 48, pad=1)
    o = tiny_offsets(rng, n)
    check_flat(x, o)
    for dt, tie in (("int32", "first"), ("uint32", "last")):       # (the ties of test_integer_values)
        y = rows_of(rng, n, 20, dt)
        y[rng.random(y.shape) < 0.01] = np.iinfo(dt).min
        y[rng.random(y.shape) < 0.01] = np.iinfo(dt).max
        check_flat(y, o, ties=(tie,))
    for odt in (np.int16, np.uint32):
        check_flat(x, o.astype(odt), ties=("first",), kinds=("max",))
    wide = np.zeros(2 * len(o), np.int64)
    wide[::2] = o
    check_flat(x, wide[::2], kinds=("min",))
    check_flat(x, o, index_dtype=np.int32, relative=True, kinds=("max",))
    check_flat(x, o, index_dtype=np.uint16, kinds=("min",), ties=("last",))
    got, names = direct(x, o, "max", "first", force_64bit=True)
    assert names == [seg_family.expression(False, np.float32, True)], names
    assert np.array_equal(got, cupyops.segment_argmax(x, o, empty_index=-7, device="cpu"))


def test_rows_wider_than_256(monkeypatch):
    """Rows of more than 256 values on 32-byte boundaries, index mode: the rows kernel's
    straight walk in strips of 256 columns (grid.y, the last strip partial), chains per strip,
    under a schedule too; values forms, misaligned x or rows, and other dtypes the merge path."""
    rows_blocks(monkeypatch, 4 * 256 * 30)
    rng = np.random.default_rng(29)
    n = 5 * 16 + 37
    for r in (264, 1000):                       # strips: 256 + 8 columns; 3 x 256 + 232
        x = rows_of(rng, n, r)
        plan = seg_plan.plan_for(x.shape, x.strides, x.dtype, x.ctypes.data, 1, np.int64, 1,
                                 values=False)
        assert plan.strips and plan.ny == -(-r // 256) and plan.nblocks >= 3, plan
        ends = [0, 0, 1, 15, 16, 16, 17, 33] + [48] * (CAP + 20) + [50, 64, n]
        for o, kinds, ties in ((np.minimum(np.array(ends, np.int64), n), ("max", "min"),
                                ("first", "last")),
                               (tiny_offsets(rng, n), ("min",), ("last",)),
                               (mixed_offsets(rng, n), ("max",), ("first",)),
                               (np.array([0, n], np.int64), ("max",), ("last",))):
            check_flat(x, o, kinds=kinds, ties=ties, modes=(False,), relative=r == 264)
        with simt.schedule("reverse"):
            check_flat(x, tiny_offsets(rng, n), kinds=("max",), ties=("first",), modes=(False,))
    x = rows_of(rng, n, 264)
    o = tiny_offsets(rng, n)
    for y, values in ((x, True), (rows_of(rng, n, 264, pad=1), False), (rows_of(rng, n, 260), False),
                      (rows_of(rng, n, 264, np.float64), False)):
        got, names = direct(y, o, "max", "first", values=values)
        assert names == [seg_family.expression(values, y.dtype, False)], names
        want = getattr(cupyops, "segment_max_and_argmax" if values else "segment_argmax")(
            y, o, empty_index=-7, device="cpu")
        assert np.array_equal(got[1] if values else got, want[1] if values else want)


@pytest.mark.parametrize("schedule", ["reverse", 4242])
def test_rows_under_schedules(schedule, monkeypatch):
    rows_blocks(monkeypatch, 4 * 64 * 100)
    rng = np.random.default_rng(19)
    n = 900
    for x in (rows_of(rng, n, 64), rows_of(rng, n, 48, pad=1)):       # straight, staged
        with simt.schedule(schedule):
            check_flat(x, tiny_offsets(rng, n))
            check_flat(x, np.array([0, n], np.int64), kinds=("max",))


def test_bad_device_offsets_on_the_flat_path_of_rows(monkeypatch):
    """The kernel's own check and fill, as test_bad_device_offsets_on_the_flat_path's."""
    rows_blocks(monkeypatch, 4 * 32 * 120)
    rng = np.random.default_rng(23)
    n = 1200
    x = rows_of(rng, n, 32)
    good = tiny_offsets(rng, n)
    cases = [(len(good) // 2, -5, "is negative"), (7, 10**6, "is past the end"),
             (len(good) - 3, 0, "is smaller than"), (CAP + 3, 1, "is smaller than")]
    spiked = good.copy()
    spiked[len(good) // 3] = n
    for (pos, val, what), values in zip(cases + [(None, None, None)] * 2,
                                        [False, True, False, True, False, True]):
        bad = spiked if pos is None else good.copy()
        if pos is not None:
            bad[pos] = val
        r, names = direct(x, bad, "min", "last", checked=False, values=values)
        assert names[0].startswith(FLAT_COLS_V if values else FLAT_COLS + "<"), names
        with pytest.raises(ValueError, match="offsets on the GPU break the rules") as err:
            core_backend.check_device_errors()
        assert pos is None or f"offsets[{pos}] {what}" in str(err.value), (pos, err.value)
        if values:                            # the values the empty value: +inf for min
            v, r = r
            assert (v == np.inf).all()
        assert (r == -7).all()
    r, _ = direct(x, good, "min", "last", checked=False)
    core_backend.check_device_errors()
    assert np.array_equal(r, cupyops.segment_argmin(x, good, tie="last", empty_index=-7,
                                                    device="cpu"))


# ------------------------------------------------------------------------------------------
# bad offsets on the device
# ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("block_bytes", [128 * 1024, 3000])
def test_bad_device_offsets_on_the_flat_path(block_bytes, monkeypatch):
    """As test_segment_kernels' kernel check, for the flat path: the first bad position in the
    error the next host read raises, the whole result empty_index; valid offsets after that run
    clean."""
    monkeypatch.setattr(seg_plan, "FLAT_BLOCK_BYTES", block_bytes)
    rng = np.random.default_rng(11)
    n = 3 * TILE
    x = tiny_values(rng, n, np.float32)
    good = tiny_offsets(rng, n, 0, n)
    cases = [(len(good) // 2, -5, "is negative"), (7, 10**6, "is past the end"),
             (len(good) - 3, 0, "is smaller than"), (0, n + 1, "is past the end"),
             (len(good) - 1, n + 1, "is past the end"), (CAP + 3, 1, "is smaller than")]
    for (pos, val, what), values in zip(cases, [False, True] * 3):
        bad = good.copy()
        bad[pos] = val
        r, names = direct(x, bad, "max", "first", checked=False, values=values)
        assert names[0].startswith(FLAT_V if values else FLAT), names
        try:
            core_backend.check_device_errors()
            err = None
        except ValueError as exc:
            err = str(exc)
        assert err is not None and f"offsets[{pos}] {what}" in err, (pos, err)
        if values:                            # the values the empty value: -inf for max
            v, r = r
            assert (v == -np.inf).all()
        assert (r == -7).all()
    # many values wrong at once (a spike, shuffled offsets): the blocks' ranges of ends then
    # overlap, and each output still has one writer (review: two blocks stored the same end,
    # a race simt reported instead of the offsets' error)
    m = 9000
    xs = tiny_values(rng, m, np.float32)
    base = np.sort(rng.integers(0, m + 1, 1200)).astype(np.int64)
    spiked = base.copy()
    spiked[500] = m
    shuffled = base.copy()
    shuffled[600:] = rng.permutation(shuffled[600:])
    monkeypatch.setattr(seg_plan, "FLAT_BLOCK_BYTES", 3000)      # 14 blocks
    for bad in (spiked, shuffled):
        for values in (False, True):
            r, names = direct(xs, bad, "max", "first", checked=False, values=values)
            assert names[0].startswith(FLAT_V if values else FLAT), names
            with pytest.raises(ValueError, match="offsets on the GPU break the rules"):
                core_backend.check_device_errors()
            if values:
                v, r = r
                assert (v == -np.inf).all()
            assert (r == -7).all()
    monkeypatch.setattr(seg_plan, "FLAT_BLOCK_BYTES", block_bytes)
    r, _ = direct(x, good, "max", "first", checked=False)
    core_backend.check_device_errors()
    assert np.array_equal(r, cupyops.segment_argmax(x, good, empty_index=-7, device="cpu"))
