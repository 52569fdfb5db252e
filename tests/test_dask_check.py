"""Issue 32 part 6 without a GPU: the Dask check covers every public function (a new one
without a NumPy reference fails), passes with NumPy chunks on the threaded scheduler and a
one-worker LocalCluster, catches a wrong result, and degrades to threaded with a note; the
carried wheels install offline into a temporary folder."""
import json
import os
import pathlib
import subprocess
import sys

import pytest

from cupyops.tools import dask_check, gpu_wheels

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_every_public_function_has_a_reference():
    import cupyops
    covered, missing = dask_check.references()
    assert not missing, f"{missing}: a Dask implementation without selftest references"
    assert set(covered) == set(cupyops._call.PUBLIC)


def test_numpy_chunks_on_threads_pass_and_a_wrong_reference_fails(monkeypatch):
    pytest.importorskip("dask")
    rows = dask_check.run_checks("numpy", "cpu", "threads")
    assert rows and all(r["status"] == "pass" for r in rows), rows
    real = dask_check.calls_for

    def wrong(name, case, rng):          # argmax judged by argmin's references
        return real("argmin" if name == "argmax" else name, case, rng)
    monkeypatch.setattr(dask_check, "calls_for", wrong)
    bad = [r for r in dask_check.run_checks("numpy", "cpu", "threads") if r["op"] == "argmax"]
    assert any(r["status"] == "MISMATCH" for r in bad)


@pytest.mark.slow
def test_cluster_and_the_note(tmp_path):
    pytest.importorskip("distributed")
    out = tmp_path / "d.json"
    r = subprocess.run([sys.executable, "-m", "cupyops.tools.dask_check", "--chunks", "numpy",
                        "--json", str(out)], capture_output=True, text=True, timeout=300,
                       cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
    doc = json.loads(out.read_text())
    assert {x["scheduler"] for x in doc["rows"]} == {"threads", "cluster"}
    env = dict(os.environ, CUPYOPS_DASK_NOTE="distributed did not install (test)")
    r = subprocess.run([sys.executable, "-m", "cupyops.tools.dask_check", "--chunks", "numpy",
                        "--json", str(out)], capture_output=True, text=True, timeout=300,
                       cwd=ROOT, env=env)
    assert r.returncode == 0 and "threaded scheduler only" in r.stdout, r.stdout
    assert "distributed did not install (test)" in r.stdout


def test_download_command_and_wheel_tags():
    argv = gpu_wheels.download_argv("w", "3.12", "x86_64")
    assert argv[2:4] == ["pip", "download"] and "--only-binary=:all:" in argv
    assert argv[argv.index("--abi") + 1] == "cp312" and argv[-2:] == ["dask", "distributed"]
    assert "manylinux2014_x86_64" in argv
    here = f"cp{sys.version_info[0]}{sys.version_info[1]}"
    import platform
    m = platform.machine()
    assert gpu_wheels._fits("toolz-1.2.0-py3-none-any.whl")
    assert gpu_wheels._fits(f"pyyaml-6.0.4-{here}-{here}-manylinux2014_{m}.whl")
    assert not gpu_wheels._fits(f"pyyaml-6.0.4-cp39-cp39-manylinux2014_{m}.whl")
    assert gpu_wheels._fits(f"psutil-7.2.2-cp36-abi3-manylinux2014_{m}.whl")


def test_run_without_wheels_says_what_to_do(tmp_path, capsys):
    assert gpu_wheels.main(["run", "--wheels", str(tmp_path), "--", "true"]) == 3
    assert "download" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.skipif(not any((ROOT / "gpu-wheels").glob("*.whl")),
                    reason="no gpu-wheels/ (python -m cupyops.tools.gpu_wheels download)")
def test_the_carried_wheels_install_offline_and_run_the_check(tmp_path):
    """The rehearsal of the dask step: pip install --no-index --target a temp dir from
    gpu-wheels/, then the check with those first on the path."""
    out = tmp_path / "d.json"
    r = subprocess.run([sys.executable, "-m", "cupyops.tools.gpu_wheels", "run", "--wheels",
                        str(ROOT / "gpu-wheels"), "--", sys.executable, "-m",
                        "cupyops.tools.dask_check", "--chunks", "numpy", "--json", str(out)],
                       capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "installed dask, distributed into" in r.stdout
    notes = json.loads(out.read_text())["notes"]
    assert "cupyops-dask-" in notes[0]           # dask came from the carried wheels
