// segment.cu - segmented argmin / argmax over ragged groups: segment_argmax, segment_argmin,
// segment_max_and_argmax, segment_min_and_argmin.
//
// x has shape (n, *rest), read as n rows of R = prod(rest) trailing positions ("columns") of any
// strides; offsets holds S + 1 integers (any integer dtype, read at its own width and
// signedness, any stride). Segment s is rows [offsets[s], offsets[s + 1]); for every segment
// and column the kernel stores the row of the extreme element (tie "first" / "last", NaN the
// extreme: the one comparator of argcompare.cuh, ar_key / ar_better), along axis 0 or from the
// segment's start (p.relative), at the index dtype's width (p.out_width), or p.empty_index for
// an empty segment; values mode (the *_values entry point) also stores the element's raw bits
// (an empty segment: p.empty_lo / p.empty_hi). Outputs are C-contiguous (S, *rest).
//
// Template parameters: T the value type (as argreduce.cu: bool, the integers, cupyops_half,
// cupyops_bfloat16, float, double, cupyops_complex64 / 128, cupyops_datetime); I the index type
// (int when every row, segment, merge position and element offset is below 2**31, else long
// long). Entry points segment_reduce<T, I> and segment_reduce_values<T, I>, 256 threads a
// block. Instantiated by cupyops/ops/segment/family.py, planned by plan.py, packed by params.py
// (SegParams), launched by launch.py.
//
// One launch for any mix of segment lengths: merge-path reduce-by-key. The work is the merge of
// the N = offsets[S] - offsets[0] rows with the S segment ends (an end comes after its
// segment's rows): TOT = N + S items, cut into p.nblocks equal ranges [D_b, D_b+1), D_b =
// floor(b TOT / nblocks), one block each (grid.y: strips of 2**cw_log2 columns). A block finds
// its start (ends before D_b) and its last end (ends before D_b+1) by two searches over the
// offsets, then walks its range in steps: a window of the next ends in shared memory (loaded
// coalesced, as many as the step can use, growing geometrically), the step's rows staged in
// shared memory (coalesced: consecutive threads read consecutive rows, or consecutive columns of
// one row), and P = 256 / CW "partitions" of CW threads (one a column) that each walk ITEMS
// consecutive items of the step (a merge-path search in the window gives each its start): a
// row is an ar_better step, an end closes the segment. So per segment, with no host read:
//   * short segments (many per partition): closed inside one thread's items;
//   * longer ones: spread over partitions (a warp, a block), combined by a segmented scan of the
//     partitions' carries (flag = the partition closed a segment) with the step's carry-in;
//   * segments longer than a step: the carry (per column, in shared memory) runs on;
//   * segments crossing a block boundary: each block deposits its (bits or key, index) partial
//     (left: its first segment, open at D_b; right: its last, open at D_b+1; a block with no end
//     in it deposits one whole-block partial) and draws the segment's ticket; the last to arrive
//     combines the chain's partials and stores the result. The chain of segment k is the blocks
//     b1 - 1 .. b2 where b1 .. b2 are the boundaries D_b in [pstart(k), pend(k)] (k's first item
//     and its end), computed by every participant from offsets[k] and offsets[k + 1] alone.
// Results of a step are staged in shared memory and stored coalesced (CW columns of consecutive
// segments are consecutive output elements). An interior segment (no block boundary in
// [pstart, pend]) is stored by the block holding its end, a chain segment by its chain's last
// block: each output element has one writer, whatever the offsets hold.
//
// Scratch (cupyops/ops/segment/launch.py): the chain partials (pkey: the wire word, ArWire;
// pidx: the row), each block's consumed range of ends (cons), and the words `zw` of the
// holder's zero state (kind "segment": zeroed once when made, 4 + nblocks x ny words), which
// every launch leaves zero but the error code:
//   zw[0..1] (u64) error code of the first bad offset found (atomicMax, kept until the host
//            reads and clears it: cupyops.core.backend.check_device_errors, or the next host
//            read),
//   zw[2]    this launch found a bad offset, zw[3] the grid's ticket,
//   zw[4 + y nblocks + b1] chain tickets.
// The last block of the grid (its ticket) resets zw[2..], so a replay of a captured CUDA graph
// starts clean with no memset.
//
// Offsets are checked on the device as they are read (each end by the block that consumes it;
// offsets[0] by block 0): a negative value, one past n, or one below its predecessor sets
// zw[2]; every read is clamped into [0, n] first, so nothing is read out of bounds. The last
// block also checks that the blocks' consumed ranges tile [0, S) (they do for valid offsets).
// If either check fails, the last block finds the first bad position (one pass over the
// offsets), records it in the error code, and fills the whole result with empty_index (values:
// the empty value): bad offsets never leave a partial or garbage result.
#include "common.cuh"

extern __shared__ unsigned long long sg_smem[];
// What a block's thread 0 finds at its start (sg_setup), read back from shared memory where it
// is used once (after the walk): kept out of the walk's registers, which the 64-bit instantiations
// need (0 spills).
__shared__ long long sg_head[9];
enum { SG_HEAD_O0, SG_HEAD_N, SG_HEAD_D0, SG_HEAD_D1, SG_HEAD_KL, SG_HEAD_START_L, SG_HEAD_END_L,
       SG_HEAD_PREV, SG_HEAD_KR };

#include "argcompare.cuh"  // ArType, ar_key, ar_better, ArBest, ArWire, ar_store_*

#define SG_MAX_DIMS 8
#define SG_THREADS 256
#define SG_WCAP_MAX 1024     // the window's largest capacity (p.wcap <= it)
#define SG_STAGE_FRONT 128   // bytes of the staged rows' front pad

// Kernel parameters, passed by value. Defined once on the host by the SegParams Struct of
// cupyops/ops/segment/params.py, which packs it: keep the two in the same order.
struct SegParams {
    long long n;             // rows of x (its axis 0)
    long long nseg;          // S: segments (offsets holds S + 1 values)
    long long ncols;         // R = prod(x.shape[1:])
    long long row_stride;    // x's stride along axis 0, in bytes (any sign)
    long long off_stride;    // offsets' stride, in elements (any sign)
    long long empty_index;   // an empty segment's index
    unsigned long long empty_lo, empty_hi;  // values mode: an empty segment's value bits
    int off_width, off_signed;   // offsets' itemsize (1, 2, 4, 8), signedness
    int nblocks, cw_log2;    // blocks along the merge path (grid.x); columns a block covers
    int wcap, chunk;         // ends the window holds; the first window load
    int is_min, last, relative, out_width;
    int narrow, nr;          // complex read as two half-width words; trailing dims
    long long r_size[SG_MAX_DIMS], r_in[SG_MAX_DIMS];   // trailing dims, innermost first
                                                        // (sizes, x's strides in bytes)
};
static_assert(sizeof(SegParams) == 240,
              "SegParams layout is defined on the host in cupyops/ops/segment/params.py");
#define SG_AT(field, off) CUO_FIELD_AT(SegParams, field, off)
SG_AT(n, 0); SG_AT(nseg, 8); SG_AT(ncols, 16); SG_AT(row_stride, 24); SG_AT(off_stride, 32);
SG_AT(empty_index, 40); SG_AT(empty_lo, 48); SG_AT(empty_hi, 56); SG_AT(off_width, 64);
SG_AT(off_signed, 68); SG_AT(nblocks, 72); SG_AT(cw_log2, 76); SG_AT(wcap, 80); SG_AT(chunk, 84);
SG_AT(is_min, 88); SG_AT(last, 92); SG_AT(relative, 96); SG_AT(out_width, 100);
SG_AT(narrow, 104); SG_AT(nr, 108); SG_AT(r_size, 112); SG_AT(r_in, 176);
#undef SG_AT

// Merge items a partition walks per step: about 32 bytes of values (2 to 16).
constexpr int sg_items(int bits) { return bits >= 16 ? 2 : (bits <= 2 ? 16 : 32 / bits); }

enum { SG_ZW_TICKET = 3, SG_ZW_LAUNCH_ERROR = 2, SG_ZW_CHAINS = 4 };
// error kinds at one position, by priority (the code keeps the first bad position)
enum { SG_ERR_NEGATIVE = 3, SG_ERR_DECREASING = 2, SG_ERR_PAST_END = 1 };

// ------------------------------------------------------------------------------------------
// Offsets and values
// ------------------------------------------------------------------------------------------

// offsets[j] at its own width and signedness; an unsigned value past 2**63 - 1 reads as
// 2**63 - 1 (past any n).
__device__ __forceinline__ long long sg_offset_raw(const void* offs, long long j,
                                                  const SegParams& p)
{
    const unsigned char* a = reinterpret_cast<const unsigned char*>(offs) +
                             j * p.off_stride * (long long)p.off_width;
    if (p.off_width == 8) {
        const cuo::u64 v = *reinterpret_cast<const cuo::u64*>(a);
        return p.off_signed ? (long long)v : (v >> 63 ? 0x7fffffffffffffffLL : (long long)v);
    }
    if (p.off_width == 4) {
        const cuo::u32 v = *reinterpret_cast<const cuo::u32*>(a);
        return p.off_signed ? (long long)(int)v : (long long)v;
    }
    if (p.off_width == 2) {
        const cuo::u16 v = *reinterpret_cast<const cuo::u16*>(a);
        return p.off_signed ? (long long)(short)v : (long long)v;
    }
    const cuo::u8 v = *a;
    return p.off_signed ? (long long)(signed char)v : (long long)v;
}

template <class I>
__device__ __forceinline__ I sg_clamp(long long v, long long lo, long long hi)
{
    return (I)(v < lo ? lo : (v > hi ? hi : v));
}

// A lane's element f of a warp-aligned loop clamped into [0, n - 1] (n >= 1), as a max and a
// min: the lanes outside it load an element of the same line. (Written as nested branches,
// g++ threads the caller's later `f == g` test through them and gives those lanes a load site
// of their own, which simt counts as a second warp load; NVRTC selects either way.)
template <class I>
__device__ __forceinline__ I sg_clamp_lane(I f, I n)
{
    const I lo = f > (I)0 ? f : (I)0;
    return lo < n - 1 ? lo : n - 1;
}

// The raw bits of the element `off` bytes from x's element 0 (narrow: a complex value only
// element-aligned, read as two half-width words). Through the read-only path (__ldg: x is
// never written during the launch), as argreduce's loads of its restrict input are; the
// issue-rate model (cupyops/bench/issue_rate.py) knows the input's loads by it.
template <class T>
__device__ __forceinline__ typename ArType<T>::bits sg_load(const unsigned char* x, long long off,
                                                           bool narrow)
{
    typedef typename ArType<T>::bits B;
    const unsigned char* a = x + off;
    if constexpr (sizeof(B) == 16) {
        B b;
        if (narrow) {
            b.lo = *reinterpret_cast<const cuo::u64*>(a);
            b.hi = *reinterpret_cast<const cuo::u64*>(a + 8);
        } else {
            const cuo::vec_bytes<16> v = cuo::vec_load<cuo::vec_bytes<16>>(a);
            b.lo = v.w[0];
            b.hi = v.w[1];
        }
        return b;
    } else {
        if constexpr (ArType<T>::kind == 4) {
            if (narrow) {
                const cuo::u32 lo = __ldg(reinterpret_cast<const cuo::u32*>(a));
                const cuo::u32 hi = __ldg(reinterpret_cast<const cuo::u32*>(a + 4));
                return (B)lo | ((B)hi << 32);
            }
        }
        return __ldg(reinterpret_cast<const B*>(a));
    }
}

template <class T>
__device__ __forceinline__ typename ArType<T>::bits sg_empty_bits(const SegParams& p)
{
    typedef typename ArType<T>::bits B;
    if constexpr (sizeof(B) == 16) {
        B b;
        b.lo = p.empty_lo;
        b.hi = p.empty_hi;
        return b;
    } else {
        return (B)p.empty_lo;
    }
}

// Volatile word stores (chain partials: read by another block's last arriver, with
// ar_load_volatile).
template <class W>
__device__ __forceinline__ void sg_put(W* a, const W& w)
{
    if constexpr (sizeof(W) == 16) {
        volatile cuo::u64* v = reinterpret_cast<volatile cuo::u64*>(a);
        v[0] = w.lo;
        v[1] = w.hi;
    } else {
        *reinterpret_cast<volatile W*>(a) = w;
    }
}

// ------------------------------------------------------------------------------------------
// Block state
// ------------------------------------------------------------------------------------------

// Shared memory of a block: the staged rows (256 ITEMS values), the window of ends (wcap rows,
// clamped into [0, n]), the step's results (wcap segments x CW columns: row, and bits in values
// mode), the scan's (wire, index, flag) per thread and the carry per column. Each part starts
// on a 16-byte boundary; cupyops/ops/segment/plan.py's shared_bytes is the same sum.
template <class T, class I, bool VAL>
struct SgShared {
    typedef typename ArType<T>::bits B;
    typedef typename ArType<T>::key K;
    // the parts of fixed size first, at compile-time offsets (no register holds their
    // addresses); then those sized by CW and wcap, as byte offsets
    static constexpr unsigned up16(unsigned long long n) { return (unsigned)((n + 15) & ~15ULL); }
    // staged: a 128-byte front pad, 256 ITEMS values, a back pad of 32 (the flat staging's
    // lanes before and after the step's rows store into the pads, sg_stage)
    static constexpr unsigned O_SK = up16(SG_STAGE_FRONT + ((unsigned long long)SG_THREADS *
                                          sg_items(sizeof(B)) + 32) * sizeof(B));
    static constexpr unsigned O_SI = O_SK + up16(SG_THREADS * sizeof(K));
    static constexpr unsigned O_SF = O_SI + up16(SG_THREADS * sizeof(I));
    static constexpr unsigned O_CK = O_SF + up16(SG_THREADS * sizeof(int));
    unsigned o_ci, o_win, o_res_i, o_res_v;

    template <class P>
    static __device__ __forceinline__ P* at(unsigned off)
    {
        return reinterpret_cast<P*>(reinterpret_cast<unsigned char*>(sg_smem) + off);
    }
    __device__ __forceinline__ B* staged() const { return at<B>(SG_STAGE_FRONT); }
    __device__ __forceinline__ K* sk() const { return at<K>(O_SK); }
    __device__ __forceinline__ I* si() const { return at<I>(O_SI); }
    __device__ __forceinline__ int* sf() const { return at<int>(O_SF); }
    __device__ __forceinline__ K* ck() const { return at<K>(O_CK); }
    __device__ __forceinline__ I* ci() const { return at<I>(o_ci); }
    __device__ __forceinline__ I* win() const { return at<I>(o_win); }
    __device__ __forceinline__ I* res_i() const { return at<I>(o_res_i); }
    __device__ __forceinline__ B* res_v() const { return at<B>(o_res_v); }

    __device__ __forceinline__ void carve(int wcap, int cw_log2)
    {
        const unsigned long long res = (unsigned long long)wcap << cw_log2;
        o_ci = O_CK + up16((1ULL << cw_log2) * sizeof(K));
        o_win = o_ci + up16((1ULL << cw_log2) * sizeof(I));
        o_res_i = o_win + up16((unsigned long long)wcap * sizeof(I));
        o_res_v = o_res_i + up16(res * sizeof(I));
    }
};

// What every thread of a block knows alike (block-uniform: computed from the same shared data).
template <class I>
struct SgWalk {
    I hi;                    // the rows' end (clamped offsets[S]; offsets[0] and the rows:
                             // sg_head; segments: p.nseg, a constant)
    I D1, D;                 // the block's merge range's end; the current merge position
    I k, j;                  // segments closed before the cursor (the current segment); its row
    // (the current segment's first row, clamped offsets[k]: sg_head[SG_HEAD_PREV])
    int wn, chunk;           // window entries (ends k .. k + wn - 1); next load size
};

// kL is open at D0 (b > 0) and not closed yet: no end consumed since the start (k, which only
// grows, is still kL). (Derived where used, not held through the walk: a register fewer, which
// the 64-bit instantiations need for 0 spills.)
template <class I>
__device__ __forceinline__ bool sg_left_pending(const SgWalk<I>& w, const SegParams& p)
{
    return blockIdx.x > 0 && w.k == (I)sg_head[SG_HEAD_KL] && w.k < (I)p.nseg;
}

// A thread's place: its column (c of CW; col among R) and partition; the column's element offset.
template <class I>
struct SgThread {
    typedef typename cuo::unsigned_of<I>::type U;
    int c, part, parts;
    bool col_ok;             // the column, blockIdx.y * CW + c, is one of x's (its element
                             // offset: sg_in_off, computed where used)
};

template <class T, class I, bool VAL>
struct SgCtx {
    typedef typename ArType<T>::bits B;
    typedef typename ArType<T>::key K;
    typedef ArWire<T, I, VAL> Ex;
    typedef ArBestOf<T, I, VAL> Best;
    const unsigned char* x;
    const void* offs;
    void* out;
    void* vout;
    K* pkey;
    I* pidx;
    long long* cons;
    unsigned int* zw;
    const SegParams* p;
    // (16-aligned: g++ copies a 16-byte key (complex128's u128) with one 16-byte store, which
    // simt's alignment check, as a GPU would, wants aligned; NVRTC keeps it in registers)
    alignas(16) Ex ex;
    bool last;
    bool flat;               // sg_flat_rows, held where registers allow (32-bit indexing)
    SgShared<T, I, VAL> sh;
    SgWalk<I> w;
    SgThread<I> t;
};

__device__ __forceinline__ void sg_flag_launch_error(unsigned int* zw)
{
    atomicOr(zw + SG_ZW_LAUNCH_ERROR, 1u);
}

// The clamped end of segment k (offsets[k + 1]).
template <class I>
__device__ __forceinline__ I sg_end(const void* offs, I k, const SegParams& p)
{
    return sg_clamp<I>(sg_offset_raw(offs, (long long)k + 1, p), 0, p.n);
}

// Relative merge position of an end row e (clamped into the rows left) with q ends before it.
template <class I>
__device__ __forceinline__ I sg_pos(I e, I q, const SgWalk<I>& w)
{
    const I rows_left = w.hi - w.j;
    I r = e - w.j;
    r = r < 0 ? 0 : (r > rows_left ? rows_left : r);
    return r + q;
}

// The ends before merge position D: the smallest k with pend(k) >= D, where
// pend(k) = (clamped offsets[k + 1] - o0) + k, which grows by at least 1 a segment (pend(S - 1)
// = N + S - 1, known). Each probe m narrows [lo, hi] from both sides: pend(m) >= D puts the
// answer at or below m and, as pend falls by at least 1 a step down, above m - (pend(m) - D);
// pend(m) < D puts it above m and at most m + (D - pend(m)). The next probe interpolates
// between the two nearest probed points either side of D (few probes where the lengths vary
// little, as the merge path is then near a line), or bisects after a probe that did not halve
// the range (about 3 log2 S probes at worst: 60 at S = 2**20 in a port of this loop).
template <class I>
__device__ I sg_search(const void* offs, I D, I o0, I N, const SegParams& p)
{
    auto pend = [&](I k) {
        I e = sg_end<I>(offs, k, p);
        e = e < o0 ? o0 : (e > o0 + N ? o0 + N : e);
        return (e - o0) + k;
    };
    const I S = (I)p.nseg;
    if (D > N + S - 1) return S;
    I lo = D - N > 0 ? D - N : 0;
    I hi = D < S - 1 ? D : S - 1;
    I kl = -1, vl = -1, kh = S - 1, vh = N + S - 1;    // pend(kl) = vl < D <= vh = pend(kh)
    bool bisect = false;
    int run = 0;                        // probes in a row that moved the same side (sign: which)
    while (lo < hi) {
        I m = lo + (hi - lo) / 2;
        if (bisect && (run >= 2 || run <= -2)) {
            // the line keeps falling on one side, and fell far (a long segment between the
            // probed points): try the far end of the range, where a step in pend puts the answer
            m = run > 0 ? lo : hi - 1;
        } else if (!bisect) {
            const double t = (double)(D - vl) / (double)(vh - vl);
            m = kl + (I)ceil(t * (double)(kh - kl));
        }
        m = m < lo ? lo : (m > hi - 1 ? hi - 1 : m);
        const I width = hi - lo;
        const I v = pend(m);
        if (v < D) {
            lo = m + 1;
            hi = hi < m + (D - v) ? hi : m + (D - v);
            kl = m;
            vl = v;
            run = run < 0 ? run - 1 : -1;
        } else {
            hi = m;
            lo = lo > m - (v - D) ? lo : m - (v - D);
            kh = m;
            vh = v;
            run = run > 0 ? run + 1 : 1;
        }
        bisect = !bisect && hi - lo > width - (hi - lo);   // (2 * (hi - lo) could overflow)
    }
    return lo;
}

// In the window: the ends among the first d items of the step (smallest q in [lo, hi) with
// sg_pos(win[q], q) >= d, else hi).
template <class I>
__device__ __forceinline__ I sg_search_window(const I* win, I d, const SgWalk<I>& w)
{
    const I rows_left = w.hi - w.j;
    I b = d < (I)w.wn ? d : (I)w.wn;
    I a = d - rows_left > 0 ? d - rows_left : 0;
    a = a < b ? a : b;
    while (a < b) {
        const I m = a + (b - a) / 2;
        if (sg_pos<I>(win[m], m, w) < d) a = m + 1;
        else b = m;
    }
    return a;
}

// ------------------------------------------------------------------------------------------
// The walk
// ------------------------------------------------------------------------------------------

// Best a beats or keeps best b's (key, index) and, in values mode, its bits.
template <class Best>
__device__ __forceinline__ void sg_merge(Best& a, const Best& b, bool last)
{
    if constexpr (Best::VAL) a.take(b.k, b.i, last, b.v);
    else a.take(b.k, b.i, last);
}

// The block's start: offsets[0], offsets[S] (clamped), its merge range, its first segment kL
// (the ends before D0) and the ends before D1 (kR: the window never loads past them, so no
// block reads the next block's ends), and the carries cleared. Thread 0 searches for kL while
// thread 32 (another warp) searches for kR; every thread reads the results.
template <class T, class I, bool VAL>
__device__ __forceinline__ void sg_setup(SgCtx<T, I, VAL>& cx)
{
    typedef typename SgCtx<T, I, VAL>::Best Best;
    const SegParams& p = *cx.p;
    SgWalk<I>& w = cx.w;
    if (threadIdx.x == 32) {
        const I o0 = sg_clamp<I>(sg_offset_raw(cx.offs, 0, p), 0, p.n);
        const I oN = sg_clamp<I>(sg_offset_raw(cx.offs, p.nseg, p), 0, p.n);
        const I N = oN > o0 ? oN - o0 : (I)0;
        const unsigned long long tot = (unsigned long long)(N + (I)p.nseg);
        const I D1 = (I)((unsigned long long)(blockIdx.x + 1) * tot / (unsigned)p.nblocks);
        sg_head[SG_HEAD_KR] = (int)blockIdx.x + 1 == p.nblocks ? (I)p.nseg
                                                                : sg_search<I>(cx.offs, D1, o0, N, p);
    }
    if (threadIdx.x == 0) {
        const long long raw0 = sg_offset_raw(cx.offs, 0, p);
        const I o0 = sg_clamp<I>(raw0, 0, p.n);
        const I oN = sg_clamp<I>(sg_offset_raw(cx.offs, p.nseg, p), 0, p.n);
        const I N = oN > o0 ? oN - o0 : (I)0;
        const unsigned long long tot = (unsigned long long)(N + (I)p.nseg);
        const unsigned long long nb = (unsigned)p.nblocks;
        const I D0 = (I)((unsigned long long)blockIdx.x * tot / nb);
        const I kL = sg_search<I>(cx.offs, D0, o0, N, p);
        sg_head[SG_HEAD_O0] = o0;
        sg_head[SG_HEAD_N] = N;
        sg_head[SG_HEAD_D0] = D0;
        sg_head[SG_HEAD_D1] = (I)((unsigned long long)(blockIdx.x + 1) * tot / nb);
        sg_head[SG_HEAD_KL] = kL;
        sg_head[SG_HEAD_START_L] = kL ? sg_clamp<I>(sg_offset_raw(cx.offs, kL, p), 0, p.n) : o0;
        sg_head[SG_HEAD_PREV] = sg_head[SG_HEAD_START_L];
        sg_head[SG_HEAD_END_L] = kL < (I)p.nseg ? sg_end<I>(cx.offs, kL, p) : (I)0;
        if (blockIdx.x == 0 && blockIdx.y == 0 && (raw0 < 0 || raw0 > p.n))
            sg_flag_launch_error(cx.zw);
    }
    const int cw = 1 << p.cw_log2;
    if ((int)threadIdx.x < cw) {
        Best b;
        b.clear(cx.last);
        cx.sh.ck()[threadIdx.x] = cx.ex.send(b);
        cx.sh.ci()[threadIdx.x] = b.i;
    }
    __syncthreads();
    w.hi = (I)(sg_head[SG_HEAD_O0] + sg_head[SG_HEAD_N]);
    w.D = (I)sg_head[SG_HEAD_D0];
    w.D1 = (I)sg_head[SG_HEAD_D1];
    w.k = (I)sg_head[SG_HEAD_KL];
    w.j = (I)sg_head[SG_HEAD_O0] + (w.D - w.k);
    w.wn = 0;
    w.chunk = p.chunk;
}

// Load ends into the window until it holds every end the next M items can meet (or it is
// full, or holds the block's last end, kR - 1), chunk by chunk (coalesced), checking each
// loaded offset.
template <class T, class I, bool VAL>
__device__ __forceinline__ void sg_fill(SgCtx<T, I, VAL>& cx, I M)
{
    const SegParams& p = *cx.p;
    SgWalk<I>& w = cx.w;
    I* win = cx.sh.win();
    const bool report = blockIdx.y == 0;
    while (true) {
        const I pos_last = w.wn ? sg_pos<I>(win[w.wn - 1], (I)(w.wn - 1), w) : (I)-1;
        const I kR = (I)sg_head[SG_HEAD_KR];
        if (!(w.k + (I)w.wn < kR && w.wn < p.wcap && pos_last < M - 1)) break;
        I cnt = (I)w.chunk;
        cnt = cnt < (I)(p.wcap - w.wn) ? cnt : (I)(p.wcap - w.wn);
        cnt = cnt < kR - w.k - (I)w.wn ? cnt : kR - w.k - (I)w.wn;
        cnt = cnt < M - 1 - pos_last ? cnt : M - 1 - pos_last;
        // (contiguous offsets: lanes shifted so that each warp reads whole aligned lines, and
        // every lane of a warp loads as often as the others, as in sg_stage)
        const long long first = (long long)(w.k + (I)w.wn) + 1;
        const int lead = p.off_stride == 1 ? (int)((reinterpret_cast<unsigned long long>(cx.offs) +
                         (unsigned long long)first * p.off_width) & 127) / p.off_width : 0;
        const I bound = (cnt + (I)lead + 31) & ~(I)31;
        int bad = 0;
        for (I e = (I)threadIdx.x; e < bound; e += SG_THREADS) {
            const I i = e - (I)lead;
            const I g = sg_clamp_lane<I>(i, cnt);
            const long long raw = sg_offset_raw(cx.offs, first + g, p);
            // (checked on every lane, the clamped ones again: a load whose value no lane uses
            // is dropped by the compiler, and the lane would then skip it)
            bad |= raw < 0 || raw > p.n;
            if (i == g) win[w.wn + i] = sg_clamp<I>(raw, 0, p.n);
        }
        __syncthreads();
        for (I i = (I)threadIdx.x; i < cnt; i += SG_THREADS) {
            const I prev = (w.wn + i) ? win[w.wn + i - 1] : (I)sg_head[SG_HEAD_PREV];
            bad |= win[w.wn + i] < prev;
        }
        if (__syncthreads_or(bad)) {
            // bad offsets: one flag for the block (not an atomic per bad offset); the launch's
            // result will be empty_index (sg_bad_offsets), but the window must stay
            // non-decreasing (a running max, serial: the error path) so that the partitions'
            // merge-path searches agree and no two threads share a result slot
            if (threadIdx.x == 0) {
                if (report) sg_flag_launch_error(cx.zw);
                for (I i = 0; i < cnt; ++i) {
                    const I prev = (w.wn + i) ? win[w.wn + i - 1] : (I)sg_head[SG_HEAD_PREV];
                    if (win[w.wn + i] < prev) win[w.wn + i] = prev;
                }
            }
            __syncthreads();
        }
        w.wn += (int)cnt;
        w.chunk = 2 * w.chunk < p.wcap ? 2 * w.chunk : p.wcap;
    }
}

// Bytes from x's element 0 to column col's element in row 0 (recomputed each step rather than
// held in a register through the walk: one multiply for a single trailing dimension).
template <class U>
__device__ __forceinline__ U sg_in_off(long long col, const SegParams& p)
{
    if (p.nr == 1) return (U)col * (U)p.r_in[0];
    cuo::Odometer<U, SG_MAX_DIMS, false> od;
    od.init((U)col, p.nr, p.r_size, p.r_in, p.r_in);
    return od.off;
}

// Rows of exactly CW columns, contiguous: the steps' data is one flat range. (The 64-bit
// instantiations read it from the parameters where used, a register fewer, which they need
// for 0 spills; the 32-bit ones hold it in cx.flat: 4 registers fewer, and 5 blocks an SM
// instead of 4 for the 1-byte types and complex64 on sm_90.)
template <class T>
__device__ __forceinline__ bool sg_flat_rows(const SegParams& p)
{
    const long long isz = (long long)sizeof(typename ArType<T>::bits);
    const long long cw = 1LL << p.cw_log2;
    return p.ncols == cw && p.row_stride == isz * cw &&
           (p.nr == 0 || (p.nr == 1 && p.r_in[0] == isz));
}

// The step's rows [j, j + rows) x the block's columns into shared memory: element e is row
// e >> cw_log2, column e & (CW - 1), which is the thread's own column (256 is a multiple of CW).
template <class T, class I, bool VAL>
__device__ __forceinline__ void sg_stage(SgCtx<T, I, VAL>& cx, I rows)
{
    typedef typename cuo::unsigned_of<I>::type U;
    typedef typename ArType<T>::bits B;
    const SegParams& p = *cx.p;
    const I total = rows << p.cw_log2;
    const bool narrow = p.narrow != 0;
    if (sizeof(I) == 4 ? cx.flat : sg_flat_rows<T>(p)) {
        // the step's elements are one contiguous range: its loads start `lead` elements early,
        // so that each warp's 32 loads are one aligned 128-byte line, not two partial ones
        const U first = (U)cx.w.j << p.cw_log2;
        const int lead = (int)((reinterpret_cast<unsigned long long>(cx.x) +
                                (unsigned long long)first * sizeof(B)) & 127) / (int)sizeof(B);
        // (every lane of a warp runs the load as often as the others, out-of-range lanes on
        // an element of the same line, and stores it, into the pads (f in [-lead, total + 31)):
        // a loaded value that no lane used would be dropped by the compiler, and simt's traffic
        // counters group a warp's accesses by each lane's count of them, as a GPU issues one
        // load for the warp)
        const I bound = total ? (total + (I)lead + 31) & ~(I)31 : (I)0;
        for (I e = (I)threadIdx.x; e < bound; e += SG_THREADS) {
            const I f = e - (I)lead;
            const I g = sg_clamp_lane<I>(f, total);
            cx.sh.staged()[f] = sg_load<T>(cx.x, (long long)(first + (U)g) * (long long)sizeof(B),
                                           narrow);
        }
        return;
    }
    if (!cx.t.col_ok) return;
    const U in_off = sg_in_off<U>(((long long)blockIdx.y << p.cw_log2) + cx.t.c, p);
    for (I e = (I)threadIdx.x; e < total; e += SG_THREADS) {
        const U row = (U)(cx.w.j + (e >> p.cw_log2));
        const I off = (I)(row * (U)p.row_stride + in_off);
        cx.sh.staged()[e] = sg_load<T>(cx.x, (long long)off, narrow);
    }
}

// A partition's share of the step: items [d0, d1) (d1 <= M), rows taken with ar_better, each
// end closing the current segment: the first one the partition closes is its `head` (its
// start may lie in earlier partitions: combined after the scan), the others' results go to
// the step's result slots. Returns whether it closed one; `best` is left holding the open
// segment's share (the partition's carry-out).
template <class T, class I, bool VAL>
__device__ __forceinline__ bool sg_walk(SgCtx<T, I, VAL>& cx, I M, I rows,
                                        typename SgCtx<T, I, VAL>::Best& best,
                                        typename SgCtx<T, I, VAL>::Best& head, I& q0)
{
    typedef typename ArType<T>::bits B;
    typedef typename ArType<T>::key K;
    constexpr int ITEMS = sg_items(sizeof(B));
    const SegParams& p = *cx.p;
    const SgWalk<I>& w = cx.w;
    const I* win = cx.sh.win();
    const int cwl = p.cw_log2, c = cx.t.c;
    const K flip = p.is_min ? ~K() : K();
    const I d0 = (I)cx.t.part * ITEMS < M ? (I)cx.t.part * ITEMS : M;
    const I d1 = d0 + ITEMS < M ? d0 + ITEMS : M;
    q0 = sg_search_window<I>(win, d0, w);
    // (window slots and items of one step fit in int: 32-bit loop state, fewer registers for
    // the 64-bit instantiations)
    const int q1 = (int)sg_search_window<I>(win, d1, w);
    int r = (int)(d0 - q0);
    int rend = (int)(d1 - (I)q1);
    rend = rend < (int)rows ? rend : (int)rows;
    r = r < rend ? r : rend;
    const I j = w.j;
    bool closed = false;
    // an end at window slot q comes before row r when win[q] - j <= r (sg_pos: its clamping
    // into [0, rows left] changes no comparison with an r below rend)
    for (int q = (int)q0; q < q1 || r < rend;) {
        if (q < q1 && (r >= rend || win[q] - j <= (I)r)) {
            if (!closed) {
                head = best;
                closed = true;
            } else if (cx.t.col_ok) {
                cx.sh.res_i()[(q << cwl) + c] = best.i;
                if constexpr (VAL) cx.sh.res_v()[(q << cwl) + c] = best.v;
            }
            best.clear(cx.last);
            ++q;
        } else {
            if (cx.t.col_ok) {
                const B b = cx.sh.staged()[(r << cwl) + c];
                best.take(ar_key<T>(b, flip, ~K()), j + (I)r, cx.last, b);
            }
            ++r;
        }
    }
    return closed;
}

// The slot of block b's chain partial for column c: side 0 its first segment's (left), 1 its
// last's (right).
template <class I>
__device__ __forceinline__ long long sg_slot(int side, long long b, int c, const SegParams& p)
{
    return ((((long long)side * gridDim.y + blockIdx.y) * p.nblocks + b) << p.cw_log2) + c;
}

// Deposit a chain partial of this block (column c), volatile: read by another block's last
// arriver after the ticket.
template <class T, class I, bool VAL>
__device__ __forceinline__ void sg_deposit(SgCtx<T, I, VAL>& cx, int side,
                                           const typename SgCtx<T, I, VAL>::Best& b)
{
    const long long slot = sg_slot<I>(side, blockIdx.x, cx.t.c, *cx.p);
    sg_put(cx.pkey + slot, cx.ex.send(b));
    sg_put(cx.pidx + slot, b.i);
}

// Across the partitions of each column: an inclusive segmented scan of the partitions' carries
// (flag: the partition closed a segment), then each partition that closed one combines its head
// with what precedes it (the partitions before it back to the last one that closed a segment,
// and the step's carry-in if none did) and stores that segment's result: into the step's
// result slots, or for the block's first segment, still open at D0, as its left chain partial.
// The last partition's inclusive value (with the carry-in if no partition closed) is the next
// carry.
template <class T, class I, bool VAL>
__device__ __forceinline__ void sg_scan(SgCtx<T, I, VAL>& cx, bool closed,
                                        typename SgCtx<T, I, VAL>::Best& best,
                                        typename SgCtx<T, I, VAL>::Best& head, I q0)
{
    typedef typename SgCtx<T, I, VAL>::Best Best;
    typedef typename ArType<T>::key K;
    const SegParams& p = *cx.p;
    const int tid = threadIdx.x, cw = 1 << p.cw_log2, c = cx.t.c;
    SgShared<T, I, VAL>& sh = cx.sh;
    int flag = closed;
    sh.sf()[tid] = flag;
    sh.sk()[tid] = cx.ex.send(best);
    sh.si()[tid] = best.i;
    __syncthreads();
    for (int o = cw; o < SG_THREADS; o <<= 1) {
        // (the partner's value is taken before the barrier, so only `best` and `flag` stay
        // live across it)
        if (tid >= o) {
            const int f2 = sh.sf()[tid - o];
            if (!flag) cx.ex.take(best, sh.sk()[tid - o], sh.si()[tid - o], cx.last);
            flag |= f2;
        }
        __syncthreads();
        if (tid >= o) {
            sh.sf()[tid] = flag;
            sh.sk()[tid] = cx.ex.send(best);
            sh.si()[tid] = best.i;
        }
        __syncthreads();
    }
    // (the head takes the partitions before it and, if none of them closed a segment, the
    // step's carry-in straight from shared memory: the order of takes does not matter, as
    // (key, index) is a total order, and no further Best is live in registers)
    if (closed) {
        int fpre = 0;
        if (tid >= cw) {
            fpre = sh.sf()[tid - cw];
            cx.ex.take(head, sh.sk()[tid - cw], sh.si()[tid - cw], cx.last);
        }
        if (!fpre) cx.ex.take(head, sh.ck()[c], sh.ci()[c], cx.last);
        if (q0 == 0 && sg_left_pending(cx.w, p)) {
            if (cx.t.col_ok) sg_deposit(cx, 0, head);
        } else if (cx.t.col_ok) {
            sh.res_i()[(q0 << p.cw_log2) + c] = head.i;
            if constexpr (VAL) sh.res_v()[(q0 << p.cw_log2) + c] = head.v;
        }
    }
    if (!flag) cx.ex.take(best, sh.ck()[c], sh.ci()[c], cx.last);
    __syncthreads();                       // every thread has read the carry-in
    if (cx.t.part == cx.t.parts - 1) {
        sh.ck()[c] = cx.ex.send(best);
        sh.ci()[c] = best.i;
    }
}

// One output element, out[elem]: the segment's index (relative: from its first row `start`; an
// empty segment: empty_index) and, in values mode, its value.
template <class T, class I, bool VAL>
__device__ __forceinline__ void sg_store_at(SgCtx<T, I, VAL>& cx, long long elem, I i,
                                            const typename ArType<T>::bits& v, I start)
{
    const SegParams& p = *cx.p;
    const bool empty = i == (cx.last ? (I)-1 : cuo::index_max<I>());
    ar_store_index<long long>(cx.out, elem, empty ? p.empty_index : (long long)(p.relative ? i - start : i),
                   p.out_width);
    if constexpr (VAL) ar_store_value<T>(cx.vout, elem, empty ? sg_empty_bits<T>(p) : v);
}

// Segment k's output element of the thread's column.
template <class T, class I, bool VAL>
__device__ __forceinline__ void sg_store(SgCtx<T, I, VAL>& cx, I k, I i,
                                         const typename ArType<T>::bits& v, I start)
{
    const long long col = ((long long)blockIdx.y << cx.p->cw_log2) + cx.t.c;
    sg_store_at(cx, (long long)k * cx.p->ncols + col, i, v, start);
}

// pstart / pend of segment k from its clamped bounds: the merge positions of its first item
// and of its end.
template <class I>
__device__ __forceinline__ void sg_span(const SgWalk<I>& w, I k, I start, I end, I& ps, I& pe)
{
    const I o0 = (I)sg_head[SG_HEAD_O0], hi = w.hi;
    start = start < o0 ? o0 : (start > hi ? hi : start);
    end = end < o0 ? o0 : (end > hi ? hi : end);
    ps = (start - o0) + k;
    pe = (end - o0) + k;
}

// Whether this block stores segment k's result (first row `start`, end row `end`, clamped):
// an interior segment, no block boundary D_b in [pstart, pend] and its end in this block; the
// others are chain segments, stored by their chain's last block. One writer per output
// element whatever the offsets hold.
template <class I>
__device__ __forceinline__ bool sg_stores_end(const SgWalk<I>& w, I k, I start, I end)
{
    I ps, pe;
    sg_span<I>(w, k, start, end, ps, pe);
    const I D0 = (I)sg_head[SG_HEAD_D0];
    return (blockIdx.x == 0 || ps > D0) && pe >= D0 && pe < w.D1;
}

// The step's result for window slot q (segment w.k + q) and column `col` of the strip, into
// out[elem]: only for an interior segment (no block boundary D_b in [pstart, pend], its end in
// this block); the others are chain segments, stored by their chain's last block.
template <class T, class I, bool VAL>
__device__ __forceinline__ void sg_store_slot(SgCtx<T, I, VAL>& cx, I q, int col, long long elem)
{
    typedef typename ArType<T>::bits B;
    const SgWalk<I>& w = cx.w;
    const I start = q ? cx.sh.win()[q - 1] : (I)sg_head[SG_HEAD_PREV];
    if (!sg_stores_end<I>(w, w.k + q, start, cx.sh.win()[q])) return;
    const I slot = (q << cx.p->cw_log2) + (I)col;
    B v = B();
    if constexpr (VAL) v = cx.sh.res_v()[slot];
    sg_store_at(cx, elem, cx.sh.res_i()[slot], v, start);
}

// The step's results, stored coalesced: segments w.k + q_lo .. w.k + q_end - 1.
// * One strip (R <= CW): they are the elements [(w.k + q_lo) R, (w.k + q_end) R) of out, and
//   thread t stores the elements E with (E + a) % 256 == t, where out + a elements is aligned to
//   32 of them: each warp's stores are one aligned run of 32, and as the steps' ranges follow
//   one another, a thread's stores do too (every lane of a warp stores as often as the others
//   but in the block's first and last runs; simt's traffic counters group a warp's accesses by
//   each lane's count of them, as a GPU issues one store for the warp).
// * Strips of CW columns of wider rows: each thread its column of each segment.
template <class T, class I, bool VAL>
__device__ __forceinline__ void sg_store_step(SgCtx<T, I, VAL>& cx, I q_end)
{
    const SegParams& p = *cx.p;
    const SgWalk<I>& w = cx.w;
    const I q_lo = (q_end > 0 && sg_left_pending(w, p)) ? 1 : 0;
    const int cwl = p.cw_log2;
    if (p.ncols <= (1LL << cwl)) {
        const int nc = (int)p.ncols;
        const long long base = (long long)w.k * nc;
        const int e0 = (int)q_lo * nc, e1 = (int)q_end * nc;    // (window slots x R: an int)
        const unsigned long long a = reinterpret_cast<unsigned long long>(cx.out) /
                                     (unsigned)p.out_width;
        const int pos0 = (int)((a + (unsigned long long)(base + e0)) & (SG_THREADS - 1));
        for (int r = e0 + (((int)threadIdx.x - pos0) & (SG_THREADS - 1)); r < e1;
             r += SG_THREADS) {
            const int q = nc == 1 << cwl ? r >> cwl : r / nc;
            sg_store_slot(cx, (I)q, r - q * nc, base + r);
        }
        return;
    }
    if (!cx.t.col_ok) return;
    const I total = (q_end - q_lo) << cwl;
    const long long col = ((long long)blockIdx.y << cwl) + cx.t.c;
    for (I e = (I)threadIdx.x; e < total; e += SG_THREADS) {
        const I q = q_lo + (e >> cwl);
        sg_store_slot(cx, q, cx.t.c, (long long)(w.k + q) * p.ncols + col);
    }
}

// Drop the step's ends from the window (the rest move to its front) and advance the cursor.
template <class T, class I, bool VAL>
__device__ __forceinline__ void sg_advance(SgCtx<T, I, VAL>& cx, I M, I q_end, I rows)
{
    constexpr int MOVES = SG_WCAP_MAX / SG_THREADS;
    SgWalk<I>& w = cx.w;
    I* win = cx.sh.win();
    const I rest = (I)w.wn - q_end;
    // the next segment's first row: read before the barrier (the window moves after it),
    // published after it (sg_store_step read the old one before it), read after the next one
    const I prev = q_end > 0 ? win[q_end - 1] : (I)0;
    I keep[MOVES];
#pragma unroll
    for (int m = 0; m < MOVES; ++m) {
        const I i = (I)threadIdx.x + m * SG_THREADS;
        keep[m] = i < rest ? win[q_end + i] : (I)0;
    }
    __syncthreads();
    if (threadIdx.x == 0 && q_end > 0) sg_head[SG_HEAD_PREV] = prev;
#pragma unroll
    for (int m = 0; m < MOVES; ++m) {
        const I i = (I)threadIdx.x + m * SG_THREADS;
        if (i < rest) win[i] = keep[m];
    }
    w.k += q_end;
    w.j += rows;
    w.D += M;
    w.wn = (int)rest;
    const I grow = 2 * q_end;
    w.chunk = grow < (I)cx.p->chunk ? cx.p->chunk : (grow > (I)cx.p->wcap ? cx.p->wcap : (int)grow);
    __syncthreads();
}

// One step: at most P x ITEMS items of the block's range (fewer where the window ends first).
template <class T, class I, bool VAL>
__device__ __forceinline__ void sg_step(SgCtx<T, I, VAL>& cx)
{
    typedef typename SgCtx<T, I, VAL>::Best Best;
    constexpr int ITEMS = sg_items(sizeof(typename ArType<T>::bits));
    SgWalk<I>& w = cx.w;
    I M = (I)cx.t.parts * ITEMS;
    M = M < w.D1 - w.D ? M : w.D1 - w.D;
    sg_fill(cx, M);
    // more of the block's ends than the window holds: stop at its last
    if (w.k + (I)w.wn < (I)sg_head[SG_HEAD_KR]) {
        const I pos_last = sg_pos<I>(cx.sh.win()[w.wn - 1], (I)(w.wn - 1), w);
        M = M < pos_last + 1 ? M : pos_last + 1;
    }
    const I q_end = sg_search_window<I>(cx.sh.win(), M, w);
    const I rows = M - q_end;
    sg_stage(cx, rows);
    __syncthreads();
    Best best, head;
    best.clear(cx.last);
    head.clear(cx.last);
    I q0;
    const bool closed = sg_walk(cx, M, rows, best, head, q0);
    sg_scan(cx, closed, best, head, q0);
    sg_store_step(cx, q_end);
    sg_advance(cx, M, q_end, rows);
}

// ------------------------------------------------------------------------------------------
// Chains across blocks, and the grid's last block
// ------------------------------------------------------------------------------------------

// Segment k (first row `start`, end row `end`, both clamped) crosses a block boundary: draw its
// chain's ticket; the last participant to arrive combines the chain's partials (block b1 - 1's
// right one, blocks b1 .. b2's left ones; one a partition, then a tree over the partitions)
// and stores the result. Every thread of the block calls it.
template <class T, class I, bool VAL>
__device__ void sg_chain(SgCtx<T, I, VAL>& cx, I k, I start, I end)
{
    typedef typename SgCtx<T, I, VAL>::Best Best;
    __shared__ long long sg_ch[3];
    const SegParams& p = *cx.p;
    const int tid = threadIdx.x, cw = 1 << p.cw_log2;
    if (tid == 0) {
        I ps, pe;
        sg_span<I>(cx.w, k, start, end, ps, pe);
        const unsigned long long nb = (unsigned)p.nblocks, tot =
            (unsigned long long)(sg_head[SG_HEAD_N] + p.nseg);
        // b1: the first boundary D_b >= pstart; b2: the last D_b <= pend (D_b = b TOT / nb)
        long long b1 = (long long)(((unsigned long long)ps * nb + tot - 1) / tot);
        long long b2 = (long long)((((unsigned long long)pe + 1) * nb + tot - 1) / tot) - 1;
        b1 = b1 < 1 ? 1 : (b1 > p.nblocks - 1 ? p.nblocks - 1 : b1);
        const bool chain = b2 >= b1;
        b2 = b2 < b1 - 1 ? b1 - 1 : (b2 > p.nblocks - 1 ? p.nblocks - 1 : b2);
        const unsigned int count = (unsigned int)(b2 - b1 + 2);
        __threadfence();                           // release: this block's partials
        const unsigned int old = atomicAdd(cx.zw + SG_ZW_CHAINS + blockIdx.y * p.nblocks + b1, 1u);
        const bool is_last = old == count - 1;
        if (is_last) __threadfence();              // acquire: the other blocks' partials
        sg_ch[0] = is_last && chain;
        sg_ch[1] = b1;
        sg_ch[2] = b2;
    }
    __syncthreads();
    const bool go = sg_ch[0] != 0;
    const long long b1 = sg_ch[1], b2 = sg_ch[2];
    __syncthreads();                               // sg_ch is read before a second chain
    if (!go) return;
    Best best;
    best.clear(cx.last);
    const long long count = b2 - b1 + 2;
    for (long long i = cx.t.part; i < count; i += cx.t.parts) {
        const long long slot = i == 0 ? sg_slot<I>(1, b1 - 1, cx.t.c, p)
                                      : sg_slot<I>(0, b1 + i - 1, cx.t.c, p);
        cx.ex.take(best, ar_load_volatile(cx.pkey + slot), ar_load_volatile(cx.pidx + slot), cx.last);
    }
    for (int o = SG_THREADS >> 1; o >= cw; o >>= 1) {
        cx.sh.sk()[tid] = cx.ex.send(best);
        cx.sh.si()[tid] = best.i;
        __syncthreads();
        if (tid < o) cx.ex.take(best, cx.sh.sk()[tid + o], cx.sh.si()[tid + o], cx.last);
        __syncthreads();
    }
    if (tid < cw && cx.t.col_ok) {
        typename ArType<T>::bits v = typename ArType<T>::bits();
        if constexpr (VAL) v = best.v;
        sg_store(cx, k, best.i, v, start);
    }
}

// After the walk: this block's remaining partial (its last segment's, or for a block with no
// end in it, its whole share of its first segment), then the chains of its first and last
// segments.
template <class T, class I, bool VAL>
__device__ __forceinline__ void sg_chains(SgCtx<T, I, VAL>& cx)
{
    typedef typename SgCtx<T, I, VAL>::Best Best;
    const SegParams& p = *cx.p;
    const SgWalk<I>& w = cx.w;
    const I kL = (I)sg_head[SG_HEAD_KL];
    const bool has_left = blockIdx.x > 0 && kL < (I)p.nseg;
    const bool middle = has_left && sg_left_pending(w, p);
    const bool has_right = (int)blockIdx.x + 1 < p.nblocks && w.k < (I)p.nseg && !middle;
    if ((middle || has_right) && cx.t.part == 0 && cx.t.col_ok) {
        Best b;
        b.clear(cx.last);
        cx.ex.take(b, cx.sh.ck()[cx.t.c], cx.sh.ci()[cx.t.c], cx.last);
        sg_deposit(cx, middle ? 0 : 1, b);
    }
    __shared__ long long sg_end_r;
    if (threadIdx.x == 0 && has_right)
        sg_end_r = w.wn ? cx.sh.win()[0] : sg_end<I>(cx.offs, w.k, p);
    __syncthreads();
    if (has_left)
        sg_chain(cx, kL, (I)sg_head[SG_HEAD_START_L], (I)sg_head[SG_HEAD_END_L]);
    if (has_right) sg_chain(cx, w.k, (I)sg_head[SG_HEAD_PREV], (I)sg_end_r);
}

// The grid's last block, when the launch found a bad offset (or the blocks' consumed ranges do
// not tile [0, S), which valid offsets always do): the first bad position into the error code,
// then the whole result set to empty_index (values: the empty value).
template <class T, class I, bool VAL>
__device__ void sg_bad_offsets(SgCtx<T, I, VAL>& cx)
{
    const SegParams& p = *cx.p;
    for (long long j = threadIdx.x; j <= p.nseg; j += SG_THREADS) {
        const long long v = sg_offset_raw(cx.offs, j, p);
        int kind = 0;
        if (v < 0) kind = SG_ERR_NEGATIVE;
        else if (j > 0 && v < sg_offset_raw(cx.offs, j - 1, p)) kind = SG_ERR_DECREASING;
        else if (v > p.n) kind = SG_ERR_PAST_END;
        if (kind) {
            const unsigned long long code = (((1ULL << 62) - 1 - (unsigned long long)j) << 2) |
                                            (unsigned long long)kind;
            atomicMax(reinterpret_cast<unsigned long long*>(cx.zw), code);
        }
    }
    const long long total = p.nseg * p.ncols;
    const typename ArType<T>::bits empty = sg_empty_bits<T>(p);
    for (long long e = threadIdx.x; e < total; e += SG_THREADS) {
        ar_store_index<long long>(cx.out, e, p.empty_index, p.out_width);
        if constexpr (VAL) ar_store_value<T>(cx.vout, e, empty);
    }
}

// Every block draws the grid's ticket after its last store; the last one checks the launch
// (zw[2], the tiling of the consumed ranges) and resets the tickets and flags it used.
template <class T, class I, bool VAL>
__device__ __forceinline__ void sg_finish(SgCtx<T, I, VAL>& cx)
{
    __shared__ int sg_is_final;
    const SegParams& p = *cx.p;
    const int tid = threadIdx.x;
    const long long nblk = (long long)p.nblocks * gridDim.y;
    __syncthreads();
    if (tid == 0) {
        if (blockIdx.y == 0) {
            cx.cons[2 * blockIdx.x] = sg_head[SG_HEAD_KL];
            cx.cons[2 * blockIdx.x + 1] = cx.w.k;
        }
        __threadfence();
        const unsigned int old = atomicAdd(cx.zw + SG_ZW_TICKET, 1u);
        sg_is_final = old == (unsigned int)(nblk - 1);
        if (sg_is_final) __threadfence();
    }
    __syncthreads();
    if (!sg_is_final) return;
    int bad = tid == 0 ? (atomicAdd(cx.zw + SG_ZW_LAUNCH_ERROR, 0u) != 0) : 0;
    for (long long b = tid; b < p.nblocks; b += SG_THREADS) {
        // (volatile, as the chain partials: other blocks wrote them before their tickets)
        const long long from = b ? ar_load_volatile(cx.cons + 2 * b - 1) : 0;
        if (ar_load_volatile(cx.cons + 2 * b) != from ||
            (b == p.nblocks - 1 && ar_load_volatile(cx.cons + 2 * b + 1) != p.nseg))
            bad = 1;
    }
    if (__syncthreads_or(bad)) sg_bad_offsets(cx);
    for (long long i = tid; i < nblk; i += SG_THREADS) cx.zw[SG_ZW_CHAINS + i] = 0u;
    if (tid == 0) {
        cx.zw[SG_ZW_LAUNCH_ERROR] = 0u;
        cx.zw[SG_ZW_TICKET] = 0u;
    }
}

// ------------------------------------------------------------------------------------------
// Entry points
// ------------------------------------------------------------------------------------------

// What every entry point (sg_run, segment_flat.cu's sgf_run) sets alike in a block's context:
// its arrays, the parameters, the tie (p.last), the wire and the shared memory's carve for
// strips of 2**cw_log2 columns (the flat path's 0).
template <class T, class I, bool VAL>
__device__ __forceinline__ void sg_ctx_init(SgCtx<T, I, VAL>& cx, const T* x, const void* offsets,
                                            void* out, void* vout, void* pkey, void* pidx,
                                            long long* cons, unsigned int* zw,
                                            const SegParams& p, int cw_log2)
{
    typedef typename ArType<T>::key K;
    cx.x = reinterpret_cast<const unsigned char*>(x);
    cx.offs = offsets;
    cx.out = out;
    cx.vout = vout;
    cx.pkey = reinterpret_cast<K*>(pkey);
    cx.pidx = reinterpret_cast<I*>(pidx);
    cx.cons = cons;
    cx.zw = zw;
    cx.p = &p;
    cx.last = p.last != 0;
    cx.ex = ar_wire<T, I, VAL>(p.is_min ? ~K() : K());
    cx.sh.carve(p.wcap, cw_log2);
}

// A thread's place in strip `strip` of 2**cw_log2 columns (grid.y; a constant 0 where the
// launch has one strip): its column, partition and whether the column is one of x's.
template <class T, class I, bool VAL>
__device__ __forceinline__ void sg_thread_init(SgCtx<T, I, VAL>& cx, const SegParams& p,
                                               unsigned int strip)
{
    const int cw = 1 << p.cw_log2;
    cx.t.c = (int)threadIdx.x & (cw - 1);
    cx.t.part = (int)threadIdx.x >> p.cw_log2;
    cx.t.parts = SG_THREADS >> p.cw_log2;
    cx.t.col_ok = (long long)strip * cw + cx.t.c < p.ncols;
}

template <class T, class I, bool VAL>
__device__ __forceinline__ void sg_run(const T* x, const void* offsets, void* out, void* vout,
                                       void* pkey, void* pidx, long long* cons,
                                       unsigned int* zw, const SegParams& p)
{
    SgCtx<T, I, VAL> cx;
    sg_ctx_init(cx, x, offsets, out, vout, pkey, pidx, cons, zw, p, p.cw_log2);
    sg_thread_init(cx, p, blockIdx.y);
    cx.flat = sg_flat_rows<T>(p);
    sg_setup(cx);
    while (cx.w.D < cx.w.D1) sg_step(cx);
    sg_chains(cx);
    sg_finish(cx);
}

template <class T, class I>
__global__ void __launch_bounds__(256, 4)
segment_reduce(const T* __restrict__ x, const void* __restrict__ offsets, void* __restrict__ out,
               void* pkey, void* pidx, long long* cons, unsigned int* zw, SegParams p)
{
    sg_run<T, I, false>(x, offsets, out, nullptr, pkey, pidx, cons, zw, p);
}

template <class T, class I>
__global__ void __launch_bounds__(256, 4)
segment_reduce_values(const T* __restrict__ x, const void* __restrict__ offsets,
                      void* __restrict__ out, void* __restrict__ vout, void* pkey, void* pidx,
                      long long* cons, unsigned int* zw, SegParams p)
{
    sg_run<T, I, true>(x, offsets, out, vout, pkey, pidx, cons, zw, p);
}
