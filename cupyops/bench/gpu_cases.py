"""The GPU benchmark's own cases and how they are timed (issue 32, part 3).

Used by ``python -m cupyops bench cuda`` (the section after the quick set),
``python -m cupyops.bench.gpu_events`` (its kernel-memory cases are :class:`GpuCase` too) and
``python -m cupyops.bench.gpu_model`` (the model table reads the same records).

**The large cases** (:func:`large_cases`, 256 MiB inputs at scale ``"full"``):

* argmax and argmin over the last, the first and all axes, float32, float16 and int8;
* hardmax over the last axis (float32, float16);
* count_nonzero over all axes and over axis 0 (float32, int8; density 0.5);
* ``nonzero_coordinates(size=n)`` with n = x.size, and argwhere (float32, density 0.1;
  argwhere also int8);
* the decode rows: argmax over the last axis of (1, 131072) and (8, 131072), bfloat16 and
  float32 (their own size at every scale but ``"tiny"``);
* segment_argmax over a 1-D float32 x, one case per length distribution of the segment
  benchmark (short, long, power-law, one huge segment and many tiny), offsets on the device;
  their minimum bytes count the offsets read too.

Each op's cases come from a builder in :data:`LARGE_OPS` (op name -> builder(scale) -> cases):
a new op adds one builder there (:func:`register`), nothing else.

**How each case is reported** (:func:`measure_case`), in one process:

* µs per call from CUDA events around ``calls`` back-to-back calls, and from the host clock over
  the same calls (started after a synchronisation, ended by one);
* the same for CuPy's composition and PyTorch's (zero-copy through DLPack), where they have one;
* the time of a device-to-device copy moving the case's minimum bytes (input read once, every
  output written once), and ``copy_fraction`` = copy time / cupyops' time;
* every figure is the median of ``repeats`` (>= 5) interleaved repeats: each repeat times every
  callable once, starting with the next one (none always follows the same);
* verdicts: ``copy_goal`` (0.90 for argmin/argmax/hardmax/count_nonzero/``size=`` at >= 64 MiB,
  0.75 for exact argwhere/nonzero, host read included) and ``peer_goal`` (>= 0.95x each peer).

:func:`host_cost` times the host side of a repeated one-launch call on CuPy input against
``cupy.argmax`` on the same array: 1,000 calls on the host clock without a synchronisation.

**Rehearsal** (no GPU): an :class:`Env` with NumPy as the array module, a device of cupyops
(``"simt"`` runs the very kernels), NumPy's composition as the "CuPy" peer, PyTorch on the CPU
and the host clock in place of CUDA events; :func:`rehearsal_env`. Scale ``"tiny"`` keeps each
input at 16 KiB.
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
import typing

import numpy as np

__all__ = ["GpuCase", "Env", "LARGE_OPS", "SCALES", "register", "large_cases", "cuda_env",
           "rehearsal_env", "measure_case", "measure_cases", "host_cost", "geomeans",
           "estimate_seconds", "copy_goal_for", "PEER_GOAL", "GEOMEAN_GOAL", "main"]

#: input bytes of a large case per scale
SCALES = {"full": 256 << 20, "small": 1 << 20, "tiny": 16 << 10}
#: copy-fraction goals (issue 32): single-pass ops at >= 64 MiB, exact nonzero
COPY_GOAL, COPY_GOAL_EXACT, COPY_GOAL_MIN_BYTES = 0.90, 0.75, 64 << 20
PEER_GOAL, GEOMEAN_GOAL, HOST_GOAL = 0.95, 1.0, 1.0


class GpuCase(typing.NamedTuple):
    """One case: ``make(xp, rng)`` the input on the env's device; ``ours(co, x, device)`` the
    cupyops call; ``peers``: ``{"cupy": f(xp, x), "torch": f(torch, t)}`` (either may be
    missing); ``exact``: an exact nonzero (a host read inside the call)."""

    name: str
    op: str
    group: str
    shape: tuple
    dtype: str
    make: typing.Callable
    ours: typing.Callable
    peers: dict
    exact: bool = False
    #: arrays the call reads besides x (a segment call's offsets): part of its minimum bytes
    reads: typing.Callable | None = None

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * dtype_of(self.dtype).itemsize


def dtype_of(name):
    if name == "bfloat16":
        from cupyops.core import dtypes as _dt
        dt = _dt.dtype()
        if dt is None:
            raise TypeError("bfloat16 needs ml_dtypes")
        return dt
    return np.dtype(name)


def copy_goal_for(case: GpuCase) -> float | None:
    """The copy-fraction goal of ``case``, or None where the issue sets none (< 64 MiB)."""
    if case.exact:
        return COPY_GOAL_EXACT if case.nbytes >= COPY_GOAL_MIN_BYTES else None
    return COPY_GOAL if case.nbytes >= COPY_GOAL_MIN_BYTES else None


# --------------------------------------------------------------------------------------------
# inputs
# --------------------------------------------------------------------------------------------

def shape_for(nbytes: int, dtype: str) -> tuple:
    """A square-ish 2-D shape of ``nbytes`` bytes of ``dtype`` (powers of two)."""
    n = max(1, nbytes // dtype_of(dtype).itemsize)
    rows = 1 << (int(math.log2(n)) // 2)
    return (rows, n // rows)


def uniform(xp, rng, shape, dtype):
    """Values in [-1, 1) as ``dtype`` (integers over their range), made on ``xp``'s device."""
    u = rng.random(shape, dtype=np.float32)
    dt = dtype_of(dtype)
    if dt.kind in "iu":
        lo, hi = np.iinfo(dt).min, np.iinfo(dt).max
        return xp.floor(u * (hi - lo + 1) + lo).astype(dt)
    if dt.name == "bfloat16":
        return _bf16_from(xp, u * 2 - 1)
    return (u * 2 - 1).astype(dt)


def _bf16_from(xp, f32):
    """float32 -> bfloat16 by its top 16 bits (CuPy without bfloat16 casts works too)."""
    bits = (f32.view(np.uint32) >> 16).astype(np.uint16)
    return bits.view(dtype_of("bfloat16"))


def mask(xp, rng, shape, dtype, density):
    """Zeros and ones of ``dtype`` at ``density``."""
    u = rng.random(shape, dtype=np.float32)
    return (u < density).astype(dtype_of(dtype))


# --------------------------------------------------------------------------------------------
# the large cases: one builder per op
# --------------------------------------------------------------------------------------------

LARGE_OPS: dict = {}


def register(op: str):
    """Decorator: ``builder(scale) -> [GpuCase]`` for ``op`` (the hook for a new op)."""
    def deco(builder):
        LARGE_OPS[op] = builder
        return builder
    return deco


_AXES = {"last": -1, "first": 0, "all": None}


def _argreduce_cases(op, scale):
    out = []
    for dt in ("float32", "float16", "int8"):
        shape = shape_for(SCALES[scale], dt)
        for where, axis in _AXES.items():
            out.append(GpuCase(
                f"{op} {where} {'x'.join(map(str, shape))} {dt}", op, "large", shape, dt,
                lambda xp, rng, s=shape, d=dt: uniform(xp, rng, s, d),
                lambda co, x, dev, a=axis, f=op: getattr(co, f)(x, axis=a, device=dev),
                {"cupy": lambda xp, x, a=axis, f=op: getattr(xp, f)(x, axis=a),
                 "torch": lambda torch, t, a=axis, f=op: getattr(torch, f)(t, dim=a)
                 if a is not None else getattr(torch, f)(t)}))
    return out


register("argmax")(lambda scale: _argreduce_cases("argmax", scale))
register("argmin")(lambda scale: _argreduce_cases("argmin", scale))


def _cupy_hardmax(xp, x):
    from cupyops.bench.peers import hardmax_onehot
    return hardmax_onehot(xp, x, x.ndim - 1, "first")


def _torch_hardmax(torch, t):
    return torch.zeros_like(t).scatter_(-1, torch.argmax(t, dim=-1, keepdim=True), 1)


@register("hardmax")
def _hardmax_cases(scale):
    out = []
    for dt in ("float32", "float16"):
        shape = shape_for(SCALES[scale], dt)
        out.append(GpuCase(f"hardmax last {'x'.join(map(str, shape))} {dt}", "hardmax",
                           "large", shape, dt,
                           lambda xp, rng, s=shape, d=dt: uniform(xp, rng, s, d),
                           lambda co, x, dev: co.hardmax(x, axis=-1, device=dev),
                           {"cupy": _cupy_hardmax, "torch": _torch_hardmax}))
    return out


@register("count_nonzero")
def _count_cases(scale):
    out = []
    for dt in ("float32", "int8"):
        shape = shape_for(SCALES[scale], dt)
        for where, axis in (("all", None), ("axis 0", 0)):
            out.append(GpuCase(
                f"count_nonzero {where} {'x'.join(map(str, shape))} {dt} d=0.5",
                "count_nonzero", "large", shape, dt,
                lambda xp, rng, s=shape, d=dt: mask(xp, rng, s, d, 0.5),
                lambda co, x, dev, a=axis: co.count_nonzero(x, axis=a, device=dev),
                {"cupy": lambda xp, x, a=axis: xp.count_nonzero(x, axis=a),
                 "torch": lambda torch, t, a=axis: torch.count_nonzero(t, dim=a)}))
    return out


def _cupy_coords(xp, x):
    from cupyops.bench.peers import nonzero_coordinates_composition
    return nonzero_coordinates_composition(xp, x, x.size)


def _torch_coords(torch, t):
    c = torch.nonzero_static(t, size=t.numel(), fill_value=0)
    return c, torch.count_nonzero(t)


@register("nonzero_coordinates")
def _coords_cases(scale):
    shape = shape_for(SCALES[scale], "float32")
    return [GpuCase(f"nonzero_coordinates size=n {'x'.join(map(str, shape))} float32 d=0.1",
                    "nonzero_coordinates", "large", shape, "float32",
                    lambda xp, rng, s=shape: mask(xp, rng, s, "float32", 0.1),
                    lambda co, x, dev: co.nonzero_coordinates(x, size=x.size, device=dev),
                    {"cupy": _cupy_coords, "torch": _torch_coords})]


@register("argwhere")
def _argwhere_cases(scale):
    out = []
    for dt in ("float32", "int8"):
        shape = shape_for(SCALES[scale], dt)
        out.append(GpuCase(f"argwhere {'x'.join(map(str, shape))} {dt} d=0.1", "argwhere",
                           "large", shape, dt,
                           lambda xp, rng, s=shape, d=dt: mask(xp, rng, s, d, 0.1),
                           lambda co, x, dev: co.argwhere(x, device=dev),
                           {"cupy": lambda xp, x: xp.argwhere(x),
                            "torch": lambda torch, t: torch.argwhere(t)}, exact=True))
    return out


@register("decode")
def _decode_cases(scale):
    width = 2048 if scale == "tiny" else 131072
    out = []
    for dt in ("bfloat16", "float32"):
        for rows in (1, 8):
            shape = (rows, width)
            out.append(GpuCase(f"decode argmax {rows}x{width} {dt}", "decode", "large", shape,
                               dt, lambda xp, rng, s=shape, d=dt: uniform(xp, rng, s, d),
                               lambda co, x, dev: co.argmax(x, axis=-1, device=dev),
                               {"cupy": lambda xp, x: xp.argmax(x, axis=-1),
                                "torch": lambda torch, t: torch.argmax(t, dim=-1)}))
    return out


#: the segment cases' offsets on the device, of the one case alive at a time (``make`` fills
#: it; the call and its peers read it)
_SEGMENT_OFFSETS: dict = {}


def _segment_make(xp, rng, shape, dist):
    """x (1-D float32) and, kept aside, the offsets of ``dist`` on ``xp``'s device (the same
    offsets as the quick bench's case of that distribution and length)."""
    from cupyops.ops.segment.bench import offsets_for_case
    from cupyops.core.operator import BenchCase
    _SEGMENT_OFFSETS.clear()
    _SEGMENT_OFFSETS["offsets"] = xp.asarray(offsets_for_case(
        BenchCase(f"{dist} R=1", shape, {"dist": dist})))
    _SEGMENT_OFFSETS["lengths"] = xp.diff(_SEGMENT_OFFSETS["offsets"])
    return uniform(xp, rng, shape, "float32")


def _cupy_segment(xp, x):
    """CuPy's composition (cupyops.ops.segment.bench; NumPy's reduceat one in a rehearsal)."""
    from cupyops.ops.segment import bench as SB
    if xp is np:
        return SB.reduceat_composition(xp, x, _SEGMENT_OFFSETS["offsets"], "max", False)
    return SB.scatter_composition(xp, x, _SEGMENT_OFFSETS["offsets"], "max", False,
                                  *SB.cupy_scatters())


def _torch_segment(torch, t):
    """PyTorch's composition (cupyops.ops.segment.bench), the lengths already on the GPU."""
    from cupyops.ops.segment import bench as SB
    return SB.torch_composition(torch, t, torch.from_dlpack(_SEGMENT_OFFSETS["lengths"]), "max",
                                False)


@register("segment_argmax")
def _segment_cases(scale):
    """segment_argmax over a 1-D float32 x, one case per length distribution (issue 35's GPU
    goal: >= 0.90 of the copy of x + offsets + result at >= 64 MiB)."""
    from cupyops.ops.segment.bench import DISTRIBUTIONS
    shape = (SCALES[scale] // 4,)
    return [GpuCase(f"segment_argmax {dist} {shape[0]} float32", "segment_argmax", "large",
                    shape, "float32",
                    lambda xp, rng, s=shape, d=dist: _segment_make(xp, rng, s, d),
                    lambda co, x, dev: co.segment_argmax(x, _SEGMENT_OFFSETS["offsets"],
                                                         device=dev),
                    {"cupy": _cupy_segment, "torch": _torch_segment},
                    reads=lambda: (_SEGMENT_OFFSETS["offsets"],))
            for dist in DISTRIBUTIONS]


def large_cases(scale: str = "full", ops=None) -> list:
    """The large cases at ``scale`` of ``ops`` (names in :data:`LARGE_OPS`; default all)."""
    if scale not in SCALES:
        raise ValueError(f"unknown scale {scale!r}; expected one of {', '.join(SCALES)}")
    out = []
    for op, builder in LARGE_OPS.items():
        if ops is None or op in ops:
            out += builder(scale)
    return out


# --------------------------------------------------------------------------------------------
# where the cases run: the GPU, or a rehearsal on the CPU
# --------------------------------------------------------------------------------------------

class Env:
    """The array module, cupyops' device, the peers' libraries and the clocks of one run."""

    def __init__(self, xp, device, torch=None, events=False, name="", dry_host=False):
        self.xp, self.device, self.torch, self.events = xp, device, torch, events
        self.name, self.dry_host = name, dry_host

    def sync(self):
        if self.events:
            self.xp.cuda.get_current_stream().synchronize()

    def rng(self, seed):
        return self.xp.random.default_rng(seed)

    def to_torch(self, x):
        """``x`` as a torch tensor sharing its memory (bfloat16 through its bits)."""
        t = self.torch
        if x.dtype.name == "bfloat16":
            return t.from_dlpack(x.view(np.int16)).view(t.bfloat16)
        return t.from_dlpack(x)

    def from_torch(self, t):
        return self.xp.from_dlpack(t.contiguous()) if hasattr(t, "__dlpack__") else t

    def copier(self, nbytes):
        """A callable copying ``nbytes`` bytes device to device (it moves 2 x nbytes)."""
        xp = self.xp
        src, dst = xp.ones(max(1, nbytes), np.uint8), xp.empty(max(1, nbytes), np.uint8)
        if not self.events:
            return lambda: np.copyto(dst, src)
        rt = xp.cuda.runtime
        return lambda: rt.memcpyAsync(dst.data.ptr, src.data.ptr, nbytes,
                                      rt.memcpyDeviceToDevice, xp.cuda.get_current_stream().ptr)

    def time_events(self, fn, calls):
        """Seconds per call from CUDA events around ``calls`` back-to-back calls (the host
        clock, synchronised, in a rehearsal)."""
        if not self.events:
            return self.time_host(fn, calls)
        cuda = self.xp.cuda
        start, end = cuda.Event(), cuda.Event()
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        end.synchronize()
        return cuda.get_elapsed_time(start, end) / 1e3 / calls

    def time_host(self, fn, calls):
        """Seconds per call on the host clock: after a synchronisation, ``calls`` calls, then a
        synchronisation."""
        self.sync()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        self.sync()
        return (time.perf_counter() - t0) / calls

    def free(self):
        if self.events:
            self.xp.get_default_memory_pool().free_all_blocks()
            if self.torch is not None:
                self.torch.cuda.empty_cache()


def _torch_module(cuda: bool):
    try:
        import torch
    except ImportError:
        return None
    if cuda and not torch.cuda.is_available():
        return None
    return torch


def cuda_env() -> Env:
    """The GPU: CuPy's current device, CUDA events, PyTorch on CUDA where it is there. Raises
    ``RuntimeError`` (the devices' wording) without a GPU."""
    from cupyops.core import devices as _devices
    ok, why = _devices.cuda_status()
    if not ok:
        raise RuntimeError(f"no GPU: {why}")
    import cupy
    return Env(cupy, None, _torch_module(True), events=True, name="cuda")


def rehearsal_env(device: str = "simt") -> Env:
    """A rehearsal without a GPU: NumPy arrays, cupyops on ``device`` (``"simt"``: the CUDA
    kernels on the CPU), NumPy's composition as the CuPy peer, PyTorch on the CPU, the host
    clock; host costs under ``dry_run``."""
    return Env(np, device, _torch_module(False), events=False, name=f"rehearsal ({device})",
               dry_host=True)


# --------------------------------------------------------------------------------------------
# measuring one case
# --------------------------------------------------------------------------------------------

def _arrays(res):
    if isinstance(res, (tuple, list)):
        return [a for r in res for a in _arrays(r)]
    return [res] if hasattr(res, "nbytes") else []


def min_bytes(x, res) -> int:
    """Bytes a call must move: the input read once, every output byte written once."""
    return int(x.nbytes) + sum(int(a.nbytes) for a in _arrays(res))


def _equal(xp, a, b) -> bool:
    if isinstance(a, (tuple, list)) or isinstance(b, (tuple, list)):
        return (isinstance(a, (tuple, list)) and isinstance(b, (tuple, list))
                and len(a) == len(b) and all(_equal(xp, u, v) for u, v in zip(a, b)))
    a, b = xp.asarray(a), xp.asarray(b)
    return a.shape == b.shape and bool(xp.array_equal(a, b))


def _peer_fns(case, env, x, res):
    """{name: (callable, status)} of the case's peers (status "ok", "result differs", or
    "n/a: why"); each peer is called once (compiles) and checked against cupyops' result."""
    out = {}
    for name, f in case.peers.items():
        if name == "torch" and env.torch is None:
            out[name] = (None, "n/a: torch not installed" + (" with CUDA" if env.events else ""))
            continue
        try:
            if name == "torch":
                t = env.to_torch(x)
                fn = (lambda f=f, t=t: f(env.torch, t))
                r = fn()
                r = tuple(env.from_torch(v) for v in r) if isinstance(r, tuple) \
                    else env.from_torch(r)
            else:
                fn = (lambda f=f: f(env.xp, x))
                r = fn()
            out[name] = (fn, "ok" if _equal(env.xp, res, r) else "result differs")
        except Exception as exc:
            out[name] = (None, f"n/a: {type(exc).__name__}: {str(exc)[:120]}")
    return out


def _batch_calls(env, fn, min_batch_s):
    """Calls per timed batch: enough for ``min_batch_s`` (1 in a rehearsal)."""
    if not env.events:
        return 1
    t = env.time_host(fn, 1)
    return max(1, min(1000, math.ceil(min_batch_s / max(t, 1e-6))))


def _interleaved(env, fns: dict, calls, repeats):
    """{name: (median events s, median host s)} over ``repeats`` rounds, each round timing
    every callable once on both clocks, starting with the next callable."""
    names = list(fns)
    ev = {n: [] for n in names}
    host = {n: [] for n in names}
    for r in range(repeats):
        for j in range(len(names)):
            n = names[(j + r) % len(names)]
            ev[n].append(env.time_events(fns[n], calls))
            host[n].append(env.time_host(fns[n], calls))
    return {n: (statistics.median(ev[n]), statistics.median(host[n])) for n in names}


def measure_case(case: GpuCase, env: Env, repeats: int = 5, min_batch_s: float = 1e-3,
                 seed: int = 0) -> dict:
    """The record of one case (see the module doc); ``status`` says why figures are missing."""
    import cupyops
    rec = {"case": case.name, "op": case.op, "group": case.group, "shape": list(case.shape),
           "dtype": case.dtype, "bytes": case.nbytes, "env": env.name, "repeats": repeats,
           "copy_goal": copy_goal_for(case)}
    try:
        x = case.make(env.xp, env.rng(seed))
        env.sync()
        ours = (lambda: case.ours(cupyops, x, env.device))
        res = ours()
    except Exception as exc:
        return dict(rec, ok=None, status=f"unavailable: {type(exc).__name__}: {exc}"[:240])
    peers = _peer_fns(case, env, x, res)
    ref = peers.get("cupy", (None, ""))
    rec["ok"] = None if ref[0] is None else ref[1] == "ok"
    rec["status"] = "ok" if rec["ok"] is not False else "MISMATCH against CuPy"
    rec["min_bytes"] = min_bytes(x, res) + sum(int(a.nbytes) for a in (
        case.reads() if case.reads else ()))
    fns = {"cupyops": ours, "copy": env.copier(rec["min_bytes"] // 2)}
    fns.update({n: f for n, (f, _) in peers.items() if f is not None})
    calls = _batch_calls(env, ours, min_batch_s)
    times = _interleaved(env, fns, calls, repeats)
    rec.update(calls=calls, **_figures(rec, times, peers))
    del x, res, fns, peers
    env.free()
    return rec


def _figures(rec, times, peers) -> dict:
    ours_ev, ours_host = times["cupyops"]
    copy_ev = times["copy"][0]
    frac = copy_ev / ours_ev if ours_ev else None
    goal = rec["copy_goal"]
    out = {"us_events": ours_ev * 1e6, "us_host": ours_host * 1e6, "copy_us": copy_ev * 1e6,
           "copy_fraction": frac, "copy_met": None if goal is None or frac is None
           else frac >= goal, "gbps": rec["min_bytes"] / ours_ev / 1e9 if ours_ev else None,
           "peers": {}}
    for name, (_, status) in peers.items():
        if name not in times:
            out["peers"][name] = {"status": status}
            continue
        p_ev, p_host = times[name]
        ratio = p_ev / ours_ev if ours_ev else None
        out["peers"][name] = {"us_events": p_ev * 1e6, "us_host": p_host * 1e6,
                              "ratio": ratio, "ratio_host": p_host / ours_host,
                              "met": None if ratio is None else ratio >= PEER_GOAL,
                              "status": status}
    return out


def measure_cases(cases, env, repeats=5, min_batch_s=1e-3, deadline=None, progress=None):
    """Records of ``cases`` in order; once ``deadline`` (a ``time.perf_counter()`` value) has
    passed, the rest are recorded as not run."""
    out = []
    for k, case in enumerate(cases):
        if deadline is not None and time.perf_counter() > deadline:
            out.append({"case": case.name, "op": case.op, "group": case.group,
                        "shape": list(case.shape), "dtype": case.dtype, "bytes": case.nbytes,
                        "ok": None, "status": "not run: past the deadline"})
            continue
        if progress:
            progress(k, len(cases), case.name)
        out.append(measure_case(case, env, repeats, min_batch_s, seed=k))
    return out


def geomeans(records) -> list:
    """Per op and peer: the geometric mean of the ratios, its verdict (>= 1.0), and the count
    of cases under 0.95x."""
    by = {}
    for r in records:
        for peer, p in (r.get("peers") or {}).items():
            if p.get("ratio"):
                by.setdefault((r["op"], peer), []).append(p["ratio"])
    rows = []
    for (op, peer), v in by.items():
        g = math.exp(sum(map(math.log, v)) / len(v))
        rows.append({"op": op, "peer": peer, "cases": len(v), "geomean": g,
                     "met": g >= GEOMEAN_GOAL, "below_0_95": sum(1 for x in v if x < PEER_GOAL)})
    return rows


# --------------------------------------------------------------------------------------------
# host cost of a repeated one-launch call
# --------------------------------------------------------------------------------------------

def _host_cases(env):
    """(name, cupyops call, input) of one-launch calls on small inputs: the host dominates."""
    import cupyops as co
    rng = env.rng(3)
    x = uniform(env.xp, rng, (8, 1000), "float32")
    m = mask(env.xp, rng, (64, 64), "float32", 0.3)
    offsets = env.xp.asarray(np.array([0, 2, 5, 8], np.int64))    # on the device: no sync
    d = env.device
    return [
        ("argmax (8, 1000) float32 axis 1", lambda: co.argmax(x, axis=1, device=d), x),
        ("argmin (8, 1000) float32 axis 1", lambda: co.argmin(x, axis=1, device=d), x),
        ("hardmax (8, 1000) float32 axis 1", lambda: co.hardmax(x, axis=1, device=d), x),
        ("count_nonzero (8, 1000) axis 1", lambda: co.count_nonzero(x, axis=1, device=d), x),
        ("nonzero_coordinates size=100 (64, 64)",
         lambda: co.nonzero_coordinates(m, size=100, device=d), m),
        ("segment_argmax (8, 1000) float32, 3 segments",
         lambda: co.segment_argmax(x, offsets, device=d), x),
    ]


def _launches_of(fn) -> int:
    from cupyops.testing import recording
    with recording() as tr:
        fn()
    return len(tr.launches)


def host_cost(env: Env, calls: int = 1000, repeats: int = 5) -> list:
    """Per one-launch case: µs per call on the host clock over ``calls`` calls without a
    synchronisation (one before and after, outside the clock), against ``cupy.argmax`` (axis 1
    where the input has rows) on the same array, the median of ``repeats`` interleaved rounds.
    Goal: cupyops' call costs at most CuPy's (ratio >= 1.0). In a rehearsal the calls run under
    ``dry_run`` (nothing launched: the host path only)."""
    import contextlib

    from cupyops.testing import dry_run
    rows = []
    with (dry_run(count=1) if env.dry_host else contextlib.nullcontext()):
        for name, ours, x in _host_cases(env):
            peer = (lambda x=x: env.xp.argmax(x, axis=1))
            ours()
            peer()
            launches = _launches_of(ours)
            t = {"cupyops": [], "peer": []}
            for r in range(repeats):
                for key, fn in (("cupyops", ours), ("peer", peer))[::1 if r % 2 else -1]:
                    env.sync()
                    t0 = time.perf_counter()
                    for _ in range(calls):
                        fn()
                    t[key].append((time.perf_counter() - t0) / calls)
                    env.sync()
            us, peer_us = (statistics.median(t[k]) * 1e6 for k in ("cupyops", "peer"))
            rows.append({"case": name, "launches": launches, "us": us,
                         "peer": f"{env.xp.__name__}.argmax", "peer_us": peer_us,
                         "ratio": peer_us / us, "met": peer_us / us >= HOST_GOAL,
                         "calls": calls, "repeats": repeats, "env": env.name})
    return rows


# --------------------------------------------------------------------------------------------
# the time budget
# --------------------------------------------------------------------------------------------

#: seconds per case outside the timed batches (input, first calls, checks), and a call's least
#: host time; a batch is timed for at least MIN_BATCH_S
SETUP_S, HOST_CALL_S, MIN_BATCH_S = 0.15, 40e-6, 1e-3


def case_seconds(case: GpuCase, bandwidth: float, repeats: int = 5, fns: int = 4) -> float:
    """Estimated wall seconds of :func:`measure_case` on a device of ``bandwidth`` bytes/s of
    copy: setup, plus ``repeats`` x 2 clocks x ``fns`` callables (cupyops, CuPy, PyTorch, the
    copy) x one batch of at least :data:`MIN_BATCH_S` or one call. The input is the bytes the
    case must move at least; outputs of ``size=`` calls move more (x 5 for float32
    coordinates)."""
    moved = case.nbytes * (5 if case.op == "nonzero_coordinates" else 2)
    call = max(HOST_CALL_S, moved / bandwidth)
    gen = case.nbytes * 12 / bandwidth           # uniform floats, scale, cast
    return SETUP_S + gen + 3 * call + repeats * 2 * fns * max(MIN_BATCH_S, call)


def estimate_seconds(cases, bandwidth: float, repeats: int = 5) -> float:
    return sum(case_seconds(c, bandwidth, repeats) for c in cases)


# --------------------------------------------------------------------------------------------
# output
# --------------------------------------------------------------------------------------------

def fmt_num(v, spec, none="n/a"):
    return none if v is None else format(v, spec)


def _verdict(met):
    return {True: "met", False: "MISSED", None: "-"}[met]


def table_rows(records, peer_names=("cupy", "torch")) -> tuple:
    """(header, rows) of the large / kernel cases table, every row with its copy fraction."""
    header = ["case", "ok", "us (events)", "us (host)", "min MB", "GB/s", "copy frac",
              "copy goal"] + [f"vs {p}" for p in peer_names] + ["peer goal"]
    rows = []
    for r in records:
        if "us_events" not in r:
            rows.append([r["case"], r.get("status", "?")] + [""] * (len(header) - 2))
            continue
        goal = r.get("copy_goal")
        ratios, mets = [], []
        for p in peer_names:
            pr = (r.get("peers") or {}).get(p) or {}
            ratios.append(fmt_num(pr.get("ratio"), ".2f") + ("x" if pr.get("ratio") else "")
                          + ("" if pr.get("status", "ok") in ("ok",) or pr.get("ratio") is None
                             else " (!)"))
            if pr.get("met") is not None:
                mets.append(pr["met"])
        rows.append([r["case"], {True: "yes", False: "NO", None: "?"}[r.get("ok")],
                     fmt_num(r["us_events"], ".1f"), fmt_num(r["us_host"], ".1f"),
                     fmt_num(r["min_bytes"] / 1e6, ".1f"), fmt_num(r.get("gbps"), ".0f"),
                     fmt_num(r.get("copy_fraction"), ".2f"),
                     "-" if goal is None else f">= {goal:.2f} {_verdict(r.get('copy_met'))}"]
                    + ratios + [_verdict(all(mets) if mets else None)])
    return header, rows


def report_lines(records, host_rows=(), fmt=None) -> list:
    """Text (or, with ``fmt`` = a markdown formatter, Markdown) lines of the records, the
    geometric means and the host-cost rows."""
    from cupyops.bench.tables import format_text
    fmt = fmt or format_text
    lines = [fmt(*table_rows(records)), ""]
    for g in geomeans(records):
        lines.append(f"geometric mean vs {g['peer']}, {g['op']}: {g['geomean']:.2f}x over "
                     f"{g['cases']} cases (goal >= {GEOMEAN_GOAL:.1f}: {_verdict(g['met'])}); "
                     f"{g['below_0_95']} below {PEER_GOAL}x")
    if host_rows:
        hdr = ["one-launch call", "launches", "cupyops us", "peer", "peer us", "ratio", "goal"]
        rows = [[h["case"], str(h["launches"]), f"{h['us']:.2f}", h["peer"],
                 f"{h['peer_us']:.2f}", f"{h['ratio']:.2f}", f">= {HOST_GOAL:.1f} "
                 f"{_verdict(h['met'])}"] for h in host_rows]
        lines += ["", f"host cost: {host_rows[0]['calls']} calls without a synchronisation, "
                  "median of interleaved repeats (ratio = peer / cupyops)", "",
                  fmt(hdr, rows)]
    return lines


# --------------------------------------------------------------------------------------------
# command line
# --------------------------------------------------------------------------------------------

def _parser():
    p = argparse.ArgumentParser(prog="python -m cupyops.bench.gpu_cases",
                                description="the GPU benchmark's large cases and host cost "
                                            "(cupyops/bench/gpu_cases.py)")
    p.add_argument("--scale", default="full", choices=tuple(SCALES))
    p.add_argument("--ops", default=None, help="comma-separated ops of LARGE_OPS (default all)")
    p.add_argument("--cases", default=None, help="comma-separated substrings of case names")
    p.add_argument("--repeats", type=int, default=5, help="interleaved repeats (>= 5 on a GPU)")
    p.add_argument("--host-cost", action="store_true", help="the host-cost rows only")
    p.add_argument("--calls", type=int, default=1000, help="calls of the host-cost timing")
    p.add_argument("--rehearse", nargs="?", const="simt", default=None, metavar="DEVICE",
                   help="no GPU: NumPy arrays, cupyops on DEVICE (default simt), the host clock")
    p.add_argument("--estimate", action="store_true", help="print the time estimate, run nothing")
    p.add_argument("--json", metavar="PATH")
    p.add_argument("--list", action="store_true")
    return p


def selected(args) -> list:
    ops = args.ops.split(",") if args.ops else None
    cases = large_cases(args.scale, ops)
    if args.cases:
        cases = [c for c in cases if any(s in c.name for s in args.cases.split(","))]
    return cases


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    cases = selected(args)
    if args.list or args.estimate:
        from cupyops.bench import device_model
        for c in cases if args.list else ():
            print(c.name)
        est = estimate_seconds(cases, device_model.H200.copy_bandwidth, args.repeats)
        print(f"{len(cases)} cases, estimated {est:.1f} s on an H200 (4.3 TB/s of copy)")
        return 0
    try:
        env = rehearsal_env(args.rehearse) if args.rehearse else cuda_env()
    except RuntimeError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    doc = {"env": env.name}
    if args.host_cost:
        doc["host_cost"] = host_cost(env, args.calls, args.repeats)
        print("\n".join(report_lines([], doc["host_cost"])[2:]))
    else:
        doc["records"] = measure_cases(cases, env, args.repeats, progress=print_progress)
        print("\n".join(report_lines(doc["records"])))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(doc, fh, indent=1)
    return 0


def print_progress(k, n, name):
    print(f"[{k + 1}/{n}] {name}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
