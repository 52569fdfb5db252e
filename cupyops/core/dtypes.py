"""Dtype helpers every layer shares: bfloat16, datetime bits, element alignment, and the
dtype sets of the common argument rules (docs/api.md).

bfloat16: the dtype, when ml_dtypes is installed, and the CPU path's exact widening.

ml_dtypes is not a dependency of cupyops: :func:`dtype` imports it on first use and gives
``None`` without it. A bfloat16 value is the upper half of a float32, so the NumPy path widens
bf16 bits to float32 exactly (``bits << 16``) and answers with float32's rules, which are the
bf16 rules (NaN the extreme, -0.0 == 0.0); the kernels read the bits themselves
(``cupyops_bfloat16`` in kernels/common.cuh).
"""
from __future__ import annotations

import numpy as np

_DTYPE = []          # [dtype or None] once looked up

#: bits of 1.0 in bfloat16 (hardmax's one)
ONE_BITS = 0x3F80


def dtype():
    """NumPy's bfloat16 dtype (ml_dtypes), or None when ml_dtypes is not installed."""
    if not _DTYPE:
        try:
            import ml_dtypes
        except ImportError:
            _DTYPE.append(None)
        else:
            _DTYPE.append(np.dtype(ml_dtypes.bfloat16))
    return _DTYPE[0]


def is_bf16(dt) -> bool:
    """Whether ``dt`` is ml_dtypes' bfloat16 (CuPy uses the same NumPy dtype)."""
    return dt.kind == "V" and dt.name == "bfloat16"


def widen(x: np.ndarray) -> np.ndarray:
    """float32 with exactly x's values (x: bf16, or its uint16 bits); a new array, x's layout."""
    w = x.view(np.uint16).astype(np.uint32)
    np.left_shift(w, 16, out=w)
    return w.view(np.float32)


def narrow_bits(f: np.ndarray) -> np.ndarray:
    """uint16 bits of float32 values that bfloat16 holds exactly (0, 1 of a one-hot)."""
    return np.right_shift(f.view(np.uint32), 16).astype(np.uint16)


def narrow(f: np.ndarray, dt) -> np.ndarray:
    """``narrow_bits`` viewed as the bf16 dtype ``dt``."""
    return narrow_bits(f).view(dt)


def datetime_as_int64(x):
    """A datetime64 / timedelta64 array (any unit, any byte order) viewed as int64 of the same
    bits: the kernels and the nonzero test read these (NaT = INT64_MIN: nonzero, and the
    extreme of argmin/argmax)."""
    bo = x.dtype.byteorder
    return x.view(np.dtype(np.int64).newbyteorder(bo if bo in "<>" else "="))


def element_alignment(dtype) -> int:
    """The alignment every element of ``dtype`` has on a GPU: its size, half of it for complex
    (two floats)."""
    dt = np.dtype(dtype)
    return dt.itemsize // 2 if dt.kind == "c" else dt.itemsize


#: every value dtype of the common rules but bfloat16 (ml_dtypes) and datetime64 /
#: timedelta64 (any unit), which the rules name separately
VALUE_DTYPES = tuple(np.dtype(t) for t in (
    np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
    np.float16, np.float32, np.float64, np.complex64, np.complex128))
DATETIME_NAMES = ("datetime64", "timedelta64")
