"""CuPy arrays on a real GPU. Every test here needs a CUDA device and skips without one."""
import numpy as np
import pytest

import cupyops
from cupyops.testing import recording

pytestmark = pytest.mark.gpu


@pytest.fixture
def cp():
    import cupy
    return cupy


def test_cupy_in_cupy_out(cp):
    x = cp.asarray(np.array([[1, 2, 3], [3, 0, 4], [2, 5, 2]], np.float32))
    r = cupyops.argmin(x)
    assert isinstance(r, cp.ndarray) and r.shape == () and int(r) == 4
    h = cupyops.hardmax(x, axis=0)
    assert isinstance(h, cp.ndarray)
    np.testing.assert_array_equal(h.get(), cupyops.hardmax(x.get(), axis=0))


def test_other_device_with_cupy_input_is_refused(cp):
    x = cp.zeros(3, cp.float32)
    for bad in ("cpu", "simt", "cuda:7"):
        with pytest.raises(ValueError, match="hidden transfers"):
            cupyops.argmax(x, device=bad)


def test_fixed_size_nonzero_has_no_host_read(cp):
    x = cp.asarray((np.arange(4096) % 7 == 0).astype(np.float32))
    with recording() as t:
        coords, count = cupyops.nonzero_coordinates(x, size=100)
    assert t.d2h_reads == 0 and isinstance(count, cp.ndarray)
    with recording() as t:
        cupyops.argwhere(x)
    assert t.d2h_reads == 1


@pytest.mark.parametrize("op", ["argmax", "argmin"])
@pytest.mark.parametrize("axis", [None, 0, 1, (0, 2)])
def test_cuda_matches_numpy_path(cp, op, axis):
    rng = np.random.default_rng(0)
    x = rng.integers(0, 3, (33, 1025, 3)).astype(np.float32)
    for tie in ("first", "last"):
        want = getattr(cupyops, op)(x, axis=axis, tie=tie)
        got = getattr(cupyops, op)(cp.asarray(x), axis=axis, tie=tie).get()
        np.testing.assert_array_equal(got, want)
        got2 = getattr(cupyops, op)(x, axis=axis, tie=tie, device="cuda")
        assert isinstance(got2, np.ndarray)
        np.testing.assert_array_equal(got2, want)
