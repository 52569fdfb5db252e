// nonzero.cu - the nonzero family: coordinates of the nonzero elements (argwhere, nonzero,
// nonzero_coordinates) by warp-ballot compaction, and count_nonzero over any axes.
//
// Kernels (all launched with NZ_BLOCK = 256 threads):
//   nonzero_tiles<T, Wide, Vec>(x, params, counter, status, out, count_out, stats, mask)
//     The input, in its logical row-major order, is cut into tiles of NZ_BLOCK * ITEMS elements
//     (ITEMS = 16 for 1..4-byte types, 8 for 8-byte, 4 for 16-byte: 4096 / 4096 / 2048 / 1024).
//     Warp w of a tile owns ITEMS * 32 consecutive elements; for each of its ITEMS rounds it
//     votes __ballot_sync(x != 0) and a voting lane's slot is __popc(ballot & lanes below) plus
//     the warp's running count; the tile offset of a warp is the scan of the warps' counts.
//     Slots hold tile-local indices (u16) in shared memory, so the global writes of a tile are
//     a contiguous, coalesced range whatever the input layout. params.mode selects:
//       NZ_MODE_FIXED (size=k, one pass, no host read): tile ids come from an atomic counter
//         (so every tile a block waits on belongs to a block already running: no schedule can
//         deadlock); a tile posts its aggregate, finds its offset by a decoupled look-back over
//         the status words of its predecessors (warp 0: the 4 nearest first - one 32-byte
//         sector - then 32 per step; a 64-bit word packs flag and value), posts its inclusive
//         prefix and writes rows < k. Ids past the input tiles are fill tiles: they wait for
//         the last tile's inclusive prefix (= count) and write fill_value into rows
//         [count, k). The last tile stores count to count_out. The counter and status words
//         reset themselves across launches (NZ_HDR_DRAW): no memset before a launch.
//       NZ_MODE_SCAN (exact size, pass 1): the same count + look-back without staging or
//         writing rows; records each tile's votes (a bit per element) and its exclusive prefix
//         in the tile's record of `mask` (nz_mask_stride: size / 8 bytes and a sector a tile),
//         and the total in count_out, which the host reads once to allocate the exact output.
//       NZ_MODE_PLACE (exact size, pass 2): tile = blockIdx.x; it stages its votes from the
//         mask record and writes from the prefix there: the input is read once, the mask
//         (an eighth of a 1-byte input) written once and read once.
//     Packed path (params.vec, and the template parameter Vec, so that a first call compiles
//       only the read its plan runs: a 1- or 2-byte type whose reading dims merge into one
//       contiguous run): the same tiles, cut at 16-byte boundaries of the address space (params.head
//       elements of the first tile lie before x), each lane reading aligned 16-byte words
//       (nz_vote_warp_vec): 4 or 2 elements tested per instruction (nz_packed, nonzero.cuh),
//       counts by POPC, lane slots by a shuffle scan; words straddling the ends of the input are
//       read element by element.
//     Layouts: NZ_LAYOUT_ROWS writes (count, ndim) row-major (argwhere, nonzero_coordinates);
//     NZ_LAYOUT_COLS writes (ndim, count) so each of nonzero's 1-D arrays is a contiguous row.
//     Coordinates are written as 4 or 8 bytes (params.index_bytes, a run-time switch at the
//     store) - int32/uint32 and int64/uint64 share their bit patterns for the values written.
//   nonzero_tiles_t<T, Wide>(same arguments; SCAN stores the tile's shared mask as its record,
//     PLACE loads it back)
//     The same three modes for inputs whose memory-innermost reading dim m (stride of one
//     element, either sign) is not the last one (F-order, transposed, permuted), where
//     nonzero_tiles' warps would touch a sector per lane. A tile is K = 2^tr_kshift indices
//     along m (K * sizeof(T) = 32..128 bytes, or all of m) times all tr_inner = I elements of
//     the dims after m: a contiguous range of the row-major order, so the look-back and the
//     writes are nonzero_tiles'. It is read in memory order (consecutive lanes along m, a
//     thread gathering the bits of 32 inner indices of its column in a register, UNROLL loads
//     in flight: nz_t_read_units; 1- and 2-byte types as 4-byte words where aligned,
//     params.tr_vec == 2), the bits marked in a shared mask at their tile-local row-major
//     index (one atomicOr per row and 32 elements, swizzled words: nz_t_word), then compacted
//     and written in row-major order, NZ_BLOCK * ITEMS bits a round. Planned when K * I <=
//     NZ_T_BITS (cupyops/ops/nonzero/plan.py, transposed_tiles); past that, a tile is K x one
//     chunk of the inner range (params.tr_c chunks of tr_ic), which SCAN counts and records,
//     and NZ_MODE_SEGMENTS writes segment by segment (nz_t_locate, nz_t_segment).
//   count_nonzero_axes<T, Wide>(x, params, out, sums)
//     out[o] = number of nonzero elements of the reduced sub-array o (kept dims row-major).
//     mode 0: a warp per (output, chunk of the reduced range), ballot + popc; mode 1: a thread
//     per (output, chunk), lanes on consecutive outputs (kept axis innermost in memory). With
//     several chunks the partial counts are added atomically into a word of `sums` per output,
//     with a ticket; the last chunk stores the output and zeroes the word (nz_count_store).
//     With one
//     reduced dim both modes step a pointer (no division per position; mode 0 then counts per
//     lane and sums the warp once). Mode 0 over
//     one contiguous reduced run of a 1- or 2-byte type (params.vec) reads aligned 16-byte words
//     and counts 4 or 2 elements per instruction (nz_count_run_vec); params.align is x's
//     address mod 16, given by the host so that no pointer is cast to an integer.
// Template parameters: T, the value type: unsigned char / short / int / long long for bool and
//   the integer types of that size (the test only looks at the bit pattern, so signed and
//   unsigned share an instantiation), cupyops_half, cupyops_bfloat16, float, double, cupyops_complex64,
//   cupyops_complex128 (sign bits masked: -0.0 is zero); Wide, 64-bit linear indices and byte
//   offsets (chosen by the planner past 2**31 elements or bytes, or forced with force_64bit).
// Instantiated by: cupyops/ops/nonzero/launch.py (family "nonzero"), planned (and the parameter
//   structs packed) by cupyops/ops/nonzero/plan.py.
// Code layout: thin __global__ entry points over device functions (nz_tiles, nz_tiles_t,
// nz_count_axes); the steps the two tile kernels share are helpers: the tile draw
// (nz_draw_tile), a warp's count and compaction round (nz_stage_ballot), the block's count
// (nz_block_count), the tile's offset (nz_tile_offset: look-back or pass 1's prefix) and the
// block-order rewrite and write of the staged rows (nz_read_staged, nz_place_rows).
// nonzero_tiles_t's own steps: where a tile lies (nz_t_locate), its offset and write
// (nz_t_finish), the rounds of compaction (nz_t_write).
#include "nonzero.cuh"

#define NZ_FLAG_AGG (1ull << 62)                // status: aggregate of this tile only
#define NZ_FLAG_INC (1ull << 63)                // status: inclusive prefix through this tile
#define NZ_VALUE_MASK ((1ull << 62) - 1ull)

// The look-back's state (`counter`, `status`) lives in memory the host zeroes once, when it is
// made, and never again: every launch leaves it ready for the next one, in stream order, so
// that a call needs no memset and a CUDA-graph replay (the same parameter bytes) works too.
//   counter[NZ_HDR_DRAW]: the low 32 bits hand out tile ids; the block that draws the last id
//     of its launch (gridDim.x - 1: every block has drawn) resets them and adds 1 to the
//     epoch, the high 32 bits. A launch's parity q is its epoch's lowest bit.
//   status words come in two parities (nz_sw): a launch posts into parity q only. Each block of
//     it first clears its share of parity 1 - q's words [0, counter[NZ_HDR_TILES + 1 - q]),
//     all that the last launch of parity 1 - q posted, and the block of tile 0 records its own
//     num_tiles in counter[NZ_HDR_TILES + q]. So a launch finds its parity all zero: the
//     launch before it (parity 1 - q) cleared what the one before that posted, and nothing
//     else has written parity q since. No word a launch reads is cleared during it.
//   PLACE (exact size, pass 2) draws nothing and reads no status word: its tile is blockIdx.x,
//     and SCAN left the tile's prefix in the tile's mask record (nz_mask_record).
// A fresh (zeroed) state is also a valid one, which is what a grown or discarded buffer gives.
#define NZ_HDR_DRAW 0
#define NZ_HDR_TILES 1         // [1 + q]: tiles the last launch of parity q posted

// Status word of tile t: runs of 32 tiles, parity 0's run then parity 1's, so that the 32
// predecessors a look-back step reads are at most two runs of 256 bytes; `s` is the base
// moved to one parity (status + 32 * q).
__device__ __forceinline__ nz_u64* nz_sw(nz_u64* s, nz_u64 t)
{
    return s + t + ((t >> 5) << 5);
}

// ------------------------------------------------------------------ shared helpers
__device__ __forceinline__ void nz_store_index(void* out, nz_u64 pos, nz_u64 v, int index_bytes)
{
    if (index_bytes == 8)
        static_cast<nz_u64*>(out)[pos] = v;
    else
        static_cast<nz_u32*>(out)[pos] = (nz_u32)v;
}

// Coordinate `col` of the logical linear index L.
template <bool Wide>
__device__ __forceinline__ nz_u64 nz_coordinate(const nz_params& p, typename nz_index<Wide>::idx L,
                                                int col)
{
    typedef typename nz_index<Wide>::idx idx_t;
    if ((p.unit_mask >> col) & 1ull) return 0;
    const int k = __popcll(~p.unit_mask & ((1ull << col) - 1ull));
    const idx_t q = nz_div(L, p.co_suffix[k]);
    return (nz_u64)(q - nz_div(q, p.co_shape[k]) * (idx_t)p.co_shape[k].d);
}

// One round of a warp's count and compaction: `b` holds the warp's votes (bit l: lane l's
// element is nonzero). With `stage`, a lane that voted (`mine`) stages `idx` at its warp-local
// slot: `run` (the warp's count so far) plus the voting lanes below it (`below`: their mask).
// Returns the new count. (`mine` by reference: by value, NVVM tests it before the ballot, and
// ptxas then schedules some instantiations differently from the loop written inline.)
__device__ __forceinline__ nz_u32 nz_stage_ballot(nz_u32 b, bool stage, const bool& mine,
                                                  nz_u16 idx, nz_u16* stage_w, nz_u32 run,
                                                  nz_u32 below)
{
    if (stage && mine) stage_w[run + __popc(b & below)] = idx;
    return run + __popc(b);
}

// One warp's vote over its ITEMS * 32 elements starting at warp_base. Returns the warp's
// count; with `stage`, the warp-local index (round * 32 + lane) of each nonzero element goes to
// stage_w[its warp-local slot]; with `rec` (SCAN), round j's ballot goes to rec[j] (the mask
// PLACE reads instead of x). Guard: the range may run past the end of the input.
template <typename T, bool Wide, bool Guard>
__device__ __forceinline__ nz_u32 nz_vote_warp(const char* __restrict__ x, const nz_params& p,
                                               typename nz_index<Wide>::idx warp_base,
                                               nz_u16* stage_w, bool stage, nz_u32* rec,
                                               int lane)
{
    typedef typename nz_index<Wide>::idx idx_t;
    constexpr int ITEMS = nz_items<T>::value;
    // Loads are issued in batches of BATCH independent loads in flight per thread (all ITEMS
    // for 32-bit indexing; half with 64-bit addresses, which cost twice the registers).
    constexpr int BATCH = (Wide && ITEMS > 8) ? 8 : ITEMS;
    const nz_u32 below = (1u << lane) - 1u;
    nz_u32 run = 0, word = 0;
#pragma unroll
    for (int j0 = 0; j0 < ITEMS; j0 += BATCH) {
        bool pred[BATCH];
#pragma unroll
        for (int j = 0; j < BATCH; ++j) {
            const idx_t L = warp_base + (idx_t)((j0 + j) * 32 + lane);
            pred[j] = false;
            if (!Guard || L < (idx_t)p.size)
                pred[j] = nz_is_nonzero<T>(reinterpret_cast<const T*>(
                    x + nz_offset<Wide>(L, p.in_div, p.in_stride, p.in_ndim)), p.narrow_loads != 0);
        }
#pragma unroll
        for (int j = 0; j < BATCH; ++j) {
            const nz_u32 b = __ballot_sync(NZ_FULL_MASK, pred[j]);
            if (lane == j0 + j) word = b;
            run = nz_stage_ballot(b, stage, pred[j], (nz_u16)((j0 + j) * 32 + lane), stage_w,
                                  run, below);
        }
    }
    if (rec != nullptr && lane < ITEMS) rec[lane] = word;
    return run;
}

// The mask words of one round of the packed vote (nz_vote_warp_vec), from lane `lane`'s four
// words of nz_packed bits `b` (VEC = 16 / sizeof(T) elements, the top bit of each element's
// lane): its VEC bits gathered in order, the 32 / VEC lanes of a mask word or-ed together with
// shuffles, the first of them storing word lane / (32 / VEC) of the round to rec.
template <typename T>
__device__ __forceinline__ void nz_vec_record(const nz_u32 (&b)[4], nz_u32* rec, int lane)
{
    constexpr int S = (int)sizeof(T);
    constexpr int VEC = 16 / S;
    constexpr int L = 32 / VEC;
    nz_u32 v = 0;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        if constexpr (S == 1)   // bits 7, 15, 23, 31 -> 0..3: a multiply gathers them in byte 3
            v |= ((((b[k] >> 7) & 0x01010101u) * 0x01020408u) >> 24) << (4 * k);
        else                    // bits 15, 31 -> 0, 1
            v |= (((b[k] >> 15) & 1u) | ((b[k] >> 30) & 2u)) << (2 * k);
    }
#pragma unroll
    for (int o = 1; o < L; o <<= 1) v |= __shfl_down_sync(NZ_FULL_MASK, v, o) << (VEC * o);
    if ((lane & (L - 1)) == 0) rec[lane / L] = v;
}

// PLACE's vote (exact size, pass 2): the warp's ITEMS mask words that SCAN recorded (word j:
// round j's ballot; in shared memory, where the block loaded its tile's words with one
// coalesced pass: a warp's 16 or 32 bytes would share their sector with other warps), staged
// as nz_vote_warp stages its ballots; x is not read again.
template <int ITEMS>
__device__ __forceinline__ nz_u32 nz_vote_mask(const nz_u32* mask_w, nz_u16* stage_w, int lane)
{
    const nz_u32 mine = lane < ITEMS ? mask_w[lane] : 0u;
    const nz_u32 below = (1u << lane) - 1u;
    nz_u32 run = 0;
#pragma unroll
    for (int j = 0; j < ITEMS; ++j) {
        const nz_u32 b = __shfl_sync(NZ_FULL_MASK, mine, j);
        const bool set = ((b >> lane) & 1u) != 0u;
        run = nz_stage_ballot(b, true, set, (nz_u16)(j * 32 + lane), stage_w, run, below);
    }
    return run;
}

// The packed form of nz_vote_warp (p.vec: one contiguous run of a 1- or 2-byte type). Tiles
// are cut in shifted indices s = L + head (head: elements between the 16-byte boundary below x
// and x), so each word is 16-byte aligned: round r of a lane reads word r * 32 + lane of its
// warp's range (xa + s * sizeof(T): the shifted index's address; consecutive lanes, coalesced),
// VEC = 16 / sizeof(T) elements, tested 4 or 2 per instruction (nz_packed). Words straddling
// [x, x + size) are read element by element (Guard). A lane's slot is the warp's running count
// plus a shuffle scan of the lanes' counts; its nonzero elements are staged in order as
// warp-local shifted indices (r * 32 + lane) * VEC + e. The count pass only sums the counts.
template <typename T, bool Wide, bool Guard>
__device__ __forceinline__ nz_u32 nz_vote_warp_vec(const char* xa, const char* lo, const char* hi,
                                                   typename nz_index<Wide>::idx warp_base,
                                                   nz_u16* stage_w, bool stage, nz_u32* rec,
                                                   int lane)
{
    typedef typename nz_index<Wide>::idx idx_t;
    constexpr int S = (int)sizeof(T);
    constexpr int VEC = 16 / S;
    constexpr int ROUNDS = nz_items<T>::value / VEC;
    nz_u32 w[ROUNDS][4];
#pragma unroll
    for (int r = 0; r < ROUNDS; ++r) {
        const char* a = xa + (warp_base + (idx_t)((r * 32 + lane) * VEC)) * (idx_t)S;
        if (!Guard || (a >= lo && a + 16 <= hi)) {
            nz_load16(w[r], a);
        } else if (a + 16 > lo && a < hi) {
            nz_load16_part<T>(w[r], a, lo, hi);
        } else {
#pragma unroll
            for (int k = 0; k < 4; ++k) w[r][k] = 0u;
        }
    }
    nz_u32 run = 0;
    if (!stage) {   // (SCAN: the counts, and the mask words with `rec`)
#pragma unroll
        for (int r = 0; r < ROUNDS; ++r) {
            nz_u32 b[4];
#pragma unroll
            for (int k = 0; k < 4; ++k) {
                b[k] = nz_packed<T>::bits(w[r][k]);
                run += __popc(b[k]);
            }
            if (rec != nullptr) nz_vec_record<T>(b, rec + r * VEC, lane);
        }
#pragma unroll
        for (int o = 16; o >= 1; o >>= 1) run += __shfl_xor_sync(NZ_FULL_MASK, run, o);
        return run;
    }
#pragma unroll
    for (int r = 0; r < ROUNDS; ++r) {
        nz_u32 b[4], c = 0;
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            b[k] = nz_packed<T>::bits(w[r][k]);
            c += __popc(b[k]);
        }
        nz_u32 incl = c;   // inclusive scan of the lanes' counts
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const nz_u32 t = __shfl_up_sync(NZ_FULL_MASK, incl, o);
            if (lane >= o) incl += t;
        }
        nz_u32 pos = run + incl - c;
        const nz_u32 first = (nz_u32)((r * 32 + lane) * VEC);
#pragma unroll
        for (int e = 0; e < VEC; ++e) {
            if ((b[(e * S) >> 2] >> (8 * ((e * S) & 3) + 8 * S - 1)) & 1u)
                stage_w[pos++] = (nz_u16)(first + (nz_u32)e);
        }
        run += __shfl_sync(NZ_FULL_MASK, incl, 31);
    }
    return run;
}

// Decoupled look-back (called by all lanes of one warp): posts this tile's aggregate, sums the
// predecessors' statuses backwards (4, then 32 at a time) until one holds an inclusive prefix,
// posts the inclusive prefix and returns the exclusive one. Waits (volatile loads +
// __nanosleep) only on tiles whose ids were handed out before this one's, i.e. on blocks
// already running.
__device__ nz_u64 nz_lookback(nz_u64* status, nz_u64 tile, nz_u64 count, nz_u64* stats, int lane)
{
    if (tile == 0) {
        if (lane == 0) nz_store_volatile(nz_sw(status, 0), NZ_FLAG_INC | count);
        return 0;
    }
    if (lane == 0) nz_store_volatile(nz_sw(status, tile), NZ_FLAG_AGG | count);
    nz_u64 excl = 0, partial = 0, spins = 0;
    nz_i64 p = (nz_i64)tile - 1;
    // The first step looks at the 4 nearest predecessors only (one 32-byte sector: usually
    // enough), later steps at 32. Lanes past the window count as an aggregate of 0.
    int width = 4;
    while (true) {
        const nz_i64 q = p - lane;
        nz_u64 s;
        while (true) {
            s = lane >= width ? NZ_FLAG_AGG
                : (q >= 0 ? nz_load_volatile(nz_sw(status, (nz_u64)q)) : NZ_FLAG_INC);   // before tile 0: 0
            if (__ballot_sync(NZ_FULL_MASK, (s >> 62) == 0ull) == 0u) break;
            ++spins;
            __nanosleep(100);
        }
        const nz_u32 inc = __ballot_sync(NZ_FULL_MASK, (s & NZ_FLAG_INC) != 0ull);
        const int stop = inc ? __ffs(inc) - 1 : 31;   // nearest predecessor with a prefix
        excl += nz_warp_sum_u64(lane <= stop ? (s & NZ_VALUE_MASK) : 0ull);
        partial += (nz_u64)(inc ? stop : width);       // aggregates summed on the way
        if (inc) break;
        p -= width;
        width = 32;
    }
    if (lane == 0) {
        nz_store_volatile(nz_sw(status, tile), NZ_FLAG_INC | (excl + count));
        if (stats != nullptr) {   // debug statistics, off unless the plan asks for them
            atomicAdd(&stats[0], partial);
            atomicAdd(&stats[1], spins);
            atomicMax(&stats[2], partial);
            atomicAdd(&stats[3], partial != 0 ? 1ull : 0ull);
        }
    }
    return excl;
}

// Fill tile f (FIXED): rows [max(count, f * fill_rows), min((f + 1) * fill_rows, k)).
template <bool Align>
__device__ void nz_fill_tile(const nz_params& p, nz_u64 f, nz_u64* status, void* out,
                             nz_u64* s_bcast)
{
    if (threadIdx.x == 0) {
        nz_u64 s;
        while (((s = nz_load_volatile(nz_sw(status, (nz_u64)p.num_tiles - 1ull))) & NZ_FLAG_INC)
               == 0ull)
            __nanosleep(200);
        s_bcast[0] = s & NZ_VALUE_MASK;
    }
    __syncthreads();
    const nz_u64 total = s_bcast[0];
    nz_u64 lo = f * (nz_u64)p.fill_rows;
    nz_u64 hi = lo + (nz_u64)p.fill_rows;
    if (hi > (nz_u64)p.k) hi = (nz_u64)p.k;
    if (lo < total) lo = total;
    if (lo >= hi) return;
    const nz_u64 ndim = (nz_u64)p.out_ndim;
    // (Align: nonzero_tiles_t) from the sector holding entry lo * ndim, so that each warp-wide
    // store covers whole sectors (nonzero_tiles keeps its registers: ptxas spills it on sm_100)
    const nz_u64 first = lo * ndim, spe = Align ? (nz_u64)(32 / p.index_bytes) : 1ull;
    for (nz_u64 e = (first & ~(spe - 1ull)) + threadIdx.x; e < hi * ndim; e += NZ_BLOCK)
        if (e >= first) nz_store_index(out, e, (nz_u64)p.fill, p.index_bytes);
}

// Write `nrows` staged rows of a tile (tile-local indices in s_stage) from output row `row0`.
template <bool Wide, bool Align>
__device__ __forceinline__ void nz_write_rows(const nz_params& p, void* out,
                                              typename nz_index<Wide>::idx tile_base,
                                              const nz_u16* s_stage, nz_u64 row0, nz_u32 nrows)
{
    typedef typename nz_index<Wide>::idx idx_t;
    if (p.layout == NZ_LAYOUT_ROWS) {
        // the tile's rows are one contiguous range of row-major (count, ndim) entries
        const nz_u32 nflat = nrows * (nz_u32)p.out_ndim;
        const nz_u64 base = row0 * (nz_u64)p.out_ndim;
        // (Align: nonzero_tiles_t) entries of base's sector before base (`lead`) are skipped,
        // so that each warp-wide store covers whole 32-byte sectors (one more per warp otherwise)
        const nz_u32 lead = Align ? (nz_u32)base & (nz_u32)(32 / p.index_bytes - 1) : 0u;
        for (nz_u32 e0 = threadIdx.x; e0 < nflat + lead; e0 += NZ_BLOCK) {
            if (e0 < lead) continue;
            const nz_u32 e = e0 - lead;
            const nz_u32 r = nz_div(e, p.ndim_div);
            const int col = (int)(e - r * (nz_u32)p.out_ndim);
            const idx_t L = tile_base + (idx_t)s_stage[r];
            nz_store_index(out, base + e, nz_coordinate<Wide>(p, L, col), p.index_bytes);
        }
    } else {
        // (ndim, count): column c of the tile is a contiguous range of row c
        for (int col = 0; col < p.out_ndim; ++col) {
            const nz_u64 base = (nz_u64)col * (nz_u64)p.row_stride + row0;
            const nz_u32 lead = Align ? (nz_u32)base & (nz_u32)(32 / p.index_bytes - 1) : 0u;
            for (nz_u32 r0 = threadIdx.x; r0 < nrows + lead; r0 += NZ_BLOCK) {
                if (r0 < lead) continue;
                const nz_u32 r = r0 - lead;
                const idx_t L = tile_base + (idx_t)s_stage[r];
                nz_store_index(out, base + r, nz_coordinate<Wide>(p, L, col), p.index_bytes);
            }
        }
    }
}

// ------------------------------------------------------------------ tile steps
// The steps nonzero_tiles and nonzero_tiles_t share; every thread of the block calls them.

// The tile of this block: blockIdx.x (PLACE), else the next id of the atomic counter, so that
// every tile a block waits on in its look-back belongs to a block already running. Also moves
// `status` to the parity of status words this launch uses, and (SCAN, FIXED) clears this
// block's share of the other parity's words: the self-resetting scheme described at
// NZ_HDR_DRAW. (PLACE reads no status word: its tile's prefix is in the mask record.)
__device__ __forceinline__ nz_u64 nz_draw_tile(const nz_params& p, nz_u64* counter,
                                               nz_u64*& status, nz_u64* s_bcast)
{
    if (threadIdx.x == 0) {
        nz_u64 w, clear = 0;
        if (p.mode == NZ_MODE_PLACE) {
            w = (nz_u64)blockIdx.x;
        } else {
            w = atomicAdd(&counter[NZ_HDR_DRAW], 1ull);
            const nz_u32 t = (nz_u32)w, q = (nz_u32)(w >> 32) & 1u;
            // every block of this launch has drawn: the next launch draws from 0, other parity
            if (t == gridDim.x - 1u) atomicAdd(&counter[NZ_HDR_DRAW], (1ull << 32) - gridDim.x);
            if (t == 0u) counter[NZ_HDR_TILES + q] = (nz_u64)p.num_tiles;
            clear = counter[NZ_HDR_TILES + (q ^ 1u)];   // written by the last launch of 1 - q
        }
        s_bcast[0] = w;
        s_bcast[1] = clear;
    }
    __syncthreads();
    const nz_u64 w = s_bcast[0], clear = s_bcast[1];
    __syncthreads();   // s_bcast is reused below
    const nz_u32 q = (nz_u32)(w >> 32) & 1u;
    if (clear != 0ull) {
        // this block's share of the other parity's words [0, clear): whole 32-word runs
        const nz_u64 n = clear, g = gridDim.x;
        const nz_u64 per = ((n + g - 1ull) / g + 31ull) & ~31ull;
        const nz_u64 lo = (nz_u64)blockIdx.x * per < n ? (nz_u64)blockIdx.x * per : n;
        const nz_u64 hi = n - lo < per ? n : lo + per;
        nz_u64* other = status + 32u * (q ^ 1u);
        for (nz_u64 i = lo + threadIdx.x; i < hi; i += NZ_BLOCK) *nz_sw(other, i) = 0ull;
    }
    status += 32u * q;
    return (nz_u64)(nz_u32)w;
}

// Publishes the warp's count `run` and returns the block's; `wexcl`: the counts of the warps
// before this one (where the warp's entries start in block order).
__device__ __forceinline__ nz_u32 nz_block_count(nz_u32* s_warp, nz_u32 run, int warp, int lane,
                                                 nz_u32& wexcl)
{
    if (lane == 0) s_warp[warp] = run;
    __syncthreads();
    nz_u32 cnt = 0;
    wexcl = 0;
#pragma unroll
    for (int w = 0; w < NZ_WARPS; ++w) {
        const nz_u32 c = s_warp[w];
        wexcl += w < warp ? c : 0u;
        cnt += c;
    }
    return cnt;
}

// The exact forms' mask record of a tile: `words` mask words (a bit per element, tile-local
// row-major order) rounded up to whole 32-byte sectors, then a sector holding the tile's prefix
// (the first 8 bytes), which SCAN stores once its look-back is done; `words` + 8 words a tile
// in all (nz_mask_stride; cupyops/ops/nonzero/launch.py, mask_words, sizes the same).
__device__ __forceinline__ nz_u64 nz_mask_stride(nz_u64 words)
{
    return ((words + 7ull) & ~7ull) + 8ull;
}

// The record stride of nonzero_tiles_t (K * tr_ic bits a tile: tr_ic is I, or the width of an
// inner chunk), from the parameters: formed where
// it is used, so that no register holds it over the read loop.
__device__ __forceinline__ nz_u64 nz_t_stride(const nz_params& p)
{
    return nz_mask_stride((((nz_u64)p.tr_ic << p.tr_kshift) + 31ull) >> 5);
}

__device__ __forceinline__ nz_u64* nz_record_prefix(nz_u32* mask, nz_u64 tile, nz_u64 stride)
{
    return reinterpret_cast<nz_u64*>(mask + tile * stride + stride - 8ull);
}

// PLACE: thread 0 loads the tile's prefix from its record into s_bcast[1], which
// nz_tile_offset reads after the block's next barrier (one load a block).
__device__ __forceinline__ void nz_place_prefix(const nz_params& p, nz_u32* mask, nz_u64 tile,
                                                nz_u64 stride, nz_u64* s_bcast)
{
    if (p.mode == NZ_MODE_PLACE && threadIdx.x == 0)
        s_bcast[1] = *nz_record_prefix(mask, tile, stride);
}

// The tile's first output row, the exclusive prefix of its `count` nonzeros. PLACE takes the
// prefix SCAN stored in the tile's mask record (of `stride` words in `mask`; its thread 0
// loaded it into s_bcast[1] before a barrier: nz_place_prefix); SCAN (which stores it there)
// and FIXED post the count and
// look back (warp 0), and the last tile stores the total. FIXED hands the prefix to every
// thread (s_bcast[1]); SCAN (!stage), which writes no rows, returns 0 without waiting for it.
// (`stage` is the caller's p.mode != NZ_MODE_SCAN, passed in so that the compiler sees the
// caller's test and this one as the same value.)
__device__ __forceinline__ nz_u64 nz_tile_offset(const nz_params& p, nz_u64 tile, nz_u32 count,
                                                 nz_u64* status, nz_i64* count_out,
                                                 nz_u64* stats, nz_u64* s_bcast, int warp,
                                                 int lane, bool stage, nz_u32* mask,
                                                 nz_u64 stride)
{
    nz_u64 excl;
    if (p.mode == NZ_MODE_PLACE) {
        excl = s_bcast[1];
    } else {
        if (warp == 0) {
            const nz_u64 e = nz_lookback(status, tile, count, p.stats_on ? stats : nullptr, lane);
            if (lane == 0) {
                s_bcast[1] = e;
                if (tile == (nz_u64)p.num_tiles - 1) *count_out = (nz_i64)(e + count);
                if (!stage) *nz_record_prefix(mask, tile, stride) = e;   // SCAN: for PLACE
            }
        }
        if (!stage) return 0;
        __syncthreads();
        excl = s_bcast[1];
    }
    return excl;
}

// This thread's entries of its warp's staged list (entry j * 32 + lane, those below `run`),
// held in registers so that s_stage can be rewritten in block order.
template <int ITEMS>
__device__ __forceinline__ void nz_read_staged(nz_u32 (&vals)[ITEMS], const nz_u16* stage_w,
                                               nz_u32 run, int lane)
{
#pragma unroll
    for (int j = 0; j < ITEMS; ++j) {
        const nz_u32 i = (nz_u32)(j * 32 + lane);
        vals[j] = i < run ? stage_w[i] : 0u;
    }
}

// Writes `count` staged rows from output row `row` (FIXED: only those below k): first the
// warps' entries go to block order (this thread's vals, nz_read_staged, to slots wexcl + i;
// `add` turns a warp-local index tile-local), then out (nz_write_rows), the staged indices
// counting from logical index tile_base + first. Every thread must have read its entries.
template <bool Wide, bool Align, int ITEMS>
__device__ __forceinline__ void nz_place_rows(const nz_params& p, void* out,
                                              typename nz_index<Wide>::idx tile_base,
                                              nz_u32 first, nz_u16* s_stage,
                                              const nz_u32 (&vals)[ITEMS], nz_u32 run,
                                              nz_u32 wexcl, nz_u32 add, nz_u64 row,
                                              nz_u32 count, int lane)
{
#pragma unroll
    for (int j = 0; j < ITEMS; ++j) {
        const nz_u32 i = (nz_u32)(j * 32 + lane);
        if (i < run) s_stage[wexcl + i] = (nz_u16)(vals[j] + add);
    }
    __syncthreads();
    nz_u32 nrows = count;
    if (p.mode >= NZ_MODE_FIXED) {   // FIXED, SEGMENTS: only rows below k
        const nz_u64 k = (nz_u64)p.k;
        nrows = row >= k ? 0u : (k - row < (nz_u64)count ? (nz_u32)(k - row) : count);
    }
    nz_write_rows<Wide, Align>(p, out, tile_base + (typename nz_index<Wide>::idx)first, s_stage,
                               row, nrows);
}

// ------------------------------------------------------------------ nonzero_tiles
// Vec: the packed path (the plan's p.vec, a template parameter: a first call compiles only the
// read its plan runs; issue 33).
template <typename T, bool Wide, bool Vec>
__device__ __forceinline__ void nz_tiles(const T* __restrict__ x_, const nz_params& p,
                                         nz_u64* counter, nz_u64* status, void* out,
                                         nz_i64* count_out, nz_u64* stats, nz_u32* mask)
{
    typedef typename nz_index<Wide>::idx idx_t;
    constexpr int ITEMS = nz_items<T>::value;
    constexpr int WARP_ITEMS = 32 * ITEMS;
    constexpr int TILE = NZ_BLOCK * ITEMS;
    static_assert(TILE <= 65536, "tile-local indices are staged as u16");
    static_assert(!Vec || nz_packed<T>::ok, "the packed path: 1- and 2-byte types");
    __shared__ nz_u16 s_stage[TILE];
    __shared__ nz_u32 s_warp[NZ_WARPS];
    __shared__ nz_u64 s_bcast[2];
    __shared__ nz_u32 s_mask[TILE / 32];   // PLACE: the tile's mask words

    const char* x = reinterpret_cast<const char*>(x_);
    const int warp = threadIdx.x >> 5;
    const int lane = threadIdx.x & 31;

    const nz_u64 tile = nz_draw_tile(p, counter, status, s_bcast);
    if (tile >= (nz_u64)p.num_tiles) {   // fill tile (FIXED only launches these)
        nz_fill_tile<false>(p, tile - (nz_u64)p.num_tiles, status, out, s_bcast);
        return;
    }

    const bool stage = p.mode != NZ_MODE_SCAN;
    nz_u16* stage_w = s_stage + warp * WARP_ITEMS;
    nz_u32 run = 0;
    // tile_base: the logical index of tile-local index 0 (staged indices are tile-local)
    idx_t tile_base = (idx_t)tile * (idx_t)TILE;
    const idx_t warp_base = tile_base + (idx_t)(warp * WARP_ITEMS);
    // the exact forms' mask record (nz_mask_stride): SCAN records the votes (rec) and the
    // tile's prefix, PLACE votes from them instead of reading x again
    constexpr nz_u64 RECORD = ((TILE / 32 + 7) & ~7) + 8;
    nz_u32* record = mask + (nz_u64)tile * RECORD;
    nz_place_prefix(p, mask, tile, RECORD, s_bcast);
    nz_u32* mask_w = record + (nz_u64)(warp * ITEMS);
    nz_u32* rec = p.mode == NZ_MODE_SCAN ? mask_w : nullptr;
    bool voted = false;
    if (p.mode == NZ_MODE_PLACE) {
        if (threadIdx.x < TILE / 32) s_mask[threadIdx.x] = record[threadIdx.x];
        __syncthreads();
        run = nz_vote_mask<ITEMS>(s_mask + warp * ITEMS, stage_w, lane);
        voted = true;
    } else if (Vec) {
        if constexpr (Vec) {
            // shifted indices (see nz_vote_warp_vec); the plan counted the tiles so
            const int head = p.head;   // from the host: see nz_count_run_vec on casts
            const char* xa = x - head * (int)sizeof(T);
            const char* hi = x + (nz_u64)p.size * sizeof(T);
            const nz_u64 end = (nz_u64)p.size + (nz_u64)head;
            voted = true;
            if ((nz_u64)tile_base >= (nz_u64)head && (nz_u64)tile_base + TILE <= end)
                run = nz_vote_warp_vec<T, Wide, false>(xa, x, hi, warp_base, stage_w, stage, rec,
                                                       lane);
            else if ((nz_u64)warp_base < end)
                run = nz_vote_warp_vec<T, Wide, true>(xa, x, hi, warp_base, stage_w, stage, rec,
                                                      lane);
            else
                voted = false;
        }
    } else {
        voted = true;
        if ((nz_u64)tile_base + TILE <= (nz_u64)p.size)
            run = nz_vote_warp<T, Wide, false>(x, p, warp_base, stage_w, stage, rec, lane);
        else if ((nz_u64)warp_base < (nz_u64)p.size)
            run = nz_vote_warp<T, Wide, true>(x, p, warp_base, stage_w, stage, rec, lane);
        else
            voted = false;
    }
    if (!voted && rec != nullptr && lane < ITEMS) rec[lane] = 0u;   // a warp past the input
    if (Vec)
        tile_base -= (idx_t)p.head;   // modulo 2^N: only valid (>= head) indices are staged
    nz_u32 wexcl;
    const nz_u32 cnt = nz_block_count(s_warp, run, warp, lane, wexcl);
    nz_u32 vals[ITEMS];   // this thread's staged entries, read before the block-order rewrite
    if (stage) nz_read_staged(vals, stage_w, run, lane);
    const nz_u64 excl = nz_tile_offset(p, tile, cnt, status, count_out, stats, s_bcast, warp,
                                       lane, stage, mask, RECORD);
    if (!stage) return;
    __syncthreads();   // everyone has read its warp-local entries
    nz_place_rows<Wide, false>(p, out, tile_base, 0u, s_stage, vals, run, wexcl,
                        (nz_u32)(warp * WARP_ITEMS), excl, cnt, lane);
}

template <typename T, bool Wide, bool Vec>
__global__ void __launch_bounds__(NZ_BLOCK)
nonzero_tiles(const T* __restrict__ x, nz_params p, nz_u64* counter, nz_u64* status, void* out,
              nz_i64* count_out, nz_u64* stats, nz_u32* mask)
{
    nz_tiles<T, Wide, Vec>(x, p, counter, status, out, count_out, stats, mask);
}

// ------------------------------------------------------------------ nonzero_tiles_t
// Inputs whose memory-innermost reading dim m (|stride| = one element) is not the last one
// (F-order, transposed, permuted): reading them in logical order would give each lane of a warp
// its own sector. A tile is instead K = 2^tr_kshift consecutive indices along m times every
// index of the dims after m (tr_inner = I of them): one contiguous range [base, base + kt * I)
// of the logical row-major order, so the look-back and the writes are those of nonzero_tiles.
// It is read in memory order (slot e: j = e % K along m over consecutive lanes, q = e / K over
// the inner dims), each nonzero setting bit j * I + q (its tile-local row-major index) of a
// shared mask; then the mask is compacted and written in row-major order, NZ_BLOCK * ITEMS
// bits a round. The count pass only counts (popc and a shuffle sum).
// Mask bits compacted per thread and round: at most 8 (ITEMS values held across a barrier; 16
// would need more than the 64 registers of 50% occupancy).
template <typename T> struct nz_t_items {
    static constexpr int value = nz_items<T>::value > 8 ? 8 : nz_items<T>::value;
};

// Where tile `tile` of nonzero_tiles_t lies: index `pre` over the dims before m (off_pre bytes
// from x), indices [a, a + kt) along m (off_m bytes further; the last chunk of m may be short).
// The kernel forms the address x + off_pre + off_m itself: formed in a helper, NVVM reassociates
// the read loops' address sums, and ptxas spills on sm_120.
template <bool Wide>
struct nz_t_tile {
    int m, ks;                                 // p.tr_dim, p.tr_kshift
    nz_u32 K, I, kt;                           // 2^ks, p.tr_inner, indices along m
    nz_u32 n, words;                           // elements (kt * I <= NZ_T_BITS), mask words
    typename nz_index<Wide>::idx tile_base;    // logical index of its first element
    typename nz_index<Wide>::off off_pre, off_m, sm;   // sm: bytes between indices along m
};

// With inner chunks (p.tr_c = C > 1: all of I would not fit the mask), a tile is K indices along m
// times one chunk c of p.tr_ic inner indices (tile = (prefix tile) * C + c): not a range of the
// row-major order, so such tiles only count and record (SCAN), and a second pass writes the
// rows segment by segment (NZ_MODE_SEGMENTS, nz_t_segment). The chunk's first inner index q0
// is a multiple of the extents of every inner dim but the outermost (the planner's choice), so
// its offset plus the unit's own is the offset of q0 + q: the read loop sees a tile of I = the
// chunk's width, its base moved by q0's offset (in off_m).
template <bool Wide>
__device__ __forceinline__ nz_t_tile<Wide> nz_t_locate(const nz_params& p, nz_u64 tile)
{
    typedef typename nz_index<Wide>::idx idx_t;
    typedef typename nz_index<Wide>::off off_t;
    nz_t_tile<Wide> t;
    t.m = p.tr_dim;
    t.ks = p.tr_kshift;
    t.K = 1u << t.ks;
    t.I = (nz_u32)p.tr_inner;
    nz_u32 q0 = 0;
    if (p.tr_c > 1) {   // (a division a block)
        const nz_u64 c = tile % (nz_u64)p.tr_c;
        tile /= (nz_u64)p.tr_c;
        q0 = (nz_u32)c * (nz_u32)p.tr_ic;
        t.I = t.I - q0 < (nz_u32)p.tr_ic ? t.I - q0 : (nz_u32)p.tr_ic;
    }
    const idx_t nm = (idx_t)p.in_div[t.m].d;
    const idx_t pre = nz_div((idx_t)tile, p.tr_chunks);
    const idx_t a = ((idx_t)tile - pre * (idx_t)p.tr_chunks.d) << t.ks;
    t.kt = nm - a < (idx_t)t.K ? (nz_u32)(nm - a) : t.K;
    t.tile_base = (pre * nm + a) * (idx_t)p.tr_inner + (idx_t)q0;
    t.off_pre = t.m > 0 ? nz_offset<Wide>(pre, p.in_div, p.in_stride, t.m) : (off_t)0;
    t.off_m = (off_t)a * (off_t)p.in_stride[t.m];
    if (q0 != 0u)
        t.off_m += nz_offset<Wide>((idx_t)q0, p.in_div + t.m + 1, p.in_stride + t.m + 1,
                                   p.in_ndim - t.m - 1);
    t.sm = (off_t)p.in_stride[t.m];
    t.n = t.kt * t.I;
    t.words = (t.n + 31u) >> 5;
    return t;
}

// Mask word w's place in s_bits: the rows j of a tile lie I / 32 words apart, often a multiple of
// 32, which would put every lane's atomic on one bank; folding bits 5..14 of w into bits 0..4
// spreads power-of-two strides over the banks (a permutation inside each 32-word group, so the
// mask still fits its array and zeroing whole groups clears it).
__device__ __forceinline__ nz_u32 nz_t_word(nz_u32 w)
{
    return w ^ (((w >> 5) ^ (w >> 10)) & 31u);
}

// NZ_MODE_SEGMENTS: segment s = R * C + c is row R (an index over the dims up to m: prefix index
// * nm + j) of the logical array times inner chunk c, a range of the row-major order
// (tile_base = R * I + q0, n = the chunk's width). Its bits are row j % K of the record SCAN
// left for tile ((prefix index * chunks + j / K) * C + c), at bit `rec_bit` of the mask (rows of
// that record lie n bits apart).
template <bool Wide>
__device__ __forceinline__ nz_t_tile<Wide> nz_t_segment(const nz_params& p, nz_u64 s,
                                                        nz_u64& rec_bit)
{
    typedef typename nz_index<Wide>::idx idx_t;
    nz_t_tile<Wide> t;
    t.m = p.tr_dim;
    t.ks = p.tr_kshift;
    t.K = t.I = t.kt = 0;                    // (not read: no x, no look-back of tiles)
    t.off_pre = t.off_m = t.sm = 0;
    const nz_u64 C = (nz_u64)p.tr_c, R = s / C;
    const nz_u32 q0 = (nz_u32)(s - R * C) * (nz_u32)p.tr_ic, I = (nz_u32)p.tr_inner;
    t.n = I - q0 < (nz_u32)p.tr_ic ? I - q0 : (nz_u32)p.tr_ic;
    t.words = (t.n + 31u) >> 5;
    t.tile_base = (idx_t)R * (idx_t)I + (idx_t)q0;
    const nz_u64 pre = nz_div(R, p.in_div[t.m]), j = R - pre * p.in_div[t.m].d;
    const nz_u64 mt = (pre * p.tr_chunks.d + (j >> t.ks)) * C + (s - R * C);
    rec_bit = mt * nz_t_stride(p) * 32ull + (j & ((1ull << t.ks) - 1ull)) * (nz_u64)t.n;
    return t;
}

// The segment's n bits from bit `rec_bit` of the mask into the shared mask (whole 32-word
// groups, nz_t_word's places), one coalesced load of a word a thread (and the next word from the
// neighbouring lane, for a row that does not start on a word); returns this thread's count.
__device__ __forceinline__ nz_u32 nz_t_load_segment(const nz_u32* mask, nz_u64 rec_bit, nz_u32 n,
                                                    nz_u32* s_bits, int lane)
{
    const nz_u32* src = mask + (rec_bit >> 5);
    const nz_u32 sh = (nz_u32)rec_bit & 31u, words = (n + 31u) >> 5;
    // record words the segment's bits touch: one more where its last word's bits run into the
    // next (no word SCAN did not write is read: compute-sanitizer's initcheck would see it)
    const nz_u32 avail = words + (sh != 0u && sh + (n - 32u * (words - 1u)) > 32u ? 1u : 0u);
    nz_u32 cnt = 0;
    for (nz_u32 i0 = threadIdx.x & ~31u; i0 < ((words + 31u) & ~31u); i0 += NZ_BLOCK) {
        const nz_u32 i = i0 + (nz_u32)lane;                  // warp-uniform trip count
        nz_u32 w = i < avail ? src[i] : 0u;
        const nz_u32 up = __shfl_down_sync(NZ_FULL_MASK, w, 1);
        if (sh != 0u && i < words)
            w = __funnelshift_r(w, lane == 31 ? (i + 1u < avail ? src[i + 1] : 0u) : up, sh);
        if (i >= words) w = 0u;
        else if (i + 1u == words && (n & 31u) != 0u) w &= (1u << (n & 31u)) - 1u;
        cnt += __popc(w);
        s_bits[nz_t_word(i)] = w;
    }
    return cnt;
}

// A column of V = 4 / sizeof(T) elements along m at `a` (V > 1: the word path, p.tr_vec == 2),
// in the layout of nz_wordtest: the top bit of element e's lane (bit 8 * S * e + 8 * S - 1) is
// set iff it is nonzero. `nv` == V: one aligned 4-byte word; fewer (the run ends inside the
// word), or V == 1 (bit 0), element by element.
template <typename T, int V>
__device__ __forceinline__ nz_u32 nz_t_column(const char* a, nz_u32 nv, bool narrow)
{
    constexpr int S = (int)sizeof(T);
    if constexpr (V == 1) {
        return nz_is_nonzero<T>(reinterpret_cast<const T*>(a), narrow) ? 1u : 0u;
    } else {
        if (nv == (nz_u32)V) return nz_wordtest<T>::bits(*reinterpret_cast<const nz_u32*>(a));
        nz_u32 w = 0;
        for (nz_u32 e = 0; e < nv; ++e)
            if (nz_is_nonzero<T>(reinterpret_cast<const T*>(a + e * S), narrow))
                w |= 1u << (8 * S * e + 8 * S - 1);
        return w;
    }
}

// Adds column word `w` (nz_t_column) to its rows' bits at mask `mk` (the load's bit).
template <typename T, int V>
__device__ __forceinline__ void nz_t_add_bits(nz_u32 (&bits)[V], nz_u32 w, nz_u32 mk)
{
    constexpr int S = (int)sizeof(T);
#pragma unroll
    for (int e = 0; e < V; ++e)
        if ((w >> (V == 1 ? 0 : 8 * S * e + 8 * S - 1)) & 1u) bits[e] |= mk;
}

template <typename T, bool Wide, int V>
__device__ __forceinline__ nz_u32 nz_t_read_units(const char* xt, const nz_params& p,
                                                  const nz_t_tile<Wide>& t, nz_u32* s_bits,
                                                  bool stage, int lane)
{
    typedef typename nz_index<Wide>::idx idx_t;
    typedef typename nz_index<Wide>::off off_t;
    constexpr int S = (int)sizeof(T);
    constexpr int VS = V == 4 ? 2 : (V == 2 ? 1 : 0);   // log2 V
    // loads in flight per thread: 16 KiB per SM or more at 1024 resident threads
    constexpr int UNROLL = V > 1 ? 8 : (S == 1 ? 16 : (S <= 4 ? 8 : 4));
    const int cs = t.ks - VS;                           // log2 C
    const int ws = cs < 5 ? cs : 5, us = cs > 5 ? cs : 5;
    const nz_u32 gs = 5u - (nz_u32)ws;                  // log2 G
    const nz_u32 rn = 1u << ws;                         // loads a unit: 32 / G
    const nz_u32 slots = ((t.I + 31u) >> 5) << us;
    const int inner = p.in_ndim - t.m - 1;
    const nz_fastdiv* idiv = p.in_div + t.m + 1;
    const nz_i64* istr = p.in_stride + t.m + 1;
    const nz_u32 nlast = (nz_u32)idiv[inner - 1].d;          // extent of the last inner dim
    const off_t step = (off_t)istr[inner - 1] * (off_t)(1 << gs);   // bytes between a unit's loads
    nz_u32 cnt = 0;
    for (nz_u32 v = threadIdx.x; v < slots; v += NZ_BLOCK) {   // warp-uniform trip count
        const nz_u32 j = (v & ((1u << cs) - 1u)) << VS;
        const nz_u32 g = (v >> cs) & ((1u << gs) - 1u);
        const nz_u32 q0 = (v >> us) << 5;
        const nz_u32 qg = q0 + g;
        const nz_u32 nv = j < t.kt ? (t.kt - j < (nz_u32)V ? t.kt - j : (nz_u32)V) : 0u;
        // loads of this unit: r < rmax (inside I, a live column)
        nz_u32 rmax = nv == 0u || qg >= t.I ? 0u : ((t.I - qg + (1u << gs) - 1u) >> gs);
        rmax = rmax < rn ? rmax : rn;
        // the unit's inner indices qg + r * G stay in one row of the last inner dim (always
        // with one inner dim): addresses a + r * step, else an offset per load
        const nz_u32 ql = qg - nz_div(qg, idiv[inner - 1]) * nlast;
        const bool lin = inner == 1 || ql + ((rmax - 1u) << gs) < nlast;
        const char* a = xt + (off_t)j * t.sm
                        + nz_offset<Wide>((idx_t)(rmax != 0u ? qg : 0u), idiv, istr, inner);
        nz_u32 bits[V];
#pragma unroll
        for (int e = 0; e < V; ++e) bits[e] = 0u;
        const nz_u32 G = 1u << gs;
        nz_u32 mk = 1u << g;                            // load r's bit: g + G * r
        if (lin && nv == (nz_u32)V && (rmax & (UNROLL - 1)) == 0u) {
            // the steady state: whole columns, UNROLL loads in flight
            const char* ar = a;
            for (nz_u32 r = 0; r < rmax; r += UNROLL) {
                nz_u32 w[UNROLL];
#pragma unroll
                for (int k = 0; k < UNROLL; ++k) {
                    w[k] = nz_t_column<T, V>(ar, (nz_u32)V, p.narrow_loads != 0);
                    ar += step;
                }
#pragma unroll
                for (int k = 0; k < UNROLL; ++k) {
                    nz_t_add_bits<T, V>(bits, w[k], mk);
                    mk <<= G;
                }
            }
        } else if (lin && nv == (nz_u32)V) {
            // whole columns, rmax not a multiple of UNROLL: up to 4 loads in flight
            // (predicated: no load past rmax)
            constexpr int B = 4;
            for (nz_u32 r = 0; r < rmax; r += B) {
                nz_u32 w[B];
#pragma unroll
                for (int k = 0; k < B; ++k) {
                    const nz_u32 rr = r + (nz_u32)k;
                    w[k] = rr < rmax ? nz_t_column<T, V>(a + (off_t)rr * step, (nz_u32)V,
                                                         p.narrow_loads != 0) : 0u;
                }
#pragma unroll
                for (int k = 0; k < B; ++k) {
                    nz_t_add_bits<T, V>(bits, w[k], mk);
                    mk <<= G;
                }
            }
        } else {   // a run's last partial column (nv < V), or a unit crossing a row of the
                   // last inner dim: a load at a time
#pragma unroll 1
            for (nz_u32 r = 0; r < rmax; ++r, mk <<= G) {
                const char* ar = lin ? a + (off_t)r * step
                                     : xt + (off_t)j * t.sm
                                       + nz_offset<Wide>((idx_t)(qg + (r << gs)), idiv, istr,
                                                         inner);
                nz_t_add_bits<T, V>(bits, nz_t_column<T, V>(ar, nv, p.narrow_loads != 0), mk);
            }
        }
#pragma unroll
        for (int e = 0; e < V; ++e) {
            cnt += __popc(bits[e]);
            for (nz_u32 o = 1u << ws; o < 32u; o <<= 1)   // the G lanes of one column (C < 32)
                bits[e] |= __shfl_xor_sync(NZ_FULL_MASK, bits[e], o);
            if (stage && bits[e] != 0u && (cs >= 5 || lane < (1 << cs))) {
                const nz_u32 L = (j + (nz_u32)e) * t.I + q0;
                const nz_u32 sh = L & 31u;
                atomicOr(&s_bits[nz_t_word(L >> 5)], bits[e] << sh);
                if (sh != 0u && (bits[e] >> (32u - sh)) != 0u)
                    atomicOr(&s_bits[nz_t_word((L >> 5) + 1u)], bits[e] >> (32u - sh));
            }
        }
    }
    return cnt;
}

// Step 3: compact the tile's mask (n bits in `words` words) SUB = NZ_BLOCK * ITEMS bits a
// round (warp w: words w * ITEMS ..) and write the rows from output row `row`.
template <typename T, bool Wide>
__device__ __forceinline__ void nz_t_write(const nz_params& p, void* out, nz_u32 n, nz_u32 words,
                                           typename nz_index<Wide>::idx tile_base, nz_u64 row,
                                           const nz_u32* s_bits, nz_u16* s_stage,
                                           nz_u32* s_warp, int warp, int lane)
{
    constexpr int ITEMS = nz_t_items<T>::value;
    constexpr int SUB = NZ_BLOCK * ITEMS;
    const nz_u32 below = (1u << lane) - 1u;
    nz_u16* stage_w = s_stage + warp * 32 * ITEMS;
    for (nz_u32 s0 = 0; s0 < n; s0 += SUB) {               // block-uniform
        nz_u32 run = 0;
#pragma unroll
        for (int jj = 0; jj < ITEMS; ++jj) {
            const nz_u32 wi = (s0 >> 5) + (nz_u32)(warp * ITEMS + jj);
            const nz_u32 b = wi < words ? s_bits[nz_t_word(wi)] : 0u;
            run = nz_stage_ballot(b, true, (b >> lane) & 1u,
                                  (nz_u16)((warp * ITEMS + jj) * 32 + lane), stage_w, run, below);
        }
        nz_u32 wexcl;
        const nz_u32 cnt = nz_block_count(s_warp, run, warp, lane, wexcl);
        nz_u32 vals[ITEMS];
        nz_read_staged(vals, stage_w, run, lane);
        __syncthreads();
        nz_place_rows<Wide, true>(p, out, tile_base, s0, s_stage, vals, run, wexcl, 0u, row, cnt,
                                  lane);
        row += cnt;
        __syncthreads();   // s_stage and s_warp are reused by the next round
    }
}

// Steps 2 and 3 of nz_tiles_t, from the warps' counts `cnt` (every thread calls it): the tile's
// offset, then (unless the count pass) the mask compacted and written. The tile's id (the draw
// nz_draw_tile left in s_bcast[0]) and its logical base, bits and words (s_tile, stored before a
// barrier by nz_t_keep) come from shared memory: registers over the read loop are at the 64 of
// 50% occupancy, and these are not needed there.
template <typename T, bool Wide>
__device__ __forceinline__ void nz_t_finish(const nz_params& p, nz_u32 cnt, bool stage,
                                            nz_u64* status, void* out,
                                            nz_i64* count_out, nz_u64* stats, nz_u32* mask,
                                            nz_u16* s_stage,
                                            nz_u32* s_bits, nz_u32* s_warp, nz_u64* s_bcast,
                                            const nz_u64* s_tile, int warp, int lane)
{
    typedef typename nz_index<Wide>::idx idx_t;
    nz_u32 wexcl;
    const nz_u32 total = nz_block_count(s_warp, cnt, warp, lane, wexcl);
    const nz_u64 tile = (nz_u32)s_bcast[0];
    const nz_u64 excl = nz_tile_offset(p, tile, total, status, count_out, stats, s_bcast, warp,
                                       lane, stage, mask, nz_t_stride(p));
    if (!stage) return;
    __syncthreads();   // every warp has read s_warp (rewritten below)
    const nz_u32 n = (nz_u32)(s_tile[1] >> 32), words = (nz_u32)s_tile[1];
    nz_t_write<T, Wide>(p, out, n, words, (idx_t)s_tile[0], excl, s_bits, s_stage, s_warp, warp,
                        lane);
}

// Thread 0 keeps what nz_t_finish needs of tile t in s_tile (read after a barrier).
template <bool Wide>
__device__ __forceinline__ void nz_t_keep(const nz_t_tile<Wide>& t, nz_u64* s_tile)
{
    if (threadIdx.x == 0) {
        s_tile[0] = (nz_u64)t.tile_base;
        s_tile[1] = ((nz_u64)t.n << 32) | t.words;
    }
}

// (Its shared arrays are declared by the kernel and passed in: simt charges the __shared__
// variables of device functions to every kernel of the module.)
template <typename T, bool Wide>
__device__ __forceinline__ void nz_tiles_t(const T* __restrict__ x_, const nz_params& p,
                                           nz_u64* counter, nz_u64* status, void* out,
                                           nz_i64* count_out, nz_u64* stats, nz_u32* mask,
                                           nz_u16* s_stage, nz_u32* s_bits, nz_u32* s_warp,
                                           nz_u64* s_bcast, nz_u64* s_tile)
{
    const char* x = reinterpret_cast<const char*>(x_);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const nz_u64 tile = nz_draw_tile(p, counter, status, s_bcast);
    if (tile >= (nz_u64)p.num_tiles) {
        nz_fill_tile<true>(p, tile - (nz_u64)p.num_tiles, status, out, s_bcast);
        return;
    }
    nz_u64 rec_bit = 0;
    const nz_t_tile<Wide> t = p.mode == NZ_MODE_SEGMENTS ? nz_t_segment<Wide>(p, tile, rec_bit)
                                                         : nz_t_locate<Wide>(p, tile);
    const char* xt = x + t.off_pre + t.off_m;
    const bool stage = p.mode != NZ_MODE_SCAN;
    nz_t_keep<Wide>(t, s_tile);   // (every path below meets a barrier before nz_t_finish reads)
    // the exact forms' mask record (nz_t_stride; K * I bits a tile): SCAN stores the tile's
    // shared mask in row-major order and its prefix, PLACE loads them instead of reading x
    // whole 32-word groups: nz_t_word permutes inside them
    const nz_u32 groups = (t.words + 31u) & ~31u;
    nz_u32 cnt = 0;
    if (p.mode == NZ_MODE_PLACE) {
        nz_place_prefix(p, mask, tile, nz_t_stride(p), s_bcast);
        const nz_u32* mask_t = mask + tile * nz_t_stride(p);
        for (nz_u32 i = threadIdx.x; i < groups; i += NZ_BLOCK)
            s_bits[nz_t_word(i)] = i < t.words ? mask_t[i] : 0u;
        // (nz_t_finish's first barrier orders these stores before the compaction)
    } else if (p.mode == NZ_MODE_SEGMENTS) {
        cnt = nz_t_load_segment(mask, rec_bit, t.n, s_bits, lane);
#pragma unroll
        for (int o = 16; o >= 1; o >>= 1) cnt += __shfl_xor_sync(NZ_FULL_MASK, cnt, o);
    } else {
        for (nz_u32 i = threadIdx.x; i < groups; i += NZ_BLOCK) s_bits[i] = 0u;
        __syncthreads();
        // 1. read in memory order; count, mark the nonzeros in the shared mask
        bool packed = false;
        if constexpr (sizeof(T) <= 2 && nz_packed<T>::ok) {
            if (p.tr_vec == 2) {
                packed = true;
                cnt = nz_t_read_units<T, Wide, 4 / (int)sizeof(T)>(xt, p, t, s_bits, true, lane);
            }
        }
        if (!packed) cnt = nz_t_read_units<T, Wide, 1>(xt, p, t, s_bits, true, lane);
#pragma unroll
        for (int o = 16; o >= 1; o >>= 1) cnt += __shfl_xor_sync(NZ_FULL_MASK, cnt, o);
        if (!stage) {   // SCAN: the mask, for PLACE
            __syncthreads();
            // (the tile and its words from shared memory: see nz_t_finish)
            nz_u32* mask_t = mask + (nz_u64)(nz_u32)s_bcast[0] * nz_t_stride(p);
            const nz_u32 words = (nz_u32)s_tile[1];
            for (nz_u32 i = threadIdx.x; i < words; i += NZ_BLOCK)
                mask_t[i] = s_bits[nz_t_word(i)];
        }
    }
    nz_t_finish<T, Wide>(p, cnt, stage, status, out, count_out, stats, mask, s_stage, s_bits,
                         s_warp, s_bcast, s_tile, warp, lane);
}

// (4 blocks of 256 per SM: at most 64 registers, 50% occupancy on sm_80 and sm_90)
template <typename T, bool Wide>
__global__ void __launch_bounds__(NZ_BLOCK, 4)
nonzero_tiles_t(const T* __restrict__ x, nz_params p, nz_u64* counter, nz_u64* status, void* out,
                nz_i64* count_out, nz_u64* stats, nz_u32* mask)
{
    __shared__ nz_u16 s_stage[NZ_BLOCK * nz_t_items<T>::value];
    __shared__ nz_u32 s_bits[NZ_T_BITS / 32];
    __shared__ nz_u32 s_warp[NZ_WARPS];
    __shared__ nz_u64 s_bcast[2];
    __shared__ nz_u64 s_tile[2];
    nz_tiles_t<T, Wide>(x, p, counter, status, out, count_out, stats, mask, s_stage, s_bits,
                        s_warp, s_bcast, s_tile);
}

// ------------------------------------------------------------------ count_nonzero
// Output o's count into out: kept dims planned in memory order map o to its row-major
// position through out_stride (identity when out_mapped is 0). With several chunks (p.atomic)
// each unit adds its count and a ticket into o's word of `acc` (NZ_ACC_SHIFT): the unit whose
// ticket is the last (n_chunks - 1) has the whole sum from its own atomic (every other unit's
// addition came before it in the word's order), stores it to out and zeroes the word, which no
// other unit of the launch touches again. `acc` starts zeroed (the host zeroes it once, when it
// is made) and every launch leaves it zero, so no memset is needed, even under graph replay.
#define NZ_ACC_SHIFT 40        // acc word: ticket count << 40 | partial sum (< 2^40: the planner)
template <bool Wide>
__device__ __forceinline__ void nz_count_store(const nz_count_params& p, nz_i64* out,
                                               nz_u64* acc, typename nz_index<Wide>::idx o,
                                               nz_u64 n)
{
    typedef typename nz_index<Wide>::off off_t;
    if (p.atomic) {
        const nz_u64 old = atomicAdd(&acc[o], (1ull << NZ_ACC_SHIFT) | n);
        if ((old >> NZ_ACC_SHIFT) != (nz_u64)p.n_chunks - 1ull) return;
        n += old & ((1ull << NZ_ACC_SHIFT) - 1ull);
        acc[o] = 0ull;
    }
    const off_t pos = p.out_mapped
        ? (off_t)p.out_base + nz_offset<Wide>(o, p.kept_div, p.out_stride, p.kept_ndim) : (off_t)o;
    out[pos] = (nz_i64)n;
}

// Work unit g = (output o, chunk c of the reduced range). mode 0 numbers units chunk-fastest
// (a warp each), mode 1 output-fastest (a thread each, lanes on consecutive outputs).
template <bool Wide>
struct nz_count_unit {
    typedef typename nz_index<Wide>::idx idx_t;
    typedef typename nz_index<Wide>::off off_t;
    idx_t o, lo, hi;          // output, reduced range [lo, hi)
    off_t off;                // byte offset of output o's sub-array
    const char* xo;           // x + off

    __device__ __forceinline__ nz_count_unit(const char* x, const nz_count_params& p, idx_t g)
    {
        const idx_t q = nz_div(g, p.split_div);
        idx_t c;
        if (p.mode == 0) { o = q; c = g - q * (idx_t)p.n_chunks; }
        else             { c = q; o = g - q * (idx_t)p.split_div.d - (idx_t)p.o_head; }
        // (mode 1's idle units before output 0 wrap past n_out: no offset of theirs is formed)
        off = nz_offset<Wide>(o < (idx_t)p.n_out ? o : 0, p.kept_div, p.kept_stride, p.kept_ndim);
        xo = x + off;
        const idx_t red_size = (idx_t)p.red_size;
        lo = c * (idx_t)p.chunk_len;
        hi = red_size - lo < (idx_t)p.chunk_len ? red_size : lo + (idx_t)p.chunk_len;
    }

    template <typename T>
    __device__ __forceinline__ bool nonzero_at(const nz_count_params& p, idx_t j) const
    {
        return nz_is_nonzero<T>(reinterpret_cast<const T*>(
            xo + nz_offset<Wide>(j, p.red_div, p.red_stride, p.red_ndim)), p.narrow_loads != 0);
    }

    __device__ __forceinline__ void store(const nz_count_params& p, nz_i64* out, nz_u64* acc,
                                          nz_u64 n) const
    {
        nz_count_store<Wide>(p, out, acc, o, n);
    }
};

// Packed count of the nonzero elements in bytes [lo, hi) of x by one warp (all lanes; the sum
// is returned to every lane): the aligned 16-byte words inside the range, lane after lane
// (coalesced), 4 per iteration in flight, tested 4 or 2 elements per instruction; the at most 15
// bytes before the first and after the last whole word element by element. Alignment comes
// from the host (`align` = x's address mod 16), offsets stay integers: a pointer-to-integer
// cast would cost every load of the kernel its LDG.CONSTANT (NVVM's read-only inference).
template <typename T, bool Wide>
__device__ __forceinline__ nz_u64 nz_count_run_vec(const char* x, typename nz_index<Wide>::off lo,
                                                   typename nz_index<Wide>::off hi, int align,
                                                   int lane)
{
    typedef typename nz_index<Wide>::idx idx_t;
    typedef typename nz_index<Wide>::off off_t;
    typedef typename cuo::uint_of<sizeof(T)>::type B;
    constexpr int S = (int)sizeof(T);
    off_t a = lo + (off_t)((16 - ((align + (int)(lo & 15)) & 15)) & 15);
    off_t b = hi - (off_t)((align + (int)(hi & 15)) & 15);
    const bool none = a >= b;   // no whole word: all of [lo, hi) (< 32 bytes) one element a lane
    if (none) a = b = lo;
    idx_t acc = 0;
    const idx_t words = (idx_t)((b - a) >> 4);
    const char* xa = x + a;
#pragma unroll 4
    for (idx_t i = (idx_t)lane; i < words; i += 32) {
        nz_u32 w[4];
        nz_load16(w, xa + i * 16);
        acc += (idx_t)(__popc(nz_packed<T>::bits(w[0])) + __popc(nz_packed<T>::bits(w[1]))
                       + __popc(nz_packed<T>::bits(w[2])) + __popc(nz_packed<T>::bits(w[3])));
    }
    // ragged ends: (a - lo) and (hi - b) bytes, at most 15 each: lanes 0-15 and 16-31
    const off_t q = none || lane < 16 ? lo + (off_t)(lane * S) : b + (off_t)((lane - 16) * S);
    if (q < (none || lane >= 16 ? hi : a))
        acc += __popc(nz_packed<T>::bits((nz_u32)*reinterpret_cast<const B*>(x + q)));
    return nz_warp_sum_u64((nz_u64)acc);
}

// Mode 2: a warp counts 32 neighbouring outputs of a row of the innermost kept dim whose runs
// (one contiguous reduced run each, R elements) lie side by side: the span of R * 32 elements
// is read in memory order, 32 elements a window, windows aligned to 32 bytes (each read is
// whole sectors), and lane t adds the bits of its output's run [t*R, t*R + R) from each
// window's ballot. 8 windows in flight.
template <typename T, bool Wide>
__device__ __forceinline__ void nz_count_in_order(const char* x, const nz_count_params& p,
                                                  nz_i64* out, nz_u64* sums)
{
    typedef typename nz_index<Wide>::idx idx_t;
    constexpr int S = (int)sizeof(T);
    const int lane = threadIdx.x & 31;
    const idx_t g = (idx_t)blockIdx.x * NZ_WARPS + (idx_t)(threadIdx.x >> 5);
    if (g >= (idx_t)p.units) return;   // warp-uniform
    const idx_t row = nz_div(g, p.split_div);
    const idx_t n_in = (idx_t)p.kept_div[p.kept_ndim - 1].d;
    const idx_t c0 = (g - row * (idx_t)p.split_div.d) * 32;
    const idx_t o0 = row * n_in + c0;
    const int outs = n_in - c0 < 32 ? (int)(n_in - c0) : 32;
    const int R = (int)p.red_size;
    const typename nz_index<Wide>::off off = nz_offset<Wide>(o0, p.kept_div, p.kept_stride,
                                                             p.kept_ndim);
    const char* xs = x + off;
    // elements before the span's first 32-byte boundary (0 where x is not aligned to S)
    const int a = (p.align + (int)(p.base & 31) + (int)(off & 31)) & 31;
    const int head = a % S ? 0 : a / S;
    const int n = outs * R;
    const int windows = (head + n + 31) >> 5;
    const int lo = lane * R + head;           // lane's run in window coordinates
    nz_u32 acc = 0;
#pragma unroll 8
    for (int k = 0; k < windows; ++k) {
        // every lane loads (the window's first / last element past the span's ends): one
        // load instruction a window, whole sectors of the span only
        const int e = (k << 5) + lane - head;
        const int ec = min(max(e, 0), n - 1);
        const bool v = nz_is_nonzero<T>(reinterpret_cast<const T*>(xs + ec * S),
                                        p.narrow_loads != 0);
        const bool pred = v && e >= 0 && e < n;
        const nz_u32 m = __ballot_sync(NZ_FULL_MASK, pred);
        const int s = min(max(lo - (k << 5), 0), 32);
        const int t = min(max(lo + R - (k << 5), 0), 32);
        acc += __popc(m & (nz_u32)((1ull << t) - (1ull << s)));
    }
    if (lane < outs) nz_count_store<Wide>(p, out, sums, o0 + (idx_t)lane, (nz_u64)acc);
}

template <typename T, bool Wide>
__device__ __forceinline__ void nz_count_axes(const T* __restrict__ x_, const nz_count_params& p,
                                              nz_i64* out, nz_u64* sums)
{
    typedef typename nz_index<Wide>::idx idx_t;
    const char* x = reinterpret_cast<const char*>(x_) + p.base;
    if (p.mode == 2) {
        nz_count_in_order<T, Wide>(x, p, out, sums);
    } else if (p.mode == 0) {
        // a warp per unit; the reduced range is read 32 consecutive positions a round
        const int lane = threadIdx.x & 31;
        const idx_t g = (idx_t)blockIdx.x * NZ_WARPS + (idx_t)(threadIdx.x >> 5);
        if (g >= (idx_t)p.units) return;   // warp-uniform
        const nz_count_unit<Wide> u(x, p, g);
        nz_u64 acc = 0;
        if constexpr (nz_packed<T>::ok) {
            if (p.vec) {
                typedef typename nz_index<Wide>::off off_t;
                acc = nz_count_run_vec<T, Wide>(x, u.off + (off_t)(u.lo * sizeof(T)),
                                                u.off + (off_t)(u.hi * sizeof(T)),
                                                p.align + (int)(p.base & 15), lane);
                if (lane == 0) u.store(p, out, sums, acc);
                return;
            }
        }
        if (p.red_ndim == 1) {
            // one reduced dim: each lane steps a pointer and counts; one warp sum at the end
            typedef typename nz_index<Wide>::off off_t;
            const off_t st = (off_t)p.red_stride[0];
            const char* q = u.xo + (off_t)(u.lo + (idx_t)lane) * st;
            idx_t cnt = 0;
#pragma unroll 4
            for (idx_t j = u.lo + (idx_t)lane; j < u.hi; j += 32, q += 32 * st)
                cnt += nz_is_nonzero<T>(reinterpret_cast<const T*>(q), p.narrow_loads != 0) ? 1u : 0u;
            acc = nz_warp_sum_u64((nz_u64)cnt);
        } else {
#pragma unroll 4
            for (idx_t j0 = u.lo; j0 < u.hi; j0 += 32) {
                const idx_t j = j0 + (idx_t)lane;
                const bool pred = j < u.hi && u.template nonzero_at<T>(p, j);
                acc += (nz_u64)__popc(__ballot_sync(NZ_FULL_MASK, pred));
            }
        }
        if (lane == 0) u.store(p, out, sums, acc);
    } else {
        // a thread per unit
        const idx_t g = (idx_t)blockIdx.x * NZ_BLOCK + (idx_t)threadIdx.x;
        if (g >= (idx_t)p.units) return;
        const nz_count_unit<Wide> u(x, p, g);
        // before output 0 (o_head: wrapped) or past the last (a chunk is whole warps)
        if (u.o >= (idx_t)p.n_out) return;
        nz_u64 acc = 0;
        if (p.red_ndim == 1) {
            // one reduced dim: step a pointer instead of dividing out each position
            typedef typename nz_index<Wide>::off off_t;
            const off_t st = (off_t)p.red_stride[0];
            const char* q = u.xo + (off_t)u.lo * st;
            idx_t cnt = 0;
#pragma unroll 8
            for (idx_t j = u.lo; j < u.hi; ++j, q += st)
                cnt += nz_is_nonzero<T>(reinterpret_cast<const T*>(q), p.narrow_loads != 0) ? 1u : 0u;
            acc = (nz_u64)cnt;
        } else {
#pragma unroll 4
            for (idx_t j = u.lo; j < u.hi; ++j)
                acc += u.template nonzero_at<T>(p, j) ? 1u : 0u;
        }
        u.store(p, out, sums, acc);
    }
}

template <typename T, bool Wide>
__global__ void __launch_bounds__(NZ_BLOCK)
count_nonzero_axes(const T* __restrict__ x, nz_count_params p, nz_i64* out, nz_u64* sums)
{
    nz_count_axes<T, Wide>(x, p, out, sums);
}
