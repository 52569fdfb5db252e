"""NumPy (CPU) path of argmin / argmax / hardmax over any set of axes, with a tie direction.

Contract (docs/design.md, "Contracts between the layers"): ``_api.py`` has validated everything.
``x`` is an ndarray of a supported dtype with any strides (negative, zero, unaligned, non-native
byte order, read-only); ``axes`` is a sorted, non-empty tuple of distinct non-negative ints;
``out`` is ``None`` or an array of exactly the result shape and dtype.  ``x`` is never copied
whole and never written.

How it works
------------
1. *Canonical form.*  Reduced axes of length 1 are dropped; reduced axes with a zero stride
   (broadcast) hold equal values, so the tie rule decides along them without reading them
   (coordinate 0 for ``tie="first"``, n-1 for ``"last"``).  Kept axes with a zero stride give a
   result constant along them: we solve for index 0 and broadcast.  Neighbouring kept axes and
   neighbouring reduced axes whose strides allow it are merged.  If every reduced axis runs
   backwards in memory they are all flipped, which reverses the (lexicographic) order of the
   reduced group exactly, so ``tie`` is swapped and the index mirrored.  The result is a view
   ``V`` (kept dims..., reduced dims...) made with ``as_strided``; the answer is first computed
   as the *compact* row-major index over V's reduced dims, then mapped to the index over the
   original reduced axes.
2. *Kept chunks.*  The kept positions are processed in C-order ranges (one numpy view each),
   so temporaries stay bounded whatever the input size; each range writes its slice of the
   flat result directly.
3. *Engines* (``_plan`` picks one per view; every one reads the input in place or in bounded
   pieces, never as a whole copy):
   - ``rowblock`` (the last reduced dim is contiguous, or kept dims are the fastest in memory
     but only in short runs): the last reduced dim is cut in blocks; NumPy's SIMD
     ``argmax``/``argmin`` runs along every block at once, walking the other dims in memory
     order so that a contiguous input is scanned in place (otherwise pieces of at most
     ``CHUNK_ELEMS`` elements are copied -- transposed, byte-swapped -- into a native buffer).
     tie="first" with one block per group is just NumPy's argmax.  tie="last": short rows are
     scanned reversed (bounded in-cache copy), long rows in blocks of ~sqrt(16 n) elements
     whose winner is then gathered and located, so the input is read once.
   - ``twolevel`` (reductions not along the fastest dim, e.g. axis 0 of a C matrix): the same
     block scheme with ``np.max``/``np.min`` over (run along one reduced dim x all later
     reduced dims), which NumPy computes as a streaming elementwise max down the rows.
   - In both block engines the winning block per kept position is the same problem on the
     much smaller block-extreme array (recursion: blocks are consecutive in index order and
     max/min/argmax propagate NaN, so ties and the NaN rule carry over); only the winning
     block is gathered (contiguous runs, NumPy's sub-space copy) and located: ``eq = (g == m)``
     (or'ed with ``isnan`` only when some extreme is NaN), first True by ``argmax`` on the
     bool rows, last True via the last non-zero 8-byte word of each row.
   - ``scan`` (small groups, or kept dims the fastest in memory in long runs and groups too
     small for blocks): extreme by a chain of ``np.maximum``/``np.minimum``, then one masked
     index write per group element, visited from the losing end.
   - ``base`` (moderate groups otherwise): extreme, equality mask into a C-order bool buffer,
     first/last True per row; kept chunks keep the buffer at ``CHUNK_ELEMS``.
"""
from __future__ import annotations

import math

import numpy as np
from numpy.lib.stride_tricks import as_strided

from cupyops.ops.argreduce.nan_groups import all_nan_error

__all__ = ["argreduce", "nanargreduce", "hardmax"]

# Tunables (module-level so tests can monkeypatch them small to exercise the chunk logic).
CHUNK_ELEMS = 1 << 18       # input elements per chunk for engines that make input-sized temporaries
BIG_ELEMS = 1 << 24         # input elements per kept chunk for the block engines (views, no copy)
BLOCKS_BUDGET = 1 << 21     # block entries (per-block extremes / positions) per kept chunk
ROW_BLOCK = 1024            # least block size in bytes along a contiguous last reduced dim (tie="last")
ROW_K = 16                  # tie="last" block length ~ sqrt(ROW_K * n) (see _plan)
INNER_BLOCK = 4096          # block size (elements) when a non-last reduced dim is the fastest in memory
OUTER_BLOCK = 32            # block size when a kept dim is the fastest in memory
MAX_BLOCKS = 1 << 20        # at most this many blocks per kept position
TWOLEVEL_MIN_BLOCKS = 4     # max-based two-level engine when the group holds >= this many blocks
COPY_RUN = 16               # kept runs up to this long below the reduced dims: copy-transpose engine
SCAN_MAX = 8                # groups of at most this many elements: running-best scan
SCAN_CHUNK = 1 << 16        # kept positions per chunk of the scan engine
KEPT_CHUNK = 1 << 18        # kept positions per chunk, whatever the engine
HARDMAX_CHUNK = 1 << 20     # kept positions per hardmax scatter chunk


def _prod(seq) -> int:
    p = 1
    for v in seq:
        p *= int(v)
    return p


_F16 = np.dtype(np.float16)


def _f16_keys(a: np.ndarray, kind: str) -> np.ndarray:
    """int16 keys that order float16 values as floats do (NumPy's float16 arithmetic is slow,
    int16 is SIMD): -0.0 and +0.0 get the same key, every NaN gets the extreme key of ``kind``
    (NaN counts as the extreme).  ``a`` is a native float16 array; returns a new int16 array."""
    b = a.view(np.int16)
    sgn = np.right_shift(b, 15)                   # 0 or -1
    k = np.bitwise_and(sgn, 0x7FFF)
    np.bitwise_xor(k, b, out=k)                   # negative: flip magnitude bits
    np.subtract(k, sgn, out=k)                    # negative: +1, so -0.0 -> 0 like +0.0
    mag = np.bitwise_and(b, 0x7FFF)
    nan = mag > 0x7C00
    if nan.any():
        k[nan] = 32767 if kind == "max" else -32768
    return k


# --------------------------------------------------------------------------------------------
# locating the first / last True in each row of a 2-D C-contiguous bool array
# --------------------------------------------------------------------------------------------
def _locate(eq2: np.ndarray, width: int, tie: str) -> np.ndarray:
    """eq2: C-contiguous bool (rows, padded_width) whose columns >= width are False.
    Returns int64 column of the first (tie first) / last (tie last) True per row."""
    if tie == "first":
        return np.argmax(eq2, axis=1).astype(np.int64, copy=False)
    pw = eq2.shape[1]
    rows = eq2.shape[0]
    if pw % 8 == 0 and eq2.flags.c_contiguous and pw > 0:
        # last non-zero 8-byte word of each row, then the last True byte inside it
        words = eq2.view(np.uint64)
        nz = words[:, ::-1] != 0
        wl = (pw // 8 - 1) - np.argmax(nz, axis=1)
        w = words[np.arange(rows), wl]
        b8 = w.view(np.uint8).reshape(rows, 8)
        bl = 7 - np.argmax(b8[:, ::-1] != 0, axis=1)
        return wl.astype(np.int64) * 8 + bl
    return (pw - 1) - np.argmax(eq2[:, ::-1], axis=1).astype(np.int64, copy=False)


def _eq_buffer(kshape, rshape):
    """Zero-padded C-contiguous bool buffer (rows, ceil8(width)) and a writable view of it with
    shape kshape + rshape (rows = prod(kshape), width = prod(rshape))."""
    rows = _prod(kshape)
    width = _prod(rshape)
    pw = -(-width // 8) * 8
    buf = np.zeros((rows, pw), dtype=np.bool_)
    strides = []
    acc = 1
    for n in reversed(rshape):
        strides.append(acc)
        acc *= n
    acc = pw
    for n in reversed(kshape):
        strides.append(acc)
        acc *= n
    view = as_strided(buf, shape=tuple(kshape) + tuple(rshape), strides=tuple(reversed(strides)))
    return buf, view


# --------------------------------------------------------------------------------------------
# the engines: V has nk kept dims then reduced dims; each returns the compact index (int64,
# flat C order over the kept dims) of the extreme inside each group
# --------------------------------------------------------------------------------------------
def _plan(shape, strides, nk, tie, itemsize):
    """Engine for a view: ("scan" | "rowblock" | "twolevel" | "base", block parameter)."""
    rshape = shape[nk:]
    R = _prod(rshape)
    n = rshape[-1]
    if R <= SCAN_MAX and not (n == R and strides[-1] == itemsize and tie == "first"):
        return "scan", 0
    if strides[-1] == itemsize and n > 1 and R // n <= MAX_BLOCKS:
        # (float16 goes through bounded copies turned into int16 keys, see _argblocks)
        # the last reduced dim is contiguous: blocks along it, NumPy's argmax inside each block
        return "rowblock", _row_block(n, R, tie, itemsize)
    rstr = [abs(s) for m, s in zip(rshape, strides[nk:]) if m > 1]
    kstr = [abs(s) for m, s in zip(shape[:nk], strides[:nk]) if m > 1]
    inner_mode = (not kstr) or (min(rstr) <= min(kstr))
    if not inner_mode:
        # kept dims are the fastest in memory; if their run below the reduced dims is short,
        # NumPy's reductions crawl (tiny inner loops): copy pieces transposed, argmax those
        run = _prod(m for m, s in zip(shape[:nk], strides[:nk]) if m > 1 and abs(s) < min(rstr))
        if run <= COPY_RUN and R // n <= MAX_BLOCKS:
            return "rowblock", _row_block(n, R, "copy", itemsize)
        gt = max(OUTER_BLOCK, -(-R // MAX_BLOCKS), 1)
        if R >= TWOLEVEL_MIN_BLOCKS * gt:
            return "twolevel", gt
        return "scan", 0   # a long contiguous kept run: each pass is a fast SIMD op
    # a reduced dim is the fastest in memory but not the last one (e.g. F order): long blocks
    gt = max(INNER_BLOCK, -(-R // MAX_BLOCKS), 1)
    if R >= TWOLEVEL_MIN_BLOCKS * gt:
        return "twolevel", gt
    return "base", 0


def _row_block(n, R, tie, itemsize):
    """Block length along the last reduced dim (length n, group size R) for the row engine."""
    # tie last gathers the winning block again: cost ~ n/speed + (n/B) * per-block overhead
    # + B * gather cost, so B ~ sqrt(ROW_K * n), and at least ROW_BLOCK bytes
    bt = max(2, ROW_BLOCK // itemsize, math.isqrt(ROW_K * n))
    bt = min(max(bt, -(-R // MAX_BLOCKS)), n)     # at most MAX_BLOCKS blocks (R // n <= it)
    if tie == "copy":
        return min(n, bt)
    if tie == "first" or n <= 2 * bt:
        return n
    for B in range(bt, 4 * bt + 1):   # a divisor keeps the block view exact (no copy)
        if n % B == 0:
            return B
    for B in range(bt - 1, bt // 2, -1):
        if n % B == 0:
            return B
    return bt


def _solve(V: np.ndarray, nk: int, kind: str, tie: str, is_float: bool) -> np.ndarray:
    kshape = V.shape[:nk]
    Kc = _prod(kshape)
    R = _prod(V.shape[nk:])
    if Kc == 0:
        return np.zeros(0, np.int64)
    if R == 1:
        return np.zeros(Kc, np.int64)
    if 1 in V.shape:
        # size-1 dims change neither the flat kept order nor the compact group order
        nk = sum(1 for m in kshape if m != 1)
        V = V[tuple(0 if m == 1 else slice(None) for m in V.shape)]
    eng, param = _plan(V.shape, V.strides, nk, tie, V.dtype.itemsize)
    if eng == "scan":
        return _scan(V, nk, kind, tie, is_float)
    if eng == "rowblock":
        return _blocks(V, nk, kind, tie, is_float, L=V.ndim - nk - 1, B=param, use_arg=True)
    if eng == "twolevel":
        return _twolevel(V, nk, kind, tie, is_float, param)
    return _base(V, nk, kind, tie, is_float)


def _reduce(V, axes, kind, keepdims=False):
    if kind == "max":
        return np.max(V, axis=axes, keepdims=keepdims)
    return np.min(V, axis=axes, keepdims=keepdims)


def _scan(V, nk, kind, tie, is_float):
    """Small groups: one vectorised pass per group element.  The extreme by a chain of
    np.maximum / np.minimum (NaN propagates), then the group elements are visited from the
    losing end (last to first for tie first, first to last for tie last), each equal one
    overwriting the index."""
    kshape = V.shape[:nk]
    rshape = V.shape[nk:]
    R = _prod(rshape)
    cols = [V[(Ellipsis,) + tuple(int(c) for c in np.unravel_index(r, rshape))] for r in range(R)]
    nd = V.dtype if V.dtype.isnative else V.dtype.newbyteorder("=")
    m = np.empty(kshape, dtype=nd)
    m[...] = cols[0]
    ext = np.maximum if kind == "max" else np.minimum
    for c in cols[1:]:
        ext(m, c, out=m)
    nan = is_float and bool(np.isnan(m).any())
    bi = np.zeros(kshape, dtype=np.int64)
    eq = np.empty(kshape, dtype=np.bool_)
    for r in (range(R - 1, -1, -1) if tie == "first" else range(R)):
        np.equal(cols[r], m, out=eq)
        if nan:
            # a NaN can only sit in groups whose extreme is NaN
            eq |= np.isnan(cols[r])
        np.copyto(bi, r, where=eq)
    return bi.reshape(-1)


def _base(V, nk, kind, tie, is_float):
    """Moderate groups: extreme, equality mask into a bool buffer, first/last True per row."""
    kshape = V.shape[:nk]
    R = _prod(V.shape[nk:])
    raxes = tuple(range(nk, V.ndim))
    m = _reduce(V, raxes, kind, keepdims=True)
    buf, eq = _eq_buffer(kshape, V.shape[nk:])
    np.equal(V, m, out=eq)
    if is_float and np.isnan(m).any():
        # only groups whose extreme is NaN hold NaN (max/min propagate it)
        eq |= np.isnan(V)
    return _locate(buf, R, tie)


def _memory_order(strides):
    """Permutation putting dims in decreasing |stride| (the memory order of a C-like walk)."""
    return sorted(range(len(strides)), key=lambda i: -abs(strides[i]))


def _argblocks(Vb, kind, need_values=True):
    """argmax/argmin along the last axis of Vb, walking the other dims in memory order (so a
    contiguous input is not copied by NumPy); returns (positions, values or None) in Vb's dim
    order.  An input NumPy cannot scan in place (gaps, read-only, non-native byte order) is
    copied piece by piece into a native contiguous buffer of at most CHUNK_ELEMS elements;
    float16 always is, and its values come back as int16 keys (see _f16_keys)."""
    no = Vb.ndim - 1
    order = _memory_order(Vb.strides[:no])
    inv = np.argsort(order).tolist()
    W = Vb.transpose(order + [no])
    f = np.argmax if kind == "max" else np.argmin
    Bn = W.shape[-1]
    keyed = W.dtype.newbyteorder("=") == _F16
    if W.flags.c_contiguous and W.flags.writeable and W.dtype.isnative and not keyed:
        Aw = f(W, axis=-1)
        mw = None
        if need_values:
            flat = np.arange(0, Aw.size * Bn, Bn, dtype=np.intp)
            flat += Aw.reshape(-1)
            mw = W.reshape(-1)[flat].reshape(Aw.shape)
    elif Bn > max(CHUNK_ELEMS, 2):
        # rows too long for one bounded copy: cut them in sub-blocks, then pick the first
        # sub-block holding the extreme (argmax semantics: first extreme, first NaN)
        S = max(CHUNK_ELEMS, 2)
        nsub = Bn // S
        rem = Bn - nsub * S
        sub = as_strided(W, shape=W.shape[:-1] + (nsub, S),
                         strides=W.strides[:-1] + (S * W.strides[-1], W.strides[-1]))
        a1, m1 = _argblocks(sub, kind)
        parts = [(a1, m1)]
        if rem:
            a2, m2 = _argblocks(W[..., nsub * S:], kind)
            parts.append((a2[..., None], m2[..., None]))
        A = np.concatenate([p[0] for p in parts], axis=-1) if rem else a1
        M = np.concatenate([p[1] for p in parts], axis=-1) if rem else m1
        nkw = W.ndim - 1
        k = _solve(M, nkw, kind, "first", M.dtype.kind == "f")   # keys (int16) for float16
        rows = np.arange(k.size)
        Aw = (k * S + A.reshape(k.size, -1)[rows, k]).reshape(W.shape[:-1])
        mw = M.reshape(k.size, -1)[rows, k].reshape(W.shape[:-1]) if need_values else None
    else:
        oshape = W.shape[:-1]
        nd = W.dtype if W.dtype.isnative else W.dtype.newbyteorder("=")
        Aw = np.empty(oshape, np.intp)
        mw = np.empty(oshape, np.int16 if keyed else nd) if need_values else None
        Af = Aw.reshape(-1)
        mf = mw.reshape(-1) if need_values else None
        for start, count, index in _kept_chunks(oshape, max(1, CHUNK_ELEMS // max(Bn, 1))):
            piece = W[index]
            c = np.empty(piece.shape, nd)
            np.copyto(c, piece)
            c2 = c.reshape(count, Bn)
            if keyed:
                c2 = _f16_keys(c2, kind)
            a = f(c2, axis=-1)
            Af[start:start + count] = a
            if need_values:
                mf[start:start + count] = c2[np.arange(count), a]
    return Aw.transpose(inv), (mw.transpose(inv) if need_values else None)


def _block_view(V, nk, L, B):
    """(main blocks view, tail view or None, nb, rem) of V cut along reduced dim L in runs of B:
    main: kshape + P + (nb, B) + I; tail: kshape + P + (rem,) + I."""
    pd = nk + L
    nL = V.shape[pd]
    sL = V.strides[pd]
    nb = nL // B
    rem = nL - nb * B
    main = None
    if nb:
        main = as_strided(V, shape=V.shape[:pd] + (nb, B) + V.shape[pd + 1:],
                          strides=V.strides[:pd] + (B * sL, sL) + V.strides[pd + 1:])
    tail = V[(slice(None),) * pd + (slice(nb * B, None),)] if rem else None
    return main, tail, nb, rem


def _blocks(V, nk, kind, tie, is_float, L, B, use_arg):
    """Two-level engine. The group's compact index space is cut into blocks of consecutive
    indices: a run of B along reduced dim L times all later reduced dims I (prefix dims P
    before L are walked whole).  Every block's extreme comes from one NumPy call over a strided
    view (argmax/argmin along a contiguous L when ``use_arg``, which also gives the first
    position, else max/min over (B, I)); the winning block is the same problem on the much
    smaller block array (recursion: blocks are ordered, so ties and NaN carry over); then the
    winning block alone is gathered and located (skipped for tie first when positions are
    known)."""
    kshape = V.shape[:nk]
    rshape = V.shape[nk:]
    Kc = _prod(kshape)
    P = rshape[:L]
    inner = _prod(rshape[L + 1:])
    main, tail, nb, rem = _block_view(V, nk, L, B)
    keyed = use_arg and V.dtype.newbyteorder("=") == _F16   # block values are int16 keys
    if keyed:
        is_float = False
    # tie last with a single block per run of L (short rows): scan each block reversed (a
    # bounded in-cache copy) so that argmax/argmin's first position is the block's last one
    rev = use_arg and tie == "last" and tail is None and nb == 1 and _prod(P) < 4
    if use_arg and main is not None and nb == 1 and not P and tail is None:
        # one block per group: NumPy's argmax/argmin is the answer
        a_ = _argblocks(main[..., 0, ::-1] if rev else main[..., 0, :], kind,
                        need_values=False)[0].reshape(-1).astype(np.int64, copy=False)
        return (B - 1) - a_ if rev else a_
    As, ms = _block_extremes(main, tail, nk + L, kind, B, rev, use_arg)
    bm = ms[0] if len(ms) == 1 else np.concatenate(ms, axis=-1)
    nbt = bm.shape[-1]
    rows = np.arange(Kc)
    if _prod(bm.shape[nk:]) == 1:
        widx = np.zeros(Kc, np.int64)
    else:
        widx = _solve(bm, nk, kind, tie, is_float)   # winning block per kept position
    mwin = bm.reshape(Kc, -1)[rows, widx]
    wb = widx % nbt
    pl = widx // nbt
    if use_arg and (tie == "first" or rev):       # in-block positions come from argmax
        A = As[0] if len(As) == 1 else np.concatenate(As, axis=-1)
        j = A.reshape(Kc, -1)[rows, widx]
    else:
        j = _locate_in_blocks(main, tail, kshape, P, rows, wb, pl, mwin, nb, rem, B, inner,
                              kind, tie, keyed, is_float)
    # j: position inside the block (row-major over (run along L, I))
    jr = j // inner if inner > 1 else j
    ji = j - jr * inner if inner > 1 else 0
    return (pl * rshape[L] + wb * B + jr) * inner + ji


def _block_extremes(main, tail, pd, kind, B, rev, use_arg):
    """The extreme of every block of :func:`_blocks` (main blocks, then the tail's one):
    ``(positions, extremes)``, lists of arrays shaped kshape + P + (blocks,). With ``use_arg``
    the positions inside each block come with them (argmax/argmin along a contiguous L,
    reversed with ``rev``); else max/min over (B, I), and no positions. ``pd``: L's dim in
    V."""
    As, ms = [], []
    if use_arg:
        if main is not None:
            a_, m_ = _argblocks(main[..., ::-1] if rev else main, kind)
            As.append((B - 1) - a_ if rev else a_)
            ms.append(m_)
        if tail is not None:
            a_, m_ = _argblocks(tail, kind)
            As.append(a_[..., None])
            ms.append(m_[..., None])
    else:
        if main is not None:
            ms.append(_reduce(main, tuple(range(pd + 1, main.ndim)), kind))
        if tail is not None:
            ms.append(_reduce(tail, tuple(range(pd, tail.ndim)), kind)[..., None])
    return As, ms


def _locate_in_blocks(main, tail, kshape, P, rows, wb, pl, mwin, nb, rem, B, inner, kind, tie,
                      keyed, is_float):
    """The position of each kept position's extreme inside its winning block (``wb``-th of
    the run along L, at prefix ``pl``; ``mwin`` its extreme), where NumPy did not give it: the
    winning blocks alone are gathered (sub-space copies of at most CHUNK_ELEMS elements at a
    time) and located (first/last equal; NaN equal where the extreme is NaN)."""
    kc = np.unravel_index(rows, kshape) if kshape else ()
    pc = np.unravel_index(pl, P) if P else ()
    j = np.empty(rows.size, np.int64)
    if rem:
        in_tail = wb == nb
        groups = [(np.flatnonzero(~in_tail), False), (np.flatnonzero(in_tail), True)]
    else:
        groups = [(rows, False)]
    for sel, is_tail in groups:
        width = (rem if is_tail else B) * inner
        step = max(1, CHUNK_ELEMS // width)          # bounded gather buffers
        for a0 in range(0, sel.size, step):
            ss = sel[a0:a0 + step]
            index = tuple(c[ss] for c in kc) + tuple(c[ss] for c in pc)
            if is_tail:
                # (cnt, rem, *I); with no index arrays (one group, no prefix) add the row axis
                g = tail[index] if index else tail[np.newaxis]
            else:
                g = main[index + (wb[ss],)]          # (cnt, B, *I): sub-space copies
            cnt = g.shape[0]
            g2 = g.reshape(cnt, width)
            if keyed:
                g2 = _f16_keys(np.ascontiguousarray(g2, dtype=_F16), kind)
            buf, eq = _eq_buffer((cnt,), (width,))
            mw = mwin[ss]
            np.equal(g2, mw[:, None], out=eq)
            if is_float and np.isnan(mw).any():
                eq |= np.isnan(g2)
            j[ss] = _locate(buf, width, tie)
    return j


def _twolevel(V, nk, kind, tie, is_float, gt):
    """Max-based two-level engine for reductions not along the fastest dim: pick the split."""
    rshape = V.shape[nk:]
    inner = 1
    for i in range(len(rshape) - 1, -1, -1):
        if inner * rshape[i] >= gt:
            return _blocks(V, nk, kind, tie, is_float, L=i, B=-(-gt // inner), use_arg=False)
        inner *= rshape[i]
    return _base(V, nk, kind, tie, is_float)  # pragma: no cover - R >= gt when chosen


# --------------------------------------------------------------------------------------------
# canonical form and driver
# --------------------------------------------------------------------------------------------
def _kept_chunks(kshape, budget):
    """Yield (start, count, index) covering the C-order kept space in rectangular ranges of at
    most ``budget`` positions (at least one row of the innermost split dim)."""
    nd = len(kshape)
    if nd == 0:
        yield 0, 1, ()
        return
    budget = max(1, int(budget))
    suffix = [1] * nd
    for j in range(nd - 2, -1, -1):
        suffix[j] = suffix[j + 1] * kshape[j + 1]
    j = 0
    while suffix[j] > budget:
        j += 1
    step = max(1, budget // suffix[j])
    nj = kshape[j]
    for prefix in np.ndindex(*kshape[:j]):
        base = 0
        for p, n in zip(prefix, kshape[:j]):
            base = base * n + p
        for a in range(0, nj, step):
            b = min(nj, a + step)
            yield (base * nj + a) * suffix[j], (b - a) * suffix[j], tuple(prefix) + (slice(a, b),)


def _merge(dims):
    """dims: list of [n, stride, weight]; merge neighbours whose strides and weights chain."""
    out = []
    for d in dims:
        if out and out[-1][1] == d[1] * d[0] and out[-1][2] == d[2] * d[0]:
            out[-1] = [out[-1][0] * d[0], d[1], d[2]]
        else:
            out.append(list(d))
    return out


def argreduce(x: np.ndarray, axes: tuple, *, kind: str, tie: str, index_dtype,
              out: np.ndarray | None = None) -> np.ndarray:
    """Row-major index of the max/min inside each group spanned by ``axes`` (see module doc)."""
    index_dtype = np.dtype(index_dtype)
    axes = tuple(int(a) for a in axes)
    aset = set(axes)
    kept_axes = [a for a in range(x.ndim) if a not in aset]
    kshape_out = tuple(x.shape[a] for a in kept_axes)
    if out is None:
        out = np.empty(kshape_out, dtype=index_dtype)
    if _prod(kshape_out) == 0:
        return out
    if any(x.shape[a] == 0 for a in axes):
        raise ValueError("attempt to get argmax of an empty sequence")
    # NumPy's own rule is ours for tie="first" (first NaN, -0.0 == 0.0, exact integers), and
    # its SIMD argmax/argmin beats anything chunked when the groups are the trailing block of a
    # C-contiguous array: a reshape views them as rows without a copy. float16 is excluded
    # (NumPy compares it through slow scalar float conversions; the key path below is faster).
    # (NumPy's argmax copies a read-only input whole, hence the writeable condition.)
    if (tie == "first" and x.dtype != np.float16 and x.flags.c_contiguous and x.flags.aligned
            and x.flags.writeable and x.dtype.isnative
            and axes == tuple(range(x.ndim - len(axes), x.ndim))
            and _numpy_rows(x, axes, kind, kshape_out, index_dtype, out)):
        return out

    # kept axes with a zero stride: the answer is constant along them
    bk = [a for a in kept_axes if x.strides[a] == 0 and x.shape[a] > 1]
    if bk:
        sel = tuple(slice(0, 1) if a in bk else slice(None) for a in range(x.ndim))
        sub = argreduce(x[sel], axes, kind=kind, tie=tie, index_dtype=index_dtype)
        out[...] = sub
        return out

    origin, kdims, rdims, fixed, flip = _canonical(x, axes, kept_axes, tie)
    # reversing every reduced dim reverses the lexicographic order of the group
    work_tie = ("last" if tie == "first" else "first") if flip else tie
    out_flat = out.reshape(-1) if out.flags.c_contiguous else None
    res_flat = out_flat if out_flat is not None else np.empty(_prod(kshape_out), index_dtype)
    if not rdims:
        res_flat[...] = fixed
    else:
        # NaN-like values (float NaN; complex with a NaN part; NaT) are unequal to themselves:
        # the engines find them through np.isnan, and max/min/argmax propagate them (NumPy >=
        # 1.18 for NaT), so they are the extreme as our rule says
        _solve_chunks(origin, kdims, rdims, fixed, flip, kind, work_tie, x.dtype.kind in "fcmM",
                      res_flat)
    if out_flat is None:
        out[...] = res_flat.reshape(kshape_out)
    return out


def _numpy_rows(x, axes, kind, kshape_out, index_dtype, out) -> bool:
    """tie="first" over the trailing ``axes`` of a C-contiguous ``x`` by NumPy's own
    argmax/argmin, where its temporaries stay small: True when ``out`` holds the answer."""
    pick = np.argmax if kind == "max" else np.argmin
    group = x.size // max(1, _prod(kshape_out))
    if len(axes) == x.ndim:
        # one group spans everything: NumPy's flat 1-D loop
        out[...] = pick(x.reshape(-1))
        return True
    direct = index_dtype == np.intp and out.flags.c_contiguous
    if direct or group * x.itemsize >= 64:   # else the intp temporary would outgrow the input/8
        rows = x.reshape(_prod(kshape_out), -1)
        if direct:
            pick(rows, axis=1, out=out.reshape(-1))
        else:
            out[...] = pick(rows, axis=1).reshape(kshape_out)
        return True
    return False


def _canonical(x, axes, kept_axes, tie):
    """The canonical form of step 1 (module doc): ``(origin, kdims, rdims, fixed, flip)``.

    ``kdims`` / ``rdims``: the kept / reduced dims read, ``[n, stride, weight]`` (weights over
    the original reduced shape; kept dims weigh 0), merged where they chain; ``fixed``: the
    index that the reduced dims of stride 0 contribute (their last index for tie="last");
    ``flip``: every reduced dim ran backwards, so ``origin`` is x with them reversed and the
    strides in ``rdims`` are positive."""
    rsh = [x.shape[a] for a in axes]
    w = 1
    weights = [0] * len(axes)
    for i in range(len(axes) - 1, -1, -1):
        weights[i] = w
        w *= rsh[i]
    fixed = 0
    rdims = []
    for a, wt in zip(axes, weights):
        n, s = x.shape[a], x.strides[a]
        if n == 1:
            continue
        if s == 0:
            if tie == "last":
                fixed += (n - 1) * wt
            continue
        rdims.append([n, s, wt])
    rdims = _merge(rdims)
    kdims = _merge([[x.shape[a], x.strides[a], 0] for a in kept_axes if x.shape[a] > 1])

    flip = bool(rdims) and all(d[1] < 0 for d in rdims)
    origin = x
    if flip:
        sel = [slice(None)] * x.ndim
        for a in axes:
            if x.strides[a] < 0 and x.shape[a] > 1:
                sel[a] = slice(None, None, -1)
        origin = x[tuple(sel)]
        for d in rdims:
            d[1] = -d[1]
        # kept dims are unaffected: their coordinate 0 is the same element in x and origin
        # (origin only moves along reduced axes, whose coordinate we index from the other end)
    return origin, kdims, rdims, fixed, flip


def _solve_chunks(origin, kdims, rdims, fixed, flip, kind, tie, is_float, res_flat):
    """Steps 2 and 3 (module doc): the view V of the canonical form, solved in kept chunks
    (the chunk budget depends on the engine), each chunk's compact index mapped to the index
    over the original reduced axes and written to its slice of ``res_flat``."""
    rshape = tuple(d[0] for d in rdims)
    R = _prod(rshape)
    V = as_strided(origin, shape=tuple(d[0] for d in kdims) + rshape,
                   strides=tuple(d[1] for d in kdims) + tuple(d[1] for d in rdims))
    nk = len(kdims)
    kshape = V.shape[:nk]
    # engine-dependent chunk budget (kept positions per chunk)
    eng, param = _plan(V.shape, V.strides, nk, tie, V.dtype.itemsize)
    if eng == "scan":
        kbudget = SCAN_CHUNK
    elif eng == "base":
        kbudget = CHUNK_ELEMS // R
    else:
        blocks = -(-R // param)       # block entries per kept position
        kbudget = min(BIG_ELEMS // R, BLOCKS_BUDGET // max(blocks, 1))
    kbudget = min(kbudget, KEPT_CHUNK)      # bounds the per-position int64 temporaries
    for start, count, index in _kept_chunks(kshape, max(1, kbudget)):
        Vc = V[index]
        nkc = nk - sum(1 for i in index if not isinstance(i, slice))
        comp = _solve(Vc, nkc, kind, tie, is_float)
        if flip:
            comp = (R - 1) - comp
        if len(rdims) == 1 and rdims[0][2] == 1:
            lin = comp + fixed if fixed else comp
        else:
            lin = np.full(comp.shape, fixed, dtype=np.int64)
            q = comp
            for n, _s, wt in reversed(rdims):
                q, c = np.divmod(q, n)
                lin += c * wt
        res_flat[start:start + count] = lin


def _gather(x: np.ndarray, axes: tuple, idx: np.ndarray) -> np.ndarray:
    """x at the element whose row-major index within the reduced axes is ``idx`` (kept shape),
    for every group: one fancy-index gather of n_out elements."""
    kept = [a for a in range(x.ndim) if a not in axes]
    rc = np.unravel_index(idx, tuple(x.shape[a] for a in axes))
    sel = [None] * x.ndim
    for i, a in enumerate(kept):
        shp = [1] * len(kept)
        shp[i] = x.shape[a]
        sel[a] = np.arange(x.shape[a]).reshape(shp)
    for i, a in enumerate(axes):
        sel[a] = rc[i]
    return x[tuple(sel)]


def nanargreduce(x: np.ndarray, axes: tuple, *, kind: str, tie: str, index_dtype,
                 out: np.ndarray | None = None) -> np.ndarray:
    """nanargmin / nanargmax: argreduce with NaN skipped (NaT is not skipped, as in NumPy); a
    group of only NaN is ``ValueError("All-NaN slice encountered")``.

    1. argreduce with NaN as the extreme; one gather of the winners: if none is NaN, no group
       holds NaN and that is the answer (no copy).
    2. Else, as NumPy's nanargmax does, a copy with NaN replaced by the weakest value (-inf, or
       (-inf, -inf) for complex; +inf for argmin) is reduced. A group whose winner is a
       replaced NaN either is all NaN or has that weakest value as its extreme: for those, the
       first/last element equal to it that is not NaN is located by one more argreduce on a
       bool mask (NumPy itself returns the NaN's place there, e.g. nanargmax([nan, -inf]) is 0;
       we skip NaN as the spec says)."""
    index_dtype = np.dtype(index_dtype)
    if x.dtype.kind not in "fc":
        return argreduce(x, axes, kind=kind, tie=tie, index_dtype=index_dtype, out=out)
    kshape = tuple(n for i, n in enumerate(x.shape) if i not in axes)
    res = argreduce(x, axes, kind=kind, tie=tie, index_dtype=np.int64)
    if np.isnan(_gather(x, axes, res)).any():
        nan = np.isnan(x)
        w = -np.inf if kind == "max" else np.inf
        weakest = np.array(complex(w, w) if x.dtype.kind == "c" else w, dtype=x.dtype)
        y = np.where(nan, weakest, x)
        res = argreduce(y, axes, kind=kind, tie=tie, index_dtype=np.int64)
        bad = np.isnan(_gather(x, axes, res))
        if bad.any():
            m = y == weakest
            m &= ~nan
            r3 = argreduce(m, axes, kind="max", tie=tie, index_dtype=np.int64)
            if not _gather(m, axes, r3)[bad].all():
                raise all_nan_error(f"nanarg{kind}", x, axes)
            res = np.where(bad, r3, res)
    if out is None:
        return res.astype(index_dtype, copy=False).reshape(kshape)
    out[...] = res
    return out


def hardmax(x: np.ndarray, axes: tuple, *, tie: str, out: np.ndarray | None = None) -> np.ndarray:
    """1 (True) where argmax(tie) lands in each group spanned by ``axes``, 0 elsewhere."""
    axes = tuple(int(a) for a in axes)
    if out is None:
        out = np.zeros(x.shape, dtype=x.dtype)
    else:
        out[...] = 0
    if x.size == 0:
        return out
    aset = set(axes)
    kept_axes = [a for a in range(x.ndim) if a not in aset]
    kshape = tuple(x.shape[a] for a in kept_axes)
    rshape = tuple(x.shape[a] for a in axes)
    one = np.ones((), dtype=out.dtype)
    for _start, _count, index in _kept_chunks(kshape, HARDMAX_CHUNK):
        # index addresses the kept dims; expand to all dims, keeping every dim
        full = [slice(None)] * x.ndim
        for pos, it in enumerate(index):
            a = kept_axes[pos]
            full[a] = slice(it, it + 1) if not isinstance(it, slice) else it
        full = tuple(full)
        xs = x[full]
        os_ = out[full]
        idx = argreduce(xs, axes, kind="max", tie=tie, index_dtype=np.int64)
        rc = np.unravel_index(idx, rshape) if rshape else ()
        ksub = tuple(xs.shape[a] for a in kept_axes)
        nkd = len(ksub)
        sel = [None] * x.ndim
        for i, a in enumerate(kept_axes):
            shp = [1] * nkd
            shp[i] = ksub[i]
            sel[a] = np.arange(ksub[i]).reshape(shp)
        for i, a in enumerate(axes):
            sel[a] = rc[i]
        os_[tuple(sel)] = one
    return out


# --------------------------------------------------------------------------------------------
# tie="last" along a contiguous last axis: the last extreme found from the rows' ends
# --------------------------------------------------------------------------------------------
TAIL_BLOCK = 64             # first block searched from each row's end (elements); grows 4x
SAMPLE_ROWS = 16            # rows that last_extreme_rows samples to choose its method


def last_extreme_rows(x2: np.ndarray, kind: str) -> np.ndarray:
    """intp index of the *last* maximum (``kind="max"``) or minimum of each row of ``x2``
    ((rows, n), C-contiguous; bool, integer or float): NaN is the extreme, the last NaN its
    position, -0.0 equals 0.0. Temporaries stay below ``CHUNK_ELEMS`` elements besides
    row-sized vectors; the input is never copied whole.

    NumPy's argmax/argmin give the *first* extreme of each row in one SIMD pass in place; the
    last one lies between it and the row's end. Blocks are compared with each row's extreme
    from the end backwards (64 elements, then 4x wider each time up to CHUNK_ELEMS), only for
    the rows not found yet, so a row whose extreme recurs near its end (ties, as with
    small-range values) costs one small block and any row at most 4/3 of itself.
    ``n - 1 - argmax(x[:, ::-1])`` reads the reversed rows through a contiguous copy: 2.4x the
    time where extremes recur near the ends; where a sample of rows shows that they do not
    (distinct values), that is used, in bounded row chunks."""
    rows_n, n = x2.shape
    f = np.argmax if kind == "max" else np.argmin
    if (rows_n >= 2 * SAMPLE_ROWS and n <= CHUNK_ELEMS
            and not _recurs_near_the_end(x2[:SAMPLE_ROWS], kind)):
        # values rarely repeat their row's extreme (distinct values): NumPy's reversed argmax
        # is one pass; it copies what it reads, so a chunk of rows at a time
        out = np.empty(rows_n, np.intp)
        step = max(1, CHUNK_ELEMS // n)
        for r0 in range(0, rows_n, step):
            out[r0:r0 + step] = (n - 1) - f(x2[r0:r0 + step, ::-1], axis=1)
        return out
    first = f(x2, axis=1)
    ext = x2[np.arange(rows_n), first]
    nan = ext != ext                                  # rows whose extreme is NaN
    any_nan = bool(nan.any())
    out = first.astype(np.intp, copy=True)
    idx = None                                        # None: every row still looks
    end, width = n, TAIL_BLOCK
    while end > 0:
        start = max(0, end - width)
        w = end - start
        rstep = max(1, CHUNK_ELEMS // w)
        rows_left = rows_n if idx is None else idx.size
        left = []
        for c0 in range(0, rows_left, rstep):
            if idx is None:                           # every row: a view
                rows = np.arange(c0, min(rows_left, c0 + rstep))
                blk = x2[c0:c0 + rstep, start:end]
            else:                                     # some rows: a bounded gather
                rows = idx[c0:c0 + rstep]
                blk = x2[rows, start:end]
            eq = _equal_to(blk, ext[rows], nan[rows], any_nan)
            hit = eq.any(axis=1)
            last = (w - 1) - np.argmax(eq[:, ::-1], axis=1)
            out[rows[hit]] = start + last[hit]
            # rows not found whose first extreme is at or past this block's start are done:
            # their first extreme is the last one
            left.append(rows[~hit & (first[rows] < start)])
        idx = np.concatenate(left) if len(left) > 1 else left[0]
        if idx.size == 0:
            break
        if idx.size == rows_n:                        # every row left: views, no gather
            idx = None
        end, width = start, min(width * 4, CHUNK_ELEMS)
    return out


def _recurs_near_the_end(sample, kind):
    """Whether at least half of the ``sample`` rows hold their extreme within their last
    TAIL_BLOCK elements."""
    ext = sample.max(axis=1) if kind == "max" else sample.min(axis=1)   # NaN propagates
    nan = ext != ext
    eq = _equal_to(sample[:, -TAIL_BLOCK:], ext, nan, bool(nan.any()))
    return 2 * int(np.count_nonzero(eq.any(axis=1))) >= len(sample)


def _equal_to(blk, e, nan, any_nan):
    """``blk == e`` row by row, NaN equal to NaN in the rows whose extreme is NaN."""
    eq = blk == e[:, None]
    if any_nan and nan.any():
        eq[nan] = blk[nan] != blk[nan]
    return eq
