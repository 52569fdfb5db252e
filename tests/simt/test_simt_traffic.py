"""cupyops.simt: traffic counters (requested bytes, 32-byte sectors per warp access, unique sectors)."""
import functools

import numpy as np
import pytest

import cupyops.simt as simt

SRC = r'''
extern "C" __global__ void copy(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i];
}
extern "C" __global__ void copy_stride2(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[2 * i];
}
extern "C" __global__ void broadcast(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[0];
}
extern "C" __global__ void loop_copy(const double* x, double* y, int n, int reps) {
  // each thread reads reps consecutive rows: accesses of one site are told apart by occurrence
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  double s = 0;
  for (int r = 0; r < reps; ++r) s += x[r * n + i];
  y[i] = s;
}
extern "C" __global__ void shared_only(float* y) {
  __shared__ float s[64];
  s[threadIdx.x] = threadIdx.x;
  __syncthreads();
  if (threadIdx.x == 0) y[0] = s[5];
}
'''


@functools.lru_cache(maxsize=None)
def mod():
    return simt.RawModule(code=SRC)


def fn(name):
    return mod().get_function(name)


N = 32 * 256  # 8192 floats, 32 warps


def aligned(a, align=256):
    """A copy of a whose data starts on an `align`-byte boundary (as cudaMalloc's)."""
    buf = np.empty(a.nbytes + align, np.uint8)
    off = (-buf.ctypes.data) % align
    out = buf[off:off + a.nbytes].view(a.dtype).reshape(a.shape)
    out[...] = a
    assert out.ctypes.data % align == 0
    return out


def test_coalesced_copy_minimum_sectors():
    x = aligned(np.arange(N, dtype=np.float32))
    y = aligned(np.zeros(N, np.float32))
    with simt.record_traffic() as rec:
        fn("copy")(N // 256, 256, (x, y, np.int32(N)))
    assert len(rec.launches) == 1
    t = rec.launches[0]
    assert t.kernel == "copy" and t.grid == (32, 1, 1) and t.block == (256, 1, 1)
    assert t.requested_bytes_load == 4 * N and t.requested_bytes_store == 4 * N
    assert t.sectors_load == 4 * N // 32 and t.sectors_store == 4 * N // 32
    assert t.sectors == t["sectors"] == 2 * (4 * N // 32)
    assert t.unique_sectors_load == N // 8 and t.unique_sectors_store == N // 8
    assert t.unique_sectors == N // 4
    np.testing.assert_array_equal(y, x)


def test_stride2_doubles_load_sectors():
    x = aligned(np.arange(2 * N, dtype=np.float32))
    y = aligned(np.zeros(N, np.float32))
    with simt.record_traffic() as rec:
        fn("copy_stride2")(N // 256, 256, (x, y, np.int32(N)))
    t = rec.launches[0]
    assert t.requested_bytes_load == 4 * N
    assert t.sectors_load == 2 * (4 * N // 32)
    assert t.sectors_store == 4 * N // 32
    assert t.unique_sectors_load == 2 * N * 4 // 32


def test_broadcast_one_sector_per_warp_access():
    x = aligned(np.arange(4, dtype=np.float32))
    y = aligned(np.zeros(N, np.float32))
    with simt.record_traffic() as rec:
        fn("broadcast")(N // 256, 256, (x, y, np.int32(N)))
    t = rec.launches[0]
    assert t.requested_bytes_load == 4 * N
    assert t.sectors_load == N // 32  # one per warp
    assert t.unique_sectors_load == 1


def test_occurrences_of_one_site_are_separate_warp_accesses():
    n, reps = 256, 5
    x = aligned(np.ones(n * reps, np.float64))
    y = aligned(np.zeros(n, np.float64))
    with simt.record_traffic() as rec:
        fn("loop_copy")(1, n, (x, y, np.int32(n), np.int32(reps)))
    t = rec.launches[0]
    # each warp access: 32 doubles = 256 bytes = 8 sectors
    assert t.sectors_load == reps * (n // 32) * 8
    assert t.requested_bytes_load == 8 * n * reps
    np.testing.assert_array_equal(y, reps)


def test_only_device_buffers_count_and_schedule_independent():
    y = np.zeros(1, np.float32)
    with simt.record_traffic() as rec:
        fn("shared_only")(1, 64, (y,))
    t = rec.launches[0]
    assert t.requested_bytes_load == 0 and t.requested_bytes_store == 4 and t.sectors_store == 1
    x = aligned(np.arange(N, dtype=np.float32))
    y = aligned(np.zeros(N, np.float32))
    with simt.record_traffic() as rec:
        for s in ["reverse", 3]:
            with simt.schedule(s):
                fn("copy")(N // 256, 256, (x, y, np.int32(N)))
    assert [r.sectors for r in rec.launches] == [2 * (4 * N // 32)] * 2
    assert rec.total("requested_bytes_load") == 2 * 4 * N


def test_misaligned_buffer_costs_an_extra_sector_per_warp():
    raw = aligned(np.arange(N + 4, dtype=np.float32))
    x = raw[4:]  # starts 16 bytes into a sector
    y = aligned(np.zeros(N, np.float32))
    with simt.record_traffic() as rec:
        fn("copy")(N // 256, 256, (x, y, np.int32(N)))
    t = rec.launches[0]
    assert t.sectors_load == 5 * (N // 32) and t.unique_sectors_load == N // 8 + 1


def test_not_recording_outside_context():
    x = np.arange(64, dtype=np.float32)
    y = np.zeros_like(x)
    with simt.record_traffic() as rec:
        pass
    fn("copy")(1, 64, (x, y, np.int32(64)))
    assert rec.launches == []
