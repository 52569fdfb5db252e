// argcompare.cuh - the one comparison rule of the index-tracking reductions (argmin / argmax /
// nanarg* / hardmax, max_and_argmax / min_and_argmin, and the segmented forms): each value's bits
// map to an unsigned ordering key (ar_key; ArType<T> gives the bits, key and kind of value type
// T), complemented for argmin, every NaN (complex: a NaN in either part; NaT) the largest key
// (or 0 under nan_skip); the larger key wins and equal keys go to the smaller logical index (tie
// "first") or the larger ("last"): ar_better. A running best (ArBest: key, index; values mode:
// and the element's raw bits) and how it travels between threads (ArWire: index mode sends the
// key, values mode the bits, from which the receiver recomputes the key), and the stores of a
// result (ar_store_index, ar_store_value), the volatile load of another block's partial
// (ar_load_volatile). Included by
// argreduce.cu (family "argreduce", cupyops/ops/argreduce) and segment.cu (family "segment",
// cupyops/ops/segment); it computes nothing on its own. See argreduce.cu's top comment for the
// rule's properties (a total order on (key, index), -0.0 == 0.0, bit comparisons under -ftz).
#pragma once
#include "common.cuh"

// bits: the raw storage type; key: u32 (values of <= 4 bytes), u64 or u128 (complex128);
// kind: 0 bool, 1 unsigned, 2 signed, 3 float, 4 complex (bits: real part in the low half),
// 5 datetime/timedelta (int64, NaT = INT64_MIN the extreme); inf: the bit pattern of +inf
// (floats; complex: of one part).
template <class T> struct ArType;
#define AR_TYPE(T, BITS, KEY, KIND, INF)                                                  \
    template <> struct ArType<T> {                                                        \
        typedef BITS bits;                                                                \
        typedef KEY key;                                                                  \
        enum { kind = KIND };                                                             \
        static __device__ __forceinline__ BITS inf() { return (BITS)(INF); }              \
    };
AR_TYPE(bool, cuo::u8, cuo::u32, 0, 0)
AR_TYPE(unsigned char, cuo::u8, cuo::u32, 1, 0)
AR_TYPE(unsigned short, cuo::u16, cuo::u32, 1, 0)
AR_TYPE(unsigned int, cuo::u32, cuo::u32, 1, 0)
AR_TYPE(unsigned long long, cuo::u64, cuo::u64, 1, 0)
AR_TYPE(signed char, cuo::u8, cuo::u32, 2, 0)
AR_TYPE(short, cuo::u16, cuo::u32, 2, 0)
AR_TYPE(int, cuo::u32, cuo::u32, 2, 0)
AR_TYPE(long long, cuo::u64, cuo::u64, 2, 0)
AR_TYPE(cupyops_half, cuo::u16, cuo::u32, 3, 0x7c00u)
AR_TYPE(cupyops_bfloat16, cuo::u16, cuo::u32, 3, 0x7f80u)
AR_TYPE(float, cuo::u32, cuo::u32, 3, 0x7f800000u)
AR_TYPE(double, cuo::u64, cuo::u64, 3, 0x7ff0000000000000ull)
AR_TYPE(cupyops_complex64, cuo::u64, cuo::u64, 4, 0x7f800000u)
AR_TYPE(cupyops_datetime, cuo::u64, cuo::u64, 5, 0)
#undef AR_TYPE
template <> struct ArType<cupyops_complex128> {
    typedef cuo::u128 bits;
    typedef cuo::u128 key;
    enum { kind = 4 };
    static __device__ __forceinline__ cuo::u64 inf() { return 0x7ff0000000000000ull; }
};

// Order-preserving unsigned image of a float's bits P (-0.0 == 0.0); `nan` tells NaN.
template <class P>
__device__ __forceinline__ P ar_float_mono(P b, P inf, bool& nan)
{
    constexpr P ones = (P)~(P)0;
    constexpr P sign = (P)(ones ^ (P)(ones >> 1));
    const P mag = (P)(b & (P)~sign);
    nan = mag > inf;
    if (mag == 0) b = 0;                            // -0.0 == 0.0
    return (b & sign) ? (P)~b : (P)(b | sign);
}

// The ordering key of one value given by its bits. `flip` is all ones for argmin, 0 for argmax;
// `nank` is the key of NaN: all ones (NaN is the extreme), or 0 for nanargmin/nanargmax.
template <class T>
__device__ __forceinline__ typename ArType<T>::key ar_key(typename ArType<T>::bits b,
                                                          typename ArType<T>::key flip,
                                                          typename ArType<T>::key nank)
{
    typedef typename ArType<T>::bits B;
    typedef typename ArType<T>::key K;
    if constexpr (sizeof(B) == 16) {                // complex128: (real, imag) in one u128
        bool nr, ni;
        K k;
        k.hi = ar_float_mono<cuo::u64>(b.lo, ArType<T>::inf(), nr);
        k.lo = ar_float_mono<cuo::u64>(b.hi, ArType<T>::inf(), ni);
        if (nr || ni) return nank;
        return k ^ flip;
    } else {
    constexpr B ones = (B)~(B)0;
    constexpr B sign = (B)(ones ^ (B)(ones >> 1));
    if constexpr (ArType<T>::kind == 0) {
        return (b != 0 ? (K)1 : (K)0) ^ (flip & (K)1);
    } else if constexpr (ArType<T>::kind == 1) {
        return (K)b ^ (flip & (K)ones);
    } else if constexpr (ArType<T>::kind == 2) {
        return (K)(B)(b ^ sign) ^ (flip & (K)ones);
    } else if constexpr (ArType<T>::kind == 3) {
        bool nan;
        const B mono = ar_float_mono<B>(b, ArType<T>::inf(), nan);
        if (nan) return nank;
        return (K)mono ^ (flip & (K)ones);
    } else if constexpr (ArType<T>::kind == 5) {
        // NaT is the largest key for every kind; the others keep their order in [0, 2**64 - 2]
        // (the image of INT64_MIN + 1 .. INT64_MAX), complemented within that range for argmin
        if (b == sign) return ~K();
        const K k0 = (K)(b ^ sign) - 1;
        return (k0 ^ flip) - (flip & 1);
    } else {                                        // complex64: (real, imag) in one u64
        bool nr, ni;
        const cuo::u32 kr = ar_float_mono<cuo::u32>((cuo::u32)b, (cuo::u32)ArType<T>::inf(), nr);
        const cuo::u32 ki = ar_float_mono<cuo::u32>((cuo::u32)(b >> 32), (cuo::u32)ArType<T>::inf(), ni);
        if (nr || ni) return nank;
        return (((K)kr << 32) | (K)ki) ^ flip;
    }
    }
}

// The comparison rule: does (ka, ia) beat (kb, ib)?
template <class K, class I>
__device__ __forceinline__ bool ar_better(K ka, I ia, K kb, I ib, bool last)
{
    return ka != kb ? ka > kb : (last ? ia > ib : ia < ib);
}

// Values mode (the *_values entry points: max_and_argmax, min_and_argmin) carries the raw bits
// of the best's element along (V = ArType<T>::bits); index mode carries none (V = void).
template <class V> struct ArBestBits { V v; };
template <> struct ArBestBits<void> {};
template <class V> struct ar_carries { enum { value = 1 }; };
template <> struct ar_carries<void> { enum { value = 0 }; };

// A running best (key, logical index; values mode: and the element's bits). The empty state
// loses to every real element.
template <class K, class I, class V = void>
struct ArBest : ArBestBits<V> {
    enum { VAL = ar_carries<V>::value };
    K k;
    I i;
    __device__ __forceinline__ void clear(bool last)
    {
        k = K();
        i = last ? (I)-1 : cuo::index_max<I>();
        if constexpr (VAL) this->v = V();
    }
    // the bits of the element just taken (values mode; nothing in index mode)
    template <class B>
    __device__ __forceinline__ void keep(const B& v2)
    {
        if constexpr (VAL) this->v = v2;
    }
    __device__ __forceinline__ void take(K k2, I i2, bool last)
    {
        static_assert(!VAL, "values mode: take the element's bits too");
        if (ar_better(k2, i2, k, i, last)) {
            k = k2;
            i = i2;
        }
    }
    // take the key and index only, saying whether they won (the packed column scan keeps its
    // bests' bits elsewhere, in one word: ar_scan_cols_packed)
    __device__ __forceinline__ bool take_key(K k2, I i2, bool last)
    {
        const bool won = ar_better(k2, i2, k, i, last);
        if (won) {
            k = k2;
            i = i2;
        }
        return won;
    }
    // take with the element's bits v2 (kept in values mode)
    template <class B>
    __device__ __forceinline__ void take(K k2, I i2, bool last, const B& v2)
    {
        if (ar_better(k2, i2, k, i, last)) {
            k = k2;
            i = i2;
            keep(v2);
        }
    }
    // take(k2, base + l) for an index beyond i in the direction of the walk (the positions
    // after the first of a walk over one reduced dimension): ar_better reduces to comparing
    // keys, an equal key winning when the walk runs towards the tie side (`tie_wins`).
    template <class U, class B>
    __device__ __forceinline__ void take_beyond(K k2, U base, U l, bool tie_wins, const B& v2)
    {
        if (k2 > k || (tie_wins && k2 == k)) {
            k = k2;
            i = (I)(base + l);
            keep(v2);
        }
    }
};

// How a best travels between threads (warp shuffles, shared memory, partials): one word of the
// key's width (`w`) and the index. Index mode sends the key itself. Values mode sends the
// element's raw bits instead (zero-extended to the key's width; complex128: the same 16
// bytes), which determine the key: the receiver recomputes it with ar_key (the scan's flip;
// NaN the extreme, as values mode has no nan_skip). So a value costs no shuffle, shared memory
// or partial byte more than an index. The cleared best (its index the empty marker, which no
// element has) keeps its key 0.
template <class T, class I, bool VAL> struct ArWire;
template <class T, class I>
struct ArWire<T, I, false> {
    typedef typename ArType<T>::key K;
    typedef ArBest<K, I> Best;
    __device__ __forceinline__ static K send(const Best& b) { return b.k; }
    // set b to entry `at` of the shared arrays (sk, si)
    __device__ __forceinline__ void load(Best& b, const K* sk, const I* si, int at, bool) const
    {
        b.k = sk[at];
        b.i = si[at];
    }
    __device__ __forceinline__ void take(Best& b, const K& w, I i, bool last) const
    {
        b.take(w, i, last);
    }
};
template <class T, class I>
struct ArWire<T, I, true> {
    typedef typename ArType<T>::key K;
    typedef typename ArType<T>::bits B;
    typedef ArBest<K, I, B> Best;
    K flip;                                          // all ones for argmin
    __device__ __forceinline__ static K send(const Best& b) { return (K)b.v; }
    __device__ __forceinline__ K key(const K& w, I i, bool last) const
    {
        const I empty = last ? (I)-1 : cuo::index_max<I>();
        return i == empty ? K() : ar_key<T>((B)w, flip, ~K());
    }
    __device__ __forceinline__ void load(Best& b, const K* sk, const I* si, int at,
                                         bool last) const
    {
        const K w = sk[at];
        b.i = si[at];
        b.k = key(w, b.i, last);
        b.v = (B)w;
    }
    __device__ __forceinline__ void take(Best& b, const K& w, I i, bool last) const
    {
        b.take(key(w, i, last), i, last, (B)w);
    }
};
template <class T, class I, bool VAL>
using ArBestOf = typename ArWire<T, I, VAL>::Best;

// The wire of a scan with ordering-key flip `flip`.
template <class T, class I, bool VAL>
__device__ __forceinline__ ArWire<T, I, VAL> ar_wire(typename ArType<T>::key flip)
{
    ArWire<T, I, VAL> ex;
    if constexpr (VAL) ex.flip = flip;
    return ex;
}

// The stores of a result: an index at the index dtype's width (1, 2, 4 or 8 bytes), and in
// values mode the winner's raw bits at the value's own width.
template <class U>
__device__ __forceinline__ void ar_store_index(void* out, long long elem, U idx, int width)
{
    if (width == 8)
        reinterpret_cast<unsigned long long*>(out)[elem] = (unsigned long long)idx;
    else if (width == 4)
        reinterpret_cast<unsigned int*>(out)[elem] = (unsigned int)idx;
    else if (width == 2)
        reinterpret_cast<unsigned short*>(out)[elem] = (unsigned short)idx;
    else
        reinterpret_cast<unsigned char*>(out)[elem] = (unsigned char)idx;
}

// Values mode: the winner's raw bits, stored at the value's own width (the host gives an
// output aligned to it). complex128: one 16-byte store (two 8-byte ones would each touch the
// sectors of the warp's whole range).
template <class T>
__device__ __forceinline__ void ar_store_value(void* vout, long long elem,
                                               const typename ArType<T>::bits& v)
{
    typedef typename ArType<T>::bits B;
    if constexpr (sizeof(B) == 16) {
        cuo::vec_bytes<16> w;
        w.w[0] = v.lo;
        w.w[1] = v.hi;
        cuo::vec_store(reinterpret_cast<cuo::vec_bytes<16>*>(vout) + elem, w);
    } else {
        reinterpret_cast<B*>(vout)[elem] = v;
    }
}

// A volatile load of a partial written by another block (after the ticket's acquire): not
// cached in L1, never a non-coherent load. 16-byte keys are read as two 8-byte words.
template <class K>
__device__ __forceinline__ K ar_load_volatile(const K* a)
{
    if constexpr (sizeof(K) == 16) {
        const volatile cuo::u64* w = reinterpret_cast<const volatile cuo::u64*>(a);
        K k;
        k.lo = w[0];
        k.hi = w[1];
        return k;
    } else {
        return *reinterpret_cast<const volatile K*>(a);
    }
}
