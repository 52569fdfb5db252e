"""One public operator, described once: :class:`Operator`.

Every public function is one descriptor in its op folder (``cupyops/ops/<family>/api.py``):
its signature (a function whose parameters, annotations and docstring are the public
function's), its full road, its kernel families, its Dask implementation, its selftest and
benchmark cases and its documentation entry. Everything else iterates the descriptors that
``cupyops.ops.OPERATORS`` lists: ``cupyops._call`` generates the public functions from them,
the array namespace, Dask, the selftest, the NVRTC tool and the benchmark take their names
and cases from them, and the layering test checks that no module outside ``ops/`` names an
operator. This module knows no operator.
"""
from __future__ import annotations

import inspect
import typing

__all__ = ["Operator", "SelftestCall", "Bench", "BenchCase", "PeerUnavailable", "CONTROL_ARGS"]

#: the parameters that are no part of a call's key: where the result goes, where the call runs
#: and its scratch (cupyops._call reads them itself)
CONTROL_ARGS = ("out", "device", "workspace")


class SelftestCall(typing.NamedTuple):
    """One selftest call of an operator on one input: a label, the keywords, the reference (a
    function of no arguments computing the expected result from NumPy primitives; an error it
    raises is the error the call must raise), and positional arguments after x."""

    label: str
    kwargs: dict
    reference: typing.Callable
    args: tuple = ()


class BenchCase(typing.NamedTuple):
    """One benchmark case of an operator: the case's name, the input shape, the parameters
    the operator's :class:`Bench` functions read, and where the case goes among one dtype's
    cases: by ``order``, then operator by operator in the registry's order (the nonzero
    family numbers its densities, so each density's operators sit together)."""

    case: str
    shape: tuple
    params: dict
    order: int = 0


class PeerUnavailable(Exception):
    """A benchmark peer cannot run this case (not installed, dtype not supported, no such
    operator in the peer, ...): the benchmark reports the message instead of a ratio."""


class Bench(typing.NamedTuple):
    """An operator's benchmark functions (``Operator.bench``), which cupyops.bench iterates.
    ``case`` below is a benchmark case (cupyops.bench.cases.Case: ``op``, ``shape``,
    ``dtype`` and the ``params`` of its :class:`BenchCase`). A peer function raises
    :class:`PeerUnavailable` for a case its peer cannot run.

    * ``cases(sizes, dtype)``: the operator's cases in one dtype, a list of
      :class:`BenchCase`; ``sizes`` is one size set of cupyops.bench.cases.SIZES (shapes by
      kind: ``2d``, ``4d``, ``3d``, ``nz``).
    * ``call(f, case, device)``: the timed call, ``fn(x)``, of the public function ``f``
      (passed in: an op folder does not import the package); ``device`` is what its
      ``device=`` gets.
    * ``compose(xp, case)``: what a NumPy or CuPy user writes instead (``xp`` the module),
      ``fn(x)``; it is also the reference of the correctness check.
    * ``torch(torch, case)``: what a PyTorch user writes, ``fn(tensor)`` (``torch`` the
      module), or None: no PyTorch peer.
    * ``onnx(case, elem_type)``: a one-operator ONNX graph of what an ONNX user writes, from
      input ``x`` (TensorProto ``elem_type``) to output ``y``: ``(nodes, initializers,
      y's value info, adapt)``, ``adapt(result)`` giving cupyops' form; or None: no ONNX peer.
    * ``as_numpy(result)``: a result already on the host (NumPy, or a tuple of them) in the
      form the correctness check compares, or None: a tuple of arrays or one array.
    * ``extra_cases()``: cases in dtypes of their own, listed after the others whatever
      dtypes are asked, ``[(dtype, BenchCase)]``; or None.
    * ``cold(f, x, device)``: the call the cold-start table times in a fresh process,
      ``fn()``, on a 256x256 float32 NumPy or CuPy ``x``, ``device`` the benchmark's
      ("cpu", "simt" or "cuda"); or None: not in that table.
    * ``legend``: what the words of its case names mean, ``((words, meaning), ...)``:
      ``words`` the words as the names write them (``"tie=first, tie=last"``; a word ending
      in ``=`` stands for every value, ``"d="``), ``meaning`` one line. The benchmark's
      report prints one legend of the words its cases use.
    """

    cases: typing.Callable
    call: typing.Callable
    compose: typing.Callable
    torch: typing.Callable | None = None
    onnx: typing.Callable | None = None
    as_numpy: typing.Callable | None = None
    extra_cases: typing.Callable | None = None
    cold: typing.Callable | None = None
    legend: tuple = ()


class Operator:
    """The descriptor of one public operator.

    * ``spec``: a function with the public function's exact parameters, defaults, annotations
      and docstring (its body is never run); ``name`` is its name.
    * ``road(x, *args)``: the full road of a call (rules, trivial branch, NumPy path, kernel
      path), ``args`` in the order of ``spec``'s parameters after ``x``; returns ``(result,
      entry, class_entry)`` (cupyops._call's contract).
    * ``families``: the kernel families (cupyops.core.modules names) the kernel path uses.
    * ``dask(x, **kwargs)``: the lazy Dask result, or None where Dask arrays are refused.
    * ``selftest(case, rng)``: a list of :class:`SelftestCall` for one selftest input (an
      object with ``x`` and ``axes``), or None.
    * ``bench``: the benchmark's functions for this operator (a :class:`Bench`), or None: no
      benchmark cases.
    * ``tuple_args``: parameters that may be tuples; a call giving one takes the key that
      records the items' types (``axis=(0, 1)``), not the inline one.
    * ``array_args``: parameters that are arrays besides ``x`` (segment offsets): the key holds
      their layout (type, shape, strides, dtype, device), not their values, and entries and
      class entries get them at each call: ``entry(x, workspace, *arrays)``.
    * ``array_api``: whether the array API standard defines it (the namespace holds every
      operator either way).
    * ``examples``: DirectML's worked examples of the operator (``python -m cupyops demo``),
      ``(label, call(function, device), expected)`` with ``function`` the public function.
    * ``doc``: one line for the operator tables of the docs and ``--help`` texts.
    """

    __slots__ = ("name", "spec", "road", "families", "dask", "selftest", "bench", "tuple_args",
                 "array_args",
                 "array_api", "doc", "examples", "params", "positional", "key_args", "defaults",
                 "annotations")

    def __init__(self, spec, road, *, families=(), dask=None, selftest=None, bench=None,
                 tuple_args=("axis",), array_args=(), array_api=False, examples=(), doc=""):
        sig = inspect.signature(spec)
        names = list(sig.parameters)
        if not names or names[0] != "x" \
                or sig.parameters["x"].kind is not inspect.Parameter.POSITIONAL_ONLY:
            raise TypeError(f"{spec.__name__}: the first parameter must be the positional-only x")
        self.name = spec.__name__
        self.spec = spec
        self.road = road
        self.families = tuple(families)
        self.dask = dask
        self.selftest = selftest
        self.bench = bench
        self.params = tuple(names[1:])
        #: positional-only parameters after x (a segment's offsets)
        self.positional = tuple(n for n in self.params if sig.parameters[n].kind
                                is inspect.Parameter.POSITIONAL_ONLY)
        self.key_args = tuple(n for n in self.params if n not in CONTROL_ARGS)
        self.tuple_args = tuple(a for a in tuple_args if a in self.key_args)
        self.array_args = tuple(array_args)
        if not set(self.array_args) <= set(self.key_args):
            raise TypeError(f"{self.name}: array_args {self.array_args} are not its parameters")
        self.array_api = bool(array_api)
        self.examples = tuple(examples)
        self.doc = doc or (inspect.getdoc(spec) or "").split("\n")[0]
        self.defaults = {n: p.default for n, p in sig.parameters.items()
                         if p.default is not inspect.Parameter.empty}
        self.annotations = dict(getattr(spec, "__annotations__", {}))

    def takes(self, arg: str) -> bool:
        """Whether the operator has the parameter ``arg`` (``out``, ``workspace``, ...)."""
        return arg in self.params

    def __repr__(self):
        return f"Operator({self.name!r})"
