"""The seed examples of SPEC.md (DirectML's reference pages), on every device."""
import numpy as np
import pytest

import cupyops
from cupyops.__main__ import seed_examples
from _devices import KERNEL_DEVICES, NONZERO_KERNEL_DEVICES, is_cupy, ops

EXAMPLES = seed_examples()


def _devices_for(label):
    kernel = NONZERO_KERNEL_DEVICES if ("nonzero" in label or "argwhere" in label) else KERNEL_DEVICES
    return ["cpu"] + kernel


@pytest.mark.parametrize("label,call,expected",
                         [pytest.param(*e, id=e[0]) for e in EXAMPLES])
def test_seed_example(label, call, expected, monkeypatch):
    for device in _devices_for(label):
        if is_cupy(device):
            # the seed calls build NumPy input and name their device: CuPy input is the public
            # functions taking the same values as CuPy arrays (ops("cupy"), no device)
            with monkeypatch.context() as m:
                for name in cupyops._call.PUBLIC:
                    m.setattr(cupyops, name, getattr(ops(device), name))
                got = call(None)
        else:
            got = call(device)
        assert isinstance(got, np.ndarray), f"{device}: result must be an array, got {type(got)}"
        np.testing.assert_array_equal(got, np.asarray(expected), err_msg=f"device={device}")
        assert got.shape == np.asarray(expected).shape


def test_full_reduction_is_0d_array_not_scalar():
    m = np.array([[1, 2, 3], [3, 0, 4], [2, 5, 2]], np.float32)
    for f, want in ((cupyops.argmin, 4), (cupyops.argmax, 7)):
        r = f(m)
        assert isinstance(r, np.ndarray) and r.shape == () and r.dtype == np.int64 and r == want


def test_keepdims_false_drops_axes():
    m = np.array([[1, 2, 3], [3, 0, 4], [2, 5, 2]], np.float32)
    np.testing.assert_array_equal(cupyops.argmin(m, 0), [0, 1, 2])
    np.testing.assert_array_equal(cupyops.argmax(m, 1), [2, 2, 1])
    assert cupyops.argmax(m, (0, 1), keepdims=True).shape == (1, 1)


def test_demo_runs_and_matches():
    from cupyops.__main__ import demo
    assert demo("cpu") == 0
