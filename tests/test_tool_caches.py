"""The NVRTC-results cache (tools/nvrtc.py, also the issue-rate model's SASS cache) and the simt
NVRTC front end's cache write through the simt build cache's atomic writer, and treat a damaged
entry as a miss (issue 29)."""
import json

import pytest

from cupyops.tools import nvrtc as _nvrtc


def test_cache_entries_are_written_whole(tmp_path, monkeypatch):
    calls = []
    import cupyops.tools.nvrtc as mod
    real = mod.atomic_write_text
    monkeypatch.setattr(mod, "atomic_write_text", lambda p, s: calls.append(p) or real(p, s))
    path = tmp_path / "sub" / "entry.json"
    _nvrtc.write_cache_entry(path, {"a": [1, 2]})
    assert calls == [path] and json.loads(path.read_text()) == {"a": [1, 2]}
    assert [p.name for p in path.parent.iterdir()] == ["entry.json"]   # no temporary left


def test_a_damaged_nvrtc_result_is_compiled_again(tmp_path):
    pytest.importorskip("cuda.bindings.nvrtc")
    ok, why = _nvrtc.available()
    if not ok:
        pytest.skip(why)
    import cupyops  # noqa: F401  (registers the families)
    from cupyops.core import modules
    modules.register_family(modules.SELFTEST_FAMILY)
    fam = modules.get_family("selftest")
    dt = fam.dtypes[0]
    first = _nvrtc.compile_many([(fam, dt, 90)], cache_dir=tmp_path, jobs=1)
    (entry,) = list(tmp_path.glob("*.json"))
    entry.write_text("{ not json")                         # a damaged entry: a miss
    again = _nvrtc.compile_many([(fam, dt, 90)], cache_dir=tmp_path, jobs=1)
    assert [r.kernels.keys() for r in again] == [r.kernels.keys() for r in first]
    assert json.loads(entry.read_text())                  # rewritten whole
