"""``python -m cupyops selftest``: it covers every op and every input dtype through the public
functions, fails when one of them returns a wrong answer, and runs from a bare checkout (the
tracked files alone, not installed) as the offline GPU check does."""
import os
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest

import cupyops
from cupyops.tools import selftest
from cupyops.ops.argreduce.checks import ref_argreduce, ref_hardmax

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _covers_everything(rec):
    seen = {(r["op"], r["dtype"]) for r in rec["table"]}
    ops = {op for op, _ in seen}
    dtypes = {dt for _, dt in seen}
    assert ops == set(selftest.OPS)
    assert dtypes == {str(d) for d in selftest.input_dtypes()}
    assert len(dtypes) == 17 or "bfloat16" not in dtypes


def test_quick_on_cpu_covers_every_op_and_dtype():
    rec = selftest.run("cpu", quick=True)
    _covers_everything(rec)
    assert rec["mismatches"] == 0, rec["failures"][:5]
    assert rec["cases"] > 3000


#: the dtypes whose large inputs (the multi-block plan cases) the simt selftest runs here: the
#: byte logic, the 2-byte floats, the common float and the 16-byte values. Those inputs were two
#: thirds of this test's time (about 170 s on 2 cores); the family tests run every dtype through
#: every plan case on simt (test_gpu_argreduce.py, test_argreduce_values.py,
#: test_gpu_nonzero.py, test_segment_kernels.py), and the selftest on a GPU runs them all.
SIMT_BIG_DTYPES = ("bool", "float16", "bfloat16", "float32", "complex128")


def test_quick_on_simt_covers_every_op_dtype_and_plan_case():
    from cupyops.core.devices import simt_status
    if not simt_status()[0]:
        pytest.skip(simt_status()[1])
    big = [d for d in SIMT_BIG_DTYPES if d in {str(t) for t in selftest.input_dtypes()}]
    # (modules compiled on first use: only what the sweep runs, not every module of a dtype)
    rec = selftest.run("simt", quick=True, big_dtypes=big, prepare=False)
    assert rec["big_dtypes"] == sorted(big)
    _covers_everything(rec)
    assert rec["mismatches"] == 0, rec["failures"][:5]
    assert {"row", "column", "general", "decode", "coordinates"} <= set(rec["plan_cases"])


def test_big_dtypes_keep_the_large_inputs_to_those_dtypes():
    rng = np.random.default_rng(0)
    names = {c.layout for c in selftest.cases(np.dtype(np.float32), rng, True)}
    small = {c.layout for c in selftest.cases(np.dtype(np.float32), rng, True, big=False)}
    assert small < names and not any(n.startswith(("row", "column", "decode")) for n in small)
    rec = selftest.run("cpu", quick=True, ops=["argmax"], dtypes=["int8", "float32"],
                       big_dtypes=["float32"])
    cases = {r["dtype"]: r["cases"] for r in rec["table"]}
    full = selftest.run("cpu", quick=True, ops=["argmax"], dtypes=["int8", "float32"])
    assert {r["dtype"]: r["cases"] for r in full["table"]} == {"int8": cases["float32"],
                                                               "float32": cases["float32"]}
    assert cases["int8"] < cases["float32"]


@pytest.mark.parametrize("wrong", ["argmin for argmax", "tie last for first", "one bit off"])
def test_a_wrong_answer_fails_the_selftest(wrong, monkeypatch, capsys):
    real_argmax, real_argwhere = cupyops.argmax, cupyops.argwhere
    if wrong == "argmin for argmax":
        monkeypatch.setattr(cupyops, "argmax", lambda x, *a, **k: cupyops.argmin(x, *a, **k))
        ops = "argmax"
    elif wrong == "tie last for first":
        monkeypatch.setattr(cupyops, "argmax",
                            lambda x, *a, **k: real_argmax(x, *a, **dict(k, tie="last")))
        ops = "argmax"
    else:
        def argwhere(x, *a, **k):
            r = real_argwhere(x, *a, **k)
            if len(r):
                r[-1, -1] ^= 1
            return r
        monkeypatch.setattr(cupyops, "argwhere", argwhere)
        ops = "argwhere"
    assert selftest.main(["--quick", "--ops", ops, "--dtypes", "float32,int8"]) == 1
    out = capsys.readouterr().out
    assert "MISMATCH" in out and "FAIL" in out
    monkeypatch.undo()
    assert selftest.main(["--quick", "--ops", ops, "--dtypes", "float32,int8"]) == 0


def _bare_checkout(dest: pathlib.Path) -> pathlib.Path:
    """The tracked files of this checkout, copied as they are (a git archive of the working
    tree)."""
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                           cwd=ROOT, capture_output=True,
                           check=True).stdout.decode().split("\0")
    for name in filter(None, files):
        src = ROOT / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    return dest


def test_selftest_runs_from_a_bare_checkout(tmp_path):
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    tree = _bare_checkout(tmp_path / "tree")
    env = dict(os.environ, PYTHONPATH=str(tree))
    probe = ("import cupyops, cupyops.core.modules as m; "
             "print(cupyops.__file__); print(m.kernels_root())")
    r = subprocess.run([sys.executable, "-c", probe], cwd=tree, env=env, capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr
    assert all(line.startswith(str(tree)) for line in r.stdout.split()), r.stdout
    r = subprocess.run([sys.executable, "-m", "cupyops", "selftest", "--quick"], cwd=tree,
                       env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and " 0 mismatches" in r.stdout, r.stdout[-2000:] + r.stderr
    from cupyops.core.devices import simt_status
    if simt_status()[0]:       # the kernels themselves, found beside the package
        r = subprocess.run([sys.executable, "-m", "cupyops", "selftest", "--quick", "--device",
                            "simt", "--ops", "argmax,nonzero_coordinates", "--dtypes",
                            "float32"], cwd=tree, env=env, capture_output=True, text=True,
                           timeout=600)
        assert r.returncode == 0 and " 0 mismatches" in r.stdout, r.stdout[-2000:] + r.stderr


def test_unavailable_device_exits_2(capsys, monkeypatch):
    from cupyops.core import devices
    if devices.cuda_status()[0]:
        pytest.skip("a GPU is present")
    assert selftest.main(["--device", "cuda", "--quick"]) == 2
    assert "not available here" in capsys.readouterr().out


def test_references_follow_the_rules():
    """The selftest's own references (NumPy primitives, not cupyops): NaN is the extreme,
    -0.0 == 0.0 ties, NaT is not skipped by nanarg*, complex orders on (real, imag)."""
    f = np.array([[1.0, np.nan, 3.0, np.nan], [-0.0, 0.0, -1.0, 0.0]])
    assert list(ref_argreduce(f, "argmax", 1, "first")) == [1, 0]
    assert list(ref_argreduce(f, "argmin", 1, "last")) == [3, 2]
    assert list(ref_argreduce(f, "nanargmax", 1, "last")) == [2, 3]
    t = np.array(["2020-01-01", "NaT", "2019-01-01"], "M8[D]")
    assert ref_argreduce(t, "nanargmin", None, "first") == 1
    c = np.array([1 + 5j, 2 + 0j, 2 + 1j, 2 + 1j])
    assert ref_argreduce(c, "argmax", None, "last") == 3
    assert ref_hardmax(f, 1, "first").tolist() == [[0, 1, 0, 0], [1, 0, 0, 0]]
    with pytest.raises(ValueError):
        ref_argreduce(np.full((2, 2), np.nan), "nanargmax", 1, "first")
