"""Hypothesis strategies: arrays of every supported dtype in every layout, with values from tiny
sets so that ties, NaN, ±inf and -0.0 really happen."""
import numpy as np
from hypothesis import strategies as st

REAL_DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
               "float16", "float32", "float64"]
COMPLEX_DTYPES = ["complex64", "complex128"]
#: datetime64 / timedelta64: values are int64 counts, -2**63 is NaT
DATETIME_DTYPES = ["datetime64[s]", "timedelta64[ns]"]
LAYOUTS = ["C", "F", "transposed", "negative", "step", "broadcast", "nonnative", "unaligned"]


def tiny_values(dtype):
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return [False, True]
    if dt.kind == "u":
        return [0, 1, 2, int(np.iinfo(dt).max)]
    if dt.kind == "i":
        return [int(np.iinfo(dt).min), -1, 0, 1, 2, int(np.iinfo(dt).max)]
    if dt.kind == "f":
        return [-1.0, -0.0, 0.0, 1.0, 2.0, np.nan, np.inf, -np.inf]
    if dt.kind in "mM":
        return [-2**63, -2**63 + 1, -1, 0, 1, 2**63 - 1]
    return [0, 1j, -0.0 + 0j, 1 + 1j, complex(np.nan, 0), 2, complex(0, np.nan),
            complex(1, -0.0), complex(1, np.inf), complex(-np.inf, 1)]


def _array(values, dt):
    if dt.kind in "mM":
        return np.array(values, np.int64).view(dt)
    return np.array(values, dtype=dt)


@st.composite
def shapes(draw, min_dims=0, max_dims=4, max_side=5, allow_empty=True):
    nd = draw(st.integers(min_dims, max_dims))
    lo = 0 if allow_empty else 1
    return tuple(draw(st.integers(lo, max_side)) for _ in range(nd))


def _materialize(values, dtype, shape, layout, rng_draw):
    """Return an array with `shape` and the given layout holding `values` (flat, row-major)."""
    dt = np.dtype(dtype)
    base = _array(values, dt).reshape(shape) if shape else _array(values[:1], dt).reshape(())
    if layout == "C" or base.ndim == 0:
        return np.ascontiguousarray(base)
    if layout == "F":
        return np.asfortranarray(base)
    if layout == "transposed":
        perm = rng_draw(st.permutations(range(base.ndim)))
        inv = np.argsort(perm)
        return np.ascontiguousarray(base.transpose(perm)).transpose(inv)
    if layout == "negative":
        big = np.empty(tuple(2 * n for n in shape), dt)
        view = big[tuple(slice(None, None, -2) for _ in shape)]
        view[...] = base
        return view
    if layout == "step":
        big = np.empty(tuple(3 * n + 1 for n in shape), dt)
        view = big[tuple(slice(1, 1 + 3 * n, 3) for n in shape)]
        view[...] = base
        return view
    if layout == "nonnative":
        return base.astype(dt.newbyteorder("S"))
    if layout == "unaligned":
        raw = np.zeros(base.nbytes + 1, np.uint8)
        view = raw[1:].view(dt).reshape(shape) if dt.itemsize > 1 else raw[1:].view(dt).reshape(shape)
        view[...] = base
        return view
    raise ValueError(layout)


@st.composite
def arrays(draw, dtypes=REAL_DTYPES, min_dims=0, max_dims=4, max_side=5, allow_empty=True):
    dtype = draw(st.sampled_from(dtypes))
    layout = draw(st.sampled_from(LAYOUTS))
    if layout == "broadcast":
        # a zero-stride axis: broadcast a smaller array along a drawn axis
        shape = draw(shapes(max(min_dims, 1), max(max_dims, 1), max_side, allow_empty))
        axis = draw(st.integers(0, len(shape) - 1))
        small_shape = tuple(1 if i == axis else n for i, n in enumerate(shape))
        n = int(np.prod(small_shape))
        values = draw(st.lists(st.sampled_from(tiny_values(dtype)), min_size=n, max_size=n))
        small = _array(values, np.dtype(dtype)).reshape(small_shape)
        return np.broadcast_to(small, shape)
    shape = draw(shapes(min_dims, max_dims, max_side, allow_empty))
    n = max(1, int(np.prod(shape)))
    values = draw(st.lists(st.sampled_from(tiny_values(dtype)), min_size=n, max_size=n))
    if not shape or int(np.prod(shape)) == 0:
        return _materialize(values, dtype, shape, "C", draw) if not shape else np.empty(shape, dtype)
    return _materialize(values, dtype, shape, layout, draw)


@st.composite
def axis_args(draw, ndim):
    """None, an int (maybe negative) or a tuple of distinct axes (maybe negative, any order)."""
    kind = draw(st.sampled_from(["none", "int", "tuple"] if ndim else ["none", "tuple"]))
    if kind == "none":
        return None
    if kind == "int":
        a = draw(st.integers(0, ndim - 1))
        return a - ndim if draw(st.booleans()) else a
    chosen = draw(st.lists(st.integers(0, ndim - 1), unique=True, max_size=ndim)) if ndim else []
    return tuple(a - ndim if draw(st.booleans()) else a for a in chosen)
