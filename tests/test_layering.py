"""The package's shape, read from the source with ``ast`` (docs/design.md, "Layers"):

* ``core`` imports nothing from ``ops``, ``interop``, ``bench`` or ``tools``;
* an op folder imports ``core``, ``simt``, itself and the shared Dask helpers
  (``interop.dask``) only, and only it names its kernels' entry points;
* no module outside ``ops/`` names an operator (the operators' names come from their
  descriptors, ``cupyops.ops.operators()``), but for the public re-exports in
  ``cupyops/__init__.py`` and the measurement tools listed in :data:`NAMES_OPS_ON_PURPOSE`;
* ``interop`` imports the public functions (``cupyops``), ``_call`` and ``core`` only;
* no runtime module imports ``bench`` or ``tools``;
* no import cycle, function-level imports included; the longest chain of imports between
  runtime modules is at most 8 modules;
* at most 8 modules directly in ``cupyops/``;
* no private attribute of another module or library is read outside ``core/fastread.py``
  (an object's ``_`` attributes only through ``self`` / ``cls``), and no code is generated
  with ``exec`` outside ``core/structs.py`` (the struct packers) and ``_call.py`` (the public
  functions, from their descriptors);
* no function outside ``simt/`` runs past 80 lines;
* the public functions carry their annotations, and ``py.typed`` ships.
"""
from __future__ import annotations

import ast
import importlib
import inspect
import pathlib
import re

import pytest

import cupyops

PKG = pathlib.Path(cupyops.__file__).parent
ROOT = PKG.parent
LAYERS = ("core", "ops", "interop", "bench", "tools", "simt")
FAST_READS = "cupyops.core.fastread"
GENERATED_CODE = {"cupyops.core.structs", "cupyops._call"}
#: the op folders (the registration in cupyops/ops/__init__.py)
OP_FOLDERS = tuple(cupyops.ops.FAMILIES)
#: the operators, from their descriptors
OPERATORS = tuple(op.name for op in cupyops.ops.operators())


def _entry_points() -> dict:
    """The kernels' entry points by op folder: every name expression's function name, over
    the kernel families the folder's operators use (its api's FAMILIES)."""
    from cupyops.core import modules
    out = {}
    for folder in OP_FOLDERS:
        names = set()
        for name in importlib.import_module(f"cupyops.ops.{folder}.api").FAMILIES:
            fam = modules.get_family(name)
            for dt in fam.dtypes:
                names.update(e.split("<")[0].strip() for e in fam.expressions_for(dt))
        out[folder] = tuple(sorted(names))
    return out


ENTRY_POINTS = _entry_points()


def module_name(path: pathlib.Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = rel.parts[:-1] if rel.parts[-1] == "__init__" else rel.parts
    return ".".join(parts)


def _sources() -> dict:
    return {module_name(p): p for p in sorted(PKG.rglob("*.py"))}


SOURCES = _sources()


def is_runtime(mod: str) -> bool:
    parts = mod.split(".")
    return not (len(parts) > 1 and parts[1] in ("bench", "tools", "simt", "__main__"))


def _resolve(mod: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = mod.split(".")
    if not SOURCES[mod].name == "__init__.py":
        base = base[:-1]
    base = base[:len(base) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def imports_of(mod: str) -> set:
    """The cupyops modules ``mod`` imports, anywhere in its source (functions included)."""
    tree = ast.parse(SOURCES[mod].read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(mod, node)
            subs = [f"{target}.{a.name}" for a in node.names]
            # the package itself too, unless every name is a submodule of it
            names = subs + ([] if all(s in SOURCES for s in subs) else [target])
        else:
            continue
        for name in names:
            while name and name not in SOURCES:
                name = name.rpartition(".")[0]
            if name.startswith("cupyops") and name != mod:
                found.add(name)
    return found


GRAPH = {m: imports_of(m) for m in SOURCES}


def layer(mod: str) -> str:
    parts = mod.split(".")
    if len(parts) == 1:
        return "cupyops"
    if parts[1] == "ops" and len(parts) > 2:
        return f"ops.{parts[2]}"
    return parts[1]


def test_core_knows_no_operator():
    bad = [(m, i) for m in GRAPH if layer(m) == "core" for i in GRAPH[m]
           if layer(i) not in ("core", "simt")]
    assert not bad, bad


@pytest.mark.parametrize("op", OP_FOLDERS)
def test_op_folder_imports_core_simt_and_itself(op):
    own = f"ops.{op}"
    bad = [(m, i) for m in GRAPH if layer(m) == own for i in GRAPH[m]
           if layer(i) not in ("core", "simt", own) and i not in ("cupyops.ops",
                                                                  "cupyops.interop.dask")]
    assert not bad, bad


def test_every_op_folder_has_entry_points():
    assert all(ENTRY_POINTS[f] for f in OP_FOLDERS), ENTRY_POINTS


@pytest.mark.parametrize("op", sorted(ENTRY_POINTS))
def test_only_its_folder_names_its_kernels(op):
    pattern = re.compile("|".join(ENTRY_POINTS[op]))
    bad = [m for m, p in SOURCES.items() if is_runtime(m) and layer(m) != f"ops.{op}"
           and pattern.search(p.read_text())]
    assert not bad, bad


def test_interop_imports_public_functions_call_and_core():
    bad = [(m, i) for m in GRAPH if layer(m) == "interop" for i in GRAPH[m]
           if i not in ("cupyops", "cupyops._call") and layer(i) not in ("core", "interop")]
    assert not bad, bad


def test_no_runtime_module_imports_bench_or_tools():
    bad = [(m, i) for m in GRAPH if is_runtime(m) for i in GRAPH[m]
           if layer(i) in ("bench", "tools")]
    assert not bad, bad


def _cycles(graph) -> list:
    """Every strongly connected component of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))
    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_no_import_cycles():
    assert _cycles(GRAPH) == []


def longest_chain(graph, nodes) -> list:
    memo = {}

    def chain(v):
        if v not in memo:
            memo[v] = []            # (a cycle would stop here; the cycle test says so)
            best = []
            for w in graph.get(v, ()):
                if w in nodes:
                    c = chain(w)
                    if len(c) > len(best):
                        best = c
            memo[v] = [v] + best
        return memo[v]
    return max((chain(v) for v in nodes), key=len)


def test_longest_runtime_chain_is_at_most_8_modules():
    nodes = {m for m in GRAPH if is_runtime(m)}
    chain = longest_chain(GRAPH, nodes)
    assert len(chain) <= 8, " -> ".join(chain)


def test_at_most_8_modules_directly_in_the_package():
    top = [p.name for p in PKG.glob("*.py")]
    assert len(top) <= 8, top


def private_reads(mod: str) -> list:
    """``x._name`` with x not self/cls, and ``from m import _name`` of another module's private
    name (the package's own ``_call`` module is a layer, not a private name)."""
    tree = ast.parse(SOURCES[mod].read_text())
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") \
                and not node.attr.startswith("__"):
            if not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                out.append(f"{mod}:{node.lineno} .{node.attr}")
        elif isinstance(node, ast.ImportFrom):
            for a in node.names:
                if a.name.startswith("_") and not a.name.startswith("__") \
                        and a.name != "_call":
                    out.append(f"{mod}:{node.lineno} import {a.name}")
    return out


def test_no_private_reads_outside_the_fast_reads_module():
    bad = [r for m in SOURCES if layer(m) != "simt" and m != FAST_READS
           for r in private_reads(m)]
    assert not bad, bad


def test_the_fast_reads_module_reads_only_the_two_documented_things():
    assert [r.split(" ", 1)[1] for r in private_reads(FAST_READS)] == ["._data"]


def test_no_exec_outside_the_struct_packer():
    bad = []
    for m, p in SOURCES.items():
        if layer(m) == "simt" or m in GENERATED_CODE:
            continue
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                    and node.func.id in ("exec", "eval"):
                bad.append(f"{m}:{node.lineno}")
    assert not bad, bad


def test_no_function_runs_past_80_lines():
    long = []
    for m, p in SOURCES.items():
        if layer(m) == "simt":
            continue
        for node in ast.walk(ast.parse(p.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > 80:
                    long.append(f"{m}.{node.name}: {n} lines")
    assert not long, long


PUBLIC = list(OPERATORS)


def test_the_public_functions_are_the_descriptors():
    assert list(cupyops._call.PUBLIC) == PUBLIC
    assert all(getattr(cupyops, name) is cupyops._call.PUBLIC[name] for name in PUBLIC)
    assert set(PUBLIC) <= set(cupyops.__all__)


#: measurement tools that time or model chosen calls of named operators (their cases are
#: measurements, not the operators' descriptions), with why
NAMES_OPS_ON_PURPOSE = {
    "cupyops.bench.overhead": "times the call overhead of chosen calls",
    "cupyops.bench.call_overhead": "times the large-call overhead of chosen calls (issue 36)",
    "cupyops.bench.issue_rate": "models chosen kernels' issue rates",
    "cupyops.bench.threads_check": "times chosen full-size calls on 1 and N threads",
    "cupyops.bench.dask_bench": "times chosen Dask graphs",
    "cupyops.bench.traffic": "the traffic goals of the kernel families",
    "cupyops.bench.exec_savings": "times the struct packer of chosen launches",
    "cupyops.bench.gpu_events": "times chosen kernels with CUDA events",
    "cupyops.bench.gpu_cases": "the GPU run's chosen 256 MiB calls (issue 32, part 3)",
    "cupyops.tools.gpucheck": "rehearses chosen cases of the GPU run on simt",
    "cupyops.tools.dask_check": "the GPU run's chosen Dask calls with CuPy chunks",
}

#: modules of the peers whose functions share operators' names (np.argmax is NumPy's own)
PEER_MODULES = {"np", "numpy", "cupy", "xp", "torch", "da", "jnp"}


def _docstrings(tree) -> set:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


#: a module path into an op folder (a folder may share its name with an operator)
_FOLDER_PATH = re.compile(r"cupyops[./]ops[./]\w+")


def names_of_ops(mod: str) -> list:
    """Where ``mod`` names an operator in code: a string (not a docstring) holding an
    operator's name as a word, or an identifier or attribute that is an operator's name."""
    tree = ast.parse(SOURCES[mod].read_text())
    docs = _docstrings(tree)
    word = re.compile(r"\b(" + "|".join(sorted(OPERATORS, key=len, reverse=True)) + r")\b")
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and id(node) not in docs and word.search(_FOLDER_PATH.sub("", node.value)):
            out.append(f"{mod}:{node.lineno} {node.value[:40]!r}")
        elif isinstance(node, ast.Name) and node.id in OPERATORS:
            out.append(f"{mod}:{node.lineno} {node.id}")
        elif isinstance(node, ast.Attribute) and node.attr in OPERATORS and not (
                isinstance(node.value, ast.Name) and node.value.id in PEER_MODULES):
            out.append(f"{mod}:{node.lineno} .{node.attr}")
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name in OPERATORS:
            out.append(f"{mod}:{node.lineno} def {node.name}")
    return out


def test_no_module_outside_ops_names_an_operator():
    bad = [r for m in SOURCES if layer(m) not in ("simt",) and not layer(m).startswith("ops.")
           and m not in ("cupyops", "cupyops.ops") and m not in NAMES_OPS_ON_PURPOSE
           for r in names_of_ops(m)]
    assert not bad, bad


def test_the_check_finds_a_named_operator(tmp_path):
    name = OPERATORS[0]
    SOURCES["_probe"] = tmp_path / "probe.py"
    try:
        SOURCES["_probe"].write_text(f"def f(co):\n    return co.{name}, {name!r}\n")
        assert len(names_of_ops("_probe")) == 2
    finally:
        del SOURCES["_probe"]


@pytest.mark.parametrize("name", PUBLIC)
def test_public_functions_are_annotated_in_their_source(name):
    fn = getattr(cupyops, name)
    sig = inspect.signature(fn)
    assert sig.return_annotation is not inspect.Signature.empty
    assert sig.parameters["x"].annotation is not inspect.Parameter.empty
    if "tie" in sig.parameters:
        assert "Literal" in str(inspect.get_annotations(fn, eval_str=True)["tie"])
    src = inspect.getsource(fn)
    assert "->" in src.split(":\n", 1)[0], "annotations belong in the def, not in a stub"


def test_py_typed_ships():
    assert (PKG / "py.typed").is_file()
    text = (ROOT / "pyproject.toml").read_text()
    assert re.search(r'"cupyops"\s*=\s*\[[^\]]*"py\.typed"', text), "py.typed not in package data"
