// cupyops.simt runtime: fibers, the block/warp scheduler, warp collectives,
// barriers, atomics, memory checking (the asan callbacks) and traffic counters.
//
// Compiled once WITHOUT instrumentation into its own shared object, loaded
// RTLD_GLOBAL before any kernel module; kernel modules (compiled with
// -fsanitize=kernel-address) resolve __asan_* and __simt_* against it.
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csetjmp>
#include <csignal>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <cxxabi.h>
#include <dlfcn.h>
#include <link.h>
#include <sys/mman.h>
#include <unistd.h>
#include <vector>

#define API extern "C" __attribute__((visibility("default")))

struct __simt_uint3 { unsigned int x, y, z; };

extern "C" void __simt_swap(void **save_sp, void *new_sp);
extern "C" void __simt_fiber_trampoline(void);

namespace {

typedef unsigned long long u64;
constexpr int MAXT = 1024;
constexpr int MAXSLOTS = 8;
constexpr size_t GUARD = 4096;
constexpr int SITE_TAB = 128;

enum ErrCode {
  E_OK = 0, E_OOB = 1, E_READONLY = 2, E_COLLECTIVE = 3, E_BARRIER = 4, E_DEADLOCK = 5, E_WATCHDOG = 6,
  E_STACK = 7, E_FAULT = 8, E_TRAP = 9, E_CONFIG = 10, E_INTERNAL = 11
};
enum State { S_RUN = 0, S_BAR, S_COLL, S_AM, S_EXIT };
enum Mode { M_FORWARD = 0, M_REVERSE = 1, M_SEEDED = 2 };
enum RegionKind { R_ARG = 0, R_SHARED = 1, R_MODULE = 2 };
enum {
  W_SYNCWARP = 1, W_BALLOT, W_ANY, W_ALL, W_SHFL, W_SHFL_UP, W_SHFL_DOWN, W_SHFL_XOR, W_ACTIVEMASK, W_MATCH_ANY,
  W_MATCH_ALL, W_RED_ADD, W_RED_MIN, W_RED_MAX, W_RED_AND, W_RED_OR, W_RED_XOR
};
const char *wop_name(int k) {
  static const char *n[] = {"?", "__syncwarp", "__ballot_sync", "__any_sync", "__all_sync", "__shfl_sync",
                            "__shfl_up_sync", "__shfl_down_sync", "__shfl_xor_sync", "__activemask",
                            "__match_any_sync", "__match_all_sync", "__reduce_add_sync", "__reduce_min_sync",
                            "__reduce_max_sync", "__reduce_and_sync", "__reduce_or_sync", "__reduce_xor_sync"};
  return (k >= 0 && k <= W_RED_XOR) ? n[k] : "?";
}
const char *bar_name(int k) {
  static const char *n[] = {"__syncthreads", "__syncthreads_count", "__syncthreads_and", "__syncthreads_or"};
  return (k >= 0 && k < 4) ? n[k] : "?";
}

struct SiteEnt { u64 site; u64 count; };

struct Block;
struct Fiber {
  void *sp;
  uintptr_t stack_lo, stack_hi, guard_lo;
  Block *blk;
  int tid, lane, warp, state;
  __simt_uint3 tidx;
  // barrier
  int bar_site, bar_line, bar_kind, bar_pred, bar_res;
  // warp collective
  int c_kind, c_arg, c_width, c_line;
  unsigned c_mask;
  u64 c_val, c_res;
  // watchdog / spin detection
  u64 spins, seen_epoch;
  uintptr_t last_load;
  unsigned same_load;
  // traffic
  SiteEnt *sites;
};

struct Rec { u64 site; u64 sector; unsigned occ; unsigned short warp; unsigned char store; };

struct Block {
  int slot, in_use;
  u64 seq;
  __simt_uint3 bidx;
  int nthreads, nwarps;
  int n_live, n_run, n_bar;
  int bar_site, bar_line, bar_kind;
  int warp_run[32], warp_live[32], warp_am[32], warp_coll[32];
  unsigned wexited[32], wcoll[32];          // lane bits: exited or nonexistent / waiting in a collective
  unsigned cmask[32][32];                   // compact copies of each waiting lane's mask and kind
  unsigned char ckind[32][32];
  Fiber *f;
  char *dyn;
  char *tls_backup;
  size_t tls_backup_cap;
  std::vector<Rec> recs;
  u64 spins, seen_epoch;
};

struct Region { uintptr_t lo, hi; int writable, kind, index; };

struct ModuleInfo { uintptr_t base; void *(*tls_anchor)(void); std::vector<Region> segs; };

struct LaunchDesc {
  void (*entry)(void **);
  void **args;
  unsigned grid[3], block[3];
  u64 dyn_shared;
  int module;
  const u64 *regions;
  int nregions;
  int mode;
  u64 seed;
  int record;
  u64 max_spins;
  double timeout_s;
};

struct Stats {
  u64 switches, rounds, blocks, threads, spin_points;
  u64 req_load, req_store, sectors_load, sectors_store, uniq_load, uniq_store, uniq_total;
  double seconds;
};

struct Err {
  int code, has_thread;
  unsigned block[3], thread[3];
  int warp, lane;
  u64 addr, size;
  int is_write, region_index;
  u64 pc, pc_offset;
  char func[512];
  char msg[8192];
};

struct Global {
  Fiber *cur;
  Block *curblk;
  void *sched_sp;
  volatile int in_fiber;
  int failed;
  Err *err;
  // launch
  LaunchDesc d;
  unsigned nthreads;
  u64 nblocks, next_block;
  int K, mode;
  std::vector<Region> regions;
  const Region *cache;
  int dyn_region, tls_region;
  uintptr_t tls_lo, tls_hi;
  Block *tls_owner;
  // scheduling
  std::vector<Fiber *> next, cur_round;
  u64 rng, load_rng;
  u64 epoch;
  double t0;
  int record;
  Stats *st;
  std::vector<u64> uniq_l, uniq_s;
  // resources
  char *pool[MAXSLOTS];
  size_t stack_size, stride;
  Fiber fibers[MAXSLOTS][MAXT];
  Block blocks[MAXSLOTS];
  sigjmp_buf jb;
  struct sigaction old_sa[4];
  stack_t old_ss;
  char *altstack;
  int fault_sig;
  uintptr_t fault_addr;
  volatile int timed_out;
  pid_t tid;  // the OS thread running the launch
  struct sigaction old_timer_sa;
};

Global *G;
Region g_empty_region = {1, 0, 0, 0, -1};
std::vector<ModuleInfo> g_modules;

double now_s() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

inline u64 splitmix(u64 &s) {
  u64 z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void errf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void errf(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(G->err->msg, sizeof(G->err->msg), fmt, ap);
  va_end(ap);
}
void erra(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void erra(const char *fmt, ...) {
  size_t n = strlen(G->err->msg);
  if (n + 1 >= sizeof(G->err->msg)) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(G->err->msg + n, sizeof(G->err->msg) - n, fmt, ap);
  va_end(ap);
}

void set_err_thread(Fiber *f) {
  Err *e = G->err;
  if (!f) return;
  e->has_thread = 1;
  e->block[0] = f->blk->bidx.x; e->block[1] = f->blk->bidx.y; e->block[2] = f->blk->bidx.z;
  e->thread[0] = f->tidx.x; e->thread[1] = f->tidx.y; e->thread[2] = f->tidx.z;
  e->warp = f->warp; e->lane = f->lane;
}

// Fail from the fiber side: record and switch back to the scheduler for good.
[[noreturn]] void fiber_fail(int code) {
  Fiber *f = G->cur;
  G->err->code = code;
  set_err_thread(f);
  G->failed = 1;
  __simt_swap(&f->sp, G->sched_sp);
  __builtin_trap();
}

inline void fiber_yield() {
  Fiber *f = G->cur;
  __simt_swap(&f->sp, G->sched_sp);
}

inline void set_state(Fiber *f, int s) {
  Block *b = f->blk;
  int was_run = f->state == S_RUN, now_run = s == S_RUN;
  if (was_run && !now_run) { b->n_run--; b->warp_run[f->warp]--; }
  if (!was_run && now_run) { b->n_run++; b->warp_run[f->warp]++; }
  if (f->state == S_AM) b->warp_am[f->warp]--;
  if (s == S_AM) b->warp_am[f->warp]++;
  if (f->state == S_COLL) { b->warp_coll[f->warp]--; b->wcoll[f->warp] &= ~(1u << f->lane); }
  if (s == S_COLL) { b->warp_coll[f->warp]++; b->wcoll[f->warp] |= 1u << f->lane; }
  if (s == S_EXIT) b->wexited[f->warp] |= 1u << f->lane;
  if (s == S_EXIT) { b->n_live--; b->warp_live[f->warp]--; }
  f->state = s;
}

inline void wake(Fiber *g) {
  set_state(g, S_RUN);
  if (g != G->cur) G->next.push_back(g);
}

// ---------------------------------------------------------------- watchdog
void spin_point_impl(Fiber *f) {
  // Counted per block: spin-wait points passed by any thread of the block since the last progress
  // (a store, a changing atomic, a barrier or collective completing, a thread exiting) anywhere.
  G->st->spin_points++;
  Block *b = f->blk;
  if (b->seen_epoch != G->epoch) { b->seen_epoch = G->epoch; b->spins = 0; }
  f->spins++;
  if (++b->spins > G->d.max_spins) {
    errf("watchdog: the threads of this block passed %llu spin-wait points (atomics, __nanosleep, "
         "__threadfence, repeated loads of one address) without any progress elsewhere: a spin that never ends "
         "(e.g. a block waiting for a block that runs later)", (unsigned long long)b->spins);
    fiber_fail(E_WATCHDOG);
  }
  if ((b->spins & 1023) == 0 && G->d.timeout_s > 0 && now_s() - G->t0 > G->d.timeout_s) {
    errf("watchdog: launch exceeded the wall-clock limit of %.1f s", G->d.timeout_s);
    fiber_fail(E_WATCHDOG);
  }
  fiber_yield();
}

// ---------------------------------------------------------------- memory checking
[[noreturn]] void access_fail(uintptr_t a, size_t n, int w, void *ra) {
  Fiber *f = G->cur;
  Err *e = G->err;
  e->addr = a; e->size = n; e->is_write = w; e->pc = (u64)ra;
  int ro = -1;
  for (size_t i = 0; i < G->regions.size(); ++i) {
    const Region &r = G->regions[i];
    if (a >= r.lo && a + n <= r.hi && !r.writable) { ro = (int)i; break; }
  }
  if (ro >= 0 && w) {
    const Region &r = G->regions[ro];
    e->region_index = r.kind == R_ARG ? r.index : -1;
    errf("write of %zu bytes to read-only memory at 0x%llx", n, (unsigned long long)a);
    fiber_fail(E_READONLY);
  }
  if (a < f->stack_lo && a + (1u << 20) >= f->stack_lo) {
    e->region_index = -1;
    errf("fiber stack overflow: %s of %zu bytes at 0x%llx is %llu bytes below the thread's stack (%zu KiB; set "
         "CUPYOPS_SIMT_STACK_KB)", w ? "write" : "read", n, (unsigned long long)a,
         (unsigned long long)(f->stack_lo - a), G->stack_size >> 10);
    fiber_fail(E_STACK);
  }
  e->region_index = -1;
  errf("out-of-bounds %s of %zu bytes at 0x%llx", w ? "write" : "read", n, (unsigned long long)a);
  fiber_fail(E_OOB);
}

__attribute__((noinline)) const Region *lookup(uintptr_t a, size_t n, int w, void *ra) {
  const Region *rs = G->regions.data();
  size_t nr = G->regions.size();
  for (size_t i = 0; i < nr; ++i) {
    const Region &r = rs[i];
    if (a >= r.lo && a + n <= r.hi && (!w || r.writable)) return &r;
  }
  access_fail(a, n, w, ra);
}

void record_access(Fiber *f, uintptr_t a, size_t n, int w, void *ra) {
  if (w) G->st->req_store += n; else G->st->req_load += n;
  SiteEnt *t = f->sites;
  u64 site = (u64)ra;
  unsigned h = (unsigned)((site >> 2) * 0x9E3779B1u) & (SITE_TAB - 1);
  unsigned occ = 0;
  for (int probe = 0; probe < SITE_TAB; ++probe) {
    SiteEnt &s = t[(h + probe) & (SITE_TAB - 1)];
    if (s.site == site) { occ = (unsigned)s.count++; break; }
    if (s.site == 0) { s.site = site; s.count = 1; occ = 0; break; }
  }
  u64 s0 = a >> 5, s1 = (a + n - 1) >> 5;
  for (u64 s = s0; s <= s1; ++s)
    f->blk->recs.push_back(Rec{site, s, occ, (unsigned short)f->warp, (unsigned char)(w ? 1 : 0)});
}

inline void on_access(uintptr_t a, size_t n, int w, void *ra, bool vol = false) {
  Global *g = G;
  if (__builtin_expect(g == nullptr, 0)) return;
  Fiber *f = g->cur;
  if (__builtin_expect(f == nullptr, 0)) return;
  if (a >= f->stack_lo && a + n <= f->stack_hi) return;
  const Region *r = g->cache;
  if (__builtin_expect(!(a >= r->lo && a + n <= r->hi && (!w || r->writable)), 0)) {
    r = lookup(a, n, w, ra);
    g->cache = r;
  }
  if (r->kind == R_MODULE) return;
  // Progress (for the watchdog): stores, and loads of an address other than the thread's previous
  // load.  Re-loading one address is how spin loops look: a volatile re-load is a spin-wait point
  // (a switch point counted by the watchdog), and so is any re-load after 1024 in a row.
  if (w) {
    g->epoch++;
  } else if (a != f->last_load) {
    f->last_load = a;
    f->same_load = 0;
    g->epoch++;
  } else if (vol || ++f->same_load > 1024) {
    spin_point_impl(f);
  }
  if (r->kind == R_ARG) {
    if (g->record) record_access(f, a, n, w, ra);
    if (!w && g->mode == M_SEEDED && (splitmix(g->load_rng) & 7) == 0) fiber_yield();
  }
}

}  // namespace

#define ASAN_CB(N)                                                                                          \
  API void __asan_load##N##_noabort(void *p) { on_access((uintptr_t)p, N, 0, __builtin_return_address(0)); }  \
  API void __asan_store##N##_noabort(void *p) { on_access((uintptr_t)p, N, 1, __builtin_return_address(0)); } \
  API void __asan_load##N(void *p) { on_access((uintptr_t)p, N, 0, __builtin_return_address(0)); }           \
  API void __asan_store##N(void *p) { on_access((uintptr_t)p, N, 1, __builtin_return_address(0)); }
ASAN_CB(1) ASAN_CB(2) ASAN_CB(4) ASAN_CB(8) ASAN_CB(16)
API void __asan_loadN_noabort(void *p, size_t n) { if (n) on_access((uintptr_t)p, n, 0, __builtin_return_address(0)); }
API void __asan_storeN_noabort(void *p, size_t n) { if (n) on_access((uintptr_t)p, n, 1, __builtin_return_address(0)); }
API void __asan_loadN(void *p, size_t n) { if (n) on_access((uintptr_t)p, n, 0, __builtin_return_address(0)); }
API void __asan_storeN(void *p, size_t n) { if (n) on_access((uintptr_t)p, n, 1, __builtin_return_address(0)); }
API void __asan_handle_no_return(void) {}

// ThreadSanitizer-style callbacks (g++ -fsanitize=thread --param tsan-instrument-func-entry-exit=0
// --param tsan-distinguish-volatile=1): unlike ASan, every access is reported (ASan skips a store
// to an address already checked by a load in the same basic block, which hides writes to
// read-only buffers), and volatile accesses are told apart.
#define TSAN_CB(N)                                                                                              \
  API void __tsan_read##N(void *p) { on_access((uintptr_t)p, N, 0, __builtin_return_address(0)); }               \
  API void __tsan_write##N(void *p) { on_access((uintptr_t)p, N, 1, __builtin_return_address(0)); }              \
  API void __tsan_unaligned_read##N(void *p) { on_access((uintptr_t)p, N, 0, __builtin_return_address(0)); }     \
  API void __tsan_unaligned_write##N(void *p) { on_access((uintptr_t)p, N, 1, __builtin_return_address(0)); }    \
  API void __tsan_volatile_read##N(void *p) { on_access((uintptr_t)p, N, 0, __builtin_return_address(0), true); } \
  API void __tsan_volatile_write##N(void *p) { on_access((uintptr_t)p, N, 1, __builtin_return_address(0)); }     \
  API void __tsan_unaligned_volatile_read##N(void *p) {                                                         \
    on_access((uintptr_t)p, N, 0, __builtin_return_address(0), true);                                           \
  }                                                                                                             \
  API void __tsan_unaligned_volatile_write##N(void *p) { on_access((uintptr_t)p, N, 1, __builtin_return_address(0)); }
TSAN_CB(1) TSAN_CB(2) TSAN_CB(4) TSAN_CB(8) TSAN_CB(16)
API void __tsan_read_range(void *p, size_t n) { if (n) on_access((uintptr_t)p, n, 0, __builtin_return_address(0)); }
API void __tsan_write_range(void *p, size_t n) { if (n) on_access((uintptr_t)p, n, 1, __builtin_return_address(0)); }
API void __tsan_init(void) {}
API void __tsan_func_entry(void *) {}
API void __tsan_func_exit(void) {}
API void __tsan_vptr_update(void **, void *) {}
API void __tsan_vptr_read(void **) {}
API void *__asan_memcpy(void *d, const void *s, size_t n) {
  if (n) { on_access((uintptr_t)s, n, 0, __builtin_return_address(0)); on_access((uintptr_t)d, n, 1, __builtin_return_address(0)); }
  return memcpy(d, s, n);
}
API void *__asan_memmove(void *d, const void *s, size_t n) {
  if (n) { on_access((uintptr_t)s, n, 0, __builtin_return_address(0)); on_access((uintptr_t)d, n, 1, __builtin_return_address(0)); }
  return memmove(d, s, n);
}
API void *__asan_memset(void *d, int c, size_t n) {
  if (n) on_access((uintptr_t)d, n, 1, __builtin_return_address(0));
  return memset(d, c, n);
}
API void __asan_before_dynamic_init(const char *) {}
API void __asan_after_dynamic_init(void) {}
API void __asan_register_globals(void *, size_t) {}
API void __asan_unregister_globals(void *, size_t) {}

// ---------------------------------------------------------------- built-ins called by kernel code
API __simt_uint3 __simt_thread_idx(void) {
  Fiber *f = G ? G->cur : nullptr;
  return f ? f->tidx : __simt_uint3{0, 0, 0};
}
API __simt_uint3 __simt_block_idx(void) {
  Fiber *f = G ? G->cur : nullptr;
  return f ? f->blk->bidx : __simt_uint3{0, 0, 0};
}
API __simt_uint3 __simt_block_dim(void) {
  if (!G || !G->cur) return __simt_uint3{1, 1, 1};
  return __simt_uint3{G->d.block[0], G->d.block[1], G->d.block[2]};
}
API __simt_uint3 __simt_grid_dim(void) {
  if (!G || !G->cur) return __simt_uint3{1, 1, 1};
  return __simt_uint3{G->d.grid[0], G->d.grid[1], G->d.grid[2]};
}
API void *__simt_dyn_shared(void) {
  Fiber *f = G ? G->cur : nullptr;
  return f ? (void *)f->blk->dyn : nullptr;
}
API long long __simt_clock(void) {
  unsigned lo, hi;
  __asm__ __volatile__("rdtsc" : "=a"(lo), "=d"(hi));
  return (long long)(((u64)hi << 32) | lo);
}
API void __simt_trap(const char *what, const char *file, int line) {
  if (!G || !G->cur) abort();
  errf("%s (%s:%d)", what, file, line);
  fiber_fail(E_TRAP);
}
API void __simt_spin_point(int) {
  if (!G || !G->cur) return;
  spin_point_impl(G->cur);
}

namespace {
void release_barrier(Block *b) {
  int cnt = 0, tot = 0;
  for (int i = 0; i < b->nthreads; ++i) {
    Fiber *g = &b->f[i];
    if (g->state == S_BAR) { tot++; cnt += g->bar_pred != 0; }
  }
  int res = 0;
  switch (b->bar_kind) {
    case 1: res = cnt; break;
    case 2: res = cnt == tot; break;
    case 3: res = cnt != 0; break;
    default: res = 0;
  }
  for (int i = 0; i < b->nthreads; ++i) {
    Fiber *g = &b->f[i];
    if (g->state == S_BAR) { g->bar_res = res; wake(g); }
  }
  b->n_bar = 0;
  G->epoch++;
}

void describe_thread_wait(Fiber *g) {
  switch (g->state) {
    case S_EXIT: erra("exited"); break;
    case S_RUN: erra("running"); break;
    case S_BAR: erra("waiting at %s (line %d)", bar_name(g->bar_kind), g->bar_line); break;
    case S_AM: erra("waiting at __activemask (line %d)", g->c_line); break;
    case S_COLL: erra("waiting at %s(mask=0x%08x) (line %d)", wop_name(g->c_kind), g->c_mask, g->c_line); break;
  }
}
}  // namespace

API int __simt_barrier(int kind, int pred, int site, int line) {
  if (!G || !G->cur) return 0;
  Fiber *f = G->cur;
  Block *b = f->blk;
  if (b->n_bar > 0 && (b->bar_site != site || b->bar_kind != kind)) {
    errf("mismatched barrier: this thread reached %s at line %d while other threads of the block wait at %s at "
         "line %d", bar_name(kind), line, bar_name(b->bar_kind), b->bar_line);
    int shown = 0;
    for (int i = 0; i < b->nthreads && shown < 8; ++i)
      if (b->f[i].state == S_BAR) {
        erra("%s thread %d", shown ? "," : "; waiting there:", i);
        shown++;
      }
    fiber_fail(E_BARRIER);
  }
  if (b->n_bar == 0) { b->bar_site = site; b->bar_line = line; b->bar_kind = kind; }
  f->bar_pred = pred;
  f->bar_kind = kind;
  f->bar_line = line;
  f->bar_site = site;
  b->n_bar++;
  set_state(f, S_BAR);
  if (b->n_bar == b->n_live) release_barrier(b);
  fiber_yield();
  return f->bar_res;
}

namespace {
[[noreturn]] void coll_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void coll_fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(G->err->msg, sizeof(G->err->msg), fmt, ap);
  va_end(ap);
  fiber_fail(E_COLLECTIVE);
}

bool pow2_width(int w) { return w >= 1 && w <= 32 && (w & (w - 1)) == 0; }

// Source lane of a shuffle (PTX shfl semantics with CUDA's width encoding).
int shfl_src(int kind, int lane, int b, int width) {
  int segmask = 32 - width;
  int minl = lane & segmask;
  int j;
  bool ok;
  switch (kind) {
    case W_SHFL: { j = minl | (b & 31 & ~segmask); ok = true; break; }  // srcLane modulo width
    case W_SHFL_UP: { j = lane - b; ok = j >= minl; break; }
    case W_SHFL_DOWN: { int maxl = minl | (31 & ~segmask); j = lane + b; ok = j <= maxl; break; }
    default: { int maxl = minl | (31 & ~segmask); j = lane ^ b; ok = j <= maxl; break; }
  }
  return ok ? (j & 31) : lane;
}

void complete_collective(Block *b, int warp, unsigned mask, int kind) {
  Fiber *lanes = b->f + warp * 32;
  u64 ballot = 0;
  for (int l = 0; l < 32; ++l)
    if (mask >> l & 1) ballot |= (u64)(lanes[l].c_val != 0) << l;
  for (int l = 0; l < 32; ++l) {
    if (!(mask >> l & 1)) continue;
    Fiber *g = &lanes[l];
    u64 r = 0;
    switch (kind) {
      case W_SYNCWARP: r = 0; break;
      case W_BALLOT: r = ballot; break;
      case W_ANY: r = ballot != 0; break;
      case W_ALL: r = ballot == mask; break;
      case W_SHFL: case W_SHFL_UP: case W_SHFL_DOWN: case W_SHFL_XOR: {
        if (!pow2_width(g->c_width)) {
          coll_fail("%s: width %d is not a power of two in [1, 32]", wop_name(kind), g->c_width);
        }
        int src = shfl_src(kind, l, g->c_arg, g->c_width);
        if (!(mask >> src & 1)) {
          coll_fail("%s(mask=0x%08x): lane %d reads lane %d, which is not in the mask (undefined value in CUDA)",
                    wop_name(kind), mask, l, src);
        }
        r = lanes[src].c_val;
        break;
      }
      case W_MATCH_ANY: {
        unsigned m = 0;
        for (int k = 0; k < 32; ++k)
          if ((mask >> k & 1) && lanes[k].c_val == g->c_val) m |= 1u << k;
        r = m;
        break;
      }
      case W_MATCH_ALL: {
        bool all = true;
        for (int k = 0; k < 32; ++k)
          if ((mask >> k & 1) && lanes[k].c_val != g->c_val) all = false;
        r = all ? mask : 0;
        break;
      }
      case W_RED_ADD: case W_RED_MIN: case W_RED_MAX: case W_RED_AND: case W_RED_OR: case W_RED_XOR: {
        bool sgn = g->c_arg == 1;
        unsigned acc = 0;
        bool first = true;
        for (int k = 0; k < 32; ++k) {
          if (!(mask >> k & 1)) continue;
          unsigned v = (unsigned)lanes[k].c_val;
          if (first) { acc = v; first = false; continue; }
          switch (kind) {
            case W_RED_ADD: acc += v; break;
            case W_RED_AND: acc &= v; break;
            case W_RED_OR: acc |= v; break;
            case W_RED_XOR: acc ^= v; break;
            case W_RED_MIN: acc = sgn ? (unsigned)std::min((int)acc, (int)v) : std::min(acc, v); break;
            case W_RED_MAX: acc = sgn ? (unsigned)std::max((int)acc, (int)v) : std::max(acc, v); break;
          }
        }
        r = acc;
        break;
      }
    }
    g->c_res = r;
  }
  for (int l = 0; l < 32; ++l)
    if (mask >> l & 1) {
      Fiber *g = &lanes[l];
      if (g->state == S_COLL) wake(g);
    }
  G->epoch++;
}

void resolve_activemask(Block *b, int warp) {
  Fiber *lanes = b->f + warp * 32;
  int n = std::min(32, b->nthreads - warp * 32);
  bool done[32] = {false};
  for (int l = 0; l < n; ++l) {
    if (done[l] || lanes[l].state != S_AM) continue;
    unsigned m = 0;
    for (int k = l; k < n; ++k)
      if (lanes[k].state == S_AM && lanes[k].c_arg == lanes[l].c_arg) m |= 1u << k;
    for (int k = l; k < n; ++k)
      if (m >> k & 1) { done[k] = true; lanes[k].c_res = m; }
  }
  for (int l = 0; l < n; ++l)
    if (done[l]) wake(&lanes[l]);
}
}  // namespace

API unsigned long long __simt_warp_op(int kind, unsigned mask, unsigned long long val, int arg, int width,
                                      int line) {
  if (!G || !G->cur) return 0;
  Fiber *f = G->cur;
  Block *b = f->blk;
  int w = f->warp, me = f->lane;
  Fiber *lanes = b->f + w * 32;
  int nlanes = std::min(32, b->nthreads - w * 32);
  f->c_kind = kind; f->c_mask = mask; f->c_val = val; f->c_arg = arg; f->c_width = width; f->c_line = line;
  if (kind == W_ACTIVEMASK) {
    set_state(f, S_AM);
    fiber_yield();
    return f->c_res;
  }
  if (!(mask >> me & 1))
    coll_fail("%s(mask=0x%08x) at line %d: the calling lane %d is not in the mask", wop_name(kind), mask, line, me);
  unsigned others = mask & ~(1u << me);
  if (unsigned bad = others & b->wexited[w]) {
    int l = __builtin_ctz(bad);
    if (l >= nlanes)
      coll_fail("%s(mask=0x%08x) at line %d: lane %d is named in the mask but does not exist (the block has %d "
                "threads)", wop_name(kind), mask, line, l, b->nthreads);
    coll_fail("%s(mask=0x%08x) at line %d (lane %d): lane %d is named in the mask but has exited, so it can "
              "never arrive (divergent collective?)", wop_name(kind), mask, line, me, l);
  }
  set_state(f, S_COLL);
  b->cmask[w][me] = mask;
  b->ckind[w][me] = (unsigned char)kind;
  // Only when every other lane of the mask waits in some collective can this one complete; a
  // mismatch found then is reported here, other never-completing waits when the block deadlocks.
  bool complete = (others & b->wcoll[w]) == others;
  for (unsigned bits = complete ? others : 0u; bits; bits &= bits - 1) {
    int l = __builtin_ctz(bits);
    unsigned m = b->cmask[w][l];
    if (m == mask) {
      if (b->ckind[w][l] != kind) {
        Fiber *g = &lanes[l];
        coll_fail("warp collective mismatch at line %d: lane %d called %s(mask=0x%08x) while lane %d waits in "
                  "%s(mask=0x%08x) at line %d", line, me, wop_name(kind), mask, l, wop_name(g->c_kind), g->c_mask,
                  g->c_line);
      }
      continue;
    }
    complete = false;
    if (m >> me & 1) {
      Fiber *g = &lanes[l];
      coll_fail("warp collective mask mismatch: lane %d called %s(mask=0x%08x) at line %d while lane %d waits in "
                "%s(mask=0x%08x) at line %d; each waits for the other", me, wop_name(kind), mask, line, l,
                wop_name(g->c_kind), g->c_mask, g->c_line);
    }
  }
  if (complete) complete_collective(b, w, mask, kind);
  fiber_yield();
  return f->c_res;
}

namespace {
inline void check_atomic_addr(uintptr_t a, size_t n, void *ra) {
  Fiber *f = G->cur;
  if (a % n) {
    errf("misaligned atomic of %zu bytes at 0x%llx", n, (unsigned long long)a);
    G->err->addr = a; G->err->size = n; G->err->is_write = 1; G->err->pc = (u64)ra;
    G->err->region_index = -1;
    fiber_fail(E_OOB);
  }
  const Region *r = lookup(a, n, 1, ra);
  if (r->kind == R_MODULE) return;
  if (a >= f->stack_lo && a + n <= f->stack_hi) return;
  if (r->kind == R_ARG) {
    if (G->record) {
      record_access(f, a, n, 0, ra);
      record_access(f, a, n, 1, ra);
    }
  }
}
template <class T> inline u64 tb(T v) { u64 b = 0; memcpy(&b, &v, sizeof(T)); return b; }
template <class T> inline T fb(u64 b) { T v; memcpy(&v, &b, sizeof(T)); return v; }
template <class T> u64 do_atomic(int op, T *p, T v, T c, bool &changed) {
  T old = *p, nv = old;
  switch (op) {
    case 0: nv = old + v; break;
    case 1: nv = old - v; break;
    case 2: nv = old < v ? v : old; break;
    case 3: nv = v < old ? v : old; break;
    case 4: nv = (old == c) ? v : old; break;
    case 5: nv = v; break;
    default: break;
  }
  changed = memcmp(&nv, &old, sizeof(T)) != 0;
  *p = nv;
  return tb(old);
}
template <class T> u64 do_atomic_int(int op, T *p, T v, T c, bool &changed) {
  T old = *p, nv = old;
  switch (op) {
    case 6: nv = old | v; break;
    case 7: nv = old & v; break;
    case 8: nv = old ^ v; break;
    case 9: nv = (old >= v) ? 0 : old + 1; break;             // atomicInc
    case 10: nv = (old == 0 || old > v) ? v : old - 1; break;  // atomicDec
    default: return do_atomic<T>(op, p, v, c, changed);
  }
  changed = nv != old;
  *p = nv;
  return tb(old);
}
}  // namespace

API unsigned long long __simt_atomic(int op, int type, void *addr, unsigned long long val,
                                     unsigned long long cmp) {
  static const size_t sizes[] = {4, 4, 8, 8, 4, 8, 2};
  size_t n = sizes[type];
  bool changed = false;
  u64 r = 0;
  if (G && G->cur) {
    check_atomic_addr((uintptr_t)addr, n, __builtin_return_address(0));
    spin_point_impl(G->cur);  // a possible switch point before the read-modify-write
  }
  switch (type) {
    case 0: r = do_atomic_int<int32_t>(op, (int32_t *)addr, fb<int32_t>(val), fb<int32_t>(cmp), changed); break;
    case 1: r = do_atomic_int<uint32_t>(op, (uint32_t *)addr, fb<uint32_t>(val), fb<uint32_t>(cmp), changed); break;
    case 2: r = do_atomic_int<int64_t>(op, (int64_t *)addr, fb<int64_t>(val), fb<int64_t>(cmp), changed); break;
    case 3: r = do_atomic_int<u64>(op, (u64 *)addr, val, cmp, changed); break;
    case 4: r = do_atomic<float>(op, (float *)addr, fb<float>(val), fb<float>(cmp), changed); break;
    case 5: r = do_atomic<double>(op, (double *)addr, fb<double>(val), fb<double>(cmp), changed); break;
    case 6: r = do_atomic_int<uint16_t>(op, (uint16_t *)addr, fb<uint16_t>(val), fb<uint16_t>(cmp), changed); break;
  }
  if (changed && G) G->epoch++;
  return r;
}

// ---------------------------------------------------------------- scheduler
namespace {

void fiber_main(Fiber *f) {
  G->d.entry(G->d.args);
  set_state(f, S_EXIT);
  __simt_swap(&f->sp, G->sched_sp);
  __builtin_trap();
}

bool ensure_pool(int slot) {
  if (G->pool[slot]) return true;
  size_t total = G->stride * MAXT;
  void *p = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return false;
  char *base = (char *)p;
  for (int t = 0; t < MAXT; ++t) mprotect(base + t * G->stride, GUARD, PROT_NONE);
  G->pool[slot] = base;
  for (int t = 0; t < MAXT; ++t) {
    Fiber *f = &G->fibers[slot][t];
    f->guard_lo = (uintptr_t)(base + t * G->stride);
    f->stack_lo = f->guard_lo + GUARD;
    f->stack_hi = f->guard_lo + G->stride;
  }
  return true;
}

void init_fiber(Fiber *f) {
  // Stagger the stack tops ("cache colouring"): stacks are a multiple of 4 KiB apart, so their hot
  // top frames would otherwise all map to the same L1 sets.
  uintptr_t top = (f->stack_hi - (((uintptr_t)f->tid * 320) & 4095)) & ~(uintptr_t)15;
  uintptr_t after_ret = top - 16;
  u64 *sp = (u64 *)(after_ret - 72);
  sp[0] = 0x037F;  // x87 control word
  sp[1] = 0x1F80;  // MXCSR
  sp[2] = 0; sp[3] = 0;
  sp[4] = (u64)f;                 // r13 -> argument
  sp[5] = (u64)(void *)&fiber_main;  // r12 -> entry
  sp[6] = 0; sp[7] = 0;
  sp[8] = (u64)(void *)&__simt_fiber_trampoline;
  f->sp = sp;
}

void fill_pattern(char *p, size_t n, unsigned char byte) { if (n) memset(p, byte, n); }

unsigned char pattern_byte() {
  if (G->mode == M_SEEDED) return (unsigned char)(0x80 | (G->d.seed * 0x45 & 0x7F));
  return 0xA5;
}

bool admit_block(u64 lin) {
  int slot = -1;
  for (int s = 0; s < G->K; ++s)
    if (!G->blocks[s].in_use) { slot = s; break; }
  if (slot < 0) return false;
  if (!ensure_pool(slot)) return false;
  Block *b = &G->blocks[slot];
  b->slot = slot;
  b->in_use = 1;
  b->seq = lin;
  unsigned gx = G->d.grid[0], gy = G->d.grid[1];
  b->bidx = __simt_uint3{(unsigned)(lin % gx), (unsigned)((lin / gx) % gy), (unsigned)(lin / ((u64)gx * gy))};
  b->nthreads = (int)G->nthreads;
  b->nwarps = (b->nthreads + 31) / 32;
  b->n_live = b->n_run = b->nthreads;
  b->n_bar = 0;
  b->spins = 0;
  b->seen_epoch = G->epoch;
  for (int w = 0; w < 32; ++w) {
    int nl = std::max(0, std::min(32, b->nthreads - w * 32));
    b->warp_run[w] = b->warp_live[w] = nl;
    b->warp_am[w] = 0;
    b->warp_coll[w] = 0;
    b->wcoll[w] = 0;
    b->wexited[w] = nl >= 32 ? 0u : ~((1u << nl) - 1u);  // nonexistent lanes of a partial warp
  }
  b->f = G->fibers[slot];
  b->recs.clear();
  unsigned char pb = pattern_byte();
  if (G->d.dyn_shared) fill_pattern(b->dyn, G->d.dyn_shared, pb);
  size_t tls_n = G->tls_hi - G->tls_lo;
  if (G->K == 1) {
    fill_pattern((char *)G->tls_lo, tls_n, pb);
    G->tls_owner = b;
  } else {
    fill_pattern(b->tls_backup, tls_n, pb);
  }
  unsigned bx = G->d.block[0], by = G->d.block[1];
  for (int t = 0; t < b->nthreads; ++t) {
    Fiber *f = &b->f[t];
    f->blk = b;
    f->tid = t;
    f->lane = t & 31;
    f->warp = t >> 5;
    f->state = S_RUN;
    f->tidx = __simt_uint3{(unsigned)(t % bx), (unsigned)((t / bx) % by), (unsigned)(t / (bx * by))};
    f->spins = 0; f->seen_epoch = G->epoch; f->last_load = 0; f->same_load = 0;
    f->bar_res = 0; f->c_res = 0;
    if (G->record) {
      if (!f->sites) f->sites = (SiteEnt *)calloc(SITE_TAB, sizeof(SiteEnt));
      else memset(f->sites, 0, SITE_TAB * sizeof(SiteEnt));
    }
    init_fiber(f);
    G->next.push_back(f);
  }
  G->st->blocks++;
  G->st->threads += b->nthreads;
  return true;
}

void finish_traffic(Block *b) {
  std::vector<Rec> &r = b->recs;
  if (r.empty()) return;
  std::sort(r.begin(), r.end(), [](const Rec &x, const Rec &y) {
    if (x.store != y.store) return x.store < y.store;
    if (x.warp != y.warp) return x.warp < y.warp;
    if (x.site != y.site) return x.site < y.site;
    if (x.occ != y.occ) return x.occ < y.occ;
    return x.sector < y.sector;
  });
  for (size_t i = 0; i < r.size(); ++i) {
    if (i > 0 && r[i].store == r[i - 1].store && r[i].warp == r[i - 1].warp && r[i].site == r[i - 1].site &&
        r[i].occ == r[i - 1].occ && r[i].sector == r[i - 1].sector)
      continue;
    if (r[i].store) { G->st->sectors_store++; G->uniq_s.push_back(r[i].sector); }
    else { G->st->sectors_load++; G->uniq_l.push_back(r[i].sector); }
  }
  r.clear();
  r.shrink_to_fit();
}

void finish_block(Block *b) {
  if (G->record) finish_traffic(b);
  b->in_use = 0;
  if (G->tls_owner == b) G->tls_owner = nullptr;
  if (G->curblk == b) G->curblk = nullptr;  // the slot's next block must get its own shared memory
}

void switch_shared_to(Block *b) {
  size_t n = G->tls_hi - G->tls_lo;
  if (G->tls_owner == b) return;
  if (n) {
    Block *o = G->tls_owner;
    if (o && o->in_use) memcpy(o->tls_backup, (void *)G->tls_lo, n);
    memcpy((void *)G->tls_lo, b->tls_backup, n);
  }
  G->tls_owner = b;
}

void set_current_block(Block *b) {
  if (G->K > 1 && G->tls_owner != b) switch_shared_to(b);
  if (G->curblk == b) return;
  G->curblk = b;
  Region &dr = G->regions[G->dyn_region];
  dr.lo = (uintptr_t)b->dyn;
  dr.hi = dr.lo + G->d.dyn_shared;
  G->cache = &g_empty_region;
}

void diagnose_block(Block *b) {
  // Nothing in this block can run again: a deadlock.  Prefer the most specific error.
  Fiber *coll = nullptr;
  for (int i = 0; i < b->nthreads && !coll; ++i)
    if (b->f[i].state == S_COLL) coll = &b->f[i];
  Err *e = G->err;
  if (coll) {
    e->code = E_COLLECTIVE;
    set_err_thread(coll);
    errf("%s(mask=0x%08x) at line %d (warp %d lane %d) can never complete; lanes in the mask that did not arrive:",
         wop_name(coll->c_kind), coll->c_mask, coll->c_line, coll->warp, coll->lane);
    Fiber *lanes = b->f + coll->warp * 32;
    for (int l = 0; l < 32; ++l) {
      if (!(coll->c_mask >> l & 1)) continue;
      Fiber *g = &lanes[l];
      if (g->state == S_COLL && g->c_mask == coll->c_mask && g->c_kind == coll->c_kind) continue;
      erra(" lane %d ", l);
      describe_thread_wait(g);
      erra(";");
    }
  } else {
    e->code = E_DEADLOCK;
    set_err_thread(&b->f[0]);
    errf("deadlock: no thread of the block can make progress;");
  }
  int shown = 0;
  erra(" block state:");
  for (int i = 0; i < b->nthreads && shown < 12; ++i) {
    Fiber *g = &b->f[i];
    if (g->state == S_EXIT) continue;
    erra(" [thread %d: ", i);
    describe_thread_wait(g);
    erra("]");
    shown++;
  }
  G->failed = 1;
}

void after_resume(Fiber *f) {
  Block *b = f->blk;
  if (f->state == S_EXIT) {
    G->epoch++;
    // lanes waiting in a collective that names this lane can never complete
    Fiber *lanes = b->f + f->warp * 32;
    int nl = std::min(32, b->nthreads - f->warp * 32);
    (void)nl;
    for (unsigned bits = b->wcoll[f->warp]; bits; bits &= bits - 1) {
      int l = __builtin_ctz(bits);
      Fiber *g = &lanes[l];
      if (b->cmask[f->warp][l] >> f->lane & 1) {
        G->err->code = E_COLLECTIVE;
        set_err_thread(g);
        errf("%s(mask=0x%08x) at line %d (lane %d): lane %d is named in the mask but exited without arriving "
             "(divergent collective?)", wop_name(g->c_kind), g->c_mask, g->c_line, g->lane, f->lane);
        G->failed = 1;
        return;
      }
    }
    if (b->n_bar > 0 && b->n_bar == b->n_live) release_barrier(b);
  }
  if (b->warp_run[f->warp] == 0 && b->warp_am[f->warp] > 0) resolve_activemask(b, f->warp);
  if (b->n_live > 0 && b->n_run == 0) {
    for (int w = 0; w < b->nwarps; ++w)
      if (b->warp_am[w] > 0) resolve_activemask(b, w);
    if (b->n_run == 0) diagnose_block(b);
  }
}

void order_round(std::vector<Fiber *> &v) {
  if (G->mode == M_SEEDED) {
    for (size_t i = v.size(); i > 1; --i) {
      size_t j = splitmix(G->rng) % i;
      std::swap(v[i - 1], v[j]);
    }
    return;
  }
  bool rev = G->mode == M_REVERSE;
  auto less = [rev](const Fiber *a, const Fiber *b) {
    if (a->blk->seq != b->blk->seq) return a->blk->seq < b->blk->seq;
    return rev ? a->tid > b->tid : a->tid < b->tid;
  };
  if (!std::is_sorted(v.begin(), v.end(), less)) std::sort(v.begin(), v.end(), less);
}

void on_signal(int sig, siginfo_t *si, void *) {
  if (G && G->in_fiber && gettid() == G->tid) {
    G->in_fiber = 0;
    G->fault_sig = sig;
    G->fault_addr = (uintptr_t)si->si_addr;
    siglongjmp(G->jb, 1);
  }
  // Not ours: restore the previous handler and return, so the fault repeats there.
  int idx = sig == SIGSEGV ? 0 : sig == SIGBUS ? 1 : sig == SIGFPE ? 2 : 3;
  sigaction(sig, &G->old_sa[idx], nullptr);
}

const int k_sigs[4] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL};

// Wall-clock watchdog for loops that never reach a sync point or a memory access (e.g. a spin on a
// non-volatile flag that the compiler hoisted): a one-shot POSIX timer signals this thread.
int timer_signal() { return SIGRTMIN + 5; }

void on_timer(int, siginfo_t *, void *) {
  if (!G || gettid() != G->tid) return;
  G->timed_out = 1;
  if (G->in_fiber) {
    G->in_fiber = 0;
    G->fault_sig = -1;
    G->fault_addr = 0;
    siglongjmp(G->jb, 2);
  }
}

bool start_timer(timer_t *t, double secs) {
  if (!(secs > 0)) return false;
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_sigaction = on_timer;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  sigaction(timer_signal(), &sa, &G->old_timer_sa);
  struct sigevent sev;
  memset(&sev, 0, sizeof(sev));
  sev.sigev_notify = SIGEV_THREAD_ID;
  sev.sigev_signo = timer_signal();
  sev._sigev_un._tid = (pid_t)gettid();
  if (timer_create(CLOCK_MONOTONIC, &sev, t) != 0) {
    sigaction(timer_signal(), &G->old_timer_sa, nullptr);
    return false;
  }
  struct itimerspec its;
  memset(&its, 0, sizeof(its));
  its.it_value.tv_sec = (time_t)secs;
  its.it_value.tv_nsec = (long)((secs - (double)(time_t)secs) * 1e9);
  if (its.it_value.tv_sec == 0 && its.it_value.tv_nsec == 0) its.it_value.tv_nsec = 1;
  timer_settime(*t, 0, &its, nullptr);
  return true;
}

void stop_timer(timer_t t) {
  timer_delete(t);
  sigaction(timer_signal(), &G->old_timer_sa, nullptr);
}

void install_signals() {
  stack_t ss;
  ss.ss_sp = G->altstack;
  ss.ss_size = 1 << 16;
  ss.ss_flags = 0;
  sigaltstack(&ss, &G->old_ss);
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_sigaction = on_signal;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
  sigemptyset(&sa.sa_mask);
  for (int i = 0; i < 4; ++i) sigaction(k_sigs[i], &sa, &G->old_sa[i]);
}

void restore_signals() {
  for (int i = 0; i < 4; ++i) sigaction(k_sigs[i], &G->old_sa[i], nullptr);
  if (G->old_ss.ss_flags & SS_DISABLE) {
    stack_t ss;
    memset(&ss, 0, sizeof(ss));
    ss.ss_flags = SS_DISABLE;
    sigaltstack(&ss, nullptr);
  } else {
    sigaltstack(&G->old_ss, nullptr);
  }
}

void fill_fault_error(Fiber *f) {
  Err *e = G->err;
  set_err_thread(f);
  e->addr = G->fault_addr;
  uintptr_t a = G->fault_addr;
  bool guard = false;
  for (int s = 0; s < MAXSLOTS && !guard; ++s) {
    if (!G->pool[s]) continue;
    uintptr_t base = (uintptr_t)G->pool[s];
    if (a >= base && a < base + G->stride * MAXT && (a - base) % G->stride < GUARD) guard = true;
  }
  if (f && a < f->stack_lo && a + (1u << 20) >= f->stack_lo) guard = true;
  if (G->fault_sig == SIGSEGV && guard) {
    e->code = E_STACK;
    errf("fiber stack overflow (fault at 0x%llx; stack size %zu KiB, set CUPYOPS_SIMT_STACK_KB)",
         (unsigned long long)a, G->stack_size >> 10);
    return;
  }
  e->code = E_FAULT;
  const char *name = G->fault_sig == SIGSEGV ? "segmentation fault" : G->fault_sig == SIGBUS ? "bus error"
                     : G->fault_sig == SIGFPE ? "arithmetic exception (integer division by zero?)"
                                              : "illegal instruction";
  errf("%s in kernel code (address 0x%llx)", name, (unsigned long long)a);
}

void describe_pc() {
  Err *e = G->err;
  if (!e->pc) return;
  Dl_info info;
  if (dladdr((void *)e->pc, &info) && info.dli_fbase) {
    e->pc_offset = e->pc - (u64)info.dli_fbase;
    if (info.dli_sname) {
      int st = 0;
      char *dem = abi::__cxa_demangle(info.dli_sname, nullptr, nullptr, &st);
      snprintf(e->func, sizeof(e->func), "%s", (st == 0 && dem) ? dem : info.dli_sname);
      free(dem);
    }
  }
}

struct TlsQuery { uintptr_t base; uintptr_t lo, hi; bool found; };
int tls_cb(dl_phdr_info *info, size_t, void *p) {
  TlsQuery *q = (TlsQuery *)p;
  if ((uintptr_t)info->dlpi_addr != q->base) return 0;
  for (int i = 0; i < info->dlpi_phnum; ++i)
    if (info->dlpi_phdr[i].p_type == PT_TLS && info->dlpi_tls_data) {
      q->lo = (uintptr_t)info->dlpi_tls_data;
      q->hi = q->lo + info->dlpi_phdr[i].p_memsz;
      q->found = true;
    }
  return 1;
}

struct SegQuery { uintptr_t base; std::vector<Region> *out; };
int seg_cb(dl_phdr_info *info, size_t, void *p) {
  SegQuery *q = (SegQuery *)p;
  if ((uintptr_t)info->dlpi_addr != q->base) return 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr) &ph = info->dlpi_phdr[i];
    if (ph.p_type == PT_LOAD) {
      Region r;
      r.lo = info->dlpi_addr + ph.p_vaddr;
      r.hi = r.lo + ph.p_memsz;
      r.writable = (ph.p_flags & PF_W) ? 1 : 0;
      r.kind = R_MODULE;
      r.index = -1;
      q->out->push_back(r);
    }
  }
  return 1;
}

Global *get_global() {
  if (G) return G;
  Global *g = new Global();
  memset((void *)g->fibers, 0, sizeof(g->fibers));
  const char *kb = getenv("CUPYOPS_SIMT_STACK_KB");
  size_t kib = kb ? strtoul(kb, nullptr, 10) : 64;
  if (kib < 16) kib = 16;
  g->stack_size = kib << 10;
  g->stride = g->stack_size + GUARD;
  g->altstack = (char *)malloc(1 << 16);
  for (int s = 0; s < MAXSLOTS; ++s) {
    g->blocks[s].dyn = nullptr;
    g->blocks[s].tls_backup = nullptr;
    g->blocks[s].tls_backup_cap = 0;
  }
  g->next.reserve(MAXSLOTS * MAXT);
  g->cur_round.reserve(MAXSLOTS * MAXT);
  G = g;
  return g;
}

size_t g_dyn_cap[MAXSLOTS];

}  // namespace

API int simt_register_module(void *addr_in_module, void *(*tls_anchor)(void)) {
  Dl_info info;
  if (!dladdr(addr_in_module, &info)) return -1;
  ModuleInfo m;
  m.base = (uintptr_t)info.dli_fbase;
  m.tls_anchor = tls_anchor;
  // dl_iterate_phdr reports dlpi_addr (load bias), which equals the base for a PIC shared object.
  SegQuery q{m.base, &m.segs};
  dl_iterate_phdr(seg_cb, &q);
  g_modules.push_back(m);
  return (int)g_modules.size() - 1;
}

API int simt_context_switch_benchmark(long long n, double *seconds);

// Symbol name (mangled) of an address, for attributing static shared memory to kernels.
API int simt_symbol_name(void *addr, char *buf, int n) {
  Dl_info info;
  if (!dladdr(addr, &info) || !info.dli_sname || n <= 0) return 0;
  snprintf(buf, n, "%s", info.dli_sname);
  return 1;
}

// Bytes of static __shared__ memory of a module (its PT_TLS segment).
API long long simt_module_static_shared(int module) {
  if (module < 0 || module >= (int)g_modules.size()) return -1;
  struct Q { uintptr_t base; long long n; } q{g_modules[module].base, 0};
  dl_iterate_phdr([](dl_phdr_info *info, size_t, void *p) -> int {
    Q *q = (Q *)p;
    if ((uintptr_t)info->dlpi_addr != q->base) return 0;
    for (int i = 0; i < info->dlpi_phnum; ++i)
      if (info->dlpi_phdr[i].p_type == PT_TLS) q->n = (long long)info->dlpi_phdr[i].p_memsz;
    return 1;
  }, &q);
  return q.n;
}

API int simt_launch(const LaunchDesc *d, Err *err, Stats *st) {
  Global *g = get_global();
  memset(err, 0, sizeof(*err));
  memset(st, 0, sizeof(*st));
  g->err = err;
  g->st = st;
  g->d = *d;
  g->failed = 0;
  double t0 = now_s();
  g->t0 = t0;
  if (d->module < 0 || d->module >= (int)g_modules.size()) {
    err->code = E_INTERNAL;
    snprintf(err->msg, sizeof(err->msg), "unknown module id %d", d->module);
    return err->code;
  }
  ModuleInfo &m = g_modules[d->module];
  g->nthreads = d->block[0] * d->block[1] * d->block[2];
  g->nblocks = (u64)d->grid[0] * d->grid[1] * d->grid[2];
  g->mode = d->mode;
  g->K = 1;
  g->rng = d->seed * 0x2545F4914F6CDD1Dull + 0x1234567ull;
  g->load_rng = d->seed ^ 0xDEADBEEFCAFEF00Dull;
  if (d->mode == M_SEEDED) {
    u64 s = d->seed ^ 0x5851F42D4C957F2Dull;
    g->K = 2 + (int)(splitmix(s) % 7);
  }
  g->record = d->record;
  g->uniq_l.clear();
  g->uniq_s.clear();
  // static shared memory: the module's TLS block in this OS thread
  if (m.tls_anchor) m.tls_anchor();
  TlsQuery tq{m.base, 0, 0, false};
  dl_iterate_phdr(tls_cb, &tq);
  g->tls_lo = tq.found ? tq.lo : 0;
  g->tls_hi = tq.found ? tq.hi : 0;
  size_t tls_n = g->tls_hi - g->tls_lo;
  for (int s = 0; s < g->K; ++s) {
    Block *b = &g->blocks[s];
    b->in_use = 0;
    if (g->K > 1 && b->tls_backup_cap < tls_n) {
      free(b->tls_backup);
      b->tls_backup = (char *)malloc(tls_n);
      b->tls_backup_cap = tls_n;
    }
    if (g_dyn_cap[s] < d->dyn_shared) {
      free(b->dyn);
      b->dyn = (char *)aligned_alloc(128, (d->dyn_shared + 127) & ~(u64)127);
      g_dyn_cap[s] = d->dyn_shared;
    }
  }
  // allowed regions
  g->regions.clear();
  for (int i = 0; i < d->nregions; ++i) {
    Region r;
    r.lo = d->regions[3 * i];
    r.hi = d->regions[3 * i + 1];
    r.writable = (int)(d->regions[3 * i + 2] & 1);
    r.kind = R_ARG;
    r.index = (int)(d->regions[3 * i + 2] >> 8);
    if (r.hi > r.lo) g->regions.push_back(r);
  }
  g->tls_region = (int)g->regions.size();
  g->regions.push_back(Region{g->tls_lo, g->tls_hi, 1, R_SHARED, -1});
  g->dyn_region = (int)g->regions.size();
  g->regions.push_back(Region{1, 0, 1, R_SHARED, -1});
  for (const Region &r : m.segs) g->regions.push_back(r);
  g->cache = &g_empty_region;
  g->tls_owner = nullptr;
  g->curblk = nullptr;
  g->next.clear();
  g->cur = nullptr;
  g->next_block = 0;
  g->epoch = 1;

  g->tid = gettid();
  install_signals();
  g->timed_out = 0;
  timer_t timer;
  bool have_timer = start_timer(&timer, d->timeout_s);
  Fiber *volatile running = nullptr;
  if (sigsetjmp(g->jb, 1) != 0) {
    // a fault in kernel code, or the wall-clock watchdog
    g->cur = nullptr;
    if (g->fault_sig == -1) {
      set_err_thread(running);
      err->code = E_WATCHDOG;
      snprintf(err->msg, sizeof(err->msg), "watchdog: launch exceeded the wall-clock limit of %.1f s (a loop "
               "that never reaches a sync point or memory access, e.g. a spin on a non-volatile flag?)",
               d->timeout_s);
    } else {
      fill_fault_error(running);
    }
    g->failed = 1;
    goto done;
  }
  while (true) {
    while (g->next_block < g->nblocks && admit_block(g->next_block)) g->next_block++;
    if (g->next.empty()) {
      bool any = false;
      for (int s = 0; s < g->K; ++s) any |= g->blocks[s].in_use != 0;
      if (!any && g->next_block >= g->nblocks) break;
      if (!any) {
        err->code = E_INTERNAL;
        snprintf(err->msg, sizeof(err->msg), "could not allocate fiber stacks");
        g->failed = 1;
        goto done;
      }
      for (int s = 0; s < g->K; ++s)
        if (g->blocks[s].in_use) { diagnose_block(&g->blocks[s]); break; }
      goto done;
    }
    g->cur_round.swap(g->next);
    g->next.clear();
    order_round(g->cur_round);
    st->rounds++;
    for (size_t i = 0; i < g->cur_round.size(); ++i) {
      Fiber *f = g->cur_round[i];
      if (f->state != S_RUN) continue;
      set_current_block(f->blk);
      g->cur = f;
      running = f;
      g->in_fiber = 1;
      __simt_swap(&g->sched_sp, f->sp);
      g->in_fiber = 0;
      g->cur = nullptr;
      st->switches += 2;
      if (g->failed) goto done;
      if (f->state == S_RUN) g->next.push_back(f);
      after_resume(f);
      if (g->failed) goto done;
      Block *b = f->blk;
      if (b->n_live == 0 && b->in_use) {
        finish_block(b);
        while (g->next_block < g->nblocks && admit_block(g->next_block)) g->next_block++;
      }
    }
    if (g->timed_out || (d->timeout_s > 0 && (st->rounds & 255) == 0 && now_s() - t0 > d->timeout_s)) {
      err->code = E_WATCHDOG;
      snprintf(err->msg, sizeof(err->msg), "watchdog: launch exceeded the wall-clock limit of %.1f s",
               d->timeout_s);
      g->failed = 1;
      goto done;
    }
  }
done:
  if (have_timer) stop_timer(timer);
  restore_signals();
  g->cur = nullptr;
  g->curblk = nullptr;
  g->in_fiber = 0;
  if (g->failed) {
    describe_pc();
    for (int s = 0; s < MAXSLOTS; ++s) {
      g->blocks[s].in_use = 0;
      g->blocks[s].recs.clear();
    }
  } else if (g->record) {
    std::sort(g->uniq_l.begin(), g->uniq_l.end());
    g->uniq_l.erase(std::unique(g->uniq_l.begin(), g->uniq_l.end()), g->uniq_l.end());
    std::sort(g->uniq_s.begin(), g->uniq_s.end());
    g->uniq_s.erase(std::unique(g->uniq_s.begin(), g->uniq_s.end()), g->uniq_s.end());
    st->uniq_load = g->uniq_l.size();
    st->uniq_store = g->uniq_s.size();
    std::vector<u64> all;
    all.reserve(g->uniq_l.size() + g->uniq_s.size());
    std::merge(g->uniq_l.begin(), g->uniq_l.end(), g->uniq_s.begin(), g->uniq_s.end(), std::back_inserter(all));
    all.erase(std::unique(all.begin(), all.end()), all.end());
    st->uniq_total = all.size();
    g->uniq_l.clear(); g->uniq_l.shrink_to_fit();
    g->uniq_s.clear(); g->uniq_s.shrink_to_fit();
  }
  st->seconds = now_s() - t0;
  return g->failed ? (err->code ? err->code : E_INTERNAL) : 0;
}

// ---------------------------------------------------------------- micro-benchmark of the context switch
namespace {
void *g_bench_main_sp;
void *g_bench_fiber_sp;
long long g_bench_n;
void bench_fiber(void *) {
  for (;;) __simt_swap(&g_bench_fiber_sp, g_bench_main_sp);
}
}  // namespace

API int simt_context_switch_benchmark(long long n, double *seconds) {
  size_t sz = 1 << 16;
  char *stk = (char *)aligned_alloc(16, sz);
  uintptr_t top = ((uintptr_t)stk + sz) & ~(uintptr_t)15;
  u64 *sp = (u64 *)(top - 16 - 72);
  sp[0] = 0x037F; sp[1] = 0x1F80; sp[2] = sp[3] = 0; sp[4] = 0;
  sp[5] = (u64)(void *)&bench_fiber; sp[6] = sp[7] = 0;
  sp[8] = (u64)(void *)&__simt_fiber_trampoline;
  g_bench_fiber_sp = sp;
  g_bench_n = n;
  double t0 = now_s();
  for (long long i = 0; i < n; ++i) __simt_swap(&g_bench_main_sp, g_bench_fiber_sp);
  *seconds = now_s() - t0;
  free(stk);
  return 0;
}
