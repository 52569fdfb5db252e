"""Thin script: ``python benchmarks/bench.py [options]`` is ``python -m cupyops bench [options]``.

The benchmark itself lives in the package (cupyops/bench/bench.py), so that it also runs from an
installed wheel.
"""
import pathlib
import sys

try:
    from cupyops.bench.bench import main
except ImportError:   # a checkout that is not installed: use its source tree
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
    from cupyops.bench.bench import main

if __name__ == "__main__":
    sys.exit(main())
