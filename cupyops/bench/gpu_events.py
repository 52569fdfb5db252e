"""GPU timings with CUDA events of the cases the kernel-memory work is about, against CuPy.

``python -m cupyops.bench.gpu_events [--json PATH] [--repeat N]`` times, on CuPy's current
device, each case's cupyops call and the CuPy composition a user would write, in one process,
interleaved, with CUDA events around ``--repeat`` back-to-back calls (after a warm-up that
compiles), and prints microseconds per call and the ratio CuPy / cupyops (above 1: cupyops is
faster). The cases:

* transposed nonzero inputs (``nonzero_tiles_t``): an F-order (1000, 1000) bool mask, F-order
  float64, a negative innermost stride, F-order (4097, 1024) float32 (shared-mask conflicts),
  F-order (64, 4096) uint8 (a wide inner extent);
* few-group argmax / hardmax: (1, 262144) uint8, (1, 66560) float32, (1, 32768) float64,
  (1, 131072) float32, and hardmax of a (1, 262144) and a (1, 1048576) float32 row;
* few-group columns, which issue 26's block floor turns into a split and a finish: argmax over
  axis 0 of (8192, 3) float32 and (4096, 8) float64, hardmax of the first; count_nonzero over
  axis 0 of a (1024, 1024) int8 array; argwhere of an F-order (1024, 4096) float32 array;
* the benchmark's nonzero and decode rows: argwhere and ``nonzero_coordinates(size=n)`` of a
  (4096, 4096) float32 array at density 0.1, argmax of (8, 131072) float32.
"""
from __future__ import annotations

import argparse
import json

import numpy as np

__all__ = ["CASES", "measure", "main"]


def _mask(shape, density, dtype, rng, order="C"):
    a = (rng.random(shape) < density).astype(dtype)
    return np.asfortranarray(a) if order == "F" else a


def _rows(shape, dtype, rng):
    return rng.integers(0, 100, shape).astype(dtype)


#: (name, make(rng) -> host array, cupyops call(cupyops, x), CuPy call(cupy, x))
CASES = (
    ("argwhere F (1000,1000) bool", lambda r: _mask((1000, 1000), 0.3, np.bool_, r, "F"),
     lambda co, x: co.argwhere(x), lambda cp, x: cp.argwhere(x)),
    ("argwhere F (2048,2048) float64", lambda r: _mask((2048, 2048), 0.1, np.float64, r, "F"),
     lambda co, x: co.argwhere(x), lambda cp, x: cp.argwhere(x)),
    ("argwhere neg-stride (2048,2048) f32", lambda r: _mask((2048, 2048), 0.1, np.float32, r),
     lambda co, x: co.argwhere(x[:, ::-1]), lambda cp, x: cp.argwhere(x[:, ::-1])),
    ("argwhere F (4097,1024) float32", lambda r: _mask((4097, 1024), 0.9, np.float32, r, "F"),
     lambda co, x: co.argwhere(x), lambda cp, x: cp.argwhere(x)),
    ("argwhere F (64,4096) uint8", lambda r: _mask((64, 4096), 0.3, np.uint8, r, "F"),
     lambda co, x: co.argwhere(x), lambda cp, x: cp.argwhere(x)),
    ("argmax (1,262144) uint8", lambda r: _rows((1, 262144), np.uint8, r),
     lambda co, x: co.argmax(x, axis=1), lambda cp, x: cp.argmax(x, axis=1)),
    ("argmax (1,66560) float32", lambda r: _rows((1, 66560), np.float32, r),
     lambda co, x: co.argmax(x, axis=1), lambda cp, x: cp.argmax(x, axis=1)),
    ("argmax (1,32768) float64", lambda r: _rows((1, 32768), np.float64, r),
     lambda co, x: co.argmax(x, axis=1), lambda cp, x: cp.argmax(x, axis=1)),
    ("argmax (1,131072) float32", lambda r: _rows((1, 131072), np.float32, r),
     lambda co, x: co.argmax(x, axis=1), lambda cp, x: cp.argmax(x, axis=1)),
    ("hardmax (1,262144) float32", lambda r: _rows((1, 262144), np.float32, r),
     lambda co, x: co.hardmax(x, axis=1), None),
    ("hardmax (1,1048576) float32", lambda r: _rows((1, 1 << 20), np.float32, r),
     lambda co, x: co.hardmax(x, axis=1), None),
    ("argwhere (4096,4096) f32 d=0.1", lambda r: _mask((4096, 4096), 0.1, np.float32, r),
     lambda co, x: co.argwhere(x), lambda cp, x: cp.argwhere(x)),
    ("nonzero_coordinates size=n d=0.1", lambda r: _mask((4096, 4096), 0.1, np.float32, r),
     lambda co, x: co.nonzero_coordinates(x, size=x.size), None),
    ("argmax (8,131072) float32 decode", lambda r: _rows((8, 131072), np.float32, r),
     lambda co, x: co.argmax(x, axis=1), lambda cp, x: cp.argmax(x, axis=1)),
    # few-group columns (a split and a finish where one block read them before issue 26)
    ("argmax axis 0 (8192,3) float32", lambda r: _rows((8192, 3), np.float32, r),
     lambda co, x: co.argmax(x, axis=0), lambda cp, x: cp.argmax(x, axis=0)),
    ("argmax axis 0 (4096,8) float64", lambda r: _rows((4096, 8), np.float64, r),
     lambda co, x: co.argmax(x, axis=0), lambda cp, x: cp.argmax(x, axis=0)),
    ("hardmax axis 0 (8192,3) float32", lambda r: _rows((8192, 3), np.float32, r),
     lambda co, x: co.hardmax(x, axis=0), None),
    # count over axis 0 and a large F-order argwhere (tile count)
    ("count_nonzero axis 0 (1024,1024) int8", lambda r: _mask((1024, 1024), 0.5, np.int8, r),
     lambda co, x: co.count_nonzero(x, axis=0), lambda cp, x: cp.count_nonzero(x, axis=0)),
    ("argwhere F (1024,4096) float32", lambda r: _mask((1024, 4096), 0.1, np.float32, r, "F"),
     lambda co, x: co.argwhere(x), lambda cp, x: cp.argwhere(x)),
)


def _time(cp, fn, repeat: int) -> float:
    """Microseconds per call of ``fn()``, from CUDA events around ``repeat`` calls."""
    for _ in range(3):
        fn()
    start, end = cp.cuda.Event(), cp.cuda.Event()
    start.record()
    for _ in range(repeat):
        fn()
    end.record()
    end.synchronize()
    return cp.cuda.get_elapsed_time(start, end) * 1000.0 / repeat


def measure(repeat: int = 20, names=None) -> list:
    import cupy as cp

    import cupyops
    rng = np.random.default_rng(0)
    rows = []
    for name, make, ours, theirs in CASES:
        if names and not any(n in name for n in names):
            continue
        host = make(rng)
        x = cp.asarray(host)
        if host.flags.f_contiguous and not host.flags.c_contiguous:
            x = cp.asfortranarray(x)
        us = _time(cp, lambda: ours(cupyops, x), repeat)
        peer = _time(cp, lambda: theirs(cp, x), repeat) if theirs else None
        rows.append({"case": name, "cupyops_us": round(us, 2),
                     "cupy_us": None if peer is None else round(peer, 2),
                     "cupy_over_cupyops": None if peer is None else round(peer / us, 3),
                     "bytes": int(x.nbytes)})
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m cupyops.bench.gpu_events",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--repeat", type=int, default=20, help="calls per timing (default 20)")
    p.add_argument("--cases", default=None, help="comma-separated substrings of case names")
    p.add_argument("--json", metavar="PATH", help="also write the rows as JSON")
    args = p.parse_args(argv)
    rows = measure(args.repeat, args.cases.split(",") if args.cases else None)
    for r in rows:
        ratio = "" if r["cupy_us"] is None else f"  CuPy {r['cupy_us']:9.1f} us  x{r['cupy_over_cupyops']:.2f}"
        print(f"{r['case']:<38} cupyops {r['cupyops_us']:9.1f} us  "
              f"{r['bytes'] / r['cupyops_us'] / 1e3:7.1f} GB/s{ratio}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
