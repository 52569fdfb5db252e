"""Run NumPy's own tests of argmin/argmax, nanargmin/nanargmax and nonzero/argwhere/count_nonzero
(from the installed numpy wheel) with those module functions replaced by cupyops on one device.

    python tests/numpy_suite/run_numpy_suite.py --device cpu      # or simt
    python tests/numpy_suite/run_numpy_suite.py --device simt -- -x -q   # extra pytest args

The ``numpy`` attributes are replaced for the whole pytest session (so that test modules that
keep ``np.nanargmin`` in a class attribute at import get cupyops too) and restored after; a call
made from inside cupyops (its NumPy path uses NumPy) gets NumPy's function back. Keywords that
NumPy's internals pass as ``np._NoValue`` are dropped. It only affects ``np.argmax(...)``-style
calls: ``ndarray`` methods (``a.argmax()``) are NumPy's (a deliberate difference). Prints the pass/fail counts and, for every failure, the test id and the last
line of its error, then classifies each failure against the SPEC's deliberate differences
(object/string/structured/longdouble dtypes, keyword-only out, 0-d arrays where NumPy returns
scalars, subclass preservation). Exit status 0 when every failure is a deliberate difference.

The selection (``-k``):
  numpy/_core/tests/test_multiarray.py   argmax / argmin tests
  numpy/lib/tests/test_nanfunctions.py   nanargmin / nanargmax tests
  numpy/_core/tests/test_numeric.py      nonzero / argwhere / count_nonzero tests
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np
import pytest

FUNCS = ("argmax", "argmin", "nanargmax", "nanargmin", "nonzero", "argwhere", "count_nonzero")

SELECTION = [
    ("numpy/_core/tests/test_multiarray.py", "argmax or argmin or Argmax or Argmin"),
    ("numpy/lib/tests/test_nanfunctions.py", "argmin or argmax or ArgminArgmax"),
    ("numpy/_core/tests/test_numeric.py",
     "nonzero or argwhere or NonZero or Nonzero or Argwhere or count_nonzero"),
]

# (substring of the error or test id, reason): the SPEC's deliberate differences
DELIBERATE = [
    ("dtype object", "object dtype (SPEC: unsupported dtype, TypeError)"),
    ("dtype <U", "string dtype (SPEC: unsupported dtype)"),
    ("dtype |S", "bytes dtype (SPEC: unsupported dtype)"),
    ("dtype <V", "structured/void dtype (SPEC: unsupported dtype)"),
    ("dtype [(", "structured dtype (SPEC: unsupported dtype)"),
    ("dtype |V", "structured/void dtype (SPEC: unsupported dtype)"),
    ("dtype float128", "longdouble (SPEC: unsupported dtype)"),
    ("dtype complex256", "clongdouble (SPEC: unsupported dtype)"),
    ("dtype longdouble", "longdouble (SPEC: unsupported dtype)"),
    ("dtype clongdouble", "clongdouble (SPEC: unsupported dtype)"),
    ("masked", "masked array (SPEC: TypeError)"),
    ("takes from 1 to 2 positional arguments", "positional out (SPEC: keyword-only out)"),
    ("positional argument", "positional out/keepdims (SPEC: keyword-only)"),
    ("out must be a numpy array", "out of another type (SPEC: out must be an array like x)"),
    ("0-d", "0-d array where NumPy returns a scalar / nonzero of 0-d (SPEC)"),
    ("isinstance(res, MyNDArray)", "subclass preservation (SPEC: results are plain arrays)"),
]


def _install(device):
    import cupyops
    inside = [False]

    def wrap(name):
        fn = getattr(cupyops, name)
        orig = getattr(np, name)

        def call(*args, **kw):
            if inside[0]:     # cupyops' own NumPy path calls NumPy: give it NumPy's function
                return orig(*args, **kw)
            kw = {k: v for k, v in kw.items() if v is not np._NoValue}
            kw.setdefault("device", device)
            inside[0] = True
            try:
                return fn(*args, **kw)
            finally:
                inside[0] = False
        call.__name__ = name
        call.__wrapped_cupyops__ = True
        return call
    return {name: wrap(name) for name in FUNCS}


class Plugin:
    def __init__(self, device):
        self.device = device
        self.repl = _install(device)
        self.reports = []

    def __enter__(self):
        self.saved = {n: getattr(np, n) for n in FUNCS}
        for n, f in self.repl.items():
            setattr(np, n, f)
        return self

    def __exit__(self, *exc):
        for n, f in self.saved.items():
            setattr(np, n, f)

    def pytest_runtest_logreport(self, report):
        if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
            self.reports.append(report)


def classify(report):
    text = str(report.longrepr) if report.longrepr is not None else ""
    lines = [ln for ln in text.splitlines() if ln.startswith("E ")]
    msg = lines[-1][1:].strip() if lines else text.strip().splitlines()[-1:] and text.strip().splitlines()[-1]
    for key, why in DELIBERATE:
        if key in text:
            return msg, why
    return msg, None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu", choices=["cpu", "simt", "cuda"])
    ap.add_argument("extra", nargs="*", help="extra pytest arguments (after --)")
    a = ap.parse_args(argv)
    root = os.path.dirname(os.path.dirname(np.__file__))
    plugin = Plugin(a.device)
    total = {"passed": 0, "failed": 0, "skipped": 0}
    unexplained = 0
    for path, k in SELECTION:
        full = os.path.join(root, path)
        plugin.reports.clear()
        with plugin:
            pytest.main([full, "-k", k, "-p", "no:cacheprovider", "-p", "no:terminal",
                         "-W", "ignore::DeprecationWarning", "-o", "addopts=",
                         "-p", "no:randomly", *a.extra], plugins=[plugin])
        counts = {"passed": 0, "failed": 0, "skipped": 0}
        fails = []
        for r in plugin.reports:
            counts[r.outcome] = counts.get(r.outcome, 0) + 1
            if r.outcome == "failed":
                fails.append(r)
        print(f"\n== {path} [-k {k}] device={a.device}: {counts['passed']} passed, "
              f"{counts['failed']} failed, {counts['skipped']} skipped")
        for r in fails:
            msg, why = classify(r)
            if why is None:
                unexplained += 1
            print(f"  FAIL {r.nodeid.split('::', 1)[-1]}\n       {msg}\n       -> "
                  f"{why or 'NOT A DELIBERATE DIFFERENCE'}")
        for key in total:
            total[key] += counts[key]
    print(f"\nTOTAL device={a.device}: {total['passed']} passed, {total['failed']} failed "
          f"({unexplained} not deliberate), {total['skipped']} skipped")
    return 1 if unexplained else 0


if __name__ == "__main__":
    sys.exit(main())
