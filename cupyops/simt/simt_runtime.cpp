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
#include <sys/ucontext.h>
#include <ucontext.h>
#include <unistd.h>
#include <vector>
#include <unordered_map>
#include <cfenv>
#include <cmath>
#include <limits>

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
  E_STACK = 7, E_FAULT = 8, E_TRAP = 9, E_CONFIG = 10, E_INTERNAL = 11, E_RACE = 12, E_MISALIGNED = 13,
  E_UB = 14
};
enum { K_NONE = 0, K_PLAIN = 1, K_VOL = 2, K_ATOMIC = 3 };  // kinds of a happens-before access record
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

// ---- happens-before knowledge: what a thread knows to have happened before it.
// (block seq, kind, id, ep): kind 0 = every access of the block with epoch < ep (a barrier),
// 1 = thread `id`'s accesses with epoch < ep, 2 = warp `id`'s accesses with epoch < ep (__syncwarp).
struct KEnt { unsigned block; unsigned short kind, id; unsigned ep; };
struct Know {
  std::vector<KEnt> v;
  void add(unsigned block, int kind, int id, unsigned ep) {
    for (KEnt &k : v)
      if (k.block == block && k.kind == kind && k.id == id) { if (ep > k.ep) k.ep = ep; return; }
    v.push_back(KEnt{block, (unsigned short)kind, (unsigned short)id, ep});
  }
  void join(const Know &o) { for (const KEnt &k : o.v) add(k.block, k.kind, k.id, k.ep); }
  bool covers(unsigned block, unsigned tid, unsigned e) const {
    for (const KEnt &k : v) {
      if (k.block != block || e >= k.ep) continue;
      if (k.kind == 0 || (k.kind == 1 && k.id == tid) || (k.kind == 2 && k.id == (tid >> 5))) return true;
    }
    return false;
  }
  bool empty() const { return v.empty(); }
  void clear() { v.clear(); }
};
struct SyncObj { Know k; unsigned ver; };

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
  uintptr_t last_load, recent[4];
  unsigned same_load, recent_i;
  // happens-before
  unsigned my_ep;       // epoch of this thread's accesses (block clock at its last sync event)
  int has_rel;          // a fence was executed: strong stores release `rel`
  Know K, rel;          // acquired knowledge; knowledge published by a release
  uintptr_t acq_addr; unsigned acq_ver;
  // traffic
  SiteEnt *sites;
};

struct Rec { u64 site; u64 sector; unsigned occ; unsigned short warp; unsigned char store; };
// a shared-memory access of one lane: a 4-byte word (its bank is word % 32)
struct SRec { u64 site; u64 word; unsigned occ; unsigned short warp; };

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
  std::vector<SRec> srecs;
  u64 spins, seen_epoch;
  // happens-before
  unsigned bseq;            // block seq (27 bits) as stored in access records
  unsigned bclk, bar_ep, wsync_ep[32];
  int hb_off;               // epoch counter overflowed: no more checks for this block
  Know KB, KW[32];          // knowledge spread to the whole block (barrier) / to a warp (__syncwarp)
};

struct Region { uintptr_t lo, hi; int writable, kind, index; u64 *shadow; uintptr_t sbase; };

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
  int checks;          // bit 0: happens-before, bit 1: alignment
  unsigned mxcsr;      // initial MXCSR of the fibers (FTZ/DAZ under -ftz=true when asked for)
  u64 stack_bytes;     // fiber stack size this launch needs
};

struct Stats {
  u64 switches, rounds, blocks, threads, spin_points;
  u64 req_load, req_store, sectors_load, sectors_store, uniq_load, uniq_store, uniq_total;
  u64 shared_accesses, shared_wavefronts;
  double seconds;
  u64 fp_traps, nan_canonical;  // MXCSR traps stepped (-ftz=true, canonical NaN); NaN lanes rewritten
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
  u64 pc2, pc2_offset;
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
  std::vector<std::pair<uintptr_t, uintptr_t>> nc;  // ranges of const __restrict__ parameters
  std::vector<int> nc_index;
  std::vector<std::pair<u64 *, size_t>> shadows;    // per-launch shadow of device buffers (munmap'd after)
  u64 *sh_shadow[MAXSLOTS], *dyn_shadow[MAXSLOTS];  // shadow of each slot's static / dynamic shared memory
  size_t sh_shadow_n[MAXSLOTS], dyn_shadow_n[MAXSLOTS];
  std::unordered_map<uintptr_t, SyncObj> sync;      // release knowledge per flag address
  int hb, align;
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
  volatile u64 calls;          // runtime callbacks so far (a running fiber that makes none is stuck)
  u64 stall_seen;
  int stall_ticks, stalled;
  double stall_s;
  pid_t tid;  // the OS thread running the launch
  struct sigaction old_timer_sa;
  // -ftz=true for float32 only: MXCSR traps on denormal operands and underflow (see ftz_trap);
  // the canonical NaN: MXCSR traps on invalid operations (see nan_trap)
  int ftz_trap, nan_trap, ftz_stepping;
  unsigned ftz_saved_mxcsr;
  int canon_reg, canon_lanes;  // after the stepped instruction: its float32 result's register
  u64 ftz_flushes, ftz_exact, nan_canonical;
  struct sigaction old_trap_sa;
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
    if (r.kind == R_MODULE)
      errf("store of %zu bytes to __constant__ (or other read-only) data of the kernel module at 0x%llx: a GPU "
           "build cannot store there (NVRTC warns \"Cannot store to pointer that points to constant memory "
           "space\" and compiles the kernel to trap;), so the launch fails", n, (unsigned long long)a);
    else
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


// ---------------------------------------------------------------- happens-before checker
// Shadow: 3 records (u64) per 4-byte granule of a checked region: the last write and up to two
// reads.  Record: [63:62] kind, [61:58] byte mask in the granule, [57:37] epoch (21 bits),
// [36:27] thread index in the block, [26:0] block seq.
constexpr unsigned EP_MAX = (1u << 21) - 2;
inline u64 mkrec(unsigned kind, unsigned mask, unsigned ep, unsigned tid, unsigned bseq) {
  return ((u64)kind << 62) | ((u64)mask << 58) | ((u64)ep << 37) | ((u64)tid << 27) | (u64)(bseq & 0x7FFFFFF);
}
inline unsigned rkind(u64 r) { return (unsigned)(r >> 62); }
inline unsigned rmask(u64 r) { return (unsigned)(r >> 58) & 15; }
inline unsigned rep_(u64 r) { return (unsigned)(r >> 37) & 0x1FFFFF; }
inline unsigned rtid(u64 r) { return (unsigned)(r >> 27) & 1023; }
inline unsigned rblk(u64 r) { return (unsigned)r & 0x7FFFFFF; }

bool hb_ordered(u64 r, const Fiber *f) {
  const Block *b = f->blk;
  unsigned bs = rblk(r), tid = rtid(r), e = rep_(r);
  if (bs == b->bseq) {
    if (tid == (unsigned)f->tid) return true;
    if (e < b->bar_ep) return true;
    if ((int)(tid >> 5) == f->warp && e < b->wsync_ep[f->warp]) return true;
  }
  return f->K.covers(bs, tid, e) || b->KW[f->warp].covers(bs, tid, e) || b->KB.covers(bs, tid, e);
}

const char *kind_name(unsigned k, bool w) {
  if (k == K_ATOMIC) return "atomic";
  if (k == K_VOL) return w ? "volatile write" : "volatile read";
  return w ? "plain write" : "plain read";
}

void describe_place(uintptr_t a) {
  for (const Region &r : G->regions) {
    if (a >= r.lo && a < r.hi) {
      if (r.kind == R_ARG) erra(" (argument #%d, byte offset %llu)", r.index, (unsigned long long)(a - r.lo));
      else if (r.kind == R_SHARED) erra(" (shared memory, byte offset %llu)", (unsigned long long)(a - r.lo));
      return;
    }
  }
}

[[noreturn]] void race_fail(uintptr_t a, size_t n, unsigned kind, int w, u64 other, int other_w, void *ra) {
  Fiber *f = G->cur;
  Err *e = G->err;
  e->addr = a; e->size = n; e->is_write = w; e->pc = (u64)ra; e->region_index = -1;
  unsigned obs = rblk(other), otid = rtid(other);
  bool same = obs == f->blk->bseq;
  errf("data race (happens-before): %s of %zu bytes at 0x%llx", kind_name(kind, w), n, (unsigned long long)a);
  describe_place(a);
  if (same) {
    erra(" conflicts with an earlier %s by thread %u of the same block (warp %u) with no __syncthreads%s or "
         "release/acquire between them", kind_name(rkind(other), other_w), otid, otid >> 5,
         (int)(otid >> 5) == f->warp ? "/__syncwarp" : "");
  } else {
    erra(" conflicts with an earlier %s by thread %u of block #%u (linear block index) that is not ordered "
         "before it: blocks are ordered only by __threadfence() + a volatile/atomic flag store (release) "
         "seen by a volatile/atomic load (acquire)", kind_name(rkind(other), other_w), otid, obs);
  }
  if (kind == K_PLAIN && !w && rkind(other) != K_PLAIN)
    erra("; a plain load of a flag is not an acquire (and a GPU build may hoist it out of a spin loop): use a "
         "volatile or atomic load");
  fiber_fail(E_RACE);
}

[[noreturn]] void nc_fail(uintptr_t a, size_t n, void *ra, const char *what) {
  Err *e = G->err;
  e->addr = a; e->size = n; e->is_write = 1; e->pc = (u64)ra; e->region_index = -1;
  errf("%s at 0x%llx", what, (unsigned long long)a);
  describe_place(a);
  fiber_fail(E_RACE);
}

void nc_write_check(uintptr_t a, size_t n, void *ra) {
  for (size_t i = 0; i < G->nc.size(); ++i)
    if (a < G->nc[i].second && a + n > G->nc[i].first) {
      Err *e = G->err;
      e->addr = a; e->size = n; e->is_write = 1; e->pc = (u64)ra; e->region_index = -1;
      errf("write of %zu bytes at 0x%llx into the buffer of argument #%d, a const __restrict__ parameter "
           "(read through the non-coherent read-only path on a GPU): the input aliases an output, or memory "
           "read with __restrict__ is written during the kernel", n, (unsigned long long)a, G->nc_index[i]);
      fiber_fail(E_RACE);
    }
}

inline bool strong(unsigned k) { return k == K_VOL || k == K_ATOMIC; }

// kind: K_PLAIN / K_VOL / K_ATOMIC (atomics: w = 1, and they read too); ldg: a non-coherent load
void hb_access(const Region *r, Fiber *f, uintptr_t a, size_t n, int w, unsigned kind, void *ra, bool ldg = false) {
  Block *b = f->blk;
  if (b->hb_off) return;
  uintptr_t g0 = (a - r->sbase) >> 2, g1 = (a + n - 1 - r->sbase) >> 2;
  bool shared = r->kind == R_SHARED;
  for (uintptr_t gi = g0; gi <= g1; ++gi) {
    uintptr_t glo = r->sbase + (gi << 2);
    uintptr_t lo = a > glo ? a : glo, hi = (a + n < glo + 4) ? a + n : glo + 4;
    unsigned m = ((1u << (hi - lo)) - 1u) << (lo - glo);
    u64 *s = r->shadow + gi * 3;
    u64 cur = mkrec(kind, m, f->my_ep, (unsigned)f->tid, b->bseq);
    if (shared)  // records of a previous block of this slot are stale
      for (int k = 0; k < 3; ++k)
        if (s[k] && rblk(s[k]) != b->bseq) s[k] = 0;
    u64 W = s[0];
    if (W && (rmask(W) & m)) {
      if (ldg) nc_fail(a, n, ra, "__ldg (non-coherent load) of memory written earlier during this kernel");
      if (!(strong(rkind(W)) && strong(kind)) && !hb_ordered(W, f)) race_fail(a, n, kind, w, W, 1, ra);
    }
    if (w) {
      for (int k = 1; k <= 2; ++k) {
        u64 R = s[k];
        if (!R || !(rmask(R) & m)) continue;
        if (rkind(R) == 3) nc_fail(a, n, ra, "write to memory that was read with __ldg (non-coherent) during this kernel");
        if (!(strong(rkind(R)) && strong(kind)) && !hb_ordered(R, f)) race_fail(a, n, kind, w, R, 0, ra);
        if ((rmask(R) & ~m) == 0) s[k] = 0;
      }
      s[0] = cur;
    } else {
      if (ldg) cur = mkrec(3, m, f->my_ep, (unsigned)f->tid, b->bseq);  // read kind 3 = non-coherent
      u64 R1 = s[1], R2 = s[2];
      auto mine = [&](u64 R) {
        return rkind(R) != 3 && rblk(R) == b->bseq && rtid(R) == (unsigned)f->tid && (rmask(R) & ~m) == 0;
      };
      if (!R1 || mine(R1)) s[1] = cur;
      else if (!R2 || mine(R2)) s[2] = cur;
      else if (rkind(R1) != 3 && hb_ordered(R1, f)) s[1] = cur;
      else if (rkind(R2) != 3) s[2] = cur;
    }
  }
}

void tick(Block *b) {
  if (++b->bclk >= EP_MAX) b->hb_off = 1;
}

// __threadfence*: later strong stores of this thread release what it knows now.
void hb_fence(Fiber *f) {
  Block *b = f->blk;
  tick(b);
  f->my_ep = b->bclk;
  f->rel.clear();
  f->rel.join(f->K);
  f->rel.join(b->KW[f->warp]);
  f->rel.join(b->KB);
  f->rel.add(b->bseq, 0, 0, b->bar_ep);
  f->rel.add(b->bseq, 1, f->tid, f->my_ep);
  f->rel.add(b->bseq, 2, f->warp, b->wsync_ep[f->warp]);
  f->has_rel = 1;
}

void hb_acquire(Fiber *f, uintptr_t a) {
  if (G->sync.empty()) return;
  auto it = G->sync.find(a);
  if (it == G->sync.end()) return;
  if (f->acq_addr == a && f->acq_ver == it->second.ver) return;
  f->K.join(it->second.k);
  f->acq_addr = a;
  f->acq_ver = it->second.ver;
}

void hb_release(Fiber *f, uintptr_t a) {
  if (!f->has_rel) return;
  SyncObj &o = G->sync[a];
  o.k.join(f->rel);
  o.ver++;
}

[[noreturn]] void misaligned_fail(uintptr_t a, size_t n, int w, void *ra) {
  Err *e = G->err;
  e->addr = a; e->size = n; e->is_write = w; e->pc = (u64)ra; e->region_index = -1;
  errf("misaligned address: %s of %zu bytes at 0x%llx, which is not a multiple of %zu", w ? "write" : "read", n,
       (unsigned long long)a, n);
  describe_place(a);
  fiber_fail(E_MISALIGNED);
}

// The occurrence number of access site `site` for this lane: the n-th time the lane runs it.
// A warp-wide instruction is the lanes' accesses of one site with one occurrence number.
unsigned site_occurrence(Fiber *f, u64 site) {
  SiteEnt *t = f->sites;
  unsigned h = (unsigned)((site >> 2) * 0x9E3779B1u) & (SITE_TAB - 1);
  for (int probe = 0; probe < SITE_TAB; ++probe) {
    SiteEnt &s = t[(h + probe) & (SITE_TAB - 1)];
    if (s.site == site) return (unsigned)s.count++;
    if (s.site == 0) { s.site = site; s.count = 1; return 0; }
  }
  return 0;
}

// A shared-memory access: every 4-byte word it touches (the banks it needs).
void record_shared(Fiber *f, uintptr_t a, size_t n, void *ra) {
  u64 site = (u64)ra;
  unsigned occ = site_occurrence(f, site);
  for (u64 w = a >> 2; w <= (a + n - 1) >> 2; ++w)
    f->blk->srecs.push_back(SRec{site, w, occ, (unsigned short)f->warp});
}

void record_access(Fiber *f, uintptr_t a, size_t n, int w, void *ra) {
  if (w) G->st->req_store += n; else G->st->req_load += n;
  u64 site = (u64)ra;
  unsigned occ = site_occurrence(f, site);
  u64 s0 = a >> 5, s1 = (a + n - 1) >> 5;
  for (u64 s = s0; s <= s1; ++s)
    f->blk->recs.push_back(Rec{site, s, occ, (unsigned short)f->warp, (unsigned char)(w ? 1 : 0)});
}

inline void on_access(uintptr_t a, size_t n, int w, void *ra, bool vol = false, bool ua = false) {
  Global *g = G;
  if (__builtin_expect(g == nullptr, 0)) return;
  g->calls++;
  Fiber *f = g->cur;
  if (__builtin_expect(f == nullptr, 0)) return;
  // A GPU faults on an access whose address is not a multiple of its size ("misaligned address").
  // The compiler emits the unaligned_* callbacks where it knows the access may be unaligned (packed
  // data), which a GPU build splits into narrower accesses: those are not checked.
  if (__builtin_expect((a & (n - 1)) != 0, 0) && !ua && g->align && (n & (n - 1)) == 0 && n <= 16)
    misaligned_fail(a, n, w, ra);
  if (a >= f->stack_lo && a + n <= f->stack_hi) return;
  const Region *r = g->cache;
  if (__builtin_expect(!(a >= r->lo && a + n <= r->hi && (!w || r->writable)), 0)) {
    r = lookup(a, n, w, ra);
    g->cache = r;
  }
  if (r->kind == R_MODULE) {
    if (vol && g->hb) { if (w) hb_release(f, a); else hb_acquire(f, a); }  // a __device__ flag
    return;
  }
  // Progress (for the watchdog): stores, and loads of an address other than the thread's recent
  // loads.  Re-loading the same few addresses is how spin loops look: a volatile re-load is a
  // spin-wait point (a switch point counted by the watchdog), and so is any re-load after 1024 in
  // a row.
  if (w) {
    g->epoch++;
  } else if (a != f->last_load && a != f->recent[0] && a != f->recent[1] && a != f->recent[2] &&
             a != f->recent[3]) {
    f->last_load = a;
    f->recent[f->recent_i++ & 3] = a;
    f->same_load = 0;
    g->epoch++;
  } else if (vol || ++f->same_load > 1024) {
    f->last_load = a;
    spin_point_impl(f);
  }
  if (r->kind == R_ARG) {
    if (g->record) record_access(f, a, n, w, ra);
    if (!w && g->mode == M_SEEDED && (splitmix(g->load_rng) & 7) == 0) fiber_yield();
  } else if (r->kind == R_SHARED && g->record) {
    record_shared(f, a, n, ra);
  }
  // After any switch above: the access itself happens when this callback returns.
  if (r->shadow) {
    hb_access(r, f, a, n, w, vol ? K_VOL : K_PLAIN, ra);
    if (vol) { if (w) hb_release(f, a); else hb_acquire(f, a); }
  }
  if (w && __builtin_expect(!g->nc.empty(), 0)) nc_write_check(a, n, ra);
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
  API void __tsan_unaligned_read##N(void *p) {                                                                  \
    on_access((uintptr_t)p, N, 0, __builtin_return_address(0), false, true);                                    \
  }                                                                                                             \
  API void __tsan_unaligned_write##N(void *p) {                                                                 \
    on_access((uintptr_t)p, N, 1, __builtin_return_address(0), false, true);                                    \
  }                                                                                                             \
  API void __tsan_volatile_read##N(void *p) { on_access((uintptr_t)p, N, 0, __builtin_return_address(0), true); } \
  API void __tsan_volatile_write##N(void *p) { on_access((uintptr_t)p, N, 1, __builtin_return_address(0), true); } \
  API void __tsan_unaligned_volatile_read##N(void *p) {                                                         \
    on_access((uintptr_t)p, N, 0, __builtin_return_address(0), true, true);                                     \
  }                                                                                                             \
  API void __tsan_unaligned_volatile_write##N(void *p) {                                                        \
    on_access((uintptr_t)p, N, 1, __builtin_return_address(0), true, true);                                     \
  }
TSAN_CB(1) TSAN_CB(2) TSAN_CB(4) TSAN_CB(8) TSAN_CB(16)
API void __tsan_read_range(void *p, size_t n) {
  if (n) on_access((uintptr_t)p, n, 0, __builtin_return_address(0), false, true);
}
API void __tsan_write_range(void *p, size_t n) {
  if (n) on_access((uintptr_t)p, n, 1, __builtin_return_address(0), false, true);
}
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
API void __simt_spin_point(int kind) {
  if (!G || !G->cur) return;
  if (kind == 1 && G->hb) hb_fence(G->cur);  // __threadfence*
  spin_point_impl(G->cur);
}
// __ldg / __ldcs...: a load through the non-coherent read-only path (reads its bytes too).
API void __simt_ldg(const void *p, size_t n) {
  if (!G || !G->cur || !G->hb) return;
  Fiber *f = G->cur;
  uintptr_t a = (uintptr_t)p;
  if (a >= f->stack_lo && a + n <= f->stack_hi) return;
  const Region *r = lookup(a, n, 0, __builtin_return_address(0));
  if (r->shadow) hb_access(r, f, a, n, 0, K_PLAIN, __builtin_return_address(0), true);
}
// A whole-vector access of n bytes at p (cuo::vec_align_check): a GPU issues it as one instruction,
// which faults unless p is a multiple of n; the CPU build may split it into narrower accesses,
// which the per-access check would pass. Checks alignment only (the accesses themselves are
// instrumented and counted as usual).
API void __simt_vector_access(const void *p, size_t n) {
  if (!G || !G->cur || !G->align) return;
  uintptr_t a = (uintptr_t)p;
  if ((n & (n - 1)) == 0 && n <= 16 && (a & (n - 1)) != 0)
    misaligned_fail(a, n, 0, __builtin_return_address(0));
}
// Address-space predicates (__isGlobal & co.): 2 shared (static or dynamic, of the running block),
// 8 local (the thread's stack), 4 constant (read-only data of a kernel module), else 1 global.
API unsigned __simt_addr_space(const void *p) {
  uintptr_t a = (uintptr_t)p;
  if (!G || !G->cur) return 1;
  Fiber *f = G->cur;
  if (a >= f->stack_lo && a < f->stack_hi) return 8;
  if (a >= G->tls_lo && a < G->tls_hi) return 2;
  if (f->blk->dyn && a >= (uintptr_t)f->blk->dyn && a < (uintptr_t)f->blk->dyn + G->d.dyn_shared) return 2;
  for (const Region &r : G->regions)
    if (r.kind == R_MODULE && !r.writable && a >= r.lo && a < r.hi) return 4;
  return 1;
}
// __launch_bounds__(max_threads, ...): a larger block is refused, as CUDA refuses the launch.
API void __simt_check_launch_bounds(long long max_threads) {
  if (!G || !G->cur) return;
  if (max_threads > 0 && (long long)G->nthreads > max_threads) {
    errf("too many resources requested for launch: the block has %u threads but the kernel is declared "
         "__launch_bounds__(%lld)", G->nthreads, max_threads);
    G->err->pc = (u64)__builtin_return_address(0);
    fiber_fail(E_CONFIG);
  }
}

// ---- UBSan handlers (g++ -fsanitize=shift-exponent,float-cast-overflow): the C++ undefined
// behaviour that a GPU defines differently (shift amounts are clamped/masked, cvt saturates).
struct UbLoc { const char *file; unsigned line, col; };
struct UbType { unsigned short kind, info; char name[1]; };
struct UbShift { UbLoc loc; const UbType *lhs, *rhs; };
struct UbCast { UbLoc loc; const UbType *from, *to; };
namespace {
[[noreturn]] void ub_fail(const UbLoc &l, void *ra) {
  if (!G || !G->cur) abort();
  G->err->pc = (u64)ra;
  erra(" at %s:%u:%u", l.file ? l.file : "?", l.line, l.col);
  fiber_fail(E_UB);
}
}  // namespace
API void __ubsan_handle_shift_out_of_bounds(UbShift *d, uintptr_t lhs, uintptr_t rhs) {
  if (!G || !G->cur) return;
  long long sh = (long long)rhs;
  if (d->rhs && (d->rhs->info & 1) == 0 && (d->rhs->info >> 1) < 64) {  // unsigned: zero-extend
    unsigned bits = 1u << (d->rhs->info >> 1);
    if (bits < 64) sh = (long long)(rhs & ((1ull << bits) - 1));
  }
  errf("undefined behaviour: shift by %lld of a value of type %s (a shift by the operand width or more, or by a "
       "negative amount, is undefined in C++; a GPU clamps or masks the amount)", sh, d->lhs ? d->lhs->name : "?");
  (void)lhs;
  ub_fail(d->loc, __builtin_return_address(0));
}
API void __ubsan_handle_shift_out_of_bounds_abort(UbShift *d, uintptr_t lhs, uintptr_t rhs) {
  __ubsan_handle_shift_out_of_bounds(d, lhs, rhs);
}
API void __ubsan_handle_float_cast_overflow(UbCast *d, uintptr_t from) {
  if (!G || !G->cur) return;
  (void)from;
  errf("undefined behaviour: float-to-integer conversion out of range (%s to %s; undefined in C++, saturates on a "
       "GPU, NaN gives 0): use __float2int_rz & co. for the GPU's result", d->from ? d->from->name : "?",
       d->to ? d->to->name : "?");
  ub_fail(d->loc, __builtin_return_address(0));
}
API void __ubsan_handle_float_cast_overflow_abort(UbCast *d, uintptr_t from) {
  __ubsan_handle_float_cast_overflow(d, from);
}
// -fsanitize=alignment: a load, store or member access through a pointer that is not aligned for
// its type.  A GPU issues a vector type's access as one instruction (ld.v2/ld.v4: 8 or 16 bytes),
// which faults unless the address is a multiple of its alignment; g++ may split it into narrower
// accesses that the per-access check passes, so the type's alignment is checked here.
struct UbMismatch { UbLoc loc; const UbType *type; unsigned char log_align, kind; };
API void __ubsan_handle_type_mismatch_v1(UbMismatch *d, uintptr_t ptr) {
  if (!G || !G->cur || !G->align) return;
  size_t al = (size_t)1 << d->log_align;
  if (!ptr || !(ptr & (al - 1))) return;
  static const char *const kinds[] = {"load of", "store to", "reference binding to", "member access within",
                                      "member call on", "constructor call on", "downcast of", "downcast of",
                                      "upcast of", "cast to virtual base of", "assignment to", "dynamic operation on"};
  const char *k = d->kind < sizeof(kinds) / sizeof(kinds[0]) ? kinds[d->kind] : "access to";
  Err *e = G->err;
  e->addr = ptr; e->size = al; e->is_write = d->kind == 1; e->pc = (u64)__builtin_return_address(0);
  e->region_index = -1;
  errf("misaligned address: %s a %s (%zu-byte aligned type) at 0x%llx, which is not a multiple of %zu (one "
       "%zu-byte access on a GPU)", k, d->type ? d->type->name : "?", al, (unsigned long long)ptr, al, al);
  describe_place(ptr);
  erra(" at %s:%u:%u", d->loc.file ? d->loc.file : "?", d->loc.line, d->loc.col);
  fiber_fail(E_MISALIGNED);
}
API void __ubsan_handle_type_mismatch_v1_abort(UbMismatch *d, uintptr_t ptr) { __ubsan_handle_type_mismatch_v1(d, ptr); }

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
  if (G->hb) {
    tick(b);
    b->bar_ep = b->bclk;
    for (int w = 0; w < b->nwarps; ++w)
      if (!b->KW[w].empty()) { b->KB.join(b->KW[w]); b->KW[w].clear(); }
  }
  for (int i = 0; i < b->nthreads; ++i) {
    Fiber *g = &b->f[i];
    if (g->state == S_BAR) {
      g->bar_res = res;
      if (G->hb) {
        g->my_ep = b->bclk;
        if (!g->K.empty()) { b->KB.join(g->K); g->K.clear(); }
      }
      wake(g);
    }
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
// The same from the scheduler side (a lane exited and completed a collective): record only.
void coll_fail_sched(Fiber *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void coll_fail_sched(Fiber *g, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(G->err->msg, sizeof(G->err->msg), fmt, ap);
  va_end(ap);
  G->err->code = E_COLLECTIVE;
  set_err_thread(g);
  G->failed = 1;
}

bool pow2_width(int w) { return w >= 1 && w <= 32 && (w & (w - 1)) == 0; }

// Source lane of a shuffle (PTX shfl semantics with CUDA's width encoding).
int shfl_src(int kind, int lane, int b, int width) {
  b &= 31;
  int segmask = 32 - width;
  int minl = lane & segmask;
  int j;
  bool ok;
  switch (kind) {
    case W_SHFL: { j = minl | (b & 31 & ~segmask); ok = true; break; }  // srcLane modulo width
    // shfl.sync uses the low 5 bits of the offset (an offset of 32 or more wraps)
    case W_SHFL_UP: { j = lane - b; ok = j >= minl; break; }
    case W_SHFL_DOWN: { int maxl = minl | (31 & ~segmask); j = lane + b; ok = j <= maxl; break; }
    default: { int maxl = minl | (31 & ~segmask); j = lane ^ b; ok = j <= maxl; break; }
  }
  return ok ? (j & 31) : lane;
}

// `mask` is the mask the lanes named; lanes of it that exited or never existed do not take part
// (sm_70+): they contribute 0 to votes, and a shuffle reading one is an error.  Returns false (with
// the error recorded through `fail`) on an error.
bool complete_collective(Block *b, int warp, unsigned mask, int kind, bool sched) {
  Fiber *lanes = b->f + warp * 32;
  unsigned named = mask;
  mask &= ~b->wexited[warp];
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
          if (sched) { coll_fail_sched(g, "%s: width %d is not a power of two in [1, 32]", wop_name(kind), g->c_width); return false; }
          coll_fail("%s: width %d is not a power of two in [1, 32]", wop_name(kind), g->c_width);
        }
        int src = shfl_src(kind, l, g->c_arg, g->c_width);
        if (!(mask >> src & 1)) {
          const char *why = !(named >> src & 1) ? "not in the mask"
                            : (warp * 32 + src >= b->nthreads ? "a lane that does not exist (partial warp)"
                                                              : "a lane that has exited");
          if (sched) {
            coll_fail_sched(g, "%s(mask=0x%08x) at line %d: lane %d reads lane %d, %s (undefined value in CUDA)",
                            wop_name(kind), named, g->c_line, l, src, why);
            return false;
          }
          coll_fail("%s(mask=0x%08x) at line %d: lane %d reads lane %d, %s (undefined value in CUDA)",
                    wop_name(kind), named, g->c_line, l, src, why);
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
  bool wsync = G->hb && kind == W_SYNCWARP && (mask | b->wexited[warp]) == 0xFFFFFFFFu;
  if (wsync) { tick(b); b->wsync_ep[warp] = b->bclk; }
  for (int l = 0; l < 32; ++l)
    if (mask >> l & 1) {
      Fiber *g = &lanes[l];
      if (wsync) {
        g->my_ep = b->bclk;
        if (!g->K.empty()) { b->KW[warp].join(g->K); g->K.clear(); }
      }
      if (g->state == S_COLL) wake(g);
    }
  // (a completed collective is not progress for the watchdog: a loop of collectives that never
  // touches memory is a spin that never ends)
  return true;
}

// A lane of `warp` exited: the collectives that named it may now be complete.
bool recheck_collectives(Block *b, int warp) {
  Fiber *lanes = b->f + warp * 32;
  for (unsigned bits = b->wcoll[warp]; bits; bits &= bits - 1) {
    int l = __builtin_ctz(bits);
    unsigned mask = b->cmask[warp][l];
    unsigned eff = mask & ~b->wexited[warp];
    if ((eff & b->wcoll[warp]) != eff) continue;
    bool same = true;
    for (unsigned e = eff; e; e &= e - 1) {
      int k = __builtin_ctz(e);
      if (b->cmask[warp][k] != mask || b->ckind[warp][k] != b->ckind[warp][l]) same = false;
    }
    if (!same) continue;
    if (!complete_collective(b, warp, mask, lanes[l].c_kind, true)) return false;
    return recheck_collectives(b, warp);
  }
  return true;
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
  // Lanes of the mask that exited or do not exist (partial warp) are not waited for (sm_70+).
  (void)nlanes;
  unsigned others = mask & ~(1u << me) & ~b->wexited[w];
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
  if (complete && !complete_collective(b, w, mask, kind, false)) fiber_fail(E_COLLECTIVE);
  fiber_yield();
  if (b->seen_epoch != G->epoch) { b->seen_epoch = G->epoch; b->spins = 0; }
  if (++b->spins > G->d.max_spins) {
    errf("watchdog: the threads of this block passed %llu warp collectives and spin-wait points without any "
         "progress (no store, no new load address, no barrier): a loop that never ends",
         (unsigned long long)b->spins);
    fiber_fail(E_WATCHDOG);
  }
  return f->c_res;
}

namespace {
inline void check_atomic_addr(uintptr_t a, size_t n, void *ra) {
  Fiber *f = G->cur;
  if (a % n) {
    misaligned_fail(a, n, 1, ra);
  }
  const Region *r = lookup(a, n, 1, ra);
  if (r->kind == R_MODULE) return;
  if (a >= f->stack_lo && a + n <= f->stack_hi) return;
  if (!G->nc.empty()) nc_write_check(a, n, ra);
  if (r->kind == R_ARG) {
    if (G->record) {
      record_access(f, a, n, 0, ra);
      record_access(f, a, n, 1, ra);
    }
  } else if (r->kind == R_SHARED && G->record) {
    record_shared(f, a, n, ra);
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

namespace {
// The checks and the happens-before bookkeeping of an atomic read-modify-write of n bytes at addr.
void atomic_prologue(void *addr, size_t n, void *ra) {
  if (G && G->cur) {
    check_atomic_addr((uintptr_t)addr, n, ra);
    spin_point_impl(G->cur);  // a possible switch point before the read-modify-write
    if (G->hb) {
      Fiber *f = G->cur;
      uintptr_t a = (uintptr_t)addr;
      if (!(a >= f->stack_lo && a + n <= f->stack_hi)) {
        const Region *r = lookup(a, n, 1, ra);
        hb_acquire(f, a);
        if (r->shadow) hb_access(r, f, a, n, 1, K_ATOMIC, ra);
        hb_release(f, a);
      }
    }
  }
}
// a double rounded to nearest-even bfloat16 bits (integer operations), canonical NaN
unsigned short dbl_to_bf16(double d) {
  u64 u; memcpy(&u, &d, 8);
  unsigned sign = (unsigned)(u >> 63) << 15;
  int ex = (int)((u >> 52) & 0x7FF);
  u64 m = u & 0xFFFFFFFFFFFFFull;
  if (ex == 0x7FF) return m ? 0x7FFF : (unsigned short)(sign | 0x7F80);
  if (ex == 0) return (unsigned short)sign;  // double subnormals are far below bfloat16's range
  m |= 1ull << 52;
  int E = ex - 1023;
  int qexp = (E < -126 ? -126 : E) - 7, e = ex - 1075, sh = qexp - e;  // sh >= 45
  u64 q = sh >= 64 ? 0 : m >> sh;
  unsigned __int128 r = sh >= 64 ? m : m - (q << sh);
  if (sh <= 64) {
    unsigned __int128 h = (unsigned __int128)1 << (sh - 1);
    if (r > h || (r == h && (q & 1))) ++q;
  }
  u64 bits = E < -126 ? q : ((u64)(E + 127) << 7) + (q - 128);
  if (bits >= 0x7F80) bits = 0x7F80;
  return (unsigned short)(sign | bits);
}
double bf16_to_dbl(unsigned short b) {
  unsigned ex = (b >> 7) & 0xFF, mt = b & 0x7F;
  double sgn = (b & 0x8000) ? -1.0 : 1.0;
  if (ex == 0xFF) return mt ? NAN : sgn * INFINITY;
  if (ex == 0) return sgn * (double)mt * 0x1p-133;
  return sgn * ldexp((double)(mt | 0x80), (int)ex - 134);
}
unsigned short add16(int kind, unsigned short a, unsigned short b) {
  if (kind == 0) {
    _Float16 x, y; memcpy(&x, &a, 2); memcpy(&y, &b, 2);
    _Float16 z = (_Float16)((float)x + (float)y);  // exact in float, rounded once to half
    unsigned short o; memcpy(&o, &z, 2);
    return (o & 0x7FFF) > 0x7C00 ? 0x7FFF : o;
  }
  return dbl_to_bf16(bf16_to_dbl(a) + bf16_to_dbl(b));
}
}  // namespace

// atomicAdd on __half / __nv_bfloat16 (kind 0 / 1) and on their pairs (2 / 3: per element)
API unsigned __simt_atomic16(int kind, void *addr, unsigned v) {
  size_t n = kind >= 2 ? 4 : 2;
  atomic_prologue(addr, n, __builtin_return_address(0));
  int k = kind & 1;
  unsigned short *p = (unsigned short *)addr;
  unsigned old = p[0];
  p[0] = add16(k, p[0], (unsigned short)v);
  if (n == 4) { old |= (unsigned)p[1] << 16; p[1] = add16(k, p[1], (unsigned short)(v >> 16)); }
  if (G) G->epoch++;
  return old;
}

API unsigned long long __simt_atomic(int op, int type, void *addr, unsigned long long val,
                                     unsigned long long cmp) {
  static const size_t sizes[] = {4, 4, 8, 8, 4, 8, 2};
  size_t n = sizes[type];
  bool changed = false;
  u64 r = 0;
  if (G && G->cur) {
    check_atomic_addr((uintptr_t)addr, n, __builtin_return_address(0));
    spin_point_impl(G->cur);  // a possible switch point before the read-modify-write
    if (G->hb) {  // an atomic is an acquire and (after a fence) a release; atomics never race each other
      Fiber *f = G->cur;
      uintptr_t a = (uintptr_t)addr;
      if (!(a >= f->stack_lo && a + n <= f->stack_hi)) {
        const Region *r = lookup(a, n, 1, __builtin_return_address(0));
        hb_acquire(f, a);  // also for __device__ globals (no shadow): a retirement counter is a flag
        if (r->shadow) hb_access(r, f, a, n, 1, K_ATOMIC, __builtin_return_address(0));
        hb_release(f, a);
      }
    }
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
  sp[1] = G->d.mxcsr ? G->d.mxcsr : 0x1F80;  // MXCSR
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
  b->bseq = (unsigned)(lin & 0x7FFFFFF);
  b->bclk = 0; b->bar_ep = 0; b->hb_off = 0;
  b->KB.clear();
  for (int w = 0; w < 32; ++w) { b->wsync_ep[w] = 0; b->KW[w].clear(); }
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
    f->recent[0] = f->recent[1] = f->recent[2] = f->recent[3] = 0; f->recent_i = 0;
    f->my_ep = 0; f->has_rel = 0; f->K.clear(); f->rel.clear(); f->acq_addr = 0; f->acq_ver = 0;
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

// Shared-memory bank conflicts: per warp-wide instruction (warp, site, occurrence), the most
// distinct 4-byte words one of the 32 banks serves (its wavefronts, at least 1).
void finish_shared(Block *b) {
  std::vector<SRec> &r = b->srecs;
  if (r.empty()) return;
  std::sort(r.begin(), r.end(), [](const SRec &x, const SRec &y) {
    if (x.warp != y.warp) return x.warp < y.warp;
    if (x.site != y.site) return x.site < y.site;
    if (x.occ != y.occ) return x.occ < y.occ;
    return x.word < y.word;
  });
  unsigned per_bank[32];
  for (size_t i = 0; i < r.size();) {
    size_t j = i;
    memset(per_bank, 0, sizeof per_bank);
    unsigned most = 1;
    for (; j < r.size() && r[j].warp == r[i].warp && r[j].site == r[i].site && r[j].occ == r[i].occ; ++j) {
      if (j > i && r[j].word == r[j - 1].word) continue;   // one word, any number of lanes
      unsigned n = ++per_bank[r[j].word & 31];
      if (n > most) most = n;
    }
    G->st->shared_accesses++;
    G->st->shared_wavefronts += most;
    i = j;
  }
  r.clear();
  r.shrink_to_fit();
}

void finish_traffic(Block *b) {
  finish_shared(b);
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
  if (G->hb) {
    dr.sbase = dr.lo & ~(uintptr_t)3;
    dr.shadow = G->d.dyn_shared ? G->dyn_shadow[b->slot] : nullptr;
    Region &tr = G->regions[G->tls_region];
    tr.shadow = tr.hi > tr.lo ? G->sh_shadow[b->slot] : nullptr;
  }
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
    (void)lanes;
    if (b->wcoll[f->warp] && !recheck_collectives(b, f->warp)) return;
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

// ---- -ftz=true on float32 alone.  x86 has one flush-to-zero control (MXCSR FTZ/DAZ) for float32
// and float64 together.  Under -ftz=true the fibers run with the denormal-operand and underflow
// exceptions unmasked instead: an SSE/AVX instruction that reads a subnormal or produces a tiny
// result faults (#XM -> SIGFPE) before it writes anything.  The handler decodes the instruction:
// a float32 one (ss/ps, FMA with W0, a float<->double conversion) is re-executed with FTZ+DAZ, as
// a GPU's .ftz instruction; any other (float64) one exactly.  Either way the exceptions are masked
// for that one instruction, executed by single-stepping (EFLAGS.TF -> SIGTRAP), after which the
// trapping MXCSR is restored.  Code without subnormals never traps: no cost.
constexpr unsigned MX_DAZ = 0x40, MX_DM = 0x100, MX_UM = 0x800, MX_FTZ = 0x8000, MX_FLAGS = 0x3F;
constexpr unsigned MX_FTZ_TRAP = 0x1F80u & ~(MX_DM | MX_UM);

// Whether the SSE/AVX instruction at p works on float32 data (1) or not (0: float64, other).
int insn_is_f32(const unsigned char *p) {
  int p66 = 0, rep = 0;  // rep: 2 = F3 (ss), 3 = F2 (sd)
  for (int k = 0; k < 15; ++k, ++p) {
    unsigned c = *p;
    if (c == 0x66) p66 = 1;
    else if (c == 0xF3) rep = 2;
    else if (c == 0xF2) rep = 3;
    else if (c == 0xF0 || c == 0x2E || c == 0x36 || c == 0x3E || c == 0x26 || c == 0x64 || c == 0x65 || c == 0x67) {}
    else break;
  }
  if ((*p & 0xF0) == 0x40) ++p;  // REX
  int pp, map, W = 0;
  unsigned op;
  if (p[0] == 0xC5) { pp = p[1] & 3; map = 1; op = p[2]; }
  else if (p[0] == 0xC4) { map = p[1] & 0x1F; W = p[2] >> 7; pp = p[2] & 3; op = p[3]; }
  else if (p[0] == 0x62) { map = p[1] & 7; W = p[2] >> 7; pp = p[2] & 3; op = p[4]; }
  else if (p[0] == 0x0F) {
    pp = rep ? rep : (p66 ? 1 : 0);
    if (p[1] == 0x38) { map = 2; op = p[2]; } else if (p[1] == 0x3A) { map = 3; op = p[2]; } else { map = 1; op = p[1]; }
  } else {
    return 0;  // x87 and others: not affected by MXCSR
  }
  if (map == 1) {
    if (op == 0x5A || op == 0x5B) return 1;               // float<->double, float<->int32 vectors
    if (op == 0x7C || op == 0x7D || op == 0xD0) return pp == 3;  // haddps/hsubps/addsubps (F2)
    if (op == 0xE6) return 0;
    return pp == 0 || pp == 2;                             // ps / ss
  }
  if (map == 2) return W == 0;                             // FMA: W0 float32, W1 float64
  if (map == 3) {
    if (op == 0x08 || op == 0x0A || op == 0x40) return 1;  // roundps/ss, dpps
    if (op == 0x09 || op == 0x0B || op == 0x41) return 0;
    return W == 0;
  }
  return 0;
}

// ---- The canonical NaN.  A GPU's float32 instructions return 0x7fffffff for a NaN result; x86
// returns 0xffc00000 for an invalid operation (0/0, inf-inf, 0*inf, sqrt(-1)) and keeps an input
// NaN's payload.  The fibers run with the invalid-operation exception unmasked: such an
// instruction faults before it writes; the handler steps it with the exception masked (as the
// -ftz traps above) and then, for a float32 arithmetic instruction (add, sub, mul, div, sqrt,
// FMA, horizontal adds, double->float, round), sets every NaN lane of its result register to
// 0x7fffffff.  Code that makes no NaN and compares none never traps.  An ordered compare (a < b)
// or min/max with a NaN operand traps too (and is only stepped).  A NaN that comes from memory
// or a bit cast and goes through an instruction that does not trap (NaN + 1) keeps x86's bits.
constexpr unsigned MX_IE = 0x01, MX_IM = 0x80;

// The xmm register (0-15) a float32 arithmetic instruction at p writes, with ``*lanes`` the
// float32 lanes of its result (1 scalar, 4 packed; 8 for a 256-bit VEX one); -1 for any other
// instruction (compares, moves, float64, EVEX-encoded).
int insn_f32_result(const unsigned char *p, int *lanes) {
  int p66 = 0, rep = 0, rex = 0;
  for (int k = 0; k < 15; ++k, ++p) {
    unsigned c = *p;
    if (c == 0x66) p66 = 1;
    else if (c == 0xF3) rep = 2;
    else if (c == 0xF2) rep = 3;
    else if (c == 0xF0 || c == 0x2E || c == 0x36 || c == 0x3E || c == 0x26 || c == 0x64 || c == 0x65 || c == 0x67) {}
    else break;
  }
  if ((*p & 0xF0) == 0x40) rex = *p++;
  int pp, map, W = 0, R = 0, L = 0;
  unsigned op, modrm;
  if (p[0] == 0xC5) { R = !(p[1] & 0x80); L = (p[1] >> 2) & 1; pp = p[1] & 3; map = 1; op = p[2]; modrm = p[3]; }
  else if (p[0] == 0xC4) {
    R = !(p[1] & 0x80); map = p[1] & 0x1F; W = p[2] >> 7; L = (p[2] >> 2) & 1; pp = p[2] & 3; op = p[3]; modrm = p[4];
  } else if (p[0] == 0x0F) {
    R = (rex >> 2) & 1;
    pp = rep ? rep : (p66 ? 1 : 0);
    if (p[1] == 0x38) { map = 2; op = p[2]; modrm = p[3]; }
    else if (p[1] == 0x3A) { map = 3; op = p[2]; modrm = p[3]; }
    else { map = 1; op = p[1]; modrm = p[2]; }
  } else {
    return -1;  // x87, EVEX and the rest
  }
  int packed = L ? 8 : 4, scalar;
  if (map == 1) {
    // (not min/max: x86's maxss is C's a > b ? a : b, a select that keeps a NaN's bits on a GPU)
    if (op == 0x51 || op == 0x58 || op == 0x59 || op == 0x5C || op == 0x5E) {
      if (pp != 0 && pp != 2) return -1;  // pd / sd
      scalar = pp == 2;
    } else if (op == 0x5A && (pp == 1 || pp == 3)) {
      scalar = pp == 3;                   // cvtsd2ss / cvtpd2ps (the 256-bit one writes an xmm)
      packed = 4;
    } else if ((op == 0x7C || op == 0x7D || op == 0xD0) && pp == 3) {
      scalar = 0;                         // haddps / hsubps / addsubps
    } else {
      return -1;
    }
  } else if (map == 2 && W == 0 && pp == 1 && ((op >= 0x96 && op <= 0x9F) || (op >= 0xA6 && op <= 0xAF) ||
                                             (op >= 0xB6 && op <= 0xBF))) {
    scalar = (op & 1) && (op & 0xF) >= 9;  // vfmadd213ss & co.: odd opcodes from x9
  } else if (map == 3 && pp == 1 && (op == 0x08 || op == 0x0A)) {
    scalar = op == 0x0A;                  // roundps / roundss
  } else {
    return -1;
  }
  *lanes = scalar ? 1 : packed;
  return (int)((modrm >> 3) & 7) | (R << 3);
}

// Offset of the YMM_Hi128 state (the upper halves of ymm0-15) in an XSAVE area (CPUID 0xD.2).
size_t ymm_hi_offset() {
  static size_t off = 0;
  if (!off) {
    unsigned a, b, c, d;
    __asm__ __volatile__("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(0xD), "c"(2));
    off = b ? b : 576;
  }
  return off;
}

// The NaN lanes of the result the stepped instruction wrote (canon_reg): 0x7fffffff.
void canonical_nan_lanes(ucontext_t *uc) {
  int reg = G->canon_reg, lanes = G->canon_lanes;
  G->canon_reg = -1;
  if (reg < 0 || !uc->uc_mcontext.fpregs) return;
  uint32_t *lo = (uint32_t *)&uc->uc_mcontext.fpregs->_xmm[reg];
  uint32_t *hi = nullptr;
  if (lanes > 4) {
    // an XSAVE frame (the kernel's FP_XSTATE_MAGIC1 in the legacy area's software bytes), its
    // header after the 512-byte legacy area: whether the upper halves are saved
    const unsigned char *xs = (const unsigned char *)uc->uc_mcontext.fpregs;
    uint32_t magic;
    u64 xfeatures;
    memcpy(&magic, xs + 464, 4);
    memcpy(&xfeatures, xs + 512, 8);
    if (magic == 0x46505853u && (xfeatures & 4)) hi = (uint32_t *)(xs + ymm_hi_offset() + 16 * reg);
  }
  for (int i = 0; i < lanes && i < 8; ++i) {
    uint32_t *w = i < 4 ? lo + i : hi ? hi + (i - 4) : nullptr;
    if (w && (*w & 0x7FFFFFFFu) > 0x7F800000u) { *w = 0x7FFFFFFFu; G->nan_canonical++; }
  }
}

// SIGFPE from an unmasked exception of the trap modes (denormal/underflow under -ftz=true,
// invalid operation for the canonical NaN): step the instruction with the exceptions masked (a
// float32 one flushed under -ftz=true); true if handled.
bool ftz_fault(ucontext_t *uc) {
  if (!G || !(G->ftz_trap || G->nan_trap) || !uc->uc_mcontext.fpregs) return false;
  unsigned mx = uc->uc_mcontext.fpregs->mxcsr;
  unsigned raised = mx & ~(mx >> 7) & (MX_IE | 0x12);  // flags whose exception is unmasked
  if (!raised) return false;
  const unsigned char *ip = (const unsigned char *)uc->uc_mcontext.gregs[REG_RIP];
  bool f32 = insn_is_f32(ip);
  G->ftz_saved_mxcsr = mx & ~MX_FLAGS;
  unsigned nmx = (mx & ~(MX_FLAGS | MX_FTZ | MX_DAZ)) | MX_DM | MX_UM | MX_IM;
  if (G->ftz_trap && f32) { nmx |= MX_FTZ | MX_DAZ; G->ftz_flushes++; } else G->ftz_exact++;
  G->canon_reg = -1;
  if (raised & MX_IE) G->canon_reg = insn_f32_result(ip, &G->canon_lanes);
  uc->uc_mcontext.fpregs->mxcsr = nmx;
  uc->uc_mcontext.gregs[REG_EFL] |= 0x100;  // single-step the instruction
  G->ftz_stepping = 1;
  return true;
}

void on_trap(int sig, siginfo_t *si, void *ctx) {
  ucontext_t *uc = (ucontext_t *)ctx;
  if (G && G->ftz_stepping && gettid() == G->tid) {
    G->ftz_stepping = 0;
    uc->uc_mcontext.gregs[REG_EFL] &= ~(greg_t)0x100;
    if (uc->uc_mcontext.fpregs) {
      uc->uc_mcontext.fpregs->mxcsr = G->ftz_saved_mxcsr | (uc->uc_mcontext.fpregs->mxcsr & MX_FLAGS & ~0x13u);
      canonical_nan_lanes(uc);
    }
    return;
  }
  // not ours: the previous disposition
  sigaction(sig, &G->old_trap_sa, nullptr);
  (void)si;
}

void on_signal(int sig, siginfo_t *si, void *ctx) {
  if (sig == SIGFPE && (si->si_code == FPE_FLTUND || si->si_code == FPE_FLTINV) && G &&
      (G->ftz_trap || G->nan_trap) && gettid() == G->tid && ftz_fault((ucontext_t *)ctx))
    return;
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
  // Ticks every 0.25 s: the wall-clock limit, or a fiber that made no runtime call at all (no
  // memory access, no sync point) for stall_s seconds: a loop that a GPU would also never leave
  // (e.g. a spin on a plain load that the compiler hoisted).
  bool fire = G->d.timeout_s > 0 && now_s() - G->t0 > G->d.timeout_s;
  if (G->in_fiber && G->stall_s > 0) {
    u64 c = G->calls + G->st->switches;
    if (c == G->stall_seen) {
      if (++G->stall_ticks >= (int)(G->stall_s * 4)) { fire = true; G->stalled = 1; }
    } else {
      G->stall_seen = c;
      G->stall_ticks = 0;
    }
  } else {
    G->stall_ticks = 0;
  }
  if (!fire) return;
  G->timed_out = 1;
  if (G->in_fiber) {
    G->in_fiber = 0;
    G->fault_sig = -1;
    G->fault_addr = 0;
    siglongjmp(G->jb, 2);
  }
}

bool start_timer(timer_t *t, double secs) {
  if (!(secs > 0) && !(G->stall_s > 0)) return false;
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_sigaction = on_timer;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
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
  (void)secs;
  its.it_value.tv_nsec = 250000000;
  its.it_interval.tv_nsec = 250000000;
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
  if (G->ftz_trap || G->nan_trap) {
    sa.sa_sigaction = on_trap;
    sigaction(SIGTRAP, &sa, &G->old_trap_sa);
  }
}

void restore_signals() {
  for (int i = 0; i < 4; ++i) sigaction(k_sigs[i], &G->old_sa[i], nullptr);
  if (G->ftz_trap || G->nan_trap) sigaction(SIGTRAP, &G->old_trap_sa, nullptr);
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
  if (d->stack_bytes > g->stack_size) {  // a kernel with big local arrays: larger fiber stacks
    for (int s = 0; s < MAXSLOTS; ++s)
      if (g->pool[s]) { munmap(g->pool[s], g->stride * MAXT); g->pool[s] = nullptr; }
    g->stack_size = (d->stack_bytes + 4095) & ~(size_t)4095;
    g->stride = g->stack_size + GUARD;
  }
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
  g->hb = d->checks & 1;
  g->align = (d->checks >> 1) & 1;
  g->regions.clear();
  g->nc.clear();
  g->nc_index.clear();
  g->sync.clear();
  for (int i = 0; i < d->nregions; ++i) {
    Region r;
    r.lo = d->regions[3 * i];
    r.hi = d->regions[3 * i + 1];
    r.writable = (int)(d->regions[3 * i + 2] & 1);
    r.kind = R_ARG;
    r.index = (int)(d->regions[3 * i + 2] >> 8);
    r.shadow = nullptr;
    r.sbase = r.lo & ~(uintptr_t)3;
    if (r.hi <= r.lo) continue;
    if (d->regions[3 * i + 2] & 2) { g->nc.push_back({r.lo, r.hi}); g->nc_index.push_back(r.index); }
    // Happens-before shadow for the buffers that can be written (a read-only one cannot race).
    if (g->hb && r.writable) {
      size_t bytes = ((r.hi - r.sbase + 3) / 4) * 3 * sizeof(u64);
      void *p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (p != MAP_FAILED) { r.shadow = (u64 *)p; g->shadows.push_back({r.shadow, bytes}); }
    }
    g->regions.push_back(r);
  }
  // Two arguments may share a buffer: one shadow per byte range, so give overlapping writable
  // regions the shadow of the first one that contains them.
  for (size_t i = 0; i < g->regions.size(); ++i)
    for (size_t j = 0; j < i; ++j) {
      Region &a = g->regions[i], &b = g->regions[j];
      if (a.shadow && b.shadow && a.lo >= b.lo && a.hi <= b.hi) {
        a.shadow = b.shadow + ((a.sbase - b.sbase) / 4) * 3;
        a.sbase = a.sbase;  // granule-aligned offset into b's shadow
        break;
      }
    }
  if (g->hb) {
    size_t tg = (tls_n + 7) / 4 * 3, dg = (d->dyn_shared + 7) / 4 * 3;
    for (int s = 0; s < g->K; ++s) {
      if (g->sh_shadow_n[s] < tg) { free(g->sh_shadow[s]); g->sh_shadow[s] = (u64 *)calloc(tg, 8); g->sh_shadow_n[s] = tg; }
      else if (tg) memset(g->sh_shadow[s], 0, tg * 8);
      if (g->dyn_shadow_n[s] < dg) { free(g->dyn_shadow[s]); g->dyn_shadow[s] = (u64 *)calloc(dg, 8); g->dyn_shadow_n[s] = dg; }
      else if (dg) memset(g->dyn_shadow[s], 0, dg * 8);
    }
  }
  g->tls_region = (int)g->regions.size();
  g->regions.push_back(Region{g->tls_lo, g->tls_hi, 1, R_SHARED, -1, nullptr, g->tls_lo & ~(uintptr_t)3});
  g->dyn_region = (int)g->regions.size();
  g->regions.push_back(Region{1, 0, 1, R_SHARED, -1, nullptr, 0});
  for (Region r : m.segs) { r.shadow = nullptr; g->regions.push_back(r); }
  g->cache = &g_empty_region;
  g->tls_owner = nullptr;
  g->curblk = nullptr;
  g->next.clear();
  g->cur = nullptr;
  g->next_block = 0;
  g->epoch = 1;

  g->tid = gettid();
  g->ftz_trap = d->mxcsr != 0 && (d->mxcsr & (MX_DM | MX_UM)) != (MX_DM | MX_UM);
  g->nan_trap = d->mxcsr != 0 && !(d->mxcsr & MX_IM);
  g->ftz_stepping = 0;
  g->canon_reg = -1;
  g->ftz_flushes = g->ftz_exact = g->nan_canonical = 0;
  unsigned host_mxcsr_v;
  __asm__ __volatile__("stmxcsr %0" : "=m"(host_mxcsr_v));
  volatile unsigned host_mxcsr = host_mxcsr_v;
  install_signals();
  g->timed_out = 0;
  g->stalled = 0;
  g->stall_ticks = 0;
  g->stall_seen = ~0ull;
  {
    const char *e = getenv("CUPYOPS_SIMT_STALL_S");
    g->stall_s = e ? atof(e) : 10.0;
    if (d->timeout_s > 0 && d->timeout_s < g->stall_s) g->stall_s = 0;  // the wall clock comes first
  }
  timer_t timer;
  bool have_timer = start_timer(&timer, d->timeout_s);
  Fiber *volatile running = nullptr;
  if (sigsetjmp(g->jb, 1) != 0) {
    // a fault in kernel code, or the wall-clock watchdog
    g->cur = nullptr;
    if (g->fault_sig == -1) {
      set_err_thread(running);
      err->code = E_WATCHDOG;
      if (g->stalled)
        snprintf(err->msg, sizeof(err->msg), "watchdog: a thread ran %.0f s without any memory access or sync "
                 "point: a loop that never ends (e.g. a spin on a plain, non-volatile load, which the compiler "
                 "hoists out of the loop, as NVRTC does; set CUPYOPS_SIMT_STALL_S)", g->stall_s);
      else
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
  // a fault or the watchdog may leave a fiber's MXCSR (FTZ, trapping) in place
  host_mxcsr_v = host_mxcsr;
  __asm__ __volatile__("ldmxcsr %0" : : "m"(host_mxcsr_v));
  g->ftz_stepping = 0;
  fflush(stdout);  // device printf output appears when the launch completes, as at a GPU sync point
  for (auto &sh : g->shadows) munmap(sh.first, sh.second);
  g->shadows.clear();
  g->sync.clear();
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
  st->fp_traps = g->ftz_flushes + g->ftz_exact;
  st->nan_canonical = g->nan_canonical;
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

// ---------------------------------------------------------------- rounding-mode intrinsics
// Built without instrumentation and with -frounding-math: each operation runs under the rounding
// mode its name states (MXCSR), which is then restored.  Float-to-integer conversions saturate and
// turn NaN into 0, as cvt does on a GPU.
namespace {
struct RoundScope {
  int old;
  explicit RoundScope(int m) : old(fegetround()) { if (m != old) fesetround(m); }
  ~RoundScope() { if (fegetround() != old) fesetround(old); }
};
// __fmaf_ieee_*: never flushed, also under -ftz=true (MXCSR without FTZ/DAZ, exceptions masked)
struct IeeeScope {
  unsigned old;
  IeeeScope() {
    __asm__ __volatile__("stmxcsr %0" : "=m"(old));
    unsigned m = (old & ~0x8040u) | 0x1F80u;
    __asm__ __volatile__("ldmxcsr %0" : : "m"(m));
  }
  ~IeeeScope() { __asm__ __volatile__("ldmxcsr %0" : : "m"(old)); }
};
template <class I, class F> I sat_cvt(F x) {
  if (x != x) return 0;
  F r = nearbyint(x);  // in the current rounding mode
  if (r <= (F)std::numeric_limits<I>::min()) return std::numeric_limits<I>::min();
  // (F)max may round up to 2^N: compare with >=
  if (r >= (F)std::numeric_limits<I>::max()) return std::numeric_limits<I>::max();
  return (I)r;
}
}  // namespace
// A GPU returns the canonical NaN 0x7fffffff from every float instruction (x86: 0xffc00000 or the
// input's payload).
inline float cnanf(float x) {
  unsigned u; memcpy(&u, &x, 4);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) { u = 0x7FFFFFFFu; memcpy(&x, &u, 4); }
  return x;
}
#define SIMT_RMODES(X) X(rn, FE_TONEAREST) X(rz, FE_TOWARDZERO) X(ru, FE_UPWARD) X(rd, FE_DOWNWARD)
#define SIMT_ROUNDED(sfx, M)                                                                                  \
  API float __simt_fadd_##sfx(float a, float b) { RoundScope r(M); volatile float x = a + b; return cnanf(x); }      \
  API float __simt_fsub_##sfx(float a, float b) { RoundScope r(M); volatile float x = a - b; return cnanf(x); }      \
  API float __simt_fmul_##sfx(float a, float b) { RoundScope r(M); volatile float x = a * b; return cnanf(x); }      \
  API float __simt_fdiv_##sfx(float a, float b) { RoundScope r(M); volatile float x = a / b; return cnanf(x); }      \
  API float __simt_frcp_##sfx(float a) { RoundScope r(M); volatile float x = 1.0f / a; return cnanf(x); }            \
  API float __simt_fsqrt_##sfx(float a) { RoundScope r(M); volatile float x = sqrtf(a); return cnanf(x); }           \
  API float __simt_fmaf_##sfx(float a, float b, float c) { RoundScope r(M); volatile float x = fmaf(a, b, c); return cnanf(x); } \
  API float __simt_fmaf_ieee_##sfx(float a, float b, float c) { IeeeScope i; RoundScope r(M); volatile float x = fmaf(a, b, c); return cnanf(x); } \
  API double __simt_dadd_##sfx(double a, double b) { RoundScope r(M); volatile double x = a + b; return x; }  \
  API double __simt_dsub_##sfx(double a, double b) { RoundScope r(M); volatile double x = a - b; return x; }  \
  API double __simt_dmul_##sfx(double a, double b) { RoundScope r(M); volatile double x = a * b; return x; }  \
  API double __simt_ddiv_##sfx(double a, double b) { RoundScope r(M); volatile double x = a / b; return x; }  \
  API double __simt_drcp_##sfx(double a) { RoundScope r(M); volatile double x = 1.0 / a; return x; }         \
  API double __simt_dsqrt_##sfx(double a) { RoundScope r(M); volatile double x = sqrt(a); return x; }        \
  API double __simt_fma_##sfx(double a, double b, double c) { RoundScope r(M); volatile double x = fma(a, b, c); return x; } \
  API float __simt_double2float_##sfx(double a) { RoundScope r(M); volatile float x = (float)a; return cnanf(x); }  \
  API int __simt_float2int_##sfx(float a) { RoundScope r(M); return sat_cvt<int>(a); }                       \
  API unsigned __simt_float2uint_##sfx(float a) { RoundScope r(M); return sat_cvt<unsigned>(a); }            \
  API long long __simt_float2ll_##sfx(float a) { RoundScope r(M); return sat_cvt<long long>(a); }            \
  API unsigned long long __simt_float2ull_##sfx(float a) { RoundScope r(M); return sat_cvt<unsigned long long>(a); } \
  API int __simt_double2int_##sfx(double a) { RoundScope r(M); return sat_cvt<int>(a); }                     \
  API unsigned __simt_double2uint_##sfx(double a) { RoundScope r(M); return sat_cvt<unsigned>(a); }          \
  API long long __simt_double2ll_##sfx(double a) { RoundScope r(M); return sat_cvt<long long>(a); }          \
  API unsigned long long __simt_double2ull_##sfx(double a) { RoundScope r(M); return sat_cvt<unsigned long long>(a); } \
  API float __simt_int2float_##sfx(int a) { RoundScope r(M); volatile float x = (float)a; return x; }        \
  API float __simt_uint2float_##sfx(unsigned a) { RoundScope r(M); volatile float x = (float)a; return x; }  \
  API float __simt_ll2float_##sfx(long long a) { RoundScope r(M); volatile float x = (float)a; return x; }   \
  API float __simt_ull2float_##sfx(unsigned long long a) { RoundScope r(M); volatile float x = (float)a; return x; } \
  API double __simt_ll2double_##sfx(long long a) { RoundScope r(M); volatile double x = (double)a; return x; } \
  API double __simt_ull2double_##sfx(unsigned long long a) { RoundScope r(M); volatile double x = (double)a; return x; }
SIMT_RMODES(SIMT_ROUNDED)

API float __simt_frsqrt_rn(float a) { RoundScope r(FE_TONEAREST); volatile float x = (float)(1.0 / sqrt((double)a)); return cnanf(x); }

// __hfma: a*b+c rounded once to half.  a*b is exact in double; the sum is rounded to odd in double
// (53 >= 2*11+2 bits), after which rounding to half is the correctly rounded result.
API unsigned short __simt_hfma(unsigned short ua, unsigned short ub, unsigned short uc) {
  _Float16 a, b, c;
  memcpy(&a, &ua, 2); memcpy(&b, &ub, 2); memcpy(&c, &uc, 2);
  double p = (double)a * (double)b, s;
  {
    RoundScope r(FE_TOWARDZERO);
    feclearexcept(FE_INEXACT);
    volatile double t = p + (double)c;
    s = t;
    if (fetestexcept(FE_INEXACT) && s == s && !std::isinf(s)) {
      u64 bits; memcpy(&bits, &s, 8); bits |= 1; memcpy(&s, &bits, 8);
    }
  }
  RoundScope r(FE_TONEAREST);
  _Float16 h = (_Float16)s;
  unsigned short out; memcpy(&out, &h, 2);
  return (out & 0x7FFF) > 0x7C00 ? 0x7FFF : out;  // the canonical half NaN
}
