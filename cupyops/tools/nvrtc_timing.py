"""NVRTC time per kernel module, as a first call on a GPU pays it (issue 33).

Each module is compiled in a **fresh process** (nothing cached: NVRTC keeps nothing between
processes, and nothing here reads a disk cache) the way the CuPy path compiles it: an sm_90
cubin (``--arch``), with the options a ``cupy.RawModule`` hands NVRTC
(:func:`cupy_path_options`: ``cupy._core.core.assemble_cupy_compiler_options`` of the family's
options, CuPy's include folders among them, then ``-ftz=true``, the architecture and
``--device-as-default-execution-space``), the name expressions added and lowered, the same
libnvrtc (through ``cuda.bindings``: CuPy's own compile needs a driver for its architecture
query). The worker first loads NVRTC and compiles the empty program CuPy compiles once a
process to key its disk cache (the *fixed* part of a process's first compile), then a
**reference module** (:data:`REFERENCE_SOURCE`: a templated block argmax with a warp-shuffle
combine, two instantiations), the module, and the reference again. Each figure is also given as
a multiple of the reference's mean time beside it: the machine is shared, and load moves
seconds.

Groupings: ``family`` is one module per family x value dtype holding every kernel (the library
before issue 33); ``runtime`` the modules the library compiles now (the registry's grouping,
:func:`cupyops.tools.nvrtc.runtime_modules`). Identical modules (the nonzero family's bool,
int8 and uint8 kernels are one instantiation) are compiled once and count for every dtype.

CLI::

    python -m cupyops.tools.nvrtc_timing --json out.json [--grouping family,runtime]
        [--family F] [--dtype D ...] [--arch 90] [--markdown out.md]
    python -m cupyops.tools.nvrtc_timing --precompile-wall --workers 1 --workers 2
    python -m cupyops.tools.nvrtc_timing --from-json out.json --markdown out.md
        [--compare earlier.json]    # per family x dtype against an earlier checkout's run

Needs cuda-bindings and nvidia-cuda-nvrtc (the ``test`` extra) and, for CuPy's include
options, CuPy (without it the options are :func:`cupyops.tools.nvrtc.cupy_options`, said in
the output).
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from cupyops.core import modules as _modules
from cupyops.tools import nvrtc as _nvrtc

__all__ = ["REFERENCE_SOURCE", "REFERENCE_EXPRESSIONS", "cupy_path_options", "plan_jobs",
           "time_jobs", "worker", "report", "compare_table", "main"]

REFERENCE_SOURCE = r"""
// Reference module for NVRTC timings: a block reduction to the largest element's index,
// with a warp-shuffle combine.
template <typename T>
__device__ void ref_pick(T& best, long long& at, T v, long long i)
{
    if (v > best || (v == best && i < at)) { best = v; at = i; }
}

template <typename T>
__device__ void ref_warp_combine(T& best, long long& at)
{
    for (int d = 16; d > 0; d >>= 1) {
        T v = __shfl_down_sync(0xffffffffu, best, d);
        long long i = __shfl_down_sync(0xffffffffu, at, d);
        ref_pick(best, at, v, i);
    }
}

template <typename T>
__global__ void ref_block_argmax(const T* __restrict__ x, long long n, long long* __restrict__ out)
{
    __shared__ T s_best[32];
    __shared__ long long s_at[32];
    T best = x[0];
    long long at = 0;
    for (long long i = threadIdx.x; i < n; i += blockDim.x)
        ref_pick(best, at, x[i], i);
    ref_warp_combine(best, at);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) { s_best[warp] = best; s_at[warp] = at; }
    __syncthreads();
    if (warp == 0) {
        const int k = lane < ((blockDim.x + 31) >> 5) ? lane : 0;
        best = s_best[k];
        at = s_at[k];
        ref_warp_combine(best, at);
        if (lane == 0) out[blockIdx.x] = at;
    }
}
"""
REFERENCE_EXPRESSIONS = ("ref_block_argmax<float>", "ref_block_argmax<double>")

GROUPINGS = ("family", "runtime")


# --------------------------------------------------------------------------------------------
# The worker: one fresh process per module
# --------------------------------------------------------------------------------------------

def cupy_path_options(options: tuple, arch: int) -> tuple[tuple, str]:
    """(the options NVRTC gets from a ``cupy.RawModule`` built with ``options`` for an sm_<arch>
    device, where they came from). CuPy's ``compile_with_cache`` assembles them
    (``assemble_cupy_compiler_options``), ``_compile_with_cache_cuda`` appends ``-ftz=true``,
    ``compile_using_nvrtc`` the architecture and ``--device-as-default-execution-space``."""
    try:
        core = importlib.import_module("cupy._core.core")
        assembled = tuple(core.assemble_cupy_compiler_options(tuple(options)))
        origin = "CuPy " + importlib.import_module("cupy").__version__
    except Exception as e:  # CuPy missing or broken: the checks' list, said so
        assembled = tuple(options)
        origin = f"cupyops.tools.nvrtc.cupy_options (CuPy not usable: {type(e).__name__})"
    return assembled + ("-ftz=true", f"-arch=sm_{int(arch)}",
                        "--device-as-default-execution-space"), origin


def _preprocess_options(options: tuple, arch: int) -> tuple:
    # CuPy's _preprocess: the empty program, its options with -ftz=true, compute_<arch>, PTX
    base = tuple(o for o in options if not o.startswith("-arch")
                 and o != "--device-as-default-execution-space")
    return base + (f"-arch=compute_{int(arch)}",)


def worker(job: dict) -> dict:
    """In a fresh process: NVRTC loaded, CuPy's empty compile, the reference, the module."""
    t0 = time.perf_counter()
    _nvrtc.nvrtc_version()                        # loads libnvrtc
    load = time.perf_counter() - t0
    options, origin = cupy_path_options(tuple(job["options"]), job["arch"])
    *_, pre = _nvrtc.compile_program("", _preprocess_options(options, job["arch"]), (),
                                     cubin=False)
    *_, ref = _nvrtc.compile_program(REFERENCE_SOURCE, options, REFERENCE_EXPRESSIONS,
                                     filename="reference.cu")
    _, lowered, cubin, secs = _nvrtc.compile_program(job["source"], options, tuple(job["exprs"]),
                                                     filename="module.cu")
    *_, ref_after = _nvrtc.compile_program(REFERENCE_SOURCE, options, REFERENCE_EXPRESSIONS,
                                           filename="reference.cu")
    ref = (ref + ref_after) / 2           # the reference just before and just after
    missing = [e for e in job["exprs"] if not lowered.get(e)]
    if missing:
        raise RuntimeError(f"not lowered: {missing}")
    return {"load_s": load, "preprocess_s": pre, "reference_s": ref, "seconds": secs,
            "cubin_bytes": len(cubin), "options": list(options), "options_from": origin}


def _run_worker(job: dict, root: Path) -> dict:
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(job, f)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(root)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    try:
        proc = subprocess.run([sys.executable, "-m", "cupyops.tools.nvrtc_timing", "--worker",
                               f.name], capture_output=True, text=True, cwd=root, env=env)
    finally:
        os.unlink(f.name)
    if proc.returncode != 0:
        raise RuntimeError(f"{job['label']}: worker failed\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


# --------------------------------------------------------------------------------------------
# Jobs
# --------------------------------------------------------------------------------------------

def _family_jobs(fams, wanted, arch, sources) -> list:
    jobs = []
    for fam in fams:
        for dt in fam.dtypes:
            if wanted is None or dt in wanted:
                _, (src, _, _, exprs) = _nvrtc.job_for(fam, dt, arch, sources)
                jobs.append(("family", fam, (dt,), exprs, src))
    return jobs


def plan_jobs(groupings=GROUPINGS, families=None, dtypes=None, arch: int = 90) -> list:
    """The modules to time: ``[{"grouping", "family", "dtypes", "exprs", "source", "options",
    "arch", "label"}, ...]``, identical modules of one grouping once (with all their dtypes)."""
    _nvrtc.load_family_modules()
    fams = list(_modules.families().values()) if families is None else [
        _modules.get_family(f) for f in families]
    wanted = None if dtypes is None else {np.dtype(d) for d in dtypes}
    sources: dict = {}
    raw = _family_jobs(fams, wanted, arch, sources) if "family" in groupings else []
    if "runtime" in groupings:
        for fam, dts, exprs in _nvrtc.runtime_modules(fams, wanted):
            _, (src, _, _, _) = _nvrtc.job_for(fam, dts[0], arch, sources, exprs)
            raw.append(("runtime", fam, dts, exprs, src))
    jobs: dict = {}
    for grouping, fam, dts, exprs, src in raw:
        key = (grouping, fam.name, exprs)
        if key in jobs:
            jobs[key]["dtypes"] += [str(d) for d in dts]
            continue
        jobs[key] = {"grouping": grouping, "family": fam.name, "dtypes": [str(d) for d in dts],
                     "exprs": list(exprs), "source": src, "arch": int(arch),
                     "options": list(_modules.compile_options(fam)),
                     "label": f"{grouping} {fam.name} {'; '.join(exprs) if grouping == 'runtime' else dts[0]}"}
    return list(jobs.values())


def time_jobs(jobs: list, progress=None) -> list:
    """Run each job in a fresh process, one at a time: the job's fields, the worker's figures,
    ``ratio`` (module / reference) and the load average before it."""
    import cupyops
    root = Path(cupyops.__file__).resolve().parent.parent
    out = []
    for k, job in enumerate(jobs):
        load = os.getloadavg()[0]
        res = _run_worker(job, root)
        rec = {key: v for key, v in job.items() if key != "source"}
        rec.update(res, loadavg=load, ratio=res["seconds"] / res["reference_s"])
        out.append(rec)
        if progress is not None:
            progress(k + 1, len(jobs), rec)
    return out


# --------------------------------------------------------------------------------------------
# Tables
# --------------------------------------------------------------------------------------------

def _fixed(records) -> tuple[float, float]:
    """Median (seconds, multiple of the reference) of a process's fixed part: NVRTC loaded and
    CuPy's empty compile."""
    secs = [r["load_s"] + r["preprocess_s"] for r in records]
    ratios = [(r["load_s"] + r["preprocess_s"]) / r["reference_s"] for r in records]
    return statistics.median(secs), statistics.median(ratios)


def _by_expr(records, grouping) -> dict:
    """(family, dtype, expr) -> the record of the module that holds it in ``grouping``."""
    out = {}
    for r in records:
        if r["grouping"] == grouping:
            for dt in r["dtypes"]:
                for e in r["exprs"]:
                    out[(r["family"], dt, e)] = r
    return out


def _fmt(s: float, x: float) -> str:
    return f"{s:.2f} ({x:.1f}x)"


def _plan_cost(plan, dt, after, fam_name, fixed):
    """(seconds, x ref) of a first call of ``plan``: the fixed part and each module it builds."""
    mods = {}
    for e in plan.exprs:
        rec = after.get((fam_name, dt, e))
        if rec is None:
            return None
        mods[id(rec)] = rec
    return (fixed[0] + sum(r["seconds"] for r in mods.values()),
            fixed[1] + sum(r["ratio"] for r in mods.values()))


def first_calls(records) -> list:
    """Per family x operators x dtype: the NVRTC a first call paid before (the family x dtype
    module) and pays now: the plan kind the family lists first (the common one) and the worst
    over the plan kinds at each index width (the fixed part of a process included). Rows of
    dicts: ``before``, ``first``, ``narrow``, ``wide``: (seconds, x ref, plan)."""
    fixed = _fixed(records)
    before, after = _by_expr(records, "family"), _by_expr(records, "runtime")
    rows = []
    _nvrtc.load_family_modules()
    for fam in _modules.families().values():
        for dt in fam.dtypes:
            old = before.get((fam.name, str(dt), fam.expressions_for(dt)[0]))
            by_ops: dict = {}
            for plan in fam.first_calls_for(dt):
                cost = _plan_cost(plan, str(dt), after, fam.name, fixed)
                if cost is None:
                    continue
                costs = by_ops.setdefault(plan.ops, {})
                costs.setdefault("first", cost + (plan.plan,))     # the family lists it first
                worst = costs.get(plan.wide)
                if worst is None or cost[1] > worst[1]:
                    costs[plan.wide] = cost + (plan.plan,)
            for ops, costs in by_ops.items():
                rows.append({"family": fam.name, "ops": ops, "dtype": str(dt),
                             "before": (fixed[0] + old["seconds"], fixed[1] + old["ratio"])
                             if old else None, "first": costs["first"],
                             "narrow": costs.get(False), "wide": costs.get(True)})
    return rows


def first_call_table(records) -> list:
    """Markdown lines of :func:`first_calls`."""
    lines = ["| operators | dtype | before s (x ref) | now, common plan s (x ref) | now, worst "
             "plan, 32-bit indexing | now, worst plan, 64-bit indexing |",
             "| --- | --- | --- | --- | --- | --- |"]
    cell = (lambda c: f"{_fmt(c[0], c[1])}, {c[2]}" if c else "-")
    for r in first_calls(records):
        lines.append(f"| {r['ops']} | {r['dtype']} | "
                     f"{_fmt(*r['before']) if r['before'] else '-'} | {cell(r['first'])} | "
                     f"{cell(r['narrow'])} | {cell(r['wide'])} |")
    return lines


def _totals(records) -> dict:
    out = {}
    for g in GROUPINGS:
        rs = [r for r in records if r["grouping"] == g]
        if rs:
            out[g] = (len(rs), sum(r["seconds"] for r in rs), sum(r["ratio"] for r in rs))
    return out


def _size_order(dts) -> list:
    """Smallest first; among one size bool, integers, dates, floats, complex last."""
    def key(d):
        dt = _nvrtc_dtype(d)
        return (dt.itemsize, "biumMVfc".find(dt.kind), d)
    return sorted(dts, key=key)


def _nvrtc_dtype(name: str) -> np.dtype:
    if name == "bfloat16":
        from cupyops.core import dtypes as _dtypes
        return _dtypes.dtype()
    return np.dtype(name)


def module_table(records, dtypes=None) -> list:
    """Markdown lines: per module (before) and per kernel (after), for ``dtypes`` (default: the
    three smallest and three largest by item size)."""
    before, after = _by_expr(records, "family"), _by_expr(records, "runtime")
    lines = ["| family | dtype | before: module s (x ref) | kernel | after: kernel s (x ref) |",
             "| --- | --- | --- | --- | --- |"]
    timed = {(r["family"], d) for r in records for d in r["dtypes"]}
    for fam in _modules.families().values():
        names = [str(d) for d in fam.dtypes if (fam.name, str(d)) in timed]
        chosen = dtypes or list(dict.fromkeys(_size_order(names)[:3] + _size_order(names)[-3:]))
        for dt in chosen:
            if dt not in names:
                continue
            for i, e in enumerate(_modules.get_family(fam.name).expressions_for(_nvrtc_dtype(dt))):
                old, new = before.get((fam.name, dt, e)), after.get((fam.name, dt, e))
                lines.append(f"| {fam.name if i == 0 else ''} | {dt if i == 0 else ''} | "
                             f"{_fmt(old['seconds'], old['ratio']) if old and i == 0 else ''} | "
                             f"`{e}` | {_fmt(new['seconds'], new['ratio']) if new else '-'} |")
    return lines


def report(records, dtypes=None) -> str:
    """The markdown report of one timing run."""
    fixed_s, fixed_x = _fixed(records)
    loads = [r["loadavg"] for r in records]
    refs = [r["reference_s"] for r in records]
    lines = [f"NVRTC {'%d.%d' % _nvrtc.nvrtc_version()}, sm_{records[0]['arch']} cubin, options "
             f"from {records[0]['options_from']}: `{' '.join(_short(o) for o in records[0]['options'])}`; "
             f"{len(records)} fresh processes, one at a time; load average "
             f"{min(loads):.1f}-{max(loads):.1f} (2 cores); reference module "
             f"{statistics.median(refs):.3f} s median ({min(refs):.3f}-{max(refs):.3f}). "
             f"A process's fixed part (NVRTC loaded, CuPy's empty compile): "
             f"{_fmt(fixed_s, fixed_x)}.", "", "### Per module and per kernel", ""]
    lines += module_table(records, dtypes)
    lines += ["", "### First call (fixed part included)", ""] + first_call_table(records)
    tot = _totals(records)
    lines += ["", "### Every module for one architecture (what precompile compiles)", "",
              "| grouping | modules | NVRTC s (sum) | x ref (sum) |", "| --- | --- | --- | --- |"]
    lines += [f"| {g} | {n} | {s:.1f} | {x:.0f} |" for g, (n, s, x) in tot.items()]
    if len(tot) == 2:
        lines += ["", f"runtime / family: {tot['runtime'][1] / tot['family'][1]:.2f} in seconds, "
                      f"{tot['runtime'][2] / tot['family'][2]:.2f} in reference units."]
    return "\n".join(lines) + "\n"


def compare_table(before, after) -> list:
    """Markdown lines comparing the ``runtime`` records of two runs (an earlier checkout's,
    ``before``, and this one's) per family x value dtype: modules, their sum and the slowest
    one (the most a first call's kernel costs), in reference units and seconds, and the totals
    of each family and of both runs."""
    def by(records):
        out: dict = {}
        for r in records:
            if r["grouping"] == "runtime":
                for dt in r["dtypes"]:
                    out.setdefault((r["family"], dt), []).append(r)
        return out

    def cells(rs):
        worst = max(rs, key=lambda r: r["ratio"])
        return (f"{len(rs)} | {sum(r['ratio'] for r in rs):.0f} | "
                f"{_fmt(worst['seconds'], worst['ratio'])}")
    old, new = by(before), by(after)
    lines = ["| family | dtype | before: modules | x ref (sum) | slowest s (x ref) | after: "
             "modules | x ref (sum) | slowest s (x ref) |", "| --- | --- | --- | --- | --- | "
             "--- | --- | --- |"]
    keys = set(old) & set(new)
    order = {d: i for i, d in enumerate(_size_order(sorted({k[1] for k in keys})))}
    for key in sorted(keys, key=lambda k: (k[0], order[k[1]])):
        lines.append(f"| {key[0]} | {key[1]} | {cells(old[key])} | {cells(new[key])} |")
    lines += ["", "| family | before: modules | NVRTC s | x ref | after: modules | NVRTC s | "
              "x ref | after / before (x ref) |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    fams = sorted({k[0] for k in set(old) & set(new)})
    for fam in fams + ["all"]:
        rows = []
        for recs in (before, after):
            rs = [r for r in recs if r["grouping"] == "runtime" and fam in (r["family"], "all")
                  and (fam != "all" or r["family"] in fams)]
            rows.append((len(rs), sum(r["seconds"] for r in rs), sum(r["ratio"] for r in rs)))
        (n0, s0, x0), (n1, s1, x1) = rows
        lines.append(f"| {fam} | {n0} | {s0:.1f} | {x0:.0f} | {n1} | {s1:.1f} | {x1:.0f} | "
                     f"{x1 / x0:.2f} |")
    return lines


def _short(option: str) -> str:
    # include folders shortened to their last parts: the report is about time, not paths
    if option.startswith("-I"):
        return "-I.../" + "/".join(Path(option[2:]).parts[-2:])
    return option


# --------------------------------------------------------------------------------------------
# precompile's wall time over NVRTC, without a driver
# --------------------------------------------------------------------------------------------

class _CubinModule:
    def __init__(self, lowered: dict):
        self.lowered = lowered

    def get_function(self, expr: str) -> str:
        return self.lowered[expr]


def _cubin_factory(arch: int):
    def factory(source, options, exprs, device_id):
        opts, _ = cupy_path_options(tuple(options), arch)
        _, lowered, _, _ = _nvrtc.compile_program(source, opts, tuple(exprs),
                                                  filename="module.cu")
        return _CubinModule(lowered)
    return factory


def precompile_wall(workers: int, arch: int = 90, families=None, dtypes=None) -> dict:
    """In this process: :func:`cupyops.core.precompile.compile_modules` (precompile's own
    threads) over every module of ``families`` x ``dtypes``, each an sm_<arch> cubin with the
    CuPy path's options (the ``"cuda"`` backend's NVRTC work, without a driver to load it)."""
    from cupyops.core import precompile as _precompile
    _nvrtc.load_family_modules()
    fams = list(_modules.families().values()) if families is None else [
        _modules.get_family(f) for f in families]
    wanted = None if dtypes is None else {np.dtype(d) for d in dtypes}
    work = [(f, d) for f in fams for d in f.dtypes if wanted is None or d in wanted]
    modules = _precompile.module_list(work)
    _modules.register_module_factory("nvrtc-cubin", _cubin_factory(arch))
    load = os.getloadavg()[0]
    t0, c0 = time.perf_counter(), time.process_time()
    _precompile.compile_modules("nvrtc-cubin", modules, 0, workers)
    return {"workers": workers, "modules": len(modules), "wall_s": time.perf_counter() - t0,
            "cpu_s": time.process_time() - c0, "loadavg": load}


def _precompile_walls(workers_list, arch, families, dtypes) -> list:
    import cupyops
    root = Path(cupyops.__file__).resolve().parent.parent
    out = []
    for w in workers_list:          # each in a fresh process: nothing compiled before
        job = {"precompile_workers": w, "arch": arch, "families": families, "dtypes": dtypes,
               "label": f"precompile workers={w}"}
        out.append(_run_worker(job, root))
    return out


# --------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------

#: docs/kernels.md: the section (heading and prose, kept whole by ``nvrtc --table``) and, in
#: it, the generated report this tool replaces
SECTION_BEGIN, SECTION_END = "<!-- nvrtc-timing:begin -->", "<!-- nvrtc-timing:end -->"
DOCS_BEGIN, DOCS_END = "<!-- nvrtc-timing-report:begin", "<!-- nvrtc-timing-report:end -->"


def update_docs(path: Path, text: str, command: str) -> None:
    """Put ``text`` between the nvrtc-timing-report markers of ``path`` (a new section at the
    end when there are none), saying it came from ``command``; the rest of the file is kept."""
    block = (f"{DOCS_BEGIN} generated by: {command} -->\n\n{text.rstrip()}\n\n{DOCS_END}")
    old = path.read_text() if path.exists() else ""
    if DOCS_BEGIN in old and DOCS_END in old:
        head, rest = old.split(DOCS_BEGIN, 1)
        new = head + block + rest.split(DOCS_END, 1)[1]
    else:
        new = (old.rstrip("\n") + f"\n\n{SECTION_BEGIN}\n# NVRTC time per module (issue 33)\n\n"
               + block + f"\n\n{SECTION_END}\n")
    path.write_text(new)


def _worker_main(path: str) -> int:
    job = json.loads(Path(path).read_text())
    if "precompile_workers" in job:
        res = precompile_wall(job["precompile_workers"], job["arch"], job["families"],
                              job["dtypes"])
    else:
        res = worker(job)
    print(json.dumps(res))
    return 0


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m cupyops.tools.nvrtc_timing",
                                description="NVRTC seconds per kernel module, fresh processes")
    p.add_argument("--grouping", default=",".join(GROUPINGS),
                   help="family, runtime or both, comma-separated (default both)")
    p.add_argument("--family", action="append", help="family (repeatable; default all)")
    p.add_argument("--dtype", action="append", help="value dtype (repeatable; default all)")
    p.add_argument("--arch", type=int, default=90)
    p.add_argument("--json", metavar="PATH", help="write the records as JSON")
    p.add_argument("--from-json", metavar="PATH", help="report the records of an earlier run")
    p.add_argument("--markdown", metavar="PATH", help="write the report there (else stdout)")
    p.add_argument("--update-docs", metavar="PATH",
                   help="put the report between the nvrtc-timing markers of PATH "
                        "(docs/kernels.md), after a heading, replacing an earlier one")
    p.add_argument("--table-dtype", action="append",
                   help="dtypes of the per-kernel table (default: 3 smallest, 3 largest)")
    p.add_argument("--compare", metavar="BEFORE_JSON",
                   help="also compare with an earlier run's --json (e.g. of an earlier checkout)")
    p.add_argument("--precompile-wall", action="store_true",
                   help="time precompile's threads over every module instead")
    p.add_argument("--workers", action="append", type=int,
                   help="with --precompile-wall: worker counts (repeatable; default 1 and 2)")
    p.add_argument("--worker", metavar="JOB", help=argparse.SUPPRESS)
    return p


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    if args.worker:
        return _worker_main(args.worker)
    if args.precompile_wall:
        for r in _precompile_walls(args.workers or [1, 2], args.arch, args.family, args.dtype):
            print(f"precompile, {r['workers']} worker(s): {r['modules']} modules in "
                  f"{r['wall_s']:.1f} s wall, {r['cpu_s']:.1f} s CPU (load {r['loadavg']:.1f})")
        return 0
    command = " ".join(["python -m cupyops.tools.nvrtc_timing"] + list(
        sys.argv[1:] if argv is None else argv))
    if args.from_json:
        saved = json.loads(Path(args.from_json).read_text())
        records = saved["records"]
        command = f"{saved.get('command', '?')} (reported by: {command})"
    else:
        jobs = plan_jobs(tuple(args.grouping.split(",")), args.family, args.dtype, args.arch)
        t0 = time.perf_counter()

        def progress(k, n, rec):
            print(f"[{k}/{n}] {rec['label']}: {rec['seconds']:.2f} s ({rec['ratio']:.1f}x ref, "
                  f"load {rec['loadavg']:.1f}) {time.perf_counter() - t0:.0f} s",
                  file=sys.stderr, flush=True)
        records = time_jobs(jobs, progress)
        if args.json:
            Path(args.json).write_text(json.dumps({"command": command, "records": records},
                                                  indent=1))
    text = report(records, args.table_dtype)
    if args.compare:
        earlier = json.loads(Path(args.compare).read_text())
        text += (f"\n### Before and after (before: `{earlier.get('command', '?')}` of the earlier "
                 "checkout; slowest: the costliest kernel a first call may compile)\n\n"
                 + "\n".join(compare_table(earlier["records"], records)) + "\n")
    if args.update_docs:
        update_docs(Path(args.update_docs), text, command)
    if args.markdown:
        Path(args.markdown).write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
