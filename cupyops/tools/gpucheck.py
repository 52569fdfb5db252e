"""``python -m cupyops gpucheck --out DIR [--budget SECONDS] [--plan]``: the offline acceptance
run on a GPU machine.

It runs with the Python it is started with (no venv, no pip, no network), from an installed
copy or from a bare checkout (``PYTHONPATH=. python -m cupyops gpucheck``: the kernels are
found beside the package). Steps run in order of priority, each as a subprocess capped in
seconds, until the budget is spent; a step whose optional dependency is missing (pytest,
compute-sanitizer, ncu, the checkout's tests/) is skipped with a word. Every log goes under
DIR; the summary table (step, result, seconds) comes last, in DIR/summary.txt and on stdout,
with the total budget. ``--plan`` prints the steps and their caps and runs nothing. Without a
GPU it prints ``no GPU`` and why, and exits 2.
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

__all__ = ["STEPS", "Step", "plan_text", "main"]

#: the default total budget: the GPU machine's 15 minutes include its start-up and a rerun
DEFAULT_BUDGET = 300
PACKAGE = pathlib.Path(__file__).resolve().parents[1]
CHECKOUT = PACKAGE.parent
_SMALL = "--dtypes=bool,uint8,int64,float16,float32,complex128"
#: Nsight Compute's kernel filter: every kernel of the op folders (kernel names start with or
#: hold their family's name)
_KERNELS_REGEX = "regex:" + "|".join(_ops.FAMILIES)


class Step(typing.NamedTuple):
    """One step: its name, its cap in seconds, the command (after ``python``, or a tool's name
    first), what it needs (``"pytest"``, ``"tests"``, a program on PATH) and environment
    variables of its own."""

    name: str
    cap: int
    argv: tuple
    needs: tuple = ()
    what: str = ""
    env: tuple = ()


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

#: in order of priority (docs/performance.md, "On a GPU")
STEPS = (
    Step("selftest-quick", 100, _py("-m", "cupyops", "selftest", "--quick", "--device", "cuda",
                                    "--json", "{out}/selftest-quick.json"),
         what="every op x dtype x layout on the GPU, NumPy and CuPy input"),
    Step("gpu-tests", 70, _py("-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "gpu",
                              *_GPU_TESTS), ("pytest", "tests"),
         "the gpu-marked tests: graph capture and replay, streams, Workspace, two GPUs"),
    Step("memcheck", 120, _sanitized("memcheck", "-m", "cupyops", "selftest", "--quick",
                                     "--device", "cuda", _SMALL), ("compute-sanitizer",),
         "compute-sanitizer memcheck over selftest --quick (six dtypes of every kind)"),
    Step("kernel-timings", 45, _py("-m", "cupyops.bench.gpu_events", "--json",
                                   "{out}/kernel-timings.json"),
         what="CUDA-event timings of the kernel-memory cases against CuPy"),
    Step("bench", 150, _py("-m", "cupyops", "bench", "cuda", "--budget", "0.01", "--json",
                           "{out}/bench-cuda.json", "--markdown", "{out}/bench-cuda.md"),
         what="bench cuda (quick sizes) against CuPy and PyTorch, host overhead included"),
    Step("api-tests", 150, _py("-m", "pytest", "-q", "-p", "no:cacheprovider", "--maxfail=30",
                               "-k", _NOT_EMULATOR, *_API_TESTS), ("pytest", "tests"),
         "the API tests with the GPU devices on", (("CUPYOPS_TEST_DEVICES", "cuda,cupy"),)),
    Step("racecheck", 60, _sanitized("racecheck", "-m", "cupyops", "selftest", "--quick",
                                     "--device", "cuda", _SMALL), ("compute-sanitizer",),
         "racecheck over a smaller selftest"),
    Step("synccheck", 60, _sanitized("synccheck", "-m", "cupyops", "selftest", "--quick",
                                     "--device", "cuda", _SMALL), ("compute-sanitizer",),
         "synccheck over a smaller selftest"),
    Step("initcheck", 60, _sanitized("initcheck", "-m", "cupyops", "selftest", "--quick",
                                     "--device", "cuda", _SMALL), ("compute-sanitizer",),
         "initcheck over a smaller selftest"),
    Step("selftest-full", 300, _py("-m", "cupyops", "selftest", "--device", "cuda", "--json",
                                   "{out}/selftest-full.json"), what="the full selftest"),
    Step("bench-full", 300, _py("-m", "cupyops", "bench", "cuda", "--full", "--json",
                                "{out}/bench-cuda-full.json", "--quiet"),
         what="bench cuda --full"),
    Step("ncu-dram", 120, ("ncu", "--metrics", "dram__throughput.avg.pct_of_peak_sustained_"
                           "elapsed,gpu__time_duration.sum", "--kernel-name", _KERNELS_REGEX,
                           "--launch-skip", "10", "--launch-count", "40")
         + _py("-m", "cupyops.bench.gpu_events", "--repeat", "3"), ("ncu",),
         "Nsight Compute's DRAM throughput of the main kernels"),
)


def plan_text(budget: int) -> str:
    lines = [f"{i + 1:>2}. {s.name:<16} cap {s.cap:>4} s  {s.what}" for i, s in enumerate(STEPS)]
    lines.append("steps run in this order; a step starts only while its whole cap is left in "
                 "the budget")
    lines.append(f"budget {budget} s")
    return "\n".join(lines)


def _missing(step: Step) -> str | None:
    """Why ``step`` cannot run here, or None."""
    for need in step.needs:
        if need == "tests":
            if not (CHECKOUT / "tests" / "conftest.py").is_file():
                return "no tests/ beside the package (an installed copy): run from a checkout"
        elif need == "pytest":
            if importlib.util.find_spec("pytest") is None:
                return "pytest is not installed (pip install pytest hypothesis)"
        elif shutil.which(need) is None:
            return f"{need} is not on PATH"
    return None


def _env(step: Step) -> dict:
    """A step's environment: this package importable first (a bare checkout too), and the
    step's own variables."""
    env = dict(os.environ, **dict(step.env))
    env["PYTHONPATH"] = os.pathsep.join([str(CHECKOUT)] + [p for p in env.get(
        "PYTHONPATH", "").split(os.pathsep) if p])
    env.setdefault("PYTHONUNBUFFERED", "1")
    env.setdefault("CUPYOPS_PROGRESS", "0")
    return env


def run_step(step: Step, out: pathlib.Path, seconds: float) -> tuple:
    """``(result, seconds)``: "pass", "FAIL (exit N)", "timeout", or "skipped: why". The step
    runs in a process group of its own, killed whole at its cap (a sanitizer's or pytest's
    children too, which would hold the GPU through the next steps)."""
    why = _missing(step)
    if why:
        return f"skipped: {why}", 0.0
    argv = [a.format(python=sys.executable, out=out) for a in step.argv]
    log = out / f"{step.name}.log"
    t0 = time.perf_counter()
    with open(log, "w") as f:
        f.write(f"$ {' '.join(argv)}\n")
        f.flush()
        proc = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT, cwd=CHECKOUT,
                                env=_env(step), start_new_session=True)
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


def _summary(rows, budget, spent) -> str:
    lines = [f"{'step':<16} {'result':<50} {'seconds':>8}"]
    lines += [f"{name:<16} {result:<50} {secs:>8.1f}" for name, result, secs in rows]
    lines.append(f"budget {budget} s, spent {spent:.0f} s")
    return "\n".join(lines)


def _gpu() -> tuple:
    from cupyops.core.devices import cuda_status
    return cuda_status()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m cupyops gpucheck", description=__doc__.split(
        "\n\n")[0])
    p.add_argument("--out", default="gpucheck-out", help="folder for the logs (default: %(default)s)")
    p.add_argument("--budget", type=int, default=DEFAULT_BUDGET,
                   help="total seconds (default: %(default)s; 540 runs more of the list)")
    p.add_argument("--plan", action="store_true", help="print the steps and caps, run nothing")
    p.add_argument("--only", default=None, help="comma-separated step names to run (a rerun)")
    args = p.parse_args(argv)
    only = None if args.only is None else {s.strip() for s in args.only.split(",")}
    if args.plan:
        print(plan_text(args.budget))
        return 0
    ok, why = _gpu()
    if not ok:
        print(f"no GPU: {why}")
        return 2
    out = pathlib.Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    print(f"gpucheck: {why}; budget {args.budget} s; logs in {out}", flush=True)
    t0, rows = time.perf_counter(), []
    for step in STEPS:
        if only is not None and step.name not in only:
            continue
        left = args.budget - (time.perf_counter() - t0)
        if left < step.cap:          # a step starts only with its whole cap left
            rows.append((step.name, f"not run: {left:.0f} s of the budget left", 0.0))
            continue
        result, secs = run_step(step, out, step.cap)
        rows.append((step.name, result, secs))
        print(f"  {step.name}: {result} ({secs:.1f} s)", flush=True)
    text = _summary(rows, args.budget, time.perf_counter() - t0)
    (out / "summary.txt").write_text(text + "\n")
    print(text)
    return 0 if all(r[1] == "pass" or r[1].startswith(("skipped", "not run")) for r in rows) \
        else 1
