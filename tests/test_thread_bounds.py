"""The NumPy path's thread count is bounded (issue 38): CUPYOPS_NUM_THREADS is read and checked
once, at import; a count over the cap (THREADS_PER_CORE a usable core) is clamped with one
warning; where the OS refuses a thread, calls run on the threads they have, with one warning.

Each case runs in a fresh process (the variable is read at import; the pool is per process)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

import cupyops
from cupyops.core import threads as T

# A fresh process: imports cupyops (warnings recorded), then makes a small call and a call of
# over 1 MiB (threaded), and prints what it saw as JSON.
_PROBE = textwrap.dedent(r'''
    import json, os, sys, threading, warnings
    warnings.simplefilter("always")
    with warnings.catch_warnings(record=True) as at_import:
        warnings.simplefilter("always")
        import numpy as np
        import cupyops
        from cupyops.core import threads as T
    def workers():
        return sum(t.name.startswith("cupyops-worker") for t in threading.enumerate())
    cap = getattr(T, "max_threads", lambda: None)()          # (None before issue 38)
    out = {"import_warnings": [str(w.message) for w in at_import], "cap": cap,
           "cores": len(os.sched_getaffinity(0)), "threads": cupyops.get_num_threads()}
    x = np.random.default_rng(0).random((1024, 1024)).astype(np.float32)       # 4 MiB
    with warnings.catch_warnings(record=True) as at_calls:
        warnings.simplefilter("always")
        small = cupyops.argmax(x[:8, :8], axis=1)
        big = cupyops.argmax(x, axis=1)
        os.environ["CUPYOPS_NUM_THREADS"] = "1"        # read at import only: no change
        big2 = cupyops.argmin(x, axis=0)
        for n in sys.argv[1:]:
            cupyops.set_num_threads(int(n))
    out["small_ok"] = bool((small == np.argmax(x[:8, :8], axis=1)).all())
    out["big_ok"] = bool((big == np.argmax(x, axis=1)).all() and (big2 == np.argmin(x, axis=0)).all())
    out["call_warnings"] = [str(w.message) for w in at_calls]
    out["threads_after"] = cupyops.get_num_threads()
    out["workers"] = workers()
    print(json.dumps(out))
''')


def _probe(env_value, *set_calls):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.path.dirname(os.path.dirname(cupyops.__file__))] +
        [p for p in [os.environ.get("PYTHONPATH")] if p]))
    env.pop("CUPYOPS_NUM_THREADS", None)
    if env_value is not None:
        env["CUPYOPS_NUM_THREADS"] = env_value
    p = subprocess.run([sys.executable, "-c", _PROBE, *map(str, set_calls)], env=env,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("bad", ["0", "-1", "abc", "2.5"])
def test_a_bad_variable_is_one_warning_at_import_then_the_default(bad):
    """Before: small calls worked and calls of 1 MiB or more raised ValueError."""
    got = _probe(bad)
    assert len(got["import_warnings"]) == 1, got
    msg = got["import_warnings"][0]
    assert "CUPYOPS_NUM_THREADS" in msg and repr(bad) in msg, msg
    assert got["threads"] == got["cores"]                 # the default
    assert got["small_ok"] and got["big_ok"], got         # small and large calls alike
    assert got["call_warnings"] == [] and got["threads_after"] == got["cores"]


def test_the_variable_is_read_once():
    got = _probe("2")
    assert got["import_warnings"] == [] and got["threads"] == 2
    assert got["threads_after"] == 2                      # os.environ changed after import
    assert got["big_ok"] and got["workers"] == 1


def test_a_variable_over_the_cap_is_clamped_with_one_warning():
    """Before: CUPYOPS_NUM_THREADS=10000 started over a thousand threads."""
    got = _probe("10000")
    assert len(got["import_warnings"]) == 1, got
    assert got["cap"] == T.THREADS_PER_CORE * got["cores"]
    msg = got["import_warnings"][0]
    assert "CUPYOPS_NUM_THREADS=10000" in msg and f"cap of {got['cap']} threads" in msg, msg
    assert got["threads"] == got["cap"] and got["big_ok"]
    assert got["call_warnings"] == []                     # one warning: none at the calls
    assert got["workers"] <= got["cap"] - 1


def test_set_num_threads_clamps_to_the_cap_with_a_warning():
    """Before: set_num_threads(2**70) was accepted."""
    got = _probe(None, 2**70)
    assert got["threads_after"] == got["cap"]
    assert len(got["call_warnings"]) == 1, got
    msg = got["call_warnings"][0]
    assert f"set_num_threads({2**70})" in msg and f"using {got['cap']}" in msg, msg
    old = T._state.setting
    try:
        with pytest.warns(RuntimeWarning, match="over the cap"):
            cupyops.set_num_threads(T.max_threads() + 1)
        assert cupyops.get_num_threads() == T.max_threads()
        cupyops.set_num_threads(T.max_threads())        # the cap itself: no warning
    finally:
        T._state.setting = old


_REFUSED = textwrap.dedent(r'''
    import resource, threading, warnings
    import numpy as np
    import cupyops
    from cupyops.core import threads as T
    T.MIN_BYTES, T.PART_BYTES, T.TAIL_BYTES, T.BUSY_SECONDS = 1 << 12, 1 << 8, 1 << 8, 0.0
    def workers():
        return sum(t.name.startswith("cupyops-worker") for t in threading.enumerate())
    x = np.random.default_rng(0).random((512, 512)).astype(np.float32)
    cupyops.set_num_threads(2)
    assert (cupyops.argmax(x, axis=1) == np.argmax(x, axis=1)).all() and workers() == 1
    # the OS refuses the next thread: its stack does not fit under the address-space limit
    threading.stack_size(256 << 20)
    vm = int([l for l in open("/proc/self/status") if l.startswith("VmSize")][0].split()[1]) << 10
    resource.setrlimit(resource.RLIMIT_AS, (vm + (64 << 20), resource.RLIM_INFINITY))
    cupyops.set_num_threads(4)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for i in range(3):
            assert (cupyops.argmin(x, axis=0) == np.argmin(x, axis=0)).all()
            assert (cupyops.argwhere(x > 0.5) == np.argwhere(x > 0.5)).all()
    msgs = [str(m.message) for m in w]
    assert len(msgs) == 1 and "refused a new thread" in msgs[0], msgs
    assert workers() == 1
    print("ok")
''')


def test_a_refused_thread_leaves_the_call_on_the_threads_it_has():
    """Before: every large call raised RuntimeError: can't start new thread."""
    if not hasattr(os, "sched_getaffinity") or not os.path.exists("/proc/self/status"):
        pytest.skip("needs Linux's /proc/self/status")
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(cupyops.__file__)))
    env.pop("CUPYOPS_NUM_THREADS", None)
    p = subprocess.run([sys.executable, "-c", _REFUSED], env=env, capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0 and p.stdout.strip() == "ok", p.stderr[-3000:]
