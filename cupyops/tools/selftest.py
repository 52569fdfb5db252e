"""``python -m cupyops selftest``: check an installation against NumPy.

A differential sweep through the public functions, each looked up as ``cupyops.<name>`` when
it is called (so it judges what users call): every op x every input dtype x layout (C, F,
sliced, negative strides, broadcast, 0-d, empty) x axes x tie x index dtype x plan case (row,
column, general, split, decode; the exact and fixed-size nonzero forms), with values from tiny
ranges so ties happen, NaN and -0.0 among them. Each answer is compared with a reference built
here from NumPy primitives (not from cupyops' own NumPy path). On "cuda" every case runs twice:
NumPy input with ``device="cuda"``, then CuPy input.

It prints where it ran, a table per op and dtype (cases, mismatches), the plan cases it reached,
and exits 1 on any mismatch (2 when the device is not available). ``--quick`` keeps every op and
every dtype and trims layouts and sizes; ``--ops`` / ``--dtypes`` pick a subset (the sanitizer
runs of ``gpucheck`` use them).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
import typing

import numpy as np

from cupyops import ops as _ops

__all__ = ["main", "run", "OPS", "input_dtypes", "Case"]

#: the operators' names, in the registry's order: each operator's descriptor gives its calls
#: and references (its ``selftest``)
OPS = tuple(op.name for op in _ops.operators() if op.selftest is not None)


def input_dtypes() -> list:
    """The 17 input dtypes of the spec (bfloat16 when ml_dtypes is installed)."""
    names = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
             "float16", "float32", "float64", "complex64", "complex128", "datetime64[s]",
             "timedelta64[ms]"]
    out = [np.dtype(n) for n in names]
    try:
        import ml_dtypes
        out.insert(10, np.dtype(ml_dtypes.bfloat16))
    except ImportError:
        pass
    return out


# --------------------------------------------------------------------------- inputs

def values(shape, dtype, rng) -> np.ndarray:
    """Tiny-range values (ties), with zeros, NaN / NaT and -0.0 where the dtype has them."""
    n = int(np.prod(shape))
    small = rng.integers(-2, 3, n)
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return (small > 0).reshape(shape)
    if dt.kind == "u":
        return np.abs(small).astype(dt).reshape(shape)
    if dt.kind in "mM":
        out = small.astype(np.int64).astype(dt)
        out[rng.random(n) < 0.05] = np.array("NaT", dt)
        return out.reshape(shape)
    if dt.kind == "c":
        out = (small + 1j * rng.integers(-1, 2, n)).astype(dt)
        out[rng.random(n) < 0.03] = complex(np.nan, 1)
        return out.reshape(shape)
    f = small.astype(np.float32)
    f[rng.random(n) < 0.1] = -0.0
    f[rng.random(n) < 0.03] = np.nan
    return (f.astype(dt) if dt.kind == "f" else f.astype(dt) if dt.kind == "V"
            else small.astype(dt)).reshape(shape)


class Case(typing.NamedTuple):
    """One input: a name, a C-contiguous array, the layout made of it (``view(xp, a)``, for
    NumPy and CuPy alike) and the axes to reduce over."""

    layout: str
    base: np.ndarray
    view: typing.Callable
    axes: object

    @property
    def x(self):
        return self.view(np, self.base)


def _same_array(xp, a):
    return a


#: name -> the memory layouts of the spec, made from a C-contiguous 3-D array
LAYOUTS = {
    "C": _same_array,
    "F": lambda xp, a: xp.asfortranarray(a),
    "sliced": lambda xp, a: a[1:, ::2, 1:],
    "negative": lambda xp, a: a[::-1, :, ::-2],
    "permuted": lambda xp, a: a.transpose(2, 0, 1),
    "broadcast": lambda xp, a: xp.broadcast_to(a[:, :1], (a.shape[0], 5, a.shape[2])),
}


def cases(dtype, rng, quick: bool, big: bool = True) -> list:
    """The inputs of one dtype: layouts x axes, odd sizes, 0-d, empty, and (``big``) the
    shapes that reach every plan case."""
    base = values((6, 7, 4), dtype, rng)
    axes_set = [None, 0, -1, (0, 2), ()] if not quick else [None, -1, (0, 2)]
    out = []
    for name in (("C", "F", "negative", "broadcast") if quick else LAYOUTS):
        out += [Case(name, base, LAYOUTS[name], a) for a in axes_set]
    sizes = (33, 1025) if quick else (1, 31, 32, 33, 1023, 1025)
    out += [Case(f"1-d {n}", values((n,), dtype, rng), _same_array, None) for n in sizes]
    out += [Case("0-d", values((), dtype, rng), _same_array, None),
            Case("empty", values((3, 0, 2), dtype, rng), _same_array, -1)]
    big_shapes = [("row (64, 1500)", (64, 1500), -1), ("column (1500, 64)", (1500, 64), 0),
                  ("decode (1, 131072)", (1, 131072), -1)]
    if not quick:
        big_shapes += [("split (4, 262144)", (4, 262144), -1),
                       ("split (262144, 4)", (262144, 4), 0),
                       ("general (300, 3, 100)", (300, 3, 100), (0, 2))]
    out += [Case(name, values(shape, dtype, rng), _same_array, axes)
            for name, shape, axes in (big_shapes if big else ())]
    return out


# --------------------------------------------------------------------------- the calls

def _calls(op, case, rng):
    """[(label, kwargs, expected)] for one op (a name) on one input: the operator's selftest
    calls (cupyops/ops/<family>/checks.py), each reference run here."""
    return [(c.label, (c.args, c.kwargs), expect(c.reference))
            for c in _ops.operator(op).selftest(case, rng)]


class Raises(typing.NamedTuple):
    error: type


def expect(ref):
    """The reference's result, or the error it raises (the call must raise the same type)."""
    try:
        return ref()
    except (ValueError, TypeError) as exc:
        return Raises(type(exc))


def _to_numpy(r):
    if isinstance(r, tuple):
        return tuple(_to_numpy(a) for a in r)
    if hasattr(r, "get") and not isinstance(r, np.ndarray):
        return r.get()
    return np.asarray(r)


def same(got, want) -> bool:
    if isinstance(want, tuple):
        return isinstance(got, tuple) and len(got) == len(want) and all(
            same(g, w) for g, w in zip(got, want))
    if isinstance(want, int):
        return np.ndim(got) == 0 and int(got) == want
    got = np.asarray(got)
    if got.shape != want.shape or got.dtype != want.dtype:
        return False
    return np.array_equal(_bits(got), _bits(want))


def _bits(a):
    """``a``'s elements as unsigned integers of their bits (values compare bit for bit: NaN
    payloads and the sign of zero count; complex as two halves)."""
    a = np.ascontiguousarray(a)
    if a.dtype.kind in "biu" and a.dtype.isnative:
        return a
    size = a.dtype.itemsize // 2 if a.dtype.kind == "c" else a.dtype.itemsize
    return a.view(np.dtype(f"u{size}"))


# --------------------------------------------------------------------------- the sweep

class Tally:
    """Cases and mismatches per (op, dtype), the first failures, and the plan cases seen."""

    def __init__(self):
        self.cases: dict = {}
        self.failures: list = []
        self.plan_cases: set = set()

    def add(self, op, dtype, ok, what):
        key = (op, str(dtype))
        n, bad = self.cases.get(key, (0, 0))
        self.cases[key] = (n + 1, bad + (not ok))
        if not ok and len(self.failures) < 50:
            self.failures.append(what)

    @property
    def mismatches(self) -> int:
        return sum(bad for _, bad in self.cases.values())


def _inputs_for(device, case):
    """[(input label, array, device argument)]: NumPy input, and CuPy input on "cuda"."""
    x = case.x
    out = [("numpy", x, device)]
    if not device.startswith("cuda") or x.dtype.kind in "mM":
        return out                     # (CuPy has no datetime64 / timedelta64)
    import cupy
    # through 1-D: CuPy 14.2's asarray of a 0-d NumPy array drops the sign of -0.0 (a GPU run)
    flat = case.base.reshape(-1)
    if x.dtype.kind == "V":            # bfloat16: its bits, viewed as ml_dtypes' dtype
        base = cupy.asarray(flat.view(np.uint16)).view(case.base.dtype)
    else:
        base = cupy.asarray(flat)
    base = base.reshape(case.base.shape)
    out.append(("cupy", case.view(cupy, base), None))
    return out


def sweep(device: str, quick: bool, ops, dtypes, tally: Tally, seed: int = 0,
          big_dtypes=None):
    import cupyops
    from cupyops.testing import recording
    rng = np.random.default_rng(seed)
    for dtype in dtypes:
        for case in cases(dtype, rng, quick, big_dtypes is None or dtype in big_dtypes):
            for op in ops:
                for label, kw, want in _calls(op, case, rng):
                    for src, x, dev in _inputs_for(device, case):
                        what = f"{op} {dtype} {case.layout} {case.x.shape} {label} [{src}]"
                        fn = getattr(cupyops, op)          # looked up at each call
                        with recording() as trace:
                            ok = _check(fn, x, dev, kw, want)
                        tally.plan_cases.update(getattr(p, "case", type(p).__name__)
                                                for p in trace.plans)
                        tally.add(op, dtype, ok is True, f"{what}: {ok}")


def _check(fn, x, dev, call, want):
    """True when ``fn(x, *args, **kw)`` gives ``want`` (or raises its error), else what went
    wrong; ``call`` is ``(args, kw)``."""
    args, kw = call
    try:
        got = fn(x, *args, device=dev, **kw) if dev is not None else fn(x, *args, **kw)
    except Exception as exc:   # noqa: BLE001 - every outcome is judged below
        if isinstance(want, Raises) and isinstance(exc, want.error):
            return True
        return f"raised {type(exc).__name__}: {exc}"[:300]
    if isinstance(want, Raises):
        return f"returned instead of raising {want.error.__name__}"
    got = _to_numpy(got)
    return True if same(got, want) else f"got {_short(got)}, want {_short(want)}"


def _short(a) -> str:
    return np.array2string(np.asarray(a), threshold=12, edgeitems=3).replace("\n", "")[:200] \
        if not isinstance(a, tuple) else "(" + ", ".join(_short(v) for v in a) + ")"


# --------------------------------------------------------------------------- report

def where(device: str) -> str:
    """Where the sweep runs, in words: the GPU, its compute capability, CuPy and CUDA."""
    import cupyops
    from cupyops.core import devices
    text = f"cupyops {cupyops.__version__}, NumPy {np.__version__}, Python {sys.version.split()[0]}"
    if device.startswith("cuda"):
        import cupy
        dev = int(device.split(":")[1]) if ":" in device else cupy.cuda.runtime.getDevice()
        p = cupy.cuda.runtime.getDeviceProperties(dev)
        name = p["name"].decode() if isinstance(p["name"], bytes) else p["name"]
        rt = cupy.cuda.runtime.runtimeGetVersion()
        text += (f"; device cuda:{dev} = {name} (compute capability {p['major']}.{p['minor']}); "
                 f"CuPy {cupy.__version__}, CUDA runtime {rt // 1000}.{rt % 1000 // 10}, "
                 f"NVRTC {'.'.join(map(str, cupy.cuda.nvrtc.getVersion()))}")
    elif device == "simt":
        text += f"; {devices.simt_status()[1]}"
    else:
        text += "; the NumPy path"
    return text


def table(tally: Tally) -> str:
    lines = [f"{'op':<20} {'dtype':<16} {'cases':>6} {'mismatches':>10}"]
    for (op, dt), (n, bad) in sorted(tally.cases.items(), key=lambda kv: (OPS.index(kv[0][0]),
                                                                          kv[0][1])):
        lines.append(f"{op:<20} {dt:<16} {n:>6} {bad:>10}{'  <-- FAIL' if bad else ''}")
    return "\n".join(lines)


def _prepare(device, dtypes):
    """Compile the modules the sweep needs, in parallel (kernel devices)."""
    if device == "cpu":
        return
    import cupyops
    from cupyops.core import modules
    wanted = {np.dtype("m8[ns]") if d.kind in "mM" else d for d in dtypes}
    served = {d for f in modules.families().values() for d in f.dtypes}
    cupyops.precompile(dtypes=[d for d in wanted if d in served], device=device)


def run(device="cpu", quick=False, ops=OPS, dtypes=None, seed=0, big_dtypes=None,
        prepare=True) -> dict:
    """The sweep; returns the record ``--json`` writes. ``big_dtypes``: only these dtypes
    get the large inputs that reach the multi-block plan cases (default: every dtype).
    ``prepare``: compile every module of the dtypes first, in parallel (else each on its
    first use: only what the sweep runs)."""
    dtypes = input_dtypes() if dtypes is None else [np.dtype(d) for d in dtypes]
    if big_dtypes is not None:
        big_dtypes = {np.dtype(d) for d in big_dtypes}
    t0 = time.perf_counter()
    if prepare:
        _prepare(device, dtypes)
    compiled = time.perf_counter() - t0
    tally = Tally()
    sweep(device, quick, tuple(ops), dtypes, tally, seed, big_dtypes)
    return {"device": device, "where": where(device), "quick": quick,
            "big_dtypes": None if big_dtypes is None else sorted(map(str, big_dtypes)),
            "seconds": round(time.perf_counter() - t0, 1), "compile_seconds": round(compiled, 1),
            "cases": sum(n for n, _ in tally.cases.values()), "mismatches": tally.mismatches,
            "table": [{"op": op, "dtype": dt, "cases": n, "mismatches": bad}
                      for (op, dt), (n, bad) in tally.cases.items()],
            "plan_cases": sorted(tally.plan_cases), "failures": tally.failures,
            "_tally": tally}


def _parser():
    p = argparse.ArgumentParser(prog="python -m cupyops selftest",
                                description="check every operator on a device against NumPy")
    p.add_argument("--device", default="cpu", help="cpu (default), simt, cuda or cuda:N")
    p.add_argument("--quick", action="store_true",
                   help="every op and dtype, fewer layouts and sizes (about a minute)")
    p.add_argument("--ops", default=",".join(OPS), help="comma-separated subset of the ops")
    p.add_argument("--dtypes", default=None, help="comma-separated subset of the input dtypes")
    p.add_argument("--json", metavar="PATH", help="also write the record as JSON")
    p.add_argument("--seed", type=int, default=0)
    return p


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    from cupyops.core import devices
    kind = args.device.split(":")[0]
    if kind in ("cuda", "simt"):
        ok, why = devices.cuda_status() if kind == "cuda" else devices.simt_status()
        if not ok:
            print(f"selftest: device {args.device} is not available here: {why}")
            return 2
    ops = [o.strip() for o in args.ops.split(",") if o.strip()]
    unknown = [o for o in ops if o not in OPS]
    if unknown:
        print(f"selftest: unknown op(s) {unknown}; choose from {', '.join(OPS)}")
        return 2
    dtypes = None if args.dtypes is None else [d.strip() for d in args.dtypes.split(",")]
    rec = run(args.device, args.quick, ops, dtypes, args.seed)
    tally = rec.pop("_tally")
    print(f"selftest on {args.device}{' (quick)' if args.quick else ''}: {rec['where']}")
    print(table(tally))
    print(f"plan cases reached: {', '.join(rec['plan_cases']) or 'none (NumPy path)'}")
    for line in tally.failures[:20]:
        print(f"  MISMATCH {line}")
    print(f"{rec['cases']} cases, {rec['mismatches']} mismatches, {rec['seconds']} s "
          f"({rec['compile_seconds']} s compiling)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rec, f, indent=1)
    return 1 if rec["mismatches"] else 0


if __name__ == "__main__":
    sys.exit(main())
