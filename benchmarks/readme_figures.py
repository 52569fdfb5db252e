"""Re-measure the figures the README states: what its two commands cost from a fresh clone with
empty caches (wall time, the disk they fill, what pip downloads) and the cold compiles of the
simt device (``precompile(device="simt")``, a first simt call).

    python benchmarks/readme_figures.py                  # the first command and the cold compiles
    python benchmarks/readme_figures.py --second         # the test command too (10-25 min)
    python benchmarks/readme_figures.py --second-install # its install only (pytest not run)
    python benchmarks/readme_figures.py --json out.json  # the figures as JSON as well

It clones this checkout's HEAD (commit first: uncommitted changes are not measured) into a
temporary folder, points HOME and XDG_CACHE_HOME there (so pip's cache, cupyops' caches and
CuPy's start empty and are measured), takes the commands from the README's first ```sh block as
.ci/run does, and runs them with the system's python3 (no virtual environment of yours on PATH).
Downloads are what pip fetched: the growth of its cache (it keeps what it downloads over HTTP),
plus the files it took from local indexes (``file://``, as on a machine with a package mirror),
listed by ``pip install --dry-run --report`` of the same requirement. The machine's load average
is recorded beside the times: on a shared machine they move with it.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: the cold compiles, in a fresh process each, in the clone's virtual environment
COLD = {
    "precompile(device='simt')": "import cupyops; cupyops.precompile(device='simt')",
    "first simt call (argmax, float32)": (
        "import numpy as np, cupyops; "
        "cupyops.argmax(np.ones((256, 256), np.float32), axis=1, device='simt')"),
}


def readme_commands(readme: Path) -> list:
    """The two commands of the README's first ```sh block."""
    m = re.search(r"```sh\n(.*?)```", readme.read_text(), re.S)
    cmds = [ln for ln in (m.group(1) if m else "").splitlines() if ln.strip()]
    if len(cmds) != 2:
        raise SystemExit(f"the README's first sh block holds {len(cmds)} commands, not 2")
    return cmds


def disk(path: Path) -> int:
    """Bytes under ``path`` (0 when missing), links not followed."""
    if not path.exists():
        return 0
    total = 0
    for dirpath, _, names in os.walk(path):
        for n in names:
            try:
                total += os.lstat(os.path.join(dirpath, n)).st_size
            except OSError:
                pass
    return total


def clean_env(home: Path) -> dict:
    """The environment of a new user: HOME and XDG_CACHE_HOME in ``home``, no cupyops, CuPy
    or pip settings, no virtual environment on PATH."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("CUPYOPS_", "CUPY_", "PIP_", "PYTHON", "VIRTUAL_ENV"))}
    venv = os.environ.get("VIRTUAL_ENV") or str(Path(sys.executable).parent.parent)
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if p and not p.startswith(venv))
    env.update(HOME=str(home), XDG_CACHE_HOME=str(home / ".cache"))
    return env


def snapshot(clone: Path, home: Path) -> dict:
    cache = home / ".cache"
    return {"venv_bytes": disk(clone / ".venv"), "pip_cache_bytes": disk(cache / "pip"),
            "cupyops_cache_bytes": disk(cache / "cupyops"),
            "cupy_cache_bytes": disk(home / ".cupy")}


def run_timed(cmd: str, cwd: Path, env: dict, log: Path) -> dict:
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    with open(log, "w") as fh:
        rc = subprocess.run(["bash", "-c", cmd], cwd=cwd, env=env, stdout=fh,
                            stderr=subprocess.STDOUT).returncode
    return {"command": cmd, "seconds": time.perf_counter() - t0, "rc": rc,
            "load_before": load, "load_after": os.getloadavg()[0], "log": str(log)}


def measure_command(cmd: str, clone: Path, home: Path, env: dict, name: str) -> dict:
    before = snapshot(clone, home)
    res = run_timed(cmd, clone, env, home.parent / f"{name}.log")
    after = snapshot(clone, home)
    res["grew"] = {k: after[k] - before[k] for k in after}
    res["after"] = after
    res["wheel_bytes"], res["wheels_unsized"] = wheel_sizes(cmd, clone)
    return res


def wheel_sizes(cmd: str, clone: Path) -> tuple:
    """(bytes, count of files not sized) of the distribution files ``cmd``'s ``pip install``
    installs, from pip's report of the same requirement with everything reinstalled, run with
    this process's pip settings (a local mirror's file:// URLs are sized on disk; files only
    on an HTTP index are counted as not sized)."""
    m = re.search(r"pip install (?:-q )?(?:-e )?(\S+)", cmd)
    if not m:
        return 0, None
    spec = m.group(1).strip("'\"")
    p = subprocess.run([str(clone / ".venv" / "bin" / "pip"), "install", "-q", "--dry-run",
                        "--ignore-installed", "--report", "-", spec], cwd=clone,
                       capture_output=True, text=True)
    try:
        items = json.loads(p.stdout)["install"]
    except (ValueError, KeyError):
        return 0, None
    total = unsized = 0
    for it in items:
        url = (it.get("download_info") or {}).get("url", "")
        path = Path(url[len("file://"):]) if url.startswith("file://") else None
        if path is not None and path.is_file():
            total += path.stat().st_size
        elif path is None or not path.is_dir():      # (a directory: the checkout itself)
            unsized += 1
    return total, unsized


def measure_cold(clone: Path, home: Path, env: dict) -> dict:
    """Each cold compile in a fresh process whose caches are empty."""
    out = {}
    py = str(clone / ".venv" / "bin" / "python")
    for label, code in COLD.items():
        cache = Path(tempfile.mkdtemp(dir=home.parent, prefix="cold-"))
        cenv = dict(env, XDG_CACHE_HOME=str(cache))
        load = os.getloadavg()[0]
        t0 = time.perf_counter()
        p = subprocess.run([py, "-c", code], cwd=home.parent, env=cenv, capture_output=True,
                           text=True)
        out[label] = {"seconds": time.perf_counter() - t0, "rc": p.returncode,
                      "load_before": load, "cache_bytes": disk(cache),
                      "error": p.stderr.strip().splitlines()[-1:] if p.returncode else []}
    return out


def mb(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n < 10e6 else f"{n / 1e6:.0f} MB"


def summary(doc: dict) -> list:
    lines = [f"{doc['date']}, {doc['machine']}"]
    for name, r in doc["commands"].items():
        g = r["grew"]
        down = g["pip_cache_bytes"] + r.get("wheel_bytes", 0)
        unsized = r.get("wheels_unsized")
        lines.append(f"{name}: {r['seconds'] / 60:.1f} min (rc {r['rc']}, load {r['load_before']:.1f}"
                     f" -> {r['load_after']:.1f}); .venv {mb(g['venv_bytes'])}, downloads "
                     + (f"{mb(down)}" if not unsized else f"at least {mb(down)} ({unsized} "
                        "files on an HTTP index not sized)")
                     + f", cupyops' caches {mb(g['cupyops_cache_bytes'])}, CuPy's "
                     f"{mb(g['cupy_cache_bytes'])}")
    for label, r in doc.get("cold", {}).items():
        lines.append(f"cold {label}: {r['seconds']:.1f} s (rc {r['rc']}, load "
                     f"{r['load_before']:.1f}; cache {mb(r['cache_bytes'])})")
    return lines


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--second", action="store_true", help="run the test command too (10-25 min)")
    p.add_argument("--second-install", action="store_true",
                   help="run the test command's install only, not the test suite")
    p.add_argument("--no-cold", action="store_true", help="skip the cold compiles")
    p.add_argument("--json", default=None, help="write the figures as JSON here")
    p.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = p.parse_args(argv)
    cmds = readme_commands(ROOT / "README.md")
    tmp = Path(tempfile.mkdtemp(prefix="cupyops-readme-"))
    clone, home = tmp / "clone", tmp / "home"
    home.mkdir()
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    env = clean_env(home)
    doc = {"date": time.strftime("%Y-%m-%d %H:%M"), "commit": subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=clone, capture_output=True,
        text=True).stdout.strip(), "machine": f"{os.cpu_count()} cores, {os.uname().machine}",
        "commands": {}}
    doc["commands"]["first command"] = measure_command(cmds[0], clone, home, env, "first")
    if not args.no_cold:
        doc["cold"] = measure_cold(clone, home, env)
    if args.second or args.second_install:
        cmd = cmds[1] if args.second else cmds[1].rsplit(" && ", 1)[0]
        doc["commands"]["second command" + ("" if args.second else ", its install")] = \
            measure_command(cmd, clone, home, env, "second")
    print("\n".join(summary(doc)))
    if args.json:
        Path(args.json).write_text(json.dumps(doc, indent=1))
    if args.keep:
        print(f"kept {tmp}")
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0 if all(r["rc"] == 0 for r in doc["commands"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
