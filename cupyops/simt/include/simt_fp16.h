// cupyops.simt: __half and __nv_bfloat16 (and their pairs) as on a GPU: correctly rounded
// arithmetic, conversions in every rounding mode, the canonical NaN (0x7fff) from arithmetic and
// conversions, comparisons, the half2/bfloat162 pair operations, math functions and atomics.
// Included by the stand-ins for <cuda_fp16.h> and <cuda_bf16.h> (both types are always defined).
//
// __half arithmetic runs in float (exact: 24 >= 2*11+2 bits, so rounding the float result to half
// is the correctly rounded result; no float subnormal ever arises from halves).  __nv_bfloat16
// arithmetic runs in double (53 >= 2*8+2), so bfloat16 subnormals are kept under -ftz=true, as
// on a GPU (-ftz flushes float32 only).
#ifndef CUPYOPS_SIMT_FP16_H
#define CUPYOPS_SIMT_FP16_H
#include "simt_cuda.h"

// ---------------------------------------------------------------- rounding core
// value = (-1)^s * m * 2^e (m > 0) rounded to a binary format with P significand bits (with the
// implicit one) and EB exponent bits; mode 0 nearest-even, 1 toward zero, 2 up, 3 down.
static inline unsigned __simt_round_bits(bool s, unsigned long long m, int e, int P, int EB, int mode) {
  const int bias = (1 << (EB - 1)) - 1, emin = 1 - bias;
  const unsigned sign = s ? 1u << (P - 1 + EB) : 0u;
  const unsigned maxfin = ((((1u << EB) - 2u) << (P - 1)) | ((1u << (P - 1)) - 1u));
  const unsigned inf = ((1u << EB) - 1u) << (P - 1);
  int top = 63 - __builtin_clzll(m);
  int E = top + e;
  int qexp = (E < emin ? emin : E) - (P - 1);
  int sh = qexp - e;
  unsigned long long q;
  bool up = false;
  if (sh <= 0) {
    q = m << (-sh);  // exact
  } else {
    unsigned __int128 mm = m;
    unsigned __int128 qq = sh >= 128 ? 0 : mm >> sh;
    unsigned __int128 r = sh >= 128 ? mm : mm - (qq << sh);
    q = (unsigned long long)qq;
    if (r != 0) {
      if (mode == 0) {
        bool gt_half, eq_half;
        if (sh > 64) { gt_half = false; eq_half = false; }  // r <= m < 2^64 <= half a quantum
        else {
          unsigned __int128 h = (unsigned __int128)1 << (sh - 1);
          gt_half = r > h; eq_half = r == h;
        }
        up = gt_half || (eq_half && (q & 1));
      } else if (mode == 2) up = !s;
      else if (mode == 3) up = s;
    }
  }
  if (up) ++q;
  unsigned long long bits;
  if (E < emin) bits = q;  // subnormal (a carry into the exponent field gives the smallest normal)
  else bits = ((unsigned long long)(E + bias) << (P - 1)) + (q - (1ull << (P - 1)));
  if (bits >= inf) {
    bool to_inf = mode == 0 || (mode == 2 && !s) || (mode == 3 && s);
    return sign | (to_inf ? inf : maxfin);
  }
  return sign | (unsigned)bits;
}
// exact decompositions (integer operations only: no float instruction, so nothing is flushed)
struct __simt_fparts { int kind; bool s; unsigned long long m; int e; };  // kind 0 zero, 1 finite, 2 inf, 3 NaN
static inline __simt_fparts __simt_parts(float f) {
  unsigned u = __simt_bitcast<unsigned>(f);
  __simt_fparts p; p.s = u >> 31;
  unsigned ex = (u >> 23) & 0xFF, mt = u & 0x7FFFFF;
  if (ex == 0xFF) { p.kind = mt ? 3 : 2; p.m = 0; p.e = 0; return p; }
  if (ex == 0) { p.kind = mt ? 1 : 0; p.m = mt; p.e = -149; return p; }
  p.kind = 1; p.m = mt | 0x800000u; p.e = (int)ex - 150; return p;
}
static inline __simt_fparts __simt_parts(double d) {
  unsigned long long u = __simt_bitcast<unsigned long long>(d);
  __simt_fparts p; p.s = u >> 63;
  unsigned ex = (unsigned)(u >> 52) & 0x7FF;
  unsigned long long mt = u & 0xFFFFFFFFFFFFFull;
  if (ex == 0x7FF) { p.kind = mt ? 3 : 2; p.m = 0; p.e = 0; return p; }
  if (ex == 0) { p.kind = mt ? 1 : 0; p.m = mt; p.e = -1074; return p; }
  p.kind = 1; p.m = mt | (1ull << 52); p.e = (int)ex - 1075; return p;
}
static inline __simt_fparts __simt_parts_int(bool neg, unsigned long long mag) {
  __simt_fparts p; p.kind = mag ? 1 : 0; p.s = neg; p.m = mag; p.e = 0; return p;
}
// to a 16-bit format (P significand bits, EB exponent bits), canonical NaN 0x7fff
static inline unsigned short __simt_to16(__simt_fparts p, int P, int EB, int mode) {
  if (p.kind == 3) return 0x7FFF;
  unsigned sign = p.s ? 0x8000u : 0u;
  if (p.kind == 2) return (unsigned short)(sign | (((1u << EB) - 1u) << (P - 1)));
  if (p.kind == 0) return (unsigned short)sign;
  return (unsigned short)__simt_round_bits(p.s, p.m, p.e, P, EB, mode);
}
#define __SIMT_H_P 11
#define __SIMT_H_EB 5
#define __SIMT_B_P 8
#define __SIMT_B_EB 8

// ---------------------------------------------------------------- the types
struct __half_raw { unsigned short x; };
struct __half2_raw { unsigned short x, y; };
struct __nv_bfloat16_raw { unsigned short x; };
struct __nv_bfloat162_raw { unsigned short x, y; };

struct __half;
struct __nv_bfloat16;
static inline __half __simt_h_from_bits(unsigned short u);
static inline __nv_bfloat16 __simt_b_from_bits(unsigned short u);
static inline unsigned short __simt_h_bits_of_float(float f);
static inline unsigned short __simt_b_bits_of_double(double d);

struct __half {
  _Float16 __x;
  __half() = default;
  __half(const __half_raw &r) { __builtin_memcpy(&__x, &r.x, 2); }
  __half(float f) { unsigned short u = __simt_h_bits_of_float(f); __builtin_memcpy(&__x, &u, 2); }
  __half(double f) { unsigned short u = __simt_to16(__simt_parts(f), __SIMT_H_P, __SIMT_H_EB, 0); __builtin_memcpy(&__x, &u, 2); }
  __half(int v) : __x((_Float16)v) {}
  __half(unsigned int v) : __x((_Float16)v) {}
  __half(short v) : __x((_Float16)v) {}
  __half(unsigned short v) : __x((_Float16)v) {}
  __half(long long v) : __x((_Float16)v) {}
  __half(unsigned long long v) : __x((_Float16)v) {}
  __half(long v) : __x((_Float16)v) {}
  __half(unsigned long v) : __x((_Float16)v) {}
  inline operator float() const;
  operator __half_raw() const { __half_raw r; __builtin_memcpy(&r.x, &__x, 2); return r; }
  __half &operator=(float f) { *this = __half(f); return *this; }
  __half &operator=(double f) { *this = __half(f); return *this; }
  __half &operator=(const __half_raw &r) { __builtin_memcpy(&__x, &r.x, 2); return *this; }
  explicit operator bool() const { return __x != (_Float16)0; }
  explicit operator int() const;
  explicit operator unsigned int() const;
  explicit operator short() const;
  explicit operator unsigned short() const;
  explicit operator long long() const;
  explicit operator unsigned long long() const;
};
typedef __half half;
typedef __half __nv_half;

struct __nv_bfloat16 {
  unsigned short __x;
  __nv_bfloat16() = default;
  __nv_bfloat16(const __nv_bfloat16_raw &r) : __x(r.x) {}
  __nv_bfloat16(float f) : __x(__simt_to16(__simt_parts(f), __SIMT_B_P, __SIMT_B_EB, 0)) {}
  __nv_bfloat16(double f) : __x(__simt_to16(__simt_parts(f), __SIMT_B_P, __SIMT_B_EB, 0)) {}
  __nv_bfloat16(int v) : __x(__simt_to16(__simt_parts_int(v < 0, v < 0 ? 0ull - (unsigned long long)(long long)v : (unsigned long long)v), __SIMT_B_P, __SIMT_B_EB, 0)) {}
  __nv_bfloat16(unsigned int v) : __x(__simt_to16(__simt_parts_int(false, v), __SIMT_B_P, __SIMT_B_EB, 0)) {}
  __nv_bfloat16(short v) : __nv_bfloat16((int)v) {}
  __nv_bfloat16(unsigned short v) : __nv_bfloat16((unsigned int)v) {}
  __nv_bfloat16(long long v) : __x(__simt_to16(__simt_parts_int(v < 0, v < 0 ? 0ull - (unsigned long long)v : (unsigned long long)v), __SIMT_B_P, __SIMT_B_EB, 0)) {}
  __nv_bfloat16(unsigned long long v) : __x(__simt_to16(__simt_parts_int(false, v), __SIMT_B_P, __SIMT_B_EB, 0)) {}
  __nv_bfloat16(long v) : __nv_bfloat16((long long)v) {}
  __nv_bfloat16(unsigned long v) : __nv_bfloat16((unsigned long long)v) {}
  inline operator float() const;
  operator __nv_bfloat16_raw() const { __nv_bfloat16_raw r; r.x = __x; return r; }
  __nv_bfloat16 &operator=(float f) { *this = __nv_bfloat16(f); return *this; }
  __nv_bfloat16 &operator=(double f) { *this = __nv_bfloat16(f); return *this; }
  __nv_bfloat16 &operator=(const __nv_bfloat16_raw &r) { __x = r.x; return *this; }
  explicit operator bool() const { return (__x & 0x7FFF) != 0; }
  explicit operator int() const;
  explicit operator unsigned int() const;
  explicit operator short() const;
  explicit operator unsigned short() const;
  explicit operator long long() const;
  explicit operator unsigned long long() const;
};
typedef __nv_bfloat16 nv_bfloat16;

struct __attribute__((aligned(4))) __half2 {
  __half x, y;
  __half2() = default;
  __half2(const __half &a, const __half &b) : x(a), y(b) {}
  __half2(const __half2_raw &r) { x = __half(__half_raw{r.x}); y = __half(__half_raw{r.y}); }
  operator __half2_raw() const { __half2_raw r; r.x = ((__half_raw)x).x; r.y = ((__half_raw)y).x; return r; }
};
typedef __half2 half2;
typedef __half2 __nv_half2;
struct __attribute__((aligned(4))) __nv_bfloat162 {
  __nv_bfloat16 x, y;
  __nv_bfloat162() = default;
  __nv_bfloat162(const __nv_bfloat16 &a, const __nv_bfloat16 &b) : x(a), y(b) {}
  __nv_bfloat162(const __nv_bfloat162_raw &r) { x.__x = r.x; y.__x = r.y; }
  operator __nv_bfloat162_raw() const { __nv_bfloat162_raw r; r.x = x.__x; r.y = y.__x; return r; }
};
typedef __nv_bfloat162 nv_bfloat162;

// ---------------------------------------------------------------- bits and the compute types
static inline unsigned short __simt_hbits(__half h) { unsigned short u; __builtin_memcpy(&u, &h.__x, 2); return u; }
static inline __half __simt_h_from_bits(unsigned short u) { __half h; __builtin_memcpy(&h.__x, &u, 2); return h; }
static inline __nv_bfloat16 __simt_b_from_bits(unsigned short u) { __nv_bfloat16 b; b.__x = u; return b; }
static inline unsigned short __simt_bbits(__nv_bfloat16 b) { return b.__x; }
static inline unsigned short __simt_canon16(unsigned short u, unsigned short inf) {
  return (u & 0x7FFF) > inf ? (unsigned short)0x7FFF : u;
}
static inline unsigned short __simt_h_bits_of_float(float f) {
  _Float16 h = (_Float16)f;
  unsigned short u; __builtin_memcpy(&u, &h, 2);
  return __simt_canon16(u, 0x7C00);
}
static inline unsigned short __simt_b_bits_of_double(double d) { return __simt_to16(__simt_parts(d), __SIMT_B_P, __SIMT_B_EB, 0); }
// compute types: float for half, double for bfloat16 (from the bits: no float instruction)
static inline float __simt_hc(__half h) { return (float)h.__x; }
static inline __half __simt_hr(float f) { return __simt_h_from_bits(__simt_h_bits_of_float(f)); }
static inline double __simt_bc(__nv_bfloat16 b) {
  unsigned u = b.__x, ex = (u >> 7) & 0xFF, mt = u & 0x7F;
  double sgn = (u & 0x8000) ? -1.0 : 1.0;
  if (ex == 0xFF) return mt ? __builtin_nan("") : sgn * __builtin_inf();
  if (ex == 0) return sgn * (double)mt * 0x1p-133;
  return sgn * (double)(mt | 0x80) * __simt_bitcast<double>((unsigned long long)(ex - 134 + 1023) << 52);
}
static inline __nv_bfloat16 __simt_br(double d) { return __simt_b_from_bits(__simt_b_bits_of_double(d)); }
// float of a bfloat16: the bits shifted (exact), canonical NaN (cvt.f32.bf16)
static inline float __simt_b2f(__nv_bfloat16 b) {
  unsigned u = (unsigned)b.__x << 16;
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) u = 0x7FFFFFFFu;
  return __simt_bitcast<float>(u);
}
static inline float __simt_h2f(__half h) {
  unsigned short u = __simt_hbits(h);
  if ((u & 0x7FFF) > 0x7C00) return __simt_bitcast<float>(0x7FFFFFFFu);
  return (float)h.__x;
}
inline __half::operator float() const { return __simt_h2f(*this); }
inline __nv_bfloat16::operator float() const { return __simt_b2f(*this); }

// ---------------------------------------------------------------- conversions
static inline float __half2float(__half h) { return __simt_h2f(h); }
static inline float __bfloat162float(__nv_bfloat16 b) { return __simt_b2f(b); }
#define SIMT_F2X(NAME, T, MK, P, EB, MODE) \
  static inline T NAME(float f) { return MK(__simt_to16(__simt_parts(f), P, EB, MODE)); }
static inline __half __float2half(float f) { return __simt_hr(f); }
static inline __half __float2half_rn(float f) { return __simt_hr(f); }
SIMT_F2X(__float2half_rz, __half, __simt_h_from_bits, __SIMT_H_P, __SIMT_H_EB, 1)
SIMT_F2X(__float2half_ru, __half, __simt_h_from_bits, __SIMT_H_P, __SIMT_H_EB, 2)
SIMT_F2X(__float2half_rd, __half, __simt_h_from_bits, __SIMT_H_P, __SIMT_H_EB, 3)
static inline __half __double2half(double d) { return __simt_h_from_bits(__simt_to16(__simt_parts(d), __SIMT_H_P, __SIMT_H_EB, 0)); }
SIMT_F2X(__float2bfloat16, __nv_bfloat16, __simt_b_from_bits, __SIMT_B_P, __SIMT_B_EB, 0)
SIMT_F2X(__float2bfloat16_rn, __nv_bfloat16, __simt_b_from_bits, __SIMT_B_P, __SIMT_B_EB, 0)
SIMT_F2X(__float2bfloat16_rz, __nv_bfloat16, __simt_b_from_bits, __SIMT_B_P, __SIMT_B_EB, 1)
SIMT_F2X(__float2bfloat16_ru, __nv_bfloat16, __simt_b_from_bits, __SIMT_B_P, __SIMT_B_EB, 2)
SIMT_F2X(__float2bfloat16_rd, __nv_bfloat16, __simt_b_from_bits, __SIMT_B_P, __SIMT_B_EB, 3)
static inline __nv_bfloat16 __double2bfloat16(double d) { return __simt_br(d); }
// integers -> half / bfloat16 in each rounding mode
#define SIMT_I2X(PFX, T, MK, P, EB, SFX, MODE) \
  static inline T __int2##PFX##_##SFX(int v) { return MK(__simt_to16(__simt_parts_int(v < 0, v < 0 ? 0ull - (unsigned long long)(long long)v : (unsigned long long)v), P, EB, MODE)); } \
  static inline T __uint2##PFX##_##SFX(unsigned v) { return MK(__simt_to16(__simt_parts_int(false, v), P, EB, MODE)); } \
  static inline T __short2##PFX##_##SFX(short v) { return __int2##PFX##_##SFX(v); } \
  static inline T __ushort2##PFX##_##SFX(unsigned short v) { return __uint2##PFX##_##SFX(v); } \
  static inline T __ll2##PFX##_##SFX(long long v) { return MK(__simt_to16(__simt_parts_int(v < 0, v < 0 ? 0ull - (unsigned long long)v : (unsigned long long)v), P, EB, MODE)); } \
  static inline T __ull2##PFX##_##SFX(unsigned long long v) { return MK(__simt_to16(__simt_parts_int(false, v), P, EB, MODE)); }
#define SIMT_I2X_ALL(PFX, T, MK, P, EB) SIMT_I2X(PFX, T, MK, P, EB, rn, 0) SIMT_I2X(PFX, T, MK, P, EB, rz, 1) \
  SIMT_I2X(PFX, T, MK, P, EB, ru, 2) SIMT_I2X(PFX, T, MK, P, EB, rd, 3)
SIMT_I2X_ALL(half, __half, __simt_h_from_bits, __SIMT_H_P, __SIMT_H_EB)
SIMT_I2X_ALL(bfloat16, __nv_bfloat16, __simt_b_from_bits, __SIMT_B_P, __SIMT_B_EB)
// half / bfloat16 -> integers: saturating, NaN -> 0 (cvt); the float value is exact
#define SIMT_X2I(PFX, T, TOF, SFX) \
  static inline int __##PFX##2int_##SFX(T h) { return __float2int_##SFX(TOF(h)); } \
  static inline unsigned __##PFX##2uint_##SFX(T h) { return __float2uint_##SFX(TOF(h)); } \
  static inline long long __##PFX##2ll_##SFX(T h) { return __float2ll_##SFX(TOF(h)); } \
  static inline unsigned long long __##PFX##2ull_##SFX(T h) { return __float2ull_##SFX(TOF(h)); } \
  static inline short __##PFX##2short_##SFX(T h) { int v = __float2int_##SFX(TOF(h)); return (short)(v > 32767 ? 32767 : v < -32768 ? -32768 : v); } \
  static inline unsigned short __##PFX##2ushort_##SFX(T h) { unsigned v = __float2uint_##SFX(TOF(h)); return (unsigned short)(v > 65535u ? 65535u : v); }
#define SIMT_X2I_ALL(PFX, T, TOF) SIMT_X2I(PFX, T, TOF, rn) SIMT_X2I(PFX, T, TOF, rz) SIMT_X2I(PFX, T, TOF, ru) \
  SIMT_X2I(PFX, T, TOF, rd) \
  static inline signed char __##PFX##2char_rz(T h) { int v = __float2int_rz(TOF(h)); return (signed char)(v > 127 ? 127 : v < -128 ? -128 : v); } \
  static inline unsigned char __##PFX##2uchar_rz(T h) { unsigned v = __float2uint_rz(TOF(h)); return (unsigned char)(v > 255u ? 255u : v); }
SIMT_X2I_ALL(half, __half, __half2float)
SIMT_X2I_ALL(bfloat16, __nv_bfloat16, __bfloat162float)
inline __half::operator int() const { return __half2int_rz(*this); }
inline __half::operator unsigned int() const { return __half2uint_rz(*this); }
inline __half::operator short() const { return __half2short_rz(*this); }
inline __half::operator unsigned short() const { return __half2ushort_rz(*this); }
inline __half::operator long long() const { return __half2ll_rz(*this); }
inline __half::operator unsigned long long() const { return __half2ull_rz(*this); }
inline __nv_bfloat16::operator int() const { return __bfloat162int_rz(*this); }
inline __nv_bfloat16::operator unsigned int() const { return __bfloat162uint_rz(*this); }
inline __nv_bfloat16::operator short() const { return __bfloat162short_rz(*this); }
inline __nv_bfloat16::operator unsigned short() const { return __bfloat162ushort_rz(*this); }
inline __nv_bfloat16::operator long long() const { return __bfloat162ll_rz(*this); }
inline __nv_bfloat16::operator unsigned long long() const { return __bfloat162ull_rz(*this); }
// bit reinterpretations
static inline unsigned short __half_as_ushort(__half h) { return __simt_hbits(h); }
static inline short __half_as_short(__half h) { return (short)__simt_hbits(h); }
static inline __half __ushort_as_half(unsigned short u) { return __simt_h_from_bits(u); }
static inline __half __short_as_half(short u) { return __simt_h_from_bits((unsigned short)u); }
static inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) { return h.__x; }
static inline short __bfloat16_as_short(__nv_bfloat16 h) { return (short)h.__x; }
static inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short u) { return __simt_b_from_bits(u); }
static inline __nv_bfloat16 __short_as_bfloat16(short u) { return __simt_b_from_bits((unsigned short)u); }

// ---------------------------------------------------------------- pairs
#define SIMT_PAIRS(T, T2, PFX, P2, TOF, FROMF) \
  static inline T2 make_##P2(T a, T b) { return T2(a, b); } \
  static inline T2 __halves2##P2(T a, T b) { return T2(a, b); } \
  static inline T2 __##PFX##2##P2(T a) { return T2(a, a); } \
  static inline T2 __float2##P2##_rn(float f) { T h = FROMF(f); return T2(h, h); } \
  static inline T2 __floats2##P2##_rn(float a, float b) { return T2(FROMF(a), FROMF(b)); } \
  static inline T2 __float22##P2##_rn(float2 f) { return T2(FROMF(f.x), FROMF(f.y)); } \
  static inline float2 __##P2##2float2(T2 h) { return make_float2(TOF(h.x), TOF(h.y)); } \
  static inline float __low2float(T2 h) { return TOF(h.x); } \
  static inline float __high2float(T2 h) { return TOF(h.y); } \
  static inline T __low2##PFX(T2 h) { return h.x; } \
  static inline T __high2##PFX(T2 h) { return h.y; } \
  static inline T2 __low2##P2(T2 h) { return T2(h.x, h.x); } \
  static inline T2 __high2##P2(T2 h) { return T2(h.y, h.y); } \
  static inline T2 __lows2##P2(T2 a, T2 b) { return T2(a.x, b.x); } \
  static inline T2 __highs2##P2(T2 a, T2 b) { return T2(a.y, b.y); } \
  static inline T2 __lowhigh2highlow(T2 h) { return T2(h.y, h.x); }
SIMT_PAIRS(__half, __half2, half, half2, __half2float, __float2half_rn)
SIMT_PAIRS(__nv_bfloat16, __nv_bfloat162, bfloat16, bfloat162, __bfloat162float, __float2bfloat16_rn)

// ---------------------------------------------------------------- arithmetic, comparisons, math
// fused multiply-add rounded once: a*b is exact in double (2*11 or 2*8 bits), the sum is rounded
// to odd in double (53 >= P + 2 bits), then to the 16-bit format
static inline double __simt_fma_rto(double a, double b, double c) {
  double p = a * b, s = p + c;
  if (s != s || __builtin_isinf(s)) return s;
  double bb = s - p, err = (p - (s - bb)) + (c - bb);
  if (err != 0.0) {
    unsigned long long u = __simt_bitcast<unsigned long long>(s);
    if (!(u & 1)) { u += ((err > 0.0) == (s > 0.0)) ? 1 : -1; s = __simt_bitcast<double>(u); }
  }
  return s;
}
static inline __half __simt_hfma_impl(__half a, __half b, __half c) {
  return __simt_h_from_bits(__simt_to16(__simt_parts(__simt_fma_rto(__simt_hc(a), __simt_hc(b), __simt_hc(c))), __SIMT_H_P, __SIMT_H_EB, 0));
}
static inline __nv_bfloat16 __simt_bfma_impl(__nv_bfloat16 a, __nv_bfloat16 b, __nv_bfloat16 c) {
  return __simt_br(__simt_fma_rto(__simt_bc(a), __simt_bc(b), __simt_bc(c)));
}
static inline bool __simt_isnan(__half h) { return (__simt_hbits(h) & 0x7FFF) > 0x7C00; }
static inline bool __simt_isnan(__nv_bfloat16 h) { return (h.__x & 0x7FFF) > 0x7F80; }
static inline int __simt_isinf(__half h) { unsigned short u = __simt_hbits(h); return (u & 0x7FFF) == 0x7C00 ? (u >> 15 ? -1 : 1) : 0; }
static inline int __simt_isinf(__nv_bfloat16 h) { unsigned short u = h.__x; return (u & 0x7FFF) == 0x7F80 ? (u >> 15 ? -1 : 1) : 0; }
static inline unsigned short __simt_bits16(__half h) { return __simt_hbits(h); }
static inline unsigned short __simt_bits16(__nv_bfloat16 h) { return h.__x; }

#define SIMT_HALF_OPS(T, T2, C, TOC, FROMC, FMA, MKBITS) \
  static inline T __hadd(T a, T b) { return FROMC(TOC(a) + TOC(b)); } \
  static inline T __hsub(T a, T b) { return FROMC(TOC(a) - TOC(b)); } \
  static inline T __hmul(T a, T b) { return FROMC(TOC(a) * TOC(b)); } \
  static inline T __hdiv(T a, T b) { return FROMC(TOC(a) / TOC(b)); } \
  static inline T __hadd_rn(T a, T b) { return __hadd(a, b); } \
  static inline T __hsub_rn(T a, T b) { return __hsub(a, b); } \
  static inline T __hmul_rn(T a, T b) { return __hmul(a, b); } \
  static inline T __simt_sat(T r) { \
    if (__simt_isnan(r)) return MKBITS(0); \
    C v = TOC(r); return v < (C)0 ? MKBITS(0) : (v > (C)1 ? FROMC((C)1) : r); } \
  static inline T __hadd_sat(T a, T b) { return __simt_sat(__hadd(a, b)); } \
  static inline T __hsub_sat(T a, T b) { return __simt_sat(__hsub(a, b)); } \
  static inline T __hmul_sat(T a, T b) { return __simt_sat(__hmul(a, b)); } \
  static inline T __hfma(T a, T b, T c) { return FMA(a, b, c); } \
  static inline T __hfma_sat(T a, T b, T c) { return __simt_sat(FMA(a, b, c)); } \
  static inline T __hfma_relu(T a, T b, T c) { \
    T r = FMA(a, b, c); if (__simt_isnan(r)) return MKBITS(0x7FFF); \
    return (__simt_bits16(r) & 0x8000) ? MKBITS(0) : r; } \
  static inline T __hneg(T a) { return MKBITS(__simt_bits16(a) ^ 0x8000); } \
  static inline T __habs(T a) { return MKBITS(__simt_bits16(a) & 0x7FFF); } \
  static inline bool __heq(T a, T b) { return TOC(a) == TOC(b); } \
  static inline bool __hne(T a, T b) { return TOC(a) < TOC(b) || TOC(a) > TOC(b); } \
  static inline bool __hlt(T a, T b) { return TOC(a) < TOC(b); } \
  static inline bool __hle(T a, T b) { return TOC(a) <= TOC(b); } \
  static inline bool __hgt(T a, T b) { return TOC(a) > TOC(b); } \
  static inline bool __hge(T a, T b) { return TOC(a) >= TOC(b); } \
  static inline bool __hequ(T a, T b) { return !(TOC(a) < TOC(b)) && !(TOC(a) > TOC(b)); } \
  static inline bool __hneu(T a, T b) { return !(TOC(a) == TOC(b)); } \
  static inline bool __hltu(T a, T b) { return !(TOC(a) >= TOC(b)); } \
  static inline bool __hleu(T a, T b) { return !(TOC(a) > TOC(b)); } \
  static inline bool __hgtu(T a, T b) { return !(TOC(a) <= TOC(b)); } \
  static inline bool __hgeu(T a, T b) { return !(TOC(a) < TOC(b)); } \
  static inline bool __hisnan(T a) { return __simt_isnan(a); } \
  static inline int __hisinf(T a) { return __simt_isinf(a); } \
  /* max/min: one NaN input -> the other; both -> canonical NaN; +0 > -0 */ \
  static inline T __simt_minmax(T a, T b, bool want_max) { \
    bool an = __simt_isnan(a), bn = __simt_isnan(b); \
    if (an && bn) return MKBITS(0x7FFF); \
    if (an) return b; \
    if (bn) return a; \
    if (TOC(a) == TOC(b)) { bool an_ = __simt_bits16(a) >> 15; return want_max ? (an_ ? b : a) : (an_ ? a : b); } \
    return want_max ? (TOC(a) > TOC(b) ? a : b) : (TOC(a) < TOC(b) ? a : b); } \
  static inline T __hmax(T a, T b) { return __simt_minmax(a, b, true); } \
  static inline T __hmin(T a, T b) { return __simt_minmax(a, b, false); } \
  static inline T __hmax_nan(T a, T b) { return (__simt_isnan(a) || __simt_isnan(b)) ? MKBITS(0x7FFF) : __hmax(a, b); } \
  static inline T __hmin_nan(T a, T b) { return (__simt_isnan(a) || __simt_isnan(b)) ? MKBITS(0x7FFF) : __hmin(a, b); } \
  static inline T hsqrt(T a) { return FROMC(sqrt(TOC(a))); } \
  static inline T hrsqrt(T a) { return FROMC((C)(1.0 / sqrt((double)TOC(a)))); } \
  static inline T hrcp(T a) { return FROMC((C)(1.0 / (double)TOC(a))); } \
  static inline T hexp(T a) { return FROMC((C)exp((double)TOC(a))); } \
  static inline T hexp2(T a) { return FROMC((C)exp2((double)TOC(a))); } \
  static inline T hexp10(T a) { return FROMC((C)exp10((double)TOC(a))); } \
  static inline T hlog(T a) { return FROMC((C)log((double)TOC(a))); } \
  static inline T hlog2(T a) { return FROMC((C)log2((double)TOC(a))); } \
  static inline T hlog10(T a) { return FROMC((C)log10((double)TOC(a))); } \
  static inline T hsin(T a) { return FROMC((C)sin((double)TOC(a))); } \
  static inline T hcos(T a) { return FROMC((C)cos((double)TOC(a))); } \
  static inline T htanh(T a) { return FROMC((C)tanh((double)TOC(a))); } \
  static inline T htanh_approx(T a) { return htanh(a); } \
  static inline T hceil(T a) { return FROMC(__builtin_ceil((double)TOC(a))); } \
  static inline T hfloor(T a) { return FROMC(__builtin_floor((double)TOC(a))); } \
  static inline T hrint(T a) { return FROMC(__builtin_nearbyint((double)TOC(a))); } \
  static inline T htrunc(T a) { return FROMC(__builtin_trunc((double)TOC(a))); } \
  /* pairs */ \
  static inline T2 __hadd2(T2 a, T2 b) { return T2(__hadd(a.x, b.x), __hadd(a.y, b.y)); } \
  static inline T2 __hsub2(T2 a, T2 b) { return T2(__hsub(a.x, b.x), __hsub(a.y, b.y)); } \
  static inline T2 __hmul2(T2 a, T2 b) { return T2(__hmul(a.x, b.x), __hmul(a.y, b.y)); } \
  static inline T2 __h2div(T2 a, T2 b) { return T2(__hdiv(a.x, b.x), __hdiv(a.y, b.y)); } \
  static inline T2 __hadd2_rn(T2 a, T2 b) { return __hadd2(a, b); } \
  static inline T2 __hsub2_rn(T2 a, T2 b) { return __hsub2(a, b); } \
  static inline T2 __hmul2_rn(T2 a, T2 b) { return __hmul2(a, b); } \
  static inline T2 __hadd2_sat(T2 a, T2 b) { return T2(__hadd_sat(a.x, b.x), __hadd_sat(a.y, b.y)); } \
  static inline T2 __hsub2_sat(T2 a, T2 b) { return T2(__hsub_sat(a.x, b.x), __hsub_sat(a.y, b.y)); } \
  static inline T2 __hmul2_sat(T2 a, T2 b) { return T2(__hmul_sat(a.x, b.x), __hmul_sat(a.y, b.y)); } \
  static inline T2 __hfma2(T2 a, T2 b, T2 c) { return T2(__hfma(a.x, b.x, c.x), __hfma(a.y, b.y, c.y)); } \
  static inline T2 __hfma2_sat(T2 a, T2 b, T2 c) { return T2(__hfma_sat(a.x, b.x, c.x), __hfma_sat(a.y, b.y, c.y)); } \
  static inline T2 __hfma2_relu(T2 a, T2 b, T2 c) { return T2(__hfma_relu(a.x, b.x, c.x), __hfma_relu(a.y, b.y, c.y)); } \
  static inline T2 __hneg2(T2 a) { return T2(__hneg(a.x), __hneg(a.y)); } \
  static inline T2 __habs2(T2 a) { return T2(__habs(a.x), __habs(a.y)); } \
  static inline T2 __hcmadd(T2 a, T2 b, T2 c) { \
    T re = __hfma(a.x, b.x, c.x), im = __hfma(a.x, b.y, c.y); \
    return T2(__hfma(__hneg(a.y), b.y, re), __hfma(a.y, b.x, im)); } \
  static inline T2 __hmax2(T2 a, T2 b) { return T2(__hmax(a.x, b.x), __hmax(a.y, b.y)); } \
  static inline T2 __hmin2(T2 a, T2 b) { return T2(__hmin(a.x, b.x), __hmin(a.y, b.y)); } \
  static inline T2 __hmax2_nan(T2 a, T2 b) { return T2(__hmax_nan(a.x, b.x), __hmax_nan(a.y, b.y)); } \
  static inline T2 __hmin2_nan(T2 a, T2 b) { return T2(__hmin_nan(a.x, b.x), __hmin_nan(a.y, b.y)); } \
  static inline T2 __hisnan2(T2 a) { return T2(FROMC((C)__simt_isnan(a.x)), FROMC((C)__simt_isnan(a.y))); } \
  SIMT_HALF_CMP2(T, T2, C, FROMC, eq) SIMT_HALF_CMP2(T, T2, C, FROMC, ne) SIMT_HALF_CMP2(T, T2, C, FROMC, lt) \
  SIMT_HALF_CMP2(T, T2, C, FROMC, le) SIMT_HALF_CMP2(T, T2, C, FROMC, gt) SIMT_HALF_CMP2(T, T2, C, FROMC, ge) \
  SIMT_HALF_CMP2(T, T2, C, FROMC, equ) SIMT_HALF_CMP2(T, T2, C, FROMC, neu) SIMT_HALF_CMP2(T, T2, C, FROMC, ltu) \
  SIMT_HALF_CMP2(T, T2, C, FROMC, leu) SIMT_HALF_CMP2(T, T2, C, FROMC, gtu) SIMT_HALF_CMP2(T, T2, C, FROMC, geu) \
  SIMT_HALF_MATH2(T2, sqrt) SIMT_HALF_MATH2(T2, rsqrt) SIMT_HALF_MATH2(T2, rcp) SIMT_HALF_MATH2(T2, exp) \
  SIMT_HALF_MATH2(T2, exp2) SIMT_HALF_MATH2(T2, exp10) SIMT_HALF_MATH2(T2, log) SIMT_HALF_MATH2(T2, log2) \
  SIMT_HALF_MATH2(T2, log10) SIMT_HALF_MATH2(T2, sin) SIMT_HALF_MATH2(T2, cos) SIMT_HALF_MATH2(T2, tanh) \
  SIMT_HALF_MATH2(T2, tanh_approx) SIMT_HALF_MATH2(T2, ceil) SIMT_HALF_MATH2(T2, floor) SIMT_HALF_MATH2(T2, rint) \
  SIMT_HALF_MATH2(T2, trunc) \
  /* operators */ \
  static inline T operator+(const T &a, const T &b) { return __hadd(a, b); } \
  static inline T operator-(const T &a, const T &b) { return __hsub(a, b); } \
  static inline T operator*(const T &a, const T &b) { return __hmul(a, b); } \
  static inline T operator/(const T &a, const T &b) { return __hdiv(a, b); } \
  static inline T operator-(const T &a) { return __hneg(a); } \
  static inline T operator+(const T &a) { return a; } \
  static inline T &operator+=(T &a, const T &b) { a = __hadd(a, b); return a; } \
  static inline T &operator-=(T &a, const T &b) { a = __hsub(a, b); return a; } \
  static inline T &operator*=(T &a, const T &b) { a = __hmul(a, b); return a; } \
  static inline T &operator/=(T &a, const T &b) { a = __hdiv(a, b); return a; } \
  static inline T &operator++(T &a) { a = __hadd(a, FROMC((C)1)); return a; } \
  static inline T &operator--(T &a) { a = __hsub(a, FROMC((C)1)); return a; } \
  static inline T operator++(T &a, int) { T r = a; a = __hadd(a, FROMC((C)1)); return r; } \
  static inline T operator--(T &a, int) { T r = a; a = __hsub(a, FROMC((C)1)); return r; } \
  static inline bool operator==(const T &a, const T &b) { return __heq(a, b); } \
  static inline bool operator!=(const T &a, const T &b) { return __hneu(a, b); } \
  static inline bool operator<(const T &a, const T &b) { return __hlt(a, b); } \
  static inline bool operator<=(const T &a, const T &b) { return __hle(a, b); } \
  static inline bool operator>(const T &a, const T &b) { return __hgt(a, b); } \
  static inline bool operator>=(const T &a, const T &b) { return __hge(a, b); } \
  static inline T2 operator+(const T2 &a, const T2 &b) { return __hadd2(a, b); } \
  static inline T2 operator-(const T2 &a, const T2 &b) { return __hsub2(a, b); } \
  static inline T2 operator*(const T2 &a, const T2 &b) { return __hmul2(a, b); } \
  static inline T2 operator/(const T2 &a, const T2 &b) { return __h2div(a, b); } \
  static inline T2 operator-(const T2 &a) { return __hneg2(a); } \
  static inline T2 operator+(const T2 &a) { return a; } \
  static inline T2 &operator+=(T2 &a, const T2 &b) { a = __hadd2(a, b); return a; } \
  static inline T2 &operator-=(T2 &a, const T2 &b) { a = __hsub2(a, b); return a; } \
  static inline T2 &operator*=(T2 &a, const T2 &b) { a = __hmul2(a, b); return a; } \
  static inline T2 &operator/=(T2 &a, const T2 &b) { a = __h2div(a, b); return a; } \
  static inline bool operator==(const T2 &a, const T2 &b) { return __hbeq2(a, b); } \
  static inline bool operator!=(const T2 &a, const T2 &b) { return __hbneu2(a, b); } \
  static inline bool operator<(const T2 &a, const T2 &b) { return __hblt2(a, b); } \
  static inline bool operator<=(const T2 &a, const T2 &b) { return __hble2(a, b); } \
  static inline bool operator>(const T2 &a, const T2 &b) { return __hbgt2(a, b); } \
  static inline bool operator>=(const T2 &a, const T2 &b) { return __hbge2(a, b); }
#define SIMT_HALF_CMP2(T, T2, C, FROMC, OP) \
  static inline T2 __h##OP##2(T2 a, T2 b) { return T2(FROMC((C)__h##OP(a.x, b.x)), FROMC((C)__h##OP(a.y, b.y))); } \
  static inline bool __hb##OP##2(T2 a, T2 b) { return __h##OP(a.x, b.x) && __h##OP(a.y, b.y); } \
  static inline unsigned __h##OP##2_mask(T2 a, T2 b) { return (__h##OP(a.x, b.x) ? 0xFFFFu : 0u) | (__h##OP(a.y, b.y) ? 0xFFFF0000u : 0u); }
#define SIMT_HALF_MATH2(T2, F) static inline T2 h2##F(T2 a) { return T2(h##F(a.x), h##F(a.y)); }

SIMT_HALF_OPS(__half, __half2, float, __simt_hc, __simt_hr, __simt_hfma_impl, __simt_h_from_bits)
SIMT_HALF_OPS(__nv_bfloat16, __nv_bfloat162, double, __simt_bc, __simt_br, __simt_bfma_impl, __simt_b_from_bits)

// ---------------------------------------------------------------- atomics (the runtime adds in double, rounds once)
SIMT_RT unsigned __simt_atomic16(int kind, void *p, unsigned v);  // kind: 0 half, 1 bfloat16, 2 half2, 3 bfloat162
static inline __half atomicAdd(__half *p, __half v) { return __simt_h_from_bits((unsigned short)__simt_atomic16(0, p, __simt_hbits(v))); }
static inline __nv_bfloat16 atomicAdd(__nv_bfloat16 *p, __nv_bfloat16 v) { return __simt_b_from_bits((unsigned short)__simt_atomic16(1, p, v.__x)); }
static inline __half2 atomicAdd(__half2 *p, __half2 v) {
  unsigned r = __simt_atomic16(2, p, (unsigned)__simt_hbits(v.x) | (unsigned)__simt_hbits(v.y) << 16);
  return __half2(__simt_h_from_bits((unsigned short)r), __simt_h_from_bits((unsigned short)(r >> 16)));
}
static inline __nv_bfloat162 atomicAdd(__nv_bfloat162 *p, __nv_bfloat162 v) {
  unsigned r = __simt_atomic16(3, p, (unsigned)v.x.__x | (unsigned)v.y.__x << 16);
  return __nv_bfloat162(__simt_b_from_bits((unsigned short)r), __simt_b_from_bits((unsigned short)(r >> 16)));
}
#define SIMT_ATOM16_SCOPES(T) \
  static inline T atomicAdd_block(T *p, T v) { return atomicAdd(p, v); } \
  static inline T atomicAdd_system(T *p, T v) { return atomicAdd(p, v); }
SIMT_ATOM16_SCOPES(__half) SIMT_ATOM16_SCOPES(__nv_bfloat16) SIMT_ATOM16_SCOPES(__half2) SIMT_ATOM16_SCOPES(__nv_bfloat162)

// CUDART_* constants of the headers
#define CUDART_INF_FP16 __ushort_as_half((unsigned short)0x7C00U)
#define CUDART_NAN_FP16 __ushort_as_half((unsigned short)0x7FFFU)
#define CUDART_MIN_DENORM_FP16 __ushort_as_half((unsigned short)0x0001U)
#define CUDART_MAX_NORMAL_FP16 __ushort_as_half((unsigned short)0x7BFFU)
#define CUDART_ONE_FP16 __ushort_as_half((unsigned short)0x3C00U)
#define CUDART_ZERO_FP16 __ushort_as_half((unsigned short)0x0000U)
#define CUDART_INF_BF16 __ushort_as_bfloat16((unsigned short)0x7F80U)
#define CUDART_NAN_BF16 __ushort_as_bfloat16((unsigned short)0x7FFFU)
#define CUDART_MIN_DENORM_BF16 __ushort_as_bfloat16((unsigned short)0x0001U)
#define CUDART_MAX_NORMAL_BF16 __ushort_as_bfloat16((unsigned short)0x7F7FU)
#define CUDART_ONE_BF16 __ushort_as_bfloat16((unsigned short)0x3F80U)
#define CUDART_ZERO_BF16 __ushort_as_bfloat16((unsigned short)0x0000U)

#endif  // CUPYOPS_SIMT_FP16_H
