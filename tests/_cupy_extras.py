"""The CuPy extras of pyproject.toml (``cuda13``, ``cuda12``) and their floors, and CuPy
releases installed with ``pip install --target`` into a cache folder, for tests that run
another CuPy in a subprocess (tests/test_cupy_path.py, tests/test_cupy_compile.py,
tests/test_extras.py)."""
from __future__ import annotations

import fcntl
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXTRAS = ("cuda13", "cuda12")


def extra_requirements(extra: str) -> list:
    """The requirement strings of ``extra`` in pyproject.toml (a one-line list)."""
    text = (ROOT / "pyproject.toml").read_text()
    m = re.search(rf"^{re.escape(extra)}\s*=\s*\[(.*)\]\s*$", text, re.M)
    if m is None:
        raise LookupError(f"no extra {extra!r} in pyproject.toml")
    return re.findall(r'"([^"]+)"', m.group(1))


def floor_pins(extra: str) -> dict:
    """{project name: lowest version} of each requirement of ``extra`` (its ``>=`` bound)."""
    from packaging.requirements import Requirement
    pins = {}
    for req in map(Requirement, extra_requirements(extra)):
        lows = [s.version for s in req.specifier if s.operator == ">="]
        if len(lows) != 1:
            raise ValueError(f"{extra}: {req} has no single >= bound")
        pins[req.name] = lows[0]
    return pins


def cupy_floor(extra: str = "cuda13") -> tuple:
    """(CuPy's project name, its floor) in ``extra``, e.g. ("cupy-cuda13x", "14.1.0")."""
    (name, low), = [(n, v) for n, v in floor_pins(extra).items() if n.startswith("cupy")]
    return name, ".".join((low.split(".") + ["0", "0"])[:3])


def cache_folder() -> Path:
    """Where the tests keep what they install: ``$CUPYOPS_TEST_CACHE``, else cupyops' cache
    folder's ``test`` (cupyops.core.caches: ``~/.cache/cupyops/test`` by default)."""
    from cupyops.core import caches
    return caches.cache_dir("test")


def cupy_target(name: str, version: str) -> Path:
    """``name==version`` (a CuPy wheel) and its dependencies installed with
    ``pip install --target`` once, cached across runs; numpy pinned to this interpreter's, so
    that the folder can go on ``PYTHONPATH`` in front of this interpreter's site-packages."""
    import numpy as np
    root = cache_folder()
    tag = f"{name}-{version}-py{sys.version_info[0]}{sys.version_info[1]}-np{np.__version__}"
    target = root / tag
    if (target / "cupy" / "__init__.py").is_file():
        return target
    root.mkdir(parents=True, exist_ok=True)
    # pytest-xdist workers ask at once: one installs, the others wait and reuse it
    with open(root / (tag + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (target / "cupy" / "__init__.py").is_file():
            _install(name, version, target)
    return target


def _install(name: str, version: str, target: Path) -> None:
    import numpy as np
    tmp = target.with_name(target.name + f".tmp{os.getpid()}")
    cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
           "--target", str(tmp), f"{name}=={version}", f"numpy=={np.__version__}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"{' '.join(cmd)} failed:\n{proc.stdout}\n{proc.stderr}"
    try:
        tmp.rename(target)
    except OSError:            # another run got there first
        pass
