"""First call of a new layout (cupyops._call's class entries, built by the ops' calls modules): a new shape of a C-contiguous input in a
layout class seen before skips the argument rules that do not read the shape, gets the right
answer and the plan of its own layout, and hands every shape rule back to the slow path, which
fails with its usual message."""
import numpy as np
import pytest

import cupyops
from cupyops.core import placement as _dispatch
from cupyops import _call
from cupyops.ops.nonzero import calls as _nonzero_calls
from cupyops.testing import recording


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


@pytest.mark.parametrize("name,kw", CASES)
def test_a_new_shape_of_a_seen_class_takes_the_class_route(name, kw, monkeypatch):
    _call.clear()
    rng = np.random.default_rng(0)
    f = getattr(cupyops, name)
    ndim = 3 if kw.get("axis") in ((1, 2), (0, 2)) else 2
    warm = rng.integers(0, 3, (4, 33, 5)[:ndim]).astype(np.float32)
    f(warm, device="simt", **kw)
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
            got = f(x, device="simt", **kw)
        xr = np.where(np.isnan(x), -np.inf if kind == "max" else np.inf, x) \
            if name.startswith("nan") else x
        want = _ref_arg(xr, axes, kind, tie)
        if kw.get("keepdims"):
            want = want.reshape([1 if i in axes else n for i, n in enumerate(x.shape)])
        np.testing.assert_array_equal(got, want, err_msg=f"{name} {kw} {shape}")
        assert got.dtype == np.dtype(kw.get("dtype", np.int64))
        assert t.plans and t.plans[-1].group == int(np.prod([x.shape[a] for a in axes]))
        assert calls == [], f"{name} {kw} {shape}: the slow path ran"
        # the layout is cached on its second call: the third is a plain fast-path hit
        for _ in range(2):
            with recording() as t2:
                again = f(x, device="simt", **kw)
            np.testing.assert_array_equal(again, want)
            assert t2.plans[-1] == t.plans[-1]
        assert calls == []


@pytest.mark.parametrize("tie", ["first", "last"])
def test_hardmax_new_shapes_take_the_class_route(tie, no_slow_path, monkeypatch):
    rng = np.random.default_rng(1)
    _call.clear()
    monkeypatch.undo()
    cupyops.hardmax(rng.integers(0, 3, (5, 40)).astype(np.int8), axis=1, tie=tie,
                    device="simt")
    monkeypatch.setattr(_dispatch, "place", lambda x, d: pytest.fail("slow path"))
    for shape in [(3, 31), (1, 1025), (64, 33)]:
        x = rng.integers(0, 3, shape).astype(np.int8)
        got = cupyops.hardmax(x, axis=1, tie=tie, device="simt")
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


def test_shape_rules_go_back_to_the_slow_path():
    ones = lambda *s: np.ones(s, np.float32)          # noqa: E731
    # a group too long for the index dtype
    _same_failure(lambda: cupyops.argmax(ones(3, 300), axis=1, dtype=np.int8, device="simt"),
                  lambda: cupyops.argmax(ones(3, 100), axis=1, dtype=np.int8, device="simt"))
    # an empty reduced axis
    _same_failure(lambda: cupyops.argmax(ones(3, 0), axis=1, device="simt"),
                  lambda: cupyops.argmax(ones(3, 5), axis=1, device="simt"))
    # a group of NaN only, in a new shape
    _same_failure(
        lambda: cupyops.nanargmax(np.full((2, 7), np.nan, np.float32), axis=1, device="simt"),
        lambda: cupyops.nanargmax(ones(2, 5), axis=1, device="simt"))
    # an empty output: the slow path's trivial branch, as without the class
    _call.clear()
    cupyops.argmax(ones(3, 5), axis=1, device="simt")
    got = cupyops.argmax(ones(0, 5), axis=1, device="simt")
    assert got.shape == (0,) and got.dtype == np.int64
    empty = cupyops.hardmax(ones(0, 5), axis=1, device="simt")
    assert empty.shape == (0, 5)


def test_a_failed_first_call_stores_nothing():
    """nanargmax of a new all-NaN shape raises; the same shape with numbers then answers."""
    _call.clear()
    cupyops.nanargmax(np.ones((2, 5), np.float32), axis=1, device="simt")
    bad = np.full((2, 9), np.nan, np.float32)
    with pytest.raises(ValueError, match="All-NaN"):
        cupyops.nanargmax(bad, axis=1, device="simt")
    good = bad.copy()
    good[:, 4] = 3.0
    np.testing.assert_array_equal(cupyops.nanargmax(good, axis=1, device="simt"), [4, 4])


def test_other_classes_do_not_borrow_an_entry(monkeypatch):
    """Inputs that differ from the warmed class in contiguity, rank, pointer alignment, dtype
    or force_64bit take the slow path."""
    from cupyops.testing import force_64bit
    _call.clear()
    base = np.arange(12 * 40, dtype=np.float32).reshape(12, 40) % 7
    cupyops.argmax(base, axis=1, device="simt")
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
        got = cupyops.argmax(x, axis=1, device="simt")
        np.testing.assert_array_equal(got, np.argmax(x, axis=1))
        assert calls, x.shape
    calls.clear()
    with force_64bit(), recording() as t:
        got = cupyops.argmax(np.ascontiguousarray(base[:, :37]), axis=1, device="simt")
    np.testing.assert_array_equal(got, np.argmax(base[:, :37], axis=1))
    assert calls and t.plans[-1].use_64bit


def test_class_entries_hold_no_arrays():
    """The class cache holds validated arguments and the backend: no plan, no array."""
    _call.clear()
    for f in (cupyops.argmax, cupyops.hardmax):
        f(np.ones((4, 9), np.float32), axis=1, device="simt")
    entries = _call._classes.values()
    assert len(entries) == 2
    for first in entries:
        for cell in first.__closure__ or ():
            v = cell.cell_contents
            assert not isinstance(v, np.ndarray)
            assert type(v).__name__ not in ("ArgreducePlan", "ArgreduceLaunches")


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


@pytest.mark.parametrize("name,kw", NONZERO_CASES)
def test_nonzero_family_new_shapes_take_the_class_route(name, kw, monkeypatch):
    _call.clear()
    rng = np.random.default_rng(3)
    f = getattr(cupyops, name)
    f(rng.integers(0, 2, (6, 40)).astype(np.int8), device="simt", **kw)
    calls = []
    real_place = _dispatch.place
    monkeypatch.setattr(_dispatch, "place", lambda x, d: calls.append(x.shape) or real_place(x, d))
    for shape in [(3, 31), (1, 1025), (33, 32), (2, 1023)]:
        x = rng.integers(0, 3, shape).astype(np.int8) * (rng.random(shape) < 0.3)
        got = f(x, device="simt", **kw)
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
        assert calls == [], f"{name} {kw} {shape}: the slow path ran"


def test_nonzero_family_shape_rules_go_back_to_the_slow_path():
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
    _call.clear()
    for f, want in ((cupyops.argwhere, (0, 2)), (cupyops.count_nonzero, ())):
        f(ones(3, 5), device="simt")
        got = f(ones(0, 5), device="simt")
        assert np.shape(got) == want
    cupyops.nonzero(ones(3, 5), device="simt")
    got = cupyops.nonzero(ones(0, 5), device="simt")
    assert len(got) == 2 and all(g.shape == (0,) for g in got)


@pytest.mark.parametrize("op,kw", [("argmax", dict(axis=1)), ("hardmax", dict(axis=1)),
                                   ("count_nonzero", dict(axis=1)), ("argwhere", {}),
                                   ("nonzero", {}), ("nonzero_coordinates", dict(size=5))])
def test_a_layout_is_cached_on_its_second_call(op, kw, monkeypatch):
    """A class entry serves a new layout's first call without storing anything for it (no
    cached entry); the second call stores one; the third is a hit, which neither plans nor
    reaches the class entry."""
    _call.clear()
    f = getattr(cupyops, op)
    f(np.ones((4, 9), np.float32), device="simt", **kw)          # the class
    x = np.arange(5 * 11, dtype=np.float32).reshape(5, 11) % 3
    want = [f(x, device="cpu", **kw)]
    entries = len(_call._entries)
    for call in range(3):
        with recording() as t:
            got = f(x, device="simt", **kw)
        if op == "nonzero":
            for a, b in zip(got, want[0]):
                np.testing.assert_array_equal(a, b)
        elif op == "nonzero_coordinates":
            np.testing.assert_array_equal(got[0], want[0][0])
            assert int(got[1]) == int(want[0][1])
        else:
            np.testing.assert_array_equal(got, want[0])
        assert t.plans, call
        if call == 0:
            assert len(_call._entries) == entries, "a first call stored an entry"
        elif call == 1:
            assert len(_call._entries) == entries + 1
            monkeypatch.setattr(_call, "_road", lambda *a: pytest.fail("class route"))
