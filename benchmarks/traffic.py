"""Thin alias of :mod:`cupyops.bench.traffic` (the memory-traffic model), kept for scripts and
tests that load ``benchmarks/traffic.py`` by path. New code: ``from cupyops.bench import traffic``.
"""
import pathlib
import sys

try:
    from cupyops.bench import traffic as _impl
except ImportError:   # a checkout that is not installed: use its source tree
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
    from cupyops.bench import traffic as _impl

globals().update({k: v for k, v in vars(_impl).items() if not k.startswith("__")})
