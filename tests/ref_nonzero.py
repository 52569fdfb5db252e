"""Brute-force reference for the nonzero family: a Python loop over np.ndindex."""
import numpy as np


def is_nonzero(v):
    if isinstance(v, (np.datetime64, np.timedelta64)):
        return bool(np.isnat(v)) or int(v.astype(np.int64)) != 0   # NaT is nonzero
    v = complex(v) if np.iscomplexobj(v) else v
    if isinstance(v, complex):
        return v.real != 0 or v.imag != 0 or v.real != v.real or v.imag != v.imag
    if isinstance(v, (float, np.floating)):
        return not (float(v) == 0.0)  # NaN != 0 → nonzero; -0.0 == 0 → zero
    return bool(v)


def ref_argwhere(x):
    x = np.asarray(x)
    rows = [idx for idx in np.ndindex(*x.shape) if is_nonzero(x[idx])]
    return np.array(rows, dtype=np.int64).reshape(len(rows), x.ndim)


def ref_count_nonzero(x, axes):
    x = np.asarray(x)
    kept = [i for i in range(x.ndim) if i not in axes]
    out = np.zeros([x.shape[i] for i in kept], np.int64)
    for idx in np.ndindex(*x.shape):
        if is_nonzero(x[idx]):
            out[tuple(idx[i] for i in kept)] += 1
    return out
