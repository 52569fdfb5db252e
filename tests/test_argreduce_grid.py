"""Few-group argmin / argmax / hardmax plans keep the SMs busy (issue 26 P4): every plan that
reads at least 64 KiB launches at least min(SM count, bytes / 16 KiB) blocks for the pass that
reads the input. Grids come from cupyops.testing's dry run (the launch code plans and packs as
usual, nothing compiles); results of a few such plans are checked against NumPy on simt, and
hardmax's one-launch form (every block zeroes its share of the one-hot, the last block writes
the 1) under several schedules."""
import math

import numpy as np
import pytest

import cupyops
from cupyops import simt
from cupyops.core import trace as _trace
from cupyops.core.backend import get_backend
from cupyops.ops.argreduce import launch as G
from cupyops.ops.argreduce.plan import busy_blocks
from cupyops.testing import dry_run

BE = get_backend("simt")
SM = BE.props.sm_count            # the planner's device properties (simt: an H100's 132)
DTYPES = [np.dtype(t) for t in ("bool", "uint8", "int8", "int16", "float16", "int32", "float32",
                                "float64", "int64", "complex64", "complex128", "datetime64[s]")]
BYTES = [64 << 10, 96 << 10, 256 << 10, 1 << 20, 4 << 20]
OPS = ("argmax", "argmin", "nanargmax", "hardmax")


def shapes(nbytes, itemsize):
    """(shape, axis) of the single- and few-group layouts reading about ``nbytes``."""
    n = nbytes // itemsize
    return [((1, n), 1), ((n, 1), 0), ((n,), 0), ((3, n // 3), 1), ((n // 3, 3), 0),
            ((n,), None), ((7, n // 7), 1)]


def reading_grid(op, x, axis):
    """The grid of the first launch of ``op`` (the one that reads x), from a dry run."""
    if op == "hardmax" and x.dtype.kind == "M":
        return None
    with dry_run() as rec:
        getattr(cupyops, op)(x, axis=axis, device="simt")
    assert rec.launches, op
    return rec.launches[0][1]


def test_the_floor():
    assert SM == 132
    assert busy_blocks(64 << 10, SM) == 4 and busy_blocks(4 << 20, SM) == SM
    assert busy_blocks(16 << 10, SM) == 0
    assert busy_blocks(1 << 30, 8) == 8


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_reading_pass_fills_the_sms(dtype):
    misses = []
    for nbytes in BYTES:
        for shape, axis in shapes(nbytes, dtype.itemsize):
            x = np.zeros(shape, dtype)
            need = min(SM, x.nbytes // 16384) if x.nbytes >= 65536 else 0
            for op in OPS:
                if op == "nanargmax" and dtype.kind not in "fc":
                    continue
                grid = reading_grid(op, x, axis)
                if grid is not None and math.prod(grid) < need:
                    misses.append((op, shape, axis, grid, need))
    assert not misses, misses


def test_issue_examples():
    for shape, dt, op, want in (((1, 262144), np.uint8, "argmax", 16),
                                ((1, 66560), np.float32, "argmin", 16),
                                ((1, 32768), np.float64, "argmax", 16),
                                ((1, 262144), np.float32, "hardmax", 64),
                                ((1, 1 << 20), np.float32, "hardmax", SM)):
        grid = reading_grid(op, np.zeros(shape, dt), 1)
        assert math.prod(grid) >= want, (shape, dt, op, grid)


def _values(rng, shape, dtype):
    """Few distinct values (ties across blocks), NaNs in floats."""
    v = rng.integers(0, 5, shape)
    if dtype.kind == "b":
        return (v > 3)
    x = v.astype(dtype)
    if dtype.kind in "fc":
        x[rng.random(shape) < 0.001] = np.nan
    return x


@pytest.mark.parametrize("case", [((1, 16384), 1, "float32"), ((3, 16384), 1, "uint8"),
                                  ((16384,), 0, "float64"), ((8192, 3), 0, "float16"), ((6144, 3), 0, "float32"),
                                  ((1, 12288), 1, "complex64"), ((24576, 1), 0, "int16")],
                         ids=str)
def test_results_match_numpy(case):
    shape, axis, dt = case
    dt = np.dtype(dt)
    rng = np.random.default_rng(26)
    x = _values(rng, shape, dt)
    assert x.nbytes >= 32768
    for op in ("argmax", "argmin"):
        with _trace.recording() as t:
            r = getattr(cupyops, op)(x, axis=axis, device="simt")
        assert math.prod(t.launches[0][1]) >= busy_blocks(x.nbytes, SM) > 1, t.launches
        np.testing.assert_array_equal(r, getattr(np, op)(x, axis=axis), err_msg=op)
        # tie "last": the first winner of the reversed group
        r = G.argreduce(BE, x, (axis,), kind=op[3:], tie="last", index_dtype=np.dtype(np.int64))
        want = x.shape[axis] - 1 - getattr(np, op)(np.flip(x, axis), axis=axis)
        np.testing.assert_array_equal(r, want, err_msg=op + " last")
    with _trace.recording() as t:
        h = cupyops.hardmax(x, axis=axis, device="simt")
    assert math.prod(t.launches[0][1]) >= busy_blocks(x.nbytes, SM) > 1, t.launches
    idx = np.expand_dims(np.argmax(x, axis=axis), axis)
    want = np.zeros_like(x)
    np.put_along_axis(want, idx, 1, axis=axis)
    np.testing.assert_array_equal(h, want)


@pytest.mark.parametrize("schedule", ("forward", "reverse", 7, 99), ids=str)
def test_hardmax_one_launch_under_schedules(schedule):
    """The one-launch hardmax: every block writes its zeros, the last block the 1, whichever
    block is last; ties between blocks; an output that held garbage is fully written."""
    rng = np.random.default_rng(5)
    x = rng.integers(0, 3, (2, 12288)).astype(np.float32)
    x[0, 100] = x[0, 12000] = 7.0        # a tie across blocks
    with simt.schedule(schedule):
        for tie in ("first", "last"):
            out = np.full(x.shape, 5.0, np.float32)
            with _trace.recording() as t:
                G.hardmax(BE, x, (1,), tie=tie, out=out)
            plan = t.plans[0]
            assert plan.case == "decode" and plan.passes == 1 and len(t.launches) == 1
            idx = np.argmax(x if tie == "first" else x[:, ::-1], axis=1)
            if tie == "last":
                idx = x.shape[1] - 1 - idx
            want = np.zeros_like(x)
            want[np.arange(2), idx] = 1
            np.testing.assert_array_equal(out, want, err_msg=tie)
