// argreduce.cu - argmin / argmax / hardmax: index-tracking reductions over any subset of axes.
//
// Computes, for every group of elements spanned by the reduced axes, the logical row-major
// index (over the reduced axes, in increasing axis order) of the extreme element, and writes
// either that index (argmin/argmax/nanargmin/nanargmax; any integer index dtype of 1, 2, 4 or 8
// bytes, chosen at the store by p.out_width) or the one-hot output of x's shape and dtype
// (hardmax); in values mode (max_and_argmax / min_and_argmin) the index and, from the same
// reduction, the extreme element itself, bit for bit (see "Values mode" below).
//
// Template parameters of every entry point:
//   T - the value type: bool, signed/unsigned char, short, int, long long (and unsigned),
//       cupyops_half (float16 bits), cupyops_bfloat16 (bf16 bits), float, double, cupyops_complex64, cupyops_complex128,
//       cupyops_datetime (datetime64/timedelta64 of any unit: int64 with NaT = INT64_MIN).
//       Values are read as raw bits and turned into an ordering key.
//   I - the internal index type: int (every offset, position and index < 2**31) or long long.
//   V - row and column kernels: the plan's p.vec (row: elements per vector load, 1, 4 or 16
//       bytes' worth; column: groups a thread owns, 1 or 4 bytes' worth), so that each
//       instantiation holds one scan and a first call compiles only the one its plan runs
//       (issue 33: the scans of every width in one kernel took 2-3 times one).
// argmax/argmin, NaN skipping (nanarg*), the tie direction, the output mode and the narrow
// (element-aligned only) loads and stores of complex values are runtime fields of ArParams.
//
// Entry points (blocks of at most 256 threads; __launch_bounds__(256, 4) keeps >= 50% occupancy):
//   argreduce_row<T, I, V> groups whose innermost memory dimension is reduced: a team of
//                          p.team threads (1..32 lanes, or the whole block) per group,
//                          vector loads of p.vec elements (packed keys for 1- and 2-byte
//                          values: ar_scan_packed), warp shuffle then shared memory.
//   argreduce_col<T, I, V> groups whose innermost memory dimension is kept: threadIdx.x over
//                          groups (coalesced; p.vec neighbouring groups per thread with one
//                          4-byte load for 1- and 2-byte values, packed keys:
//                          ar_scan_cols_packed; hardmax writes their one-hots one word a
//                          position), threadIdx.y interleaved over the group,
//                          combine across y in shared memory.
//   argreduce_finish<T, I> second pass of groups split across blocks (grid.y chunks):
//                          threadIdx.x over groups, threadIdx.y over the per-chunk partials
//                          (combined in shared memory), then writes the index or the one-hot
//                          hardmax output.
//   argreduce_row_values, argreduce_col_values <T, I, V>, argreduce_finish_values <T, I>:
//                          values mode, the same kernels (the same device functions, instantiated with
//                          VAL = true) taking one more pointer, vout (after out), where each
//                          group's value is stored next to its index. Modes 0, 1 and 3 only (no
//                          hardmax) and no nan_skip (NaN is the extreme; the host refuses it).
// Output modes (p.mode): 0 index, 1 per-chunk partial (key, index), 2 fused hardmax one-hot,
// 3 decode: per-chunk partial, then the last block of the group to finish combines the group's
// partials and stores the index (argreduce_row with a whole block per group, grid.y chunks;
// one launch); 4 the same for hardmax: each block first zeroes its share of the group's one-hot
// (p.wchunk positions q of the write list, one dimension here) before its ticket, and the last
// block writes the one 1 at the winner. The last block is found with an
// atomic ticket per group (allnan[1 + group]):
// each block stores its partial, __threadfence() (release), thread 0 atomicAdd's the ticket;
// the block drawing ticket nchunks - 1 fences again (acquire), tells its threads through shared
// memory and a barrier, and reads every partial of the group with volatile loads. Tickets are
// drawn with atomicInc(nchunks - 1), so the last one also resets the word to 0: every other
// block of the group has drawn its ticket before, and none touches it again. The tickets live in memory the host zeroed once, when it was made
// (cupyops/ops/argreduce/launch.py), so each launch, and each CUDA-graph replay, finds them 0
// without a memset. The all-NaN flag (allnan[0]) is set only when a group is all NaN; the host
// reads it after the launch and zeroes it again before raising.
//
// Partials (modes 1 and 3) are compact, two arrays (structure of arrays), slot c * n_out + group
// for chunk c (grid.y), so neighbouring groups' partials are neighbours:
//   pkey: the ordering key at the value's own width (ArType<T>::bits: 1 byte for bool and 8-bit
//         integers, 2 for 16-bit types; wider values' keys have that width already; values
//         mode: the winner's bits instead, at the same width, see ArWire). A key of a
//         <= 2-byte value fits those bits: the value keys are a bijection on them, and the NaN
//         keys (all ones, or 0 for nanarg*) truncate to all ones and 0, which no
//         float16/bfloat16 number's key reaches (float16 keys of numbers lie in
//         [0x03ff, 0xfc00], bfloat16's in [0x007f, 0xff80]), so the order of the truncated keys
//         is the order of the keys.
//   pidx: the winner's logical index minus the logical index of the chunk's first position
//         (ar_chunk_lid), two's complement at p.pidx_width bytes (1, 2, 4 or 8), chosen by the
//         planner to hold any such difference within a chunk.
// The column kernel with several groups a thread stores a block's partials (and indices) from
// shared memory, one group a thread in group order, so a warp's stores are contiguous.
//
// Values mode (VAL, the *_values entry points). A best (ArBestOf<T, I, true>: ArBest<K, I, B>,
// B = ArType<T>::bits) also carries its element's raw bits v, taken together with the key and
// index wherever a scan takes an element (the row packed scan extracts the winning lane's bits
// from the loaded vector, ar_vec_bits; the packed column scan keeps its bests' bits in one word,
// lane j = group j, and hands them over after its walk). Between threads (shuffles, the shared
// memory of the block and column combines, the partials) a best travels as (bits, index)
// instead of (key, index) (ArWire): the bits determine the key, so the receiver recomputes it
// with the same ar_key (the cleared best, whose index is the empty marker, keeps key 0). So the
// partials' key slot holds the bits at the same width (no partial byte more), the shuffles and
// shared memory move no more words than index mode, and each group's value is stored by the
// thread that stores its index, at the value's own width (ar_store_value; complex128 one 16-byte
// store; the host gives vout aligned to the itemsize): a values output adds only its own
// stores, with no gather, no second launch and no re-read of the winner. The index is exactly
// index mode's (the same keys, the same ar_better), the value the element at that index: the
// sign of a zero, a NaN's payload (either part of a complex value), NaT, a bool's byte. Index
// mode's instantiation does not carry, send or store any of this (VAL = false: ArBest<K, I>).
//
// Instantiated by: cupyops/ops/argreduce/family.py (family "argreduce"), launched by
// cupyops/ops/argreduce/launch.py with ArParams packed by cupyops/ops/argreduce/params.py,
// planned by cupyops/ops/argreduce/plan.py, which documents the layout fields of ArParams.
//
// The one comparison rule (ar_better; kernels/argcompare.cuh, shared with segment.cu): each value
// maps to an unsigned ordering key - an order-preserving bijection of the value's own type (exact
// for 64-bit integers; float16 as the float it encodes; bool as 0/1; -0.0 == 0.0; complex
// lexicographic on (real, imag) with -0.0 == 0.0 in each part, as (key(real), key(imag)) in one
// 64- or 128-bit key) - complemented for argmin. Every NaN (complex: a NaN in either part) maps
// to the largest key for argmin and argmax (NaN is the extreme), and to the smallest key, 0, for
// nanargmin/nanargmax (p.nan_skip): no other value has key 0, so any non-NaN element beats it,
// and a group whose winning key is 0 is all NaN - the kernel that stores the index then sets
// *allnan (a 4-byte device flag that is 0 at rest: the host reads it once after, and zeroes it
// again only when it was set; that read is nanarg*'s only host synchronisation, and it costs no
// pass over the input). NaT (datetime) is the largest key for every kind, nanarg* included, as
// NumPy does not skip it. The larger key wins; equal keys go to the smaller logical index (tie
// "first") or the larger one ("last"). This is a total order on (key, index) pairs, so the result
// does not depend on block size, grid size or reduction order. Comparing bit patterns also keeps
// float subnormals exact under -ftz=true.
//
// Packed keys (1- and 2-byte values, the row kernel's 4- and 16-byte vectors and the column
// kernel's 4 / sizeof(T) groups per word): ar_pack_key turns a 32-bit word of raw elements into
// a word of their keys with a few SWAR operations (lane j = element j's key, NaN's ~0 as the
// lane's all ones), and ar_pack_reach tests every lane against a threshold at once. A vector
// (row) or position (column) whose lanes all stay below the running best - or not above it,
// when none of its logical indices could win a tie - is skipped: the skip test only has to be
// conservative. Anything else is an ar_better step: the row offers the vector's best element
// (its largest lane key, at the lowest or highest such lane as the tie rule and the sign of the
// index stride pick: ar_pack_max, ar_pack_locate), the column each lane (or, walking one
// reduced dimension, the lanes that reach their thresholds, which are exactly those that win).
// The one comparison rule stays ar_better.
//
// One reduced dimension (p.nd == 1, the common case): the scans advance by constant steps, with
// no odometer digits live, and the logical index moves one way along a thread's walk. So after
// its first position has met the cleared best through ar_better, every later element lies
// beyond the best's index in that direction, and ar_better reduces to comparing keys (an equal
// key wins when the walk runs towards the tie side): ar_scan_v, ar_scan_cols, and the packed
// column scan's tie state.
//
// Code layout (CUB's): thin __global__ entry points, the work in device functions. The four scans
// (ar_scan_v, ar_scan_packed, ar_scan_cols, ar_scan_cols_packed) share one walk, ar_walk, which
// issues the loads of a batch of positions and hands each loaded vector to the scan's visitor
// (a lambda holding the comparison); the visitor learns from a tag argument (ar_at) whether the
// walk is flat (one reduced dimension), whether the position is its first, and when the flat
// walk goes steady.
#include "common.cuh"

#define AR_MAX_DIMS 8
// Positions whose loads a thread issues together: the row kernel keeps at most 16 elements
// (V * UN) in registers per iteration, the column kernel AR_UNROLL_COL.
#ifndef AR_UNROLL_COL
#define AR_UNROLL_COL 4
#endif
// (64-bit indexing: at most 2 positions, and 1 for vectors of 8 or more elements, whose keys
// and 64-bit indices with the runtime NaN key (nanarg*) would not fit 64 registers unspilled).
constexpr int ar_unroll(int v, bool idx64)
{
    return (v >= 16 || (idx64 && v >= 8)) ? 1
                                           : (16 / v < (idx64 ? 2 : 4) ? 16 / v : (idx64 ? 2 : 4));
}

// Kernel parameters, passed by value. Defined once on the host by the ArParams Struct of
// cupyops/ops/argreduce/params.py (cupyops.core.structs), which packs it: keep the two in the
// same order; the static_asserts below hold the host definition's size and offsets.
struct ArParams {
    long long n_out;        // groups
    long long group;        // positions read per group
    long long chunk;        // positions per grid.y chunk
    long long nchunks;      // chunks per group (partials per group)
    long long in_base;      // element offset of the walk's base from x[0]
    long long out_base;     // element offset in out
    long long index_base;   // logical index of position 0 (tie "last" offset included)
    long long wgroup;       // hardmax: positions q per group (logical group size)
    long long wchunk;       // hardmax: positions q a block writes (finish and mode 4: per
                            // grid.y block; fused mode 2: wgroup)
    int nk, nd, nw, mode;   // kept / reduced / write dimensions; output mode
    int last, is_min, out_width, team;
    int vec, nan_skip;      // nan_skip: nanargmin/nanargmax (NaN is the weakest key, see above)
    int narrow_in, narrow_out;  // complex read / one-hot written as two half-width words: the
                                // data is only element-aligned (cupyops/ops/argreduce/plan.py)
    int pidx_width;             // bytes of a partial's relative index (1, 2, 4 or 8)
    long long k_size[AR_MAX_DIMS], k_in[AR_MAX_DIMS], k_out[AR_MAX_DIMS];
    long long d_size[AR_MAX_DIMS], d_in[AR_MAX_DIMS], d_w[AR_MAX_DIMS], d_step[AR_MAX_DIMS];
    long long w_size[AR_MAX_DIMS], w_out[AR_MAX_DIMS], w_w[AR_MAX_DIMS], w_step[AR_MAX_DIMS];
};
static_assert(sizeof(ArParams) == 832,
              "ArParams layout is defined on the host in cupyops/ops/argreduce/params.py");
#define AR_AT(field, off) CUO_FIELD_AT(ArParams, field, off)
AR_AT(n_out, 0); AR_AT(group, 8); AR_AT(chunk, 16); AR_AT(nchunks, 24); AR_AT(in_base, 32);
AR_AT(out_base, 40); AR_AT(index_base, 48); AR_AT(wgroup, 56); AR_AT(wchunk, 64); AR_AT(nk, 72);
AR_AT(nd, 76); AR_AT(nw, 80); AR_AT(mode, 84); AR_AT(last, 88); AR_AT(is_min, 92);
AR_AT(out_width, 96); AR_AT(team, 100); AR_AT(vec, 104); AR_AT(nan_skip, 108);
AR_AT(narrow_in, 112); AR_AT(narrow_out, 116); AR_AT(pidx_width, 120); AR_AT(k_size, 128);
AR_AT(k_in, 192); AR_AT(k_out, 256); AR_AT(d_size, 320); AR_AT(d_in, 384); AR_AT(d_w, 448);
AR_AT(d_step, 512); AR_AT(w_size, 576); AR_AT(w_out, 640); AR_AT(w_w, 704); AR_AT(w_step, 768);
#undef AR_AT

enum { AR_MODE_INDEX = 0, AR_MODE_PARTIAL = 1, AR_MODE_HARDMAX = 2, AR_MODE_DECODE = 3,
       AR_MODE_DECODE_HARDMAX = 4 };

extern __shared__ unsigned long long ar_smem[];

#include "argcompare.cuh"  // ArType, ar_key, ar_better, ArBest, ArWire, ar_store_*

// ------------------------------------------------------------------------------------------
// Thread level: scan positions [start, hi) with a constant stride, V elements per position
// ------------------------------------------------------------------------------------------

// One load of a raw vector at `a`. A complex element (one per vector) whose address may be only
// element-aligned (`narrow`: complex64 at 4 bytes, complex128 at 8) is read as two half-width
// words: an 8- or 16-byte load at a smaller alignment faults on a GPU.
template <class T, class Vec>
__device__ __forceinline__ void ar_load(Vec& v, const unsigned char* a, bool narrow)
{
    if constexpr (ArType<T>::kind == 4 && sizeof(Vec) == sizeof(typename ArType<T>::bits)) {
        if (narrow) {
            if constexpr (sizeof(Vec) == 8) {
                const cuo::u32 lo = *reinterpret_cast<const cuo::u32*>(a);
                const cuo::u32 hi = *reinterpret_cast<const cuo::u32*>(a + 4);
                v.w[0] = (cuo::u64)lo | ((cuo::u64)hi << 32);
            } else {
                v.w[0] = *reinterpret_cast<const cuo::u64*>(a);
                v.w[1] = *reinterpret_cast<const cuo::u64*>(a + 8);
            }
            return;
        }
    }
    v = cuo::vec_load<Vec>(a);
}

// How the walk (ar_walk) comes to a position: a tag argument of the visitor, so that each kind
// of call compiles its own path. Over one reduced dimension (a "flat" walk: constant steps, the
// logical index moving one way): AR_AT_FIRST, the first position, when the walk peels it (the
// running bests are still cleared); AR_AT_STEADY, no position but the news that the first is
// taken (`l` is then the walk's step of logical index); AR_AT_FLAT, the positions after it.
// AR_AT_ODOMETER: a position of a walk over several reduced dimensions.
enum { AR_AT_FIRST, AR_AT_STEADY, AR_AT_FLAT, AR_AT_ODOMETER };
template <int K> struct ar_at { enum { kind = K }; };

// How a walk treats the first position of a flat walk: AR_PEEL_NONE visits it like the others;
// AR_PEEL_FIRST visits it alone (AR_AT_FIRST, then AR_AT_STEADY), so that the visits after it
// may assume a best taken, and an empty flat walk falls through to the general walk (which
// visits nothing); AR_PEEL_FIRST_EXIT is the same, but an empty flat walk returns at once. The
// last two are equivalent: each keeps the machine code its scan had before the scans shared
// this walk (ptxas allocates and schedules the steady loops differently with the other one).
enum { AR_PEEL_NONE, AR_PEEL_FIRST, AR_PEEL_FIRST_EXIT };

// The walk of every scan: positions pos, pos + step, ... below hi of a thread's share of a
// group, `od` the odometer at pos (od.init). A position is one raw vector Vec of elements T,
// loaded at bytes + od.off * sizeof(T) (narrow: see ar_load), and handed to
// visit(v, l, ar_at<K>()), l = od.lid, its logical index less p.index_base. Loads are issued a
// batch at a time before the first visit of the batch, so a thread keeps the batch's loads in
// flight (memory-level parallelism): UF positions over one reduced dimension (p.nd == 1, the
// common case: constant steps, no odometer digits live, whose registers buy the larger batch),
// UG over several.
// w0(): (U)p.d_w[0], the logical index weight of reduced dimension 0, read where the caller
// reads it (the row scans hold it in a register already, the column scans read it here).
// Codegen notes, each measured with the issue-rate model (docs/kernels.md): visitors take `l`
// by const reference (by value, NVVM simplifies the visitor with `l` as an argument and
// reassociates its index sums otherwise than when inlined); `od` comes by value and w0 as a
// callable so that NVVM places its reads where the scans placed them before they shared this
// walk.
template <class T, class Vec, int UF, int UG, int PEEL, class U, class W0, class Visit>
__device__ __forceinline__ void ar_walk(const unsigned char* bytes, bool narrow,
                                        cuo::Odometer<U, AR_MAX_DIMS, true> od, U pos, U hi,
                                        U step, W0&& w0, const ArParams& p, Visit&& visit)
{
    constexpr int S = (int)sizeof(T);
    if (p.nd == 1 && (PEEL != AR_PEEL_FIRST || pos < hi)) {
        const U doff = (U)p.d_step[0] * (U)p.d_in[0];
        const U dlid = (U)p.d_step[0] * (U)w0();
        U off = od.off, lid = od.lid;
        if constexpr (PEEL == AR_PEEL_FIRST_EXIT) {
            if (pos >= hi) return;
        }
        if constexpr (PEEL != AR_PEEL_NONE) {
            Vec v;
            ar_load<T>(v, bytes + (size_t)off * S, narrow);
            visit(v, lid, ar_at<AR_AT_FIRST>());
            off += doff;
            lid += dlid;
            pos += step;
            visit(v, dlid, ar_at<AR_AT_STEADY>());
        }
        if constexpr (UF > 1) {
            for (; pos + (U)(UF - 1) * step < hi; pos += (U)UF * step) {
                Vec v[UF];
#pragma unroll
                for (int u = 0; u < UF; ++u)
                    ar_load<T>(v[u], bytes + (size_t)(off + (U)u * doff) * S, narrow);
#pragma unroll
                for (int u = 0; u < UF; ++u) visit(v[u], lid + (U)u * dlid, ar_at<AR_AT_FLAT>());
                off += (U)UF * doff;
                lid += (U)UF * dlid;
            }
        }
        for (; pos < hi; pos += step) {
            Vec v;
            ar_load<T>(v, bytes + (size_t)off * S, narrow);
            visit(v, lid, ar_at<AR_AT_FLAT>());
            off += doff;
            lid += dlid;
        }
        return;
    }
    if constexpr (UG > 1) {
        for (; pos + (U)(UG - 1) * step < hi; pos += (U)UG * step) {
            Vec v[UG];
            U l[UG];
#pragma unroll
            for (int u = 0; u < UG; ++u) {
                ar_load<T>(v[u], bytes + (size_t)od.off * S, narrow);
                l[u] = od.lid;
                od.advance(p.nd, p.d_step, p.d_size, p.d_in, p.d_w);
            }
#pragma unroll
            for (int u = 0; u < UG; ++u) visit(v[u], l[u], ar_at<AR_AT_ODOMETER>());
        }
    }
    for (; pos < hi; pos += step) {
        Vec v;
        ar_load<T>(v, bytes + (size_t)od.off * S, narrow);
        visit(v, od.lid, ar_at<AR_AT_ODOMETER>());
        od.advance(p.nd, p.d_step, p.d_size, p.d_in, p.d_w);
    }
}

// Row scan: a position is a vector of V consecutive elements of the group (element j at
// logical index lbase + lid + j w0). Over one reduced dimension the walk visits the elements
// in increasing order of lid + j (step >= V): once the first vector is taken (ar_better against
// the cleared best), every later element lies beyond best.i in the direction of w0, and
// ar_better reduces to k > best.k, or k == best.k when that direction is towards the tie side
// (`tie_wins`). `best` must come in cleared (ar_row clears it). 4-byte values with 64-bit
// indices keep twice the vectors in flight over one dimension.
template <class T, class I, int V, int UN, class Best>
__device__ __forceinline__ void ar_scan_v(const T* __restrict__ base, typename cuo::unsigned_of<I>::type start,
                                          typename cuo::unsigned_of<I>::type hi,
                                          typename cuo::unsigned_of<I>::type step,
                                          const ArParams& p, typename ArType<T>::key flip,
                                          Best& best)
{
    typedef typename cuo::unsigned_of<I>::type U;
    typedef typename ArType<T>::bits B;
    typedef typename ArType<T>::key K;
    constexpr int S = (int)sizeof(B);
    const bool last = p.last != 0;
    const bool narrow = p.narrow_in != 0;
    const K nank = (!Best::VAL && p.nan_skip) ? K() : ~K();
    cuo::Odometer<U, AR_MAX_DIMS, true> od;
    od.init(start, p.nd, p.d_size, p.d_in, p.d_w);
    const U lbase = (U)p.index_base;
    const U w0 = (U)p.d_w[0];
    bool tie_wins = false;          // set when a flat walk goes steady (AR_AT_STEADY)
    auto visit = [&](const cuo::vec_bytes<V * S>& v, const U& l, auto at) {
        if constexpr (decltype(at)::kind == AR_AT_STEADY) {
            tie_wins = last != ((I)w0 < 0);
            return;
        }
#pragma unroll
        for (int j = 0; j < V; ++j) {
            const B b = cuo::vec_elem<S>(v, j);
            const K k = ar_key<T>(b, flip, nank);
            if constexpr (decltype(at)::kind == AR_AT_FLAT)
                best.take_beyond(k, lbase, l + (U)j * w0, tie_wins, b);
            else
                best.take(k, (I)(lbase + l + (U)j * w0), last, b);
        }
    };
    constexpr int UF = (S == 4 && sizeof(I) == 8) ? 2 * UN : UN;
    ar_walk<T, cuo::vec_bytes<V * S>, UF, UN, AR_PEEL_FIRST>(
        reinterpret_cast<const unsigned char*>(base), narrow, od, start, hi, step,
        [&] { return w0; }, p, visit);
}

// ------------------------------------------------------------------------------------------
// Packed keys: 1- and 2-byte values, L = 4 / S lanes per 32-bit word
// ------------------------------------------------------------------------------------------
// The fast paths below never decide a winner: they only prove, a word at a time, that no
// element of a vector (row) or of a position (column) can beat the running best, and skip it.
// Any other vector offers its best element to ar_better (located in the packed words: the
// vector's largest key, then the lowest or highest logical index by the tie rule, so one
// ar_better step stands for the vector's elements one by one, ar_better being a total order),
// and any other column position offers each lane. The packed test only has to be conservative
// (never skip an element that would win).
//
// Lane j of a packed key word is the lane key of element j: its ar_key, with the NaN key ~0
// written as the lane's all ones (every other float16/bfloat16 key is at most +inf's 0xfc00 /
// 0xff80, so the map key -> lane key, ar_lane_key, is strictly increasing on the keys that
// occur and lanes compare exactly as keys do).

template <class T>
__device__ __forceinline__ cuo::u32 ar_lane_key(typename ArType<T>::key k)
{
    constexpr cuo::u32 lmax = sizeof(T) == 1 ? 0xffu : 0xffffu;
    return k > (typename ArType<T>::key)lmax ? lmax : (cuo::u32)k;
}

// The key of a lane key (its inverse on the keys that occur: NaN's all-ones lane is ~0).
template <class T>
__device__ __forceinline__ typename ArType<T>::key ar_lane_to_key(cuo::u32 lane)
{
    typedef typename ArType<T>::key K;
    return (ArType<T>::kind == 3 && lane == 0xffffu) ? ~K() : (K)lane;
}

// The word constant of ar_pack_key: the xor that turns the bits into keys (argmin's flip
// included). `nankw` is the NaN key word: all ones, or 0 for nanargmin/nanargmax.
template <class T>
__device__ __forceinline__ cuo::u32 ar_pack_xor(typename ArType<T>::key flip)
{
    constexpr int S = (int)sizeof(T);
    const cuo::u32 f = flip ? 0xffffffffu : 0u;
    if constexpr (ArType<T>::kind == 0) return f & 0x01010101u;
    else if constexpr (ArType<T>::kind == 1) return f;
    else return f ^ (S == 1 ? 0x80808080u : 0x80008000u);    // signed; float: the 0x8000 of +
}

// The packed key word of 4 / S raw elements (SWAR, no lane carries into the next one).
template <class T>
__device__ __forceinline__ cuo::u32 ar_pack_key(cuo::u32 w, cuo::u32 px, cuo::u32 nankw)
{
    if constexpr (ArType<T>::kind == 0) {
        // bit 7 of each lane: the byte is not 0 (its low 7 bits carry into bit 7, or bit 7 is set)
        const cuo::u32 nz = (((w & 0x7f7f7f7fu) + 0x7f7f7f7fu) | w) & 0x80808080u;
        return (nz >> 7) ^ px;
    } else if constexpr (ArType<T>::kind == 1 || ArType<T>::kind == 2) {
        return w ^ px;
    } else {
        static_assert(sizeof(T) == 2 && ArType<T>::kind == 3, "packed keys: 1- and 2-byte values");
        // ar_float_mono per 16-bit lane: magnitude | 0x8000 for + (and for -0.0), ~bits for -
        const cuo::u32 inf = ArType<T>::inf();
        const cuo::u32 mag = w & 0x7fff7fffu;
        const cuo::u32 neg = w & (mag + 0x7fff7fffu) & 0x80008000u;     // sign set, not a zero
        const cuo::u32 key = mag ^ ((neg >> 15) * 0xffffu) ^ px;
        const cuo::u32 nan = (mag + (0x7fffu - inf) * 0x10001u) & 0x80008000u;   // mag > inf
        const cuo::u32 nanl = (nan >> 15) * 0xffffu;
        return key ^ ((key ^ nankw) & nanl);
    }
}

// The constant t of ar_pack_reach for a lane threshold thr in [0, 2**(8 S)]: "lane >= thr".
// S = 1: lanes are spread to 16-bit halves; bit 8 of half + (0x100 - thr) is set iff lane >= thr,
// so raising thr by one subtracts 0x00010001 (ar_pack_step). S = 2: thr itself.
template <int S>
__device__ __forceinline__ cuo::u32 ar_pack_thr(cuo::u32 thr)
{
    if constexpr (S == 1) return (0x100u - thr) * 0x00010001u;
    else return thr;
}
// ar_pack_thr(thr + 1) - ar_pack_thr(thr), in every lane of ta / tb
template <int S> constexpr cuo::u32 ar_pack_step() { return S == 1 ? 0u - 0x00010001u : 1u; }

// Can some lane of the key word kw reach its threshold? S = 1: ta holds the thresholds of
// lanes 0 and 2 (ar_pack_thr, one per 16-bit half), tb of lanes 1 and 3; S = 2: ta of lane 0,
// tb of lane 1. The result is OR-ed over a vector's words by the caller (non-zero = maybe).
template <int S>
__device__ __forceinline__ cuo::u32 ar_pack_reach(cuo::u32 kw, cuo::u32 ta, cuo::u32 tb)
{
    if constexpr (S == 1) {
        return (((kw & 0x00ff00ffu) + ta) | (((kw >> 8) & 0x00ff00ffu) + tb)) & 0x01000100u;
    } else {
        return (cuo::u32)((kw & 0xffffu) >= ta) | (cuo::u32)((kw >> 16) >= tb);
    }
}

// Bit 8 S j of the result is set where lane j of the key word kw is >= thr (lane units).
template <int S>
__device__ __forceinline__ cuo::u32 ar_pack_lanes_ge(cuo::u32 kw, cuo::u32 thr)
{
    if constexpr (S == 1) {
        const cuo::u32 t = ar_pack_thr<1>(thr);
        return ((((kw & 0x00ff00ffu) + t) & 0x01000100u) >> 8) |
               ((((kw >> 8) & 0x00ff00ffu) + t) & 0x01000100u);
    } else {
        return (cuo::u32)((kw & 0xffffu) >= thr) | ((cuo::u32)((kw >> 16) >= thr) << 16);
    }
}

// The largest lane key of W key words.
template <int S, int W>
__device__ __forceinline__ cuo::u32 ar_pack_max(const cuo::u32 (&kw)[W])
{
    cuo::u32 m = 0;
#pragma unroll
    for (int i = 0; i < W; ++i) {
        // 16-bit lanes (1-byte keys spread to even and odd halves): __vmaxu2, one DPX
        // instruction on sm_90
        if constexpr (S == 1) m = __vmaxu2(m, __vmaxu2(kw[i] & 0x00ff00ffu, (kw[i] >> 8) & 0x00ff00ffu));
        else m = __vmaxu2(m, kw[i]);
    }
    return (m >> 16) > (m & 0xffffu) ? (m >> 16) : (m & 0xffffu);
}

// The lowest (`low`) or highest lane j (counting word by word, L = 4 / S lanes a word) of W key
// words whose lane key is at least m; one exists when m is their largest lane key.
template <int S, int W>
__device__ __forceinline__ int ar_pack_locate(const cuo::u32 (&kw)[W], cuo::u32 m, bool low)
{
    constexpr int L = 4 / S;
    int j = 0;
    if (low) {
#pragma unroll
        for (int i = W - 1; i >= 0; --i) {      // the lowest word with a hit wins: last written
            const cuo::u32 hit = ar_pack_lanes_ge<S>(kw[i], m);
            if (hit) j = i * L + (__ffs((int)hit) - 1) / (8 * S);
        }
    } else {
#pragma unroll
        for (int i = 0; i < W; ++i) {           // the highest word with a hit wins
            const cuo::u32 hit = ar_pack_lanes_ge<S>(kw[i], m);
            if (hit) j = i * L + (31 - __clz((int)hit)) / (8 * S);
        }
    }
    return j;
}

// Word i of a raw vector of 4 or 16 bytes.
template <int N>
__device__ __forceinline__ cuo::u32 ar_word(const cuo::vec_bytes<N>& v, int i)
{
    if constexpr (N == 4) return v.w[0];
    else return (cuo::u32)(v.w[i >> 1] >> (32 * (i & 1)));
}

// The bits of element j (a runtime lane, 0 <= j < N / S) of a raw vector of N = 4 or 16 bytes
// of S-byte elements: a select among its words, then a shift (an indexed register array would
// go to local memory).
template <class T, int N>
__device__ __forceinline__ typename ArType<T>::bits ar_vec_bits(const cuo::vec_bytes<N>& v, int j)
{
    constexpr int S = (int)sizeof(T);
    constexpr int L = 4 / S;                         // elements per 32-bit word
    cuo::u32 w = ar_word(v, 0);
#pragma unroll
    for (int i = 1; i < N / 4; ++i)
        if (j >= i * L) w = ar_word(v, i);
    return (typename ArType<T>::bits)(w >> (8 * S * (j & (L - 1))));
}

// Row scan of 1- and 2-byte values in vectors of V elements (4 or 16 bytes): same walk, loads
// and result as ar_scan_v. A vector is skipped when its packed keys show that none of its
// elements beats `best`: all lane keys below best's (lane) key, or (when none of the vector's
// logical indices could win a tie against best.i) not above it. The vector's tie-side index
// (its smallest logical index for tie "first", its largest for "last") decides that; w0 may be
// negative. Any other vector offers its best element (ar_pack_locate) to one ar_better step.
template <class T, class I, int V, int UN, class Best>
__device__ __forceinline__ void ar_scan_packed(const T* __restrict__ base,
                                               typename cuo::unsigned_of<I>::type start,
                                               typename cuo::unsigned_of<I>::type hi,
                                               typename cuo::unsigned_of<I>::type step,
                                               const ArParams& p, typename ArType<T>::key flip,
                                               Best& best)
{
    typedef typename cuo::unsigned_of<I>::type U;
    typedef typename ArType<T>::key K;
    constexpr int S = (int)sizeof(T);
    constexpr int W = V * S / 4;                     // 32-bit words per vector
    typedef cuo::vec_bytes<V * S> Vec;
    const bool last = p.last != 0;
    const cuo::u32 px = ar_pack_xor<T>(flip);
    const cuo::u32 pn = (!Best::VAL && p.nan_skip) ? 0u : 0xffffffffu;
    cuo::Odometer<U, AR_MAX_DIMS, true> od;
    od.init(start, p.nd, p.d_size, p.d_in, p.d_w);
    const U lbase = (U)p.index_base;
    const U w0 = (U)p.d_w[0];
    const U span = (U)(V - 1) * w0;
    const bool wneg = (I)w0 < 0;
    const U tie_base = lbase + ((last != wneg) ? span : (U)0);
    const unsigned char* bytes = reinterpret_cast<const unsigned char*>(base);
    // threshold when some index of the vector could win a tie (lane >= best); one ar_pack_step
    // further when none can (lane > best); recomputed after every ar_better step
    cuo::u32 t_tie = ar_pack_thr<S>(ar_lane_key<T>(best.k));
    // the element a vector offers (among its largest keys, the one the tie rule prefers) is at
    // its lowest lane for tie "first" with w0 > 0 or tie "last" with w0 < 0, else its highest
    const bool low = last == wneg;
    auto visit = [&](const Vec& v, const U& l, auto) {
        const I itie = (I)(tie_base + l);
        const bool no_tie = last ? itie <= best.i : itie >= best.i;
        const cuo::u32 t = t_tie + (no_tie ? ar_pack_step<S>() : 0u);
        cuo::u32 kw[W];
        cuo::u32 reach = 0;
#pragma unroll
        for (int i = 0; i < W; ++i) {
            kw[i] = ar_pack_key<T>(ar_word(v, i), px, pn);
            reach |= ar_pack_reach<S>(kw[i], t, t);
        }
        if (reach) {
            // one ar_better step with the vector's best element
            const cuo::u32 m = ar_pack_max<S, W>(kw);
            const int j = ar_pack_locate<S, W>(kw, m, low);
            // (lbase, w0 reread from the parameters: registers are short with 64-bit indices)
            // (values mode: the winning lane's bits too; index mode: the call unchanged, which
            // keeps its code byte for byte, argument evaluation order included)
            if constexpr (Best::VAL)
                best.take(ar_lane_to_key<T>(m), (I)((U)p.index_base + l + (U)j * (U)p.d_w[0]),
                          last, ar_vec_bits<T>(v, j));
            else
                best.take(ar_lane_to_key<T>(m), (I)((U)p.index_base + l + (U)j * (U)p.d_w[0]), last);
            t_tie = ar_pack_thr<S>(ar_lane_key<T>(best.k));
        }
    };
    ar_walk<T, Vec, UN, UN, AR_PEEL_NONE>(bytes, false, od, start, hi, step, [&] { return w0; }, p,
                                          visit);
}

// The row scan of vectors of V elements (the plan's vec, a template parameter: a first call
// compiles only its own scan): 1 element, 4 bytes or 16 bytes (the widths the planner picks
// among); 1- and 2-byte values in vectors of 4 or 16 bytes take the packed keys (ar_scan_packed).
template <class T, class I, int V, class Best>
__device__ __forceinline__ void ar_scan(const T* __restrict__ base, typename cuo::unsigned_of<I>::type start,
                                        typename cuo::unsigned_of<I>::type hi,
                                        typename cuo::unsigned_of<I>::type step,
                                        const ArParams& p, typename ArType<T>::key flip,
                                        Best& best)
{
    constexpr int S = (int)sizeof(T);
    static_assert(V == 1 || V * S == 4 || V * S == 16, "vectors of 1 element, 4 or 16 bytes");
    if constexpr (S < 4 && V > 1)
        ar_scan_packed<T, I, V, ar_unroll(V, sizeof(I) == 8)>(base, start, hi, step, p, flip, best);
    else
        ar_scan_v<T, I, V, ar_unroll(V, sizeof(I) == 8)>(base, start, hi, step, p, flip, best);
}

// Offsets of group o through the kept dimensions (divisions: once per thread).
template <class U>
__device__ __forceinline__ void ar_kept_offsets(U o, const ArParams& p, U& in_off, U& out_off)
{
    in_off = 0;
    out_off = 0;
#pragma unroll
    for (int d = 0; d < AR_MAX_DIMS; ++d) {
        if (d < p.nk) {
            U q;
            if (d == p.nk - 1) {
                q = o;
            } else {
                const U n = (U)p.k_size[d];
                const U t = o / n;
                q = o - t * n;
                o = t;
            }
            in_off += q * (U)p.k_in[d];
            out_off += q * (U)p.k_out[d];
        }
    }
}

// ------------------------------------------------------------------------------------------
// Warp and block level
// ------------------------------------------------------------------------------------------

// Butterfly over aligned teams of `width` lanes (a power of two <= 32): every lane of a team
// ends with the team's best. All 32 lanes must call it. (`ex`: what travels, ArWire.)
template <class Best, class Ex>
__device__ __forceinline__ void ar_warp_combine(Best& b, int width, bool last, const Ex& ex)
{
    typedef typename Ex::K K;
    typedef decltype(b.i) I;
    for (int m = width >> 1; m >= 1; m >>= 1) {
        const K k2 = cuo::shfl_xor(ex.send(b), m, 32);
        const I i2 = cuo::shfl_xor(b.i, m, 32);
        ex.take(b, k2, i2, last);
    }
}

// Whole block (1-D, a multiple of 32 threads): every thread ends with the block's best.
template <class Best, class Ex>
__device__ __forceinline__ void ar_block_combine(Best& b, bool last, const Ex& ex)
{
    typedef typename Ex::K K;
    typedef decltype(b.i) I;
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int nwarps = blockDim.x >> 5;
    K* sk;
    I* si;
    cuo::smem_split(reinterpret_cast<unsigned char*>(ar_smem), nwarps + 1, sk, si);
    ar_warp_combine(b, 32, last, ex);
    if (lane == 0) {
        sk[warp] = ex.send(b);
        si[warp] = b.i;
    }
    __syncthreads();
    if (warp == 0) {
        Best c;
        c.clear(last);
        if (lane < nwarps) ex.load(c, sk, si, lane, last);
        ar_warp_combine(c, 32, last, ex);
        if (lane == 0) {
            sk[nwarps] = ex.send(c);
            si[nwarps] = c.i;
        }
    }
    __syncthreads();
    ex.load(b, sk, si, nwarps, last);
}

// Slot of logical entry L (thread t's j-th best at t * NB + j) in the combine's shared arrays:
// the j bits XORed with bits of t >> (5 - log2 NB), so the 32 lanes of a warp storing their
// j-th bests hit 32 banks instead of 32 / NB (a permutation inside each NB-aligned block).
template <int NB>
__device__ __forceinline__ int ar_slot(int L)
{
    return L ^ ((L >> 5) & (NB - 1));
}

// Across threadIdx.y for each threadIdx.x (blockDim.y a power of two), for the NB bests each
// thread holds: a tree in shared memory; every thread ends with its column's bests.
template <class Best, int NB, class Ex>
__device__ __forceinline__ void ar_column_combine(Best (&b)[NB], bool last, const Ex& ex)
{
    typedef typename Ex::K K;
    typedef decltype(b[0].i) I;
    const int bx = blockDim.x, by = blockDim.y;
    const int tx = threadIdx.x, ty = threadIdx.y;
    if (by == 1) return;
    K* sk;
    I* si;
    cuo::smem_split(reinterpret_cast<unsigned char*>(ar_smem), bx * by * NB, sk, si);
    const int me = (ty * bx + tx) * NB;
#pragma unroll
    for (int j = 0; j < NB; ++j) {
        sk[ar_slot<NB>(me + j)] = ex.send(b[j]);
        si[ar_slot<NB>(me + j)] = b[j].i;
    }
    for (int s = by >> 1; s >= 1; s >>= 1) {
        __syncthreads();
        if (ty < s) {
            const int other = me + s * bx * NB;
#pragma unroll
            for (int j = 0; j < NB; ++j) {
                const K w = sk[ar_slot<NB>(other + j)];
                const I i = si[ar_slot<NB>(other + j)];
                ex.take(b[j], w, i, last);
                sk[ar_slot<NB>(me + j)] = ex.send(b[j]);
                si[ar_slot<NB>(me + j)] = b[j].i;
            }
        }
    }
    __syncthreads();
#pragma unroll
    for (int j = 0; j < NB; ++j) ex.load(b[j], sk, si, ar_slot<NB>(tx * NB + j), last);
}

// ------------------------------------------------------------------------------------------
// Stores
// ------------------------------------------------------------------------------------------

// nanargmin/nanargmax: a group whose winning key is 0 (the key of NaN) holds only NaN.
template <class K>
__device__ __forceinline__ void ar_flag_all_nan(unsigned int* allnan, const K& k,
                                                const ArParams& p)
{
    if (p.nan_skip && k == K()) atomicOr(allnan, 1u);   // several groups may be all NaN
}

// A group's result at output element `elem`: its index, and in values mode its value (values
// mode has no nan_skip; index mode flags an all-NaN group).
template <class T, class U, class Best>
__device__ __forceinline__ void ar_store_result(void* out, void* vout, unsigned int* allnan,
                                                long long elem, const Best& b, const ArParams& p)
{
    ar_store_index<U>(out, elem, (U)b.i, p.out_width);
    if constexpr (Best::VAL)
        ar_store_value<T>(vout, elem, b.v);
    else
        ar_flag_all_nan(allnan, b.k, p);
}

// The bit pattern of 1 in T.
template <class T>
__device__ __forceinline__ typename ArType<T>::bits ar_one_bits()
{
    typedef typename ArType<T>::bits B;
    if constexpr (sizeof(B) == 16) {                // complex128: 1 + 0j
        B one;
        one.lo = 0x3ff0000000000000ull;
        one.hi = 0;
        return one;
    } else if constexpr (ArType<T>::kind == 4) {    // complex64: 1 + 0j (real part low)
        return (B)0x3f800000u;
    } else if constexpr (ArType<T>::kind == 3) {
        if constexpr (sizeof(B) == 2)                // float16 or bfloat16 (told by +inf)
            return ArType<T>::inf() == (B)0x7f80u ? (B)0x3f80u : (B)0x3c00u;
        else if constexpr (sizeof(B) == 4) return (B)0x3f800000u;
        else return (B)0x3ff0000000000000ull;
    } else {
        return (B)1;
    }
}

// One-hot write of group positions q in [q0, q1) (thread stride: digits p.w_step) over the
// write dimensions: each element is 1 where its logical index is the winner's, else 0.
template <class T, class I>
__device__ __forceinline__ void ar_write_onehot(void* out, typename cuo::unsigned_of<I>::type group_out,
                                                typename cuo::unsigned_of<I>::type q0,
                                                typename cuo::unsigned_of<I>::type q1,
                                                typename cuo::unsigned_of<I>::type qstep,
                                                I win, const ArParams& p)
{
    typedef typename cuo::unsigned_of<I>::type U;
    typedef typename ArType<T>::bits B;
    B* o = reinterpret_cast<B*>(out) + p.out_base;
    const B one = ar_one_bits<T>();
    cuo::Odometer<U, AR_MAX_DIMS, true> od;
    od.init(q0, p.nw, p.w_size, p.w_out, p.w_w);
    if constexpr (ArType<T>::kind == 4) {
        // a complex out only element-aligned (complex64 at 4 bytes, complex128 at 8): each
        // value is written as two half-width words (real, imag); one full-width store faults
        if (p.narrow_out) {
            typedef typename cuo::uint_of<sizeof(B) / 2>::type H;
            H one_re;
            if constexpr (sizeof(H) == 4) one_re = 0x3f800000u;          // 1.0f
            else one_re = 0x3ff0000000000000ull;                          // 1.0
            H* oh = reinterpret_cast<H*>(o);
            for (U q = q0; q < q1; q += qstep) {
                const I e = (I)(group_out + od.off);
                oh[2 * e] = (od.lid == (U)win) ? one_re : (H)0;
                oh[2 * e + 1] = (H)0;
                od.advance(p.nw, p.w_step, p.w_size, p.w_out, p.w_w);
            }
            return;
        }
    }
    if constexpr (sizeof(B) == 16) {
        // complex128, 16-byte aligned here: one 16-byte store a value, a copy of one of two
        // aligned vectors (the 8-byte aligned u128 would be two 8-byte stores, each touching the
        // sectors of the whole warp's range; so would a vector assembled from two words under
        // the host compiler of cupyops.simt)
        typedef cuo::vec_bytes<16> V;
        V* ov = reinterpret_cast<V*>(o);
        V onev, zerov;
        onev.w[0] = one.lo;
        onev.w[1] = one.hi;
        zerov.w[0] = 0;
        zerov.w[1] = 0;
        for (U q = q0; q < q1; q += qstep) {
            V* a = ov + (I)(group_out + od.off);
            cuo::vec_align_check<V>(a);
            *a = (od.lid == (U)win) ? onev : zerov;
            od.advance(p.nw, p.w_step, p.w_size, p.w_out, p.w_w);
        }
        return;
    }
    for (U q = q0; q < q1; q += qstep) {
        o[(I)(group_out + od.off)] = (od.lid == (U)win) ? one : B();
        od.advance(p.nw, p.w_step, p.w_size, p.w_out, p.w_w);
    }
}

// The one-hots of VC neighbouring groups (output elements group_out + j, j < VC: the planner
// gives a hardmax VC > 1 only where they are contiguous and every output offset is a multiple
// of VC), positions q in [q0, q1): one 4-byte word a position, so a warp's store covers whole
// sectors (VC element stores would each touch the warp's whole range). An out= only
// element-aligned takes the element stores.
template <class T, class I, int VC>
__device__ __forceinline__ void ar_write_onehot_packed(
    void* out, typename cuo::unsigned_of<I>::type group_out,
    typename cuo::unsigned_of<I>::type q0, typename cuo::unsigned_of<I>::type q1,
    typename cuo::unsigned_of<I>::type qstep,
    const ArBest<typename ArType<T>::key, I> (&best)[VC], const ArParams& p)
{
    typedef typename cuo::unsigned_of<I>::type U;
    typedef typename ArType<T>::bits B;
    constexpr int S = (int)sizeof(B);
    static_assert(VC * S == 4, "one 32-bit word a position");
    B* o = reinterpret_cast<B*>(out) + p.out_base;
    const bool words = reinterpret_cast<unsigned long long>(o) % 4u == 0u;
    const B one = ar_one_bits<T>();
    cuo::Odometer<U, AR_MAX_DIMS, true> od;
    od.init(q0, p.nw, p.w_size, p.w_out, p.w_w);
    for (U q = q0; q < q1; q += qstep) {
        B* e = o + (I)(group_out + od.off);
        if (words) {
            cuo::u32 w = 0u;
#pragma unroll
            for (int j = 0; j < VC; ++j)
                w |= (od.lid == (U)best[j].i ? (cuo::u32)one : 0u) << (8 * S * j);
            cuo::u32* a = reinterpret_cast<cuo::u32*>(e);
            cuo::vec_align_check<cuo::u32>(a);
            *a = w;
        } else {
#pragma unroll
            for (int j = 0; j < VC; ++j) e[j] = od.lid == (U)best[j].i ? one : B();
        }
        od.advance(p.nw, p.w_step, p.w_size, p.w_out, p.w_w);
    }
}

// The 1 of a one-hot whose zeros are written: at logical index win of a write list of one
// dimension of weight 1 (the planner's condition for this), only the real part of a complex
// value (one half-width word: element alignment suffices).
template <class T, class I>
__device__ __forceinline__ void ar_write_one(void* out, typename cuo::unsigned_of<I>::type group_out,
                                             I win, const ArParams& p)
{
    typedef typename cuo::unsigned_of<I>::type U;
    typedef typename ArType<T>::bits B;
    B* o = reinterpret_cast<B*>(out) + p.out_base + (I)(group_out + (U)win * (U)p.w_out[0]);
    if constexpr (ArType<T>::kind == 4) {
        typedef typename cuo::uint_of<sizeof(B) / 2>::type H;
        *reinterpret_cast<H*>(o) = sizeof(H) == 4 ? (H)0x3f800000u : (H)0x3ff0000000000000ull;
    } else {
        *reinterpret_cast<volatile B*>(o) = ar_one_bits<T>();
    }
}

// The logical index of chunk c's first position (the reference of the partials' indices).
template <class U>
__device__ __forceinline__ U ar_chunk_lid(U c, const ArParams& p)
{
    cuo::Odometer<U, AR_MAX_DIMS, true> od;
    od.init(c * (U)p.chunk, p.nd, p.d_size, p.d_in, p.d_w);
    return (U)p.index_base + od.lid;
}

// Store one compact partial (see the top comment): the key at the value's width, the index
// relative to `base` (ar_chunk_lid of the slot's chunk) at p.pidx_width bytes.
template <class T, class I>
__device__ __forceinline__ void ar_store_partial(void* pkey, void* pidx,
                                                 typename cuo::unsigned_of<I>::type slot,
                                                 const typename ArType<T>::key& k, I i,
                                                 typename cuo::unsigned_of<I>::type base,
                                                 int width)
{
    typedef typename cuo::unsigned_of<I>::type U;
    typedef typename ArType<T>::bits B;
    reinterpret_cast<B*>(pkey)[slot] = (B)k;
    const U r = (U)i - base;
    if (width == 1)
        reinterpret_cast<cuo::u8*>(pidx)[slot] = (cuo::u8)r;
    else if (width == 2)
        reinterpret_cast<cuo::u16*>(pidx)[slot] = (cuo::u16)r;
    else if (width == 4)
        reinterpret_cast<cuo::u32*>(pidx)[slot] = (cuo::u32)r;
    else
        reinterpret_cast<cuo::u64*>(pidx)[slot] = (cuo::u64)r;
}

template <class W, bool VOL>
__device__ __forceinline__ W ar_load_word(const void* a, long long slot)
{
    if constexpr (VOL) return ar_load_volatile(reinterpret_cast<const W*>(a) + slot);
    else return reinterpret_cast<const W*>(a)[slot];
}

// Load one compact partial: (key, logical index). VOL: volatile loads (decode's last block
// reads partials other blocks wrote).
template <class T, class I, bool VOL>
__device__ __forceinline__ void ar_load_partial(const void* pkey, const void* pidx,
                                                typename cuo::unsigned_of<I>::type slot,
                                                typename cuo::unsigned_of<I>::type base,
                                                int width, typename ArType<T>::key& k, I& i)
{
    typedef typename cuo::unsigned_of<I>::type U;
    typedef typename ArType<T>::bits B;
    typedef typename ArType<T>::key K;
    const long long s = (long long)slot;
    k = (K)ar_load_word<B, VOL>(pkey, s);
    U r;                                             // sign-extended to U
    if (width == 1)
        r = (U)(I)(signed char)ar_load_word<cuo::u8, VOL>(pidx, s);
    else if (width == 2)
        r = (U)(I)(short)ar_load_word<cuo::u16, VOL>(pidx, s);
    else if (width == 4)
        r = (U)(I)(int)ar_load_word<cuo::u32, VOL>(pidx, s);
    else
        r = (U)ar_load_word<cuo::u64, VOL>(pidx, s);
    i = (I)(base + r);
}

// Decode mode (a whole block per group, grid.y chunks): store this block's partial of group o,
// draw the group's ticket; the last block to finish combines the group's nchunks partials (the
// same ar_better order, so the answer does not depend on which block is last) and stores the
// index (values mode: and the value; the partials carry the bits, see ArWire). Every thread of
// the block calls it (`best` is the block's best in every thread).
template <class T, class I, class Best, class Ex>
__device__ __forceinline__ void ar_last_block(void* __restrict__ out, void* __restrict__ vout,
                                              void* __restrict__ pkey,
                                              void* __restrict__ pidx,
                                              unsigned int* __restrict__ allnan,
                                              const ArParams& p,
                                              typename cuo::unsigned_of<I>::type o,
                                              typename cuo::unsigned_of<I>::type out_off,
                                              Best& best, const Ex& ex)
{
    typedef typename cuo::unsigned_of<I>::type U;
    __shared__ unsigned int ar_is_last;
    const bool last = p.last != 0;
    if (threadIdx.x == 0) {
        const U slot = (U)blockIdx.y * (U)p.n_out + o;
        if constexpr (Best::VAL)        // (the bits, ArWire; index mode: unchanged, as above)
            ar_store_partial<T, I>(pkey, pidx, slot, ex.send(best), best.i,
                                   ar_chunk_lid<U>((U)blockIdx.y, p), p.pidx_width);
        else
            ar_store_partial<T, I>(pkey, pidx, slot, best.k, best.i,
                                   ar_chunk_lid<U>((U)blockIdx.y, p), p.pidx_width);
        __threadfence();                             // release: the partial before the ticket
        // (atomicInc wraps at nchunks - 1: the last ticket leaves the word 0 for the next
        // launch, every other block of the group having drawn before it)
        const unsigned int ticket = atomicInc(allnan + 1 + o, (unsigned int)(p.nchunks - 1));
        const unsigned int is_last = ticket == (unsigned int)(p.nchunks - 1) ? 1u : 0u;
        if (is_last) __threadfence();                // acquire: the other blocks' partials
        ar_is_last = is_last;
    }
    __syncthreads();
    if (!ar_is_last) return;
    best.clear(last);
    for (U c = (U)threadIdx.x; c < (U)p.nchunks; c += (U)blockDim.x) {
        typename ArType<T>::key k;
        I i;
        ar_load_partial<T, I, true>(pkey, pidx, c * (U)p.n_out + o, ar_chunk_lid<U>(c, p),
                                    p.pidx_width, k, i);
        ex.take(best, k, i, last);
    }
    ar_block_combine(best, last, ex);
    if (threadIdx.x != 0) return;
    if (!Best::VAL && p.mode == AR_MODE_DECODE_HARDMAX) {
        ar_write_one<T, I>(out, out_off, best.i, p);
        return;
    }
    ar_store_result<T, U>(out, vout, allnan, p.out_base + (long long)(I)out_off, best, p);
}

// ------------------------------------------------------------------------------------------
// Device level (one function per entry point)
// ------------------------------------------------------------------------------------------

template <class T, class I, bool VAL, int V>
__device__ __forceinline__ void ar_row(const T* __restrict__ x, void* __restrict__ out,
                                       void* __restrict__ vout,
                                       void* __restrict__ pkey, void* __restrict__ pidx,
                                       unsigned int* __restrict__ allnan, const ArParams& p)
{
    typedef typename cuo::unsigned_of<I>::type U;
    typedef typename ArType<T>::key K;
    const bool last = p.last != 0;
    const K flip = p.is_min ? ~K() : K();
    const int team = p.team;
    const bool block_team = team >= (int)blockDim.x;
    const int t = block_team ? (int)threadIdx.x : (int)(threadIdx.x & (team - 1));
    const U o = block_team ? (U)blockIdx.x
                           : (U)blockIdx.x * (U)(blockDim.x / team) + (U)(threadIdx.x / team);
    const bool valid = o < (U)p.n_out;
    const ArWire<T, I, VAL> ex = ar_wire<T, I, VAL>(flip);

    ArBestOf<T, I, VAL> best;
    best.clear(last);
    U in_off = 0, out_off = 0;
    if (valid) {
        ar_kept_offsets<U>(o, p, in_off, out_off);
        const U lo = (U)blockIdx.y * (U)p.chunk;
        const U rest = (U)p.group - lo;
        const U hi = lo + ((U)p.chunk < rest ? (U)p.chunk : rest);
        const U step = (U)team * (U)V;      // (V is the plan's vec: one source of truth)
        ar_scan<T, I, V>(x + p.in_base + (I)in_off, lo + (U)t * (U)V, hi, step, p, flip, best);
    }
    if (block_team)
        ar_block_combine(best, last, ex);
    else
        ar_warp_combine(best, team, last, ex);
    if (!valid) return;

    if (!VAL && (p.mode == AR_MODE_HARDMAX || p.mode == AR_MODE_DECODE_HARDMAX)) {
        // the one-hot of positions [q0, q1): the whole group (p.wchunk = p.wgroup), or in a
        // decode, this block's share, all zeros (no logical index is -1), the 1 being the
        // group's last block's (ar_last_block)
        const U q0 = (U)blockIdx.y * (U)p.wchunk;
        const U q1 = q0 + (U)p.wchunk < (U)p.wgroup ? q0 + (U)p.wchunk : (U)p.wgroup;
        const bool fused = p.mode == AR_MODE_HARDMAX;
        ar_write_onehot<T, I>(out, out_off, q0 + (U)t, q1, (U)team, fused ? best.i : (I)-1, p);
        if (fused) return;
        __syncthreads();        // so thread 0's release in ar_last_block covers every thread's
    }
    if (p.mode >= AR_MODE_DECODE) {     // (block teams only: `valid` is the same in the block)
        ar_last_block<T, I>(out, vout, pkey, pidx, allnan, p, o, out_off, best, ex);
    } else if (t == 0) {
        if (p.mode == AR_MODE_INDEX) {
            ar_store_result<T, U>(out, vout, allnan, p.out_base + (long long)(I)out_off, best, p);
        } else {
            const U c = (U)blockIdx.y;
            ar_store_partial<T, I>(pkey, pidx, c * (U)p.n_out + o, ex.send(best), best.i,
                                   ar_chunk_lid<U>(c, p), p.pidx_width);
        }
    }
}

// Column scan: each position holds VC consecutive elements of the innermost kept dimension,
// i.e. the same logical index in VC neighbouring groups (one load of VC * sizeof(T) bytes).
// Over one reduced dimension the walk's logical index moves one way (by dlid): once the first
// position is taken (ar_better against the cleared bests), every later one lies beyond all the
// bests in that direction, and ar_better(k, i, best.k, best.i) is k > best.k, or k == best.k
// when the walk runs towards the tie side (`tie_wins`). `best` must come in cleared
// (ar_col_impl clears it). 4-byte values keep twice the positions in flight over one dimension
// (narrower values come here only when their rows are misaligned: the packed scan is their
// main path).
template <class T, class I, int VC, int UN, class Best>
__device__ __forceinline__ void ar_scan_cols(const T* __restrict__ base,
                                             typename cuo::unsigned_of<I>::type start,
                                             typename cuo::unsigned_of<I>::type hi,
                                             typename cuo::unsigned_of<I>::type step,
                                             const ArParams& p, typename ArType<T>::key flip,
                                             Best (&best)[VC])
{
    typedef typename cuo::unsigned_of<I>::type U;
    typedef typename ArType<T>::bits B;
    typedef typename ArType<T>::key K;
    constexpr int S = (int)sizeof(B);
    const bool last = p.last != 0;
    const bool narrow = p.narrow_in != 0;
    const K nank = (!Best::VAL && p.nan_skip) ? K() : ~K();
    cuo::Odometer<U, AR_MAX_DIMS, true> od;
    od.init(start, p.nd, p.d_size, p.d_in, p.d_w);
    const U lbase = (U)p.index_base;
    bool tie_wins = false;          // set when a flat walk goes steady (AR_AT_STEADY)
    auto visit = [&](const cuo::vec_bytes<VC * S>& v, const U& l, auto at) {
        if constexpr (decltype(at)::kind == AR_AT_STEADY) {
            tie_wins = last != ((I)l < 0);
            return;
        }
#pragma unroll
        for (int j = 0; j < VC; ++j) {
            const B b = cuo::vec_elem<S>(v, j);
            const K k = ar_key<T>(b, flip, nank);
            if constexpr (decltype(at)::kind == AR_AT_FLAT)
                best[j].take_beyond(k, lbase, l, tie_wins, b);
            else
                best[j].take(k, (I)(lbase + l), last, b);
        }
    };
    constexpr int UF = S == 4 ? 2 * UN : UN;
    ar_walk<T, cuo::vec_bytes<VC * S>, UF, UN, AR_PEEL_FIRST_EXIT>(
        reinterpret_cast<const unsigned char*>(base), narrow, od, start, hi, step,
        [&] { return (U)p.d_w[0]; }, p, visit);
}

// The thresholds of the packed column scan (ar_scan_cols_packed) and what it knows of ties:
// ta, tb are ar_pack_reach's (S = 1: lanes 0 and 2 in ta's low and high half, lanes 1 and 3
// in tb's; S = 2: lane 0 in ta, lane 1 in tb); tflat (0 or ar_pack_step) is what they hold
// above the thresholds of a position that could win a tie. `ilim`: the bests' index on the
// tie side (the smallest for tie "last", the largest for "first"), kept xor `tmask` (all ones
// for "first" turns li >= ilim into a <=). Few registers, as 64-bit indices leave little room.
template <class T, class I, int VC>
struct ArColReach {
    typedef typename ArType<T>::key K;
    enum { S = (int)sizeof(T) };
    // (an enum and a function, not static constexpr members: NVRTC would emit those as globals)
    static __device__ __forceinline__ cuo::u32 tstep() { return ar_pack_step<S>(); }
    cuo::u32 ta, tb, tflat;
    I ilim;

    // From the bests; `next`: the logical index of the next position. `settles`: the walk runs
    // away from the tie side, so a position at or behind every best cannot win a tie.
    template <class Best>
    __device__ __forceinline__ void set(const Best (&best)[VC], I next, I tmask, bool settles)
    {
        cuo::u32 t[2] = {0u, 0u};
        ilim = best[0].i ^ tmask;
#pragma unroll
        for (int j = 0; j < VC; ++j) {
            // S = 1: lanes 0, 2 -> ta (low, high half), lanes 1, 3 -> tb; S = 2: lane 0 -> ta
            const int sh = S == 1 ? 16 * (j >> 1) : 0;
            t[j & 1] |= ar_pack_thr<S>(ar_lane_key<T>(best[j].k)) & (S == 1 ? 0xffffu << sh : ~0u);
            const I bj = best[j].i ^ tmask;
            ilim = bj < ilim ? bj : ilim;
        }
        tflat = (settles && (next ^ tmask) <= ilim) ? tstep() : 0u;
        ta = t[0] + tflat;
        tb = t[1] + tflat;
    }

    // A flat walk's position li with key word kw that reaches: a lane reaches its threshold
    // exactly when it beats its best under ar_better (at the first position every lane
    // reaches, thresholds 0, and the cleared bests lose to anything; afterwards every best is a
    // position behind, the thresholds are one step up where ties cannot win, and lane keys
    // compare as keys). So the lanes that reach take their place, and only their thresholds
    // change; tflat (tf: tstep where the walk settles) is final once every lane holds one.
    // Returns the lanes that won (bit 8 S j: lane j).
    template <class Best>
    __device__ __forceinline__ cuo::u32 take_flat(cuo::u32 kw, I li, bool settles,
                                                  Best (&best)[VC])
    {
        constexpr cuo::u32 lmax = S == 1 ? 0xffu : 0xffffu;
        const cuo::u32 tf = settles ? tstep() : 0u;
        cuo::u32 hit;                        // bit 8 S j: lane j wins
        if constexpr (S == 1) {
            const cuo::u32 e = kw & 0x00ff00ffu, o = (kw >> 8) & 0x00ff00ffu;
            const cuo::u32 he = ((e + ta) & 0x01000100u) >> 8;    // lanes 0, 2
            const cuo::u32 ho = ((o + tb) & 0x01000100u) >> 8;    // lanes 1, 3
            const cuo::u32 me = he * 0xffffu, mo = ho * 0xffffu;
            ta = (ta & ~me) | ((ar_pack_thr<1>(0u) - e + tf) & me);
            tb = (tb & ~mo) | ((ar_pack_thr<1>(0u) - o + tf) & mo);
            hit = he | (ho << 8);
        } else {
            const cuo::u32 lo = kw & 0xffffu, hi16 = kw >> 16;
            const bool h0 = lo >= ta, h1 = hi16 >= tb;
            ta = h0 ? lo + tf : ta;
            tb = h1 ? hi16 + tf : tb;
            hit = (h0 ? 1u : 0u) | (h1 ? 0x10000u : 0u);
        }
        tflat = tf;
#pragma unroll
        for (int j = 0; j < VC; ++j) {
            if ((hit >> (8 * S * j)) & 1u) {
                best[j].k = ar_lane_to_key<T>((kw >> (8 * S * j)) & lmax);
                best[j].i = li;
            }
        }
        return hit;
    }
};

// Column scan of 1- and 2-byte values, VC = 4 / S neighbouring groups per 4-byte load (lane j of
// the word is group j): same walk, loads and result as ar_scan_cols. A position is skipped when
// its packed keys show that no lane beats its group's best: every lane key below its best's, or
// (when the position's logical index cannot win a tie against any of the bests) not above it.
// Any other position offers each lane to ar_better; in a walk over one reduced dimension the
// lanes that reach their thresholds are exactly those that beat their bests, and take their
// place directly (ArColReach::take_flat).
// `best` must hold the cleared state or positions of this walk (ar_col_impl clears it).
template <class T, class I, int VC, int UN, class Best>
__device__ __forceinline__ void ar_scan_cols_packed(const T* __restrict__ base,
                                                    typename cuo::unsigned_of<I>::type start,
                                                    typename cuo::unsigned_of<I>::type hi,
                                                    typename cuo::unsigned_of<I>::type step,
                                                    const ArParams& p,
                                                    typename ArType<T>::key flip,
                                                    Best (&best)[VC])
{
    typedef typename cuo::unsigned_of<I>::type U;
    typedef typename ArType<T>::bits B;
    constexpr int S = (int)sizeof(T);
    static_assert(VC * S == 4, "one 32-bit word per position");
    typedef cuo::vec_bytes<4> Vec;
    const bool last = p.last != 0;
    const cuo::u32 px = ar_pack_xor<T>(flip);
    const cuo::u32 pn = (!Best::VAL && p.nan_skip) ? 0u : 0xffffffffu;
    cuo::Odometer<U, AR_MAX_DIMS, true> od;
    od.init(start, p.nd, p.d_size, p.d_in, p.d_w);
    const U lbase = (U)p.index_base;
    // One reduced dimension (the common case): the logical index moves monotonically (by
    // dlid), so whether a later position can win a tie is known when the bests change: for tie
    // "first" walking up (or "last" walking down) it cannot once every best lies at or behind
    // the next position; otherwise it can.
    const U dlid = (U)p.d_step[0] * (U)p.d_w[0];
    const bool settles = last == ((I)dlid < 0);
    const I tmask = last ? (I)0 : (I)-1;
    ArColReach<T, I, VC> r;
    r.set(best, (I)(lbase + od.lid), tmask, settles);
    // values mode: the bits of the bests, lane j of one word as in the loads (one register
    // instead of VC; ar_col_impl's 64-bit, 1-byte instantiation spilled with VC), handed to
    // the bests after the walk. Lane masks: 8 S bits at lane j for each won lane.
    constexpr cuo::u32 lmax = S == 1 ? 0xffu : 0xffffu;
    cuo::u32 vw = 0u;
    auto visit = [&](const Vec& v, const U& l, auto at) {
        const U lu = lbase + l;         // (U: the index one step past the end may wrap)
        const I li = (I)lu;
        const cuo::u32 kw = ar_pack_key<T>(v.w[0], px, pn);
        cuo::u32 reach;
        if constexpr (decltype(at)::kind == AR_AT_FLAT) {
            reach = ar_pack_reach<S>(kw, r.ta, r.tb);
        } else {
            const cuo::u32 d = ((li ^ tmask) <= r.ilim ? r.tstep() : 0u) - r.tflat;
            reach = ar_pack_reach<S>(kw, r.ta + d, r.tb + d);
        }
        if (!reach) return;
        if constexpr (decltype(at)::kind == AR_AT_FLAT) {
            const cuo::u32 won = r.take_flat(kw, li, settles, best);
            if constexpr (Best::VAL) {
                const cuo::u32 m = won * lmax;
                vw = (vw & ~m) | (v.w[0] & m);
            }
        } else {
#pragma unroll
            for (int j = 0; j < VC; ++j) {
                const typename ArType<T>::key kj = ar_lane_to_key<T>((kw >> (8 * S * j)) & lmax);
                if constexpr (Best::VAL) {
                    if (best[j].take_key(kj, li, last)) {
                        const cuo::u32 m = lmax << (8 * S * j);
                        vw = (vw & ~m) | (v.w[0] & m);
                    }
                } else {
                    best[j].take(kj, li, last);
                }
            }
            r.set(best, (I)(lu + dlid), tmask, settles);
        }
    };
    // (several reduced dimensions: UN / 2 positions in flight, as the odometer takes registers)
    ar_walk<T, Vec, UN, UN / 2, AR_PEEL_NONE>(reinterpret_cast<const unsigned char*>(base), false,
                                              od, start, hi, step, [&] { return (U)p.d_w[0]; }, p,
                                              visit);
    if constexpr (Best::VAL) {
#pragma unroll
        for (int j = 0; j < VC; ++j) best[j].keep((B)(vw >> (8 * S * j)));
    }
}

// The column kernel's results (index, or partial of chunk blockIdx.y) when a thread holds VC > 1
// groups: after ar_column_combine, row 0 of its shared arrays holds the block's blockDim.x * VC
// bests in group order, so thread t (linear in the block) stores group t's and a warp's stores
// are contiguous (from registers, each store would stride VC groups).
// (Values mode: the shared key slots hold the bits, ArWire.)
template <class T, class I, int VC, bool VAL>
__device__ __forceinline__ void ar_col_store_smem(void* __restrict__ out, void* __restrict__ vout,
                                                  void* __restrict__ pkey,
                                                  void* __restrict__ pidx,
                                                  unsigned int* __restrict__ allnan,
                                                  const ArParams& p)
{
    typedef typename cuo::unsigned_of<I>::type U;
    typedef typename ArType<T>::key K;
    K* sk;
    I* si;
    cuo::smem_split(reinterpret_cast<unsigned char*>(ar_smem), blockDim.x * blockDim.y * VC, sk,
                    si);
    const U n = (U)blockDim.x * (U)VC;                  // more than the block's threads when
    const U g0 = (U)blockIdx.x * n;                      // blockDim.y < VC (groups of 2)
    for (U t = (U)threadIdx.y * (U)blockDim.x + (U)threadIdx.x; t < n && g0 + t < (U)p.n_out;
         t += (U)blockDim.x * (U)blockDim.y) {
        const U g = g0 + t;
        if (p.mode == AR_MODE_INDEX) {
            U in_off, out_off;
            ar_kept_offsets<U>(g, p, in_off, out_off);
            const int at = ar_slot<VC>((int)t);      // (the combine's slots)
            ar_store_index<U>(out, p.out_base + (long long)(I)out_off, (U)si[at], p.out_width);
            if constexpr (VAL)
                ar_store_value<T>(vout, p.out_base + (long long)(I)out_off,
                                  (typename ArType<T>::bits)sk[at]);
            else
                ar_flag_all_nan(allnan, sk[at], p);
        } else {
            const U c = (U)blockIdx.y;
            const int at = ar_slot<VC>((int)t);
            ar_store_partial<T, I>(pkey, pidx, c * (U)p.n_out + g, sk[at], si[at],
                                   ar_chunk_lid<U>(c, p), p.pidx_width);
        }
    }
}

// Column kernel body: thread (x, y) of block (bx, by) owns the VC groups starting at output
// (bx * blockDim.x + x) * VC and the positions y, y + blockDim.y, ... of chunk by.
template <class T, class I, int VC, bool VAL>
__device__ __forceinline__ void ar_col_impl(const T* __restrict__ x, void* __restrict__ out,
                                            void* __restrict__ vout,
                                            void* __restrict__ pkey, void* __restrict__ pidx,
                                            unsigned int* __restrict__ allnan, const ArParams& p)
{
    typedef typename cuo::unsigned_of<I>::type U;
    typedef typename ArType<T>::key K;
    const bool last = p.last != 0;
    const K flip = p.is_min ? ~K() : K();
    const U o = ((U)blockIdx.x * (U)blockDim.x + (U)threadIdx.x) * (U)VC;
    const U ty = (U)threadIdx.y;
    const bool valid = o < (U)p.n_out;
    const ArWire<T, I, VAL> ex = ar_wire<T, I, VAL>(flip);

    ArBestOf<T, I, VAL> best[VC];
#pragma unroll
    for (int j = 0; j < VC; ++j) best[j].clear(last);
    U in_off = 0, out_off = 0;
    if (valid) {
        ar_kept_offsets<U>(o, p, in_off, out_off);
        const U lo = (U)blockIdx.y * (U)p.chunk;
        const U rest = (U)p.group - lo;
        const U hi = lo + ((U)p.chunk < rest ? (U)p.chunk : rest);
        // (complex128 with 64-bit indexing: 2 positions in flight, to stay within 64 registers)
        // (and the packed path of 1- and 2-byte values, whose per-lane thresholds take registers)
        constexpr int UNC = (sizeof(I) == 8 && (sizeof(T) == 16 || VC > 1)) ? 2 : AR_UNROLL_COL;
        if constexpr (VC > 1)       // 1- and 2-byte values, one word a position: packed keys
            ar_scan_cols_packed<T, I, VC, UNC>(x + p.in_base + (I)in_off, lo + ty, hi,
                                               (U)blockDim.y, p, flip, best);
        else
            ar_scan_cols<T, I, VC, UNC>(x + p.in_base + (I)in_off, lo + ty, hi,
                                        (U)blockDim.y, p, flip, best);
    }
    ar_column_combine(best, last, ex);
    if (VC > 1 && p.mode != AR_MODE_HARDMAX && blockDim.y > 1) {
        ar_col_store_smem<T, I, VC, VAL>(out, vout, pkey, pidx, allnan, p);
        return;
    }
    if (!valid) return;

    if constexpr (VC > 1 && !VAL) {  // (the VC groups' outputs are neighbours: one word)
        if (p.mode == AR_MODE_HARDMAX) {
            ar_write_onehot_packed<T, I, VC>(out, out_off, ty, (U)p.wgroup, (U)blockDim.y,
                                             best, p);
            return;
        }
    }
    const U ostep = (U)p.k_out[0];   // the VC groups are neighbours along kept dimension 0
#pragma unroll
    for (int j = 0; j < VC; ++j) {
        const U oj = out_off + (U)j * ostep;
        if (!VAL && VC == 1 && p.mode == AR_MODE_HARDMAX) {     // (VC > 1: written above)
            ar_write_onehot<T, I>(out, oj, ty, (U)p.wgroup, (U)blockDim.y, best[j].i, p);
        } else if (ty == 0) {
            if (p.mode == AR_MODE_INDEX) {
                ar_store_result<T, U>(out, vout, allnan, p.out_base + (long long)(I)oj, best[j], p);
            } else {
                const U c = (U)blockIdx.y;
                ar_store_partial<T, I>(pkey, pidx, c * (U)p.n_out + o + (U)j, ex.send(best[j]),
                                       best[j].i, ar_chunk_lid<U>(c, p), p.pidx_width);
            }
        }
    }
}

// V: groups a thread owns (the plan's vec, a template parameter: a first call compiles only its
// own scan): 4 / sizeof(T) for values narrower than 4 bytes read with one 4-byte load covering
// neighbouring groups, else 1.
template <class T, class I, bool VAL, int V>
__device__ __forceinline__ void ar_col(const T* __restrict__ x, void* __restrict__ out,
                                       void* __restrict__ vout,
                                       void* __restrict__ pkey, void* __restrict__ pidx,
                                       unsigned int* __restrict__ allnan, const ArParams& p)
{
    static_assert(V == 1 || V * (int)sizeof(T) == 4, "1 group, or 4 bytes of groups, a thread");
    ar_col_impl<T, I, V, VAL>(x, out, vout, pkey, pidx, allnan, p);
}

// Second pass of a split group. Block (x, y) threads: x over groups (coalesced partial reads
// and, for the column layouts, coalesced one-hot writes), y over the chunks' partials and then
// over the group's positions; grid.y splits the one-hot write of big groups.
// (Values mode: the partials carry the bits, ArWire.)
template <class T, class I, bool VAL>
__device__ __forceinline__ void ar_finish(void* __restrict__ out, void* __restrict__ vout,
                                          const void* __restrict__ pkey,
                                          const void* __restrict__ pidx,
                                          unsigned int* __restrict__ allnan, const ArParams& p)
{
    typedef typename cuo::unsigned_of<I>::type U;
    typedef typename ArType<T>::key K;
    const bool last = p.last != 0;
    const U o = (U)blockIdx.x * (U)blockDim.x + (U)threadIdx.x;
    const U ty = (U)threadIdx.y;
    const bool valid = o < (U)p.n_out;
    const ArWire<T, I, VAL> ex = ar_wire<T, I, VAL>(p.is_min ? ~K() : K());
    ArBestOf<T, I, VAL> best[1];
    best[0].clear(last);
    if (valid) {
        for (U c = ty; c < (U)p.nchunks; c += (U)blockDim.y) {
            K k;
            I i;
            ar_load_partial<T, I, false>(pkey, pidx, c * (U)p.n_out + o, ar_chunk_lid<U>(c, p),
                                         p.pidx_width, k, i);
            ex.take(best[0], k, i, last);
        }
    }
    ar_column_combine(best, last, ex);
    if (!valid) return;
    U in_off, out_off;
    ar_kept_offsets<U>(o, p, in_off, out_off);
    if (!VAL && p.mode == AR_MODE_HARDMAX) {
        const U q0 = (U)blockIdx.y * (U)p.wchunk;
        const U rest = (U)p.wgroup - q0;
        const U q1 = q0 + ((U)p.wchunk < rest ? (U)p.wchunk : rest);
        ar_write_onehot<T, I>(out, out_off, q0 + ty, q1, (U)blockDim.y, best[0].i, p);
    } else if (ty == 0) {
        ar_store_result<T, U>(out, vout, allnan, p.out_base + (long long)(I)out_off, best[0], p);
    }
}

// ------------------------------------------------------------------------------------------
// Entry points
// ------------------------------------------------------------------------------------------

template <class T, class I, int V>
__global__ void __launch_bounds__(256, 4)
argreduce_row(const T* __restrict__ x, void* __restrict__ out, void* __restrict__ pkey,
              void* __restrict__ pidx, unsigned int* __restrict__ allnan, ArParams p)
{
    ar_row<T, I, false, V>(x, out, nullptr, pkey, pidx, allnan, p);
}

template <class T, class I, int V>
__global__ void __launch_bounds__(256, 4)
argreduce_col(const T* __restrict__ x, void* __restrict__ out, void* __restrict__ pkey,
              void* __restrict__ pidx, unsigned int* __restrict__ allnan, ArParams p)
{
    ar_col<T, I, false, V>(x, out, nullptr, pkey, pidx, allnan, p);
}

template <class T, class I>
__global__ void __launch_bounds__(256, 4)
argreduce_finish(void* __restrict__ out, const void* __restrict__ pkey,
                 const void* __restrict__ pidx, unsigned int* __restrict__ allnan, ArParams p)
{
    ar_finish<T, I, false>(out, nullptr, pkey, pidx, allnan, p);
}

// Values mode (max_and_argmax / min_and_argmin): the same kernels, also storing the winner's
// bits to `vout` (modes 0, 1 and 3 only: no hardmax, no nan_skip).
template <class T, class I, int V>
__global__ void __launch_bounds__(256, 4)
argreduce_row_values(const T* __restrict__ x, void* __restrict__ out, void* __restrict__ vout,
                     void* __restrict__ pkey, void* __restrict__ pidx,
                     unsigned int* __restrict__ allnan, ArParams p)
{
    ar_row<T, I, true, V>(x, out, vout, pkey, pidx, allnan, p);
}

template <class T, class I, int V>
__global__ void __launch_bounds__(256, 4)
argreduce_col_values(const T* __restrict__ x, void* __restrict__ out, void* __restrict__ vout,
                     void* __restrict__ pkey, void* __restrict__ pidx,
                     unsigned int* __restrict__ allnan, ArParams p)
{
    ar_col<T, I, true, V>(x, out, vout, pkey, pidx, allnan, p);
}

template <class T, class I>
__global__ void __launch_bounds__(256, 4)
argreduce_finish_values(void* __restrict__ out, void* __restrict__ vout,
                        const void* __restrict__ pkey, const void* __restrict__ pidx,
                        unsigned int* __restrict__ allnan, ArParams p)
{
    ar_finish<T, I, true>(out, vout, pkey, pidx, allnan, p);
}
