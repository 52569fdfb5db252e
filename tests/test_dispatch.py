"""Array-module detection and device choice, without importing cupy."""
import subprocess
import sys

import numpy as np
import pytest

import cupyops
from cupyops.core import placement as _dispatch
from _devices import KERNEL_DEVICES, ops


def test_numpy_and_array_likes_stay_numpy():
    array_api_compat = pytest.importorskip("array_api_compat")
    for x in (np.arange(4), [0, 1, 2, 0], (1.0, 0.0)):
        r = cupyops.argwhere(x)
        assert isinstance(r, np.ndarray)
        assert array_api_compat.is_numpy_array(r)
        assert not _dispatch.is_cupy_array(r)
        assert array_api_compat.array_namespace(r) is array_api_compat.array_namespace(np.asarray(x))


def test_detection_does_not_import_cupy():
    code = ("import sys, numpy as np; from cupyops.core import placement as _dispatch; "
            "assert not _dispatch.is_cupy_array(np.zeros(2)); "
            "assert 'cupy' not in sys.modules; print('ok')")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr


def test_default_device_from_environment(monkeypatch):
    monkeypatch.delenv("CUPYOPS_DEVICE", raising=False)
    assert _dispatch.place(np.zeros(2), None)[1].kind == "cpu"
    monkeypatch.setenv("CUPYOPS_DEVICE", "simt")
    assert _dispatch.place(np.zeros(2), None)[1].kind == "simt"
    monkeypatch.setenv("CUPYOPS_DEVICE", "")
    assert _dispatch.place(np.zeros(2), None)[1].kind == "cpu"
    # an explicit device wins over the environment
    monkeypatch.setenv("CUPYOPS_DEVICE", "simt")
    assert _dispatch.place(np.zeros(2), "cpu")[1].kind == "cpu"


def test_device_names():
    from cupyops.core.devices import parse_device_name
    assert parse_device_name("CPU") == ("cpu", None)
    assert parse_device_name("cuda:1") == ("cuda", 1)
    with pytest.raises(ValueError):
        parse_device_name("cuda:x")
    assert parse_device_name(0) == ("cuda", 0) == parse_device_name(np.int64(0))
    with pytest.raises(TypeError):
        parse_device_name(True)
    with pytest.raises(TypeError):
        parse_device_name(1.0)
    with pytest.raises(ValueError):
        parse_device_name(-2)


# --------------------------------------------------------------------------- what asarray takes

OPS = ("argmax", "argmin", "hardmax", "argwhere", "nonzero", "count_nonzero",
       "nonzero_coordinates")


class _Tagged(np.ndarray):
    """A subclass whose own methods would mislead the NumPy path if they were called."""

    def __array_finalize__(self, obj):
        self.tag = getattr(obj, "tag", "t")

    def argmax(self, *a, **k):
        raise AssertionError("the subclass's argmax was called")

    def argmin(self, *a, **k):
        raise AssertionError("the subclass's argmin was called")

    def nonzero(self):
        raise AssertionError("the subclass's nonzero was called")


class _HasArray:
    def __init__(self, a):
        self._a = a

    def __array__(self, dtype=None, copy=None):
        return self._a


class _HasInterface:
    def __init__(self, a):
        self._a = a
        self.__array_interface__ = a.__array_interface__


def _plain():
    return np.array([[1, 5, 3, 0], [4, 0, 6, 6], [0, 0, 2, 9]], np.float32)


def _array_likes(tmp_path):
    import array
    base = _plain()
    mm = np.memmap(tmp_path / "mm.bin", dtype=np.float32, mode="w+", shape=base.shape)
    mm[...] = base
    return {
        "matrix": np.matrix(base),
        "memmap": mm,
        "subclass": base.copy().view(_Tagged),
        "list": base.tolist(),
        "tuple": tuple(map(tuple, base.tolist())),
        "__array__": _HasArray(base.copy()),
        "__array_interface__": _HasInterface(base.copy()),
        "array.array": array.array("f", base.ravel().tolist()),   # 1-D
        "memoryview": memoryview(base.copy()),
    }


def _call_op(op, x, device):
    f = getattr(ops(device), op)       # (CuPy input: what cupy.asarray makes of x)
    if op in ("argmax", "argmin"):
        return [f(x), f(x, axis=-1, keepdims=True), f(x, axis=0, tie="last")]
    if op == "hardmax":
        return [f(x), f(x, axis=0)]
    if op == "count_nonzero":
        return [f(x), f(x, axis=-1, keepdims=True)]
    if op == "nonzero_coordinates":
        coords, count = f(x, size=5, fill_value=-1)
        return [coords, count]
    r = f(x)
    return list(r) if isinstance(r, tuple) else [r]


def _device_or_skip(device):
    if device == "simt":
        from cupyops.core.devices import simt_status
        ok, why = simt_status()
        if not ok:
            pytest.skip(why)
    return device


@pytest.mark.filterwarnings("ignore:the matrix subclass:PendingDeprecationWarning")
@pytest.mark.parametrize("device", ["cpu"] + KERNEL_DEVICES)
@pytest.mark.parametrize("op", OPS)
def test_everything_asarray_takes_works_and_gives_plain_arrays(op, device, tmp_path):
    """np.matrix (whose argmax keeps 2-D and crashed the NumPy path), memmap, a subclass with
    its own methods, lists, buffers, __array__ / __array_interface__ objects: the result is the
    plain ndarray's, as a plain ndarray, and the input is untouched."""
    _device_or_skip(device)
    for name, x in _array_likes(tmp_path).items():
        ref_in = np.asarray(x).view(np.ndarray).copy()
        want = _call_op(op, ref_in, device)
        got = _call_op(op, x, device)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert type(g) is np.ndarray, (name, type(g))
            assert g.shape == w.shape and g.dtype == w.dtype, (name, g.shape, w.shape)
            np.testing.assert_array_equal(g, w, err_msg=name)
        np.testing.assert_array_equal(np.asarray(x), ref_in, err_msg=f"{name} was modified")
        if isinstance(x, np.ndarray):
            assert type(x) is not np.ndarray      # the caller's object keeps its class


@pytest.mark.filterwarnings("ignore:the matrix subclass:PendingDeprecationWarning")
def test_matrix_results_are_plain_and_right():
    m = np.matrix([[1, 5, 3], [4, 0, 6]], np.float32)
    h = cupyops.hardmax(m)
    assert type(h) is np.ndarray
    assert h.tolist() == [[0, 1, 0], [0, 0, 1]]
    r = cupyops.argmax(m, axis=1)
    assert type(r) is np.ndarray and r.shape == (2,) and r.tolist() == [1, 2]   # not (2, 1)
    assert cupyops.argmin(m).shape == () and int(cupyops.argmin(m)) == 4
    assert type(cupyops.argwhere(m)) is np.ndarray


@pytest.mark.filterwarnings("ignore:the matrix subclass:PendingDeprecationWarning")
def test_out_may_be_given_with_a_subclass_input():
    m = np.matrix([[1, 5, 3], [4, 0, 6]], np.float32)
    out = np.empty(3, np.int64)
    assert cupyops.argmax(m, axis=0, out=out) is out
    assert out.tolist() == [1, 0, 1]


# --------------------------------------------------------------------------- precompile's device

@pytest.fixture
def fresh_cuda_status():
    from cupyops.core import devices as _devices
    _devices.cuda_status.cache_clear()
    yield
    _devices.cuda_status.cache_clear()


def test_precompile_device_none_is_the_environment_default(monkeypatch, fresh_cuda_status):
    monkeypatch.setitem(sys.modules, "cupy", None)      # any import of cupy raises
    monkeypatch.delenv("CUPYOPS_DEVICE", raising=False)
    assert cupyops.precompile() == []                    # "cpu": nothing to compile
    monkeypatch.setenv("CUPYOPS_DEVICE", "cpu")
    assert cupyops.precompile() == []
    monkeypatch.setenv("CUPYOPS_DEVICE", "cuda")
    with pytest.raises(RuntimeError) as info:
        cupyops.precompile()
    msg = str(info.value)
    assert msg.startswith("CUPYOPS_DEVICE='cuda' asks for a CUDA GPU"), msg
    assert "CuPy is not installed" in msg and "'.[cuda13]'" in msg and "'.[cuda12]'" in msg
    monkeypatch.setenv("CUPYOPS_DEVICE", "tpu")
    with pytest.raises(ValueError, match="CUPYOPS_DEVICE"):
        cupyops.precompile()


@pytest.mark.parametrize("device", ["cuda", "cuda:0", 0])
def test_precompile_without_cupy_says_what_to_install(device, monkeypatch, fresh_cuda_status):
    monkeypatch.setitem(sys.modules, "cupy", None)
    monkeypatch.delenv("CUPYOPS_DEVICE", raising=False)
    with pytest.raises(RuntimeError) as info:
        cupyops.precompile(device=device)
    msg = str(info.value)
    assert not isinstance(info.value, ModuleNotFoundError)
    assert msg.startswith(f"device={device!r} asks for a CUDA GPU"), msg
    assert "'.[cuda13]'" in msg
    # the same wording as a function asked for the same device
    with pytest.raises(RuntimeError) as fn_info:
        cupyops.argmax(np.ones(3), device="cuda")
    fn_msg = str(fn_info.value)
    assert fn_msg.startswith("argmax: "), fn_msg            # the function's name first
    assert fn_msg[len("argmax: "):].split(": ", 1)[1] == msg.split(": ", 1)[1]


def test_precompile_simt_without_compiler_is_clear(monkeypatch):
    from cupyops.core import devices as _devices
    monkeypatch.setenv("CUPYOPS_SIMT_CXX", "no-such-compiler-cupyops")
    with pytest.raises(RuntimeError, match="device='simt' asks for the CPU emulation.*"
                                           "no-such-compiler-cupyops"):
        cupyops.precompile(device="simt")
    assert "simt" not in _devices.available_devices()


# --------------------------------------------------------------------------- simt availability

def _write_script(path, body):
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return str(path)


def test_simt_needs_a_compiler_that_works(tmp_path, monkeypatch):
    """A compiler on PATH that cannot compile is not enough: the probe compiles a trivial
    program, once per compiler (cached)."""
    from cupyops.core import devices as _devices
    calls = tmp_path / "calls"
    broken = _write_script(tmp_path / "broken-cxx",
                           f'echo run >> "{calls}"\necho "fatal error: no such thing" >&2\nexit 1\n')
    monkeypatch.setenv("CUPYOPS_SIMT_CXX", broken)
    ok, why = _devices.simt_status()
    assert not ok and "cannot compile a trivial" in why and "fatal error" in why, why
    assert "simt" not in cupyops.available_devices()
    assert _devices.simt_status() == (ok, why)
    assert calls.read_text().count("run") == 1              # cached: compiled once
    missing = str(tmp_path / "absent-cxx")
    monkeypatch.setenv("CUPYOPS_SIMT_CXX", missing)
    ok, why = _devices.simt_status()
    assert not ok and "not on PATH" in why
    with pytest.raises(RuntimeError, match="device='simt' asks for the CPU emulation"):
        cupyops.argmax(np.ones(3), device="simt")
    monkeypatch.setenv("CUPYOPS_DEVICE", "simt")
    with pytest.raises(RuntimeError, match="^argwhere: CUPYOPS_DEVICE='simt' asks"):
        cupyops.argwhere(np.ones(3))


def test_simt_available_with_the_real_compiler():
    import shutil
    from cupyops.core import devices as _devices
    if shutil.which(_devices.simt_compiler()) is None:
        pytest.skip("no g++ here")
    ok, why = _devices.simt_status()
    assert ok, why
    assert "simt" in cupyops.available_devices()


def test_demo_says_simt_is_missing(tmp_path, monkeypatch, capsys):
    from cupyops.__main__ import demo
    broken = _write_script(tmp_path / "broken-cxx", "exit 1\n")
    monkeypatch.setenv("CUPYOPS_SIMT_CXX", broken)
    assert demo("simt") == 1
    out = capsys.readouterr().out
    assert "simt: no - the C++ compiler" in out
    assert "device simt is not available here" in out and "[ok]" not in out


# --------------------------------------------------------------------------- compile progress

def test_progress_notice_only_when_slow():
    import io
    import time
    from cupyops.core import progress as _progress
    s = io.StringIO()
    with _progress.Notice("compiling X", after=0.05, stream=s) as n:
        time.sleep(0.3)
    assert n.fired and s.getvalue().startswith("cupyops: compiling X ...\n")
    assert "done in" in s.getvalue()
    s = io.StringIO()
    with _progress.Notice("compiling Y", after=0.5, stream=s) as n:
        pass
    time.sleep(0.6)
    assert not n.fired and s.getvalue() == ""


def test_progress_once_per_process(monkeypatch, capsys):
    import time
    from cupyops.core import progress as _progress
    monkeypatch.setattr(_progress, "THRESHOLD_S", 0.05)
    monkeypatch.setattr(_progress, "_announced", False)
    monkeypatch.delenv("CUPYOPS_PROGRESS", raising=False)
    made = []

    def slow_factory(source, options, exprs, device_id):
        time.sleep(0.25)
        made.append(exprs)
        return "module"
    def wrapped(*args):        # a compile as cupyops.core.modules runs it
        with _progress.compiling("simt"):
            return slow_factory(*args)
    assert wrapped("src", (), ("k<float>",), 0) == "module"
    assert wrapped("src", (), ("k<int>",), 0) == "module"
    assert made == [("k<float>",), ("k<int>",)]
    err = capsys.readouterr().err
    assert err.count("cupyops: compiling kernels for the CPU emulation") == 1, err
    assert err.count("done in") == 1
    # precompile's batch: one notice for the batch, none for its modules
    monkeypatch.setattr(_progress, "_announced", False)
    with _progress.batch(2, "simt"):
        wrapped("src", (), ("k<float>",), 0)
        wrapped("src", (), ("k<int>",), 0)
    err = capsys.readouterr().err
    assert err.count("cupyops: precompile: compiling 2 kernel modules") == 1, err
    assert "compiling kernels for the CPU emulation" not in err
    monkeypatch.setattr(_progress, "_announced", False)
    monkeypatch.setenv("CUPYOPS_PROGRESS", "0")
    wrapped("src", (), ("k<float>",), 0)
    assert capsys.readouterr().err == ""


def test_first_simt_call_shows_compile_progress_once(tmp_path):
    """A fresh SIMT cache: the first call compiles (> 1 s), says so once on stderr; the next
    compile (another dtype) stays silent; stdout is untouched."""
    _device_or_skip("simt")
    import os
    code = ("import numpy as np, cupyops\n"
            "cupyops.argmax(np.ones((4, 5), np.float32), axis=1, device='simt')\n"
            "cupyops.argmax(np.ones((4, 5), np.int16), axis=1, device='simt')\n"
            "print('ok')\n")
    env = dict(os.environ, CUPYOPS_SIMT_CACHE=str(tmp_path / "simt"))
    env.pop("CUPYOPS_PROGRESS", None)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "ok\n"
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("cupyops:")]
    assert len(lines) == 2, r.stderr          # the notice and its "done in"
    assert "device='simt'" in lines[0] and "cached on disk" in lines[0]
    assert lines[1].startswith("cupyops: done in ")
