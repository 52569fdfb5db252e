"""cupyops.simt: compilation, launch geometry, arguments, shared memory limits."""
import functools

import numpy as np
import pytest

import cupyops.simt as simt

SRC = r'''
#include <cuda_fp16.h>
struct Params { int n; double scale; long long off; };

extern "C" __global__ void add_one(const float* __restrict__ x, float* __restrict__ y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] + 1.0f;
}

// writes every (block, thread) coordinate: out[linear global thread id] = packed ids
extern "C" __global__ void coords(int* out) {
  long long b = blockIdx.x + (long long)gridDim.x * (blockIdx.y + (long long)gridDim.y * blockIdx.z);
  int t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  int nt = blockDim.x * blockDim.y * blockDim.z;
  int* o = out + 8 * (b * nt + t);
  o[0] = blockIdx.x; o[1] = blockIdx.y; o[2] = blockIdx.z;
  o[3] = threadIdx.x; o[4] = threadIdx.y; o[5] = threadIdx.z;
  o[6] = gridDim.x * 10000 + gridDim.y * 100 + gridDim.z;
  o[7] = blockDim.x * 10000 + blockDim.y * 100 + blockDim.z + warpSize * 0;
}

extern "C" __global__ void struct_arg(Params p, double* out) {
  out[threadIdx.x] = p.n * p.scale + (double)p.off;
}

extern "C" __global__ void dyn_reverse(const int* x, int* y) {
  extern __shared__ __align__(16) int buf[];
  int t = threadIdx.x;
  buf[t] = x[blockIdx.x * blockDim.x + t];
  __syncthreads();
  y[blockIdx.x * blockDim.x + t] = buf[blockDim.x - 1 - t];
}

extern "C" __global__ void dyn_touch(unsigned char* out, int nbytes) {
  extern __shared__ unsigned char smem[];
  for (int i = threadIdx.x; i < nbytes; i += blockDim.x) smem[i] = (unsigned char)(i * 7);
  __syncthreads();
  unsigned s = 0;
  for (int i = threadIdx.x; i < nbytes; i += blockDim.x) s += smem[i];
  atomicAdd((unsigned*)out, s);
}

template <typename T>
__global__ void dyn_template(const T* x, T* y) {
  extern __shared__ __align__(sizeof(T)) unsigned char smem_raw[];
  T* smem = reinterpret_cast<T*>(smem_raw);
  smem[threadIdx.x] = x[threadIdx.x];
  __syncthreads();
  y[threadIdx.x] = smem[blockDim.x - 1 - threadIdx.x];
}

extern "C" __global__ void big_static(int* out) {
  __shared__ int big[8192];  // 32 KiB static
  big[threadIdx.x] = threadIdx.x;
  __syncthreads();
  out[threadIdx.x] = big[(threadIdx.x + 1) % blockDim.x];
}

extern "C" __global__ void write_at(float* p, long long i, float v) { p[i] = v; }

extern "C" __global__ void strided_sum(const float* x, long long stride, int n, float* out) {
  float s = 0.0f;
  for (int i = 0; i < n; ++i) s += x[i * stride];
  out[0] = s;
}

#ifndef FOO
#error FOO must be defined
#endif
extern "C" __global__ void get_foo(int* out) { out[0] = FOO; }

template <typename T, bool NEG>
__global__ void tmpl_scale(const T* x, T* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = NEG ? -x[i] * T(2) : x[i] * T(2);
}
'''

OPTS = ("-DFOO=42", "--gpu-architecture=sm_90", "-lineinfo", "--std=c++17", "--use_fast_math",
        "-arch", "sm_80")
EXPRS = ("tmpl_scale<float, true>", "tmpl_scale<double, false>", "dyn_template<double>")


@functools.lru_cache(maxsize=None)
def mod():
    return simt.RawModule(code=SRC, options=OPTS, name_expressions=EXPRS)


def fn(name):
    return mod().get_function(name)


def test_add_one_1d():
    x = np.arange(1000, dtype=np.float32)
    y = np.zeros_like(x)
    fn("add_one")((4,), (256,), (x, y, np.int32(1000)))
    np.testing.assert_array_equal(y, x + 1)


def test_options_and_name_expressions():
    out = np.zeros(1, np.int32)
    fn("get_foo")(1, 1, (out,))
    assert out[0] == 42
    x = np.arange(10, dtype=np.float32)
    y = np.zeros_like(x)
    fn("tmpl_scale<float, true>")(1, 32, (x, y, np.int32(10)))
    np.testing.assert_array_equal(y, -2 * x)
    xd = np.arange(10, dtype=np.float64)
    yd = np.zeros_like(xd)
    fn("tmpl_scale<double, false>")(1, 32, (xd, yd, np.int32(10)))
    np.testing.assert_array_equal(yd, 2 * xd)


@pytest.mark.parametrize("grid,block", [
    (3, 5), ((2, 3), (4, 2)), ((2, 2, 3), (3, 2, 4)), ((1, 1, 2), (1, 1, 64)), ((5, 1), (33,)),
])
def test_grid_block_coordinates(grid, block):
    g = (grid,) if isinstance(grid, int) else grid
    b = (block,) if isinstance(block, int) else block
    g = tuple(g) + (1,) * (3 - len(g))
    b = tuple(b) + (1,) * (3 - len(b))
    nb, nt = int(np.prod(g)), int(np.prod(b))
    out = np.full((nb * nt, 8), -1, np.int32)
    fn("coords")(grid, block, (out,))
    exp = []
    for bz in range(g[2]):
        for by in range(g[1]):
            for bx in range(g[0]):
                for tz in range(b[2]):
                    for ty in range(b[1]):
                        for tx in range(b[0]):
                            exp.append([bx, by, bz, tx, ty, tz, g[0] * 10000 + g[1] * 100 + g[2],
                                        b[0] * 10000 + b[1] * 100 + b[2]])
    np.testing.assert_array_equal(out, np.array(exp, np.int32))


def test_struct_by_value():
    dt = np.dtype([("n", np.int32), ("scale", np.float64), ("off", np.int64)], align=True)
    p = np.array((3, 1.5, 10), dtype=dt)[()]
    assert isinstance(p, np.void)
    out = np.zeros(4)
    fn("struct_arg")(1, 4, (p, out))
    np.testing.assert_array_equal(out, 14.5)


def test_arity_and_size_mismatch():
    out = np.zeros(4)
    dt = np.dtype([("n", np.int32), ("scale", np.float64), ("off", np.int64)], align=True)
    p = np.array((3, 1.5, 10), dtype=dt)[()]
    with pytest.raises(TypeError, match="takes 2 arguments"):
        fn("struct_arg")(1, 4, (p,))
    with pytest.raises(TypeError, match="sizeof"):
        fn("struct_arg")(1, 4, (np.int32(3), out))
    with pytest.raises(TypeError, match="argument #2"):
        fn("add_one")(1, 4, (out.astype(np.float32), out.astype(np.float32), 5))
    with pytest.raises(TypeError, match="argument #2"):
        fn("add_one")(1, 4, (out.astype(np.float32), out.astype(np.float32), np.int64(5)))
    with pytest.raises(TypeError, match="argument #0"):
        fn("add_one")(1, 4, ([1.0], out.astype(np.float32), np.int32(5)))
    with pytest.raises(TypeError, match="pointer"):
        fn("add_one")(1, 4, (out, np.float64(1.0), np.int32(5)))


def test_dynamic_shared_memory():
    x = np.arange(4 * 128, dtype=np.int32)
    y = np.zeros_like(x)
    fn("dyn_reverse")(4, 128, (x, y), shared_mem=128 * 4)
    np.testing.assert_array_equal(y, x.reshape(4, 128)[:, ::-1].ravel())
    with simt.schedule(7):
        y[:] = 0
        fn("dyn_reverse")(4, 128, (x, y), shared_mem=128 * 4)
    np.testing.assert_array_equal(y, x.reshape(4, 128)[:, ::-1].ravel())


def test_dynamic_shared_in_template_with_nested_align():
    x = np.arange(64, dtype=np.float64)
    y = np.zeros_like(x)
    fn("dyn_template<double>")(1, 64, (x, y), shared_mem=64 * 8)
    np.testing.assert_array_equal(y, x[::-1])


def test_dynamic_shared_out_of_bounds():
    x = np.arange(128, dtype=np.int32)
    y = np.zeros_like(x)
    with pytest.raises(simt.OutOfBoundsError):
        fn("dyn_reverse")(1, 128, (x, y), shared_mem=127 * 4)


def test_shared_limit_and_opt_in():
    m = simt.RawModule(code=SRC.replace("big_static", "big_static2"), options=("-DFOO=1",))
    f = m.get_function("dyn_touch")
    out = np.zeros(1, np.uint32)
    f(1, 64, (out, np.int32(1000)), shared_mem=1000)
    assert out[0] == sum((i * 7) & 0xFF for i in range(1000))
    limit = 48 * 1024 - f.shared_size_bytes
    f(1, 64, (out, np.int32(16)), shared_mem=limit)
    with pytest.raises(simt.LaunchConfigError):
        f(1, 64, (out, np.int32(16)), shared_mem=limit + 1)
    with pytest.raises(ValueError):  # LaunchConfigError is a ValueError
        f(1, 64, (out, np.int32(16)), shared_mem=100_000)
    f.max_dynamic_shared_size_bytes = 100_000
    out[:] = 0
    f(1, 64, (out, np.int32(100_000)), shared_mem=100_000)
    assert out[0] == sum((i * 7) & 0xFF for i in range(100_000))
    with pytest.raises(simt.LaunchConfigError):
        f(1, 64, (out, np.int32(16)), shared_mem=100_001)
    with pytest.raises(simt.LaunchConfigError):
        f.max_dynamic_shared_size_bytes = 228 * 1024


def test_static_shared_counts_toward_limit():
    f = fn("big_static")
    assert f.shared_size_bytes >= 32 * 1024
    out = np.zeros(64, np.int32)
    f(1, 64, (out,))
    np.testing.assert_array_equal(out, (np.arange(64) + 1) % 64)
    with pytest.raises(simt.LaunchConfigError):
        f(1, 64, (out,), shared_mem=20 * 1024)


@pytest.mark.parametrize("grid,block", [
    (1, 1025), (1, (32, 33)), (1, (1, 1, 65)), (0, 32), (1, 0), (-1, 32), ((1, 2, 3, 4), 32), (1, 32.0),
    ((1, 0), 32),
])
def test_bad_launch_config(grid, block):
    out = np.zeros(1, np.int32)
    with pytest.raises(simt.LaunchConfigError):
        fn("get_foo")(grid, block, (out,))


def test_huge_lazy_buffer_offset_beyond_2gib():
    big = np.zeros(2**31 // 4 + 4096, dtype=np.float32)  # lazily allocated by the OS
    view = big[2**31 // 4 + 100:]
    assert view.__array_interface__["data"][0] - big.__array_interface__["data"][0] > 2**31 - 1
    fn("write_at")(1, 1, (view, np.int64(5), np.float32(3.5)))
    assert big[2**31 // 4 + 105] == 3.5
    with pytest.raises(simt.OutOfBoundsError):
        fn("write_at")(1, 1, (view, np.int64(view.size), np.float32(1.0)))
    with pytest.raises(simt.OutOfBoundsError):
        fn("write_at")(1, 1, (view, np.int64(-1), np.float32(1.0)))  # before the view


def test_negative_and_zero_strides():
    base = np.arange(10, dtype=np.float32)
    rev = base[::-1]
    out = np.zeros(1, np.float32)
    fn("strided_sum")(1, 1, (rev, np.int64(-1), np.int32(10), out))
    assert out[0] == 45
    # a negative stride array reaches downwards only: one step further is out of bounds
    with pytest.raises(simt.OutOfBoundsError):
        fn("strided_sum")(1, 1, (rev, np.int64(-1), np.int32(11), out))
    bcast = np.broadcast_to(np.float32(2.0), (5,))
    assert bcast.strides == (0,)
    fn("strided_sum")(1, 1, (bcast, np.int64(0), np.int32(5), out))
    assert out[0] == 10
    with pytest.raises(simt.OutOfBoundsError):
        fn("strided_sum")(1, 1, (bcast, np.int64(1), np.int32(2), out))
    empty = np.zeros(0, np.float32)
    fn("strided_sum")(1, 1, (empty, np.int64(1), np.int32(0), out))
    with pytest.raises(simt.OutOfBoundsError):
        fn("strided_sum")(1, 1, (empty, np.int64(1), np.int32(1), out))


def test_non_contiguous_2d_view():
    a = np.arange(100, dtype=np.float32).reshape(10, 10)
    col = a[:, 3]
    out = np.zeros(1, np.float32)
    fn("strided_sum")(1, 1, (col, np.int64(10), np.int32(10), out))
    assert out[0] == col.sum()


def test_compile_error_has_log():
    with pytest.raises(simt.CompileError) as ei:
        simt.RawModule(code='extern "C" __global__ void k(int* p) { p[0] = undefined_thing; }').get_function("k")
    assert "undefined_thing" in ei.value.log
    assert isinstance(ei.value, simt.SimtError) and isinstance(ei.value, RuntimeError)


def test_unknown_function():
    with pytest.raises(simt.SimtError, match="not found"):
        mod().get_function("nope")


def test_kernel_declared_through_a_macro():
    src = r'''
    #define KERNEL(name) extern "C" __global__ void name
    KERNEL(fill)(int* p, int v) { p[threadIdx.x] = v; }
    template <int V> __global__ void fill_t(int* p) { p[threadIdx.x] = V; }
    '''
    m = simt.RawModule(code=src)
    p = np.zeros(4, np.int32)
    m.get_function("fill")(1, 4, (p, np.int32(9)))
    assert (p == 9).all()
    m.get_function("fill_t<3>")(1, 4, (p,))  # an expression not declared up front
    assert (p == 3).all()
    m.get_function("fill")(1, 4, (p, np.int32(5)))
    assert (p == 5).all()
    with pytest.raises(simt.SimtError, match="not found"):
        m.get_function("missing_kernel")


def test_rawkernel_and_namespace_scope_extern_shared():
    src = r'''
    extern __shared__ float gsm[];
    namespace ns { __device__ float twice(float v) { return 2 * v; } }
    extern "C" {
    __global__ void k(float* y) { gsm[threadIdx.x] = ns::twice(threadIdx.x); __syncthreads();
                                  y[threadIdx.x] = gsm[blockDim.x - 1 - threadIdx.x]; }
    }
    '''
    k = simt.RawKernel(src, "k")
    y = np.zeros(32, np.float32)
    k(1, 32, (y,), shared_mem=32 * 4)
    np.testing.assert_array_equal(y, 2 * np.arange(32)[::-1])


def test_static_shared_is_attributed_per_kernel():
    src = r'''
    template <int N> __global__ void k(int* p) {
      __shared__ int s[N];
      s[threadIdx.x] = threadIdx.x; __syncthreads(); p[threadIdx.x] = s[(threadIdx.x + 1) % blockDim.x];
    }
    __device__ int helper(int* p) {
      __shared__ double h[16];
      h[threadIdx.x & 15] = p[threadIdx.x]; __syncthreads(); return (int)h[(threadIdx.x + 1) & 15];
    }
    extern "C" __global__ void c1(int* p) {
      __shared__ char big[40000];
      big[threadIdx.x] = 1; __syncthreads(); p[threadIdx.x] = big[(threadIdx.x + 1) % blockDim.x] + helper(p);
    }
    extern "C" __global__ void c2(int* p) { p[threadIdx.x] = 3; }
    '''
    m = simt.RawModule(code=src, name_expressions=("k<1000>", "k<5000>"))
    helper = 16 * 8
    assert m.get_function("k<1000>").shared_size_bytes == 4000 + helper
    assert m.get_function("k<5000>").shared_size_bytes == 20000 + helper
    assert m.get_function("c1").shared_size_bytes == 40000 + helper
    assert m.get_function("c2").shared_size_bytes == helper
    p = np.zeros(32, np.int32)
    m.get_function("c2")(1, 32, (p,), shared_mem=48 * 1024 - helper)  # other kernels' arrays don't count
    with pytest.raises(simt.LaunchConfigError):
        m.get_function("c1")(1, 32, (p,), shared_mem=48 * 1024 - 40000)
    m.get_function("k<1000>")(1, 32, (p,))
    np.testing.assert_array_equal(p, (np.arange(32) + 1) % 32)
