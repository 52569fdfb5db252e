"""The selftest's references for the argreduce family (cupyops.tools.selftest runs them
through each operator's descriptor): argmin / argmax / nanarg* / hardmax computed from NumPy
primitives (never from cupyops' own NumPy path), and the calls each selftest input gets."""
from __future__ import annotations

import numpy as np

from cupyops.core.operator import SelftestCall

__all__ = ["argreduce_calls", "hardmax_calls", "values_calls", "ref_argreduce", "ref_hardmax",
           "winners_ref", "ARGMIN_EXAMPLES",
           "ARGMAX_EXAMPLES", "HARDMAX_EXAMPLES"]

# DirectML's worked examples (DML_ARGMIN_OPERATOR_DESC, DML_ARGMAX_OPERATOR_DESC,
# DML_ACTIVATION_HARDMAX1_OPERATOR_DESC): (label, call(function, device), expected)
_M = [[1, 2, 3], [3, 0, 4], [2, 5, 2]]
_H = [[[12, 0], [-101, 11]], [[3, 234], [0, -101]]]


def _f32(v):
    return np.array(v, np.float32)


def _axes_label(axes):
    return "axes (" + ",".join(map(str, axes)) + ("," if len(axes) == 1 else "") + ")"


def _seed_axes(expected):
    """Reductions of _M over each of ``axes`` with keepdims (DirectML's output shape)."""
    return tuple((_axes_label(axes), lambda f, d, axes=axes: f(
        _f32(_M), axes if len(axes) > 1 else axes[0], keepdims=True, device=d), want)
        for axes, want in expected)


def _seed_ties(values, first, last):
    """The 1-d example of ``values`` with both tie directions."""
    label = "[" + ",".join(map(str, values)) + "]"
    return ((f"{label} first", lambda f, d: f(_f32(values), device=d), first),
            (f"{label} last", lambda f, d: f(_f32(values), tie="last", device=d), last))


ARGMIN_EXAMPLES = _seed_axes((((0,), [[0, 1, 2]]), ((1,), [[0], [1], [0]]), ((0, 1), [[4]]))) \
    + _seed_ties([1, 2, 3, 2, 1], 0, 4)
ARGMAX_EXAMPLES = _seed_axes((((0,), [[1, 2, 1]]), ((1,), [[2], [2], [1]]), ((0, 1), [[7]]))) \
    + _seed_ties([3, 2, 1, 2, 3], 0, 4)
HARDMAX_EXAMPLES = tuple(
    (_axes_label(axes), lambda f, d, axes=axes: f(
        _f32(_H), axes if len(axes) > 1 else axes[0], device=d), want)
    for axes, want in (((1,), [[[1, 0], [0, 1]], [[1, 1], [0, 0]]]),
                       ((0,), [[[1, 0], [0, 1]], [[0, 1], [1, 0]]]),
                       ((0, 2), [[[0, 0], [0, 1]], [[0, 1], [0, 0]]])))


def _comparable(x):
    """(values NumPy orders as the spec does, NaN/NaT mask)."""
    dt = x.dtype
    if dt.kind in "mM":
        return x.view(np.int64), np.isnat(x)
    if dt.kind == "V":                                  # bfloat16: exact float32 widening
        f = (x.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
        return f, np.isnan(f)
    if dt.kind in "fc":
        return x, np.isnan(x)
    return (x.astype(np.uint8) if dt.kind == "b" else x), np.zeros(x.shape, bool)


def _groups(x, axes):
    """x as (groups, group size) with the reduced axes last, in increasing axis order."""
    kept = [i for i in range(x.ndim) if i not in axes]
    y = np.transpose(x, kept + list(axes))
    return y.reshape(int(np.prod([x.shape[i] for i in kept])), -1)


def _pick(v, nan, kind, tie, skip_nan):
    """Index per row of the extreme (NaN the extreme unless skipped), tie first or last."""
    rows = np.arange(v.shape[0])
    valid = ~nan
    if skip_nan and not valid.any(1).all():
        raise ValueError("All-NaN slice encountered")
    filler = v[rows, valid.argmax(1)][:, None]        # a valid value of the row
    filled = np.where(valid, v, filler)
    m = (filled.max if kind == "max" else filled.min)(axis=1, keepdims=True)
    hit = (filled == m) & valid
    if not skip_nan:
        any_nan = nan.any(1, keepdims=True)
        hit = np.where(any_nan, nan, hit)
    first = hit.argmax(1)
    last = hit.shape[1] - 1 - hit[:, ::-1].argmax(1)
    return (first if tie == "first" else last), rows


def ref_argreduce(x, op, axis, tie, keepdims=False, dtype=np.int64):
    axes = tuple(range(x.ndim)) if axis is None else tuple(
        sorted(a % x.ndim for a in (axis if isinstance(axis, tuple) else (axis,))))
    kept = tuple(n for i, n in enumerate(x.shape) if i not in axes)
    if not axes:          # every element its own group (a 0-d x): a NaN one is all NaN
        if op.startswith("nan") and x.dtype.kind not in "mM" and _comparable(x)[1].any():
            raise ValueError("All-NaN slice encountered")
        return np.zeros(x.shape, dtype)
    if any(x.shape[a] == 0 for a in axes):
        raise ValueError("attempt to get argmax of an empty sequence")
    if 0 in kept:
        res = np.zeros(kept, dtype)
        return res.reshape([1 if i in axes else n for i, n in enumerate(x.shape)]) \
            if keepdims else res
    v, nan = _comparable(x)
    skip = op.startswith("nan") and x.dtype.kind not in "mM"
    idx, _ = _pick(_groups(v, axes), _groups(nan, axes), op[-3:], tie, skip)
    res = idx.astype(dtype).reshape(kept)
    return res.reshape([1 if i in axes else n for i, n in enumerate(x.shape)]) if keepdims \
        else res


def ref_hardmax(x, axis, tie):
    axes = tuple(range(x.ndim)) if axis is None else tuple(
        sorted(a % x.ndim for a in (axis if isinstance(axis, tuple) else (axis,))))
    if x.size == 0:
        return np.zeros(x.shape, x.dtype)
    if not axes:
        return np.ones(x.shape, x.dtype)
    v, nan = _comparable(x)
    idx, rows = _pick(_groups(v, axes), _groups(nan, axes), "max", tie, False)
    onehot = np.zeros(_groups(v, axes).shape, bool)
    onehot[rows, idx] = True
    kept = [i for i in range(x.ndim) if i not in axes]
    shaped = onehot.reshape([x.shape[i] for i in kept] + [x.shape[i] for i in axes])
    back = np.transpose(shaped, np.argsort(kept + list(axes)))
    return back.astype(x.dtype) if x.dtype.kind != "V" else _bf16_ones(back, x.dtype)


def _bf16_ones(mask, dt):
    return (mask.astype(np.uint16) * np.uint16(0x3F80)).view(dt)


def argreduce_calls(kind, skip_nan, case, rng):
    """argmin/argmax/nanarg* on one selftest input: ties both ways, keepdims both ways, index
    dtypes of 8, 4 and 1 byte (uint8 where the group fits it)."""
    x, axis = case.x, case.axes
    if x.ndim == 0 and axis not in (None, 0, -1):
        return []
    op = ("nanarg" if skip_nan else "arg") + kind
    out = []
    for tie, keep, dt in (("first", False, np.int64), ("last", True, np.int32),
                          ("last", False, np.uint8 if x.size <= 255 else np.uint32)):
        kw = dict(axis=axis, tie=tie, keepdims=keep, dtype=dt)
        out.append(SelftestCall(f"axis={axis} tie={tie} dtype={np.dtype(dt)}", kw,
                                lambda kw=kw: ref_argreduce(x, op, axis, kw["tie"],
                                                            kw["keepdims"], kw["dtype"])))
    return out


def hardmax_calls(case, rng):
    """hardmax on one selftest input, both ties (datetime inputs have no one-hot)."""
    x, axis = case.x, case.axes
    if x.dtype.kind in "mM":
        return []
    return [SelftestCall(f"axis={axis} tie={t}", dict(axis=axis, tie=t),
                         lambda t=t: ref_hardmax(x, axis, t)) for t in ("first", "last")]


def winners_ref(x, axes, idx):
    """The elements of x at row-major indices ``idx`` over the sorted reduced ``axes`` (kept
    shape), read through a transposed copy: bit for bit."""
    kept = [i for i in range(x.ndim) if i not in axes]
    moved = np.transpose(x, kept + list(axes)).reshape(
        [x.shape[i] for i in kept] + [-1])
    return np.take_along_axis(moved, np.asarray(idx, np.intp)[..., None], axis=-1)[..., 0]


def values_calls(kind, case, rng):
    """max_and_argmax / min_and_argmin on one selftest input: argmax's reference index, and the
    element there (compared bit for bit by the selftest)."""
    x, axis = case.x, case.axes
    if x.ndim == 0 and axis not in (None, 0, -1):
        return []
    op = "arg" + kind

    def ref(tie, keep, dt):
        idx = ref_argreduce(x, op, axis, tie, False, dt)
        axes = tuple(range(x.ndim)) if axis is None else tuple(
            sorted(a % max(x.ndim, 1) for a in (axis if isinstance(axis, tuple) else (axis,))))
        if x.ndim == 0 or not axes:
            vals = x.copy()
        elif idx.size == 0:
            vals = np.empty(idx.shape, x.dtype)
        else:
            vals = winners_ref(x, axes, idx)
        shape = [1 if i in axes else n for i, n in enumerate(x.shape)] if keep else idx.shape
        return np.asarray(vals, x.dtype).reshape(shape), idx.reshape(shape)
    return [SelftestCall(f"axis={axis} tie={tie} keepdims={keep} dtype={np.dtype(dt)}",
                         dict(axis=axis, tie=tie, keepdims=keep, dtype=dt),
                         lambda t=tie, k=keep, d=dt: ref(t, k, d))
            for tie, keep, dt in (("first", False, np.int64), ("last", True, np.int32))]
