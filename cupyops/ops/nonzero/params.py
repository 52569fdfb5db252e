"""The parameter structs of the nonzero kernels (kernels/nonzero.cuh, where ``static_assert``s
pin the same sizes and offsets) and their packing from the plans of
cupyops.ops.nonzero.plan.

* ``nz_fastdiv``: a runtime divisor with its Granlund-Montgomery magic numbers
  (:func:`fastdiv`), so the kernels divide by extents without a hardware division;
* ``nz_params``: one launch of ``nonzero_tiles`` / ``nonzero_tiles_t``;
* ``nz_count_params``: one launch of ``count_nonzero_axes``.

Packed parameters are kept in the plan's ``memo`` (a plan's launches repeat them).
"""
from __future__ import annotations

import functools
import math
import struct

import numpy as np

from cupyops.core.structs import Struct
from cupyops.ops.nonzero.plan import LAYOUT_ROWS, MAX_DIMS, MODE_SEGMENTS

__all__ = ["fastdiv", "fastdiv_apply", "FASTDIV", "NZ_PARAMS", "NZ_COUNT_PARAMS",
           "FASTDIV_DTYPE", "PARAMS_DTYPE", "COUNT_PARAMS_DTYPE", "coordinate_params",
           "count_params"]


def fastdiv(d: int) -> tuple:
    """``(d, m64, m32, sh1, sh2)``: Granlund-Montgomery magic numbers for unsigned division by
    ``d`` (1 <= d < 2**63). ``n // d == (t + ((n - t) >> sh1)) >> sh2`` with
    ``t = (m * n) >> N`` for every N-bit ``n`` (N = 64 with m64; N = 32 with m32, d < 2**32)."""
    if type(d) is not int:
        d = int(d)
    if not 0 < d < 0x8000000000000000:
        raise ValueError(f"fastdiv: divisor {d} out of range")
    ell = (d - 1).bit_length()          # ceil(log2 d)
    # m = 2**N * (2**ell - d) // d + 1 == 2**(N + ell) // d - (2**N - 1): 2**N * d / d is exact;
    # and 2**(32 + ell) // d == (2**(64 + ell) // d) >> 32 (a floor of a floor), one division
    q = (1 << (64 + ell)) // d
    m32 = (q >> 32) - 0xFFFFFFFF if d < 0x100000000 else 0
    return (d, q - 0xFFFFFFFFFFFFFFFF, m32, 1 if ell else 0, ell - 1 if ell else 0)


def fastdiv_apply(n: int, f: tuple, bits: int) -> int:
    """Emulate the kernel's division (for tests)."""
    d, m64, m32, sh1, sh2 = f
    m = m64 if bits == 64 else m32
    t = (m * n) >> bits
    return (t + ((n - t) >> sh1)) >> sh2


_FASTDIV_STRUCT = struct.Struct("<QQIBBxx")    # nz_fastdiv: its members, 2 padding bytes


@functools.lru_cache(maxsize=4096)
def _fastdiv_bytes(d) -> bytes:
    """``nz_fastdiv`` of ``d``: its 24 bytes."""
    return _FASTDIV_STRUCT.pack(*fastdiv(d))


FASTDIV = Struct("nz_fastdiv", [("d", "<u8"), ("m64", "<u8"), ("m32", "<u4"), ("sh1", "u1"),
                                ("sh2", "u1")], encode=_fastdiv_bytes)
assert FASTDIV.dtype.itemsize == _FASTDIV_STRUCT.size

_D = MAX_DIMS
#: ``struct nz_params``; arrays of divisors are filled with the divisor 1
NZ_PARAMS = Struct("nz_params", [
    ("in_div", FASTDIV, _D, 1), ("in_stride", "<i8", _D), ("co_suffix", FASTDIV, _D, 1),
    ("co_shape", FASTDIV, _D, 1), ("ndim_div", FASTDIV), ("unit_mask", "<u8"),
    ("size", "<i8"), ("num_tiles", "<i8"), ("k", "<i8"), ("fill", "<i8"),
    ("row_stride", "<i8"), ("fill_rows", "<i8"), ("in_ndim", "<i4"), ("out_ndim", "<i4"),
    ("mode", "<i4"), ("layout", "<i4"), ("index_bytes", "<i4"), ("stats_on", "<i4"),
    ("narrow_loads", "<i4"), ("vec", "<i4"), ("head", "<i4"), ("tr_c", "<i4"),
    ("tr_chunks", FASTDIV), ("tr_inner", "<i8"), ("tr_dim", "<i4"), ("tr_kshift", "<i4"),
    ("tr_vec", "<i4"), ("tr_ic", "<i4"),
])
#: ``struct nz_count_params``
NZ_COUNT_PARAMS = Struct("nz_count_params", [
    ("kept_div", FASTDIV, _D, 1), ("kept_stride", "<i8", _D), ("red_div", FASTDIV, _D, 1),
    ("red_stride", "<i8", _D), ("split_div", FASTDIV), ("n_out", "<i8"), ("red_size", "<i8"),
    ("chunk_len", "<i8"), ("n_chunks", "<i8"), ("units", "<i8"), ("base", "<i8"),
    ("kept_ndim", "<i4"), ("red_ndim", "<i4"), ("mode", "<i4"), ("atomic", "<i4"),
    ("narrow_loads", "<i4"), ("vec", "<i4"), ("align", "<i4"), ("o_head", "<i4"),
    ("out_stride", "<i8", _D), ("out_base", "<i8"), ("out_mapped", "<i4"), ("pad1", "<i4"),
])
FASTDIV_DTYPE = FASTDIV.dtype
PARAMS_DTYPE = NZ_PARAMS.dtype
COUNT_PARAMS_DTYPE = NZ_COUNT_PARAMS.dtype


# ------------------------------------------------------------------------------ coordinates

def coordinate_params(plan, mode: int, layout: int = LAYOUT_ROWS, *, k: int = 0,
                      fill: int = 0, row_stride: int = 0, stats: bool = False) -> np.void:
    """The ``nz_params`` of one launch of coordinate plan ``plan`` (kept in its memo)."""
    key = (mode, layout, k, fill, row_stride, stats)
    memo = plan.memo
    p = memo.get(key)
    if p is None:
        if len(memo) > 64:
            memo.clear()
        p = memo[key] = _launch_params(plan, mode, layout, k, fill, row_stride, stats)
    return p


def _launch_params(plan, mode, layout, k, fill, row_stride, stats) -> np.void:
    # the fields that follow from the plan are packed once (the template, kept as its bytes
    # around each launch's (k, fill, row_stride), (mode, layout) and stats_on); the SEGMENTS
    # pass's own (its tiles are the segments)
    segments = mode == MODE_SEGMENTS
    pieces = plan.memo.get(("template", segments))
    if pieces is None:
        t = _template(plan, segments)
        pieces = plan.memo[("template", segments)] = (
            t[:_AT_K], t[_AT_K + 24:_AT_MODE], t[_AT_MODE + 8:_AT_STATS], t[_AT_STATS + 4:])
    fill = int(fill) & (2**64 - 1)                  # uint64 fill values above 2**63 too
    head, mid, mid2, tail = pieces
    return np.frombuffer(_VARIANT.pack(
        head, k, fill - 2**64 if fill >= 2**63 else fill, row_stride, mid, mode, layout,
        mid2, int(bool(stats)), tail), PARAMS_DTYPE)[0]


def _template(plan, segments=False) -> bytes:
    m, kk, inner, chunks, vec, ic, c = plan.tr or (0, 1, 0, 1, False, 0, 1)
    read_sizes, read_strides = zip(*plan.read_dims)
    coord_sizes, coord_suffixes = zip(*plan.coord_dims) if plan.coord_dims else ((), ())
    ndim = len(plan.shape)
    return _PACK_PARAMS((
        read_sizes, read_strides, coord_suffixes, coord_sizes, ndim or 1,
        plan.unit_mask, math.prod(plan.shape), plan.segments() if segments else plan.num_tiles,
        0, 0, 0,
        max(1, 16384 // (ndim or 1)),                       # fill_rows()
        len(read_sizes), ndim, 0, 0, plan.index_bytes, 0,
        int(plan.narrow_loads), int(plan.vec), plan.head, c,
        chunks, inner, m, kk.bit_length() - 1, int(vec), ic))


_PACK_PARAMS = NZ_PARAMS.pack_bytes

# where _launch_params writes a launch's own fields: (k, fill, row_stride) and (mode, layout)
# are neighbours, stats_on on its own; one struct packs them between the template's other
# bytes (a third of the time of patching a copy of the template)
_AT_K, _AT_MODE, _AT_STATS = (NZ_PARAMS.offsets()[n] for n in ("k", "mode", "stats_on"))
assert (NZ_PARAMS.offsets()["row_stride"] == _AT_K + 16
        and NZ_PARAMS.offsets()["layout"] == _AT_MODE + 4)
_VARIANT = struct.Struct(f"<{_AT_K}s3q{_AT_MODE - _AT_K - 24}s2i{_AT_STATS - _AT_MODE - 8}si"
                         f"{PARAMS_DTYPE.itemsize - _AT_STATS - 4}s")
assert _VARIANT.size == PARAMS_DTYPE.itemsize


# ------------------------------------------------------------------------------ count_nonzero

def count_params(plan) -> np.void:
    """The ``nz_count_params`` of count plan ``plan`` (kept in its memo)."""
    p = plan.memo.get("params")
    if p is None:
        kept, red = plan.kept_dims, plan.red_dims
        # outputs in row-major order of the kept dims as planned: no mapping needed
        identity = plan.out_base == 0 and all(
            kept[i][0] == 1 or o == math.prod(n for n, _ in kept[i + 1:])
            for i, o in enumerate(plan.out_strides))
        split = {0: plan.n_chunks, 1: plan.split, 2: plan.groups}[plan.mode]
        p = plan.memo["params"] = NZ_COUNT_PARAMS.pack((
            [n for n, _ in kept], [s for _, s in kept], [n for n, _ in red], [s for _, s in red],
            split, plan.n_out, plan.red_size, plan.chunk_len, plan.n_chunks, plan.units,
            plan.base, len(kept), len(red), plan.mode, int(plan.atomic), int(plan.narrow_loads),
            int(plan.vec), plan.align, plan.o_head, list(plan.out_strides), plan.out_base,
            int(not identity), 0))
    return p
