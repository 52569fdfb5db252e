"""Where the caches live (issue 37): one function decides (cupyops.core.caches.cache_dir), every
cache honours XDG_CACHE_HOME, then its CUPYOPS_* override; ``python -m cupyops info`` lists them
with their sizes, and the versions, devices and threads."""
import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

from cupyops.core import caches

ROOT = pathlib.Path(__file__).resolve().parents[1]
_ALL_VARS = ["XDG_CACHE_HOME", "CUPYOPS_CACHE_DIR"] + [
    c.variable for c in caches.CACHES.values() if c.variable]


@pytest.fixture
def clean_env(monkeypatch, tmp_path):
    for v in _ALL_VARS:
        monkeypatch.delenv(v, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return tmp_path


@pytest.mark.parametrize("name", list(caches.CACHES))
def test_precedence(name, clean_env, monkeypatch):
    tmp = clean_env
    own = caches.CACHES[name].variable
    assert caches.cache_dir(name) == tmp / "home" / ".cache" / "cupyops" / name
    assert caches.chosen_by(name) == "the default"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/dir")      # ignored, as the spec says
    assert caches.cache_dir(name) == tmp / "home" / ".cache" / "cupyops" / name
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp / "xdg"))
    assert caches.cache_dir(name) == tmp / "xdg" / "cupyops" / name
    assert caches.chosen_by(name) == "XDG_CACHE_HOME"
    monkeypatch.setenv("CUPYOPS_CACHE_DIR", "")                # empty: unset
    assert caches.cache_dir(name) == tmp / "xdg" / "cupyops" / name
    monkeypatch.setenv("CUPYOPS_CACHE_DIR", str(tmp / "root"))
    assert caches.cache_dir(name) == tmp / "root" / name
    assert caches.chosen_by(name) == "CUPYOPS_CACHE_DIR"
    if own:
        monkeypatch.setenv(own, str(tmp / "own"))
        assert caches.cache_dir(name) == tmp / "own"
        assert caches.chosen_by(name) == own


def _in_fresh_process(code, env):
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       cwd=str(ROOT), timeout=300)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def _env(tmp_path, **kw):
    env = {k: v for k, v in os.environ.items() if k not in _ALL_VARS}
    env.update(HOME=str(tmp_path / "home"), **kw)
    return env


def test_the_simt_cache_honours_xdg_cache_home(tmp_path):
    """The simt kernel cache wrote to ~/.cache/cupyops/simt whatever XDG_CACHE_HOME said."""
    code = "from cupyops.simt import _build; print(_build.cache_dir())"
    xdg = tmp_path / "xdg"
    assert _in_fresh_process(code, _env(tmp_path, XDG_CACHE_HOME=str(xdg))) == \
        str(xdg / "cupyops" / "simt")
    assert _in_fresh_process(code, _env(tmp_path, XDG_CACHE_HOME=str(xdg),
                                        CUPYOPS_CACHE_DIR=str(tmp_path / "root"))) == \
        str(tmp_path / "root" / "simt")
    assert _in_fresh_process(code, _env(tmp_path, XDG_CACHE_HOME=str(xdg),
                                        CUPYOPS_SIMT_CACHE=str(tmp_path / "own"))) == \
        str(tmp_path / "own")


def test_the_nvrtc_and_test_caches_come_from_the_same_function(clean_env, monkeypatch):
    from cupyops.tools import nvrtc
    sys.path.insert(0, str(ROOT / "tests"))
    import _cupy_extras
    monkeypatch.setenv("XDG_CACHE_HOME", str(clean_env / "xdg"))
    assert nvrtc.default_cache_dir() == caches.cache_dir("nvrtc-checks")
    assert nvrtc.cache_root() == caches.cache_root() == clean_env / "xdg" / "cupyops"
    assert _cupy_extras.cache_folder() == caches.cache_dir("test")


def test_no_cache_folder_is_chosen_anywhere_else():
    """Only cupyops/core/caches.py spells the default folder or reads the cache variables."""
    spelled = re.compile(r"""["'](~/)?\.cache["'/]|environ.*XDG_CACHE_HOME""")
    reads = re.compile(r"environ(\.get\(|\[)\s*[\"'](CUPYOPS_(SIMT|TEST)_CACHE|CUPYOPS_CACHE_DIR)")
    bad = []
    for path in sorted(list((ROOT / "cupyops").rglob("*.py")) + list((ROOT / "tests").glob("*.py"))):
        if path.name in ("caches.py", "test_caches.py"):
            continue
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if spelled.search(line) or reads.search(line):
                bad.append(f"{path.relative_to(ROOT)}:{i}: {line.strip()}")
    assert not bad, "\n".join(bad)


def test_the_cold_start_isolates_every_cache(tmp_path, monkeypatch):
    from cupyops.bench import bench
    monkeypatch.setenv("CUPYOPS_SIMT_CACHE", "/somewhere/else")
    env = bench._cache_env(tmp_path)
    assert env["CUPY_CACHE_DIR"] == str(tmp_path)
    assert env["CUPYOPS_CACHE_DIR"] == str(tmp_path / "cupyops")
    assert not any(c.variable in env for c in caches.CACHES.values() if c.variable)


def test_info_lists_versions_devices_threads_and_caches(tmp_path):
    xdg = tmp_path / "xdg"
    (xdg / "cupyops" / "sass").mkdir(parents=True)
    (xdg / "cupyops" / "sass" / "entry").write_bytes(b"x" * 2500)
    env = _env(tmp_path, XDG_CACHE_HOME=str(xdg), CUPYOPS_SIMT_CACHE=str(tmp_path / "simt"),
               CUPYOPS_NUM_THREADS="1")
    out = _in_fresh_process("from cupyops.__main__ import main; main(['info'])", env)
    for word in ("versions:", "NumPy", "CuPy", "devices:", "simt", "cuda", "default: cpu",
                 "threads: 1", "CUPYOPS_NUM_THREADS=1", "caches ("):
        assert word in out, (word, out)
    lines = {ln.split()[0]: ln for ln in out.splitlines() if ln.startswith("  ")}
    assert str(xdg / "cupyops" / "sass") in lines["sass"] and "2.5 KB" in lines["sass"]
    assert "1 files" in lines["sass"] and "(XDG_CACHE_HOME)" in lines["sass"]
    assert str(tmp_path / "simt") in lines["simt"] and "(CUPYOPS_SIMT_CACHE)" in lines["simt"]
    assert "CUPY_CACHE_DIR" in out or "CuPy's default" in out
    doc = json.loads(_in_fresh_process(
        "from cupyops.__main__ import main; main(['info', '--json'])", env))
    assert doc["threads"]["threads"] == 1 and set(doc["devices"]) == {"cpu", "simt", "cuda"}
    sass = next(c for c in doc["caches"] if c["name"] == "sass")
    assert sass["bytes"] == 2500 and sass["files"] == 1
