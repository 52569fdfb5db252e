"""Array-module detection and device choice, without importing cupy."""
import subprocess
import sys

import numpy as np
import pytest

import cupyops
from cupyops import _dispatch


def test_numpy_and_array_likes_stay_numpy():
    array_api_compat = pytest.importorskip("array_api_compat")
    for x in (np.arange(4), [0, 1, 2, 0], (1.0, 0.0)):
        r = cupyops.argwhere(x)
        assert isinstance(r, np.ndarray)
        assert array_api_compat.is_numpy_array(r)
        assert not _dispatch.is_cupy_array(r)
        assert array_api_compat.array_namespace(r) is array_api_compat.array_namespace(np.asarray(x))


def test_detection_does_not_import_cupy():
    code = ("import sys, numpy as np; from cupyops import _dispatch; "
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
    assert _dispatch._parse_device_name("CPU") == ("cpu", None)
    assert _dispatch._parse_device_name("cuda:1") == ("cuda", 1)
    with pytest.raises(ValueError):
        _dispatch._parse_device_name("cuda:x")
    with pytest.raises(TypeError):
        _dispatch._parse_device_name(0)
