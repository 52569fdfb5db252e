"""Every error of SPEC.md: the exception type, a message naming the argument, and the input
left untouched."""
import numpy as np
import pytest

import cupyops

ALL_OPS = ("argmax", "argmin", "hardmax", "argwhere", "nonzero", "count_nonzero",
           "nonzero_coordinates")


def _call(op, x, **kw):
    return getattr(cupyops, op)(x, **kw)


@pytest.fixture
def x():
    a = np.array([[3, 1, 2], [0, 5, 5]], np.float32)
    return a


def _snapshot(a):
    return a.copy(), a.__array_interface__["data"][0], a.strides, a.flags.writeable


def _assert_untouched(a, snap):
    values, ptr, strides, writeable = snap
    np.testing.assert_array_equal(a, values)
    assert a.__array_interface__["data"][0] == ptr and a.strides == strides
    assert a.flags.writeable == writeable


def raises_untouched(a, exc, match, fn):
    snap = _snapshot(a)
    with pytest.raises(exc, match=match):
        fn()
    _assert_untouched(a, snap)


@pytest.mark.parametrize("dtype", ["datetime64[D]", "timedelta64[ns]"])
def test_datetime_refused_by_hardmax(dtype):
    a = np.ones((2, 2), "i8").astype(dtype)
    raises_untouched(a, TypeError, "one-hot of datetime64", lambda: cupyops.hardmax(a))


@pytest.mark.parametrize("op", ALL_OPS + ("nanargmax", "nanargmin"))
@pytest.mark.parametrize("a", [np.array(["a", "b"]), np.array([1, None], object),
                               np.array([1.0], np.longdouble),
                               np.zeros(2, [("a", "i4"), ("b", "f4")]), np.array([b"x"])],
                         ids=["str", "object", "longdouble", "structured", "bytes"])
def test_unsupported_dtypes(op, a):
    with pytest.raises(TypeError, match="supported dtypes are"):
        _call(op, a)


@pytest.mark.parametrize("op", ALL_OPS)
def test_masked_array_refused(op):
    a = np.ma.masked_array([1.0, 0.0, 2.0], mask=[0, 1, 0])
    raises_untouched(a, TypeError, "masked", lambda: _call(op, a))


@pytest.mark.parametrize("op", ["argmax", "argmin", "hardmax", "count_nonzero"])
def test_axis_errors(op, x):
    raises_untouched(x, np.exceptions.AxisError, "axis", lambda: _call(op, x, axis=2))
    raises_untouched(x, np.exceptions.AxisError, "axis", lambda: _call(op, x, axis=(0, -3)))
    # AxisError is both a ValueError and an IndexError, as NumPy raises
    with pytest.raises(ValueError):
        _call(op, x, axis=5)
    with pytest.raises(IndexError):
        _call(op, x, axis=-5)
    raises_untouched(x, ValueError, "repeats", lambda: _call(op, x, axis=(0, 0)))
    raises_untouched(x, ValueError, "repeats", lambda: _call(op, x, axis=(1, -1)))
    raises_untouched(x, TypeError, "axis must be", lambda: _call(op, x, axis=1.0))
    raises_untouched(x, TypeError, "axis must be", lambda: _call(op, x, axis=[0]))
    raises_untouched(x, TypeError, "axis must be", lambda: _call(op, x, axis=True))


@pytest.mark.parametrize("op", ["argmax", "argmin", "hardmax"])
def test_tie_errors(op, x):
    raises_untouched(x, ValueError, "tie must be", lambda: _call(op, x, tie="middle"))
    raises_untouched(x, ValueError, "tie must be", lambda: _call(op, x, tie=None))


@pytest.mark.parametrize("op", ["argmax", "argmin", "nanargmax", "nanargmin"])
def test_index_dtype_errors(op, x):
    for bad in (np.float32, bool, np.complex64, "datetime64[s]"):
        raises_untouched(x, TypeError, "dtype must be one of", lambda: _call(op, x, dtype=bad))
    raises_untouched(x, TypeError, "dtype must be one of", lambda: _call(op, x, dtype="nonsense"))


@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_empty_group_refused(op):
    for shape, axis in (((3, 0), 1), ((0,), None), ((0, 0), 0), ((2, 0, 3), (0, 1))):
        a = np.zeros(shape, np.float32)
        with pytest.raises(ValueError, match="empty sequence"):
            _call(op, a, axis=axis)


@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_keepdims_must_be_bool(op, x):
    raises_untouched(x, TypeError, "keepdims", lambda: _call(op, x, keepdims="yes"))


def test_index_dtype_boundary_uint32_without_reading():
    # a zero-stride view: 2**32 + 1 elements that take no memory
    big = np.broadcast_to(np.float32(1), (2**32 + 1,))
    with pytest.raises(ValueError, match="too many for index dtype uint32"):
        cupyops.argmax(big, dtype=np.uint32)
    with pytest.raises(ValueError, match="too many for index dtype int32"):
        cupyops.argmin(np.broadcast_to(np.float32(1), (2**31 + 1,)), dtype="int32")
    ok = np.broadcast_to(np.float32(1), (2**32,))
    assert cupyops.argmax(ok, dtype=np.uint32) == 0
    assert cupyops.argmax(ok, dtype=np.uint32, tie="last") == 2**32 - 1
    assert cupyops.argmin(np.broadcast_to(np.float32(1), (2**31,)), dtype=np.int32, tie="last") == 2**31 - 1


def test_index_dtype_refused_before_any_work(monkeypatch):
    import cupyops.ops.argreduce.numpy_path as impl

    def boom(*a, **k):
        raise AssertionError("work started before the index dtype was checked")
    monkeypatch.setattr(impl, "argreduce", boom)
    with pytest.raises(ValueError, match="too many"):
        cupyops.argmax(np.broadcast_to(np.int8(1), (2**32 + 1,)), dtype=np.uint32)


def test_coordinate_dtype_too_small():
    a = np.broadcast_to(np.int8(1), (2**31 + 1,))
    with pytest.raises(ValueError, match="too long for index dtype int32"):
        cupyops.argwhere(a, dtype=np.int32)
    with pytest.raises(ValueError, match="too long for index dtype int32"):
        cupyops.nonzero_coordinates(a, dtype=np.int32, size=2)


@pytest.mark.parametrize("op", ["argwhere", "nonzero_coordinates"])
def test_coordinate_dtype_errors(op, x):
    raises_untouched(x, TypeError, "dtype must be one of", lambda: _call(op, x, dtype=np.int8))


def test_nonzero_of_0d_refused():
    a = np.array(1.0)
    raises_untouched(a, ValueError, "0-d", lambda: cupyops.nonzero(a))


def test_nonzero_coordinates_argument_errors(x):
    raises_untouched(x, ValueError, "size must be non-negative",
                     lambda: cupyops.nonzero_coordinates(x, size=-1))
    raises_untouched(x, TypeError, "size must be",
                     lambda: cupyops.nonzero_coordinates(x, size=2.5))
    raises_untouched(x, ValueError, "fill_value .* does not fit",
                     lambda: cupyops.nonzero_coordinates(x, size=2, fill_value=-1, dtype=np.uint32))
    raises_untouched(x, ValueError, "fill_value .* does not fit",
                     lambda: cupyops.nonzero_coordinates(x, size=2, fill_value=2**31, dtype=np.int32))
    raises_untouched(x, TypeError, "fill_value must be",
                     lambda: cupyops.nonzero_coordinates(x, size=2, fill_value=0.5))


def test_out_errors(x):
    good = np.empty(3, np.int64)
    cupyops.argmax(x, axis=0, out=good)
    raises_untouched(x, ValueError, "out has shape",
                     lambda: cupyops.argmax(x, axis=0, out=np.empty(2, np.int64)))
    raises_untouched(x, ValueError, "out has shape",
                     lambda: cupyops.argmax(x, axis=0, keepdims=True, out=np.empty(3, np.int64)))
    raises_untouched(x, TypeError, "out has dtype",
                     lambda: cupyops.argmax(x, axis=0, dtype=np.int32, out=np.empty(3, np.int64)))
    raises_untouched(x, TypeError, "out must be a numpy array",
                     lambda: cupyops.argmax(x, axis=0, out=[0, 0, 0]))
    ro = np.empty(3, np.int64)
    ro.flags.writeable = False
    raises_untouched(x, ValueError, "read-only", lambda: cupyops.argmax(x, axis=0, out=ro))
    raises_untouched(x, TypeError, "out has dtype",
                     lambda: cupyops.hardmax(x, out=np.empty(x.shape, np.float64)))


def test_out_overlapping_input_refused():
    a = np.array([[3, 1, 2], [0, 5, 5]], np.int64)
    snap = a.copy()
    with pytest.raises(ValueError, match="overlaps"):
        cupyops.argmax(a, axis=0, out=a[0])
    with pytest.raises(ValueError, match="overlaps"):
        cupyops.hardmax(a, out=a)
    np.testing.assert_array_equal(a, snap)
    b = np.zeros(8, np.int64)
    # disjoint halves of one buffer are fine
    cupyops.argmax(b[:4].reshape(2, 2), axis=0, out=b[4:6])


@pytest.mark.parametrize("op", ALL_OPS)
def test_device_errors(op, x, monkeypatch):
    raises_untouched(x, ValueError, "device must be", lambda: _call(op, x, device="tpu"))
    raises_untouched(x, TypeError, "device must be", lambda: _call(op, x, device=3.5))
    raises_untouched(x, TypeError, "device must be", lambda: _call(op, x, device=True))
    raises_untouched(x, ValueError, "GPU number", lambda: _call(op, x, device=-1))
    monkeypatch.setenv("CUPYOPS_DEVICE", "quantum")
    raises_untouched(x, ValueError, "CUPYOPS_DEVICE", lambda: _call(op, x))


@pytest.mark.parametrize("name", ["CUDA", " cuda ", 0, "cuda:0", "SIMT", "Cpu"])
def test_one_device_parser_reads_cpu_simt_and_cuda_names_alike(name):
    """precompile and the functions read device names alike (issue 34: precompile took 0 and
    refused "CUDA", argmax the other way round)."""
    from cupyops.core.devices import parse_device_name
    kind, _ = parse_device_name(name)
    x = np.arange(6.0)
    outcomes = []
    for call in (lambda: cupyops.argmax(x, device=name),
                 lambda: cupyops.precompile(dtypes=[np.float64], device=name)):
        try:
            call()
            outcomes.append("ran")
        except RuntimeError as exc:      # the device is not available here: the same message
            outcomes.append(str(exc).split(" asks for")[1])
    assert outcomes[0] == outcomes[1] or "ran" in outcomes[0] and "ran" in outcomes[1], outcomes
    assert kind in ("cuda", "simt", "cpu")


def test_import_does_not_import_cupy_or_compile():
    import subprocess
    import sys
    code = ("import sys, cupyops, numpy as np; cupyops.argwhere(np.eye(3)); "
            "cupyops.count_nonzero(np.eye(3), axis=0); "
            "assert 'cupy' not in sys.modules, 'cupy imported'; "
            "assert 'cupyops.simt' not in sys.modules or True; print('ok')")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr


def test_cuda_device_without_gpu_is_a_clear_error():
    from cupyops.core.devices import cuda_status
    if cuda_status()[0]:
        pytest.skip("a GPU is present")
    x = np.ones(3, np.float32)
    raises_untouched(x, RuntimeError, "device='cuda' asks for a CUDA GPU", lambda: cupyops.argmax(x, device="cuda"))
    raises_untouched(x, RuntimeError, "not available here", lambda: cupyops.argwhere(x, device="cuda:0"))


@pytest.mark.parametrize("device,unavailable", [("cuda", "cuda"), ("simt", "simt")])
def test_argument_errors_come_before_device_errors_of_cuda_and_simt(device, unavailable, monkeypatch):
    """A device that cannot run here is a RuntimeError only for a call whose arguments are
    good: a bad argument gets its own error on any machine (issue 25)."""
    from cupyops import _call
    from cupyops.core import devices as _devices
    from cupyops.core import placement as _placement
    if unavailable == "simt":
        monkeypatch.setattr(_placement, "simt_compiler_found", lambda: False)
        monkeypatch.setattr(_devices, "simt_status", lambda: (False, "no C++ compiler"))
    elif _devices.cuda_status()[0]:
        pytest.skip("a GPU is present")
    _call.clear()
    x = np.ones((3, 4), np.float32)
    bad = [
        (np.exceptions.AxisError, lambda: cupyops.argmax(x, axis=5, device=device)),
        (TypeError, lambda: cupyops.argmax(x.astype(object), device=device)),
        (ValueError, lambda: cupyops.argmin(x, tie="middle", device=device)),
        (TypeError, lambda: cupyops.argmax(x, dtype=np.float32, device=device)),
        (ValueError, lambda: cupyops.argmax(np.ones((0, 2)), axis=0, device=device)),
        (TypeError, lambda: cupyops.hardmax(x.astype("M8[s]"), device=device)),
        (TypeError, lambda: cupyops.argwhere(x, dtype=np.int8, device=device)),
        (ValueError, lambda: cupyops.nonzero(np.float32(1), device=device)),
        (np.exceptions.AxisError, lambda: cupyops.count_nonzero(x, axis=2, device=device)),
        (ValueError, lambda: cupyops.nonzero_coordinates(x, size=-1, device=device)),
        (TypeError, lambda: cupyops.argmax(x, keepdims="yes", device=device)),
    ]
    for error, call in bad:
        with pytest.raises(error):
            call()
    for call in (lambda: cupyops.argmax(x, axis=1, device=device),
                 lambda: cupyops.nonzero_coordinates(x, size=3, device=device),
                 lambda: cupyops.count_nonzero(x, device=device)):
        with pytest.raises(RuntimeError, match="not available here"):
            call()


@pytest.mark.parametrize("op", ["argmax", "argmin", "hardmax", "count_nonzero"])
def test_axis_error_names_the_op_once(op, x):
    """No stutter ("argmax: axis: axis 2 ..."): the op, then NumPy's own wording."""
    for axis, shown in ((2, 2), ((0, -3), -3)):
        with pytest.raises(np.exceptions.AxisError) as info:
            _call(op, x, axis=axis)
        assert str(info.value) == f"{op}: axis {shown} is out of bounds for array of dimension 2"


def test_out_dtype_error_lists_every_accepted_dtype(x):
    from cupyops.ops.argreduce.rules import INDEX_DTYPES
    names = [d.name for d in INDEX_DTYPES]
    assert len(names) >= 4
    for kw in ({}, {"dtype": np.int32}):
        with pytest.raises(TypeError, match="out has dtype float32") as info:
            cupyops.argmax(x, axis=0, out=np.empty(3, np.float32), **kw)
        for name in names:
            assert name in str(info.value), (kw, str(info.value))
    with pytest.raises(TypeError, match="expected int32, as dtype=int32 was given"):
        cupyops.argmin(x, axis=0, dtype=np.int32, out=np.empty(3, np.int64))
    with pytest.raises(TypeError, match="expected float32, x's dtype"):
        cupyops.hardmax(x, out=np.empty(x.shape, np.float64))


# --------------------------------------------------------------------------- no GPU

@pytest.fixture
def fresh_cuda_status():
    from cupyops.core import devices as _devices
    _devices.cuda_status.cache_clear()
    yield
    _devices.cuda_status.cache_clear()


def _cupy_without_gpu(count=0, error=None):
    """A stand-in CuPy that imports but finds no GPU (count 0, or the runtime raising)."""
    import types

    def get_count():
        if error is not None:
            raise error
        return count
    fake = types.ModuleType("cupy")
    fake.ndarray = type("StandInCupyArray", (), {})
    fake.cuda = types.SimpleNamespace(runtime=types.SimpleNamespace(getDeviceCount=get_count),
                                      Device=type("StandInDevice", (), {}))
    return fake


@pytest.mark.parametrize("where", ["argument", "environment"])
@pytest.mark.parametrize("cupy_state", ["missing", "no-gpu", "runtime-error"])
@pytest.mark.parametrize("op", ALL_OPS)
def test_cuda_unavailable_says_who_asked_and_why(op, where, cupy_state, x, monkeypatch,
                                                 fresh_cuda_status):
    import sys
    if cupy_state == "missing":
        monkeypatch.setitem(sys.modules, "cupy", None)     # import cupy -> ImportError
    else:
        err = RuntimeError("cudaErrorNoDevice: no CUDA-capable device is detected") \
            if cupy_state == "runtime-error" else None
        monkeypatch.setitem(sys.modules, "cupy", _cupy_without_gpu(error=err))
    if where == "environment":
        monkeypatch.setenv("CUPYOPS_DEVICE", "cuda")
        kw, asked, not_asked = {}, "CUPYOPS_DEVICE='cuda'", "device='cuda'"
    else:
        monkeypatch.delenv("CUPYOPS_DEVICE", raising=False)
        kw, asked, not_asked = {"device": "cuda"}, "device='cuda'", "CUPYOPS_DEVICE"
    snap = _snapshot(x)
    with pytest.raises(RuntimeError) as info:
        _call(op, x, **kw)
    _assert_untouched(x, snap)
    msg = str(info.value)
    assert msg.startswith(f"{op}: {asked}"), msg         # the function's name first
    assert not_asked not in msg.replace(asked, ""), msg
    if cupy_state == "missing":
        assert "CuPy is not installed" in msg and "'.[cuda13]'" in msg and "'.[cuda12]'" in msg
        assert "checkout" in msg
    else:
        assert "not available here: no GPU found (CuPy" in msg
        assert "[cuda13]" not in msg
    if cupy_state == "runtime-error":
        assert "cudaErrorNoDevice" in msg
