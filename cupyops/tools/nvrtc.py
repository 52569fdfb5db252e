"""Compile checks without a GPU or a driver: NVRTC through ``cuda.bindings.nvrtc``.

``compile_cubin(source, arch, options, name_expressions)`` compiles like the CuPy path does
(:func:`cupy_options`: our options, then what ``cupy.RawModule`` appends: ``-ftz=true``,
``--device-as-default-execution-space``, the CUDA include directory) for ``sm_<arch>`` with
``--ptxas-options=-v`` and parses ptxas's report: per entry function (mapped back to its name
expression through ``nvrtcGetLoweredName``) registers, spill stores/loads, static shared memory,
stack frame, and from the PTX the instructions that flush subnormals (``.ftz``).

:func:`occupancy` turns registers + shared memory + block size into active warps per SM with
the per-architecture limits of :data:`ARCH_LIMITS`.

CLI::

    python -m cupyops.tools.nvrtc --table docs/kernels.md     # every family x dtype x arch
    python -m cupyops.tools.nvrtc --family selftest --arch 90 # print, don't write
    python -m cupyops.tools.nvrtc --compare-ptx               # grouping leaves PTX unchanged

Needs ``cuda-bindings`` and ``nvidia-cuda-nvrtc``: the ``test`` extra. No include path is
given: the kernels include no system header. Nothing here imports CuPy.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import hashlib
import json
import os
import re
import sys
import time
from pathlib import Path

import numpy as np

from cupyops.core import modules as _modules
from cupyops.simt._cache import atomic_write_text

__all__ = [
    "NvrtcError", "KernelStats", "CompileResult", "ArchLimits", "ARCH_LIMITS", "Occupancy",
    "REQUIRED_ARCHS", "available", "nvrtc_version", "supported_archs", "check_archs",
    "cupy_options", "compile_cubin", "compile_ptx", "compile_family",
    "occupancy", "load_family_modules", "family_report", "render_table", "main",
    "job_for", "runtime_modules", "compile_program", "cache_root", "cache_key",
    "write_cache_entry", "run_pool", "ptx_functions", "compare_grouping_ptx",
]

#: Architectures the checks must cover whatever else NVRTC offers.
REQUIRED_ARCHS = (75, 80, 86, 89, 90, 100, 120)


class NvrtcError(RuntimeError):
    """NVRTC failed; ``log`` holds the program log."""

    def __init__(self, message: str, log: str = ""):
        super().__init__(message)
        self.log = log


# --------------------------------------------------------------------------------------------
# NVRTC plumbing
# --------------------------------------------------------------------------------------------

def _nvrtc():
    from cuda.bindings import nvrtc   # cuda-bindings >= 12.8
    return nvrtc


def available() -> tuple[bool, str]:
    """(True, "") when cuda.bindings.nvrtc imports and NVRTC loads; else (False, why)."""
    try:
        nvrtc_version()
    except Exception as e:  # ImportError, or the NVRTC shared library missing
        return False, f"{type(e).__name__}: {e}"
    return True, ""


def _check(result, what: str, prog=None):
    err = result[0]
    nv = _nvrtc()
    if err != nv.nvrtcResult.NVRTC_SUCCESS:
        log = _program_log(prog) if prog is not None else ""
        _, msg = nv.nvrtcGetErrorString(err)
        raise NvrtcError(f"{what} failed: {msg.decode() if isinstance(msg, bytes) else msg}"
                         + (f"\n{log}" if log else ""), log)
    return result[1:] if len(result) > 2 else (result[1] if len(result) == 2 else None)


def _program_log(prog) -> str:
    nv = _nvrtc()
    err, n = nv.nvrtcGetProgramLogSize(prog)
    if err != nv.nvrtcResult.NVRTC_SUCCESS or n <= 1:
        return ""
    buf = b" " * n
    nv.nvrtcGetProgramLog(prog, buf)
    return buf.rstrip(b"\x00").decode("utf-8", "replace")


def nvrtc_version() -> tuple[int, int]:
    major, minor = _check(_nvrtc().nvrtcVersion(), "nvrtcVersion")
    return int(major), int(minor)


def supported_archs() -> tuple[int, ...]:
    """What ``nvrtcGetSupportedArchs()`` reports, e.g. (75, 80, ..., 121)."""
    return tuple(int(a) for a in _check(_nvrtc().nvrtcGetSupportedArchs(), "nvrtcGetSupportedArchs"))


def min_arch() -> int:
    """Oldest architecture the installed CUDA supports for us: 70 for NVRTC 12, else 75."""
    return 70 if nvrtc_version()[0] == 12 else 75


def check_archs() -> tuple[int, ...]:
    """Every supported architecture from :func:`min_arch` up (``REQUIRED_ARCHS`` must be
    among them; :func:`missing_required_archs` says which are not)."""
    lo = min_arch()
    return tuple(a for a in supported_archs() if a >= lo)


def missing_required_archs() -> tuple[int, ...]:
    have = set(supported_archs())
    return tuple(a for a in REQUIRED_ARCHS if a not in have)


def cupy_options(options: tuple = ()) -> tuple:
    """The options the CuPy path ends up passing to NVRTC, minus ``-arch``: ``options``
    (``_modules.compile_options(family)``), then CuPy's additions.

    No include directory: CuPy adds its own and, when it finds them, the CUDA headers', but a
    user's install may lack the latter, so every kernel module must compile with no ``-I`` at
    all (they include no system header), and the checks compile them that way."""
    return tuple(options) + _modules.CUPY_ADDED_OPTIONS


# --------------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------------

@dataclasses.dataclass
class KernelStats:
    name: str                 # the name expression, or the mangled name for other entries
    mangled: str
    registers: int
    spill_stores: int         # bytes
    spill_loads: int          # bytes
    shared_static: int        # bytes
    stack_frame: int          # bytes
    barriers: int = 0
    ftz_instructions: int = -1   # PTX instructions with .ftz; -1 when PTX was not looked at


@dataclasses.dataclass
class CompileResult:
    arch: int
    options: tuple
    kernels: dict             # name -> KernelStats
    lowered_names: dict       # name expression -> mangled name
    log: str
    seconds: float
    cubin: bytes | None = None
    ptx: str | None = None

    def to_json(self) -> dict:
        return {"arch": self.arch, "options": list(self.options), "log": self.log,
                "seconds": self.seconds, "lowered_names": self.lowered_names,
                "kernels": {k: dataclasses.asdict(v) for k, v in self.kernels.items()}}

    @classmethod
    def from_json(cls, d: dict) -> "CompileResult":
        return cls(arch=d["arch"], options=tuple(d["options"]), log=d["log"],
                   seconds=d["seconds"], lowered_names=dict(d["lowered_names"]),
                   kernels={k: KernelStats(**v) for k, v in d["kernels"].items()})


_ENTRY_RE = re.compile(r"Compiling entry function '([^']+)' for '(\w+)'")
_PROPS_RE = re.compile(r"Function properties for (\S+)")
_FRAME_RE = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED_RE = re.compile(r"Used (\d+) registers")
_BARRIERS_RE = re.compile(r"used (\d+) barriers")
_SMEM_RE = re.compile(r"(\d+) bytes smem")


def parse_ptxas_log(log: str) -> dict:
    """mangled entry name -> dict(registers, spill_stores, spill_loads, shared_static,
    stack_frame, barriers) from a ``--ptxas-options=-v`` report."""
    out: dict = {}
    current = None       # entry whose "Used ..." line comes next
    props_for = None     # function whose "Function properties" frame line comes next
    for line in log.splitlines():
        m = _ENTRY_RE.search(line)
        if m:
            current = m.group(1)
            out.setdefault(current, dict(registers=0, spill_stores=0, spill_loads=0,
                                         shared_static=0, stack_frame=0, barriers=0))
            continue
        m = _PROPS_RE.search(line)
        if m:
            props_for = m.group(1)
            continue
        m = _FRAME_RE.search(line)
        if m and props_for is not None:
            if props_for in out:
                out[props_for].update(stack_frame=int(m.group(1)), spill_stores=int(m.group(2)),
                                      spill_loads=int(m.group(3)))
            props_for = None
            continue
        m = _USED_RE.search(line)
        if m and current is not None:
            st = out[current]
            st["registers"] = int(m.group(1))
            b = _BARRIERS_RE.search(line)
            if b:
                st["barriers"] = int(b.group(1))
            s = _SMEM_RE.search(line)
            if s:
                st["shared_static"] = int(s.group(1))
            current = None
    return out


_PTX_ENTRY_RE = re.compile(r"^\s*(?:\.(?:visible|weak|extern)\s+)*\.entry\s+([\w$]+)\s*\(", re.M)
_PTX_FTZ_RE = re.compile(r"^\s*(?:@!?%p\d+\s+)?[a-z][\w.]*\.ftz\b[\w.]*", re.M)


def ptx_ftz_counts(ptx: str) -> dict:
    """mangled entry name -> number of instructions carrying ``.ftz`` (subnormal flushing:
    ``setp.lt.ftz.f32`` treats a subnormal float as zero) in the entry's body."""
    counts = {}
    starts = [(m.start(), m.group(1)) for m in _PTX_ENTRY_RE.finditer(ptx)]
    for i, (pos, name) in enumerate(starts):
        end = starts[i + 1][0] if i + 1 < len(starts) else len(ptx)
        counts[name] = len(_PTX_FTZ_RE.findall(ptx, pos, end))
    # device functions that are not inlined (.func) are not attributed; rare with templates
    return counts


def _compile(source: str, arch_opt: str, options: tuple, name_expressions: tuple,
             want_cubin: bool, want_ptx: bool, filename: str = "kernel.cu"):
    nv = _nvrtc()
    t0 = time.perf_counter()
    prog = _check(nv.nvrtcCreateProgram(source.encode(), filename.encode(), 0, [], []),
                  "nvrtcCreateProgram")
    try:
        for e in name_expressions:
            _check(nv.nvrtcAddNameExpression(prog, e.encode()), f"nvrtcAddNameExpression({e})")
        opts = tuple(options) + (arch_opt,)
        err = nv.nvrtcCompileProgram(prog, len(opts), [o.encode() for o in opts])[0]
        log = _program_log(prog)
        if err != nv.nvrtcResult.NVRTC_SUCCESS:
            _, msg = nv.nvrtcGetErrorString(err)
            msg = msg.decode() if isinstance(msg, bytes) else str(msg)
            raise NvrtcError(f"NVRTC compile for {arch_opt} failed ({msg}); options: "
                             f"{' '.join(opts)}\n{log}", log)
        lowered = {}
        for e in name_expressions:
            name = _check(nv.nvrtcGetLoweredName(prog, e.encode()), f"nvrtcGetLoweredName({e})")
            lowered[e] = name.decode() if isinstance(name, bytes) else str(name)
        cubin = ptx = None
        if want_cubin:
            n = _check(nv.nvrtcGetCUBINSize(prog), "nvrtcGetCUBINSize")
            buf = b" " * n
            _check(nv.nvrtcGetCUBIN(prog, buf), "nvrtcGetCUBIN")
            cubin = buf
        if want_ptx:
            n = _check(nv.nvrtcGetPTXSize(prog), "nvrtcGetPTXSize")
            buf = b" " * n
            _check(nv.nvrtcGetPTX(prog, buf), "nvrtcGetPTX")
            ptx = buf.rstrip(b"\x00").decode("utf-8", "replace")
        return opts, log, lowered, cubin, ptx, time.perf_counter() - t0
    finally:
        nv.nvrtcDestroyProgram(prog)


def compile_program(source: str, options: tuple, name_expressions: tuple = (), *,
                    cubin: bool = True, filename: str = "kernel.cu") -> tuple:
    """One NVRTC compile with exactly ``options`` (the architecture among them): ``(log,
    lowered names, binary, seconds)``, the binary a cubin (``cubin=True``) or the PTX text."""
    arch_opts = tuple(o for o in options if o.startswith(("-arch", "--gpu-architecture")))
    if len(arch_opts) != 1:
        raise ValueError(f"options must hold one architecture option, got {arch_opts!r}")
    _, log, lowered, binary, ptx, secs = _compile(
        source, arch_opts[0], tuple(o for o in options if o not in arch_opts),
        tuple(name_expressions), cubin, not cubin, filename)
    return log, lowered, binary if cubin else ptx, secs


def compile_cubin(source: str, arch: int, options: tuple = (), name_expressions: tuple = (),
                  *, keep_binaries: bool = False, filename: str = "kernel.cu") -> CompileResult:
    """Compile ``source`` for ``sm_<arch>`` with ``options`` (give the full list, e.g.
    ``cupy_options(_modules.compile_options(fam))``) plus ``--ptxas-options=-v``; parse the
    ptxas report and the PTX. Raises :class:`NvrtcError` (with the log) on failure."""
    arch = int(arch)
    opts = tuple(o for o in options if not o.startswith(("-arch", "--gpu-architecture")))
    opts += ("--ptxas-options=-v",)
    opts, log, lowered, cubin, ptx, secs = _compile(
        source, f"--gpu-architecture=sm_{arch}", opts, tuple(name_expressions), keep_binaries,
        True, filename)
    stats = parse_ptxas_log(log)
    ftz = ptx_ftz_counts(ptx or "")
    by_mangled = {v: k for k, v in lowered.items()}
    kernels = {}
    for mangled, st in stats.items():
        name = by_mangled.get(mangled, mangled)
        kernels[name] = KernelStats(name=name, mangled=mangled,
                                    ftz_instructions=ftz.get(mangled, -1), **st)
    return CompileResult(arch=arch, options=opts, kernels=kernels, lowered_names=lowered, log=log,
                         seconds=secs, cubin=cubin if keep_binaries else None,
                         ptx=ptx if keep_binaries else None)


def compile_ptx(source: str, arch: int, options: tuple = (), name_expressions: tuple = (),
                *, filename: str = "kernel.cu") -> CompileResult:
    """Compile to PTX for ``compute_<arch>`` (no ptxas, so no register report; ``kernels``
    holds only the ``.ftz`` counts). ``result.ptx`` holds the text."""
    arch = int(arch)
    opts = tuple(o for o in options if not o.startswith(("-arch", "--gpu-architecture")))
    opts, log, lowered, _, ptx, secs = _compile(
        source, f"--gpu-architecture=compute_{arch}", opts, tuple(name_expressions), False, True,
        filename)
    by_mangled = {v: k for k, v in lowered.items()}
    kernels = {}
    for mangled, n in ptx_ftz_counts(ptx).items():
        name = by_mangled.get(mangled, mangled)
        kernels[name] = KernelStats(name=name, mangled=mangled, registers=-1, spill_stores=-1,
                                    spill_loads=-1, shared_static=-1, stack_frame=-1,
                                    ftz_instructions=n)
    return CompileResult(arch=arch, options=opts, kernels=kernels, lowered_names=lowered,
                         log=log, seconds=secs, ptx=ptx)


_PTX_FUNC_START = re.compile(r"^(?=(?:\.visible\s+|\.weak\s+)?\.(?:entry|func)\b)", re.M)
_PTX_FUNC_NAME = re.compile(r"\.(?:entry|func)\s+(?:\([^)]*\)\s*)?([\w$]+)")
_PTX_DEMOTED = re.compile(r"^[ \t]*// demoted variable\n[ \t]*(\.shared [^\n]*;)[ \t]*\n", re.M)
_PTX_BLANK_RUN = re.compile(r"\n(?:[ \t]*\n){2,}")
_PTX_LABEL = re.compile(r"\$L__BB\d+_")
_PTX_LINKAGE_NOTE = re.compile(r"^\s*// \.(?:globl|weak)\b.*$", re.M)


def ptx_functions(ptx: str) -> tuple[list, dict]:
    """(the module-level lines, ``{name: text}`` of every ``.entry`` and ``.func``) of a PTX
    module, normalised for comparing one kernel across modules: comments naming the next
    function's linkage dropped, block labels (``$L__BB<function number>_<block>``) stripped
    of the function's number in its module, runs of blank lines as one, and a ``__shared__``
    variable NVVM demoted into the one kernel that uses it counted as the module-level
    declaration it is in a module where several kernels use it (the same variable: a
    function-static ``__shared__`` of a device function that several instantiations call,
    e.g. ar_last_block's ticket flag)."""
    text = _PTX_LINKAGE_NOTE.sub("", ptx)
    parts = _PTX_FUNC_START.split(text)
    header = [ln for ln in parts[0].splitlines() if ln.strip() and not ln.lstrip().startswith("//")]
    funcs = {}
    for part in parts[1:]:
        header += [m.group(1) for m in _PTX_DEMOTED.finditer(part)]
        part = _PTX_BLANK_RUN.sub("\n\n", _PTX_DEMOTED.sub("", part))
        funcs[_PTX_FUNC_NAME.search(part).group(1)] = _PTX_LABEL.sub("$L__BB_", part).rstrip()
    return header, funcs


def compare_grouping_ptx(family, dtype, arch: int = 90) -> dict:
    """``{expr: differences}`` between each kernel's PTX (``compute_<arch>``) compiled in the
    family x dtype module (the checks' grouping, the library's before issue 33) and in its
    runtime module (:func:`runtime_modules`): the entry, the functions it keeps, and the
    module-level declarations. An empty list means byte-identical after
    :func:`ptx_functions`' normalisation."""
    fam, (source, _, options, exprs) = job_for(family, dtype, arch)
    whole = compile_ptx(source, arch, options, exprs, filename="module.cu")
    w_header, w_funcs = ptx_functions(whole.ptx)
    out = {}
    for group in fam.modules_for(dtype):
        _, (src, _, opts, ex) = job_for(fam, dtype, arch, exprs=group)
        one = compile_ptx(src, arch, opts, ex, filename="module.cu")
        header, funcs = ptx_functions(one.ptx)
        for e in group:
            diff = [] if one.lowered_names[e] == whole.lowered_names[e] else ["lowered name"]
            diff += [] if one.lowered_names[e] in funcs else ["entry missing"]
            diff += [f"function {n}" for n, body in funcs.items() if w_funcs.get(n) != body]
            diff += [f"declaration {ln.strip()}" for ln in header if ln not in w_header]
            out[e] = diff
    return out


# --------------------------------------------------------------------------------------------
# Families, with an on-disk cache keyed by everything that goes into the compile
# --------------------------------------------------------------------------------------------

def cache_root() -> Path:
    """The root of cupyops' caches (cupyops.core.caches.cache_root)."""
    from cupyops.core import caches
    return caches.cache_root()


def default_cache_dir() -> Path:
    """The checks' cache folder (cupyops.core.caches: ``nvrtc-checks``)."""
    from cupyops.core import caches
    return caches.cache_dir("nvrtc-checks")


def cache_key(*parts: str) -> str:
    """A file name for a cache entry: the SHA-256 of ``parts`` (each part ended by a byte no
    part holds)."""
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode())
        h.update(b"\1")
    return h.hexdigest()


def write_cache_entry(path: Path, data) -> None:
    """Write ``data`` as JSON to ``path`` as the simt build cache writes (a unique temporary
    file, fsync, rename): no reader and no crash ever leaves a partial file there. Readers treat
    a file they cannot parse as a miss."""
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(data))


def _cache_key(source: str, arch: int, options: tuple, exprs: tuple) -> str:
    return cache_key(source, str(arch), "\0".join(options), "\0".join(exprs),
                     "%d.%d" % nvrtc_version(), "v1")


def run_pool(fn, jobs_list: list, workers: int, done) -> None:
    """``fn(job)`` for each job, in a pool of ``workers`` spawned processes (fork and NVRTC's
    threads do not mix) where ``workers`` > 1 and there are several jobs, else here, in order;
    ``done(k, result)`` as job ``k`` finishes."""
    if workers > 1 and len(jobs_list) > 1:
        import multiprocessing
        ctx = multiprocessing.get_context("spawn")
        with concurrent.futures.ProcessPoolExecutor(max_workers=min(workers, len(jobs_list)),
                                                    mp_context=ctx) as ex:
            futures = {ex.submit(fn, job): k for k, job in enumerate(jobs_list)}
            for fut in concurrent.futures.as_completed(futures):
                done(futures[fut], fut.result())
    else:
        for k, job in enumerate(jobs_list):
            done(k, fn(job))


def _compile_job(job: tuple) -> dict:
    """Process-pool entry: (source, arch, options, exprs) -> CompileResult JSON, or error."""
    source, arch, options, exprs = job
    try:
        return {"ok": True, "result": compile_cubin(source, arch, options, exprs,
                                                    filename="module.cu").to_json()}
    except NvrtcError as e:
        return {"ok": False, "error": str(e), "log": e.log}


def compile_family(family, dtype, arch: int, *, cache_dir: Path | str | None = None
                   ) -> CompileResult:
    """Compile the module of ``family`` (a KernelFamily or a registered name) for ``dtype``
    and ``sm_<arch>`` as the CuPy path would; cached on disk (``cache_dir``, default
    :func:`default_cache_dir`; ``cache_dir=False`` for no cache)."""
    return compile_many([(family, dtype, arch)], cache_dir=cache_dir, jobs=1)[0]


def job_for(family, dtype, arch, sources=None, exprs=None):
    """``(family, (source, arch, options, name expressions))``: what compiling ``family``'s
    instantiations for ``dtype`` and ``sm_<arch>`` takes, with the CuPy path's options and the
    includes inlined. By default one compile holds every expression of the dtype (the fewest
    compiles: a kernel's PTX does not depend on the module it is compiled in, but its registers
    and spills do, so tests/test_nvrtc_compile.py compiles the runtime modules); with
    ``exprs``, one module of :func:`runtime_modules`, its source ended by its tag exactly as
    the library compiles it.
    ``sources`` caches the inlined sources across calls."""
    fam = _modules.get_family(family) if isinstance(family, str) else family
    sources = {} if sources is None else sources
    source = sources.get(fam.source)
    if source is None:
        source = _modules.inline_includes(_modules.read_kernel_file(fam.source), fam.source)
        sources[fam.source] = source
    options = cupy_options(_modules.compile_options(fam))
    if exprs is None:
        return fam, (source, int(arch), options, fam.expressions_for(dtype))
    exprs = tuple(exprs)
    tagged = source + ("" if source.endswith("\n") else "\n") + _modules.module_tag(fam.name, exprs)
    return fam, (tagged, int(arch), options, exprs)


def runtime_modules(families=None, dtypes=None) -> list:
    """``[(family, dtypes, exprs), ...]``: every module the library compiles for ``families``
    (names or KernelFamily; default all registered) and ``dtypes`` (default all served), each
    once, with the dtypes that use it: the registry's grouping, as ``precompile`` builds them."""
    fams = list(_modules.families().values()) if families is None else [
        _modules.get_family(f) if isinstance(f, str) else f for f in families]
    wanted = None if dtypes is None else {np.dtype(d) for d in dtypes}
    out: dict = {}
    for fam in fams:
        for dt in fam.dtypes:
            if wanted is not None and dt not in wanted:
                continue
            for group in fam.modules_for(dt):
                out.setdefault((fam.name, group), (fam, []))[1].append(dt)
    return [(fam, tuple(dts), group) for (_, group), (fam, dts) in out.items()]


def merge_results(results) -> "CompileResult | NvrtcError":
    """One :class:`CompileResult` of several modules' (their kernels, names and logs; the
    seconds summed), or the first :class:`NvrtcError` among them."""
    for r in results:
        if isinstance(r, Exception):
            return r
    first = results[0]
    return CompileResult(arch=first.arch, options=first.options,
                         kernels={k: v for r in results for k, v in r.kernels.items()},
                         lowered_names={k: v for r in results for k, v in r.lowered_names.items()},
                         log="\n".join(r.log for r in results),
                         seconds=sum(r.seconds for r in results))


def compile_many(items, *, cache_dir=None, jobs: int = 2, errors: str = "raise",
                 progress=None) -> list:
    """Compile ``[(family, dtype, arch), ...]`` (one module each: every instantiation of the
    dtype; or ``(family, dtype, arch, exprs)``: the module of :func:`runtime_modules` that holds
    ``exprs``, as the library compiles it) with a process pool of ``jobs``; results in order. Every job runs; then with ``errors="raise"`` the failures are
    raised as one :class:`NvrtcError` carrying their logs, with ``errors="return"`` a failed
    item's place holds its :class:`NvrtcError`. Successful results are cached on disk.
    ``progress(done, total, label, ok)`` is called as each compile finishes."""
    if cache_dir is None:
        cache_dir = default_cache_dir()
    cache = Path(cache_dir) if cache_dir else None
    if cache:
        cache.mkdir(parents=True, exist_ok=True)
    results: list = [None] * len(items)
    todo = []
    same: dict = {}          # cache key -> the todo entry of the first identical job
    sources: dict = {}
    for i, (family, dtype, arch, *exprs) in enumerate(items):
        fam, job = job_for(family, dtype, arch, sources, *exprs)
        key = _cache_key(*job)
        if key in same:      # identical instantiations (nonzero's bool, int8, uint8): once
            same[key][0].append(i)
            continue
        path = cache / f"{key}.json" if cache else None
        if path is not None and path.is_file():
            try:
                results[i] = CompileResult.from_json(json.loads(path.read_text()))
                same[key] = ([i], None)
                continue
            except (ValueError, KeyError, TypeError):
                pass
        same[key] = ([i], None)
        what = ", ".join(exprs[0]) if exprs else f"{fam.name} {np.dtype(dtype)}"
        todo.append((same[key][0], job, path, f"{what} sm_{arch}"))
    for places, _ in same.values():          # cached firsts: their twins share the result
        for i in places[1:]:
            results[i] = results[places[0]]
    failures = []
    done = [0]

    def finish(entry, out):
        places, job, path, label = entry
        done[0] += 1
        if progress is not None:
            progress(done[0], len(todo), label, out["ok"])
        if not out["ok"]:
            failures.append(f"{label}: {out['error']}")
            for i in places:
                results[i] = NvrtcError(f"{label}: {out['error']}", out["log"])
            return
        for i in places:
            results[i] = CompileResult.from_json(out["result"])
        if path is not None:          # written as each finishes: an interrupted run keeps them
            write_cache_entry(path, out["result"])

    run_pool(_compile_job, [t[1] for t in todo], jobs, lambda k, out: finish(todo[k], out))
    if failures and errors == "raise":
        raise NvrtcError("\n\n".join(failures), "\n\n".join(failures))
    return results


# --------------------------------------------------------------------------------------------
# Occupancy
# --------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class ArchLimits:
    """Per-SM limits of one architecture (CUDA C++ Programming Guide, "Technical
    Specifications per Compute Capability"; occupancy calculator granularities)."""
    arch: int
    max_threads_per_sm: int
    max_blocks_per_sm: int
    max_shared_per_sm: int          # bytes, largest carveout
    max_shared_per_block_optin: int
    regs_per_sm: int = 65536
    max_regs_per_thread: int = 255
    reg_alloc_unit: int = 256       # registers per warp are allocated in units of 256
    shared_alloc_unit: int = 128    # bytes
    reserved_shared_per_block: int = 1024   # the driver's per-block reservation (sm_80+)
    warp_size: int = 32
    note: str = ""

    @property
    def max_warps_per_sm(self) -> int:
        return self.max_threads_per_sm // self.warp_size


KiB = 1024

#: The per-SM limits, one architecture a line: arch, threads/SM, blocks/SM, shared memory/SM
#: (KiB, largest carveout), opt-in shared memory/block (KiB), shared memory allocation unit
#: (bytes), per-block shared memory reservation (bytes), note. Registers: 64 K per SM, 255 per
#: thread, allocated per warp in units of 256 (:class:`ArchLimits`' defaults).
_ARCH_TABLE = """
 70  2048  32  96   96   256     0  Volta (NVRTC 12 only)
 75  1024  16  64   64   256     0  Turing
 80  2048  32  164  163  128  1024  A100
 86  1536  16  100  99   128  1024  GA10x
 87  1536  16  164  163  128  1024  Orin
 88  1536  16  100  99   128  1024  assumed like sm_86
 89  1536  24  100  99   128  1024  Ada
 90  2048  32  228  227  128  1024  H100/H200
100  2048  32  228  227  128  1024  B200
103  2048  32  228  227  128  1024  B300
107  1536  32  128  99   128  1024  assumed like sm_120
110  1536  32  228  227  128  1024  Thor (assumed 48 warps/SM)
120  1536  32  128  99   128  1024  RTX 50 / RTX PRO Blackwell
121  1536  32  128  99   128  1024  GB10
"""


def _arch_limits_table(text: str) -> dict:
    """``arch -> ArchLimits`` of a table laid out as :data:`_ARCH_TABLE`."""
    out = {}
    for line in text.strip().splitlines():
        *numbers, note = line.split(None, 7)
        arch, threads, blocks, smem, optin, unit, reserved = (int(n) for n in numbers)
        out[arch] = ArchLimits(arch, threads, blocks, smem * KiB, optin * KiB,
                               shared_alloc_unit=unit, reserved_shared_per_block=reserved,
                               note=note)
    return out


ARCH_LIMITS: dict[int, ArchLimits] = _arch_limits_table(_ARCH_TABLE)


def arch_limits(arch: int) -> ArchLimits:
    """Limits of ``arch``; an unknown one takes the closest older known one (noted)."""
    arch = int(arch)
    if arch in ARCH_LIMITS:
        return ARCH_LIMITS[arch]
    older = [a for a in ARCH_LIMITS if a < arch]
    base = ARCH_LIMITS[max(older) if older else min(ARCH_LIMITS)]
    return dataclasses.replace(base, arch=arch, note=f"unknown; assumed like sm_{base.arch}")


@dataclasses.dataclass(frozen=True)
class Occupancy:
    arch: int
    block_size: int
    registers: int
    shared_per_block: int       # static + dynamic, before the reservation and rounding
    blocks_per_sm: int
    active_warps: int
    max_warps: int
    limiter: str                # "warps", "blocks", "registers", "shared" or "invalid"

    @property
    def fraction(self) -> float:
        return self.active_warps / self.max_warps if self.max_warps else 0.0


def _round_up(x: int, unit: int) -> int:
    return -(-x // unit) * unit


def occupancy(registers: int, block_size: int, arch: int, shared_static: int = 0,
              shared_dynamic: int = 0) -> Occupancy:
    """Resident warps per SM for a kernel with ``registers`` per thread, launched with
    ``block_size`` threads and ``shared_static + shared_dynamic`` bytes of shared memory."""
    lim = arch_limits(arch)
    warps_per_block = -(-int(block_size) // lim.warp_size)
    smem = int(shared_static) + int(shared_dynamic)
    invalid = Occupancy(lim.arch, block_size, registers, smem, 0, 0, lim.max_warps_per_sm,
                        "invalid")
    if (block_size < 1 or block_size > 1024 or registers > lim.max_regs_per_thread
            or smem > lim.max_shared_per_block_optin):
        return invalid
    limits = {
        "warps": lim.max_warps_per_sm // warps_per_block,
        "blocks": lim.max_blocks_per_sm,
    }
    if registers > 0:
        regs_per_warp = _round_up(registers * lim.warp_size, lim.reg_alloc_unit)
        limits["registers"] = (lim.regs_per_sm // regs_per_warp) // warps_per_block
    smem_alloc = _round_up(smem + lim.reserved_shared_per_block, lim.shared_alloc_unit)
    if smem_alloc > 0:
        limits["shared"] = lim.max_shared_per_sm // smem_alloc
    limiter = min(limits, key=lambda k: (limits[k], list(limits).index(k)))
    blocks = max(0, limits[limiter])
    return Occupancy(lim.arch, int(block_size), int(registers), smem, blocks,
                     blocks * warps_per_block, lim.max_warps_per_sm,
                     limiter if blocks else "invalid")


# --------------------------------------------------------------------------------------------
# Reports
# --------------------------------------------------------------------------------------------

def load_family_modules() -> list:
    """Register every operator's kernel families (importing the operators' descriptors,
    cupyops.ops.operators, imports their launch code, which registers them); returns the
    families' names."""
    from cupyops import ops
    return sorted({family for op in ops.operators() for family in op.families})


@dataclasses.dataclass
class Row:
    family: str
    dtype: str
    arch: int
    kernel: str
    stats: KernelStats
    occupancies: tuple        # Occupancy per planned block size


def family_report(families=None, dtypes=None, archs=None, *, cache_dir=None, jobs: int = 2,
                  progress=None):
    """Rows for every (family, dtype, arch, entry function), each kernel compiled as the
    library compiles it (its module of :func:`runtime_modules`: its registers and spills depend
    on the module). ``families``: names or KernelFamily objects (default: every registered
    one)."""
    archs = tuple(archs) if archs is not None else check_archs()
    items, places = [], []
    for fam, dts, exprs in runtime_modules(families, dtypes):
        for arch in archs:
            items.append((fam, dts[0], arch, exprs))
            places.append([(dt, arch) for dt in dts])
    results = compile_many(items, cache_dir=cache_dir, jobs=jobs, progress=progress)
    per: dict = {}
    for (fam, _, _, _), where, res in zip(items, places, results):
        for dt, arch in where:
            per.setdefault((fam.name, dt, arch), (fam, []))[1].append(res)
    order = {name: i for i, name in enumerate(_modules.families())}
    rows = []
    for (_, dt, arch), (fam, parts) in sorted(
            per.items(), key=lambda kv: (order.get(kv[0][0], len(order)),
                                         kv[1][0].dtypes.index(kv[0][1]), kv[0][2])):
        res = merge_results(parts)
        for name in fam.expressions_for(dt):
            st = res.kernels.get(name)
            if st is None:
                continue
            occ = tuple(occupancy(st.registers, b, arch, st.shared_static,
                                  fam.dynamic_shared_for(dt, name, b))
                        for b in fam.block_sizes_for(name))
            rows.append(Row(fam.name, str(dt), arch, name, st, occ))
    return rows


def render_table(rows, archs=None) -> str:
    """Markdown: the register/spill/occupancy table."""
    archs = sorted({r.arch for r in rows}) if archs is None else list(archs)
    lines = [
        "# Kernel resources",
        "",
        "Generated by `python -m cupyops.tools.nvrtc --table docs/kernels.md`; do not edit by hand.",
        "",
        f"NVRTC {'%d.%d' % nvrtc_version()}, options as the CuPy path passes them: "
        f"`{' '.join(cupy_options(_modules.NVRTC_OPTIONS))}"
        f" --gpu-architecture=sm_XX --ptxas-options=-v` (no include path).",
        "",
        "Registers are per thread; spills, static shared memory and stack in bytes. "
        "Occupancy = active warps per SM / maximum warps per SM at each planned block size "
        "(registers allocated per warp in units of 256, shared memory incl. the planned dynamic "
        "amount and the 1 KiB per-block reservation of sm_80+), with the limiting resource. "
        "`ftz` counts PTX instructions that flush subnormals to zero (CuPy compiles with "
        "`-ftz=true`); it should be 0.",
        "",
        "| arch | threads/SM | blocks/SM | smem/SM KiB | note |",
        "| --- | --- | --- | --- | --- |",
    ]
    for a in archs:
        lim = arch_limits(a)
        lines.append(f"| sm_{a} | {lim.max_threads_per_sm} | {lim.max_blocks_per_sm} | "
                     f"{lim.max_shared_per_sm // KiB} | {lim.note} |")
    by_family: dict = {}
    for r in rows:
        by_family.setdefault(r.family, []).append(r)
    if by_family:
        lines += ["", "## Summary", "",
                  "| family | arch | kernels | max regs | spills | max stack | min occupancy |",
                  "| --- | --- | --- | --- | --- | --- | --- |"]
        for fam, frows in by_family.items():
            for a in archs:
                ar = [r for r in frows if r.arch == a]
                if not ar:
                    continue
                worst = min((o for r in ar for o in r.occupancies), key=lambda o: o.fraction,
                            default=None)
                spills = sum(1 for r in ar if r.stats.spill_stores or r.stats.spill_loads)
                occ = (f"{worst.fraction:.0%} ({worst.limiter})" if worst is not None else "-")
                lines.append(f"| {fam} | sm_{a} | {len(ar)} | "
                             f"{max(r.stats.registers for r in ar)} | {spills} | "
                             f"{max(r.stats.stack_frame for r in ar)} | {occ} |")
    for fam, frows in by_family.items():
        lines += ["", f"## {fam}", "",
                  "| kernel | arch | regs | spill st/ld | smem | stack | ftz | occupancy (block: warps, limiter) |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- |"]
        for r in sorted(frows, key=lambda r: (r.dtype, r.kernel, r.arch)):
            s = r.stats
            occ = "; ".join(f"{o.block_size}: {o.fraction:.0%} ({o.active_warps}/{o.max_warps}, "
                            f"{o.limiter})" for o in r.occupancies)
            lines.append(f"| `{r.kernel}` | sm_{r.arch} | {s.registers} | {s.spill_stores}/"
                         f"{s.spill_loads} | {s.shared_static} | {s.stack_frame} | "
                         f"{s.ftz_instructions} | {occ} |")
    if not by_family:
        lines += ["", "(no kernel families registered)"]
    return "\n".join(lines) + "\n"


#: blocks of docs/kernels.md that other generators write (``<!-- NAME:begin ... -->`` to
#: ``<!-- NAME:end -->``): ``--table`` keeps them
KEPT_BLOCKS = ("issue-rate", "nvrtc-timing")


def _compare_ptx_main(families, dtypes, arch: int) -> int:
    t0, n, bad = time.perf_counter(), 0, {}
    for fam in ([_modules.get_family(f) for f in families] if families
                else list(_modules.families().values())):
        seen = set()
        for dt in fam.dtypes:
            exprs = fam.expressions_for(dt)
            if (dtypes and str(dt) not in dtypes) or exprs in seen:
                continue
            seen.add(exprs)             # identical instantiations once
            diffs = compare_grouping_ptx(fam, dt, arch)
            n += len(diffs)
            bad.update({e: d for e, d in diffs.items() if d})
            print(f"{fam.name} {dt}: {len(diffs)} kernels, {sum(map(bool, diffs.values()))} "
                  f"differ ({time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)
    for e, d in bad.items():
        print(f"DIFFERS: {e}: {'; '.join(d)}")
    print(f"compute_{arch} PTX of {n} kernels: {n - len(bad)} identical alone and in the "
          f"family x dtype module, {len(bad)} differ")
    return 1 if bad else 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m cupyops.tools.nvrtc",
                                description="NVRTC compile checks: registers, spills, occupancy")
    p.add_argument("--table", metavar="PATH", help="write the markdown table to PATH")
    p.add_argument("--family", action="append", help="family name (repeatable; default all)")
    p.add_argument("--dtype", action="append", help="value dtype (repeatable; default all)")
    p.add_argument("--arch", action="append", type=int, help="arch, e.g. 90 (default: all checked)")
    p.add_argument("--selftest", action="store_true", help="include the selftest family")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--no-cache", action="store_true")
    p.add_argument("--compare-ptx", action="store_true",
                   help="check each kernel's PTX alone (the library's modules) against its PTX "
                        "in the family x dtype compile, for --arch (default 90)")
    args = p.parse_args(argv)
    load_family_modules()
    if args.selftest:
        _modules.register_family(_modules.SELFTEST_FAMILY)
    if args.compare_ptx:
        return _compare_ptx_main(args.family, args.dtype, (args.arch or [90])[0])
    t0 = time.perf_counter()
    def progress(done, total, label, ok):
        print(f"[{done}/{total}] {label}{'' if ok else ' FAILED'} "
              f"({time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)

    rows = family_report(args.family, args.dtype, args.arch, jobs=args.jobs,
                         cache_dir=False if args.no_cache else None, progress=progress)
    text = render_table(rows, args.arch)
    if args.table:
        # keep the blocks other generators own (the issue-rate tables of
        # cupyops.bench.issue_rate, the NVRTC times of cupyops.tools.nvrtc_timing)
        old = Path(args.table).read_text() if Path(args.table).exists() else ""
        for owner in KEPT_BLOCKS:
            begin, end = f"<!-- {owner}:begin", f"<!-- {owner}:end -->"
            if begin in old and end in old:
                kept = begin + old.split(begin, 1)[1].split(end, 1)[0] + end
                text = text.rstrip("\n") + "\n\n" + kept + "\n"
        Path(args.table).write_text(text)
        print(f"wrote {args.table}: {len(rows)} rows in {time.perf_counter() - t0:.1f} s",
              file=sys.stderr)
    else:
        sys.stdout.write(text)
    bad = [r for r in rows if r.stats.spill_stores or r.stats.spill_loads]
    for r in bad:
        print(f"SPILLS: {r.family} {r.kernel} sm_{r.arch}: {r.stats.spill_stores}/"
              f"{r.stats.spill_loads} bytes", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
