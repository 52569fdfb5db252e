"""The memory-traffic model (benchmarks/traffic.py): the minimum-traffic calculator on C, F,
strided, negative-stride and broadcast arrays, and the SIMT layer's traffic counters on
hand-written kernels whose traffic is known exactly."""
import importlib.util
import itertools
import math
import pathlib
import sys

import numpy as np
import pytest

_BENCH = pathlib.Path(__file__).resolve().parent.parent / "benchmarks"


def _load(name):
    full = f"cupyops_bench_{name}"
    if full in sys.modules:
        return sys.modules[full]
    spec = importlib.util.spec_from_file_location(full, _BENCH / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[full] = mod
    spec.loader.exec_module(mod)
    return mod


traffic = _load("traffic")


def aligned(shape, dtype, align=256, offset=0):
    """A C-contiguous array whose element 0 sits ``offset`` bytes past an ``align`` boundary."""
    dtype = np.dtype(dtype)
    nbytes = math.prod(shape) * dtype.itemsize
    raw = np.zeros(nbytes + align + offset, np.uint8)
    off = (-raw.__array_interface__["data"][0]) % align + offset
    return raw[off:off + nbytes].view(dtype).reshape(shape)


def brute_sectors(arrays, sector=32):
    """Every element's bytes, enumerated."""
    seen = set()
    for a in arrays:
        addr, shape, strides, itemsize = traffic.array_geometry(a)
        for idx in itertools.product(*(range(n) for n in shape)):
            off = addr + sum(i * s for i, s in zip(idx, strides))
            seen.update(range(off // sector, (off + itemsize - 1) // sector + 1))
    return len(seen)


# --------------------------------------------------------------------------------------------
# minimum-traffic calculator
# --------------------------------------------------------------------------------------------

class TestDistinctSectors:
    def test_c_contiguous(self):
        a = aligned((8, 16), np.float32)              # 512 bytes, aligned
        assert traffic.distinct_sectors(a) == 16

    def test_fortran_order(self):
        a = np.asfortranarray(aligned((16, 8), np.float32))
        assert a.flags.f_contiguous and not a.flags.c_contiguous
        assert traffic.distinct_sectors(a) == math.ceil(a.nbytes / 32) + \
            (a.__array_interface__["data"][0] % 32 != 0)
        geom = (0, (16, 8), (4, 64), 4)                # F order at address 0, exactly
        assert traffic.distinct_sectors(geom) == 16

    def test_unaligned_start_straddles(self):
        assert traffic.distinct_sectors((4, (8,), (4,), 4)) == 2    # bytes 4..35
        assert traffic.distinct_sectors((0, (8,), (4,), 4)) == 1    # bytes 0..31
        a = aligned((32,), np.float32, offset=4)
        assert traffic.distinct_sectors(a) == 5                     # 128 bytes over 5 sectors

    def test_strided(self):
        base = aligned((256,), np.float32)
        assert traffic.distinct_sectors(base[::2]) == 32     # every sector still holds elements
        assert traffic.distinct_sectors(base[::8]) == 32     # one element per sector
        assert traffic.distinct_sectors(base[::16]) == 16    # every other sector
        m = aligned((100, 100), np.float64)
        assert traffic.distinct_sectors(m[:, 0]) == 100      # a column: 800-byte stride
        assert traffic.distinct_sectors(m[:, :4]) == 100     # 32 bytes per row, aligned rows
        assert traffic.distinct_sectors(m[:, 2:6]) == 200    # 32 bytes per row, straddling

    def test_negative_strides(self):
        a = aligned((64, 8), np.float32)
        assert traffic.distinct_sectors(a[::-1]) == traffic.distinct_sectors(a) == 64
        assert traffic.distinct_sectors(a[::-1, ::-2]) == 64
        assert traffic.distinct_sectors(a[::-1, 0]) == 64

    def test_broadcast(self):
        one = aligned((1,), np.float32)
        assert traffic.distinct_sectors(np.broadcast_to(one, (1000, 1000))) == 1
        row = aligned((16,), np.float32)
        assert traffic.distinct_sectors(np.broadcast_to(row, (1000, 16))) == 2
        col = aligned((64, 1), np.float64)
        assert traffic.distinct_sectors(np.broadcast_to(col, (64, 100))) == 16

    def test_transposed_and_sliced_views(self):
        a = aligned((32, 64), np.float32)
        assert traffic.distinct_sectors(a.T) == 256
        assert traffic.distinct_sectors(a[:, :32].T) == 128

    def test_empty_and_zero_d(self):
        assert traffic.distinct_sectors(np.zeros((0, 5), np.float32)) == 0
        z = aligned((1,), np.int64).reshape(())
        assert traffic.distinct_sectors(z) == 1

    def test_union_of_views(self):
        a = aligned((256,), np.float32)
        assert traffic.distinct_sectors([a, a]) == 32
        assert traffic.distinct_sectors([a[::2], a[1::2]]) == 32
        assert traffic.distinct_sectors([a[:8], a[8:16]]) == 2
        assert traffic.distinct_sectors([a[:4], a[4:8]]) == 1     # share one sector

    def test_min_sectors_counts_reads_and_writes(self):
        x = aligned((64, 64), np.float32)
        y = aligned((64,), np.int64)
        assert traffic.min_sectors([x], [y]) == 512 + 16
        assert traffic.min_sectors(x, y) == 528

    def test_against_brute_force(self):
        rng = np.random.default_rng(1)
        for _ in range(200):
            itemsize = int(rng.choice([1, 2, 4, 8]))
            nd = int(rng.integers(1, 4))
            shape = tuple(int(v) for v in rng.integers(0, 6, nd))
            strides = tuple(int(rng.integers(-3, 4)) * itemsize * int(rng.choice([1, 1, 3, 9]))
                            for _ in range(nd))
            addr = 1024 + int(rng.integers(0, 64))
            geom = (addr, shape, strides, itemsize)
            assert traffic.distinct_sectors(geom) == brute_sectors([geom]), geom

    def test_numpy_and_tuple_geometry_agree(self):
        a = aligned((10, 12), np.float16)[1:, ::3]
        addr, shape, strides, itemsize = traffic.array_geometry(a)
        assert (shape, strides, itemsize) == ((9, 4), (24, 6), 2)
        assert traffic.distinct_sectors(a) == traffic.distinct_sectors((addr, shape, strides, itemsize)) \
            == brute_sectors([a])


class TestModel:
    def test_model_seconds(self):
        # 3e12 B/s: 93.75e9 sectors of 32 bytes take one second; plus 3 us per launch
        assert traffic.model_seconds(0, 1) == pytest.approx(3e-6)
        assert traffic.model_seconds(93_750_000, 0) == pytest.approx(1e-3)
        assert traffic.model_seconds(93_750_000, 2) == pytest.approx(1e-3 + 6e-6)

    def test_traffic_fields_from_counters(self):
        x = aligned((1024,), np.float32)
        y = aligned((1024,), np.float32)
        launches = [{"kernel": "copy", "grid": (8, 1, 1), "block": (128, 1, 1),
                     "requested_bytes_load": 4096, "requested_bytes_store": 4096,
                     "sectors": 256, "unique_sectors": 256}]
        f = traffic.traffic_fields(launches, [x], [y], op="argmax", case="last")
        assert f["min_sectors"] == 256
        assert f["sectors_ratio"] == 1.0
        assert f["coalescing"] == 1.0
        assert f["launches"] == 1
        assert f["goal"] == 1.05 and f["goal_met"] is True
        assert f["model_seconds"] == pytest.approx(256 * 32 / 3e12 + 3e-6)
        assert f["model_min_seconds"] == pytest.approx(256 * 32 / 3e12 + 3e-6)

    def test_counter_field_variants(self):
        # split load / store counters, as attributes
        class L:
            name = "k"
            requested_bytes_load = 100
            requested_bytes_store = 28
            sectors_load = 5
            sectors_store = 2
            unique_sectors_load = 4
            unique_sectors_store = 2
        s = traffic.summarize_launches([L(), L()])
        per = s.pop("per_launch")
        assert len(per) == 2 and per[0]["sectors_load"] == 5 and per[0]["kernel"] == "k"
        assert s == {"launches": 2, "kernels": ["k", "k"], "requested_bytes_load": 200,
                     "requested_bytes_store": 56, "requested_bytes": 256, "sectors": 14,
                     "sectors_load": 10, "sectors_store": 4, "unique_sectors": 12}

    def test_goals(self):
        assert traffic.goal_for("argmin", "middle tie=last") == 1.05
        assert traffic.goal_for("hardmax", "last tie=first") == 1.05
        assert traffic.goal_for("nonzero_coordinates", "d=0.5 size=n") == 1.15
        assert traffic.goal_for("nonzero_coordinates", "d=0.1 size=n") is None
        assert traffic.goal_for("argwhere", "d=0.1") == 1.35
        assert traffic.goal_for("count_nonzero", "d=0.1") is None
        for op in ("segment_argmax", "segment_argmin", "segment_max_and_argmax",
                   "segment_min_and_argmin"):
            assert traffic.goal_for(op, "power-law R=1") == 1.05


# --------------------------------------------------------------------------------------------
# the SIMT layer's counters on hand-written kernels
# --------------------------------------------------------------------------------------------

def _simt():
    try:
        import cupyops.simt as simt
    except Exception as exc:  # pragma: no cover - depends on the checkout
        pytest.skip(f"cupyops.simt not importable: {exc}")
    if not hasattr(simt, "record_traffic") or not hasattr(simt, "RawModule"):
        pytest.skip("cupyops.simt.record_traffic / RawModule not in this checkout yet")
    from cupyops.core.devices import simt_status
    ok, why = simt_status()
    if not ok:
        pytest.skip(why)
    return simt


KERNELS = r"""
extern "C" __global__ void copy(const float *x, float *y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i];
}
extern "C" __global__ void copy_stride2(const float *x, float *y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[2 * i];
}
extern "C" __global__ void broadcast_read(const float *x, float *y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[0];
}
extern "C" __global__ void sum_two(const float *x, float *y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float acc = 0.0f;
    for (int k = 0; k < 2; ++k) acc += x[i + k * n];   // one site, two occurrences per thread
    if (i < n) y[i] = acc;
}
"""

N = 1024
BLOCK = 128


@pytest.fixture(scope="module")
def kernels():
    simt = _simt()
    mod = simt.RawModule(code=KERNELS)
    return simt, {name: mod.get_function(name)
                  for name in ("copy", "copy_stride2", "broadcast_read", "sum_two")}


def _run(simt, fn, x, y, n=N):
    with simt.record_traffic() as rec:
        fn((n // BLOCK,), (BLOCK,), (x, y, np.int32(n)))
    launches = list(rec.launches)
    assert len(launches) == 1
    return traffic.launch_counters(launches[0]), launches


def test_coalesced_copy(kernels):
    simt, k = kernels
    x = aligned((N,), np.float32)
    x[:] = np.arange(N)
    y = aligned((N,), np.float32)
    c, launches = _run(simt, k["copy"], x, y)
    assert np.array_equal(y, x)
    assert c["requested_bytes_load"] == 4 * N and c["requested_bytes_store"] == 4 * N
    warps = N // 32
    assert c["sectors"] == warps * 4 + warps * 4          # 128 bytes per warp: 4 sectors each way
    assert c["sectors_load"] == warps * 4 and c["sectors_store"] == warps * 4
    assert c["unique_sectors"] == 2 * N * 4 // 32
    f = traffic.traffic_fields(launches, [x], [y])
    assert f["sectors_ratio"] == 1.0 and f["coalescing"] == 1.0


def test_misaligned_copy(kernels):
    simt, k = kernels
    x = aligned((N,), np.float32, offset=4)               # each warp's 128 bytes span 5 sectors
    y = aligned((N,), np.float32)
    c, launches = _run(simt, k["copy"], x, y)
    warps = N // 32
    assert c["sectors"] == warps * 5 + warps * 4
    assert c["unique_sectors"] == (N * 4 // 32 + 1) + N * 4 // 32
    f = traffic.traffic_fields(launches, [x], [y])
    assert f["min_sectors"] == (N * 4 // 32 + 1) + N * 4 // 32
    assert f["sectors_ratio"] == pytest.approx((warps * 9) / f["min_sectors"])


def test_stride2_copy(kernels):
    simt, k = kernels
    x = aligned((2 * N,), np.float32)
    x[:] = np.arange(2 * N)
    y = aligned((N,), np.float32)
    c, launches = _run(simt, k["copy_stride2"], x, y)
    assert np.array_equal(y, x[::2])
    warps = N // 32
    assert c["requested_bytes_load"] == 4 * N
    assert c["sectors"] == warps * 8 + warps * 4          # a warp's loads span 256 bytes
    assert c["sectors_load"] == warps * 8 and c["sectors_store"] == warps * 4
    assert c["unique_sectors"] == 2 * N * 4 // 32 + N * 4 // 32
    f = traffic.traffic_fields(launches, [x[::2]], [y])
    assert f["min_sectors"] == 2 * N * 4 // 32 + N * 4 // 32    # x[::2] still touches every sector
    assert f["coalescing"] == pytest.approx(8 * N / (warps * 12 * 32))


def test_broadcast_read(kernels):
    simt, k = kernels
    x = aligned((8,), np.float32)
    x[0] = 7.0
    y = aligned((N,), np.float32)
    c, launches = _run(simt, k["broadcast_read"], x, y)
    assert np.all(y == 7.0)
    warps = N // 32
    assert c["requested_bytes_load"] == 4 * N              # every lane asks for 4 bytes
    assert c["sectors"] == warps * 1 + warps * 4           # one sector per warp-wide load
    assert c["sectors_load"] == warps
    assert c["unique_sectors"] == 1 + N * 4 // 32
    f = traffic.traffic_fields(launches, [np.broadcast_to(x[:1], (N,))], [y])
    assert f["min_sectors"] == 1 + N * 4 // 32


def test_occurrences_of_one_site_count_separately(kernels):
    simt, k = kernels
    x = aligned((2 * N,), np.float32)
    x[:] = 1.0
    y = aligned((N,), np.float32)
    c, _ = _run(simt, k["sum_two"], x, y)
    assert np.all(y == 2.0)
    warps = N // 32
    assert c["sectors"] == 2 * warps * 4 + warps * 4
    assert c["requested_bytes_load"] == 8 * N


@pytest.mark.parametrize("rows", [1, 8])
def test_decode_shapes_modelled_time(rows):
    """argmax over the last axis of (1, 131072) and (8, 131072) float32 (decode shapes): one
    launch, modelled H100 time within 1.3x of the minimum traffic plus one launch."""
    simt = _simt()
    from cupyops.ops.argreduce import launch as G
    from cupyops.core import trace as _trace
    from cupyops.core.backend import get_backend
    x = aligned((rows, 131072), np.float32)
    x[...] = np.random.default_rng(rows).integers(0, 4, x.shape)
    with simt.record_traffic() as rec, _trace.recording() as t:
        r = G.argreduce(get_backend("simt"), x, (1,), kind="max", tie="first",
                        index_dtype=np.dtype(np.int64))
    np.testing.assert_array_equal(r, np.argmax(x, axis=1))
    assert t.plans[0].case == "decode"
    f = traffic.traffic_fields(list(rec.launches), [x], [r], op="argmax", case="decode")
    assert f["launches"] == 1 and f["per_launch"][0]["grid"][1] >= 2
    assert f["model_seconds"] <= 1.3 * f["model_min_seconds"], f


# --------------------------------------------------------------------------------------------
# the argreduce / hardmax goal: <= 1.05x the minimum in every layout (issue 15)
# --------------------------------------------------------------------------------------------

#: the benchmark's layouts at its "quick" size: (op, layout, shape, axis)
GOAL_LAYOUTS = [("argmax", "first", (1024, 1024), 0), ("argmax", "last", (1024, 1024), 1),
                ("argmax", "middle", (16, 64, 64, 16), (1, 2)),
                ("argmax", "all", (1024, 1024), None), ("argmin", "first", (1024, 1024), 0),
                ("hardmax", "first", (1024, 1024), 0), ("hardmax", "last", (1024, 1024), 1),
                ("hardmax", "middle", (64, 256, 64), 1),
                # the benchmark's small and tiny sizes: one column launch, whose indices are
                # stored one group a lane (4 groups a thread for 1-byte values)
                ("argmax", "first-small", (256, 1024), 0), ("argmax", "first-tiny", (32, 128), 0)]
GOAL_DTYPES = ["int8", "bool", "uint8", "int16", "uint16", "float16", "float32", "float64",
               "complex64", "complex128"]


@pytest.mark.parametrize("dtype", GOAL_DTYPES)
@pytest.mark.parametrize("op, layout, shape, axis", GOAL_LAYOUTS,
                         ids=[f"{o}-{l}" for o, l, _, _ in GOAL_LAYOUTS])
def test_argreduce_traffic_goal(op, layout, shape, axis, dtype):
    """Sectors touched by every launch of the call (partials, tickets and flags included)
    within 1.05x of the distinct sectors of the input and the output. First-axis argmax of a
    matrix splits its groups: its compact partials (1-byte relative index, key at the value's
    width) stored and loaded coalesced keep it there (16-byte partials cost 1.31x for int8)."""
    simt = _simt()
    import cupyops
    from cupyops.core import trace as _trace
    from cupyops.bench import bench
    dt = np.dtype(dtype)
    x = aligned(shape, dt)
    x[...] = bench._values(np.random.default_rng(15), dt, shape)
    f = getattr(cupyops, op)
    with bench.cupy_like_simt_allocations(), simt.record_traffic() as rec, \
            _trace.recording() as t:
        r = f(x, axis=axis, device="simt")
    np.testing.assert_array_equal(r, f(x, axis=axis, device="cpu"))
    plan = t.plans[0]
    if op != "hardmax" and layout == "first" and dt.itemsize <= 4:
        assert plan.case == "split" and len(rec.launches) == 2
        assert plan.key_itemsize == dt.itemsize and plan.pidx_itemsize == 1
    elif op != "hardmax" and layout == "first":
        # 8- and 16-byte values: blocks of 4 or 2 columns (a sector a row) fill the SMs unsplit
        assert plan.case == "column" and len(rec.launches) == 1
    fl = traffic.traffic_fields(list(rec.launches), [x], [r], op=op, case=layout)
    assert fl["goal"] == 1.05
    assert fl["sectors_ratio"] <= 1.05, (fl["sectors_ratio"], plan)
