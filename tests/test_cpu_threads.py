"""The NumPy path on large inputs (issue 27): the cached road at any size, the thread pool
(cupyops.core.threads) and what it promises, read-only inputs read in place. Correctness
only: speed is the benchmark's (docs/performance.md)."""
from __future__ import annotations

import concurrent.futures
import os
import subprocess
import sys
import textwrap
import threading
import tracemalloc
import zlib

import numpy as np
import pytest

import cupyops
from cupyops import _call
from cupyops.core import placement as _placement
from cupyops.core import threads as T
from cupyops.ops.argreduce import numpy_blocks as B

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ref_argreduce import ref_argreduce, ref_hardmax  # noqa: E402


@pytest.fixture
def fine_threads(monkeypatch):
    """Threads for inputs of a few KiB (parts of 256 bytes up), never backing off."""
    monkeypatch.setattr(T, "MIN_BYTES", 1 << 12)
    monkeypatch.setattr(T, "PART_BYTES", 1 << 8)
    monkeypatch.setattr(T, "TAIL_BYTES", 1 << 8)
    monkeypatch.setattr(T, "BUSY_SECONDS", 0.0)
    # a back-off an earlier test's calls started (a loaded machine) must not reach this one
    monkeypatch.setattr(T._state, "busy_until", 0.0)
    # every large call on the threads (a Choice would run some on one thread: timing)
    monkeypatch.setattr(T, "MEASURE", False)
    old = T._state.setting
    T.set_num_threads(2)
    yield
    T._state.setting = old


@pytest.fixture
def spy_parts(monkeypatch):
    """[(threads, number of parts)] of every cupyops.core.threads.run_parts call."""
    seen = []
    real = T.run_parts

    def run_parts(fn, parts, threads):
        parts = list(parts)
        seen.append((threads, len(parts)))
        return real(fn, parts, threads)
    monkeypatch.setattr(T, "run_parts", run_parts)
    return seen


# ------------------------------------------------------------------------------ the setting

def test_the_setting(monkeypatch):
    """set_num_threads wins over CUPYOPS_NUM_THREADS (read at import: tests/test_thread_bounds.py
    runs fresh processes for it), which wins over the usable cores."""
    monkeypatch.setattr(T._state, "env_value", None)
    assert "set_num_threads" in cupyops.__all__ and "get_num_threads" in cupyops.__all__
    old = T._state.setting
    try:
        cupyops.set_num_threads(None)
        assert cupyops.get_num_threads() == len(os.sched_getaffinity(0))
        monkeypatch.setattr(T._state, "env_value", 1)
        assert cupyops.get_num_threads() == 1
        monkeypatch.setattr(T._state, "env_value", 3)
        assert cupyops.get_num_threads() == 3
        cupyops.set_num_threads(2)                 # the call wins over the environment
        assert cupyops.get_num_threads() == 2
        cupyops.set_num_threads(np.int64(4))
        assert cupyops.get_num_threads() == 4
        cupyops.set_num_threads(None)
        assert cupyops.get_num_threads() == 3
        for bad, exc in ((0, ValueError), (-1, ValueError), ("2", TypeError), (True, TypeError),
                         (2.0, TypeError)):
            with pytest.raises(exc, match="set_num_threads"):
                cupyops.set_num_threads(bad)
    finally:
        T._state.setting = old


def test_one_thread_off_the_main_thread_and_inside_single_thread(fine_threads, spy_parts):
    x = np.random.default_rng(0).random((256, 256)).astype(np.float32)
    want = np.argmax(x, axis=1)
    assert cupyops.get_num_threads() == 2
    with concurrent.futures.ThreadPoolExecutor(2) as ex:
        assert ex.submit(cupyops.get_num_threads).result() == 1
        got = ex.submit(cupyops.argmax, x, axis=1).result()
    np.testing.assert_array_equal(got, want)
    with T.single_thread():
        assert cupyops.get_num_threads() == 1
        np.testing.assert_array_equal(cupyops.argmin(x, axis=0), np.argmin(x, axis=0))
    assert all(t == 1 for t, _ in spy_parts), spy_parts
    np.testing.assert_array_equal(cupyops.argmin(x, axis=0), np.argmin(x, axis=0))
    assert any(t == 2 for t, _ in spy_parts)           # (the spy sees threads when used)


def test_dask_chunks_run_on_one_thread(fine_threads, spy_parts):
    da = pytest.importorskip("dask.array")
    import dask
    a = np.random.default_rng(1).random((512, 256)).astype(np.float32)
    x = da.from_array(a, chunks=(256, 256))
    for scheduler in ("sync", "threads"):
        spy_parts.clear()
        with dask.config.set(scheduler=scheduler):
            np.testing.assert_array_equal(cupyops.argmax(x, axis=1).compute(),
                                          np.argmax(a, axis=1))
            np.testing.assert_array_equal(cupyops.argwhere(x > 0.5).compute(),
                                          np.argwhere(a > 0.5))
            assert int(cupyops.count_nonzero(x > 0.5).compute()) == np.count_nonzero(a > 0.5)
        assert spy_parts and all(t == 1 for t, _ in spy_parts), (scheduler, spy_parts)


_FORK_SCRIPT = textwrap.dedent("""
    import os, sys, threading
    import numpy as np
    import cupyops
    from cupyops.core import threads as T
    T.MIN_BYTES, T.PART_BYTES, T.TAIL_BYTES, T.BUSY_SECONDS = 1 << 12, 1 << 8, 1 << 8, 0.0
    cupyops.set_num_threads(2)
    def workers():
        return [t for t in threading.enumerate() if t.name.startswith("cupyops-worker")]
    x = np.random.default_rng(0).random((512, 512)).astype(np.float32)
    small = x[:2, :2].copy()
    cupyops.argmax(small, axis=1)
    assert not workers(), "the pool started for a small input"
    assert (cupyops.argmax(x, axis=1) == np.argmax(x, axis=1)).all()
    assert len(workers()) == 1, workers()
    pid = os.fork()
    if pid == 0:
        ok = not workers()                              # threads do not survive a fork
        ok &= bool((cupyops.argmin(x, axis=0) == np.argmin(x, axis=0)).all())
        ok &= len(workers()) == 1 and cupyops.get_num_threads() == 2
        os._exit(0 if ok else 3)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, status
    assert (cupyops.argmax(x, tie="last") == x.size - 1 - np.argmax(x.reshape(-1)[::-1]))
    print("ok")
""")


def test_the_pool_starts_lazily_and_survives_fork():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.path.dirname(os.path.dirname(cupyops.__file__))] +
        [p for p in [os.environ.get("PYTHONPATH")] if p]))
    env.pop("CUPYOPS_NUM_THREADS", None)
    p = subprocess.run([sys.executable, "-c", _FORK_SCRIPT], env=env, capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0 and p.stdout.strip() == "ok", p.stderr[-2000:]


def test_a_busy_machine_falls_back_to_one_thread(monkeypatch):
    """A call whose workers ran less than half their share makes the next calls run on one
    thread for BUSY_SECONDS, then the pool is tried again."""
    monkeypatch.setattr(T, "MIN_BYTES", 1 << 12)
    monkeypatch.setattr(T, "PART_BYTES", 1 << 8)
    monkeypatch.setattr(T, "TAIL_BYTES", 1 << 8)
    clock = [100.0]
    monkeypatch.setattr(T, "_monotonic", lambda: clock[0])
    old, T._state.busy_until = T._state.busy_until, 0.0
    T.set_num_threads(2)
    try:
        gate = threading.Event()
        T._ensure_workers(1)
        T._state.workers[0].put(gate.wait)               # the worker is busy elsewhere
        T.run_parts(lambda p: p, range(8), 2)
        gate.set()
        assert T._state.busy_until == 100.0 + T.BUSY_SECONDS
        assert T.threads_for(1 << 20) == 1
        clock[0] += T.BUSY_SECONDS + 0.01
        assert T.threads_for(1 << 20) == 2
    finally:
        T._state.busy_until = old
        T._state.setting = None


# ------------------------------------------------------------------------------ same answers

def _data(rng, dtype, shape, mode):
    n = int(np.prod(shape))
    dt = np.dtype(dtype)
    if dt == np.bool_:
        v = rng.random(n) < (0.5 if mode == "ties" else 0.001)
    elif dt.kind in "iu":
        info = np.iinfo(dt)
        v = rng.integers(info.min, info.max, n, endpoint=True, dtype=dt) if mode == "nan" \
            else rng.integers(0, 3, n).astype(dt)
    elif dt.kind == "c":
        # ties on the real part decided by the imaginary one; NaN in either part
        re, im = (np.where(p == 0, rng.choice([0.0, -0.0], n), p)
                  for p in (rng.integers(-1, 2, n).astype(np.float64) for _ in range(2)))
        if mode == "nan":
            re[rng.random(n) < 0.15] = np.nan
            im[rng.random(n) < 0.15] = np.nan
        v = (re + 1j * im).astype(dt)
        v.real, v.imag = re, im           # (re + 1j * im: NaN in one part spoils the other)
    else:
        v = rng.integers(-1, 2, n).astype(np.float64)
        if mode == "nan":
            v[rng.random(n) < 0.3] = np.nan
        v = np.where(v == 0, rng.choice([0.0, -0.0], n), v).astype(dt)
    return v.reshape(shape)


LAYOUTS = [((64, 96), (1,)), ((64, 96), (0,)), ((64, 96), (0, 1)), ((8, 24, 16, 4), (1, 2)),
           ((6, 40, 32), (1,)), ((4, 2, 3000), (2,)), ((3, 1, 4000), (0, 1, 2))]


@pytest.mark.parametrize("dtype", ["float32", "float16", "int8", "uint16", "bool", "float64",
                                   "complex64", "complex128"])
@pytest.mark.parametrize("mode", ["ties", "nan"])
def test_threads_give_the_single_thread_answer(fine_threads, spy_parts, dtype, mode):
    """Tie-heavy and NaN-heavy inputs split among two threads (parts of a few hundred bytes)
    answer as on one thread and as the reference, for every op and layout."""
    rng = np.random.default_rng(zlib.crc32(f"{dtype} {mode}".encode()))
    for shape, axes in LAYOUTS:
        x = _data(rng, dtype, shape, mode)
        axis = axes if len(axes) > 1 else axes[0]
        calls = [(f, dict(axis=axis, tie=tie)) for f in (cupyops.argmax, cupyops.argmin)
                 for tie in ("first", "last")]
        calls += [(cupyops.hardmax, dict(axis=axis, tie=tie)) for tie in ("first", "last")]
        calls += [(cupyops.count_nonzero, {}), (cupyops.argwhere, {}), (cupyops.nonzero, {}),
                  (cupyops.nonzero_coordinates, dict(size=x.size // 3, fill_value=-1))]
        for f, kw in calls:
            T.set_num_threads(1)
            one = f(x, **kw)
            T.set_num_threads(2)
            two = f(x, **kw)
            for a, b in zip(one if isinstance(one, tuple) else (one,),
                            two if isinstance(two, tuple) else (two,)):
                np.testing.assert_array_equal(a, b, err_msg=f"{f.__name__} {shape} {kw}")
                assert a.dtype == b.dtype and a.shape == b.shape
            if f in (cupyops.argmax, cupyops.argmin):
                want = ref_argreduce(x, axes, "max" if f is cupyops.argmax else "min",
                                     kw["tie"]) if x.size <= 6144 else None
                if want is not None:
                    np.testing.assert_array_equal(two, want, err_msg=f"{f.__name__} {shape}")
            elif f is cupyops.hardmax and x.size <= 6144:
                np.testing.assert_array_equal(two, ref_hardmax(x, axes, kw["tie"]))
    assert any(t == 2 and n > 1 for t, n in spy_parts)


@pytest.mark.parametrize("dtype", ["float32", "float16", "int64", "complex64"])
def test_transposed_blocks_share_the_threads(fine_threads, spy_parts, monkeypatch, dtype):
    """Folds of narrow slabs copied transposed a block at a time (numpy_blocks._transposed,
    blocks of 256 values here) share the blocks among two threads: the answers of one thread
    and of the reference, both ties, ties and NaN, several blocks of rows a slab too."""
    monkeypatch.setattr(B, "CHUNK", 256)
    monkeypatch.setattr(B, "TRANSPOSE_BYTES", 1024)
    calls = []
    real = B._transposed
    monkeypatch.setattr(B, "_transposed", lambda V, *a: calls.append(V.shape) or real(V, *a))
    rng = np.random.default_rng(zlib.crc32(dtype.encode()))
    for shape in ((40, 30, 8), (9, 70, 5)):
        V = _data(rng, dtype, shape, "nan")
        for kind in ("max", "min"):
            for tie in ("first", "last"):
                keyed = 0x7C00 if dtype == "float16" else None
                T.set_num_threads(1)
                one = B.fold_arg(V, kind, tie, keyed)
                T.set_num_threads(2)
                spy_parts.clear()
                two = B.fold_arg(V, kind, tie, keyed)
                np.testing.assert_array_equal(two, one, err_msg=f"{shape} {kind} {tie}")
                np.testing.assert_array_equal(two, ref_argreduce(V, (1,), kind, tie))
                assert any(t == 2 and n > 1 for t, n in spy_parts), spy_parts
    assert calls


@pytest.mark.parametrize("dtype", ["float64", "int16", "uint32"])
def test_the_lookup_shares_the_threads(fine_threads, spy_parts, monkeypatch, dtype):
    """Tall slabs folded as one reduction and a lookup (numpy_blocks._fold_find) split their
    rows into ranges among two threads: the answers of one thread and of the reference (ties
    and NaN, extremes at range edges), both ties, argmax and argmin."""
    monkeypatch.setattr(B, "CHUNK", 1024)
    monkeypatch.setattr(B, "FOLD_MIN_BYTES", 0)
    monkeypatch.setattr(B, "FIND_MIN_ROWS", 4)
    calls = []
    real = B._fold_find
    monkeypatch.setattr(B, "_fold_find", lambda V, *a, **k: calls.append(k["rs"]) or
                        real(V, *a, **k))
    rng = np.random.default_rng(zlib.crc32(dtype.encode()))
    for shape in ((2, 1500, 3), (1, 4000, 2)):
        V = _data(rng, dtype, shape, "nan")
        for kind in ("max", "min"):
            for tie in ("first", "last"):
                T.set_num_threads(1)
                one = B.fold_arg(V, kind, tie)
                T.set_num_threads(2)
                spy_parts.clear()
                calls.clear()
                two = B.fold_arg(V, kind, tie)
                np.testing.assert_array_equal(two, one, err_msg=f"{shape} {kind} {tie}")
                np.testing.assert_array_equal(two, ref_argreduce(V, (1,), kind, tie))
                assert len(set(calls)) > 1 and any(t == 2 and n > 1 for t, n in spy_parts)


def test_tie_first_roads_with_a_one_thread_twin_run_on_the_threads(spy_parts, monkeypatch):
    """With ``MEASURE`` off, the layouts that have a one-thread road (NumPy's own argmax over
    every axis or over the rows, intp indices) run on the threads too: the tests that turn the
    measuring off reach their split code (it ran NumPy's routine on one thread before)."""
    monkeypatch.setattr(T, "BUSY_SECONDS", 0.0)
    monkeypatch.setattr(T._state, "busy_until", 0.0)
    monkeypatch.setattr(T, "MEASURE", False)
    x = np.random.default_rng(3).integers(0, 4, (1024, 1024)).astype(np.float32)
    old = T._state.setting
    try:
        T.set_num_threads(2)
        for f, kw, ref in ((cupyops.argmax, {}, np.argmax(x)),
                           (cupyops.argmin, dict(axis=1), np.argmin(x, axis=1)),
                           (cupyops.argmax, dict(axis=1, keepdims=True),
                            np.argmax(x, axis=1, keepdims=True))):
            spy_parts.clear()
            got = f(x, **kw)
            np.testing.assert_array_equal(got, ref, err_msg=f"{f.__name__} {kw}")
            assert got.dtype == np.intp
            assert any(t == 2 and n > 1 for t, n in spy_parts), (f.__name__, kw, spy_parts)
    finally:
        T._state.setting = old


def test_threads_at_the_default_thresholds(spy_parts, monkeypatch):
    """4 MiB inputs on two threads with the real part sizes: the answers of one thread."""
    monkeypatch.setattr(T, "BUSY_SECONDS", 0.0)
    monkeypatch.setattr(T._state, "busy_until", 0.0)
    monkeypatch.setattr(T, "MEASURE", False)
    rng = np.random.default_rng(7)
    x = rng.integers(0, 4, (1024, 1024)).astype(np.float32)
    x[rng.random(x.shape) < 0.01] = np.nan
    m = rng.random((2048, 2048)) < 0.1
    x4 = rng.integers(-128, 128, (8, 256, 64, 16)).astype(np.int8)
    try:
        for f, a, kw in ((cupyops.argmax, x, dict(tie="last")), (cupyops.argmin, x, dict(axis=1)),
                         (cupyops.argmax, x, dict(axis=0, tie="last")),
                         (cupyops.argmax, x4, dict(axis=(1, 2))),
                         (cupyops.argmin, x4, dict(axis=(1, 2), tie="last")),
                         (cupyops.argmax, x4.astype(np.float16), dict(axis=1)),
                         (cupyops.argmax, m, {}), (cupyops.argmax, m, dict(tie="last")),
                         (cupyops.count_nonzero, x, {}), (cupyops.argwhere, m, {}),
                         (cupyops.nonzero_coordinates, m, dict(size=m.size))):
            T.set_num_threads(1)
            one = f(a, **kw)
            T.set_num_threads(2)
            two = f(a, **kw)
            for p, q in zip(one if isinstance(one, tuple) else (one,),
                            two if isinstance(two, tuple) else (two,)):
                np.testing.assert_array_equal(p, q, err_msg=f"{f.__name__} {kw}")
    finally:
        T.set_num_threads(None)
    assert any(t == 2 and n > 1 for t, n in spy_parts)


def test_bool_argmax_still_stops_early(fine_threads, monkeypatch):
    """A flat bool argmax (argmin) meets its first True (False) and stops; the threads read
    ranges that double, never the rest of the input; tie "last" searches from the end."""
    read = []
    real = dict(B._ARG)
    monkeypatch.setitem(B._ARG, "max", lambda a, *k, **kw: read.append(a.size) or
                        real["max"](a, *k, **kw))
    monkeypatch.setitem(B._ARG, "min", lambda a, *k, **kw: read.append(a.size) or
                        real["min"](a, *k, **kw))
    n = 1 << 24
    for pos in (3, B.BOOL_PROBE + 5, 3 * B.BOOL_PROBE):
        x = np.zeros(n, bool)
        x[pos] = True
        read.clear()
        assert int(cupyops.argmax(x)) == pos
        assert sum(read) <= 4 * (pos + B.BOOL_PROBE), (pos, sum(read))
        read.clear()
        assert int(cupyops.argmin(~x)) == pos
        assert sum(read) <= 4 * (pos + B.BOOL_PROBE), (pos, sum(read))
        read.clear()
        assert int(cupyops.argmax(x[::-1].copy(), tie="last")) == n - 1 - pos
        assert sum(read) <= 4 * (pos + B.CHUNK), (pos, sum(read))
    x = np.zeros(n, bool)
    assert int(cupyops.argmax(x)) == 0 and int(cupyops.argmax(x, tie="last")) == n - 1


# ------------------------------------------------------------------------------ the cached road

def test_large_inputs_take_the_cached_road(monkeypatch):
    """From the second call on, a large input's call goes through no argument rules or
    placement (the full road), for every public function."""
    rng = np.random.default_rng(3)
    x = rng.random((1024, 1024)).astype(np.float32)
    m = x > 0.9
    calls = [lambda: cupyops.argmax(x, axis=1), lambda: cupyops.argmin(x, axis=0, tie="last"),
             lambda: cupyops.nanargmax(x), lambda: cupyops.nanargmin(x, axis=1),
             lambda: cupyops.argmax(x.reshape(16, 64, 1024), axis=(1, 2)),
             lambda: cupyops.hardmax(x, axis=-1), lambda: cupyops.count_nonzero(m),
             lambda: cupyops.count_nonzero(m, axis=0), lambda: cupyops.argwhere(m),
             lambda: cupyops.nonzero(m), lambda: cupyops.nonzero_coordinates(m, size=10),
             lambda: cupyops.argmax(x, axis=1, device="cpu", keepdims=True, dtype=np.int32)]
    for call in calls:
        call()
    placed, looked = [], []
    real, real_lookup = _placement.place, _call.lookup
    monkeypatch.setattr(_placement, "place", lambda *a, **k: placed.append(1) or real(*a, **k))
    spy = lambda *a, **k: looked.append(a[5]) or real_lookup(*a, **k)  # noqa: E731
    for fn in _call.PUBLIC.values():   # each generated function binds the lookup it calls
        monkeypatch.setitem(fn.__globals__, "_lookup", spy)
    for call in calls:
        call()
    assert not placed
    # the public functions build the key inline, except for a tuple axis (the generic key)
    assert looked == [(1, 2)], looked


# ------------------------------------------------------------------------------ read-only inputs

def _read_only_inputs(tmp_path):
    rng = np.random.default_rng(9)
    base = rng.integers(-3, 4, (1024, 4096)).astype(np.float32)     # 16 MiB
    view = base.view()
    view.flags.writeable = False
    path = tmp_path / "x.bin"
    base.tofile(path)
    mm = np.memmap(path, dtype=np.float32, mode="r", shape=base.shape)
    fb = np.frombuffer(base.tobytes(), np.float32).reshape(base.shape)
    return base, {"read-only view": view, "memmap mode r": mm, "frombuffer": fb}


@pytest.mark.parametrize("threads", [1, 2])
def test_read_only_inputs_are_never_copied_whole(tmp_path, threads):
    base, inputs = _read_only_inputs(tmp_path)
    ops = [lambda a: cupyops.argmax(a, axis=-1), lambda a: cupyops.argmax(a),
           lambda a: cupyops.argmin(a, axis=-1, tie="last"), lambda a: cupyops.argmax(a, axis=0),
           lambda a: cupyops.argmin(a, tie="last"), lambda a: cupyops.nanargmax(a, axis=1),
           lambda a: cupyops.hardmax(a, axis=-1), lambda a: cupyops.count_nonzero(a),
           lambda a: cupyops.argwhere(a), lambda a: cupyops.nonzero(a),
           lambda a: cupyops.nonzero_coordinates(a, size=100)]
    T.set_num_threads(threads)
    try:
        wants = [op(base) for op in ops]
        for name, a in inputs.items():
            assert not a.flags.writeable
            for i, (op, want) in enumerate(zip(ops, wants)):
                for _ in range(2):                         # the first call and the cached one
                    tracemalloc.start()
                    try:
                        got = op(a)
                        peak = tracemalloc.get_traced_memory()[1]
                    finally:
                        tracemalloc.stop()
                    out = sum(r.nbytes for r in (got if isinstance(got, tuple) else (got,)))
                    assert peak - out <= a.nbytes // 8, (name, i, peak, out)
                for p, q in zip(got if isinstance(got, tuple) else (got,),
                                want if isinstance(want, tuple) else (want,)):
                    np.testing.assert_array_equal(p, q, err_msg=f"{name} op {i}")
            assert not a.flags.writeable
    finally:
        T.set_num_threads(None)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "int8", "float64"])
def test_many_short_rows_tie_last(dtype):
    """tie "last" over rows of 8 elements, many more rows than a chunk holds (the word search
    keys the candidate words of every row at once)."""
    from cupyops.core import dtypes as _dtypes
    dt = _dtypes.dtype() if dtype == "bfloat16" else np.dtype(dtype)
    if dt is None:
        pytest.skip("ml_dtypes is not installed")
    x = np.random.default_rng(5).integers(-1, 2, (40000, 8)).astype(np.float32)
    x[::7, 3] = np.nan if dt.kind in "fV" else 1
    xd = x.astype(dt)
    for f, g in ((cupyops.argmax, np.argmax), (cupyops.argmin, np.argmin)):
        want = 7 - g(xd.astype(np.float64)[:, ::-1], axis=1)
        for _ in range(2):
            np.testing.assert_array_equal(f(xd, axis=1, tie="last"), want)


@pytest.mark.parametrize("dtype", ["float32", "int8", "bool", "float16"])
def test_one_group_with_kept_axes_of_length_one(dtype):
    """A reduction whose only group is the whole input while kept axes of length 1 remain
    ((1, n) over the last axis, ...): the result has the kept shape (found by the selftest)."""
    rng = np.random.default_rng(6)
    for shape, axis in (((1, 131072), -1), ((1, 131072), 1), ((1, 1, 70000), 2),
                        ((70000, 1), 0), ((1, 70000, 1), (0, 1)), ((1, 5000), 1)):
        x = rng.integers(0, 5, shape).astype(dtype)
        for keepdims in (False, True):
            for f, g in ((cupyops.argmax, np.argmax), (cupyops.argmin, np.argmin)):
                for tie in ("first", "last"):
                    for _ in range(2):
                        got = f(x, axis=axis, keepdims=keepdims, tie=tie)
                        want_shape = np.zeros(shape, np.int8).sum(axis=axis,
                                                                  keepdims=keepdims).shape
                        assert got.shape == want_shape, (shape, axis, keepdims, tie)
                        if tie == "first" and not isinstance(axis, tuple):
                            np.testing.assert_array_equal(
                                got, g(x, axis=axis, keepdims=keepdims))


# ------------------------------------------------------------------------------ measured choice

def _timed_layout(monkeypatch, seconds):
    """A measured entry over 4 MiB whose calls take ``seconds(threads)`` on a fake clock, and
    the threads each call was given."""
    clock = [0.0]
    monkeypatch.setattr(T, "_perf", lambda: clock[0])
    monkeypatch.setattr(T._state, "busy_until", 0.0)
    given = []

    def entry(x, workspace):
        n = T.threads_for(4 << 20)
        given.append(n)
        clock[0] += seconds(n)
        if x == "raise":
            raise ValueError("inside the call")
        return n
    return T.measured(entry, 4 << 20), given


@pytest.mark.parametrize("threads_win", [True, False])
def test_a_layout_runs_the_way_that_has_been_faster(monkeypatch, threads_win):
    """Threads twice as fast: every call on them but the odd probe on one thread; twice as
    slow (a shared machine, many short NumPy calls): every call on one thread but the probes.
    The probes (two calls each) come after 4, 8, 16, 32 and then every 64 calls."""
    T.set_num_threads(2)
    try:
        fast, slow = (1.0, 2.0) if threads_win else (2.0, 1.0)
        entry, given = _timed_layout(monkeypatch, lambda n: fast if n > 1 else slow)
        for _ in range(300):
            entry(None, None)
        assert given[0] == 2 and given[1:3] == [1, 1]  # the threads first, then one thread
        # (twice: the first call of a way meets the other way's caches, untimed)
        other = [i for i, n in enumerate(given[2:], 2) if (n > 1) != threads_win]
        # probes of two calls after 4, 8, 16, 32 and every 64 calls: at most 9 in 300 calls
        assert len(other) <= 2 * 9, other
        assert not T._state.chosen_one
        assert entry.func is T._measured_call and T.measured(entry.args[0][2], 1 << 10) is \
            entry.args[0][2]                           # (small: the entry itself)
    finally:
        T.set_num_threads(None)


@pytest.mark.parametrize("threads_win", [True, False])
def test_a_settled_layout_times_one_call_in_four(monkeypatch, threads_win):
    """Once both ways are known, a timed call of the way chosen is followed by CHOICE_UNTIMED
    calls that read no clock (a large call's own cost has a goal of 1.5 µs; a timed call's
    clock and bookkeeping are about 0.5 µs), run the way chosen (one thread: the cap set for
    the call and lifted after it) and count towards the next probe."""
    T.set_num_threads(2)
    try:
        entry, given = _timed_layout(monkeypatch, lambda n: (1.0 if threads_win else 3.0)
                                     if n > 1 else 2.0)
        fake = T._perf
        reads = [0]

        def counted():
            reads[0] += 1
            return fake()
        monkeypatch.setattr(T, "_perf", counted)
        for _ in range(40):
            entry(None, None)
        reads[0], given[:] = 0, []
        for _ in range(400):
            entry(None, None)
            assert not T._state.chosen_one
        probes = sum(1 for i, n in enumerate(given) if (n > 1) != threads_win)
        assert probes <= 2 * 4                    # (every 64 calls, two calls each)
        # two reads a timed call: one call in CHOICE_UNTIMED + 1, and the probes' calls
        timed = 400 / (T.CHOICE_UNTIMED + 1) + 2 * probes
        assert 0 < reads[0] <= 2 * timed + 8, reads[0]
        assert given.count(2 if threads_win else 1) >= 400 - probes
    finally:
        T.set_num_threads(None)


def test_a_busy_machine_skips_the_choice(monkeypatch):
    """While the workers found no core (busy_until ahead: after a probe of slow threads, for
    BUSY_SECONDS), a large call runs on one thread without asking its Choice (no clock read,
    no thread question: about 0.17 us a call)."""
    T.set_num_threads(2)
    try:
        entry, given = _timed_layout(monkeypatch, lambda n: 1.0)
        monkeypatch.setattr(T._state, "busy_until", T._monotonic() + 3600.0)

        def no_start(self, nbytes):
            raise AssertionError("the Choice was asked on a busy machine")
        monkeypatch.setattr(T.Choice, "start", no_start)
        for _ in range(5):
            entry(None, None)
        assert given == [1] * 5 and not T._state.chosen_one
    finally:
        T.set_num_threads(None)


def test_a_layout_follows_the_machine(monkeypatch):
    """Threads fast, then (another job takes a core) slow: the layout turns to one thread
    within a few calls; back again once a probe finds the threads fast."""
    T.set_num_threads(2)
    try:
        speed = {"threads": 1.0}
        entry, given = _timed_layout(monkeypatch,
                                     lambda n: speed["threads"] if n > 1 else 1.5)
        for _ in range(40):
            entry(None, None)
        assert given[-10:].count(2) >= 8              # (a probe: two calls)
        speed["threads"] = 4.0
        for _ in range(10):
            entry(None, None)
        assert given[-5:] == [1] * 5
        speed["threads"] = 1.0
        for _ in range(70):                          # (the probes: every 64 calls at most)
            entry(None, None)
        assert given[-5:] == [2] * 5
    finally:
        T.set_num_threads(None)


def test_a_failed_call_leaves_no_cap_and_one_thread_asks_nothing(monkeypatch):
    T.set_num_threads(2)
    try:
        entry, given = _timed_layout(monkeypatch, lambda n: 2.0 if n > 1 else 1.0)
        entry(None, None)
        with pytest.raises(ValueError, match="inside the call"):
            entry("raise", None)                      # the second call: on one thread
        assert given == [2, 1] and not T._state.chosen_one and T.threads_for(4 << 20) == 2
        T.set_num_threads(1)
        for _ in range(5):
            entry(None, None)
        assert given[2:] == [1] * 5
        monkeypatch.setattr(T, "MEASURE", False)      # (tests that count parts)
        T.set_num_threads(2)
        for _ in range(5):
            entry(None, None)
        assert given[7:] == [2] * 5
    finally:
        T.set_num_threads(None)


def test_a_fast_layout_probes_by_time(monkeypatch):
    """Calls of 0.1 ms probe the other way at most once in CHOICE_PROBE_SECONDS, not every
    64 calls: the probes of a fast layout cost next to nothing."""
    T.set_num_threads(2)
    try:
        entry, given = _timed_layout(monkeypatch, lambda n: 2e-4 if n > 1 else 1e-4)
        for _ in range(2000):                          # 0.2 s of calls
            entry(None, None)
        probes = given[2:].count(2) / 2                # (two calls a probe)
        assert 1 <= probes <= 0.2 / T.CHOICE_PROBE_SECONDS + 1, probes
    finally:
        T.set_num_threads(None)


def test_threads_must_win_by_the_margin_and_a_probe_warms_up(monkeypatch):
    """Threads 2 % faster than one thread (within CHOICE_MARGIN): one thread. A probe's first
    call is not timed: the first call on one thread after the threads ran (its caches cold,
    the data in the other core's) decides nothing."""
    T.set_num_threads(2)
    try:
        entry, given = _timed_layout(monkeypatch, lambda n: 0.98 if n > 1 else 1.0)
        for _ in range(100):
            entry(None, None)
        assert given[-10:].count(1) >= 8
        monkeypatch.setattr(T, "CHOICE_PROBE_SECONDS", 0.0)
        last = [2]

        def seconds(n):
            cold = n == 1 and last[0] > 1
            last[0] = n
            return 10.0 if cold else (0.7 if n == 1 else 1.0)
        entry, given = _timed_layout(monkeypatch, seconds)
        for _ in range(30):
            entry(None, None)
        # a call the other way than the one before (cold: 10 s) is not timed, the warm one
        # after it (0.7 s) is: one thread from the third call on, but for the probes
        assert given[:3] == [2, 1, 1] and given[-10:].count(1) >= 8, str(given)
    finally:
        T.set_num_threads(None)


def test_probes_cost_a_bounded_share(monkeypatch):
    """A probe (two calls the slower way) comes no sooner than CHOICE_PROBE_SHARE times its
    cost: threads 10 ms slower than one thread's 10 ms probe at most every 4 s of calls."""
    T.set_num_threads(2)
    try:
        entry, given = _timed_layout(monkeypatch, lambda n: 0.020 if n > 1 else 0.010)
        for _ in range(2000):                          # 20 s of calls
            entry(None, None)
        probes = given[3:].count(2) / 2
        gap = T.CHOICE_PROBE_SHARE * 0.010
        assert 1 <= probes <= 20.0 / gap + 1, probes
        assert sum(0.020 if n > 1 else 0.010 for n in given) <= 1.01 * 0.010 * len(given) + 0.1
    finally:
        T.set_num_threads(None)


def test_segment_calls_run_the_way_that_has_been_faster(monkeypatch):
    """segment_argmax's NumPy path is measured as argmax's layouts are (threads_check: long
    segments, a Python loop over them, ran at 0.64x one thread on two): with the threads slower
    on a fake clock, the later calls of a large layout run their pieces on one thread but the
    probes, with results unchanged; offsets take the entry's third argument."""
    T.set_num_threads(2)
    monkeypatch.setattr(T._state, "busy_until", 0.0)
    monkeypatch.setattr(T, "BUSY_SECONDS", 0.0)      # (a busy machine's back-off: not here)
    clock = [0.0]
    monkeypatch.setattr(T, "_perf", lambda: clock[0])
    given = []
    real = T.run_parts

    def run_parts(fn, parts, threads):
        given.append(threads)
        clock[0] += 2.0 if threads > 1 else 1.0
        return real(fn, parts, threads)
    monkeypatch.setattr(T, "run_parts", run_parts)
    try:
        rng = np.random.default_rng(3)
        x = rng.integers(0, 4, T.MIN_BYTES // 4 + 4096).astype(np.float32)
        offsets = np.array([0, 5000, 70000, len(x) - 9, len(x)])
        want = [int(offsets[s] + np.argmax(x[offsets[s]:offsets[s + 1]])) for s in range(4)]
        for _ in range(40):
            assert cupyops.segment_argmax(x, offsets, device="cpu").tolist() == want
        assert given[0] == 2 and given[1] == 2           # the first call, then the threads'
        assert given[-10:].count(1) >= 8, given          # then one thread (a probe: two calls)
    finally:
        T.set_num_threads(None)
