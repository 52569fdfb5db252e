"""Record every kernel launch of a sweep on simt, as text, to compare two versions byte for byte.

``python tests/launch_sweep.py OUT.txt`` runs every public op over every input dtype, layout
case (C, F, sliced, negative, broadcast, permuted, 0-d, empty, odd sizes), axes, tie, index
dtype and plan case (row, column, general, split, decode; exact and fixed-size nonzero) under
``cupyops.testing.dry_run`` (nothing is compiled or run) and writes one line per call: the call,
then each launch's kernel, grid, block, shared memory and arguments (buffers by shape, strides
and dtype; parameter structs by their bytes). Inputs sit at fixed alignments, so two runs of
the same code write the same file. Only the public API, ``cupyops.testing`` and the argreduce
planner's test options are used, so a reshape of the package keeps this script valid.
"""
from __future__ import annotations

import hashlib
import importlib
import sys

import numpy as np

import cupyops
from cupyops.testing import dry_run, force_64bit, recording

try:
    import ml_dtypes
    BF16 = [np.dtype(ml_dtypes.bfloat16)]
except ImportError:  # pragma: no cover
    BF16 = []

DTYPES = [np.dtype(t) for t in ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16",
                                "uint32", "uint64", "float16", "float32", "float64",
                                "complex64", "complex128", "datetime64[s]",
                                "timedelta64[ms]")] + BF16


def _plan_options_holder():
    """The module whose PLAN_OPTIONS dict the argreduce planner reads (before and after the
    reshape)."""
    for name in ("cupyops.ops.argreduce.plan", "cupyops.ops.argreduce.launch",
                 "cupyops.ops.argreduce.launch"):
        try:
            mod = importlib.import_module(name)
        except ImportError:
            continue
        if hasattr(mod, "PLAN_OPTIONS"):
            return mod
    raise ImportError("no PLAN_OPTIONS found")


def aligned(a, align=4096, offset=0):
    """A C-contiguous copy of ``a`` whose data starts ``offset`` bytes past an ``align``
    boundary."""
    a = np.ascontiguousarray(a)
    raw = np.zeros(a.nbytes + align + offset + 16, np.uint8)
    start = (-raw.ctypes.data) % align + offset
    out = raw[start:start + a.nbytes].view(a.dtype).reshape(a.shape)
    out[...] = a
    return out


def values(shape, dtype, rng, density=0.5):
    n = int(np.prod(shape))
    ints = rng.integers(0, 3, n) * (rng.random(n) < density)
    dt = np.dtype(dtype)
    if dt.kind in "mM":
        return ints.astype(np.int64).astype(dt).reshape(shape)
    if dt.kind == "c":
        return (ints + 1j * rng.integers(0, 2, n)).astype(dt).reshape(shape)
    return ints.astype(dt).reshape(shape)


def layouts(dtype, rng):
    base = aligned(values((6, 5, 4), dtype, rng))
    big = aligned(values((9, 33, 40), dtype, rng))
    row = aligned(values((1, 1025), dtype, rng))
    out = {
        "C": base, "F": aligned(base.T).T, "sliced": base[1:5, ::2, 1:],
        "neg": base[::-1, :, ::-2], "perm": base.transpose(2, 0, 1),
        "bcast": np.broadcast_to(base[:, :1, :], (6, 7, 4)),
        "big": big, "bigT": big.transpose(1, 2, 0), "row": row, "rowT": row.T,
        "off4": aligned(values((3, 33), dtype, rng), offset=min(4, np.dtype(dtype).itemsize)),
    }
    for n in (1, 31, 32, 33, 1023, 1025):
        out[f"1d{n}"] = aligned(values((n,), dtype, rng))
    out["0d"] = aligned(values((), dtype, rng))
    out["empty"] = aligned(values((3, 0, 2), dtype, rng))
    return out


def describe(arg) -> str:
    if isinstance(arg, np.void):
        return "struct:" + bytes(arg.tobytes()).hex()
    if isinstance(arg, np.ndarray):
        return f"buf{arg.shape}{arg.strides}{arg.dtype.str}"
    if hasattr(arg, "__cuda_array_interface__"):
        return f"buf{arg.shape}{arg.strides}{arg.dtype.str}"
    return f"{type(arg).__name__}:{arg!r}"


def record(lines, label, fn):
    with recording(args=True) as trace, dry_run(count=7):
        try:
            fn()
            status = "ok"
        except Exception as exc:  # noqa: BLE001 - the error is part of the record
            status = f"{type(exc).__name__}: {exc}"
    parts = [label, status]
    for (expr, grid, block, smem), args in zip(trace.launches, trace.launch_args):
        parts.append(f"{expr} {grid} {block} {smem} [{', '.join(map(describe, args))}]")
    lines.append(" | ".join(parts))


def sweep_argreduce(lines, rng, tag):
    for dt in DTYPES:
        for lname, x in layouts(dt, rng).items():
            axes = [None, 0, -1, (0, 2), ()] if x.ndim >= 3 else [None, 0, -1, ()]
            for axis in axes:
                for tie in ("first", "last"):
                    lab = f"{tag} {dt} {lname} axis={axis} tie={tie}"
                    record(lines, f"argmax {lab}", lambda: cupyops.argmax(
                        x, axis=axis, tie=tie, device="simt"))
                    record(lines, f"argmin {lab} int8", lambda: cupyops.argmin(
                        x, axis=axis, tie=tie, dtype="int32", keepdims=True, device="simt"))
                    if dt.kind not in "mM":
                        record(lines, f"hardmax {lab}", lambda: cupyops.hardmax(
                            x, axis=axis, tie=tie, device="simt"))
                if dt.kind in "fcV":
                    record(lines, f"nanargmax {tag} {dt} {lname} axis={axis}",
                           lambda: cupyops.nanargmin(x, axis=axis, device="simt"))


def sweep_nonzero(lines, rng, tag):
    for dt in DTYPES:
        for lname, x in layouts(dt, rng).items():
            lab = f"{tag} {dt} {lname}"
            record(lines, f"argwhere {lab}", lambda: cupyops.argwhere(x, dtype="int32",
                                                                      device="simt"))
            record(lines, f"nonzero {lab}", lambda: cupyops.nonzero(x, device="simt"))
            record(lines, f"coords exact {lab}", lambda: cupyops.nonzero_coordinates(
                x, dtype="uint32", device="simt"))
            record(lines, f"coords size {lab}", lambda: cupyops.nonzero_coordinates(
                x, size=50, fill_value=-1, device="simt"))
            for axis in (None, 0, -1, (0, 2)):
                if axis == (0, 2) and x.ndim < 3:
                    continue
                record(lines, f"count {lab} axis={axis}", lambda: cupyops.count_nonzero(
                    x, axis=axis, device="simt"))


def sweep_large(lines, rng, tag):
    """Default plan options on shapes that reach the split and decode plans."""
    shapes = [(1, 131072), (8, 131072), (4, 1 << 20), (1 << 20, 4), (3, 300_001)]
    for dt in (np.dtype("uint8"), np.dtype("float32"), np.dtype("float64")):
        for shape in shapes:
            x = aligned(values(shape, dt, rng, 0.1))
            for axis in (None, 0, 1):
                lab = f"{tag} {dt} {shape} axis={axis}"
                record(lines, f"argmax {lab}", lambda: cupyops.argmax(x, axis=axis,
                                                                      device="simt"))
                record(lines, f"hardmax {lab}", lambda: cupyops.hardmax(
                    x, axis=axis, tie="last", device="simt"))
                record(lines, f"count {lab}", lambda: cupyops.count_nonzero(x, axis=axis,
                                                                            device="simt"))
            record(lines, f"argwhere {lab}", lambda: cupyops.argwhere(x, device="simt"))
            record(lines, f"coords {lab}", lambda: cupyops.nonzero_coordinates(
                x, size=1000, device="simt"))


SPLIT_SMALL = {"min_split_elements": 0, "min_work_per_thread": 1, "min_block_team_vecs": 64,
               "min_scratch_ratio": 0}
DECODE_SMALL = {"min_split_elements": 0, "min_block_team_vecs": 1, "min_decode_block_vecs": 1}


def main(path):
    holder = _plan_options_holder()
    saved = dict(holder.PLAN_OPTIONS)
    lines: list = []
    try:
        for opts_name, opts in (("default", {}), ("split", SPLIT_SMALL),
                                ("decode", DECODE_SMALL)):
            holder.PLAN_OPTIONS.clear()
            holder.PLAN_OPTIONS.update(opts)
            for wide in (False, True):
                rng = np.random.default_rng(1234)
                tag = f"[{opts_name} 64bit={wide}]"
                with force_64bit(wide):
                    sweep_argreduce(lines, rng, tag)
                    if opts_name == "default":
                        sweep_nonzero(lines, rng, tag)
                        sweep_large(lines, rng, tag)
    finally:
        holder.PLAN_OPTIONS.clear()
        holder.PLAN_OPTIONS.update(saved)
    text = "\n".join(lines) + "\n"
    with open(path, "w") as f:
        f.write(text)
    digest = hashlib.sha256(text.encode()).hexdigest()
    launches = sum(line.count(" | ") - 1 for line in lines)
    print(f"{len(lines)} calls, {launches} launches, sha256 {digest}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "launches.txt")
