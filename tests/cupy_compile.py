"""Compile through real CuPy's own NVRTC path, without a GPU or driver.

CuPy compiles a ``RawModule`` in ``cupy._core.core.compile_with_cache``:
``assemble_cupy_compiler_options(options)`` (``--std``, CuPy's bundled CCCL and header
folders, the CUDA include folder), then ``cupy.cuda.compiler._compile_with_cache_cuda`` adds
``-ftz=true`` (and, before CuPy 14.1, the include folders of CUDA's conda or pip headers,
``_get_extra_include_dir_opts``), loads the cubin with the driver, and caches it on disk.
Only the load needs a driver, and only ``_get_arch_for_options_for_nvrtc`` (the device's
compute capability) asks for one before it. So this module calls
``cupy.cuda.compiler.compile_using_nvrtc`` with those options and replaces only that query:
the same NVRTC, headers, options, ``--device-as-default-execution-space``, ``--pch`` and
name-expression lowering as a real ``RawModule``.

Run as a script with another CuPy (``pip install --target`` on ``PYTHONPATH``, or a venv's
python), it prints one JSON line:

- ``python cupy_compile.py probe [ARCH]``: where this CuPy finds NVRTC and CUDA's headers, and
  a small kernel with ``#include <cuda_fp16.h>`` compiled through it (:func:`probe`).
- ``python cupy_compile.py jobs.pkl``: compile a pickled list of jobs (:func:`compile_jobs`).
- ``python cupy_compile.py modules FAMILY/DTYPE ...``: the modules of the ``cupyops`` that this
  python imports (an installed wheel), compiled the same way (:func:`module_jobs`).
- ``python cupy_compile.py precompile FAMILY DTYPE ...``: precompile's threads over those
  modules through CuPy's own ``compile_with_cache`` (a ``RawModule``'s road, its disk cache in
  ``$CUPY_CACHE_DIR`` included), counting NVRTC compiles (:func:`precompile_through_cupy`).

No CuPy cache helps without a driver: ``compile_using_nvrtc`` caches nothing
(``cache_in_memory`` only spares the temporary ``.cu`` file), and CuPy's on-disk kernel cache
sits in ``_compile_with_cache_cuda``, which loads every cubin, cached or not, into the driver.
So :func:`compile_jobs` keeps its own: one JSON file per successful compile, keyed by
everything that goes into it (CuPy and NVRTC versions, the full options, the include folders'
modification times, architecture, method, source, name expressions).
"""
from __future__ import annotations

import hashlib
import json
import os
import pickle
import re
import sys
import time


def use_arch(default: int = 90, method: str = "cubin") -> None:
    """Replace CuPy's architecture query (the one step of its compile path that needs a
    driver): ``-arch=sm_<arch>`` and a cubin, as CuPy does for a device NVRTC knows, or
    ``-arch=compute_<arch>`` and PTX (``method="ptx"``), its road for a newer device."""
    from cupy.cuda import compiler
    if method not in ("cubin", "ptx"):
        raise ValueError(method)
    flag = "sm" if method == "cubin" else "compute"

    def arch_for_options(arch=None):
        return f"-arch={flag}_{arch or default}", method

    compiler._get_arch_for_options_for_nvrtc = arch_for_options


def rawmodule_options(options: tuple) -> tuple:
    """The options a ``cupy.RawModule`` built with ``options`` hands NVRTC, before the
    architecture options that ``compile_using_nvrtc`` adds (CuPy 13.6 to 14)."""
    from cupy._core import core
    from cupy.cuda import compiler
    opts = tuple(core.assemble_cupy_compiler_options(tuple(options))) + ("-ftz=true",)
    extra = getattr(compiler, "_get_extra_include_dir_opts", None)    # CuPy < 14.1
    if extra is not None:
        opts += tuple(extra())
    return opts


def compile_module(source: str, options: tuple, exprs, arch: int = 90) -> dict:
    """``compile_using_nvrtc`` on ``source``: {"bytes", "lowered": {expr: mangled name}}."""
    from cupy.cuda import compiler
    obj, mapping = compiler.compile_using_nvrtc(source, tuple(options), arch=str(arch),
                                                filename="module.cu",
                                                name_expressions=list(exprs))
    mapping = mapping or {}
    return {"bytes": len(obj), "lowered": {e: mapping.get(e) for e in exprs}}


CACHE_VERSION = "1"


def _cache_file(cache_dir: str, source: str, options: tuple, exprs, arch: int, method: str):
    import cupy
    from cupy.cuda import nvrtc
    h = hashlib.sha256()
    stamps = []
    for o in options:
        if o.startswith("-I"):
            try:
                stamps.append(f"{o[2:]}@{os.stat(o[2:]).st_mtime_ns}")
            except OSError:
                stamps.append(f"{o[2:]}@missing")
    for part in (CACHE_VERSION, cupy.__version__, "%d.%d" % nvrtc.getVersion(),
                 "\0".join(options), "\0".join(stamps), str(arch), method, source,
                 "\0".join(exprs)):
        h.update(part.encode())
        h.update(b"\1")
    return os.path.join(cache_dir, h.hexdigest() + ".json")


def compile_jobs(jobs: list, arch: int = 90, method: str = "cubin", cache_dir=None) -> dict:
    """``jobs``: [(key, source, options, exprs), ...], options as given to ``RawModule``.
    Returns {"cupy", "nvrtc", "arch", "method", "results": {key: {"ok", "lowered" | "error",
    "seconds", "cached"}}}. With ``cache_dir``, a module compiled before with the same inputs
    is not compiled again (successes only are kept)."""
    import cupy
    from cupy.cuda import nvrtc
    use_arch(arch, method)
    results = {}
    for key, source, options, exprs in jobs:
        t = time.perf_counter()
        entry = None
        try:
            opts = rawmodule_options(tuple(options))
            if cache_dir:
                entry = _cache_file(cache_dir, source, opts, exprs, arch, method)
                if os.path.isfile(entry):
                    with open(entry) as f:
                        res = json.load(f)
                    res.update(seconds=round(time.perf_counter() - t, 2), cached=True)
                    results[key] = res
                    continue
            res = compile_module(source, opts, exprs, arch)
            res["ok"] = True
        except Exception as e:      # a compile error is a result; the test reports it
            res = {"ok": False, "error": f"{type(e).__name__}: {e}"[-4000:]}
        if entry and res["ok"]:
            os.makedirs(cache_dir, exist_ok=True)
            tmp = f"{entry}.tmp{os.getpid()}"
            with open(tmp, "w") as f:
                json.dump(res, f)
            os.replace(tmp, entry)
        res.update(seconds=round(time.perf_counter() - t, 2), cached=False)
        results[key] = res
    return {"cupy": cupy.__version__, "nvrtc": list(nvrtc.getVersion()), "arch": arch,
            "method": method, "results": results}


def module_jobs(only=None) -> list:
    """The jobs of every kernel module of the ``cupyops`` this python imports:
    [("family/dtype", source, options, name expressions), ...], or of the keys in ``only``."""
    import cupyops  # noqa: F401  (registers the families)
    from cupyops.core import modules
    jobs = []
    for name, fam in sorted(modules.families().items()):
        for dt in fam.dtypes:
            key = f"{name}/{dt}"
            if only is None or key in only:
                jobs.append((key, modules.module_source(name), tuple(modules.compile_options(fam)),
                             tuple(fam.expressions_for(dt))))
    return jobs


def without_driver(arch: int = 90) -> dict:
    """Let ``cupy._core.core.compile_with_cache`` (what ``RawModule`` calls) run without a
    driver: the architecture queries answered, the driver's module load skipped (the cubin is
    kept). Returns the NVRTC compile counts: ``modules`` (non-empty sources) and ``empty``
    (CuPy's once-a-process probe that keys its cache)."""
    from cupy.cuda import compiler, function
    use_arch(arch)
    compiler._get_arch = lambda: str(arch)

    class Loaded(function.Module):
        def load(self, cubin):
            self.cubin_bytes = len(cubin)

    function.Module = Loaded
    counts = {"modules": 0, "empty": 0}
    compile_ = compiler._NVRTCProgram.compile

    def counting(self, *args, **kwargs):
        counts["empty" if not self.src.strip() else "modules"] += 1
        return compile_(self, *args, **kwargs)

    compiler._NVRTCProgram.compile = counting
    return counts


def precompile_through_cupy(family: str, dtypes, workers: int = 2) -> dict:
    """``cupyops.core.precompile``'s module list and threads over ``family`` x ``dtypes``, each
    module built as ``cupy.RawModule(code, options, name_expressions)`` builds it
    (``compile_with_cache(..., prepend_cupy_headers=False, name_expressions=...)``), the
    driver's part left out (:func:`without_driver`)."""
    import numpy as np
    from cupy._core import core

    import cupyops  # noqa: F401  (registers the families)
    from cupyops.core import modules, precompile
    counts = without_driver()
    if family == "selftest":
        modules.register_family(modules.SELFTEST_FAMILY)

    def factory(source, options, exprs, device_id):
        return core.compile_with_cache(source, tuple(options), prepend_cupy_headers=False,
                                       name_expressions=tuple(exprs))

    modules.register_module_factory("cupy-no-driver", factory)
    fam = modules.get_family(family)
    work = [(fam, np.dtype(d)) for d in dtypes]
    todo = precompile.module_list(work)
    precompile.compile_modules("cupy-no-driver", todo, 0, workers)
    lowered = {}
    for name, exprs in todo:
        mod = modules.compiled_module("cupy-no-driver", name, exprs)
        lowered.update({e: mod.mapping.get(e) for e in exprs})
    cache = os.environ.get("CUPY_CACHE_DIR", "")
    return {"compiles": counts, "modules": len(todo), "lowered": lowered,
            "cache_files": sorted(os.listdir(cache)) if cache else []}


PROBE_SOURCE = r"""
#include <cuda_fp16.h>
extern "C" __global__ void probe_half(__half* x) { x[0] = __hadd(x[0], __float2half(1.0f)); }
template <typename T> __global__ void probe_add(T* x) { x[0] = x[0] + T(1); }
"""
PROBE_EXPRESSIONS = ("probe_half", "probe_add<float>", "probe_add<__half>")


def _header_cuda_version(include_dir: str):
    """CUDART_VERSION of the headers in ``include_dir`` as [major, minor], or None."""
    try:
        with open(os.path.join(include_dir, "cuda_runtime_api.h")) as f:
            m = re.search(r"#define\s+CUDART_VERSION\s+(\d+)", f.read())
    except OSError:
        return None
    return [int(m.group(1)) // 1000, int(m.group(1)) % 1000 // 10] if m else None


def _loaded(name: str) -> list:
    with open("/proc/self/maps") as f:
        return sorted({line.split()[-1] for line in f if name in line.rsplit("/", 1)[-1]})


def probe(arch: int = 90) -> dict:
    """Where this CuPy finds NVRTC and CUDA's headers, and whether a kernel that includes
    ``cuda_fp16.h`` compiles through its path with every name expression lowered.

    ``header_dir`` is the first include folder of the options that holds ``cuda_fp16.h``: the
    one NVRTC opens for ``#include <cuda_fp16.h>``."""
    import cupy
    from cupy.cuda import nvrtc
    out = {"cupy": cupy.__version__, "prefix": sys.prefix, "python": sys.executable}
    version = nvrtc.getVersion()            # loads NVRTC; needs no driver
    out["nvrtc"] = list(version)
    use_arch(arch)
    try:
        options = rawmodule_options(("--std=c++17",))
    except Exception as e:
        out["error"] = f"options: {type(e).__name__}: {e}"
        return out
    out["options"] = list(options)
    includes = [o[2:] for o in options if o.startswith("-I")]
    out["header_dir"] = next((d for d in includes
                              if os.path.isfile(os.path.join(d, "cuda_fp16.h"))), None)
    out["header_cuda"] = _header_cuda_version(out["header_dir"]) if out["header_dir"] else None
    try:
        out.update(compile_module(PROBE_SOURCE, options, PROBE_EXPRESSIONS, arch))
    except Exception as e:
        out["error"] = f"compile: {type(e).__name__}: {e}"[-3000:]
    out["nvrtc_lib"] = _loaded("libnvrtc")
    return out


if __name__ == "__main__":
    if sys.argv[1] == "probe":
        result = probe(int(sys.argv[2]) if len(sys.argv) > 2 else 90)
    elif sys.argv[1] == "precompile":
        result = precompile_through_cupy(sys.argv[2], sys.argv[3:])
    elif sys.argv[1] == "modules":
        import cupyops
        result = compile_jobs(module_jobs(set(sys.argv[2:])))
        result["cupyops"] = os.path.dirname(cupyops.__file__)
    else:
        with open(sys.argv[1], "rb") as f:
            job = pickle.load(f)
        result = compile_jobs(job["jobs"], job.get("arch", 90), job.get("method", "cubin"),
                              job.get("cache_dir"))
    print(json.dumps(result))
