"""The two measured exceptions to "no private reads" (docs/design.md, "Fast reads").

A cached call costs a few microseconds, so two public interfaces are too slow for it:

* ``os.environ.get(name)`` encodes the key on every call: about 0.65 µs more per read than a
  lookup in the mapping os.environ keeps (``os.environ._data``, bytes on POSIX).
  :func:`env_reader` reads that mapping.
* ``a.__array_interface__["data"][0]`` builds a dict (about 1 µs); ``a.ctypes.data`` is no
  faster. :data:`numpy_data_ptr` reads the data pointer from NumPy's public C struct
  (``PyArrayObject``: the field after the object header) through ctypes in about 0.1 µs.

Each fast reader is used only where it agrees with the public way on probes made at import
(tests/test_fastread.py checks both give the same answers); otherwise the public way is used.
No other module reads a private attribute of another library.
"""
from __future__ import annotations

import os
import sys

import numpy as np

__all__ = ["env_reader", "env_reader_public", "numpy_data_ptr", "numpy_data_ptr_public"]


def env_reader_public(name: str):
    """``read()`` of environment variable ``name`` through the public ``os.environ.get``."""
    return lambda: os.environ.get(name)


def env_reader(name: str):
    """``read()`` of environment variable ``name`` as stored (bytes on POSIX, str elsewhere):
    None when unset. Reads the mapping behind os.environ when this platform has it, so
    changes made through ``os.environ`` (and monkeypatch) are seen at once."""
    try:
        data, key = os.environ._data, os.environ.encodekey(name)    # measured exception
        data.get(key)
    except (AttributeError, TypeError):  # pragma: no cover - another platform's os.environ
        return env_reader_public(name)
    return lambda: data.get(key)


def numpy_data_ptr_public(a) -> int:
    """The data pointer of a NumPy array through ``__array_interface__``."""
    return a.__array_interface__["data"][0]


def _numpy_data_ptr_reader():
    """:func:`numpy_data_ptr_public`'s answer read from the array struct, if the two agree on
    probes here; else the public reader."""
    import ctypes
    read = ctypes.c_void_p.from_address
    offset = object.__basicsize__            # ob_refcnt, ob_type

    def fast(a):
        return read(id(a) + offset).value or 0
    try:
        if sys.implementation.name != "cpython":
            return numpy_data_ptr_public
        probes = [np.empty(n, np.uint8) for n in (1, 100, 10000)]
        probes.append(probes[2][3:].view())
        probes.append(np.arange(12.0).reshape(3, 4)[1:, ::-2])
        if all(fast(p) == numpy_data_ptr_public(p) for p in probes):
            return fast
    except Exception:  # pragma: no cover - an exotic interpreter
        pass
    return numpy_data_ptr_public  # pragma: no cover


#: ``numpy_data_ptr(a)``: the address of element [0, ..., 0] of NumPy array ``a``
numpy_data_ptr = _numpy_data_ptr_reader()
