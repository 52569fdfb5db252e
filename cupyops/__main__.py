"""Command line: ``python -m cupyops demo``, ``precompile``, ``bench``, ``selftest``,
``gpucheck`` and ``info``."""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

def seed_examples():
    """The worked examples of DirectML's operator reference pages, from the operators'
    descriptors: ``[(label, call(device), expected)]``."""
    import functools

    from cupyops import _call
    return [(f"{op.name} {label}", functools.partial(call, _call.PUBLIC[op.name]), expected)
            for op in _call.OPERATORS for label, call, expected in op.examples]


def _to_numpy(a):
    return a.get() if hasattr(a, "get") and not isinstance(a, np.ndarray) else np.asarray(a)


def demo(device=None) -> int:
    import cupyops
    from cupyops.core import devices as _devices
    if device:
        dev, source = device, "from --device"
    elif (os.environ.get("CUPYOPS_DEVICE") or "").strip():
        dev, source = os.environ["CUPYOPS_DEVICE"].strip(), "from CUPYOPS_DEVICE"
    else:
        dev, source = "cpu", "the default; CUPYOPS_DEVICE is not set"
    print(f"cupyops {cupyops.__version__}")
    print("devices:")
    print("  cpu : NumPy path (always available)")
    ok, why = _devices.simt_status()
    print(f"  simt: {'yes' if ok else 'no'} - {why}")
    ok, why = _devices.cuda_status()
    print(f"  cuda: {'yes' if ok else 'no'} - {why}")
    print(f"device: {dev}  ({source})")
    print()
    kind = dev.lower().split(":")[0]
    if kind in ("simt", "cuda"):
        ok, why = _devices.simt_status() if kind == "simt" else _devices.cuda_status()
        if not ok:
            print(f"device {dev} is not available here ({why}): no example was run. "
                  "Run python -m cupyops demo --device cpu for the NumPy path.")
            return 1
    failures = 0
    for label, call, expected in seed_examples():
        try:
            got = _to_numpy(call(dev))
            good = got.shape == np.asarray(expected).shape and np.array_equal(got, expected)
            shown = np.array2string(got, separator=",").replace("\n", "")
        except Exception as exc:  # report and go on: the demo shows every example
            good, shown = False, f"{type(exc).__name__}: {exc}"
        failures += not good
        print(f"  [{'ok' if good else 'FAIL'}] {label:38s} -> {shown}")
    print()
    n = len(seed_examples())
    print(f"all {n} examples give the results of DirectML's operator reference pages "
          "(docs/api.md has the rules)"
          if not failures else f"{failures} of {n} example(s) differ from DirectML's reference pages")
    return 1 if failures else 0


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv and argv[0] in _TOOLS:
        # everything after the command belongs to the tool's own parser (argparse's REMAINDER
        # would drop a leading option such as --tiny)
        return int(_TOOLS[argv[0]]()(argv[1:]) or 0)
    parser = argparse.ArgumentParser(prog="python -m cupyops")
    sub = parser.add_subparsers(dest="command", required=True)
    p_demo = sub.add_parser("demo", help="list devices and compute DirectML's reference examples")
    p_demo.add_argument("--device", default=None, help="cpu, simt or cuda (default: $CUPYOPS_DEVICE or cpu)")
    for name, text in _TOOL_HELP.items():
        sub.add_parser(name, help=text, add_help=False)
    args = parser.parse_args(argv)
    return demo(args.device)


def precompile_main(argv=None) -> int:
    """``python -m cupyops precompile [--device cuda|simt] [--dtypes ...] [--families ...]
    [--workers N]``: :func:`cupyops.precompile` from the shell (Docker images, cluster start-up
    scripts): compiles, or loads from the disk caches, every kernel module the choice needs."""
    import time

    import cupyops
    from cupyops.core import modules as _modules
    p = argparse.ArgumentParser(prog="python -m cupyops precompile",
                                description="compile the kernels ahead of the first calls")
    p.add_argument("--device", default="cuda",
                   help="cuda (the current GPU), cuda:N, or simt (default: cuda)")
    p.add_argument("--dtypes", nargs="+", metavar="DTYPE",
                   help="value dtypes, e.g. float32 int64 (default: every dtype served)")
    p.add_argument("--families", nargs="+", metavar="FAMILY",
                   help=f"kernel families (default: all: {', '.join(_modules.families())})")
    p.add_argument("--workers", type=int, default=None,
                   help="compile threads (default: the usable cores)")
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    try:
        done = cupyops.precompile(args.families, args.dtypes, device=args.device,
                                  max_workers=args.workers)
    except (RuntimeError, KeyError, TypeError, ValueError) as exc:
        print(f"precompile: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    kernels = sum(len(_modules.get_family(f).expressions_for(dt)) for f, dt in done)
    print(f"precompile: {kernels} kernels of {len(done)} family x dtype pairs ready on "
          f"{args.device} in {time.perf_counter() - t0:.1f} s")
    return 0


def _precompile():
    return precompile_main


def _bench():
    from .bench.bench import main as bench_main
    return bench_main


def _selftest():
    from .tools.selftest import main as selftest_main
    return selftest_main


def _gpucheck():
    from .tools.gpucheck import main as gpucheck_main
    return gpucheck_main


def _info():
    from .tools.info import main as info_main
    return info_main


#: commands whose options their own tool parses: the tool's main, looked up when run
_TOOLS = {"precompile": _precompile, "bench": _bench, "selftest": _selftest,
          "gpucheck": _gpucheck, "info": _info}
_TOOL_HELP = {
    "precompile": "compile the kernels ahead of the first calls (options: precompile --help)",
    "bench": "benchmark against the peers (cupyops/bench/; options: bench --help)",
    "selftest": "check every operator on a device against NumPy (options: selftest --help)",
    "gpucheck": "the offline acceptance run on a GPU machine (options: gpucheck --help)",
    "info": "versions, devices, threads and where the caches are, with their sizes",
}


if __name__ == "__main__":
    sys.exit(main())
