"""cupyops.testing.dry_run: the kernel path validates, plans and packs as usual and hands each
launch to the recorder; nothing is compiled or run."""
import numpy as np
import pytest

import cupyops
from cupyops.core import modules as _modules
from cupyops.testing import dry_run, recording


@pytest.fixture
def no_compile(monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("dry_run compiled a module")
    monkeypatch.setattr(_modules, "get_module", refuse)
    monkeypatch.setattr(_modules, "get_function", refuse)


def test_every_op_records_without_compiling(no_compile):
    x = np.random.default_rng(0).random((8, 1000)).astype(np.float32)
    with dry_run(count=7) as rec:
        r = cupyops.argmax(x, axis=1, device="simt")
        h = cupyops.hardmax(x, axis=0, device="simt")
        a = cupyops.argwhere(x, dtype=np.int32, device="simt")
        nz = cupyops.nonzero(x, device="simt")
        c, n = cupyops.nonzero_coordinates(x, size=100, device="simt")
        e, m = cupyops.nonzero_coordinates(x, device="simt")
        k = cupyops.count_nonzero(x, axis=1, device="simt")
    assert r.shape == (8,) and r.dtype == np.int64 and isinstance(r, np.ndarray)
    assert h.shape == x.shape and h.dtype == x.dtype
    assert a.shape == (7, 2) and a.dtype == np.int32
    assert len(nz) == 2 and all(v.shape == (7,) for v in nz)
    assert c.shape == (100, 2) and n.shape == () and e.shape == (7, 2)
    assert k.shape == (8,) and k.dtype == np.int64
    names = [l[0].split("<")[0] for l in rec.launches]
    # argwhere, nonzero and the exact nonzero_coordinates each plan and record both passes
    assert names.count("nonzero_tiles") == 2 + 2 + 1 + 2
    assert rec.d2h_reads == 3
    assert all(isinstance(l[4], tuple) for l in rec.launches)


def test_bad_input_fails_the_same_inside(no_compile):
    for bad in (dict(axis=3), dict(tie="middle"), dict(dtype=np.float32)):
        with pytest.raises(Exception) as plain:
            cupyops.argmax(np.zeros((2, 3), np.float32), device="simt", **bad)
        with dry_run(), pytest.raises(type(plain.value)) as dry:
            cupyops.argmax(np.zeros((2, 3), np.float32), device="simt", **bad)
        assert str(dry.value) == str(plain.value)


def test_dry_run_ends_with_the_block():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    with dry_run():
        pass
    with recording() as t:
        r = cupyops.argmax(x, axis=1, device="simt")
    np.testing.assert_array_equal(r, [3, 3, 3])
    assert t.launches
