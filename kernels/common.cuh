// common.cuh - helpers shared by every kernel family: included by argreduce.cu (and
// argcompare.cuh), segment.cu, nonzero.cuh and selftest.cu, whose kernels
// cupyops/ops/{argreduce,segment,nonzero}/launch.py and cupyops.core.modules.SELFTEST_FAMILY
// instantiate. Its templates take their types from the
// kernels (value types, index types U / I); it computes nothing on its own.
//
// NVRTC has no standard library headers: fixed-width typedefs, unsigned-of-size traits and
// small utilities live here. Everything is plain CUDA C++17 with intrinsics only (no CUB, no
// inline PTX), so the same source also runs on the CPU under cupyops.simt.
//
// Contents:
//   cuo::u8 .. cuo::u64, cuo::i32, cuo::i64     fixed-width typedefs
//   cuo::uint_of<N>::type                         unsigned integer of N bytes (1, 2, 4, 8, 16)
//   cuo::u128                                     two u64 words (hi more significant) with ==, !=,
//                                                 >, ^, ~ and shfl_xor: complex128 bits and keys
//   cuo::unsigned_of<I>::type                     int -> unsigned int, long long -> unsigned long long
//   cuo::index_max<I>()                           largest value of a signed index type
//   cuo::vec_bytes<N>                             N-byte aligned raw vector (N = 1..16), for loads
//   cuo::vec_load<V>(p)                           one whole-vector load (checked; one access in simt)
//   cuo::vec_store(p, v)                          one whole-vector store (the same)
//   cuo::vec_align_check<V>(p)                    before a whole-vector load: alignment checked on simt
//   cuo::shfl_xor(v, mask, width)                 full-warp __shfl_xor_sync for 32/64-bit ints
//   cuo::smem_split(...)                          carve a (key array, index array) pair out of
//                                                 dynamic shared memory
//   cuo::Odometer<U, NDIM_MAX, LID>              walks a mixed-radix position with a constant
//                                                 stride, keeping a memory offset (and a second
//                                                 linear sum, e.g. a logical index) up to date
//                                                 without divisions
//   CUO_FIELD_AT(S, field, offset)               static_assert of a parameter struct's layout
//                                                 against its host (NumPy) mirror
#pragma once

// No system header at all: NVRTC finds <cuda_fp16.h> only with the CUDA headers on its include
// path, which a user's install may lack. float16 values are only ever read as bits, so the
// kernels are instantiated on cupyops_half (below) instead of __half.

#ifndef __forceinline__
#define __forceinline__ inline
#endif
#ifndef __launch_bounds__
#define __launch_bounds__(...)
#endif

// A field of a kernel parameter struct sits at the byte offset that its host mirror (a NumPy
// structured dtype, align=True) gives it: the host packs the struct by those offsets.
// Checked where the layout test compiles the module (-DCUO_CHECK_LAYOUT, tests/test_structs.py,
// NVRTC 13.5): the NVRTC that CuPy loaded on an H200 machine knew neither offsetof nor
// __builtin_offsetof, and every module failed to compile. sizeof is checked everywhere.
#if defined(CUO_CHECK_LAYOUT)
#define CUO_FIELD_AT(S, field, off) \
    static_assert(__builtin_offsetof(S, field) == (off), \
                  #S "." #field ": not at its host mirror's offset")
#else
#define CUO_FIELD_AT(S, field, off) static_assert(true, "")
#endif

namespace cuo {

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;
typedef int i32;
typedef long long i64;

// 128 bits as two words, hi the more significant: complex128's storage (lo = real part, hi =
// imaginary part) and its ordering keys. 8-byte aligned, so it never causes a 16-byte access.
struct u128 {
    u64 lo, hi;
};
__device__ __forceinline__ bool operator==(const u128& a, const u128& b)
{
    return a.lo == b.lo && a.hi == b.hi;
}
__device__ __forceinline__ bool operator!=(const u128& a, const u128& b) { return !(a == b); }
__device__ __forceinline__ bool operator>(const u128& a, const u128& b)
{
    return a.hi != b.hi ? a.hi > b.hi : a.lo > b.lo;
}
__device__ __forceinline__ u128 operator^(const u128& a, const u128& b)
{
    u128 r;
    r.lo = a.lo ^ b.lo;
    r.hi = a.hi ^ b.hi;
    return r;
}
__device__ __forceinline__ u128 operator~(const u128& a)
{
    u128 r;
    r.lo = ~a.lo;
    r.hi = ~a.hi;
    return r;
}

template <int N> struct uint_of;
template <> struct uint_of<16> { typedef u128 type; };
template <> struct uint_of<1> { typedef u8 type; };
template <> struct uint_of<2> { typedef u16 type; };
template <> struct uint_of<4> { typedef u32 type; };
template <> struct uint_of<8> { typedef u64 type; };

template <class I> struct unsigned_of;
template <> struct unsigned_of<i32> { typedef u32 type; };
template <> struct unsigned_of<i64> { typedef u64 type; };

template <class I> __device__ __forceinline__ I index_max();
template <> __device__ __forceinline__ i32 index_max<i32>() { return 0x7fffffff; }
template <> __device__ __forceinline__ i64 index_max<i64>() { return 0x7fffffffffffffffLL; }

// N bytes, aligned to N: one load instruction of that width (N a power of two, <= 16).
template <int N> struct alignas(N) vec_bytes { u8 b[N]; };
template <> struct alignas(16) vec_bytes<16> { u64 w[2]; };
template <> struct alignas(8) vec_bytes<8> { u64 w[1]; };
template <> struct alignas(4) vec_bytes<4> { u32 w[1]; };
template <> struct alignas(2) vec_bytes<2> { u16 w[1]; };
template <> struct alignas(1) vec_bytes<1> { u8 w[1]; };

// Before a load of a whole raw vector V at p: a GPU issues it as one instruction of sizeof(V)
// bytes, which faults unless p is a multiple of that. Under cupyops.simt the host compiler may
// split the copy into narrower loads, so the whole vector's alignment is checked here; on a GPU
// this is nothing. (A check, not a wrapper: the load itself stays as written, so the host code
// and its traffic counts do not change.)
template <class V>
__device__ __forceinline__ void vec_align_check(const void* p)
{
#ifdef CUPYOPS_SIMT
    __simt_vector_access(p, sizeof(V));
#else
    (void)p;
#endif
}

// A whole raw vector V loaded from p (alignment checked as above). A GPU issues one load of
// sizeof(V) bytes. Under cupyops.simt a 16-byte vector goes through a GCC vector type, which
// g++ always reads with one 16-byte access: a struct copy may be split into two 8-byte loads,
// which the traffic model would count as two warp accesses to the same sectors.
template <class V>
__device__ __forceinline__ V vec_load(const void* p)
{
    vec_align_check<V>(p);
#ifdef CUPYOPS_SIMT
    if constexpr (sizeof(V) == 16) {
        typedef u64 v2 __attribute__((vector_size(16)));
        const v2 w = *reinterpret_cast<const v2*>(p);
        V v;
        v.w[0] = w[0];
        v.w[1] = w[1];
        return v;
    }
#endif
    return *reinterpret_cast<const V*>(p);
}

// A whole raw vector v stored at p (alignment checked as above): one store of sizeof(V) bytes,
// under cupyops.simt too (a 16-byte vector through a GCC vector type, as in vec_load).
template <class V>
__device__ __forceinline__ void vec_store(V* p, const V& v)
{
    vec_align_check<V>(p);
#ifdef CUPYOPS_SIMT
    if constexpr (sizeof(V) == 16) {
        typedef u64 v2 __attribute__((vector_size(16)));
        v2 w;
        w[0] = v.w[0];
        w[1] = v.w[1];
        *reinterpret_cast<v2*>(p) = w;
        return;
    }
#endif
    *p = v;
}

// Element j (of size S bytes) of a raw vector, as an unsigned integer of S bytes.
template <int S, int N>
__device__ __forceinline__ typename uint_of<S>::type vec_elem(const vec_bytes<N>& v, int j)
{
    typedef typename uint_of<S>::type B;
    if constexpr (S == 16) {
        B r;
        r.lo = v.w[0];
        r.hi = v.w[1];
        return r;
    } else if constexpr (N == 16 && S == 8) {
        return (B)v.w[j];
    } else if constexpr (N >= 8) {
        const u64 w = v.w[(j * S) / 8];
        return (B)(w >> (8 * ((j * S) % 8)));
    } else {
        return (B)(v.w[0] >> (8 * (j * S)));
    }
}

__device__ __forceinline__ u32 shfl_xor(u32 v, int m, int w = 32)
{
    return __shfl_xor_sync(0xffffffffu, v, m, w);
}
__device__ __forceinline__ u64 shfl_xor(u64 v, int m, int w = 32)
{
    return __shfl_xor_sync(0xffffffffu, v, m, w);
}
__device__ __forceinline__ i32 shfl_xor(i32 v, int m, int w = 32)
{
    return __shfl_xor_sync(0xffffffffu, v, m, w);
}
__device__ __forceinline__ i64 shfl_xor(i64 v, int m, int w = 32)
{
    return __shfl_xor_sync(0xffffffffu, v, m, w);
}
__device__ __forceinline__ u128 shfl_xor(u128 v, int m, int w = 32)
{
    u128 r;
    r.lo = __shfl_xor_sync(0xffffffffu, v.lo, m, w);
    r.hi = __shfl_xor_sync(0xffffffffu, v.hi, m, w);
    return r;
}

// Dynamic shared memory as `n` keys followed (8-byte aligned) by `n` indices.
template <class K, class I>
__device__ __forceinline__ void smem_split(unsigned char* base, int n, K*& keys, I*& idx)
{
    keys = reinterpret_cast<K*>(base);
    const int kbytes = (int)(((unsigned)n * (unsigned)sizeof(K) + 7u) & ~7u);
    idx = reinterpret_cast<I*>(base + kbytes);
}

// Walks position p = start, start + step, ... over a mixed-radix list of dimensions
// (innermost first: size[d], stride[d], weight[d]), keeping
//   off = sum(digit[d] * stride[d])   and, if LID, lid = sum(digit[d] * weight[d])
// with additions only. `step` is given by its digits (step_digit[d], top digit unbounded), so
// advancing is a carry-propagating add. Offsets are in the unsigned type U, which wraps:
// intermediate values may pass its range, final ones are exact. Digits are 32-bit and the top
// digit (which never wraps) is not stored, so every dimension but the outermost must have
// fewer than 2**31 elements (the planners guarantee it).
template <class U, int NMAX, bool LID>
struct Odometer {
    u32 dig[NMAX - 1];
    U off;
    U lid;

    __device__ __forceinline__ void init(U p, int nd, const long long* size,
                                         const long long* stride, const long long* weight)
    {
        off = 0;
        lid = 0;
#pragma unroll
        for (int d = 0; d < NMAX; ++d) {
            if (d < NMAX - 1) dig[d] = 0;
            if (d < nd) {
                U q;
                if (d == nd - 1) {
                    q = p;
                } else {
                    const U n = (U)size[d];
                    const U t = p / n;
                    q = p - t * n;
                    p = t;
                    if (d < NMAX - 1) dig[d] = (u32)q;
                }
                off += q * (U)stride[d];
                if (LID) lid += q * (U)weight[d];
            }
        }
    }

    __device__ __forceinline__ void advance(int nd, const long long* step_digit,
                                            const long long* size, const long long* stride,
                                            const long long* weight)
    {
        u32 carry = 0;
#pragma unroll
        for (int d = 0; d < NMAX; ++d) {
            if (d < nd) {
                if (d == nd - 1 || d == NMAX - 1) {
                    const U a = (U)step_digit[d] + (U)carry;
                    off += a * (U)stride[d];
                    if (LID) lid += a * (U)weight[d];
                } else {
                    const u32 n = (u32)size[d];
                    const u32 a = (u32)step_digit[d] + carry;
                    u32 g = dig[d] + a;
                    U delta = (U)a;
                    carry = 0;
                    if (g >= n) {
                        g -= n;
                        delta -= (U)n;
                        carry = 1;
                    }
                    dig[d] = g;
                    off += delta * (U)stride[d];
                    if (LID) lid += delta * (U)weight[d];
                }
            }
        }
    }
};

}  // namespace cuo

// ---------------------------------------------------------------------------------------------
// Complex value types (appended by the nonzero family; cupyops.core.modules.ctype maps complex64 /
// complex128 to these names). Plain structs laid out like NumPy's complex: real then imaginary.
struct __align__(8) cupyops_complex64 { float re, im; };

// IEEE binary16 as its bits (cupyops.core.modules.ctype maps float16 here): 2 bytes, 2-aligned.
struct __align__(2) cupyops_half { unsigned short bits; };
// bfloat16 as its bits (cupyops.core.modules.ctype maps ml_dtypes' bfloat16 here): the upper half
// of a float32, 2 bytes, 2-aligned. Only ever read as bits, like cupyops_half.
struct __align__(2) cupyops_bfloat16 { unsigned short bits; };
struct __align__(16) cupyops_complex128 { double re, im; };

// datetime64 / timedelta64 of any unit, as its int64 count (cupyops.core.modules.ctype maps the
// canonical timedelta64[ns] here; argreduce views every unit as it): NaT is INT64_MIN.
struct __align__(8) cupyops_datetime { long long v; };
