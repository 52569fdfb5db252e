"""The argreduce planner without any GPU: case selection per layout (C, F, transposed, sliced,
negative, broadcast), merging, flips, zero-stride elimination, the >8-dims error, 64-bit
selection, launch sizes within the device properties — and an interpreter that evaluates a
plan exactly as the kernels walk it (odometer over the planned dimensions) to check the
layout arithmetic against the brute-force reference."""
import ctypes
import math

import numpy as np
import pytest

from cupyops.core import layout as _layout
from cupyops.core.backend import H100_PROPS, DeviceProps
from cupyops.ops.argreduce.plan import (LIMIT_32, ArgreducePlan, busy_blocks, partial_index_bound,
                                     partial_index_width, plan_argreduce, step_digits)
from ref_argreduce import ref_argreduce, ref_hardmax

A100 = DeviceProps(name="A100 (test)", cc=(8, 0), sm_count=108, max_threads_per_block=1024,
                   max_shared_per_block=48 * 1024, max_shared_per_block_optin=163 * 1024,
                   max_threads_per_sm=2048, max_shared_per_sm=164 * 1024, regs_per_sm=65536,
                   max_blocks_per_sm=32)


def plan_of(x, axes, **kw):
    return plan_argreduce(x.shape, x.strides, x.dtype.itemsize, axes, kw.pop("props", H100_PROPS),
                          base_address=x.__array_interface__["data"][0] % 4096, **kw)


def plan_abstract(shape, strides_elems, itemsize, axes, **kw):
    return plan_argreduce(shape, [s * itemsize for s in strides_elems], itemsize, axes,
                          kw.pop("props", H100_PROPS), **kw)


# ---------------------------------------------------------------------------- interpreter

def _key(v, kind):
    """Python ordering key: larger wins (NaN largest for both kinds; -0.0 == 0.0)."""
    v = v.item() if hasattr(v, "item") else v
    if isinstance(v, float) and math.isnan(v):
        return (1, 0)
    v = int(v) if isinstance(v, (bool, np.bool_)) else v
    return (0, v if kind == "max" else -v)


def interpret(x, plan, kind, tie):
    """Evaluate ``plan`` on NumPy ``x`` by walking its dimensions like the kernels do, through
    a flat view of x's memory (offsets in elements from the walk's base)."""
    item = x.dtype.itemsize
    flat_base = x.__array_interface__["data"][0] + plan.in_base * item
    # a flat 1-D view of every element reachable from the base (offsets 0 .. span)
    span = _layout.span([_layout.Dim(n, (s // item,)) for n, s in zip(x.shape, x.strides)])
    mem = np.frombuffer((ctypes.c_char * ((span + 1) * item)).from_address(flat_base),
                        dtype=x.dtype)
    last = tie == "last"
    lbase = plan.index_base + (plan.zero_last_offset if last else 0)
    res = np.empty(plan.n_out, np.int64)
    for o in range(plan.n_out):
        q, in_off, out_off = o, 0, 0
        for i, (n, s_in, s_out) in enumerate(plan.kept):
            d = q if i == len(plan.kept) - 1 else q % n
            q //= n
            in_off += d * s_in
            out_off += d * s_out
        best = None
        for p in range(plan.group):
            r, off, lid = p, in_off, lbase
            for i, (n, s_in, w) in enumerate(plan.red):
                d = r if i == len(plan.red) - 1 else r % n
                r //= n
                off += d * s_in
                lid += d * w
            k = _key(mem[off], kind)
            if best is None or k > best[0] or (k == best[0] and (lid > best[1] if last else lid < best[1])):
                best = (k, lid)
        res[out_off + plan.out_base] = best[1]
    return res


def _layouts():
    rng = np.random.default_rng(0)
    base = rng.integers(0, 3, size=(4, 5, 6)).astype(np.float32)
    base[1, 2, 3] = np.nan
    c = base.copy()
    f = np.asfortranarray(base)
    yield "C", c
    yield "F", f
    yield "T", c.transpose(2, 0, 1)
    yield "sliced", c[:, ::2, 1:]
    yield "negative", c[::-1, :, ::-2]
    yield "negF", f[::-1, ::-1, :]
    yield "broadcast_red", np.broadcast_to(c[:, :1, :], (4, 5, 6))
    yield "broadcast_kept", np.broadcast_to(c[:1], (4, 5, 6))
    yield "mixed", np.moveaxis(f, 1, 2)[:, ::-1]


LAYOUTS = list(_layouts())
AXES = [(0,), (1,), (2,), (0, 1), (0, 2), (1, 2), (0, 1, 2)]


@pytest.mark.parametrize("name,x", LAYOUTS, ids=[n for n, _ in LAYOUTS])
@pytest.mark.parametrize("axes", AXES, ids=str)
def test_interpreted_plan_matches_reference(name, x, axes):
    for kind in ("max", "min"):
        for tie in ("first", "last"):
            plan = plan_of(x, axes)
            got = interpret(x, plan, kind, tie)
            want = ref_argreduce(x, axes, kind, tie).reshape(-1)
            np.testing.assert_array_equal(got, want, err_msg=f"{name} {axes} {kind} {tie} {plan}")


# ---------------------------------------------------------------------------- cases

def test_c_order_last_axis_is_row_with_vectors():
    x = np.zeros((64, 1024), np.float32)
    p = plan_of(x, (1,))
    assert p.case == "row" and p.kernel == "row"
    assert p.red == ((1024, 1, 1),) and p.kept == ((64, 1024, 1),)
    assert p.vec == 4 and p.passes == 1


def test_c_order_first_axis_is_column():
    x = np.zeros((100, 300), np.float32)
    p = plan_of(x, (0,))
    assert p.case == "column" and p.kernel == "col"
    assert p.block[0] == 32 and p.block[0] * p.block[1] <= 256
    # 10 blocks of 32 columns would leave SMs idle reading 1.2 MB: split into >= 75 blocks
    p = plan_of(np.zeros((1024, 300), np.float32), (0,))
    assert p.case == "split" and p.kernel == "col" and p.grid[0] * p.grid[1] >= 75


def test_f_order_takes_the_fast_cases():
    x = np.asfortranarray(np.zeros((300, 100), np.float32))
    assert plan_of(x, (0,)).case == "row"
    assert plan_of(x, (1,)).case == "column"
    assert plan_of(x.T, (1,)).case == "row"       # transposed C is F
    assert plan_of(x.T, (0,)).case == "column"


def test_f_order_all_axes_keeps_logical_weights():
    x = np.asfortranarray(np.zeros((3, 4, 5), np.float32))
    p = plan_of(x, (0, 1, 2))
    # one contiguous memory run, but three logical dimensions (weights 20, 5, 1 innermost first)
    assert p.red_mem == ((60, 1),)
    assert p.red == ((3, 1, 20), (4, 3, 5), (5, 12, 1))
    assert p.case == "row"


def test_merging_within_kept_and_reduced_sets():
    x = np.zeros((2, 3, 4, 5, 6), np.int16)
    p = plan_of(x, (3, 4))
    assert p.red == ((30, 1, 1),) and p.kept == ((24, 30, 1),)
    p = plan_of(x, (1, 2))
    assert p.red == ((12, 30, 1),)
    assert p.kept == ((30, 1, 1), (2, 360, 30))
    assert p.case == "column"
    p = plan_of(x, (0, 2, 4))
    assert len(p.red) == 3 and len(p.kept) == 2


def test_sliced_is_general():
    x = np.zeros((100, 200), np.float32)[:, ::2]
    p = plan_of(x, (1,))
    assert p.case == "general" and p.red == ((100, 2, 1),) and p.vec == 1


def test_negative_strides_are_flipped():
    x = np.arange(24, dtype=np.float64).reshape(4, 6)[::-1, ::-1]
    p = plan_of(x, (1,))
    assert p.red == ((6, 1, -1),) and p.index_base == 5
    assert p.kept == ((4, 6, -1),) and p.out_base == 3
    assert p.in_base == -23
    assert p.case == "row"


def test_zero_stride_reduced_axis_is_not_read():
    x = np.broadcast_to(np.zeros((7, 1, 9), np.float32), (7, 1000, 9))
    p = plan_of(x, (1, 2))
    assert p.group == 9 and p.group_full == 9000
    assert p.red == ((9, 1, 1),)
    assert p.zero_last_offset == 999 * 9
    p = plan_of(x, (1,))
    assert p.group == 1 and p.red == () and p.zero_last_offset == 999
    assert p.group_full == 1000


def test_zero_stride_kept_axis_goes_outermost():
    x = np.broadcast_to(np.zeros((1, 512), np.float32), (64, 512))
    p = plan_of(x, (1,))
    assert p.kept == ((64, 0, 1),) and p.case == "row"
    x = np.broadcast_to(np.zeros((512, 1), np.float32), (512, 64))
    p = plan_of(x, (0,))
    assert p.kept == ((64, 0, 1),)


def test_size_one_dims_are_dropped():
    x = np.zeros((1, 50, 1, 70, 1), np.uint8)
    p = plan_of(x, (1, 2))
    assert p.red == ((50, 70, 1),) and p.kept == ((70, 1, 1),)


def test_more_than_eight_dims_a_side_is_a_value_error():
    x = np.zeros((2,) * 18, np.int8)
    with pytest.raises(ValueError, match="at most 8 dimensions"):
        plan_of(x, tuple(range(1, 18, 2)))     # 9 kept dims, none adjacent
    with pytest.raises(ValueError, match="at most 8 dimensions"):
        plan_of(x, tuple(range(0, 18, 2)))     # 9 reduced dims
    p = plan_of(np.zeros((2,) * 16, np.int8), tuple(range(0, 16, 2)))  # exactly 8: fine
    assert len(p.red) == 8 and len(p.kept) == 8


def test_split_for_few_outputs_and_big_groups():
    p = plan_abstract((1 << 24,), (1,), 4, (0,))
    assert p.case == "split" and p.passes == 2 and p.nchunks > 1
    assert p.chunk * p.nchunks >= p.group > p.chunk * (p.nchunks - 1)
    assert p.chunk % p.vec == 0
    assert p.grid[1] == p.nchunks <= 65535
    p = plan_abstract((1 << 22, 4), (4, 1), 4, (0,))   # 4 columns, long: column kernel, split
    assert p.case == "split" and p.kernel == "col"
    p = plan_abstract((1 << 20, 8), (8, 1), 4, (0,), hardmax=True)
    assert p.case == "split" and p.finish_grid[1] >= 1 and p.write_chunk > 0


def test_split_keeps_scratch_small_against_the_input():
    # partials (stored once, loaded by every finish block) cost at most 1/64 of the input, unless
    # that would leave fewer than two blocks per SM (then parallelism wins over scratch traffic),
    # or fewer blocks than busy_blocks (every plan)
    sm = H100_PROPS.sm_count
    for itemsize in (1, 2, 4, 8):
        for hardmax, shape, axes in ((False, (1024, 1024), (0,)), (True, (64, 256, 64), (1,)),
                                     (False, (1 << 24,), (0,)), (True, (4, 1 << 22), (1,)),
                                     (True, (1 << 22, 8), (0,)), (False, (4096, 4096), (0,))):
            strides = [1] * len(shape)
            for i in range(len(shape) - 2, -1, -1):
                strides[i] = strides[i + 1] * shape[i + 1]
            p = plan_abstract(shape, strides, itemsize, axes, hardmax=hardmax)
            if p.passes == 1:
                continue
            reads = p.finish_grid[1]
            scratch = p.n_out * p.nchunks * (p.key_itemsize + p.pidx_itemsize) * (1 + reads)
            busy = max(-(-busy_blocks(p.n_out * p.group * itemsize, sm) // p.grid[0]),
                       1 if hardmax else -(-2 * sm // p.grid[0]))
            assert (64 * scratch <= p.n_out * p.group * itemsize
                    or p.nchunks <= busy), (shape, itemsize, hardmax, p.grid)
    # int8 4096 x 4096 over axis 0: the scratch limit cuts the chunks, the SM floor keeps >= 2
    # blocks per SM
    p = plan_abstract((4096, 4096), (4096, 1), 1, (0,))
    assert p.passes == 2 and p.grid[0] * p.nchunks >= 2 * sm
    assert p.nchunks < plan_abstract((4096, 4096), (4096, 1), 1, (0,), min_scratch_ratio=0).nchunks
    # a middle-axis hardmax whose group fits one block: one fused launch, no scratch
    for itemsize in (1, 2, 4):
        assert plan_abstract((64, 256, 64), (16384, 64, 1), itemsize, (1,),
                             hardmax=True).passes == 1
    # the ratio is a knob: 0 restores the unconstrained split
    assert plan_abstract((1024, 1024), (1024, 1), 1, (0,), min_scratch_ratio=0).passes == 2


def test_partial_index_bound_holds_for_every_chunk():
    """A compact partial stores the winner's logical index minus that of its chunk's first
    position: brute force over every chunk size and chunk of random reduced lists (any weights,
    negative ones too, as flips leave them) that the bound holds, so the planned width does."""
    rng = np.random.default_rng(3)
    for _ in range(120):
        nd = int(rng.integers(1, 4))
        sizes = [int(n) for n in rng.integers(2, 7, nd)]
        weights = [int(w) * int(rng.choice([-1, 1])) for w in rng.integers(1, 40, nd)]
        red = tuple((n, 1, w) for n, w in zip(sizes, weights))
        group = math.prod(sizes)
        pos = np.arange(group)
        lids = np.zeros(group, np.int64)
        r = pos.copy()
        for i, (n, w) in enumerate(zip(sizes, weights)):
            d = r if i == nd - 1 else r % n
            r = r // n
            lids += d * w
        for chunk in range(1, group + 1):
            worst = max(int(np.abs(lids[c0:c0 + chunk] - lids[c0]).max())
                        for c0 in range(0, group, chunk))
            assert worst <= partial_index_bound(red, chunk), (red, chunk)
    # one reduced dimension (the first axis of a matrix): exact
    assert partial_index_bound(((1024, 1024, 1),), 128) == 127
    assert partial_index_bound(((1024, 4, -1),), 128) == 127
    assert partial_index_bound(((100, 1, 3),), 1000) == 297
    # digits that cannot wrap (chunks aligned to the inner period) move only as far as the chunk
    assert partial_index_bound(((8, 1, 100), (64, 8, 1)), 16) == 7 * 100 + 1
    assert partial_index_bound(((8, 1, 100), (64, 8, 1)), 12) == 7 * 100 + 2


def test_partial_index_width():
    assert partial_index_width(((1024, 1024, 1),), 128, 4) == 1
    assert partial_index_width(((1024, 1024, 1),), 129, 4) == 2
    assert partial_index_width(((1024, 1024, -1),), 1024, 4) == 2
    assert partial_index_width(((1 << 20, 1, 1),), 1 << 16, 4) == 4
    assert partial_index_width(((1 << 20, 1, 1),), 1 << 16, 8) == 4
    assert partial_index_width(((1 << 33, 1, 1),), 1 << 32, 8) == 8
    assert partial_index_width(((1 << 20, 1, 1),), 1 << 20, 4) == 4     # never wider than I
    # the plans: int8 and float16 1024 x 1024 over the first axis split into chunks of 128
    # positions, whose partials take a 1-byte index and a key of the value's width
    # (8- and 16-byte values: 1024 columns fill the SMs with blocks of 4 or 2 columns, unsplit;
    # 128 columns split)
    for itemsize in (1, 2, 4, 8, 16):
        shape = (1024, 1024) if itemsize <= 4 else (1024, 128)
        p = plan_abstract(shape, (shape[1], 1), itemsize, (0,))
        assert p.case == "split" and p.key_itemsize == itemsize
        assert p.pidx_itemsize == partial_index_width(p.red, p.chunk, 4)
        if p.chunk <= 128:
            assert p.pidx_itemsize == 1, p


def test_contiguous_chunks_start_on_sectors():
    # decode and split chunks of a contiguous reduction are whole 32-byte sectors
    for itemsize in (1, 2, 4, 8, 16):
        for shape in ((8, 131072), (1, 100003), (4, 1 << 22), (1 << 24,)):
            p = plan_abstract(shape, [shape[-1], 1][-len(shape):], itemsize, (len(shape) - 1,))
            if p.nchunks > 1:
                assert (p.chunk * itemsize) % 32 == 0 and p.chunk % p.vec == 0, (shape, p)


def test_full_reduction_of_f_order_is_split_with_weights():
    p = plan_abstract((4096, 4096), (1, 4096), 4, (0, 1))
    assert p.case == "split" and p.red == ((4096, 1, 4096), (4096, 4096, 1))


def test_groups_beyond_2_31_split_in_64_bit():
    n = 2**31 + 1000
    p = plan_abstract((n,), (1,), 1, (0,))
    assert p.use_64bit and p.case == "split"
    assert p.chunk * p.nchunks >= n
    p = plan_abstract((3, n), (n, 1), 2, (1,))
    assert p.use_64bit


def test_64_bit_selection():
    assert not plan_abstract((1000, 1000), (1000, 1), 4, (1,)).use_64bit
    assert plan_abstract((1000, 1000), (1000, 1), 4, (1,), force_64bit=True).use_64bit
    # offsets past 2**31 elements with a small group
    assert plan_abstract((3, 10), (2**31, 1), 1, (1,)).use_64bit
    assert not plan_abstract((3, 10), (2**20, 1), 1, (1,)).use_64bit
    # hardmax: the output has x's size
    assert plan_abstract((2**16, 2**16), (0, 1), 1, (1,), hardmax=True).use_64bit
    assert not plan_abstract((2**16, 2**16), (0, 1), 1, (1,)).use_64bit
    assert LIMIT_32 < 2**31


@pytest.mark.parametrize("props", [H100_PROPS, A100], ids=["H100", "A100"])
@pytest.mark.parametrize("shape,strides,axes", [
    ((1 << 20,), (1,), (0,)),
    ((4096, 4096), (4096, 1), (1,)),
    ((4096, 4096), (4096, 1), (0,)),
    ((7, 3, 1 << 16), (3 << 16, 1 << 16, 1), (0, 2)),
    ((1 << 16, 3), (3, 1), (1,)),
    ((3, 1 << 16), (1 << 16, 1), (0,)),
    ((10, 10, 10), (-100, 1, 10), (0, 2)),
    ((2**31 + 8,), (1,), (0,)),
])
@pytest.mark.parametrize("hardmax", [False, True])
def test_launch_sizes_within_props(props, shape, strides, axes, hardmax):
    p = plan_abstract(shape, strides, 4, axes, props=props, hardmax=hardmax)
    for block, grid, shared in ((p.block, p.grid, p.shared_mem),
                                (p.finish_block, p.finish_grid, p.finish_shared_mem)):
        assert math.prod(block) <= min(256, props.max_threads_per_block)
        assert block[2] == 1 and 1 <= grid[0] <= 2**31 - 1 and 1 <= grid[1] <= 65535
        assert 0 <= shared <= props.max_shared_per_block
    if p.kernel == "row":
        assert p.team in (1, 2, 4, 8, 16, 32, p.block[0])
    else:
        bx, by = p.block[:2]
        assert bx & (bx - 1) == 0 and by & (by - 1) == 0
    assert p.passes == (2 if p.case == "split" else 1)
    if p.kernel == "row" and p.team < p.block[0]:
        assert p.grid[0] * (p.block[0] // p.team) >= p.n_out
    elif p.kernel == "row":
        assert p.grid[0] == p.n_out
    else:
        assert p.grid[0] * p.block[0] * p.vec >= p.n_out and p.n_out % p.vec == 0


def test_vector_width_respects_alignment():
    x = np.zeros((8, 64), np.float32)
    assert plan_of(x, (1,)).vec == 4
    assert plan_of(x[:, 1:], (1,)).vec == 1          # rows of 63, misaligned
    assert plan_of(x[:, 2:], (1,)).vec == 1          # 16 or 4 bytes only: no 8-byte loads
    assert plan_of(np.zeros((8, 64), np.uint8), (1,)).vec == 16
    assert plan_of(np.zeros((8, 64), np.uint8)[:, 4:], (1,)).vec == 4
    assert plan_of(np.zeros((8, 64), np.float16)[:, 2:], (1,)).vec == 2
    assert plan_of(np.zeros((8, 64), np.float64), (1,)).vec == 2
    p = plan_abstract((8, 64), (64, 1), 4, (1,), base_address=4)
    assert p.vec == 1


def test_step_digits():
    assert step_digits(7, (3, 4)) == (1, 2)
    assert step_digits(256, (1000,)) == (256,)
    assert step_digits(5, ()) == ()


def test_layout_helpers():
    D = _layout.Dim
    dims, base = _layout.normalize([D(3, (-1, 1)), D(4, (3, 3)), D(1, (99, 99))])
    assert base == (-2, 2) and dims == [D(3, (1, -1), dims[0].axis), D(4, (3, 3), dims[1].axis)]
    merged = _layout.merge([D(3, (1, 1)), D(4, (3, 3)), D(5, (12, 100))])
    assert [(d.size, d.strides) for d in merged] == [(12, (1, 1)), (5, (12, 100))]
    assert _layout.row_major_strides((2, 3, 4)) == (12, 4, 1)
    assert [len(g) for g in _layout.coarsen_to([D(2, (1,)), D(3, (2,)), D(4, (6,))], (6, 4))] == [2, 1]


def test_dimension_past_2_31_is_walked_outermost():
    # F-order (2**31 + 1, 3) over both axes: the long axis is innermost in memory, but the
    # kernels keep 32-bit digits below the outermost dimension, so it is walked outermost
    n = 2**31 + 1
    p = plan_abstract((n, 3), (1, n), 1, (0, 1))
    assert p.red == ((3, n, 1), (n, 1, 3)) and p.use_64bit
    assert p.red_mem == ((3 * n, 1),)
    p = plan_abstract((n, 3), (3, 1), 1, (0, 1), hardmax=True)
    assert p.write == ((3 * n, 1, 1),)
    p = plan_abstract((n, 3, 2), (6, 2, 1), 1, (0, 2), hardmax=True)
    assert p.write == ((2, 1, 1), (n, 6, 2))
    p = plan_abstract((3, n, 2), (2 * n, 2, 1), 1, (1, 2), hardmax=True)
    assert p.write == ((2 * n, 1, 1),)


def test_finish_pass_layout():
    # few long rows: one group per block, threads over partials and contiguous positions
    p = plan_abstract((4, 1 << 22), (1 << 22, 1), 4, (1,), hardmax=True)
    assert p.case == "split" and p.finish_block == (1, 256, 1)
    assert p.finish_grid[0] == 4 and p.finish_grid[1] * p.write_chunk >= p.group_full
    # a column layout: threads x over neighbouring groups (coalesced partials and writes)
    p = plan_abstract((1 << 16, 4096), (4096, 1), 4, (0,), hardmax=True)
    assert p.case == "split" and p.kernel == "col" and p.finish_block == (32, 8, 1)
    p = plan_abstract((1 << 16, 4096), (4096, 1), 4, (0,))
    assert p.finish_block[0] == 32 and p.finish_block[1] <= 8 and p.finish_grid == (128, 1, 1)


# ---------------------------------------------------------------------------- contiguous case

def _contiguous_layouts():
    """C-contiguous shapes of 1 to 4 dimensions (sizes 1, 3, 32, 1025 and a few large ones for
    splits and decode plans; a few of 5 to 7 with unit dims between the others) with every
    set of axes."""
    sizes = (1, 3, 32, 1025)
    shapes = [(n,) for n in sizes] + [(a, b) for a in sizes for b in sizes]
    shapes += [(a, b, c) for a in (1, 3, 32) for b in (1, 3, 1025) for c in (1, 32)]
    shapes += [(2, 3, 1, 5), (3, 1, 33, 2), (1, 131072), (8, 131072), (131072, 8),
               (3, 70000, 5), (2, 3, 40000, 2), (1 << 20, 3), (5, 1 << 21)]
    shapes += [(3, 1, 1, 4, 1, 5), (2, 1, 3, 1, 2, 1, 3), (1, 5, 1, 1, 7),
               (3, 5, 2**31 + 3), (2**31 + 3, 2, 3)]    # a dim too long for a 32-bit digit
    for shape in shapes:
        nd = len(shape)
        for mask in range(1, 1 << nd):           # every set of axes, neighbours or not
            yield shape, tuple(i for i in range(nd) if mask >> i & 1)


def test_contiguous_planner_gives_the_general_plan():
    """plan_argreduce_contiguous (the first-call planner of C-contiguous inputs) against the
    general sort-and-merge planner: the same plan, field by field, for every set of axes, value
    size, hardmax, 64-bit switch, base alignment, device and test option."""
    from cupyops.ops.argreduce.plan import plan_argreduce_contiguous
    option_sets = [{}, dict(min_split_elements=0, min_work_per_thread=1),
                   dict(min_split_elements=0, min_block_team_vecs=1, min_decode_block_vecs=1),
                   dict(min_scratch_ratio=0, min_split_elements=0, min_decode_block_vecs=0)]
    n = 0
    for shape, axes in _contiguous_layouts():
        for itemsize in (1, 2, 4, 8, 16):
            strides = [itemsize * math.prod(shape[i + 1:]) for i in range(len(shape))]
            for hardmax in (False, True):
                for k, (f64, base, align, props) in enumerate((
                        (False, 0, None, H100_PROPS), (True, 8, None, A100),
                        (False, 4 % itemsize, itemsize // 2 or 1, H100_PROPS))):
                    options = option_sets[(n + k) % len(option_sets)]
                    kw = dict(force_64bit=f64, hardmax=hardmax, base_address=base,
                              element_align=align, **options)
                    try:
                        want = plan_argreduce(shape, strides, itemsize, axes, props, **kw)
                    except ValueError as e:     # a dim too long for the index width
                        with pytest.raises(ValueError) as got_e:
                            plan_argreduce_contiguous(shape, itemsize, axes, props, **kw)
                        assert str(got_e.value) == str(e)
                        continue
                    got = plan_argreduce_contiguous(shape, itemsize, axes, props, **kw)
                    # (plans are built without the named tuple's argument checks: every field)
                    for plan in (got, want):
                        assert type(plan) is ArgreducePlan
                        assert len(plan) == len(ArgreducePlan._fields)
                    assert got._asdict() == want._asdict(), (shape, axes, itemsize, kw)
                    assert got == want
                    n += 1
    assert n > 3000


def test_contiguous_planner_refuses_what_the_general_one_refuses():
    """Too many dimensions a side after merging (alternating kept and reduced axes): the same
    ValueError from both planners."""
    from cupyops.ops.argreduce.plan import plan_argreduce_contiguous
    shape = (2,) * 18
    strides = [4 * 2 ** (17 - i) for i in range(18)]
    for axes in (tuple(range(0, 18, 2)), tuple(range(1, 18, 2))):
        with pytest.raises(ValueError, match="at most 8 dimensions a side") as want:
            plan_argreduce(shape, strides, 4, axes, H100_PROPS)
        with pytest.raises(ValueError) as got:
            plan_argreduce_contiguous(shape, 4, axes, H100_PROPS)
        assert str(got.value) == str(want.value)
