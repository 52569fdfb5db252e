"""Dask and distributed for a GPU machine without network (issue 32, part 6).

``python -m cupyops.tools.gpu_wheels download [--dest gpu-wheels]`` (here, with network): pip
downloads wheels of ``dask`` and ``distributed`` and everything they need, for CPython
3.10-3.13 on manylinux x86_64 and aarch64 (the GPU machine's Python and CPU are not known in
advance), into an untracked folder of the checkout (git-ignored: carry it to the GPU machine
with the working tree). Most are pure Python; distributed's compiled needs come as the wheels
their projects publish: psutil and tornado as abi3 (any CPython >= 3.6 / 3.9), msgpack, PyYAML
and MarkupSafe per CPython version.

``python -m cupyops.tools.gpu_wheels run --wheels gpu-wheels -- CMD ...`` (on the GPU machine):
``pip install --isolated --no-index --find-links WHEELS --target TMP dask distributed`` into a
temporary folder, then CMD with TMP first on ``PYTHONPATH``; its exit status is CMD's. Where
distributed does not install (no wheel of a compiled need for this Python or CPU), dask alone is
installed and ``CUPYOPS_DASK_NOTE`` tells CMD why (the Dask check then runs the threaded
scheduler only, and says so). Without pip, the wheels that fit this interpreter are unpacked
directly. Nothing reaches the network: ``--no-index``.
"""
from __future__ import annotations

import argparse
import os
import pathlib
import platform
import subprocess
import sys
import tempfile
import zipfile

__all__ = ["PACKAGES", "PYTHONS", "MACHINES", "download_argv", "download", "install", "main"]

PACKAGES = ("dask", "distributed")
PYTHONS = ("3.10", "3.11", "3.12", "3.13")
MACHINES = ("x86_64", "aarch64")
#: the manylinux tags pip may take, oldest glibc first (each wheel names several)
_MANYLINUX = ("manylinux1", "manylinux2010", "manylinux2014", "manylinux_2_5", "manylinux_2_12",
              "manylinux_2_17", "manylinux_2_28")


def download_argv(dest, python: str, machine: str) -> list:
    """The pip command that downloads the wheels for CPython ``python`` on ``machine``."""
    tag = "cp" + python.replace(".", "")
    argv = [sys.executable, "-m", "pip", "download", "--dest", str(dest), "--only-binary=:all:",
            "--python-version", python, "--implementation", "cp", "--abi", tag]
    for m in _MANYLINUX:
        if machine == "aarch64" and m in ("manylinux1", "manylinux2010", "manylinux_2_5",
                                          "manylinux_2_12"):
            continue
        argv += ["--platform", f"{m}_{machine}"]
    return argv + list(PACKAGES)


def download(dest="gpu-wheels", pythons=PYTHONS, machines=MACHINES) -> int:
    dest = pathlib.Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    failed = []
    for py in pythons:
        for m in machines:
            r = subprocess.run(download_argv(dest, py, m), capture_output=True, text=True)
            if r.returncode != 0:
                failed.append(f"CPython {py} {m}: {(r.stderr or r.stdout).strip()[-300:]}")
    wheels = sorted(p.name for p in dest.glob("*.whl"))
    size = sum(p.stat().st_size for p in dest.glob("*.whl"))
    (dest / "MANIFEST.txt").write_text(
        f"dask and distributed for CPython {', '.join(pythons)} on manylinux "
        f"{', '.join(machines)} ({len(wheels)} wheels, {size / 1e6:.1f} MB)\n"
        + "".join(w + "\n" for w in wheels))
    for f in failed:
        print(f"gpu_wheels: could not download for {f}", file=sys.stderr)
    print(f"{len(wheels)} wheels, {size / 1e6:.1f} MB in {dest}")
    return 1 if failed else 0


def _pip_install(wheels, target, packages) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pip", "--isolated", "install", "--no-index",
                           "--find-links", str(wheels), "--target", str(target),
                           "--disable-pip-version-check", "--no-warn-script-location",
                           *packages], capture_output=True, text=True)


def _fits(name: str) -> bool:
    """A wheel's file name fits this interpreter and CPU (for the unpack fallback)."""
    parts = name[:-4].split("-")
    py, abi, plat = parts[-3], parts[-2], parts[-1]
    here = f"cp{sys.version_info[0]}{sys.version_info[1]}"
    if plat == "any":
        return True
    if platform.machine() not in plat or not sys.platform.startswith("linux"):
        return False
    return (abi == here) or (abi == "abi3" and int(py.split(".")[0][3:] or 0)
                             <= sys.version_info[1])


def _unpack(wheels, target) -> list:
    """Unpack every wheel that fits (newest version of each project): pip missing."""
    best = {}
    for p in sorted(pathlib.Path(wheels).glob("*.whl")):
        if _fits(p.name):
            best[p.name.split("-")[0].lower()] = p
    for p in best.values():
        with zipfile.ZipFile(p) as z:
            z.extractall(target)
    return sorted(best)


def install(wheels, target) -> tuple:
    """(installed packages, note): dask and distributed, or dask alone with a note, into
    ``target``; raises RuntimeError when not even dask installs."""
    has_pip = subprocess.run([sys.executable, "-m", "pip", "--version"],
                             capture_output=True).returncode == 0
    if not has_pip:
        names = _unpack(wheels, target)
        note = "" if "distributed" in names else "distributed: no wheel fits this Python"
        return names, ("pip is missing: wheels unpacked. " + note).strip()
    r = _pip_install(wheels, target, PACKAGES)
    if r.returncode == 0:
        return list(PACKAGES), ""
    why = (r.stderr or r.stdout).strip().splitlines()[-1:] or ["?"]
    r2 = _pip_install(wheels, target, ("dask",))
    if r2.returncode != 0:
        raise RuntimeError(f"dask does not install from {wheels}: "
                           f"{(r2.stderr or r2.stdout).strip()[-400:]}")
    return ["dask"], f"distributed did not install ({why[0][:200]}): threaded scheduler only"


def run(wheels, cmd) -> int:
    wheels = pathlib.Path(wheels)
    if not any(wheels.glob("*.whl")):
        print(f"gpu_wheels: no wheels in {wheels}: run python -m cupyops.tools.gpu_wheels "
              "download where there is network, and carry the folder", file=sys.stderr)
        return 3
    with tempfile.TemporaryDirectory(prefix="cupyops-dask-") as target:
        try:
            names, note = install(wheels, target)
        except RuntimeError as exc:
            print(f"gpu_wheels: {exc}", file=sys.stderr)
            return 3
        print(f"gpu_wheels: installed {', '.join(names)} into {target}"
              + (f"; {note}" if note else ""), flush=True)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([target] + [p for p in env.get(
            "PYTHONPATH", "").split(os.pathsep) if p])
        if note:
            env["CUPYOPS_DASK_NOTE"] = note
        return subprocess.run(cmd, env=env).returncode


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m cupyops.tools.gpu_wheels",
                                description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    d = sub.add_parser("download", help="pip download the wheels (needs network)")
    d.add_argument("--dest", default="gpu-wheels")
    d.add_argument("--python", action="append", help=f"default: {', '.join(PYTHONS)}")
    d.add_argument("--machine", action="append", help=f"default: {', '.join(MACHINES)}")
    r = sub.add_parser("run", help="install the wheels into a temporary folder, run a command")
    r.add_argument("--wheels", default="gpu-wheels")
    r.add_argument("cmd", nargs=argparse.REMAINDER, help="-- then the command")
    args = p.parse_args(argv)
    if args.command == "download":
        return download(args.dest, tuple(args.python or PYTHONS),
                        tuple(args.machine or MACHINES))
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not cmd:
        p.error("run needs a command after --")
    return run(args.wheels, cmd)


if __name__ == "__main__":
    raise SystemExit(main())
