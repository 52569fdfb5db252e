"""CuPy's disk cache serves the library's modules: after precompile, a fresh process compiles
nothing (issue 33).

Without a GPU, through CuPy's own ``compile_with_cache`` (what ``cupy.RawModule`` calls, its
disk cache in ``$CUPY_CACHE_DIR`` included), only the driver's architecture query and module
load left out (tests/cupy_compile.py, ``precompile``), driven by precompile's module list and
threads: two fresh processes, the second compiles no module. The selftest family keeps it
cheap (6 small modules); the library's own families build their modules the same way
(``cupyops.core.modules.compiled_module``). On a GPU, the last test runs the real thing.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

try:
    import cupy  # noqa: F401
    WHY = ""
except Exception as exc:    # the test extra installs cupy-cuda13x; a bare install may not
    WHY = f"cupy not importable: {exc}"


def _precompile_process(cache_dir, *args) -> dict:
    env = dict(os.environ, CUPY_CACHE_DIR=str(cache_dir), PYTHONPATH=str(ROOT),
               CUPYOPS_PROGRESS="0")
    env.pop("CUPY_CACHE_IN_MEMORY", None)
    proc = subprocess.run([sys.executable, str(HERE / "cupy_compile.py"), "precompile", *args],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(bool(WHY), reason=WHY)
def test_a_fresh_process_after_precompile_compiles_nothing(tmp_path):
    first = _precompile_process(tmp_path, "selftest", "float32", "int8")
    assert first["modules"] == 6 and first["compiles"]["modules"] == 6
    assert len(first["cache_files"]) == 6           # one cache entry a module: no collision
    assert all(first["lowered"].values())
    again = _precompile_process(tmp_path, "selftest", "float32", "int8")
    assert again["compiles"]["modules"] == 0         # every module from the disk cache
    assert again["lowered"] == first["lowered"]
    assert again["cache_files"] == first["cache_files"]
    # another dtype's modules are others: compiled, not served another module's binary
    more = _precompile_process(tmp_path, "selftest", "float32", "int16")
    assert more["compiles"]["modules"] == 3 and len(more["cache_files"]) == 9


_GPU_CHILD = r"""
import json, sys
import cupyops
from cupy.cuda import compiler
n = {"modules": 0}
compile_ = compiler._NVRTCProgram.compile
def counting(self, *a, **k):
    if self.src.strip():
        n["modules"] += 1
    return compile_(self, *a, **k)
compiler._NVRTCProgram.compile = counting
if sys.argv[1] == "precompile":
    cupyops.precompile(["argreduce"], ["float32"], device="cuda")
else:
    import numpy as np
    x = np.random.default_rng(0).random((64, 1000)).astype(np.float32)
    import cupy
    r = cupyops.argmax(cupy.asarray(x), axis=1)
    assert (r.get() == x.argmax(1)).all()
print(json.dumps(n))
"""


@pytest.mark.gpu
def test_on_a_gpu_a_fresh_process_after_precompile_compiles_nothing(tmp_path):
    env = dict(os.environ, CUPY_CACHE_DIR=str(tmp_path), PYTHONPATH=str(ROOT))
    env.pop("CUPY_CACHE_IN_MEMORY", None)

    def run(what):
        proc = subprocess.run([sys.executable, "-c", _GPU_CHILD, what], capture_output=True,
                              text=True, env=env, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return json.loads(proc.stdout.strip().splitlines()[-1])["modules"]
    assert run("precompile") == 6
    assert run("call") == 0
