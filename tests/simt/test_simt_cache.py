"""The simt build cache under parallel first use, damage and odd folders (issue 29).

Every test works in its own temporary cache folder (never the default one).  The runtime library
(~4 s to build) is built once for the module and copied into each folder that needs it; the
kernels are tiny.  Fresh processes run ``_KERNEL`` (or ``_RACE``) with ``CUPYOPS_SIMT_CACHE`` set.
"""

import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np
import pytest

import cupyops.simt as simt
from cupyops.simt import _build, _cache

ROOT = Path(simt.__file__).resolve().parents[2]

# a fresh process: builds (or loads) the module of `tag` and checks its answer
_KERNEL = r'''
import sys, numpy as np, cupyops.simt as simt
tag, token = int(sys.argv[1]), sys.argv[2]
src = 'extern "C" __global__ void k(int* p) { p[threadIdx.x] = threadIdx.x * 3 + %d; } // %s' % (tag, token)
p = np.zeros(8, np.int32)
simt.RawModule(code=src).get_function("k")(1, 8, (p,))
assert (p == np.arange(8) * 3 + tag).all(), p
print("OK", simt._build.cache_dir())
'''


def _src(tag, token):
    return 'extern "C" __global__ void k(int* p) { p[threadIdx.x] = threadIdx.x * 3 + %d; } // %s' % (tag, token)


def _env(cache, **extra):
    env = dict(os.environ, CUPYOPS_SIMT_CACHE=str(cache))
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    env.update({k: str(v) for k, v in extra.items()})
    return env


def _run(cache, tag, token, *, prefix=(), timeout=120, **extra):
    return subprocess.run([*prefix, sys.executable, "-c", _KERNEL, str(tag), token], env=_env(cache, **extra),
                          capture_output=True, text=True, timeout=timeout)


def _ok(r):
    assert r.returncode == 0 and "OK" in r.stdout, f"rc={r.returncode}\n{r.stdout}\n{r.stderr}"


def _leftovers(folder):
    return sorted(p.name for p in Path(folder).iterdir() if ".tmp" in p.name or p.name.endswith(".lock"))


@pytest.fixture(scope="module")
def runtime_files(tmp_path_factory):
    """The runtime library and its .sum, built once in a folder of this module."""
    d = tmp_path_factory.mktemp("simt-runtime")
    old = os.environ.get("CUPYOPS_SIMT_CACHE")
    os.environ["CUPYOPS_SIMT_CACHE"] = str(d)
    try:
        so = _build.build_runtime()
    finally:
        if old is None:
            del os.environ["CUPYOPS_SIMT_CACHE"]
        else:
            os.environ["CUPYOPS_SIMT_CACHE"] = old
    return [so, so.with_suffix(".sum")]


def _seed(folder, runtime_files):
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for f in runtime_files:
        shutil.copy2(f, folder / f.name)
    return folder


@pytest.fixture(scope="module")
def built_entry(tmp_path_factory, runtime_files):
    """A folder with the runtime and the module of (tag 7, token): (folder, token, module path)."""
    d = _seed(tmp_path_factory.mktemp("simt-built"), runtime_files)
    token = uuid.uuid4().hex
    r = _run(d, 7, token)
    _ok(r)
    mods = list(d.glob("mod-*.so"))
    assert len(mods) == 1
    return d, token, mods[0]


# ---------------------------------------------------------------- parallel first use
_RACE = r'''
import os, sys, time, numpy as np, cupyops.simt as simt
me, n, rounds, token, sync = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
fails = 0
for r in range(rounds):
    open(os.path.join(sync, f"{r}-{me}"), "w").close()
    t0 = time.monotonic()
    while sum(f.startswith(f"{r}-") for f in os.listdir(sync)) < n and time.monotonic() - t0 < 60:
        time.sleep(0.002)
    src = 'extern "C" __global__ void k(int* p) { p[threadIdx.x] = threadIdx.x * 5 + %d; } // %s' % (r, token)
    try:
        p = np.zeros(8, np.int32)
        simt.RawModule(code=src).get_function("k")(1, 8, (p,))
        assert (p == np.arange(8) * 5 + r).all(), p
    except Exception as e:
        fails += 1
        print("FAIL", r, repr(e), flush=True)
print("fails", fails)
sys.exit(1 if fails else 0)
'''


def test_parallel_first_use(tmp_path):
    """6 processes build the runtime and 3 new modules at the same moment on an empty folder: no
    failure, one compile of each (the others wait on the lock), and a fresh process then uses the
    settled cache without compiling anything."""
    cache, sync, log = tmp_path / "cache", tmp_path / "sync", tmp_path / "cxx.log"
    sync.mkdir()
    cxx = tmp_path / "cxx"
    cxx.write_text(f'#!/bin/sh\necho "$*" >> {log}\nexec {_build.compiler()} "$@"\n')
    cxx.chmod(0o755)
    n, rounds, token = 6, 3, uuid.uuid4().hex
    env = _env(cache, CUPYOPS_SIMT_CXX=cxx)
    procs = [subprocess.Popen([sys.executable, "-c", _RACE, str(i), str(n), str(rounds), token, str(sync)],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for i in range(n)]
    outs = [p.communicate(timeout=300)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), "\n".join(outs)

    def compiles():
        lines = log.read_text().splitlines()
        return (sum("simt_runtime.cpp" in ln for ln in lines),
                sum(" -c " in f" {ln} " and " -include " in f" {ln} " for ln in lines))

    assert compiles() == (1, rounds)
    # the precompiled simt_cuda.h (_build.precompiled_header) once, for every module
    assert sum("c++-header" in ln for ln in log.read_text().splitlines()) == 1
    assert len(list(cache.glob("mod-*.so"))) == rounds
    assert _leftovers(cache) == []
    # a fresh process on the settled cache: every module loads, nothing is compiled again
    (tmp_path / "sync2").mkdir()
    r = subprocess.run([sys.executable, "-c", _RACE, "0", "1", str(rounds), token, str(tmp_path / "sync2")],
                       env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert compiles() == (1, rounds)
    assert "cupyops.simt" not in r.stderr, r.stderr


def test_lock_serializes_processes(tmp_path):
    """locked() holds out another process (flock), and removes its lock file."""
    target = tmp_path / "entry.bin"
    code = ("import sys, time; from cupyops.simt import _cache\n"
            "with _cache.locked(sys.argv[1]):\n"
            "    print('in', flush=True); time.sleep(0.5)\n")
    p = subprocess.Popen([sys.executable, "-c", code, str(target)], env=_env(tmp_path / "unused"),
                         stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "in"
    t0 = time.monotonic()
    with _cache.locked(target):
        waited = time.monotonic() - t0
    p.wait(timeout=30)
    assert waited > 0.2
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(TimeoutError):
        p = subprocess.Popen([sys.executable, "-c", code, str(target)], env=_env(tmp_path / "unused"),
                             stdout=subprocess.PIPE, text=True)
        try:
            assert p.stdout.readline().strip() == "in"
            with _cache.locked(target, timeout=0.1):
                pass
        finally:
            p.wait(timeout=30)


# ---------------------------------------------------------------- damaged entries
def _foreign_library(path):
    """A valid shared library that is not a kernel module (lacks __simt_tls_anchor)."""
    c = path.with_name("foreign.c")
    c.write_text("int not_a_module(void) { return 1; }\n")
    subprocess.run(["gcc", "-shared", "-fPIC", str(c), "-o", str(path)], check=True)
    c.unlink()


def _resum(so):
    """Record digests that match the (damaged) files: only the ELF check or dlopen can tell."""
    _cache.record_digests(so.with_suffix(".sum"), [so, so.with_suffix(".stack")])


_DAMAGE = {
    "half": lambda so: os.truncate(so, so.stat().st_size // 2),
    "zero": lambda so: os.truncate(so, 0),
    "garbage": lambda so: so.write_bytes(os.urandom(so.stat().st_size)),
    "garbage-in-place": lambda so: so.open("r+b").write(b"\0" * 4096),
    "no-sum": lambda so: so.with_suffix(".sum").unlink(),
    "bad-stack": lambda so: so.with_suffix(".stack").write_text("x"),
    "half-resummed": lambda so: (os.truncate(so, so.stat().st_size // 2), _resum(so)),
    "garbage-resummed": lambda so: (so.write_bytes(os.urandom(so.stat().st_size)), _resum(so)),
    "foreign-resummed": lambda so: (_foreign_library(so), _resum(so)),
}


@pytest.mark.parametrize("damage", list(_DAMAGE))
def test_damaged_module_is_rebuilt(tmp_path, built_entry, damage):
    """A damaged cached module: a fresh process gives the right answer, says so on stderr (naming
    the cache folder), and leaves a valid entry behind."""
    src_dir, token, so0 = built_entry
    cache = tmp_path / "cache"
    shutil.copytree(src_dir, cache)
    so = cache / so0.name
    _DAMAGE[damage](so)
    r = _run(cache, 7, token)
    _ok(r)
    assert str(cache) in r.stderr and "rebuilding" in r.stderr, r.stderr
    assert sum("cupyops.simt:" in ln for ln in r.stderr.splitlines()) == 1, r.stderr
    assert _cache.check_digests(so.with_suffix(".sum"), [so.name, so.with_suffix(".stack").name]) is None
    assert _build._elf_problem(so.read_bytes()) is None
    assert _leftovers(cache) == []
    r = _run(cache, 7, token)  # and the next process is quiet
    _ok(r)
    assert "cupyops.simt" not in r.stderr, r.stderr


def test_damaged_runtime_is_rebuilt(tmp_path, built_entry):
    src_dir, token, _ = built_entry
    cache = tmp_path / "cache"
    shutil.copytree(src_dir, cache)
    rt = next(cache.glob("simt_runtime-*.so"))
    os.truncate(rt, rt.stat().st_size // 2)
    r = _run(cache, 7, token)
    _ok(r)
    assert str(cache) in r.stderr and rt.stem in r.stderr, r.stderr
    assert _cache.check_digests(rt.with_suffix(".sum"), [rt.name], _build._verify_entry) is None


@pytest.mark.parametrize("damage", ["half", "foreign-resummed"])
def test_recovery_in_process(tmp_path, monkeypatch, capfd, runtime_files, damage):
    """This process meets the damaged file (found by its digest, or only when it fails to load)
    and recovers without a restart."""
    cache = _seed(tmp_path / "cache", runtime_files)
    monkeypatch.setenv("CUPYOPS_SIMT_CACHE", str(cache))
    src = _src(11, uuid.uuid4().hex)
    so = _build.build_module(src, (), ["k"], "kernel.cu")  # what RawModule(code=src) builds
    _DAMAGE[damage](so)
    capfd.readouterr()
    p = np.zeros(8, np.int32)
    simt.RawModule(code=src).get_function("k")(1, 8, (p,))
    np.testing.assert_array_equal(p, np.arange(8) * 3 + 11)
    assert str(cache) in capfd.readouterr().err


def test_stale_temporary_files_removed(tmp_path, monkeypatch, runtime_files):
    cache = _seed(tmp_path / "cache", runtime_files)
    monkeypatch.setenv("CUPYOPS_SIMT_CACHE", str(cache))
    old = [cache / "mod-0123.so.99-abcd.tmp.so", cache / "mod-0123.so.99-abcd.tmp.o", cache / "x.json.1-2.tmp"]
    new = cache / "mod-4567.so.98-abcd.tmp.so"
    for f in old + [new]:
        f.write_bytes(b"\0" * 100)
    two_hours_ago = time.time() - 7200
    for f in old:
        os.utime(f, (two_hours_ago, two_hours_ago))
    _build.build_module(_src(12, uuid.uuid4().hex), (), ["k"], "kernel.cu")
    assert [f for f in old if f.exists()] == []
    assert new.exists()  # may be another process's build in progress


def test_atomic_write_and_digests(tmp_path):
    f = tmp_path / "a.bin"
    _cache.atomic_write_bytes(f, b"one")
    _cache.atomic_write_bytes(f, b"two")
    assert f.read_bytes() == b"two" and sorted(p.name for p in tmp_path.iterdir()) == ["a.bin"]
    _cache.record_digests(tmp_path / "a.sum", [f])
    assert _cache.check_digests(tmp_path / "a.sum", ["a.bin"]) is None
    assert _cache.check_digests(tmp_path / "b.sum", ["b.bin"]) == "missing"
    assert "not listed" in _cache.check_digests(tmp_path / "a.sum", ["a.bin", "c.bin"])
    f.write_bytes(b"tw0")  # same size, changed in place
    assert "sha256" in _cache.check_digests(tmp_path / "a.sum", ["a.bin"])
    (tmp_path / "a.sum").write_bytes(b"\0garbage")
    assert "damaged" in _cache.check_digests(tmp_path / "a.sum", ["a.bin"])
    assert _build._elf_problem(b"") and _build._elf_problem(b"\x7fELF" + b"\0" * 60)


# ---------------------------------------------------------------- odd folders
def _seed_fallback(tmpdir, uid, runtime_files):
    """The private temporary folder a process of `uid` falls back to, with the runtime in it."""
    fb = _seed(Path(tmpdir) / f"cupyops-simt-{uid}", runtime_files)
    fb.chmod(0o700)
    if os.geteuid() == 0 and uid != 0:
        for p in [fb, *fb.iterdir()]:
            os.chown(p, uid, uid)
    return fb


def test_cache_variable_is_a_file(tmp_path, runtime_files):
    not_a_dir = tmp_path / "cache-file"
    not_a_dir.write_text("not a folder")
    tmpdir = tmp_path / "tmp"
    fb = _seed_fallback(tmpdir, os.getuid(), runtime_files)
    r = _run(not_a_dir, 3, uuid.uuid4().hex, TMPDIR=tmpdir)
    _ok(r)
    assert "CUPYOPS_SIMT_CACHE" in r.stderr and str(not_a_dir) in r.stderr, r.stderr
    assert f"OK {fb}" in r.stdout
    assert len(list(fb.glob("mod-*.so"))) == 1
    assert not_a_dir.read_text() == "not a folder"


def _unprivileged():
    """(prefix of the command, uid) that runs a process without the power to write anywhere."""
    if os.geteuid() != 0:
        return (), os.getuid()
    setpriv = shutil.which("setpriv")
    if not setpriv:
        pytest.skip("running as root (which ignores permission bits) and setpriv is not available to drop them")
    return (setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"), 65534


@pytest.fixture
def shared_tmp():
    """A folder under the system temporary folder that an unprivileged user can reach (pytest's
    tmp_path is inside a folder of mode 0700)."""
    d = Path(tempfile.mkdtemp(prefix="cupyops-simt-test-"))
    d.chmod(0o755)
    try:
        yield d
    finally:
        for p in [d, *d.rglob("*")]:
            if p.is_dir() and not p.is_symlink():
                p.chmod(0o755)
        shutil.rmtree(d, ignore_errors=True)


def test_read_only_empty_folder(shared_tmp, runtime_files):
    prefix, uid = _unprivileged()
    cache = shared_tmp / "cache"
    cache.mkdir(mode=0o555)
    cache.chmod(0o555)
    tmpdir = shared_tmp / "tmp"
    tmpdir.mkdir()
    tmpdir.chmod(0o1777)
    fb = _seed_fallback(tmpdir, uid, runtime_files)
    r = _run(cache, 4, uuid.uuid4().hex, prefix=prefix, TMPDIR=tmpdir)
    _ok(r)
    assert "CUPYOPS_SIMT_CACHE" in r.stderr and str(cache) in r.stderr, r.stderr
    assert list(cache.iterdir()) == []
    assert len(list(fb.glob("mod-*.so"))) == 1


def test_read_only_filled_folder(shared_tmp, runtime_files):
    """A read-only cache that is already filled keeps working: no lock, no write, no word."""
    prefix, uid = _unprivileged()
    cache = _seed(shared_tmp / "cache", runtime_files)
    token = uuid.uuid4().hex
    _ok(_run(cache, 5, token))
    for p in cache.iterdir():
        p.chmod(0o444)
    cache.chmod(0o555)
    before = sorted(p.name for p in cache.iterdir())
    tmpdir = shared_tmp / "tmp"
    tmpdir.mkdir()
    tmpdir.chmod(0o1777)
    r = _run(cache, 5, token, prefix=prefix, TMPDIR=tmpdir)
    _ok(r)
    assert "cupyops.simt" not in r.stderr, r.stderr
    assert sorted(p.name for p in cache.iterdir()) == before
    assert list(tmpdir.iterdir()) == []


def test_no_writable_folder_names_the_variable(tmp_path, monkeypatch):
    """Neither the folder nor a temporary one can be written: the error names the variable."""
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    monkeypatch.setenv("CUPYOPS_TEST_CACHE", str(blocker / "cache"))
    monkeypatch.setattr(_cache.tempfile, "gettempdir", lambda: str(blocker))
    c = _cache.Cache("CUPYOPS_TEST_CACHE", lambda: blocker, "test", "cupyops-test")
    with pytest.raises(_cache.CacheError, match="CUPYOPS_TEST_CACHE"):
        c.entry("x", (".bin",), lambda tmp: Path(tmp).write_bytes(b"1") and {})
