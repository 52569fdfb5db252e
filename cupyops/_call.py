"""The one road of a call, and the public functions that take it.

Every public function builds its call's key (:func:`key`) and looks it up:

1. **a cached entry** (the same layout, arguments and device as a call before): it runs the
   work directly;
2. else **a layout class seen before** (a new shape of a C-contiguous input, everything else
   as before): the op's class entry re-plans the shape and runs; this layout's entry is kept
   from its second call on;
3. else **the full road**: the op's argument rules, then its plan and runner (its ``calls``
   module); the entry and class entry it hands back are kept.

Inputs that are no NumPy or CuPy array take the interop layer first: a Dask array becomes a
lazy Dask result (cupyops.interop.dask), any other DLPack array (torch, JAX, array_api_strict)
is viewed zero-copy as a NumPy or CuPy array and comes back as its own type
(cupyops.interop.dlpack); array-likes go down the full road, which converts them.

The caching lives here alone: the ops hand over runners and decide nothing about keeping
them. A key holds everything the argument rules and the choice of path read: the input's
type, shape, strides and dtype (and, for the kernel paths, its data pointer mod 16 and
device), every argument as given with its type, ``device`` and ``CUPYOPS_DEVICE`` (and
``CUPYOPS_SIMT_CXX`` for the kernels on NumPy input), the ``force_64bit`` switch and the
workspace's type. A bad call differs from every accepted one in some part of its key, so it
always takes the full road and fails there with its usual message. Calls with ``out=`` and
tests' planner options have no key. Entries hold what is derived from a layout, never memory
(scratch comes from the caller's Workspace or the stream's arena on every call).
"""
from __future__ import annotations

import inspect

import numpy as np

from cupyops import ops as _ops
from cupyops.core.arrays import library_of_type
from cupyops.core.fastread import env_reader, numpy_data_ptr
from cupyops.core.lru import LRU
from cupyops.core.placement import force_64bit
from cupyops.core.trace import planner_options_set
from cupyops.interop import dask as _dask
from cupyops.interop import dlpack as _dlpack

__all__ = ["key", "lookup", "layout_class", "clear", "PUBLIC", "OPERATORS", "public_function"]

_ndarray = np.ndarray
_tuple = tuple

# --------------------------------------------------------------------------- the key

_env_device = env_reader("CUPYOPS_DEVICE")
# the SIMT layer's compiler: a kernel-path call on NumPy input checks on the full road that it
# works (cupyops.core.devices.require), so a key made under one compiler is no key under another
_env_simt_cxx = env_reader("CUPYOPS_SIMT_CXX")

#: argument types seen that are no tuple subclass (tuple itself aside)
_flat_kinds = {tuple, int, bool, float, str, type(None)}


def _flat(kinds) -> bool:
    """Whether no type in ``kinds`` is a subclass of tuple (tuple itself aside): a named tuple
    or a nested tuple would hide its items' types from the key (``P(0, 2) == P(False, 2)``),
    so such calls have no key. Types found flat are remembered."""
    for k in kinds:
        if k not in _flat_kinds:
            if issubclass(k, tuple):
                return False
            if len(_flat_kinds) < 512:
                _flat_kinds.add(k)
    return True


def _arg_kinds(args):
    """The types of ``args`` (a tuple argument, ``axis=(0, 2)``, by its items' types too), or
    None where the key cannot tell them apart."""
    kinds = tuple(map(type, args))
    if not _flat_kinds.issuperset(kinds) and not _flat(kinds):
        return None
    if _tuple in kinds:       # then the tuples' item types follow, in order
        items_kinds = tuple([tuple(map(type, a)) for a in args if type(a) is _tuple])
        for items in items_kinds:
            if _tuple in items or not _flat_kinds.issuperset(items) and not _flat(items):
                return None
        kinds = (kinds, *items_kinds)
    return kinds


def key(x, device, workspace, out, *args):
    """The call's key, or None where no entry may serve it (see the module docstring).

    A NumPy-path call (NumPy input, device "cpu" by argument or environment) has the flat
    key ``(*args, shape, strides, dtype, device, environment's device, *kinds)`` that the
    public functions build inline for their common arguments (:data:`_PLAIN`); a kernel-path
    call the nested ``(args, kinds, ...)`` of :func:`layout_class`."""
    if out is not None:
        return None
    t = type(x)
    # the arguments' types too: True == 1 == 1.0 as dict keys, but the rules accept only some
    kinds = _arg_kinds(args[1:])
    if kinds is None:
        return None
    if t is _ndarray:
        if device is not None:
            env = None
            cpu = device == "cpu"
        else:
            env = _env_device()              # bytes on POSIX, str elsewhere
            cpu = env is None or env == b"cpu" or env == "cpu"
        if cpu:
            if workspace is not None:
                return None
            return (*args, x.shape, x.strides, x.dtype, device, env, *kinds)
        if planner_options_set():
            return None
        return (args, kinds, x.shape, x.strides, x.dtype, (device, env, _env_simt_cxx()),
                type(workspace), numpy_data_ptr(x) % 32, force_64bit.get())
    if library_of_type(t) != "cupy" or planner_options_set():
        return None
    return (args, kinds, t, x.shape, x.strides, x.dtype, device, type(workspace),
            x.data.ptr % 32, x.data.device_id, force_64bit.get())


#: argument types for which a public function builds its NumPy-path key inline
_PLAIN = frozenset({type(None), int})


def layout_class(k):
    """The key ``k`` of a kernel-path call without its shape and strides, with the number of
    dimensions instead: NumPy input (9 items) or CuPy input (11); None for the NumPy path
    (a flat key), which has no class entries."""
    if type(k[0]) is not tuple:
        return None
    n = len(k)
    # (the pointer mod 16, not the key's mod 32: a class entry plans each new array from its
    # own pointer, and NumPy's allocations agree only mod 16)
    if n == 9:
        return (k[0], k[1], len(k[2])) + k[4:7] + (k[7] % 16, k[8])
    if n == 11:
        return (k[0], k[1], k[2], len(k[3])) + k[5:8] + (k[8] % 16,) + k[9:]
    return None


# --------------------------------------------------------------------------- the caches

_entries = LRU(4096)
_entry_peek, _entry_touch = _entries.peek, _entries.touch
_classes = LRU(1024)

# Keys a class entry served once, without keeping anything for them: a layout is kept on its
# second call. A first call then leaves no entry behind, so its objects are freed at once and
# their memory reused while it is still in the CPU's caches (keeping every first call, and
# evicting another entry for it, cost a fifth of a first call); shapes that never repeat, as
# in a pipeline whose shapes vary, never fill the caches. Bounded: emptied when it reaches
# _SERVED_ONCE_MAX keys (those layouts are then kept on their third call). Dict operations
# are atomic under the GIL.
_served_once: dict = {}
_SERVED_ONCE_MAX = 4096


def _second_call(k) -> bool:
    """Whether the layout of key ``k`` was served once before (then keep it now); else note
    that it has been served once."""
    if _served_once.pop(k, False):
        return True
    if len(_served_once) >= _SERVED_ONCE_MAX:
        _served_once.clear()
    _served_once[k] = True
    return False


def lookup(x, device, workspace, out, *args):
    """``(key, entry)``: the key and its cached entry (None on a miss, or without a key)."""
    k = key(x, device, workspace, out, *args)
    if k is None:
        return None, None
    try:
        hit = _entry_peek(k)
    except TypeError:          # an unhashable argument: the full road says what is wrong
        return None, None
    if hit is not None and type(k[0]) is tuple:
        try:
            _entry_touch(k)    # LRU order (evicted in between by another thread: still valid)
        except KeyError:
            pass
    return k, hit


def clear() -> None:
    """Forget every cached entry and layout class."""
    _entries.clear()
    _classes.clear()
    _served_once.clear()


def _road(op, k, x, workspace, args, arrays=()):
    """Steps 2 and 3 of the module docstring, after a miss. ``arrays``: the operator's array
    arguments besides x, which its entries take at each call. Every error it raises starts
    with the public function's name (:func:`_named`)."""
    try:
        return _miss(op, k, x, workspace, args, arrays)
    except Exception as exc:
        _named(exc, op.name)
        raise


def _named(exc, name) -> None:
    """Put ``name: `` in front of ``exc``'s message where it is not there yet (a device's, an
    array conversion's or a library's error). Only a message that is the exception's one
    argument is rewritten; any other exception gets a note that names the function."""
    prefix = f"{name}: "
    args = exc.args
    if len(args) == 1 and isinstance(args[0], str) and str(exc) == args[0]:
        if not args[0].startswith(prefix):
            exc.args = (prefix + args[0],)
    elif not str(exc).startswith(prefix) and hasattr(exc, "add_note"):   # (Python >= 3.11)
        exc.add_note(f"(raised by cupyops.{name})")


def _miss(op, k, x, workspace, args, arrays):
    if k is not None:
        if x.flags.c_contiguous:
            ck = layout_class(k)
            first = None if ck is None else _classes.get(ck)
            if first is not None:
                served = first(x, workspace, _second_call(k), *arrays)
                if served is not None:
                    res, entry = served
                    if entry is not None:
                        _entries.put(k, entry)
                    return res
    elif type(x) is not _ndarray:
        lib = library_of_type(type(x))
        if lib not in (None, "numpy", "cupy"):
            return _other_library(op, lib, x, args)
    res, entry, cls = op.road(x, *args)
    if k is not None and entry is not None:
        try:
            _entries.put(k, entry)
        except TypeError:      # an unhashable argument the rules accepted
            return res
        if cls is not None and x.flags.c_contiguous:
            ck = layout_class(k)
            if ck is not None:
                _classes.put(ck, cls)
    return res


def _other_library(op, lib, x, args):
    """A Dask array, or a DLPack array of another library (see the module docstring)."""
    kw = dict(zip(op.params, args))
    if lib == "dask":
        if op.dask is None:
            raise TypeError(f"{op.name}: Dask arrays are not supported")
        return _dask.call(op.dask, x, kw, PUBLIC)
    fn = PUBLIC[op.name]
    if op.positional:          # (the adapter passes keywords: its positional-only ones by place)
        fn = _positional(fn, op.positional)
    return _dlpack.call(fn, lib, x, kw)


def _positional(fn, names):
    """``fn`` called with keywords, those in ``names`` passed by position after x."""
    def call(x, **kw):
        return fn(x, *[kw.pop(n) for n in names], **kw)
    call.__name__ = fn.__name__
    return call


# --------------------------------------------------------------------------- the public functions
#
# Each public function is generated once from its operator's descriptor (cupyops/ops/*/api.py):
# the descriptor's signature, with a body that builds the call's key inline for the NumPy path
# (NumPy input, device "cpu" by argument or environment, no out= or workspace=, no tuple
# argument: a flat tuple of the arguments, the layout, the device, the environment's device and
# the arguments' types; a hit is not moved to the LRU's recent end, so the lookup is one hash),
# then the general lookup, then the road. A function call per key would cost the inline key its
# sub-microsecond budget, so the code is generated (exec, here and in core/structs.py only).
# A cached entry's error gets the function's name too (_named): the try costs nothing until
# something raises (Python 3.11's exception table: the per-op overhead did not move).

_TEMPLATE = """\
def {name}({params}):
    try:
        if type(x) is _ndarray{plain} and (device is None or device == "cpu"):
            try:
                hit = _entry_peek((_NAME, {keyvals}x.shape, x.strides, x.dtype, device,
                                   _env_device() if device is None else None{keytypes}))
            except TypeError:      # an unhashable argument: the full road says what is wrong
                hit = None
            if hit is not None:
                return hit(x, None)
        k, hit = _lookup(x, device, {workspace}, {out}, _NAME{lookupvals})
        if hit is not None:
            return hit(x, {workspace})
    except Exception as exc:       # (a cached entry's error: a workspace too small, memory)
        _named(exc, _NAME)
        raise
    return _road(_OP, k, x, {workspace}, ({args},))
"""

# Operators with array arguments besides x (their descriptor's ``array_args``): no inline key
# (the general key holds each array's layout, _ArrayLayout), and entries get the arrays.
_TEMPLATE_ARRAYS = """\
def {name}({params}):
    k, hit = _lookup(x, device, {workspace}, {out}, _NAME{lookupvals})
    if hit is not None:
        try:
            return hit(x, {workspace}, {arrays})
        except Exception as exc:
            _named(exc, _NAME)
            raise
    return _road(_OP, k, x, {workspace}, ({args},), ({arrays}))
"""


class _ArrayLayout:
    """An array argument as a key holds it: its type, shape, strides, dtype and device, not
    its values (hashable, and no tuple: the key's type check reads it as one argument)."""

    __slots__ = ("key",)

    def __init__(self, key):
        self.key = key

    def __eq__(self, other):
        return type(other) is _ArrayLayout and other.key == self.key

    def __hash__(self):
        return hash(self.key)


def _layout(a):
    """The key's part for an array argument: an _ArrayLayout for a NumPy or CuPy array,
    anything else as it is (a list is unhashable: no key, the full road decides)."""
    t = type(a)
    if t is _ndarray:
        return _ArrayLayout((t, a.shape, a.strides, a.dtype))
    if library_of_type(t) == "cupy":
        return _ArrayLayout((t, a.shape, a.strides, a.dtype, a.data.device_id))
    return a


def _parameters(op) -> str:
    """The signature's parameters as source, defaults as names bound in the namespace."""
    out, kind = [], None
    for p in inspect.signature(op.spec).parameters.values():
        if kind is inspect.Parameter.POSITIONAL_ONLY and p.kind is not kind:
            out.append("/")
        if p.kind is inspect.Parameter.KEYWORD_ONLY and kind is not p.kind:
            out.append("*")
        kind = p.kind
        out.append(p.name if p.default is p.empty else f"{p.name}=_default_{p.name}")
    return ", ".join(out)


def public_function(op):
    """The public function of the descriptor ``op``: its signature, annotations, docstring
    (``__wrapped__`` is the descriptor's signature function, whose source they are)."""
    keys = op.key_args
    plain = "".join(f" and type({a}) in _PLAIN" for a in op.tuple_args)
    if op.takes("out"):
        plain = " and out is None" + plain
    if op.takes("workspace"):
        plain = " and workspace is None" + plain
    src = (_TEMPLATE_ARRAYS if op.array_args else _TEMPLATE).format(
        name=op.name, params=_parameters(op), plain=plain,
        keyvals="".join(f"{a}, " for a in keys),
        keytypes="".join(f", type({a})" for a in keys),
        lookupvals="".join(f", _layout({a})" if a in op.array_args else f", {a}" for a in keys),
        args=", ".join(op.params), arrays="".join(f"{a}, " for a in op.array_args),
        workspace="workspace" if op.takes("workspace") else "None",
        out="out" if op.takes("out") else "None")
    namespace = {"_ndarray": _ndarray, "_PLAIN": _PLAIN, "_entry_peek": _entry_peek,
                 "_layout": _layout, "_env_device": _env_device, "_lookup": lookup,
                 "_road": _road, "_named": _named, "_OP": op,
                 "_NAME": op.name, **{f"_default_{n}": v for n, v in op.defaults.items()}}
    exec(compile(src, f"<cupyops public function {op.name}>", "exec"), namespace)
    fn = namespace[op.name]
    fn.__doc__ = op.spec.__doc__
    fn.__module__ = "cupyops"
    fn.__qualname__ = op.name
    fn.__annotations__ = dict(op.annotations)
    fn.__wrapped__ = op.spec
    fn.__signature__ = inspect.signature(op.spec)
    return fn


#: every operator's descriptor (cupyops.ops.operators)
OPERATORS = _ops.operators()
#: the public functions by name (the interop layer calls them on chunks and views)
PUBLIC = {op.name: public_function(op) for op in OPERATORS}
_dask.use_public(PUBLIC)
