"""Per-call host cost (cupyops.ops.argreduce.numpy_entries, the per-backend plan caches): the caches never give
one layout's plan or entry to another, stay bounded, hold no memory, and a cached call on bad
input fails exactly as an uncached one. Speed itself is the benchmark's (overhead section)."""
import threading

import numpy as np
import pytest

import cupyops
from cupyops.core import backend as _backend
from cupyops.core import lru as _cache
from cupyops import _call as _fastpath
from cupyops.testing import dry_run, recording
from _devices import KERNEL_DEVICES, device_kw, host, is_cupy, ops, shares_memory, to_device

DEVICES = ["cpu"] + KERNEL_DEVICES


def _at_offsets(dtype, shape, offsets=(0, 4, 8)):
    """Arrays of the same shape, strides and dtype whose data pointers sit ``offsets`` bytes
    past a 16-byte boundary."""
    dt = np.dtype(dtype)
    n = int(np.prod(shape))
    out = []
    for off in offsets:
        raw = np.zeros(n * dt.itemsize + 64, np.uint8)
        base = -raw.ctypes.data % 16 + off
        out.append(raw[base:base + n * dt.itemsize].view(dt).reshape(shape))
    return out


@pytest.mark.parametrize("device", DEVICES)
def test_layouts_that_differ_in_one_detail_get_their_own_answer(device):
    rng = np.random.default_rng(0)
    base = rng.integers(0, 3, (32, 48)).astype(np.float32)
    variants = {
        "C": base,
        "negative stride": base[:, ::-1],
        "zero stride": np.broadcast_to(base[:1], base.shape),
        "F": np.asfortranarray(base),
    }
    o = ops(device)
    # the same call on each, twice, interleaved: every answer against NumPy
    for _ in range(2):
        for name, x in variants.items():
            for kind, f, ref in (("max", o.argmax, np.argmax),
                                 ("min", o.argmin, np.argmin)):
                for tie in ("first", "last"):
                    for dt in ("int64", "int16", "uint8"):
                        got = f(x, axis=1, tie=tie, dtype=dt)
                        want = ref(x, axis=1) if tie == "first" else \
                            x.shape[1] - 1 - ref(x[:, ::-1], axis=1)
                        assert got.dtype == np.dtype(dt), (name, kind, tie, dt)
                        np.testing.assert_array_equal(got, want, err_msg=f"{name} {kind} {tie}")


@pytest.mark.parametrize("device", KERNEL_DEVICES)
def test_pointer_alignment_is_part_of_the_key(device):
    """complex64 at 0, 4 and 8 bytes past a 16-byte boundary: only the 4-byte one needs narrow
    loads; every one gets its own plan, interleaved. (NumPy input on "cuda" reaches the
    kernels as a fresh GPU copy, 8-byte aligned whatever the host offset: never narrow. CuPy
    input keeps the offsets.)"""
    rng = np.random.default_rng(1)
    o = ops(device)
    arrays = _at_offsets(np.complex64, (40, 40))
    wants = []
    for x in arrays:
        x[...] = rng.integers(0, 3, x.shape) + 1j * rng.integers(0, 3, x.shape)
        wants.append(np.argmax(x, axis=1))
    narrows = (False, False, False) if device == "cuda" else (False, True, False)
    for _ in range(2):
        for x, want, narrow in zip(arrays, wants, narrows):
            with recording() as t:
                got = o.argmax(x, axis=1)
            np.testing.assert_array_equal(got, want)
            assert t.plans[-1].narrow_loads == narrow
            with recording() as t:
                c = o.count_nonzero(x, axis=0)
            np.testing.assert_array_equal(c, np.count_nonzero(x, axis=0))
            assert t.plans[-1].narrow_loads == narrow


def test_device_properties_are_part_of_the_key():
    """Two backends with other device properties plan the same layout differently and each
    keeps its own."""
    few = _backend.SimtBackend(props=_backend.DeviceProps(**{
        **_backend.H100_PROPS.__dict__, "name": "small", "sm_count": 2}))
    many = _backend.get_backend("simt")
    from cupyops.ops.argreduce import launch as G
    x = np.empty((1, 1 << 20), np.float32)      # planned only, never run
    for _ in range(2):
        la = G.prepare(many, x, (1,), hardmax=False, kind="max", tie="first", out_dtype="int64")
        lb = G.prepare(few, x, (1,), hardmax=False, kind="max", tie="first", out_dtype="int64")
        assert la.plan.nchunks != lb.plan.nchunks
        # (launches are built without the named tuple's argument checks: every field)
        assert type(la) is G.ArgreduceLaunches and len(la) == len(G.ArgreduceLaunches._fields)


def test_cached_call_on_bad_input_fails_like_an_uncached_one():
    x = np.ones((3, 4), np.float32)
    # (CuPy has no object or datetime64 arrays: ops("cupy") gives those to "cuda" as NumPy)
    bad_calls = [
        lambda d: ops(d).argmax(x, axis=2),
        lambda d: ops(d).argmax(x, axis=[0]),
        lambda d: ops(d).argmax(x, tie="middle"),
        lambda d: ops(d).argmax(x, dtype=np.float32),
        lambda d: ops(d).argmax(np.ones((3, 300), np.float32), axis=1, dtype=np.int8),
        lambda d: ops(d).argmax(x.astype(object)),
        lambda d: ops(d).hardmax(x.astype("datetime64[s]")),
        lambda d: ops(d).nanargmax(np.full((2, 2), np.nan, np.float32), axis=1),
        lambda d: ops(d).nonzero_coordinates(x, size=-1),
        lambda d: ops(d).count_nonzero(x, axis=(0, 0)),
    ]
    for device in DEVICES:
        o = ops(device)
        for call in bad_calls:
            _fastpath.clear()
            with pytest.raises(Exception) as cold:
                call(device)
            # warm every cache with good calls of the same shapes, then the bad one again
            o.argmax(x)
            o.argmax(x, axis=1)
            o.count_nonzero(x, axis=0)
            with pytest.raises(type(cold.value)) as warm:
                call(device)
            assert str(warm.value) == str(cold.value)


def test_a_new_nan_group_raises_after_a_cached_good_call():
    good = np.array([[1.0, np.nan], [np.nan, 2.0]], np.float32)
    bad = np.array([[1.0, np.nan], [np.nan, np.nan]], np.float32)
    for device in DEVICES:
        o = ops(device)
        for _ in range(2):
            np.testing.assert_array_equal(o.nanargmax(good, axis=1), [0, 1])
        with pytest.raises(ValueError, match="All-NaN slice encountered"):
            o.nanargmax(bad, axis=1)


def test_new_values_same_layout_new_answer():
    rng = np.random.default_rng(3)
    for device in DEVICES:
        o = ops(device)
        for _ in range(3):
            x = rng.integers(0, 5, (16, 100)).astype(np.float32)
            np.testing.assert_array_equal(o.argmin(x, axis=0), np.argmin(x, axis=0))
            m = rng.random((16, 100)) < 0.2
            np.testing.assert_array_equal(o.argwhere(m), np.argwhere(m))
            c, n = o.nonzero_coordinates(m, size=50, fill_value=-2)
            assert int(n) == m.sum()
            np.testing.assert_array_equal(c[:min(50, int(n))], np.argwhere(m)[:50])


@pytest.mark.parametrize("device", KERNEL_DEVICES)
def test_environment_device_is_part_of_the_key(device, monkeypatch):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    if is_cupy(device):
        # CuPy input runs on its GPU whatever CUPYOPS_DEVICE says, cached call or not
        for env in [None, "cpu"] + [d for d in KERNEL_DEVICES if not is_cupy(d)]:
            if env is None:
                monkeypatch.delenv("CUPYOPS_DEVICE", raising=False)
            else:
                monkeypatch.setenv("CUPYOPS_DEVICE", env)
            for _ in range(2):
                with recording() as t:
                    np.testing.assert_array_equal(ops(device).argmax(x, axis=1), [3, 3, 3])
                assert t.launches, env
        return
    monkeypatch.setenv("CUPYOPS_DEVICE", device)
    with recording() as t:
        np.testing.assert_array_equal(cupyops.argmax(x, axis=1), [3, 3, 3])
    assert t.launches
    monkeypatch.setenv("CUPYOPS_DEVICE", "cpu")
    with recording() as t:
        cupyops.argmax(x, axis=1)
    assert not t.launches
    monkeypatch.delenv("CUPYOPS_DEVICE")
    with recording() as t:
        np.testing.assert_array_equal(cupyops.argmax(x, axis=1), [3, 3, 3])
    assert not t.launches


@pytest.mark.parametrize("op", ["argmax", "hardmax", "argwhere", "count_nonzero"])
def test_a_cached_simt_call_fails_once_the_compiler_is_gone(op, tmp_path, monkeypatch):
    """The slow path checks that the SIMT compiler works; a call cached under one compiler
    (its exact layout, or its layout class: cupyops.ops.argreduce.first_call) is no answer under another."""
    fn = getattr(cupyops, op)
    for shape in ((5,), (7,)):        # (7,): a new layout of a class the first call cached
        x = np.ones(shape, np.float64)
        fn(x, device="simt")
        monkeypatch.setenv("CUPYOPS_SIMT_CXX", str(tmp_path / "absent-cxx"))
        with pytest.raises(RuntimeError, match="device='simt' asks for the CPU emulation"):
            fn(x, device="simt")
        with pytest.raises(RuntimeError, match="device='simt' asks for the CPU emulation"):
            fn(np.ones((9,), np.float64), device="simt")
        monkeypatch.delenv("CUPYOPS_SIMT_CXX")


def test_results_are_fresh_arrays_every_call():
    for device in DEVICES:
        # (the call's own results: CuPy arrays for CuPy input)
        x = to_device(np.arange(12, dtype=np.float32).reshape(3, 4), device)
        kw = device_kw(device)
        r1 = cupyops.argmax(x, axis=1, **kw)
        r2 = cupyops.argmax(x, axis=1, **kw)
        assert r1 is not r2 and not shares_memory(r1, r2), device
        h1 = cupyops.hardmax(x, axis=1, **kw)
        h1[...] = 7
        np.testing.assert_array_equal(host(cupyops.hardmax(x, axis=1, **kw))[:, 3], 1)


def test_lru_is_bounded_and_keeps_the_recent():
    cache = _cache.LRU(3)
    for i in range(5):
        cache.put(i, str(i))
    assert len(cache) == 3 and cache.get(0) is None and cache.get(4) == "4"
    cache.get(2)
    cache.put(5, "5")
    assert cache.get(2) == "2" and cache.get(3) is None


def test_threads_share_the_caches_safely():
    rng = np.random.default_rng(4)
    xs = [rng.integers(0, 4, (8, 64 + i)).astype(np.float32) for i in range(6)]
    wants = [np.argmax(x, axis=1) for x in xs]
    errors = []

    def work(seed):
        r = np.random.default_rng(seed)
        try:
            for _ in range(60):
                i = int(r.integers(len(xs)))
                dev = DEVICES[int(r.integers(len(DEVICES)))]
                got = ops(dev).argmax(xs[i], axis=1)
                if not np.array_equal(got, wants[i]):
                    errors.append((i, dev))
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(repr(exc))
    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:5]


def test_dry_run_steady_state_records_every_launch():
    x = np.random.default_rng(5).random((8, 1000)).astype(np.float32)
    cupyops.argmax(x, axis=1, device="simt")
    with dry_run() as rec:
        for _ in range(3):
            cupyops.argmax(x, axis=1, device="simt")
    assert len(rec.launches) == 3 and all(l[0].startswith("argreduce_row") for l in rec.launches)


@pytest.mark.parametrize("device", DEVICES)
def test_equal_but_wrongly_typed_arguments_are_still_refused(device, monkeypatch):
    """True == 1 == 1.0 as dict keys: a cached call must not let a value of a refused type
    through (found by a review)."""
    x = np.arange(12.0).reshape(3, 4)
    o = ops(device)
    o.argmax(x, axis=1, keepdims=False)
    o.argmax(x, axis=(0, 1))
    o.hardmax(x, axis=1)
    o.nonzero_coordinates(x, size=3, fill_value=0)
    for call in (lambda: o.argmax(x, axis=1, keepdims=0),
                 lambda: o.argmax(x, axis=True),
                 lambda: o.argmax(x, axis=1.0),
                 lambda: o.argmax(x, axis=(False, 1)),
                 lambda: o.hardmax(x, axis=True),
                 lambda: o.nonzero_coordinates(x, size=3.0),
                 lambda: o.nonzero_coordinates(x, size=3, fill_value=False)):
        with pytest.raises(TypeError):
            call()


@pytest.mark.parametrize("device", DEVICES)
def test_a_named_or_nested_tuple_argument_is_never_served_from_the_cache(device):
    """A tuple subclass (a named tuple) or a tuple inside a tuple hides its items' types from
    a key (P(0, 2) == P(False, 2)): such calls take the slow path every time, so a cached call
    cannot let a refused item type through (found by a review)."""
    import collections
    from cupyops import _call as _fastpath
    axes = collections.namedtuple("axes", "a b")
    # (the call's own input and device argument: a CuPy array and none for CuPy input)
    x = to_device(np.arange(24.0).reshape(2, 3, 4), device)
    kw = device_kw(device)
    dev = kw.get("device")
    want = host(cupyops.argmax(x, axis=(0, 2), **kw))
    for _ in range(2):
        np.testing.assert_array_equal(host(cupyops.argmax(x, axis=axes(0, 2), **kw)), want)
    assert _fastpath.key(x, dev, None, None, "argmax", axes(0, 2)) is None
    assert _fastpath.key(x, dev, None, None, "argmax", ((0,), 2)) is None
    assert _fastpath.key(x, dev, None, None, "argmax", (0, 2)) is not None
    with pytest.raises(TypeError):
        cupyops.argmax(x, axis=axes(False, 2), **kw)
    for _ in range(2):
        with pytest.raises(TypeError):
            cupyops.argmax(x, axis=((0,), 2), **kw)


def test_device_argument_and_environment_are_apart(monkeypatch):
    x = np.arange(12.0).reshape(3, 4)
    monkeypatch.setenv("CUPYOPS_DEVICE", "cpu")
    cupyops.argmax(x)
    with pytest.raises(TypeError, match="device"):
        cupyops.argmax(x, device=b"cpu")


def test_count_nonzero_result_is_c_ordered_every_call():
    a = np.ones((2, 3, 5)).T
    r1 = cupyops.count_nonzero(a, axis=1)
    r2 = cupyops.count_nonzero(a, axis=1)
    assert r1.flags.c_contiguous and r2.flags.c_contiguous and r1.strides == r2.strides


@pytest.mark.parametrize("shape,axis", [((1, 3), 0), ((4, 64), 1), ((64, 4), 0)])
def test_several_all_nan_groups_raise_the_nan_error_on_every_device(shape, axis):
    """nanarg*: many groups all NaN set the flag from many threads (an atomic, not a racy
    plain store that the SIMT race checker reports)."""
    x = np.full(shape, np.nan, np.float32)
    if shape == (1, 3):
        x[0, 2] = 1.0
    for device in DEVICES:
        with pytest.raises(ValueError, match="All-NaN slice encountered"):
            ops(device).nanargmax(x, axis=axis)


# ------------------------------------------------------------------ what the fast paths reuse

def test_packer_matches_a_field_by_field_fill():
    """cupyops.core.structs packs a parameter struct in one call: the same bytes as NumPy's own
    field stores, padding and all, for ArParams, nz_params (nested divisor structs) and a
    struct with odd padding; the generated packer equals the plain loop, which names what is
    wrong."""
    from cupyops.core.structs import Struct
    from cupyops.ops.argreduce.params import AR_PARAMS
    from cupyops.ops.nonzero.params import FASTDIV, NZ_PARAMS, fastdiv
    rng = np.random.default_rng(0)
    odd = Struct("odd", [("a", "i1"), ("b", "<i8"), ("c", "<i2", 3), ("d", "<u4"),
                         ("e", "<f8")])
    for layout in (AR_PARAMS, NZ_PARAMS, odd):
        dt = layout.dtype
        for _ in range(20):
            ref = np.zeros((), dt)
            values = []
            for f in layout.fields:
                if f.type is FASTDIV:
                    n = int(rng.integers(0, f.count + 1)) if f.count else 1
                    ds = [int(d) for d in rng.integers(1, 2**40, n)]
                    packed = [fastdiv(d) for d in ds] + [fastdiv(f.fill or 1)] * (
                        (f.count or 1) - n)
                    ref[f.name] = packed if f.count else packed[0]
                    values.append(ds if f.count else ds[0])
                    continue
                base = np.dtype(f.type)
                info = np.iinfo(base) if base.kind in "iu" else None
                draw = (lambda n: [int(v) for v in rng.integers(max(info.min, -2**40),
                                                                min(info.max, 2**40), n,
                                                                dtype=np.int64)]) if info \
                    else (lambda n: [float(v) for v in rng.normal(size=n)])
                if f.count:
                    vals = draw(int(rng.integers(0, f.count + 1)))
                    ref[f.name][:len(vals)] = vals
                    values.append(vals)
                else:
                    (v,) = draw(1)
                    ref[f.name] = v
                    values.append(v)
            got = layout.pack(values)
            assert got.dtype == dt and got.tobytes() == ref[()].tobytes()
            assert layout.pack_bytes(values) == layout.packer.pack_loop(values) == got.tobytes()
        with pytest.raises(ValueError, match="field values expected"):
            layout.pack(values[:-1])
        arrays = [i for i, f in enumerate(layout.fields) if f.count]
        for extra in (1, 9, 10, 40):            # one array too long, by any count
            one = list(values)
            one[arrays[-1]] = list(range(1, layout.fields[arrays[-1]].count + extra + 1))
            with pytest.raises(ValueError, match="an array of"):
                layout.pack(one)


def test_argreduce_params_hold_the_plan_field_by_field():
    from cupyops.ops.argreduce import params as G
    from cupyops.ops.argreduce.plan import plan_argreduce, step_digits
    props = _backend.get_backend("simt").props
    x = np.zeros((3, 5, 7, 2), np.float32)[:, ::-1, :, :1]
    for axes, hardmax in (((1, 2), False), ((0, 2), True), ((1,), True)):
        plan = plan_argreduce(x.shape, x.strides, 4, axes, props, hardmax=hardmax)
        p = G.build_params(plan, kind="min", tie="last", mode=2, out_width=2, finish=True,
                           nan_skip=True)
        assert (p["n_out"], p["group"], p["chunk"], p["nchunks"]) == (
            plan.n_out, plan.group, plan.chunk, plan.nchunks)
        assert p["index_base"] == plan.index_base + plan.zero_last_offset
        assert (p["last"], p["is_min"], p["mode"], p["out_width"], p["nan_skip"]) == (1, 1, 2, 2, 1)
        assert (p["nk"], p["nd"], p["nw"]) == (len(plan.kept), len(plan.red), len(plan.write))
        assert list(p["d_size"][:len(plan.red)]) == [d[0] for d in plan.red]
        assert list(p["d_w"][:len(plan.red)]) == [d[2] for d in plan.red]
        assert list(p["k_out"][:len(plan.kept)]) == [d[2] for d in plan.kept]
        assert not p["d_size"][len(plan.red):].any()
        assert list(p["w_step"][:len(plan.write)]) == list(
            step_digits(plan.finish_block[1], [d[0] for d in plan.write]))


@pytest.mark.parametrize("device", KERNEL_DEVICES)
def test_cached_nonzero_with_new_counts_every_call(device):
    """nonzero's second launch gets the count as its row stride, patched per call into the
    cached parameters; argwhere/nonzero keep the device count in scratch. Many counts in a
    row (more than the few patched structs kept) on one cached layout, each against NumPy."""
    rng = np.random.default_rng(1)
    o = ops(device)
    for i in range(12):
        m = (rng.random((37, 45)) < (i + 1) / 13).astype(np.int16)
        got = o.nonzero(m)
        want = np.nonzero(m)
        assert len(got) == 2 and all(np.array_equal(g, w) for g, w in zip(got, want))
        assert np.array_equal(o.argwhere(m), np.argwhere(m))
        coords, count = o.nonzero_coordinates(m)
        assert int(count) == len(want[0]) and np.array_equal(coords, np.argwhere(m))


def test_dry_run_keeps_only_the_recent_launches():
    from cupyops.core import trace as _trace
    x = np.zeros((4, 8), np.float32)
    with dry_run() as rec:
        for i in range(_trace.DRY_RUN_KEEP + 5):
            cupyops.argmax(x[:, : 1 + i % 8], axis=1, device="simt")
    assert len(rec.launches) == _trace.DRY_RUN_KEEP
    assert rec.launches[-1][4][0].shape == x[:, : 1 + (_trace.DRY_RUN_KEEP + 4) % 8].shape


def test_simt_arena_is_kept_on_its_backend():
    from cupyops.core import workspace as _workspace
    be = _backend.get_backend("simt")
    a = _workspace.holder_for(be)
    assert a is _workspace.holder_for(be) is _workspace._arenas[(be.name, be.device_id, 0)]


@pytest.mark.parametrize("device", KERNEL_DEVICES)
@pytest.mark.parametrize("call", ["argmax", "hardmax", "coordinates"])
def test_numpy_out_not_element_aligned_takes_the_copy_path(call, device):
    """A C-contiguous NumPy out at a 4-byte offset (legal in NumPy) is not handed to the
    kernels, whose 8-byte stores would fault on a GPU (simt reports them): the result is
    computed into a fresh array and copied. (CuPy input gets CuPy outs, element-aligned as
    every GPU array: out= on the GPU, with the same answers.)"""
    rng = np.random.default_rng(3)
    o = ops(device)

    def unaligned(shape, dtype):
        dt = np.dtype(dtype)
        raw = np.zeros(int(np.prod(shape)) * dt.itemsize + 16, np.uint8)
        base = -raw.ctypes.data % 16 + 4
        a = np.ndarray(shape, dt, raw, base)
        assert not a.flags.aligned and a.flags.c_contiguous
        return a

    x = rng.integers(0, 3, (6, 40)).astype(np.float64)
    if call == "argmax":
        out = unaligned((6,), np.int64)
        got = o.argmax(x, axis=1, out=out)
        assert got is out and np.array_equal(out, np.argmax(x, axis=1))
    elif call == "hardmax":
        xc = (x + 1j * x[::-1]).astype(np.complex128)
        out = unaligned(xc.shape, np.complex128)
        got = o.hardmax(xc, axis=1, out=out)
        assert got is out and np.array_equal(out, cupyops.hardmax(xc, axis=1, device="cpu"))
    else:
        m = x > 1
        coords, count = unaligned((100, 2), np.int64), unaligned((), np.int64)
        c, n = o.nonzero_coordinates(m, size=100, out=(coords, count))
        want = np.argwhere(m)
        assert c is coords and int(count) == len(want)
        assert np.array_equal(coords[:len(want)], want) and (coords[len(want):] == 0).all()


def test_launches_prepared_for_an_aligned_out_refuse_a_narrower_one():
    """hardmax launches prepared without out= store whole 16-byte complex128 values; run into
    an out at 8 mod 16 they would fault on a GPU: a ValueError instead (review finding). The
    same out given when preparing gets the narrow stores and the right answer."""
    from cupyops.ops.argreduce import launch as G
    be = _backend.get_backend("simt")
    rng = np.random.default_rng(4)
    x = (rng.integers(0, 3, (4, 9)) + 1j * rng.integers(0, 3, (4, 9))).astype(np.complex128)
    raw = np.zeros(x.nbytes + 32, np.uint8)
    out = np.ndarray(x.shape, x.dtype, raw, -raw.ctypes.data % 16 + 8)
    kx, launches = G.prepare_hardmax(be, x, (1,), tie="first")
    assert launches.out_align == 16
    with pytest.raises(ValueError, match="multiple of 16 bytes"):
        G.execute(be, launches, kx, out=out)
    kx, launches = G.prepare_hardmax(be, x, (1,), tie="first", out=out)
    assert launches.out_align == 8
    G.execute(be, launches, kx, out=out)
    assert np.array_equal(out, cupyops.hardmax(x, axis=1, device="cpu"))


def test_split_and_decode_partials_take_a_power_of_two_of_slots():
    """The partials of a decode or split plan get the next power of two of n_out * nchunks
    slots, so layouts whose chunk counts share a power of two carve the same scratch views
    (a first call of each new shape then reuses them); the answers stay NumPy's."""
    from cupyops.ops.argreduce import launch as G
    from cupyops.core import workspace as _workspace
    be = _backend.get_backend("simt")
    rng = np.random.default_rng(5)
    seen = {}
    for shape, axes in (((4, 2, 11604), (0, 2)), ((4, 2, 12004), (0, 2)),
                        ((8, 70001), (1,)), ((1, 131076), (1,))):
        x = rng.integers(0, 3, shape).astype(np.float32)
        la = G.prepare(be, x, axes, hardmax=False, kind="max", tie="first",
                       out_dtype=np.int64)
        plan = la.plan
        assert plan.case == "decode", (shape, plan.case)
        (keys, idx), (flag_bytes, _views) = la.scratch
        slots = keys[0][0]
        assert slots == idx[0][0] and slots & (slots - 1) == 0
        assert plan.n_out * plan.nchunks <= slots < 2 * plan.n_out * plan.nchunks
        assert flag_bytes == 4 * (1 + plan.n_out)        # the flag and a ticket a group
        seen.setdefault(la.scratch, set()).add(plan.nchunks)
        want = np.argmax(np.moveaxis(x, axes, range(-len(axes), 0)).reshape(
            *[n for i, n in enumerate(shape) if i not in axes], -1), axis=-1)
        for device in KERNEL_DEVICES:     # the answer of the public call on every kernel device
            np.testing.assert_array_equal(ops(device).argmax(x, axis=axes), want, err_msg=device)
    # the two (4, 2, n) layouts: different chunk counts, one spec, the same carved views
    shared = [s for s, counts in seen.items() if len(counts) > 1]
    assert shared, seen
    arena = _workspace.arena_for(be)
    assert arena.carve(shared[0][0])[0] is arena.carve(shared[0][0])[0]
    # a split plan (two launches) too
    # (one row: two rows of this length now split into 1,056 partials, above ROUNDED_SLOTS)
    x = rng.integers(0, 3, (1, 3 * 2**20 + 5)).astype(np.float32)
    la = G.prepare(be, x, (1,), hardmax=True, kind="max", tie="first", out_dtype=x.dtype)
    slots = la.scratch[0][0][0][0]
    assert la.plan.passes == 2 and slots & (slots - 1) == 0
    assert la.plan.n_out * la.plan.nchunks <= slots < 2 * la.plan.n_out * la.plan.nchunks
    # ...but many partials keep their exact count (a caller's Workspace sized for them fits)
    x = np.empty((4000, 4000), np.float32)          # (planned only: never read)
    la = G.prepare(be, x, (0,), hardmax=False, kind="max", tie="first", out_dtype=np.int64)
    slots = la.scratch[0][0][0][0]
    assert la.plan.passes == 2 and slots == la.plan.n_out * la.plan.nchunks > G.ROUNDED_SLOTS
