// nonzero.cuh - helpers of the nonzero family (kernels/nonzero.cu): the nonzero test per value
// type, magic-number division, strided offsets and the parameter structs passed by value.
// Included by nonzero.cu only, whose kernels cupyops/ops/nonzero/family.py instantiates; the
// templates here take the kernels' parameters: T (the value type) and Wide (64-bit indices).
//
// Everything here is prefixed nz_ so it cannot clash with kernels/common.cuh. The structs are
// defined once on the host, in cupyops/ops/nonzero/params.py (FASTDIV, NZ_PARAMS,
// NZ_COUNT_PARAMS: cupyops.core.structs, NumPy dtypes with align=True), which packs them: the
// static_asserts after each struct pin its size and every field's offset to the mirror's, and
// tests/test_plan_nonzero.py pins the sizes on the Python side.
#pragma once
#include "common.cuh"

typedef cuo::u8 nz_u8;
typedef cuo::u16 nz_u16;
typedef cuo::u32 nz_u32;
typedef cuo::u64 nz_u64;
typedef cuo::i32 nz_i32;
typedef cuo::i64 nz_i64;

#define NZ_MAX_DIMS 8          // dimensions per side after merging (reading, coordinates, kept, reduced)
#define NZ_BLOCK 256           // threads per block of every kernel of the family
#define NZ_WARPS (NZ_BLOCK / 32)
#define NZ_FULL_MASK 0xffffffffu
#define NZ_T_BITS 131072       // nonzero_tiles_t: elements (mask bits) per tile, at most

// ------------------------------------------------------------------ compile-time helpers
template <bool C, typename A, typename B> struct nz_select { typedef A type; };
template <typename A, typename B> struct nz_select<false, A, B> { typedef B type; };

// Index types: Wide = 64-bit linear indices and byte offsets, else 32-bit.
template <bool Wide> struct nz_index {
    typedef typename nz_select<Wide, nz_u64, nz_u32>::type idx;   // logical linear index
    typedef typename nz_select<Wide, nz_i64, nz_i32>::type off;   // signed byte offset
};

// Elements each thread reads per tile: enough loads in flight, at most ~16 registers of data.
template <typename T> struct nz_items {
    static constexpr int value = sizeof(T) <= 4 ? 16 : (sizeof(T) == 8 ? 8 : 4);
};

// ------------------------------------------------------------------ nonzero test
// Floats are tested through their bit pattern without the sign: -0.0 is zero, NaN and
// subnormals are nonzero (CuPy compiles with -ftz=true, under which a float compare would
// flush subnormals to zero). Complex: nonzero if either part is.
// `narrow` (the plan's narrow_loads): the input is only element-aligned, not load-aligned, so
// complex64 is read as two 4-byte words instead of one 8-byte load and complex128 as two
// 8-byte words instead of one 16-byte load (a misaligned load faults on a GPU). The other
// types load exactly their element size and ignore it.
template <typename T>
__device__ __forceinline__ bool nz_is_nonzero(const T* p, bool) { return *p != T(0); }

template <>
__device__ __forceinline__ bool nz_is_nonzero<bool>(const bool* p, bool)
{
    return *reinterpret_cast<const nz_u8*>(p) != 0;
}

template <>
__device__ __forceinline__ bool nz_is_nonzero<cupyops_half>(const cupyops_half* p, bool)
{
    return (*reinterpret_cast<const nz_u16*>(p) & 0x7fffu) != 0u;
}

template <>
__device__ __forceinline__ bool nz_is_nonzero<cupyops_bfloat16>(const cupyops_bfloat16* p, bool)
{
    return (*reinterpret_cast<const nz_u16*>(p) & 0x7fffu) != 0u;
}

template <>
__device__ __forceinline__ bool nz_is_nonzero<float>(const float* p, bool)
{
    return (*reinterpret_cast<const nz_u32*>(p) & 0x7fffffffu) != 0u;
}

template <>
__device__ __forceinline__ bool nz_is_nonzero<double>(const double* p, bool)
{
    return (*reinterpret_cast<const nz_u64*>(p) & 0x7fffffffffffffffull) != 0ull;
}

template <>
__device__ __forceinline__ bool nz_is_nonzero<cupyops_complex64>(const cupyops_complex64* p, bool narrow)
{
    if (narrow) {
        const nz_u32* q = reinterpret_cast<const nz_u32*>(p);
        return ((q[0] | q[1]) & 0x7fffffffu) != 0u;
    }
    // one 8-byte load of both parts
    return (*reinterpret_cast<const nz_u64*>(p) & 0x7fffffff7fffffffull) != 0ull;
}

__device__ __forceinline__ void nz_load16(nz_u32 w[4], const char* a);

// complex128: one 16-byte load of both parts (two warp-wide loads would each request the same
// sectors), or two 8-byte loads where the plan found the data only 8-byte aligned (`narrow`).
template <>
__device__ __forceinline__ bool nz_is_nonzero<cupyops_complex128>(const cupyops_complex128* p,
                                                                  bool narrow)
{
    if (narrow) {
        const nz_u64* q = reinterpret_cast<const nz_u64*>(p);
        return ((q[0] | q[1]) & 0x7fffffffffffffffull) != 0ull;
    }
    nz_u32 w[4];
    nz_load16(w, reinterpret_cast<const char*>(p));
    return ((w[0] | w[2]) | ((w[1] | w[3]) & 0x7fffffffu)) != 0u;
}

// ------------------------------------------------------------------ packed nonzero test
// The packed paths (p.vec, 1- and 2-byte types over a contiguous run) read 16-byte words and
// test a 32-bit word of 4 or 2 elements at once: nz_packed<T>::bits(w) has the top bit of each
// element's lane set iff that element is nonzero, every other bit 0. (w & 0x7f..) + 0x7f..
// sets a lane's top bit iff its low bits are nonzero and never carries into the next lane;
// or-ing w adds the top bit itself (integers), leaving it out masks the sign (-0.0 is zero,
// NaN and subnormals are nonzero). One LOP3, one IADD and one LOP3 per word; counts are POPC.
template <typename T> struct nz_packed { static constexpr bool ok = false; };
template <> struct nz_packed<nz_u8> {
    static constexpr bool ok = true;
    __device__ __forceinline__ static nz_u32 bits(nz_u32 w)
    {
        return (w | ((w & 0x7f7f7f7fu) + 0x7f7f7f7fu)) & 0x80808080u;
    }
};
template <> struct nz_packed<nz_u16> {
    static constexpr bool ok = true;
    __device__ __forceinline__ static nz_u32 bits(nz_u32 w)
    {
        return (w | ((w & 0x7fff7fffu) + 0x7fff7fffu)) & 0x80008000u;
    }
};
template <> struct nz_packed<cupyops_half> {
    static constexpr bool ok = true;
    __device__ __forceinline__ static nz_u32 bits(nz_u32 w)
    {
        return ((w & 0x7fff7fffu) + 0x7fff7fffu) & 0x80008000u;
    }
};
template <> struct nz_packed<cupyops_bfloat16> : nz_packed<cupyops_half> {};

// nonzero_tiles_t's word test: nz_packed for 1- and 2-byte types, and for 4-byte types bit 31
// set iff the element (the whole word) is nonzero; the same layout (the top bit of each
// element's lane), so one 16-byte word of 16, 8 or 4 elements is handled by one code path.
template <typename T> struct nz_wordtest : nz_packed<T> {};
template <> struct nz_wordtest<nz_u32> {
    static constexpr bool ok = true;
    __device__ __forceinline__ static nz_u32 bits(nz_u32 w) { return w != 0u ? 0x80000000u : 0u; }
};
template <> struct nz_wordtest<float> {
    static constexpr bool ok = true;
    __device__ __forceinline__ static nz_u32 bits(nz_u32 w)
    {
        return (w & 0x7fffffffu) != 0u ? 0x80000000u : 0u;
    }
};

// One aligned 16-byte word of the input as four 32-bit words (whole-vector alignment checked on
// simt; one LDG.128 through the kernel's const __restrict__ pointer on a GPU). Under simt the
// host compiler would split a struct copy into two 8-byte loads, which the traffic counters see
// as two warp-wide accesses; a GCC vector type keeps it one 16-byte load, as on a GPU.
__device__ __forceinline__ void nz_load16(nz_u32 w[4], const char* a)
{
    cuo::vec_align_check<cuo::vec_bytes<16> >(a);
#ifdef CUPYOPS_SIMT
    typedef nz_u32 v4 __attribute__((vector_size(16)));
    const v4 v = *reinterpret_cast<const v4*>(a);
    w[0] = v[0];
    w[1] = v[1];
    w[2] = v[2];
    w[3] = v[3];
#else
    const cuo::vec_bytes<16> v = *reinterpret_cast<const cuo::vec_bytes<16>*>(a);
    w[0] = (nz_u32)v.w[0];
    w[1] = (nz_u32)(v.w[0] >> 32);
    w[2] = (nz_u32)v.w[1];
    w[3] = (nz_u32)(v.w[1] >> 32);
#endif
}

// The 16-byte word at a (aligned) with only the elements of byte range [lo, hi) read, one by
// one, the others 0: the words that straddle the start or the end of the input (reading a byte
// outside the array would be out of bounds on simt, and past an allocation on a GPU).
template <typename T>
__device__ __forceinline__ void nz_load16_part(nz_u32 w[4], const char* a, const char* lo,
                                               const char* hi)
{
    constexpr int S = (int)sizeof(T);
    typedef typename cuo::uint_of<S>::type B;
#pragma unroll
    for (int k = 0; k < 4; ++k) w[k] = 0u;
#pragma unroll
    for (int e = 0; e < 16 / S; ++e) {
        const char* q = a + e * S;
        if (q >= lo && q < hi)
            w[(e * S) >> 2] |= (nz_u32)*reinterpret_cast<const B*>(q) << (8 * ((e * S) & 3));
    }
}

// ------------------------------------------------------------------ magic-number division
// Granlund & Montgomery (1994), fig. 4.1: for 1 <= d < 2^N, with l = ceil(log2 d),
// m = floor(2^N (2^l - d) / d) + 1, sh1 = min(l, 1), sh2 = max(l - 1, 0):
//     t = mulhi(m, n);  n / d = (t + ((n - t) >> sh1)) >> sh2      for every N-bit n.
// The host fills m for N = 64 (m64) and N = 32 (m32, 0 when d >= 2^32); l is the same.
struct nz_fastdiv {
    nz_u64 d;
    nz_u64 m64;
    nz_u32 m32;
    nz_u8 sh1;
    nz_u8 sh2;
};
static_assert(sizeof(nz_fastdiv) == 24,
              "nz_fastdiv layout is defined on the host in cupyops/ops/nonzero/params.py");
#define NZ_AT(field, off) CUO_FIELD_AT(nz_fastdiv, field, off)
NZ_AT(d, 0); NZ_AT(m64, 8); NZ_AT(m32, 16); NZ_AT(sh1, 20); NZ_AT(sh2, 21);
#undef NZ_AT

__device__ __forceinline__ nz_u32 nz_div(nz_u32 n, const nz_fastdiv& f)
{
    const nz_u32 t = __umulhi(n, f.m32);
    return (t + ((n - t) >> f.sh1)) >> f.sh2;
}

__device__ __forceinline__ nz_u64 nz_div(nz_u64 n, const nz_fastdiv& f)
{
    const nz_u64 t = __umul64hi(n, f.m64);
    return (t + ((n - t) >> f.sh1)) >> f.sh2;
}

// ------------------------------------------------------------------ parameter structs
// nonzero_tiles: modes
#define NZ_MODE_SCAN 0    // exact size, pass 1: per-tile counts + decoupled look-back scan -> status, total
#define NZ_MODE_PLACE 1   // exact size, pass 2: each tile (blockIdx) writes from its stored offset
#define NZ_MODE_FIXED 2   // size=k: one pass, look-back, write, fill; no host read
#define NZ_MODE_SEGMENTS 3  // nonzero_tiles_t over inner chunks, pass 2: a tile a segment (one
                            // row of the dims up to m x one inner chunk) of SCAN's records,
                            // look-back, write rows < k (and fill, as FIXED)
// output layouts
#define NZ_LAYOUT_ROWS 0  // (count, ndim) row-major: argwhere, nonzero_coordinates
#define NZ_LAYOUT_COLS 1  // (ndim, count) row-major: nonzero's tuple

struct nz_params {
    // Reading: the logical array with unit dims dropped and row-major-compatible neighbours
    // merged (order kept). Linear index L -> byte offset: peel dims in_ndim-1 .. 1 with
    // in_div[i] (divisor = extent of dim i), dim 0 takes the quotient.
    nz_fastdiv in_div[NZ_MAX_DIMS];
    nz_i64 in_stride[NZ_MAX_DIMS];          // bytes
    // Coordinates: the non-unit dims of the logical shape, in order. Coordinate of non-unit
    // dim k is (L / co_suffix[k]) % co_shape[k]; columns whose dim has extent 1 are 0.
    nz_fastdiv co_suffix[NZ_MAX_DIMS];
    nz_fastdiv co_shape[NZ_MAX_DIMS];
    nz_fastdiv ndim_div;                    // divisor out_ndim (flat output entry -> row, column)
    nz_u64 unit_mask;                       // bit c: column c has extent 1
    nz_i64 size;                            // elements
    nz_i64 num_tiles;                       // input tiles (tile = NZ_BLOCK * items elements)
    nz_i64 k;                               // FIXED: output rows
    nz_i64 fill;                            // FIXED: fill value (low bytes stored)
    nz_i64 row_stride;                      // COLS layout: elements between columns (= count)
    nz_i64 fill_rows;                       // FIXED: rows per fill tile
    nz_i32 in_ndim;
    nz_i32 out_ndim;
    nz_i32 mode;
    nz_i32 layout;
    nz_i32 index_bytes;                     // 4 or 8: int32/uint32 or int64/uint64 output
    nz_i32 stats_on;                        // 1: look-back statistics into `stats` (tests)
    nz_i32 narrow_loads;                    // 1: complex64 / complex128 read as two halves (see nz_is_nonzero)
    nz_i32 vec;                             // 1: packed path (one contiguous run of a 1-/2-byte type)
    nz_i32 head;                            // packed: elements between the 16-byte boundary below x and x
    nz_i32 tr_c;                            // nonzero_tiles_t: inner chunks a row (1: the tile holds all I)
    // nonzero_tiles_t (memory-innermost reading dim tr_dim is not the last one): a tile is
    // 2^tr_kshift indices along tr_dim x all tr_inner indices of the dims after it
    nz_fastdiv tr_chunks;                   // tiles per index of the dims before tr_dim
    nz_i64 tr_inner;                        // elements of the dims after tr_dim
    nz_i32 tr_dim;
    nz_i32 tr_kshift;
    nz_i32 tr_vec;                          // 2: 4-byte words along tr_dim (1-/2-byte, aligned)
    nz_i32 tr_ic;                           // elements of an inner chunk (tr_inner when tr_c is 1)
};
static_assert(sizeof(nz_params) == 808,
              "nz_params layout is defined on the host in cupyops/ops/nonzero/params.py");
#define NZ_AT(field, off) CUO_FIELD_AT(nz_params, field, off)
NZ_AT(in_div, 0); NZ_AT(in_stride, 192); NZ_AT(co_suffix, 256); NZ_AT(co_shape, 448);
NZ_AT(ndim_div, 640); NZ_AT(unit_mask, 664); NZ_AT(size, 672); NZ_AT(num_tiles, 680); NZ_AT(k, 688);
NZ_AT(fill, 696); NZ_AT(row_stride, 704); NZ_AT(fill_rows, 712); NZ_AT(in_ndim, 720);
NZ_AT(out_ndim, 724); NZ_AT(mode, 728); NZ_AT(layout, 732); NZ_AT(index_bytes, 736);
NZ_AT(stats_on, 740); NZ_AT(narrow_loads, 744); NZ_AT(vec, 748); NZ_AT(head, 752); NZ_AT(tr_c, 756);
NZ_AT(tr_chunks, 760); NZ_AT(tr_inner, 784); NZ_AT(tr_dim, 792); NZ_AT(tr_kshift, 796);
NZ_AT(tr_vec, 800); NZ_AT(tr_ic, 804);
#undef NZ_AT

struct nz_count_params {
    // kept dims (row-major output order, merged), reduced dims (sorted, flipped, merged)
    nz_fastdiv kept_div[NZ_MAX_DIMS];
    nz_i64 kept_stride[NZ_MAX_DIMS];        // bytes
    nz_fastdiv red_div[NZ_MAX_DIMS];
    nz_i64 red_stride[NZ_MAX_DIMS];         // bytes
    nz_fastdiv split_div;                   // units -> (output, chunk): mode 0 by n_chunks, 1 by n_out; mode 2 -> (row, group) by groups
    nz_i64 n_out;
    nz_i64 red_size;
    nz_i64 chunk_len;
    nz_i64 n_chunks;
    nz_i64 units;                           // n_out * n_chunks
    nz_i64 base;                            // bytes added to x (reduced dims flipped to positive strides)
    nz_i32 kept_ndim;
    nz_i32 red_ndim;
    nz_i32 mode;                            // 0: a warp per (output, chunk); 1: a thread per (output, chunk); 2: a warp per 32 outputs
    nz_i32 atomic;                          // 1: several chunks add into a zeroed output
    nz_i32 narrow_loads;                    // 1: complex64 / complex128 read as two halves
    nz_i32 vec;                             // 1: packed path (contiguous reduced run, 1-/2-byte type, mode 0)
    nz_i32 align;                           // x's address mod 32 (before base)
    nz_i32 o_head;                          // mode 1: idle units before output 0 (its sector's start)
    nz_i64 out_stride[NZ_MAX_DIMS];         // per kept dim: its stride in the output, elements
    nz_i64 out_base;                        // output position of kept offset 0
    nz_i32 out_mapped;                      // 0: output o is out[o] (kept dims in output order)
    nz_i32 pad1;
};
static_assert(sizeof(nz_count_params) == 696,
              "nz_count_params layout is defined on the host in cupyops/ops/nonzero/params.py");
#define NZ_AT(field, off) CUO_FIELD_AT(nz_count_params, field, off)
NZ_AT(kept_div, 0); NZ_AT(kept_stride, 192); NZ_AT(red_div, 256); NZ_AT(red_stride, 448);
NZ_AT(split_div, 512); NZ_AT(n_out, 536); NZ_AT(red_size, 544); NZ_AT(chunk_len, 552);
NZ_AT(n_chunks, 560); NZ_AT(units, 568); NZ_AT(base, 576); NZ_AT(kept_ndim, 584);
NZ_AT(red_ndim, 588); NZ_AT(mode, 592); NZ_AT(atomic, 596); NZ_AT(narrow_loads, 600);
NZ_AT(vec, 604); NZ_AT(align, 608); NZ_AT(o_head, 612); NZ_AT(out_stride, 616);
NZ_AT(out_base, 680); NZ_AT(out_mapped, 688); NZ_AT(pad1, 692);
#undef NZ_AT

// ------------------------------------------------------------------ strided offsets
// Byte offset of logical linear index L over dims (div, stride) of ndim dims (row-major).
template <bool Wide>
__device__ __forceinline__ typename nz_index<Wide>::off
nz_offset(typename nz_index<Wide>::idx L, const nz_fastdiv* div, const nz_i64* stride, int ndim)
{
    typedef typename nz_index<Wide>::idx idx_t;
    typedef typename nz_index<Wide>::off off_t;
    off_t off = 0;
    for (int i = ndim - 1; i >= 1; --i) {
        const idx_t q = nz_div(L, div[i]);
        off += (off_t)(L - q * (idx_t)div[i].d) * (off_t)stride[i];
        L = q;
    }
    return off + (off_t)L * (off_t)stride[0];
}

// ------------------------------------------------------------------ warp helpers
__device__ __forceinline__ nz_u64 nz_warp_sum_u64(nz_u64 v)
{
    nz_u32 lo = (nz_u32)v, hi = (nz_u32)(v >> 32);
#pragma unroll
    for (int o = 16; o >= 1; o >>= 1) {
        const nz_u32 olo = __shfl_xor_sync(NZ_FULL_MASK, lo, o);
        const nz_u32 ohi = __shfl_xor_sync(NZ_FULL_MASK, hi, o);
        const nz_u32 s = lo + olo;
        hi = hi + ohi + (s < lo ? 1u : 0u);
        lo = s;
    }
    return ((nz_u64)hi << 32) | lo;
}

__device__ __forceinline__ nz_u64 nz_load_volatile(const nz_u64* p)
{
    return *(const volatile nz_u64*)p;
}

__device__ __forceinline__ void nz_store_volatile(nz_u64* p, nz_u64 v)
{
    *(volatile nz_u64*)p = v;
}
