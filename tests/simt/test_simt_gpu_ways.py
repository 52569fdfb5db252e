"""Issue 28: the last ways cupyops.simt differed from a GPU without saying so.  For each class a
kernel that must be computed the GPU's way (or reported), and a correct kernel that must run."""
import re
import struct
from fractions import Fraction

import numpy as np
import pytest

import cupyops.simt as simt
from cupyops.simt import _build


def _f32(bits):
    return struct.unpack("<f", struct.pack("<I", bits))[0]


def _nvrtc_ptx(src, options=()):
    """PTX from NVRTC (driver-free), or None when cuda.bindings.nvrtc is not installed."""
    try:
        from cuda.bindings import nvrtc as nv
    except Exception:
        return None
    from cupyops.simt import _nvrtc_front
    err, prog = nv.nvrtcCreateProgram(src.encode(), b"k.cu", 0, [], [])
    opts = [b"--gpu-architecture=compute_90", b"--std=c++17", b"-default-device",
            *[f"-I{d}".encode() for d in _nvrtc_front._include_dirs()], *[o.encode() for o in options]]
    try:
        (rc,) = nv.nvrtcCompileProgram(prog, len(opts), opts)
        if rc != nv.nvrtcResult.NVRTC_SUCCESS:
            _, n = nv.nvrtcGetProgramLogSize(prog)
            log = b" " * n
            nv.nvrtcGetProgramLog(prog, log)
            raise AssertionError(f"NVRTC rejects the test kernel: {log.decode(errors='replace')}")
        _, n = nv.nvrtcGetPTXSize(prog)
        ptx = b" " * n
        nv.nvrtcGetPTX(prog, ptx)
        return ptx.decode(errors="replace")
    finally:
        nv.nvrtcDestroyProgram(prog)


# ---------------------------------------------------------------- 1. canonical NaNs
NAN_SRC = r'''#include <cuda_fp16.h>
#include <cuda_bf16.h>
extern "C" __global__ void nans(const float* x, unsigned* o, unsigned short* h) {
  float m1 = x[0], zero = x[1], pnan = x[2], inf = x[3];   // -1, 0, a NaN with sign and payload, inf
  o[0] = __float_as_uint(sqrtf(m1));
  o[1] = __float_as_uint(__fdividef(zero, zero));
  o[2] = __float_as_uint(fdividef(zero, zero));
  o[3] = __float_as_uint(expf(pnan));
  o[4] = __float_as_uint(__fsqrt_rn(m1));
  o[5] = __float_as_uint(__fadd_rn(inf, -inf));
  o[6] = __float_as_uint(__fmul_rz(zero, inf));
  o[7] = __float_as_uint(fminf(pnan, pnan));
  o[8] = __float_as_uint(__double2float_rn((double)pnan));
  o[9] = __float_as_uint(__half2float(__ushort_as_half(0xfe01)));
  o[10] = __float_as_uint(__bfloat162float(__ushort_as_bfloat16(0xffc1)));
  o[11] = __float_as_uint(rsqrtf(m1));
  o[12] = __float_as_uint(__fmaf_rn(zero, inf, 1.0f));
  o[13] = __float_as_uint(logf(m1));
  o[14] = __float_as_uint(sqrtf(-4.0f * m1));   // sqrt(4): a number, unchanged
  h[0] = __half_as_ushort(__float2half(pnan));
  h[1] = __half_as_ushort(__float2half_rz(pnan));
  h[2] = __half_as_ushort(__hadd(__ushort_as_half(0xfe01), __float2half(1.0f)));
  h[3] = __half_as_ushort(__hmul(__float2half(zero), __float2half(inf)));
  h[4] = __half_as_ushort(hsqrt(__float2half(m1)));
  h[5] = __half_as_ushort(__hfma(__float2half(zero), __float2half(inf), __float2half(1.0f)));
  h[6] = __bfloat16_as_ushort(__float2bfloat16(pnan));
  h[7] = __bfloat16_as_ushort(__hadd(__ushort_as_bfloat16(0xffc1), __float2bfloat16(1.0f)));
  h[8] = __half_as_ushort(__float2half(1.5f));
  h[9] = __bfloat16_as_ushort(__float2bfloat16(1.5f));
  __half hc = pnan;   // the conversion constructor
  h[10] = __half_as_ushort(hc);
}
'''


def test_nan_results_are_canonical():
    x = np.array([-1.0, 0.0, _f32(0xFFC01234), np.inf], np.float32)
    o = np.zeros(15, np.uint32)
    h = np.zeros(11, np.uint16)
    simt.RawModule(code=NAN_SRC).get_function("nans")(1, 1, (x, o, h))
    assert [hex(v) for v in o[:14]] == [hex(0x7FFFFFFF)] * 14
    assert o[14] == np.float32(2.0).view(np.uint32)
    assert [hex(v) for v in h[:8]] == [hex(0x7FFF)] * 8
    # the correct values pass through unchanged
    assert h[8] == np.float16(1.5).view(np.uint16) and h[9] == 0x3FC0
    assert h[10] == 0x7FFF


def test_canonical_nan_leaves_numbers_alone():
    src = r'''extern "C" __global__ void k(const float* x, float* o) {
      int i = threadIdx.x; o[i] = sqrtf(x[i]) + expf(-x[i]) + __fdividef(x[i], 3.0f) + fminf(x[i], 2.0f); }'''
    x = np.linspace(0.0, 9.0, 32, dtype=np.float32)
    o = np.zeros(32, np.float32)
    simt.RawModule(code=src).get_function("k")(1, 32, (x, o))
    np.testing.assert_allclose(o, np.sqrt(x) + np.exp(-x) + x / 3 + np.minimum(x, 2), rtol=1e-6)


ARITH_NAN_SRC = r'''
extern "C" __global__ void arith(const float* x, unsigned* o, const double* d, unsigned long long* od,
                                 float* v, int n) {
  float zero = x[0], inf = x[1], one = x[2], m1 = x[3];
  o[0] = __float_as_uint(zero / zero);
  o[1] = __float_as_uint(inf - inf);
  o[2] = __float_as_uint(inf + -inf);
  o[3] = __float_as_uint(zero * inf);
  o[4] = __float_as_uint(inf / inf);
  o[5] = __float_as_uint(zero * inf + one);           // one fma (--fmad): 0 * inf inside it
  float t = zero / zero;
  o[6] = __float_as_uint(t * one);                    // the canonical NaN goes on as it is
  o[7] = __float_as_uint(one / zero);                 // inf: a number, unchanged
  o[8] = __float_as_uint(m1 * one - one);             // -2
  double dz = d[0], di = d[1], dp = d[2];
  od[0] = __double_as_longlong(dz / dz);              // a GPU's double NaN is x86's: CUDART_NAN
  od[1] = __double_as_longlong(dp + 1.0);             // ... and it keeps a payload (PTX ISA 9.7.3)
  od[2] = __double_as_longlong(di - di);
  for (int i = 0; i < n; ++i) v[i] = v[i] / v[n + i];   // vectorised: packed division
}
'''


@pytest.mark.parametrize("nan_check", [True, False])
def test_plain_arithmetic_makes_the_canonical_nan(nan_check):
    """float32 + - * / (and an fma) that make a NaN give 0x7fffffff as on a GPU, scalar and
    vectorised (issue 36); float64 keeps x86's NaN, which is a GPU's (CUDART_NAN = 0xfff8...,
    payloads kept). ``set_checks(nan=False)`` gives x86's 0xffc00000 back."""
    prev = simt.set_checks(nan=nan_check)
    try:
        x = np.array([0.0, np.inf, 1.0, -1.0], np.float32)
        o = np.zeros(9, np.uint32)
        d = np.array([0.0, np.inf, 0.0], np.float64)
        d[2:].view(np.uint64)[0] = 0x7FF8000000001234
        od = np.zeros(3, np.uint64)
        n = 64
        v = np.zeros(2 * n, np.float32)
        v[:n:2] = 3.0                      # 3 / 0 = inf; 0 / 0 = NaN in every other lane
        f = simt.RawModule(code=ARITH_NAN_SRC).get_function("arith")
        f(1, 1, (x, o, d, od, v, np.int32(n)))
        want = 0x7FFFFFFF if nan_check else 0xFFC00000
        assert [hex(b) for b in o[:7]] == [hex(want)] * 7
        assert o[7] == 0x7F800000 and o[8] == np.float32(-2.0).view(np.uint32)
        assert [hex(b) for b in od] == [hex(0xFFF8000000000000), hex(0x7FF8000000001234),
                                        hex(0xFFF8000000000000)]
        assert set(v[:n].view(np.uint32)[1::2]) == {want} and np.isinf(v[:n:2]).all()
    finally:
        simt.set_checks(**prev)


def test_canonical_nan_costs_nothing_without_nans():
    """A kernel that makes no NaN and compares none never traps (the check's cost is per NaN)."""
    from cupyops.simt import _core
    src = r'''extern "C" __global__ void k(const float* x, float* o) {
      int i = threadIdx.x; o[i] = x[i] / (x[i] + 1.0f) - x[i] * 0.5f + (x[i] < 3.0f ? 1.0f : 0.0f); }'''
    x = np.linspace(0.0, 9.0, 32, dtype=np.float32)
    o = np.zeros(32, np.float32)
    simt.RawModule(code=src).get_function("k")(1, 32, (x, o))
    np.testing.assert_allclose(o, x / (x + 1) - x * 0.5 + (x < 3), rtol=1e-6)
    assert _core._last_stats["fp_traps"] == 0
    x[5] = np.nan                          # a NaN compared: trapped, stepped, still the answer
    simt.RawModule(code=src).get_function("k")(1, 32, (x, o))
    assert _core._last_stats["fp_traps"] >= 1 and np.isnan(o[5]) and o[4] == o[4]


# ---------------------------------------------------------------- 2. FMA contraction
FMA_SRC = r'''
extern "C" __global__ void muladd(const float* a, float* o, const double* ad, double* od) {
  o[0] = a[0] * a[1] + a[2];
  float t = a[0] * a[1];   // across statements, as NVRTC
  o[1] = t + a[2];
  od[0] = ad[0] * ad[1] + ad[2];
}
'''


def _fma_inputs():
    a = np.array([1 + 2**-12, 1 + 2**-12, -(1 + 2**-11)], np.float32)   # a*b rounds (a tie) in float32
    ad = np.array([1 + 2**-30, 1 + 2**-30, -(1 + 2**-29)])
    return a, ad


@pytest.mark.parametrize("fmad", [None, "--fmad=true", "--fmad=false"])
def test_fma_contraction_follows_fmad(fmad):
    opts = () if fmad is None else (fmad,)
    fused = fmad != "--fmad=false"
    if fused and not _build.cpu_has_fma():
        pytest.skip("this CPU has no FMA instructions: simt rounds the product (README)")
    a, ad = _fma_inputs()
    o = np.zeros(2, np.float32)
    od = np.zeros(1)
    simt.RawModule(code=FMA_SRC, options=opts).get_function("muladd")(1, 1, (a, o, ad, od))
    exact = float(Fraction(float(a[0])) * Fraction(float(a[1])) + Fraction(float(a[2])))
    unfused = float(np.float32(a[0] * a[1]) + a[2])
    want = np.float32(exact) if fused else np.float32(unfused)
    assert exact != unfused
    assert o[0] == want and o[1] == want
    exact_d = float(Fraction(float(ad[0])) * Fraction(float(ad[1])) + Fraction(float(ad[2])))
    assert od[0] == (exact_d if fused else ad[0] * ad[1] + ad[2])
    ptx = _nvrtc_ptx(FMA_SRC, opts)
    if ptx is not None:   # NVRTC itself: fma.rn.f32 / fma.rn.f64 exactly when simt fuses
        assert ("fma.rn.f32" in ptx) == fused and ("fma.rn.f64" in ptx) == fused


def test_fmad_option_parsing():
    assert _build.fmad_option(())
    assert not _build.fmad_option(("--fmad=false",))
    assert _build.fmad_option(("--fmad=false", "--use_fast_math"))
    assert "-ffp-contract=off" in _build.translate_options(("-fmad=false",))


# ---------------------------------------------------------------- 3. -ftz=true on float32 only
FTZ_SRC = r'''
extern "C" __global__ void ftz(const float* x, int* c, float* f, const double* d, double* g) {
  int i = threadIdx.x;
  float v = x[i];
  c[4 * i] = v > 0; c[4 * i + 1] = v != 0; c[4 * i + 2] = v < 0; c[4 * i + 3] = v == 0;
  f[3 * i] = v + 0.0f;          // arithmetic: flushed
  f[3 * i + 1] = v;             // a copy keeps the bits
  f[3 * i + 2] = v * 0x1p100f;  // the input is flushed before the product
  g[2 * i] = d[i] * 1.0;        // float64: never flushed
  g[2 * i + 1] = d[i] > 0;
}
'''


def _run_ftz(options):
    x = np.array([1e-40, -1e-42, 1.5, 0.0], np.float32)
    d = np.array([1e-310, -1e-320, 1.5, 0.0])
    c = np.zeros(16, np.int32)
    f = np.zeros(12, np.float32)
    g = np.zeros(8)
    simt.RawModule(code=FTZ_SRC, options=options).get_function("ftz")(1, 4, (x, c, f, d, g))
    return x, d, c.reshape(4, 4), f.reshape(4, 3), g.reshape(4, 2)


def test_ftz_flushes_float32_only():
    x, d, c, f, g = _run_ftz(("-ftz=true",))
    # subnormals compare as zero: x > 0 and x != 0 are false for 1e-40 and -1e-42
    assert c[0].tolist() == [0, 0, 0, 1] and c[1].tolist() == [0, 0, 0, 1]
    assert c[2].tolist() == [1, 1, 0, 0]
    assert f[0, 0] == 0 and f[1, 0] == 0 and f[0, 2] == 0
    assert f[0, 1].view(np.uint32) == x[0].view(np.uint32) and f[1, 1].view(np.uint32) == x[1].view(np.uint32)
    assert f[2].tolist() == [1.5, 1.5, 1.5 * 2.0**100]
    np.testing.assert_array_equal(g[:, 0], d)          # float64 subnormals kept
    assert g[:, 1].tolist() == [1, 0, 1, 0]


def test_without_ftz_subnormals_are_kept():
    x, d, c, f, g = _run_ftz(())
    assert c[0].tolist() == [1, 1, 0, 0] and c[1].tolist() == [0, 1, 1, 0]
    assert f[0, 0] == x[0] and f[1, 0] == x[1]
    prev = simt.set_checks(ftz=False)
    try:
        x, d, c, f, g = _run_ftz(("-ftz=true",))
    finally:
        simt.set_checks(**prev)
    assert c[0].tolist() == [1, 1, 0, 0]


def test_ftz_leaves_the_host_mxcsr_alone():
    # a launch that faults under -ftz=true must not leave the trapping MXCSR behind
    src = 'extern "C" __global__ void k(const float* x, float* o) { o[0] = x[0] * 0.5f; o[5] = 1; }'
    f = simt.RawModule(code=src, options=("-ftz=true",)).get_function("k")
    x = np.array([1e-40], np.float32)
    with pytest.raises(simt.OutOfBoundsError):
        f(1, 1, (x, np.zeros(1, np.float32)))
    a = np.array([1e-40], np.float32)
    assert (a * np.float32(0.5))[0] != 0   # NumPy still sees subnormals


# ---------------------------------------------------------------- 4. launch bounds, every form
BOUNDS_FORMS = {
    "definition": 'extern "C" __global__ void __launch_bounds__(128) k(int* o) { o[threadIdx.x] = 1; }',
    "before __global__": 'extern "C" __launch_bounds__(128) __global__ void k(int* o) { o[threadIdx.x] = 1; }',
    "min blocks": 'extern "C" __global__ void __launch_bounds__(128, 2) k(int* o) { o[threadIdx.x] = 1; }',
    "macro": '#define LB __launch_bounds__(128)\nextern "C" __global__ void LB k(int* o) { o[threadIdx.x] = 1; }',
    "function-like macro": '#define LB(n) __launch_bounds__(n)\n'
                           'extern "C" __global__ void LB(128) k(int* o) { o[threadIdx.x] = 1; }',
    "macro through a macro": '#define LB0 __launch_bounds__(128)\n#define LB LB0\n'
                             'extern "C" __global__ void LB k(int* o) { o[threadIdx.x] = 1; }',
    "kernel macro": '#define KERNEL extern "C" __global__ void __launch_bounds__(2 * 64)\n'
                    'KERNEL k(int* o) { o[threadIdx.x] = 1; }',
    "declaration, then definition": 'extern "C" __global__ void __launch_bounds__(128) k(int* o);\n'
                                    'extern "C" __global__ void k(int* o) { o[threadIdx.x] = 1; }',
    "extern C block": 'extern "C" {\n__global__ void __launch_bounds__(128) k(int* o);\n}\n'
                      'extern "C" __global__ void k(int* o)\n{\n  o[threadIdx.x] = 1;\n}',
    "constant": 'constexpr int NT = 128;\nextern "C" __global__ void __launch_bounds__(NT) k(int* o) { o[threadIdx.x] = 1; }',
    "template": 'template <int N> __global__ void __launch_bounds__(N) kt(int* o) { o[threadIdx.x] = 1; }\n'
                'extern "C" __global__ void k(int* o) { }\n',
}


@pytest.mark.parametrize("form", list(BOUNDS_FORMS))
def test_launch_bounds_every_form(form):
    src = BOUNDS_FORMS[form]
    name = "kt<128>" if form == "template" else "k"
    m = simt.RawModule(code=src, name_expressions=("kt<128>",) if form == "template" else ())
    f = m.get_function(name)
    # the attributes follow the bound before any launch, as CUDA's and CuPy's do (issue 36)
    assert f.max_threads_per_block == 128 and f.attributes["max_threads_per_block"] == 128
    o = np.zeros(1024, np.int32)
    f(1, 128, (o,))                      # within the bound: runs
    assert o[:128].all()
    with pytest.raises(simt.LaunchConfigError, match="__launch_bounds__"):
        f(1, 1024, (o,))
    with pytest.raises(simt.LaunchConfigError, match="__launch_bounds__"):
        f(1, (32, 8), (o,))


def test_launch_bounds_attributes_per_kernel_and_instantiation():
    """Each kernel of a module and each instantiation of a template reports its own bound;
    a kernel without one reports the device's 1024, a launch then checks the same number."""
    src = ('template <int N> __global__ void __launch_bounds__(N, 2) kt(int* o) { o[threadIdx.x] = N; }\n'
           'extern "C" __global__ void __launch_bounds__(96) bounded(int* o) { o[threadIdx.x] = 1; }\n'
           'extern "C" __global__ void free_(int* o) { o[threadIdx.x] = 2; }\n')
    m = simt.RawModule(code=src, name_expressions=("kt<64>", "kt<256>"))
    want = {"kt<64>": 64, "kt<256>": 256, "bounded": 96, "free_": 1024}
    o = np.zeros(1024, np.int32)
    for name, n in want.items():
        f = m.get_function(name)
        assert f.max_threads_per_block == n and f.attributes["max_threads_per_block"] == n, name
        f(1, n, (o,))
        if n < 1024:
            with pytest.raises(simt.LaunchConfigError, match="__launch_bounds__"):
                f(1, n + 32, (o,))


# ---------------------------------------------------------------- 5. misaligned vector accesses
VEC_TYPES = {  # name: (alignment, element C type)
    "char2": (2, "char"), "uchar2": (2, "unsigned char"), "short2": (4, "short"), "char4": (4, "char"),
    "uchar4": (4, "unsigned char"), "ushort2": (4, "unsigned short"), "short4": (8, "short"),
    "ushort4": (8, "unsigned short"), "float2": (8, "float"), "int2": (8, "int"), "uint2": (8, "unsigned int"),
    "float4": (16, "float"), "int4": (16, "int"), "uint4": (16, "unsigned int"), "double2": (16, "double"),
    "longlong2": (16, "long long"), "ulonglong2": (16, "unsigned long long"), "long2": (16, "long"),
}
VEC_SRC = "\n".join(
    f'extern "C" __global__ void ld_{n}(const char* p, int off, {t}* o) {{\n'
    f'  {n} v = *reinterpret_cast<const {n}*>(p + off);\n'   # a raw cast, only .x and .y used: g++ splits it
    f'  o[0] = v.x; o[1] = v.y; }}\n'
    f'extern "C" __global__ void st_{n}(char* p, int off, const {t}* i) {{\n'
    f'  {n} v; v.x = i[0]; v.y = i[1];' + (" v.z = i[2]; v.w = i[3];" if n[-1] == "4" else "") +
    f'\n  *({n}*)(p + off) = v; }}\n'
    for n, (a, t) in VEC_TYPES.items())


@pytest.fixture(scope="module")
def vec_mod():
    m = simt.RawModule(code=VEC_SRC)
    m.compile()
    return m


def _offsets(align, thorough):
    return range(1, align) if thorough else sorted({1, align // 2, align - 1} - {0})


@pytest.mark.parametrize("name", list(VEC_TYPES))
def test_misaligned_vector_access(vec_mod, name, request):
    align, _ = VEC_TYPES[name]
    buf = np.zeros(64, np.uint8)
    out = np.zeros(4, np.float64).view(np.uint8)
    ld, st = vec_mod.get_function(f"ld_{name}"), vec_mod.get_function(f"st_{name}")
    # aligned: runs (values checked through the element bytes)
    buf[16:16 + align] = np.arange(1, align + 1, dtype=np.uint8)
    ld(1, 1, (buf, np.int32(16), out))
    st(1, 1, (buf, np.int32(32), buf[16:]))
    assert (buf[32:32 + align] == buf[16:16 + align]).all()
    thorough = request.config.getoption("--run-slow")
    for off in _offsets(align, thorough):
        with pytest.raises(simt.MisalignedAddressError, match="misaligned address") as ei:
            ld(1, 1, (buf, np.int32(16 + off), out))
        assert ei.value.kernel == f"ld_{name}" and f"{align}-byte aligned" in str(ei.value)
        with pytest.raises(simt.MisalignedAddressError, match="misaligned address"):
            st(1, 1, (buf, np.int32(16 + off), buf[40:]))


def test_misaligned_vector_parameter_and_member_access():
    src = r'''extern "C" __global__ void k(const float4* p, float* o) { o[threadIdx.x] = p[threadIdx.x].y; }'''
    f = simt.RawModule(code=src).get_function("k")
    x = np.arange(40, dtype=np.float32)
    o = np.zeros(4, np.float32)
    f(1, 4, (x, o))
    assert o.tolist() == [1, 5, 9, 13]
    with pytest.raises(simt.MisalignedAddressError, match="float4"):
        f(1, 4, (x[1:], o))                # a float4* 4 bytes off
    prev = simt.set_checks(align=False)
    try:
        f(1, 4, (x[1:], o))                # the check can be switched off
    finally:
        simt.set_checks(**prev)
    assert o.tolist() == [2, 6, 10, 14]


# ---------------------------------------------------------------- 6. store to initialized __constant__ memory
CONST_SRC = r'''
__constant__ int table[4] = {1, 2, 3, 4};
__constant__ float scale = 2.5f;
extern "C" __global__ void store_const(int* o) { table[1] = o[0]; o[1] = table[1]; }
extern "C" __global__ void read_const(int* o) { o[threadIdx.x] = table[threadIdx.x] * (int)scale; }
extern "C" __global__ void say(int* o) {
  printf("simt-printf %d %.2f %s %lld\n", o[0], scale, "ok", 123456789012345LL);
}
'''


def test_store_to_initialized_constant_fails_that_launch_only(capfd):
    ptx = _nvrtc_ptx(CONST_SRC)
    if ptx is not None:   # NVRTC compiles the module; the storing kernel becomes trap;
        body = ptx.split(".entry store_const")[1].split(".entry")[0]
        assert "trap;" in body
    m = simt.RawModule(code=CONST_SRC)
    o = np.zeros(4, np.int32)
    m.get_function("read_const")(1, 4, (o,))
    assert o.tolist() == [2, 4, 6, 8]
    o[0] = 42
    m.get_function("say")(1, 1, (o,))
    assert "simt-printf 42 2.50 ok 123456789012345\n" in capfd.readouterr().out
    with pytest.raises(simt.ReadOnlyWriteError, match="__constant__") as ei:
        m.get_function("store_const")(1, 1, (o,))
    assert ei.value.kernel == "store_const" and "kernel.cu:4" in str(ei.value)
    m.get_function("read_const")(1, 4, (o,))    # the module stays usable, the table unchanged
    assert o.tolist() == [2, 4, 6, 8]


def test_const_rewrite_only_where_never_stored():
    assert _build._const_constant("__constant__ int t[2] = {1, 2};\n__global__ void k(int* o) { o[0] = t[1]; }") \
        .startswith("const __constant__")
    for body in ("t[0] = 5;", "t[o[0]]++;", "int* p = t; *p = 1;", "int* p = &t[1]; *p = 1;"):
        src = "__constant__ int t[2] = {1, 2};\n__global__ void k(int* o) { " + body + " }"
        assert not _build._const_constant(src).startswith("const"), body
