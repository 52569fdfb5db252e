"""The wheel ships kernels/ inside the package: build it, install it into a fresh venv outside
the checkout, and load a .cu file through the installed package."""
import os
import pathlib
import re
import subprocess
import sys
import venv

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_kernels_reachable_through_importlib_resources():
    import importlib.resources
    files = [p.name for p in importlib.resources.files("cupyops.kernels").iterdir()]
    assert any(name.endswith(".cu") for name in files), files


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("wheel")
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                        "-w", str(out), str(ROOT)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    (whl,) = out.glob("cupyops-*.whl")
    return whl


def test_wheel_contains_kernels(wheel):
    import zipfile
    names = zipfile.ZipFile(wheel).namelist()
    cu = [n for n in names if n.startswith("cupyops/kernels/") and n.endswith((".cu", ".cuh"))]
    assert cu, names
    src = ROOT / "kernels"
    for f in src.iterdir():
        if f.suffix in (".cu", ".cuh"):
            assert f"cupyops/kernels/{f.name}" in names


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory):
    """The wheel installed with ``pip install --target`` for a fresh venv outside the checkout:
    ``(python, env)``; numpy (and the optional peers) come from this interpreter's site-packages,
    cupyops only from the wheel."""
    tmp = tmp_path_factory.mktemp("installed")
    env_dir = tmp / "venv"
    venv.EnvBuilder(with_pip=False, system_site_packages=False).create(env_dir)
    py = env_dir / "bin" / "python"
    import numpy
    site = pathlib.Path(numpy.__file__).parents[1]
    target = tmp / "site"
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--target",
                        str(target), str(wheel)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    env = dict(os.environ, PYTHONPATH=f"{target}{os.pathsep}{site}")
    return py, env


def test_installed_wheel_loads_kernel_source(installed, tmp_path):
    py, env = installed
    code = (
        "import importlib.resources, cupyops, numpy as np\n"
        "assert 'site' in cupyops.__file__, cupyops.__file__\n"
        "names = sorted(p.name for p in importlib.resources.files('cupyops.kernels').iterdir() if p.name.endswith('.cu'))\n"
        "text = importlib.resources.files('cupyops.kernels').joinpath(names[0]).read_text()\n"
        "assert '__global__' in text\n"
        "print(cupyops.argwhere(np.eye(2)).tolist(), names)\n")
    r = subprocess.run([str(py), "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "[[0, 0], [1, 1]]" in r.stdout


def test_wheel_contains_the_benchmark(wheel):
    import zipfile
    names = zipfile.ZipFile(wheel).namelist()
    for f in ("__init__.py", "bench.py", "peers.py", "traffic.py"):
        assert f"cupyops/bench/{f}" in names, names


def test_installed_wheel_runs_the_main_job_from_anywhere(installed, tmp_path):
    """The README's main job, ``python -m cupyops bench``, from an installed wheel and a
    directory that is not the checkout (--tiny: seconds)."""
    py, env = installed
    env = dict(env)
    env.pop("CUPYOPS_DEVICE", None)
    out = tmp_path / "bench.json"
    r = subprocess.run([str(py), "-m", "cupyops", "bench", "--tiny", "--json", str(out)],
                       capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "not found" not in r.stderr
    import json
    data = json.loads(out.read_text())
    assert data["meta"]["device"] == "cpu" and data["meta"]["mode"] == "tiny"
    assert {r["op"] for r in data["records"]} >= {"argmax", "argmin", "hardmax", "argwhere"}
    assert all(r["ok"] for r in data["records"]), [r for r in data["records"] if not r["ok"]]
    # the cold-start children ran the installed copy too, not a checkout
    assert data["cold_start"] and not any("error" in c for c in data["cold_start"]), data["cold_start"]
    assert "cupyops bench: device cpu, mode tiny" in r.stdout


def test_sdist_ships_kernels(tmp_path):
    import tarfile
    r = subprocess.run([sys.executable, "-m", "build", "--sdist", "--no-isolation", "-o",
                        str(tmp_path), str(ROOT)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    (sdist,) = tmp_path.glob("cupyops-*.tar.gz")
    names = tarfile.open(sdist).getnames()
    for f in (ROOT / "kernels").iterdir():
        if f.suffix in (".cu", ".cuh"):
            assert any(n.endswith(f"kernels/{f.name}") for n in names), f.name


def _readme_commands():
    lines, inside = [], False
    for line in (ROOT / "README.md").read_text().splitlines():
        if line.startswith("```sh") and not lines and not inside:
            inside = True
            continue
        if inside and line.startswith("```"):
            break
        if inside:
            lines.append(line)
    return lines


def test_readme_starts_with_the_two_commands():
    """.ci/run takes the second line of the README's first sh block as the test command."""
    first, second = _readme_commands()
    assert (ROOT / "README.md").read_text().splitlines()[2] == "```sh"
    assert "pip install -q ." in first and "-m cupyops bench" in first
    assert "'.[test]'" in second and "-m pytest" in second


def test_the_test_command_starts_the_longest_files_first():
    """The README's test command hands files to the workers in collection order, which
    tests/conftest.py begins with LONGEST_FIRST: each of those names a test file."""
    _, second = _readme_commands()
    assert "--dist loadfile" in second and "--no-loadscope-reorder" in second
    import conftest
    here = pathlib.Path(__file__).parent
    missing = [n for n in conftest.LONGEST_FIRST if not (here / n).is_file()]
    assert not missing, missing


def test_readme_states_what_its_commands_cost_and_how_to_measure_it_again():
    """Issue 37: the README's figures (time, disk, downloads of its two commands; the cold
    compiles) are stated with the day they were measured, next to the command that measures
    them again, whose reading of the README's commands is .ci/run's."""
    import importlib.util
    text = (ROOT / "README.md").read_text()
    cost = text[text.index("**What they cost**"):text.index("## Installing")]
    assert re.search(r"measured on 20\d\d-\d\d-\d\d from a fresh clone with empty caches", cost)
    assert "2-core" in cost and "load average" in cost
    for what in ("first command took", "MB download", "`.venv`", "second\ncommand's install",
                 "pytest", "python benchmarks/readme_figures.py"):
        assert what.replace("\n", " ") in cost.replace("\n", " "), what
    simt = text[text.index("`cupyops.available_devices()` says"):text.index("**Caches.**")]
    assert re.search(r"first call on\s+`simt`.*\d s cold here", simt, re.S), simt
    assert re.search(r"precompile\(device=\"simt\"\)` compiles them all ahead \([\d.]+ and "
                     r"[\d.]+ s cold here", simt), simt
    spec = importlib.util.spec_from_file_location("readme_figures",
                                                  ROOT / "benchmarks" / "readme_figures.py")
    figures = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(figures)
    assert figures.readme_commands(ROOT / "README.md") == _readme_commands()


def test_readme_installs_from_the_checkout_only():
    text = (ROOT / "README.md").read_text()
    assert "pip install 'cupyops[" not in text and "pip install cupyops" not in text
    for extra in ("'.[cuda13]'", "'.[cuda12]'"):
        assert extra in text


def test_demo_names_no_missing_file(capsys):
    from cupyops.__main__ import demo
    assert demo("cpu") == 0
    out = capsys.readouterr().out
    assert "SPEC" not in out and "spec" not in out.lower().split("devices:")[1]
    assert "all 16 examples give the results of DirectML's operator reference pages" in out


def test_kernel_sources_are_ascii():
    """Kernel sources hold ASCII only: what NVRTC reads on any machine, whatever its locale."""
    bad = [f"{p.name}:{n}" for p in sorted((ROOT / "kernels").iterdir())
           if p.suffix in (".cu", ".cuh", ".h")
           for n, line in enumerate(p.read_bytes().splitlines(), 1) if not line.isascii()]
    assert not bad, bad
