"""cupyops.simt: planted bugs must be caught, each as a clear Python exception."""
import functools
import shutil
import time

import numpy as np
import pytest

import cupyops.simt as simt

SRC = r'''
// --- planted bug: missing barrier between the shared write and the neighbour read
extern "C" __global__ void neighbour_missing_barrier(const int* x, int* y) {
  __shared__ int s[256];
  int t = threadIdx.x;
  s[t] = x[blockIdx.x * blockDim.x + t];
#ifndef BUGGY
  __syncthreads();
#endif
  y[blockIdx.x * blockDim.x + t] = s[(t + 1) % blockDim.x];
}

// --- planted bug: ballot in a divergent branch with a full mask
extern "C" __global__ void divergent_ballot(const int* x, unsigned* out) {
  unsigned b = 0;
  if (x[threadIdx.x] > 0) b = __ballot_sync(0xffffffffu, 1);
  out[threadIdx.x] = b;
}

// --- a collective whose mask lane waits at a barrier: never arrives
extern "C" __global__ void ballot_vs_barrier(unsigned* out) {
  if (threadIdx.x == 3) { __syncthreads(); }
  else { out[threadIdx.x] = __ballot_sync(0xffffffffu, 1); __syncthreads(); }
}

// --- mask mismatch: both halves name each other with different masks
extern "C" __global__ void mask_mismatch(unsigned* out) {
  unsigned m = threadIdx.x < 16 ? 0xffffffffu : 0xffff0000u | 1u;
  out[threadIdx.x] = __ballot_sync(m, 1);
}

extern "C" __global__ void caller_not_in_mask(unsigned* out) {
  out[threadIdx.x] = __ballot_sync(0x0000ffffu, 1);
}

extern "C" __global__ void kind_mismatch(unsigned* out) {
  if (threadIdx.x & 1) out[threadIdx.x] = __ballot_sync(0xffffffffu, 1);
  else out[threadIdx.x] = __any_sync(0xffffffffu, 1);
}

extern "C" __global__ void shfl_outside_mask(int* out) {
  if (threadIdx.x < 16) out[threadIdx.x] = __shfl_down_sync(0x0000ffffu, (int)threadIdx.x, 8);
}

// --- planted bug: mismatched barriers
extern "C" __global__ void mismatched_barrier(int* out) {
  if (threadIdx.x < 16) {
    out[threadIdx.x] = 1;
    __syncthreads();
  } else {
    out[threadIdx.x] = 2;
    __syncthreads();
  }
}

// --- planted bugs: off-by-one write / read
extern "C" __global__ void off_by_one_write(float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i <= n) y[i] = 1.0f;
}
extern "C" __global__ void off_by_one_read(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] + x[i + 1];
}
// --- planted bug: a kernel that writes its (read-only) input
extern "C" __global__ void writes_input(float* x, int n) {
  int i = threadIdx.x;
  if (i < n) x[i] = x[i] * 2.0f;
}
extern "C" __global__ void atomic_on_readonly(int* x) { atomicAdd(x, 1); }

// --- planted bug: a block waits for a LATER block
extern "C" __global__ void wait_for_later_block(volatile int* flags, int* out) {
  int b = blockIdx.x;
  if (threadIdx.x == 0) {
    if (b + 1 < gridDim.x) { while (flags[b + 1] == 0) { } }
    flags[b] = 1;
    out[b] = 1;
  }
}
extern "C" __global__ void wait_for_later_block_atomic(int* flags, int* out) {
  int b = blockIdx.x;
  if (threadIdx.x == 0) {
    if (b + 1 < gridDim.x) { while (atomicAdd(&flags[b + 1], 0) == 0) { __nanosleep(32); } }
    atomicExch(&flags[b], 1);
    out[b] = 1;
  }
}

__device__ int deep(volatile int* p, int d) {
  volatile char pad[512];
  pad[d & 511] = (char)d;
  return d <= 0 ? p[0] : deep(p, d - 1) + pad[d & 511];
}
extern "C" __global__ void stack_overflow(int* p, int depth) { p[threadIdx.x] = deep(p + threadIdx.x, depth); }

extern "C" __global__ void null_deref(int** pp, int* out) { out[0] = *pp[0]; }
typedef void (*fnptr)(void);
extern "C" __global__ void call_null(const unsigned long long* p) { ((fnptr)p[0])(); }
extern "C" __global__ void bad_memset(float* p, int n) { memset(p, 0, n * sizeof(float)); }
extern "C" __global__ void good_memcpy(const float* x, float* y, int n) { memcpy(y, x, n * sizeof(float)); }
extern "C" __global__ void div_zero(const int* x, int* out) { out[0] = x[0] / x[1]; }
extern "C" __global__ void traps(int* out) { if (threadIdx.x == 5) __trap(); out[threadIdx.x] = 1; }
extern "C" __global__ void asserts(const int* x) { assert(x[threadIdx.x] >= 0); }
extern "C" __global__ void oob_shared(int* out, int k) {
  __shared__ int s[32];
  s[threadIdx.x] = 1;
  __syncthreads();
  out[threadIdx.x] = s[threadIdx.x + k];
}
extern "C" __global__ void hoisted_spin(int* flag, int* out) {
  // non-volatile flag: the load is hoisted out of a loop that never touches memory again
  if (threadIdx.x == 0) { while (flag[0] == 0) { asm volatile(""); } }
  out[threadIdx.x] = 1;
}
extern "C" __global__ void pure_loop(int* out, int n) {
  unsigned x = 1;
  for (long long i = 0; i < (1LL << 62) && n > 0; ++i) x = x * 1664525u + 1013904223u;
  out[0] = x;
}
extern "C" __global__ void many_atomics(const int* x, int n, int* m) {
  for (int i = threadIdx.x; i < n; i += blockDim.x) atomicMax(m, x[i]);  // rarely changes m
}
extern "C" __global__ void deadlock_syncwarp(int* out) {
  if (threadIdx.x < 8) __syncwarp(0xffu);
  else if (threadIdx.x < 16) __syncwarp(0xff00u);
  else { while (true) { __syncwarp(0xffff0000u); __syncwarp(0xffff0000u | 1u); } }
  out[threadIdx.x] = 1;
}
'''


@functools.lru_cache(maxsize=None)
def mod(buggy=False):
    return simt.RawModule(code=SRC, options=("-DBUGGY",) if buggy else ())


def fn(name, buggy=False):
    return mod(buggy).get_function(name)


SCHEDULES = ["forward", "reverse", 3, 99]


def test_missing_barrier_detected_by_schedules():
    x = np.arange(4 * 256, dtype=np.int32) * 3 + 1
    expected = np.roll(x.reshape(4, 256), -1, axis=1).ravel()
    for s in SCHEDULES:  # the correct kernel is right under every schedule
        y = np.zeros_like(x)
        with simt.schedule(s):
            fn("neighbour_missing_barrier")(4, 256, (x, y))
        np.testing.assert_array_equal(y, expected)
    # the happens-before checker reports the missing barrier under every schedule
    for s in SCHEDULES:
        y = np.zeros_like(x)
        with simt.schedule(s), pytest.raises(simt.DataRaceError, match="same block"):
            fn("neighbour_missing_barrier", True)(4, 256, (x, y))
    # without it, the schedules still expose it
    prev = simt.set_checks(race=False)
    try:
        results = []
        for s in SCHEDULES:
            y = np.zeros_like(x)
            with simt.schedule(s):
                fn("neighbour_missing_barrier", True)(4, 256, (x, y))
            results.append(y)
    finally:
        simt.set_checks(**prev)
    assert any(not np.array_equal(r, expected) for r in results)
    assert not np.array_equal(results[0], results[1])  # forward and reverse disagree


def test_divergent_ballot():
    # The lanes that skip the ballot exit: on sm_70+ a full-mask ballot does not wait for exited
    # lanes, so it completes with the lanes that called it (the others contribute 0).
    x = (np.arange(32) % 2).astype(np.int32)
    for s in SCHEDULES:
        out = np.zeros(32, np.uint32)
        with simt.schedule(s):
            fn("divergent_ballot")(1, 32, (x, out))
        assert (out[1::2] == 0xAAAAAAAA).all() and (out[0::2] == 0).all()
    fn("divergent_ballot")(1, 32, (np.ones(32, np.int32), np.zeros(32, np.uint32)))  # converged: fine


def test_collective_vs_barrier():
    with pytest.raises(simt.WarpCollectiveError, match="lane 3 waiting at __syncthreads"):
        fn("ballot_vs_barrier")(1, 32, (np.zeros(32, np.uint32),))


@pytest.mark.parametrize("name,match", [
    ("mask_mismatch", "mask"), ("caller_not_in_mask", "not in the mask"), ("kind_mismatch", "mismatch"),
    ("shfl_outside_mask", "not in the mask"),
])
def test_collective_errors(name, match):
    for s in SCHEDULES:
        with simt.schedule(s), pytest.raises(simt.WarpCollectiveError, match=match):
            fn(name)(1, 32, (np.zeros(32, np.uint32 if name != "shfl_outside_mask" else np.int32),))


def test_syncwarp_endless_loop_is_an_error():
    # lanes 0-15 exit, so the masks naming lane 0 no longer wait for it (sm_70+): lanes 16-31 loop
    # forever, as on a GPU, and the watchdog ends it
    prev = simt.set_watchdog(max_spins=20000)
    try:
        with pytest.raises(simt.WatchdogError):
            fn("deadlock_syncwarp")(1, 32, (np.zeros(32, np.int32),))
    finally:
        simt.set_watchdog(**prev)


def test_mismatched_barrier():
    for s in SCHEDULES:
        with simt.schedule(s), pytest.raises(simt.BarrierError, match="mismatched barrier"):
            fn("mismatched_barrier")(1, 64, (np.zeros(64, np.int32),))


def test_off_by_one_write():
    y = np.zeros(1000, np.float32)
    with pytest.raises(simt.OutOfBoundsError) as ei:
        fn("off_by_one_write")(4, 256, (y, np.int32(1000)))
    e = ei.value
    assert e.is_write and e.buffer == 0 and e.offset == 4000
    assert e.thread == (1000 - 768, 0, 0) and e.block == (3, 0, 0)
    assert "off_by_one_write" in str(e) and "0 bytes past its end" in str(e)
    assert not isinstance(e, simt.ReadOnlyWriteError)
    if shutil.which("addr2line"):
        line = SRC.splitlines().index("  if (i <= n) y[i] = 1.0f;") + 1
        assert f"kernel.cu:{line}" in str(e)


def test_off_by_one_read():
    x = np.ones(1000, np.float32)
    y = np.zeros(1000, np.float32)
    with pytest.raises(simt.OutOfBoundsError) as ei:
        fn("off_by_one_read")(4, 256, (x, y, np.int32(1000)))
    assert not ei.value.is_write and ei.value.buffer == 0 and ei.value.offset == 4000


def test_off_by_one_read_inside_a_bigger_allocation_is_still_caught():
    base = np.ones(2000, np.float32)
    x = base[:1000]  # the view, not the allocation, bounds the buffer
    y = np.zeros(1000, np.float32)
    with pytest.raises(simt.OutOfBoundsError):
        fn("off_by_one_read")(4, 256, (x, y, np.int32(1000)))


def test_write_to_readonly_input():
    x = np.ones(32, np.float32)
    x.flags.writeable = False
    with pytest.raises(simt.ReadOnlyWriteError) as ei:
        fn("writes_input")(1, 32, (x, np.int32(32)))
    assert isinstance(ei.value, simt.OutOfBoundsError)
    assert "read-only" in str(ei.value)
    xi = np.zeros(1, np.int32)
    xi.flags.writeable = False
    with pytest.raises(simt.ReadOnlyWriteError):
        fn("atomic_on_readonly")(1, 1, (xi,))
    xw = np.ones(32, np.float32)
    fn("writes_input")(1, 32, (xw, np.int32(32)))
    assert (xw == 2).all()


@pytest.mark.parametrize("name", ["wait_for_later_block", "wait_for_later_block_atomic"])
def test_wait_for_later_block_forward_is_caught(name):
    t0 = time.time()
    with pytest.raises((simt.WatchdogError, simt.DeadlockError)):
        fn(name)(3, 32, (np.zeros(3, np.int32), np.zeros(3, np.int32)))
    assert time.time() - t0 < 10


def test_no_false_watchdog_for_busy_atomics():
    prev = simt.set_watchdog(max_spins=1 << 14)
    try:
        n = 1 << 17
        x = np.zeros(n, np.int32)
        x[5] = 7
        m = np.zeros(1, np.int32)
        fn("many_atomics")(1, 32, (x, np.int32(n), m))  # 2**17 atomics, 8x the spin limit
        assert m[0] == 7
    finally:
        simt.set_watchdog(**prev)


def test_wall_clock_watchdog():
    prev = simt.set_watchdog(max_spins=1 << 40, timeout_s=0.3)
    try:
        with pytest.raises(simt.WatchdogError, match="wall-clock"):
            fn("wait_for_later_block_atomic")(2, 1, (np.zeros(2, np.int32), np.zeros(2, np.int32)))
    finally:
        simt.set_watchdog(**prev)


@pytest.mark.parametrize("name", ["hoisted_spin", "pure_loop"])
def test_wall_clock_watchdog_without_sync_points(name):
    prev = simt.set_watchdog(timeout_s=0.3)
    t0 = time.time()
    try:
        with pytest.raises(simt.WatchdogError, match="wall-clock"):
            args = (np.zeros(1, np.int32), np.zeros(32, np.int32)) if name == "hoisted_spin" else \
                (np.zeros(32, np.int32), np.int32(1))
            fn(name)(1, 32, args)
    finally:
        simt.set_watchdog(**prev)
    assert time.time() - t0 < 5
    out = np.zeros(32, np.int32)
    fn("hoisted_spin")(1, 32, (np.ones(1, np.int32), out))  # still usable
    assert (out == 1).all()


def test_stack_overflow():
    p = np.zeros(4, np.int32)
    fn("stack_overflow")(1, 4, (p, np.int32(10)))  # shallow recursion is fine
    with pytest.raises(simt.StackOverflowError):
        fn("stack_overflow")(1, 4, (p, np.int32(100000)))


def test_faults_become_simt_errors():
    pp = np.zeros(1, np.uint64)  # a null pointer inside a buffer
    with pytest.raises(simt.SimtError):
        fn("null_deref")(1, 1, (pp, np.zeros(1, np.int32)))
    with pytest.raises(simt.SimtError, match="division"):
        fn("div_zero")(1, 1, (np.array([1, 0], np.int32), np.zeros(1, np.int32)))
    with pytest.raises(simt.SimtError, match="__trap"):
        fn("traps")(1, 32, (np.zeros(32, np.int32),))
    with pytest.raises(simt.SimtError, match="assertion failed"):
        fn("asserts")(1, 4, (np.array([0, 1, -1, 2], np.int32),))


def test_uninstrumented_segfault_becomes_simt_error():
    with pytest.raises(simt.SimtError, match="segmentation fault|illegal instruction"):
        fn("call_null")(1, 1, (np.zeros(1, np.uint64),))
    out = np.zeros(1, np.int32)
    fn("oob_shared")(1, 32, (np.zeros(32, np.int32), np.int32(0)))  # the interpreter lives on
    del out


def test_runtime_sized_memset_memcpy_are_checked():
    y = np.ones(10, np.float32)
    fn("bad_memset")(1, 1, (y, np.int32(10)))
    assert (y == 0).all()
    with pytest.raises(simt.OutOfBoundsError):
        fn("bad_memset")(1, 1, (y, np.int32(11)))
    x = np.arange(10, dtype=np.float32)
    fn("good_memcpy")(1, 1, (x, y, np.int32(10)))
    np.testing.assert_array_equal(y, x)
    with pytest.raises(simt.OutOfBoundsError):
        fn("good_memcpy")(1, 1, (x, y, np.int32(11)))
    with pytest.raises(simt.ReadOnlyWriteError):
        x.flags.writeable = False
        fn("good_memcpy")(1, 1, (y, x, np.int32(10)))


def test_shared_memory_out_of_bounds():
    out = np.zeros(32, np.int32)
    fn("oob_shared")(1, 32, (out, np.int32(0)))
    with pytest.raises(simt.OutOfBoundsError):
        fn("oob_shared")(1, 32, (out, np.int32(100000)))


def test_module_usable_after_every_error():
    y = np.zeros(1000, np.float32)
    x = np.arange(1000, dtype=np.float32)
    for s in SCHEDULES:
        with simt.schedule(s):
            with pytest.raises(simt.OutOfBoundsError):
                fn("off_by_one_write")(4, 256, (y, np.int32(1000)))
            with pytest.raises(simt.BarrierError):
                fn("mismatched_barrier")(1, 64, (np.zeros(64, np.int32),))
            with pytest.raises(simt.StackOverflowError):
                fn("stack_overflow")(1, 4, (np.zeros(4, np.int32), np.int32(100000)))
            yy = np.zeros(4 * 256, np.int32)
            xx = np.arange(4 * 256, dtype=np.int32)
            fn("neighbour_missing_barrier")(4, 256, (xx, yy))
            np.testing.assert_array_equal(yy, np.roll(xx.reshape(4, 256), -1, axis=1).ravel())
    del x
