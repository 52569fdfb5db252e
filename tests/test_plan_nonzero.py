"""The nonzero family's planner (cupyops/ops/nonzero/plan.py) and parameter structs
(cupyops/ops/nonzero/params.py), without a GPU: struct layouts,
magic-number division, tiles and grids, reading / coordinate dimensions, the 64-bit choice,
and count_nonzero's split of kept and reduced dimensions. The kernels' index arithmetic is
emulated in Python from the planned numbers and compared with NumPy."""
import itertools
import math
import pathlib
import random
import re

import numpy as np
import pytest

from cupyops.ops.nonzero import params as PP
from cupyops.ops.nonzero import plan as P

KERNELS = pathlib.Path(__file__).resolve().parents[1] / "kernels"


# ------------------------------------------------------------------------------ structs

def test_struct_sizes_and_alignment():
    """(The kernel source's static_asserts are compared with the definitions in
    tests/test_structs.py.)"""
    assert PP.FASTDIV_DTYPE.itemsize == 24
    assert PP.PARAMS_DTYPE.alignment == 8 and PP.COUNT_PARAMS_DTYPE.alignment == 8


def test_struct_field_order_matches_the_kernel_header():
    text = (KERNELS / "nonzero.cuh").read_text()
    for cname, dt in (("nz_params", PP.PARAMS_DTYPE), ("nz_count_params", PP.COUNT_PARAMS_DTYPE)):
        body = re.search(r"struct %s \{(.*?)\};" % cname, text, re.S).group(1)
        fields = re.findall(r"^\s*\w+\s+(\w+)(?:\[[^\]]*\])?;", body, re.M)
        assert tuple(fields) == dt.names, cname


def test_items_and_tiles_follow_the_value_size():
    assert [P.items_per_thread(s) for s in (1, 2, 4, 8, 16)] == [16, 16, 16, 8, 4]
    assert [P.tile_elements(s) for s in (1, 2, 4, 8, 16)] == [4096, 4096, 4096, 2048, 1024]
    # staged tile-local indices are u16
    assert all(P.tile_elements(s) <= 65536 for s in (1, 2, 4, 8, 16))


# ------------------------------------------------------------------------------ fastdiv

@pytest.mark.parametrize("bits", [32, 64])
def test_fastdiv_is_exact(bits):
    rng = random.Random(5)
    top = 2**bits
    divisors = list(range(1, 70)) + [2**k + e for k in range(1, bits - 1) for e in (-1, 0, 1)]
    divisors += [rng.randrange(1, top if bits == 32 else 2**63) for _ in range(300)]
    for d in divisors:
        if d >= top or d >= 2**63:
            continue
        f = PP.fastdiv(d)
        assert 0 < f[1] < 2**64 and 0 <= f[2] < 2**32         # the struct's field widths
        # the textbook form of the multipliers
        ell = (d - 1).bit_length()
        assert f[1:3] == (2**64 * (2**ell - d) // d + 1,
                          2**32 * (2**ell - d) // d + 1 if d < 2**32 else 0)
        ns = [0, 1, d - 1, d, d + 1, 2 * d - 1, top - 1, top - d, top // 2]
        ns += [rng.randrange(top) for _ in range(20)]
        for n in ns:
            if 0 <= n < top:
                assert PP.fastdiv_apply(n, f, bits) == n // d, (n, d)


def test_fastdiv_range():
    with pytest.raises(ValueError):
        PP.fastdiv(0)
    assert PP.fastdiv(2**40)[2] == 0          # no 32-bit multiplier past 2**32
    assert PP.fastdiv(1)[3:] == (0, 0)


# ------------------------------------------------------------------------------ coordinates

def _raw(x):
    """(bytes of the memory x views, as uint8, and the byte position of x's element 0)."""
    owner = x
    while isinstance(owner.base, np.ndarray):
        owner = owner.base
    mem = owner.ravel(order="K").view(np.uint8)
    assert np.shares_memory(mem, owner)
    return mem, x.__array_interface__["data"][0] - owner.__array_interface__["data"][0]


def _views(mod=None):
    base = np.arange(4 * 5 * 6, dtype=np.float32).reshape(4, 5, 6)
    if mod is not None:
        base = base % mod
    return {
        "C": base,
        "F": np.asfortranarray(base),
        "sliced": base[1:, ::2, 1:5],
        "negative": base[::-1, :, ::-2],
        "broadcast": np.broadcast_to(base[:, :1, :], (4, 5, 6)),
        "transposed": base.transpose(2, 0, 1),
        "unit": base[:, 2:3, :].reshape(4, 1, 1, 6),
    }


def test_reading_dims_merge_but_keep_the_order():
    v = _views()
    assert P.reading_dims(v["C"].shape, v["C"].strides) == ((120, 4),)
    assert P.reading_dims(v["F"].shape, v["F"].strides) == ((4, 4), (5, 16), (6, 80))
    assert P.reading_dims(v["unit"].shape, v["unit"].strides) == ((4, 120), (6, 4))
    assert P.reading_dims(v["broadcast"].shape, v["broadcast"].strides) == ((4, 120), (5, 0), (6, 4))
    assert P.reading_dims((1, 1), (8, 8)) == ((1, 0),)
    neg = v["negative"]
    assert P.reading_dims(neg.shape, neg.strides) == ((4, -120), (5, 24), (3, -8))


def _emulate_offset(cp, L, bits):
    off = 0
    dims = cp.read_dims
    for i in range(len(dims) - 1, 0, -1):
        f = PP.fastdiv(dims[i][0])
        q = PP.fastdiv_apply(L, f, bits)
        off += (L - q * dims[i][0]) * dims[i][1]
        L = q
    return off + L * dims[0][1]


def _emulate_coordinate(cp, L, col, bits):
    if (cp.unit_mask >> col) & 1:
        return 0
    k = bin(~cp.unit_mask & ((1 << col) - 1) & (2**64 - 1)).count("1")
    n, suffix = cp.coord_dims[k]
    q = PP.fastdiv_apply(L, PP.fastdiv(suffix), bits)
    return q - PP.fastdiv_apply(q, PP.fastdiv(n), bits) * n


@pytest.mark.parametrize("name", list(_views()))
@pytest.mark.parametrize("force", [False, True])
def test_kernel_index_arithmetic_matches_numpy(name, force):
    x = _views()[name]
    cp = P.plan_coordinates(x.shape, x.strides, x.itemsize, np.int64, force_64bit=force)
    assert cp.wide == force
    bits = 64 if cp.wide else 32
    flat = x.ravel(order="C")
    mem, start = _raw(x)
    for L in range(x.size):
        coords = np.unravel_index(L, x.shape)
        assert tuple(_emulate_coordinate(cp, L, c, bits) for c in range(x.ndim)) == coords
        off = _emulate_offset(cp, L, bits)
        assert off == sum(c * s for c, s in zip(coords, x.strides))
        val = mem[start + off:start + off + x.itemsize].view(x.dtype)[0]
        assert val == flat[L]


def test_tiles_grids_and_fill():
    cp = P.plan_coordinates((3, 5000), (40000, 8), 8, np.int32)
    assert (cp.items, cp.tile, cp.num_tiles, cp.index_bytes) == (8, 2048, 8, 4)
    assert cp.grid(P.MODE_SCAN) == cp.grid(P.MODE_PLACE) == 8
    assert cp.fill_rows() == 8192
    assert cp.grid(P.MODE_FIXED, 0) == 8
    assert cp.grid(P.MODE_FIXED, 8192) == 9 and cp.grid(P.MODE_FIXED, 8193) == 10
    p = PP.coordinate_params(cp, P.MODE_FIXED, P.LAYOUT_ROWS, k=7, fill=-1, stats=True)
    assert (p["mode"], p["layout"], p["k"], p["fill"], p["stats_on"]) == (2, 0, 7, -1, 1)
    assert (p["size"], p["num_tiles"], p["in_ndim"], p["out_ndim"]) == (15000, 8, 1, 2)
    assert p["ndim_div"]["d"] == 2 and p["co_suffix"][0]["d"] == 5000
    assert p["co_shape"][1]["d"] == 5000 and p["in_div"][1]["d"] == 1
    big = PP.coordinate_params(cp, P.MODE_FIXED, k=1, fill=2**64 - 1)
    assert big["fill"] == -1                       # uint64 fill: same bits


def test_unit_dims_and_many_dimensions():
    shape = (1,) * 40 + (3, 1, 4)
    cp = P.plan_coordinates(shape, (8,) * 43, 8, np.int64)
    assert cp.coord_dims == ((3, 4), (4, 1))
    assert cp.unit_mask == (2**43 - 1) & ~(1 << 40) & ~(1 << 42)
    with pytest.raises(ValueError, match="at most 8 dimensions of extent"):
        P.plan_coordinates((2,) * 9, tuple(2**k for k in range(9, 0, -1)), 1, np.int64)
    # nine non-mergeable reading dims (every other element)
    x = np.zeros((2,) * 9 + (2,), np.int8)[..., 0]
    with pytest.raises(ValueError):
        P.plan_coordinates(x.shape, x.strides, 1, np.int64)


def test_64bit_choice():
    assert not P.plan_coordinates((2**31,), (1,), 1, np.int64).wide
    assert P.plan_coordinates((2**31 + 1,), (1,), 1, np.int64).wide
    assert not P.plan_coordinates((2, 3), (2**30, 1), 1, np.int64).wide
    assert P.plan_coordinates((3, 3), (2**30, 1), 1, np.int64).wide     # span past 2**31 bytes
    assert P.plan_coordinates((3, 3), (-(2**30), 1), 1, np.int64).wide
    assert P.plan_coordinates((4,), (4,), 4, np.int64, force_64bit=True).wide


# ------------------------------------------------------------------------------ count_nonzero

def _emulate_count(x, cp):
    """Sum over the plan's (output, chunk) units as the kernel does, from raw byte offsets."""
    raw, start = _raw(x)

    def offset(L, dims):
        off = 0
        for i in range(len(dims) - 1, 0, -1):
            L, r = divmod(L, dims[i][0])
            off += r * dims[i][1]
        return off + L * dims[0][1]

    out = np.zeros(cp.n_out, np.int64)
    out_dims = tuple((n, s) for (n, _), s in zip(cp.kept_dims, cp.out_strides))
    units = []
    for g in range(cp.units):
        if cp.mode == 2:        # (row, group of 32 outputs): each output's whole run
            row, grp = divmod(g, cp.groups)
            n_in = cp.kept_dims[-1][0]
            units += [(row * n_in + c, 0) for c in range(grp * 32, min(grp * 32 + 32, n_in))]
        elif cp.mode == 0:
            units.append(divmod(g, cp.n_chunks))
        else:
            c, o = divmod(g, cp.split)
            if cp.o_head <= o < cp.o_head + cp.n_out:
                units.append((o - cp.o_head, c))
    for o, c in units:
        for j in range(c * cp.chunk_len, min((c + 1) * cp.chunk_len, cp.red_size)):
            off = start + cp.base + offset(o, cp.kept_dims) + offset(j, cp.red_dims)
            out[cp.out_base + offset(o, out_dims)] += raw[off:off + x.itemsize].any()
    return out


@pytest.mark.parametrize("name", list(_views()))
@pytest.mark.parametrize("axes", [(0,), (1,), (2,), (0, 2), (0, 1, 2), (1, 2)])
def test_count_plan_covers_the_reduced_elements(name, axes):
    xv = _views(mod=3)[name]          # a third of the values are zero
    if xv.ndim != 3:
        axes = tuple(a for a in axes if a < xv.ndim) or (0,)
    cp = P.plan_count(xv.shape, xv.strides, xv.itemsize, axes, sm_count=2)
    got = _emulate_count(xv, cp)
    want = np.count_nonzero(xv, axis=axes).reshape(-1)
    np.testing.assert_array_equal(got, want)
    assert cp.red_size == math.prod(xv.shape[a] for a in axes)
    assert all(s >= 0 for _, s in cp.red_dims)


def test_count_plan_modes_and_chunks():
    x = np.zeros((64, 4096), np.float32)
    rows = P.plan_count(x.shape, x.strides, 4, (1,))
    assert rows.mode == 0 and rows.red_dims == ((4096, 4),) and rows.kept_dims == ((64, 16384),)
    cols = P.plan_count(x.shape, x.strides, 4, (0,))
    assert cols.mode == 1 and cols.kept_dims == ((4096, 4),) and cols.red_dims == ((64, 16384),)
    full = P.plan_count(x.shape, x.strides, 4, (0, 1))
    assert full.mode == 0 and full.n_out == 1 and full.red_dims == ((64 * 4096, 4),)
    assert full.n_chunks == 128 and full.atomic and full.chunk_len == 2048
    assert full.grid == -(-full.units // P.NZ_WARPS)
    small = P.plan_count((5, 3), (12, 4), 4, (0,))
    assert small.mode == 1 and small.n_chunks == 1 and not small.atomic
    # short contiguous runs side by side: a warp per 32 outputs, read in memory order
    runs = P.plan_count((64, 3), (12, 4), 4, (1,))
    assert runs.mode == 2 and runs.groups == 2 and runs.units == 2 and not runs.atomic
    assert P.plan_count((5, 3), (12, 4), 4, (1,)).mode == 1     # a row of 60 bytes: mode 1
    assert P.plan_count((64, 100), (100, 1), 1, (1,)).mode == 0  # 1-byte runs of 64+: packed
    # kept dims in memory order, mapped back to the row-major output (a permuted input)
    perm = np.zeros((8, 4, 6), np.int8).transpose(1, 2, 0)          # shape (4, 6, 8)
    pp = P.plan_count(perm.shape, perm.strides, 1, (0,))
    assert pp.kept_dims == ((8, 24), (6, 1)) and pp.out_strides == (1, 8)
    assert PP.count_params(pp)["out_mapped"] == 1
    assert PP.count_params(cols)["out_mapped"] == 0
    # 1-byte outputs side by side: a warp's 32 start on a sector (o_head idle units first)
    hd = P.plan_count((64, 4096), (4096, 1), 1, (0,), base_address=256 + 16)
    assert hd.mode == 1 and hd.o_head == 16 and hd.n_chunks == 1 and hd.split == 4096 + 16
    ch = P.plan_count((4096, 64), (64, 1), 1, (0,), base_address=256 + 16)
    assert ch.mode == 1 and ch.o_head == 16 and ch.n_chunks > 1
    assert ch.split == 96 and ch.units == 96 * ch.n_chunks       # every chunk whole warps
    neg = np.zeros((6, 7), np.int8)[::-1, ::-1]
    cn = P.plan_count(neg.shape, neg.strides, 1, (0, 1))
    assert cn.base == -41 and cn.red_dims == ((42, 1),)
    p = PP.count_params(full)
    assert (p["mode"], p["atomic"], p["split_div"]["d"], p["units"]) == (0, 1, 128, 128)
    assert P.plan_count((2**31 + 5,), (1,), 1, (0,)).wide
    assert not P.plan_count((2**20,), (1,), 1, (0,)).wide
    assert P.plan_count((4,), (1,), 1, (0,), force_64bit=True).wide


# ------------------------------------------------------------------------------ packed path

def test_packed_path_choice_and_head():
    """1- and 2-byte types over one contiguous run take the packed path; its tiles start at
    the 16-byte boundary below the data, `head` elements early, so one more tile may be
    needed. Other sizes and layouts do not."""
    p = P.plan_coordinates((4096,), (1,), 1, np.int64, base_address=64)
    assert p.vec and p.head == 0 and p.num_tiles == 1
    p = P.plan_coordinates((4096,), (1,), 1, np.int64, base_address=64 + 5)
    assert p.vec and p.head == 5 and p.num_tiles == 2
    assert PP.coordinate_params(p, P.MODE_FIXED, k=3)["vec"] == 1 and PP.coordinate_params(p, P.MODE_FIXED, k=3)["head"] == 5
    p = P.plan_coordinates((8, 512), (1024, 2), 2, np.int64, base_address=6)
    assert p.vec and p.head == 3 and p.num_tiles == 2             # rows merge into one run
    assert not P.plan_coordinates((8, 512), (2, 16), 2, np.int64).vec        # F-order
    assert not P.plan_coordinates((4096,), (-1,), 1, np.int64).vec           # reversed
    assert not P.plan_coordinates((4096,), (4,), 4, np.int64).vec            # 4-byte type
    c = P.plan_count((7, 300), (300, 1), 1, (1,), base_address=3)
    assert c.vec and c.mode == 0 and PP.count_params(c)["align"] == 3 and PP.count_params(c)["vec"] == 1
    assert not P.plan_count((300, 7), (7, 1), 1, (0,)).vec                  # strided run


# ------------------------------------------------------------------------------ packing

def _fill_coordinate_params(plan, mode, layout, k, fill, row_stride, stats):
    """nz_params filled field by field from the plan (the packer's reference)."""
    p = np.zeros((), PP.PARAMS_DTYPE)
    for i in range(P.MAX_DIMS):
        n, s = plan.read_dims[i] if i < len(plan.read_dims) else (1, 0)
        p["in_div"][i] = PP.fastdiv(n)
        p["in_stride"][i] = s
        n, suffix = plan.coord_dims[i] if i < len(plan.coord_dims) else (1, 1)
        p["co_suffix"][i] = PP.fastdiv(suffix)
        p["co_shape"][i] = PP.fastdiv(n)
    p["ndim_div"] = PP.fastdiv(max(plan.ndim, 1))
    m, kk, inner, chunks, vec, ic, c = plan.tr or (0, 1, 0, 1, False, 0, 1)
    p["tr_chunks"] = PP.fastdiv(chunks)
    fill = int(fill) % 2**64
    for name, v in (("unit_mask", plan.unit_mask), ("size", plan.size),
                    ("num_tiles", plan.segments() if mode == P.MODE_SEGMENTS
                     else plan.num_tiles), ("k", k),
                    ("fill", fill - 2**64 if fill >= 2**63 else fill),
                    ("row_stride", row_stride), ("fill_rows", plan.fill_rows()),
                    ("in_ndim", len(plan.read_dims)), ("out_ndim", plan.ndim), ("mode", mode),
                    ("layout", layout), ("index_bytes", plan.index_bytes),
                    ("stats_on", int(stats)), ("narrow_loads", int(plan.narrow_loads)),
                    ("vec", int(plan.vec)), ("head", plan.head), ("tr_inner", inner),
                    ("tr_dim", m), ("tr_kshift", kk.bit_length() - 1), ("tr_vec", int(vec)),
                    ("tr_c", c), ("tr_ic", ic)):
        p[name] = v
    return p


def _fill_count_params(plan):
    p = np.zeros((), PP.COUNT_PARAMS_DTYPE)
    for side, dims in (("kept", plan.kept_dims), ("red", plan.red_dims)):
        for i in range(P.MAX_DIMS):
            n, s = dims[i] if i < len(dims) else (1, 0)
            p[f"{side}_div"][i] = PP.fastdiv(n)
            p[f"{side}_stride"][i] = s
    p["split_div"] = PP.fastdiv({0: plan.n_chunks, 1: plan.split, 2: plan.groups}[plan.mode])
    for name in ("n_out", "red_size", "chunk_len", "n_chunks", "units", "base", "mode",
                 "atomic", "narrow_loads", "vec", "align", "o_head", "out_base"):
        p[name] = int(getattr(plan, name))
    p["kept_ndim"], p["red_ndim"] = len(plan.kept_dims), len(plan.red_dims)
    for i, s in enumerate(plan.out_strides):
        p["out_stride"][i] = s
    # the output is out[o] (no mapping) when the kept dims are in row-major output order
    sizes = [n for n, _ in plan.kept_dims]
    p["out_mapped"] = int(plan.out_base != 0 or any(
        sizes[i] != 1 and s != math.prod(sizes[i + 1:]) for i, s in enumerate(plan.out_strides)))
    return p


def _compare_chunked(rng, item, f64):
    """The same for an F-order input whose inner extent needs chunks (its SEGMENTS pass too)."""
    if rng.random() > 0.05:
        return
    shape = (rng.choice([3, 8, 40]), rng.choice([40001, 70000]))
    plan = P.plan_coordinates(shape, (item, item * shape[0]), item, np.int64, force_64bit=f64)
    if not plan.chunked:           # (16-byte values: tiles of 2 x 40001 fit)
        return False
    for args in ((P.MODE_SCAN, P.LAYOUT_ROWS, 0, 0, 0, False),
                 (P.MODE_SEGMENTS, P.LAYOUT_COLS, P.K_ALL, 0, 9, False),
                 (P.MODE_SEGMENTS, P.LAYOUT_ROWS, 100, -1, 0, True)):
        got = PP.coordinate_params(plan, args[0], args[1], k=args[2], fill=args[3],
                                   row_stride=args[4], stats=args[5])
        assert got.tobytes() == _fill_coordinate_params(plan, *args).tobytes(), plan
    return True


def test_packed_params_equal_a_field_by_field_fill():
    """The struct packer's one struct.pack gives the very bytes of NumPy field stores (padding
    zero), for random layouts of every value size, both planners and every mode."""
    rng = random.Random(3)
    compared = set()
    for _ in range(1500):
        nd = rng.randint(1, 5)
        shape = tuple(rng.choice([1, 2, 3, 5, 31, 33, 64, 100]) for _ in range(nd))
        item = rng.choice([1, 2, 4, 8, 16])
        perm = list(range(nd))
        rng.shuffle(perm)
        strides, acc = [0] * nd, item * rng.choice([1, 2])
        for d in reversed(perm):
            strides[d] = acc * rng.choice([1, -1])
            acc *= shape[d]
        base = rng.choice([0, 1, 2, 3, 8]) * min(item, 8)
        f64 = rng.random() < 0.2
        plan = P.plan_coordinates(shape, tuple(strides), item, rng.choice([np.int32, np.int64]),
                                  force_64bit=f64, base_address=base)
        for args in ((P.MODE_SCAN, P.LAYOUT_ROWS, 0, 0, 0, False),
                     (P.MODE_FIXED, P.LAYOUT_COLS, 7, -1, 3, True),
                     (P.MODE_FIXED, P.LAYOUT_ROWS, 100, 2**64 - 1, 0, False)):
            got = PP.coordinate_params(plan, args[0], args[1], k=args[2], fill=args[3], row_stride=args[4],
                              stats=args[5])
            assert got.dtype == PP.PARAMS_DTYPE
            assert got.tobytes() == _fill_coordinate_params(plan, *args).tobytes(), plan
        compared.add(("coords", bool(plan.vec), bool(plan.tr), plan.wide))
        if _compare_chunked(rng, item, f64):
            compared.add(("chunked",))
        if math.prod(shape) > 1:
            axes = tuple(sorted(rng.sample(range(nd), rng.randint(1, nd))))
            c = P.plan_count(shape, tuple(strides), item, axes, force_64bit=f64,
                             base_address=base)
            assert PP.count_params(c).tobytes() == _fill_count_params(c).tobytes(), c
            compared.add(("count", c.mode, bool(c.vec), c.wide))
    # the paths the packer serves all came up
    assert {("coords", True, False), ("coords", False, True), ("coords", False, False),
            ("chunked",)} <= {k[:3] for k in compared}
    assert {("count", 0, True), ("count", 0, False), ("count", 1, False), ("count", 2, False)} <= \
        {k[:3] for k in compared}
    with pytest.raises(ValueError, match="an array of 9 values for a field of 8"):
        PP.NZ_COUNT_PARAMS.pack([list(range(1, 10))] + [0] * (len(PP.COUNT_PARAMS_DTYPE.names) - 1))


def test_contiguous_shortcuts_give_the_general_dims():
    """C-contiguous inputs skip the general sort-and-merge: count_dims_contiguous (axes a run)
    and the one reading run of plan_coordinates give what count_dims and reading_dims give,
    unit dims and every value size included; non-contiguous layouts are not taken for
    contiguous ones."""
    seen = 0
    for nd in range(1, 5):
        for shape in itertools.product((1, 2, 3, 5), repeat=nd):
            for item in (1, 2, 8, 16):
                strides, acc = [], item
                for n in reversed(shape):
                    strides.insert(0, acc)
                    acc *= n
                assert P.c_contiguous(shape, strides, item)
                size = math.prod(shape)
                want = P.reading_dims(shape, strides)
                assert (((size, item),) if size > 1 else ((1, 0),)) == want
                for a0 in range(nd):
                    for a1 in range(a0 + 1, nd + 1):
                        axes = tuple(range(a0, a1))
                        kept_axes = [i for i in range(nd) if i not in axes]
                        assert P.count_dims_contiguous(shape, axes, item) == \
                            P.count_dims(shape, strides, axes, kept_axes), (shape, axes)
                        seen += 1
                # unit dims' strides are free in NumPy's flag; a real break is not contiguous
                if any(n > 1 for n in shape):
                    odd = [s if n > 1 else 7 for n, s in zip(shape, strides)]
                    assert P.c_contiguous(shape, odd, item)
                    i = max(i for i, n in enumerate(shape) if n > 1)
                    assert not P.c_contiguous(shape, odd[:i] + [2 * odd[i]] + odd[i + 1:], item)
                    assert not P.c_contiguous(shape, odd[:i] + [-odd[i]] + odd[i + 1:], item)
    assert seen > 4000


def test_contiguous_coordinate_planner_gives_the_general_plan():
    """plan_coordinates_contiguous (a first call's planner for C-contiguous input) plans what
    plan_coordinates plans: unit dims (with any stride, as NumPy's flag allows), every value
    size, pointer alignments, both index widths, forced and needed 64-bit indexing."""
    cases = [(2**31 + 3,), (1, 2**31 - 1), (2**30, 3), (3, 1, 2**29 + 1)]
    for nd in range(1, 5):
        cases += itertools.product((1, 2, 3, 33), repeat=nd)
    seen = 0
    for shape in cases:
        for item in (1, 2, 4, 8, 16):
            strides, acc = [], item
            for n in reversed(shape):
                strides.insert(0, acc if n > 1 else 7 * item)
                acc *= n
            strides = tuple(strides)
            for base in (0, 2, 4, 8, 12) if item <= 8 else (0, 8):
                for idx in (np.int32, np.int64):
                    for f64 in (False, True):
                        want = P.plan_coordinates(shape, strides, item, idx, force_64bit=f64,
                                                  base_address=base)
                        got = P.plan_coordinates_contiguous(shape, strides, item, np.dtype(idx),
                                                            force_64bit=f64, base_address=base)
                        assert got == want, (shape, item, base)
                        assert PP.coordinate_params(got, P.MODE_SCAN).tobytes() == \
                            PP.coordinate_params(want, P.MODE_SCAN).tobytes()
                        seen += 1
    assert seen > 10000


def test_plans_compare_hash_and_print_without_their_memo():
    """Nonzero plans are named tuples whose memo (packed parameters) is left out of ==, !=,
    hash and repr, as the frozen dataclasses they were: a plan that packed its parameters
    equals a fresh one; a plan never equals a plain tuple of its fields; every plan gets a
    memo of its own."""
    shape, strides = (8, 3000), (12000, 4)
    a = P.plan_coordinates(shape, strides, 4, np.int64)
    b = P.plan_coordinates_contiguous(shape, strides, 4, np.dtype(np.int64))
    assert a.memo is not b.memo and not a.memo and not b.memo
    PP.coordinate_params(a, P.MODE_SCAN)
    assert a.memo and not b.memo
    assert a == b and not (a != b) and hash(a) == hash(b) and repr(a) == repr(b)
    assert "memo" not in repr(a) and repr(a).startswith("CoordinatePlan(shape=(8, 3000), ")
    assert a != tuple(a) and tuple(a) != a and not (a == tuple(a))
    assert a != P.plan_coordinates(shape, strides, 4, np.int32)      # index_bytes differs
    c = P.plan_count(shape, strides, 4, (1,))
    d = P.plan_count(shape, strides, 4, (1,))
    PP.count_params(c)
    assert c.memo and not d.memo and c == d and hash(c) == hash(d) and "memo" not in repr(c)
    assert c != P.plan_count(shape, strides, 4, (0,)) and {c: 1}[d] == 1
    # no order; other objects still decide equality themselves
    from unittest import mock
    for lhs, rhs in ((a, b), (a, ()), ((), a), (c, tuple(c)), (a, c)):
        with pytest.raises(TypeError):
            lhs < rhs
    with pytest.raises(TypeError):
        sorted([c, ()])
    assert a == mock.ANY and c == mock.ANY and a != object()
