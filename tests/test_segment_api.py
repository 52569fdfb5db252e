"""segment_argmax / segment_argmin and their values forms (issue 35) through the public API on
every device, against the brute-force reference (each segment's argmax over axis 0 by
tests/ref_argreduce.py): empty segments, S = 0, lengths 1/31/32/33/1023/1025, one segment
spanning everything, skewed lengths, NaN, ties, signed zeros, every input and offsets dtype,
offsets that are views, relative indices, empty_index, out=, the offsets' checks, DLPack and
Dask inputs."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import cupyops
from ref_argreduce import ref_argreduce
from strategies import COMPLEX_DTYPES, DATETIME_DTYPES, REAL_DTYPES, arrays
from _devices import KERNEL_DEVICES, is_cupy, ops

DEVICES = ["cpu"] + KERNEL_DEVICES
ALL_DTYPES = REAL_DTYPES + COMPLEX_DTYPES + DATETIME_DTYPES
FEW_DTYPES = ["float32", "int8", "complex128"]
OFFSET_DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
NAMES = {("max", False): "segment_argmax", ("min", False): "segment_argmin",
         ("max", True): "segment_max_and_argmax", ("min", True): "segment_min_and_argmin"}


def bits(a):
    a = np.ascontiguousarray(a)
    size = a.dtype.itemsize // 2 if a.dtype.kind == "c" else a.dtype.itemsize
    return a.view(np.dtype(f"u{size}"))


def reference(x, offsets, kind, tie, relative=False, empty_index=-1):
    """(rows along axis 0 or -1, indices as the call returns them) per segment."""
    o = [int(v) for v in offsets]
    rest = x.shape[1:]
    rows = np.full((len(o) - 1,) + rest, -1, np.int64)
    for s in range(len(o) - 1):
        a, b = o[s], o[s + 1]
        if b > a:
            rows[s] = a + ref_argreduce(x[a:b], (0,), kind, tie)
    start = np.array(o[:-1], np.int64).reshape((-1,) + (1,) * len(rest))
    idx = np.where(rows < 0, empty_index, rows - start if relative else rows)
    return rows, idx


def winners(x, rows):
    """x's elements at ``rows`` (per trailing position), -1 rows left as zeros."""
    out = np.zeros(rows.shape, x.dtype)
    for pos in np.ndindex(*rows.shape):
        if rows[pos] >= 0:
            out[pos] = x[(int(rows[pos]),) + pos[1:]]
    return out


@st.composite
def offsets_for(draw, n):
    cuts = draw(st.lists(st.integers(0, n), min_size=0, max_size=6))
    lo = draw(st.integers(0, n))
    hi = draw(st.integers(lo, n))
    inner = sorted(c for c in cuts if lo <= c <= hi)
    return np.array([lo] + inner + [hi], draw(st.sampled_from(OFFSET_DTYPES)))


def _cases(dtypes):
    return given(x=arrays(dtypes, min_dims=1, max_dims=3, max_side=6), data=st.data(),
                 kind=st.sampled_from(["max", "min"]), tie=st.sampled_from(["first", "last"]),
                 relative=st.booleans(), values=st.booleans(),
                 index_dtype=st.sampled_from([None, "int32", "int16"]))


@_cases(ALL_DTYPES)
def test_segments_match_the_reference(x, data, kind, tie, relative, values, index_dtype):
    """The NumPy path, every dtype."""
    _match(["cpu"], x, data, kind, tie, relative, values, index_dtype)


@_cases(FEW_DTYPES)
def test_kernels_match_the_reference(x, data, kind, tie, relative, values, index_dtype):
    """Every device, a few dtypes (each dtype is a kernel compile on simt)."""
    _match(DEVICES, x, data, kind, tie, relative, values, index_dtype)


@pytest.mark.slow
@_cases(ALL_DTYPES)
def test_kernels_match_the_reference_every_dtype(x, data, kind, tie, relative, values,
                                                 index_dtype):
    _match(DEVICES, x, data, kind, tie, relative, values, index_dtype)


def _match(devices, x, data, kind, tie, relative, values, index_dtype):
    o = data.draw(offsets_for(x.shape[0]))
    if o.dtype.kind == "u" and o.dtype.itemsize == 1 and x.shape[0] > 255:
        return
    before = x.copy()
    rows, idx = reference(x, o, kind, tie, relative)
    for device in devices:
        fn = getattr(ops(device), NAMES[kind, values])
        res = fn(x, o, tie=tie, relative=relative, dtype=index_dtype)
        got = res[1] if values else res
        assert got.dtype == np.dtype(index_dtype or "int64") and got.shape == idx.shape
        assert np.array_equal(got, idx), (device, got, idx, o)
        if values:
            vals = res[0]
            assert vals.dtype == x.dtype and vals.shape == idx.shape
            full = rows >= 0
            assert np.array_equal(bits(vals[full]), bits(winners(x, rows)[full])), device
    assert np.array_equal(bits(x), bits(before))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("lengths", [(1, 31, 32, 33, 1023, 1025), (0, 0, 5, 0), (2112,),
                                     (1,) * 300 + (1500,) + (1,) * 200, ()])
def test_segment_lengths(device, lengths):
    rng = np.random.default_rng(len(lengths))
    n = sum(lengths)
    x = rng.integers(-3, 4, (n, 3)).astype(np.float32)
    x[rng.random(x.shape) < 0.02] = np.nan
    x[rng.random(x.shape) < 0.05] = -0.0
    o = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    for kind in ("max", "min"):
        for tie in ("first", "last"):
            rows, idx = reference(x, o, kind, tie)
            v, got = getattr(ops(device), NAMES[kind, True])(x, o, tie=tie)
            assert np.array_equal(got, idx), (device, kind, tie)
            full = rows >= 0
            assert np.array_equal(bits(v[full]), bits(winners(x, rows)[full]))


@pytest.mark.parametrize("device", DEVICES)
def test_empty_segments_and_s0(device):
    f = ops(device)
    x = np.arange(12, dtype=np.int32).reshape(4, 3)
    r = f.segment_argmax(x, np.array([2]))
    assert r.shape == (0, 3) and r.dtype == np.int64
    r = f.segment_argmax(x, np.array([1, 1, 1]))
    assert r.shape == (2, 3) and (r == -1).all()
    r = f.segment_argmax(x, np.array([0, 0, 4]), dtype=np.uint8, empty_index=200)
    assert r.tolist() == [[200] * 3, [3] * 3]
    v, i = f.segment_min_and_argmin(x, np.array([0, 0, 4]))
    assert v[0].tolist() == [np.iinfo(np.int32).max] * 3 and i[0].tolist() == [-1] * 3
    v, i = f.segment_max_and_argmax(x.astype(np.float64), np.array([3, 3]))
    assert np.isneginf(v).all() and (i == -1).all()
    r = f.segment_argmin(np.zeros((0, 2)), np.array([0, 0]))
    assert r.shape == (1, 2) and (r == -1).all()


@pytest.mark.parametrize("device", DEVICES)
def test_offsets_forms(device):
    f = ops(device)
    x = np.array([5, 1, 9, 9, 2, 7], np.int16)
    want = [2, 5]
    for dt in OFFSET_DTYPES:
        assert f.segment_argmax(x, np.array([0, 4, 6], dt)).tolist() == [2, 5]
    big = np.array([0, 99, 4, 99, 6, 99], np.int64)[::2]          # a strided view
    assert f.segment_argmax(x, big).tolist() == want
    assert f.segment_argmax(x, np.array([6, 4, 0])[::-1]).tolist() == want   # negative stride
    assert f.segment_argmax(x, [0, 4, 6], tie="last", relative=True).tolist() == [3, 1]


def test_offsets_errors_name_offsets_and_the_position():
    x = np.arange(10.0)
    cases = [([0, 3, 2, 5], ValueError, r"position 2"), ([-1, 2], ValueError, r"offsets\[0\]"),
             ([0, 4, 11], ValueError, r"offsets\[2\] is 11, past the end"),
             (np.zeros((2, 2), int), ValueError, "1-D"), ([0.0, 1.0], TypeError, "integers"),
             (np.array([], np.int64), ValueError, "at least one"),
             ("abc", TypeError, "offsets")]
    for offsets, err, msg in cases:
        with pytest.raises(err, match=msg) as info:
            cupyops.segment_argmax(x, offsets)
        assert "offsets" in str(info.value)


def test_argument_errors():
    x = np.arange(10.0)
    o = np.array([0, 5, 10])
    with pytest.raises(ValueError, match="empty_index must be given"):
        cupyops.segment_argmax(x, o, dtype=np.uint32)
    with pytest.raises(ValueError, match="does not fit"):
        cupyops.segment_argmax(x, o, dtype=np.int8, empty_index=300)
    with pytest.raises(ValueError, match="0-d"):
        cupyops.segment_argmax(np.float32(1), o)
    with pytest.raises(ValueError, match="tie must be"):
        cupyops.segment_argmin(x, o, tie="middle")
    with pytest.raises(ValueError, match="too large for index dtype"):
        cupyops.segment_argmax(np.zeros(300), [0, 300], dtype=np.int8)
    with pytest.raises(TypeError, match="relative must be a bool"):
        cupyops.segment_argmax(x, o, relative=1)
    with pytest.raises(ValueError, match="out has shape"):
        cupyops.segment_argmax(x, o, out=np.zeros(3, np.int64))
    with pytest.raises(TypeError, match="out must be a pair"):
        cupyops.segment_max_and_argmax(x, o, out=np.zeros(2, np.int64))


@pytest.mark.parametrize("device", DEVICES)
def test_out(device):
    f = ops(device)
    x = np.array([[1, 8], [9, 0], [4, 4]], np.int64)
    o = np.array([0, 2, 3])
    out = np.zeros((2, 2), np.int32)
    res = f.segment_argmax(x, o, out=out)
    assert out.tolist() == [[1, 0], [2, 2]]
    if not is_cupy(device):
        assert res is out
    vo, io = np.zeros((2, 2), np.int64), np.zeros((2, 2), np.int64)
    f.segment_min_and_argmin(x, o, out=(vo, io), relative=True)
    assert vo.tolist() == [[1, 0], [4, 4]] and io.tolist() == [[0, 1], [0, 0]]


def test_torch_tensors_in_and_out():
    torch = pytest.importorskip("torch")
    t = torch.tensor([3.0, 1.0, 4.0, 1.0, 5.0])
    r = cupyops.segment_argmax(t, np.array([0, 2, 5]))
    assert isinstance(r, torch.Tensor) and r.tolist() == [0, 4]


def test_cached_calls_check_the_offsets_every_time():
    x = np.arange(8.0)
    for _ in range(3):
        assert cupyops.segment_argmax(x, np.array([0, 4, 8])).tolist() == [3, 7]
    with pytest.raises(ValueError, match="decrease"):
        cupyops.segment_argmax(x, np.array([0, 5, 4]))


@pytest.mark.parametrize("chunks", [2, 3, 7])
def test_dask_crosses_chunks(chunks):
    da = pytest.importorskip("dask.array")
    rng = np.random.default_rng(chunks)
    x = rng.integers(-2, 3, (15, 4)).astype(np.float32)
    x[rng.random(x.shape) < 0.1] = np.nan
    o = np.array([0, 0, 1, 7, 7, 14, 15])
    dx = da.from_array(x, chunks=(chunks, 3))
    for (kind, values), name in NAMES.items():
        for tie in ("first", "last"):
            res = getattr(cupyops, name)(dx, o, tie=tie, relative=True)
            want = getattr(cupyops, name)(x, o, tie=tie, relative=True)
            if values:
                assert all(isinstance(r, da.Array) for r in res)
                v, i = da.compute(*res, scheduler="threads")
                assert np.array_equal(i, want[1]) and np.array_equal(bits(v), bits(want[0]))
            else:
                assert isinstance(res, da.Array)
                assert np.array_equal(res.compute(scheduler="threads"), want)
    graph = cupyops.segment_argmax(dx, o).__dask_graph__()
    assert len(graph) <= 4 * dx.npartitions + len(dx.__dask_graph__())   # O(chunks)


def test_dask_needs_known_chunks_and_host_offsets():
    da = pytest.importorskip("dask.array")
    x = da.from_array(np.arange(10.0), chunks=5)
    unknown = x[x > -1]
    with pytest.raises(ValueError, match="unknown size"):
        cupyops.segment_argmax(unknown, [0, 3])
    with pytest.raises(TypeError, match="offsets must be known on the host"):
        cupyops.segment_argmax(x, da.from_array(np.array([0, 10])))


@pytest.mark.parametrize("dist", ["short", "long", "power-law", "huge+tiny"])
def test_the_benchmark_compositions_agree_with_the_numpy_path(dist):
    """The benchmark's peers (ufunc.reduceat, and PyTorch's segment_reduce / scatter_reduce,
    each independent of the library) give the NumPy path's indices on its length distributions, ties and NaN
    included (tie first, their rule); values where the segment is not empty."""
    from cupyops.ops.segment import bench as B
    rng = np.random.default_rng(4)
    x = (rng.integers(0, 5, (6000, 2)) - 2).astype(np.float32)
    x[rng.random(x.shape) < 0.01] = np.nan
    offsets = np.concatenate([[0], np.cumsum(B.lengths_for(dist, len(x), rng))])
    for kind, f in (("max", cupyops.segment_max_and_argmax),
                    ("min", cupyops.segment_min_and_argmin)):
        vals, idx = f(x, offsets, device="cpu")
        rv, ri = B.reduceat_composition(np, x, offsets, kind, True)
        assert np.array_equal(ri, idx), kind
        full = idx >= 0
        assert np.array_equal(rv[full], vals[full], equal_nan=True)
    torch = pytest.importorskip("torch")

    class Case:
        case, shape, params = f"{dist} R=2", x.shape, {"dist": dist}
    o = B.offsets_for_case(Case)
    got = B._torch("max", False, torch, Case)(torch.from_numpy(x))
    want = cupyops.segment_argmax(x, o, device="cpu")
    assert np.array_equal(got.numpy(), want)
    # the values forms: floats through torch.segment_reduce, integers through scatter_reduce
    for y in (x, np.nan_to_num(x).astype(np.int32)):
        for kind, f in (("max", cupyops.segment_max_and_argmax),
                        ("min", cupyops.segment_min_and_argmin)):
            gv, gi = B._torch(kind, True, torch, Case)(torch.from_numpy(y))
            wv, wi = f(y, o, device="cpu")
            assert np.array_equal(gi.numpy(), wi), (kind, y.dtype)
            full = wi >= 0
            assert np.array_equal(gv.numpy()[full], wv[full], equal_nan=True), (kind, y.dtype)


class _NoHostRead(np.ndarray):
    """Offsets as a GPU array is to the host: an element stays an array (``int()`` of it
    would be a synchronisation on a GPU, refused here)."""

    def __getitem__(self, key):
        return np.asarray(np.ndarray.__getitem__(self, key)).view(_NoHostRead)

    def __int__(self):
        raise AssertionError("the peer read an offset on the host (a sync on a GPU)")

    __index__ = __int__


@pytest.mark.parametrize("dist", ["short", "power-law", "huge+tiny"])
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_the_cupy_scatter_composition_agrees_with_the_numpy_path(dist, dtype):
    """CuPy's benchmark peer (CuPy 14.2 has no maximum.reduceat): segment ids by searchsorted,
    scatters, run here with NumPy's ufunc.at in cupyx's place; ties (tie first), empty
    segments, a trailing axis; no NaN (the scatters do not order it)."""
    from cupyops.ops.segment import bench as B
    rng = np.random.default_rng(5)
    x = (rng.integers(0, 5, (3000, 3)) - 2).astype(dtype)
    offsets = np.concatenate([[0], np.cumsum(B.lengths_for(dist, len(x), rng))])
    assert (np.diff(offsets) == 0).any() or dist != "huge+tiny"
    # and offsets that leave rows out at both ends (the peer reads no offset on the host)
    inner = offsets[(offsets > 7) & (offsets < len(x) - 9)]
    for o in (offsets, np.concatenate([[7], inner, [len(x) - 9]])):
        for kind, f in (("max", cupyops.segment_max_and_argmax),
                        ("min", cupyops.segment_min_and_argmin)):
            vals, idx = f(x, o, device="cpu")
            gv, gi = B.scatter_composition(np, x, o.view(_NoHostRead), kind, True,
                                           np.maximum.at, np.minimum.at)
            assert np.array_equal(gi, idx), kind
            assert np.array_equal(gv[idx >= 0], vals[idx >= 0]), kind
