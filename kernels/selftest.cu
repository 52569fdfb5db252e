// selftest.cu — tiny kernels that exercise the module machinery, not an operator.
//
// Computes:
//   selftest_count<T, INVERT>: adds to *count the number of elements x[i * stride], i < n, that
//     are nonzero (INVERT = false) or zero (INVERT = true), by warp ballot + __popc + atomicAdd.
//   selftest_iota<T, K>: y[i] = T(i * K) for i < n (a grid-stride loop).
// Template parameters: T, the value type (bool, integer types, __half, float, double);
//   INVERT, count zeros instead of nonzeros; K, an int multiplier.
// Instantiated by: cupyops._modules.SELFTEST_FAMILY (used only by tests/test_modules.py,
//   tests/test_backend.py and tests/test_nvrtc_compile.py; never registered by the library).
//
// float is tested through its bit pattern: CuPy compiles with -ftz=true, under which a float
// comparison (setp.ftz.f32) would take a subnormal for zero.
#include <cuda_fp16.h>

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
__device__ __forceinline__ bool selftest_nonzero<__half>(__half v)
{
    return (__half_as_ushort(v) & 0x7fffu) != 0u;
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
        y[i] = T(i * K);
}
