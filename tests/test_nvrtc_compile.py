"""Kernel families x value dtypes x architectures compile with NVRTC, without a GPU or driver,
with the options the CuPy path uses: no error, no register spills, no subnormal-flushing
instructions, and enough occupancy on sm_80 and sm_90. CI compiles a sample (below);
``--run-slow`` every family x dtype x architecture.

Each (family, dtype, arch) compiles the modules the library compiles for the dtype (a kernel
and index width each, :func:`cupyops.tools.nvrtc.runtime_modules`): a kernel's PTX does not
depend on the module it is compiled in (``test_grouping_keeps_every_kernels_ptx``), but ptxas
allocates its registers differently beside other kernels: ``segment_reduce<float, long long>``
showed 0 spills in the family x dtype module these checks compiled before, and 18 bytes of
spill stores alone, as the library runs it. Modules shared by dtypes (the nonzero family's
bool, int8 and uint8) compile once, all of them up front
in a process pool of 2 (session fixture), and the results are cached in the user's cache directory
(``cupyops.tools.nvrtc.default_cache_dir()``) keyed by a hash of the inlined source, options, name
expressions, arch and NVRTC version, so an unchanged kernel is not compiled again.
``CUPYOPS_NVRTC_ARCHS`` picks the architectures: ``required`` (75, 80, 86, 89, 90, 100, 120;
the default), a list such as ``80,90``, or ``all``: every architecture NVRTC supports from sm_75
up (sm_70 too with an NVRTC 12). ``pytest --run-slow`` selects ``all``.

Under ``required`` each architecture compiles the cubins of a sample of the dtypes
(``SAMPLED_DTYPES`` in tests/_nvrtc_sample.py, which says why each): sm_90, the H100/H200's,
every kind and width but the unsigned integers and int16; the others the dtypes whose registers
sit nearest a limit there. Occupancy is checked on sm_80 and sm_90 for what they compile. Every
module of every dtype still compiles with NVRTC in CI: tests/test_cupy_compile.py takes each
module through a real CuPy's compile path (PTX for sm_90: the front end, no ptxas). A list or
``all`` compiles every dtype for each architecture, and so does ``--run-slow``. The previous
sample was 1,256 compiles and 1,950 s of NVRTC in a cold CI run on 2 cores (2026-11-29: the
kernels compile one module each since issue 33, and the segment family's flat path added 12
kernels a dtype); this one is 924 compiles and about 1,230 s of it.
"""
import os

import numpy as np
import pytest

from cupyops.core import modules as _modules

try:
    import cuda.bindings.nvrtc  # noqa: F401
    HAVE_NVRTC = True
    WHY = ""
except ImportError as e:   # the test extra installs cuda-bindings; a bare install may not have it
    HAVE_NVRTC = False
    WHY = f"cuda-bindings is not importable ({e}); pip install -e .[test]"

from cupyops.tools import nvrtc as _nvrtc

from _nvrtc_sample import SAMPLED_DTYPES, checked

if HAVE_NVRTC:
    ok, why = _nvrtc.available()
    if not ok:
        HAVE_NVRTC, WHY = False, f"NVRTC does not load: {why}"

pytestmark = pytest.mark.skipif(not HAVE_NVRTC, reason=WHY or "no NVRTC")

# Families register when their launch modules are imported; an import error here is a real
# failure, so it is not swallowed.
_nvrtc.load_family_modules()
_modules.register_family(_modules.SELFTEST_FAMILY)

OCCUPANCY_ARCHS = (80, 90)


def _archs():
    if not HAVE_NVRTC:
        return ()
    archs = _nvrtc.check_archs()
    only = os.environ.get("CUPYOPS_NVRTC_ARCHS", "required").strip()
    if only == "required":
        keep = set(_nvrtc.REQUIRED_ARCHS)
    elif only in ("", "all"):
        keep = set(archs)
    else:
        keep = {int(a) for a in only.split(",") if a.strip()}
    return tuple(a for a in archs if a in keep)


ARCHS = _archs()
FAMILIES = _modules.families()
ITEMS = [(name, dt, arch) for name, fam in FAMILIES.items() for dt in fam.dtypes for arch in ARCHS
         if checked(name, dt, arch)]
IDS = [f"{n}-{dt}-sm_{a}" for n, dt, a in ITEMS]


#: (family, dtype) -> the expressions of each module the library compiles for the dtype
RUNTIME = {(name, dt): [] for name, fam in FAMILIES.items() for dt in fam.dtypes}
for _fam, _dts, _exprs in (_nvrtc.runtime_modules() if HAVE_NVRTC else ()):
    for _dt in _dts:
        RUNTIME[(_fam.name, _dt)].append(_exprs)


@pytest.fixture(scope="session")
def compiled(request, tmp_path_factory):
    """{(family, dtype, arch): CompileResult | NvrtcError}: the dtype's runtime modules (each
    kernel as the library compiles it, a module of its own: ptxas allocates a kernel beside
    others differently, 0 spills in a family x dtype module hid 18 bytes of a kernel compiled
    alone), compiled once per session and merged per item."""
    # the user-level cache (keyed by a hash of source, options, expressions, arch and NVRTC
    # version): a fresh clone on a machine that compiled the same modules before reuses them
    cache_dir = _nvrtc.default_cache_dir()
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
    except OSError:
        cache_dir = tmp_path_factory.mktemp("cupyops-nvrtc")
    # only what the selected tests use (a -k run compiles less), always the selftest modules
    wanted = {it for it in ITEMS if it[0] == "selftest"}
    for item in request.session.items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if {"name", "dt", "arch"} <= set(params) and item.module.__name__ == __name__:
            wanted.add((params["name"], params["dt"], params["arch"]))
    todo = [(name, dt, arch, exprs) for name, dt, arch in ITEMS if (name, dt, arch) in wanted
            for exprs in RUNTIME[(name, dt)]]
    results = _nvrtc.compile_many(todo, cache_dir=cache_dir, jobs=2, errors="return")
    per_item: dict = {}
    for (name, dt, arch, _), res in zip(todo, results):
        per_item.setdefault((name, dt, arch), []).append(res)
    return {it: _nvrtc.merge_results(rs) for it, rs in per_item.items()}


def _result(compiled, name, dt, arch):
    res = compiled[(name, dt, arch)]
    if isinstance(res, Exception):
        pytest.fail(f"{name} {dt} sm_{arch} does not compile:\n{res}", pytrace=False)
    return res


# ------------------------------------------------------------------------------------------
# Architectures
# ------------------------------------------------------------------------------------------

def test_required_archs_supported():
    assert _nvrtc.missing_required_archs() == ()
    archs = _nvrtc.check_archs()
    assert min(archs) >= _nvrtc.min_arch()
    assert set(_nvrtc.REQUIRED_ARCHS) <= set(archs)


def test_the_sample_names_every_required_arch():
    """Under ``required`` every required architecture has its sample (an architecture
    missing from it would compile no family's cubin, silently)."""
    assert set(SAMPLED_DTYPES) == set(_nvrtc.REQUIRED_ARCHS)
    assert 90 in _nvrtc.REQUIRED_ARCHS
    served = {str(dt) for fam in FAMILIES.values() for dt in fam.dtypes}
    assert all(set(map(str, dts)) <= served for dts in SAMPLED_DTYPES.values())


def test_every_kernel_template_has_a_sampled_cubin():
    """Every kernel of every family is compiled to a sm_90 cubin (ptxas: registers, spills,
    occupancy) for some dtype, also when the checks sample."""
    for name, fam in FAMILIES.items():
        every = {e.split("<")[0] for dt in fam.dtypes for e in fam.expressions_for(dt)}
        cubins = {e.split("<")[0] for dt in fam.dtypes if checked(name, dt, 90)
                  for e in fam.expressions_for(dt)}
        assert cubins == every, (name, every - cubins)


def test_every_checked_arch_has_limits():
    for a in _nvrtc.check_archs():
        lim = _nvrtc.arch_limits(a)
        assert lim.max_warps_per_sm in (32, 48, 64), a


# ------------------------------------------------------------------------------------------
# Per family x dtype x arch
# ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, dt, arch", ITEMS, ids=IDS)
def test_compiles_without_spills(compiled, name, dt, arch):
    res = _result(compiled, name, dt, arch)
    fam = FAMILIES[name]
    exprs = fam.expressions_for(dt)
    missing = [e for e in exprs if e not in res.kernels]
    assert not missing, f"no ptxas report for {missing} (not __global__?)\n{res.log}"
    spills = {e: (k.spill_stores, k.spill_loads) for e, k in res.kernels.items()
              if k.spill_stores or k.spill_loads}
    assert not spills, f"register spills (stores, loads) on sm_{arch}: {spills}"


@pytest.mark.parametrize("name, dt, arch", ITEMS, ids=IDS)
def test_no_subnormal_flushing(compiled, name, dt, arch):
    """CuPy compiles with -ftz=true (after our options, so it cannot be undone): a float
    comparison then reads a subnormal as 0, and argmax/nonzero would differ from NumPy.
    Compare float bit patterns instead (see kernels/selftest.cu)."""
    res = _result(compiled, name, dt, arch)
    ftz = {e: k.ftz_instructions for e, k in res.kernels.items() if k.ftz_instructions > 0}
    assert not ftz, f"PTX instructions with .ftz per kernel on sm_{arch}: {ftz}"


OCC_ITEMS = [it for it in ITEMS if it[2] in OCCUPANCY_ARCHS]


@pytest.mark.parametrize("name, dt, arch", OCC_ITEMS,
                         ids=[f"{n}-{dt}-sm_{a}" for n, dt, a in OCC_ITEMS])
def test_occupancy(compiled, name, dt, arch):
    res = _result(compiled, name, dt, arch)
    fam = FAMILIES[name]
    low = []
    for expr in fam.expressions_for(dt):
        k = res.kernels[expr]
        for bs in fam.block_sizes_for(expr):
            occ = _nvrtc.occupancy(k.registers, bs, arch, k.shared_static,
                                   fam.dynamic_shared_for(dt, expr, bs))
            if occ.fraction < fam.min_occupancy:
                low.append(f"{expr} block {bs}: {occ.fraction:.0%} ({occ.active_warps}/"
                           f"{occ.max_warps} warps, limited by {occ.limiter}; "
                           f"{k.registers} regs, {k.shared_static} B static smem)")
    assert not low, f"occupancy below {fam.min_occupancy:.0%} on sm_{arch}:\n" + "\n".join(low)


# ------------------------------------------------------------------------------------------
# The machinery itself
# ------------------------------------------------------------------------------------------

def test_selftest_module_all_archs_and_timing(compiled):
    res = [compiled[("selftest", dt, a)] for dt in _modules.SELFTEST_DTYPES for a in ARCHS]
    assert all(not isinstance(r, Exception) for r in res)
    k = compiled[("selftest", np.dtype(np.float32), ARCHS[-1])].kernels
    assert set(k) == set(_modules.SELFTEST_FAMILY.expressions_for(np.float32))
    assert all(s.registers > 0 for s in k.values())


# ------------------------------------------------------------------------------------------
# The library's modules: every instantiation checked here is in exactly one of them, with the
# same PTX
# ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_runtime_modules_cover_every_checked_instantiation_once(name):
    fam = FAMILIES[name]
    for dt in fam.dtypes:
        modules = [g for f, dts, g in _nvrtc.runtime_modules([fam]) if dt in dts]
        flat = [e for g in modules for e in g]
        assert sorted(flat) == sorted(fam.expressions_for(dt)), dt


@pytest.mark.parametrize("name, dt", [("argreduce", np.dtype(np.uint8)),
                                      ("nonzero", np.dtype(np.complex128))])
def test_grouping_keeps_every_kernels_ptx(name, dt):
    """Each kernel's PTX (entry, the functions it keeps, module declarations) compiled alone as
    the library compiles it equals its PTX in the family x dtype compile these checks make
    (the registers, spills and occupancy above are of the same code). Every dtype, by
    ``python -m cupyops.tools.nvrtc --compare-ptx``; one each here (4 s of NVRTC)."""
    diffs = _nvrtc.compare_grouping_ptx(name, dt, 90)
    assert set(diffs) == set(FAMILIES[name].expressions_for(dt))
    assert not any(diffs.values()), diffs


def test_ptx_comparison_sees_a_changed_kernel():
    src = ("template <int N> __global__ void k(int* p) { p[0] = N; }\n"
           "__device__ __noinline__ int h(int v) { return v * 3; }\n"
           "__global__ void g(int* p) { p[1] = h(p[0]); }\n")
    opts = _nvrtc.cupy_options(_modules.NVRTC_OPTIONS)
    one = _nvrtc.compile_ptx(src, 90, opts, ("k<1>", "k<2>", "g"))
    two = _nvrtc.compile_ptx(src, 90, opts, ("k<2>", "g"))
    other = _nvrtc.compile_ptx(src.replace("v * 3", "v * 5"), 90, opts, ("k<2>", "g"))
    _, a = _nvrtc.ptx_functions(one.ptx)
    _, b = _nvrtc.ptx_functions(two.ptx)
    _, c = _nvrtc.ptx_functions(other.ptx)
    name = two.lowered_names["k<2>"]
    assert a[name] == b[name] and a[two.lowered_names["g"]] == b[two.lowered_names["g"]]
    helper = [n for n in b if n not in two.lowered_names.values()]
    assert helper and a[helper[0]] == b[helper[0]] and c[helper[0]] != b[helper[0]]


def test_options_mirror_cupy():
    opts = _nvrtc.cupy_options(_modules.compile_options(_modules.SELFTEST_FAMILY))
    assert opts[:1] == ("--std=c++17",)
    assert "-ftz=true" in opts and "--device-as-default-execution-space" in opts
    # every compile of this file runs with no include path: a user's install may lack the CUDA
    # headers, and then a module that includes <cuda_fp16.h> fails for every dtype
    assert not any(o.startswith(("-I", "--include-path")) for o in opts), opts


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_module_sources_include_no_system_header(name):
    src = _modules.module_source(name)
    bad = [ln for ln in src.splitlines() if ln.lstrip().startswith("#") and "include" in ln
           and "<" in ln]
    assert not bad, f"{name}: system includes {bad}"


def test_compile_error_carries_log():
    src = "__global__ void k(float* p) { p[0] = undefined_thing; }\n"
    with pytest.raises(_nvrtc.NvrtcError) as info:
        _nvrtc.compile_cubin(src, 90, _nvrtc.cupy_options(_modules.NVRTC_OPTIONS))
    assert "undefined_thing" in info.value.log
    assert "undefined_thing" in str(info.value)


def test_compile_many_returns_errors(tmp_path):
    bad = _modules.KernelFamily(name="selftest_bad", source="selftest.cu", dtypes=(np.float32,),
                                expressions=lambda dt: ("selftest_nope<float>",))
    out = _nvrtc.compile_many([(bad, np.float32, 90), (_modules.SELFTEST_FAMILY, np.int8, 90)],
                              cache_dir=tmp_path, jobs=1, errors="return")
    assert isinstance(out[0], _nvrtc.NvrtcError) and "selftest_nope" in out[0].log
    assert not isinstance(out[1], Exception)
    assert len(list(tmp_path.glob("*.json"))) == 1          # only the success is cached
    with pytest.raises(_nvrtc.NvrtcError, match="selftest_nope"):
        _nvrtc.compile_many([(bad, np.float32, 90)], cache_dir=False, jobs=1)


def test_disk_cache_hit(tmp_path, monkeypatch):
    item = [(_modules.SELFTEST_FAMILY, np.uint16, 80)]
    first = _nvrtc.compile_many(item, cache_dir=tmp_path, jobs=1)[0]
    assert len(list(tmp_path.glob("*.json"))) == 1

    def no_compile(job):
        raise AssertionError("compiled again despite the cache")
    monkeypatch.setattr(_nvrtc, "_compile_job", no_compile)
    again = _nvrtc.compile_many(item, cache_dir=tmp_path, jobs=1)[0]
    assert again.to_json() == first.to_json()
    # another arch is another key
    with pytest.raises(AssertionError, match="compiled again"):
        _nvrtc.compile_many([(_modules.SELFTEST_FAMILY, np.uint16, 90)], cache_dir=tmp_path, jobs=1)


def test_ftz_detection():
    src = ("template <typename T> __global__ void lt(const T* a, int* o) { o[0] = a[0] < a[1]; }\n"
           "__global__ void bits(const float* a, int* o) {"
           " o[0] = (__float_as_uint(a[0]) << 1) != 0u; }\n")
    res = _nvrtc.compile_cubin(src, 90, _nvrtc.cupy_options(_modules.NVRTC_OPTIONS),
                               ("lt<float>", "lt<double>", "bits"))
    assert res.kernels["lt<float>"].ftz_instructions == 1
    assert res.kernels["lt<double>"].ftz_instructions == 0
    assert res.kernels["bits"].ftz_instructions == 0


def test_parse_ptxas_log():
    log = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z1aIfEvPf' for 'sm_90'
ptxas info    : Function properties for _Z1aIfEvPf
ptxas         .     16 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 40 registers, used 1 barriers, 2048 bytes smem, 368 bytes cmem[0]
ptxas info    : Compile time = 1.0 ms
ptxas info    : Function properties for _Z6helperv
ptxas         .     8 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Compiling entry function 'plain' for 'sm_75'
ptxas info    : Function properties for plain
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 9 registers, 356 bytes cmem[0]
"""
    st = _nvrtc.parse_ptxas_log(log)
    assert st["_Z1aIfEvPf"] == dict(registers=40, spill_stores=8, spill_loads=4, shared_static=2048,
                                    stack_frame=16, barriers=1)
    assert st["plain"] == dict(registers=9, spill_stores=0, spill_loads=0, shared_static=0,
                               stack_frame=0, barriers=0)
    assert "_Z6helperv" not in st


@pytest.mark.parametrize("regs, block, arch, smem, warps, limiter", [
    (32, 256, 90, 0, 64, "warps"),            # 32 regs x 2048 threads = 65536: exactly full
    (33, 256, 90, 0, 48, "registers"),        # 1280 regs/warp -> 51 warps -> 6 blocks of 8
    (64, 256, 90, 0, 32, "registers"),
    (128, 256, 90, 0, 16, "registers"),
    (16, 32, 90, 0, 32, "blocks"),            # 32 blocks of one warp
    (32, 256, 90, 100 * 1024, 16, "shared"),  # (100 + 1) KiB per block: 2 blocks
    (32, 1024, 75, 0, 32, "warps"),
    (32, 256, 86, 0, 48, "warps"),
    (32, 128, 86, 0, 48, "warps"),
    (32, 64, 86, 0, 32, "blocks"),            # 16 blocks of two warps
    (32, 256, 80, 48 * 1024, 24, "shared"),   # 164 KiB / 49 KiB = 3 blocks
    (255, 1024, 90, 0, 0, "invalid"),         # 256 regs/thread x 1024 > 65536
    (32, 2048, 90, 0, 0, "invalid"),
])
def test_occupancy_model(regs, block, arch, smem, warps, limiter):
    occ = _nvrtc.occupancy(regs, block, arch, shared_dynamic=smem)
    assert (occ.active_warps, occ.limiter) == (warps, limiter)
    assert occ.fraction == warps / occ.max_warps


def test_render_table_smoke():
    rows = _nvrtc.family_report(["selftest"], dtypes=[np.float32], archs=[80, 90],
                                cache_dir=False, jobs=1)
    text = _nvrtc.render_table(rows)
    assert "| `selftest_count<float, false>` | sm_90 |" in text
    assert "## selftest" in text
