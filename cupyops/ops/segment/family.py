"""The kernel family of segment_argmax / segment_argmin and their values forms:
kernels/segment.cu, registered with cupyops.core.modules at import.

Per value dtype, the entry points ``segment_reduce`` (indices) and ``segment_reduce_values``
(indices and the extremes' values, from the same reduction), each for ``I = int`` and
``I = long long``: 4 name expressions a dtype, each compiled as a module of its own (a first call
compiles the one kernel it launches). The offsets' dtype is a runtime field (read at its own
width), so it adds no instantiation. datetime64 and timedelta64 of every unit run the module of
``timedelta64[ns]`` (``cupyops_datetime``: int64 counts, NaT the extreme) on the input viewed as
int64. No other module names these entry points.

The flat fast path of contiguous R = 1 x (every real dtype of 1 to 8 bytes: FLAT_DTYPES) is the family
``segment_flat`` (kernels/segment_flat.cu, which includes segment.cu):
``segment_reduce_flat<T, int, LAST>`` and its values form ``segment_reduce_flat_values`` (a
kernel per tie; 32-bit indexing, 64-bit plans take segment_reduce(_values)); and for contiguous
rows of R = FLAT_COLS_MIN .. 256 of float32, int32 and uint32 (FLAT_COLS_DTYPES), ``segment_reduce_flat_cols`` (read straight or
staged) and its values form ``segment_reduce_flat_cols_values`` (staged). A family of its own
so that segment.cu's modules stay exactly what they were (ptxas allocates a kernel's registers
differently beside other kernels in one module).
"""
from __future__ import annotations

import numpy as np

from cupyops.core import dtypes as _dtypes
from cupyops.core import modules as _modules

__all__ = ["FAMILY", "FAMILY_DEF", "FLAT_FAMILY", "FLAT_FAMILY_DEF", "DTYPES", "DATETIME",
           "REDUCE", "REDUCE_V", "REDUCE_FLAT", "REDUCE_FLAT_V", "REDUCE_FLAT_COLS", "REDUCE_FLAT_COLS_V",
           "REDUCE_FLAT_STRIPS",
           "FLAT_DTYPES", "FLAT_COLS_DTYPES", "flat_rows",
           "FLAT_COLS_MIN", "flat_cols_shared_bytes", "expression", "flat_expression",
           "expressions", "flat_expressions", "flat_shared_bytes", "items", "key_itemsize", "shared_bytes", "THREADS"]

FAMILY = "segment"
#: every datetime64 / timedelta64 unit runs as this dtype (same bits: int64, NaT = INT64_MIN)
DATETIME = np.dtype("m8[ns]")
DTYPES = _dtypes.VALUE_DTYPES + (DATETIME,)
if _dtypes.dtype() is not None:   # bfloat16 when ml_dtypes is installed
    DTYPES += (_dtypes.dtype(),)
REDUCE, REDUCE_V = "segment_reduce", "segment_reduce_values"
#: the flat fast path (kernels/segment_flat.cu): contiguous R = 1 x of FLAT_DTYPES, indices
#: (segment_reduce_flat) and values forms (segment_reduce_flat_values)
REDUCE_FLAT, REDUCE_FLAT_V = "segment_reduce_flat", "segment_reduce_flat_values"
#: the flat path of rows (kernels/segment_flat.cu): contiguous rows of R = FLAT_COLS_MIN .. 256
#: trailing positions of FLAT_COLS_DTYPES, indices (segment_reduce_flat_cols) and values forms
#: (segment_reduce_flat_cols_values) (CW = the least power of two >= R columns; a warp: 32
#: columns of one row, or CW columns of 32 / CW rows)
REDUCE_FLAT_COLS, REDUCE_FLAT_COLS_V = "segment_reduce_flat_cols", "segment_reduce_flat_cols_values"
#: ... and rows wider than 256 read straight, index mode: strips of 256 columns on grid.y
#: (segment_reduce_flat_strips)
REDUCE_FLAT_STRIPS = "segment_reduce_flat_strips"
FLAT_COLS_MIN = 2
FLAT_FAMILY = "segment_flat"
#: the flat path of rows' dtypes (4 bytes)
FLAT_COLS_DTYPES = (np.dtype(np.float32), np.dtype(np.int32), np.dtype(np.uint32))
#: the flat fast path's dtypes: every real one of 1 to 8 bytes, datetimes too (as DATETIME);
#: complex values take the merge-path kernel
FLAT_DTYPES = tuple(dt for dt in DTYPES if dt.kind in "biufm" or _dtypes.is_bf16(dt))
#: rows a thread per tile of the flat path of rows (SGFC_K), ends the block's ring holds
#: (SGF_RING)
FLAT_K, FLAT_RING = 16, 1024


def flat_rows(itemsize: int) -> int:
    """Rows a thread per tile of the flat R = 1 walk (SgfShape<S>::K of
    kernels/segment_flat.cu): 64 bytes, at most 32 rows (its flags: one word)."""
    return min(32, 64 // itemsize)
INDEX_CTYPES = {False: "int", True: "long long"}
#: threads a block (SG_THREADS)
THREADS = 256
#: the window's largest capacity (SG_WCAP_MAX)
WCAP_MAX = 1024
#: bytes of the staged rows' front pad (SG_STAGE_FRONT)
STAGE_FRONT = 128
#: values of the pad behind the staged rows (the 32 of SgShared::O_SK in kernels/segment.cu)
STAGE_BACK = 32

_EXPRS: dict = {}


def expression(values: bool, dtype, use_64bit: bool) -> str:
    """The name expression of the index (``values=False``) or values kernel."""
    key = (bool(values), np.dtype(dtype), bool(use_64bit))
    expr = _EXPRS.get(key)
    if expr is None:
        expr = _EXPRS[key] = _modules.name_expression(
            REDUCE_V if values else REDUCE, np.dtype(dtype), INDEX_CTYPES[bool(use_64bit)])
    return expr


def flat_expression(dtype, use_64bit: bool, last: bool, values: bool = False,
                    cols: bool = False, staged: bool = False, strips: bool = False) -> str:
    """The name expression of the flat fast path's kernel (a dtype of FLAT_DTYPES) for the tie
    (``last``) and mode (``values``; ``cols``: the flat path of rows, ``staged`` where its rows
    are not on 32-byte boundaries, the values form always; ``strips``: rows wider than 256,
    index mode): a kernel each, so that a first call compiles two of the four walks (max and
    min; the four in one kernel took 1.05 s of NVRTC for float32, issue 33). The extreme
    stays a runtime branch: a kernel per walk compiled each walk's loop with a fifth more
    instructions (the issue-rate model's row: 93 -> 76 % of copy bandwidth for float32)."""
    key = ("flat", np.dtype(dtype), bool(use_64bit), bool(last), bool(values), bool(cols),
           bool(staged), bool(strips))
    expr = _EXPRS.get(key)
    if expr is None:
        args = (np.dtype(dtype), INDEX_CTYPES[bool(use_64bit)], bool(last))
        expr = _EXPRS[key] = (
            _modules.name_expression(REDUCE_FLAT_STRIPS, *args) if strips else
            _modules.name_expression(REDUCE_FLAT_COLS_V, *args) if cols and values else
            _modules.name_expression(REDUCE_FLAT_COLS, *args, bool(staged)) if cols else
            _modules.name_expression(REDUCE_FLAT_V if values else REDUCE_FLAT, *args))
    return expr


def expressions(dtype) -> tuple:
    return tuple(expression(v, dtype, b) for v in (False, True) for b in (False, True))


def flat_expressions(dtype) -> tuple:
    # 32-bit indexing only: the long long instantiation spilled on sm_107/120/121 and held
    # 25-33 % occupancy on sm_75/86/89 (its 1,024 ends of 8 bytes); 64-bit plans take the
    # merge-path kernel. The flat path of rows: FLAT_COLS_DTYPES only.
    r1 = tuple(flat_expression(dtype, False, t, v) for v in (False, True) for t in (False, True))
    if np.dtype(dtype) not in FLAT_COLS_DTYPES:
        return r1
    return r1 + tuple(flat_expression(dtype, False, t, cols=True, staged=g) for g in (False, True)
              for t in (False, True)) + \
        tuple(flat_expression(dtype, False, t, True, cols=True, staged=True) for t in (False, True)) + \
        tuple(flat_expression(dtype, False, t, cols=True, strips=True) for t in (False, True))


def items(itemsize: int) -> int:
    """Merge items a partition walks per step (sg_items of kernels/segment.cu)."""
    return 2 if itemsize >= 16 else (16 if itemsize <= 2 else 32 // itemsize)


def key_itemsize(itemsize: int) -> int:
    """Bytes of an ordering key, and of a chain partial's wire word (ArType<T>::key)."""
    return max(4, itemsize)


def _up16(n: int) -> int:
    return (n + 15) & ~15


def shared_bytes(itemsize: int, index_size: int, values: bool, cw_log2: int, wcap: int) -> int:
    """Dynamic shared memory of a block (SgShared::carve, part by part)."""
    cw, ksz = 1 << cw_log2, key_itemsize(itemsize)
    res = wcap << cw_log2
    staged = STAGE_FRONT + (THREADS * items(itemsize) + STAGE_BACK) * itemsize
    parts = (staged, wcap * index_size, res * index_size, res * itemsize if values else 0,
             THREADS * ksz, THREADS * index_size, THREADS * 4, cw * ksz, cw * index_size)
    return sum(_up16(n) for n in parts)


def flat_shared_bytes(itemsize: int, index_size: int) -> int:
    """Dynamic shared memory of a block of the flat path (sgf_run of kernels/segment_flat.cu):
    from the staged rows' front pad, the tile's rows (16-byte chunks of a thread's rows and a
    16-byte pad: SgfShape's PITCH), the run winners (a byte a row), the head runs, the flags and
    the ring of ends; SgShared's fixed parts and the carry, which it overlaps, fit in it."""
    k = flat_rows(itemsize)
    tile = THREADS * k
    pitch = k * itemsize // 16 + 1
    parts = STAGE_FRONT + THREADS * pitch * 16 + tile + THREADS * 4 + _up16(4 * (tile // 32 + 1))
    return parts + FLAT_RING * index_size


def wcap_for(itemsize: int, index_size: int, values: bool, cw_log2: int) -> int:
    """The window's capacity: the step's results (wcap segments x CW columns) in about 4 KiB."""
    per = (index_size + (itemsize if values else 0)) << cw_log2
    return max(2, min(WCAP_MAX, 4096 // per))


def _dynamic_shared(dtype, expr: str, block: int) -> int:
    values = expr.startswith(REDUCE_V)
    isz = 8 if "long long" in expr else 4
    dt = np.dtype(dtype)
    return max(shared_bytes(dt.itemsize, isz, values, c, wcap_for(dt.itemsize, isz, values, c))
               for c in range(9))


def first_calls(dtype) -> tuple:
    """The kernel a first call launches: one, at each index width, per mode."""
    return tuple(_modules.FirstCall("segment_arg* / segment_*_and_arg*", "merge path", wide,
                                    (expression(v, dtype, wide),))
                 for v in (False, True) for wide in (False, True))


def flat_first_calls(dtype) -> tuple:
    """The flat path's first call: contiguous R = 1 x, 32-bit indexing; a kernel per tie and
    mode (and the flat path of rows' of FLAT_COLS_DTYPES, its strips of wider rows too)."""
    r1 = tuple(_modules.FirstCall(
        "segment_*_and_arg*" if v else "segment_argmax / segment_argmin",
        f"flat R = 1, tie {'last' if t else 'first'}", False, (flat_expression(dtype, False, t, v),))
        for v in (False, True) for t in (False, True))
    if np.dtype(dtype) not in FLAT_COLS_DTYPES:
        return r1
    return r1 + tuple(_modules.FirstCall(
            "segment_argmax / segment_argmin", f"flat rows R = {FLAT_COLS_MIN}-256"
            f"{', staged' if g else ''}, tie {'last' if t else 'first'}", False,
            (flat_expression(dtype, False, t, cols=True, staged=g),))
            for g in (False, True) for t in (False, True)) + tuple(_modules.FirstCall(
                "segment_*_and_arg*", f"flat rows R = {FLAT_COLS_MIN}-256, tie "
                f"{'last' if t else 'first'}", False,
                (flat_expression(dtype, False, t, True, cols=True, staged=True),))
                for t in (False, True)) + tuple(_modules.FirstCall(
                    "segment_argmax / segment_argmin", f"flat rows R > 256, tie "
                    f"{'last' if t else 'first'}", False,
                    (flat_expression(dtype, False, t, cols=True, strips=True),))
                    for t in (False, True))


def flat_cols_shared_bytes(index_size: int, staged: bool) -> int:
    """Dynamic shared memory of a block of the flat path of rows (sgfc_run of
    kernels/segment_flat.cu): from the front pad, the closed runs' winners (a byte a thread and
    row), the head runs, the tails (3 words a thread), the carry-outs (2 words a column), the
    flags, the ring of ends and (``staged``) the tile's values, from a 128-byte boundary (and
    256 words of pad for CW < 32: sgfc_pad)."""
    fwords = THREADS // 2 * FLAT_K // 32 + 1          # (a tile's rows: at most 2,048, at CW = 2)
    return STAGE_FRONT + THREADS * FLAT_K + THREADS * 4 * 6 + _up16(4 * fwords) + \
        FLAT_RING * index_size + (4 * (THREADS * FLAT_K + 32 + 256) if staged else 0)


def _flat_dynamic_shared(dtype, expr: str, block: int) -> int:
    isz = 8 if "long long" in expr else 4
    if expr.startswith(REDUCE_FLAT_COLS_V + "<"):
        return flat_cols_shared_bytes(isz, True)
    if expr.startswith(REDUCE_FLAT_COLS + "<"):
        return flat_cols_shared_bytes(isz, expr.endswith("true>"))
    if expr.startswith(REDUCE_FLAT_STRIPS + "<"):
        return flat_cols_shared_bytes(isz, False)
    return flat_shared_bytes(np.dtype(dtype).itemsize, isz)


FAMILY_DEF = _modules.register_family(_modules.KernelFamily(
    name=FAMILY, source="segment.cu", dtypes=DTYPES, expressions=expressions,
    block_sizes=(THREADS,), dynamic_shared=_dynamic_shared, min_occupancy=0.5,
    first_calls=first_calls))

FLAT_FAMILY_DEF = _modules.register_family(_modules.KernelFamily(
    name=FLAT_FAMILY, source="segment_flat.cu", dtypes=FLAT_DTYPES, expressions=flat_expressions,
    block_sizes=(THREADS,), dynamic_shared=_flat_dynamic_shared, min_occupancy=0.5,
    first_calls=flat_first_calls))
