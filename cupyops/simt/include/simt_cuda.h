// cupyops.simt: CUDA device built-ins emulated on the CPU.
//
// This header is force-included (g++ -include) in front of every kernel
// translation unit compiled by cupyops.simt.  The kernel TU is compiled with
// -fsanitize=kernel-address so every memory access calls into the runtime
// (simt_runtime.cpp, compiled without instrumentation), which checks bounds,
// counts traffic and may switch fibers.  Built-ins such as threadIdx are calls
// into the runtime, so no runtime state is ever read by instrumented code.
#ifndef CUPYOPS_SIMT_CUDA_H
#define CUPYOPS_SIMT_CUDA_H

// System headers first: the CUDA keyword macros below (e.g. __noinline__)
// would break libstdc++'s own attribute spellings.
#include <math.h>
#include <stdint.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <type_traits>
#include <utility>

#define __CUDACC__ 1
#define __CUDA_ARCH__ 900
#define __CUDACC_RTC__ 1
#define CUPYOPS_SIMT 1

#define __global__ __attribute__((noinline, used))
#define __device__
#define __host__
#define __managed__
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __restrict__ __restrict
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __builtin_align__(n) __attribute__((aligned(n)))
// __constant__ data lives in a read-only section: a store to it is refused (ReadOnlyWriteError),
// as NVRTC refuses it.  (The '#' ends GCC's own section flags: the section is "a", not "aw".)
#define __constant__ __attribute__((section(".simt_constant,\"a\",@progbits#")))
// Static shared memory: thread_local storage of the kernel module.  The
// runtime knows the module's TLS block bounds, checks accesses against them
// and swaps the contents when the running block changes.
#define __shared__ static thread_local
#define __grid_constant__

#define SIMT_RT extern "C"

struct __simt_uint3 { unsigned int x, y, z; };

SIMT_RT __simt_uint3 __simt_thread_idx(void) __attribute__((const));
SIMT_RT __simt_uint3 __simt_block_idx(void) __attribute__((const));
SIMT_RT __simt_uint3 __simt_block_dim(void) __attribute__((const));
SIMT_RT __simt_uint3 __simt_grid_dim(void) __attribute__((const));
SIMT_RT void *__simt_dyn_shared(void) __attribute__((const));
SIMT_RT int __simt_barrier(int kind, int pred, int site, int line);
SIMT_RT unsigned long long __simt_warp_op(int kind, unsigned mask, unsigned long long val,
                                          int arg, int width, int line);
SIMT_RT unsigned long long __simt_atomic(int op, int type, void *addr, unsigned long long val,
                                         unsigned long long cmp);
SIMT_RT void __simt_spin_point(int kind);
SIMT_RT long long __simt_clock(void);
SIMT_RT void __simt_trap(const char *what, const char *file, int line) __attribute__((noreturn));
SIMT_RT void __simt_ldg(const void *p, size_t n);
SIMT_RT void __simt_vector_access(const void *p, size_t n);
SIMT_RT void __simt_check_launch_bounds(long long max_threads);
// __launch_bounds__(N, ...) on a kernel definition becomes this at the top of its body
// (cupyops.simt._build.preprocess): a launch with more than N threads per block is refused.  The
// bounds are also kept in a static of the kernel, __simt_lb (its symbol is the kernel's mangled
// name + "E9__simt_lb"), where cupyops.simt reads them for the function's attributes
// (max_threads_per_block), as CUDA reports them without a launch.
struct __simt_launch_bound { long long max_threads, min_blocks, max_blocks_per_cluster; };
#define __simt_launch_bounds(...)                                                      \
  {                                                                                    \
    __attribute__((used)) static const __simt_launch_bound __simt_lb = {__VA_ARGS__};  \
    __simt_check_launch_bounds(__simt_lb.max_threads);                                 \
  }

#define threadIdx (__simt_thread_idx())
#define blockIdx (__simt_block_idx())
#define blockDim (__simt_block_dim())
#define gridDim (__simt_grid_dim())
#define warpSize 32

// ---------------------------------------------------------------- vector types
#define SIMT_VEC2(T, N, A) struct __attribute__((aligned(A))) N { T x, y; }; \
  static inline N make_##N(T x, T y) { N r; r.x = x; r.y = y; return r; }
#define SIMT_VEC3(T, N) struct N { T x, y, z; }; \
  static inline N make_##N(T x, T y, T z) { N r; r.x = x; r.y = y; r.z = z; return r; }
#define SIMT_VEC4(T, N, A) struct __attribute__((aligned(A))) N { T x, y, z, w; }; \
  static inline N make_##N(T x, T y, T z, T w) { N r; r.x = x; r.y = y; r.z = z; r.w = w; return r; }
#define SIMT_VEC1(T, N, A) struct __attribute__((aligned(A))) N { T x; }; \
  static inline N make_##N(T x) { N r; r.x = x; return r; }

SIMT_VEC1(char, char1, 1) SIMT_VEC2(char, char2, 2) SIMT_VEC3(char, char3) SIMT_VEC4(char, char4, 4)
SIMT_VEC1(unsigned char, uchar1, 1) SIMT_VEC2(unsigned char, uchar2, 2) SIMT_VEC3(unsigned char, uchar3)
SIMT_VEC4(unsigned char, uchar4, 4)
SIMT_VEC1(short, short1, 2) SIMT_VEC2(short, short2, 4) SIMT_VEC3(short, short3) SIMT_VEC4(short, short4, 8)
SIMT_VEC1(unsigned short, ushort1, 2) SIMT_VEC2(unsigned short, ushort2, 4) SIMT_VEC3(unsigned short, ushort3)
SIMT_VEC4(unsigned short, ushort4, 8)
SIMT_VEC1(int, int1, 4) SIMT_VEC2(int, int2, 8) SIMT_VEC3(int, int3) SIMT_VEC4(int, int4, 16)
SIMT_VEC1(unsigned int, uint1, 4) SIMT_VEC2(unsigned int, uint2, 8) SIMT_VEC4(unsigned int, uint4, 16)
SIMT_VEC1(long long, longlong1, 8) SIMT_VEC2(long long, longlong2, 16) SIMT_VEC3(long long, longlong3)
SIMT_VEC4(long long, longlong4, 16)
SIMT_VEC1(unsigned long long, ulonglong1, 8) SIMT_VEC2(unsigned long long, ulonglong2, 16)
SIMT_VEC3(unsigned long long, ulonglong3) SIMT_VEC4(unsigned long long, ulonglong4, 16)
SIMT_VEC1(float, float1, 4) SIMT_VEC2(float, float2, 8) SIMT_VEC3(float, float3) SIMT_VEC4(float, float4, 16)
SIMT_VEC1(double, double1, 8) SIMT_VEC2(double, double2, 16) SIMT_VEC3(double, double3)
SIMT_VEC4(double, double4, 16)
SIMT_VEC1(long, long1, 8) SIMT_VEC2(long, long2, 16) SIMT_VEC3(long, long3) SIMT_VEC4(long, long4, 16)
SIMT_VEC1(unsigned long, ulong1, 8) SIMT_VEC2(unsigned long, ulong2, 16) SIMT_VEC3(unsigned long, ulong3)
SIMT_VEC4(unsigned long, ulong4, 16)
// CUDA 13: 4-vectors of 8-byte elements with explicit 16- or 32-byte alignment
SIMT_VEC4(long, long4_16a, 16) SIMT_VEC4(long, long4_32a, 32)
SIMT_VEC4(unsigned long, ulong4_16a, 16) SIMT_VEC4(unsigned long, ulong4_32a, 32)
SIMT_VEC4(long long, longlong4_16a, 16) SIMT_VEC4(long long, longlong4_32a, 32)
SIMT_VEC4(unsigned long long, ulonglong4_16a, 16) SIMT_VEC4(unsigned long long, ulonglong4_32a, 32)
SIMT_VEC4(double, double4_16a, 16) SIMT_VEC4(double, double4_32a, 32)

struct uint3 {
  unsigned int x, y, z;
  uint3() = default;
  constexpr uint3(unsigned int x_, unsigned int y_, unsigned int z_) : x(x_), y(y_), z(z_) {}
  uint3(__simt_uint3 v) : x(v.x), y(v.y), z(v.z) {}
};
static inline uint3 make_uint3(unsigned int x, unsigned int y, unsigned int z) { return uint3(x, y, z); }
struct dim3 {
  unsigned int x, y, z;
  constexpr dim3(unsigned int x_ = 1, unsigned int y_ = 1, unsigned int z_ = 1) : x(x_), y(y_), z(z_) {}
  dim3(__simt_uint3 v) : x(v.x), y(v.y), z(v.z) {}
  dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
  operator uint3() const { return uint3(x, y, z); }
};

// ---------------------------------------------------------------- bit casts, integer intrinsics
template <class To, class From>
static inline To __simt_bitcast(const From &f) {
  static_assert(sizeof(To) == sizeof(From), "bit cast size mismatch");
  To t;
  __builtin_memcpy(&t, &f, sizeof(To));
  return t;
}
// The canonical NaN: every float32 instruction of a GPU (arithmetic, conversion, math) returns
// 0x7fffffff for a NaN result, with no payload or sign; x86 returns 0xffc00000 for an invalid
// operation and keeps an input NaN's payload.  The intrinsics, conversions and f-suffixed math
// functions (macros at the end of this header) return it; plain + - * / keep x86's bits.
static inline float __simt_cnanf(float x) {
  unsigned u = __simt_bitcast<unsigned>(x);
  return (u & 0x7FFFFFFFu) > 0x7F800000u ? __simt_bitcast<float>(0x7FFFFFFFu) : x;
}
namespace std { using ::__simt_cnanf; }
static inline int __float_as_int(float x) { return __simt_bitcast<int>(x); }
static inline unsigned int __float_as_uint(float x) { return __simt_bitcast<unsigned int>(x); }
static inline float __int_as_float(int x) { return __simt_bitcast<float>(x); }
static inline float __uint_as_float(unsigned int x) { return __simt_bitcast<float>(x); }
static inline long long __double_as_longlong(double x) { return __simt_bitcast<long long>(x); }
static inline double __longlong_as_double(long long x) { return __simt_bitcast<double>(x); }
static inline int __double2hiint(double x) { return (int)(__simt_bitcast<unsigned long long>(x) >> 32); }
static inline int __double2loint(double x) { return (int)__simt_bitcast<unsigned long long>(x); }
static inline double __hiloint2double(int hi, int lo) {
  return __simt_bitcast<double>(((unsigned long long)(unsigned)hi << 32) | (unsigned)lo);
}

static inline int __popc(unsigned int x) { return __builtin_popcount(x); }
static inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
static inline int __ffs(int x) { return __builtin_ffs(x); }
static inline int __ffsll(long long x) { return __builtin_ffsll(x); }
static inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned)x); }
static inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll((unsigned long long)x); }
static inline unsigned int __brev(unsigned int x) {
  x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1);
  x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
  x = ((x >> 4) & 0x0F0F0F0Fu) | ((x & 0x0F0F0F0Fu) << 4);
  return __builtin_bswap32(x);
}
static inline unsigned long long __brevll(unsigned long long x) {
  return ((unsigned long long)__brev((unsigned)x) << 32) | __brev((unsigned)(x >> 32));
}
static inline int __mulhi(int a, int b) { return (int)(((long long)a * b) >> 32); }
static inline unsigned int __umulhi(unsigned int a, unsigned int b) {
  return (unsigned)(((unsigned long long)a * b) >> 32);
}
static inline long long __mul64hi(long long a, long long b) { return (long long)(((__int128)a * b) >> 64); }
static inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
  return (unsigned long long)(((unsigned __int128)a * b) >> 64);
}
static inline int __mul24(int a, int b) { return (int)((long long)((a << 8) >> 8) * ((b << 8) >> 8)); }
static inline unsigned __umul24(unsigned a, unsigned b) { return (a & 0xFFFFFFu) * (b & 0xFFFFFFu); }
static inline int __sad(int a, int b, unsigned c) { return (int)((a > b ? (unsigned)(a - b) : (unsigned)(b - a)) + c); }
static inline unsigned int __byte_perm(unsigned int x, unsigned int y, unsigned int s) {
  unsigned long long v = ((unsigned long long)y << 32) | x;
  unsigned r = 0;
  for (int i = 0; i < 4; ++i) r |= (unsigned)((v >> (8 * ((s >> (4 * i)) & 7))) & 0xFF) << (8 * i);
  return r;
}
static inline unsigned int __funnelshift_l(unsigned lo, unsigned hi, unsigned s) {
  unsigned long long v = ((unsigned long long)hi << 32) | lo; return (unsigned)((v << (s & 31)) >> 32);
}
static inline unsigned int __funnelshift_r(unsigned lo, unsigned hi, unsigned s) {
  unsigned long long v = ((unsigned long long)hi << 32) | lo; return (unsigned)(v >> (s & 31));
}

// min/max as CUDA's overload set (same-type and mixed signed/unsigned -> unsigned)
#define SIMT_MINMAX(T) \
  static inline T min(T a, T b) { return a < b ? a : b; } \
  static inline T max(T a, T b) { return a > b ? a : b; }
SIMT_MINMAX(int) SIMT_MINMAX(unsigned int) SIMT_MINMAX(long) SIMT_MINMAX(unsigned long)
SIMT_MINMAX(long long) SIMT_MINMAX(unsigned long long)
static inline float min(float a, float b) { return __simt_cnanf(fminf(a, b)); }
static inline float max(float a, float b) { return __simt_cnanf(fmaxf(a, b)); }
static inline double min(double a, double b) { return fmin(a, b); }
static inline double max(double a, double b) { return fmax(a, b); }
static inline unsigned int min(int a, unsigned int b) { return min((unsigned)a, b); }
static inline unsigned int min(unsigned int a, int b) { return min(a, (unsigned)b); }
static inline unsigned int max(int a, unsigned int b) { return max((unsigned)a, b); }
static inline unsigned int max(unsigned int a, int b) { return max(a, (unsigned)b); }
static inline unsigned long long min(long long a, unsigned long long b) { return min((unsigned long long)a, b); }
static inline unsigned long long min(unsigned long long a, long long b) { return min(a, (unsigned long long)b); }
static inline unsigned long long max(long long a, unsigned long long b) { return max((unsigned long long)a, b); }
static inline unsigned long long max(unsigned long long a, long long b) { return max(a, (unsigned long long)b); }
static inline unsigned int umin(unsigned a, unsigned b) { return a < b ? a : b; }
static inline unsigned int umax(unsigned a, unsigned b) { return a > b ? a : b; }
static inline long long llmin(long long a, long long b) { return a < b ? a : b; }
static inline long long llmax(long long a, long long b) { return a > b ? a : b; }
static inline unsigned long long ullmin(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
static inline unsigned long long ullmax(unsigned long long a, unsigned long long b) { return a > b ? a : b; }

// float intrinsics (device math is in <math.h>: isnan, isinf, fmaxf, ...; glibc's accurate
// __expf, __logf, __log2f, __sinf, __cosf are within CUDA's bounds for the fast intrinsics)
// __fdividef(x, y) is x * rcp.approx(y): for 2^126 < |y| the reciprocal flushes to 0, so the result
// is 0 (NaN for an infinite x); elsewhere within 2 ulp (here: correctly rounded).  fdividef is
// the IEEE division unless -use_fast_math.
static inline float __fdividef(float a, float b) {
  float ab = __builtin_fabsf(b);
  return __simt_cnanf(ab > 0x1p126f && ab <= __builtin_inff() ? a * __builtin_copysignf(0.0f, b) : a / b);
}
static inline float fdividef(float a, float b) { return __simt_cnanf(a / b); }
static inline float rsqrtf(float x) { return __simt_cnanf(1.0f / sqrtf(x)); }
static inline double rsqrt(double x) { return 1.0 / sqrt(x); }
static inline float __saturatef(float x) { return x != x ? 0.0f : (x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x)); }
// __powf(x, y) is exp2(y * log2(x)) on a GPU: NaN for x < 0 (computed in double: within its ulp bound)
static inline float __simt_powf(float x, float y) { return __simt_cnanf((float)exp2((double)y * log2((double)x))); }
#define __powf(x, y) __simt_powf((x), (y))
// glibc does not export __expf & co.: the accurate functions stand in (within CUDA's bounds)
#define __expf(x) expf(x)
#define __exp10f(x) exp10f(x)
#define __logf(x) logf(x)
#define __log2f(x) log2f(x)
#define __log10f(x) log10f(x)
#define __sinf(x) sinf(x)
#define __cosf(x) cosf(x)
#define __tanf(x) tanf(x)
#define __sincosf(x, s, c) sincosf((x), (s), (c))
// Rounding-mode intrinsics: the runtime runs each under the rounding mode of its name; conversions
// to integers saturate (NaN -> 0) as cvt does.
#define SIMT_RDECL(sfx) \
  SIMT_RT float __simt_fadd_##sfx(float, float); SIMT_RT float __simt_fsub_##sfx(float, float); \
  SIMT_RT float __simt_fmul_##sfx(float, float); SIMT_RT float __simt_fdiv_##sfx(float, float); \
  SIMT_RT float __simt_frcp_##sfx(float); SIMT_RT float __simt_fsqrt_##sfx(float); \
  SIMT_RT float __simt_fmaf_##sfx(float, float, float); \
  SIMT_RT float __simt_fmaf_ieee_##sfx(float, float, float); \
  SIMT_RT double __simt_dadd_##sfx(double, double); SIMT_RT double __simt_dsub_##sfx(double, double); \
  SIMT_RT double __simt_dmul_##sfx(double, double); SIMT_RT double __simt_ddiv_##sfx(double, double); \
  SIMT_RT double __simt_drcp_##sfx(double); SIMT_RT double __simt_dsqrt_##sfx(double); \
  SIMT_RT double __simt_fma_##sfx(double, double, double); SIMT_RT float __simt_double2float_##sfx(double); \
  SIMT_RT int __simt_float2int_##sfx(float); SIMT_RT unsigned __simt_float2uint_##sfx(float); \
  SIMT_RT long long __simt_float2ll_##sfx(float); SIMT_RT unsigned long long __simt_float2ull_##sfx(float); \
  SIMT_RT int __simt_double2int_##sfx(double); SIMT_RT unsigned __simt_double2uint_##sfx(double); \
  SIMT_RT long long __simt_double2ll_##sfx(double); SIMT_RT unsigned long long __simt_double2ull_##sfx(double); \
  SIMT_RT float __simt_int2float_##sfx(int); SIMT_RT float __simt_uint2float_##sfx(unsigned); \
  SIMT_RT float __simt_ll2float_##sfx(long long); SIMT_RT float __simt_ull2float_##sfx(unsigned long long); \
  SIMT_RT double __simt_ll2double_##sfx(long long); SIMT_RT double __simt_ull2double_##sfx(unsigned long long); \
  static inline float __fadd_##sfx(float a, float b) { return __simt_fadd_##sfx(a, b); } \
  static inline float __fsub_##sfx(float a, float b) { return __simt_fsub_##sfx(a, b); } \
  static inline float __fmul_##sfx(float a, float b) { return __simt_fmul_##sfx(a, b); } \
  static inline float __fdiv_##sfx(float a, float b) { return __simt_fdiv_##sfx(a, b); } \
  static inline float __frcp_##sfx(float a) { return __simt_frcp_##sfx(a); } \
  static inline float __fsqrt_##sfx(float a) { return __simt_fsqrt_##sfx(a); } \
  static inline float __fmaf_##sfx(float a, float b, float c) { return __simt_fmaf_##sfx(a, b, c); } \
  static inline float __fmaf_ieee_##sfx(float a, float b, float c) { return __simt_fmaf_ieee_##sfx(a, b, c); } \
  static inline double __dadd_##sfx(double a, double b) { return __simt_dadd_##sfx(a, b); } \
  static inline double __dsub_##sfx(double a, double b) { return __simt_dsub_##sfx(a, b); } \
  static inline double __dmul_##sfx(double a, double b) { return __simt_dmul_##sfx(a, b); } \
  static inline double __ddiv_##sfx(double a, double b) { return __simt_ddiv_##sfx(a, b); } \
  static inline double __drcp_##sfx(double a) { return __simt_drcp_##sfx(a); } \
  static inline double __dsqrt_##sfx(double a) { return __simt_dsqrt_##sfx(a); } \
  static inline double __fma_##sfx(double a, double b, double c) { return __simt_fma_##sfx(a, b, c); } \
  static inline float __double2float_##sfx(double a) { return __simt_double2float_##sfx(a); } \
  static inline int __float2int_##sfx(float a) { return __simt_float2int_##sfx(a); } \
  static inline unsigned __float2uint_##sfx(float a) { return __simt_float2uint_##sfx(a); } \
  static inline long long __float2ll_##sfx(float a) { return __simt_float2ll_##sfx(a); } \
  static inline unsigned long long __float2ull_##sfx(float a) { return __simt_float2ull_##sfx(a); } \
  static inline int __double2int_##sfx(double a) { return __simt_double2int_##sfx(a); } \
  static inline unsigned __double2uint_##sfx(double a) { return __simt_double2uint_##sfx(a); } \
  static inline long long __double2ll_##sfx(double a) { return __simt_double2ll_##sfx(a); } \
  static inline unsigned long long __double2ull_##sfx(double a) { return __simt_double2ull_##sfx(a); } \
  static inline float __int2float_##sfx(int a) { return __simt_int2float_##sfx(a); } \
  static inline float __uint2float_##sfx(unsigned a) { return __simt_uint2float_##sfx(a); } \
  static inline float __ll2float_##sfx(long long a) { return __simt_ll2float_##sfx(a); } \
  static inline float __ull2float_##sfx(unsigned long long a) { return __simt_ull2float_##sfx(a); } \
  static inline double __ll2double_##sfx(long long a) { return __simt_ll2double_##sfx(a); } \
  static inline double __ull2double_##sfx(unsigned long long a) { return __simt_ull2double_##sfx(a); }
SIMT_RDECL(rn) SIMT_RDECL(rz) SIMT_RDECL(ru) SIMT_RDECL(rd)
SIMT_RT float __simt_frsqrt_rn(float);
static inline float __frsqrt_rn(float x) { return __simt_frsqrt_rn(x); }
static inline double __int2double_rn(int x) { return (double)x; }
static inline double __uint2double_rn(unsigned x) { return (double)x; }

// ---------------------------------------------------------------- more integer intrinsics
static inline int __dp4a(int a, int b, int c) {
  int r = c;
  for (int i = 0; i < 4; ++i) r += (int)(signed char)(a >> (8 * i)) * (int)(signed char)(b >> (8 * i));
  return r;
}
static inline unsigned __dp4a(unsigned a, unsigned b, unsigned c) {
  unsigned r = c;
  for (int i = 0; i < 4; ++i) r += ((a >> (8 * i)) & 0xFFu) * ((b >> (8 * i)) & 0xFFu);
  return r;
}
static inline int __dp2a_lo(int a, int b, int c) {
  int r = c;
  for (int i = 0; i < 2; ++i) r += (int)(short)(a >> (16 * i)) * (int)(signed char)(b >> (8 * i));
  return r;
}
static inline int __dp2a_hi(int a, int b, int c) {
  int r = c;
  for (int i = 0; i < 2; ++i) r += (int)(short)(a >> (16 * i)) * (int)(signed char)(b >> (8 * i + 16));
  return r;
}
static inline unsigned int __funnelshift_lc(unsigned lo, unsigned hi, unsigned s) {
  unsigned long long v = ((unsigned long long)hi << 32) | lo; s = s > 32 ? 32 : s;
  return (unsigned)((v << s) >> 32);
}
static inline unsigned int __funnelshift_rc(unsigned lo, unsigned hi, unsigned s) {
  unsigned long long v = ((unsigned long long)hi << 32) | lo; s = s > 32 ? 32 : s;
  return (unsigned)(v >> s);
}
// __fns: position of the n-th set bit of mask counting from base (PTX fns.b32); 0xffffffff if none
static inline unsigned __fns(unsigned mask, unsigned base, int offset) {
  if (base > 31) return 0xFFFFFFFFu;
  if (offset == 0) return 0xFFFFFFFFu;
  if (offset > 0) {
    int n = offset;
    for (int i = (int)base; i < 32; ++i)
      if (mask >> i & 1) { if (--n == 0) return (unsigned)i; }
    return 0xFFFFFFFFu;
  }
  int n = -offset;
  for (int i = (int)base; i >= 0; --i)
    if (mask >> i & 1) { if (--n == 0) return (unsigned)i; }
  return 0xFFFFFFFFu;
}
static inline size_t __cvta_generic_to_shared(const void *p) { return (size_t)p; }
static inline size_t __cvta_generic_to_global(const void *p) { return (size_t)p; }
static inline void *__cvta_shared_to_generic(size_t a) { return (void *)a; }
static inline void *__cvta_global_to_generic(size_t a) { return (void *)a; }
static inline size_t __cvta_generic_to_constant(const void *p) { return (size_t)p; }
static inline size_t __cvta_generic_to_local(const void *p) { return (size_t)p; }
static inline size_t __cvta_generic_to_grid_constant(const void *p) { return (size_t)p; }
static inline void *__cvta_constant_to_generic(size_t a) { return (void *)a; }
static inline void *__cvta_local_to_generic(size_t a) { return (void *)a; }
static inline void *__cvta_grid_constant_to_generic(size_t a) { return (void *)a; }
// Address-space predicates: the runtime knows the block's shared memory, the thread's stack (local)
// and the module's read-only data (__constant__); everything else is global.  A kernel parameter
// is copied to the thread's stack, so __isGridConstant is 0 (its address is local).
SIMT_RT unsigned __simt_addr_space(const void *p);  // 1 global, 2 shared, 4 constant, 8 local
static inline unsigned __isGlobal(const void *p) { return __simt_addr_space(p) == 1; }
static inline unsigned __isShared(const void *p) { return __simt_addr_space(p) == 2; }
static inline unsigned __isConstant(const void *p) { return __simt_addr_space(p) == 4; }
static inline unsigned __isLocal(const void *p) { return __simt_addr_space(p) == 8; }
static inline unsigned __isGridConstant(const void *) { return 0; }

// integer averages and sum of absolute differences
static inline int __hadd(int a, int b) { return (int)(((long long)a + b) >> 1); }
static inline int __rhadd(int a, int b) { return (int)(((long long)a + b + 1) >> 1); }
static inline unsigned __uhadd(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a + b) >> 1); }
static inline unsigned __urhadd(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a + b + 1) >> 1); }
static inline unsigned __usad(unsigned a, unsigned b, unsigned c) { return (a > b ? a - b : b - a) + c; }

// SIMD video instructions: per-byte (4) / per-halfword (2) lanes.
template <int N, bool S, class F>
static inline unsigned __simt_simd(unsigned a, unsigned b, F f) {
  const int bits = 32 / N;
  const unsigned m = bits == 8 ? 0xFFu : 0xFFFFu;
  unsigned r = 0;
  for (int i = 0; i < N; ++i) {
    unsigned ua = (a >> (bits * i)) & m, ub = (b >> (bits * i)) & m;
    long long x = S ? (long long)(bits == 8 ? (int)(signed char)ua : (int)(short)ua) : (long long)ua;
    long long y = S ? (long long)(bits == 8 ? (int)(signed char)ub : (int)(short)ub) : (long long)ub;
    r |= ((unsigned)f(x, y, (long long)m) & m) << (bits * i);
  }
  return r;
}
#define SIMT_SIMD(NAME, N, S, EXPR) \
  static inline unsigned NAME(unsigned a, unsigned b) { \
    return __simt_simd<N, S>(a, b, [](long long x, long long y, long long m) -> long long { (void)m; return EXPR; }); }
#define SIMT_SIMD_BOTH(NAME, EXPR) \
  SIMT_SIMD(NAME##u4, 4, false, EXPR) SIMT_SIMD(NAME##s4, 4, true, EXPR) \
  SIMT_SIMD(NAME##u2, 2, false, EXPR) SIMT_SIMD(NAME##s2, 2, true, EXPR)
SIMT_SIMD_BOTH(__vmax, x > y ? x : y) SIMT_SIMD_BOTH(__vmin, x < y ? x : y)
SIMT_SIMD_BOTH(__vcmpgt, x > y ? m : 0) SIMT_SIMD_BOTH(__vcmpge, x >= y ? m : 0)
SIMT_SIMD_BOTH(__vcmplt, x < y ? m : 0) SIMT_SIMD_BOTH(__vcmple, x <= y ? m : 0)
SIMT_SIMD_BOTH(__vsetgt, x > y) SIMT_SIMD_BOTH(__vsetge, x >= y)
SIMT_SIMD_BOTH(__vsetlt, x < y) SIMT_SIMD_BOTH(__vsetle, x <= y)
SIMT_SIMD_BOTH(__vabsdiff, x > y ? x - y : y - x) // rounded average, halves away from zero (vavrg: signed (x+y+(x+y>=0))>>1, unsigned (x+y+1)>>1)
SIMT_SIMD_BOTH(__vavg, (x + y + (x + y >= 0 ? 1 : 0)) >> 1)
SIMT_SIMD(__vcmpeq4, 4, false, x == y ? m : 0) SIMT_SIMD(__vcmpeq2, 2, false, x == y ? m : 0)
SIMT_SIMD(__vcmpne4, 4, false, x != y ? m : 0) SIMT_SIMD(__vcmpne2, 2, false, x != y ? m : 0)
SIMT_SIMD(__vseteq4, 4, false, x == y) SIMT_SIMD(__vseteq2, 2, false, x == y)
SIMT_SIMD(__vsetne4, 4, false, x != y) SIMT_SIMD(__vsetne2, 2, false, x != y)
SIMT_SIMD(__vadd4, 4, false, x + y) SIMT_SIMD(__vadd2, 2, false, x + y)
SIMT_SIMD(__vsub4, 4, false, x - y) SIMT_SIMD(__vsub2, 2, false, x - y)
SIMT_SIMD(__vaddus4, 4, false, x + y > m ? m : x + y) SIMT_SIMD(__vaddus2, 2, false, x + y > m ? m : x + y)
SIMT_SIMD(__vsubus4, 4, false, x > y ? x - y : 0) SIMT_SIMD(__vsubus2, 2, false, x > y ? x - y : 0)
SIMT_SIMD(__vaddss4, 4, true, x + y > 127 ? 127 : (x + y < -128 ? -128 : x + y))
SIMT_SIMD(__vaddss2, 2, true, x + y > 32767 ? 32767 : (x + y < -32768 ? -32768 : x + y))
SIMT_SIMD(__vsubss4, 4, true, x - y > 127 ? 127 : (x - y < -128 ? -128 : x - y))
SIMT_SIMD(__vsubss2, 2, true, x - y > 32767 ? 32767 : (x - y < -32768 ? -32768 : x - y))
SIMT_SIMD(__vhaddu4, 4, false, (x + y) >> 1) SIMT_SIMD(__vhaddu2, 2, false, (x + y) >> 1)
// saturating absolute value / negation (-128 -> 127, -32768 -> 32767)
static inline unsigned __vabsss4(unsigned a) { return __simt_simd<4, true>(a, 0, [](long long x, long long, long long) -> long long { return x < 0 ? (x == -128 ? 127 : -x) : x; }); }
static inline unsigned __vabsss2(unsigned a) { return __simt_simd<2, true>(a, 0, [](long long x, long long, long long) -> long long { return x < 0 ? (x == -32768 ? 32767 : -x) : x; }); }
static inline unsigned __vnegss4(unsigned a) { return __simt_simd<4, true>(a, 0, [](long long x, long long, long long) -> long long { return x == -128 ? 127 : -x; }); }
static inline unsigned __vnegss2(unsigned a) { return __simt_simd<2, true>(a, 0, [](long long x, long long, long long) -> long long { return x == -32768 ? 32767 : -x; }); }
static inline unsigned __vabs4(unsigned a) { return __simt_simd<4, true>(a, 0, [](long long x, long long, long long) -> long long { return x < 0 ? -x : x; }); }
static inline unsigned __vabs2(unsigned a) { return __simt_simd<2, true>(a, 0, [](long long x, long long, long long) -> long long { return x < 0 ? -x : x; }); }
static inline unsigned __vneg4(unsigned a) { return __simt_simd<4, true>(a, 0, [](long long x, long long, long long) -> long long { return -x; }); }
static inline unsigned __vneg2(unsigned a) { return __simt_simd<2, true>(a, 0, [](long long x, long long, long long) -> long long { return -x; }); }
static inline unsigned __vsads4(unsigned a, unsigned b) { unsigned d = __vabsdiffs4(a, b); return (d & 0xFF) + (d >> 8 & 0xFF) + (d >> 16 & 0xFF) + (d >> 24); }
static inline unsigned __vsadu4(unsigned a, unsigned b) { unsigned d = __vabsdiffu4(a, b); return (d & 0xFF) + (d >> 8 & 0xFF) + (d >> 16 & 0xFF) + (d >> 24); }
static inline unsigned __vsads2(unsigned a, unsigned b) { unsigned d = __vabsdiffs2(a, b); return (d & 0xFFFF) + (d >> 16); }
static inline unsigned __vsadu2(unsigned a, unsigned b) { unsigned d = __vabsdiffu2(a, b); return (d & 0xFFFF) + (d >> 16); }

// sm_90 __vimax* / __vimin* (32-bit and 16x2, optional _relu; 3-operand forms; __vib* with predicates)
static inline int __vimax_s32(int a, int b) { return a > b ? a : b; }
static inline int __vimin_s32(int a, int b) { return a < b ? a : b; }
static inline unsigned __vimax_u32(unsigned a, unsigned b) { return a > b ? a : b; }
static inline unsigned __vimin_u32(unsigned a, unsigned b) { return a < b ? a : b; }
static inline int __vimax3_s32(int a, int b, int c) { return __vimax_s32(__vimax_s32(a, b), c); }
static inline int __vimin3_s32(int a, int b, int c) { return __vimin_s32(__vimin_s32(a, b), c); }
static inline unsigned __vimax3_u32(unsigned a, unsigned b, unsigned c) { return __vimax_u32(__vimax_u32(a, b), c); }
static inline unsigned __vimin3_u32(unsigned a, unsigned b, unsigned c) { return __vimin_u32(__vimin_u32(a, b), c); }
static inline int __vimax_s32_relu(int a, int b) { int r = __vimax_s32(a, b); return r < 0 ? 0 : r; }
static inline int __vimin_s32_relu(int a, int b) { int r = __vimin_s32(a, b); return r < 0 ? 0 : r; }
static inline int __vimax3_s32_relu(int a, int b, int c) { int r = __vimax3_s32(a, b, c); return r < 0 ? 0 : r; }
static inline int __vimin3_s32_relu(int a, int b, int c) { int r = __vimin3_s32(a, b, c); return r < 0 ? 0 : r; }
static inline unsigned __vimax_s16x2(unsigned a, unsigned b) { return __vmaxs2(a, b); }
static inline unsigned __vimin_s16x2(unsigned a, unsigned b) { return __vmins2(a, b); }
static inline unsigned __vimax_u16x2(unsigned a, unsigned b) { return __vmaxu2(a, b); }
static inline unsigned __vimin_u16x2(unsigned a, unsigned b) { return __vminu2(a, b); }
static inline unsigned __vimax3_s16x2(unsigned a, unsigned b, unsigned c) { return __vmaxs2(__vmaxs2(a, b), c); }
static inline unsigned __vimin3_s16x2(unsigned a, unsigned b, unsigned c) { return __vmins2(__vmins2(a, b), c); }
static inline unsigned __vimax3_u16x2(unsigned a, unsigned b, unsigned c) { return __vmaxu2(__vmaxu2(a, b), c); }
static inline unsigned __vimin3_u16x2(unsigned a, unsigned b, unsigned c) { return __vminu2(__vminu2(a, b), c); }
static inline unsigned __vimax_s16x2_relu(unsigned a, unsigned b) { return __vmaxs2(__vmaxs2(a, b), 0); }
static inline unsigned __vimin_s16x2_relu(unsigned a, unsigned b) { return __vmaxs2(__vmins2(a, b), 0); }
static inline unsigned __vimax3_s16x2_relu(unsigned a, unsigned b, unsigned c) { return __vmaxs2(__vimax3_s16x2(a, b, c), 0); }
static inline unsigned __vimin3_s16x2_relu(unsigned a, unsigned b, unsigned c) { return __vmaxs2(__vimin3_s16x2(a, b, c), 0); }
static inline int __vibmax_s32(int a, int b, bool *pred) { *pred = a >= b; return a >= b ? a : b; }
static inline int __vibmin_s32(int a, int b, bool *pred) { *pred = a <= b; return a <= b ? a : b; }
static inline unsigned __vibmax_u32(unsigned a, unsigned b, bool *pred) { *pred = a >= b; return a >= b ? a : b; }
static inline unsigned __vibmin_u32(unsigned a, unsigned b, bool *pred) { *pred = a <= b; return a <= b ? a : b; }
static inline unsigned __vibmax_s16x2(unsigned a, unsigned b, bool *lo, bool *hi) {
  *lo = (short)a >= (short)b; *hi = (short)(a >> 16) >= (short)(b >> 16); return __vmaxs2(a, b);
}
static inline unsigned __vibmin_s16x2(unsigned a, unsigned b, bool *lo, bool *hi) {
  *lo = (short)a <= (short)b; *hi = (short)(a >> 16) <= (short)(b >> 16); return __vmins2(a, b);
}
static inline unsigned __vibmax_u16x2(unsigned a, unsigned b, bool *lo, bool *hi) {
  *lo = (a & 0xFFFF) >= (b & 0xFFFF); *hi = (a >> 16) >= (b >> 16); return __vmaxu2(a, b);
}
static inline unsigned __vibmin_u16x2(unsigned a, unsigned b, bool *lo, bool *hi) {
  *lo = (a & 0xFFFF) <= (b & 0xFFFF); *hi = (a >> 16) <= (b >> 16); return __vminu2(a, b);
}
// sm_90 __viaddmax* / __viaddmin*: max(a + b, c) / min(a + b, c) (the sum wraps), optional _relu
static inline int __viaddmax_s32(int a, int b, int c) { int s = (int)((unsigned)a + (unsigned)b); return s > c ? s : c; }
static inline int __viaddmin_s32(int a, int b, int c) { int s = (int)((unsigned)a + (unsigned)b); return s < c ? s : c; }
static inline unsigned __viaddmax_u32(unsigned a, unsigned b, unsigned c) { unsigned s = a + b; return s > c ? s : c; }
static inline unsigned __viaddmin_u32(unsigned a, unsigned b, unsigned c) { unsigned s = a + b; return s < c ? s : c; }
static inline int __viaddmax_s32_relu(int a, int b, int c) { int r = __viaddmax_s32(a, b, c); return r < 0 ? 0 : r; }
static inline int __viaddmin_s32_relu(int a, int b, int c) { int r = __viaddmin_s32(a, b, c); return r < 0 ? 0 : r; }
static inline unsigned __viaddmax_s16x2(unsigned a, unsigned b, unsigned c) { return __vmaxs2(__vadd2(a, b), c); }
static inline unsigned __viaddmin_s16x2(unsigned a, unsigned b, unsigned c) { return __vmins2(__vadd2(a, b), c); }
static inline unsigned __viaddmax_u16x2(unsigned a, unsigned b, unsigned c) { return __vmaxu2(__vadd2(a, b), c); }
static inline unsigned __viaddmin_u16x2(unsigned a, unsigned b, unsigned c) { return __vminu2(__vadd2(a, b), c); }
static inline unsigned __viaddmax_s16x2_relu(unsigned a, unsigned b, unsigned c) { return __vmaxs2(__viaddmax_s16x2(a, b, c), 0); }
static inline unsigned __viaddmin_s16x2_relu(unsigned a, unsigned b, unsigned c) { return __vmaxs2(__viaddmin_s16x2(a, b, c), 0); }

// ---------------------------------------------------------------- synchronisation
enum { __SIMT_BAR_SYNC = 0, __SIMT_BAR_COUNT = 1, __SIMT_BAR_AND = 2, __SIMT_BAR_OR = 3 };
#define __simt_mb() __asm__ __volatile__("" ::: "memory")
static inline int __simt_bar(int kind, int pred, int site, int line) {
  __simt_mb();
  int r = __simt_barrier(kind, pred, site, line);
  __simt_mb();
  return r;
}
// Warp built-ins are functions (template arguments with commas are fine); the line of the call
// comes from a default argument.  Barriers and __activemask are variadic macros so that __COUNTER__
// identifies each textual call site.
#define __syncthreads() ((void)__simt_bar(__SIMT_BAR_SYNC, 1, __COUNTER__, __LINE__))
#define __syncthreads_count(...) __simt_bar(__SIMT_BAR_COUNT, (__VA_ARGS__) ? 1 : 0, __COUNTER__, __LINE__)
#define __syncthreads_and(...) __simt_bar(__SIMT_BAR_AND, (__VA_ARGS__) ? 1 : 0, __COUNTER__, __LINE__)
#define __syncthreads_or(...) __simt_bar(__SIMT_BAR_OR, (__VA_ARGS__) ? 1 : 0, __COUNTER__, __LINE__)

enum {
  __SIMT_W_SYNCWARP = 1, __SIMT_W_BALLOT, __SIMT_W_ANY, __SIMT_W_ALL, __SIMT_W_SHFL, __SIMT_W_SHFL_UP,
  __SIMT_W_SHFL_DOWN, __SIMT_W_SHFL_XOR, __SIMT_W_ACTIVEMASK, __SIMT_W_MATCH_ANY, __SIMT_W_MATCH_ALL,
  __SIMT_W_RED_ADD, __SIMT_W_RED_MIN, __SIMT_W_RED_MAX, __SIMT_W_RED_AND, __SIMT_W_RED_OR, __SIMT_W_RED_XOR
};
static inline unsigned long long __simt_wop(int kind, unsigned mask, unsigned long long v, int arg, int width,
                                            int line) {
  __simt_mb();
  unsigned long long r = __simt_warp_op(kind, mask, v, arg, width, line);
  __simt_mb();
  return r;
}
#define __SIMT_LINE int __simt_line = __builtin_LINE()
static inline void __syncwarp(unsigned mask = 0xFFFFFFFFu, __SIMT_LINE) {
  (void)__simt_wop(__SIMT_W_SYNCWARP, mask, 0, 0, 32, __simt_line);
}
static inline unsigned __ballot_sync(unsigned mask, int pred, __SIMT_LINE) {
  return (unsigned)__simt_wop(__SIMT_W_BALLOT, mask, pred != 0, 0, 32, __simt_line);
}
static inline int __any_sync(unsigned mask, int pred, __SIMT_LINE) {
  return (int)__simt_wop(__SIMT_W_ANY, mask, pred != 0, 0, 32, __simt_line);
}
static inline int __all_sync(unsigned mask, int pred, __SIMT_LINE) {
  return (int)__simt_wop(__SIMT_W_ALL, mask, pred != 0, 0, 32, __simt_line);
}
// __uni_sync: non-zero iff the predicate is the same for every non-exited lane of the mask
static inline int __uni_sync(unsigned mask, int pred, __SIMT_LINE) {
  int all = __all_sync(mask, pred, __simt_line);
  int any = __any_sync(mask, pred, __simt_line);
  return all || !any;
}
static inline unsigned __simt_activemask(int site, int line) {
  return (unsigned)__simt_wop(__SIMT_W_ACTIVEMASK, 0xFFFFFFFFu, 0, site, 32, line);
}
#define __activemask() __simt_activemask(__COUNTER__, __LINE__)

template <class T>
static inline unsigned long long __simt_to_bits(T v) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value, "unsupported type for a warp shuffle");
  unsigned long long b = 0;
  __builtin_memcpy(&b, &v, sizeof(T));
  return b;
}
template <class T>
static inline T __simt_from_bits(unsigned long long b) {
  T v;
  __builtin_memcpy(&v, &b, sizeof(T));
  return v;
}
template <class T>
static inline T __shfl_sync(unsigned mask, T var, int srcLane, int width = 32, __SIMT_LINE) {
  return __simt_from_bits<T>(__simt_wop(__SIMT_W_SHFL, mask, __simt_to_bits<T>(var), srcLane, width, __simt_line));
}
template <class T>
static inline T __shfl_up_sync(unsigned mask, T var, unsigned int delta, int width = 32, __SIMT_LINE) {
  return __simt_from_bits<T>(
      __simt_wop(__SIMT_W_SHFL_UP, mask, __simt_to_bits<T>(var), (int)delta, width, __simt_line));
}
template <class T>
static inline T __shfl_down_sync(unsigned mask, T var, unsigned int delta, int width = 32, __SIMT_LINE) {
  return __simt_from_bits<T>(
      __simt_wop(__SIMT_W_SHFL_DOWN, mask, __simt_to_bits<T>(var), (int)delta, width, __simt_line));
}
template <class T>
static inline T __shfl_xor_sync(unsigned mask, T var, int laneMask, int width = 32, __SIMT_LINE) {
  return __simt_from_bits<T>(
      __simt_wop(__SIMT_W_SHFL_XOR, mask, __simt_to_bits<T>(var), laneMask, width, __simt_line));
}
template <class T>
static inline unsigned __match_any_sync(unsigned mask, T v, __SIMT_LINE) {
  return (unsigned)__simt_wop(__SIMT_W_MATCH_ANY, mask, __simt_to_bits<T>(v), 0, 32, __simt_line);
}
template <class T>
static inline unsigned __match_all_sync(unsigned mask, T v, int *pred, __SIMT_LINE) {
  unsigned long long r = __simt_wop(__SIMT_W_MATCH_ALL, mask, __simt_to_bits<T>(v), 0, 32, __simt_line);
  *pred = r != 0;
  return (unsigned)r;
}
static inline unsigned __reduce_add_sync(unsigned mask, unsigned v, __SIMT_LINE) {
  return (unsigned)__simt_wop(__SIMT_W_RED_ADD, mask, v, 0, 32, __simt_line);
}
static inline int __reduce_add_sync(unsigned mask, int v, __SIMT_LINE) {
  return (int)(unsigned)__simt_wop(__SIMT_W_RED_ADD, mask, (unsigned)v, 1, 32, __simt_line);
}
static inline unsigned __reduce_min_sync(unsigned mask, unsigned v, __SIMT_LINE) {
  return (unsigned)__simt_wop(__SIMT_W_RED_MIN, mask, v, 0, 32, __simt_line);
}
static inline int __reduce_min_sync(unsigned mask, int v, __SIMT_LINE) {
  return (int)(unsigned)__simt_wop(__SIMT_W_RED_MIN, mask, (unsigned)v, 1, 32, __simt_line);
}
static inline unsigned __reduce_max_sync(unsigned mask, unsigned v, __SIMT_LINE) {
  return (unsigned)__simt_wop(__SIMT_W_RED_MAX, mask, v, 0, 32, __simt_line);
}
static inline int __reduce_max_sync(unsigned mask, int v, __SIMT_LINE) {
  return (int)(unsigned)__simt_wop(__SIMT_W_RED_MAX, mask, (unsigned)v, 1, 32, __simt_line);
}
static inline unsigned __reduce_and_sync(unsigned mask, unsigned v, __SIMT_LINE) {
  return (unsigned)__simt_wop(__SIMT_W_RED_AND, mask, v, 0, 32, __simt_line);
}
static inline unsigned __reduce_or_sync(unsigned mask, unsigned v, __SIMT_LINE) {
  return (unsigned)__simt_wop(__SIMT_W_RED_OR, mask, v, 0, 32, __simt_line);
}
static inline unsigned __reduce_xor_sync(unsigned mask, unsigned v, __SIMT_LINE) {
  return (unsigned)__simt_wop(__SIMT_W_RED_XOR, mask, v, 0, 32, __simt_line);
}

// ---------------------------------------------------------------- memory fences, timing
static inline void __threadfence(void) { __simt_mb(); __simt_spin_point(1); __simt_mb(); }
static inline void __threadfence_block(void) { __simt_mb(); __simt_spin_point(1); __simt_mb(); }
static inline void __threadfence_system(void) { __simt_mb(); __simt_spin_point(1); __simt_mb(); }
static inline void __nanosleep(unsigned) { __simt_mb(); __simt_spin_point(2); __simt_mb(); }
static inline long long clock64(void) { return __simt_clock(); }
#define clock() ((long)__simt_clock())
static inline unsigned long long __globaltimer(void) { return (unsigned long long)__simt_clock(); }
#define __trap() __simt_trap("__trap()", __FILE__, __LINE__)
#define __brkpt() __simt_trap("__brkpt()", __FILE__, __LINE__)
#undef assert
#define assert(e) ((e) ? (void)0 : __simt_trap("assertion failed: " #e, __FILE__, __LINE__))

// memcpy/memset/memmove with a run-time size become libc calls, which are not instrumented: check
// their ranges first (constant sizes are expanded into instrumented loads/stores by the compiler).
SIMT_RT void __tsan_read_range(void *, size_t);
SIMT_RT void __tsan_write_range(void *, size_t);
static inline void *__simt_memcpy(void *d, const void *s, size_t n) {
  if (!__builtin_constant_p(n)) { __tsan_read_range((void *)s, n); __tsan_write_range(d, n); }
  return __builtin_memcpy(d, s, n);
}
static inline void *__simt_memmove(void *d, const void *s, size_t n) {
  if (!__builtin_constant_p(n)) { __tsan_read_range((void *)s, n); __tsan_write_range(d, n); }
  return __builtin_memmove(d, s, n);
}
static inline void *__simt_memset(void *d, int c, size_t n) {
  if (!__builtin_constant_p(n)) __tsan_write_range(d, n);
  return __builtin_memset(d, c, n);
}
#define memcpy(d, s, n) __simt_memcpy((d), (s), (n))
#define memmove(d, s, n) __simt_memmove((d), (s), (n))
#define memset(d, c, n) __simt_memset((d), (c), (n))

// cache-hinted loads/stores: plain (instrumented) accesses
template <class T> static inline T __ldg(const T *p) { __simt_ldg(p, sizeof(T)); return *p; }
template <class T> static inline T __ldcg(const T *p) { return *p; }
template <class T> static inline T __ldca(const T *p) { return *p; }
template <class T> static inline T __ldcs(const T *p) { return *p; }
template <class T> static inline T __ldlu(const T *p) { return *p; }
template <class T> static inline T __ldcv(const T *p) { return *(const volatile T *)p; }
template <class T> static inline void __stcg(T *p, T v) { *p = v; }
template <class T> static inline void __stcs(T *p, T v) { *p = v; }
template <class T> static inline void __stwb(T *p, T v) { *p = v; }
template <class T> static inline void __stwt(T *p, T v) { *(volatile T *)p = v; }

// ---------------------------------------------------------------- atomics
enum { __SIMT_A_ADD = 0, __SIMT_A_SUB, __SIMT_A_MAX, __SIMT_A_MIN, __SIMT_A_CAS, __SIMT_A_EXCH, __SIMT_A_OR,
       __SIMT_A_AND, __SIMT_A_XOR, __SIMT_A_INC, __SIMT_A_DEC };
enum { __SIMT_T_I32 = 0, __SIMT_T_U32, __SIMT_T_I64, __SIMT_T_U64, __SIMT_T_F32, __SIMT_T_F64, __SIMT_T_U16 };
template <class T> struct __simt_atype;
template <> struct __simt_atype<int> { enum { v = __SIMT_T_I32 }; };
template <> struct __simt_atype<unsigned int> { enum { v = __SIMT_T_U32 }; };
template <> struct __simt_atype<long long> { enum { v = __SIMT_T_I64 }; };
template <> struct __simt_atype<unsigned long long> { enum { v = __SIMT_T_U64 }; };
template <> struct __simt_atype<float> { enum { v = __SIMT_T_F32 }; };
template <> struct __simt_atype<double> { enum { v = __SIMT_T_F64 }; };
template <> struct __simt_atype<unsigned short> { enum { v = __SIMT_T_U16 }; };
template <class T>
static inline T __simt_aop(int op, T *p, T v, T c = T()) {
  __simt_mb();
  unsigned long long r =
      __simt_atomic(op, __simt_atype<T>::v, (void *)p, __simt_to_bits<T>(v), __simt_to_bits<T>(c));
  __simt_mb();
  return __simt_from_bits<T>(r);
}
#define SIMT_ATOM(NAME, OP, T) \
  static inline T NAME(T *p, T v) { return __simt_aop<T>(OP, p, v); } \
  static inline T NAME##_block(T *p, T v) { return __simt_aop<T>(OP, p, v); } \
  static inline T NAME##_system(T *p, T v) { return __simt_aop<T>(OP, p, v); }
SIMT_ATOM(atomicAdd, __SIMT_A_ADD, int) SIMT_ATOM(atomicAdd, __SIMT_A_ADD, unsigned int)
SIMT_ATOM(atomicAdd, __SIMT_A_ADD, unsigned long long)  // no atomicAdd(long long *) in CUDA
SIMT_ATOM(atomicAdd, __SIMT_A_ADD, float) SIMT_ATOM(atomicAdd, __SIMT_A_ADD, double)
SIMT_ATOM(atomicSub, __SIMT_A_SUB, int) SIMT_ATOM(atomicSub, __SIMT_A_SUB, unsigned int)
SIMT_ATOM(atomicMax, __SIMT_A_MAX, int) SIMT_ATOM(atomicMax, __SIMT_A_MAX, unsigned int)
SIMT_ATOM(atomicMax, __SIMT_A_MAX, long long) SIMT_ATOM(atomicMax, __SIMT_A_MAX, unsigned long long)
SIMT_ATOM(atomicMin, __SIMT_A_MIN, int) SIMT_ATOM(atomicMin, __SIMT_A_MIN, unsigned int)
SIMT_ATOM(atomicMin, __SIMT_A_MIN, long long) SIMT_ATOM(atomicMin, __SIMT_A_MIN, unsigned long long)
SIMT_ATOM(atomicExch, __SIMT_A_EXCH, int) SIMT_ATOM(atomicExch, __SIMT_A_EXCH, unsigned int)
SIMT_ATOM(atomicExch, __SIMT_A_EXCH, unsigned long long) SIMT_ATOM(atomicExch, __SIMT_A_EXCH, float)
SIMT_ATOM(atomicOr, __SIMT_A_OR, int) SIMT_ATOM(atomicOr, __SIMT_A_OR, unsigned int)
SIMT_ATOM(atomicOr, __SIMT_A_OR, unsigned long long)
SIMT_ATOM(atomicAnd, __SIMT_A_AND, int) SIMT_ATOM(atomicAnd, __SIMT_A_AND, unsigned int)
SIMT_ATOM(atomicAnd, __SIMT_A_AND, unsigned long long)
SIMT_ATOM(atomicXor, __SIMT_A_XOR, int) SIMT_ATOM(atomicXor, __SIMT_A_XOR, unsigned int)
SIMT_ATOM(atomicXor, __SIMT_A_XOR, unsigned long long)
SIMT_ATOM(atomicInc, __SIMT_A_INC, unsigned int) SIMT_ATOM(atomicDec, __SIMT_A_DEC, unsigned int)
#define SIMT_CAS(T) \
  static inline T atomicCAS(T *p, T c, T v) { return __simt_aop<T>(__SIMT_A_CAS, p, v, c); } \
  static inline T atomicCAS_block(T *p, T c, T v) { return __simt_aop<T>(__SIMT_A_CAS, p, v, c); } \
  static inline T atomicCAS_system(T *p, T c, T v) { return __simt_aop<T>(__SIMT_A_CAS, p, v, c); }
SIMT_CAS(int) SIMT_CAS(unsigned int) SIMT_CAS(unsigned long long) SIMT_CAS(unsigned short)
// sm_90 atomicAdd on float2 / float4 (global memory): atomic per element, the whole vector aligned
#define SIMT_VATOM(V, N) \
  static inline V __simt_vatomic_add(V *p, V v) { \
    __simt_vector_access(p, sizeof(V)); \
    float *e = reinterpret_cast<float *>(p); const float *w = reinterpret_cast<const float *>(&v); \
    V old; float *o = reinterpret_cast<float *>(&old); \
    for (int i = 0; i < N; ++i) o[i] = __simt_aop<float>(__SIMT_A_ADD, e + i, w[i]); \
    return old; } \
  static inline V atomicAdd(V *p, V v) { return __simt_vatomic_add(p, v); } \
  static inline V atomicAdd_block(V *p, V v) { return __simt_vatomic_add(p, v); } \
  static inline V atomicAdd_system(V *p, V v) { return __simt_vatomic_add(p, v); }
SIMT_VATOM(float2, 2) SIMT_VATOM(float4, 4)

// ---------------------------------------------------------------- kernel entry glue
template <class T> struct __simt_param_info {
  enum { is_pointer = std::is_pointer<T>::value ? 1 : 0 };
};
template <class... P, size_t... I>
__attribute__((no_sanitize_address, no_sanitize_thread, no_sanitize("alignment"), noinline)) static void __simt_call_impl(void (*k)(P...), void **a,
                                                                          std::index_sequence<I...>) {
  k(*reinterpret_cast<typename std::remove_reference<P>::type *>(a[I])...);
}
template <class... P>
__attribute__((no_sanitize_address, no_sanitize_thread, no_sanitize("alignment"))) static inline void __simt_call(void (*k)(P...), void **a) {
  __simt_call_impl(k, a, std::index_sequence_for<P...>{});
}
// Writes 2 entries per parameter (sizeof, is_pointer); returns the arity.
template <class... P>
__attribute__((no_sanitize_address, no_sanitize_thread)) static inline int __simt_signature(void (*)(P...), unsigned long long *out,
                                                                       int cap) {
  const unsigned long long sz[] = {0ull, (unsigned long long)sizeof(P)...};
  const unsigned long long ptr[] = {0ull, (unsigned long long)__simt_param_info<P>::is_pointer...};
  int n = (int)sizeof...(P);
  for (int i = 0; i < n && 2 * i + 1 < cap; ++i) {
    out[2 * i] = sz[i + 1];
    out[2 * i + 1] = ptr[i + 1];
  }
  return n;
}

// ---------------------------------------------------------------- CUDA-only math functions
// Computed in double (within CUDA's ulp bounds for the float versions).
static inline double __simt_pi_reduce(double x) { return fmod(x, 2.0); }  // exact
// (C23 adds sinpi/cospi to <math.h>: ours are __simt_-named, with macros)
static inline double __simt_sinpi(double x) {
  if (__builtin_isinf(x)) return __builtin_nan("");
  double r = __simt_pi_reduce(x);
  if (r == __builtin_trunc(r)) return __builtin_copysign(0.0, x);
  return sin(3.141592653589793238 * r);
}
static inline double __simt_cospi(double x) {
  if (__builtin_isinf(x)) return __builtin_nan("");
  double r = __builtin_fabs(__simt_pi_reduce(x));
  if (r - __builtin_trunc(r) == 0.5) return 0.0;
  if (r == 0.0) return 1.0;
  if (r == 1.0) return -1.0;
  return cos(3.141592653589793238 * r);
}
static inline void __simt_sincospi(double x, double *s, double *c) { *s = __simt_sinpi(x); *c = __simt_cospi(x); }
static inline double rcbrt(double x) { return 1.0 / cbrt(x); }
static inline double rhypot(double x, double y) { return 1.0 / hypot(x, y); }
static inline double norm3d(double a, double b, double c) { return hypot(hypot(a, b), c); }
static inline double rnorm3d(double a, double b, double c) { return 1.0 / norm3d(a, b, c); }
static inline double norm4d(double a, double b, double c, double d) { return hypot(hypot(a, b), hypot(c, d)); }
static inline double rnorm4d(double a, double b, double c, double d) { return 1.0 / norm4d(a, b, c, d); }
static inline double norm(int dim, const double *p) { double r = 0.0; for (int i = 0; i < dim; ++i) r = hypot(r, p[i]); return r; }
static inline double rnorm(int dim, const double *p) { return 1.0 / norm(dim, p); }
static inline double normcdf(double x) { return 0.5 * erfc(-x * 0.70710678118654752440); }
static inline double erfcinv(double y) {
  if (!(y >= 0.0 && y <= 2.0)) return __builtin_nan("");
  if (y == 0.0) return __builtin_inf();
  if (y == 2.0) return -__builtin_inf();
  if (y > 1.0) return -erfcinv(2.0 - y);
  // initial guess (asymptotic / central), then Newton steps on erfc(x) - y
  double x;
  if (y < 0.05) { double t = sqrt(-log(y)); x = t - (log(t) + 0.5723649429247001) / (2.0 * t); }
  else { double w = 1.0 - y; x = w * (0.886226925452758 + w * w * 0.2320136665346544); }
  for (int i = 0; i < 60; ++i) {
    double f = erfc(x) - y, d = -1.1283791670955126 * exp(-x * x);
    if (d == 0.0) break;
    double nx = x - f / d;
    if (nx == x) break;
    x = nx;
  }
  return x;
}
static inline double erfinv(double y) {
  if (y == 0.0) return y;
  if (__builtin_fabs(y) < 0.5) {  // Newton on erf(x) - y directly (no cancellation in 1 - y)
    double x = y * 0.886226925452758;
    for (int i = 0; i < 60; ++i) {
      double nx = x - (erf(x) - y) / (1.1283791670955126 * exp(-x * x));
      if (nx == x) break;
      x = nx;
    }
    return x;
  }
  return erfcinv(1.0 - y);
}
static inline double normcdfinv(double p) { double r = erfcinv(2.0 * p); return r == 0.0 ? 0.0 : -1.4142135623730951 * r; }
static inline double erfcx(double x) {
  if (x < 26.0) return exp(x * x) * erfc(x);
  double t = 1.0 / (x * x), s = 1.0, term = 1.0;  // asymptotic series
  for (int k = 1; k < 12; ++k) { term *= -(2.0 * k - 1.0) * 0.5 * t; s += term; }
  return s / (x * 1.7724538509055160);
}
static inline double cyl_bessel_i0(double x) {
  double q = 0.25 * x * x, term = 1.0, s = 1.0;
  for (int k = 1; k < 1000 && term > 1e-17 * s; ++k) { term *= q / ((double)k * k); s += term; }
  return s;
}
static inline double cyl_bessel_i1(double x) {
  double q = 0.25 * x * x, term = 0.5 * x, s = term;
  for (int k = 1; k < 1000 && __builtin_fabs(term) > 1e-17 * __builtin_fabs(s); ++k) { term *= q / ((double)k * (k + 1)); s += term; }
  return s;
}
#define SIMT_FMATH1(F) static inline float F##f(float x) { return __simt_cnanf((float)F((double)x)); }
SIMT_FMATH1(__simt_sinpi) SIMT_FMATH1(__simt_cospi) SIMT_FMATH1(rcbrt) SIMT_FMATH1(normcdf) SIMT_FMATH1(erfcinv)
SIMT_FMATH1(erfinv) SIMT_FMATH1(normcdfinv) SIMT_FMATH1(erfcx) SIMT_FMATH1(cyl_bessel_i0) SIMT_FMATH1(cyl_bessel_i1)
static inline void __simt_sincospif(float x, float *s, float *c) { *s = __simt_sinpif(x); *c = __simt_cospif(x); }
#define sinpi __simt_sinpi
#define cospi __simt_cospi
#define sincospi __simt_sincospi
#define sinpif __simt_sinpif
#define cospif __simt_cospif
#define sincospif __simt_sincospif
static inline float rhypotf(float x, float y) { return __simt_cnanf((float)rhypot(x, y)); }
static inline float norm3df(float a, float b, float c) { return __simt_cnanf((float)norm3d(a, b, c)); }
static inline float rnorm3df(float a, float b, float c) { return __simt_cnanf((float)rnorm3d(a, b, c)); }
static inline float norm4df(float a, float b, float c, float d) { return __simt_cnanf((float)norm4d(a, b, c, d)); }
static inline float rnorm4df(float a, float b, float c, float d) { return __simt_cnanf((float)rnorm4d(a, b, c, d)); }
static inline float normf(int dim, const float *p) { double r = 0.0; for (int i = 0; i < dim; ++i) r = hypot(r, (double)p[i]); return __simt_cnanf((float)r); }
static inline float rnormf(int dim, const float *p) { return __simt_cnanf((float)(1.0 / (double)normf(dim, p))); }

// ---------------------------------------------------------------- canonical NaN from the float math functions
// Function-like macros over the f-suffixed functions of <math.h> (already declared above, so later
// headers see only 'using ::sinf;' and the like): their NaN results come out canonical, as on a GPU.
// (fabsf/copysignf are sign-bit operations there too, and keep the bits.)
#define SIMT_CNAN_FN(...) __simt_cnanf(__VA_ARGS__)
#define acosf(...) SIMT_CNAN_FN(acosf(__VA_ARGS__))
#define acoshf(...) SIMT_CNAN_FN(acoshf(__VA_ARGS__))
#define asinf(...) SIMT_CNAN_FN(asinf(__VA_ARGS__))
#define asinhf(...) SIMT_CNAN_FN(asinhf(__VA_ARGS__))
#define atan2f(...) SIMT_CNAN_FN(atan2f(__VA_ARGS__))
#define atanf(...) SIMT_CNAN_FN(atanf(__VA_ARGS__))
#define atanhf(...) SIMT_CNAN_FN(atanhf(__VA_ARGS__))
#define cbrtf(...) SIMT_CNAN_FN(cbrtf(__VA_ARGS__))
#define ceilf(...) SIMT_CNAN_FN(ceilf(__VA_ARGS__))
#define cosf(...) SIMT_CNAN_FN(cosf(__VA_ARGS__))
#define coshf(...) SIMT_CNAN_FN(coshf(__VA_ARGS__))
#define erfcf(...) SIMT_CNAN_FN(erfcf(__VA_ARGS__))
#define erff(...) SIMT_CNAN_FN(erff(__VA_ARGS__))
#define exp10f(...) SIMT_CNAN_FN(exp10f(__VA_ARGS__))
#define exp2f(...) SIMT_CNAN_FN(exp2f(__VA_ARGS__))
#define expf(...) SIMT_CNAN_FN(expf(__VA_ARGS__))
#define expm1f(...) SIMT_CNAN_FN(expm1f(__VA_ARGS__))
#define fdimf(...) SIMT_CNAN_FN(fdimf(__VA_ARGS__))
#define floorf(...) SIMT_CNAN_FN(floorf(__VA_ARGS__))
#define fmaf(...) SIMT_CNAN_FN(fmaf(__VA_ARGS__))
#define fmaxf(...) SIMT_CNAN_FN(fmaxf(__VA_ARGS__))
#define fminf(...) SIMT_CNAN_FN(fminf(__VA_ARGS__))
#define fmodf(...) SIMT_CNAN_FN(fmodf(__VA_ARGS__))
#define hypotf(...) SIMT_CNAN_FN(hypotf(__VA_ARGS__))
#define ldexpf(...) SIMT_CNAN_FN(ldexpf(__VA_ARGS__))
#define lgammaf(...) SIMT_CNAN_FN(lgammaf(__VA_ARGS__))
#define log10f(...) SIMT_CNAN_FN(log10f(__VA_ARGS__))
#define log1pf(...) SIMT_CNAN_FN(log1pf(__VA_ARGS__))
#define log2f(...) SIMT_CNAN_FN(log2f(__VA_ARGS__))
#define logbf(...) SIMT_CNAN_FN(logbf(__VA_ARGS__))
#define logf(...) SIMT_CNAN_FN(logf(__VA_ARGS__))
#define nearbyintf(...) SIMT_CNAN_FN(nearbyintf(__VA_ARGS__))
#define nextafterf(...) SIMT_CNAN_FN(nextafterf(__VA_ARGS__))
#define powf(...) SIMT_CNAN_FN(powf(__VA_ARGS__))
#define remainderf(...) SIMT_CNAN_FN(remainderf(__VA_ARGS__))
#define rintf(...) SIMT_CNAN_FN(rintf(__VA_ARGS__))
#define roundf(...) SIMT_CNAN_FN(roundf(__VA_ARGS__))
#define scalbnf(...) SIMT_CNAN_FN(scalbnf(__VA_ARGS__))
#define scalblnf(...) SIMT_CNAN_FN(scalblnf(__VA_ARGS__))
#define sinf(...) SIMT_CNAN_FN(sinf(__VA_ARGS__))
#define sinhf(...) SIMT_CNAN_FN(sinhf(__VA_ARGS__))
#define sqrtf(...) SIMT_CNAN_FN(sqrtf(__VA_ARGS__))
#define tanf(...) SIMT_CNAN_FN(tanf(__VA_ARGS__))
#define tanhf(...) SIMT_CNAN_FN(tanhf(__VA_ARGS__))
#define tgammaf(...) SIMT_CNAN_FN(tgammaf(__VA_ARGS__))
#define truncf(...) SIMT_CNAN_FN(truncf(__VA_ARGS__))

#endif  // CUPYOPS_SIMT_CUDA_H
