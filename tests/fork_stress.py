"""Fork while cupyops is busy (issue 38): the driver of tests/test_fork_safety.py, also run by hand.

``python tests/fork_stress.py --forks 2000 [--simt] [--timeout 30]``

* ``stress``: a thread keeps calling every public op with fresh shapes (each layout twice, so
  that the second call stores its entry: ``LRU.put``), on the NumPy path and, with ``--simt``,
  on simt too; meanwhile the main thread forks ``--forks`` times. Each child calls every op on
  new layouts (two on simt, with ``--simt``; and one input of over 1 MiB, which starts the
  child's thread pool) under a watchdog: ``faulthandler`` dumps its stacks and ends it after ``--timeout`` seconds, and the
  parent kills it 10 s later. A child that does not exit 0 in time is a hang.
* ``held``: the deterministic form. A thread takes every lock the package holds (every
  module-level lock of a ``cupyops`` module, every LRU's, every Workspace's and arena's, the
  modules' per-key locks, the thread pool's and the lock file of a simt cache entry); the main
  thread forks once, and the thread lets them go; the child finds each of them free, takes the
  lock file, and calls as above.

Prints one JSON line: ``{"forks", "hangs", "failures", "calls_in_thread", "seconds", "first"}``
(``first``: the output of the first child that failed, if any).
"""
from __future__ import annotations

import argparse
import faulthandler
import gc
import itertools
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import time

import numpy as np

import cupyops
from cupyops.core import lru as _lru
from cupyops.core import modules as _modules
from cupyops.core import threads as _threads
from cupyops.core import workspace as _workspace
from cupyops.core.devices import simt_status

OPS = ("argmax", "argmin", "nanargmax", "nanargmin", "hardmax", "count_nonzero", "argwhere",
       "nonzero", "nonzero_coordinates")
LOCK_TYPES = (type(threading.Lock()), type(threading.RLock()))


def _shape(i: int) -> tuple:
    """A shape no other i gives (2-D, 2 to a few hundred elements)."""
    return (2 + i % 61, 2 + i // 61 % 59 + 59 * (i // 3599))


def call_every_op(i: int, device=None, rng=None, ops=OPS) -> None:
    """Every public op (of ``ops``) on a fresh layout ``_shape(i)``, each checked against
    NumPy."""
    rng = rng or np.random.default_rng(i)
    x = rng.random(_shape(i)).astype(np.float32)
    x[x < 0.3] = 0
    kw = {} if device is None else {"device": device}
    want = {"argmax": np.argmax(x, axis=1), "argmin": np.argmin(x, axis=0),
            "count_nonzero": np.count_nonzero(x, axis=1), "argwhere": np.argwhere(x)}
    for op in ops:
        f = getattr(cupyops, op)
        if op in ("argmax", "nanargmax"):
            got = f(x, axis=1, **kw)
            assert (got == want["argmax"]).all(), op
        elif op in ("argmin", "nanargmin"):
            assert (f(x, axis=0, **kw) == want["argmin"]).all(), op
        elif op == "hardmax":
            assert (f(x, axis=1, **kw).argmax(axis=1) == want["argmax"]).all(), op
        elif op == "count_nonzero":
            assert (f(x, axis=1, **kw) == want["count_nonzero"]).all(), op
        elif op == "argwhere":
            assert (f(x, **kw) == want["argwhere"]).all(), op
        elif op == "nonzero":
            assert all((a == b).all() for a, b in zip(f(x, **kw), want["argwhere"].T)), op
        else:
            coords, count = f(x, size=5, fill_value=-1, **kw)
            assert int(count) == len(want["argwhere"]), op


def first_calls(i: int) -> None:
    """Every op on a small 4-D input: 65,536 shapes in turn, so every call misses the caches
    (4,096 entries) and stores its entry (``LRU.put``); as fast as calls come (the results are
    the children's to check)."""
    x = np.ones((1 + i % 16, 1 + i // 16 % 16, 1 + i // 256 % 16, 2 + i // 4096 % 16), np.float32)
    for op in OPS:
        if op == "nonzero_coordinates":
            cupyops.nonzero_coordinates(x, size=2)
        else:
            getattr(cupyops, op)(x)


def _child(i: int, simt: bool, timeout: float, held_lock_path: str | None) -> None:
    faulthandler.dump_traceback_later(timeout, exit=True)
    try:
        if held_lock_path is not None:
            _check_locks_free()
            from cupyops.simt import _cache
            with _cache.locked(held_lock_path, timeout=timeout / 2):
                pass
        base = 1_000_000 + 1000 * (i + 1) + os.getpid() % 1000     # layouts nobody made
        call_every_op(base)
        if simt:       # (two ops: a simt call of a new layout takes about 0.1 s here)
            call_every_op(base + 1, "simt", ops=("argmax", "nonzero_coordinates"))
        big = np.random.default_rng(i).random((1024, 512)).astype(np.float32)   # 2 MiB
        assert (cupyops.argmax(big, axis=1) == np.argmax(big, axis=1)).all()
    except BaseException as exc:                              # noqa: BLE001 - reported
        print(f"child {i}: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        os._exit(3)
    os._exit(0)


def _wait(pid: int, timeout: float) -> int | None:
    """The child's exit code, or None when it had to be killed (a hang)."""
    deadline = time.monotonic() + timeout + 10
    while True:
        got, status = os.waitpid(pid, os.WNOHANG)
        if got:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return None
        time.sleep(0.002)


def _fork_child(i, simt, timeout, held_lock_path, errfile, then=None):
    """Fork one child (its stderr into ``errfile``), run ``then()`` in the parent; the child's
    exit code, or None for a hang."""
    errfile.seek(0)
    errfile.truncate()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        os.dup2(errfile.fileno(), 2)
        _child(i, simt, timeout, held_lock_path)
    if then is not None:
        then()
    return _wait(pid, timeout)


#: locks taken by a fork handler before the fork (so never held by another thread then)
FORK_GUARDS = {"cupyops.simt._cache._lock_fds_guard"}


def every_lock():
    """``(name, lock)`` of every lock the package holds (but :data:`FORK_GUARDS`)."""
    for name, mod in list(sys.modules.items()):
        if name == "cupyops" or name.startswith("cupyops."):
            for attr, v in list(vars(mod).items()):
                if isinstance(v, LOCK_TYPES) and f"{name}.{attr}" not in FORK_GUARDS:
                    yield f"{name}.{attr}", v
    for key, lock in list(_modules._key_locks.items()):
        yield f"cupyops.core.modules._key_locks[{key}]", lock
    yield "cupyops.core.threads._state.lock", _threads._state.lock
    for obj in gc.get_objects():
        if isinstance(obj, _lru.LRU):
            yield f"LRU(maxsize={obj.maxsize})", obj._lock
        elif isinstance(obj, _workspace._Holder):
            yield type(obj).__name__, obj.lock


def _check_locks_free():
    busy = []
    for name, lock in every_lock():
        if lock.acquire(blocking=False):
            lock.release()
        else:
            busy.append(name)
    assert not busy, f"locks still held in the child: {busy}"


def _warm(simt: bool) -> None:
    """Compile (or load) what the children call, and make a simt arena and a Workspace."""
    call_every_op(0)
    if simt:
        call_every_op(1, "simt")
        for dt in (np.float64, np.int16):      # a module key lock for get_module
            cupyops.argmax(np.zeros((3, 4), dt), axis=1, device="simt")
        _kept.append(cupyops.Workspace(1 << 12, device="simt"))


_kept: list = []


def held(timeout: float, simt: bool) -> dict:
    """The deterministic form (see the module docstring)."""
    from cupyops.simt import _cache
    _warm(simt)
    _modules._key_locks.setdefault(("simt", 0, "argreduce", np.dtype(np.float32)),
                                   threading.Lock())
    folder = tempfile.mkdtemp(prefix="cupyops-fork-")
    entry = os.path.join(folder, "entry.so")
    ready, done = threading.Event(), threading.Event()
    locks = list(every_lock())

    def hold():
        with _cache.locked(entry):
            taken = [lock for _, lock in locks if lock.acquire(blocking=False)]
            ready.set()
            done.wait()
            for lock in taken:
                lock.release()
    t = threading.Thread(target=hold, daemon=True)
    t.start()
    ready.wait()
    t0 = time.monotonic()
    with tempfile.TemporaryFile("w+") as err:
        # the parent's thread lets go after the fork, as it would once done: the child's
        # copies of the locks stay taken unless the fork handlers renewed (or closed) them
        code = _fork_child(0, simt, timeout, entry, err, then=done.set)
        err.seek(0)
        text = err.read()
    t.join()
    shutil.rmtree(folder, ignore_errors=True)
    hung = code is None or "Timeout (" in text
    return {"forks": 1, "hangs": int(hung), "failures": int(code != 0 and not hung),
            "locks": len(locks), "seconds": round(time.monotonic() - t0, 2),
            "first": text[-4000:] if code != 0 else ""}


def stress(forks: int, timeout: float, simt: bool) -> dict:
    """The stress form (see the module docstring)."""
    _warm(simt)
    sys.setswitchinterval(1e-5)    # the GIL changes hands often: forks land anywhere
    stop = threading.Event()
    calls = itertools.count()
    errors = []

    def keep_calling():
        rng = np.random.default_rng(1)
        for i in itertools.count(10_000):
            if stop.is_set():
                return
            try:
                if simt and i % 64 == 0:
                    call_every_op(i, "simt", rng)
                    call_every_op(i, "simt", rng)   # (a kernel path keeps a layout's second call)
                else:
                    first_calls(i)
            except Exception as exc:              # noqa: BLE001 - reported
                errors.append(f"{type(exc).__name__}: {exc}")
                return
            next(calls)
    t = threading.Thread(target=keep_calling, daemon=True)
    t.start()
    hangs = failures = 0
    first = ""
    t0 = time.monotonic()
    with tempfile.TemporaryFile("w+") as err:
        for i in range(forks):
            code = _fork_child(i, simt, timeout, None, err)
            if code != 0:
                err.seek(0)
                text = err.read()
                hung = code is None or "Timeout (" in text      # killed, or faulthandler's
                hangs += hung
                failures += not hung
                if not first:
                    first = f"fork {i}: exit {code}\n{text[-4000:]}"
    stop.set()
    t.join()
    return {"forks": forks, "hangs": hangs, "failures": failures,
            "calls_in_thread": len(OPS) * next(calls), "thread_errors": errors,
            "seconds": round(time.monotonic() - t0, 2), "first": first}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=("stress", "held"))
    ap.add_argument("--forks", type=int, default=2000)
    ap.add_argument("--timeout", type=float, default=30.0, help="a child's watchdog, seconds")
    ap.add_argument("--simt", action="store_true", help="simt calls too (needs g++)")
    args = ap.parse_args(argv)
    simt = args.simt and simt_status()[0]
    res = held(args.timeout, simt) if args.mode == "held" else \
        stress(args.forks, args.timeout, simt)
    res["simt"] = simt
    print(json.dumps(res))
    return 0 if not (res["hangs"] or res["failures"] or res.get("thread_errors")) else 1


if __name__ == "__main__":
    sys.exit(main())
