"""cupyops.simt: CUDA C++ constructs kernel sources use (they must compile and run unchanged)."""
import functools
import threading

import numpy as np
import pytest

import cupyops.simt as simt

SRC = r'''
#include <cuda_runtime.h>
#include <cuda_fp16.h>

typedef long long i64;
__constant__ float kTable[4] = {1.5f, 2.5f, 3.5f, 4.5f};
__device__ int g_counter;
__device__ unsigned int g_retired = 0;

template <typename T>
__device__ __forceinline__ T square(T v) { return v * v; }

static __device__ __noinline__ int twice(int v) { return 2 * v; }

struct __align__(16) Pack { float a, b; int c; int d; };

extern "C" __global__ void __launch_bounds__(128) constructs(const float* __restrict__ x, float* __restrict__ y,
                                                              int* counts) {
  static __shared__ float tile[128];
  __shared__ volatile int vflag;
  int t = threadIdx.x;
  tile[t] = x[t] + kTable[t & 3];
  if (t == 0) vflag = 0;
  __syncthreads();
  y[t] = square(tile[127 - t]) + (float)twice(t);
  atomicAdd(&g_counter, 1);
  __syncthreads();
  if (t == 0) counts[0] = atomicAdd(&g_counter, 0);
}

extern "C" __global__ void reset_counter() { g_counter = 0; }

// The classic "last block" pattern with a __device__ retirement counter.
extern "C" __global__ void last_block(const int* x, int* partial, int* total) {
  __shared__ bool am_last;
  int t = threadIdx.x;
  int s = __syncthreads_count(x[blockIdx.x * blockDim.x + t] > 0);
  if (t == 0) {
    partial[blockIdx.x] = s;
    __threadfence();
    unsigned int ticket = atomicInc(&g_retired, gridDim.x);
    am_last = (ticket == gridDim.x - 1);
  }
  __syncthreads();
  if (am_last && t == 0) {
    int sum = 0;
    for (int b = 0; b < gridDim.x; ++b) sum += ((volatile int*)partial)[b];
    total[0] = sum;
    g_retired = 0;
  }
}

// Warp-synchronous shared reduction, the Volta-safe way (read, __syncwarp, write, __syncwarp).
extern "C" __global__ void volatile_reduce(const int* x, int* out) {
  __shared__ int s[64];
  int t = threadIdx.x;
  s[t] = x[t];
  __syncthreads();
  if (t < 32) {
    volatile int* v = s;
    int a = v[t] + v[t + 32]; __syncwarp(); v[t] = a; __syncwarp();
    for (int off = 16; off > 0; off >>= 1) {
      a = v[t] + v[(t + off) & 31]; __syncwarp(); v[t] = a; __syncwarp();
    }
  }
  if (t == 0) out[0] = s[0];
}

// The legacy form that relied on lockstep execution: racy since Volta (t reads v[t+16] while
// t+16 writes it).  The emulation must expose it under some schedule.
extern "C" __global__ void racy_reduce(const int* x, int* out) {
  __shared__ int s[64];
  int t = threadIdx.x;
  s[t] = x[t];
  __syncthreads();
  if (t < 32) {
    volatile int* v = s;
    v[t] += v[t + 32]; __syncwarp();
    v[t] += v[t + 16]; __syncwarp();
    v[t] += v[t + 8]; __syncwarp();
    v[t] += v[t + 4]; __syncwarp();
    v[t] += v[t + 2]; __syncwarp();
    v[t] += v[t + 1]; __syncwarp();
  }
  if (t == 0) out[0] = s[0];
}

extern "C" __global__ void pack_kernel(const Pack* p, float* out) {
  Pack q = p[threadIdx.x];
  out[threadIdx.x] = q.a * q.b + q.c - q.d;
}

extern "C" __global__ void prints(int v) {
  if (threadIdx.x == 0) printf("simt printf %d %s\n", v, "ok");
}

extern "C" __global__ void dims(int* out) {
  dim3 b = blockDim;
  uint3 t = threadIdx;
  unsigned lin = t.x + b.x * (t.y + b.y * t.z);
  out[lin] = (int)(lin * 10 + (warpSize == 32));
}

template <int N, typename T>
__global__ void unrolled(const T* x, T* y) {
  T acc = T(0);
#pragma unroll
  for (int i = 0; i < N; ++i) acc += x[threadIdx.x * N + i];
  y[threadIdx.x] = acc;
}

template <typename A, typename B> __device__ int both(A a, B b) { return a > 0 && b > 0; }
extern "C" __global__ void commas(const int* x, unsigned* out) {
  int v = x[threadIdx.x];
  out[threadIdx.x] = __ballot_sync(0xffffffffu, both<int, int>(v, 1));
  int c = __syncthreads_count(both<int, long>(v, 1L));
  out[32 + threadIdx.x] = c;
  out[64 + threadIdx.x] = __shfl_sync(0xffffffffu, both<int, int>(v, v), 0);
}

extern "C" __global__ void half_io(const __half* x, __half* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    __half v = x[i];
    y[i] = __hmax(v, __float2half(0.0f)) + __float2half(1.0f);
  }
}
'''


@functools.lru_cache(maxsize=None)
def mod():
    return simt.RawModule(code=SRC, name_expressions=("unrolled<4, float>", "unrolled<8, long long>"))


def fn(name):
    return mod().get_function(name)


def test_constant_device_globals_static_shared():
    x = np.arange(128, dtype=np.float32)
    y = np.zeros_like(x)
    counts = np.zeros(1, np.int32)
    fn("reset_counter")(1, 1, ())
    fn("constructs")(1, 128, (x, y, counts))
    table = np.array([1.5, 2.5, 3.5, 4.5], np.float32)
    tile = x + table[np.arange(128) & 3]
    np.testing.assert_allclose(y, tile[::-1] ** 2 + 2 * np.arange(128))
    assert counts[0] == 128


@pytest.mark.parametrize("sched", ["forward", "reverse", 5])
def test_last_block_pattern(sched):
    x = (np.arange(8 * 64) % 3 == 0).astype(np.int32)
    partial = np.zeros(8, np.int32)
    total = np.zeros(1, np.int32)
    with simt.schedule(sched):
        fn("last_block")(8, 64, (x, partial, total))
    assert total[0] == x.sum()
    np.testing.assert_array_equal(partial, x.reshape(8, 64).sum(1))


@pytest.mark.parametrize("sched", ["forward", "reverse", 2])
def test_volatile_warp_reduce(sched):
    x = np.arange(64, dtype=np.int32) * 3
    out = np.zeros(1, np.int32)
    with simt.schedule(sched):
        fn("volatile_reduce")(1, 64, (x, out))
    assert out[0] == x.sum()


def test_lockstep_race_is_exposed():
    x = np.arange(64, dtype=np.int32) * 3
    results = []
    for sched in ["forward", "reverse", 2, 3]:
        out = np.zeros(1, np.int32)
        with simt.schedule(sched):
            fn("racy_reduce")(1, 64, (x, out))
        results.append(int(out[0]))
    assert any(r != x.sum() for r in results), results


def test_aligned_struct_array():
    dt = np.dtype([("a", np.float32), ("b", np.float32), ("c", np.int32), ("d", np.int32)], align=True)
    p = np.zeros(32, dt)
    p["a"], p["b"], p["c"], p["d"] = np.arange(32), 2, 5, 1
    out = np.zeros(32, np.float32)
    fn("pack_kernel")(1, 32, (p, out))
    np.testing.assert_array_equal(out, np.arange(32) * 2 + 4)


def test_printf(capfd):
    fn("prints")(1, 4, (np.int32(7),))
    import ctypes
    ctypes.CDLL(None).fflush(None)
    assert "simt printf 7 ok" in capfd.readouterr().out


def test_dim3_uint3():
    out = np.zeros(4 * 3 * 2, np.int32)
    fn("dims")(1, (4, 3, 2), (out,))
    np.testing.assert_array_equal(out, np.arange(24) * 10 + 1)


def test_template_name_expressions():
    x = np.arange(32 * 4, dtype=np.float32)
    y = np.zeros(32, np.float32)
    fn("unrolled<4, float>")(1, 32, (x, y))
    np.testing.assert_array_equal(y, x.reshape(32, 4).sum(1))
    xl = np.arange(32 * 8, dtype=np.int64) * (1 << 40)
    yl = np.zeros(32, np.int64)
    fn("unrolled<8, long long>")(1, 32, (xl, yl))
    np.testing.assert_array_equal(yl, xl.reshape(32, 8).sum(1))


def test_template_commas_in_builtin_arguments():
    x = (np.arange(32) % 3).astype(np.int32)
    out = np.zeros(96, np.uint32)
    fn("commas")(1, 32, (x, out))
    ballot = sum(1 << i for i in range(32) if x[i] > 0)
    assert (out[:32] == ballot).all() and (out[32:64] == np.count_nonzero(x)).all() and (out[64:] == 0).all()


def test_half_buffers():
    x = np.linspace(-3, 3, 100).astype(np.float16)
    y = np.zeros_like(x)
    fn("half_io")(1, 128, (x, y, np.int32(100)))
    np.testing.assert_array_equal(y, (np.maximum(x, np.float16(0)) + np.float16(1)).astype(np.float16))


def test_launch_from_other_threads():
    errors = []

    def work(k):
        try:
            for _ in range(5):
                x = np.full(64, k, np.int32)
                out = np.zeros(1, np.int32)
                fn("volatile_reduce")(1, 64, (x, out))
                assert out[0] == 64 * k
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    ts = [threading.Thread(target=work, args=(k,)) for k in range(3)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors


def test_disk_and_memory_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CUPYOPS_SIMT_CACHE", str(tmp_path))
    src = 'extern "C" __global__ void k(int* p) { p[threadIdx.x] = threadIdx.x * 3; }'
    m1 = simt.RawModule(code=src)
    m1.get_function("k")
    sos = list(tmp_path.glob("mod-*.so"))
    assert len(sos) == 1
    mtime = sos[0].stat().st_mtime_ns
    m2 = simt.RawModule(code=src)
    p = np.zeros(8, np.int32)
    m2.get_function("k")(1, 8, (p,))
    np.testing.assert_array_equal(p, np.arange(8) * 3)
    assert sos[0].stat().st_mtime_ns == mtime
    m3 = simt.RawModule(code=src, options=("-DX=1",))  # other options: another library
    m3.get_function("k")
    assert len(list(tmp_path.glob("mod-*.so"))) == 2


PERF_SRC = r'''
extern "C" __global__ void block_sum(const float* x, float* out, int n) {
  __shared__ float s[256];
  int t = threadIdx.x;
  int i = blockIdx.x * blockDim.x + t;
  s[t] = i < n ? x[i] : 0.0f;
  __syncthreads();
  for (int st = blockDim.x / 2; st > 0; st >>= 1) {
    if (t < st) s[t] += s[t + st];
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = s[0];
}
'''


@pytest.mark.parametrize("sched", ["forward", 7])
def test_large_grid_speed(sched):
    import time
    f = simt.RawModule(code=PERF_SRC).get_function("block_sum")
    nb = 400
    x = np.random.default_rng(0).random(nb * 256).astype(np.float32)
    out = np.zeros(nb, np.float32)
    t0 = time.perf_counter()
    with simt.schedule(sched):
        f(nb, 256, (x, out, np.int32(x.size)))
    dt = time.perf_counter() - t0
    np.testing.assert_allclose(out, x.reshape(nb, 256).sum(1), rtol=1e-5)
    st = simt.last_launch_stats()
    assert st["blocks"] == nb and st["threads"] == nb * 256
    assert st["switches"] >= 2 * 9 * nb * 256  # 9 barriers per thread
    assert dt < 10, dt


def test_context_switch_rate():
    assert simt.context_switch_rate(200_000) > 1e6  # well under 1 us per switch
