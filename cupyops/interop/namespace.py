"""``cupyops.array_namespace(*arrays)``: the arrays' own array-API namespace with cupyops'
searching functions in it.

The base namespace is array-api-compat's for the arrays (``array_api_compat.numpy`` for NumPy,
``array_api_compat.cupy``, ``array_api_compat.torch``, and ``array_api_strict`` itself). The
namespace returned holds every public operator of cupyops (those the array API defines take
its signatures as subsets of ours; the others are extensions); every other name is the base
namespace's. One namespace object per base, made on first use.
"""
from __future__ import annotations

import types

__all__ = ["array_namespace"]

_CACHE: dict = {}


class CupyopsNamespace(types.ModuleType):
    """A module-like namespace: cupyops' functions, then the base namespace's names."""

    def __init__(self, base, functions):
        super().__init__(f"cupyops.array_namespace[{base.__name__}]",
                         f"{base.__name__} with cupyops' {', '.join(functions)}")
        self.__base__ = base
        self.__cupyops__ = tuple(functions)
        for name, fn in functions.items():
            setattr(self, name, fn)

    def __getattr__(self, name):   # only for names not set above
        if name in ("__path__", "__file__", "__base__", "__cupyops__"):   # not a package, no file of its own
            raise AttributeError(name)
        return getattr(self.__base__, name)

    def __dir__(self):
        return sorted(set(dir(self.__base__)) | set(self.__cupyops__))

    def __repr__(self):
        return f"<cupyops array namespace over {self.__base__.__name__}>"


def array_namespace(arrays, api_version, functions):
    """The array-API namespace of ``arrays`` (NumPy, CuPy, torch, array_api_strict, ... as
    array-api-compat knows them) holding cupyops' public ``functions`` (by name); every other
    name is the library's own. Arrays of different libraries are a ``TypeError``."""
    try:
        import array_api_compat
    except ImportError:
        raise ImportError("cupyops.array_namespace needs array-api-compat: "
                          "pip install array-api-compat") from None
    if not arrays:
        raise TypeError("array_namespace: give at least one array")
    try:
        base = array_api_compat.array_namespace(*arrays, api_version=api_version)
    except TypeError as exc:
        raise TypeError(f"array_namespace: {exc}") from None
    ns = _CACHE.get(id(base))
    if ns is None or ns.__base__ is not base:
        ns = _CACHE[id(base)] = CupyopsNamespace(base, functions)
    return ns
