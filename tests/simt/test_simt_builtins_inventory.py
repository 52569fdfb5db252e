"""Issue 28, class 7: built-ins that NVRTC accepts compile and compute on cupyops.simt.

The inventory covers the families: half and bfloat16 conversions and math (and their pairs), the
integer SIMD / averaging / SAD intrinsics, the address-space predicates, the warp votes, atomics
on vector types, fast-math division and the constructors of every built-in vector type.  One
source holds every entry: NVRTC must compile it (driver-free, cuda.bindings.nvrtc, with the CUDA
runtime headers of the nvidia-cuda-runtime wheel), and so must simt, whose values are checked.
Built-ins that simt does not support are listed in cupyops/simt/README.md ("Unsupported
built-ins"); none of them is in this inventory."""
import math
import re
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

import cupyops.simt as simt

ml_dtypes = pytest.importorskip("ml_dtypes")


# ---------------------------------------------------------------- reference rounding
def _rnd16(x, P, EB, mode="rn"):
    """Bits of x (a Fraction, or ±inf/nan as float) rounded to a 16-bit binary format."""
    if isinstance(x, float) and math.isnan(x):
        return 0x7FFF
    sign = 0
    bias = (1 << (EB - 1)) - 1
    inf = ((1 << EB) - 1) << (P - 1)
    maxfin = inf - 1
    if isinstance(x, float) and math.isinf(x):
        return (0x8000 if x < 0 else 0) | inf
    x = Fraction(x)
    if x < 0:
        sign, x = 0x8000, -x
    if x == 0:
        return sign
    E = x.numerator.bit_length() - x.denominator.bit_length()
    if Fraction(2) ** E > x:
        E -= 1
    emin = 1 - bias
    q = max(E, emin) - (P - 1)
    m = x / Fraction(2) ** q
    n = m.numerator // m.denominator
    rem = m - n
    neg = bool(sign)
    if rem:
        if mode == "rn":
            n += 1 if (rem > Fraction(1, 2) or (rem == Fraction(1, 2) and n & 1)) else 0
        elif mode == "ru":
            n += 0 if neg else 1
        elif mode == "rd":
            n += 1 if neg else 0
    bits = n if E < emin else ((E + bias) << (P - 1)) + (n - (1 << (P - 1)))
    if bits >= inf:
        to_inf = mode == "rn" or (mode == "ru" and not neg) or (mode == "rd" and neg)
        bits = inf if to_inf else maxfin
    return sign | bits


def H(x, mode="rn"):   # bits of half
    return _rnd16(x, 11, 5, mode)


def B(x, mode="rn"):   # bits of bfloat16
    return _rnd16(x, 8, 8, mode)


def hval(bits):
    return float(np.array([bits], np.uint16).view(np.float16)[0])


def bval(bits):
    return float(np.array([bits], np.uint16).view(ml_dtypes.bfloat16)[0])


def f32bits(x):
    return int(np.array([x], np.float32).view(np.uint32)[0])


def u32(x):
    return x & 0xFFFFFFFF


def pair(lo, hi):
    return lo | (hi << 16)


def _check_np_agree():
    # the reference rounding agrees with NumPy / ml_dtypes in round-to-nearest
    with np.errstate(over="ignore"):
        for v in (0.1, 1 / 3, 65519.0, 65520.0, 6e-8, 2.0**-25, -1e-5, 3.0e38, 1e-39):
            assert H(Fraction(v)) == int(np.array([v]).astype(np.float16).view(np.uint16)[0])
            assert B(Fraction(v)) == int(np.array([v]).astype(ml_dtypes.bfloat16).view(np.uint16)[0])


# ---------------------------------------------------------------- the inventory
# (family, built-in, C expression giving an integer (bits or an integer result), expected value)
E = []


def add(family, name, expr, want):
    E.append((family, name, expr, want))


F = Fraction
# half: conversions
add("half", "__float2half", "hb(__float2half(0.1f))", H(F(float(np.float32(0.1)))))
for m in ("rn", "rz", "ru", "rd"):
    add("half", f"__float2half_{m}", f"hb(__float2half_{m}(-0.1f))", H(F(float(np.float32(-0.1))), m))
add("half", "__double2half", "hb(__double2half(0.1))", H(F(0.1)))
add("half", "__half2float", "__float_as_uint(__half2float(__ushort_as_half(0x3555)))", f32bits(hval(0x3555)))
for t, ctype, val, wants in (("int", "int", "-2.5f", {"rn": -2, "rz": -2, "ru": -2, "rd": -3}),
                             ("uint", "unsigned", "2.5f", {"rn": 2, "rz": 2, "ru": 3, "rd": 2}),
                             ("short", "short", "-40000.0f", {m: -32768 for m in ("rn", "rz", "ru", "rd")}),
                             ("ushort", "unsigned short", "3.5f", {"rn": 4, "rz": 3, "ru": 4, "rd": 3}),
                             ("ll", "long long", "-3.5f", {"rn": -4, "rz": -3, "ru": -3, "rd": -4}),
                             ("ull", "unsigned long long", "1000.5f", {"rn": 1000, "rz": 1000, "ru": 1001, "rd": 1000})):
    for m in ("rn", "rz", "ru", "rd"):
        add("half", f"__half2{t}_{m}", f"(unsigned long long)({ctype})__half2{t}_{m}(__float2half({val}))",
            wants[m] & 0xFFFFFFFFFFFFFFFF if not ctype.startswith("unsigned") else wants[m])
add("half", "__half2uint_rz(NaN)", "__half2uint_rz(__ushort_as_half(0x7e00))", 0)
add("half", "__half2char_rz", "(unsigned long long)(long long)__half2char_rz(__float2half(-3.7f))", (-3) & 0xFFFFFFFFFFFFFFFF)
add("half", "__half2uchar_rz", "__half2uchar_rz(__float2half(300.0f))", 255)
for t, ctype, val in (("int", "int", 2049), ("uint", "unsigned", 2051), ("short", "short", -2049),
                      ("ushort", "unsigned short", 4097), ("ll", "long long", -(2**40) - 1),
                      ("ull", "unsigned long long", 2**15 + 7)):
    for m in ("rn", "rz", "ru", "rd"):
        add("half", f"__{t}2half_{m}", f"hb(__{t}2half_{m}(({ctype}){val}LL))", H(F(val), m))
add("half", "__half_as_short", "(unsigned short)__half_as_short(__float2half(-2.0f))", 0xC000)
add("half", "__half_as_ushort", "__half_as_ushort(__float2half(2.0f))", 0x4000)
add("half", "__short_as_half", "hb(__short_as_half((short)0x3c00))", 0x3C00)
add("half", "__ushort_as_half", "hb(__ushort_as_half(0x3c00))", 0x3C00)
# half: pairs
add("half", "make_half2", "h2b(make_half2(H(1.0f), H(2.0f)))", pair(0x3C00, 0x4000))
add("half", "__halves2half2", "h2b(__halves2half2(H(1.0f), H(2.0f)))", pair(0x3C00, 0x4000))
add("half", "__half2half2", "h2b(__half2half2(H(3.0f)))", pair(0x4200, 0x4200))
add("half", "__float2half2_rn", "h2b(__float2half2_rn(0.5f))", pair(0x3800, 0x3800))
add("half", "__floats2half2_rn", "h2b(__floats2half2_rn(0.5f, -1.0f))", pair(0x3800, 0xBC00))
add("half", "__float22half2_rn", "h2b(__float22half2_rn(make_float2(0.5f, 4.0f)))", pair(0x3800, 0x4400))
add("half", "__half22float2", "__float_as_uint(__half22float2(make_half2(H(1.0f), H(-2.0f))).y)", f32bits(-2.0))
add("half", "__low2float", "__float_as_uint(__low2float(make_half2(H(1.5f), H(2.0f))))", f32bits(1.5))
add("half", "__high2float", "__float_as_uint(__high2float(make_half2(H(1.5f), H(2.0f))))", f32bits(2.0))
add("half", "__low2half", "hb(__low2half(make_half2(H(1.5f), H(2.0f))))", H(F(1.5)))
add("half", "__high2half", "hb(__high2half(make_half2(H(1.5f), H(2.0f))))", H(F(2)))
add("half", "__low2half2", "h2b(__low2half2(make_half2(H(1.5f), H(2.0f))))", pair(H(F(1.5)), H(F(1.5))))
add("half", "__high2half2", "h2b(__high2half2(make_half2(H(1.5f), H(2.0f))))", pair(0x4000, 0x4000))
add("half", "__lows2half2", "h2b(__lows2half2(make_half2(H(1.0f), H(2.0f)), make_half2(H(3.0f), H(4.0f))))",
    pair(0x3C00, 0x4200))
add("half", "__highs2half2", "h2b(__highs2half2(make_half2(H(1.0f), H(2.0f)), make_half2(H(3.0f), H(4.0f))))",
    pair(0x4000, 0x4400))
add("half", "__lowhigh2highlow", "h2b(__lowhigh2highlow(make_half2(H(1.0f), H(2.0f))))", pair(0x4000, 0x3C00))
# half: arithmetic and math
third = F(H(F(1, 3)) and hval(H(F(1, 3))))
add("half", "__hadd", "hb(__hadd(H(1.0f / 3), H(2.0f)))", H(third + 2))
add("half", "__hsub", "hb(__hsub(H(1.0f / 3), H(2.0f)))", H(third - 2))
add("half", "__hmul", "hb(__hmul(H(1.0f / 3), H(3.0f)))", H(third * 3))
add("half", "__hdiv", "hb(__hdiv(H(1.0f), H(3.0f)))", H(F(1, 3)))
add("half", "__hadd_rn", "hb(__hadd_rn(H(1.0f / 3), H(2.0f)))", H(third + 2))
add("half", "__hsub_rn", "hb(__hsub_rn(H(1.0f / 3), H(2.0f)))", H(third - 2))
add("half", "__hmul_rn", "hb(__hmul_rn(H(1.0f / 3), H(3.0f)))", H(third * 3))
add("half", "__hadd_sat", "hb(__hadd_sat(H(0.75f), H(0.5f)))", 0x3C00)
add("half", "__hsub_sat", "hb(__hsub_sat(H(0.25f), H(0.5f)))", 0)
add("half", "__hmul_sat", "hb(__hmul_sat(H(0.5f), H(0.5f)))", 0x3400)
add("half", "__hfma", "hb(__hfma(H(1.0f / 3), H(3.0f), H(-1.0f)))", H(third * 3 - 1))
add("half", "__hfma_sat", "hb(__hfma_sat(H(2.0f), H(3.0f), H(-1.0f)))", 0x3C00)
add("half", "__hfma_relu", "hb(__hfma_relu(H(2.0f), H(-3.0f), H(1.0f)))", 0)
add("half", "__hneg", "hb(__hneg(H(2.0f)))", 0xC000)
add("half", "__habs", "hb(__habs(H(-2.0f)))", 0x4000)
for op, fn in (("eq", lambda a, b: a == b), ("ne", lambda a, b: a != b), ("lt", lambda a, b: a < b),
               ("le", lambda a, b: a <= b), ("gt", lambda a, b: a > b), ("ge", lambda a, b: a >= b)):
    add("half", f"__h{op}", f"__h{op}(H(1.0f), H(2.0f))", int(fn(1, 2)))
    add("half", f"__h{op}u", f"__h{op}u(H(1.0f), __ushort_as_half(0x7e00))", 1)   # unordered: true with NaN
    add("half", f"__h{op}2", f"h2b(__h{op}2(make_half2(H(1.0f), H(2.0f)), make_half2(H(2.0f), H(2.0f))))",
        pair(0x3C00 if fn(1, 2) else 0, 0x3C00 if fn(2, 2) else 0))
    add("half", f"__h{op}u2", f"h2b(__h{op}u2(make_half2(H(1.0f), H(2.0f)), make_half2(H(2.0f), H(2.0f))))",
        pair(0x3C00 if fn(1, 2) else 0, 0x3C00 if fn(2, 2) else 0))
    add("half", f"__hb{op}2", f"__hb{op}2(make_half2(H(1.0f), H(2.0f)), make_half2(H(2.0f), H(2.0f)))",
        int(fn(1, 2) and fn(2, 2)))
    add("half", f"__hb{op}u2", f"__hb{op}u2(make_half2(H(1.0f), H(2.0f)), make_half2(H(2.0f), H(2.0f)))",
        int(fn(1, 2) and fn(2, 2)))
    add("half", f"__h{op}2_mask", f"__h{op}2_mask(make_half2(H(1.0f), H(2.0f)), make_half2(H(2.0f), H(2.0f)))",
        (0xFFFF if fn(1, 2) else 0) | (0xFFFF0000 if fn(2, 2) else 0))
add("half", "__hisnan", "__hisnan(__ushort_as_half(0x7e00))", 1)
add("half", "__hisinf", "(unsigned)__hisinf(__ushort_as_half(0xfc00))", u32(-1))
add("half", "__hisnan2", "h2b(__hisnan2(make_half2(__ushort_as_half(0x7e00), H(1.0f))))", pair(0x3C00, 0))
add("half", "__hmax", "hb(__hmax(__ushort_as_half(0x7e00), H(2.0f)))", 0x4000)
add("half", "__hmin", "hb(__hmin(H(-0.0f), H(0.0f)))", 0x8000)
add("half", "__hmax_nan", "hb(__hmax_nan(__ushort_as_half(0x7e00), H(2.0f)))", 0x7FFF)
add("half", "__hmin_nan", "hb(__hmin_nan(H(1.0f), H(2.0f)))", 0x3C00)
add("half", "__hmax2", "h2b(__hmax2(make_half2(H(1.0f), H(4.0f)), make_half2(H(2.0f), H(3.0f))))", pair(0x4000, 0x4400))
add("half", "__hmin2", "h2b(__hmin2(make_half2(H(1.0f), H(4.0f)), make_half2(H(2.0f), H(3.0f))))", pair(0x3C00, 0x4200))
add("half", "__hmax2_nan", "h2b(__hmax2_nan(make_half2(H(1.0f), H(4.0f)), make_half2(H(2.0f), H(3.0f))))", pair(0x4000, 0x4400))
add("half", "__hmin2_nan", "h2b(__hmin2_nan(make_half2(H(1.0f), H(4.0f)), make_half2(H(2.0f), H(3.0f))))", pair(0x3C00, 0x4200))
for nm, arg, want in (("hsqrt", "2.25f", 1.5), ("hrsqrt", "4.0f", 0.5), ("hrcp", "4.0f", 0.25), ("hexp", "0.0f", 1.0),
                      ("hexp2", "3.0f", 8.0), ("hexp10", "2.0f", 100.0), ("hlog", "1.0f", 0.0), ("hlog2", "8.0f", 3.0),
                      ("hlog10", "100.0f", 2.0), ("hsin", "0.0f", 0.0), ("hcos", "0.0f", 1.0), ("htanh", "0.0f", 0.0),
                      ("htanh_approx", "0.0f", 0.0), ("hceil", "-1.5f", -1.0), ("hfloor", "-1.5f", -2.0),
                      ("hrint", "2.5f", 2.0), ("htrunc", "-1.7f", -1.0)):
    add("half", nm, f"hb({nm}(H({arg})))", H(F(want)))
    add("half", "h2" + nm[1:], f"h2b(h2{nm[1:]}(__half2half2(H({arg}))))", pair(H(F(want)), H(F(want))))
for nm, want in (("__hadd2", third + 2), ("__hsub2", third - 2), ("__hmul2", third * 2), ("__h2div", third / 2),
                 ("__hadd2_rn", third + 2), ("__hsub2_rn", third - 2), ("__hmul2_rn", third * 2)):
    add("half", nm, f"h2b({nm}(__half2half2(H(1.0f / 3)), __half2half2(H(2.0f))))", pair(H(want), H(want)))
add("half", "__hadd2_sat", "h2b(__hadd2_sat(__half2half2(H(0.75f)), __half2half2(H(0.5f))))", pair(0x3C00, 0x3C00))
add("half", "__hsub2_sat", "h2b(__hsub2_sat(__half2half2(H(0.25f)), __half2half2(H(0.5f))))", 0)
add("half", "__hmul2_sat", "h2b(__hmul2_sat(__half2half2(H(4.0f)), __half2half2(H(0.5f))))", pair(0x3C00, 0x3C00))
add("half", "__hfma2", "h2b(__hfma2(__half2half2(H(1.0f / 3)), __half2half2(H(3.0f)), __half2half2(H(-1.0f))))",
    pair(H(third * 3 - 1), H(third * 3 - 1)))
add("half", "__hfma2_sat", "h2b(__hfma2_sat(__half2half2(H(2.0f)), __half2half2(H(3.0f)), __half2half2(H(-1.0f))))",
    pair(0x3C00, 0x3C00))
add("half", "__hfma2_relu", "h2b(__hfma2_relu(__half2half2(H(2.0f)), __half2half2(H(-3.0f)), __half2half2(H(1.0f))))", 0)
add("half", "__hneg2", "h2b(__hneg2(make_half2(H(1.0f), H(-2.0f))))", pair(0xBC00, 0x4000))
add("half", "__habs2", "h2b(__habs2(make_half2(H(-1.0f), H(-2.0f))))", pair(0x3C00, 0x4000))
add("half", "__hcmadd", "h2b(__hcmadd(make_half2(H(1.0f), H(2.0f)), make_half2(H(3.0f), H(4.0f)), make_half2(H(0.5f), H(0.25f))))",
    pair(H(F(1 * 3 - 2 * 4) + F(1, 2)), H(F(1 * 4 + 2 * 3) + F(1, 4))))
add("half", "operators", "hb((H(1.5f) + H(2.0f)) * H(2.0f) - H(1.0f) / H(4.0f))", H(F(7) - F(1, 4)))

# bfloat16: the same families
add("bfloat16", "__float2bfloat16", "bb(__float2bfloat16(0.1f))", B(F(float(np.float32(0.1)))))
for m in ("rn", "rz", "ru", "rd"):
    add("bfloat16", f"__float2bfloat16_{m}", f"bb(__float2bfloat16_{m}(-0.1f))", B(F(float(np.float32(-0.1))), m))
add("bfloat16", "__float2bfloat16(subnormal)", "bb(__float2bfloat16(1e-39f))", B(F(float(np.float32(1e-39)))))
add("bfloat16", "__double2bfloat16", "bb(__double2bfloat16(1.0 + 0x1p-8 + 0x1p-40))", B(F(1) + F(1, 256) + F(1, 2**40)))
add("bfloat16", "__bfloat162float", "__float_as_uint(__bfloat162float(__ushort_as_bfloat16(0x3fc1)))", 0x3FC10000)
for t, ctype, val, wants in (("int", "int", "-2.5f", {"rn": -2, "rz": -2, "ru": -2, "rd": -3}),
                             ("uint", "unsigned", "2.5f", {"rn": 2, "rz": 2, "ru": 3, "rd": 2}),
                             ("short", "short", "-1e6f", {m: -32768 for m in ("rn", "rz", "ru", "rd")}),
                             ("ushort", "unsigned short", "3.5f", {"rn": 4, "rz": 3, "ru": 4, "rd": 3}),
                             ("ll", "long long", "-3.5f", {"rn": -4, "rz": -3, "ru": -3, "rd": -4}),
                             ("ull", "unsigned long long", "96.5f", {"rn": 96, "rz": 96, "ru": 97, "rd": 96})):
    for m in ("rn", "rz", "ru", "rd"):
        add("bfloat16", f"__bfloat162{t}_{m}",
            f"(unsigned long long)({ctype})__bfloat162{t}_{m}(__float2bfloat16({val}))",
            wants[m] & 0xFFFFFFFFFFFFFFFF if not ctype.startswith("unsigned") else wants[m])
add("bfloat16", "__bfloat162char_rz", "(unsigned long long)(long long)__bfloat162char_rz(__float2bfloat16(-3.7f))",
    (-3) & 0xFFFFFFFFFFFFFFFF)
add("bfloat16", "__bfloat162uchar_rz", "__bfloat162uchar_rz(__float2bfloat16(300.0f))", 255)
for t, ctype, val in (("int", "int", 257), ("uint", "unsigned", 259), ("short", "short", -257),
                      ("ushort", "unsigned short", 513), ("ll", "long long", -(2**60) - 2**52 - 1),
                      ("ull", "unsigned long long", 2**60 + 2**52 + 1)):
    for m in ("rn", "rz", "ru", "rd"):
        add("bfloat16", f"__{t}2bfloat16_{m}", f"bb(__{t}2bfloat16_{m}(({ctype}){val}LL))", B(F(val), m))
add("bfloat16", "__bfloat16_as_short", "(unsigned short)__bfloat16_as_short(__float2bfloat16(-2.0f))", 0xC000)
add("bfloat16", "__bfloat16_as_ushort", "__bfloat16_as_ushort(__float2bfloat16(2.0f))", 0x4000)
add("bfloat16", "__short_as_bfloat16", "bb(__short_as_bfloat16((short)0x3f80))", 0x3F80)
add("bfloat16", "__ushort_as_bfloat16", "bb(__ushort_as_bfloat16(0x3f80))", 0x3F80)
add("bfloat16", "make_bfloat162", "b2b(make_bfloat162(B(1.0f), B(2.0f)))", pair(0x3F80, 0x4000))
add("bfloat16", "__halves2bfloat162", "b2b(__halves2bfloat162(B(1.0f), B(2.0f)))", pair(0x3F80, 0x4000))
add("bfloat16", "__bfloat162bfloat162", "b2b(__bfloat162bfloat162(B(3.0f)))", pair(0x4040, 0x4040))
add("bfloat16", "__float2bfloat162_rn", "b2b(__float2bfloat162_rn(0.5f))", pair(0x3F00, 0x3F00))
add("bfloat16", "__floats2bfloat162_rn", "b2b(__floats2bfloat162_rn(0.5f, -1.0f))", pair(0x3F00, 0xBF80))
add("bfloat16", "__float22bfloat162_rn", "b2b(__float22bfloat162_rn(make_float2(0.5f, 4.0f)))", pair(0x3F00, 0x4080))
add("bfloat16", "__bfloat1622float2", "__float_as_uint(__bfloat1622float2(make_bfloat162(B(1.0f), B(-2.0f))).y)", f32bits(-2.0))
add("bfloat16", "__low2float", "__float_as_uint(__low2float(make_bfloat162(B(1.5f), B(2.0f))))", f32bits(1.5))
add("bfloat16", "__high2float", "__float_as_uint(__high2float(make_bfloat162(B(1.5f), B(2.0f))))", f32bits(2.0))
add("bfloat16", "__low2bfloat16", "bb(__low2bfloat16(make_bfloat162(B(1.5f), B(2.0f))))", 0x3FC0)
add("bfloat16", "__high2bfloat16", "bb(__high2bfloat16(make_bfloat162(B(1.5f), B(2.0f))))", 0x4000)
add("bfloat16", "__low2bfloat162", "b2b(__low2bfloat162(make_bfloat162(B(1.5f), B(2.0f))))", pair(0x3FC0, 0x3FC0))
add("bfloat16", "__high2bfloat162", "b2b(__high2bfloat162(make_bfloat162(B(1.5f), B(2.0f))))", pair(0x4000, 0x4000))
add("bfloat16", "__lows2bfloat162", "b2b(__lows2bfloat162(make_bfloat162(B(1.0f), B(2.0f)), make_bfloat162(B(3.0f), B(4.0f))))",
    pair(0x3F80, 0x4040))
add("bfloat16", "__highs2bfloat162", "b2b(__highs2bfloat162(make_bfloat162(B(1.0f), B(2.0f)), make_bfloat162(B(3.0f), B(4.0f))))",
    pair(0x4000, 0x4080))
add("bfloat16", "__lowhigh2highlow", "b2b(__lowhigh2highlow(make_bfloat162(B(1.0f), B(2.0f))))", pair(0x4000, 0x3F80))
bthird = F(bval(B(F(1, 3))))
add("bfloat16", "__hadd", "bb(__hadd(B(1.0f / 3), B(2.0f)))", B(bthird + 2))
add("bfloat16", "__hsub", "bb(__hsub(B(1.0f / 3), B(2.0f)))", B(bthird - 2))
add("bfloat16", "__hmul", "bb(__hmul(B(1.0f / 3), B(3.0f)))", B(bthird * 3))
add("bfloat16", "__hdiv", "bb(__hdiv(B(1.0f), B(3.0f)))", B(F(1, 3)))
add("bfloat16", "__hadd(subnormal)", "bb(__hadd(__ushort_as_bfloat16(0x0001), __ushort_as_bfloat16(0x0002)))", 0x0003)
add("bfloat16", "__hfma", "bb(__hfma(B(1.0f / 3), B(3.0f), B(-1.0f)))", B(bthird * 3 - 1))
add("bfloat16", "__hfma_relu", "bb(__hfma_relu(B(2.0f), B(-3.0f), B(1.0f)))", 0)
add("bfloat16", "__hadd_sat", "bb(__hadd_sat(B(0.75f), B(0.5f)))", 0x3F80)
add("bfloat16", "__hneg", "bb(__hneg(B(2.0f)))", 0xC000)
add("bfloat16", "__habs", "bb(__habs(B(-2.0f)))", 0x4000)
add("bfloat16", "__hlt", "__hlt(B(1.0f), B(2.0f))", 1)
add("bfloat16", "__hgeu", "__hgeu(B(1.0f), __ushort_as_bfloat16(0x7fc0))", 1)
add("bfloat16", "__hbeq2", "__hbeq2(make_bfloat162(B(1.0f), B(2.0f)), make_bfloat162(B(1.0f), B(2.0f)))", 1)
add("bfloat16", "__hlt2_mask", "__hlt2_mask(make_bfloat162(B(1.0f), B(2.0f)), make_bfloat162(B(2.0f), B(2.0f)))", 0xFFFF)
add("bfloat16", "__hisnan", "__hisnan(__ushort_as_bfloat16(0x7fc0))", 1)
add("bfloat16", "__hisinf", "(unsigned)__hisinf(__ushort_as_bfloat16(0x7f80))", 1)
add("bfloat16", "__hmax", "bb(__hmax(__ushort_as_bfloat16(0x7fc0), B(2.0f)))", 0x4000)
add("bfloat16", "__hmin_nan", "bb(__hmin_nan(__ushort_as_bfloat16(0x7fc0), B(2.0f)))", 0x7FFF)
for nm, arg, want in (("hsqrt", "2.25f", 1.5), ("hrsqrt", "4.0f", 0.5), ("hrcp", "4.0f", 0.25), ("hexp", "0.0f", 1.0),
                      ("hexp2", "3.0f", 8.0), ("hexp10", "2.0f", 100.0), ("hlog", "1.0f", 0.0), ("hlog2", "8.0f", 3.0),
                      ("hlog10", "100.0f", 2.0), ("hsin", "0.0f", 0.0), ("hcos", "0.0f", 1.0), ("htanh", "0.0f", 0.0),
                      ("hceil", "-1.5f", -1.0), ("hfloor", "-1.5f", -2.0), ("hrint", "2.5f", 2.0), ("htrunc", "-1.7f", -1.0)):
    add("bfloat16", nm, f"bb({nm}(B({arg})))", B(F(want)))
    add("bfloat16", "h2" + nm[1:], f"b2b(h2{nm[1:]}(__bfloat162bfloat162(B({arg}))))", pair(B(F(want)), B(F(want))))
add("bfloat16", "__hadd2", "b2b(__hadd2(__bfloat162bfloat162(B(1.0f / 3)), __bfloat162bfloat162(B(2.0f))))",
    pair(B(bthird + 2), B(bthird + 2)))
add("bfloat16", "__hmul2", "b2b(__hmul2(__bfloat162bfloat162(B(1.0f / 3)), __bfloat162bfloat162(B(2.0f))))",
    pair(B(bthird * 2), B(bthird * 2)))
add("bfloat16", "__h2div", "b2b(__h2div(__bfloat162bfloat162(B(1.0f)), __bfloat162bfloat162(B(3.0f))))",
    pair(B(F(1, 3)), B(F(1, 3))))
add("bfloat16", "__hfma2", "b2b(__hfma2(__bfloat162bfloat162(B(2.0f)), __bfloat162bfloat162(B(3.0f)), __bfloat162bfloat162(B(1.0f))))",
    pair(0x40E0, 0x40E0))
add("bfloat16", "__hcmadd", "b2b(__hcmadd(make_bfloat162(B(1.0f), B(2.0f)), make_bfloat162(B(3.0f), B(4.0f)), make_bfloat162(B(0.5f), B(0.25f))))",
    pair(B(F(-5) + F(1, 2)), B(F(10) + F(1, 4))))
add("bfloat16", "operators", "bb((B(1.5f) + B(2.0f)) * B(2.0f) - B(1.0f) / B(4.0f))", B(F(7) - F(1, 4)))

# integer averages, SAD and SIMD
add("integer", "__hadd(int)", "(unsigned)__hadd(-7, 2)", u32(-3))
add("integer", "__rhadd", "(unsigned)__rhadd(-7, 2)", u32(-2))
add("integer", "__uhadd", "__uhadd(0xFFFFFFFFu, 3u)", (0xFFFFFFFF + 3) >> 1)
add("integer", "__urhadd", "__urhadd(0xFFFFFFFFu, 2u)", (0xFFFFFFFF + 3) >> 1)
add("integer", "__sad", "__sad(-3, 4, 10u)", 17)
add("integer", "__usad", "__usad(3u, 10u, 1u)", 8)
add("integer", "__mul24", "(unsigned)__mul24(-3, 1000)", u32(-3000))
add("integer", "__umulhi", "__umulhi(0x80000000u, 6u)", 3)


def _simd(a, b, n, signed, f):
    w = 32 // n
    m = (1 << w) - 1
    r = 0
    for i in range(n):
        x, y = (a >> (w * i)) & m, (b >> (w * i)) & m
        if signed:
            x = x - (1 << w) if x >> (w - 1) else x
            y = y - (1 << w) if y >> (w - 1) else y
        r |= (f(x, y, m) & m) << (w * i)
    return r


A_, B_ = 0x80FF7F05, 0x7F01FF09
simd = {
    "abs": (lambda x, y, m: abs(x), True, 1), "absss": (None, True, 1), "add": (lambda x, y, m: x + y, False, 2),
    "addss": (None, True, 2), "addus": (lambda x, y, m: min(x + y, m), False, 2),
    "avgs": (lambda x, y, m: (x + y + (1 if x + y >= 0 else 0)) >> 1, True, 2),
    "avgu": (lambda x, y, m: (x + y + 1) >> 1, False, 2), "hadd": (None, False, 2),
    "absdiffs": (lambda x, y, m: abs(x - y), True, 2), "absdiffu": (lambda x, y, m: abs(x - y), False, 2),
    "cmpeq": (lambda x, y, m: m if x == y else 0, False, 2), "cmpges": (lambda x, y, m: m if x >= y else 0, True, 2),
    "cmpgeu": (lambda x, y, m: m if x >= y else 0, False, 2), "cmpgts": (lambda x, y, m: m if x > y else 0, True, 2),
    "cmpgtu": (lambda x, y, m: m if x > y else 0, False, 2), "cmples": (lambda x, y, m: m if x <= y else 0, True, 2),
    "cmpleu": (lambda x, y, m: m if x <= y else 0, False, 2), "cmplts": (lambda x, y, m: m if x < y else 0, True, 2),
    "cmpltu": (lambda x, y, m: m if x < y else 0, False, 2), "cmpne": (lambda x, y, m: m if x != y else 0, False, 2),
    "maxs": (lambda x, y, m: max(x, y), True, 2), "maxu": (lambda x, y, m: max(x, y), False, 2),
    "mins": (lambda x, y, m: min(x, y), True, 2), "minu": (lambda x, y, m: min(x, y), False, 2),
    "neg": (lambda x, y, m: -x, True, 1), "negss": (None, True, 1),
    "seteq": (lambda x, y, m: int(x == y), False, 2), "setges": (lambda x, y, m: int(x >= y), True, 2),
    "setgeu": (lambda x, y, m: int(x >= y), False, 2), "setgts": (lambda x, y, m: int(x > y), True, 2),
    "setgtu": (lambda x, y, m: int(x > y), False, 2), "setles": (lambda x, y, m: int(x <= y), True, 2),
    "setleu": (lambda x, y, m: int(x <= y), False, 2), "setlts": (lambda x, y, m: int(x < y), True, 2),
    "setltu": (lambda x, y, m: int(x < y), False, 2), "setne": (lambda x, y, m: int(x != y), False, 2),
    "sub": (lambda x, y, m: x - y, False, 2), "subss": (None, True, 2),
    "subus": (lambda x, y, m: max(x - y, 0), False, 2),
}
for nm, (fn, signed, nargs) in simd.items():
    for n in (4, 2):
        w = 32 // n
        lo, hi = -(1 << (w - 1)), (1 << (w - 1)) - 1
        sat = lambda v: max(lo, min(hi, v))  # noqa: E731
        f = fn
        if nm == "absss":
            f = lambda x, y, m: sat(abs(x))  # noqa: E731
        elif nm == "negss":
            f = lambda x, y, m: sat(-x)  # noqa: E731
        elif nm == "addss":
            f = lambda x, y, m: sat(x + y)  # noqa: E731
        elif nm == "subss":
            f = lambda x, y, m: sat(x - y)  # noqa: E731
        elif nm == "hadd":
            f = lambda x, y, m: (x + y) >> 1  # noqa: E731
        name = f"__v{nm}{n}"
        if nm == "hadd":
            name = f"__vhaddu{n}"
        args = f"0x{A_:X}u" if nargs == 1 else f"0x{A_:X}u, 0x{B_:X}u"
        add("integer", name, f"{name}({args})", _simd(A_, B_, n, signed, f))
for n in (4, 2):
    w = 32 // n
    add("integer", f"__vsads{n}", f"__vsads{n}(0x{A_:X}u, 0x{B_:X}u)",
        sum(abs(((A_ >> (w * i) & ((1 << w) - 1)) ^ (1 << (w - 1))) - ((B_ >> (w * i) & ((1 << w) - 1)) ^ (1 << (w - 1))))
            for i in range(n)))
    add("integer", f"__vsadu{n}", f"__vsadu{n}(0x{A_:X}u, 0x{B_:X}u)",
        sum(abs((A_ >> (w * i) & ((1 << w) - 1)) - (B_ >> (w * i) & ((1 << w) - 1))) for i in range(n)))
add("integer", "__viaddmax_s32", "(unsigned)__viaddmax_s32(3, 4, 5)", 7)
add("integer", "__viaddmin_u32", "__viaddmin_u32(3u, 4u, 5u)", 5)
add("integer", "__viaddmax_s16x2_relu", "__viaddmax_s16x2_relu(0xFFFF0003u, 0xFFFF0004u, 0x00000005u)", 0x00000007)

# fast-math division
add("division", "__fdividef", "__float_as_uint(__fdividef(1.0f, 4.0f))", f32bits(0.25))
add("division", "__fdividef(huge)", "__float_as_uint(__fdividef(3.0f, 0x1.8p127f))", 0)
add("division", "__fdividef(inf, huge)", "__float_as_uint(__fdividef(__int_as_float(0x7f800000), 0x1.8p127f))", 0x7FFFFFFF)
add("division", "fdividef", "__float_as_uint(fdividef(3.0f, 0x1.8p127f))", f32bits(np.float32(3) / np.float32(1.5 * 2.0**127)))
add("division", "__fdiv_rn", "__float_as_uint(__fdiv_rn(1.0f, 3.0f))", f32bits(np.float32(1) / np.float32(3)))
add("division", "__frcp_rn", "__float_as_uint(__frcp_rn(4.0f))", f32bits(0.25))

# CUDA-only float math (exact cases) and the IEEE fma
for expr, want in (("__fmaf_ieee_rn(2.0f, 3.0f, 1.0f)", 7.0), ("sinpif(0.5f)", 1.0), ("cospif(1.0f)", -1.0),
                   ("rcbrtf(8.0f)", 0.5), ("rhypotf(3.0f, 4.0f)", np.float32(1) / np.float32(5)),
                   ("norm3df(2.0f, 3.0f, 6.0f)", 7.0), ("rnorm4df(1.0f, 1.0f, 1.0f, 1.0f)", 0.5),
                   ("erfinvf(0.0f)", 0.0), ("erfcinvf(1.0f)", 0.0), ("normcdff(0.0f)", 0.5),
                   ("normcdfinvf(0.5f)", 0.0), ("erfcxf(0.0f)", 1.0), ("cyl_bessel_i0f(0.0f)", 1.0),
                   ("cyl_bessel_i1f(0.0f)", 0.0)):
    add("float", expr.split("(")[0], f"__float_as_uint({expr})", f32bits(want))

# constructors of every built-in vector type
VEC = [("char", "signed char", 1, 2, 1, 4), ("uchar", "unsigned char", 1, 2, 1, 4),
       ("short", "short", 2, 4, 2, 8), ("ushort", "unsigned short", 2, 4, 2, 8),
       ("int", "int", 4, 8, 4, 16), ("uint", "unsigned", 4, 8, 4, 16), ("long", "long", 8, 16, 8, 16),
       ("ulong", "unsigned long", 8, 16, 8, 16), ("longlong", "long long", 8, 16, 8, 16),
       ("ulonglong", "unsigned long long", 8, 16, 8, 16), ("float", "float", 4, 8, 4, 16),
       ("double", "double", 8, 16, 8, 16)]
STATIC = []
for base, ct, a1, a2, a3, a4 in VEC:
    for n, al in ((1, a1), (2, a2), (3, a3), (4, a4)):
        args = ", ".join(f"({ct}){k + 1}" for k in range(n))
        last = "xyzw"[n - 1]
        add("vector", f"make_{base}{n}", f"(unsigned long long)(make_{base}{n}({args}).{last} * 10 + make_{base}{n}({args}).x)", 10 * n + 1)
        STATIC.append(f"static_assert(alignof({base}{n}) == {al} && sizeof({base}{n}) == {n} * sizeof({ct}), \"{base}{n}\");")
for t, al in (("double4_16a", 16), ("double4_32a", 32)):
    add("vector", f"make_{t}", f"(unsigned long long)make_{t}(1, 2, 3, 4).w", 4)
    STATIC.append(f"static_assert(alignof({t}) == {al}, \"{t}\");")
for t, al in (("long4_16a", 16), ("long4_32a", 32), ("ulong4_16a", 16), ("ulong4_32a", 32), ("longlong4_16a", 16),
              ("longlong4_32a", 32), ("ulonglong4_16a", 16), ("ulonglong4_32a", 32)):
    STATIC.append(f"static_assert(alignof({t}) == {al} && sizeof({t}) == 32, \"{t}\");")
add("vector", "make_uint3", "(unsigned long long)make_uint3(1, 2, 3).z", 3)
add("vector", "dim3", "(unsigned long long)dim3(4, 5).y * 10 + dim3(4, 5).z", 51)

HELPERS = r'''#include <cuda_fp16.h>
#include <cuda_bf16.h>
__device__ __forceinline__ unsigned short hb(__half h) { return __half_as_ushort(h); }
__device__ __forceinline__ unsigned short bb(__nv_bfloat16 h) { return __bfloat16_as_ushort(h); }
__device__ __forceinline__ unsigned h2b(__half2 h) { return (unsigned)hb(__low2half(h)) | ((unsigned)hb(__high2half(h)) << 16); }
__device__ __forceinline__ unsigned b2b(__nv_bfloat162 h) { return (unsigned)bb(__low2bfloat16(h)) | ((unsigned)bb(__high2bfloat16(h)) << 16); }
__device__ __forceinline__ __half H(float f) { return __float2half(f); }
__device__ __forceinline__ __nv_bfloat16 B(float f) { return __float2bfloat16(f); }
'''

# families run as kernels of their own (a block of 32 threads, shared memory, atomics)
RUNTIME_SRC = r'''
__constant__ int c_table[2] = {1, 2};
__device__ int d_global;
extern "C" __global__ void spaces(const int* g, unsigned* o) {
  __shared__ int s;
  extern __shared__ int dyn[];
  int local[2];
  local[threadIdx.x & 1] = g[0];
  if (threadIdx.x == 0) {
    o[0] = __isGlobal(g) | __isShared(&s) << 1 | __isLocal(local) << 2 | __isConstant(c_table) << 3 | __isGlobal(&d_global) << 4;
    o[1] = __isShared(g) | __isGlobal(&s) << 1 | __isShared(local) << 2 | __isGlobal(c_table) << 3 | __isShared(dyn) << 4;
    o[2] = __isGridConstant(g) + local[0] * 0;
  }
}
extern "C" __global__ void votes(const int* p, unsigned* o) {
  int t = threadIdx.x;
  o[t * 5 + 0] = __all_sync(0xffffffffu, p[t] > 0);
  o[t * 5 + 1] = __any_sync(0xffffffffu, p[t] > 5);
  o[t * 5 + 2] = __ballot_sync(0xffffffffu, p[t] & 1);
  o[t * 5 + 3] = __uni_sync(0xffffffffu, p[t] > 0) * 2 + (__uni_sync(0xffffffffu, p[t] & 1) != 0);
  o[t * 5 + 4] = __activemask();
}
extern "C" __global__ void vatomics(float2* f2, float4* f4, __half* h, __half2* h2, __nv_bfloat16* b, __nv_bfloat162* b2,
                                    float* old) {
  float2 r2 = atomicAdd(f2, make_float2(1.0f, 2.0f));
  float4 r4 = atomicAdd(f4, make_float4(1.0f, 2.0f, 3.0f, 4.0f));
  atomicAdd(h, __float2half(0.5f));
  atomicAdd(h2, __floats2half2_rn(1.0f, 0.25f));
  atomicAdd(b, __float2bfloat16(0.5f));
  atomicAdd(b2, __floats2bfloat162_rn(1.0f, 0.25f));
  if (threadIdx.x == 0) { old[0] = r2.y; old[1] = r4.w; }
}
'''


def inventory_source():
    body = [HELPERS, *STATIC]
    fams = {}
    for i, (fam, name, expr, want) in enumerate(E):
        fams.setdefault(fam, []).append((i, expr))
    for fam, items in fams.items():
        body.append(f'extern "C" __global__ void inv_{fam}(unsigned long long* o) {{')
        body += [f"  o[{i}] = (unsigned long long)({expr});" for i, expr in items]
        body.append("}")
    body.append(RUNTIME_SRC)
    return "\n".join(body) + "\n"


def _nvrtc_compile(src):
    try:
        from cuda.bindings import nvrtc as nv
    except Exception:
        pytest.skip("cuda.bindings.nvrtc is not installed")
    from cupyops.simt import _nvrtc_front
    inc = _nvrtc_front._include_dirs()
    if not inc:
        pytest.skip("the CUDA runtime headers (pip nvidia-cuda-runtime) are not installed")
    err, prog = nv.nvrtcCreateProgram(src.encode(), b"inventory.cu", 0, [], [])
    opts = [b"--gpu-architecture=compute_90", b"--std=c++17", b"-default-device", f"-I{inc[0]}".encode()]
    try:
        (rc,) = nv.nvrtcCompileProgram(prog, len(opts), opts)
        _, n = nv.nvrtcGetProgramLogSize(prog)
        log = b" " * n
        nv.nvrtcGetProgramLog(prog, log)
        return rc == nv.nvrtcResult.NVRTC_SUCCESS, log.decode(errors="replace")
    finally:
        nv.nvrtcDestroyProgram(prog)


def _names_at_lines(src, log):
    lines = src.splitlines()
    out = []
    for m in re.finditer(r"\((\d+)\): error", log):
        ln = lines[int(m.group(1)) - 1]
        out.append(ln.strip()[:160])
    return out


@pytest.mark.slow
def test_inventory_nvrtc_accepts_every_entry():
    _check_np_agree()
    src = inventory_source()
    ok, log = _nvrtc_compile(src)
    assert ok, f"NVRTC rejects: {_names_at_lines(src, log)}\n{log[:4000]}"


@pytest.fixture(scope="module")
def inv_mod():
    m = simt.RawModule(code=inventory_source(), name="inventory.cu")
    m.compile()
    return m


@pytest.mark.slow
@pytest.mark.parametrize("family", sorted({f for f, *_ in E}))
def test_inventory_values_on_simt(inv_mod, family):
    o = np.zeros(len(E), np.uint64)
    inv_mod.get_function(f"inv_{family}")(1, 1, (o,))
    bad = [(name, expr, hex(int(o[i])), hex(want)) for i, (fam, name, expr, want) in enumerate(E)
           if fam == family and int(o[i]) != want]
    assert not bad, f"{len(bad)} wrong: {bad[:20]}"


@pytest.mark.slow
def test_inventory_runtime_families(inv_mod):
    g = np.array([3], np.int32)
    o = np.zeros(3, np.uint32)
    inv_mod.get_function("spaces")(1, 2, (g, o), shared_mem=16)
    assert o.tolist() == [0b11111, 0b10000, 0]   # global buffer, shared (static, dynamic), local, constant
    p = np.arange(1, 33, dtype=np.int32)
    o = np.zeros(32 * 5, np.uint32)
    inv_mod.get_function("votes")(1, 32, (p, o))
    o = o.reshape(32, 5)
    ball = sum(1 << t for t in range(32) if p[t] & 1)
    assert (o[:, 0] == 1).all() and (o[:, 1] == 1).all() and (o[:, 2] == ball).all()
    assert (o[:, 3] == 2).all() and (o[:, 4] == 0xFFFFFFFF).all()
    f2 = np.zeros(2, np.float32)
    f4 = np.zeros(4, np.float32)
    h = np.zeros(1, np.float16)
    h2 = np.zeros(2, np.float16)
    b = np.zeros(1, np.uint16)
    b2 = np.zeros(2, np.uint16)
    old = np.zeros(2, np.float32)
    inv_mod.get_function("vatomics")(1, 8, (f2, f4, h, h2, b, b2, old))
    assert f2.tolist() == [8, 16] and f4.tolist() == [8, 16, 24, 32]
    assert h.tolist() == [4.0] and h2.tolist() == [8.0, 2.0]
    assert b.tolist() == [B(F(4))] and b2.tolist() == [B(F(8)), B(F(2))]
    assert old[0] % 2 == 0 and old[1] % 4 == 0
    with pytest.raises(simt.MisalignedAddressError):   # a float4 atomic needs 16-byte alignment
        inv_mod.get_function("vatomics")(1, 1, (f2, np.zeros(5, np.float32)[1:], h, h2, b, b2, old))


def test_the_issue_examples_compile_and_run():
    """The built-ins the probe found missing (not slow: a small module)."""
    src = r'''#include <cuda_fp16.h>
extern "C" __global__ void k(unsigned* o, float2* f2, const int* g) {
  __half h = __float2half(7.9f);
  int uni = __uni_sync(0xffffffffu, g[0] > 0);
  float2 r = atomicAdd(f2, make_float2(1.0f, 2.0f));
  if (threadIdx.x != 0) return;
  o[0] = __half2uint_rz(h);
  o[1] = __half_as_ushort(hsqrt(__float2half(2.25f)));
  o[2] = __half_as_ushort(htrunc(__float2half(-1.7f)));
  o[3] = (unsigned)__rhadd(-7, 2);
  o[4] = __usad(3u, 10u, 1u);
  o[5] = __isGlobal(g);
  o[6] = uni;
  o[7] = (unsigned)r.x;
  o[8] = __float_as_uint(fdividef(1.0f, 4.0f));
  long2 l = make_long2(-5, 6);
  o[9] = (unsigned)(l.x + l.y);
}'''
    o = np.zeros(10, np.uint32)
    f2 = np.zeros(2, np.float32)
    simt.RawModule(code=src).get_function("k")(1, 32, (o, f2, np.array([1], np.int32)))
    assert o.tolist()[:7] == [7, 0x3E00, 0xBC00, u32(-2), 8, 1, 1]
    assert o[8] == f32bits(0.25) and o[9] == 1 and f2.tolist() == [32, 64]


def test_unsupported_builtins_are_listed_in_the_readme():
    readme = (Path(simt.__file__).parent / "README.md").read_text()
    m = re.search(r"^#+ Unsupported built-ins\n(.*?)(?=^#)", readme, re.S | re.M)
    assert m, "cupyops/simt/README.md has no 'Unsupported built-ins' section"
    entries = re.findall(r"^- `([^`]+)`.*\S", m.group(1), re.M)
    assert entries
    names = {n for _, n, *_ in E}
    assert not names & set(entries)
