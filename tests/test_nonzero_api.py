"""The nonzero family through the public API, against the brute-force reference."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import cupyops
import cupyops.ops.nonzero.numpy_path as cpu_nonzero
from ref_nonzero import ref_argwhere, ref_count_nonzero
from strategies import COMPLEX_DTYPES, DATETIME_DTYPES, REAL_DTYPES, arrays, axis_args
from _devices import NONZERO_KERNEL_DEVICES, ops

DTYPES = REAL_DTYPES + COMPLEX_DTYPES + DATETIME_DTYPES
DEVICES = ["cpu"] + NONZERO_KERNEL_DEVICES


@pytest.fixture(params=[1 << 20, 7, 1], ids=["chunk-default", "chunk-7", "chunk-1"])
def chunk(request, monkeypatch):
    monkeypatch.setattr(cpu_nonzero, "CHUNK_ELEMENTS", request.param)
    return request.param


def _normalize(axis, ndim):
    if axis is None:
        return tuple(range(ndim))
    axis = axis if isinstance(axis, tuple) else (axis,)
    return tuple(sorted(a % ndim for a in axis))


@given(x=arrays(DTYPES), data=st.data(), index_dtype=st.sampled_from([None, "int32", "uint32", "uint64"]))
def test_argwhere_and_nonzero(x, data, index_dtype):
    before = x.copy()
    want = ref_argwhere(x)
    for device in DEVICES:
        got = ops(device).argwhere(x, dtype=index_dtype)
        assert got.dtype == np.dtype(index_dtype or "int64")
        assert got.shape == want.shape
        np.testing.assert_array_equal(got, want)
        if x.ndim:
            nz = ops(device).nonzero(x)
            assert isinstance(nz, tuple) and len(nz) == x.ndim
            for axis, arr in enumerate(nz):
                assert arr.dtype == np.int64 and arr.ndim == 1 and arr.flags.c_contiguous
                np.testing.assert_array_equal(arr, want[:, axis])
    np.testing.assert_array_equal(x, before)


@given(x=arrays(DTYPES), data=st.data())
def test_count_nonzero(x, data):
    axis = data.draw(axis_args(x.ndim))
    keepdims = data.draw(st.booleans())
    axes = _normalize(axis, x.ndim)
    want = ref_count_nonzero(x, axes)
    if keepdims:
        want = want.reshape([1 if i in axes else n for i, n in enumerate(x.shape)])
    for device in DEVICES:
        got = ops(device).count_nonzero(x, axis=axis, keepdims=keepdims)
        assert isinstance(got, np.ndarray) and got.dtype == np.int64
        assert got.shape == want.shape
        np.testing.assert_array_equal(got, want)


@given(x=arrays(DTYPES), size=st.integers(0, 40), fill=st.integers(-3, 3),
       index_dtype=st.sampled_from([None, "int32", "int64"]))
def test_nonzero_coordinates_fixed_size(x, size, fill, index_dtype):
    want = ref_argwhere(x)
    for device in DEVICES:
        coords, count = ops(device).nonzero_coordinates(x, size=size, fill_value=fill,
                                                        dtype=index_dtype)
        assert count.shape == () and count.dtype == np.int64 and int(count) == want.shape[0]
        assert coords.shape == (size, x.ndim) and coords.dtype == np.dtype(index_dtype or "int64")
        k = min(size, want.shape[0])
        np.testing.assert_array_equal(coords[:k], want[:k])
        assert (coords[k:] == fill).all()
        exact, count2 = ops(device).nonzero_coordinates(x)
        np.testing.assert_array_equal(exact, want)
        assert int(count2) == want.shape[0]


@pytest.mark.parametrize("n", [31, 32, 33, 1023, 1025])
def test_chunk_seams(n, chunk):
    rng = np.random.default_rng(n)
    x = rng.integers(0, 3, size=(n, 3)).astype(np.float32)
    x[rng.random(x.shape) < 0.2] = -0.0
    for view in (x, x[::-1], np.asfortranarray(x), x[:, ::-2], x.T):
        want = ref_argwhere(view)
        np.testing.assert_array_equal(cupyops.argwhere(view), want)
        np.testing.assert_array_equal(np.stack(cupyops.nonzero(view), 1), want)
        np.testing.assert_array_equal(cupyops.count_nonzero(view, axis=0), ref_count_nonzero(view, (0,)))
        np.testing.assert_array_equal(cupyops.count_nonzero(view, axis=1), ref_count_nonzero(view, (1,)))
        c, cnt = cupyops.nonzero_coordinates(view, size=7, fill_value=-1)
        np.testing.assert_array_equal(c[: min(7, len(want))], want[:7])


def test_rules_of_nonzero():
    x = np.array([0.0, -0.0, np.nan, 1.0, -np.inf], np.float32)
    np.testing.assert_array_equal(cupyops.argwhere(x)[:, 0], [2, 3, 4])
    c = np.array([0, 1j, -0.0 - 0j, complex(np.nan, 0), 2], np.complex64)
    np.testing.assert_array_equal(cupyops.nonzero(c)[0], [1, 3, 4])
    assert int(cupyops.count_nonzero(np.array([True, False, True]))) == 2


def test_seed_order_and_0d():
    a = np.zeros((2, 6))
    a[1, 0], a[1, 2], a[0, 5] = 1, 1, 1
    np.testing.assert_array_equal(cupyops.argwhere(a), [[0, 5], [1, 0], [1, 2]])
    assert cupyops.argwhere(np.array(3.0)).shape == (1, 0)
    assert cupyops.argwhere(np.array(0.0)).shape == (0, 0)
    assert cupyops.count_nonzero(np.array(2.0)).shape == ()
    coords, count = cupyops.nonzero_coordinates(np.array(5), size=3)
    assert coords.shape == (3, 0) and int(count) == 1


def test_axis_empty_tuple_gives_mask():
    x = np.array([[0, 2], [3, 0]], np.int8)
    got = cupyops.count_nonzero(x, axis=())
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, [[0, 1], [1, 0]])


def test_broadcast_input_is_not_copied(monkeypatch):
    # 2**33 logical elements, one byte of memory: chunked reads never materialise it
    x = np.broadcast_to(np.int8(0), (2**13, 2**20))
    assert int(cupyops.count_nonzero(x[:64])) == 0
    coords, count = cupyops.nonzero_coordinates(np.broadcast_to(np.int8(1), (2**31 + 5,)), size=4,
                                                dtype=np.int64)
    np.testing.assert_array_equal(coords[:, 0], [0, 1, 2, 3])
    assert int(count) == 2**31 + 5


@pytest.mark.parametrize("device", DEVICES)
def test_count_nonzero_of_broadcast_views_counts_distinct_elements(device):
    import time
    o = ops(device)
    t = time.perf_counter()
    assert int(o.count_nonzero(np.broadcast_to(np.float32(1), (2**33,)))) == 2**33
    assert int(o.count_nonzero(np.broadcast_to(np.float32(0), (2**33,)))) == 0
    assert time.perf_counter() - t < 20       # walking 2**33 elements takes far longer
    base = np.array([[0, 1, 2], [3, 0, 0]], np.float64)
    x = np.broadcast_to(base[:, None, :], (2, 5, 3))
    for axis in (None, 0, 1, 2, (0, 1), (1, 2), (0, 2)):
        for keepdims in (False, True):
            got = o.count_nonzero(x, axis=axis, keepdims=keepdims)
            want = np.count_nonzero(np.ascontiguousarray(x), axis=axis, keepdims=keepdims)
            assert got.dtype == np.int64
            np.testing.assert_array_equal(got, want, err_msg=f"axis={axis}")
            got[...] = -1                # a fresh, writable result
    big = np.broadcast_to(np.array([1, 0, 3], np.int8)[:, None], (3, 2**31 + 7))
    np.testing.assert_array_equal(o.count_nonzero(big, axis=1), [2**31 + 7, 0, 2**31 + 7])


@pytest.mark.parametrize("device", DEVICES)
def test_datetime_nonzero_family(device):
    o = ops(device)
    d = np.array([["NaT", "1970-01-01", "2000-01-01"], ["1970-01-01", "1969-12-31", "NaT"]],
                 "M8[D]")
    t = d - np.datetime64("1970-01-01")
    for x in (d, t, t.astype(np.dtype("m8[D]").newbyteorder(">"))):
        assert int(o.count_nonzero(x)) == np.count_nonzero(x) == 4
        np.testing.assert_array_equal(o.count_nonzero(x, axis=0), np.count_nonzero(x, axis=0))
        np.testing.assert_array_equal(o.argwhere(x), np.argwhere(x))
        for a, b in zip(o.nonzero(x), np.nonzero(x)):
            np.testing.assert_array_equal(a, b)
        coords, count = o.nonzero_coordinates(x, size=6, fill_value=9)
        assert int(count) == 4
        np.testing.assert_array_equal(coords[:4], np.argwhere(x))
        assert (coords[4:] == 9).all()


def test_count_all_masks_large_contiguous_floats_in_chunks(monkeypatch):
    """A whole-array count of a contiguous float32/64 or complex array (C or F order) goes
    through bounded masks, chunk by chunk (the seams at small chunk sizes too), and counts what
    NumPy counts: -0.0 is zero; NaN, inf, a denormal and a complex with one nonzero (or NaN)
    part are not. float16, other layouts and small arrays keep NumPy's count. The public
    count_nonzero (slow path, then its cached entry) agrees."""
    import cupyops

    class Recorder:                     # numpy, with its not_equal calls counted
        def __init__(self):
            self.masks = 0

        def __getattr__(self, name):
            return getattr(np, name)

        def not_equal(self, *a, **k):
            self.masks += 1
            return np.not_equal(*a, **k)
    rec = Recorder()
    monkeypatch.setattr(cpu_nonzero, "np", rec)
    rng = np.random.default_rng(5)
    specials = np.array([0.0, -0.0, np.nan, np.inf, -np.inf, 1e-45, 1.0, -0.0])
    for chunk, low in ((1000, 100), (cpu_nonzero.MASK_COUNT_CHUNK, cpu_nonzero.MASK_COUNT_MIN)):
        monkeypatch.setattr(cpu_nonzero, "MASK_COUNT_CHUNK", chunk)
        monkeypatch.setattr(cpu_nonzero, "MASK_COUNT_MIN", low)
        for n in (low - 1, low, 3 * chunk + 7, 2 * chunk):
            base = np.where(rng.random(n) < 0.5, rng.choice(specials, n), 0.0)
            cplx = np.empty(n, np.complex128)
            cplx.real = base
            cplx.imag = np.where(rng.random(n) < 0.2, rng.choice(specials, n), 0.0)
            for x, masked in ((base.astype(np.float32), True), (base, True),
                              (base.astype(">f4"), True), (cplx.astype(np.complex64), True),
                              (cplx, True), (base.astype(np.float16), False),
                              (base[::-1], False), (base[::2], False)):
                masked = masked and n >= low
                rec.masks = 0
                assert cpu_nonzero.count_all(x) == np.count_nonzero(x), (x.dtype, n)
                assert (rec.masks > 0) == masked, (x.dtype, n, x.strides)
                if masked:
                    assert rec.masks == -(-n // chunk)
    monkeypatch.undo()
    x = np.asfortranarray(np.where(rng.random((300, 200)) < 0.3, -0.0, np.nan)
                          ).astype(np.float32)
    x[::7, ::3] = 1.0
    for _ in range(2):
        got = cupyops.count_nonzero(x, device="cpu")
        assert got.dtype == np.int64 and got.shape == () and int(got) == np.count_nonzero(x)


def test_count_along_narrow_accumulators_are_exact():
    """The CPU count over some axes sums the mask's bytes in uint16 up to 65,535 elements per
    count and in uint32 beyond: full counts at both edges, and the zero rules (-0.0 is zero;
    NaN, inf and a complex with one nonzero part are not) against NumPy's own count."""
    for n in (65535, 65536):
        x = np.ones((3, n), np.int8)
        x[1, ::2] = 0
        got = cpu_nonzero.count_along(x, (1,))
        np.testing.assert_array_equal(got, [n, n // 2, n])
        assert got.dtype == (np.uint16 if n <= 65535 else np.uint32)
        np.testing.assert_array_equal(cpu_nonzero.count_along(x.T.copy(), (0,)), [n, n // 2, n])
    f = np.array([[0.0, -0.0, np.nan], [np.inf, -np.inf, 1e-45], [0.0, 0.0, 0.0]], np.float32)
    c = np.array([[0, 1j, -0.0 + 0j], [np.nan * 1j, 2, 0]], np.complex64)
    b = np.array([[0, 2, 0x80, 0xff], [0, 0, 0, 1]], np.uint8).view(np.bool_)
    for x in (f, c, b, f.astype(np.float16), np.arange(-3, 9, dtype=np.int64).reshape(3, 4)):
        for axes in ((0,), (1,)):
            np.testing.assert_array_equal(cpu_nonzero.count_along(x, axes),
                                          np.count_nonzero(x, axis=axes), err_msg=str(x.dtype))
    x3 = (np.arange(4 * 5 * 6).reshape(4, 5, 6) % 3).astype(np.float64)
    np.testing.assert_array_equal(cpu_nonzero.count_along(x3, (0, 2)),
                                  np.count_nonzero(x3, axis=(0, 2)))
    # datetime keeps NumPy's own count
    d = np.array([[0, 5], [3, 0]], "m8[s]")
    np.testing.assert_array_equal(cpu_nonzero.count_along(d, (1,)), np.count_nonzero(d, axis=1))


@pytest.mark.parametrize("device", NONZERO_KERNEL_DEVICES)
@pytest.mark.parametrize("shape, dtype", [((8, 32768), np.int16), ((6, 40001), np.float32),
                                          ((64, 8192), np.uint8)], ids=str)
def test_inner_extents_past_the_tile_budget(device, shape, dtype):
    """F-order inputs whose memory-order tile would pass its mask's bit budget (issue 32):
    tiles of inner chunks, then row segments (two passes for size= too); every form right,
    size= below and above the count."""
    rng = np.random.default_rng(9)
    x = np.asfortranarray((rng.random(shape) < 0.3).astype(dtype))
    o = ops(device)
    want = np.argwhere(x)
    np.testing.assert_array_equal(o.argwhere(x), want)
    for got, w in zip(o.nonzero(x), np.nonzero(x)):
        np.testing.assert_array_equal(got, w)
    c, n = o.nonzero_coordinates(x)
    np.testing.assert_array_equal(c, want)
    for k in (len(want) // 2, len(want) + 100):
        c, n = o.nonzero_coordinates(x, size=k, fill_value=-1)
        assert int(n) == len(want)
        np.testing.assert_array_equal(c[:min(k, len(want))], want[:k])
        assert (c[len(want):] == -1).all()
