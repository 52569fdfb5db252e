// selftest.cu - tiny kernels that exercise the module machinery, not an operator.
//
// Computes:
//   selftest_count<T, INVERT>: adds to *count the number of elements x[i * stride], i < n, that
//     are nonzero (INVERT = false) or zero (INVERT = true), by warp ballot + __popc + atomicAdd.
//   selftest_iota<T, K>: y[i] = T(i * K) for i < n (a grid-stride loop).
// Template parameters: T, the value type (bool, integer types, cupyops_half = float16 bits,
//   float, double);
//   INVERT, count zeros instead of nonzeros; K, an int multiplier.
// Instantiated by: cupyops.core.modules.SELFTEST_FAMILY (used only by tests/test_modules.py,
//   tests/test_backend.py and tests/test_nvrtc_compile.py; never registered by the library).
//
// float is tested through its bit pattern: CuPy compiles with -ftz=true, under which a float
// comparison (setp.ftz.f32) would take a subnormal for zero.
// No system include: float16 is cupyops_half (bits only, from common.cuh).
#include "common.cuh"

struct selftest_params {
    long long n;
    long long stride;   // in elements
};

template <typename T>
__device__ __forceinline__ bool selftest_nonzero(T v) { return v != T(0); }

template <>
__device__ __forceinline__ bool selftest_nonzero<float>(float v)
{
    return (__float_as_uint(v) << 1) != 0u;   // drop the sign: -0.0 is zero
}

template <>
__device__ __forceinline__ bool selftest_nonzero<cupyops_half>(cupyops_half v)
{
    return (v.bits & 0x7fffu) != 0u;
}

// T(v) for the iota; float16 by hand (round to nearest even; finite results, no subnormals:
// the iota writes integers).
template <typename T>
__device__ __forceinline__ T selftest_from(long long v) { return T(v); }

template <>
__device__ __forceinline__ cupyops_half selftest_from<cupyops_half>(long long v)
{
    const unsigned u = __float_as_uint((float)v);
    const unsigned sign = (u >> 16) & 0x8000u;
    const int e = (int)((u >> 23) & 0xffu) - 127 + 15;
    const unsigned m = u & 0x7fffffu;
    cupyops_half h;
    if ((u & 0x7fffffffu) == 0u) { h.bits = (unsigned short)sign; return h; }
    if (e >= 31) { h.bits = (unsigned short)(sign | 0x7c00u); return h; }
    unsigned r = ((unsigned)e << 10) | (m >> 13);
    const unsigned rest = m & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (r & 1u))) r += 1u;   // may carry into inf: right
    h.bits = (unsigned short)(sign | r);
    return h;
}

template <typename T, bool INVERT>
__global__ void selftest_count(const T* __restrict__ x, selftest_params p,
                               unsigned long long* __restrict__ count)
{
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const bool in = i < p.n;
    bool hit = in && selftest_nonzero<T>(x[in ? i * p.stride : 0]);
    if (INVERT) hit = in && !hit;
    const unsigned ballot = __ballot_sync(0xffffffffu, hit);
    if ((threadIdx.x & 31u) == 0u && ballot != 0u)
        atomicAdd(count, (unsigned long long)__popc(ballot));
}

template <typename T, int K>
__global__ void selftest_iota(T* __restrict__ y, long long n)
{
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step)
        y[i] = selftest_from<T>(i * K);
}
