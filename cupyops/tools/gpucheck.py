"""``python -m cupyops gpucheck --out DIR [--budget SECONDS] [--plan] [--only A,B] [--rehearse]``:
the offline acceptance run on a GPU machine (issue 32, "How").

It runs with the Python it is started with (no venv, no network), from an installed copy or
from a bare checkout (``PYTHONPATH=. python -m cupyops gpucheck``: the kernels are found beside
the package). Steps run in order of priority, each as a subprocess in a process group of its
own:

1. correctness: the quick selftest, the ``gpu`` tests, the API tests on the GPU devices;
2. host cost and the steady-call counts (tests/test_cupy_steady_calls.py);
3. the benchmark that fills the GPU table: the cold compile (empty caches, its own section),
   then ``bench cuda`` with the large cases, warm, within its 90 s deadline;
4. the sanitizers: memcheck, racecheck, synccheck, initcheck;
5. the model table: Nsight Compute's DRAM throughput, then predicted against measured;
6. Dask with CuPy chunks, from the wheels carried in ``gpu-wheels/``.

Each step has an expected time on an H200 and a cap. A step starts only while its expected time
fits in what is left of the budget (default :data:`DEFAULT_BUDGET`, 480 s: a 15-minute visit
holds about 8 minutes of commands), and is killed at ``min(cap, left + GRACE_S)``, so the whole
command ends by budget + :data:`GRACE_S` (under the 10-minute limit of one command). What does
not fit runs in the next visit: the summary ends with the ``--only`` line for it. A step whose
tool is missing (pytest, compute-sanitizer, ncu, tests/, the wheels) is skipped with a word.

``--plan`` prints the steps, their expected times and caps, which fit in the budget and the
``--only`` line for the rest; it runs nothing. Without a GPU the command prints ``no GPU`` and
why, and exits 2. ``--rehearse`` runs every step's rehearsal here, without a GPU: the same tool
and options on simt, under dry_run or with NumPy chunks, so each command line is exercised
before a visit spends minutes on it. Every log goes under DIR; the summary table comes last, in
DIR/summary.txt and on stdout. ``DIR/performance.md`` is a copy of docs/performance.md the
bench and model steps fill (copy it back after the visit).
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time
import typing

from cupyops import ops as _ops

__all__ = ["STEPS", "Step", "plan_text", "fitting", "run_step", "main", "DEFAULT_BUDGET",
           "GRACE_S"]

#: the default budget: a visit's 15 minutes hold start-up, transfers and about 8 minutes of
#: commands; one command may not pass 10 minutes
DEFAULT_BUDGET = 480
#: a running step may pass the budget by this much (so the whole run ends within 9 minutes)
GRACE_S = 60
PACKAGE = pathlib.Path(__file__).resolve().parents[1]
CHECKOUT = PACKAGE.parent
WHEELS = "gpu-wheels"
_SMALL = "--dtypes=bool,uint8,int64,float16,float32,complex128"
#: racecheck is the slowest tool: over _SMALL it ran past 120 s on an H200 (the visit of
#: 2026-11-28; memcheck took 45 s): two dtypes a step, the 4- and 16-byte staging first
_RACE = "--dtypes=float32,complex128"
_RACE_REST = "--dtypes=bool,uint8,int64,float16"
#: Nsight Compute's kernel filter: every kernel of the op folders (kernel names start with or
#: hold their family's name)
_KERNELS_REGEX = "regex:" + "|".join(_ops.FAMILIES)


class Step(typing.NamedTuple):
    """One step: its name, priority (1-6 as the issue orders them; 7: extras for ``--only``),
    expected seconds on an H200, cap in seconds, the command (``{python}``, ``{out}`` and
    ``{checkout}`` are filled in), what it needs (``"pytest"``, ``"tests"``, ``"wheels"``, a
    program on PATH), what it does, environment variables of its own, and its rehearsal: the
    same tool with options that run here without a GPU."""

    name: str
    priority: int
    expect: int
    cap: int
    argv: tuple
    needs: tuple = ()
    what: str = ""
    env: tuple = ()
    rehearse: tuple = ()
    rehearse_env: tuple = ()


def _py(*args) -> tuple:
    return ("{python}",) + args


def _sanitized(tool: str, *args) -> tuple:
    return ("compute-sanitizer", f"--tool={tool}", "--error-exitcode=99") + _py(*args)


_API_TESTS = ("tests/test_argreduce_api.py", "tests/test_nonzero_api.py", "tests/test_seeds.py",
              "tests/test_errors.py", "tests/test_firstcall.py", "tests/test_host_cost.py",
              "tests/test_onnx_cases.py", "tests/test_bf16.py", "tests/test_interop.py",
              "tests/test_cupy_path.py")
_GPU_TESTS = ("tests/test_cupy_gpu.py", "tests/test_backend.py", "tests/test_modules.py")
#: the API tests on the GPU devices alone: the emulator's own tests (and simt's compiles,
#: cold on a fresh machine) and CuPy's host marshalling without a GPU are not this step's
_NOT_EMULATOR = ("not simt and not marshal and not traffic and not dry_run and not "
                 "kernels_every_case and not compact_partials and not kernels_schedules and not "
                 "nonzero_kernels_layouts and not refuse_a_narrower_one")
_PYTEST = ("-m", "pytest", "-q", "-p", "no:cacheprovider")
#: the bench steps' own kernel caches: empty when the cold compile starts, warm for the bench
_BENCH_CACHE = (("CUPY_CACHE_DIR", "{out}/bench-cache/cupy"),
                ("CUPYOPS_CACHE_DIR", "{out}/bench-cache/cupyops"),
                ("CUPYOPS_SIMT_CACHE", "{out}/bench-cache/simt"))
#: the rehearsal of the sanitizer steps: their selftest on simt, one dtype, two ops
_SELFTEST_REHEARSAL = _py("-m", "cupyops", "selftest", "--quick", "--device", "simt",
                          "--dtypes", "float32", "--ops", "argmax,argwhere")
_BENCH_ARGS = ("--repeat", "5", "--budget", "0.005", "--no-cold", "--quiet")
_FEW = "^argmax/last tie=first/float32$|^argwhere/d=0.1/int8$"
_NCU = ("ncu", "--csv", "--log-file", "{out}/ncu.csv", "--metrics",
        "dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,"
        "dram__bytes_write.sum,gpu__time_duration.sum", "--kernel-name",
        _KERNELS_REGEX)
_MODEL_TABLE = ("-m", "cupyops.bench.gpu_model", "table", "--bench", "{out}/bench-cuda.json",
                "--ncu", "{out}/ncu.csv", "--manifest", "{out}/ncu-manifest.json",
                "--inputs", "{checkout}/" + WHEELS + "/model-inputs.json",
                "--markdown", "{out}/model-table.md", "--update-docs", "{out}/performance.md",
                "--json", "{out}/model-table.json")
_DASK = ("-m", "cupyops.tools.gpu_wheels", "run", "--wheels", "{checkout}/" + WHEELS, "--",
         "{python}", "-m", "cupyops.tools.dask_check")

#: in order of priority (the issue's "How"); rehearsals run here without a GPU
STEPS = (
    Step("selftest-quick", 1, 25, 120, _py("-m", "cupyops", "selftest", "--quick", "--device",
                                           "cuda", "--json", "{out}/selftest-quick.json"),
         what="every op x dtype x layout on the GPU, NumPy and CuPy input",
         rehearse=_SELFTEST_REHEARSAL + ("--json", "{out}/selftest-quick.json")),
    Step("gpu-tests", 1, 8, 60, _py(*_PYTEST, "-m", "gpu", *_GPU_TESTS), ("pytest", "tests"),
         "the gpu-marked tests: graph capture and replay, streams, Workspace, two GPUs",
         rehearse=_py(*_PYTEST, "-m", "gpu", *_GPU_TESTS)),
    Step("api-tests", 1, 30, 150, _py(*_PYTEST, "--maxfail=30", "-k", _NOT_EMULATOR,
                                      *_API_TESTS), ("pytest", "tests"),
         "the API tests with the GPU devices on", (("CUPYOPS_TEST_DEVICES", "cuda,cupy"),),
         rehearse=_py(*_PYTEST, "--collect-only", "-k", _NOT_EMULATOR, *_API_TESTS),
         rehearse_env=(("CUPYOPS_TEST_DEVICES", "cuda,cupy"),)),
    Step("steady-calls", 2, 5, 90, _py(*_PYTEST, "tests/test_cupy_steady_calls.py"),
         ("pytest", "tests"), "the steady-call counts: allocations, launches, memsets, syncs, "
         "device and stream queries per call", rehearse=_py(*_PYTEST,
                                                            "tests/test_cupy_steady_calls.py")),
    Step("host-cost", 2, 12, 60, _py("-m", "cupyops.bench.gpu_cases", "--host-cost", "--json",
                                     "{out}/host-cost.json"),
         what="host us of 1,000 one-launch calls on CuPy input against cupy.argmax, no sync",
         rehearse=_py("-m", "cupyops.bench.gpu_cases", "--host-cost", "--rehearse", "--calls",
                      "50", "--json", "{out}/host-cost.json")),
    Step("bench-compile", 3, 160, 240, _py("-m", "cupyops", "bench", "cuda", "--compile-only",
                                           "--quiet", "--json", "{out}/bench-compile.json"),
         what="the cold compile: first call of every bench case, cupyops and peers apart, "
              "empty caches; cold start in fresh processes", env=_BENCH_CACHE,
         rehearse=_py("-m", "cupyops", "bench", "simt", "--tiny", "--compile-only", "--large",
                      "--no-cold", "--quiet", "--cases", _FEW, "--json",
                      "{out}/bench-compile.json"), rehearse_env=_BENCH_CACHE),
    Step("bench", 3, 60, 130, _py("-m", "cupyops", "bench", "cuda", *_BENCH_ARGS, "--json",
                                  "{out}/bench-cuda.json", "--markdown", "{out}/bench-cuda.md",
                                  "--update-docs", "{out}/performance.md"),
         what="bench cuda: quick set, gpu_events' and the 256 MiB cases, peers, host cost, "
              "warm caches, its 90 s deadline; the GPU table", env=_BENCH_CACHE,
         rehearse=_py("-m", "cupyops", "bench", "simt", "--tiny", "--large", *_BENCH_ARGS,
                      "--cases", _FEW, "--deadline", "300", "--json", "{out}/bench-cuda.json",
                      "--markdown", "{out}/bench-cuda.md", "--update-docs",
                      "{out}/performance.md"), rehearse_env=_BENCH_CACHE),
    Step("memcheck", 4, 50, 120, _sanitized("memcheck", "-m", "cupyops", "selftest", "--quick",
                                            "--device", "cuda", _SMALL), ("compute-sanitizer",),
         "compute-sanitizer memcheck over selftest --quick (six dtypes of every kind)",
         rehearse=_SELFTEST_REHEARSAL),
    Step("racecheck", 4, 60, 150, _sanitized("racecheck", "-m", "cupyops", "selftest",
                                             "--quick", "--device", "cuda", _RACE),
         ("compute-sanitizer",), "racecheck over selftest --quick, float32 and complex128",
         rehearse=_SELFTEST_REHEARSAL),
    Step("synccheck", 4, 12, 60, _sanitized("synccheck", "-m", "cupyops", "selftest", "--quick",
                                            "--device", "cuda", _SMALL), ("compute-sanitizer",),
         "synccheck over a smaller selftest", rehearse=_SELFTEST_REHEARSAL),
    Step("initcheck", 4, 25, 90, _sanitized("initcheck", "-m", "cupyops", "selftest", "--quick",
                                            "--device", "cuda", _SMALL), ("compute-sanitizer",),
         "initcheck over a smaller selftest", rehearse=_SELFTEST_REHEARSAL),
    Step("ncu-dram", 5, 60, 180, _NCU + _py("-m", "cupyops.bench.gpu_model", "ncu-pass",
                                            "--manifest", "{out}/ncu-manifest.json"), ("ncu",),
         "Nsight Compute's DRAM throughput of every GPU-section case's kernels",
         _BENCH_CACHE, rehearse=_py("-m", "cupyops.bench.gpu_model", "ncu-pass", "--rehearse", "--manifest",
                      "{out}/ncu-manifest.json")),
    Step("model-table", 5, 15, 90, _py(*_MODEL_TABLE),
         what="the model table: predicted (device model) against measured time, DRAM "
              "throughput; misses by > 25 % on >= 1 MiB flagged",
         rehearse=_py(*_MODEL_TABLE, "--rehearse")),
    Step("racecheck-rest", 6, 90, 200, _sanitized("racecheck", "-m", "cupyops", "selftest",
                                                  "--quick", "--device", "cuda", _RACE_REST),
         ("compute-sanitizer",), "racecheck over selftest --quick, the other four small dtypes",
         rehearse=_SELFTEST_REHEARSAL),
    Step("dask", 6, 60, 180, _py(*_DASK, "--chunks", "cupy", "--json", "{out}/dask.json"),
         ("wheels",), "every op on Dask arrays with CuPy chunks against NumPy: threaded "
         "scheduler and a one-worker LocalCluster (dask from the carried wheels)",
         rehearse=_py(*_DASK, "--chunks", "numpy", "--device", "simt", "--json",
                      "{out}/dask.json")),
    Step("segment-merge-path", 7, 40, 120, _py("-m", "cupyops", "bench", "cuda", "--cases",
                                               "^segment", "--no-cold", "--no-overhead",
                                               "--repeat", "3", "--json",
                                               "{out}/bench-segment-merge-path.json"),
         what="the segment cases on the merge-path kernel alone (CUPYOPS_SEGMENT_FLAT=0): "
              "the flat path's other side, against bench's rows",
         env=_BENCH_CACHE + (("CUPYOPS_SEGMENT_FLAT", "0"),),
         rehearse=_py("-m", "cupyops", "bench", "simt", "--tiny", "--no-large", "--no-cold",
                      "--no-overhead", "--quiet", "--cases", "^segment_argmax/short"),
         rehearse_env=(("CUPYOPS_SEGMENT_FLAT", "0"),)),
    Step("kernel-timings", 7, 30, 90, _py("-m", "cupyops.bench.gpu_events", "--json",
                                          "{out}/kernel-timings.json"),
         what="gpu_events alone (its cases are in bench's GPU section too)",
         rehearse=_py("-m", "cupyops.bench.gpu_events", "--rehearse", "--repeats", "1",
                      "--cases", "axis 0 (8192,3)")),
    Step("selftest-full", 7, 300, 420, _py("-m", "cupyops", "selftest", "--device", "cuda",
                                           "--json", "{out}/selftest-full.json"),
         what="the full selftest", rehearse=_SELFTEST_REHEARSAL),
    Step("bench-full", 7, 300, 420, _py("-m", "cupyops", "bench", "cuda", "--full",
                                        "--deadline", "400", "--no-large", "--json",
                                        "{out}/bench-cuda-full.json", "--quiet"),
         what="bench cuda --full (quick-set ops at 16 M elements)", env=_BENCH_CACHE,
         rehearse=_py("-m", "cupyops", "bench", "simt", "--tiny", "--no-large", "--no-cold",
                      "--no-overhead", "--quiet", "--cases", _FEW)),
)


# --------------------------------------------------------------------------------------------
# the plan
# --------------------------------------------------------------------------------------------

def fitting(steps, budget: int) -> tuple:
    """(steps whose expected times fit in ``budget`` in order, the rest), priorities 1-6 (the
    extras of priority 7 run only when named with ``--only``)."""
    fit, rest, used = [], [], 0
    for s in steps:
        if s.priority <= 6 and used + s.expect <= budget:
            fit.append(s)
            used += s.expect
        else:
            rest.append(s)
    return fit, rest


def plan_text(budget: int, steps=STEPS) -> str:
    lines = [f"{i + 1:>2}. {s.name:<15} p{s.priority}  expect {s.expect:>3} s  cap {s.cap:>3} s"
             f"  {s.what}" for i, s in enumerate(steps)]
    fit, rest = fitting(steps, budget)
    lines.append(f"this visit: {', '.join(s.name for s in fit)} (expected "
                 f"{sum(s.expect for s in fit)} s)")
    nxt = [s.name for s in rest if s.priority <= 6]
    if nxt:
        lines.append(f"next visit: --only {','.join(nxt)} (expected "
                     f"{sum(s.expect for s in rest if s.priority <= 6)} s)")
    lines.append("extras (--only): " + ",".join(s.name for s in rest if s.priority > 6))
    lines.append(f"a step starts while its expected time fits in what is left, and is killed "
                 f"at its cap or {GRACE_S} s past the budget")
    lines.append(f"budget {budget} s")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# running
# --------------------------------------------------------------------------------------------

def _missing(step: Step, rehearse: bool = False) -> str | None:
    """Why ``step`` (or its rehearsal) cannot run here, or None."""
    needs = step.needs if not rehearse else tuple(n for n in step.needs if n in (
        "pytest", "tests", "wheels"))
    for need in needs:
        if need == "tests":
            if not (CHECKOUT / "tests" / "conftest.py").is_file():
                return "no tests/ beside the package (an installed copy): run from a checkout"
        elif need == "pytest":
            if importlib.util.find_spec("pytest") is None:
                return "pytest is not installed (pip install pytest hypothesis)"
        elif need == "wheels":
            if not any((CHECKOUT / WHEELS).glob("*.whl")):
                return (f"no wheels in {WHEELS}/: before the visit run "
                        f"python -m cupyops.tools.gpu_wheels download (and carry {WHEELS})")
        elif shutil.which(need) is None:
            return f"{need} is not on PATH"
    return None


def _fill(text: str, out: pathlib.Path) -> str:
    return text.format(python=sys.executable, out=out, checkout=CHECKOUT)


def _env(step: Step, out: pathlib.Path, rehearse: bool = False) -> dict:
    """A step's environment: this package importable first (a bare checkout too), and the
    step's own variables."""
    own = step.rehearse_env if rehearse else step.env
    env = dict(os.environ, **{k: _fill(v, out) for k, v in own})
    env["PYTHONPATH"] = os.pathsep.join([str(CHECKOUT)] + [p for p in env.get(
        "PYTHONPATH", "").split(os.pathsep) if p])
    env.setdefault("PYTHONUNBUFFERED", "1")
    env.setdefault("CUPYOPS_PROGRESS", "0")
    return env


def run_step(step: Step, out: pathlib.Path, seconds: float, rehearse: bool = False) -> tuple:
    """``(result, seconds)``: "pass", "FAIL (exit N)", "timeout", or "skipped: why". The step
    (or its rehearsal) runs in a process group of its own, killed whole at ``seconds`` (a
    sanitizer's or pytest's children too, which would hold the GPU through the next steps)."""
    why = _missing(step, rehearse)
    if why:
        return f"skipped: {why}", 0.0
    argv = [_fill(a, out) for a in (step.rehearse if rehearse else step.argv)]
    log = out / f"{step.name}.log"
    t0 = time.perf_counter()
    with open(log, "w") as f:
        f.write(f"$ {' '.join(argv)}\n")
        f.flush()
        proc = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT, cwd=CHECKOUT,
                                env=_env(step, out, rehearse), start_new_session=True)
        try:
            rc = proc.wait(timeout=max(1.0, seconds))
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            return f"timeout after {seconds:.0f} s", time.perf_counter() - t0
    took = time.perf_counter() - t0
    return _result(rc, argv, log.read_text(errors="replace")), took


def _kill_group(proc) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        proc.kill()
    proc.wait()


def _result(rc: int, argv, text: str) -> str:
    if rc == 5 and "pytest" in argv:
        return "skipped: pytest collected no tests"
    if rc != 0 and "ERR_NVGPUCTRPERM" in text:
        return "skipped: no access to the GPU's performance counters (ERR_NVGPUCTRPERM)"
    return "pass" if rc == 0 else f"FAIL (exit {rc})"


def _summary(rows, budget, spent, left_over) -> str:
    lines = [f"{'step':<16} {'result':<60} {'seconds':>8}"]
    lines += [f"{name:<16} {result:<60} {secs:>8.1f}" for name, result, secs in rows]
    lines.append(f"budget {budget} s, spent {spent:.0f} s")
    if left_over:
        lines.append(f"next visit: python -m cupyops gpucheck --only {','.join(left_over)}")
    return "\n".join(lines)


def _gpu() -> tuple:
    from cupyops.core.devices import cuda_status
    return cuda_status()


def _parser():
    p = argparse.ArgumentParser(prog="python -m cupyops gpucheck", description=__doc__.split(
        "\n\n")[0])
    p.add_argument("--out", default="gpucheck-out", help="folder for the logs (default: %(default)s)")
    p.add_argument("--budget", type=int, default=DEFAULT_BUDGET,
                   help="total seconds of commands (default: %(default)s)")
    p.add_argument("--plan", action="store_true", help="print the steps and caps, run nothing")
    p.add_argument("--only", default=None, help="comma-separated step names to run (a rerun, "
                   "the next visit, or an extra)")
    p.add_argument("--rehearse", action="store_true",
                   help="run every step's rehearsal here, without a GPU (simt, dry_run, NumPy "
                        "chunks), with each step's cap x 4")
    return p


def _chosen(only) -> list:
    if only is None:
        return [s for s in STEPS if s.priority <= 6]
    names = [n.strip() for n in only.split(",") if n.strip()]
    unknown = [n for n in names if n not in {s.name for s in STEPS}]
    if unknown:
        raise SystemExit(f"gpucheck: unknown step(s) {', '.join(unknown)}; --plan lists them")
    return [s for s in STEPS if s.name in names]


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    if args.plan:
        print(plan_text(args.budget))
        return 0
    steps = _chosen(args.only)
    if not args.rehearse:
        ok, why = _gpu()
        if not ok:
            print(f"no GPU: {why} (gpucheck --rehearse runs every step's rehearsal without one)")
            return 2
    else:
        why = "rehearsal without a GPU"
    out = pathlib.Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    doc = CHECKOUT / "docs" / "performance.md"
    if doc.is_file() and not (out / "performance.md").exists():
        shutil.copyfile(doc, out / "performance.md")
    print(f"gpucheck: {why}; budget {args.budget} s; logs in {out}", flush=True)
    rows, left_over, spent = _run_steps(steps, out, args)
    text = _summary(rows, args.budget, spent, left_over)
    (out / "summary.txt").write_text(text + "\n")
    print(text)
    return 0 if all(r[1] == "pass" or r[1].startswith(("skipped", "not run")) for r in rows) \
        else 1


def _run_steps(steps, out, args) -> tuple:
    t0, rows, left_over = time.perf_counter(), [], []
    scale = 4 if args.rehearse else 1
    for step in steps:
        left = args.budget - (time.perf_counter() - t0)
        if not args.rehearse and step.expect > left:
            rows.append((step.name, f"not run: {left:.0f} s of the budget left", 0.0))
            left_over.append(step.name)
            continue
        cap = step.cap * scale if args.rehearse else min(step.cap, left + GRACE_S)
        result, secs = run_step(step, out, cap, args.rehearse)
        rows.append((step.name, result, secs))
        print(f"  {step.name}: {result} ({secs:.1f} s)", flush=True)
    return rows, left_over, time.perf_counter() - t0
