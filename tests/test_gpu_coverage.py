"""Every test that calls the API on simt also runs on the GPU (issue 25, build item 3), read
from the test sources with ``ast``:

* a test function that calls a public cupyops function (cupyops._call.PUBLIC, through
  ``cupyops``, ``getattr(cupyops, ...)``, ``ops(...)`` or the seed examples) with ``simt`` as
  its device (``device="simt"``, ``ops("simt")``, ``CUPYOPS_DEVICE=simt``, or a device list
  holding ``"simt"``, in the test, its decorators, or the module's helpers and constants it
  names) must be listed in ``tests/_devices.EMULATOR_ONLY``; every other test takes its
  kernel devices from ``KERNEL_DEVICES`` (simt, and "cuda" and "cupy" when a GPU is present)
  through ``ops(device)`` or the device helpers. Tests marked ``gpu`` run on a GPU only and
  are not asked;
* every ``EMULATOR_ONLY`` entry is a test that does call the API on simt, and its node id
  says why it stays there (simt, traffic, dry_run, marshal or overhead);
* the API also runs on simt through the benchmark (``bench.main`` / ``bench.run_case`` with
  ``"simt"`` among their arguments, ``overhead.run`` / ``overhead.kernel_path``, whose kernel
  section runs on simt) and through the test helpers (``cupy_marshal.record_sweep`` and any
  function of a helper module under tests/ that calls the API on simt): those tests are asked
  too (issue 36);
* every test over the kernel devices takes each GPU input form it can: it drops neither
  ``"cuda"`` (NumPy input) nor ``"cupy"`` (CuPy input) from its devices (``continue``,
  ``return`` or ``pytest.skip`` under a test of the device, or a filtered device list), unless
  ``ONE_FORM`` says why it cannot take the other;
* CuPy input comes after the NumPy-input devices (``KERNEL_DEVICES`` last in a device list);
* whether a GPU is present is ``cupyops.core.devices.cuda_status()``'s to say.

It also checks, on the CPU, how ``tests/_devices.to_device`` lays a NumPy array out for CuPy
input (the same procedure with NumPy standing in for CuPy)."""
from __future__ import annotations

import ast
import pathlib

import numpy as np
import pytest

from cupyops import _call
from cupyops.core.devices import cuda_status

import _devices

TESTS = pathlib.Path(__file__).resolve().parent
PUBLIC = frozenset(_call.PUBLIC)
KEYWORDS = ("simt", "traffic", "dry_run", "marshal", "overhead", "sector", "bank", "schedule",
            "grid", "records", "requests")   # (issue 26: what only simt counts)
KERNEL_LISTS = frozenset({"KERNEL_DEVICES", "NONZERO_KERNEL_DEVICES"})
SEEDS = frozenset({"seed_examples"})     # cupyops.__main__'s seed calls: device -> public call
#: the benchmark's runners (cupyops.bench.<module>.<function>): they call the API on the device
#: named among their arguments
BENCH_RUNNERS = {"bench": frozenset({"main", "run_case"})}
#: ... and those whose kernel section always runs on simt
BENCH_ON_SIMT = {"overhead": frozenset({"run", "kernel_path"})}
#: tests over the kernel devices that take one GPU input form only, with the reason
ONE_FORM = {
    "test_interop.py::test_array_api_strict_in_and_out":
        "array_api_strict arrays live on the host: there is no CuPy form of them",
    "test_values_api.py::test_bfloat16_values_keep_their_bits":
        "CuPy arrays hold no bfloat16 (ml_dtypes' kind V): its GPU form is NumPy input on cuda",
}


def _is_str(node, value) -> bool:
    return isinstance(node, ast.Constant) and node.value == value


def _marked_gpu(node) -> bool:
    return any(isinstance(n, ast.Attribute) and n.attr == "gpu" for n in ast.walk(node))


class Module:
    """One test module: its functions (tests, helpers), module constants and the names it
    binds to cupyops, cupyops._call or their public functions."""

    def __init__(self, path: pathlib.Path, text: str | None = None):
        self.path = path
        self.tree = ast.parse(path.read_text() if text is None else text)
        self.funcs, self.consts, self.tests = {}, {}, {}
        self.gpu_module = False
        for node in self.tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.funcs[node.name] = node
                if node.name.startswith("test"):
                    self.tests[node.name] = node
            elif isinstance(node, ast.ClassDef):
                for sub in node.body:
                    if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                            and sub.name.startswith("test"):
                        self.tests[f"{node.name}::{sub.name}"] = sub
            elif isinstance(node, ast.Assign):
                for t in node.targets:
                    if isinstance(t, ast.Name):
                        self.consts[t.id] = node.value
                        if t.id == "pytestmark" and _marked_gpu(node.value):
                            self.gpu_module = True
        self.modules, self.direct = set(), set()
        self.bench = {}                  # local name -> cupyops.bench module name
        self.helpers = {}                # local name -> helper module (tests/<name>.py) name
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name in ("cupyops", "cupyops._call"):
                        self.modules.add(a.asname or "cupyops")
                    elif (TESTS / f"{a.name}.py").is_file() and not a.name.startswith("test_"):
                        self.helpers[a.asname or a.name] = a.name
            elif isinstance(node, ast.ImportFrom) and node.module in ("cupyops", "cupyops._call"):
                for a in node.names:
                    if a.name == "_call":
                        self.modules.add(a.asname or a.name)
                    elif a.name in PUBLIC:
                        self.direct.add(a.asname or a.name)
            elif isinstance(node, ast.ImportFrom) and node.module == "cupyops.bench":
                for a in node.names:
                    self.bench[a.asname or a.name] = a.name

    def node_id(self, name: str) -> str:
        return f"{self.path.relative_to(TESTS).as_posix()}::{name}"

    def reach(self, test) -> list:
        """The test with its decorators, and the module's helpers and constants it names
        (transitively)."""
        seen, todo, nodes = set(), [test], []
        while todo:
            node = todo.pop()
            nodes.append(node)
            for sub in ast.walk(node):
                if isinstance(sub, ast.Name) and sub.id not in seen:
                    target = self.funcs.get(sub.id, self.consts.get(sub.id))
                    if target is not None and target is not test:
                        seen.add(sub.id)
                        todo.append(target)
        return nodes

    def _attr_calls(self, nodes):
        """``(kind, module, function, call)`` of the calls ``X.f(...)`` where X names a
        cupyops.bench module ("bench") or a test helper module ("helper")."""
        for node in nodes:
            for sub in ast.walk(node):
                if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) \
                        and isinstance(sub.func.value, ast.Name):
                    name = sub.func.value.id
                    if name in self.bench:
                        yield "bench", self.bench[name], sub.func.attr, sub
                    elif name in self.helpers:
                        yield "helper", self.helpers[name], sub.func.attr, sub

    def indirect_simt(self, nodes) -> list:
        """Where ``nodes`` run the API on simt through the benchmark or a test helper."""
        found = []
        for kind, mod, fn, call in self._attr_calls(nodes):
            if kind == "bench" and fn in BENCH_ON_SIMT.get(mod, ()):
                found.append(f"{mod}.{fn} (its kernel section runs on simt; line {call.lineno})")
            elif kind == "bench" and fn in BENCH_RUNNERS.get(mod, ()) and simt_devices(
                    [a for a in call.args] + [k.value for k in call.keywords]) + [
                    a for a in call.args if _is_str(a, "simt")]:
                found.append(f"{mod}.{fn} on simt (line {call.lineno})")
            elif kind == "helper" and fn in helper_simt_functions(mod):
                found.append(f"{mod}.{fn} (calls the API on simt; line {call.lineno})")
        return found

    def calls_api(self, nodes) -> bool:
        if self.indirect_simt(nodes):
            return True
        for node in nodes:
            for sub in ast.walk(node):
                if isinstance(sub, ast.Attribute) and sub.attr in PUBLIC \
                        and isinstance(sub.value, ast.Name) and sub.value.id in self.modules:
                    return True
                if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name):
                    f = sub.func.id
                    if f in self.direct or f in SEEDS or f == "ops":
                        return True
                    if f == "getattr" and sub.args and isinstance(sub.args[0], ast.Name) \
                            and sub.args[0].id in self.modules:
                        return True
        return False


def simt_devices(nodes) -> list:
    """Where ``nodes`` name simt as a device: ``device="simt"``, ``ops("simt")``, a
    ``CUPYOPS_DEVICE`` of simt, or a list / tuple / set holding ``"simt"``."""
    found = []
    for node in nodes:
        for sub in ast.walk(node):
            if isinstance(sub, ast.keyword) and sub.arg == "device" and _is_str(sub.value, "simt"):
                found.append(f'device="simt" (line {sub.value.lineno})')
            elif isinstance(sub, (ast.List, ast.Tuple, ast.Set)) \
                    and any(_is_str(e, "simt") for e in sub.elts):
                found.append(f"a device list with simt (line {sub.lineno})")
            elif isinstance(sub, ast.Call) and isinstance(sub.func, (ast.Name, ast.Attribute)):
                f = sub.func.id if isinstance(sub.func, ast.Name) else sub.func.attr
                if f == "ops" and sub.args and _is_str(sub.args[0], "simt"):
                    found.append(f'ops("simt") (line {sub.lineno})')
                elif f == "setenv" and len(sub.args) == 2 and _is_str(sub.args[1], "simt"):
                    found.append(f"CUPYOPS_DEVICE=simt (line {sub.lineno})")
    return found


def _names_a_form(node) -> bool:
    """Whether ``node`` is a test of a device's GPU input form and nothing else: ``is_cupy(d)``,
    a comparison of a name with "cupy" / "cuda" (or a tuple of them), their ``not`` and
    ``or``."""
    if isinstance(node, ast.Call):
        return isinstance(node.func, ast.Name) and node.func.id == "is_cupy"
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return _names_a_form(node.operand)
    if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or):
        return all(_names_a_form(v) for v in node.values)
    if isinstance(node, ast.Compare) and len(node.comparators) == 1:
        pair = [node.left, node.comparators[0]]
        forms = [p for p in pair if _is_str(p, "cupy") or _is_str(p, "cuda") or (
            isinstance(p, (ast.Tuple, ast.List, ast.Set)) and p.elts
            and all(_is_str(e, "cupy") or _is_str(e, "cuda") for e in p.elts))]
        return len(forms) == 1 and any(isinstance(p, ast.Name) for p in pair)
    return False


def _leaves(stmt) -> bool:
    """Whether ``stmt`` leaves the loop or the test: continue, return, pytest.skip(...)."""
    if isinstance(stmt, (ast.Continue, ast.Return)):
        return True
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and \
        isinstance(stmt.value.func, ast.Attribute) and stmt.value.func.attr == "skip"


def _device_uses(node) -> set:
    """The names ``node`` passes as a device: ``device=d``, ``ops(d)``, ``device_kw(d)``,
    ``to_device(x, d)``."""
    out = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.keyword) and sub.arg == "device" and isinstance(sub.value, ast.Name):
            out.add(sub.value.id)
        elif isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name) and sub.args:
            arg = sub.args[-1] if sub.func.id == "to_device" else sub.args[0]
            if sub.func.id in ("ops", "device_kw", "to_device") and isinstance(arg, ast.Name):
                out.add(arg.id)
    return out


def dropped_forms(nodes) -> list:
    """Where ``nodes`` drop a GPU input form from the kernel devices: ``continue`` /
    ``return`` / ``pytest.skip`` first thing under a test of the device, or a device list
    filtered by one (iterated, its items passed as the device)."""
    found = []
    for node in nodes:
        for sub in ast.walk(node):
            if isinstance(sub, ast.If) and _names_a_form(sub.test) and _leaves(sub.body[0]):
                found.append(f"skips a form (line {sub.lineno})")
            elif isinstance(sub, ast.For) and isinstance(sub.target, ast.Name) \
                    and isinstance(sub.iter, (ast.ListComp, ast.GeneratorExp)) \
                    and any(_names_a_form(c) for g in sub.iter.generators for c in g.ifs) \
                    and sub.target.id in _device_uses(sub):
                found.append(f"a device list without a form (line {sub.lineno})")
    return found


def one_form_tests(modules) -> dict:
    """``{node id: where}`` of the tests over the kernel devices that drop a GPU input form."""
    out = {}
    for mod in modules:
        for name, test in mod.tests.items():
            nodes = mod.reach(test) + list(test.decorator_list)
            if not any(isinstance(s, ast.Name) and s.id in KERNEL_LISTS
                       for n in nodes for s in ast.walk(n)):
                continue
            where = dropped_forms(nodes)
            if where:
                out[mod.node_id(name)] = where
    return out


_HELPER_SIMT = {}


def helper_simt_functions(name: str) -> frozenset:
    """The functions of the test helper module tests/<name>.py that call the API on simt."""
    if name not in _HELPER_SIMT:
        _HELPER_SIMT[name] = frozenset()           # (a helper importing itself: no loop)
        mod = Module(TESTS / f"{name}.py")
        _HELPER_SIMT[name] = frozenset(
            f for f, node in mod.funcs.items()
            if simt_devices(mod.reach(node)) and mod.calls_api(mod.reach(node)))
    return _HELPER_SIMT[name]


def survey(modules) -> dict:
    """``{node id: (markers, gpu-marked)}`` of every test that calls the API on simt."""
    out = {}
    for mod in modules:
        for name, test in mod.tests.items():
            nodes = mod.reach(test) + list(test.decorator_list)
            marks = simt_devices(nodes) + mod.indirect_simt(nodes)
            if marks and mod.calls_api(nodes):
                gpu = mod.gpu_module or any(_marked_gpu(d) for d in test.decorator_list)
                out[mod.node_id(name)] = (marks, gpu)
    return out


def _modules():
    return [Module(p) for p in sorted(TESTS.rglob("test_*.py"))]


MODULES = _modules()
SURVEY = survey(MODULES)


def test_every_api_test_on_simt_also_covers_the_gpu():
    """A test calling the API on simt takes its devices from KERNEL_DEVICES (then it names no
    simt device of its own) or is listed in EMULATOR_ONLY."""
    bad = {tid: marks for tid, (marks, gpu) in SURVEY.items()
           if not gpu and tid not in _devices.EMULATOR_ONLY}
    assert not bad, "these tests call the API on simt only; take the devices from " \
        "_devices.KERNEL_DEVICES / ops(device), or list an emulator test in " \
        "_devices.EMULATOR_ONLY:\n" + "\n".join(f"  {t}: {m[:3]}" for t, m in bad.items())


def test_api_tests_take_every_gpu_input_form():
    """A test over the kernel devices runs on "cuda" (NumPy input) and "cupy" (CuPy input)
    both, unless ONE_FORM says why its input has one form only (issue 36)."""
    found = one_form_tests(MODULES)
    bad = {t: w for t, w in found.items() if t not in ONE_FORM}
    assert not bad, "these tests drop a GPU input form; take both, or say why in ONE_FORM:\n" + \
        "\n".join(f"  {t}: {w}" for t, w in bad.items())
    assert set(ONE_FORM) <= set(found), set(ONE_FORM) - set(found)   # no stale entry


def test_emulator_only_tests_say_so_and_exist():
    for tid in sorted(_devices.EMULATOR_ONLY):
        assert any(k in tid for k in KEYWORDS), f"{tid}: its name does not say why it stays on simt"
        assert tid in SURVEY, f"{tid}: no such test calling the API on simt (a stale entry?)"


def test_cupy_input_comes_after_the_numpy_input_devices():
    bad = []
    for mod in MODULES + [Module(TESTS / "_devices.py")]:
        for sub in ast.walk(mod.tree):
            if isinstance(sub, ast.BinOp) and isinstance(sub.op, ast.Add) and any(
                    isinstance(n, ast.Name) and n.id in KERNEL_LISTS for n in ast.walk(sub.left)):
                bad.append(f"{mod.path.name}:{sub.lineno} adds devices after KERNEL_DEVICES")
            if isinstance(sub, (ast.List, ast.Tuple)):
                names = [e.value for e in sub.elts if isinstance(e, ast.Constant)]
                if "cupy" in names and "cuda" in names and names.index("cupy") < names.index("cuda"):
                    bad.append(f"{mod.path.name}:{sub.lineno} lists cupy before cuda")
    assert not bad, bad
    assert _devices.KERNEL_DEVICES[-2:] == ["cuda", "cupy"] or _devices.KERNEL_DEVICES == ["simt"]


def test_a_gpu_is_what_cuda_status_says():
    ok = bool(cuda_status()[0])
    assert _devices.GPU is ok
    assert _devices.KERNEL_DEVICES == ["simt"] + (["cuda", "cupy"] if ok else [])
    assert _devices.NONZERO_KERNEL_DEVICES == _devices.KERNEL_DEVICES
    bad = [f"{m.path.name}:{n.lineno}" for m in MODULES for n in ast.walk(m.tree)
           if isinstance(n, ast.Attribute) and n.attr == "is_available"]
    assert not bad, f"GPU presence decided without cuda_status(): {bad}"


def test_the_survey_sees_a_simt_only_test():
    """The checks above can fail: a simt-only API call in a new test module is found, in
    each form, and a test over KERNEL_DEVICES is not."""
    src = '''
import cupyops
from _devices import KERNEL_DEVICES, ops
DEVICES = ["cpu", "simt"]

def _helper(x):
    return cupyops.argmax(x, device="simt")

def test_keyword(x):
    cupyops.argwhere(x, device="simt")

def test_list():
    for d in DEVICES:
        getattr(cupyops, "argmin")(1, device=d)

def test_helper():
    _helper(1)

def test_ops():
    ops("simt").hardmax(1)

def test_env(monkeypatch):
    monkeypatch.setenv("CUPYOPS_DEVICE", "simt")
    cupyops.count_nonzero(1)

def test_covered():
    for d in ["cpu"] + KERNEL_DEVICES:
        ops(d).argmax(1)

def test_not_the_api():
    from cupyops.core.backend import get_backend
    get_backend("simt")

def test_bench_on_simt(tmp_path):
    from cupyops.bench import bench
    bench.main(["--device", "simt", "--tiny"])

def test_bench_on_cpu():
    from cupyops.bench import bench
    bench.main(["--tiny"])

def test_overhead():
    from cupyops.bench import overhead
    overhead.run("cpu")

def test_marshal_sweep():
    cupy_marshal.record_sweep()

def test_skips_cupy():
    for d in KERNEL_DEVICES:
        if is_cupy(d):
            continue
        ops(d).argmax(1)

def test_filters_cuda():
    for d in [d for d in KERNEL_DEVICES if d != "cuda"]:
        ops(d).argmax(1)

def test_both_forms_differently():
    for d in KERNEL_DEVICES:
        if is_cupy(d):
            ops(d).argmax(2)
        else:
            ops(d).argmax(1)
    for env in [d for d in KERNEL_DEVICES if not is_cupy(d)]:
        print(env)
'''
    src = "import cupy_marshal\nfrom _devices import is_cupy\n" + src
    path = TESTS / "test_synthetic_probe.py"
    mod = Module(path, src)
    found = survey([mod])
    assert sorted(found) == sorted(f"test_synthetic_probe.py::{t}" for t in
                                   ("test_keyword", "test_list", "test_helper", "test_ops",
                                    "test_env", "test_bench_on_simt", "test_overhead",
                                    "test_marshal_sweep")), found
    assert sorted(one_form_tests([mod])) == ["test_synthetic_probe.py::test_filters_cuda",
                                             "test_synthetic_probe.py::test_skips_cupy"]


# ---------------------------------------------------------------------- CuPy input's layout

def _numpy_stand_in():
    """to_device's buffer operations in NumPy: a 256-byte-aligned buffer, as CuPy's pool."""
    def empty(n):
        raw = np.full(n + 256, 0xAB, np.uint8)
        start = -raw.ctypes.data % 256
        return raw[start:start + n]

    def view(raw, shape, dtype, offset, strides):
        return np.ndarray(shape, dtype, buffer=raw, offset=offset, strides=strides)

    def put(dst, src):
        dst[...] = src
    return empty, view, put


def _layouts():
    rng = np.random.default_rng(0)
    base = rng.integers(0, 9, (6, 10)).astype(np.float32)
    raw = np.zeros(base.nbytes + 64, np.uint8)
    off = -raw.ctypes.data % 16 + 4
    shifted = raw[off:off + base.nbytes].view(np.float32).reshape(base.shape)
    shifted[...] = base
    c64 = np.zeros(2 * 30 + 2, np.float32)[1:-1].view(np.complex64)
    c64[...] = np.arange(30) * (1 + 2j)
    out = {
        "C": base, "F": np.asfortranarray(base), "negative": base[::-1, ::-2],
        "step": base[1::2, ::3], "broadcast": np.broadcast_to(base[:1], (4096, 10)),
        "shifted": shifted, "complex64 at 4": c64.reshape(5, 6),
        "nonnative": base.astype(">f4")[:, ::-1], "0-d": np.array(2.5),
        "unaligned": np.frombuffer(b"\0" + base.tobytes(), np.float32, offset=1).reshape(6, 10),
    }
    ml_dtypes = pytest.importorskip("ml_dtypes")
    out["bfloat16"] = base.astype(ml_dtypes.bfloat16)[::-1]
    return out


@pytest.mark.parametrize("name", list(_layouts()))
def test_cupy_input_keeps_the_layout(name):
    from cupyops.core.dtypes import element_alignment
    x = _layouts()[name]
    dt = x.dtype.newbyteorder("=")
    y = _devices.copy_into(x, dt, *_numpy_stand_in())
    assert y.dtype == dt and y.shape == x.shape and y.strides == x.strides
    np.testing.assert_array_equal(y.view(np.uint16) if dt.kind == "V" else y,
                                  x.astype(dt).view(np.uint16) if dt.kind == "V" else x)
    ptr = x.__array_interface__["data"][0]
    yptr = y.__array_interface__["data"][0]
    align = element_alignment(dt)
    assert yptr % align == 0
    if ptr % align == 0:
        assert yptr % 256 == ptr % 256, (name, ptr % 256, yptr % 256)
    if name == "broadcast":                  # the repeats are not copied
        nbytes, _ = _devices.copy_layout(x, align)
        assert nbytes < 256 + 10 * 4


@pytest.mark.gpu
@pytest.mark.parametrize("name", list(_layouts()))
def test_cupy_input_keeps_the_layout_on_the_gpu(name):
    """to_device itself, on a GPU: CuPy arrays with x's strides, offset and values; host()
    brings them back with the same strides."""
    from cupyops.core.dtypes import element_alignment
    x = _layouts()[name]
    y = _devices.to_device(x, "cupy")
    dt = x.dtype.newbyteorder("=")
    assert type(y).__module__.startswith("cupy") and y.dtype == dt and y.strides == x.strides
    ptr = x.__array_interface__["data"][0]
    if ptr % element_alignment(dt) == 0:
        assert int(y.data.ptr) % 256 == ptr % 256
    back = _devices.host(y)
    assert back.strides == x.strides
    bits = (lambda a: a.view(np.uint16)) if dt.kind == "V" else (lambda a: a)
    np.testing.assert_array_equal(bits(back), bits(x.astype(dt)))


@pytest.mark.parametrize("name", list(_layouts()))
def test_cupy_results_come_back_with_their_strides(name):
    x = _layouts()[name]
    if x.dtype.kind == "V":
        x = x.view(np.uint16)
    y = _devices.laid_out(x.copy(order="C"), x.strides)
    assert y.strides == x.strides and y.dtype == x.dtype
    np.testing.assert_array_equal(y, x)
    assert (y.flags.c_contiguous, y.flags.f_contiguous) == (x.flags.c_contiguous,
                                                            x.flags.f_contiguous)


def test_results_come_back_as_numpy_and_workspaces_follow_the_device():
    r = np.arange(3)
    assert _devices.host(r) is r and _devices.host((r, r))[1] is r
    assert _devices.device_kw("cupy") == {} and _devices.device_kw("cuda") == {"device": "cuda"}
    assert _devices.to_device(r, "simt") is r and _devices.to_device(r, "cuda") is r
    assert not _devices.cupy_can_hold("M8[s]") and _devices.cupy_can_hold(np.complex64)
