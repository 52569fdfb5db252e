"""``cupyops.array_namespace(*arrays)``: the arrays' own array-API namespace with cupyops'
searching functions in it.

The base namespace is array-api-compat's for the arrays (``array_api_compat.numpy`` for NumPy,
``array_api_compat.cupy``, ``array_api_compat.torch``, and ``array_api_strict`` itself). The
namespace returned holds cupyops' ``argmax``, ``argmin``, ``nonzero`` and ``count_nonzero``
(the array API's signatures are subsets of ours) and the extensions ``nanargmax``,
``nanargmin``, ``hardmax``, ``argwhere`` and ``nonzero_coordinates``; every other name is the
base namespace's. One namespace object per base, made on first use.
"""
from __future__ import annotations

import types

__all__ = ["array_namespace", "FUNCTIONS"]

#: the names cupyops provides in the namespace; everything else comes from the base
FUNCTIONS = ("argmax", "argmin", "nonzero", "count_nonzero", "nanargmax", "nanargmin",
             "hardmax", "argwhere", "nonzero_coordinates")

_CACHE: dict = {}


class CupyopsNamespace(types.ModuleType):
    """A module-like namespace: cupyops' FUNCTIONS, then the base namespace's names."""

    def __init__(self, base, functions):
        super().__init__(f"cupyops.array_namespace[{base.__name__}]",
                         f"{base.__name__} with cupyops' {', '.join(FUNCTIONS)}")
        self.__base__ = base
        for name in FUNCTIONS:
            setattr(self, name, functions[name])

    def __getattr__(self, name):   # only for names not set above
        if name in ("__path__", "__file__", "__base__"):   # not a package, no file of its own
            raise AttributeError(name)
        return getattr(self.__base__, name)

    def __dir__(self):
        return sorted(set(dir(self.__base__)) | set(FUNCTIONS))

    def __repr__(self):
        return f"<cupyops array namespace over {self.__base__.__name__}>"


def array_namespace(arrays, api_version, functions):
    """The array-API namespace of ``arrays`` (NumPy, CuPy, torch, array_api_strict, ... as
    array-api-compat knows them) whose argmax, argmin, nonzero and count_nonzero (plus
    nanargmax, nanargmin, hardmax, argwhere, nonzero_coordinates) are cupyops'; every other
    name is the library's own. Arrays of different libraries are a ``TypeError``.
    ``functions``: cupyops' public functions by name."""
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
