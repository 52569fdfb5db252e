"""Kernel modules: C++ type names, name expressions, source inlining and the module cache.

This is the one place that

* turns NumPy dtypes into the C++ type names the kernels are templated on (:data:`CTYPES`),
* builds name expressions such as ``"kernel<float, true, 4>"``
  (:func:`name_expression`),
* reads ``kernels/*.cu`` through :mod:`importlib.resources` and inlines their quoted
  ``#include "x.cuh"`` headers (:func:`module_source`) — CuPy's on-disk kernel cache hashes the
  source text but not headers found through ``-I``, so a header edit would otherwise be served a
  stale cubin,
* shapes every compiled module, for CUDA and simt alike: a family's source with the name
  expressions one module instantiates (:func:`module_source`, :func:`compiled_module`), and keeps
  one compiled module per ``(backend, device, family, expressions)`` (:func:`get_module`,
  :func:`get_function`).

A *kernel family* (:class:`KernelFamily`) is one ``.cu`` file plus the list of every name
expression it serves for one value dtype, and how those are grouped into compiled modules: by
default one module per expression, so a first call compiles only the kernels it launches
(issue 33: a whole family x dtype module cost a first call 2-4 times what its kernel alone
does). Each op (``cupyops/ops/<op>/family.py``) registers its families at import with
:func:`register_family`; ``precompile()`` and the NVRTC compile checks iterate over exactly
those lists, so a launch that asks for an expression its family did not declare is an error
(:func:`get_function` raises ``KeyError``).

Nothing here compiles at import: a module is built on the first :func:`get_function` of one of
its expressions, or, for a plan whose launches need several modules, by :func:`ensure_modules`
before its first launch (all at once, in threads: the call waits for the slowest).
"""
from __future__ import annotations

import dataclasses
import functools
import importlib.resources
import os
import pathlib
import posixpath
import re
import threading
from typing import Callable, Union

import numpy as np

from cupyops.core import dtypes as _bf16
from cupyops.core import progress as _progress

__all__ = [
    "CTYPES", "NVRTC_OPTIONS", "KernelFamily", "FirstCall", "KernelCompileError",
    "ctype", "name_expression", "register_family", "families", "get_family",
    "read_kernel_file", "inline_includes", "module_source", "compile_options",
    "get_module", "compiled_module", "ensure_modules", "get_function", "clear_cache",
    "register_module_factory", "module_factory", "module_tag",
]

# --------------------------------------------------------------------------------------------
# C++ types
# --------------------------------------------------------------------------------------------

CTYPES: dict = {
    np.dtype(np.bool_): "bool",
    np.dtype(np.int8): "signed char",
    np.dtype(np.uint8): "unsigned char",
    np.dtype(np.int16): "short",
    np.dtype(np.uint16): "unsigned short",
    np.dtype(np.int32): "int",
    np.dtype(np.uint32): "unsigned int",
    np.dtype(np.int64): "long long",
    np.dtype(np.uint64): "unsigned long long",
    np.dtype(np.float16): "cupyops_half",            # bits only; struct in kernels/common.cuh
    np.dtype(np.float32): "float",
    np.dtype(np.float64): "double",
    np.dtype(np.complex64): "cupyops_complex64",     # struct defined in kernels/common.cuh
    np.dtype(np.complex128): "cupyops_complex128",   # struct defined in kernels/common.cuh
    # datetime64 / timedelta64 of every unit run as this one (int64 counts, NaT = INT64_MIN)
    np.dtype("m8[ns]"): "cupyops_datetime",          # struct defined in kernels/common.cuh
}
if _bf16.dtype() is not None:   # bfloat16 (ml_dtypes, optional): bits only, kernels/common.cuh
    CTYPES[_bf16.dtype()] = "cupyops_bfloat16"


def _native(dtype) -> np.dtype:
    dt = np.dtype(dtype)
    if dt.byteorder not in ("=", "|"):
        dt = dt.newbyteorder("=")
    return dt


def ctype(dtype) -> str:
    """The C++ type name of ``dtype`` (byte order ignored). ``TypeError`` if unsupported."""
    try:
        dt = _native(dtype)
    except TypeError as e:
        raise TypeError(f"not a dtype: {dtype!r}") from e
    try:
        return CTYPES[dt]
    except KeyError:
        supported = ", ".join(str(d) for d in CTYPES)
        raise TypeError(f"no C++ type for dtype {dt}; supported: {supported}") from None


def _template_arg(arg) -> str:
    # bool before int: bool is an int subclass.
    if isinstance(arg, (bool, np.bool_)):
        return "true" if arg else "false"
    if isinstance(arg, (int, np.integer)):
        return str(int(arg))
    if isinstance(arg, str):
        return arg
    if isinstance(arg, np.dtype) or (isinstance(arg, type) and issubclass(arg, np.generic)):
        return ctype(arg)
    raise TypeError(f"cannot turn {arg!r} ({type(arg).__name__}) into a template argument")


def name_expression(template: str, *args) -> str:
    """``name_expression("f", np.float32, True, 4) == "f<float, true, 4>"``.

    Arguments: a dtype (``np.dtype`` or scalar type such as ``np.int64``) gives its C++ type,
    a bool gives ``true``/``false``, an int its decimal form, a str is used as it is. Without
    arguments the bare template name is returned.
    """
    if not args:
        return template
    return f"{template}<{', '.join(_template_arg(a) for a in args)}>"


# --------------------------------------------------------------------------------------------
# Families
# --------------------------------------------------------------------------------------------

BlockSizes = Union[tuple, Callable[[str], tuple]]
DynamicShared = Union[int, Callable[[np.dtype, str, int], int]]
Grouping = Callable[[np.dtype, tuple], "tuple[tuple[str, ...], ...]"]


@dataclasses.dataclass(frozen=True)
class FirstCall:
    """One plan kind's first call: the operators it serves (``ops``), the plan, whether it
    indexes with 64 bits (inputs past 2**31 elements), and the name expressions it launches."""
    ops: str
    plan: str
    wide: bool
    exprs: tuple


FirstCalls = Callable[[np.dtype], "tuple[FirstCall, ...]"]


def one_module_per_expression(dtype, exprs: tuple) -> tuple:
    """The default grouping: every name expression is a module of its own."""
    return tuple((e,) for e in exprs)


@dataclasses.dataclass(frozen=True)
class KernelFamily:
    """One kernel source file and every instantiation a module of it holds.

    name: registry key, e.g. ``"argreduce"``.
    source: file in ``kernels/``, e.g. ``"argreduce.cu"``.
    dtypes: the value dtypes it serves (one module per dtype).
    expressions: ``dtype -> tuple[str, ...]``: EVERY name expression the family serves for one
        value dtype. Build them with :func:`name_expression`.
    options: extra compile options, e.g. ``("-DFOO=1",)``.
    grouping: ``(dtype, expressions) -> tuple of tuples``: the compiled modules, a partition of
        the expressions (default :func:`one_module_per_expression`). A module compiles whole, so
        grouping kernels that no call launches together makes first calls wait for kernels
        they do not use.

Metadata for the NVRTC timing tool (``cupyops.tools.nvrtc_timing``), optional:

    first_calls: ``dtype -> tuple of FirstCall``: the kernels a first call of each plan kind
        launches (default: each expression alone).

    Metadata for the compile checks (``cupyops.tools.nvrtc``), optional:

    block_sizes: the block sizes launch code uses: a tuple for every expression, or
        ``expr -> tuple``. The occupancy check runs each entry function at each of them.
    dynamic_shared: planned dynamic shared memory in bytes at launch: an int, or
        ``(dtype, expr, block_size) -> int``.
    min_occupancy: the occupancy (active warps / max warps per SM) the check asks for on
        sm_80 and sm_90 at those block sizes.
    """

    name: str
    source: str
    dtypes: tuple
    expressions: Callable[[np.dtype], tuple]
    options: tuple = ()
    block_sizes: BlockSizes = (256,)
    dynamic_shared: DynamicShared = 0
    min_occupancy: float = 0.5
    grouping: Grouping = one_module_per_expression
    first_calls: FirstCalls | None = None

    def __post_init__(self):
        object.__setattr__(self, "dtypes", tuple(_native(d) for d in self.dtypes))
        object.__setattr__(self, "options", tuple(self.options))

    def expressions_for(self, dtype) -> tuple:
        """The name expressions of the module for ``dtype``, checked and de-duplicated."""
        dt = _native(dtype)
        if dt not in self.dtypes:
            raise TypeError(f"kernel family {self.name!r} does not serve dtype {dt}; "
                            f"it serves {', '.join(map(str, self.dtypes))}")
        exprs = tuple(dict.fromkeys(self.expressions(dt)))
        if not exprs or not all(isinstance(e, str) and e and "\n" not in e for e in exprs):
            raise ValueError(f"kernel family {self.name!r}: expressions({dt}) must be a "
                             f"non-empty sequence of one-line strings, got {exprs!r}")
        return exprs

    def modules_for(self, dtype) -> tuple:
        """The compiled modules of ``dtype``: tuples of name expressions, a partition of
        :meth:`expressions_for` (checked)."""
        exprs = self.expressions_for(dtype)
        groups = tuple(tuple(g) for g in self.grouping(_native(dtype), exprs))
        flat = [e for g in groups for e in g]
        if not all(groups) or sorted(flat) != sorted(exprs):
            raise ValueError(f"kernel family {self.name!r}: grouping({_native(dtype)}) must "
                             f"split {exprs!r} into non-empty modules, each expression in one; "
                             f"got {groups!r}")
        return groups

    def module_of(self, dtype, expr: str) -> tuple:
        """The name expressions of the module that holds ``expr`` (``KeyError`` if the family
        does not declare it for ``dtype``)."""
        for group in self.modules_for(dtype):
            if expr in group:
                return group
        raise KeyError(f"kernel family {self.name!r} does not declare {expr!r} for dtype "
                       f"{_native(dtype)}; declared: {', '.join(self.expressions_for(dtype))}")

    def first_calls_for(self, dtype) -> tuple:
        """The :class:`FirstCall` of each plan kind (their expressions declared)."""
        exprs = self.expressions_for(dtype)
        plans = (tuple(FirstCall(self.name, e, False, (e,)) for e in exprs)
                 if self.first_calls is None else tuple(self.first_calls(_native(dtype))))
        unknown = sorted({e for p in plans for e in p.exprs} - set(exprs))
        if unknown:
            raise ValueError(f"kernel family {self.name!r}: first_calls({_native(dtype)}) names "
                             f"undeclared expressions {unknown}")
        return plans

    def block_sizes_for(self, expr: str) -> tuple:
        bs = self.block_sizes(expr) if callable(self.block_sizes) else self.block_sizes
        return tuple(int(b) for b in bs)

    def dynamic_shared_for(self, dtype, expr: str, block_size: int) -> int:
        ds = self.dynamic_shared
        return int(ds(_native(dtype), expr, int(block_size)) if callable(ds) else ds)


_families: dict[str, KernelFamily] = {}
_families_lock = threading.Lock()


def register_family(family: KernelFamily) -> KernelFamily:
    """Register ``family`` under ``family.name`` and return it.

    Registering again under the same name (a module reload) replaces the entry and drops its
    compiled modules; a second family with the same name but another source file is an error.
    """
    if not isinstance(family, KernelFamily):
        raise TypeError(f"expected a KernelFamily, got {type(family).__name__}")
    with _families_lock:
        old = _families.get(family.name)
        if old is not None and old.source != family.source:
            raise ValueError(f"kernel family {family.name!r} is already registered with source "
                             f"{old.source!r}; refusing {family.source!r}")
        _families[family.name] = family
    if old is not None and old is not family:
        clear_cache(family.name)
    return family


def families() -> dict[str, KernelFamily]:
    """A copy of the registry: name -> family."""
    with _families_lock:
        return dict(_families)


def get_family(name: str) -> KernelFamily:
    try:
        return _families[name]
    except KeyError:
        raise KeyError(f"unknown kernel family {name!r}; registered: "
                       f"{', '.join(sorted(_families)) or '(none)'}") from None


# --------------------------------------------------------------------------------------------
# Sources
# --------------------------------------------------------------------------------------------

KERNELS_PACKAGE = "cupyops.kernels"


@functools.lru_cache(maxsize=1)
def kernels_root():
    """Where the kernel sources are: ``cupyops/kernels`` of an installed copy, else the
    ``kernels/`` folder beside the package in a checkout (a bare ``git archive`` tree run with
    ``PYTHONPATH=.``, or the editable install of this checkout), else the ``cupyops.kernels``
    package wherever the import system finds it."""
    package_dir = pathlib.Path(__file__).resolve().parent.parent
    for candidate in (package_dir / "kernels", package_dir.parent / "kernels"):
        if (candidate / "common.cuh").is_file() and (candidate / "__init__.py").is_file():
            return candidate
    return importlib.resources.files(KERNELS_PACKAGE)


def read_kernel_file(name: str) -> str:
    """Text of ``kernels/<name>`` (a path relative to the kernels folder, ``/``-separated)."""
    name = posixpath.normpath(name)
    if name.startswith("../") or name == ".." or name.startswith("/"):
        raise ValueError(f"kernel file {name!r} is outside the kernels package")
    res = kernels_root()
    for part in name.split("/"):
        res = res.joinpath(part)
    try:
        return res.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FileNotFoundError(f"kernel file {name!r} not found in {KERNELS_PACKAGE}") from None


_INCLUDE_RE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"]+)"[^\n]*$', re.M)
_PRAGMA_ONCE_RE = re.compile(r"^[ \t]*#[ \t]*pragma[ \t]+once[ \t]*(//[^\n]*)?$", re.M)


def inline_includes(source: str, name: str, reader: Callable[[str], str] = read_kernel_file) -> str:
    """Inline every quoted ``#include "x"`` of ``source`` (file ``name``), recursively.

    Each file is inlined at most once per result (the first time it is met; later includes of it
    become a comment), which is what ``#pragma once`` or include guards would give. Paths are
    relative to the including file. ``#pragma once`` lines are dropped and ``#line`` directives
    keep compiler messages pointing at the original file and line. ``<system>`` includes stay.
    """
    seen: set[str] = set()

    def expand(text: str, fname: str, stack: tuple) -> str:
        seen.add(fname)
        base = posixpath.dirname(fname)
        text = _PRAGMA_ONCE_RE.sub("", text)
        out = []
        pos = 0
        for m in _INCLUDE_RE.finditer(text):
            out.append(text[pos:m.start()])
            pos = m.end()
            inc = posixpath.normpath(posixpath.join(base, m.group(1)))
            if inc in stack:
                raise ValueError(f"include cycle: {' -> '.join(stack + (inc,))}")
            if inc in seen:
                out.append(f'// #include "{m.group(1)}" (already inlined)')
                continue
            line_after = text.count("\n", 0, m.end()) + 2
            body = expand(reader(inc), inc, stack + (inc,))
            if not body.endswith("\n"):
                body += "\n"
            out.append(f'// begin #include "{m.group(1)}"\n#line 1 "{inc}"\n{body}'
                       f'// end #include "{m.group(1)}"\n#line {line_after} "{fname}"')
        out.append(text[pos:])
        return "".join(out)

    return expand(source, posixpath.normpath(name), (posixpath.normpath(name),))


@functools.lru_cache(maxsize=None)
def _module_source_cached(source_file: str) -> str:
    return inline_includes(read_kernel_file(source_file), source_file)


def module_tag(family_name: str, exprs) -> str:
    """The comment line that ends the source of the module of ``exprs``: every module's source
    text differs, so no compile cache keyed by the source alone can hand one module's binary to
    another (CuPy before 14.2 keyed its disk cache without the name expressions)."""
    return f"// cupyops kernel module {family_name}: {'; '.join(exprs)}\n"


def module_source(family_name: str, exprs=None) -> str:
    """The family's ``.cu`` with its quoted includes inlined (cached per process); with
    ``exprs``, the source the module of those name expressions compiles: that text ended by
    :func:`module_tag`."""
    text = _module_source_cached(get_family(family_name).source)
    if exprs is None:
        return text
    return text + ("" if text.endswith("\n") else "\n") + module_tag(family_name, exprs)


# --------------------------------------------------------------------------------------------
# Compile options
# --------------------------------------------------------------------------------------------

#: Options every backend gets. The CUDA path passes them to ``cupy.RawModule``, which adds
#: ``-ftz=true``, ``-arch=sm_XX`` (the current device, capped at what NVRTC knows),
#: ``--device-as-default-execution-space`` and its include directories (bundled CCCL, CuPy's
#: headers, the CUDA headers). ``cupyops.tools.nvrtc`` mirrors that list (:data:`CUPY_ADDED_OPTIONS`).
NVRTC_OPTIONS: tuple = ("--std=c++17",)

#: What ``cupy.RawModule`` appends after our options (CuPy 13/14, NVRTC backend), besides the
#: ``-arch`` and ``-I`` options. Note ``-ftz=true`` comes last, so a family cannot switch it off:
#: float32 comparisons compile to ``setp.*.ftz.f32`` and treat subnormals as zero unless the
#: kernel compares bit patterns.
CUPY_ADDED_OPTIONS: tuple = ("-ftz=true", "--device-as-default-execution-space")


def compile_options(family: KernelFamily | str) -> tuple:
    """``NVRTC_OPTIONS`` + the family's own options."""
    fam = get_family(family) if isinstance(family, str) else family
    return NVRTC_OPTIONS + tuple(fam.options)


# --------------------------------------------------------------------------------------------
# Module cache
# --------------------------------------------------------------------------------------------

class KernelCompileError(RuntimeError):
    """A kernel module failed to compile; ``log`` holds the compiler output."""

    def __init__(self, message: str, *, log: str = "", backend: str = "", family: str = "",
                 exprs: tuple = (), options: tuple = (), source: str = ""):
        super().__init__(message)
        self.log = log
        self.backend = backend
        self.family = family
        self.exprs = tuple(exprs)
        self.options = options
        self.source = source


def _compile_error(backend, fam, exprs, options, source, exc) -> KernelCompileError:
    log = getattr(exc, "log", None) or getattr(exc, "_msg", None) or str(exc)
    if isinstance(log, bytes):
        log = log.decode("utf-8", "replace")
    used = getattr(exc, "options", None)
    if isinstance(used, (tuple, list)) and used and all(isinstance(o, str) for o in used):
        options = tuple(used)          # the full list the compiler got (CuPy adds to ours)
    msg = (f"compiling kernel family {fam.name!r} ({fam.source}), module "
           f"{'; '.join(exprs)}, on backend {backend!r} failed ({type(exc).__name__}).\n"
           f"options: {' '.join(options)}\ncompiler log:\n{str(log).rstrip()}")
    return KernelCompileError(msg, log=str(log), backend=backend, family=fam.name,
                              exprs=exprs, options=options, source=source)


def _is_compile_exception(exc: BaseException) -> bool:
    return any("Compile" in t.__name__ for t in type(exc).__mro__)


ModuleFactory = Callable[[str, tuple, tuple, int], object]


def _cuda_factory(source: str, options: tuple, name_expressions: tuple, device_id: int):
    import cupy
    from cupy.cuda.compiler import CompileException

    with cupy.cuda.Device(device_id):
        mod = cupy.RawModule(code=source, options=options, name_expressions=name_expressions)
        try:
            mod.compile()   # compile (or load from CuPy's disk cache) now, under our lock
        except CompileException as e:
            raise _RawCompileFailure(str(e), tuple(getattr(e, "options", ()) or ())) from e
    return mod


def _simt_factory(source: str, options: tuple, name_expressions: tuple, device_id: int):
    from cupyops import simt

    # the same options as the CuPy path, which appends CUPY_ADDED_OPTIONS (-ftz=true, ...)
    options = tuple(options) + tuple(o for o in CUPY_ADDED_OPTIONS if o not in tuple(options))
    mod = simt.RawModule(code=source, options=options, name_expressions=name_expressions)
    compile_ = getattr(mod, "compile", None)
    if callable(compile_):
        compile_()
    return mod


class _RawCompileFailure(Exception):
    """Internal carrier of a compiler log from a factory."""

    def __init__(self, log: str, options: tuple = ()):
        super().__init__(log)
        self.log = log
        self.options = options


_factories: dict[str, ModuleFactory] = {"cuda": _cuda_factory, "simt": _simt_factory}


def register_module_factory(backend_name: str, factory: ModuleFactory | None) -> None:
    """Install ``factory(source, options, name_expressions, device_id) -> module`` for a
    backend name (``None`` removes it). The module must have ``get_function(expr)``. A factory
    signals a compile failure by raising an exception whose class name contains "Compile"
    and whose ``log`` attribute (or message) holds the compiler output. For tests."""
    if factory is None:
        _factories.pop(backend_name, None)
    else:
        _factories[backend_name] = factory


def module_factory(backend_name: str) -> ModuleFactory | None:
    """The factory installed for a backend name (tests put it back after their own)."""
    return _factories.get(backend_name)


_modules: dict[tuple, object] = {}
_functions: dict[tuple, object] = {}
_key_locks: dict[tuple, threading.Lock] = {}
_cache_lock = threading.Lock()


def _new_locks_in_child():
    """After ``fork``: a parent thread compiling under a key lock does not exist in the child,
    so the child gets new locks (and compiles that module itself if it needs it)."""
    global _cache_lock, _families_lock
    _cache_lock, _families_lock = threading.Lock(), threading.Lock()
    _key_locks.clear()


os.register_at_fork(after_in_child=_new_locks_in_child)


def _module_key(backend_name: str, family_name: str, exprs: tuple, device_id) -> tuple:
    # the expressions name the module (the value type is in them): dtypes whose kernels are one
    # instantiation (the nonzero family's bool, int8 and uint8) share it
    return (backend_name, int(device_id or 0), family_name, tuple(exprs))


def compiled_module(backend_name: str, family_name: str, exprs, device_id: int = 0):
    """The compiled module of ``family_name`` that instantiates ``exprs`` (one of the family's
    :meth:`KernelFamily.modules_for` groups) on a backend and device.

    Every backend gets the same module: :func:`module_source` of those expressions, the
    family's :func:`compile_options` and the expressions, handed to the backend's factory:
    ``cupy.RawModule`` for ``"cuda"`` (compiled for and loaded on ``device_id``; CuPy's disk
    cache keys it by all three), ``cupyops.simt.RawModule`` for ``"simt"``. Built on first use
    and cached; threads asking for the same module at once compile it once. A compile failure
    raises :class:`KernelCompileError` whose message carries the compiler log (and is not
    cached, so a later call tries again).
    """
    exprs = tuple(exprs)
    key = _module_key(backend_name, family_name, exprs, device_id)
    mod = _modules.get(key)
    if mod is not None:
        return mod
    with _cache_lock:
        lock = _key_locks.setdefault(key, threading.Lock())
    with lock:
        mod = _modules.get(key)
        if mod is None:
            mod = _modules[key] = _build(backend_name, get_family(family_name), exprs, key[1])
        return mod


def ensure_modules(backend_name: str, modules, device_id: int = 0) -> None:
    """Build, all at once, every module of ``modules`` (``[(family name, name expressions),
    ...]``: the modules one call's launches need) that is not built yet, so that a first call
    waits for its slowest module instead of their sum: the calling thread builds the first and
    a thread of its own each other one (NVRTC releases the GIL; the simt backend's C++
    compiler is a subprocess). Each goes through :func:`compiled_module`, so the cache keys
    are those of a module built alone, and its per-key lock makes a caller that asks for a
    module another thread is building wait for it: never built twice. Returns once every one
    is built (or failed); then raises the first failure in ``modules``' order unchanged (a
    :class:`KernelCompileError` names its family and expressions). Where the system refuses a
    thread, the module is built after the others, in the calling thread; for ``"cuda"`` with
    ``CUPYOPS_PRECOMPILE_SERIAL=1`` (:func:`serial_cuda`) all are, one after the other."""
    device_id = int(device_id or 0)
    todo: list = []
    for family_name, exprs in modules:
        item = (family_name, tuple(exprs))
        if item not in todo and _module_key(backend_name, item[0], item[1],
                                            device_id) not in _modules:
            todo.append(item)
    if len(todo) < 2 or (backend_name == "cuda" and serial_cuda()):
        for family_name, exprs in todo:
            compiled_module(backend_name, family_name, exprs, device_id)
        return
    errors: list = [None] * len(todo)

    def build(i, caught=Exception):
        # (raised in the calling thread, after the others; an interrupt of the calling thread
        # is raised at once: the threads finish their builds and keep them)
        try:
            compiled_module(backend_name, todo[i][0], todo[i][1], device_id)
        except caught as e:
            errors[i] = e

    # one notice for the group (a module built alone gets its own: _build)
    with _progress.compiling(backend_name), _progress.grouped():
        started, refused = [], []
        for i in range(1, len(todo)):
            t = threading.Thread(target=build, args=(i, BaseException), daemon=True,
                                 name=f"cupyops-compile-{todo[i][0]}")
            try:
                t.start()
                started.append(t)
            except RuntimeError:       # no thread to be had: built here, after the others
                refused.append(i)
        build(0)
        for i in refused:
            build(i)
        for t in started:
            t.join()
    for e in errors:
        if e is not None:
            raise e


def serial_cuda() -> bool:
    """``CUPYOPS_PRECOMPILE_SERIAL=1``: CUDA modules are built (compiled and loaded) in the
    calling thread only, by precompile and by a first call alike: the way out for a driver that
    misbehaves when modules load in several threads (and a first call's before/after on a
    GPU)."""
    return os.environ.get("CUPYOPS_PRECOMPILE_SERIAL", "") not in ("", "0")


def _build(backend_name: str, fam: KernelFamily, exprs: tuple, device_id: int):
    try:
        factory = _factories[backend_name]
    except KeyError:
        raise ValueError(f"unknown backend {backend_name!r}; known: "
                         f"{', '.join(sorted(_factories))}") from None
    source = module_source(fam.name, exprs)
    options = compile_options(fam)
    try:
        with _progress.compiling(backend_name):
            return factory(source, options, exprs, device_id)
    except Exception as e:
        if _is_compile_exception(e):
            raise _compile_error(backend_name, fam, exprs, options, source, e) from e
        raise


def get_module(backend_name: str, family_name: str, dtype, device_id: int = 0, *,
               expr: str | None = None):
    """The compiled module of ``family_name`` for value ``dtype`` that holds ``expr`` (default:
    the first expression the family declares for ``dtype``): :func:`compiled_module` of that
    expression's group. ``KeyError`` if ``expr`` is not declared for ``dtype``."""
    fam = get_family(family_name)
    if expr is None:
        expr = fam.expressions_for(dtype)[0]
    return compiled_module(backend_name, family_name, fam.module_of(dtype, expr), device_id)


def get_function(backend_name: str, family_name: str, dtype, expr: str, device_id: int = 0):
    """The kernel ``expr`` of family ``family_name`` for value ``dtype`` (cached); compiles only
    the module that holds it.

    ``KeyError`` if the family did not declare ``expr`` for ``dtype``: precompile and the
    compile checks only know declared expressions.
    """
    fkey = (backend_name, int(device_id or 0), family_name, _native(dtype), expr)
    fn = _functions.get(fkey)
    if fn is not None:
        return fn
    mod = get_module(backend_name, family_name, dtype, device_id, expr=expr)
    fn = mod.get_function(expr)
    _functions[fkey] = fn
    return fn


def cached_keys() -> list:
    """Keys ``(backend, device, family, expressions)`` of the modules built so far."""
    return list(_modules)


def clear_cache(family_name: str | None = None) -> None:
    """Forget compiled modules (of one family, or all) and the inlined sources. For tests."""
    with _cache_lock:
        for d in (_modules, _functions):
            for k in [k for k in d if family_name is None or k[2] == family_name]:
                del d[k]
    _module_source_cached.cache_clear()


# --------------------------------------------------------------------------------------------
# The self-test family (kernels/selftest.cu). Not registered by the library: tests register
# it to exercise this module, the backends and the compile checks before real families exist.
# --------------------------------------------------------------------------------------------

SELFTEST_DTYPES = tuple(np.dtype(t) for t in (
    np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64,
    np.float16, np.float32, np.float64))


def _selftest_expressions(dtype) -> tuple:
    return (name_expression("selftest_count", dtype, False),
            name_expression("selftest_count", dtype, True),
            name_expression("selftest_iota", dtype, 3))


SELFTEST_FAMILY = KernelFamily(
    name="selftest",
    source="selftest.cu",
    dtypes=SELFTEST_DTYPES,
    expressions=_selftest_expressions,
    block_sizes=(256,),
)
