"""The operators: one folder per family (its rules, NumPy path, planner, launch code, Dask
implementation, selftest references and benchmark cases), each operator one descriptor
(cupyops.core.operator.Operator) in its folder's ``api.py``. :func:`operators` is the one
registry that cupyops._call, the array namespace, Dask, the selftest, the NVRTC tool and the
benchmark iterate."""
from __future__ import annotations

import importlib

__all__ = ["FAMILIES", "operators", "operator"]

#: the registration: the op folders, in the order their operators are listed
FAMILIES = ("argreduce", "nonzero", "segment")

_OPERATORS: list = []


def operators() -> tuple:
    """Every operator's descriptor, family by family in :data:`FAMILIES` order."""
    if not _OPERATORS:
        ops = [op for family in FAMILIES
               for op in importlib.import_module(f"cupyops.ops.{family}.api").OPERATORS]
        names = [op.name for op in ops]
        if len(set(names)) != len(names):
            raise RuntimeError(f"cupyops.ops: two operators share a name: {names}")
        _OPERATORS[:] = ops
    return tuple(_OPERATORS)


def operator(name: str):
    """The descriptor of the operator called ``name`` (``KeyError`` if there is none)."""
    for op in operators():
        if op.name == name:
            return op
    raise KeyError(f"cupyops has no operator {name!r}; it has "
                   f"{', '.join(op.name for op in operators())}")
