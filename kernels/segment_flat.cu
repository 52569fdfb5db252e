// segment_flat.cu - the flat fast paths of segment_argmax / segment_argmin and their values
// forms (family "segment_flat", cupyops/ops/segment/family.py): contiguous R = 1 x of a real
// value type of 1 to 8 bytes, entry points segment_reduce_flat<T, I, LAST> (indices) and
// segment_reduce_flat_values<T, I, LAST> (indices and the extremes' values); and contiguous
// rows of R = 2 .. 256 of a 4-byte type (float, int, unsigned int),
// segment_reduce_flat_cols<T, I, LAST, STAGED> and
// segment_reduce_flat_cols_values<T, I, LAST> (the flat path of rows, below). A kernel per
// tie, so that a first call compiles two of the four walks. It reuses segment.cu's contract,
// parameters (SegParams), block split, setup, chain tickets and last-block check and fill,
// included here; a family of its own, so that segment.cu's modules (and their PTX and ptxas
// results) are those of segment.cu alone.
#include "segment.cu"

// ------------------------------------------------------------------------------------------
// The flat fast path: contiguous R = 1 x of a real value type of 1, 2, 4 or 8 bytes
// (segment_reduce_flat<T, I, LAST>, and segment_reduce_flat_values for the values forms,
// planned by plan.py for that layout only; every other layout runs segment_reduce(_values)
// above, whose code this path does not touch).
//
// Same block split, setup (sg_setup), chain tickets (sg_chains) and last-block check and fill
// (sg_finish) as segment_reduce; only the walk differs. A block walks its rows [j0, j1) in
// tiles of up to TILE = 256 x K rows [r0, r0 + TILE) (SgfShape: K = 64 bytes of rows a thread,
// at most 32), r0 rounded down so that x + r0 is 32-byte aligned (x need only be aligned to
// its values); a tile covers rows [rs, re):
//   1. ends -> head flags: the block's ends are loaded into a ring in shared memory (SGF_RING),
//      256 at a time, each once, coalesced (lanes shifted to whole aligned lines), and checked
//      as loaded as segment_reduce's window checks them (< 0, > n, or below its predecessor
//      sets zw[2]); a flag pass sets bit p - r0 for each end p <= r0 + TILE (row p starts a
//      new run; bit TILE: the segment closes at the tile's end, the next carry-in is
//      empty). A tile takes at most SGF_CAP ends: if more remain at or before its end, the
//      tile stops at the first one (re) and the next tile starts there (the ring then still
//      holds every end of the tile when its results are stored);
//   2. rows: a whole tile inside [j0, j1) by NQ coalesced 16-byte loads a lane, other
//      tiles by coalesced scalar loads of the rows in [rs, re) (every lane of a warp loads as
//      often as the others), staged by warp in shared memory (PITCH x 16 bytes a thread) and
//      read back as each thread's K consecutive rows;
//   3. each thread reduces its rows by key (ar_key, the one rule; IS_MIN and LAST
//      compile-time), a flag closing the current run: the run's winner (its local row) goes to
//      s_loc at the flag's slot (0xff: no row);
//   4. a warp-shuffle segmented scan of the threads' tails (key, row from r0, "closed a run")
//      plus the 8 warp aggregates and the tile's carry-in give each thread its exclusive
//      prefix; a thread that closed a run completes its first (head) run with it (s_head),
//      thread 255 the tile's carry-out;
//   5. one thread per end of the tile stores its segment's result (coalesced, rotated as
//      sg_store_step): an empty segment (offsets[e] == offsets[e + 1]) empty_index; the
//      block's first end, when its segment is open at the block's start (b > 0), deposits the
//      left chain partial instead, as segment_reduce's scan does. Values mode stores the
//      winner's bits beside its index, read from the staged rows (the carried run's winner,
//      from an earlier tile: one load of x), the empty value for an empty segment; its chain
//      partials and carry are the winners' bits (ArWire).
// After the last tile the block leaves the state sg_chains / sg_finish read (w.k: the ends it
// consumed; the carry, its right or whole-block partial, in ck / ci; sg_head[SG_HEAD_PREV]).
// Bad offsets can make the tiles consume fewer ends than the block holds: the consumed ranges
// then do not tile [0, S), and sg_finish fills the result as for any bad offset; every shared
// index is clamped, every load is inside x and the offsets.
// ------------------------------------------------------------------------------------------

#define SGF_RING 1024                          // the block's ring of loaded ends
#define SGF_CAP (SGF_RING - 2 * SG_THREADS)    // ends a tile takes at most

// The tile of values of S bytes: a thread's K rows are 64 bytes (at most 32 rows, so that its
// flags are bits of one word: 1-byte values take 32 bytes), loaded as NQ 16-byte chunks of CH
// rows each and staged at PITCH chunks a thread (a 16-byte pad: conflict-free loads of a
// thread's chunks); AL rows a 32-byte sector.
template <int S>
struct SgfShape {
    static constexpr int K = 64 / S < 32 ? 64 / S : 32;
    static constexpr int CH = 16 / S;
    static constexpr int CH_LOG2 = S == 1 ? 4 : (S == 2 ? 3 : (S == 4 ? 2 : 1));
    static constexpr int NQ = K / CH;
    static constexpr int PITCH = NQ + 1;
    static constexpr int TILE = SG_THREADS * K;        // rows a tile
    static constexpr int FWORDS = TILE / 32;           // flag words a tile (+1: the tile-end bit)
    static constexpr int AL = 32 / S;
    static constexpr unsigned int MASK = K == 32 ? ~0u : (1u << K) - 1u;   // a thread's flags
};

template <class I, class K>
struct SgfShared {
    unsigned int* flag;                        // FWORDS + 1 words
    unsigned char* loc;                        // TILE
    int* head;                                 // SG_THREADS (tile rows, sgf_tiles)
    cuo::vec_bytes<16>* xs;                    // the tile's rows, PITCH x 16 bytes a thread
    I* ring;                                   // SGF_RING ends (clamped), end e at e % SGF_RING
    K* wk;                                     // 8 warp aggregates: key, row, closed
    int* wi;
    int* wf;
    K* ck;                                     // the tile's carry-out
    int* ci;
};

// (y, later) takes (x, earlier) where x beats it: the one rule (ar_better), so the empty state
// (key 0, the tie side's sentinel row) loses to every element
template <bool LAST, class K, class I>
__device__ __forceinline__ void sgf_take(K& yk, I& yi, K xk, I xi)
{
    if (ar_better(xk, xi, yk, yi, LAST)) {
        yk = xk;
        yi = xi;
    }
}

// Thread `lane`'s 16-byte chunk q of the warp's staged rows: PITCH chunks a thread
// (SgfShape; addresses affine in q, so that the compiler holds one base, not one register a
// chunk).
template <class SH>
__device__ __forceinline__ int sgf_chunk(int lane, int q) { return lane * SH::PITCH + q; }

// Clamped end of segment e (offsets[e + 1]): from the ring while it still holds it, else read
// again (a tile with more than SGF_RING - 256 ends).
template <class I>
__device__ __forceinline__ I sgf_end_at(const I* ring, I e, I kw, const void* offs,
                                        const SegParams& p)
{
    return e >= kw - SGF_RING ? ring[e & (SGF_RING - 1)] : sg_end<I>(offs, e, p);
}

// A tile's ends -> head flags (its flag words zeroed before the barrier ahead of this call):
// every end from k on whose clamped row pc <= tend, at most SGF_CAP of them, sets bit pc - r0
// (row pc starts a new run); ends are loaded into the ring 256 at a time (each once,
// coalesced: lanes shifted so that each warp reads whole aligned lines; kw: loaded so far)
// and checked as loaded (bad: < 0, > n, or below its predecessor). Returns the ends flagged
// so far. Every thread of the block calls it (block-uniform loops).
template <class I>
__device__ __forceinline__ I sgf_flag_ends(unsigned int* flag, I* ring, I k, I& kw, int& bad,
                                           I kL, I kR, I start_l, I r0, I tend,
                                           const void* offs, unsigned long long oaddr,
                                           const SegParams& p)
{
    const int tid = threadIdx.x;
    const I kt = k;
    while (true) {
        while (k + SG_THREADS > kw && kw < kR) {    // (block-uniform)
            const int lead = p.off_stride == 1 ? (int)((oaddr + (unsigned long long)kw + 1) & 31) : 0;
            const I e = kw - (I)lead + (I)tid;
            I g = e < kR ? e : kR - 1;
            g = g < kw ? kw : g;
            const long long raw = sg_offset_raw(offs, (long long)g + 1, p);
            const I pc = sg_clamp<I>(raw, 0, p.n);
            const bool mine = e >= kw && e < kR;
            if (mine) ring[e & (SGF_RING - 1)] = pc;
            __syncthreads();
            if (mine) {
                const I prev = e == kL ? start_l : ring[(e - 1) & (SGF_RING - 1)];
                bad |= raw < 0 || raw > p.n || pc < prev;
            }
            kw = kw - (I)lead + SG_THREADS < kR ? kw - (I)lead + SG_THREADS : kR;
        }
        const I e = k + (I)tid;
        const bool has = e < kw && e - kt < (I)SGF_CAP;
        const I pc = has ? ring[e & (SGF_RING - 1)] : (I)0;
        const bool in = has && pc <= tend;
        if (in) {
            I slot = pc - r0;
            slot = slot < 0 ? (I)0 : slot;
            atomicOr(&flag[slot >> 5], 1u << (slot & 31));
        }
        const int cnt = __syncthreads_count(in);
        k += (I)cnt;
        if (cnt < SG_THREADS) return k;
    }
}

// Row `row` of the tile (from r0) as staged: thread row / K's chunks, in its warp's part.
template <class B>
__device__ __forceinline__ B sgf_staged(const cuo::vec_bytes<16>* xs, int row)
{
    typedef SgfShape<sizeof(B)> SH;
    const int t = row / SH::K, i = row % SH::K;
    return reinterpret_cast<const B*>(xs + (t >> 5) * 32 * SH::PITCH +
                                      sgf_chunk<SH>(t & 31, i >> SH::CH_LOG2))[i & (SH::CH - 1)];
}

// The end of a tile of rows [rs, tend) whose ends kt .. k - 1 were flagged: the tile's end, or
// the block's (j1), or, when the tile took SGF_CAP ends and more remain at or before its end,
// the first end it could not take (its rows go to the next tile, where that end closes the
// carried run at slot rs - r0; the ring still holds every end of the tile). `more`: another
// tile follows. (Block-uniform.)
template <class I>
__device__ __forceinline__ I sgf_tile_end(const I* ring, I k, I kt, I kw, I rs, I tend, I j1,
                                          bool& more)
{
    I re = tend < j1 ? tend : j1;
    more = re < j1;
    if (k - kt == (I)SGF_CAP && k < kw) {
        const I nx = ring[k & (SGF_RING - 1)];
        if (nx <= tend) {
            re = nx < rs ? rs : (nx > re ? re : nx);
            more = true;
        }
    }
    return re < rs ? rs : re;
}

template <class T, class I, bool IS_MIN, bool LAST, bool VAL>
__device__ __forceinline__ void sgf_tiles(SgCtx<T, I, VAL>& cx,
                                          const SgfShared<I, typename ArType<T>::key>& s)
{
    typedef typename ArType<T>::bits B;
    typedef typename ArType<T>::key K;
    typedef SgfShape<sizeof(B)> SH;
    constexpr int TK = SH::K, TILE = SH::TILE, CH = SH::CH, NQ = SH::NQ;
    static_assert(sizeof(B) <= 8, "the flat path reads values of 1 to 8 bytes");
    constexpr K FLIP = IS_MIN ? ~K() : K();
    const SegParams& p = *cx.p;
    SgWalk<I>& w = cx.w;
    const B* x = reinterpret_cast<const B*>(cx.x);
    const int tid = threadIdx.x, lane = tid & 31, wid = tid >> 5;
    const I empty = LAST ? (I)-1 : cuo::index_max<I>();
    // within a tile, rows are ints from r0: RSENT the empty state, RCARRY the carry-in (before
    // every row of the tile, after the empty state in the tie order)
    constexpr int RSENT = LAST ? (int)0x80000000 : 0x7fffffff;
    constexpr int RCARRY = LAST ? (int)0x80000001 : -1;
    const I n = (I)p.n;
    // the block's rows [j0, j1) and ends [kL, kR) (clamped: bad offsets read nothing outside)
    const I kL = w.k, kR = (I)sg_head[SG_HEAD_KR];
    const I start_l = (I)sg_head[SG_HEAD_START_L];
    I j0 = w.j;
    j0 = j0 < 0 ? (I)0 : (j0 > n ? n : j0);
    I j1 = j0 + ((w.D1 - w.D) - (kR - kL));
    j1 = j1 < j0 ? j0 : (j1 > n ? n : j1);
    // the first tile starts at or before j0, where x + r0 is 32-byte aligned (whole sectors)
    const int a = (int)((reinterpret_cast<unsigned long long>(x) / sizeof(B)) & (SH::AL - 1));
    // thread t stores the results of ends e with (aout + e) % 256 == t: each warp's stores one
    // aligned run, a thread's from tile to tile in order (as sg_store_step)
    const int aout = (int)((reinterpret_cast<unsigned long long>(cx.out) /
                            (unsigned)p.out_width) & (SG_THREADS - 1));
    cuo::vec_bytes<16>* const xw = s.xs + wid * 32 * SH::PITCH;  // the warp's staged rows
    K ck = K();
    I ci = empty;                              // the carry into the tile (the open run)
    I k = kL;                                  // ends flagged so far
    I kw = kL;                                 // ends loaded into the ring so far
    I rs = j0;                                 // the next tile's first row
    int bad = 0;
    const bool report = blockIdx.y == 0;
    const unsigned long long oaddr = reinterpret_cast<unsigned long long>(cx.offs) /
                                     (unsigned)p.off_width;
    bool more = true;
    while (more) {
        // the tile: rows [rs, re) of [r0, r0 + TILE), r0 rs rounded down to a 32-byte
        // boundary of x; re is the tile's end, or the block's, or where the tile's ends reach
        // SGF_CAP (the ring holds them all until the tile's results are stored)
        const I r0 = rs - (I)((rs + (I)a) & (SH::AL - 1));
        const I tend = r0 + TILE;
        const I base = r0 + (I)tid * TK;
        const I wbase = r0 + (I)(wid * 32 * TK);
        // (1) the tile's ends -> head flags
        if (tid <= SH::FWORDS) s.flag[tid] = 0u;
        if constexpr (SH::FWORDS >= SG_THREADS)                // (32 rows a thread: 257 words)
            if (tid + SG_THREADS <= SH::FWORDS) s.flag[tid + SG_THREADS] = 0u;
        __syncthreads();
        const I kt = k;
        k = sgf_flag_ends(s.flag, s.ring, k, kw, bad, kL, kR, start_l, r0, tend, cx.offs, oaddr, p);
        const I re = sgf_tile_end(s.ring, k, kt, kw, rs, tend, j1, more);
        const bool full = rs == r0 && re == tend;      // (block-uniform)
        // (2) the warp's rows [wbase, wbase + 32 K), coalesced, staged by warp (swizzled)
        if (full) {
            cuo::vec_bytes<16> u[NQ];
#pragma unroll
            for (int q = 0; q < NQ; ++q)
                u[q] = cuo::vec_load<cuo::vec_bytes<16>>(x + wbase + q * 32 * CH + lane * CH);
            // (load q's lane holds chunk lane % NQ of thread (32 / NQ) q + lane / NQ)
            cuo::vec_bytes<16>* const st = xw + sgf_chunk<SH>(lane / NQ, lane % NQ);
#pragma unroll
            for (int q = 0; q < NQ; ++q) st[q * (32 / NQ) * SH::PITCH] = u[q];
        } else {
            // (the rows inside [rs, re) only; every lane of a warp loads as often as the
            // others, those outside on a row of the same range; load m's lane holds row
            // lane % K of thread (32 / K) m + lane / K)
            B* const st = reinterpret_cast<B*>(xw + sgf_chunk<SH>(lane / TK, (lane & (TK - 1)) >> SH::CH_LOG2)) +
                          (lane & (CH - 1));
#pragma unroll
            for (int m = 0; m < TK; ++m) {
                const I rlo = wbase + (I)(m * 32);
                if (re > rs && rlo + 31 >= rs && rlo < re) {
                    I g = rlo + (I)lane;
                    g = g < rs ? rs : (g > re - 1 ? re - 1 : g);
                    st[m * (32 / TK) * SH::PITCH * CH] = __ldg(x + g);
                }
            }
        }
        __syncwarp();
        // (3) the thread's rows (from the warp's staging, a 16-byte chunk at a time) reduced by
        // key, a flag closing the run
        const int fb = tid * TK;
        const unsigned int fm = (s.flag[fb >> 5] >> (fb & 31)) & SH::MASK;
        K bk = K();
        int bi;
        if (full) {
            int bl = 0;
#pragma unroll
            for (int q = 0; q < NQ; ++q) {
                const cuo::vec_bytes<16> u = xw[sgf_chunk<SH>(lane, q)];
#pragma unroll
                for (int c = 0; c < CH; ++c) {
                    const int i = CH * q + c;
                    const B b = cuo::vec_elem<sizeof(B)>(u, c);
                    const K key = ar_key<T>(b, FLIP, ~K());
                    const bool f = (fm >> i) & 1u;
                    if (f) s.loc[fb + i] = i == 0 ? (unsigned char)0xff : (unsigned char)bl;
                    if (i == 0 || f || (LAST ? key >= bk : key > bk)) {
                        bk = key;
                        bl = i;
                    }
                }
            }
            bi = tid * TK + bl;
        } else {
            int bl = -1;
            const int lo = rs - base < 0 ? 0 : (rs - base > TK ? TK : (int)(rs - base));
            const int hi = re - base < 0 ? 0 : (re - base > TK ? TK : (int)(re - base));
#pragma unroll
            for (int q = 0; q < NQ; ++q) {
                const cuo::vec_bytes<16> u = xw[sgf_chunk<SH>(lane, q)];
#pragma unroll
                for (int c = 0; c < CH; ++c) {
                    const int i = CH * q + c;
                    const B b = cuo::vec_elem<sizeof(B)>(u, c);
                    const K key = ar_key<T>(b, FLIP, ~K());
                    if ((fm >> i) & 1u) {
                        s.loc[fb + i] = bl < 0 ? (unsigned char)0xff : (unsigned char)bl;
                        bl = -1;
                        bk = K();
                    }
                    if (i >= lo && i < hi && (bl < 0 || (LAST ? key >= bk : key > bk))) {
                        bk = key;
                        bl = i;
                    }
                }
            }
            bi = bl < 0 ? RSENT : tid * TK + bl;
        }
        // (4) segmented scan of the threads' tails (flag: the thread closed a run)
        K sk = bk;
        int si = bi;
        int sf = fm != 0u;
#pragma unroll
        for (int d = 1; d < 32; d <<= 1) {
            const K xk = __shfl_up_sync(0xffffffffu, sk, d);
            const int xi = __shfl_up_sync(0xffffffffu, si, d);
            const int xf = __shfl_up_sync(0xffffffffu, sf, d);
            if (lane >= d) {
                if (!sf) sgf_take<LAST>(sk, si, xk, xi);
                sf |= xf;
            }
        }
        if (lane == 31) {
            s.wk[wid] = sk;
            s.wi[wid] = si;
            s.wf[wid] = sf;
        }
        __syncthreads();
        // the exclusive prefix: the lanes before, the warps before, the tile's carry-in
        K pk = __shfl_up_sync(0xffffffffu, sk, 1);
        int pi = __shfl_up_sync(0xffffffffu, si, 1);
        int pf = __shfl_up_sync(0xffffffffu, sf, 1);
        if (lane == 0) {
            pk = K();
            pi = RSENT;
            pf = 0;
        }
        for (int w2 = wid - 1; w2 >= 0 && !pf; --w2) {
            sgf_take<LAST>(pk, pi, s.wk[w2], s.wi[w2]);
            pf = s.wf[w2];
        }
        if (!pf) sgf_take<LAST>(pk, pi, ck, ci == empty ? RSENT : RCARRY);
        // (5) the head run (closed at the thread's first flag) completed with the prefix
        if (fm) {
            const int ff = __ffs((int)fm) - 1;
            const unsigned int li = s.loc[fb + ff];
            K hk = K();
            int hi = RSENT;
            if (li != 0xffu) {
                hk = ar_key<T>(reinterpret_cast<const B*>(xw + sgf_chunk<SH>(lane, (int)li >> SH::CH_LOG2))[li & (CH - 1)],
                               FLIP, ~K());
                hi = tid * TK + (int)li;
            }
            sgf_take<LAST>(hk, hi, pk, pi);
            s.head[tid] = hi;
        }
        if (tid == SG_THREADS - 1) {
            if (!sf) sgf_take<LAST>(sk, si, pk, pi);
            *s.ck = sk;
            *s.ci = si;
        }
        __syncthreads();
        // (6) a thread per end of the tile: its result (or the left chain partial), coalesced
        for (I e = kt + (I)(((int)tid - (int)(((I)aout + kt) & (SG_THREADS - 1))) & (SG_THREADS - 1));
             e < k; e += SG_THREADS) {
            const I pe = sgf_end_at(s.ring, e, kw, cx.offs, p);
            const I ps = e == kL ? start_l : sgf_end_at(s.ring, e - 1, kw, cx.offs, p);
            I slot = pe - r0;
            slot = slot < 0 ? (I)0 : (slot > TILE ? (I)TILE : slot);
            int rr;
            if (slot == TILE) {
                rr = *s.ci;
            } else {
                const int t2 = (int)slot / TK, i2 = (int)slot % TK;
                const unsigned int fw = s.flag[(int)slot >> 5] >> ((t2 * TK) & 31);
                const unsigned int li = s.loc[(int)slot];
                rr = (fw & ((1u << i2) - 1u)) == 0u ? s.head[t2]
                                                   : (li == 0xffu ? RSENT : t2 * TK + (int)li);
            }
            const I r = rr == RSENT ? empty : (rr == RCARRY ? ci : r0 + (I)rr);
            if (e == kL && blockIdx.x > 0) {
                // the block's first segment, open at its start: its left chain partial
                typename SgCtx<T, I, VAL>::Best b;
                const B v = r == empty ? B() : __ldg(x + r);
                b.k = r == empty ? K() : ar_key<T>(v, FLIP, ~K());
                b.i = r;
                if constexpr (VAL) b.v = v;
                sg_deposit(cx, 0, b);
            } else {
                // (sg_stores_end: bad offsets can give two blocks the same end; the last
                // block's fill then sets the whole result)
                if (sg_stores_end<I>(w, e, ps, pe)) {
                    const bool emp = pe == ps || r == empty;
                    ar_store_index<long long>(cx.out, (long long)e,
                                              emp ? p.empty_index
                                                  : (long long)(p.relative ? r - ps : r),
                                              p.out_width);
                    // values mode: the winner's bits from the tile's staged rows (no load of
                    // x), or the carried run's (one load a tile at most); one store for every
                    // lane (a warp-wide instruction: coalesced)
                    if constexpr (VAL) {
                        B v = sg_empty_bits<T>(p);
                        if (!emp) v = rr == RCARRY ? __ldg(x + ci) : sgf_staged<B>(s.xs, rr);
                        ar_store_value<T>(cx.vout, (long long)e, v);
                    }
                }
            }
        }
        // the next tile's carry-in: the open run, or nothing when a segment closed at the end
        if (s.flag[SH::FWORDS] & 1u) {
            ck = K();
            ci = empty;
        } else {
            const int rr = *s.ci;
            ck = *s.ck;
            ci = rr == RSENT ? empty : (rr == RCARRY ? ci : r0 + (I)rr);
        }
        rs = re;
        __syncthreads();
    }
    if (__syncthreads_or(bad) && tid == 0 && report) sg_flag_launch_error(cx.zw);
    // the state sg_chains and sg_finish read
    if (tid == 0) {
        // (values mode: the wire word is the carried element's bits, ArWire)
        if constexpr (VAL) cx.sh.ck()[0] = ci == empty ? K() : (K)__ldg(x + ci);
        else cx.sh.ck()[0] = ck;
        cx.sh.ci()[0] = ci;
        sg_head[SG_HEAD_PREV] = k > kL ? sgf_end_at(s.ring, k - 1, kw, cx.offs, p) : start_l;
    }
    w.k = k;
    w.j = j1;
    w.D = w.D1;
    w.wn = 0;
    __syncthreads();
}

template <class T, class I, bool LAST, bool VAL>
__device__ __forceinline__ void sgf_run(const T* x, const void* offsets, void* out, void* vout,
                                        void* pkey, void* pidx, long long* cons,
                                        unsigned int* zw, const SegParams& p)
{
    // dynamic shared memory (plan.py's flat shared bytes, family.flat_shared_bytes): from
    // SG_STAGE_FRONT, the staged rows (PITCH x 16 bytes a thread), s_loc, s_head, the
    // flags and the ring. It overlaps SgShared's parts, which only sg_setup (the carries,
    // rewritten after the tiles), sg_chains and sg_finish use, before and after the tiles.
    typedef typename ArType<T>::key K;
    typedef SgfShape<sizeof(typename ArType<T>::bits)> SH;
    constexpr unsigned O_LOC = SG_THREADS * SH::PITCH * 16, O_HEAD = O_LOC + SH::TILE,
                       O_FLAG = O_HEAD + SG_THREADS * 4, O_RING = O_FLAG + 16 * ((4 * (SH::FWORDS + 1) + 15) / 16);
    static_assert(SG_STAGE_FRONT + O_RING + SGF_RING * sizeof(I) >= SgShared<T, I, VAL>::O_CK + 32,
                  "the flat path's shared memory holds SgShared's fixed parts and the carry");
    unsigned char* const dyn = reinterpret_cast<unsigned char*>(sg_smem) + SG_STAGE_FRONT;
    __shared__ K sgf_wk[SG_THREADS / 32];
    __shared__ int sgf_wi[SG_THREADS / 32];
    __shared__ int sgf_wf[SG_THREADS / 32];
    __shared__ K sgf_ck;
    __shared__ int sgf_ci;
    const SgfShared<I, K> s = {reinterpret_cast<unsigned int*>(dyn + O_FLAG), dyn + O_LOC,
                            reinterpret_cast<int*>(dyn + O_HEAD),
                            reinterpret_cast<cuo::vec_bytes<16>*>(dyn),
                            reinterpret_cast<I*>(dyn + O_RING),
                            sgf_wk, sgf_wi, sgf_wf, &sgf_ck, &sgf_ci};
    SgCtx<T, I, VAL> cx;
    // (cx.last from p.last, which the host sets from the tie it names LAST by: a constant LAST
    // here gave ptxas's allocation of the walk's loop a quarter more instructions)
    sg_ctx_init(cx, x, offsets, out, vout, pkey, pidx, cons, zw, p, 0);
    cx.t.c = 0;
    cx.t.part = (int)threadIdx.x;
    cx.t.parts = SG_THREADS;
    cx.t.col_ok = true;
    cx.flat = true;
    sg_setup(cx);
    if (p.is_min) sgf_tiles<T, I, true, LAST, VAL>(cx, s);
    else sgf_tiles<T, I, false, LAST, VAL>(cx, s);
    sg_chains(cx);
    sg_finish(cx);
}

// The flat fast path's entry point (same arguments as segment_reduce; p.cw_log2 == 0,
// p.ncols == 1, x contiguous and aligned to its values, T real of 1 to 8 bytes; dynamic
// shared memory: the parts of SgShared up to the carry, plan.py's flat shared bytes).
// LAST is p.last (the host names the instantiation of its parameters): the walks of one tie a
// kernel, about half the NVRTC time of the four in one (issue 33). The extreme stays a branch
// on p.is_min: a kernel per walk compiled its loop with a fifth more instructions.
template <class T, class I, bool LAST>
__global__ void __launch_bounds__(256, 4)
segment_reduce_flat(const T* __restrict__ x, const void* __restrict__ offsets,
                    void* __restrict__ out, void* pkey, void* pidx, long long* cons,
                    unsigned int* zw, SegParams p)
{
    sgf_run<T, I, LAST, false>(x, offsets, out, nullptr, pkey, pidx, cons, zw, p);
}

// The values form (max_and_argmax / min_and_argmin; segment_reduce_values' arguments): the
// same walk, each result's value read from the tile's staged rows where its index is stored.
template <class T, class I, bool LAST>
__global__ void __launch_bounds__(256, 4)
segment_reduce_flat_values(const T* __restrict__ x, const void* __restrict__ offsets,
                           void* __restrict__ out, void* __restrict__ vout, void* pkey,
                           void* pidx, long long* cons, unsigned int* zw, SegParams p)
{
    sgf_run<T, I, LAST, true>(x, offsets, out, vout, pkey, pidx, cons, zw, p);
}

// ------------------------------------------------------------------------------------------
// The flat path of rows: contiguous x of R = 2 .. 256 trailing positions (rows of R values of
// a 4-byte type, one after another: row stride R x 4 bytes): segment_reduce_flat_cols<T, I,
// LAST, STAGED> (indices) and segment_reduce_flat_cols_values<T, I, LAST> (indices and values,
// always staged: each value read from the staged tile). A thread is column c of partition
// `part` (CW = 2**cw_log2 >= R columns, P = 256 / CW partitions: a warp is 32 columns of one
// partition, or for CW < 32 the CW columns of 32 / CW partitions).
// STAGED (chosen by plan.py): rows not on 32-byte boundaries (x's start, or R x 4 bytes) are
// first staged through shared memory from 128-byte boundaries (sgfc_stage), so that each
// warp's load is whole sectors; rows on them are read straight into registers (about a third
// fewer instructions a value in the issue-rate model).
// Same block split, setup, chains and finish as segment_reduce (columns as its strip's); the
// walk is the flat path's, by tiles of P x SGFC_K rows [r0, r0 + P SGFC_K) (r0 = rs):
//   1. ends -> head flags (sgf_flag_ends, as the flat path);
//   2. each thread loads its column of the partition's SGFC_K consecutive rows (a warp's
//      loads: one row's 32 consecutive columns, or CW columns of 32 / CW rows, whole sectors;
//      STAGED: from the staged tile) and reduces them by key, a flag
//      closing the current run: the run's winner (its local row) goes to s_loc, the first
//      closed run's (the head's) key and row stay in registers;
//   3. the partitions' tails (key, row, "closed a run") in shared memory; each thread's
//      exclusive prefix walks the partitions before it in its column back to one that closed
//      a run (CW >= 32: at most P - 1 <= 7; smaller CW: at most 15 inside the warp, then at
//      most 7 warps: sgfc_small_prefix), then the tile's carry-in; the head run completed
//      with it (s_head), the last partition's inclusive value the column's carry-out;
//   4. the results of the tile's ends: thread (part, c) stores column c of the ends kt + part,
//      kt + part + P, ... (a warp's stores: 32 consecutive outputs, one segment's columns or
//      32 / CW segments'); an empty segment empty_index; the block's first end, open at its
//      start (b > 0), deposits the left chain partial of each column instead.
// ------------------------------------------------------------------------------------------

#define SGFC_K 16                              // rows a thread per tile
#define SGFC_ROWS_MAX (SG_THREADS / 2 * SGFC_K)    // rows a tile at most (CW = 2)
#define SGFC_FWORDS (SGFC_ROWS_MAX / 32)       // flag words (+1: the tile-end bit)
#define SGFC_ELEMS (SG_THREADS * SGFC_K)       // values a tile at most (rows x R, R <= CW)
#define SGFC_SPAN (SGFC_ELEMS + 32)            // staged values (from a 128-byte boundary)
#define SGFC_STAGE (SGFC_SPAN + 256)           // ... their words, padded for CW < 32 (sgfc_pad)
#define SGFC_CHUNKS ((SGFC_SPAN + SG_THREADS - 1) / SG_THREADS)    // staging loads a thread

template <class I>
struct SgfcShared {
    unsigned int* flag;                        // SGFC_FWORDS + 1 words
    unsigned char* loc;                        // its closed runs' winners: row i of thread t
                                               // at i x 256 + t (conflict-free byte stores)
    int* head;                                 // a thread: its head run, completed
    cuo::u32* tk;                              // a thread: its tail (key, row, closed)
    int* ti;
    int* tf;
    cuo::u32* ck;                              // a column: the tile's carry-out
    int* ci;
    I* ring;                                   // SGF_RING ends (clamped), end e at e % SGF_RING
    cuo::u32* xs;                              // SGFC_STAGE: the tile's values, staged
};

// The staged word of value j (from ea) for CW = 2**cwl < 32: CW words of pad after every 16 CW
// values, so that the 32 / CW partitions of a warp, 16 R values apart, read other banks (16 R a
// multiple of 32 put them all on the same ones: 16-way conflicts at R = 2; review of eba1a44,
// M1). At most 256 words of pad (SGFC_STAGE).
__device__ __forceinline__ int sgfc_pad(int j, int cwl) { return j + ((j >> (cwl + 4)) << cwl); }
// ... for any CW (the values forms' reads of the winners)
__device__ __forceinline__ int sgfc_word(int j, int cwl) { return cwl < 5 ? sgfc_pad(j, cwl) : j; }

// The tile's values [e0, e1) into xs (from ea, a 128-byte boundary of x at or before e0; PAD:
// at sgfc_pad's words): coalesced, each warp's load one aligned line, every lane of it loading
// (those outside the range a value inside it), lines outside it skipped; then a barrier. Every
// thread calls it.
template <bool PAD, class B, class I>
__device__ __forceinline__ void sgfc_stage(cuo::u32* xs, const B* x, I e0, I e1, I ea, int cwl)
{
    const int tid = threadIdx.x, wl = tid & ~31;
#pragma unroll
    for (int m = 0; m < SGFC_CHUNKS; ++m) {
        const I line = ea + (I)(m * SG_THREADS + wl);       // the warp's 32 values
        if (e1 > e0 && line < e1 && line + 32 > e0) {       // (warp-uniform)
            const I g = line + (I)(tid & 31);
            const B b = __ldg(x + (g < e0 ? e0 : (g > e1 - 1 ? e1 - 1 : g)));
            if (g >= e0 && g < e1) xs[PAD ? sgfc_pad((int)(g - ea), cwl) : (int)(g - ea)] = b;
        }
    }
    __syncthreads();
}

// The exclusive prefix (pk, pi, pf) of thread tid's partition in column c for CW = 2**cwl <
// 32, back to a partition that closed a run (pf), from the partitions' tails (bk, bi, sf). A
// warp holds 32 / CW partitions of the same columns (up to 128 partitions a block, too many to
// walk one by one): the warp's partitions before are walked first (at most 15), its last
// partition's inclusive value then replaces its tail, and the warps before are walked by those
// (at most 7). (A shuffle scan held 9 more registers and spilled in the staged kernel on
// sm_90.) Every thread calls it (a barrier inside).
template <bool LAST, class K, class I>
__device__ __forceinline__ void sgfc_small_prefix(const SgfcShared<I>& s, K& pk, int& pi,
                                                  int& pf, K bk, int bi, int sf, int cwl, int c)
{
    const int tid = threadIdx.x, lane = tid & 31, cw = 1 << cwl;
    s.tk[tid] = bk;
    s.ti[tid] = bi;
    s.tf[tid] = sf;
    __syncwarp();
    for (int q = lane - cw; q >= 0 && !pf; q -= cw) {
        const int t2 = (tid & ~31) + q;
        sgf_take<LAST>(pk, pi, s.tk[t2], s.ti[t2]);
        pf = s.tf[t2];
    }
    // (no lane of the warp reads its last partition's slots above: no second __syncwarp)
    if (lane >= 32 - cw) {                     // (the warp's last partition)
        K wk = bk;
        int wi = bi;
        if (!sf) sgf_take<LAST>(wk, wi, pk, pi);
        s.tk[tid] = wk;
        s.ti[tid] = wi;
        s.tf[tid] = sf | pf;
    }
    __syncthreads();
    for (int w2 = (tid >> 5) - 1; w2 >= 0 && !pf; --w2) {
        const int t2 = w2 * 32 + 32 - cw + c;
        sgf_take<LAST>(pk, pi, s.tk[t2], s.ti[t2]);
        pf = s.tf[t2];
    }
}

template <class T, class I, bool IS_MIN, bool LAST, bool STAGED, bool VAL, bool STRIPS>
__device__ __forceinline__ void sgfc_tiles(SgCtx<T, I, VAL>& cx, const SgfcShared<I>& s)
{
    typedef typename ArType<T>::bits B;
    typedef typename ArType<T>::key K;
    static_assert(sizeof(B) == 4 && sizeof(K) == 4, "the flat path reads 4-byte values");
    static_assert(STAGED || !VAL, "the values form reads its values from the staged tile");
    static_assert(!STRIPS || (!STAGED && !VAL), "strips of wider rows are read straight");
    constexpr K FLIP = IS_MIN ? ~K() : K();
    const SegParams& p = *cx.p;
    SgWalk<I>& w = cx.w;
    const B* x = reinterpret_cast<const B*>(cx.x);
    const int tid = threadIdx.x, cwl = p.cw_log2;
    const int c = cx.t.c, part = cx.t.part, parts = cx.t.parts;
    const int R = (int)p.ncols;
    const int rows = parts * SGFC_K;           // a tile's rows
    const I empty = LAST ? (I)-1 : cuo::index_max<I>();
    // within a tile, rows are ints from r0 (as the flat path's)
    constexpr int RSENT = LAST ? (int)0x80000000 : 0x7fffffff;
    constexpr int RCARRY = LAST ? (int)0x80000001 : -1;
    const I n = (I)p.n;
    const I kL = w.k, kR = (I)sg_head[SG_HEAD_KR];
    const I start_l = (I)sg_head[SG_HEAD_START_L];
    I j0 = w.j;
    j0 = j0 < 0 ? (I)0 : (j0 > n ? n : j0);
    I j1 = j0 + ((w.D1 - w.D) - (kR - kL));
    j1 = j1 < j0 ? j0 : (j1 > n ? n : j1);
    K ck = K();
    I ci = empty;                              // the column's carry into the tile
    B cv = B();                                // (values: its winner's bits)
    I k = kL, kw = kL, rs = j0;
    int bad = 0;
    const bool report = blockIdx.y == 0;
    const unsigned long long oaddr = reinterpret_cast<unsigned long long>(cx.offs) /
                                     (unsigned)p.off_width;
    // (idle columns read column 0, unused; STRIPS: block row y covers columns [y CW, y CW +
    // CW) of x's rows, and col is the column in them where the stores need it)
    const int col = (cx.t.col_ok ? c : 0) + (STRIPS ? (int)(blockIdx.y << cwl) : 0);
    // x's element offset from a 128-byte boundary (x is 4-byte aligned)
    const int xa = (int)((reinterpret_cast<unsigned long long>(x) >> 2) & 31);
    bool more = true;
    while (more) {
        const I r0 = rs;
        const I tend = r0 + (I)rows;
        // (1) the tile's ends -> head flags
        if (tid <= SGFC_FWORDS) s.flag[tid] = 0u;
        __syncthreads();
        const I kt = k;
        k = sgf_flag_ends(s.flag, s.ring, k, kw, bad, kL, kR, start_l, r0, tend, cx.offs, oaddr, p);
        const I re = sgf_tile_end(s.ring, k, kt, kw, rs, tend, j1, more);
        // (2) the thread's rows [r0 + fb, r0 + fb + SGFC_K) of column c, inside [rs, re)
        const int fb = part * SGFC_K;
        const unsigned int fm = (s.flag[fb >> 5] >> (fb & 31)) & ((1u << SGFC_K) - 1u);
        const I rem = re - (r0 + (I)fb);
        const int hi = rem < 0 ? 0 : (rem > SGFC_K ? SGFC_K : (int)rem);
        // (STAGED: from the tile's values [rs R, re R), staged first)
        const I e0 = r0 * (I)R;
        const I ea = STAGED ? e0 - (I)((xa + (int)e0) & 31) : e0;
        B v[SGFC_K];
        if constexpr (STAGED) {
            if (cwl < 5) {                     // (block-uniform: the padded layout)
                sgfc_stage<true>(s.xs, x, e0, re * (I)R, ea, cwl);
                const int j = (int)(e0 - ea) + fb * R + col;
#pragma unroll
                for (int i = 0; i < SGFC_K; ++i)
                    v[i] = i < hi ? (B)s.xs[sgfc_pad(j + i * R, cwl)] : B();
            } else {
                sgfc_stage<false>(s.xs, x, e0, re * (I)R, ea, cwl);
                const cuo::u32* xr = s.xs + (e0 - ea) + fb * R + col;
#pragma unroll
                for (int i = 0; i < SGFC_K; ++i) v[i] = i < hi ? (B)xr[i * R] : B();
            }
        } else {
            // (rows on 32-byte boundaries: a warp's load is whole sectors)
            const B* xr = x + (e0 + (I)(fb * R + col));
#pragma unroll
            for (int i = 0; i < SGFC_K; ++i) v[i] = i < hi ? __ldg(xr + i * R) : B();
        }
        K bk = K(), hk = K();
        int bl = -1, hl = -1;
        bool seen = false;
#pragma unroll
        for (int i = 0; i < SGFC_K; ++i) {
            const K key = ar_key<T>(v[i], FLIP, ~K());
            if ((fm >> i) & 1u) {
                s.loc[i * SG_THREADS + tid] = bl < 0 ? (unsigned char)0xff : (unsigned char)bl;
                if (!seen) {
                    hk = bk;
                    hl = bl;
                    seen = true;
                }
                bl = -1;
                bk = K();
            }
            if (i < hi && (bl < 0 || (LAST ? key >= bk : key > bk))) {
                bk = key;
                bl = i;
            }
        }
        const int bi = bl < 0 ? RSENT : fb + bl;
        // (3) the partitions' tails; the exclusive prefix of the column
        const int sf = fm != 0u;
        K pk = K();
        int pi = RSENT, pf = 0;
        if (!STAGED || cwl >= 5) {             // (block-uniform) a partition: whole warps
            s.tk[tid] = bk;
            s.ti[tid] = bi;
            s.tf[tid] = sf;
            __syncthreads();
            for (int q = part - 1; q >= 0 && !pf; --q) {
                const int t2 = (q << cwl) + c;
                sgf_take<LAST>(pk, pi, s.tk[t2], s.ti[t2]);
                pf = s.tf[t2];
            }
        } else if constexpr (STAGED) {         // (CW < 32 plans are staged: plan.py)
            sgfc_small_prefix<LAST>(s, pk, pi, pf, bk, bi, sf, cwl, c);
        }
        if (!pf) sgf_take<LAST>(pk, pi, ck, ci == empty ? RSENT : RCARRY);
        if (fm) {
            int hi2 = hl < 0 ? RSENT : fb + hl;
            if (hl < 0) hk = K();
            sgf_take<LAST>(hk, hi2, pk, pi);
            s.head[tid] = hi2;
        }
        if (part == parts - 1) {
            K sk = bk;
            int si = bi;
            if (!sf) sgf_take<LAST>(sk, si, pk, pi);
            s.ck[c] = sk;
            s.ci[c] = si;
        }
        __syncthreads();
        // (4) column c of the ends kt + part, kt + part + P, ...: results (or left partials)
        if (cx.t.col_ok) {
            // (CW < 32, staged: partition part takes the ends e = part mod P, so that each
            // warp's 32 / CW segments start at a multiple of 32 / CW: whole sectors of the
            // outputs for short rows, as sg_store_step's rotation)
            const int e_first = STAGED && cwl < 5 ? (part - (int)(kt & (I)(parts - 1))) & (parts - 1)
                                                  : part;
            for (I e = kt + (I)e_first; e < k; e += (I)parts) {
                const I pe = sgf_end_at(s.ring, e, kw, cx.offs, p);
                const I ps = e == kL ? start_l : sgf_end_at(s.ring, e - 1, kw, cx.offs, p);
                I slot = pe - r0;
                slot = slot < 0 ? (I)0 : (slot > (I)rows ? (I)rows : slot);
                int rr;
                if (slot == (I)rows) {
                    rr = s.ci[c];
                } else {
                    const int p2 = (int)slot / SGFC_K, i2 = (int)slot % SGFC_K;
                    const int t2 = (p2 << cwl) + c;
                    const unsigned int fw = s.flag[(p2 * SGFC_K) >> 5] >> ((p2 * SGFC_K) & 31);
                    const unsigned int li = s.loc[i2 * SG_THREADS + t2];
                    rr = (fw & ((1u << i2) - 1u)) == 0u
                             ? s.head[t2] : (li == 0xffu ? RSENT : p2 * SGFC_K + (int)li);
                }
                const I r = rr == RSENT ? empty : (rr == RCARRY ? ci : r0 + (I)rr);
                if (e == kL && blockIdx.x > 0) {
                    // the left chain partial: the winner's key (the carry's, or staged: no
                    // load of x, whose rows differ by column)
                    typename SgCtx<T, I, VAL>::Best b;
                    const B* staged = reinterpret_cast<const B*>(s.xs);
                    const int at = sgfc_word((int)(e0 - ea) + rr * R + c, cwl);
                    b.k = rr == RSENT ? K()
                                      : (rr == RCARRY ? ck
                                                      : ar_key<T>(STAGED ? staged[at]
                                                                         : __ldg(x + (e0 + (I)(rr * R + (STRIPS ? col : c)))),
                                                                  FLIP, ~K()));
                    b.i = r;
                    if constexpr (VAL)
                        b.v = rr == RSENT ? B() : (rr == RCARRY ? cv : staged[at]);
                    sg_deposit(cx, 0, b);
                } else {
                    if (sg_stores_end<I>(w, e, ps, pe)) {
                        const bool emp = pe == ps || r == empty;
                        ar_store_index<long long>(cx.out, (long long)e * R + (STRIPS ? col : c),
                                                  emp ? p.empty_index
                                                      : (long long)(p.relative ? r - ps : r),
                                                  p.out_width);
                        // values: the winner's bits, staged or carried (one store instruction
                        // for every lane)
                        if constexpr (VAL) {
                            B v = sg_empty_bits<T>(p);
                            if (!emp)
                                v = rr == RCARRY ? cv
                                                 : reinterpret_cast<const B*>(s.xs)[sgfc_word((int)(e0 - ea) + rr * R + c, cwl)];
                            ar_store_value<T>(cx.vout, (long long)e * R + c, v);
                        }
                    }
                }
            }
        }
        // the next tile's carry-in: the open run, or nothing when a segment closed at the end
        if ((s.flag[rows >> 5] >> (rows & 31)) & 1u) {
            ck = K();
            ci = empty;
        } else {
            const int rr = s.ci[c];
            ck = s.ck[c];
            ci = rr == RSENT ? empty : (rr == RCARRY ? ci : r0 + (I)rr);
            if constexpr (VAL)
                if (rr != RSENT && rr != RCARRY && cx.t.col_ok)     // (idle columns: unused)
                    cv = reinterpret_cast<const B*>(s.xs)[sgfc_word((int)(e0 - ea) + rr * R + c, cwl)];
        }
        rs = re;
        __syncthreads();
    }
    // the state sg_chains and sg_finish read (the last end read before the barrier: the ring
    // overlaps the carries the columns write after it)
    const I prev = tid == 0 && k > kL ? sgf_end_at(s.ring, k - 1, kw, cx.offs, p) : start_l;
    if (__syncthreads_or(bad) && tid == 0 && report) sg_flag_launch_error(cx.zw);
    if (part == 0) {
        // (values: the wire word is the carried winner's bits, ArWire)
        if constexpr (VAL) cx.sh.ck()[c] = ci == empty ? K() : (K)cv;
        else cx.sh.ck()[c] = ck;
        cx.sh.ci()[c] = ci;
    }
    if (tid == 0) sg_head[SG_HEAD_PREV] = prev;
    w.k = k;
    w.j = j1;
    w.D = w.D1;
    w.wn = 0;
    __syncthreads();
}

template <class T, class I, bool LAST, bool STAGED, bool VAL, bool STRIPS = false>
__device__ __forceinline__ void sgfc_run(const T* x, const void* offsets, void* out, void* vout,
                                         void* pkey, void* pidx, long long* cons,
                                         unsigned int* zw, const SegParams& p)
{
    // dynamic shared memory (family.flat_cols_shared_bytes): from SG_STAGE_FRONT, s_loc,
    // s_head, the tails, the carry-outs, the flags, the ring and the staged values; it overlaps
    // SgShared's parts as the flat path's does
    constexpr unsigned O_LOC = 0, O_HEAD = O_LOC + SG_THREADS * SGFC_K,
                       O_TK = O_HEAD + SG_THREADS * 4, O_TI = O_TK + SG_THREADS * 4,
                       O_TF = O_TI + SG_THREADS * 4, O_CK = O_TF + SG_THREADS * 4,
                       O_CI = O_CK + SG_THREADS * 4, O_FLAG = O_CI + SG_THREADS * 4,
                       O_RING = O_FLAG + 16 * ((4 * (SGFC_FWORDS + 1) + 15) / 16),
                       O_XS = O_RING + SGF_RING * sizeof(I);
    static_assert(SG_STAGE_FRONT + O_RING + SGF_RING * sizeof(I) >=
                      SgShared<T, I, VAL>::O_CK + SG_THREADS * (4 + sizeof(I)),
                  "the flat path's shared memory holds SgShared's fixed parts and the carries");
    unsigned char* const dyn = reinterpret_cast<unsigned char*>(sg_smem) + SG_STAGE_FRONT;
    const SgfcShared<I> s = {reinterpret_cast<unsigned int*>(dyn + O_FLAG), dyn + O_LOC,
                             reinterpret_cast<int*>(dyn + O_HEAD),
                             reinterpret_cast<cuo::u32*>(dyn + O_TK),
                             reinterpret_cast<int*>(dyn + O_TI), reinterpret_cast<int*>(dyn + O_TF),
                             reinterpret_cast<cuo::u32*>(dyn + O_CK),
                             reinterpret_cast<int*>(dyn + O_CI), reinterpret_cast<I*>(dyn + O_RING),
                             reinterpret_cast<cuo::u32*>(dyn + O_XS)};
    SgCtx<T, I, VAL> cx;
    sg_ctx_init(cx, x, offsets, out, vout, pkey, pidx, cons, zw, p, p.cw_log2);
    sg_thread_init(cx, p, STRIPS ? blockIdx.y : 0u);   // (a constant 0 for one strip)
    cx.flat = false;
    sg_setup(cx);
    if (p.is_min) sgfc_tiles<T, I, true, LAST, STAGED, VAL, STRIPS>(cx, s);
    else sgfc_tiles<T, I, false, LAST, STAGED, VAL, STRIPS>(cx, s);
    sg_chains(cx);
    sg_finish(cx);
}

// The flat path of rows' entry point (segment_reduce's arguments; p.cw_log2 >= 1, p.ncols <=
// 256, grid.y 1, x's rows contiguous and 4-byte aligned (not STAGED: x and R x 4 multiples of
// 32 bytes), T of 4 bytes; dynamic shared memory: family.flat_cols_shared_bytes).
template <class T, class I, bool LAST, bool STAGED>
__global__ void __launch_bounds__(256, 4)
segment_reduce_flat_cols(const T* __restrict__ x, const void* __restrict__ offsets,
                         void* __restrict__ out, void* pkey, void* pidx, long long* cons,
                         unsigned int* zw, SegParams p)
{
    sgfc_run<T, I, LAST, STAGED, false>(x, offsets, out, nullptr, pkey, pidx, cons, zw, p);
}

// The values form (max_and_argmax / min_and_argmin; segment_reduce_values' arguments): the
// staged walk, each result's value read from the staged tile (a carried winner's bits kept in
// a register), chain partials and carries as the winners' bits.
template <class T, class I, bool LAST>
__global__ void __launch_bounds__(256, 4)
segment_reduce_flat_cols_values(const T* __restrict__ x, const void* __restrict__ offsets,
                                void* __restrict__ out, void* __restrict__ vout, void* pkey,
                                void* pidx, long long* cons, unsigned int* zw, SegParams p)
{
    sgfc_run<T, I, LAST, true, true>(x, offsets, out, vout, pkey, pidx, cons, zw, p);
}

// Rows wider than 256 (index mode; x's start and R x 4 bytes multiples of 32 bytes): the
// straight walk, one block row (grid.y) a strip of 256 columns, chains per strip as
// segment_reduce's (segment_reduce's arguments; p.cw_log2 == 8).
template <class T, class I, bool LAST>
__global__ void __launch_bounds__(256, 4)
segment_reduce_flat_strips(const T* __restrict__ x, const void* __restrict__ offsets,
                           void* __restrict__ out, void* pkey, void* pidx, long long* cons,
                           unsigned int* zw, SegParams p)
{
    sgfc_run<T, I, LAST, false, false, true>(x, offsets, out, nullptr, pkey, pidx, cons, zw, p);
}
