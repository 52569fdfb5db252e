"""GPU timings with CUDA events of the cases the kernel-memory work is about, against CuPy and
PyTorch.

``python -m cupyops.bench.gpu_events [--json PATH] [--repeats N] [--large] [--rehearse]`` times,
on CuPy's current device, each case's cupyops call, the CuPy composition a user would write and
PyTorch's (where it has one), in one process, interleaved, as :mod:`cupyops.bench.gpu_cases`
times its cases: µs per call from CUDA events and from the host clock over back-to-back calls,
the copy fraction (a device-to-device copy of the call's minimum bytes, timed alongside), the
median of ``--repeats`` (5) interleaved repeats, and the ratio peer / cupyops (above 1: cupyops
is faster; goal >= 0.95 on every case, geometric mean per op >= 1.0). ``--large`` adds
gpu_cases' 256 MiB cases. The cases:

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
import sys

import numpy as np

from cupyops.bench import gpu_cases as G

__all__ = ["CASES", "kernel_cases", "measure", "main"]


def _mask(shape, density, dtype, order="C"):
    def make(rng):
        a = (rng.random(shape) < density).astype(dtype)
        return np.asfortranarray(a) if order == "F" else a
    return make


def _rows(shape, dtype):
    return lambda rng: rng.integers(0, 100, shape).astype(dtype)


def _on_device(make, seed):
    """A GpuCase maker: the host array of ``make`` moved to ``xp``'s device, order kept."""
    def to(xp, rng):
        host = make(np.random.default_rng(seed))
        x = xp.asarray(host)
        if host.flags.f_contiguous and not host.flags.c_contiguous:
            x = xp.asfortranarray(x)
        return x
    return to


def _argwhere(flip=False):
    if flip:
        return ("argwhere", lambda co, x, d: co.argwhere(x[:, ::-1], device=d),
                {"cupy": lambda xp, x: xp.argwhere(x[:, ::-1]),
                 "torch": lambda torch, t: torch.argwhere(torch.flip(t, (1,)))})
    return ("argwhere", lambda co, x, d: co.argwhere(x, device=d),
            {"cupy": lambda xp, x: xp.argwhere(x), "torch": lambda torch, t: torch.argwhere(t)})


def _argmax(axis):
    return ("argmax", lambda co, x, d: co.argmax(x, axis=axis, device=d),
            {"cupy": lambda xp, x: xp.argmax(x, axis=axis),
             "torch": lambda torch, t: torch.argmax(t, dim=axis)})


def _hardmax(axis):
    def cupy_peer(xp, x):
        from cupyops.bench.peers import hardmax_onehot
        return hardmax_onehot(xp, x, axis, "first")
    return ("hardmax", lambda co, x, d: co.hardmax(x, axis=axis, device=d),
            {"cupy": cupy_peer, "torch": lambda torch, t: torch.zeros_like(t).scatter_(
                axis, torch.argmax(t, dim=axis, keepdim=True), 1)})


def _count(axis):
    return ("count_nonzero", lambda co, x, d: co.count_nonzero(x, axis=axis, device=d),
            {"cupy": lambda xp, x: xp.count_nonzero(x, axis=axis),
             "torch": lambda torch, t: torch.count_nonzero(t, dim=axis)})


def _coords():
    def cupy_peer(xp, x):
        from cupyops.bench.peers import nonzero_coordinates_composition
        return nonzero_coordinates_composition(xp, x, x.size)
    return ("nonzero_coordinates", lambda co, x, d: co.nonzero_coordinates(x, size=x.size,
                                                                           device=d),
            {"cupy": cupy_peer, "torch": lambda torch, t: (
                torch.nonzero_static(t, size=t.numel(), fill_value=0), torch.count_nonzero(t))})


#: (name, shape, dtype, host maker(rng), (op, cupyops call, peers))
CASES = (
    ("argwhere F (1000,1000) bool", (1000, 1000), "bool", _mask((1000, 1000), 0.3, np.bool_, "F"),
     _argwhere()),
    ("argwhere F (2048,2048) float64", (2048, 2048), "float64",
     _mask((2048, 2048), 0.1, np.float64, "F"), _argwhere()),
    ("argwhere neg-stride (2048,2048) f32", (2048, 2048), "float32",
     _mask((2048, 2048), 0.1, np.float32), _argwhere(flip=True)),
    ("argwhere F (4097,1024) float32", (4097, 1024), "float32",
     _mask((4097, 1024), 0.9, np.float32, "F"), _argwhere()),
    ("argwhere F (64,4096) uint8", (64, 4096), "uint8", _mask((64, 4096), 0.3, np.uint8, "F"),
     _argwhere()),
    ("argmax (1,262144) uint8", (1, 262144), "uint8", _rows((1, 262144), np.uint8), _argmax(1)),
    ("argmax (1,66560) float32", (1, 66560), "float32", _rows((1, 66560), np.float32),
     _argmax(1)),
    ("argmax (1,32768) float64", (1, 32768), "float64", _rows((1, 32768), np.float64),
     _argmax(1)),
    ("argmax (1,131072) float32", (1, 131072), "float32", _rows((1, 131072), np.float32),
     _argmax(1)),
    ("hardmax (1,262144) float32", (1, 262144), "float32", _rows((1, 262144), np.float32),
     _hardmax(1)),
    ("hardmax (1,1048576) float32", (1, 1 << 20), "float32", _rows((1, 1 << 20), np.float32),
     _hardmax(1)),
    ("argwhere (4096,4096) f32 d=0.1", (4096, 4096), "float32",
     _mask((4096, 4096), 0.1, np.float32), _argwhere()),
    ("nonzero_coordinates size=n d=0.1", (4096, 4096), "float32",
     _mask((4096, 4096), 0.1, np.float32), _coords()),
    ("argmax (8,131072) float32 decode", (8, 131072), "float32", _rows((8, 131072), np.float32),
     _argmax(1)),
    # few-group columns (a split and a finish where one block read them before issue 26)
    ("argmax axis 0 (8192,3) float32", (8192, 3), "float32", _rows((8192, 3), np.float32),
     _argmax(0)),
    ("argmax axis 0 (4096,8) float64", (4096, 8), "float64", _rows((4096, 8), np.float64),
     _argmax(0)),
    ("hardmax axis 0 (8192,3) float32", (8192, 3), "float32", _rows((8192, 3), np.float32),
     _hardmax(0)),
    # count over axis 0 and a large F-order argwhere (tile count)
    ("count_nonzero axis 0 (1024,1024) int8", (1024, 1024), "int8",
     _mask((1024, 1024), 0.5, np.int8), _count(0)),
    ("argwhere F (1024,4096) float32", (1024, 4096), "float32",
     _mask((1024, 4096), 0.1, np.float32, "F"), _argwhere()),
)


def kernel_cases(names=None) -> list:
    """The cases above as :class:`~cupyops.bench.gpu_cases.GpuCase` (group ``"kernel"``),
    those whose names contain one of ``names`` (default all)."""
    out = []
    for k, (name, shape, dtype, make, (op, ours, peers)) in enumerate(CASES):
        if names and not any(n in name for n in names):
            continue
        out.append(G.GpuCase(name, op, "kernel", shape, dtype, _on_device(make, k), ours,
                             peers, exact=op == "argwhere"))
    return out


def measure(repeats: int = 5, names=None, env=None, large: bool = False,
            scale: str = "full") -> list:
    """Records (:func:`cupyops.bench.gpu_cases.measure_case`) of the cases, the large ones
    too with ``large``; on the GPU unless ``env`` says otherwise."""
    env = env or G.cuda_env()
    cases = kernel_cases(names)
    if large:
        cases += G.large_cases(scale)
    return G.measure_cases(cases, env, repeats, progress=G.print_progress)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m cupyops.bench.gpu_events",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--repeats", type=int, default=5, help="interleaved repeats (default 5)")
    p.add_argument("--cases", default=None, help="comma-separated substrings of case names")
    p.add_argument("--large", action="store_true", help="add gpu_cases' 256 MiB cases")
    p.add_argument("--rehearse", nargs="?", const="simt", default=None, metavar="DEVICE",
                   help="no GPU: NumPy arrays, cupyops on DEVICE (default simt), host clock")
    p.add_argument("--json", metavar="PATH", help="also write the records as JSON")
    args = p.parse_args(argv)
    try:
        env = G.rehearsal_env(args.rehearse) if args.rehearse else G.cuda_env()
    except RuntimeError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    rows = measure(args.repeats, args.cases.split(",") if args.cases else None, env,
                   args.large, "tiny" if args.rehearse else "full")
    print("\n".join(G.report_lines(rows)))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
