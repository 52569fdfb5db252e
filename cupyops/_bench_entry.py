"""``python -m cupyops bench``: runs benchmarks/bench.py from a checkout, or the installed copy."""
from __future__ import annotations

import importlib.util
import pathlib


def main(argv) -> int:
    here = pathlib.Path(__file__).resolve().parent
    for candidate in (here.parent / "benchmarks" / "bench.py", here / "bench.py"):
        if candidate.exists():
            spec = importlib.util.spec_from_file_location("cupyops_bench", candidate)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return int(module.main(argv) or 0)
    raise SystemExit("benchmarks/bench.py not found: run from a checkout of cupyops")
