"""max_and_argmax / min_and_argmin (issue 34, item 5) through the public API on every device:
``indices`` is exactly argmax's, ``values`` is the element at that index bit for bit (NaN
payloads, the sign of zero), every axis form, tie, index dtype, input dtype and layout, out=
pairs, DLPack and Dask inputs."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import cupyops
from ref_argreduce import ref_argreduce
from strategies import COMPLEX_DTYPES, DATETIME_DTYPES, REAL_DTYPES, arrays, axis_args
from _devices import KERNEL_DEVICES, is_cupy, ops

DEVICES = ["cpu"] + KERNEL_DEVICES
ALL_DTYPES = REAL_DTYPES + COMPLEX_DTYPES + DATETIME_DTYPES
FUNCS = {"max": "max_and_argmax", "min": "min_and_argmin"}


def _normalize(axis, ndim):
    if axis is None:
        return tuple(range(ndim))
    axis = axis if isinstance(axis, tuple) else (axis,)
    return tuple(sorted(a % ndim for a in axis))


def bits(a):
    """Elements as unsigned integers of their bits (complex: two halves)."""
    a = np.ascontiguousarray(a)
    size = a.dtype.itemsize // 2 if a.dtype.kind == "c" else a.dtype.itemsize
    return a.view(np.dtype(f"u{size}"))


def element_at(x, axes, idx):
    """x's elements at row-major ``idx`` over ``axes``, read one by one with Python indexing."""
    kept = [i for i in range(x.ndim) if i not in axes]
    red = [x.shape[a] for a in axes]
    out = np.empty(idx.shape, x.dtype)
    for pos in np.ndindex(*idx.shape):
        coords = np.unravel_index(int(idx[pos]), red) if red else ()
        full = [0] * x.ndim
        for k, i in enumerate(kept):
            full[i] = pos[k]
        for k, a in enumerate(axes):
            full[a] = coords[k]
        out[pos] = x[tuple(full)]
    return out


def _split(res, device):
    """(values, indices) of a result; a named tuple on NumPy-input devices."""
    if not is_cupy(device):
        assert type(res).__name__ == "ValuesIndices" and res._fields == ("values", "indices")
    return res[0], res[1]


@given(x=arrays(ALL_DTYPES, max_dims=3), data=st.data(), kind=st.sampled_from(["max", "min"]),
       tie=st.sampled_from(["first", "last"]), keepdims=st.booleans(),
       index_dtype=st.sampled_from([None, "int32", "uint16", "int64"]))
def test_values_are_the_elements_at_argmax(x, data, kind, tie, keepdims, index_dtype):
    axis = data.draw(axis_args(x.ndim))
    axes = _normalize(axis, x.ndim)
    if any(x.shape[a] == 0 for a in axes):
        with pytest.raises(ValueError, match="empty sequence"):
            getattr(cupyops, FUNCS[kind])(x, axis=axis)
        return
    group = int(np.prod([x.shape[a] for a in axes]))
    if index_dtype and group - 1 > np.iinfo(index_dtype).max:
        return
    before = x.copy()
    idx = ref_argreduce(x, axes, kind, tie)
    want = element_at(x, axes, idx)
    shape = [1 if i in axes else n for i, n in enumerate(x.shape)] if keepdims else idx.shape
    for device in DEVICES:
        fn = getattr(ops(device), FUNCS[kind])
        vals, got = _split(fn(x, axis=axis, keepdims=keepdims, tie=tie, dtype=index_dtype),
                           device)
        assert got.dtype == np.dtype(index_dtype or "int64") and got.shape == tuple(shape)
        assert np.array_equal(got.reshape(idx.shape), idx), (device, got, idx)
        assert vals.dtype == x.dtype and vals.shape == tuple(shape), device
        assert np.array_equal(bits(vals.reshape(idx.shape)), bits(want)), (device, vals, want)
        arg = getattr(ops(device), "arg" + kind)(x, axis=axis, keepdims=keepdims, tie=tie,
                                                 dtype=index_dtype)
        assert np.array_equal(arg, got) and arg.dtype == got.dtype
    assert np.array_equal(bits(x), bits(before))


def _payloads(dtype):
    """Values of ``dtype`` with NaN payloads of both signs, quiet and signalling, and both
    zeros: as a 1-d array of distinct bit patterns."""
    dt = np.dtype(dtype)
    if dt.kind == "c":
        part = _payloads(np.dtype(f"f{dt.itemsize // 2}"))
        out = np.zeros(len(part) ** 2, dt)
        halves = out.view(part.dtype).reshape(-1, 2)     # set the bits of each part directly
        halves[:, 0] = np.repeat(part, len(part))
        halves[:, 1] = np.tile(part, len(part))
        return out
    size = dt.itemsize
    u = np.dtype(f"u{size}")
    sign = 1 << (8 * size - 1)
    exp_bits = {2: 5, 4: 8, 8: 11}[size]
    mant = 8 * size - 1 - exp_bits
    exp = ((1 << exp_bits) - 1) << mant
    quiet = 1 << (mant - 1)
    patterns = [exp | quiet | 5, sign | exp | quiet | 3, exp | 1, sign | exp | 7, 0, sign]
    return np.array(patterns, u).view(dt)


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "complex64", "complex128"])
@pytest.mark.parametrize("device", DEVICES)
def test_nan_payloads_and_signed_zeros_are_kept(dtype, device):
    p = _payloads(dtype)
    rng = np.random.default_rng(1)
    x = np.zeros((7, 37), dtype)
    for row in range(7):                 # row r: one special value among zeros and ones
        x[row] = rng.integers(0, 2, 37).astype(dtype) * 0
        x[row, rng.integers(0, 37)] = p[row % len(p)]
        x[row, rng.integers(0, 37)] = p[(row + 1) % len(p)]
    x[3] = p[4]                         # +0.0 everywhere but one -0.0: a tie of zeros
    x[3, 20] = p[5]
    for kind in ("max", "min"):
        for tie in ("first", "last"):
            idx = ref_argreduce(x, (1,), kind, tie)
            want = element_at(x, (1,), idx)
            vals, got = _split(getattr(ops(device), FUNCS[kind])(x, axis=1, tie=tie), device)
            assert np.array_equal(got, idx)
            assert np.array_equal(bits(vals), bits(want)), (kind, tie, bits(vals), bits(want))


def test_bfloat16_values_keep_their_bits():
    ml = pytest.importorskip("ml_dtypes")
    raw = np.array([0x7FC1, 0x8000, 0x0000, 0x3F80, 0xFFC3, 0x4000], np.uint16)
    x = raw.view(ml.bfloat16).reshape(2, 3)
    for device in DEVICES:
        if is_cupy(device):
            continue
        vals, idx = getattr(ops(device), "max_and_argmax")(x, axis=1)
        assert vals.dtype == x.dtype
        assert list(vals.view(np.uint16)) == [0x7FC1, 0xFFC3] and list(idx) == [0, 1]
        vals, idx = getattr(ops(device), "min_and_argmin")(x[:, 1:], axis=1, tie="last")
        assert list(vals.view(np.uint16)) == [0x0000, 0xFFC3], device


@pytest.mark.parametrize("device", DEVICES)
def test_out_pair_is_written_and_returned(device):
    x = np.array([[3, 9, 9, 1], [4, 4, 0, 2]], np.int16)
    vo, io = np.zeros(2, np.int16), np.zeros(2, np.uint8)
    res = ops(device).max_and_argmax(x, axis=1, tie="last", out=(vo, io))
    assert list(vo) == [9, 4] and list(io) == [2, 1]
    if not is_cupy(device):
        assert res.values is vo and res.indices is io
    vo, io = np.zeros((2, 1), np.int16), np.zeros((2, 1), np.int64)
    ops(device).min_and_argmin(x, axis=1, keepdims=True, out=(vo, io))
    assert vo.ravel().tolist() == [1, 0] and io.ravel().tolist() == [3, 2]


def test_out_errors_name_the_argument():
    x = np.arange(6.0).reshape(2, 3)
    with pytest.raises(TypeError, match="out must be a pair"):
        cupyops.max_and_argmax(x, axis=1, out=np.zeros(2))
    with pytest.raises(TypeError, match=r"out\[0\], values.*dtype"):
        cupyops.max_and_argmax(x, axis=1, out=(np.zeros(2, np.float32), np.zeros(2, np.int64)))
    with pytest.raises(ValueError, match="out has shape"):
        cupyops.max_and_argmax(x, axis=1, out=(np.zeros(3), np.zeros(2, np.int64)))
    buf = np.zeros(4, np.float64)
    with pytest.raises(ValueError, match="overlap"):
        cupyops.max_and_argmax(x, axis=1, out=(buf[:2], buf[:2].view(np.int64)))
    with pytest.raises(ValueError, match="overlaps the input"):
        cupyops.max_and_argmax(x, axis=1, out=(x[:, 0], np.zeros(2, np.int64)))


@pytest.mark.parametrize("device", DEVICES)
def test_edge_shapes(device):
    f = ops(device)
    x = np.array(5.0, np.float32)
    v, i = f.max_and_argmax(x)
    assert v.shape == () and float(v) == 5.0 and int(i) == 0
    y = np.arange(6, dtype=np.int32).reshape(2, 3)
    v, i = f.max_and_argmax(y, axis=())
    assert np.array_equal(v, y) and not i.any() and v is not y
    v, i = f.min_and_argmin(np.zeros((0, 3), np.float64), axis=1)
    assert v.shape == (0,) and i.shape == (0,)
    with pytest.raises(ValueError, match="empty sequence"):
        f.max_and_argmax(np.zeros((0, 3)), axis=0)
    v, i = f.max_and_argmax(np.arange(1025, dtype=np.float32)[::-1])
    assert v.shape == () and float(v) == 1024 and int(i) == 0


def test_cached_calls_give_fresh_pairs():
    x = np.random.default_rng(0).standard_normal((64, 100)).astype(np.float32)
    first = [cupyops.max_and_argmax(x, axis=1) for _ in range(3)]
    assert all(np.array_equal(a.values, first[0].values) for a in first)
    assert first[1].values is not first[2].values and first[1].indices is not first[2].indices


def test_torch_input_gives_torch_tensors():
    torch = pytest.importorskip("torch")
    t = torch.tensor([[1.0, 7.0, 7.0], [-0.0, 0.0, -1.0]])
    v, i = cupyops.max_and_argmax(t, axis=1, tie="last")
    assert isinstance(v, torch.Tensor) and isinstance(i, torch.Tensor)
    assert v.tolist() == [7.0, 0.0] and i.tolist() == [2, 1]
    tv, ti = torch.max(t, dim=1)
    assert torch.equal(tv, v)


@pytest.mark.parametrize("chunks", [(2, 3), (5, 7), (2, 7)])
def test_dask_gives_two_lazy_arrays(chunks):
    da = pytest.importorskip("dask.array")
    calls = []

    def spy(block):
        calls.append(1)
        return block
    rng = np.random.default_rng(3)
    x = rng.integers(-2, 3, (5, 7)).astype(np.float32)
    x[1, 2] = np.nan
    x[4, 0] = -0.0
    dx = da.from_array(x, chunks=chunks).map_blocks(spy, dtype=x.dtype,
                                                    meta=np.empty((0, 0), x.dtype))
    calls.clear()
    for kind in ("max", "min"):
        for axis in (None, 0, 1, (0, 1)):
            for tie in ("first", "last"):
                res = getattr(cupyops, FUNCS[kind])(dx, axis=axis, tie=tie)
                assert type(res).__name__ == "ValuesIndices"
                assert all(isinstance(r, da.Array) for r in res)
                assert not calls, "computed before .compute()"
                v, i = (np.asarray(r) for r in da.compute(*res, scheduler="threads"))
                calls.clear()
                wv, wi = getattr(cupyops, FUNCS[kind])(x, axis=axis, tie=tie)
                assert np.array_equal(i, wi) and np.array_equal(bits(v), bits(wv))


def test_dask_arguments_are_checked_when_the_graph_is_built():
    da = pytest.importorskip("dask.array")
    dx = da.zeros((4, 6), chunks=2)
    with pytest.raises(TypeError, match="out= cannot be used"):
        cupyops.max_and_argmax(dx, out=(None, None))
    with pytest.raises(ValueError, match="tie must be"):
        cupyops.min_and_argmin(dx, tie="middle")
    with pytest.raises(TypeError, match="dtype must be"):
        cupyops.max_and_argmax(dx, dtype=np.float32)
