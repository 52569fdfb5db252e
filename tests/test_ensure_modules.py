"""A first call builds every module its plan needs at once (issue 33): cupyops.core.modules.
ensure_modules builds the modules not built yet in threads, each once; Backend.ensure_kernels
is what launch code calls with a plan's launches; argreduce's split plans (a scan and a finish,
two modules) call it before their first launch; simt's RawModule runs its C++ compiler outside
its lock, so two threads' builds overlap.

Concurrency is proven with barriers: a factory that waits at a barrier for every build of a
group fails (BrokenBarrierError, after a timeout) where the builds run one after the other."""
import sys
import threading
import time
import uuid

import numpy as np
import pytest

import cupyops
from cupyops.core import backend as _backend
from cupyops.core import modules as m
from cupyops.core import progress as _progress
from cupyops.core import trace as _trace
from cupyops.ops.argreduce import launch as _arg_launch
from cupyops.ops.nonzero import launch as _nz_launch
from cupyops.testing import dry_run
from _fake_modules import FakeCompileError, OneKernelModule, registered_factory

EXPRS = m.SELFTEST_FAMILY.expressions_for(np.float32)
MODULES = [("selftest", (e,)) for e in EXPRS]          # three modules, one kernel each


@pytest.fixture
def fake(selftest_family):
    """A "fake" backend whose factory records each build (its expressions, thread, start and
    end) and can wait at a barrier, sleep, or fail for one expression."""
    state = {"builds": [], "barrier": None, "delay": 0.0, "fail": None, "now": 0, "peak": 0}
    lock = threading.Lock()

    def factory(source, options, exprs, device_id):
        with lock:
            state["now"] += 1
            state["peak"] = max(state["peak"], state["now"])
            state["builds"].append((exprs, threading.current_thread().name))
        try:
            if state["barrier"] is not None:
                state["barrier"].wait()
            time.sleep(state["delay"])
            if state["fail"] in exprs:
                raise FakeCompileError(f"module.cu(3): error: {state['fail']} is broken")
            return OneKernelModule(exprs)
        finally:
            with lock:
                state["now"] -= 1

    with registered_factory("fake", factory):
        yield state


def test_modules_build_at_once_each_once(fake):
    fake["barrier"] = threading.Barrier(len(MODULES), timeout=20)   # serial builds time out
    m.ensure_modules("fake", MODULES + MODULES[:1])                  # (a repeat counts once)
    assert sorted(e for e, _ in fake["builds"]) == sorted(e for _, e in MODULES)
    assert fake["peak"] == len(MODULES)
    # the calling thread builds one of them; its own threads the others
    assert sum(t == threading.current_thread().name for _, t in fake["builds"]) == 1
    assert {k[2:] for k in m.cached_keys()} == set(MODULES)
    # the cache keys are those of a module built alone: compiled_module finds them
    for fam, exprs in MODULES:
        assert m.compiled_module("fake", fam, exprs).exprs == exprs
    m.ensure_modules("fake", MODULES)                                # nothing left to build
    assert len(fake["builds"]) == len(MODULES)


def test_only_missing_modules_are_built_and_one_needs_no_thread(fake):
    m.compiled_module("fake", *MODULES[0])
    m.compiled_module("fake", *MODULES[1])
    fake["builds"].clear()
    m.ensure_modules("fake", MODULES)
    assert fake["builds"] == [(MODULES[2][1], threading.current_thread().name)]


def test_two_callers_at_once_build_each_module_once(fake):
    """Two calls (threads) asking for the same modules at the same moment: the per-key locks
    make one build each module and the other wait for it."""
    fake["delay"] = 0.1
    start = threading.Barrier(2, timeout=20)
    errors = []

    def caller(order):
        try:
            start.wait()
            m.ensure_modules("fake", order)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=caller, args=(o,)) for o in (MODULES, MODULES[::-1])]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert sorted(e for e, _ in fake["builds"]) == sorted(e for _, e in MODULES)
    assert fake["peak"] >= 2


def test_a_compile_error_names_its_module_after_the_others(fake):
    bad = EXPRS[1]
    fake["fail"] = bad
    fake["barrier"] = threading.Barrier(len(MODULES), timeout=20)
    with pytest.raises(m.KernelCompileError) as info:
        m.ensure_modules("fake", MODULES)
    err = info.value
    assert type(err) is m.KernelCompileError
    assert err.family == "selftest" and err.exprs == (bad,) and err.backend == "fake"
    assert f"{bad} is broken" in err.log and bad in str(err)
    assert isinstance(err.__cause__, FakeCompileError)
    # the others were built (and kept); the failure was not: asking again tries it again
    assert {k[3] for k in m.cached_keys()} == {(e,) for e in EXPRS if e != bad}
    fake["fail"], fake["barrier"] = None, None
    m.ensure_modules("fake", MODULES)
    assert {k[3] for k in m.cached_keys()} == {(e,) for e in EXPRS}


def test_the_first_failure_in_order_is_raised(fake):
    def factory(source, options, exprs, device_id):
        raise FakeCompileError(f"error in {exprs[0]}")
    m.register_module_factory("fake", factory)
    with pytest.raises(m.KernelCompileError) as info:
        m.ensure_modules("fake", MODULES[::-1])
    assert info.value.exprs == MODULES[-1][1]


def test_an_interrupt_of_the_caller_is_raised_at_once(fake):
    """Ctrl-C in the calling thread's own build is not held until the other builds end; those
    finish in their threads and are kept."""
    release, caller = threading.Event(), threading.current_thread()

    def factory(source, options, exprs, device_id):
        if threading.current_thread() is caller:
            raise KeyboardInterrupt
        release.wait(20)
        return OneKernelModule(exprs)
    m.register_module_factory("fake", factory)
    t0 = time.perf_counter()
    with pytest.raises(KeyboardInterrupt):
        m.ensure_modules("fake", MODULES)
    assert time.perf_counter() - t0 < 10
    release.set()
    for t in [t for t in threading.enumerate() if t.name.startswith("cupyops-compile")]:
        t.join(20)
    assert {k[3] for k in m.cached_keys()} == {e for _, e in MODULES[1:]}


def test_a_refused_thread_builds_in_the_calling_thread(fake, monkeypatch):
    start = threading.Thread.start

    def refuse(self):
        if self.name.startswith("cupyops-compile"):
            raise RuntimeError("can't start new thread")
        return start(self)
    monkeypatch.setattr(threading.Thread, "start", refuse)
    m.ensure_modules("fake", MODULES)
    assert [t for _, t in fake["builds"]] == [threading.current_thread().name] * len(MODULES)
    assert {k[3] for k in m.cached_keys()} == {(e,) for e in EXPRS}


def test_cuda_builds_in_the_calling_thread_when_asked(fake, monkeypatch):
    """CUPYOPS_PRECOMPILE_SERIAL=1 (precompile's switch for a driver that misbehaves when
    modules load in threads) makes a first call's CUDA modules build one after the other in the
    calling thread too; other backends keep their threads."""
    monkeypatch.setitem(m._factories, "cuda", m.module_factory("fake"))
    monkeypatch.setenv("CUPYOPS_PRECOMPILE_SERIAL", "1")
    m.ensure_modules("cuda", MODULES)
    assert [t for _, t in fake["builds"]] == [threading.current_thread().name] * len(MODULES)
    fake["barrier"] = threading.Barrier(len(MODULES), timeout=20)
    m.ensure_modules("fake", MODULES)
    assert fake["peak"] == len(MODULES)
    m.clear_cache()
    fake["builds"].clear()
    monkeypatch.setenv("CUPYOPS_PRECOMPILE_SERIAL", "0")
    m.ensure_modules("cuda", MODULES)
    assert fake["peak"] == len(MODULES)


def test_one_notice_for_the_group(fake, monkeypatch, capsys):
    """The modules of one group are announced once (the notice of a call's compile), not once
    per thread."""
    monkeypatch.setattr(_progress, "THRESHOLD_S", 0.02)
    monkeypatch.setattr(_progress, "_announced", False)
    monkeypatch.setenv("CUPYOPS_PROGRESS", "1")
    fake["delay"] = 0.2
    m.ensure_modules("fake", MODULES)
    err = capsys.readouterr().err
    assert err.count("cupyops: compiling") == 1 and err.count("done in") == 1, err


# ------------------------------------------------------------------------------ Backend


def test_ensure_kernels_resolves_the_launchers(fake, monkeypatch):
    monkeypatch.setitem(m._factories, "simt", m.module_factory("fake"))
    be = _backend.SimtBackend()
    kernels = [("selftest", np.float32, e) for e in EXPRS]
    fake["barrier"] = threading.Barrier(len(EXPRS), timeout=20)
    be.ensure_kernels(kernels)
    assert fake["peak"] == len(EXPRS)
    assert set(be._kernels) == {("selftest", np.dtype(np.float32), e) for e in EXPRS}
    fake["barrier"] = None
    be.ensure_kernels(kernels)                  # ready: nothing built again
    assert len(fake["builds"]) == len(EXPRS)
    with dry_run():                             # a dry run compiles nothing
        be.ensure_kernels([("selftest", np.int8, "selftest_iota<signed char, 3>")])
    assert len(fake["builds"]) == len(EXPRS)


# ------------------------------------------------------------------------------ launch code

@pytest.fixture
def simt_events(monkeypatch):
    """A fresh simt backend whose factory (the real one, wrapped) records when each build
    starts and ends, and waits for the other builds of its group at a barrier; every launch
    recorded in the same list. The argreduce and nonzero modules are forgotten first (they
    load from the disk cache)."""
    events, lock = [], threading.Lock()
    real = m.module_factory("simt")
    state = {"barrier": None}

    def factory(source, options, exprs, device_id):
        with lock:
            events.append(("start", exprs))
        if state["barrier"] is not None:
            state["barrier"].wait()
        mod = real(source, options, exprs, device_id)
        with lock:
            events.append(("end", exprs))
        return mod

    record = _trace.record_launch

    def record_launch(name, *args, **kw):
        events.append(("launch", name))
        return record(name, *args, **kw)

    monkeypatch.setitem(m._factories, "simt", factory)
    monkeypatch.setattr(_trace, "record_launch", record_launch)
    monkeypatch.setattr(_backend, "_backends", {})
    m.clear_cache("argreduce")
    m.clear_cache("nonzero")
    yield events, state
    m.clear_cache("argreduce")
    m.clear_cache("nonzero")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_split_plan_builds_both_modules_before_its_first_launch(simt_events, dtype):
    events, state = simt_events
    be = _backend.get_backend("simt")
    x = np.random.default_rng(0).standard_normal((65536, 4)).astype(dtype)
    x[1234, 2] = 99
    with dry_run():                             # (the plan, nothing compiled)
        _, launches = _arg_launch.prepare_argreduce(be, x, (0,), kind="max", tie="first",
                                                    index_dtype=np.int64)
    assert not events and launches.plan.case == "split" and launches.finish is not None
    state["barrier"] = threading.Barrier(2, timeout=60)        # serial builds time out
    events.clear()
    out = _arg_launch.argreduce(be, x, (0,), kind="max", tie="first", index_dtype=np.int64)
    np.testing.assert_array_equal(out, np.argmax(x, axis=0))
    scan, finish = (f"{launches.main[2]}", f"{launches.finish[2]}")
    kinds = [k for k, _ in events]
    assert kinds == ["start", "start", "end", "end", "launch", "launch"], events
    assert {e for k, e in events if k == "start"} == {(scan,), (finish,)}
    assert [e for k, e in events if k == "launch"] == [scan, finish]


def test_a_split_plan_first_simt_call_through_the_api(simt_events):
    """The public function's first call on simt (its call caches cleared): both modules start
    before either ends, and before the first launch."""
    from cupyops import _call
    events, state = simt_events
    _call.clear()
    state["barrier"] = threading.Barrier(2, timeout=60)
    x = np.random.default_rng(1).standard_normal((65536, 4)).astype(np.float32)
    assert np.array_equal(cupyops.argmin(x, axis=0, device="simt"), np.argmin(x, axis=0))
    kinds = [k for k, _ in events]
    assert kinds[:4] == ["start", "start", "end", "end"] and kinds[4:] == ["launch"] * 2, events
    _call.clear()


def test_argwhere_launches_one_module(simt_events):
    """The exact forms' two passes (SCAN, then PLACE or SEGMENTS) run one kernel: a first
    argwhere builds one module (nothing to build at once). A plan whose passes came to need
    two modules would make its prepare call Backend.ensure_kernels, as argreduce's split does."""
    events, _ = simt_events
    be = _backend.get_backend("simt")
    for x in (np.arange(-3, 253, dtype=np.float32).reshape(16, 16),
              np.asfortranarray(np.arange(64.0).reshape(8, 8)), np.ones((3, 5, 700), np.int8)):
        state = _nz_launch.exact_runner(be, x, np.dtype(np.int64), _nz_launch.LAYOUT_ROWS).args[0]
        assert state.scan_expr == state.place_expr
        events.clear()
        out = _nz_launch.argwhere(be, x, np.int64)
        np.testing.assert_array_equal(out, np.argwhere(x))
        assert [k for k, _ in events] == ["start", "end", "launch", "launch"], events


# ------------------------------------------------------------------------------ simt

def test_simt_builds_of_two_threads_overlap(monkeypatch):
    """simt.RawModule runs the C++ compiler outside its lock: two threads' new modules build at
    the same time (each waits for the other at a barrier, which a build under the lock would
    never reach), and both load and run."""
    import cupyops.simt as simt
    from cupyops.simt import _build

    barrier = threading.Barrier(2, timeout=60)
    real = _build.build_module

    def build(*args, **kw):
        barrier.wait()
        return real(*args, **kw)
    monkeypatch.setattr(_build, "build_module", build)
    token = uuid.uuid4().hex
    results, errors = {}, []

    def work(tag):
        try:
            src = ('extern "C" __global__ void k(int* p) { p[threadIdx.x] = threadIdx.x * 7 + %d; }'
                   ' // %s' % (tag, token))
            p = np.zeros(8, np.int32)
            simt.RawModule(code=src).get_function("k")(1, 8, (p,))
            results[tag] = p
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(tag,)) for tag in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for tag in (1, 2):
        np.testing.assert_array_equal(results[tag], np.arange(8) * 7 + tag)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))
