"""Every kernel module through real CuPy's own compile path, without a GPU or driver, at the
newest CuPy (this interpreter's, from the test extra) or at the extras' floor (installed with
pip --target), every kernel through both (every module through both with ``--run-slow``):
``cupy.cuda.compiler.compile_using_nvrtc`` with the options a ``RawModule`` gets
(``assemble_cupy_compiler_options`` and ``-ftz=true``), only the architecture query
replaced (tests/cupy_compile.py). Every module compiles and every name expression comes back
lowered. Both CuPy versions use this environment's NVRTC and CUDA headers (the test extra's).

One architecture, sm_90. By default the query answers ``-arch=compute_90`` and PTX (CuPy's road
for a device newer than its NVRTC), which runs NVRTC's front end, the include search and the
lowering exactly as for a cubin and skips ptxas: 108 s of CPU for both CuPy versions instead of
257 s (measured on a 2-core machine); tests/test_nvrtc_compile.py runs ptxas on the same sources
and options (on a sample of the dtypes in CI). ``--run-slow`` (or
``CUPYOPS_CUPY_COMPILE=cubin``) asks for ``-arch=sm_90`` and a cubin, as CuPy does on an H100.
Both CuPy versions compile at once, in two processes, each module once (identical modules, e.g.
nonzero's int32 and uint32, share a cache entry). Warm, the test takes about a second. The floor
compiles the dtypes of :data:`FLOOR_DTYPES` (its compile path, options and lowering are what
differ from the newest CuPy's, not the sources; float32 among them, so that every kernel goes
through both), the newest the other dtypes and float32 (every module through both under
``--run-slow``). Results are cached under ``cupyops.core.caches.cache_dir("cupy-compile")``,
keyed by every input (tests/cupy_compile.py), since no CuPy cache works without a driver.
"""
import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from cupyops.core import caches as _caches
from cupyops.core import modules as _modules
from cupyops.tools import nvrtc as _nvrtc

from _cupy_extras import cupy_floor, cupy_target
from _nvrtc_sample import sampled

HERE = Path(__file__).resolve().parent
FLOOR_PACKAGE, FLOOR = cupy_floor("cuda13")

try:
    import cupy
    NEWEST = cupy.__version__
except Exception as exc:    # the test extra installs cupy-cuda13x; a bare install may not
    cupy = None
    WHY = f"cupy not importable: {exc}"

pytestmark = pytest.mark.skipif(cupy is None, reason=cupy is None and WHY or "")


#: the dtype every kernel of every family goes through both CuPy versions with (the segment
#: family's flat kernels of rows take 4-byte values only)
BOTH = "float32"
#: the dtypes the floor CuPy compiles: the byte logic, the two 2-byte floats and the 16-byte
#: values (the headers and types CuPy's compile path differs most on), and float32
FLOOR_DTYPES = frozenset({"bool", "complex128", "float16", "bfloat16", BOTH})
#: the newest CuPy compiles the other dtypes, and float32, so that every module goes through one
#: real CuPy's compile path; with ``--run-slow`` (``CUPYOPS_NVRTC_ARCHS=all``) both compile
#: every module (the sampling saves about half of this test's CPU in CI)
SAMPLED = sampled()


def _wanted(which, dt) -> bool:
    if which == "floor":
        return not SAMPLED or str(dt) in FLOOR_DTYPES
    return not SAMPLED or str(dt) == BOTH or str(dt) not in FLOOR_DTYPES


def _jobs(which="newest", sampled=True) -> list:
    _nvrtc.load_family_modules()
    jobs = []
    for name, fam in sorted(_modules.families().items()):
        if fam.source == _modules.SELFTEST_FAMILY.source:    # the registry tests' family
            continue
        source = _modules.module_source(name)
        for dt in fam.dtypes:
            if sampled and not _wanted(which, dt):
                continue
            jobs.append((f"{name}/{dt}", source, tuple(_modules.compile_options(fam)),
                         tuple(fam.expressions_for(dt))))
    return jobs


def _method(config) -> str:
    method = os.environ.get("CUPYOPS_CUPY_COMPILE")
    if method:
        return method
    return "cubin" if config.getoption("--run-slow") else "ptx"


@pytest.fixture(scope="module")
def compiled(request, tmp_path_factory):
    """{"newest": result, "floor": result} of tests/cupy_compile.py over every module."""
    tmp = tmp_path_factory.mktemp("cupy_compile")
    pkls = {}
    for which in ("newest", "floor"):
        pkls[which] = tmp / f"jobs-{which}.pkl"
        pkls[which].write_bytes(pickle.dumps({
            "jobs": _jobs(which), "arch": 90, "method": _method(request.config),
            "cache_dir": str(_caches.cache_dir("cupy-compile"))}))
    # (this checkout's cupyops, not an installed one; the floor's CuPy in front)
    here = str(HERE.parent)
    envs = {"newest": dict(os.environ, PYTHONPATH=here),
            "floor": dict(os.environ, PYTHONPATH=os.pathsep.join(
                [str(cupy_target(FLOOR_PACKAGE, FLOOR)), here]))}
    for env in envs.values():
        env.pop("CUPY_CACHE_IN_MEMORY", None)
    procs = {label: subprocess.Popen([sys.executable, str(HERE / "cupy_compile.py"),
                                      str(pkls[label])],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     env=env)
             for label, env in envs.items()}
    out = {}
    for label, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=1800)
        assert proc.returncode == 0, f"{label}: {stderr[-3000:]}"
        out[label] = json.loads(stdout.strip().splitlines()[-1])
        out[label]["jobs"] = len(_jobs(label))
    return out


@pytest.mark.parametrize("which", ["newest", "floor"])
def test_every_module_compiles_through_cupy(compiled, which):
    res = compiled[which]
    assert res["cupy"] == (NEWEST if which == "newest" else FLOOR)
    results = res["results"]
    assert len(results) == res["jobs"] and results
    failed = {k: r["error"] for k, r in results.items() if not r["ok"]}
    assert not failed, "\n\n".join(f"{k}: {e}" for k, e in list(failed.items())[:3])
    unlowered = {k: [e for e, name in r["lowered"].items() if not name]
                 for k, r in results.items()}
    unlowered = {k: v for k, v in unlowered.items() if v}
    assert not unlowered, unlowered
    # every expression of every module, none missing from the answer
    for key, _, _, exprs in _jobs(which):
        assert set(results[key]["lowered"]) == set(exprs), key


def test_both_argreduce_and_nonzero_modules_are_there(compiled):
    families = {k.split("/")[0] for k in compiled["newest"]["results"]}
    assert {"argreduce", "nonzero"} <= families


def test_every_module_goes_through_one_cupy_and_every_kernel_through_both():
    """Every module compiles through one CuPy here (its front end: the NVRTC checks' cubins
    sample the dtypes, tests/_nvrtc_sample.py; test_nvrtc_compile.py checks that every kernel
    has one), and every kernel of every family goes through both CuPy versions."""
    both = {key for which in ("newest", "floor") for key, *_ in _jobs(which)}
    assert both == {key for key, *_ in _jobs("newest", sampled=False)}
    for which in ("newest", "floor"):
        kernels = {e.split("<")[0] for *_, es in _jobs(which) for e in es}
        every = {e.split("<")[0] for *_, es in _jobs(which, sampled=False) for e in es}
        assert kernels == every, (which, every - kernels)


def test_run_slow_takes_every_module_through_both(monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "SAMPLED", False)
    every = {key for key, *_ in _jobs("newest", sampled=False)}
    assert {key for key, *_ in _jobs("floor")} == every == {key for key, *_ in _jobs("newest")}


def test_the_check_can_fail(monkeypatch):
    """A source that does not compile and an expression that names no kernel are reported."""
    import cupy_compile
    from cupy.cuda import compiler
    # compile_jobs replaces CuPy's architecture query in this process: put it back afterwards
    monkeypatch.setattr(compiler, "_get_arch_for_options_for_nvrtc",
                        compiler._get_arch_for_options_for_nvrtc)
    bad = [("broken", 'extern "C" __global__ void k() { nope; }', ("--std=c++17",), ("k",)),
           ("unknown", 'template <int N> __global__ void k() {}', ("--std=c++17",),
            ("k<1>", "no_such_kernel<2>"))]
    res = cupy_compile.compile_jobs(bad, 90, "ptx")["results"]
    assert not res["broken"]["ok"] and "nope" in res["broken"]["error"]
    assert not res["unknown"]["ok"], res["unknown"]
