"""Memory-traffic model of the kernel path, measured on the SIMT layer.

Two halves:

* **The minimum** (:func:`distinct_sectors`, :func:`min_sectors`): how many distinct 32-byte
  sectors hold an element the operation must read (its input) and an element it must write (its
  outputs), computed from the arrays' addresses, shapes and strides alone — independent of any
  kernel. Broadcast (zero-stride) axes and length-1 axes add nothing; negative strides are
  handled; overlapping or interleaved views are merged exactly.
* **What the kernels did** (:func:`summarize_launches`): the per-launch counters of
  ``cupyops.simt.record_traffic()`` added up per call — requested bytes, sectors touched by the
  warp-wide accesses, unique sectors, launches.

:func:`traffic_fields` combines them into the figures the benchmark reports per case:

``sectors_ratio``  sectors touched / minimum sectors (1.0 is ideal)
``coalescing``     requested bytes / (sectors touched × 32): 1.0 when every byte of every sector
                   a warp fetches is one the lanes asked for
``model_seconds``  modelled time on a device (:mod:`cupyops.bench.device_model`, default the
                   H100): sectors × 32 B / its copy bandwidth (3.0 TB/s) + 3 µs per launch
``model_min_seconds``  the same roofline for the minimum traffic and one launch
"""
from __future__ import annotations

import math

import numpy as np

from cupyops.bench import device_model as _device

SECTOR_BYTES = 32
H100_BANDWIDTH = _device.H100.copy_bandwidth   # bytes/s, the default roofline (H100 SXM HBM3)
LAUNCH_SECONDS = _device.H100.launch_s         # per kernel launch in the default model

#: Goals made visible in the report (not test gates): the largest acceptable sectors_ratio.
GOALS = {
    "argreduce": 1.05,           # argmax / argmin, every layout
    "hardmax": 1.05,
    "nonzero_size": 1.15,        # nonzero_coordinates(size=...) at density 0.5
    # argwhere / nonzero / nonzero_coordinates(size=None): the input once, then a bit an
    # element written and read (an eighth of a 1-byte input each way)
    "nonzero_exact": 1.35,
    # segment_argmax / segment_argmin and the values forms (issue 35): x, the offsets (which
    # the benchmark's call names, ``fn.traffic_inputs``) and the results, every distribution
    "segment": 1.05,
}

__all__ = ["SECTOR_BYTES", "H100_BANDWIDTH", "LAUNCH_SECONDS", "GOALS", "array_geometry",
           "sector_intervals", "distinct_sectors", "min_sectors", "summarize_launches",
           "model_seconds", "traffic_fields", "goal_for"]


# --------------------------------------------------------------------------------------------
# the minimum
# --------------------------------------------------------------------------------------------

def array_geometry(a):
    """``(address of element 0, shape, strides in bytes, itemsize)`` of a NumPy or CuPy array,
    or of such a tuple given directly (for tests and for arrays described by hand)."""
    if isinstance(a, tuple) and len(a) == 4:
        addr, shape, strides, itemsize = a
        return int(addr), tuple(int(n) for n in shape), tuple(int(s) for s in strides), int(itemsize)
    if isinstance(a, np.ndarray):
        addr = a.__array_interface__["data"][0]
    elif hasattr(a, "data") and hasattr(a.data, "ptr"):   # cupy.ndarray: ptr is element 0
        addr = a.data.ptr
    else:
        raise TypeError(f"cannot take the address of {type(a).__name__}")
    return int(addr), tuple(int(n) for n in a.shape), tuple(int(s) for s in a.strides), \
        int(a.dtype.itemsize)


def _runs(addr, shape, strides, itemsize):
    """The array as byte runs: (start addresses int64 array, run length in bytes).

    Axes of length 1 and zero-stride axes are dropped (they name no new byte); negative strides
    are turned round from the lowest element; axes then sorted by stride, and the innermost
    dense ones merged into one contiguous run."""
    if any(n == 0 for n in shape):
        return np.zeros(0, np.int64), 0
    dims = []
    for n, s in zip(shape, strides):
        if n == 1 or s == 0:
            continue
        if s < 0:
            addr += (n - 1) * s
            s = -s
        dims.append((s, n))
    dims.sort()
    run = itemsize
    while dims and dims[0][0] == run:        # dense: the next axis continues the run exactly
        s, n = dims.pop(0)
        run *= n
    starts = np.zeros(1, np.int64)
    for s, n in dims:                        # outer axes, smallest stride first
        starts = (starts[None, :] + (np.arange(n, dtype=np.int64) * s)[:, None]).ravel()
    return starts + addr, run


def sector_intervals(a, sector=SECTOR_BYTES):
    """Inclusive ``(first, last)`` sector-number arrays, one interval per byte run of ``a``."""
    addr, shape, strides, itemsize = array_geometry(a)
    starts, run = _runs(addr, shape, strides, itemsize)
    if starts.size == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return starts // sector, (starts + run - 1) // sector


def _union_length(lo, hi):
    """Number of integers covered by the union of the inclusive intervals [lo, hi]."""
    if lo.size == 0:
        return 0
    order = np.argsort(lo, kind="stable")
    lo = lo[order]
    hi = hi[order]
    reach = np.maximum.accumulate(hi)
    start = np.ones(lo.size, bool)
    start[1:] = lo[1:] > reach[:-1]
    first = np.flatnonzero(start)
    last = np.append(first[1:] - 1, lo.size - 1)
    return int(np.sum(reach[last] - lo[first] + 1))


def distinct_sectors(arrays, sector=SECTOR_BYTES) -> int:
    """Distinct ``sector``-byte sectors that hold at least one element of any of ``arrays`` (an
    array, an address tuple, or a list of them; shared sectors are counted once)."""
    if not isinstance(arrays, (list, tuple)) or (isinstance(arrays, tuple) and len(arrays) == 4
                                                 and isinstance(arrays[0], (int, np.integer))):
        arrays = [arrays]
    los, his = [], []
    for a in arrays:
        lo, hi = sector_intervals(a, sector)
        los.append(lo)
        his.append(hi)
    if not los:
        return 0
    return _union_length(np.concatenate(los), np.concatenate(his))


def min_sectors(inputs, outputs, sector=SECTOR_BYTES) -> int:
    """The minimum traffic of one call in sectors: each distinct sector holding an element read
    counted once, plus each distinct sector holding an element written counted once."""
    return distinct_sectors(inputs, sector) + distinct_sectors(outputs, sector)


# --------------------------------------------------------------------------------------------
# what the kernels did
# --------------------------------------------------------------------------------------------

def _field(obj, *names, default=None):
    for n in names:
        if isinstance(obj, dict) and n in obj:
            return obj[n]
        if hasattr(obj, n):
            return getattr(obj, n)
    return default


def _num(v):
    """A counter as an int: a number, or a dict / sequence of numbers (summed)."""
    if v is None:
        return 0
    if isinstance(v, dict):
        return sum(_num(x) for x in v.values())
    if isinstance(v, (list, tuple)):
        return sum(_num(x) for x in v)
    return int(v)


def launch_counters(launch) -> dict:
    """The counters of one launch record of ``cupyops.simt.record_traffic()``."""
    load = _num(_field(launch, "requested_bytes_load", "requested_load_bytes"))
    store = _num(_field(launch, "requested_bytes_store", "requested_store_bytes"))
    s_load = _field(launch, "sectors_load", "load_sectors")
    s_store = _field(launch, "sectors_store", "store_sectors")
    sectors = _field(launch, "sectors")
    if sectors is None:
        sectors = _num(s_load) + _num(s_store)
    unique = _field(launch, "unique_sectors")
    if unique is None:
        unique = _num(_field(launch, "unique_sectors_load")) + _num(_field(launch, "unique_sectors_store"))
    return {
        "kernel": str(_field(launch, "kernel", "name", "expr", default="?")),
        "grid": tuple(_field(launch, "grid", default=()) or ()),
        "block": tuple(_field(launch, "block", default=()) or ()),
        "requested_bytes_load": load,
        "requested_bytes_store": store,
        "sectors": _num(sectors),
        "sectors_load": None if s_load is None else _num(s_load),
        "sectors_store": None if s_store is None else _num(s_store),
        "unique_sectors": _num(unique),
    }


def summarize_launches(launches) -> dict:
    """Totals over the launches of one call."""
    per = [launch_counters(l) for l in launches]
    req_load = sum(p["requested_bytes_load"] for p in per)
    req_store = sum(p["requested_bytes_store"] for p in per)

    def split(key):
        vals = [p[key] for p in per]
        return None if any(v is None for v in vals) else sum(vals)
    return {
        "launches": len(per),
        "kernels": [p["kernel"] for p in per],
        "per_launch": per,
        "requested_bytes_load": req_load,
        "requested_bytes_store": req_store,
        "requested_bytes": req_load + req_store,
        "sectors": sum(p["sectors"] for p in per),
        "sectors_load": split("sectors_load"),
        "sectors_store": split("sectors_store"),
        "unique_sectors": sum(p["unique_sectors"] for p in per),
    }


def model_seconds(sectors: int, launches: int, device=None) -> float:
    """Modelled time on ``device`` (a :class:`~cupyops.bench.device_model.DeviceSpec` or a
    preset's name; default the H100): sector bytes at its copy bandwidth (3.0 TB/s) plus its
    launch time (3 µs) per launch."""
    dev = _device.from_name(device)
    return sectors * SECTOR_BYTES / dev.copy_bandwidth + launches * dev.launch_s


def goal_for(op: str, case: str) -> float | None:
    """The sectors_ratio goal of a benchmark case, or None where the issue sets none."""
    if op in ("argmax", "argmin"):
        return GOALS["argreduce"]
    if op == "hardmax":
        return GOALS["hardmax"]
    if op.startswith("segment_"):
        return GOALS["segment"]
    if op == "nonzero_coordinates" and "size=n" in case:
        return GOALS["nonzero_size"] if "d=0.5" in case else None
    if op in ("argwhere", "nonzero") or (op == "nonzero_coordinates" and "size=None" in case):
        return GOALS["nonzero_exact"]
    return None


def traffic_fields(launches, inputs, outputs, *, op: str = "", case: str = "",
                   device=None) -> dict:
    """The traffic figures of one call: counters of its launches against the minimum of its
    input and output arrays; the modelled times on ``device`` (default the H100)."""
    s = summarize_launches(launches)
    minimum = min_sectors(inputs, outputs)
    sector_bytes = s["sectors"] * SECTOR_BYTES
    goal = goal_for(op, case)
    ratio = s["sectors"] / minimum if minimum else (math.inf if s["sectors"] else 1.0)
    return {
        "launches": s["launches"],
        "kernels": s["kernels"],
        "per_launch": s["per_launch"],
        "requested_bytes": s["requested_bytes"],
        "requested_bytes_load": s["requested_bytes_load"],
        "requested_bytes_store": s["requested_bytes_store"],
        "sectors": s["sectors"],
        "sector_bytes": sector_bytes,
        "sectors_load": s["sectors_load"],
        "sectors_store": s["sectors_store"],
        "min_sectors_load": distinct_sectors(inputs),
        "min_sectors_store": distinct_sectors(outputs),
        "unique_sectors": s["unique_sectors"],
        "min_sectors": minimum,
        "sectors_ratio": ratio,
        "coalescing": s["requested_bytes"] / sector_bytes if sector_bytes else None,
        "model_seconds": model_seconds(s["sectors"], s["launches"], device),
        "model_min_seconds": model_seconds(minimum, 1, device),
        "goal": goal,
        "goal_met": None if goal is None else bool(ratio <= goal),
    }
