"""The NumPy path's routines for the three common layouts of a C-contiguous input, threaded.

A reduction over a consecutive run of axes of a C-contiguous array is one of:

* **flat** (every axis): one group, the whole array;
* **rows** (the trailing axes): ``(rows, n)`` groups, each a contiguous row;
* **fold** (axes with kept axes after them): ``V = x.reshape(A, R, C)``, the group of
  ``(a, c)`` is ``V[a, :, c]``: a column of a C-contiguous slab.

Every routine gives the index the library's rule asks for (docs/api.md): the first (tie
"first") or last (tie "last") position of the group's extreme, NaN the extreme (its first or
last place), -0.0 == 0.0, integers exact. float16 and bfloat16 are compared as int16 keys
(:func:`keys16`): NumPy's float16 comparisons convert every element, the keys are SIMD
integers. Extra memory stays at a few chunks of :data:`CHUNK` elements per thread besides
the output (the transposed copies: :data:`TRANSPOSE_BYTES`; the fold's lookup: about four
times :data:`FIND_SLOT_BYTES`).

* tie "first" over rows or flat: NumPy's argmax/argmin, in place (it is the fastest way); a
  flat bool input (argmax stops at the first True, argmin at the first False) is searched
  in growing ranges, so the threads never read far past the answer.
* tie "last" over rows: a chunk of rows is copied with its 8-byte words in reverse order
  (memcpy speed; NumPy's reversed view is copied element by element at a third of it), so
  NumPy's argmax meets the last word that holds the extreme first; the last extreme inside
  that word is then found among its 8 bytes.
* tie "last" over a flat input: the extremes of blocks of :data:`CHUNK` elements (one SIMD
  reduction), then the last block that holds the overall extreme is searched as a row.
* fold, narrow slabs (at most :data:`TRANSPOSE_MAX_C` groups a slab) below 1 MiB, or of 2
  to 16 bytes a value, at most :data:`TRANSPOSE_MAX_R` rows a slab and not taken by the
  lookup below: blocks of slabs copied transposed into a buffer of :data:`TRANSPOSE_BYTES`,
  then NumPy's argmax along the rows (:func:`_transposed`; NumPy's way, in bounded memory).
* fold, otherwise: the rows of a range are chunks of ``w`` rows; slot ``s`` of a group holds
  rows ``s, w + s, 2 w + s, ...``.

  - tall slabs of 2 to 8 bytes a value, at least 1 MiB (at least 128 rows a chunk and as
    many as chunks; :func:`_find_rows`): one SIMD reduction gives every slot's extreme (NaN
    propagates), the slots give the group's extreme, and its row is looked up among the
    slots that hold it: the chunks searched from the end the tie prefers while the extreme
    recurs, the rest gathered (:func:`_rows_looked_up`);
  - elsewhere a running extreme over the chunks, elementwise on contiguous memory (one SIMD
    compare, extreme, multiply and maximum per element), with the chunk number of each slot's
    best (int8, so at most 127 chunks per range of rows); then the slots of each group are
    combined. NaN is checked once per range: a range whose extremes hold a NaN is folded again
    with NaN-aware comparisons.

Threads (cupyops.core.threads): rows in row blocks, flat inputs and folds in ranges whose
answers are combined with the same rules (:func:`pick`), transposed copies in blocks of
slabs, so a result is the same on any number of threads.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from cupyops.core import threads as _threads

__all__ = ["keys16", "rows_arg", "flat_arg", "fold_arg", "pick", "work", "CHUNK"]

CHUNK = 1 << 16             # elements per chunk of the chunked loops (in L2 with temporaries)
LONG_ROW = 1 << 15          # rows at least this long are searched one at a time, as flat
BOOL_PROBE = 1 << 16        # bytes a flat bool search reads before it starts the threads
FOLD_IDX_MAX = 127          # chunks per fold range (the chunk number is an int8)
FOLD_MIN_BYTES = 1 << 20    # smaller inputs with narrow slabs are copied transposed, not folded
TRANSPOSE_MAX_C = 64        # ... narrow: at most this many groups per slab
TRANSPOSE_BYTES = 1 << 20   # bytes a block of the transposed copies (a buffer a thread)
TRANSPOSE_MAX_R = 512       # ... rows a slab, at most, of 1 MiB and more (longer: the fold's)
FIND_SLOT_BYTES = 1 << 20   # slots of a tile of the fold's lookup, at most (its extra memory:
                            # about 4 times this a thread)
FIND_MIN_ROWS = 128         # rows a chunk of the fold's lookup, at least
GATHER_COST = 10            # a value gathered costs about this many values searched in order

_ARG = {"max": np.ndarray.argmax, "min": np.ndarray.argmin}
_RED = {"max": np.ndarray.max, "min": np.ndarray.min}          # NaN propagates
_EXT = {"max": np.maximum, "min": np.minimum}                  # NaN propagates
_BEAT = {("max", "first"): np.greater, ("max", "last"): np.greater_equal,
         ("min", "first"): np.less, ("min", "last"): np.less_equal}
_I16 = np.dtype(np.int16)
_U64 = np.dtype(np.uint64)


# ------------------------------------------------------------------------------ keys

def keys16(src, kind, nan_mag, out, tmp):
    """int16 keys that order 16-bit floats (``src``: their bits as int16, any layout) as the
    floats order: -0.0 and +0.0 get one key, every NaN (magnitude bits above ``nan_mag``:
    0x7C00 for float16, 0x7F80 for bfloat16) the extreme key of ``kind``. ``out`` and ``tmp``:
    int16 arrays of src's shape (``out`` receives the keys)."""
    np.right_shift(src, 15, out=tmp)                 # 0 or -1
    np.bitwise_and(tmp, 0x7FFF, out=out)
    np.bitwise_xor(out, src, out=out)                # negative: magnitude bits flipped
    np.subtract(out, tmp, out=out)                   # ... and +1: -0.0 -> 0
    np.bitwise_and(src, 0x7FFF, out=tmp)
    if tmp.max() > nan_mag:
        np.copyto(out, 32767 if kind == "max" else -32768, where=tmp > nan_mag)
    return out


class _Keys:
    """Per-thread int16 buffers for the keys of one chunk."""

    __slots__ = ("nan_mag", "kind", "out", "tmp")

    def __init__(self, nan_mag, kind, size):
        self.nan_mag, self.kind = nan_mag, kind
        self.out = np.empty(size, _I16)
        self.tmp = np.empty(size, _I16)

    def of(self, a):
        """The keys of ``a`` (16-bit floats, any layout), in a C-contiguous int16 array of its
        shape (this object's buffer: valid until the next call)."""
        n = a.size
        out = self.out[:n].reshape(a.shape)
        return keys16(a.view(_I16), self.kind, self.nan_mag, out,
                      self.tmp[:n].reshape(a.shape))


# ------------------------------------------------------------------------------ combining

def _nan_groups(best):
    """Where the groups' extremes ``best`` are NaN (a bool array), or None where none is."""
    if best.dtype.kind not in "fc":
        return None
    nan = np.isnan(best)
    return nan if nan.any() else None


def _matches(vals, want, nan):
    """``vals == want``, NaN matching NaN where ``nan`` (``want``'s NaN mask, or None)."""
    hit = vals == want
    if nan is not None:
        hit |= np.isnan(vals) & nan
    return hit


def _held(vals, best):
    """Where ``vals`` hold their group's extreme ``best`` (broadcast against them): equal,
    or NaN where it is NaN (the library's rule)."""
    return _matches(vals, best, _nan_groups(best))


def pick(vals, pos, kind, tie, axis=0):
    """``(best value, its position)`` along ``axis`` of candidates ``vals`` with positions
    ``pos`` (the library's rule: NaN the extreme, ties by position, first or last)."""
    best = _RED[kind](vals, axis=axis, keepdims=True)
    eq = _held(vals, best)
    if tie == "first":
        p = np.where(eq, pos, np.iinfo(np.intp).max).min(axis=axis)
    else:
        p = np.where(eq, pos, -1).max(axis=axis)
    return np.squeeze(best, axis=axis), p


def _split(n, parts):
    """``parts`` (start, stop) ranges covering range(n), in order, none empty."""
    parts = max(1, min(parts, n))
    q, r = divmod(n, parts)
    out, s = [], 0
    for i in range(parts):
        e = s + q + (i < r)
        out.append((s, e))
        s = e
    return out


def _cut(s, e, most):
    """(s, e) cut into ranges of at most ``most``."""
    return [(a, min(e, a + most)) for a in range(s, e, most)]


# ------------------------------------------------------------------------------ rows

def _rows_last(x2, kind, keyed, r0, r1, out, rc):
    """The last extreme of rows r0..r1 of ``x2`` ((rows, n), C-contiguous) into ``out``
    (intp): chunks of ``rc`` rows are copied with their 8-byte words in reverse order, where
    NumPy's argmax/argmin meets the last word holding the extreme first; then the last
    extreme inside that word (of every row at once)."""
    n = x2.shape[1]
    isz = x2.dtype.itemsize
    keys = None if keyed is None else _Keys(keyed, kind, min(r1 - r0, rc) * n)
    f = _ARG[kind]
    if (n * isz) % 8:
        for s in range(r0, r1, rc):
            c = x2[s:min(r1, s + rc)]
            src = keys.of(c) if keys is not None else c
            out[s - r0:s - r0 + len(c)] = (n - 1) - f(src[:, ::-1], axis=1)
        return
    e = max(1, 8 // isz)                         # elements per word (a word per complex128)
    nw = n // e
    words = x2.view(_U64) if isz <= 8 else x2
    buf = np.empty(min(r1 - r0, rc) * nw, words.dtype)
    p = out                                      # the permuted positions first
    for s in range(r0, r1, rc):
        t = min(r1, s + rc)
        b = buf[:(t - s) * nw].reshape(t - s, nw)
        np.copyto(b, words[s:t, ::-1])
        vals = b.view(x2.dtype)
        f(keys.of(vals) if keys is not None else vals, axis=1, out=p[s - r0:t - r0])
    if e == 1:                                   # 8-byte values: the word is the element
        np.subtract(n - 1, p, out=out)
        return
    w = p // e                                   # the word, counted from the row's end
    rows = np.arange(r0, r1)
    cand = words[rows, (nw - 1) - w].view(x2.dtype).reshape(-1, e)
    if keys is not None:
        cand = _Keys(keyed, kind, cand.size).of(cand)
    best = cand[np.arange(r1 - r0), p - w * e]
    eq = _held(cand, best[:, None])
    np.subtract(nw - 1, w, out=out)
    out *= e
    out += (e - 1) - np.argmax(eq[:, ::-1], axis=1)


def _rows_part(x2, kind, tie, out, keyed, r0, r1):
    """Rows r0..r1 of ``x2`` into ``out[r0:r1]``, in chunks of about CHUNK elements (a long
    row by itself, as a flat input)."""
    n = x2.shape[1]
    if tie == "first" and keyed is None:
        _ARG[kind](x2[r0:r1], axis=1, out=out[r0:r1])
        return
    if n >= LONG_ROW:
        part = _flat_first_part if tie == "first" else _flat_last_part
        for r in range(r0, r1):
            out[r] = part(x2[r], kind, keyed, 0, n)[0]
        return
    rc = max(1, CHUNK // n)
    if tie == "last":
        _rows_last(x2, kind, keyed, r0, r1, out[r0:r1], rc)
        return
    keys = _Keys(keyed, kind, rc * n)
    for s in range(r0, r1, rc):
        e = min(r1, s + rc)
        _ARG[kind](keys.of(x2[s:e]), axis=1, out=out[s:e])


def work(a, tie, keyed):
    """The bytes of ``a`` as cupyops.core.threads weighs a call's work: NumPy's own
    argmax/argmin (tie "first") reads 1- and 2-byte integers two to four times as fast as
    4-byte values, so they count that much less."""
    if tie == "first" and keyed is None and a.dtype.itemsize < 4:
        return a.nbytes * a.dtype.itemsize // 4
    return a.nbytes


def rows_arg(x2, kind, tie, out, keyed=None):
    """The extreme's index in each row of ``x2`` ((rows, n), C-contiguous) into ``out``
    ((rows,) intp). ``keyed``: None, or the NaN magnitude of a 16-bit float type (0x7C00
    float16, 0x7F80 bfloat16) whose keys are compared."""
    rows, n = x2.shape
    threads = _threads.threads_for(work(x2, tie, keyed))
    if threads > 1 and rows < 2 * threads and n >= LONG_ROW:
        for r in range(rows):          # few long rows: each split among the threads
            out[r] = flat_arg(x2[r], kind, tie, keyed)
        return out
    if threads == 1:
        _rows_part(x2, kind, tie, out, keyed, 0, rows)
        return out
    ranges = _threads.split(rows, threads, x2.nbytes)
    _threads.run_parts(lambda r: _rows_part(x2, kind, tie, out, keyed, *r), ranges, threads)
    return out


# ------------------------------------------------------------------------------ flat

def _flat_first_part(flat, kind, keyed, s, e):
    """(index, value) of the first extreme of flat[s:e] (value: its key when keyed)."""
    if keyed is None:
        i = int(_ARG[kind](flat[s:e]))
        return s + i, flat[s + i]
    keys = _Keys(keyed, kind, min(CHUNK, e - s))
    best_i, best_k = -1, None
    for c in range(s, e, CHUNK):
        k = keys.of(flat[c:min(e, c + CHUNK)])
        i = int(_ARG[kind](k))
        v = int(k[i])
        if best_k is None or (v > best_k if kind == "max" else v < best_k):
            best_i, best_k = c + i, v
    return best_i, best_k


def _flat_last_part(flat, kind, keyed, s, e):
    """(index, value) of the last extreme of flat[s:e], every block searched from the end
    (keyed: the keys of each block)."""
    out = np.empty(1, np.intp)
    best_i, best_v = -1, None
    for c0 in range(s + ((e - s - 1) // CHUNK) * CHUNK, s - 1, -CHUNK):
        _rows_last(flat[c0:min(e, c0 + CHUNK)].reshape(1, -1), kind, keyed, 0, 1, out, 1)
        i = c0 + int(out[0])
        v = flat[i] if keyed is None else int(_Keys(keyed, kind, 1).of(flat[i:i + 1])[0])
        if best_v is None or _beats(v, best_v, kind):
            best_i, best_v = i, v
    return best_i, best_v


def _block_extremes(flat, kind, b0, b1):
    """The extremes of blocks b0..b1 of CHUNK elements of ``flat`` (NaN propagates)."""
    n = flat.size
    full = min(b1, n // CHUNK)
    parts = []
    if full > b0:
        parts.append(_RED[kind](flat[b0 * CHUNK:full * CHUNK].reshape(-1, CHUNK), axis=1))
    if b1 > full:                                     # the ragged last block
        parts.append(_RED[kind](flat[full * CHUNK:], keepdims=True))
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def _flat_last(flat, kind, threads):
    """The last extreme of a flat (non-keyed) input: the extremes of its blocks (in parts
    among the threads), then the last block holding the overall extreme, searched."""
    nb = -(-flat.size // CHUNK)
    ranges = _threads.split(nb, threads, flat.nbytes)
    bm = _threads.run_parts(lambda r: _block_extremes(flat, kind, *r), ranges, threads)
    bm = bm[0] if len(bm) == 1 else np.concatenate(bm)
    j = int(pick(bm, np.arange(nb), kind, "last")[1])
    out = np.empty(1, np.intp)
    _rows_last(flat[j * CHUNK:(j + 1) * CHUNK].reshape(1, -1), kind, None, 0, 1, out, 1)
    return j * CHUNK + int(out[0])


def _beats(v, w, kind):
    """Whether value ``v`` is strictly better than ``w`` (NaN the extreme)."""
    if v != v:
        return w == w
    if w != w:
        return False
    return v > w if kind == "max" else v < w


def _bool_first(flat, kind, threads):
    """argmax (first True) / argmin (first False) of a flat bool array: a probe, then ranges
    that double, each split among the threads; stops after the first range with a hit."""
    f = _ARG[kind]
    want = kind == "max"
    n = flat.size
    p = min(n, BOOL_PROBE)
    i = int(f(flat[:p]))
    if flat[i] == want or p == n:
        return i if flat[i] == want else 0
    start, width = p, 2 * p
    while start < n:
        stop = min(n, start + width)
        parts = _split(stop - start, threads)
        hits = _threads.run_parts(lambda r: int(f(flat[start + r[0]:start + r[1]])) + r[0],
                                  parts, threads)
        for h in hits:
            if flat[start + h] == want:
                return start + h
        start, width = stop, 2 * width
    return 0


def _bool_last(flat, kind):
    """The last True (argmax) / last False (argmin) of a flat bool array, searched from the
    end a chunk at a time (so it reads little past the answer)."""
    want = kind == "max"
    out = np.empty(1, np.intp)
    c0 = flat.size
    while c0 > 0:
        b0 = max(0, c0 - CHUNK)
        _rows_last(flat[b0:c0].reshape(1, -1), kind, None, 0, 1, out, 1)
        i = b0 + int(out[0])
        if flat[i] == want:
            return i
        c0 = b0
    return flat.size - 1


def flat_arg(flat, kind, tie, keyed=None):
    """The extreme's index in the 1-D contiguous ``flat`` (see :func:`rows_arg`)."""
    n = flat.size
    threads = _threads.threads_for(work(flat, tie, keyed))
    if flat.dtype == np.bool_:
        if tie == "first":
            return int(_ARG[kind](flat)) if threads == 1 else _bool_first(flat, kind, threads)
        return _bool_last(flat, kind)
    if tie == "first" and keyed is None and threads == 1:
        return int(_ARG[kind](flat))
    if tie == "last" and keyed is None:
        return _flat_last(flat, kind, threads)
    part = _flat_first_part if tie == "first" else _flat_last_part
    if threads == 1:
        return part(flat, kind, keyed, 0, n)[0]
    nb = -(-n // CHUNK)            # whole blocks of CHUNK elements per part
    ranges = [(s * CHUNK, min(n, e * CHUNK))
              for s, e in _threads.split(nb, threads, flat.nbytes)]
    res = _threads.run_parts(lambda r: part(flat, kind, keyed, *r), ranges, threads)
    vals = np.array([v for _, v in res], dtype=flat.dtype if keyed is None else _I16)
    _, p = pick(vals, np.arange(len(res)), kind, tie)
    return res[int(p)][0]


# ------------------------------------------------------------------------------ fold

class _Fold:
    """One range of rows of a fold: chunks of ``w`` rows met in order (tie "first") or from
    the end (tie "last"), so a later chunk wins a slot only when it is strictly better."""

    __slots__ = ("sub", "L", "w", "rs", "reverse", "nch")

    def __init__(self, V, rs, re, r0, tie):
        self.sub, self.L, self.rs = V[:, rs:re, :], re - rs, rs
        self.w = min(r0, self.L)
        self.reverse = tie == "last"
        self.nch = -(-self.L // self.w)

    def chunk(self, k):
        """(chunk k's rows, the slots they fill)."""
        L, w = self.L, self.w
        if self.reverse:
            s, e = max(0, L - (k + 1) * w), L - k * w
            return self.sub[:, s:e, :], slice(w - (e - s), w)
        s = k * w
        e = min(L, s + w)
        return self.sub[:, s:e, :], slice(0, e - s)

    def rows(self, k, s):
        """The row of slot ``s`` of chunk ``k``."""
        if self.reverse:
            return self.rs + self.L - (k + 1) * self.w + s
        return self.rs + k * self.w + s


def _fold_range(V, kind, tie, keyed, r0, rs, re, nan_aware):
    """Best (values, rows) of every group of V[:, rs:re, :]: a running extreme over chunks
    of ``r0`` rows (at most FOLD_IDX_MAX + 1 of them), with the chunk number of each slot's
    best; itemsize-1 types stop once every group holds the type's extreme."""
    fold = _Fold(V, rs, re, r0, tie)
    A, _, C = V.shape
    w = fold.w
    keys = None if keyed is None else _Keys(keyed, kind, A * w * C)
    first = fold.chunk(0)[0]
    m = keys.of(first).copy() if keys is not None else first.copy()
    idx = np.zeros((A, w, C), np.int8)
    b = np.empty((A, w, C), np.bool_)
    t = np.empty((A, w, C), np.int8)
    nan_b = np.empty((A, w, C), np.bool_) if nan_aware else None
    check = _first_check(m, kind, fold.nch, b) if m.dtype.itemsize == 1 else fold.nch
    beat, ext = _BEAT[(kind, "first")], _EXT[kind]
    for k in range(1, fold.nch):
        if k == check:
            if _settled(m, _extreme(m.dtype, kind), b):
                break
            check += max(1, check // 4)
        ch, sl = fold.chunk(k)
        if keys is not None:
            ch = keys.of(ch)
        mm, bb, tt, ii = m[:, sl], b[:, sl], t[:, sl], idx[:, sl]
        beat(ch, mm, out=bb)
        if nan_aware:
            nn = nan_b[:, sl]
            np.copyto(nn, np.isnan(ch))   # (NumPy 2.4's isnan into a strided out: wrong)
            nn &= ~np.isnan(mm)
            bb |= nn
        ext(mm, ch, out=mm)
        np.multiply(bb.view(np.int8), np.int8(k), out=tt)
        np.maximum(ii, tt, out=ii)
    return _slot_pick(m, idx, kind, fold)


def _extreme(dtype, kind):
    """The value no other value of ``dtype`` (bool, int8, uint8) beats for ``kind``."""
    if dtype == np.bool_:
        return kind == "max"
    info = np.iinfo(dtype)
    return info.max if kind == "max" else info.min


def _first_check(m, kind, nch, scratch):
    """The chunk before which the fold first checks whether every group already holds the
    type's extreme (nothing can beat it): from the share of slots that hold it after the
    first chunk, the number of chunks after which every group likely does (then every
    quarter of that again); ``nch`` (never) where fewer than two chunks would be left."""
    groups = m.shape[0] * m.shape[2]
    p = np.count_nonzero(np.equal(m, _extreme(m.dtype, kind), out=scratch)) / m.size
    if p <= 0:
        return nch
    if p >= 1:
        return 1
    # every group holds it after k chunks with probability exp(-groups (1 - p)^(k w))
    k = math.ceil(math.log(8 * groups) / (-m.shape[1] * math.log1p(-p)))
    return max(1, k) if k < nch - 1 else nch


def _settled(m, extreme, scratch):
    """Whether every group of the slots ``m`` ((A, w, C)) holds ``extreme`` (``scratch``: a
    bool array of m's shape): OR of halves along the slots, on contiguous memory."""
    e = np.equal(m, extreme, out=scratch)
    h = e.shape[1]
    while h > 1:
        half = h // 2
        np.logical_or(e[:, :half], e[:, h - half:h], out=e[:, :half])
        h -= half
    return bool(e[:, 0].all())


def _slot_pick(m, idx, kind, fold):
    """Each group's best of the fold's slots ``m`` ((A, w, C) values, ``idx`` the chunk of
    each): the lowest chunk number among the best, then its first slot (its last when the
    chunks were met from the end); transposed once so that every step runs along contiguous
    memory. Returns (values (A, C), rows (A, C))."""
    A, w, C = m.shape
    if C >= w:
        return _slot_pick_wide(m, idx, kind, fold)
    mt = m.transpose(0, 2, 1).reshape(A * C, w)          # copies (contiguous)
    it = idx.transpose(0, 2, 1).reshape(A * C, w)
    best = _RED[kind](mt, axis=1)
    eq = _held(mt, best[:, None])
    other = np.invert(eq).view(np.int8)
    other *= np.int8(127)                                # 127 where not the best
    k = np.bitwise_or(it, other).min(axis=1)
    eq &= it == k[:, None]
    if fold.reverse:
        s = (eq.view(np.uint8) * np.arange(w, dtype=np.uint8 if w <= 256 else np.intp)).max(
            axis=1)
    else:
        s = np.argmax(eq, axis=1)
    return best.reshape(A, C), fold.rows(k.astype(np.intp), s).reshape(A, C)


def _slot_pick_wide(m, idx, kind, fold):
    """:func:`_slot_pick` where the groups of a slab (C) outnumber the slots (w): along the
    slots in place, C contiguous elements a step."""
    A, w, C = m.shape
    best = _RED[kind](m, axis=1, keepdims=True)
    eq = _held(m, best)
    other = np.invert(eq).view(np.int8)
    other *= np.int8(127)
    k = np.bitwise_or(idx, other).min(axis=1, keepdims=True)
    eq &= idx == k
    if fold.reverse:
        sl = np.arange(w, dtype=np.uint8 if w <= 256 else np.intp).reshape(1, w, 1)
        s = (eq.view(np.uint8) * sl).max(axis=1)
    else:
        s = np.argmax(eq, axis=1)
    return best.reshape(A, C), fold.rows(k.reshape(A, C).astype(np.intp), s)


def _fold_part(V, kind, tie, keyed, r0, rs, re):
    if V.dtype.kind == "c":
        # (NumPy warns where complex NaN meet an ordering comparison; they lose it as floats do)
        with np.errstate(invalid="ignore"):
            return _fold_nan_aware(V, kind, tie, keyed, r0, rs, re)
    return _fold_nan_aware(V, kind, tie, keyed, r0, rs, re)


def _fold_nan_aware(V, kind, tie, keyed, r0, rs, re):
    """:func:`_fold_range`, again with NaN-aware comparisons where the range meets NaN."""
    vals, pos = _fold_range(V, kind, tie, keyed, r0, rs, re, False)
    if keyed is None and vals.dtype.kind in "fc" and np.isnan(vals).any():
        vals, pos = _fold_range(V, kind, tie, keyed, r0, rs, re, True)
    return vals, pos


# ------------------------------------------------------------------------------ fold, found

def _find_rows(V, keyed, tiles, r0):
    """The rows a chunk of :func:`_fold_find` over V's tiles, or 0 where the fold runs as a
    running extreme: real types of 2 to 8 bytes, whole C-contiguous slabs, at least
    :data:`FIND_MIN_ROWS` rows a chunk and as many as chunks (the lookup then reads about as
    many values as there are slots; shorter chunks search badly where the extreme recurs).
    Chunks are longer than the running fold's (``r0``) where the slots stay within
    :data:`FIND_SLOT_BYTES` and an eighth of the rows."""
    A, R, C = V.shape
    a0, a1, c0, c1 = tiles[0]
    if (keyed is not None or V.dtype.kind not in "iuf" or not 2 <= V.dtype.itemsize <= 8
            or not V.flags.c_contiguous or c1 - c0 != C):
        return 0
    most = FIND_SLOT_BYTES // V.dtype.itemsize // ((a1 - a0) * C)
    w = min(R, max(r0, min(most, R // 8)))
    return w if w >= FIND_MIN_ROWS and -(-R // w) <= w else 0


def _fold_find(V, kind, tie, r0, rs, re):
    """:func:`_fold_range` as one reduction and a lookup (see :func:`_find_rows`): the extreme of
    every slot (row s + k w of the range, k = 0, 1, ...), the group's extreme among its slots,
    then its first or last row among the slots that hold it. Returns (values (A, C), rows
    (A, C))."""
    A, _, C = V.shape
    L = re - rs
    w = min(r0, L)
    nfull, tail = divmod(L, w)
    slots = _RED[kind](V[:, rs:rs + nfull * w, :].reshape(A, nfull, w * C), axis=1)
    slots = slots.reshape(A, w, C)
    if tail:
        _EXT[kind](slots[:, :tail], V[:, re - tail:re, :], out=slots[:, :tail])
    if C < w:       # (a reduction over the slots' axis runs C values a step: copied first)
        best = _RED[kind](slots.transpose(0, 2, 1).copy(), axis=2)   # NaN propagates
    else:
        best = _RED[kind](slots, axis=1)
    nan = _nan_groups(best)
    held = _matches(slots, best[:, None, :], None if nan is None else nan[:, None, :])
    return best, _rows_looked_up(V, held, w, rs, re, best, nan, tie)


def _rows_gathered(V, holders, w, nch, rs, re, best, nan, tie):
    """The extreme's row of every group of V[:, rs:re, :]: every chunk's value in the slots
    that hold the group's extreme (``holders``, flat indices of the slots (A, w, C)), compared
    with it; the first (tie "first") or last row of a match in each group. Holders a batch at
    a time: a batch's temporaries take about 30 bytes a value, FIND_SLOT_BYTES in all."""
    A, _, C = V.shape
    first = tie == "first"
    out = np.full(A * C, np.iinfo(np.intp).max if first else -1, np.intp)
    batch = max(1, FIND_SLOT_BYTES // (32 * nch))
    for b0 in range(0, holders.size, batch):
        group, row = _holders_rows(V, holders[b0:b0 + batch], w, nch, rs, re, best, nan, first)
        (np.minimum if first else np.maximum).at(out, group, row)
    return out.reshape(A, C)


def _holders_rows(V, holders, w, nch, rs, re, best, nan, first):
    """(group, the first or last row of a match) of each of ``holders``."""
    _, R, C = V.shape
    a_slot, c = np.divmod(holders, C)
    a, slot = np.divmod(a_slot, w)
    group = a * C + c
    rows = (rs + slot)[:, None] + w * np.arange(nch)          # (holders, nch)
    inside = rows < re
    flat = np.minimum(rows, re - 1)
    flat += (a * R)[:, None]
    flat *= C
    flat += c[:, None]
    vals = np.take(V.reshape(-1), flat)
    hit = _matches(vals, best.reshape(-1)[group][:, None],
                   None if nan is None else nan.reshape(-1)[group][:, None])
    hit &= inside                  # every holder has a match: its slot's extreme is a value
    k = np.argmax(hit, axis=1) if first else nch - 1 - np.argmax(hit[:, ::-1], axis=1)
    return group, rows[np.arange(holders.size), k]


def _rows_looked_up(V, held, w, rs, re, best, nan, tie):
    """The extreme's row of every group of V[:, rs:re, :] (chunks of ``w`` rows; ``held``: the
    slots (A, w, C) that hold the group's extreme ``best``): the chunks compared with it from
    the end the tie prefers (the first chunk up for "first", the last down for "last") while
    that costs less than gathering, then the holders of the groups still without a match
    gathered (:func:`_rows_gathered`). A frequent extreme ends the search early, a rare one
    is gathered at once."""
    A, _, C = V.shape
    nch = -(-(re - rs) // w)
    rows = np.empty((A, C), np.intp)
    found = np.zeros((A, C), np.bool_)
    left, search, holders, unmatched = held, None, None, A * C
    for i, k in enumerate(range(nch) if tie == "first" else range(nch - 1, -1, -1)):
        if holders is None:               # (first, and after a chunk that matched groups)
            if i:
                left = held & ~found[:, None, :]
                unmatched = A * C - np.count_nonzero(found)
            holders = np.count_nonzero(left)
        if holders * nch * GATHER_COST <= A * C * w * _chunks_to_search(
                holders, unmatched, nch - i):
            got = _rows_gathered(V, np.flatnonzero(left), w, nch, rs, re, best, nan, tie)
            np.copyto(rows, got, where=~found)
            break
        search = search or _Search(best, nan, w)
        r0 = rs + k * w
        first = search.chunk(V[:, r0:min(re, r0 + w), :], tie)
        if first is not None:
            new = first[1] & ~found
            np.copyto(rows, first[0] + r0, where=new)
            found |= new
            if found.all():
                break
            holders = None
    return rows


def _chunks_to_search(holders, groups, chunks):
    """About how many of ``chunks`` a search reads before each of ``groups`` meets its extreme,
    ``holders`` slots holding them in all: h = holders / groups matches a group, spread over
    the chunks, leave a group unmatched after j chunks with odds (1 - j / chunks)^h; the
    search ends where groups x odds falls to one half."""
    h = max(1.0, holders / max(1, groups))
    return max(1.0, chunks * (1.0 - (0.5 / max(1, groups)) ** (1.0 / h)))


class _Search:
    """Each group's first (tie "first") or last match of its extreme in a chunk of rows."""

    __slots__ = ("want", "nan", "hits")

    def __init__(self, best, nan, w):
        A, C = best.shape
        self.want = np.broadcast_to(best[:, None, :], (A, w, C)).copy()  # as the chunks
        self.nan = None if nan is None else np.broadcast_to(nan[:, None, :], (A, w, C)).copy()
        self.hits = np.empty((A, w, C), np.bool_)

    def chunk(self, ch, tie):
        """(the slot of each group's match in ``ch`` (A, n, C), whether it has one), or None
        where no group has."""
        n = ch.shape[1]
        hit = self.hits[:, :n]
        np.equal(ch, self.want[:, :n], out=hit)
        if self.nan is not None:
            hit |= np.isnan(ch) & self.nan[:, :n]
        if not hit.any():                 # (a contiguous check: most chunks of a long search)
            return None
        if tie == "first":
            s = np.argmax(hit, axis=1)
        else:
            s = n - 1 - np.argmax(hit[:, ::-1], axis=1)
        return s, np.take_along_axis(hit, s[:, None, :], axis=1)[:, 0]


def _fold_tiles(A, R, C, itemsize):
    """Tiles (a0, a1, c0, c1) of the (A, C) groups, each with a slab of at most CHUNK
    elements (half of it for 8- and 16-byte items: the chunk, its running extreme and their
    temporaries then stay in a 1 MiB L2, a tenth faster) where it can be, and the rows per
    chunk of the fold."""
    chunk = CHUNK if itemsize <= 4 else CHUNK * 4 // itemsize
    if A * C <= chunk:
        tiles = [(0, A, 0, C)]
    elif C <= chunk:
        step = max(1, chunk // C)
        tiles = [(a, min(A, a + step), 0, C) for a in range(0, A, step)]
    else:
        tiles = [(a, a + 1, c, min(C, c + chunk)) for a in range(A) for c in range(0, C, chunk)]
    a0, a1, c0, c1 = tiles[0]
    return tiles, max(1, min(R, chunk // ((a1 - a0) * (c1 - c0))))


_UINT = {1: np.dtype(np.uint8), 2: np.dtype(np.uint16), 4: np.dtype(np.uint32), 8: _U64}


def _copy_transposed(b, block):
    """``b[:] = block.transpose(0, 2, 1)`` through unsigned integers of the item's size
    (NumPy's strided copy of 8-byte items runs about a tenth faster so than of complex64)."""
    u = _UINT.get(b.dtype.itemsize)
    if u is not None and b.dtype.kind != "V":
        b, block = b.view(u), block.view(u)
    np.copyto(b, block.transpose(0, 2, 1))


def _transpose_block(dtype):
    """Values a block of :func:`_transposed` copies: :data:`TRANSPOSE_BYTES` of them, at
    least :data:`CHUNK` (fewer, larger copies: 256 Ki float32 values ran 0.77x the time of
    64 Ki, blocks of 16 Ki 1.5-10x)."""
    return max(CHUNK, TRANSPOSE_BYTES // dtype.itemsize)


def _transposed(V, kind, tie, keyed):
    """:func:`fold_arg` by blocks of slabs copied transposed into a small buffer (each group a
    contiguous row; tie "last": read from the last row up), then NumPy's argmax/argmin along
    the rows; blocks of rows of a tall slab combined by :func:`pick`. The blocks of slabs are
    shared among the threads, each with its own buffer."""
    A, R, C = V.shape
    block = _transpose_block(V.dtype)
    rb = min(R, max(1, block // C))                      # rows per block
    ab = max(1, block // (rb * C))                       # slabs per block
    src = V[:, ::-1, :] if tie == "last" else V
    f = _ARG[kind]
    out = np.empty((A, C), np.intp)
    blocks = [(a0, min(A, a0 + ab)) for a0 in range(0, A, ab)]

    def run(part):
        buf = np.empty((min(A, ab), C, rb), V.dtype)
        keys = None if keyed is None else _Keys(keyed, kind, buf.size)
        for a0, a1 in blocks[part[0]:part[1]]:
            vals, pos = [], []
            for r0 in range(0, R, rb):
                r1 = min(R, r0 + rb)
                b = buf[:a1 - a0, :, :r1 - r0]
                _copy_transposed(b, src[a0:a1, r0:r1, :])
                if keys is not None:
                    b = keys.of(b)
                i = f(b, axis=2)
                if rb < R:
                    vals.append(np.take_along_axis(b, i[..., None], axis=2)[..., 0])
                pos.append(i + r0)
            p = pos[0] if len(pos) == 1 else pick(np.stack(vals), np.stack(pos), kind,
                                                  "first")[1]
            out[a0:a1] = (R - 1) - p if tie == "last" else p

    threads = _threads.threads_for(V.nbytes)
    _threads.run_parts(run, _threads.split(len(blocks), threads, V.nbytes), threads)
    return out


def fold_arg(V, kind, tie, keyed=None):
    """The extreme's row in each group ``V[a, :, c]`` of ``V`` ((A, R, C), a view of a
    C-contiguous array): (A, C) intp. Tall slabs of at least 1 MiB are folded as one
    reduction and a lookup (:func:`_fold_find`); other narrow slabs are copied transposed a
    block at a time (:func:`_transposed`), NumPy's way but in bounded memory (one read of the
    input, as a fold; 0.2-1.0 of the fold's time), except 1-byte ones of at least 1 MiB (the
    fold stops at the type's extreme) and, from 1 MiB, slabs of more than
    :data:`TRANSPOSE_MAX_R` rows (1.2-2.9x the fold's time); the others are folded as a
    running extreme."""
    A, R, C = V.shape
    if V.size == 0:
        return np.zeros((A, C), np.intp)
    tiles, r0 = _fold_tiles(A, R, C, V.dtype.itemsize)
    w = _find_rows(V, keyed, tiles, r0) if V.nbytes >= FOLD_MIN_BYTES else 0
    if not w and C <= TRANSPOSE_MAX_C and (V.nbytes < FOLD_MIN_BYTES or V.dtype.kind == "c" or (
            V.dtype.itemsize > 1 and R <= TRANSPOSE_MAX_R)):
        return _transposed(V, kind, tie, keyed)      # (complex: argmax beats its comparisons)
    r0 = w or r0
    span = r0 * (FOLD_IDX_MAX + 1)
    nch = -(-R // r0)
    ranges = [(s, min(R, s + span)) for s in range(0, R, span)]
    threads = _threads.threads_for(V.nbytes)
    if threads > 1 and len(tiles) * len(ranges) < 4 * threads:
        # finer ranges for the threads (whole chunks each, at most 128 chunks a range)
        ranges = [(s * r0, min(R, e * r0))
                  for s, e in _threads.split(nch, threads, V.nbytes // len(tiles))
                  for s, e in _cut(s, e, FOLD_IDX_MAX + 1)]
    if tie == "last":
        ranges = ranges[::-1]              # met from the end (see _Fold)
    fold = _fold_find if w else functools.partial(_fold_part, keyed=keyed)

    def run(part):
        (a0, a1, c0, c1), (rs, re) = part
        return fold(V[a0:a1, :, c0:c1], kind, tie, r0=r0, rs=rs, re=re)
    results = {t: [] for t in tiles}
    todo = [(t, r) for t in tiles for r in ranges]
    if V.dtype.itemsize == 1 and len(ranges) > 1:
        # a tile whose first range gives every group the type's extreme is done: nothing
        # later can beat it (the rest of its rows is never read)
        first = [(t, ranges[0]) for t in tiles]
        ext = _extreme(V.dtype, kind)
        for part, res in zip(first, _threads.run_parts(run, first, threads)):
            results[part[0]].append(res)
        todo = [(t, r) for t in tiles if not (results[t][0][0] == ext).all()
                for r in ranges[1:]]
    for part, res in zip(todo, _threads.run_parts(run, todo, threads)):
        results[part[0]].append(res)
    if len(tiles) == 1 and len(results[tiles[0]]) == 1:
        return results[tiles[0]][0][1]
    out = np.empty((A, C), np.intp)
    for (a0, a1, c0, c1), mine in results.items():
        if len(mine) == 1:
            out[a0:a1, c0:c1] = mine[0][1]
        else:
            out[a0:a1, c0:c1] = pick(np.stack([v for v, _ in mine]),
                                     np.stack([p for _, p in mine]), kind, tie)[1]
    return out
