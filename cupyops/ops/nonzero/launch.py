"""Kernel path of the nonzero family: argwhere, nonzero, nonzero_coordinates, count_nonzero.

Launch code written once against :mod:`cupyops.core.backend` (CuPy on a GPU, or ``cupyops.simt``
on the CPU); the kernels are in ``kernels/nonzero.cu``, planned by
:mod:`cupyops.ops.nonzero.plan`.

* Exact size (``argwhere``, ``nonzero``, ``nonzero_coordinates(size=None)``): pass 1 (SCAN)
  counts each tile by warp ballots, scans the tile counts with a decoupled look-back and
  records a bit per element (the mask: size / 8 bytes, from CuPy's pool for the call: exact
  calls cannot be captured); the host reads the total once (``backend.read_scalar``) and
  allocates exactly ``count`` rows; pass 2 (PLACE) writes each tile from its stored offset and
  its mask words, without reading the input again.
* Fixed size (``nonzero_coordinates(size=k)``): one FIXED launch; ``count`` stays a 0-d device
  array, no host read.
* ``count_nonzero``: one launch.

No launch is preceded by a memset: the look-back's counter and status words and the chunk
sums of count_nonzero are state the kernels leave ready for the next launch
(cupyops.core.workspace, ``holder.state``; kernels/nonzero.cu, NZ_HDR_DRAW).

Inputs whose memory-innermost dim is not the last logical one (F-order, transposed, permuted)
run ``nonzero_tiles_t`` instead of ``nonzero_tiles`` in every mode (``plan.tr``, see
:func:`_config`): the same arguments, tiles read in memory order.
"""
from __future__ import annotations

import functools
import operator
import typing

import numpy as np

from cupyops.core import trace as _trace
from cupyops.core import workspace as _workspace
from cupyops.core.arrays import data_ptr
from cupyops.ops.nonzero import plan
from cupyops.ops.nonzero.family import COUNT, FAMILY, TILES, TILES_T, expression
from cupyops.ops.nonzero.params import coordinate_params, count_params

__all__ = ["count_nonzero", "argwhere", "nonzero", "nonzero_coordinates", "count_runner",
           "exact_runner", "fixed_runner", "rows_of"]

LAYOUT_ROWS, LAYOUT_COLS = plan.LAYOUT_ROWS, plan.LAYOUT_COLS
#: what the exact-size forms say during CUDA-graph capture, which cannot hold their count read
_CAPTURE_ERROR = ("this call reads a count to the host (the exact-size nonzero forms: argwhere, "
                  "nonzero, nonzero_coordinates(size=None)), which CUDA-graph capture cannot "
                  "hold; capture nonzero_coordinates(size=k) instead")
_NAME = FAMILY.name
_record_plan = _trace.record_plan
_holder_for = _workspace.holder_for


def _native(x):
    dt = x.dtype
    return dt if dt.isnative else dt.newbyteorder("=")


def _config(backend, p, dtype, name, grid):
    """The expression of kernel ``name`` for plan ``p`` and its checked ``(grid, block, smem)``,
    kept in the plan's memo (the configuration is checked once per plan and grid)."""
    key = ("launch", name, dtype, grid)
    hit = p.memo.get(key)
    if hit is None:
        vec = bool(p.vec) if name == TILES else None
        if name == TILES and getattr(p, "tr", ()):
            name, vec = TILES_T, None
        expr = expression(name, dtype, p.wide, vec)
        hit = p.memo[key] = (expr, backend.check_launch(expr, (grid,), (p.block,), 0))
    return hit


# ------------------------------------------------------------------------------ count_nonzero

def count_nonzero(backend, x, axes, *, force_64bit=False):
    """int64 counts of ``x != 0`` over ``axes`` (sorted, distinct, non-empty), kept shape."""
    return count_runner(backend, x, axes, force_64bit=force_64bit)(x)


def count_runner(backend, x, axes, *, force_64bit=False):
    """``run(x, workspace=None)`` for arrays laid out like ``x``: the plan, its launch and
    parameters bound once. (A partial over one tuple, as every runner here: a cached entry is
    a few objects for the garbage collector, not a cell per bound name.)"""
    dtype = _native(x)
    p = plan.plan_count(
        x.shape, x.strides, x.itemsize, axes, sm_count=backend.props.sm_count,
        max_threads_per_sm=backend.props.max_threads_per_sm, force_64bit=force_64bit,
        base_address=data_ptr(x))
    kept_shape = tuple([n for i, n in enumerate(x.shape) if i not in p.axes])
    expr, (grid, block, smem) = _config(backend, p, dtype, COUNT, p.grid)
    return functools.partial(_count_run, CountState(
        p, kept_shape, p.atomic, dtype, expr, grid, block, smem,
        backend.struct_arg(count_params(p)), 8 * p.n_out, backend))


class CountState(typing.NamedTuple):
    """What count_nonzero's runner reads, named (unpacked by position)."""

    plan: object
    kept_shape: tuple
    atomic: bool
    dtype: np.dtype
    expr: str
    grid: tuple
    block: tuple
    shared_mem: int
    params: object
    sums_bytes: int
    backend: object


class ExactState(typing.NamedTuple):
    """What the exact-size runner (argwhere, nonzero, nonzero_coordinates(size=None)) reads."""

    plan: object
    layout: int
    rows: bool
    keep_count: bool
    result: int
    dtype: np.dtype
    scan_expr: str
    scan_grid: tuple
    scan_block: tuple
    scan_shared_mem: int
    scan_params: object
    place_expr: str
    place_grid: tuple
    place_block: tuple
    place_shared_mem: int
    place: object
    index_dtype: np.dtype
    ndim: int
    lookback_bytes: int
    backend: object


class FixedState(typing.NamedTuple):
    """What the fixed-size runner (nonzero_coordinates(size=k)) reads."""

    plan: object
    size: int
    fill_value: int
    dtype: np.dtype
    expr: str
    grid: tuple
    block: tuple
    shared_mem: int
    params: object
    shape: tuple
    index_dtype: np.dtype
    lookback_bytes: int
    record: object
    backend: object


def _count_run(state, x, workspace=None):
    p, kept_shape, atomic, dtype, expr, grid, block, smem, params, sums_bytes, backend = state
    _record_plan(p)
    scope, stream = backend.begin()
    with scope:
        out = backend.alloc(kept_shape, _I64)
        launch = backend.launcher(_NAME, dtype, expr)
        if not atomic:                      # (the sums are not read: out stands in)
            launch(grid, block, (x, params, out, out), smem, stream)
            return out
        # chunks add into a word of `sums` per output: state that every launch leaves zero
        holder = _holder_for(backend, workspace, backend.stream_key(stream))
        with holder.lock:
            sums = holder.state(STATE_ZERO, sums_bytes, _whole_u64)
            _launch(holder, STATE_ZERO, launch, grid, block, (x, params, out, sums), smem, stream)
    return out


#: the state kinds (cupyops.core.workspace): words that are zero at rest (count_nonzero's
#: chunk sums; argreduce keeps its tickets in the same kind), the look-back's counter and
#: status words
STATE_ZERO, STATE_LOOKBACK = "zero", "nonzero-lookback"


def _whole_u64(buf):
    """A state buffer as uint64 words."""
    return buf.view(_U64)


# ------------------------------------------------------------------------------ coordinates

def _plan(x, index_dtype, force_64bit):
    """The plan of ``x``'s layout."""
    planner = plan.plan_coordinates_contiguous if x.flags.c_contiguous else \
        plan.plan_coordinates
    return planner(x.shape, x.strides, x.itemsize, index_dtype, force_64bit=force_64bit,
                   base_address=data_ptr(x))


_U64 = np.dtype(np.uint64)
_U32 = np.dtype(np.uint32)
_I64 = np.dtype(np.int64)
_GRID_X_MAX = 2**31 - 1            # blocks along a grid's x (every arch from sm_30)


#: the look-back state's header (kernels/nonzero.cu, NZ_HDR_DRAW): its uint64 words, and
#: where the status words start (bytes)
LOOKBACK_HEADER, LOOKBACK_STATUS = 4, 256


def _lookback_bytes(cp) -> int:
    """Bytes of look-back state plan ``cp`` needs: the header, then two parities of status
    words in runs of 32 tiles (nz_sw) of its largest pass (SEGMENTS' tiles are segments)."""
    tiles = max(cp.num_tiles, cp.segments()) if cp.chunked else cp.num_tiles
    return LOOKBACK_STATUS + 16 * 32 * -(-tiles // 32)


def _lookback_views(buf):
    """(the header words, the status words) of a look-back state buffer."""
    return (buf[:8 * LOOKBACK_HEADER].view(_U64), buf[LOOKBACK_STATUS:].view(_U64))


_COUNT_SLOT = (((), _I64),)


def _exact(backend, x, index_dtype, layout, force_64bit, stats=None, workspace=None):
    """SCAN, one host read, PLACE. Returns (out, count, count_dev)."""
    return exact_runner(backend, x, index_dtype, layout, force_64bit)(x, workspace, stats)


#: what an exact runner returns: (coords, count, count_dev); argwhere's coords; nonzero's
#: rows; nonzero_coordinates' (coords, count_dev)
RESULT_ALL, RESULT_COORDS, RESULT_ROWS, RESULT_COORDS_COUNT = range(4)


def exact_runner(backend, x, index_dtype, layout, force_64bit=False, *, keep_count=True,
                 result=RESULT_ALL):
    """``run(x, workspace=None, stats=None)`` for arrays laid out like ``x``: SCAN, one host
    read of the count, PLACE; everything but the count bound once. Returns ``result``'s form.
    ``keep_count=False`` (argwhere, nonzero: the caller drops ``count_dev``) puts the device
    count in the call's scratch instead of a fresh array."""
    cp = _plan(x, index_dtype, force_64bit)
    dtype = _native(x)
    scan_expr, scan_cfg = _config(backend, cp, dtype, TILES, cp.grid(plan.MODE_SCAN))
    mode, k = _place_mode(cp)
    place_expr, place_cfg = _config(backend, cp, dtype, TILES, cp.grid(mode))
    rows = layout == plan.LAYOUT_ROWS
    # PLACE's parameters: the row layout's do not depend on the count; the column layout's
    # row_stride is the count (the plan packs it between its template's bytes), the last
    # few kept here by count
    arg = backend.struct_arg      # (the by-value struct as this backend passes it, made once)
    place = arg(coordinate_params(cp, mode, layout, k=k)) if rows else {}
    return functools.partial(_exact_run, ExactState(
        cp, layout, rows, keep_count, result, dtype, scan_expr, *scan_cfg,
        arg(coordinate_params(cp, plan.MODE_SCAN, layout)), place_expr, *place_cfg, place,
        np.dtype(index_dtype), cp.ndim, _lookback_bytes(cp), backend))


def _place_mode(cp):
    """(mode, k) of the exact forms' writing pass: PLACE, or for tiles of inner chunks (which
    are not ranges of the row-major order) SEGMENTS, with every row written."""
    return (plan.MODE_SEGMENTS, plan.K_ALL) if cp.chunked else (plan.MODE_PLACE, 0)


def mask_words(cp) -> int:
    """uint32 words of the exact forms' mask record a tile of plan ``cp`` takes (nz_mask_stride:
    a bit per element, nonzero_tiles' TILE / 32 or nonzero_tiles_t's K * I / 32, rounded up to
    whole 32-byte sectors, then a sector for the tile's prefix)."""
    return -(-cp.tile // 256) * 8 + 8


def _exact_passes(state, ws, stream, x, stats):
    """:func:`_exact_run`'s launches and host read, inside its scope and holder lock."""
    (cp, layout, rows, keep_count, result, dtype, scan_expr, sgrid, sblock, ssmem, scan_params,
     place_expr, pgrid, pblock, psmem, place, index_dtype, ndim, nbytes, backend) = state
    mask = backend.alloc((cp.num_tiles * mask_words(cp),), _U32)
    counter, status = ws.state(STATE_LOOKBACK, nbytes, _lookback_views)
    if keep_count:
        count_dev = backend.alloc((), _I64)
    else:                                   # the caller never sees it: a scratch slot
        count_dev, = ws.carve(_COUNT_SLOT)
    if stats is None:
        st, params = counter, scan_params
    else:
        st, params = stats, backend.struct_arg(
            coordinate_params(cp, plan.MODE_SCAN, layout, stats=True))
    scan = backend.launcher(_NAME, dtype, scan_expr)
    _launch(ws, STATE_LOOKBACK, scan, sgrid, sblock,
            (x, params, counter, status, counter, count_dev, st, mask), ssmem, stream)
    count = backend.read_scalar(count_dev, stream, _CAPTURE_ERROR)   # the one host read
    out = backend.alloc((count, ndim) if rows else (ndim, count), index_dtype)
    if count:
        p = place if rows else place.get(count)
        if p is None:
            p = _column_params(backend, cp, place, count)
        # (the same kernel as the scan's: its launcher again)
        place_kernel = scan if place_expr == scan_expr else \
            backend.launcher(_NAME, dtype, place_expr)
        _launch(ws, STATE_LOOKBACK, place_kernel, pgrid, pblock,
                (x, p, counter, status, out, count_dev, counter, mask), psmem, stream)
    return out, count, count_dev


def _launch(holder, kind, launch, *args):
    """``launch(*args)``; if it raises (a kernel stopped part way: the simt backend can, and a
    GPU's sticky error), the holder's state of ``kind`` is discarded, so that the next call
    starts from fresh zeroed state. (Errors raised between launches, such as a host read
    refused during capture, leave the state as the kernels left it.)"""
    try:
        launch(*args)
    except BaseException:
        holder.discard_state(kind)
        raise


def _column_params(backend, cp, recent, count):
    """PLACE's parameters of the column layout for ``count`` nonzeros, kept in ``recent``
    (the last 8 counts)."""
    if len(recent) >= 8:
        recent.clear()
    mode, k = _place_mode(cp)
    p = recent[count] = backend.struct_arg(
        coordinate_params(cp, mode, plan.LAYOUT_COLS, k=k, row_stride=count))
    return p


def _exact_run(state, x, workspace=None, stats=None):
    cp, backend = state.plan, state.backend
    _record_plan(cp)
    scope, stream = backend.begin()
    with scope:
        ws = _holder_for(backend, workspace, backend.stream_key(stream))
        with ws.lock:
            out, count, count_dev = _exact_passes(state, ws, stream, x, stats)
    result = state.result
    if result == RESULT_COORDS:
        return out
    if result == RESULT_ROWS:
        return rows_of(out)
    if result == RESULT_COORDS_COUNT:
        return out, count_dev
    return out, count, count_dev


def fixed_runner(backend, x, size, fill_value, index_dtype, force_64bit=False):
    """``run(x, workspace=None, out=None, stats=None) -> (coords, count_dev)``: the ``size=k``
    form for arrays laid out like ``x``, one launch (two for tiles of inner chunks: SCAN
    records their bits, SEGMENTS writes), no host read."""
    index_dtype = np.dtype(index_dtype)
    k = int(size)
    cp = _plan(x, index_dtype, force_64bit)
    dtype = _native(x)
    most = (_GRID_X_MAX - cp.num_tiles) * cp.fill_rows()
    if k > most:
        raise ValueError(f"nonzero_coordinates: size={k} is too large for one launch: its fill "
                         f"needs {cp.grid(plan.MODE_FIXED, k)} blocks, over the grid's limit "
                         f"({_GRID_X_MAX}); size must be at most {most} for this input")
    mode = plan.MODE_SEGMENTS if cp.chunked else plan.MODE_FIXED
    expr, cfg = _config(backend, cp, dtype, TILES, cp.grid(mode, k))
    params = backend.struct_arg(
        coordinate_params(cp, mode, plan.LAYOUT_ROWS, k=k, fill=int(fill_value)))
    record = None
    if cp.chunked:     # the first pass, and its mask records (scratch: size= can be captured)
        scan_expr, scan_cfg = _config(backend, cp, dtype, TILES, cp.grid(plan.MODE_SCAN))
        record = (scan_expr, *scan_cfg, backend.struct_arg(
            coordinate_params(cp, plan.MODE_SCAN, plan.LAYOUT_ROWS)),
            (((cp.num_tiles * mask_words(cp),), _U32),))
    return functools.partial(_fixed_run, FixedState(
        cp, k, int(fill_value), dtype, expr, *cfg, params, (k, cp.ndim), index_dtype,
        _lookback_bytes(cp), record, backend))


def _fixed_run(state, x, workspace=None, out=None, stats=None):
    (cp, k, fill, dtype, expr, grid, block, smem, params, shape, index_dtype, nbytes, record,
     backend) = state
    _record_plan(cp)
    scope, stream = backend.begin()
    with scope:
        if out is not None:
            coords, count_dev = out
        else:
            coords, count_dev = backend.alloc(shape, index_dtype), backend.alloc((), _I64)
        ws = _holder_for(backend, workspace, backend.stream_key(stream))
        with ws.lock:
            counter, status = ws.state(STATE_LOOKBACK, nbytes, _lookback_views)
            if stats is None:
                st, p = counter, params
            else:
                st, p = stats, backend.struct_arg(coordinate_params(
                    cp, plan.MODE_SEGMENTS if record else plan.MODE_FIXED, plan.LAYOUT_ROWS,
                    k=k, fill=fill, stats=True))
            mask = counter      # (FIXED keeps no mask: the counter stands in for its pointer)
            if record is not None:
                sexpr, sgrid, sblock, ssmem, sparams, spec = record
                mask, = ws.carve(spec)
                _launch(ws, STATE_LOOKBACK, backend.launcher(_NAME, dtype, sexpr), sgrid, sblock,
                        (x, sparams, counter, status, counter, count_dev, counter, mask), ssmem,
                        stream)
            _launch(ws, STATE_LOOKBACK, backend.launcher(_NAME, dtype, expr), grid, block,
                    (x, p, counter, status, coords, count_dev, st, mask), smem, stream)
    return coords, count_dev


def argwhere(backend, x, index_dtype, *, force_64bit=False):
    """(count, ndim) coordinates of the nonzero elements, row-major order; one host read."""
    out, _, _ = _exact(backend, x, np.dtype(index_dtype), plan.LAYOUT_ROWS, force_64bit)
    return out


def nonzero(backend, x, index_dtype, *, force_64bit=False):
    """Tuple of ndim contiguous 1-D index arrays: the rows of one (ndim, count) array."""
    out, _, _ = _exact(backend, x, np.dtype(index_dtype), plan.LAYOUT_COLS, force_64bit)
    return rows_of(out)


def rows_of(out) -> tuple:
    """The rows of an (ndim, count) array, as nonzero's tuple: one itemgetter of every row
    (0.17 µs for two rows; ``tuple(out)``'s iteration took 0.58)."""
    get = _ROW_GETTERS.get(len(out))
    return tuple(out) if get is None else get(out)


#: the rows' getter per number of rows (a getter of one row returns the row, not a tuple)
_ROW_GETTERS = {n: operator.itemgetter(*range(n)) for n in range(2, 33)}


def nonzero_coordinates(backend, x, size, fill_value, index_dtype, *, force_64bit=False,
                        stats=None, out=None, workspace=None):
    """``(coords, count)``: ``size=None`` exact (one host read); ``size=k``: ``k`` rows, the
    first ``min(count, k)`` coordinates and the rest ``fill_value``, with no host read.

    ``stats``: optional zeroed uint64 array of 4 to collect look-back statistics (tests):
    [0] predecessor aggregates summed, [1] waits on a predecessor with no status yet,
    [2] the most aggregates one tile summed, [3] tiles that summed at least one aggregate.

    ``out``: ``(coords, count)`` to write (``size=k`` only; C-contiguous, checked by the API);
    with it and a ``workspace`` the call allocates nothing: the CUDA-graph capture form.
    """
    index_dtype = np.dtype(index_dtype)
    if size is None:
        coords, _, count_dev = _exact(backend, x, index_dtype, plan.LAYOUT_ROWS, force_64bit,
                                      stats, workspace)
        return coords, count_dev
    return fixed_runner(backend, x, size, fill_value, index_dtype, force_64bit)(
        x, workspace, out, stats)
