"""Compile the library's kernel modules with the oldest NVRTC the package claims.

    python -m cupyops.tools.nvrtc_floor [--lib DIR | --download] [--all] [--arch 90]
                                        [--jobs N] [--json PATH]

The ``cuda13`` extra takes ``cuda-toolkit>=13.0``, so a user's NVRTC may be 13.0, and a GPU
machine's was (the H200 of 2026-11-28: NVRTC 13.0 rejected ``static_assert`` over
``__builtin_offsetof``, which 13.5 accepts). This tool loads that NVRTC in place of the
installed one and compiles the modules the library builds at run time
(:func:`cupyops.tools.nvrtc.runtime_modules`, the kernel families the operators launch)
with the CuPy path's options: by default every module of float16 (every kernel of every
family, with the most vector-width variants of any dtype: 36 modules), ``--dtypes`` others,
``--all`` every module of every dtype (440).

``--lib DIR``: a folder holding ``libnvrtc.so.13`` and ``libnvrtc-builtins.so.13.0``;
``--download``: ``pip download`` the floor's wheel (:data:`FLOOR`) into the cache folder
(``cupyops.core.caches``, ``nvrtc-floor``) once and unpack its libraries there. The library
is loaded with ``RTLD_GLOBAL`` before ``cuda.bindings`` looks for NVRTC, which then finds it
already loaded (its soname is the installed one's): run the tool in a fresh process.

Prints one line per failure and a summary; ``--json`` writes ``{"version", "modules",
"families", "failed", "seconds", "offsetof_assert"}`` (``offsetof_assert``: whether this NVRTC accepts
the construct 13.0 rejects, a check that the floor is what was loaded). Exit status 1 when a
module fails.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import pathlib
import subprocess
import sys
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor

import numpy as np

#: the cuda13 extra's floor (pyproject.toml: cuda-toolkit>=13.0): its NVRTC wheel
FLOOR = "nvidia-cuda-nvrtc==13.0.*"
#: the libraries to load, in order (the builtins first: libnvrtc opens it by name)
LIBS = ("libnvrtc-builtins.so.13.0", "libnvrtc.so.13")
SAMPLE_DTYPES = ("float16",)
#: what NVRTC 13.0 rejects and 13.5 accepts (seen on the H200 machine)
OFFSETOF_PROBE = """struct S { int a; long long b; };
static_assert(__builtin_offsetof(S, b) == 8, "layout");
extern "C" __global__ void k() {}
"""


def download(dest: pathlib.Path) -> pathlib.Path:
    """The floor's libraries unpacked under ``dest`` (downloaded once): their folder."""
    lib_dir = dest / "lib"
    if all((lib_dir / name).is_file() for name in LIBS):
        return lib_dir
    wheels = dest / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                    "--only-binary=:all:", "-d", str(wheels), FLOOR], check=True)
    wheel = sorted(wheels.glob("nvidia_cuda_nvrtc-13.0.*.whl"))[-1]
    lib_dir.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel) as z:
        for info in z.infolist():
            name = pathlib.PurePosixPath(info.filename).name
            if name in LIBS:
                (lib_dir / name).write_bytes(z.read(info))
    missing = [n for n in LIBS if not (lib_dir / n).is_file()]
    if missing:
        raise RuntimeError(f"{wheel.name} holds no {', '.join(missing)}")
    return lib_dir


def load(lib_dir: pathlib.Path) -> None:
    """Load the NVRTC of ``lib_dir`` before anything else loads one."""
    if "cuda.bindings.nvrtc" in sys.modules or "cupy_backends.cuda.libs.nvrtc" in sys.modules:
        raise RuntimeError("an NVRTC is loaded already: run nvrtc_floor in a fresh process")
    for name in LIBS:
        ctypes.CDLL(str(lib_dir / name), mode=ctypes.RTLD_GLOBAL)


def _compile_one(T, job) -> str | None:
    source, arch, options, exprs = job
    try:
        T.compile_program(source, tuple(options) + (f"--gpu-architecture=sm_{arch}",), exprs)
    except T.NvrtcError as exc:
        return str(exc)[:4000]
    return None


def kernel_families() -> tuple:
    """The kernel families the library's operators launch (their descriptors' ``families``)."""
    from cupyops import ops
    return tuple(dict.fromkeys(f for op in ops.operators() for f in op.families))


def modules(dtypes=SAMPLE_DTYPES) -> list:
    """The modules checked: :func:`cupyops.tools.nvrtc.runtime_modules` of the library's own
    kernel families for ``dtypes`` (None: every dtype), and where those dtypes leave a kernel
    template of a family uncompiled (segment_flat's rows kernels: 4-byte types only), its first
    dtype that has it."""
    from cupyops.core import modules as _modules
    from cupyops.tools import nvrtc as T
    out = []
    for name in kernel_families():
        fam = _modules.get_family(name)
        served = None
        if dtypes is not None:
            def templates(dts):
                return {e.split("<")[0] for d in dts for e in fam.expressions_for(d)}
            every = templates(fam.dtypes)
            served = [np.dtype(d) for d in dtypes if np.dtype(d) in fam.dtypes]
            for d in fam.dtypes:
                if templates(served) >= every:
                    break
                if templates([d]) - templates(served):
                    served.append(d)
        out += T.runtime_modules(families=(name,), dtypes=served)
    return out


def check(arch: int = 90, dtypes=SAMPLE_DTYPES, jobs: int = 2) -> dict:
    """Compile the modules (see the module docstring) with the NVRTC loaded now."""
    from cupyops.tools import nvrtc as T
    mods = modules(dtypes)
    sources: dict = {}
    work = [(f"{fam.name}/{dts[0]} {exprs[0]}",
             T.job_for(fam, dts[0], arch, sources, exprs)[1]) for fam, dts, exprs in mods]
    t0 = time.perf_counter()
    with ThreadPoolExecutor(max(1, jobs)) as pool:
        errors = list(pool.map(lambda w: _compile_one(T, w[1]), work))
    failed = [f"{label}: {err}" for (label, _), err in zip(work, errors) if err]
    probe = _compile_one(T, (OFFSETOF_PROBE, arch, (), ()))
    families: dict = {}
    for fam, _, _ in mods:
        families[fam.name] = families.get(fam.name, 0) + 1
    return {"version": list(T.nvrtc_version()), "modules": len(work), "families": families,
            "failed": failed,
            "seconds": round(time.perf_counter() - t0, 1), "offsetof_assert": probe is None}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m cupyops.tools.nvrtc_floor",
                                description=__doc__.split("\n\n")[1])
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--lib", type=pathlib.Path, help="folder with libnvrtc.so.13 and its "
                     "builtins")
    src.add_argument("--download", action="store_true", help=f"pip download {FLOOR} once")
    p.add_argument("--all", action="store_true", help="every dtype's modules")
    p.add_argument("--dtypes", default=",".join(SAMPLE_DTYPES),
                   help="comma-separated dtypes (default: %(default)s)")
    p.add_argument("--arch", type=int, default=90)
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--json", type=pathlib.Path)
    args = p.parse_args(argv)
    if args.download:
        from cupyops.core import caches
        lib_dir = download(pathlib.Path(caches.cache_dir("nvrtc-floor")))
    else:
        lib_dir = args.lib
    load(lib_dir)
    res = check(args.arch, None if args.all else tuple(args.dtypes.split(",")), args.jobs)
    for line in res["failed"]:
        print(f"FAILED {line}")
    print(f"NVRTC {'.'.join(map(str, res['version']))}: {res['modules']} modules for "
          f"sm_{args.arch}, {len(res['failed'])} failed, {res['seconds']} s")
    if args.json:
        args.json.write_text(json.dumps(res) + "\n")
    return 1 if res["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
