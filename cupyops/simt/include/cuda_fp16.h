// cupyops.simt stand-in for <cuda_fp16.h>: __half over g++'s _Float16.
#ifndef CUPYOPS_SIMT_CUDA_FP16_H
#define CUPYOPS_SIMT_CUDA_FP16_H
#include "simt_cuda.h"

struct __half_raw { unsigned short x; };

struct __half {
  _Float16 __x;
  __half() = default;
  __half(const __half_raw &r) { __builtin_memcpy(&__x, &r.x, 2); }
  __half(float f) : __x((_Float16)f) {}
  __half(double f) : __x((_Float16)f) {}
  __half(int v) : __x((_Float16)v) {}
  __half(unsigned int v) : __x((_Float16)v) {}
  __half(short v) : __x((_Float16)v) {}
  __half(unsigned short v) : __x((_Float16)v) {}
  __half(long long v) : __x((_Float16)v) {}
  __half(unsigned long long v) : __x((_Float16)v) {}
  operator float() const { return (float)__x; }
  operator __half_raw() const { __half_raw r; __builtin_memcpy(&r.x, &__x, 2); return r; }
  __half &operator=(float f) { __x = (_Float16)f; return *this; }
  __half &operator=(double f) { __x = (_Float16)f; return *this; }
  __half &operator=(const __half_raw &r) { __builtin_memcpy(&__x, &r.x, 2); return *this; }
};
typedef __half half;

struct __half2 { __half x, y; };
typedef __half2 half2;

static inline __half __simt_mkhalf(_Float16 v) { __half h; h.__x = v; return h; }
static inline __half __float2half(float f) { return __simt_mkhalf((_Float16)f); }
static inline __half __float2half_rn(float f) { return __simt_mkhalf((_Float16)f); }
static inline __half __double2half(double f) { return __simt_mkhalf((_Float16)f); }
static inline float __half2float(__half h) { return (float)h.__x; }
static inline __half __int2half_rn(int v) { return __simt_mkhalf((_Float16)v); }
static inline int __half2int_rz(__half h) { return __float2int_rz((float)h.__x); }
static inline int __half2int_rn(__half h) { return __float2int_rn((float)h.__x); }
static inline int __half2int_rd(__half h) { return __float2int_rd((float)h.__x); }
static inline int __half2int_ru(__half h) { return __float2int_ru((float)h.__x); }
// float -> half under a directed rounding mode: round to nearest, then step one half-ulp toward
// the requested direction when the nearest value lies on the wrong side.
static inline unsigned short __simt_half_bits(_Float16 v) { unsigned short u; __builtin_memcpy(&u, &v, 2); return u; }
static inline _Float16 __simt_half_from(unsigned short u) { _Float16 v; __builtin_memcpy(&v, &u, 2); return v; }
static inline _Float16 __simt_half_step(_Float16 h, bool up) {  // next half toward +inf (up) or -inf
  unsigned short u = __simt_half_bits(h);
  if ((u & 0x7FFF) == 0) return __simt_half_from(up ? 0x0001 : 0x8001);
  bool neg = u >> 15;
  return __simt_half_from((unsigned short)(up != neg ? u + 1 : u - 1));
}
static inline __half __simt_f2h_dir(float f, int mode) {  // 1 = toward zero, 2 = up, 3 = down
  _Float16 h = (_Float16)f;
  if (f != f) return __simt_mkhalf(h);
  float back = (float)h;
  if (back == f) return __simt_mkhalf(h);
  bool up = mode == 2 || (mode == 1 && f < 0.0f);
  if (up && back < f) h = __simt_half_step(h, true);
  else if (!up && back > f) h = __simt_half_step(h, false);
  return __simt_mkhalf(h);
}
static inline __half __float2half_rz(float f) { return __simt_f2h_dir(f, 1); }
static inline __half __float2half_ru(float f) { return __simt_f2h_dir(f, 2); }
static inline __half __float2half_rd(float f) { return __simt_f2h_dir(f, 3); }
static inline unsigned short __half_as_ushort(__half h) { unsigned short u; __builtin_memcpy(&u, &h.__x, 2); return u; }
static inline short __half_as_short(__half h) { short u; __builtin_memcpy(&u, &h.__x, 2); return u; }
static inline __half __ushort_as_half(unsigned short u) { __half h; __builtin_memcpy(&h.__x, &u, 2); return h; }
static inline __half __short_as_half(short u) { __half h; __builtin_memcpy(&h.__x, &u, 2); return h; }
static inline __half2 __halves2half2(__half a, __half b) { __half2 r; r.x = a; r.y = b; return r; }
static inline __half2 __float2half2_rn(float f) { return __halves2half2(__float2half(f), __float2half(f)); }
static inline __half __low2half(__half2 v) { return v.x; }
static inline __half __high2half(__half2 v) { return v.y; }

static inline bool __heq(__half a, __half b) { return a.__x == b.__x; }
static inline bool __hne(__half a, __half b) { return a.__x < b.__x || a.__x > b.__x; }  // ordered: false if NaN
static inline bool __hlt(__half a, __half b) { return a.__x < b.__x; }
static inline bool __hle(__half a, __half b) { return a.__x <= b.__x; }
static inline bool __hgt(__half a, __half b) { return a.__x > b.__x; }
static inline bool __hge(__half a, __half b) { return a.__x >= b.__x; }
static inline bool __hequ(__half a, __half b) { return !(a.__x < b.__x) && !(a.__x > b.__x); }
static inline bool __hneu(__half a, __half b) { return !(a.__x == b.__x); }
static inline bool __hltu(__half a, __half b) { return !(a.__x >= b.__x); }
static inline bool __hleu(__half a, __half b) { return !(a.__x > b.__x); }
static inline bool __hgtu(__half a, __half b) { return !(a.__x <= b.__x); }
static inline bool __hgeu(__half a, __half b) { return !(a.__x < b.__x); }
static inline bool __hisnan(__half a) { return a.__x != a.__x; }
static inline int __hisinf(__half a) {
  return a.__x == (_Float16)__builtin_inff() ? 1 : (a.__x == -(_Float16)__builtin_inff() ? -1 : 0);
}
// CUDA: if one input is NaN the other is returned; both NaN -> canonical NaN; +0 > -0.
static inline __half __simt_hminmax(__half a, __half b, bool want_max) {
  bool an = __hisnan(a), bn = __hisnan(b);
  if (an && bn) return __ushort_as_half(0x7FFF);
  if (an) return b;
  if (bn) return a;
  if (a.__x == b.__x) {  // +0 vs -0
    bool a_neg = (__half_as_ushort(a) & 0x8000) != 0;
    if (want_max) return a_neg ? b : a;
    return a_neg ? a : b;
  }
  return want_max ? (a.__x > b.__x ? a : b) : (a.__x < b.__x ? a : b);
}
static inline __half __hmax(__half a, __half b) { return __simt_hminmax(a, b, true); }
static inline __half __hmin(__half a, __half b) { return __simt_hminmax(a, b, false); }
static inline __half __hmax_nan(__half a, __half b) {
  if (__hisnan(a) || __hisnan(b)) return __ushort_as_half(0x7FFF);
  return __hmax(a, b);
}
static inline __half __hmin_nan(__half a, __half b) {
  if (__hisnan(a) || __hisnan(b)) return __ushort_as_half(0x7FFF);
  return __hmin(a, b);
}
static inline __half __hadd(__half a, __half b) { return __simt_mkhalf(a.__x + b.__x); }
static inline __half __hsub(__half a, __half b) { return __simt_mkhalf(a.__x - b.__x); }
static inline __half __hmul(__half a, __half b) { return __simt_mkhalf(a.__x * b.__x); }
static inline __half __hdiv(__half a, __half b) { return __simt_mkhalf(a.__x / b.__x); }
static inline __half __hneg(__half a) { return __simt_mkhalf(-a.__x); }
static inline __half __habs(__half a) { return __ushort_as_half(__half_as_ushort(a) & 0x7FFF); }
SIMT_RT unsigned short __simt_hfma(unsigned short a, unsigned short b, unsigned short c);
// rounded once (the runtime rounds a*b+c to odd in double, then to half)
static inline __half __hfma(__half a, __half b, __half c) {
  return __ushort_as_half(__simt_hfma(__half_as_ushort(a), __half_as_ushort(b), __half_as_ushort(c)));
}

static inline __half operator+(const __half &a, const __half &b) { return __hadd(a, b); }
static inline __half operator-(const __half &a, const __half &b) { return __hsub(a, b); }
static inline __half operator*(const __half &a, const __half &b) { return __hmul(a, b); }
static inline __half operator/(const __half &a, const __half &b) { return __hdiv(a, b); }
static inline __half operator-(const __half &a) { return __hneg(a); }
static inline __half operator+(const __half &a) { return a; }
static inline __half &operator+=(__half &a, const __half &b) { a = __hadd(a, b); return a; }
static inline __half &operator-=(__half &a, const __half &b) { a = __hsub(a, b); return a; }
static inline __half &operator*=(__half &a, const __half &b) { a = __hmul(a, b); return a; }
static inline __half &operator/=(__half &a, const __half &b) { a = __hdiv(a, b); return a; }
static inline bool operator==(const __half &a, const __half &b) { return __heq(a, b); }
static inline bool operator!=(const __half &a, const __half &b) { return __hneu(a, b); }
static inline bool operator<(const __half &a, const __half &b) { return __hlt(a, b); }
static inline bool operator<=(const __half &a, const __half &b) { return __hle(a, b); }
static inline bool operator>(const __half &a, const __half &b) { return __hgt(a, b); }
static inline bool operator>=(const __half &a, const __half &b) { return __hge(a, b); }

#endif
