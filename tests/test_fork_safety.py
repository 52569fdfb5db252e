"""A forked child never waits on a lock a parent thread held (issue 38).

tests/fork_stress.py does the work in a fresh process (a fork inside pytest's own process would
copy whatever the other tests left running):

* the issue's minimal form: the call cache's lock taken, then a fork whose child calls argmax;
* ``held``: every lock the package holds taken by a thread at the fork (module-level locks, the
  LRUs', the Workspaces' and arenas', the modules' per-key locks, the pool's, a simt cache entry's
  lock file); the child finds each free and calls every op, on simt too;
* ``stress``: a thread calls every op on fresh layouts (LRU.put on every call) while the main
  thread forks 200 times (2,000 under ``--run-slow``); each child calls every op on new layouts
  under a watchdog. Before the fix 39 children of 2,000 hung in ``LRU.put`` (0 after).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

import cupyops
from cupyops.core.devices import simt_status

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(cupyops.__file__)))


def _env():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [ROOT] + [p for p in [os.environ.get("PYTHONPATH")] if p]), CUPYOPS_PROGRESS="0")
    env.pop("CUPYOPS_NUM_THREADS", None)
    env.pop("CUPYOPS_DEVICE", None)
    return env


def _stress(*args, timeout=900):
    p = subprocess.run([sys.executable, os.path.join(HERE, "fork_stress.py"), *args], env=_env(),
                       capture_output=True, text=True, timeout=timeout)
    assert p.stdout.strip(), p.stderr[-3000:]
    res = json.loads(p.stdout.strip().splitlines()[-1])
    assert res["hangs"] == 0 and res["failures"] == 0 and p.returncode == 0, \
        (res, p.stderr[-3000:])
    return res


_MINIMAL = textwrap.dedent("""
    import os, time, numpy as np, cupyops, cupyops._call as c
    c._entries._lock.acquire()          # as if another thread were inside LRU.put at fork()
    pid = os.fork()
    if pid == 0:
        import faulthandler
        faulthandler.dump_traceback_later(20, exit=True)
        cupyops.argmax(np.zeros(12345))
        os._exit(0)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        got, status = os.waitpid(pid, os.WNOHANG)
        if got:
            print("exit", os.waitstatus_to_exitcode(status))
            break
        time.sleep(0.01)
    else:
        os.kill(pid, 9)
        print("hang")
""")


def test_the_issues_minimal_form():
    p = subprocess.run([sys.executable, "-c", _MINIMAL], env=_env(), capture_output=True,
                       text=True, timeout=120)
    assert p.stdout.strip() == "exit 0", (p.stdout, p.stderr[-3000:])


def test_every_lock_held_at_the_fork():
    args = ["held", "--timeout", "60"] + (["--simt"] if simt_status()[0] else [])
    res = _stress(*args)
    assert res["locks"] >= 8 and res["simt"] == bool(simt_status()[0]), res


def test_forks_while_a_thread_calls_every_op():
    res = _stress("stress", "--forks", "200", "--timeout", "60")
    assert res["calls_in_thread"] > 1000, res


@pytest.mark.slow
def test_2000_forks_while_a_thread_calls_every_op():
    res = _stress("stress", "--forks", "2000", "--timeout", "60", timeout=3600)
    assert res["calls_in_thread"] > 10000, res


@pytest.mark.slow
@pytest.mark.skipif(not simt_status()[0], reason="no C++ compiler for simt")
def test_forks_while_a_thread_runs_simt():
    """The thread's calls run kernels on simt too (the runtime's lock and state, the arena's
    lock, the compile cache's lock files); each child calls simt on new layouts."""
    res = _stress("stress", "--simt", "--forks", "100", "--timeout", "120", timeout=3600)
    assert res["simt"] and res["calls_in_thread"] > 100, res
