"""cupyops.core.modules: C++ types, name expressions, include inlining, the module cache."""
import threading
import time

import numpy as np
import pytest

from cupyops.core import modules as m
from _fake_modules import FakeCompileError, registered_factory


# ------------------------------------------------------------------------------------------
# C++ types and name expressions
# ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype, expected", [
    (np.bool_, "bool"), (np.int8, "signed char"), (np.uint8, "unsigned char"),
    (np.int16, "short"), (np.uint16, "unsigned short"), (np.int32, "int"),
    (np.uint32, "unsigned int"), (np.int64, "long long"), (np.uint64, "unsigned long long"),
    (np.float16, "cupyops_half"), (np.float32, "float"), (np.float64, "double"),
    (np.complex64, "cupyops_complex64"), (np.complex128, "cupyops_complex128"),
])
def test_ctype(dtype, expected):
    assert m.ctype(dtype) == expected
    assert m.ctype(np.dtype(dtype)) == expected
    assert m.ctype(np.dtype(dtype).newbyteorder(">")) == expected   # byte order is not a type
    assert m.CTYPES[np.dtype(dtype)] == expected


def test_ctypes_table_is_complete():
    assert len(m.CTYPES) == 15 + (m._bf16.dtype() is not None)   # + bfloat16 with ml_dtypes


@pytest.mark.parametrize("bad", [np.object_, np.str_, "datetime64[s]", np.longdouble, np.clongdouble])
def test_ctype_unsupported(bad):
    with pytest.raises(TypeError, match="no C\\+\\+ type"):
        m.ctype(bad)


def test_name_expression():
    assert m.name_expression("f", np.dtype(np.float32), True, 4) == "f<float, true, 4>"
    assert m.name_expression("f", np.float32, True, 4) == "f<float, true, 4>"
    assert m.name_expression("g", np.int64, False, -3, "MyOp") == "g<long long, false, -3, MyOp>"
    assert m.name_expression("h", np.bool_(True), np.int32(7)) == "h<true, 7>"
    assert m.name_expression("plain") == "plain"
    assert (m.name_expression("argreduce_row", np.float16, np.uint32, True, False)
            == "argreduce_row<cupyops_half, unsigned int, true, false>")


def test_name_expression_rejects_other_types():
    with pytest.raises(TypeError):
        m.name_expression("f", 1.5)
    with pytest.raises(TypeError):
        m.name_expression("f", None)


# ------------------------------------------------------------------------------------------
# Sources
# ------------------------------------------------------------------------------------------

def test_read_kernel_file_through_resources():
    text = m.read_kernel_file("selftest.cu")
    assert text.startswith("// selftest.cu")
    assert "selftest_count" in text


def test_read_kernel_file_errors():
    with pytest.raises(FileNotFoundError):
        m.read_kernel_file("no_such_kernel.cu")
    with pytest.raises(ValueError):
        m.read_kernel_file("../pyproject.toml")


FILES = {
    "main.cu": '#include "a.cuh"\n#include <cuda_fp16.h>\n#include "b.cuh"\nint main_marker;\n',
    "a.cuh": '#pragma once\n#include "common.cuh"\nint a_marker;\n',
    "b.cuh": '#ifndef B_CUH\n#define B_CUH\n#include "common.cuh"\n  #  include "sub/c.cuh"\nint b_marker;\n#endif\n',
    "common.cuh": "#pragma once\nint common_marker;\n",
    "sub/c.cuh": '#include "../common.cuh"\n#include "d.cuh"\nint c_marker;\n',
    "sub/d.cuh": "int d_marker;\n",
}


def _reader(files):
    calls = []

    def read(name):
        calls.append(name)
        return files[name]
    return read, calls


def test_inline_includes_nested_once_each():
    read, calls = _reader(FILES)
    out = m.inline_includes(FILES["main.cu"], "main.cu", read)
    for marker in ("main", "a", "b", "c", "d", "common"):
        assert out.count(f"int {marker}_marker;") == 1, marker
    assert sorted(calls) == sorted(["a.cuh", "common.cuh", "b.cuh", "sub/c.cuh", "sub/d.cuh"])
    assert "#include <cuda_fp16.h>" in out                        # system include left alone
    assert "#pragma once" not in out
    assert not any(line.lstrip().startswith("#") and "include" in line and '"' in line
                   and not line.lstrip().startswith("#line") for line in out.splitlines())
    # order: a header's content comes before the code after its include
    assert out.index("common_marker") < out.index("a_marker") < out.index("d_marker") \
        < out.index("c_marker") < out.index("b_marker") < out.index("main_marker")


def test_inline_includes_line_directives():
    read, _ = _reader(FILES)
    out = m.inline_includes(FILES["main.cu"], "main.cu", read)
    assert '#line 1 "a.cuh"' in out
    assert '#line 1 "sub/d.cuh"' in out
    # back in main.cu after "a.cuh" (line 1) the next line is line 2
    assert '#line 2 "main.cu"' in out


def test_inline_includes_cycle():
    files = {"x.cuh": '#include "y.cuh"\n', "y.cuh": '#include "x.cuh"\n'}
    read, _ = _reader(files)
    with pytest.raises(ValueError, match="include cycle"):
        m.inline_includes('#include "x.cuh"\n', "main.cu", read)


def test_module_source_selftest(selftest_family):
    src = m.module_source("selftest")
    assert "selftest_iota" in src
    assert "cuo::" in src and "cupyops_half" in src       # common.cuh inlined
    assert "#include <" not in src                           # no system header: no -I needed


# ------------------------------------------------------------------------------------------
# Families
# ------------------------------------------------------------------------------------------

def test_register_family(selftest_family):
    assert m.families()["selftest"] is selftest_family
    assert m.get_family("selftest") is selftest_family
    exprs = selftest_family.expressions_for(np.float32)
    assert exprs == ("selftest_count<float, false>", "selftest_count<float, true>",
                     "selftest_iota<float, 3>")
    assert m.compile_options(selftest_family) == m.NVRTC_OPTIONS
    with pytest.raises(TypeError, match="does not serve"):
        selftest_family.expressions_for(np.complex64)


def test_register_family_conflict(selftest_family):
    other = m.KernelFamily(name="selftest", source="other.cu", dtypes=(np.float32,),
                           expressions=lambda dt: ("k",))
    with pytest.raises(ValueError, match="already registered"):
        m.register_family(other)


def test_unknown_family():
    with pytest.raises(KeyError, match="unknown kernel family"):
        m.get_family("no-such-family")


def test_family_metadata_defaults():
    fam = m.KernelFamily(name="x", source="x.cu", dtypes=(np.float32,),
                         expressions=lambda dt: ("k",), options=["-DX"])
    assert fam.options == ("-DX",)
    assert fam.block_sizes_for("k") == (256,)
    assert fam.dynamic_shared_for(np.float32, "k", 256) == 0
    fam2 = dataclass_replace(fam, block_sizes=lambda e: (128, 512),
                             dynamic_shared=lambda dt, e, b: b * dt.itemsize)
    assert fam2.block_sizes_for("k") == (128, 512)
    assert fam2.dynamic_shared_for(np.float32, "k", 128) == 512


def dataclass_replace(obj, **kw):
    import dataclasses
    return dataclasses.replace(obj, **kw)


# ------------------------------------------------------------------------------------------
# Module cache with a fake backend
# ------------------------------------------------------------------------------------------

class FakeModule:
    def __init__(self, source, options, exprs, device_id):
        self.source, self.options, self.exprs, self.device_id = source, options, exprs, device_id

    def get_function(self, expr):
        assert expr in self.exprs
        return ("fn", expr, self.device_id)


@pytest.fixture
def fake_backend(selftest_family):
    state = {"compiles": 0, "fail": None, "delay": 0.0}
    lock = threading.Lock()

    def factory(source, options, exprs, device_id):
        with lock:
            state["compiles"] += 1
        time.sleep(state["delay"])
        if state["fail"]:
            raise FakeCompileError(state["fail"])
        return FakeModule(source, options, exprs, device_id)

    with registered_factory("fake", factory):
        yield state


def test_get_module_cached(fake_backend):
    first = m.SELFTEST_FAMILY.expressions_for(np.float32)[0]
    mod = m.get_module("fake", "selftest", np.float32)
    assert isinstance(mod, FakeModule)
    assert mod.exprs == (first,)                  # one module per expression (the default)
    assert mod.options == m.NVRTC_OPTIONS
    assert mod.source == m.module_source("selftest", (first,))
    assert mod.source.startswith(m.module_source("selftest"))
    assert m.get_module("fake", "selftest", np.dtype("float32")) is mod
    assert m.get_module("fake", "selftest", np.dtype(">f4")) is mod     # same key
    assert m.get_module("fake", "selftest", np.float32, expr=first) is mod
    assert fake_backend["compiles"] == 1
    # another dtype, another device, another expression: other modules
    assert m.get_module("fake", "selftest", np.float64) is not mod
    mod1 = m.get_module("fake", "selftest", np.float32, device_id=1)
    assert mod1 is not mod and mod1.device_id == 1
    other = m.get_module("fake", "selftest", np.float32, expr="selftest_iota<float, 3>")
    assert other is not mod and other.exprs == ("selftest_iota<float, 3>",)
    assert fake_backend["compiles"] == 4
    assert ("fake", 0, "selftest", (first,)) in m.cached_keys()


def test_a_function_compiles_only_its_module(fake_backend):
    fn = m.get_function("fake", "selftest", np.float32, "selftest_iota<float, 3>")
    assert fn == ("fn", "selftest_iota<float, 3>", 0)
    assert fake_backend["compiles"] == 1
    assert m.cached_keys() == [("fake", 0, "selftest", ("selftest_iota<float, 3>",))]


def test_modules_with_the_same_instantiations_are_one(fake_backend):
    """Two dtypes whose expressions are the same strings (the nonzero family's bool and int8)
    share the module: the key is the expressions, not the dtype."""
    fam = m.KernelFamily(name="selftest_shared", source="selftest.cu",
                         dtypes=(np.int8, np.uint8),
                         expressions=lambda dt: ("selftest_count<unsigned char, false>",))
    m.register_family(fam)
    try:
        a = m.get_module("fake", "selftest_shared", np.int8)
        assert m.get_module("fake", "selftest_shared", np.uint8) is a
        assert fake_backend["compiles"] == 1
    finally:
        m._families.pop("selftest_shared", None)
        m.clear_cache("selftest_shared")


def test_no_two_modules_share_a_key_or_a_source(selftest_family):
    """Every module of every registered family (and the selftest's) has its own in-process key
    and its own source text, so no cache keyed by either (CuPy's disk cache hashes the source,
    and, from CuPy 14.2, the expressions) can hand one module's binary to another."""
    import cupyops  # noqa: F401  (registers the library's families)
    seen_keys, seen_sources = {}, {}
    for name, fam in m.families().items():
        for dt in fam.dtypes:
            for group in fam.modules_for(dt):
                key = m._module_key("cuda", name, group, 0)
                src = m.module_source(name, group)
                assert seen_keys.setdefault(key, (name, group)) == (name, group)
                assert seen_sources.setdefault(src, (name, group)) == (name, group)
    assert len(seen_keys) == len(seen_sources) > 100
    # the tag differs even where one module's expressions are a prefix of another's
    assert m.module_tag("f", ("a<int>",)) != m.module_tag("f", ("a<int>", "b<int>"))
    assert m.module_tag("f", ("a<int>; b<int>",)) == m.module_tag("f", ("a<int>", "b<int>"))


def test_grouping_must_partition_the_expressions(fake_backend):
    exprs = m.SELFTEST_FAMILY.expressions_for(np.float32)

    def family(grouping):
        return m.KernelFamily(name="selftest_grouped", source="selftest.cu",
                              dtypes=(np.float32,), expressions=m.SELFTEST_FAMILY.expressions,
                              grouping=grouping)
    whole = family(lambda dt, ex: (ex,))
    assert whole.modules_for(np.float32) == (exprs,)
    assert whole.module_of(np.float32, exprs[2]) == exprs
    for bad in (lambda dt, ex: (ex[:1],), lambda dt, ex: (ex, ex[:1]), lambda dt, ex: (ex, ()),
                lambda dt, ex: (ex + ("other<float>",),)):
        with pytest.raises(ValueError, match="grouping"):
            family(bad).modules_for(np.float32)
    with pytest.raises(KeyError, match="does not declare"):
        whole.module_of(np.float32, "selftest_iota<float, 4>")
    # a grouped family compiles its group once, whichever expression asks first
    m.register_family(whole)
    try:
        m.get_function("fake", "selftest_grouped", np.float32, exprs[1])
        m.get_function("fake", "selftest_grouped", np.float32, exprs[0])
        assert fake_backend["compiles"] == 1
    finally:
        m._families.pop("selftest_grouped", None)
        m.clear_cache("selftest_grouped")


def test_first_calls_name_declared_expressions():
    import cupyops  # noqa: F401
    for fam in m.families().values():
        for dt in fam.dtypes:
            plans = fam.first_calls_for(dt)
            assert plans and all(p.exprs for p in plans)
            # every kernel is some first call's
            assert {e for p in plans for e in p.exprs} == set(fam.expressions_for(dt))
    assert m.SELFTEST_FAMILY.first_calls_for(np.int8) == tuple(
        m.FirstCall("selftest", e, False, (e,)) for e in m.SELFTEST_FAMILY.expressions_for(np.int8))
    bad = m.KernelFamily(name="x", source="selftest.cu", dtypes=(np.int8,),
                         expressions=m.SELFTEST_FAMILY.expressions,
                         first_calls=lambda dt: (m.FirstCall("x", "p", False, ("nope<char>",)),))
    with pytest.raises(ValueError, match="undeclared"):
        bad.first_calls_for(np.int8)


def test_get_function(fake_backend):
    fn = m.get_function("fake", "selftest", np.int32, "selftest_iota<int, 3>")
    assert fn == ("fn", "selftest_iota<int, 3>", 0)
    assert m.get_function("fake", "selftest", np.int32, "selftest_iota<int, 3>") is fn
    with pytest.raises(KeyError, match="does not declare"):
        m.get_function("fake", "selftest", np.int32, "selftest_iota<int, 4>")
    assert fake_backend["compiles"] == 1


def test_lazy_no_compile_at_registration(fake_backend):
    assert fake_backend["compiles"] == 0


def test_threads_racing_compile_once(fake_backend):
    fake_backend["delay"] = 0.05
    n = 16
    barrier = threading.Barrier(n)
    results, errors = [], []

    def work(dt):
        try:
            barrier.wait()
            results.append(m.get_module("fake", "selftest", dt))
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(np.float32 if i % 2 else np.int16,))
               for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(results) == n
    assert len({id(r) for r in results}) == 2
    assert fake_backend["compiles"] == 2      # one per key, however many threads asked


def test_compile_error_carries_log(fake_backend):
    log = "kern.cu(12): error: identifier \"oops\" is undefined"
    fake_backend["fail"] = log
    with pytest.raises(m.KernelCompileError) as info:
        m.get_module("fake", "selftest", np.float32)
    err = info.value
    assert log in str(err)
    assert err.log == log
    assert err.family == "selftest" and err.backend == "fake"
    assert "--std=c++17" in str(err)
    assert isinstance(err.__cause__, FakeCompileError)
    # failures are not cached: fixing the cause and asking again compiles
    fake_backend["fail"] = None
    assert isinstance(m.get_module("fake", "selftest", np.float32), FakeModule)
    assert fake_backend["compiles"] == 2


def test_other_errors_propagate(selftest_family):
    def factory(source, options, exprs, device_id):
        raise OSError("disk on fire")
    m.register_module_factory("broken", factory)
    try:
        with pytest.raises(OSError, match="disk on fire"):
            m.get_module("broken", "selftest", np.float32)
    finally:
        m.register_module_factory("broken", None)


def test_unknown_backend(selftest_family):
    with pytest.raises(ValueError, match="unknown backend"):
        m.get_module("nope", "selftest", np.float32)


def test_import_does_not_import_cupy():
    import subprocess
    import sys
    code = ("import sys, cupyops, cupyops.core.modules, cupyops.core.backend, cupyops.core.precompile, "
            "cupyops.tools.nvrtc; print('cupy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# ------------------------------------------------------------------------------------------
# The real NVRTC through the CuPy path, when a GPU is present
# ------------------------------------------------------------------------------------------

@pytest.mark.gpu
def test_cuda_compile_error_carries_log(selftest_family):
    bad = m.KernelFamily(name="selftest_bad", source="selftest.cu", dtypes=(np.float32,),
                         expressions=lambda dt: ("selftest_nope<float, 3>",))
    m.register_family(bad)
    try:
        with pytest.raises(m.KernelCompileError) as info:
            m.get_module("cuda", "selftest_bad", np.float32)
        assert "selftest_nope" in info.value.log
        assert "selftest_nope" in str(info.value)
    finally:
        m._families.pop("selftest_bad", None)
        m.clear_cache("selftest_bad")


# ------------------------------------------------------------------------------------------
# precompile
# ------------------------------------------------------------------------------------------

def test_precompile_simt_with_fake_modules(fake_backend, monkeypatch):
    from cupyops.core import backend as _backend
    from cupyops.core import precompile as _precompile

    state = {"modules": 0}

    def factory(source, options, exprs, device_id):
        state["modules"] += 1
        return FakeModule(source, options, exprs, device_id)

    monkeypatch.setitem(m._factories, "simt", factory)
    monkeypatch.setattr(_backend, "_backends", {})
    m.clear_cache()
    per_dtype = len(m.SELFTEST_FAMILY.modules_for(np.float32))
    assert per_dtype == 3
    done = _precompile.precompile(["selftest"], [np.float32, "int8"], device="simt")
    assert done == [("selftest", np.dtype(np.int8)), ("selftest", np.dtype(np.float32))]
    assert state["modules"] == 2 * per_dtype
    be = _backend.get_backend("simt")
    assert set(be._kernels) == {("selftest", np.dtype(dt), e) for dt in (np.float32, np.int8)
                                for e in m.SELFTEST_FAMILY.expressions_for(dt)}
    # everything is ready: asking again compiles nothing
    _precompile.precompile("selftest", np.float32, device="simt")
    assert state["modules"] == 2 * per_dtype
    all_done = _precompile.precompile(["selftest"], device="simt", max_workers=3)
    assert len(all_done) == len(m.SELFTEST_DTYPES)
    assert state["modules"] == per_dtype * len(m.SELFTEST_DTYPES)


def test_precompile_compiles_in_parallel_and_counts(fake_backend, monkeypatch):
    """precompile's modules build in several threads at once (NVRTC and g++ release the GIL),
    each once, and the batch counts them as they finish."""
    from cupyops.core import precompile as _precompile
    state = {"now": 0, "peak": 0}
    lock = threading.Lock()

    def factory(source, options, exprs, device_id):
        with lock:
            state["now"] += 1
            state["peak"] = max(state["peak"], state["now"])
        time.sleep(0.05)
        with lock:
            state["now"] -= 1
        return FakeModule(source, options, exprs, device_id)

    m.register_module_factory("fake", factory)
    work = [(m.SELFTEST_FAMILY, np.dtype(d)) for d in (np.float32, np.int8)]
    modules = _precompile.module_list(work + work)          # each module once
    assert len(modules) == 6 and len(set(modules)) == 6
    done = []
    _precompile.compile_modules("fake", modules, 0, 3, lambda *mod: done.append(mod))
    assert sorted(done) == sorted(modules)
    assert state["peak"] >= 2
    assert {k[3] for k in m.cached_keys()} == {g for _, g in modules}


def test_precompile_raises_a_failure_after_the_others(fake_backend):
    from cupyops.core import precompile as _precompile
    fake_backend["fail"] = "boom"
    modules = _precompile.module_list([(m.SELFTEST_FAMILY, np.dtype(np.int8))])
    with pytest.raises(m.KernelCompileError, match="boom"):
        _precompile.compile_modules("fake", modules, 0, 2)
    assert fake_backend["compiles"] == 3


def test_precompile_arguments(selftest_family):
    from cupyops.core import precompile as _precompile
    assert _precompile.precompile(device="cpu") == []
    with pytest.raises(KeyError):
        _precompile.precompile(["no-such-family"], device="simt")
    with pytest.raises(TypeError, match="serves"):
        _precompile.precompile(["selftest"], [np.complex64], device="simt")
    with pytest.raises(ValueError):
        _precompile.precompile(device="tpu")
    assert _precompile._resolve_device("CUDA") == ("cuda", None)   # the one device parser
    assert _precompile._resolve_device("cuda:1") == ("cuda", 1)
    assert _precompile._resolve_device(2) == ("cuda", 2)
    assert _precompile._resolve_device("simt") == ("simt", 0)
