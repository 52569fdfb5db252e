"""The ``cuda13`` and ``cuda12`` extras on a machine with only the NVIDIA driver (slow; needs
the package index).

Each extra goes into a fresh venv with the cupyops wheel, at its newest (what pip picks) and at
its floor (every requirement of the extra pinned to its ``>=`` bound). Then, in that venv and
without a driver (tests/cupy_compile.py replaces CuPy's architecture query), CuPy must load
NVRTC from the venv, take CUDA's headers from the venv (the first include folder with
``cuda_fp16.h``, of NVRTC's CUDA version), compile a kernel that includes ``cuda_fp16.h`` and
lower its name expressions, then compile two cupyops modules of the installed wheel in the same
process. With a system CUDA toolkit on the machine, it runs a second time with ``CUDA_PATH`` and
``CUDA_HOME`` pointing at it: the venv's NVRTC and headers must still win. A control installs
CuPy 14.0.1, the release below the floor, which takes ``CUDA_PATH``'s headers.

The wheels are kept in ``$CUPYOPS_WHEELHOUSE`` (else the test cache folder's ``wheels``): pip
resolves each case against the index (``pip download`` into that folder fetches only the files
it lacks), then installs from the folder alone.
"""
import json
import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from packaging.requirements import Requirement
from packaging.version import Version

from _cupy_extras import ROOT, cache_folder, extra_requirements, floor_pins

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent
CUDA_MAJOR = {"cuda13": 13, "cuda12": 12}
BELOW_FLOOR = "14.0.1"     # the CuPy release before the floor: CUDA_PATH's headers first
MODULES = ("argreduce/float16", "nonzero/bool")
CLEAN = ("PYTHONPATH", "LD_LIBRARY_PATH", "CUDA_PATH", "CUDA_HOME", "CUPY_CACHE_IN_MEMORY",
         "PYTHONHOME", "VIRTUAL_ENV", "CONDA_PREFIX")


def _system_toolkit():
    """A CUDA toolkit with headers on this machine (CUDA_PATH, CUDA_HOME, /usr/local/cuda)."""
    for root in (os.environ.get("CUDA_PATH"), os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if root and Path(root, "include", "cuda_runtime.h").is_file():
            return os.path.realpath(root)
    return None


def _under(path, prefix) -> bool:
    return bool(path) and os.path.realpath(path).startswith(os.path.realpath(prefix) + os.sep)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("wheel")
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                        "--no-build-isolation", "-w", str(out), str(ROOT)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    (whl,) = out.glob("cupyops-*.whl")
    return whl


def _clean_env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in CLEAN}
    env.update(extra)
    return env


def _pip(args: list, what: str):
    cmd = [sys.executable, "-m", "pip", *args]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=1200, env=_clean_env())
    assert r.returncode == 0, f"{what}: {' '.join(cmd)}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"


def _install(tmp: Path, local: str, requirements: list, pins: dict) -> Path:
    """A fresh venv with ``local`` (the cupyops wheel, with an extra or not) and
    ``requirements`` (those of the extra, or others), ``pins`` as constraints; its python."""
    wheelhouse = Path(os.environ.get("CUPYOPS_WHEELHOUSE", cache_folder() / "wheels"))
    wheelhouse.mkdir(parents=True, exist_ok=True)
    env_dir = tmp / "venv"
    venv.EnvBuilder(with_pip=False, system_site_packages=False, clear=True).create(env_dir)
    python = env_dir / "bin" / "python"
    constraints = []
    if pins:
        path = tmp / "constraints.txt"
        path.write_text("".join(f"{n}=={v}\n" for n, v in pins.items()))
        constraints = ["-c", str(path)]
    quiet = ["--quiet", "--disable-pip-version-check"]
    _pip(["download", *quiet, "-d", str(wheelhouse), *constraints, "numpy>=1.24",
          *requirements], "download")
    _pip(["--python", str(python), "install", *quiet, "--no-index", "--find-links",
          str(wheelhouse), *constraints, local, *requirements], "install")
    return python


def _run(python: Path, args: list, cwd: Path, **env_extra) -> dict:
    r = subprocess.run([str(python), str(HERE / "cupy_compile.py"), *args], cwd=cwd,
                       env=_clean_env(**env_extra),
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, f"{args}: {r.stderr[-3000:]}"
    return json.loads(r.stdout.strip().splitlines()[-1])


def _versions(python: Path) -> dict:
    r = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "list",
                        "--format=json", "--disable-pip-version-check"],
                       capture_output=True, text=True, env=_clean_env())
    assert r.returncode == 0, r.stderr[-2000:]
    return {p["name"].lower(): p["version"] for p in json.loads(r.stdout)}


def _check_probe(probe: dict, prefix: Path, major: int, what: str):
    assert "error" not in probe, f"{what}: {probe['error']}"
    assert probe["nvrtc"][0] == major, (what, probe["nvrtc"])
    assert probe["nvrtc_lib"] and all(_under(p, prefix) for p in probe["nvrtc_lib"]), \
        (what, probe["nvrtc_lib"])
    assert _under(probe["header_dir"], prefix), (what, probe["header_dir"], probe["options"])
    assert probe["header_cuda"] == probe["nvrtc"], (what, probe["header_cuda"], probe["nvrtc"])
    assert all(probe["lowered"].values()), (what, probe["lowered"])


@pytest.mark.parametrize("which", ["newest", "floor"])
@pytest.mark.parametrize("extra", ["cuda13", "cuda12"])
def test_extra_compiles_from_its_own_venv(extra, which, wheel, tmp_path, record_property):
    pins = floor_pins(extra) if which == "floor" else {}
    python = _install(tmp_path, f"{wheel}[{extra}]", extra_requirements(extra), pins)
    prefix = python.parent.parent
    versions = _versions(python)
    cupy_name = f"cupy-cuda{CUDA_MAJOR[extra]}x"
    for name, low in floor_pins(extra).items():
        assert Version(versions[name]) >= Version(low), (name, versions[name])
        if which == "floor":
            assert Version(versions[name]) == Version(low), (name, versions[name])
    record_property("versions", {n: versions.get(n) for n in (
        cupy_name, "cuda-toolkit", "nvidia-cuda-nvrtc", "nvidia-cuda-runtime",
        "nvidia-cuda-nvrtc-cu12", "nvidia-cuda-runtime-cu12", "cuda-pathfinder") if n in versions})

    probe = _run(python, ["probe"], tmp_path)
    _check_probe(probe, prefix, CUDA_MAJOR[extra], "no CUDA_PATH")
    toolkit = _system_toolkit()
    if toolkit:
        probe2 = _run(python, ["probe"], tmp_path, CUDA_PATH=toolkit, CUDA_HOME=toolkit)
        _check_probe(probe2, prefix, CUDA_MAJOR[extra], f"CUDA_PATH={toolkit}")

    mods = _run(python, ["modules", *MODULES], tmp_path)
    assert _under(mods["cupyops"], prefix), mods["cupyops"]
    assert sorted(mods["results"]) == sorted(MODULES), mods["results"].keys()
    for key, res in mods["results"].items():
        assert res["ok"], f"{key}: {res['error']}"
        assert res["lowered"] and all(res["lowered"].values()), (key, res["lowered"])
    record_property("probe", {k: probe[k] for k in ("cupy", "nvrtc", "header_dir", "nvrtc_lib")})


def test_below_the_floor_cupy_takes_the_system_headers(wheel, tmp_path):
    """The control: CuPy 14.0.1 with the cuda13 extra's other requirements at their floor, and
    CUDA_PATH at the system toolkit, compiles with the system's headers, not the venv's: why
    the floor is 14.1."""
    toolkit = _system_toolkit()
    if toolkit is None:
        pytest.skip("no system CUDA toolkit with headers on this machine")
    others = [r for r in extra_requirements("cuda13") if not Requirement(r).name.startswith("cupy")]
    pins = {n: v for n, v in floor_pins("cuda13").items() if not n.startswith("cupy")}
    python = _install(tmp_path, str(wheel), [f"cupy-cuda13x=={BELOW_FLOOR}", *others], pins)
    probe = _run(python, ["probe"], tmp_path, CUDA_PATH=toolkit, CUDA_HOME=toolkit)
    assert probe["cupy"] == BELOW_FLOOR
    assert all(_under(p, python.parent.parent) for p in probe["nvrtc_lib"]), probe["nvrtc_lib"]
    assert _under(probe["header_dir"], toolkit), (probe["header_dir"], probe["options"])
