"""``python -m cupyops gpucheck``: the plan lists every step with its cap and ends with the total
budget (at most 300 s by default), the command runs no pip and reaches no network, and without
a GPU it says ``no GPU`` and why, and exits 2."""
import ast
import pathlib
import subprocess
import sys

import pytest

from cupyops.tools import gpucheck

STEPS = ["selftest-quick", "gpu-tests", "memcheck", "kernel-timings", "bench", "api-tests",
         "racecheck", "synccheck", "initcheck", "selftest-full", "bench-full", "ncu-dram"]


def test_plan_lists_every_step_and_the_budget(capsys):
    assert gpucheck.main(["--plan"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert [line.split()[1] for line in out[:len(STEPS)]] == STEPS
    assert all(" cap " in line for line in out[:len(STEPS)])
    assert out[-1] == "budget 300 s"
    assert gpucheck.DEFAULT_BUDGET <= 300
    assert gpucheck.main(["--plan", "--budget", "540"]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == "budget 540 s"


def test_the_priority_order_of_the_issue():
    names = [s.name for s in gpucheck.STEPS]
    order = ["selftest-quick", "gpu-tests", "memcheck", "bench", "api-tests", "racecheck",
             "selftest-full"]
    assert [n for n in names if n in order] == order


def test_no_pip_no_venv_no_network():
    src = pathlib.Path(gpucheck.__file__).read_text()
    tree = ast.parse(src)
    words = {a for s in gpucheck.STEPS for a in s.argv}
    assert not {"pip", "venv", "install", "ensurepip"} & words
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            assert "://" not in node.value, node.value      # (messages may name pip)
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] + [getattr(node, "module", "") or ""]
            assert not {"urllib", "requests", "http", "socket", "venv", "pip"} & set(names)


def test_without_a_gpu_it_says_so_and_exits_2(tmp_path):
    from cupyops.core.devices import cuda_status
    if cuda_status()[0]:
        pytest.skip("a GPU is present")
    r = subprocess.run([sys.executable, "-m", "cupyops", "gpucheck", "--out",
                        str(tmp_path / "out")], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stdout.startswith("no GPU: "), r.stdout


def test_a_step_is_capped_and_skips_what_is_missing(tmp_path):
    step = gpucheck.Step("sleep", 1, ("{python}", "-c", "import time; time.sleep(30)"))
    result, secs = gpucheck.run_step(step, tmp_path, 1.0)
    assert result.startswith("timeout") and secs < 10
    missing = gpucheck.Step("x", 1, ("no-such-tool-here",), ("no-such-tool-here",))
    assert gpucheck.run_step(missing, tmp_path, 1.0)[0].startswith("skipped: no-such-tool-here")
    ok = gpucheck.Step("ok", 5, ("{python}", "-c", "print('hi')"))
    assert gpucheck.run_step(ok, tmp_path, 5.0)[0] == "pass"
    assert "hi" in (tmp_path / "ok.log").read_text()
