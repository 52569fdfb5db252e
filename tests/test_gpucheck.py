"""``python -m cupyops gpucheck``: the plan lists every step with its expected time and cap, in
the issue's priority order, fits its default budget to one visit and names the next visit's
``--only``; the command reaches no network (pip only with --no-index); without a GPU it says
``no GPU`` and exits 2; every step has a rehearsal of the same tool that runs here."""
import ast
import pathlib
import subprocess
import sys

import pytest

from cupyops.tools import gpucheck, gpu_wheels

ORDER = ["selftest-quick", "gpu-tests", "api-tests", "steady-calls", "host-cost",
         "bench-compile", "bench", "memcheck", "racecheck", "synccheck", "initcheck",
         "ncu-dram", "model-table", "racecheck-rest", "dask"]


def test_plan_lists_every_step_and_the_budget(capsys):
    assert gpucheck.main(["--plan"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    names = [line.split()[1] for line in out[:len(gpucheck.STEPS)]]
    assert names == [s.name for s in gpucheck.STEPS]
    assert all(" expect " in line and " cap " in line for line in out[:len(names)])
    assert out[-1] == f"budget {gpucheck.DEFAULT_BUDGET} s"
    assert any(line.startswith("this visit: selftest-quick") for line in out)
    assert gpucheck.main(["--plan", "--budget", "200"]) == 0
    small = capsys.readouterr().out
    assert "next visit: --only " in small and small.strip().endswith("budget 200 s")


def test_the_priority_order_of_the_issue():
    steps = [s for s in gpucheck.STEPS if s.priority <= 6]
    assert [s.name for s in steps] == ORDER
    assert [s.priority for s in steps] == sorted(s.priority for s in steps)
    assert {s.priority for s in steps} == {1, 2, 3, 4, 5, 6}


def test_the_default_budget_fits_one_visit():
    """About 8 minutes of commands, none past 10 minutes, the whole run within 10 minutes;
    the first five priorities fit in the default budget (Dask may go to the next visit)."""
    assert 420 <= gpucheck.DEFAULT_BUDGET <= 480
    assert gpucheck.DEFAULT_BUDGET + gpucheck.GRACE_S < 600
    assert all(s.cap < 600 and s.expect <= s.cap for s in gpucheck.STEPS)
    fit, rest = gpucheck.fitting(gpucheck.STEPS, gpucheck.DEFAULT_BUDGET)
    assert sum(s.expect for s in fit) <= gpucheck.DEFAULT_BUDGET
    assert [s.name for s in fit][:11] == ORDER[:11]        # priorities 1-4 all fit
    bench = next(s for s in gpucheck.STEPS if s.name == "bench")
    assert bench.cap >= 90 + 30          # bench cuda's own 90 s deadline, and start-up


def test_every_step_has_a_rehearsal_of_the_same_tool():
    for s in gpucheck.STEPS:
        assert s.rehearse, s.name
        main = [a for a in s.argv if a.startswith(("cupyops", "pytest")) or a == "-m"]
        tool = s.argv[s.argv.index("-m") + 1] if "-m" in s.argv else s.argv[0]
        assert "-m" in s.rehearse and tool in s.rehearse or tool in (
            "compute-sanitizer", "ncu"), (s.name, tool)
        assert "cuda" not in s.rehearse or "CUPYOPS_TEST_DEVICES" in dict(s.rehearse_env), s
        assert main


def test_no_network():
    """Only gpu_wheels runs pip, and its installs take --no-index; nothing names a URL."""
    for mod in (gpucheck, gpu_wheels):
        src = pathlib.Path(mod.__file__).read_text()
        for node in ast.walk(ast.parse(src)):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                assert "://" not in node.value, node.value
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] + [getattr(node, "module", "") or ""]
                assert not {"urllib", "requests", "http", "socket", "venv", "pip"} & set(names)
    words = {a for s in gpucheck.STEPS for a in s.argv}
    assert not {"pip", "venv", "install", "ensurepip", "download"} & words
    src = pathlib.Path(gpu_wheels.__file__).read_text()
    install = src[src.index("def _pip_install"):src.index("def _fits")]
    assert '"--no-index"' in install and '"--isolated"' in install


def test_without_a_gpu_it_says_so_and_exits_2(tmp_path):
    from cupyops.core.devices import cuda_status
    if cuda_status()[0]:
        pytest.skip("a GPU is present")
    r = subprocess.run([sys.executable, "-m", "cupyops", "gpucheck", "--out",
                        str(tmp_path / "out")], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stdout.startswith("no GPU: "), r.stdout
    assert not (tmp_path / "out").exists()               # fails before anything runs


@pytest.mark.parametrize("argv", [["-m", "cupyops.bench.gpu_cases", "--host-cost"],
                                  ["-m", "cupyops", "bench", "cuda", "--no-cold", "--quiet"],
                                  ["-m", "cupyops.bench.gpu_model", "ncu-pass", "--manifest",
                                   "m.json"],
                                  ["-m", "cupyops.tools.dask_check", "--chunks", "cupy"]])
def test_gpu_commands_fail_fast_and_clearly_without_a_gpu(argv, tmp_path):
    from cupyops.core.devices import cuda_status
    if cuda_status()[0]:
        pytest.skip("a GPU is present")
    r = subprocess.run([sys.executable, *argv], capture_output=True, text=True, timeout=120,
                       cwd=tmp_path, env={**__import__("os").environ,
                                          "PYTHONPATH": str(gpucheck.CHECKOUT)})
    assert r.returncode == 2, r.stdout + r.stderr
    assert "no GPU" in r.stderr or "not available here" in r.stderr, r.stderr


def test_a_step_is_capped_and_skips_what_is_missing(tmp_path):
    step = gpucheck.Step("sleep", 1, 1, 1, ("{python}", "-c", "import time; time.sleep(30)"))
    result, secs = gpucheck.run_step(step, tmp_path, 1.0)
    assert result.startswith("timeout") and secs < 10
    missing = gpucheck.Step("x", 1, 1, 1, ("no-such-tool-here",), ("no-such-tool-here",))
    assert gpucheck.run_step(missing, tmp_path, 1.0)[0].startswith("skipped: no-such-tool-here")
    ok = gpucheck.Step("ok", 1, 1, 5, ("{python}", "-c", "print('hi')"))
    assert gpucheck.run_step(ok, tmp_path, 5.0)[0] == "pass"
    assert "hi" in (tmp_path / "ok.log").read_text()
    bad = gpucheck.Step("bad", 1, 1, 5, ("{python}", "-c", "raise SystemExit(3)"))
    assert gpucheck.run_step(bad, tmp_path, 5.0)[0] == "FAIL (exit 3)"


def test_what_does_not_fit_is_named_for_the_next_visit(tmp_path, monkeypatch):
    steps = (gpucheck.Step("a", 1, 1, 5, ("{python}", "-c", "pass")),
             gpucheck.Step("big", 2, 100, 200, ("{python}", "-c", "pass")),
             gpucheck.Step("c", 3, 1, 5, ("{python}", "-c", "pass")))
    args = gpucheck._parser().parse_args(["--budget", "10"])
    rows, left_over, _ = gpucheck._run_steps(steps, tmp_path, args)
    assert [r[1] for r in rows] == ["pass", "not run: 10 s of the budget left", "pass"]
    assert left_over == ["big"]
    assert "--only big" in gpucheck._summary(rows, 10, 1.0, left_over)
    with pytest.raises(SystemExit, match="unknown step"):
        gpucheck._chosen("bench,no-such-step")


def test_rehearsal_of_the_host_cost_step(tmp_path):
    step = next(s for s in gpucheck.STEPS if s.name == "host-cost")
    result, _ = gpucheck.run_step(step, tmp_path, 120, rehearse=True)
    assert result == "pass", (tmp_path / "host-cost.log").read_text()[-2000:]
    assert "numpy.argmax" in (tmp_path / "host-cost.log").read_text()


@pytest.mark.slow
def test_the_whole_rehearsal(tmp_path):
    """Every step's rehearsal passes or is skipped with a word (minutes on a busy machine)."""
    r = subprocess.run([sys.executable, "-m", "cupyops", "gpucheck", "--rehearse", "--out",
                        str(tmp_path)], capture_output=True, text=True, timeout=3000)
    assert r.returncode == 0, r.stdout[-4000:]
    assert (tmp_path / "bench-cuda.json").is_file() and (tmp_path / "model-table.md").is_file()
