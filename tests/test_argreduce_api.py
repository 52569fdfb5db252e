"""argmax / argmin / hardmax through the public API, against the brute-force reference, on
every device: axis forms, keepdims, tie, index dtype, out=, and the input left untouched."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import cupyops
from ref_argreduce import ref_argreduce, ref_hardmax
from strategies import REAL_DTYPES, arrays, axis_args
from _devices import KERNEL_DEVICES, ops

DEVICES = ["cpu"] + KERNEL_DEVICES


def _normalize(axis, ndim):
    if axis is None:
        return tuple(range(ndim))
    axis = axis if isinstance(axis, tuple) else (axis,)
    return tuple(sorted(a % ndim for a in axis))


@given(x=arrays(REAL_DTYPES), data=st.data(), kind=st.sampled_from(["max", "min"]),
       tie=st.sampled_from(["first", "last"]), keepdims=st.booleans(),
       index_dtype=st.sampled_from([None, "int32", "uint32", "uint64", "int64"]),
       use_out=st.booleans())
def test_argreduce_matches_reference(x, data, kind, tie, keepdims, index_dtype, use_out):
    axis = data.draw(axis_args(x.ndim))
    axes = _normalize(axis, x.ndim)
    f = cupyops.argmax if kind == "max" else cupyops.argmin
    before = x.copy()
    if any(x.shape[a] == 0 for a in axes):
        with pytest.raises(ValueError, match="empty sequence"):
            f(x, axis=axis)
        return
    want = ref_argreduce(x, axes, kind, tie)
    if keepdims:
        want = want.reshape([1 if i in axes else n for i, n in enumerate(x.shape)])
    dt = np.dtype(index_dtype or "int64")
    for device in DEVICES:
        out = np.full(want.shape, 77, dt) if use_out else None
        got = getattr(ops(device), f.__name__)(x, axis=axis, keepdims=keepdims, tie=tie,
                                               dtype=index_dtype, out=out)
        if use_out:
            assert got is out
        assert isinstance(got, np.ndarray) and got.dtype == dt and got.shape == want.shape
        np.testing.assert_array_equal(got, want, err_msg=f"device={device} axis={axis}")
    np.testing.assert_array_equal(x, before)


@given(x=arrays(REAL_DTYPES), data=st.data(), tie=st.sampled_from(["first", "last"]),
       use_out=st.booleans())
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


def test_nan_rule_and_negative_zero():
    x = np.array([1.0, np.nan, 3.0, np.nan, -1.0], np.float32)
    for f in (cupyops.argmax, cupyops.argmin):
        assert int(f(x)) == 1 and int(f(x, tie="last")) == 3
    z = np.array([0.0, -0.0, -0.0, 0.0], np.float64)
    assert int(cupyops.argmax(z)) == 0 and int(cupyops.argmax(z, tie="last")) == 3
    assert int(cupyops.argmin(z)) == 0 and int(cupyops.argmin(z, tie="last")) == 3


def test_exact_64bit_integer_compares():
    big = np.array([2**62 + 1, 2**62 + 3, 2**62 + 2], np.int64)   # equal as float64
    assert int(cupyops.argmax(big)) == 1 and int(cupyops.argmin(big)) == 0
    ubig = np.array([2**64 - 2, 2**64 - 1, 0], np.uint64)
    assert int(cupyops.argmax(ubig)) == 1 and int(cupyops.argmin(ubig)) == 2


def test_hardmax_empty_is_not_error():
    x = np.zeros((0, 3), np.float32)
    assert cupyops.hardmax(x, axis=0).shape == (0, 3)
    assert cupyops.hardmax(np.zeros((2, 0)), axis=1).shape == (2, 0)


def test_index_order_of_reduced_axes_is_row_major_in_axis_order():
    x = np.zeros((2, 3, 4), np.int32)
    x[1, 2, 3] = 9   # in axes (0, 2): index 1 * 4 + 3 = 7
    np.testing.assert_array_equal(cupyops.argmax(x, axis=(2, 0)), [0, 0, 7])
    np.testing.assert_array_equal(cupyops.argmax(x, axis=(-1, 0)), [0, 0, 7])
