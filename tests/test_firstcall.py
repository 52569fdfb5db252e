"""First call of a new layout (cupyops._call's class entries, built by the ops' calls modules): a new shape of a C-contiguous input in a
layout class seen before skips the argument rules that do not read the shape, gets the right
answer and the plan of its own layout, and hands every shape rule back to the slow path, which
fails with its usual message.

Every test runs on each kernel device (tests/_devices.py). NumPy input on "cuda" is copied to
the GPU on every call and keeps nothing (cupyops.core.placement.entry_prep): there every call
takes the slow path, which the tests assert instead."""
import numpy as np
import pytest

import cupyops
from cupyops.core import placement as _dispatch
from cupyops import _call
from cupyops.ops.nonzero import calls as _nonzero_calls
from cupyops.testing import recording
from _devices import KERNEL_DEVICES, ops


def _caches(device) -> bool:
    """Whether calls on ``device`` keep entries and layout classes (not NumPy input on the
    GPU, copied there every call)."""
    return device != "cuda"


def _ref_arg(x, axes, kind, tie):
    """Independent reference: move the reduced axes last, flatten them, NumPy's argmax/argmin
    (tie="last" through the reversed group)."""
    kept = [i for i in range(x.ndim) if i not in axes]
    y = x.transpose(kept + list(axes)).reshape([x.shape[i] for i in kept] + [-1])
    f = np.argmax if kind == "max" else np.argmin
    if tie == "first":
        return f(y, axis=-1)
    return y.shape[-1] - 1 - f(y[..., ::-1], axis=-1)


@pytest.fixture
def no_slow_path(monkeypatch):
    """Fail any call that reaches the slow path's placement (the first of its rules)."""
    calls = []

    def place(x, device):
        calls.append(x.shape)
        raise AssertionError(f"slow path taken for shape {x.shape}")
    monkeypatch.setattr(_dispatch, "place", place)
    return calls


CASES = [
    ("argmax", dict(axis=1)),
    ("argmax", dict(axis=-1, keepdims=True, dtype=np.int16)),
    ("argmin", dict(axis=1, tie="last")),
    ("argmax", dict(axis=(1, 2))),
    ("argmin", dict(axis=(0, 2), tie="last")),          # not neighbours: the general planner
    ("nanargmax", dict(axis=(0, 2), keepdims=True)),
    ("argmin", dict(axis=0, dtype=np.uint8)),
    ("argmax", dict(axis=None, tie="last")),
    ("nanargmax", dict(axis=1)),
    ("nanargmin", dict(axis=(0, 1), keepdims=True)),
]


@pytest.mark.parametrize("device", KERNEL_DEVICES)
@pytest.mark.parametrize("name,kw", CASES)
def test_a_new_shape_of_a_seen_class_takes_the_class_route(name, kw, device, monkeypatch):
    _call.clear()
    rng = np.random.default_rng(0)
    f = getattr(ops(device), name)
    ndim = 3 if kw.get("axis") in ((1, 2), (0, 2)) else 2
    warm = rng.integers(0, 3, (4, 33, 5)[:ndim]).astype(np.float32)
    f(warm, **kw)
    axis = kw.get("axis")
    axes = tuple(range(ndim)) if axis is None else tuple(
        a % ndim for a in (axis if isinstance(axis, tuple) else (axis,)))
    kind = "min" if "min" in name else "max"
    tie = kw.get("tie", "first")
    calls = []
    real_place = _dispatch.place

    def place(x, device):
        calls.append(x.shape)
        return real_place(x, device)
    monkeypatch.setattr(_dispatch, "place", place)
    for shape in [(3, 31, 2), (1, 1025, 3), (7, 32, 1), (2, 1023, 4)]:
        x = rng.integers(0, 3, shape[:ndim]).astype(np.float32)
        if name.startswith("nan"):
            x[x == 0] = np.nan             # NaN to skip in every group, never a whole group
            x[..., :1] = 1.0
            if ndim == 2:
                x[:, 0] = 1.0
        with recording() as t:
            got = f(x, **kw)
        xr = np.where(np.isnan(x), -np.inf if kind == "max" else np.inf, x) \
            if name.startswith("nan") else x
        want = _ref_arg(xr, axes, kind, tie)
        if kw.get("keepdims"):
            want = want.reshape([1 if i in axes else n for i, n in enumerate(x.shape)])
        np.testing.assert_array_equal(got, want, err_msg=f"{name} {kw} {shape}")
        assert got.dtype == np.dtype(kw.get("dtype", np.int64))
        assert t.plans and t.plans[-1].group == int(np.prod([x.shape[a] for a in axes]))
        if _caches(device):
            assert calls == [], f"{name} {kw} {shape}: the slow path ran"
        else:
            assert calls == [x.shape], f"{name} {kw} {shape}: no slow path for NumPy on a GPU"
            calls.clear()
        # the layout is cached on its second call: the third is a plain fast-path hit
        for _ in range(2):
            with recording() as t2:
                again = f(x, **kw)
            np.testing.assert_array_equal(again, want)
            assert t2.plans[-1] == t.plans[-1]
        assert calls == ([] if _caches(device) else [x.shape] * 2)
        calls.clear()


@pytest.mark.parametrize("device", KERNEL_DEVICES)
@pytest.mark.parametrize("tie", ["first", "last"])
def test_hardmax_new_shapes_take_the_class_route(tie, device, no_slow_path, monkeypatch):
    rng = np.random.default_rng(1)
    o = ops(device)
    _call.clear()
    monkeypatch.undo()
    o.hardmax(rng.integers(0, 3, (5, 40)).astype(np.int8), axis=1, tie=tie)
    if _caches(device):
        monkeypatch.setattr(_dispatch, "place", lambda x, d: pytest.fail("slow path"))
    else:
        real_place, calls = _dispatch.place, []
        monkeypatch.setattr(_dispatch, "place", lambda x, d: calls.append(1) or real_place(x, d))
    for shape in [(3, 31), (1, 1025), (64, 33)]:
        x = rng.integers(0, 3, shape).astype(np.int8)
        got = o.hardmax(x, axis=1, tie=tie)
        if not _caches(device):
            assert calls == [1], "NumPy input on a GPU takes the slow path every call"
            calls.clear()
        idx = _ref_arg(x, (1,), "max", tie)
        want = np.zeros_like(x)
        want[np.arange(shape[0]), idx] = 1
        np.testing.assert_array_equal(got, want)
        assert got.dtype == x.dtype


def _same_failure(call, warm):
    """``call()`` fails the same way with cold caches and after ``warm()`` filled the class."""
    _call.clear()
    with pytest.raises(Exception) as cold:
        call()
    _call.clear()
    warm()
    with pytest.raises(type(cold.value)) as hot:
        call()
    assert str(hot.value) == str(cold.value)


@pytest.mark.parametrize("device", KERNEL_DEVICES)
def test_shape_rules_go_back_to_the_slow_path(device):
    ones = lambda *s: np.ones(s, np.float32)          # noqa: E731
    o = ops(device)
    # a group too long for the index dtype
    _same_failure(lambda: o.argmax(ones(3, 300), axis=1, dtype=np.int8),
                  lambda: o.argmax(ones(3, 100), axis=1, dtype=np.int8))
    # an empty reduced axis
    _same_failure(lambda: o.argmax(ones(3, 0), axis=1),
                  lambda: o.argmax(ones(3, 5), axis=1))
    # a group of NaN only, in a new shape
    _same_failure(
        lambda: o.nanargmax(np.full((2, 7), np.nan, np.float32), axis=1),
        lambda: o.nanargmax(ones(2, 5), axis=1))
    # an empty output: the slow path's trivial branch, as without the class
    _call.clear()
    o.argmax(ones(3, 5), axis=1)
    got = o.argmax(ones(0, 5), axis=1)
    assert got.shape == (0,) and got.dtype == np.int64
    empty = o.hardmax(ones(0, 5), axis=1)
    assert empty.shape == (0, 5)


@pytest.mark.parametrize("device", KERNEL_DEVICES)
def test_a_failed_first_call_stores_nothing(device):
    """nanargmax of a new all-NaN shape raises; the same shape with numbers then answers."""
    o = ops(device)
    _call.clear()
    o.nanargmax(np.ones((2, 5), np.float32), axis=1)
    bad = np.full((2, 9), np.nan, np.float32)
    with pytest.raises(ValueError, match="All-NaN"):
        o.nanargmax(bad, axis=1)
    good = bad.copy()
    good[:, 4] = 3.0
    np.testing.assert_array_equal(o.nanargmax(good, axis=1), [4, 4])


@pytest.mark.parametrize("device", KERNEL_DEVICES)
def test_other_classes_do_not_borrow_an_entry(device, monkeypatch):
    """Inputs that differ from the warmed class in contiguity, rank, pointer alignment, dtype
    or force_64bit take the slow path (CuPy input keeps the NumPy arrays' layouts and
    offsets)."""
    from cupyops.testing import force_64bit
    o = ops(device)
    _call.clear()
    base = np.arange(12 * 40, dtype=np.float32).reshape(12, 40) % 7
    o.argmax(base, axis=1)
    calls = []
    real_place = _dispatch.place
    monkeypatch.setattr(_dispatch, "place", lambda x, d: calls.append(1) or real_place(x, d))
    raw = np.zeros(12 * 41 * 4 + 64, np.uint8)
    off = -raw.ctypes.data % 16 + 4
    shifted = raw[off:off + 12 * 41 * 4].view(np.float32).reshape(12, 41)
    shifted[...] = np.arange(12 * 41).reshape(12, 41) % 5
    others = [
        np.asfortranarray(base[:, :39]),        # F-order
        base[:, :39].reshape(12, 39, 1)[..., 0][:, ::-1],   # negative stride
        base.reshape(12, 40, 1)[:, :39],        # rank 3
        shifted,                                # 4 bytes past 16
        base[:, :39].astype(np.float64),        # dtype
    ]
    for x in others:
        calls.clear()
        got = o.argmax(x, axis=1)
        np.testing.assert_array_equal(got, np.argmax(x, axis=1))
        assert calls, x.shape
    calls.clear()
    with force_64bit(), recording() as t:
        got = o.argmax(np.ascontiguousarray(base[:, :37]), axis=1)
    np.testing.assert_array_equal(got, np.argmax(base[:, :37], axis=1))
    assert calls and t.plans[-1].use_64bit


@pytest.mark.parametrize("device", KERNEL_DEVICES)
def test_class_entries_hold_no_arrays(device):
    """The class cache holds validated arguments and the backend: no plan, no array (NumPy
    nor CuPy). NumPy input on the GPU keeps no class at all."""
    _call.clear()
    o = ops(device)
    for f in (o.argmax, o.hardmax):
        f(np.ones((4, 9), np.float32), axis=1)
    entries = _call._classes.values()
    assert len(entries) == (2 if _caches(device) else 0)
    for first in entries:
        for cell in first.__closure__ or ():
            v = cell.cell_contents
            assert not isinstance(v, np.ndarray)
            assert type(v).__name__ not in ("ndarray", "ArgreducePlan", "ArgreduceLaunches")


NONZERO_CASES = [
    ("count_nonzero", dict(axis=1)),
    ("count_nonzero", dict(axis=(0, 1), keepdims=True)),
    ("count_nonzero", dict(axis=0, keepdims=True)),
    ("argwhere", dict()),
    ("argwhere", dict(dtype=np.uint32)),
    ("nonzero", dict()),
    ("nonzero_coordinates", dict()),
    ("nonzero_coordinates", dict(size=40, fill_value=-1, dtype=np.int32)),
]


def _ref_nonzero(name, x, kw):
    if name == "count_nonzero":
        return np.count_nonzero(x, axis=kw["axis"], keepdims=kw.get("keepdims", False))
    if name == "argwhere":
        return np.argwhere(x).astype(kw.get("dtype", np.int64))
    if name == "nonzero":
        return np.nonzero(x)
    coords = np.argwhere(x).astype(kw.get("dtype", np.int64))
    if kw.get("size") is None:
        return coords, len(coords)
    k = kw["size"]
    out = np.full((k, x.ndim), kw["fill_value"], coords.dtype)
    out[:min(k, len(coords))] = coords[:k]
    return out, len(coords)


@pytest.mark.parametrize("device", KERNEL_DEVICES)
@pytest.mark.parametrize("name,kw", NONZERO_CASES)
def test_nonzero_family_new_shapes_take_the_class_route(name, kw, device, monkeypatch):
    _call.clear()
    rng = np.random.default_rng(3)
    f = getattr(ops(device), name)
    f(rng.integers(0, 2, (6, 40)).astype(np.int8), **kw)
    calls = []
    real_place = _dispatch.place
    monkeypatch.setattr(_dispatch, "place", lambda x, d: calls.append(x.shape) or real_place(x, d))
    for shape in [(3, 31), (1, 1025), (33, 32), (2, 1023)]:
        x = rng.integers(0, 3, shape).astype(np.int8) * (rng.random(shape) < 0.3)
        got = f(x, **kw)
        want = _ref_nonzero(name, x, kw)
        if name == "nonzero":
            assert len(got) == 2
            for g, w in zip(got, want):
                np.testing.assert_array_equal(g, w)
        elif name == "nonzero_coordinates":
            np.testing.assert_array_equal(got[0], want[0])
            assert got[0].dtype == want[0].dtype
            assert int(got[1]) == want[1]
        else:
            np.testing.assert_array_equal(got, want)
            assert got.dtype == want.dtype and got.shape == want.shape
        if _caches(device):
            assert calls == [], f"{name} {kw} {shape}: the slow path ran"
        else:
            assert calls == [shape], f"{name} {kw} {shape}: no slow path for NumPy on a GPU"
            calls.clear()


@pytest.mark.parametrize("device", KERNEL_DEVICES)
def test_nonzero_family_shape_rules_go_back_to_the_slow_path(device):
    """A dimension too long for the index dtype (int8 here: the public ops take 32-bit and
    wider, whose limits no test can reach) and empty inputs are the slow path's."""
    from cupyops.core import backend as _backend
    from cupyops.core.placement import Placement
    built = []
    first = _nonzero_calls.family_class(
        Placement("simt", False, None),
        lambda kx, f: built.append(kx.shape) or ((lambda kx, ws: "ran"), None),
        index_dtype=np.int8)      # build -> (run, reshape)
    assert first(np.ones((3, 129), np.int8), None, False) is None
    assert first(np.ones((0, 5), np.int8), None, False) is None
    assert built == []
    assert first(np.ones((3, 128), np.int8), None, False) == ("ran", None)
    assert built == [(3, 128)]
    ones = lambda *s: np.ones(s, np.int8)          # noqa: E731
    o = ops(device)
    _call.clear()
    for f, want in ((o.argwhere, (0, 2)), (o.count_nonzero, ())):
        f(ones(3, 5))
        got = f(ones(0, 5))
        assert np.shape(got) == want
    o.nonzero(ones(3, 5))
    got = o.nonzero(ones(0, 5))
    assert len(got) == 2 and all(g.shape == (0,) for g in got)


@pytest.mark.parametrize("device", KERNEL_DEVICES)
@pytest.mark.parametrize("op,kw", [("argmax", dict(axis=1)), ("hardmax", dict(axis=1)),
                                   ("count_nonzero", dict(axis=1)), ("argwhere", {}),
                                   ("nonzero", {}), ("nonzero_coordinates", dict(size=5))])
def test_a_layout_is_cached_on_its_second_call(op, kw, device, monkeypatch):
    """A class entry serves a new layout's first call without storing anything for it (no
    cached entry); the second call stores one; the third is a hit, which neither plans nor
    reaches the class entry. (NumPy input on the GPU stores nothing, and plans every call.)"""
    _call.clear()
    f = getattr(ops(device), op)
    f(np.ones((4, 9), np.float32), **kw)          # the class
    x = np.arange(5 * 11, dtype=np.float32).reshape(5, 11) % 3
    want = [getattr(cupyops, op)(x, device="cpu", **kw)]
    entries = len(_call._entries)
    for call in range(3):
        with recording() as t:
            got = f(x, **kw)
        if op == "nonzero":
            for a, b in zip(got, want[0]):
                np.testing.assert_array_equal(a, b)
        elif op == "nonzero_coordinates":
            np.testing.assert_array_equal(got[0], want[0][0])
            assert int(got[1]) == int(want[0][1])
        else:
            np.testing.assert_array_equal(got, want[0])
        assert t.plans, call
        if not _caches(device):
            assert len(_call._entries) == entries, "NumPy input on a GPU stored an entry"
        elif call == 0:
            assert len(_call._entries) == entries, "a first call stored an entry"
        elif call == 1:
            assert len(_call._entries) == entries + 1
            monkeypatch.setattr(_call, "_road", lambda *a: pytest.fail("class route"))
