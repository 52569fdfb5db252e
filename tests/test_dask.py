"""Dask arrays in, lazy Dask arrays out (issue 16): every operator, on dask's threaded scheduler
and on a real dask.distributed LocalCluster with 2 worker processes.

Each result is checked against the single-array cupyops call on the computed array (shape,
dtype, values, or the same error) and against an independent reference (tests/ref_argreduce.py's
brute force, NumPy's argwhere / nonzero / count_nonzero). Arrays are small, with values from tiny
sets so that ties, NaN and -0.0 happen, and chunkings are odd (size-1 chunks, uneven cuts).
"""
import os
import re
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")

import cupyops  # noqa: E402
from ref_argreduce import ref_argreduce, ref_hardmax  # noqa: E402
from strategies import COMPLEX_DTYPES, DATETIME_DTYPES, REAL_DTYPES, arrays, axis_args  # noqa: E402
from _devices import KERNEL_DEVICES, device_kw, host, is_cupy, to_device  # noqa: E402

ALL_DTYPES = REAL_DTYPES + COMPLEX_DTYPES + DATETIME_DTYPES
ARG_OPS = ["argmax", "argmin", "nanargmax", "nanargmin"]
INDEX_DTYPES = ["int64", "int32", "uint32", "uint64", "int8", "int16", "uint8", "uint16"]
COORD_DTYPES = ["int64", "int32", "uint32", "uint64"]

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


# --------------------------------------------------------------------------------------------
# the cluster: 2 worker processes, started once for this module from a temporary directory, with
# the test process's own sys.path entries (the checkout, tests/) kept out of the workers' path


_PROBE = """
def where_cupyops():
    import os
    import site
    import sys

    import cupyops
    f = os.path.realpath(cupyops.__file__)
    parent = os.path.dirname(os.path.dirname(f))
    path = [os.path.realpath(p or os.getcwd()) for p in sys.path]
    return {"file": f, "exists": os.path.isfile(f), "cwd": os.getcwd(),
            "parent_on_path": parent in path, "tests_on_path": TESTS in path,
            "site": [os.path.realpath(p) for p in site.getsitepackages()],
            "pythonpath": [os.path.realpath(p) for p in
                           os.environ.get("PYTHONPATH", "").split(os.pathsep) if p],
            "pid": os.getpid()}
"""


def _where_cupyops():
    """A probe the workers run: where cupyops came from. Defined outside any importable module
    (the workers cannot import tests/), so that cloudpickle ships it by value."""
    ns = {"__name__": "cupyops_test_probe", "TESTS": os.path.realpath(HERE)}
    exec(_PROBE, ns)
    return ns["where_cupyops"]


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    distributed = pytest.importorskip("distributed")
    import multiprocessing.process as mpp
    cwd = tmp_path_factory.mktemp("dask_workers_cwd")
    old_cwd, old_path, old_orig = os.getcwd(), list(sys.path), mpp.ORIGINAL_DIR
    drop = {os.path.realpath(p) for p in (REPO, HERE, old_cwd)}
    try:
        # spawned workers inherit sys.path ('' becomes multiprocessing's ORIGINAL_DIR): keep the
        # checkout and tests/ out of it, so cupyops must come from the installation
        sys.path[:] = [p for p in sys.path if p and os.path.realpath(p) not in drop]
        os.chdir(cwd)
        mpp.ORIGINAL_DIR = str(cwd)
        cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                           dashboard_address=":0", silence_logs=40)
        c = distributed.Client(cluster, set_as_default=False)
    finally:
        sys.path[:] = old_path
        os.chdir(old_cwd)
        mpp.ORIGINAL_DIR = old_orig
    try:
        info = c.run(_where_cupyops())
        assert len(info) == 2
        assert len({i["pid"] for i in info.values()} | {os.getpid()}) == 3   # 2 processes
        for i in info.values():
            assert i["exists"] and i["cwd"] == os.path.realpath(cwd) and not i["tests_on_path"], i
            # found by the installed finder (editable) or in site-packages, or PYTHONPATH
            parent = os.path.dirname(os.path.dirname(i["file"]))
            assert (not i["parent_on_path"] or parent in i["site"]
                    or parent in i["pythonpath"]), i
        yield c
    finally:
        c.close()
        cluster.close()


def _compute(r, sched, client=None):
    """Compute a Dask result (or a tuple of them) on the scheduler named by ``sched``."""
    many = isinstance(r, tuple)
    rs = list(r) if many else [r]
    if sched == "threads":
        out = dask.compute(*rs, scheduler="threads")
    else:
        out = client.compute(rs, sync=True)
    return tuple(out) if many else out[0]


@pytest.fixture(params=["threads", "distributed"])
def sched(request):
    if request.param == "distributed":
        return "distributed", request.getfixturevalue("client")
    return "threads", None


# --------------------------------------------------------------------------------------------
# strategies


@st.composite
def chunkings(draw, shape):
    """Odd chunkings: all size-1 chunks, one chunk, or uneven random cuts, per axis."""
    out = []
    for n in shape:
        if n <= 1:
            out.append((n,))
            continue
        kind = draw(st.sampled_from(["ones", "whole", "cuts"]))
        if kind == "ones":
            out.append((1,) * n)
        elif kind == "whole":
            out.append((n,))
        else:
            cuts = sorted(draw(st.sets(st.integers(1, n - 1), min_size=1)))
            b = [0] + cuts + [n]
            out.append(tuple(b[i + 1] - b[i] for i in range(len(b) - 1)))
    return tuple(out)


def _dask_of(a, chunks, device="cpu"):
    """A Dask array of ``a`` in ``chunks``: CuPy chunks for the pseudo-device "cupy"."""
    a = to_device(a, device)
    return da.from_array(a, chunks=chunks, asarray=False) if a.ndim else da.from_array(a)


def _computed(r, sched, client, device):
    """A computed result as NumPy arrays; CuPy chunks give CuPy results (checked)."""
    got = _compute(r, sched, client)
    if is_cupy(device):
        for g in (got if isinstance(got, tuple) else (got,)):
            assert type(g).__module__.startswith("cupy"), type(g)
        return host(got)
    return got


def _same_error(build, ref_exc):
    assert type(build) is type(ref_exc) and str(build) == str(ref_exc), (build, ref_exc)


def _norm_axes(axis, ndim):
    if axis is None:
        return tuple(range(ndim))
    t = axis if isinstance(axis, tuple) else (axis,)
    return tuple(sorted(a % ndim for a in t)) if ndim else ()


def _bits(a):
    return np.ascontiguousarray(a).tobytes()


# --------------------------------------------------------------------------------------------
# argmax / argmin / nanargmax / nanargmin


def _check_argreduce(data, sched, client, device="cpu", dtypes=ALL_DTYPES, max_dims=3):
    a = data.draw(arrays(dtypes, max_dims=max_dims, max_side=5), label="x")
    chunks = data.draw(chunkings(a.shape), label="chunks")
    op = data.draw(st.sampled_from(ARG_OPS), label="op")
    axis = data.draw(axis_args(a.ndim), label="axis")
    tie = data.draw(st.sampled_from(["first", "last"]), label="tie")
    keepdims = data.draw(st.booleans(), label="keepdims")
    dtype = data.draw(st.sampled_from([None] + INDEX_DTYPES), label="dtype")
    f = getattr(cupyops, op)
    kw = dict(keepdims=keepdims, tie=tie, dtype=dtype)
    before = _bits(a)
    try:
        ref = f(a, axis, **kw)
    except (ValueError, TypeError) as exc:
        ref = exc
    x = _dask_of(a, chunks, device)
    try:
        r = f(x, axis, **device_kw(device), **kw)
    except (ValueError, TypeError) as exc:   # argument errors: eager, same type and message
        _same_error(exc, ref)
        return
    assert isinstance(r, da.Array)
    if isinstance(ref, Exception):           # only "All-NaN slice encountered" is left for later
        assert str(ref).startswith(f"{op}: All-NaN slice encountered: x"), ref
        with pytest.raises(ValueError, match=f"^{op}: All-NaN slice encountered: x"):
            _compute(r, sched, client)
        return
    got = _computed(r, sched, client, device)
    assert type(got) is np.ndarray and got.dtype == ref.dtype, (type(got), got.dtype, ref.dtype)
    assert got.shape == ref.shape == r.shape
    np.testing.assert_array_equal(got, ref)
    # independent reference: the brute force of tests/ref_argreduce.py
    axes = _norm_axes(axis, a.ndim)
    want = ref_argreduce(a, axes, op[-3:], tie, nan=op.startswith("nan"))
    np.testing.assert_array_equal(got, want.reshape(got.shape))
    assert _bits(a) == before                # input never modified


@given(data=st.data())
def test_argreduce_threads(data):
    _check_argreduce(data, "threads", None)


@settings(max_examples=12)
@given(data=st.data())
def test_argreduce_distributed(data, client):
    _check_argreduce(data, "distributed", client)


@pytest.mark.parametrize("device", KERNEL_DEVICES)
@settings(max_examples=10)
@given(data=st.data())
def test_argreduce_kernels_per_chunk(device, data):
    # the kernels run per chunk (simt: the CPU emulation of CUDA; CuPy chunks for "cupy")
    _check_argreduce(data, "threads", None, device=device,
                     dtypes=["float32", "int16", "uint64", "complex64", "bool"], max_dims=2)


@pytest.mark.parametrize("device", KERNEL_DEVICES)
def test_argreduce_kernels_distributed(client, device):
    a = np.array([[1, 2, 3], [3, 0, 4], [2, 5, 2]], np.float32)
    a = np.tile(a, (2, 3))
    x = _dask_of(a, (4, 2), device)
    for op, axis, tie in [("argmax", None, "first"), ("argmin", (0, 1), "last"),
                          ("argmax", 0, "last"), ("nanargmin", 1, "first")]:
        f = getattr(cupyops, op)
        got = _computed(f(x, axis, tie=tie, **device_kw(device)), "distributed", client, device)
        np.testing.assert_array_equal(got, f(a, axis, tie=tie))


@pytest.mark.parametrize("kind", ["max", "min"])
def test_argreduce_extremes_on_chunk_boundaries(kind, sched):
    s, cl = sched
    f = getattr(cupyops, "arg" + kind)
    a = np.zeros((6, 8), np.float64)
    ext = 5.0 if kind == "max" else -5.0
    # ties across chunks (chunks are (2, 3)): first and last copies on block edges
    for p in [(1, 2), (1, 3), (4, 5), (5, 7), (0, 0)]:
        a[p] = ext
    x = da.from_array(a, chunks=(2, 3))
    for axis in [None, 0, 1, (0, 1)]:
        for tie in ["first", "last"]:
            for kd in [False, True]:
                got = _compute(f(x, axis, tie=tie, keepdims=kd), s, cl)
                np.testing.assert_array_equal(got, f(a, axis, tie=tie, keepdims=kd))
    # NaN is the extreme, on a boundary; -0.0 == 0.0 ties across chunks
    b = a.copy()
    b[2, 6] = np.nan
    b[5, 2] = np.nan
    xb = da.from_array(b, chunks=(2, 3))
    for tie in ["first", "last"]:
        got = _compute(f(xb, None, tie=tie), s, cl)
        assert got == f(b, None, tie=tie) == (2 * 8 + 6 if tie == "first" else 5 * 8 + 2)
    z = np.array([-0.0, 0.0, -0.0, 0.0, -0.0, 0.0, -0.0])
    xz = da.from_array(z, chunks=2)
    for tie in ["first", "last"]:
        assert _compute(f(xz, tie=tie), s, cl) == (0 if tie == "first" else 6)


def test_nanarg_all_nan_chunk_is_fine(sched):
    s, cl = sched
    a = np.array([[np.nan, np.nan, 1.0, 2.0], [np.nan, np.nan, np.nan, 3.0],
                  [np.nan, np.nan, 0.5, np.nan]])
    x = da.from_array(a, chunks=(2, 2))          # chunk (0, 0) is all NaN
    for op in ["nanargmax", "nanargmin"]:
        f = getattr(cupyops, op)
        for axis in [None, 1, (0, 1)]:
            for tie in ["first", "last"]:
                got = _compute(f(x, axis, tie=tie), s, cl)
                np.testing.assert_array_equal(got, f(a, axis, tie=tie))
                np.testing.assert_array_equal(got, getattr(np, op)(a, axis) if tie == "first"
                                              and not isinstance(axis, tuple) else got)
        # an all-NaN group (column 0 and 1) raises when computing, as NumPy
        r = f(x, 0)
        with pytest.raises(ValueError, match="All-NaN slice encountered"):
            _compute(r, s, cl)
        with pytest.raises(ValueError, match="All-NaN slice encountered"):
            getattr(np, op)(a, 0)


def test_argreduce_bfloat16_and_nonnative():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    a = np.array([[1, 2, np.nan, 2], [2, -0.0, 0.0, 2]], np.float32).astype(ml_dtypes.bfloat16)
    x = da.from_array(a, chunks=(1, 3))
    for op in ARG_OPS:
        f = getattr(cupyops, op)
        for tie in ["first", "last"]:
            got = f(x, (0, 1), tie=tie).compute(scheduler="threads")
            assert got == f(a, (0, 1), tie=tie)
    h = cupyops.hardmax(x, (0, 1)).compute(scheduler="threads")
    assert h.dtype == a.dtype and _bits(h) == _bits(cupyops.hardmax(a, (0, 1)))
    b = np.array([3, 1, 3, 2, 1], ">i4")
    xb = da.from_array(b, chunks=2)
    assert cupyops.argmax(xb, tie="last").compute(scheduler="threads") == 2
    assert cupyops.argmin(xb, tie="last").compute(scheduler="threads") == 4


def test_zero_length_chunks_and_empty_kept_axis():
    a = np.array([[3.0, 1, 3], [0, 2, 2], [1, 1, 9]])
    x = da.from_array(a, chunks=((1, 0, 2), (2, 0, 1)))   # zero-length chunks in reduced axes
    assert 0 in x.chunks[0]
    for axis in [None, 0, 1]:
        for tie in ["first", "last"]:
            got = cupyops.argmax(x, axis, tie=tie).compute(scheduler="threads")
            np.testing.assert_array_equal(got, cupyops.argmax(a, axis, tie=tie))
    e = np.zeros((0, 4))
    xe = da.from_array(e, chunks=(1, 2))
    r = cupyops.argmax(xe, 1)
    assert r.shape == (0,) and r.compute(scheduler="threads").shape == (0,)
    with pytest.raises(ValueError, match="empty sequence"):
        cupyops.argmax(xe, 0)                      # eager, as the single-array call
    assert cupyops.hardmax(xe, 0).compute(scheduler="threads").shape == (0, 4)


def test_argreduce_same_for_every_chunking_and_split_every():
    # the combine lays blocks out from dask's nesting (no block offsets in the chunk step):
    # multi-axis groups, uneven and zero-length chunks, deep trees and dict split_every
    rng = np.random.default_rng(24)
    a = rng.integers(0, 3, (7, 6, 5)).astype(np.float32)
    a[rng.random(a.shape) < 0.15] = np.nan
    a[:, 2, :] = np.nan                           # all-NaN groups along axis (0, 2)
    chunkings = [(2, 3, 2), ((1, 0, 6), (4, 2), (1, 1, 3)), ((3, 4), (1,) * 6, (5,))]
    splits = [2, {0: 2, 2: 3}]
    for op in ["argmin", "nanargmax"]:
        f = getattr(cupyops, op)
        for axis in [None, 0, (0, 2), (1, 2)]:
            for tie in ["first", "last"]:
                try:
                    want = f(a, axis, tie=tie, keepdims=True)
                except ValueError as exc:
                    want = exc
                for chunks in chunkings:
                    for se in splits:
                        with dask.config.set(split_every=se):
                            r = f(da.from_array(a, chunks=chunks), axis, tie=tie, keepdims=True)
                        if isinstance(want, Exception):
                            # the function and NumPy's words; the group is x's own where
                            # the kept axes are one chunk each, else counted in its chunk
                            said = str(want).split(": x")[0]
                            with pytest.raises(ValueError, match=re.escape(said)):
                                r.compute(scheduler="sync")
                            continue
                        got = r.compute(scheduler="sync")
                        assert got.dtype == want.dtype and got.shape == want.shape == r.shape
                        np.testing.assert_array_equal(got, want, err_msg=str((op, axis, chunks, se)))


# --------------------------------------------------------------------------------------------
# hardmax


def _check_hardmax(data, sched, client, device="cpu"):
    dtypes = REAL_DTYPES + COMPLEX_DTYPES
    a = data.draw(arrays(dtypes, max_dims=3, max_side=5), label="x")
    chunks = data.draw(chunkings(a.shape), label="chunks")
    axis = data.draw(st.one_of(st.just(-1), axis_args(a.ndim)) if a.ndim else axis_args(0),
                     label="axis")
    tie = data.draw(st.sampled_from(["first", "last"]), label="tie")
    before = _bits(a)
    try:
        ref = cupyops.hardmax(a, axis, tie=tie)
    except (ValueError, TypeError) as exc:
        ref = exc
    x = _dask_of(a, chunks)
    try:
        r = cupyops.hardmax(x, axis, tie=tie, device=device)
    except (ValueError, TypeError) as exc:
        _same_error(exc, ref)
        return
    got = _compute(r, sched, client)
    assert type(got) is np.ndarray and got.dtype == ref.dtype and got.shape == ref.shape
    assert _bits(got) == _bits(ref)
    np.testing.assert_array_equal(got, ref_hardmax(a, _norm_axes(axis, a.ndim), tie))
    assert _bits(a) == before


@given(data=st.data())
def test_hardmax_threads(data):
    _check_hardmax(data, "threads", None)


@settings(max_examples=8)
@given(data=st.data())
def test_hardmax_distributed(data, client):
    _check_hardmax(data, "distributed", client)


def test_hardmax_seed_on_every_device():
    a = np.array([[[12, 0], [-101, 11]], [[3, 234], [0, -101]]], np.float32)
    want = {(1,): [[[1, 0], [0, 1]], [[1, 1], [0, 0]]], (0,): [[[1, 0], [0, 1]], [[0, 1], [1, 0]]],
            (0, 2): [[[0, 0], [0, 1]], [[0, 1], [0, 0]]]}
    for axes, w in want.items():
        for dev in ["cpu"] + KERNEL_DEVICES:
            x = _dask_of(a, 1, dev)
            np.testing.assert_array_equal(
                _computed(cupyops.hardmax(x, axes, **device_kw(dev)), "threads", None, dev), w)


# --------------------------------------------------------------------------------------------
# count_nonzero


def _check_count(data, sched, client):
    a = data.draw(arrays(ALL_DTYPES, max_dims=3, max_side=5), label="x")
    chunks = data.draw(chunkings(a.shape), label="chunks")
    axis = data.draw(axis_args(a.ndim), label="axis")
    keepdims = data.draw(st.booleans(), label="keepdims")
    ref = cupyops.count_nonzero(a, axis, keepdims=keepdims)
    r = cupyops.count_nonzero(_dask_of(a, chunks), axis, keepdims=keepdims)
    got = _compute(r, sched, client)
    assert type(got) is np.ndarray and got.dtype == np.int64 and got.shape == ref.shape == r.shape
    np.testing.assert_array_equal(got, ref)
    if a.dtype.kind not in "mM":
        np.testing.assert_array_equal(got, np.count_nonzero(a, axis=axis, keepdims=keepdims))


@given(data=st.data())
def test_count_nonzero_threads(data):
    _check_count(data, "threads", None)


@settings(max_examples=8)
@given(data=st.data())
def test_count_nonzero_distributed(data, client):
    _check_count(data, "distributed", client)


def test_count_nonzero_unknown_chunks_and_kernels():
    a = np.arange(-5, 7)
    x = da.from_array(a, chunks=5)
    y = x[x > -3]                          # unknown chunk sizes: fine for a count
    assert np.isnan(y.chunks[0][0])
    assert cupyops.count_nonzero(y).compute(scheduler="threads") == 8
    for dev in KERNEL_DEVICES:
        r = cupyops.count_nonzero(_dask_of(a.reshape(3, 4), (2, 3), dev), 0, **device_kw(dev))
        np.testing.assert_array_equal(_computed(r, "threads", None, dev),
                                      np.count_nonzero(a.reshape(3, 4), 0))


# --------------------------------------------------------------------------------------------
# argwhere / nonzero / nonzero_coordinates


def _check_coords(data, sched, client, device="cpu", dtypes=ALL_DTYPES):
    a = data.draw(arrays(dtypes, max_dims=3, max_side=5), label="x")
    chunks = data.draw(chunkings(a.shape), label="chunks")
    which = data.draw(st.sampled_from(["argwhere", "nonzero", "coords", "coords_size"]))
    dtype = data.draw(st.sampled_from([None] + COORD_DTYPES), label="dtype")
    x = _dask_of(a, chunks, device)
    dev = device_kw(device)
    plain = a.view(np.int64) if a.dtype.kind in "mM" else a
    if which == "argwhere":
        ref = cupyops.argwhere(a, dtype=dtype)
        r = cupyops.argwhere(x, dtype=dtype, **dev)
        assert np.isnan(r.shape[0]) and r.shape[1] == a.ndim
        got = _computed(r, sched, client, device)
        assert got.dtype == ref.dtype and got.shape == ref.shape
        np.testing.assert_array_equal(got, ref)
        np.testing.assert_array_equal(got, np.argwhere(plain))
    elif which == "nonzero":
        if a.ndim == 0:
            with pytest.raises(ValueError, match="0-d"):
                cupyops.nonzero(x)
            return
        ref = cupyops.nonzero(a)
        got = _computed(cupyops.nonzero(x, **dev), sched, client, device)
        assert len(got) == a.ndim
        for g, w, n in zip(got, ref, np.nonzero(plain)):
            assert g.dtype == w.dtype == np.int64
            np.testing.assert_array_equal(g, w)
            np.testing.assert_array_equal(g, n)
    else:
        size = data.draw(st.integers(0, 8), label="size") if which == "coords_size" else None
        fill = data.draw(st.sampled_from([0, 7]), label="fill")
        rc, rn = cupyops.nonzero_coordinates(a, size=size, fill_value=fill, dtype=dtype)
        c, n = cupyops.nonzero_coordinates(x, size=size, fill_value=fill, dtype=dtype, **dev)
        assert n.shape == () and n.dtype == np.int64
        if size is not None:
            assert c.shape == (size, a.ndim)
        gc, gn = _computed((c, n), sched, client, device)
        assert gc.dtype == rc.dtype and gc.shape == rc.shape
        np.testing.assert_array_equal(gc, rc)
        assert type(gn) is np.ndarray and gn.shape == () and gn == rn == np.count_nonzero(plain)


@given(data=st.data())
def test_coordinates_threads(data):
    _check_coords(data, "threads", None)


@settings(max_examples=10)
@given(data=st.data())
def test_coordinates_distributed(data, client):
    _check_coords(data, "distributed", client)


@pytest.mark.parametrize("device", KERNEL_DEVICES)
@settings(max_examples=8)
@given(data=st.data())
def test_coordinates_kernels_per_chunk(device, data):
    _check_coords(data, "threads", None, device=device, dtypes=["float32", "uint8", "complex64"])


def test_argwhere_row_major_across_trailing_chunks(sched):
    s, cl = sched
    rng = np.random.default_rng(5)
    a = (rng.random((7, 9, 4)) < 0.3).astype(np.int8)
    x = da.from_array(a, chunks=(3, 2, 3))        # chunked along the trailing axes too
    got = _compute(cupyops.argwhere(x), s, cl)
    np.testing.assert_array_equal(got, np.argwhere(a))
    r = cupyops.argwhere(x)
    assert len(r.chunks[0]) == 3                  # one chunk per row band
    c, n = cupyops.nonzero_coordinates(x, size=5, fill_value=-1)
    gc, gn = _compute((c, n), s, cl)
    np.testing.assert_array_equal(gc, np.argwhere(a)[:5])
    assert gn == np.count_nonzero(a)
    big = a.size + 3
    gc, _ = _compute(cupyops.nonzero_coordinates(x, size=big, fill_value=-1), s, cl)
    np.testing.assert_array_equal(gc[:gn], np.argwhere(a))
    assert (gc[gn:] == -1).all()


def test_coordinates_seed():
    a = np.array([[1.0, 0.0, 0.0, 2.0], [-0.0, 3.5, 0.0, -5.2]], np.float32).reshape(1, 1, 2, 4)
    c, n = cupyops.nonzero_coordinates(da.from_array(a, chunks=(1, 1, 1, 3)))
    c, n = dask.compute(c, n, scheduler="threads")
    assert n == 4
    np.testing.assert_array_equal(c, [[0, 0, 0, 0], [0, 0, 0, 3], [0, 0, 1, 1], [0, 0, 1, 3]])


# --------------------------------------------------------------------------------------------
# the graph: lazy, O(chunks) tasks, no task reads more than one input chunk


def _deps(graph):
    from dask.core import get_dependencies
    return {k: get_dependencies(graph, k) for k in graph}


def _check_graph_shape(r, x, max_tasks_per_chunk):
    graph = dict(r.__dask_graph__())
    inputs = set(dict(x.__dask_graph__()))
    mine = {k: d for k, d in _deps(graph).items() if k not in inputs}
    nchunks = x.npartitions
    assert len(mine) <= max_tasks_per_chunk * nchunks + 2, (len(mine), nchunks)
    for k, d in mine.items():
        assert len(d & inputs) <= 1, (k, d & inputs)     # never gathers input chunks
    return len(mine) / nchunks


def test_graph_is_tree_of_pairs():
    a = np.arange(24 * 30, dtype=np.float64).reshape(24, 30)
    x = da.from_array(a, chunks=(3, 5))                  # 8 x 6 = 48 chunks
    with dask.config.set(split_every=4):
        for op in [cupyops.argmax, cupyops.nanargmin]:
            for axis in [None, 0, (0, 1)]:
                r = op(x, axis)
                assert _check_graph_shape(r, x, 2) <= 2
                np.testing.assert_array_equal(r.compute(scheduler="sync"), op(a, axis))
        # depth: with split_every=2 there are combine steps between chunks and the aggregate
        with dask.config.set(split_every=2):
            r = cupyops.argmax(x, tie="last")
            names = {k[0] if isinstance(k, tuple) else k for k in dict(r.__dask_graph__())}
            assert any("partial" in n for n in names)
            assert r.compute(scheduler="sync") == a.size - 1
        r = cupyops.hardmax(x, 0)
        _check_graph_shape(r, x, 3)
        for r in [cupyops.argwhere(x), cupyops.count_nonzero(x, 1),
                  cupyops.nonzero_coordinates(x, size=4)[0]]:
            _check_graph_shape(r, x, 3)


def test_distinct_calls_have_distinct_keys():
    # results of different arguments must never share a key (a distributed scheduler would hand
    # one call's cached result to the other)
    a = np.array([[3, 1, 3], [0, 3, 2], [3, 0, 1]], np.int16)
    x = da.from_array(a, chunks=(2, 2))
    rs, want = [], []
    for f in [cupyops.argmax, cupyops.argmin, cupyops.nanargmax, cupyops.nanargmin]:
        for axis in [None, 0, 1]:
            for tie in ["first", "last"]:
                for kd in [False, True]:
                    for dt in [None, np.int32]:
                        rs.append(f(x, axis, tie=tie, keepdims=kd, dtype=dt))
                        want.append(f(a, axis, tie=tie, keepdims=kd, dtype=dt))
    for axis in [0, 1, (0, 1)]:
        for tie in ["first", "last"]:
            rs.append(cupyops.hardmax(x, axis, tie=tie))
            want.append(cupyops.hardmax(a, axis, tie=tie))
    for fill in [0, 5]:
        for size in [2, 9]:
            rs.append(cupyops.nonzero_coordinates(x, size=size, fill_value=fill)[0])
            want.append(cupyops.nonzero_coordinates(a, size=size, fill_value=fill)[0])
    rs += list(cupyops.nonzero(x))
    want += list(cupyops.nonzero(a))
    assert len({r.name for r in rs}) == len(rs)
    for g, w in zip(dask.compute(*rs, scheduler="threads"), want):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)


def test_lazy_and_reduced_axes_unsplit_is_one_task_per_chunk():
    calls = []

    def boom(b):
        calls.append(1)
        return b

    a = np.arange(12.0).reshape(3, 4)
    x = da.from_array(a, chunks=(1, 4)).map_blocks(boom, dtype=a.dtype, meta=np.empty((0, 0)))
    calls.clear()
    for f in [cupyops.argmax, cupyops.hardmax, cupyops.argwhere, cupyops.count_nonzero]:
        r = f(x)
        assert isinstance(r, da.Array)
    assert not calls                                      # nothing ran while building
    r = cupyops.argmax(x, 1)
    x0 = da.from_array(a, chunks=(1, 4))
    g = dict(r.__dask_graph__())
    assert len(g) - len(dict(x.__dask_graph__())) == 3   # one task per chunk
    np.testing.assert_array_equal(r.compute(scheduler="sync"), [3, 3, 3])
    assert x0.npartitions == 3


# --------------------------------------------------------------------------------------------
# bad input


def test_argument_errors_are_eager_with_the_single_array_message():
    a = np.arange(300.0).reshape(3, 100)
    x = da.from_array(a, chunks=(2, 30))
    cases = [
        (cupyops.argmax, (x,), dict(axis=2)),
        (cupyops.argmax, (x,), dict(axis=(0, -2))),
        (cupyops.argmin, (x,), dict(tie="middle")),
        (cupyops.argmax, (x,), dict(dtype=np.float32)),
        (cupyops.argmax, (x,), dict(axis=None, dtype=np.int8)),          # 300 > int8
        (cupyops.nanargmax, (x,), dict(keepdims=1)),
        (cupyops.hardmax, (x,), dict(axis=5)),
        (cupyops.hardmax, (x,), dict(tie=None)),
        (cupyops.count_nonzero, (x,), dict(axis=[0])),
        (cupyops.argwhere, (x,), dict(dtype=np.int8)),
        (cupyops.nonzero_coordinates, (x,), dict(size=-1)),
        (cupyops.nonzero_coordinates, (x,), dict(fill_value=-1, dtype=np.uint32)),
        (cupyops.argmax, (x,), dict(device="tpu")),
        (cupyops.argmax, (da.from_array(np.array(["a", "b"])),), {}),
        (cupyops.hardmax, (da.from_array(np.array(["2020"], "datetime64[D]")),), {}),
        (cupyops.nonzero, (da.from_array(np.float32(1)),), {}),
    ]
    for f, args, kw in cases:
        with pytest.raises((ValueError, TypeError)) as ref:
            f(*(np.asarray(v.compute()) for v in args), **kw)
        with pytest.raises(ref.type) as got:
            f(*args, **kw)
        assert str(got.value) == str(ref.value), (f, kw)


def test_unknown_chunks_out_and_workspace():
    a = np.arange(-4.0, 8.0)
    x = da.from_array(a, chunks=5)
    y = x[x > 0]
    for f in [cupyops.argmax, cupyops.nanargmin, cupyops.hardmax, cupyops.argwhere,
              cupyops.nonzero, cupyops.nonzero_coordinates]:
        kw = {"axis": 0} if f is cupyops.hardmax else {}
        with pytest.raises(ValueError, match=r"unknown size along axis 0.*compute_chunk_sizes"):
            f(y, **kw)
    y2 = y.compute_chunk_sizes()
    assert cupyops.argmax(y2).compute(scheduler="sync") == 6
    with pytest.raises(TypeError, match="out= cannot be used with a Dask array"):
        cupyops.argmax(x, out=np.zeros((), np.int64))
    with pytest.raises(ValueError, match="workspace= cannot be used with a Dask array"):
        cupyops.hardmax(x, workspace=object())


class _Duck:
    """A chunk type cupyops does not know (picklable only on the threaded scheduler)."""

    def __init__(self, a):
        self.a = a
        self.shape, self.dtype, self.ndim = a.shape, a.dtype, a.ndim

    def __getitem__(self, k):
        return _Duck(self.a[k])


def test_unsupported_chunk_types_raise_when_computing():
    a = np.arange(6.0).reshape(2, 3)
    masked = da.from_array(a, chunks=(1, 2)).map_blocks(np.ma.masked_array, dtype=a.dtype)
    duck = da.from_array(a, chunks=(1, 2)).map_blocks(_Duck, dtype=a.dtype,
                                                      meta=np.empty((0, 0)))
    for f in [cupyops.argmax, cupyops.hardmax, cupyops.count_nonzero, cupyops.argwhere]:
        for x, name in [(masked, "numpy.ma.MaskedArray"), (duck, "test_dask._Duck")]:
            r = f(x)                                       # building is fine
            with pytest.raises(TypeError, match=re.escape(name)):
                r.compute(scheduler="sync")


def test_unsupported_chunk_type_on_the_cluster(client):
    a = np.arange(6.0).reshape(2, 3)
    masked = da.from_array(a, chunks=(1, 2)).map_blocks(np.ma.masked_array, dtype=a.dtype)
    with pytest.raises(TypeError, match="numpy.ma.MaskedArray"):
        _compute(cupyops.argmax(masked, (0, 1)), "distributed", client)


def test_numpy_calls_import_no_dask():
    code = ("import sys, numpy as np, cupyops\n"
            "cupyops.argmax(np.arange(3)); cupyops.argwhere(np.arange(3))\n"
            "cupyops.argmax([1, 2]); assert 'dask' not in sys.modules, 'dask imported'\n")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)


# --------------------------------------------------------------------------------------------
# bytes moved, and the benchmark's Dask section


def test_argmax_moves_pairs_not_the_input(client):
    x = da.random.default_rng(3).random((512, 512), chunks=(128, 128))  # 16 chunks of 128 KiB
    x = client.persist(x)
    client.compute(x.sum(), sync=True)        # the input now lives on the workers
    before = client.run(lambda dask_worker: dask_worker.transfer_outgoing_bytes_total)
    r = cupyops.argmax(x)
    got = client.compute(r, sync=True)
    after = client.run(lambda dask_worker: dask_worker.transfer_outgoing_bytes_total)
    moved = sum(after[w] - before[w] for w in after)
    assert got == np.argmax(client.compute(x, sync=True))
    # at most one (value, index, flags) record per chunk crosses a worker boundary: far less
    # than a single input chunk
    assert 0 <= moved <= 16 * 600, moved
    assert moved < 128 * 1024 / 10


def test_bench_tasks_per_chunk():
    from cupyops.bench import dask_bench
    rows = dask_bench.tasks_per_chunk((64, 64), (8, 16))
    assert {r["op"] for r in rows} >= {"argmax axis=None", "hardmax axis=0", "argwhere (0.1% nonzero)"}
    for r in rows:
        assert r["max_input_chunks_per_task"] == 1 and r["tasks_per_chunk"] <= 3, r
    assert next(r for r in rows if "unsplit" in r["op"])["tasks_per_chunk"] == 1
    text = dask_bench.format_tables(rows, {}, None, (64, 64), (8, 16))
    assert any("tasks per chunk" in t for t in text)


# --------------------------------------------------------------------------------------------
# CuPy chunks: only on a real GPU (CI has none; run the README's GPU command there)


@pytest.mark.gpu
def test_cupy_chunks_on_the_gpu():
    cupy = pytest.importorskip("cupy")
    rng = np.random.default_rng(7)
    a = rng.integers(0, 3, (9, 10)).astype(np.float32)
    a[4, 4] = np.nan
    x = da.from_array(a, chunks=(4, 3)).map_blocks(cupy.asarray, dtype=a.dtype,
                                                   meta=cupy.empty((0, 0), a.dtype))
    for op in ARG_OPS:
        f = getattr(cupyops, op)
        for axis in [None, 0, 1, (0, 1)]:
            for tie in ["first", "last"]:
                r = f(x, axis, tie=tie)
                assert isinstance(r._meta, cupy.ndarray)
                got = r.compute(scheduler="threads")
                assert isinstance(got, cupy.ndarray)
                np.testing.assert_array_equal(cupy.asnumpy(got), f(a, axis, tie=tie))
    for axis in [0, 1, (0, 1)]:
        got = cupyops.hardmax(x, axis, tie="last").compute(scheduler="threads")
        np.testing.assert_array_equal(cupy.asnumpy(got), cupyops.hardmax(a, axis, tie="last"))
    got = cupyops.argwhere(x).compute(scheduler="threads")
    np.testing.assert_array_equal(cupy.asnumpy(got), np.argwhere(a))
    c, n = dask.compute(*cupyops.nonzero_coordinates(x, size=7), scheduler="threads")
    assert isinstance(n, cupy.ndarray) and int(n) == np.count_nonzero(a)
    np.testing.assert_array_equal(cupy.asnumpy(c), np.argwhere(a)[:7])
    np.testing.assert_array_equal(
        cupy.asnumpy(cupyops.count_nonzero(x, 0).compute(scheduler="threads")),
        np.count_nonzero(a, 0))
    with pytest.raises(ValueError, match="no hidden transfers"):
        cupyops.argmax(x, device="cpu").compute(scheduler="threads")


def test_bench_command_line(capsys):
    from cupyops.bench import bench
    assert bench.main(["--dask", "--tiny", "--no-timing"]) == 0
    out = capsys.readouterr().out
    assert "tasks per chunk" in out and "hardmax axis=0" in out
