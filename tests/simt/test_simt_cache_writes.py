"""The simt build cache when writing fails in the middle of a build (issue 38).

A full file system (a 2 MiB tmpfs, filled but for a few KiB) and a folder made read-only while
the compiler runs (a read-only remount: EROFS; a chmod by an unprivileged user: EACCES).  The
call must fall back to the private temporary folder, or, when that is full too, raise a
CacheError naming the folder and the OS error; no temporary or build file may stay behind.

The tmpfs and the remount need a mount namespace: each case runs a fresh process under
``unshare --user --map-root-user --mount`` (skipped where this kernel refuses unprivileged user
namespaces).  The runtime library is built once and copied into each cache folder, so each case
compiles one tiny kernel module.
"""

import os
import shutil
import stat
import subprocess
import sys
import tempfile
import textwrap
import uuid
from pathlib import Path

import pytest

import cupyops.simt as simt
from cupyops.simt import _build, _cache

ROOT = Path(simt.__file__).resolve().parents[2]

# A fresh process: [mount a 2 MiB tmpfs at MNT and fill it but for FREE KiB], then build (or
# load) a tiny kernel module and check its answer; "OK <its folder>" or "ERR <type>: <message>".
_CASE = textwrap.dedent(r'''
    import os, subprocess, sys
    mnt, free_kib, token = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    if free_kib >= 0:
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", mnt], check=True)
    for d in sys.argv[4:]:
        os.makedirs(d, exist_ok=True)
    runtime = os.environ.pop("SEED_RUNTIME", "")
    for f in filter(None, runtime.split(os.pathsep)):
        with open(f, "rb") as src, open(os.path.join(os.environ["CUPYOPS_SIMT_CACHE"],
                                                     os.path.basename(f)), "wb") as dst:
            dst.write(src.read())
    if free_kib >= 0:
        st = os.statvfs(mnt)
        with open(os.path.join(mnt, "filler"), "wb") as f:
            f.write(b"\0" * max(0, st.f_bavail * st.f_frsize - free_kib * 1024))
    if os.environ.get("RO_BIND"):
        subprocess.run(["mount", "--bind", os.environ["RO_BIND"], os.environ["RO_BIND"]], check=True)
    import numpy as np, cupyops.simt as simt
    src = 'extern "C" __global__ void k(int* p) { p[threadIdx.x] = threadIdx.x * 7 + 1; } // ' + token
    p = np.zeros(8, np.int32)
    mod = simt.RawModule(code=src)
    try:
        mod.get_function("k")(1, 8, (p,))
    except Exception as e:
        print("ERR", type(e).__name__ + ":", e)
        sys.exit(0)
    assert (p == np.arange(8) * 7 + 1).all(), p
    print("OK", mod._path.parent)
''')

# CUPYOPS_SIMT_CXX: makes the folder $RO_DIR read-only ($RO_HOW: "remount" or "chmod") as the
# compiler starts its first compile, then runs g++
_READ_ONLY_CXX = textwrap.dedent('''\
    #!/bin/sh
    if [ "$1" != "--version" ] && [ ! -e "$RO_DONE" ]; then
      : > "$RO_DONE"
      if [ "$RO_HOW" = remount ]; then mount -o remount,bind,ro "$RO_DIR"; else chmod a-w "$RO_DIR"; fi
    fi
    exec g++ "$@"
''')


def _namespaces_work() -> str:
    """Why a tmpfs cannot be mounted in an unprivileged mount namespace here ("" if it can)."""
    if not shutil.which("unshare"):
        return "no unshare command"
    d = tempfile.mkdtemp(prefix="cupyops-ns-probe-")
    try:
        r = subprocess.run([*_NS, "mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", d],
                           capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as e:
        return str(e)
    finally:
        os.rmdir(d)
    return "" if r.returncode == 0 else (r.stderr.strip() or f"rc {r.returncode}")


_NS = ("unshare", "--user", "--map-root-user", "--mount")
_NS_WHY = _namespaces_work()
needs_namespaces = pytest.mark.skipif(bool(_NS_WHY), reason=f"no unprivileged mount namespace here: {_NS_WHY}")


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


def _env(cache, tmpdir, runtime_files, **extra):
    env = dict(os.environ, CUPYOPS_SIMT_CACHE=str(cache), TMPDIR=str(tmpdir), CUPYOPS_PROGRESS="0",
               SEED_RUNTIME=os.pathsep.join(map(str, runtime_files)))
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    env.pop("CUPYOPS_SIMT_CXX", None)
    env.update({k: str(v) for k, v in extra.items()})
    return env


def _case(prefix, mnt, free_kib, env, make=()):
    r = subprocess.run([*prefix, sys.executable, "-c", _CASE, str(mnt), str(free_kib), uuid.uuid4().hex,
                        *map(str, make)], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"rc={r.returncode}\n{r.stdout}\n{r.stderr}"
    return r


def _left(folder):
    """What a build may leave: temporary files, lock files, private build folders."""
    if not Path(folder).exists():
        return []
    return sorted(p.name for p in Path(folder).iterdir()
                  if ".tmp" in p.name or p.name.endswith(".lock") or "-build-" in p.name)


@needs_namespaces
def test_full_cache_folder_falls_back(tmp_path, runtime_files):
    """The cache folder's file system fills up: the module goes to the temporary folder, with a
    warning that names the folder and the error; nothing stays behind in either."""
    mnt, tmpdir = tmp_path / "mnt", tmp_path / "tmp"
    mnt.mkdir()
    tmpdir.mkdir()
    cache = mnt / "cache"
    r = _case(_NS, mnt, 8, _env(cache, tmpdir, runtime_files), [cache])
    assert r.stdout.startswith("OK "), r.stdout + r.stderr
    fallback = Path(r.stdout.split()[1])
    assert fallback.parent == tmpdir and fallback.name.startswith("cupyops-simt-"), r.stdout
    assert "CUPYOPS_SIMT_CACHE" in r.stderr and str(cache) in r.stderr, r.stderr
    assert "No space left on device" in r.stderr, r.stderr
    assert _left(tmpdir) == [] and _left(fallback) == []
    assert [p.name for p in tmpdir.iterdir()] == [fallback.name]
    assert len(list(fallback.glob("mod-*.so"))) == 1


@needs_namespaces
def test_full_temporary_folder_too_names_the_folder_and_the_error(tmp_path, runtime_files):
    """The cache folder and the temporary folder on one full file system: a CacheError that names
    the folder and "No space left on device" (not a compile error with the cause in its log)."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    cache, tmpdir = mnt / "cache", mnt / "tmp"
    r = _case(_NS, mnt, 8, _env(cache, tmpdir, runtime_files), [cache, tmpdir])
    assert r.stdout.startswith("ERR CacheError:"), r.stdout + r.stderr
    assert str(tmpdir) in r.stdout and "No space left on device" in r.stdout, r.stdout
    assert "TMPDIR" in r.stdout


@needs_namespaces
def test_folder_remounted_read_only_mid_compile(tmp_path, runtime_files):
    """The cache folder turns read-only (EROFS) while the compiler runs: the module goes to the
    temporary folder.  Its lock file cannot be removed from a read-only folder; the next build
    there, once it is writable again, removes it."""
    cache, tmpdir = tmp_path / "cache", tmp_path / "tmp"
    cache.mkdir()
    tmpdir.mkdir()
    cxx = tmp_path / "cxx.sh"
    cxx.write_text(_READ_ONLY_CXX)
    cxx.chmod(0o755)
    env = _env(cache, tmpdir, runtime_files, CUPYOPS_SIMT_CXX=cxx, RO_DIR=cache, RO_HOW="remount",
               RO_DONE=tmp_path / "done", RO_BIND=cache)
    r = _case(_NS, tmp_path, -1, env)
    assert (tmp_path / "done").exists(), "the compiler wrapper did not run"
    assert r.stdout.startswith("OK "), r.stdout + r.stderr
    assert Path(r.stdout.split()[1]).parent == tmpdir
    assert str(cache) in r.stderr and "Read-only file system" in r.stderr, r.stderr
    assert [n for n in _left(cache) if not n.endswith(".lock")] == []
    assert _left(tmpdir) == []
    # the folder is writable again (the mount namespace is gone): a build there cleans up
    r = _case((), tmp_path, -1, _env(cache, tmpdir, runtime_files))
    assert r.stdout == f"OK {cache}\n", r.stdout + r.stderr
    assert _left(cache) == []


def _unprivileged():
    """(prefix of the command, uid) of a process without the power to write anywhere."""
    if os.geteuid() != 0:
        return (), os.getuid()
    setpriv = shutil.which("setpriv")
    if not setpriv:
        pytest.skip("running as root (which ignores permission bits) and setpriv is not available to drop them")
    return (setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"), 65534


def test_folder_made_read_only_mid_compile(runtime_files):
    """An unprivileged user's cache folder loses its write permission (EACCES) while the compiler
    runs: the module goes to the temporary folder, with a warning naming the folder."""
    prefix, uid = _unprivileged()
    base = Path(tempfile.mkdtemp(prefix="cupyops-simt-test-"))
    try:
        base.chmod(0o755)
        cache, tmpdir = base / "cache", base / "tmp"
        cache.mkdir()
        tmpdir.mkdir()
        tmpdir.chmod(0o1777)
        cxx = base / "cxx.sh"
        cxx.write_text(_READ_ONLY_CXX)
        cxx.chmod(0o755)
        for f in runtime_files:
            shutil.copy2(f, cache / f.name)
        if os.geteuid() == 0:
            for p in [cache, *cache.iterdir()]:
                os.chown(p, uid, uid)
        env = _env(cache, tmpdir, (), CUPYOPS_SIMT_CXX=cxx, RO_DIR=cache, RO_HOW="chmod",
                   RO_DONE=tmpdir / "done")
        r = _case(prefix, base, -1, env)
        assert (tmpdir / "done").exists(), "the compiler wrapper did not run"
        assert not stat.S_IMODE(cache.stat().st_mode) & 0o222
        assert r.stdout.startswith("OK "), r.stdout + r.stderr
        fallback = Path(r.stdout.split()[1])
        assert fallback.parent == tmpdir
        assert str(cache) in r.stderr and "Permission denied" in r.stderr, r.stderr
        assert [n for n in _left(cache) if not n.endswith(".lock")] == []
        assert _left(tmpdir) == [] and _left(fallback) == []
    finally:
        for p in [base, *base.rglob("*")]:
            if p.is_dir() and not p.is_symlink():
                p.chmod(0o755)
        shutil.rmtree(base, ignore_errors=True)


# ---------------------------------------------------------------- the pieces, without a compiler

def test_write_failure_reads_the_tools_log(tmp_path):
    class Failed(Exception):
        def __init__(self, log):
            super().__init__("compilation failed")
            self.log = log
    ld = Failed("$ g++ ...\n/usr/bin/ld: final link failed: No space left on device\n"
                "collect2: error: ld returned 1 exit status\n")
    err = _cache.write_failure(ld)
    assert err is not None and err.errno == 28 and "final link failed" in err.filename
    asm = Failed(f"/tmp/cc.s: Assembler messages:\n/tmp/cc.s: Fatal error: {tmp_path}/m.tmp.o: "
                 f"Read-only file system\n")
    assert _cache.write_failure(asm, [tmp_path]).errno == 30
    assert _cache.write_failure(asm) is None          # names no folder of the build, no writer's word
    header = Failed("k.cu:1:10: fatal error: /opt/inc/x.h: Permission denied\n")
    assert _cache.write_failure(header, [tmp_path]) is None
    assert _cache.write_failure(Failed("k.cu:3: error: 'x' was not declared in this scope")) is None
    assert _cache.write_failure(OSError(28, "No space left on device")).errno == 28
    assert _cache.write_failure(OSError(2, "No such file or directory")) is None


def test_a_failed_install_removes_what_it_wrote(tmp_path, monkeypatch):
    """The cache folder fills up between two files of an entry: the files written are removed,
    the entry goes to the temporary folder, built once."""
    monkeypatch.setenv("CUPYOPS_TEST_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(_cache.tempfile, "gettempdir", lambda: str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    c = _cache.Cache("CUPYOPS_TEST_CACHE", lambda: tmp_path, "test", "cupyops-test")
    builds = []

    def build(tmp):
        builds.append(tmp)
        Path(tmp).write_bytes(b"main")
        return {".extra": b"extra"}

    real = _cache.atomic_write_bytes

    def full_on_main(path, data, mode=0o666):
        if Path(path).parent == tmp_path / "cache" and str(path).endswith(".bin"):
            raise OSError(28, "No space left on device", str(path))
        return real(path, data, mode)
    monkeypatch.setattr(_cache, "atomic_write_bytes", full_on_main)
    with pytest.warns(RuntimeWarning, match="No space left on device"):
        got = c.entry("x", (".bin", ".extra"), build)
    assert got.parent == tmp_path / "tmp" / f"cupyops-test-{os.getuid()}"
    assert got.read_bytes() == b"main" and (got.parent / "x.extra").read_bytes() == b"extra"
    assert len(builds) == 1
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == []
    assert [p.name for p in (tmp_path / "tmp").iterdir()] == [got.parent.name]


def test_stale_lock_files_are_removed_unless_held(tmp_path):
    stale, held = tmp_path / "a.so.lock", tmp_path / "b.so"
    stale.write_text("")
    with _cache.locked(held):
        assert _cache.remove_stale_locks(tmp_path) == 1
        assert sorted(p.name for p in tmp_path.iterdir()) == ["b.so.lock"]
    assert list(tmp_path.iterdir()) == []
