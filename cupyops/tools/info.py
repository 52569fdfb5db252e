"""``python -m cupyops info``: what this installation is and where it keeps things, as
``cupy.show_config()`` does for CuPy: cupyops and its dependencies' versions, the devices
found (and why one is missing), the default device, the NumPy path's threads, and every cache
folder with its size (cupyops.core.caches decides where they are). ``--json`` for a machine.

Versions are read from the installed packages' metadata, not by importing them (torch alone
would take seconds); CuPy is imported, as finding a GPU needs it."""
from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import platform
import sys

#: (label, distribution names to try, what cupyops uses it for)
PACKAGES = (
    ("NumPy", ("numpy",), "the cpu device, every input"),
    ("CuPy", ("cupy-cuda13x", "cupy-cuda12x", "cupy"), "the cuda device"),
    ("ml_dtypes", ("ml_dtypes",), "bfloat16"),
    ("dask", ("dask",), "Dask arrays"),
    ("onnxruntime", ("onnxruntime",), "a benchmark peer"),
    ("torch", ("torch",), "a benchmark peer, DLPack input"),
    ("cuda-bindings", ("cuda-bindings",), "the NVRTC compile checks"),
)


def _version(names) -> str | None:
    """The version of the first of ``names`` installed (with its name where several may be)."""
    for name in names:
        try:
            v = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        return v if len(names) == 1 else f"{v} ({name})"
    return None


def versions() -> dict:
    """{label: version or None (not installed)}, Python first."""
    import cupyops
    out = {"cupyops": f"{cupyops.__version__} ({os.path.dirname(cupyops.__file__)})",
           "Python": f"{platform.python_version()} ({sys.executable})"}
    for label, names, _ in PACKAGES:
        out[label] = _version(names)
    cuda = _cuda_versions()
    if cuda:
        out["CUDA (through CuPy)"] = cuda
    return out


def _cuda_versions() -> str | None:
    """CuPy's CUDA runtime, NVRTC and driver versions, as far as they answer here."""
    try:
        import cupy
    except Exception:
        return None
    parts = []
    for what, get in (("runtime", lambda: cupy.cuda.runtime.runtimeGetVersion()),
                      ("driver", lambda: cupy.cuda.runtime.driverGetVersion()),
                      ("NVRTC", lambda: cupy.cuda.nvrtc.getVersion())):
        try:
            v = get()
            v = ".".join(map(str, v)) if isinstance(v, tuple) else f"{v // 1000}.{v % 1000 // 10}"
            parts.append(f"{what} {v}" if v != "0.0" else f"{what}: none")
        except Exception as exc:
            parts.append(f"{what}: unknown ({type(exc).__name__})")
    return ", ".join(parts)


def devices() -> dict:
    """{device: (available, what it is or why not)} and the default device."""
    from cupyops.core import devices as _devices
    out = {"cpu": (True, "the NumPy path"), "simt": _devices.simt_status(),
           "cuda": _devices.cuda_status()}
    env = (os.environ.get("CUPYOPS_DEVICE") or "").strip()
    default = f"{env} (CUPYOPS_DEVICE)" if env else "cpu (CUPYOPS_DEVICE is not set)"
    return {"devices": {k: {"available": bool(v[0]), "about": v[1]} for k, v in out.items()},
            "default": default}


def threads() -> dict:
    """The NumPy path's threads: how many a large call uses here, and which setting says so."""
    import cupyops
    from cupyops.core import threads as _threads
    env = (os.environ.get("CUPYOPS_NUM_THREADS") or "").strip()
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):   # pragma: no cover - another OS
        cores = os.cpu_count() or 1
    source = (f"CUPYOPS_NUM_THREADS={env}" if env else
              f"the {cores} usable cores; CUPYOPS_NUM_THREADS is not set")
    return {"threads": cupyops.get_num_threads(), "source": source,
            "most": _threads.max_threads()}


def caches() -> list:
    """Every cache folder: cupyops' (cupyops.core.caches) and CuPy's kernel cache."""
    from cupyops.core import caches as _caches
    rows = []
    for name, cache in _caches.CACHES.items():
        path = _caches.cache_dir(name)
        size, files = _caches.disk_usage(path)
        rows.append({"name": name, "path": str(path), "bytes": size, "files": files,
                     "chosen_by": _caches.chosen_by(name), "holds": cache.holds})
    path, chosen = _caches.cupy_kernel_cache()
    size, files = _caches.disk_usage(path)
    rows.append({"name": "CuPy kernels", "path": str(path), "bytes": size, "files": files,
                 "chosen_by": chosen, "holds": "the cuda device's compiled kernels (CuPy's "
                 "own cache)"})
    return rows


def report() -> dict:
    return {"versions": versions(), **devices(), "threads": threads(), "caches": caches()}


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return ""


def text_lines(rep: dict) -> list:
    from cupyops.core.caches import RULE
    v = rep["versions"]
    lines = [f"cupyops {v['cupyops']}", "", "versions:"]
    lines += [f"  {k:<20} {val if val else 'not installed'}" for k, val in v.items()
              if k != "cupyops"]
    lines += ["", "devices:"]
    for name, d in rep["devices"].items():
        lines.append(f"  {name:<5} {'yes' if d['available'] else 'no ':<4} {d['about']}")
    lines.append(f"  default: {rep['default']}")
    t = rep["threads"]
    lines += ["", f"threads: {t['threads']} for a large NumPy-path call ({t['source']}; at most "
              f"{t['most']})", "", f"caches ({RULE}):"]
    w = max(len(c["path"]) for c in rep["caches"])
    for c in rep["caches"]:
        lines.append(f"  {c['name']:<13} {c['path']:<{w}}  {_size(c['bytes']):>9} "
                     f"{c['files']:>6} files  ({c['chosen_by']}) {c['holds']}")
    return lines


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m cupyops info",
        description="What this installation is: the versions of cupyops and its dependencies, the "
                    "devices found (and why one is missing), the default device, the NumPy path's "
                    "threads, and where every cache is, with its size.")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    args = p.parse_args(argv)
    rep = report()
    print(json.dumps(rep, indent=1) if args.json else "\n".join(text_lines(rep)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
