"""What a new user reads when a call goes wrong (issue 37): every error from a public function
starts with its name; ``None`` and ragged lists are named as such; a machine without a GPU
says "no GPU found" with CuPy's own words after it; an all-NaN group of nanarg* names the
function and the group."""
import types

import numpy as np
import pytest

import cupyops
from cupyops import _call
from cupyops.core import devices as _devices
from _devices import KERNEL_DEVICES, gpu_skip_reason, ops

OPERATORS = _call.OPERATORS
NAMES = [op.name for op in OPERATORS]
X = np.array([[3, 1, 2], [0, 5, 5]], np.float32)
BY_NAME = {op.name: op for op in OPERATORS}


def _more(name):
    """The positional arguments after x an operator requires (the segment family's offsets,
    valid for X)."""
    return (np.array([0, 1, 2]),) if "offsets" in BY_NAME[name].params else ()


def _error(fn):
    with pytest.raises(Exception) as info:
        fn()
    return info.value


@pytest.mark.parametrize("name", NAMES)
def test_none_is_named_as_none(name):
    exc = _error(lambda: _call.PUBLIC[name](None, *_more(name)))
    assert isinstance(exc, TypeError)
    assert str(exc).startswith(f"{name}: x is None; expected an array"), str(exc)
    assert "dtype object" not in str(exc)


@pytest.mark.parametrize("name", NAMES)
def test_a_ragged_list_is_named_and_prefixed(name):
    exc = _error(lambda: _call.PUBLIC[name]([[1, 2], [3]], *_more(name)))
    assert isinstance(exc, ValueError)
    assert str(exc).startswith(f"{name}: x (a list) is ragged"), str(exc)
    assert "inhomogeneous" in str(exc)        # NumPy's own words stay, after ours


def _bad_calls(op):
    """(label, keywords) of calls that fail on any machine, for the parameters ``op`` takes."""
    calls = [("device name", {"device": "gpu"}), ("device type", {"device": 3.5}),
             ("device number", {"device": -1}), ("masked", {"x": np.ma.masked_array([1.0])}),
             ("object dtype", {"x": np.array([1, None], object)})]
    takes = set(op.params)
    if "axis" in takes:
        calls += [("axis range", {"axis": 5}), ("axis type", {"axis": 1.0}),
                  ("axis repeat", {"axis": (0, 0)})]
    if "tie" in takes:
        calls.append(("tie", {"tie": "middle"}))
    if "dtype" in takes:
        calls.append(("index dtype", {"dtype": np.float32}))
    if "size" in takes:
        calls.append(("size", {"size": -1}))
    if "out" in takes:
        calls.append(("out", {"out": [0]}))
    if "workspace" in takes:
        calls.append(("workspace", {"workspace": 3}))
    return calls


@pytest.mark.parametrize("op", OPERATORS, ids=NAMES)
def test_every_error_of_a_public_function_carries_its_name(op, monkeypatch):
    fn = _call.PUBLIC[op.name]
    failures = []
    for label, kw in _bad_calls(op):
        kw = dict(kw)
        x = kw.pop("x", X)
        exc = _error(lambda: fn(x, *_more(op.name), **kw))
        if not str(exc).startswith(f"{op.name}: "):
            failures.append((label, type(exc).__name__, str(exc)))
    monkeypatch.setenv("CUPYOPS_DEVICE", "quantum")
    exc = _error(lambda: fn(X, *_more(op.name)))
    if not str(exc).startswith(f"{op.name}: CUPYOPS_DEVICE"):
        failures.append(("CUPYOPS_DEVICE", type(exc).__name__, str(exc)))
    assert not failures, failures


@pytest.mark.parametrize("name", NAMES)
def test_an_unavailable_device_error_carries_the_name(name, monkeypatch, fresh_cuda_status):
    import sys
    monkeypatch.setitem(sys.modules, "cupy", _stand_in_cupy(count=0))
    exc = _error(lambda: _call.PUBLIC[name](X, *_more(name), device="cuda"))
    assert isinstance(exc, RuntimeError)
    assert str(exc).startswith(f"{name}: device='cuda' asks for a CUDA GPU"), str(exc)
    assert "no GPU found" in str(exc)


# --------------------------------------------------------------------------- no GPU

@pytest.fixture
def fresh_cuda_status():
    _devices.cuda_status.cache_clear()
    yield
    _devices.cuda_status.cache_clear()


class CUDARuntimeError(RuntimeError):
    """CuPy's runtime error, as a stand-in."""


def _stand_in_cupy(count=0, error=None):
    def get_count():
        if error is not None:
            raise error
        return count
    fake = types.ModuleType("cupy")
    fake.ndarray = type("StandInCupyArray", (), {})
    fake.cuda = types.SimpleNamespace(runtime=types.SimpleNamespace(getDeviceCount=get_count),
                                      Device=type("StandInDevice", (), {}))
    return fake


_NO_DRIVER = ("cudaErrorInsufficientDriver: CUDA driver version is insufficient for CUDA "
              "runtime version")


@pytest.mark.parametrize("case", ["no driver", "no device", "zero devices", "old driver",
                                  "other"])
def test_no_gpu_found_then_cupys_reason(case, monkeypatch, fresh_cuda_status):
    import sys
    error = {"no driver": CUDARuntimeError(_NO_DRIVER), "old driver": CUDARuntimeError(_NO_DRIVER),
             "no device": CUDARuntimeError("cudaErrorNoDevice: no CUDA-capable device is "
                                           "detected"),
             "other": CUDARuntimeError("cudaErrorDevicesUnavailable: all CUDA-capable devices "
                                       "are busy or unavailable")}.get(case)
    monkeypatch.setitem(sys.modules, "cupy", _stand_in_cupy(error=error))
    monkeypatch.setattr(_devices, "_nvidia_driver_found", lambda: case == "old driver")
    ok, why = _devices.cuda_status()
    assert not ok
    if case in ("no driver", "no device", "zero devices"):
        assert why.startswith("no GPU found ("), why
    else:
        assert "no GPU found" not in why and why.startswith("CuPy is installed but"), why
    if error is not None:       # CuPy's own words follow, whole
        assert f"(CuPy: CUDARuntimeError: {error})" in why, why
    if case == "old driver":
        assert "driver is too old" in why


def test_this_machine_says_no_gpu_found_when_it_has_no_driver(fresh_cuda_status):
    ok, why = _devices.cuda_status()
    if ok or why.startswith("CuPy is not installed") or _devices._nvidia_driver_found():
        pytest.skip(f"not a machine with CuPy and no NVIDIA driver: {why}")
    assert why.startswith("no GPU found (CuPy: "), why


def test_gpu_tests_skip_with_no_gpu_found(monkeypatch, fresh_cuda_status):
    import sys
    monkeypatch.setitem(sys.modules, "cupy", _stand_in_cupy(error=CUDARuntimeError(_NO_DRIVER)))
    monkeypatch.setattr(_devices, "_nvidia_driver_found", lambda: False)
    reason = gpu_skip_reason()
    assert reason.startswith("needs a CUDA GPU: no GPU found (CuPy: "), reason
    assert "insufficient" in reason


# --------------------------------------------------------------------------- all-NaN groups

_NAN = np.nan


@pytest.mark.parametrize("device", ["cpu"] + KERNEL_DEVICES)
@pytest.mark.parametrize("kind", ["max", "min"])
def test_all_nan_names_the_function_and_the_group(device, kind):
    f = getattr(ops(device), f"nanarg{kind}")
    name = f"nanarg{kind}"
    x = np.array([[1, _NAN, 3], [_NAN, _NAN, _NAN], [_NAN, _NAN, _NAN]], np.float32)
    cases = [({"axis": 1}, "x[1, :] holds only NaN (and 1 more group)"),
             ({"axis": 0}, "x[:, 1] holds only NaN"),
             ({"axis": 1, "x": x[:1]}, None),
             ({"axis": None}, None),
             ({"axis": 0, "x": x[1:]}, "x[:, 0] holds only NaN (and 2 more groups)"),
             ({"axis": None, "x": x[1:]}, "x holds only NaN"),
             ({"axis": (0, 2), "x": np.full((2, 3, 2), _NAN, np.float64)},
              "x[:, 0, :] holds only NaN (and 2 more groups)")]
    for kw, where in cases:
        kw = dict(kw)
        a = kw.pop("x", x)
        if where is None:
            f(a, **kw)
            continue
        with pytest.raises(ValueError) as info:
            f(a, **kw)
        assert str(info.value) == f"{name}: All-NaN slice encountered: {where}", (kw, device)
        with pytest.raises(ValueError) as info:     # the cached layout says the same
            f(a, **kw)
        assert str(info.value) == f"{name}: All-NaN slice encountered: {where}", (kw, device)


def test_all_nan_of_a_dask_array_names_the_group_of_x():
    da = pytest.importorskip("dask.array")
    a = np.ones((4, 6))
    a[2, :] = _NAN
    for chunks in [(4, 6), (2, 6), (4, 3)]:
        with pytest.raises(ValueError) as info:
            cupyops.nanargmax(da.from_array(a, chunks=chunks), axis=1).compute()
        assert str(info.value) == "nanargmax: All-NaN slice encountered: x[2, :] holds only NaN", \
            chunks


@pytest.mark.parametrize("device", KERNEL_DEVICES)
def test_a_cached_calls_error_carries_the_name(device):
    """A layout served from the cache fails in its entry, not on the full road: a workspace too
    small for it still names the function."""
    from _devices import device_kw, to_device, workspace
    x = to_device(np.random.default_rng(0).random((4, 300000)).astype(np.float32), device)
    big, small = workspace(1 << 22, device), workspace(16, device)
    for name, kw in (("argmax", {"axis": 1}), ("nonzero_coordinates", {"size": 10})):
        fn = _call.PUBLIC[name]
        fn(x, workspace=big, **kw, **device_kw(device))
        fn(x, workspace=big, **kw, **device_kw(device))           # cached now
        with pytest.raises(ValueError) as info:
            fn(x, workspace=small, **kw, **device_kw(device))
        assert str(info.value).startswith(f"{name}: workspace: this call needs"), str(info.value)
