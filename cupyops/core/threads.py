"""The NumPy path's threads: the setting, and a small pool that runs the parts of one call.

NumPy's routines (argmax, max, comparisons, count_nonzero, nonzero, divmod) release the GIL
while they run, so the parts of one large input run at the same time in Python threads. The
NumPy path splits an input of at least :data:`MIN_BYTES` into parts of at least
:data:`PART_BYTES` (row blocks, flat chunks, ranges of a reduced axis), runs them through
:func:`run_parts` and combines their answers with the single-thread rules, so a result never
depends on the number of threads.

* **How many**: ``set_num_threads(n)``, else ``CUPYOPS_NUM_THREADS`` (read and checked once, at
  import: a bad value is a warning, then the default), else the cores this process may run on
  (``os.sched_getaffinity``). 1 is the single-thread path. At most :func:`max_threads`
  (:data:`THREADS_PER_CORE` a usable core): a larger request is clamped, with a warning.
  Where the OS refuses a thread, calls run on the threads started so far (one warning).
* **Where threads are not used**: a call from any thread but the main one (a thread pool's
  worker, Dask's threaded scheduler, a distributed worker: the pool it runs in already keeps
  the cores busy), and a call inside :func:`single_thread` (the chunks Dask hands to cupyops,
  whatever the scheduler).
* **The pool** starts on first use, with one worker per extra thread; the calling thread runs
  parts too. Workers pull the next part from a shared counter (:func:`split`: two parts a
  thread), so a worker that the machine slows down takes fewer parts, and a call waits only
  for parts a worker took. After ``fork`` the child starts a new pool on its first use
  (``os.register_at_fork``): threads do not survive a fork.
* **A busy machine**: when the workers ran no part of a call, or the caller waited for their
  parts more than half of the call (other processes hold the cores), the calls of the
  next :data:`BUSY_SECONDS` run on one thread, which is then the faster way; then the pool is
  tried again.
* **Measured, per layout** (:class:`Choice`, :func:`measured`): threads pay only where the
  work outweighs their cost: a pass of the GIL per NumPy call of each part, a worker to wake.
  On a machine whose cores are shared (a VM's vCPUs, other jobs), a routine made of many short
  NumPy calls can run slower on two threads than on one, whatever its size. So each large
  NumPy-path entry times its calls: on the threads, on one thread now and then (every 4th
  call, then every 8th ... every 64th while the choice holds, at most one probe in
  :data:`CHOICE_PROBE_SECONDS` nor in 400 times its cost; a probe is two calls, the second
  timed), and runs each call
  the way that has been faster (exponential averages of its seconds; a probe of the slower
  way replaces that way's stale average; the threads must win by :data:`CHOICE_MARGIN`). Once
  both ways are known, only one call in :data:`CHOICE_UNTIMED` + 1 of the way chosen is timed
  (the others skip the clock and the bookkeeping, about 0.5 µs a call). A call is never
  slower than one thread but for the odd probe.
"""
from __future__ import annotations

import contextlib
import functools
import itertools
import os
import queue
import threading
import time
import warnings

__all__ = ["get_num_threads", "set_num_threads", "max_threads", "threads_for", "run_parts",
           "split", "single_thread", "one_thread", "using", "Choice", "measured", "MIN_BYTES",
           "PART_BYTES", "TAIL_BYTES", "PARTS_PER_THREAD", "BUSY_SECONDS", "THREADS_PER_CORE"]

#: inputs of fewer bytes run on one thread
MIN_BYTES = 1 << 20
#: a thread gets a part of at least this many bytes of input
PART_BYTES = 1 << 19
#: the shortest part of :func:`split`, and the parts a thread gets
TAIL_BYTES = 1 << 20
PARTS_PER_THREAD = 2
#: after a call whose workers found no core (or kept it waiting), this long on one thread
BUSY_SECONDS = 0.25

#: the cap on the thread count, per usable core (memory-bound parts gain nothing past the cores;
#: a few a core leave room for a machine whose cores wait on memory or I/O)
THREADS_PER_CORE = 4

_ENV = "CUPYOPS_NUM_THREADS"


class _Local(threading.local):
    """Per thread: the depth of :func:`single_thread` blocks (a class default, so that a
    thread that never entered one reads 0 without a failed lookup: a large call asks)."""
    single = 0


class _State:
    """The process's thread setting and pool (one object, replaced after a fork)."""

    def __init__(self):
        self.setting = None          # set_num_threads
        self.cores = None            # usable cores, read once
        self.env_value = None        # CUPYOPS_NUM_THREADS, read at import (None: unset or bad)
        self.workers = []            # one SimpleQueue of jobs per worker thread
        self.most_workers = None     # the workers the OS allowed, once it refused one
        self.busy_until = 0.0        # one thread until then: the workers found no core
        self.chosen_one = False      # a Choice runs this call on one thread
        self.lock = threading.Lock()     # held while the pool runs one call's parts
        self.main = threading.main_thread().ident
        self.local = _Local()


_state = _State()


def _after_fork_in_child():
    old = _state.__dict__.copy()
    _state.__init__()
    _state.setting = old["setting"]
    _state.env_value = old["env_value"]
    _state.cores = None


os.register_at_fork(after_in_child=_after_fork_in_child)


def _usable_cores() -> int:
    if _state.cores is None:
        try:
            _state.cores = max(1, len(os.sched_getaffinity(0)))
        except (AttributeError, OSError):     # pragma: no cover - no affinity on this OS
            _state.cores = max(1, os.cpu_count() or 1)
    return _state.cores


def max_threads() -> int:
    """The most threads a call uses: :data:`THREADS_PER_CORE` times the usable cores."""
    return THREADS_PER_CORE * _usable_cores()


def _read_env():
    """``CUPYOPS_NUM_THREADS``, read and checked once (at import): None when unset or empty;
    a value that is not a positive integer is a warning naming the variable, then None (the
    default); one over :func:`max_threads` is clamped, with a warning."""
    raw = os.environ.get(_ENV)
    if raw is None or not raw.strip():
        return None
    try:
        n = int(raw.strip())
    except ValueError:
        n = 0
    if n < 1:
        warnings.warn(f"{_ENV}={raw!r} is not a positive integer: ignored; cupyops uses the "
                      f"default, the {_usable_cores()} usable cores", RuntimeWarning, stacklevel=2)
        return None
    return _clamped(n, f"{_ENV}={n}")


def _clamped(n: int, what: str) -> int:
    cap = max_threads()
    if n > cap:
        warnings.warn(f"{what} is over the cap of {cap} threads ({THREADS_PER_CORE} per usable "
                      f"core, {_usable_cores()} usable): using {cap}", RuntimeWarning,
                      stacklevel=3)
        return cap
    return n


def _setting() -> int:
    """The number of threads asked for (set_num_threads, the environment, the cores)."""
    if _state.setting is not None:
        return _state.setting
    if _state.env_value is not None:
        return _state.env_value
    return _usable_cores()


def _here_single() -> bool:
    """Whether calls from this thread run on one thread (see the module docstring)."""
    return threading.get_ident() != _state.main or _state.local.single > 0


def get_num_threads() -> int:
    """The number of threads a call from here splits a large input into: the setting
    (``set_num_threads``, else ``CUPYOPS_NUM_THREADS``, else the usable cores), or 1 inside
    :func:`single_thread` and in threads other than the main one."""
    if _here_single():
        return 1
    return _setting()


def set_num_threads(n: int | None) -> None:
    """Use ``n`` threads (1: the single-thread path) for the NumPy path's large inputs; None
    goes back to the default (``CUPYOPS_NUM_THREADS``, else the usable cores). ``n`` over
    :func:`max_threads` is clamped to it, with a warning."""
    if n is not None:
        if isinstance(n, bool) or not hasattr(type(n), "__index__"):
            raise TypeError(f"set_num_threads: n must be a positive int or None, got "
                            f"{type(n).__name__}")
        n = n.__index__()
        if n < 1:
            raise ValueError(f"set_num_threads: n must be at least 1, got {n}")
        n = _clamped(n, f"set_num_threads({n})")
    _state.setting = n
    _state.most_workers = None       # a new setting tries the threads the OS refused again


def threads_for(nbytes: int) -> int:
    """How many parts to run at once for ``nbytes`` of input: 1 below :data:`MIN_BYTES`, else
    up to :func:`get_num_threads`, each part at least :data:`PART_BYTES`."""
    if nbytes < MIN_BYTES:
        return 1
    state = _state
    n = state.setting
    if n is None:                # (_setting inline: a large call's overhead is counted in 0.1 µs)
        n = state.env_value
        if n is None:
            n = state.cores or _usable_cores()
    if n <= 1 or state.chosen_one or _get_ident() != state.main or state.local.single:
        return 1
    if state.busy_until and _monotonic() < state.busy_until:
        return 1
    parts = nbytes // PART_BYTES
    if n < parts:
        return n
    return parts if parts > 1 else 1


_get_ident = threading.get_ident
_monotonic = time.monotonic
_perf = time.perf_counter

#: whether Choice measures (False: every large call on the threads threads_for gives, as
#: tests that count the parts want)
MEASURE = True
#: exponential average of a Choice's seconds per call: the weight of the newest call
CHOICE_WEIGHT = 0.25
#: a Choice runs the other way after this many calls, then twice as many, up to the most,
#: and no sooner than this many seconds after its last probe (a fast call probes rarely), nor
#: sooner than CHOICE_PROBE_SHARE times the probe's cost (two calls the slower way: the
#: probes take at most 1/400 of the time)
CHOICE_PROBE_FIRST = 4
CHOICE_PROBE_MOST = 64
CHOICE_PROBE_SECONDS = 0.1
CHOICE_PROBE_SHARE = 400
#: the threads must be this much faster than one thread to be taken (in doubt: one thread)
CHOICE_MARGIN = 0.05
#: once both ways are known, a timed call of the way chosen is followed by this many untimed
#: ones (the clock reads and bookkeeping of a timed call cost about 0.5 µs; a large call's
#: own cost above NumPy's routine has a goal of 1.5 µs)
CHOICE_UNTIMED = 3


class Choice:
    """One layout's calls on the threads or on one thread, whichever has been faster (the
    module docstring's "Measured, per layout"). :meth:`start` decides a call (None: nothing
    to decide, as on one thread anyway), :meth:`stop` times it. The seconds of one layout's
    calls compare directly: the same shape, the same work. A call that runs the other way
    than the call before is not timed: it meets the caches the other way left (data in the
    other core's L2). So a probe of the other way is two calls, the second's seconds replacing
    that way's stale average."""

    __slots__ = ("many", "one", "since", "every", "probed", "alone", "before", "probe", "quiet")

    def __init__(self):
        self.many = self.one = 0.0       # average seconds on the threads, on one (0: unknown)
        self.since, self.every = 0, CHOICE_PROBE_FIRST
        self.probed = 0.0                # when the last probe started
        self.alone = False               # this call runs on one thread
        self.before = None               # ... the call before did (None: no call yet)
        self.probe = 0                   # 1: a probe's first call, 2: its second
        self.quiet = 0                   # calls to run the way chosen, untimed

    def _alone(self, now) -> bool:
        if self.probe == 1:              # the probe's second call, the same way
            self.probe = 2
            return self.alone
        self.probe = 0
        if not self.many:
            return False                 # the threads first, then one thread
        if not self.one:
            return True
        best = self.many >= self.one * (1.0 - CHOICE_MARGIN)
        self.since += 1
        gap = max(CHOICE_PROBE_SECONDS, CHOICE_PROBE_SHARE * abs(self.many - self.one))
        if self.since >= self.every and now - self.probed >= gap:
            # now and then the other way: the machine changes
            self.since, self.probed, self.quiet = 0, now, 0
            self.every = min(2 * self.every, CHOICE_PROBE_MOST)
            self.probe = 1
            return not best
        return best

    def start(self, nbytes):
        """The start time of a call over ``nbytes`` that could use the threads (None where
        it runs on one thread anyway); caps this call at one thread when that is the way."""
        if not MEASURE or threads_for(nbytes) <= 1:
            return None
        t = _perf()
        self.before = self.alone if self.before is not None or self.many else None
        self.alone = self._alone(t)
        if self.alone:
            _state.chosen_one = True
        return t

    def stop(self, t0) -> None:
        if t0 is None:
            return
        dt = _perf() - t0
        if self.alone:
            _state.chosen_one = False
        if self.before is not None and self.before != self.alone:
            return                       # (the first call of a way: its caches cold, untimed)
        w = 1.0 if self.probe == 2 else CHOICE_WEIGHT
        if self.alone:
            self.one = dt if not self.one else self.one + w * (dt - self.one)
        else:
            self.many = dt if not self.many else self.many + w * (dt - self.many)
        if not self.probe and self.one and self.many and \
                (self.many >= self.one * (1.0 - CHOICE_MARGIN)) == self.alone:
            self.quiet = CHOICE_UNTIMED       # settled, this way still the best: untimed next


def _measured_call(state, x, workspace):
    choice, nbytes, entry, alone = state
    if not MEASURE:
        # (tests: every large call on the threads threads_for gives, none timed)
        return (entry if threads_for(nbytes) > 1 else alone)(x, workspace)
    if choice.quiet:
        # settled (Choice.quiet): the way chosen, untimed, as the timed road would run it
        choice.quiet -= 1
        choice.since += 1
        if not choice.alone:
            return (entry if threads_for(nbytes) > 1 else alone)(x, workspace)
        if alone is not entry:
            return alone(x, workspace)
        _state.chosen_one = True
        try:
            return alone(x, workspace)
        finally:
            _state.chosen_one = False
    busy = _state.busy_until
    if busy and _monotonic() < busy:
        # the cores are taken (threads_for's answer: one thread; nothing to time), asked
        # first: after a probe of slow threads this holds for BUSY_SECONDS of calls
        return alone(x, workspace)
    t0 = choice.start(nbytes)
    if t0 is None:
        return alone(x, workspace)
    try:
        return (alone if choice.alone else entry)(x, workspace)
    finally:
        choice.stop(t0)


def _measured_call_args(state, x, workspace, *args):
    """:func:`_measured_call` for entries that take more arrays (segment offsets)."""
    choice, nbytes, entry, alone = state
    if not MEASURE:
        return (entry if threads_for(nbytes) > 1 else alone)(x, workspace, *args)
    if choice.quiet:
        choice.quiet -= 1
        choice.since += 1
        if not choice.alone:
            return (entry if threads_for(nbytes) > 1 else alone)(x, workspace, *args)
        if alone is not entry:
            return alone(x, workspace, *args)
        _state.chosen_one = True
        try:
            return alone(x, workspace, *args)
        finally:
            _state.chosen_one = False
    busy = _state.busy_until
    if busy and _monotonic() < busy:
        return alone(x, workspace, *args)
    t0 = choice.start(nbytes)
    if t0 is None:
        return alone(x, workspace, *args)
    try:
        return (alone if choice.alone else entry)(x, workspace, *args)
    finally:
        choice.stop(t0)


def measured(entry, nbytes: int, alone=None, *, more_args=False):
    """``entry(x, workspace)`` of a layout whose calls may split ``nbytes`` of work among the
    threads, run through a :class:`Choice` of its own (``alone``: the same on one thread, with
    nothing to decide, where the layout has one: its calls on one thread run it); ``alone`` or
    ``entry`` itself below :data:`MIN_BYTES` (one thread always). ``more_args``: the entry
    takes more arguments after ``workspace`` (``entry(x, workspace, offsets)``)."""
    if entry is None:
        return None
    if nbytes < MIN_BYTES:
        return alone or entry
    return functools.partial(_measured_call_args if more_args else _measured_call,
                             (Choice(), nbytes, entry, alone or entry))


def split(n: int, threads: int, nbytes: int) -> list:
    """Ordered ``(start, stop)`` ranges that cover ``range(n)`` (items of ``nbytes`` bytes in
    all) for ``threads`` threads: :data:`PARTS_PER_THREAD` equal parts a thread, none under
    :data:`TAIL_BYTES`. Few parts keep the overhead low (each costs a call and a pass of
    the GIL); two a thread let the counter give a slowed thread less."""
    if threads <= 1 or n <= 1:
        return [(0, n)]
    k = max(1, min(n, PARTS_PER_THREAD * threads, nbytes // TAIL_BYTES))
    bounds = [n * i // k for i in range(k + 1)]
    return [(bounds[i], bounds[i + 1]) for i in range(k) if bounds[i + 1] > bounds[i]]


@contextlib.contextmanager
def using(n: int | None):
    """``set_num_threads(n)`` for the block, then the setting as it was (None: no change)."""
    old = _state.setting
    if n is not None:
        set_num_threads(n)
    try:
        yield get_num_threads()
    finally:
        _state.setting = old


@contextlib.contextmanager
def single_thread():
    """Calls in this block (in this thread) run on one thread."""
    local = _state.local
    local.single += 1
    try:
        yield
    finally:
        local.single -= 1


def one_thread(fn):
    """Decorator: ``fn``'s cupyops calls run on one thread (the chunk functions Dask runs:
    its chunks already keep the cores busy). The wrapper keeps ``fn``'s name, so a
    module-level function still pickles by reference."""
    @functools.wraps(fn)
    def call(*args, **kwargs):
        with single_thread():
            return fn(*args, **kwargs)
    return call


def _worker(jobs):
    while True:
        job = jobs.get()
        if job is None:
            return
        job()


def _ensure_workers(n: int) -> None:
    """At least ``n`` worker threads (daemons, waiting on their job queues), or as many as the
    OS allows: once it refuses one, a warning, and the calls run on the threads they have."""
    workers = _state.workers
    if _state.most_workers is not None:
        n = min(n, _state.most_workers)
    while len(workers) < n:
        q = queue.SimpleQueue()
        t = threading.Thread(target=_worker, args=(q,), daemon=True,
                             name=f"cupyops-worker-{len(workers)}")
        try:
            t.start()
        except RuntimeError as exc:        # "can't start new thread": a limit of the OS
            _state.most_workers = len(workers)
            warnings.warn(f"cupyops: the OS refused a new thread ({exc}); the NumPy path runs "
                          f"on {len(workers) + 1} threads", RuntimeWarning, stacklevel=4)
            return
        workers.append(q)


class _Job:
    """The parts of one call: every thread takes the next index from one counter; the call
    is done when every part is (a worker that wakes up late finds nothing left and leaves
    the job alone, so the caller never waits for a thread that took no part)."""

    __slots__ = ("fn", "parts", "results", "errors", "counter", "left", "lock", "done",
                 "owner", "helped")

    def __init__(self, fn, parts):
        self.fn, self.parts = fn, parts
        self.results = [None] * len(parts)
        self.errors = []
        self.counter = itertools.count()
        self.left = len(parts)
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.owner = _get_ident()
        self.helped = 0                   # parts the workers ran

    def __call__(self):
        fn, parts, results, n = self.fn, self.parts, self.results, len(self.parts)
        helper = _get_ident() != self.owner
        for i in self.counter:            # next() of a count is atomic under the GIL
            if i >= n:
                break
            try:
                results[i] = fn(parts[i])
            except BaseException as exc:  # noqa: BLE001 - raised in the calling thread
                self.errors.append((i, exc))
            with self.lock:
                self.helped += helper
                self.left -= 1
                if not self.left:
                    self.done.set()


def run_parts(fn, parts, threads: int) -> list:
    """``[fn(p) for p in parts]``, on up to ``threads`` threads (the caller's included); the
    first error (by part) is raised once every part has finished."""
    parts = list(parts)
    helpers = min(threads, len(parts)) - 1
    lock = _state.lock
    if helpers <= 0 or not lock.acquire(blocking=False):   # (a part calling back: serial)
        return [fn(p) for p in parts]
    try:
        _ensure_workers(helpers)
        job = _Job(fn, parts)
        for q in _state.workers[:helpers]:
            q.put(job)
        t0 = _monotonic()
        job()
        t1 = _monotonic()
        job.done.wait()
        t2 = _monotonic()
        if not job.helped or (t2 - t1) * 2 > t2 - t0:
            # the workers ran no part, or the caller waited for theirs more than half of the
            # call: the machine's cores are busy elsewhere, and one thread does better
            _state.busy_until = t2 + BUSY_SECONDS
    finally:
        lock.release()
    if job.errors:
        raise min(job.errors, key=lambda e: e[0])[1]
    return job.results


_state.env_value = _read_env()
