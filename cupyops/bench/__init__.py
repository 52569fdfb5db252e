"""The benchmark behind ``python -m cupyops bench``: :mod:`.bench` (cases, timing, tables,
cold start), :mod:`.peers` (what a user would write instead: NumPy, onnxruntime, CuPy, PyTorch)
and :mod:`.traffic` (the memory-traffic model measured on the SIMT layer).

Shipped inside the package so that the benchmark runs from an installed wheel, in any directory.
Importing :mod:`cupyops` does not import it.
"""
