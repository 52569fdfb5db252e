"""The type aliases of the public signatures (cupyops/ops/*/api.py), shared by every operator."""
from __future__ import annotations

from typing import Literal, TypeVar, Union

import numpy as np

__all__ = ["ArrayT", "Tie", "Axis", "Device", "IndexDType"]

#: an array of any supported library (NumPy, CuPy, torch, JAX, Dask, ...), or an array-like;
#: results have the input's array type (array-likes give NumPy arrays)
ArrayT = TypeVar("ArrayT")
Tie = Literal["first", "last"]
Axis = Union[int, "tuple[int, ...]", None]
#: "cpu", "cuda", "cuda:N", "simt", an int N (cuda:N) or a cupy.cuda.Device; None: the default
Device = Union[str, int, object, None]
#: an integer dtype: a NumPy dtype, a scalar type (np.int32) or its name ("int32")
IndexDType = Union[np.dtype, type, str, None]
