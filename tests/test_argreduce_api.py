"""argmax / argmin / hardmax through the public API, against the brute-force reference, on
every device: axis forms, keepdims, tie, index dtype, out=, and the input left untouched."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import cupyops
from ref_argreduce import ref_argreduce, ref_hardmax
from strategies import COMPLEX_DTYPES, DATETIME_DTYPES, REAL_DTYPES, arrays, axis_args
from _devices import KERNEL_DEVICES, ops

DEVICES = ["cpu"] + KERNEL_DEVICES


def _normalize(axis, ndim):
    if axis is None:
        return tuple(range(ndim))
    axis = axis if isinstance(axis, tuple) else (axis,)
    return tuple(sorted(a % ndim for a in axis))


ALL_DTYPES = REAL_DTYPES + COMPLEX_DTYPES + DATETIME_DTYPES
INDEX_DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]


@given(x=arrays(ALL_DTYPES), data=st.data(), kind=st.sampled_from(["max", "min"]),
       tie=st.sampled_from(["first", "last"]), keepdims=st.booleans(),
       index_dtype=st.sampled_from([None] + INDEX_DTYPES), use_out=st.booleans(),
       nan=st.booleans())
def test_argreduce_matches_reference(x, data, kind, tie, keepdims, index_dtype, use_out, nan):
    axis = data.draw(axis_args(x.ndim))
    axes = _normalize(axis, x.ndim)
    name = ("nanarg" if nan else "arg") + kind
    f = getattr(cupyops, name)
    before = x.copy()
    if any(x.shape[a] == 0 for a in axes):
        with pytest.raises(ValueError, match="empty sequence"):
            f(x, axis=axis)
        return
    group = int(np.prod([x.shape[a] for a in axes]))
    if index_dtype and group - 1 > np.iinfo(index_dtype).max:
        for device in DEVICES:
            with pytest.raises(ValueError, match="too many for index dtype"):
                getattr(ops(device), name)(x, axis=axis, dtype=index_dtype)
        return
    try:
        want = ref_argreduce(x, axes, kind, tie, nan=nan)
    except ValueError as e:
        assert "All-NaN" in str(e)
        if not int(np.prod([x.shape[i] for i in range(x.ndim) if i not in axes])):
            return     # no group at all: the reference raised on its first (virtual) one
        for device in DEVICES:
            with pytest.raises(ValueError, match="All-NaN slice encountered"):
                getattr(ops(device), name)(x, axis=axis, tie=tie, dtype=index_dtype)
        return
    if keepdims:
        want = want.reshape([1 if i in axes else n for i, n in enumerate(x.shape)])
    dt = np.dtype(index_dtype or "int64")
    for device in DEVICES:
        out = np.full(want.shape, 77, dt) if use_out else None
        got = getattr(ops(device), name)(x, axis=axis, keepdims=keepdims, tie=tie,
                                         dtype=index_dtype, out=out)
        if use_out:
            assert got is out
        assert isinstance(got, np.ndarray) and got.dtype == dt and got.shape == want.shape
        np.testing.assert_array_equal(got, want, err_msg=f"device={device} axis={axis}")
    np.testing.assert_array_equal(x, before)


@given(x=arrays(REAL_DTYPES + COMPLEX_DTYPES), data=st.data(),
       tie=st.sampled_from(["first", "last"]), use_out=st.booleans())
def test_hardmax_matches_reference(x, data, tie, use_out):
    axis = data.draw(axis_args(x.ndim)) if x.ndim else None
    axes = _normalize(axis, x.ndim)
    before = x.copy()
    want = ref_hardmax(x, axes, tie) if x.size else np.empty(x.shape, x.dtype)
    for device in DEVICES:
        out = np.full(x.shape, 5, x.dtype) if use_out else None
        got = ops(device).hardmax(x, axis=axis, tie=tie, out=out)
        if use_out:
            assert got is out
        assert got.shape == x.shape and got.dtype == x.dtype
        np.testing.assert_array_equal(got, want, err_msg=f"device={device} axis={axis}")
    np.testing.assert_array_equal(x, before)


def test_out_dtype_decides_when_dtype_none():
    x = np.array([[1, 5], [7, 2]], np.int16)
    out = np.empty(2, np.uint32)
    assert cupyops.argmax(x, axis=1, out=out) is out
    np.testing.assert_array_equal(out, [1, 0])


def test_out_with_keepdims_and_non_contiguous_out():
    x = np.array([[1, 5, 3], [7, 2, 7]], np.float64)
    buf = np.zeros((2, 4), np.int64)
    out = buf[:, ::2][:, :1]  # (2, 1), strided
    cupyops.argmax(x, axis=1, keepdims=True, tie="last", out=out)
    np.testing.assert_array_equal(buf[:, 0], [1, 2])


def test_axis_empty_tuple():
    x = np.array([[3, 1], [2, 2]], np.float32)
    np.testing.assert_array_equal(cupyops.argmax(x, axis=()), np.zeros((2, 2), np.int64))
    np.testing.assert_array_equal(cupyops.hardmax(x, axis=()), np.ones((2, 2), np.float32))
    assert cupyops.argmax(np.float32(4.0)).shape == ()
    assert int(cupyops.argmin(np.array(4.0))) == 0


@pytest.mark.parametrize("device", DEVICES)
def test_nan_rule_and_negative_zero(device):
    o = ops(device)
    x = np.array([1.0, np.nan, 3.0, np.nan, -1.0], np.float32)
    for f in (o.argmax, o.argmin):
        assert int(f(x)) == 1 and int(f(x, tie="last")) == 3
    z = np.array([0.0, -0.0, -0.0, 0.0], np.float64)
    assert int(o.argmax(z)) == 0 and int(o.argmax(z, tie="last")) == 3
    assert int(o.argmin(z)) == 0 and int(o.argmin(z, tie="last")) == 3


@pytest.mark.parametrize("device", DEVICES)
def test_exact_64bit_integer_compares(device):
    o = ops(device)
    big = np.array([2**62 + 1, 2**62 + 3, 2**62 + 2], np.int64)   # equal as float64
    assert int(o.argmax(big)) == 1 and int(o.argmin(big)) == 0
    ubig = np.array([2**64 - 2, 2**64 - 1, 0], np.uint64)
    assert int(o.argmax(ubig)) == 1 and int(o.argmin(ubig)) == 2


def test_hardmax_empty_is_not_error():
    x = np.zeros((0, 3), np.float32)
    assert cupyops.hardmax(x, axis=0).shape == (0, 3)
    assert cupyops.hardmax(np.zeros((2, 0)), axis=1).shape == (2, 0)


def test_index_order_of_reduced_axes_is_row_major_in_axis_order():
    x = np.zeros((2, 3, 4), np.int32)
    x[1, 2, 3] = 9   # in axes (0, 2): index 1 * 4 + 3 = 7
    np.testing.assert_array_equal(cupyops.argmax(x, axis=(2, 0)), [0, 0, 7])
    np.testing.assert_array_equal(cupyops.argmax(x, axis=(-1, 0)), [0, 0, 7])


# ---------------------------------------------------------------------------- issue 13

@pytest.mark.parametrize("device", DEVICES)
def test_zero_d_input_axes(device):
    o = ops(device)
    for x in (np.array(3.5), np.float32(2), np.array(7, np.int8), np.array("NaT", "M8[s]")):
        for axis in (None, 0, -1, (0,), ()):
            for f in (o.argmax, o.argmin, o.nanargmax, o.nanargmin):
                r = f(x, axis=axis)
                assert r.shape == () and int(r) == 0, (x, axis)
            if x.dtype.kind not in "mM":
                h = o.hardmax(x, axis=axis)
                assert h.shape == () and h.dtype == x.dtype and h == 1
        for axis in (1, -2, (1,)):
            with pytest.raises(np.exceptions.AxisError, match="out of bounds for array of dimension 0"):
                o.argmax(x, axis=axis)
        if x.dtype.kind not in "mM":
            with pytest.raises(np.exceptions.AxisError):
                o.hardmax(x, axis=1)
    assert int(o.argmax(np.array(3.0), axis=0, keepdims=True)) == 0
    with pytest.raises(ValueError, match="All-NaN"):
        o.nanargmax(np.array(np.nan), axis=0)


@pytest.mark.parametrize("device", DEVICES)
def test_nanarg_exported_and_numpy_compatible(device):
    assert "nanargmax" in cupyops.__all__ and "nanargmin" in cupyops.__all__
    o = ops(device)
    x = np.array([[np.nan, 3, 1, 3], [2, np.nan, np.nan, -1], [np.nan, -np.inf, 5, np.nan]])
    for f, g in ((o.nanargmax, np.nanargmax), (o.nanargmin, np.nanargmin)):
        for axis in (None, 0, 1):
            np.testing.assert_array_equal(f(x, axis=axis), g(x, axis=axis))
    np.testing.assert_array_equal(o.nanargmax(x, axis=1, tie="last"), [3, 0, 2])
    np.testing.assert_array_equal(o.nanargmin(x, axis=1, keepdims=True, dtype=np.uint8),
                                  [[2], [3], [1]])
    assert o.nanargmin(x, axis=1, dtype=np.uint8).dtype == np.uint8
    # NaN is skipped even next to -inf (NumPy's replace-by--inf gives the NaN's place, 0)
    assert int(o.nanargmax(np.array([np.nan, -np.inf]))) == 1
    c = np.array([complex(1, np.nan), 1 + 1j, complex(np.nan, 9), 1 + 1j])
    assert int(o.nanargmax(c)) == 1 and int(o.nanargmax(c, tie="last")) == 3
    with pytest.raises(ValueError, match="All-NaN slice encountered"):
        o.nanargmax(np.array([[1.0, np.nan], [np.nan, np.nan]]), axis=1)
    with pytest.raises(ValueError, match="All-NaN slice encountered"):
        o.nanargmin(np.full((3, 3), np.nan, np.complex64))
    d = np.array(["NaT", "2001-01-01", "NaT"], "M8[D]")       # NaT is not skipped
    assert int(o.nanargmax(d)) == 0 and int(o.nanargmin(d, tie="last")) == 2


@pytest.mark.parametrize("device", DEVICES)
def test_complex_and_datetime_follow_numpy(device):
    o = ops(device)
    rng = np.random.default_rng(5)
    parts = np.array([-np.inf, -1.0, -0.0, 0.0, 1.0, np.inf, np.nan])
    for dt in (np.complex64, np.complex128):
        x = np.empty((6, 40), dt)
        x.real = parts[rng.integers(0, 6, x.shape)]
        x.imag = parts[rng.integers(0, 7, x.shape)]
        x.real[rng.random(x.shape) < 0.02] = np.nan
        for axis in (None, 0, 1):
            np.testing.assert_array_equal(o.argmax(x, axis=axis), np.argmax(x, axis=axis))
            np.testing.assert_array_equal(o.argmin(x, axis=axis), np.argmin(x, axis=axis))
        h = o.hardmax(x, axis=1)
        assert h.dtype == dt
        np.testing.assert_array_equal(h, ref_hardmax(x, (1,)))
        assert set(np.unique(h).tolist()) <= {0j, 1 + 0j}
    d = rng.integers(-5, 5, (5, 30)).astype("m8[s]")
    d[rng.random(d.shape) < 0.05] = np.timedelta64("NaT")
    for dt in ("m8[s]", "M8[D]", ">m8[ms]"):
        y = d.astype(dt) if dt[0] != ">" else d.astype(np.dtype("m8[s]").newbyteorder(">"))
        for axis in (None, 0, 1):
            np.testing.assert_array_equal(o.argmax(y, axis=axis), np.argmax(y, axis=axis))
            np.testing.assert_array_equal(o.argmin(y, axis=axis), np.argmin(y, axis=axis))
            np.testing.assert_array_equal(o.nanargmin(y, axis=axis), np.nanargmin(y, axis=axis))
    with pytest.raises(TypeError, match="datetime64"):
        o.hardmax(d.astype("M8[s]"))


@pytest.mark.parametrize("device", DEVICES)
def test_every_integer_index_dtype_and_the_fit_rule(device):
    o = ops(device)
    x = np.arange(300, dtype=np.float32) % 7
    for dt in INDEX_DTYPES:
        info = np.iinfo(dt)
        n = min(int(info.max) + 1, 300)
        r = o.argmax(x[:n], dtype=dt)
        assert r.dtype == dt and int(r) == int(np.argmax(x[:n]))
        assert int(o.argmin(x[:n], tie="last", dtype=dt)) == n - 7 + int(np.argmin(x[n - 7:n]))
        if n < 300:
            with pytest.raises(ValueError, match=f"too many for index dtype {dt}"):
                o.argmax(x[:n + 1], dtype=dt)
            with pytest.raises(ValueError, match=f"too many for index dtype {dt}"):
                o.nanargmin(x[:n + 1], dtype=dt)
        out = np.zeros(3, dt)
        assert o.argmax(x[:60].reshape(3, 20), axis=1, out=out) is out   # out's dtype decides
        np.testing.assert_array_equal(out, np.argmax(x[:60].reshape(3, 20), axis=1))
