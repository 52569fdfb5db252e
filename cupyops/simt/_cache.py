"""Files of an on-disk cache that survive parallel first use, crashes and damage.

Helpers for any cache folder that several processes share (reusable outside cupyops.simt):

- :func:`atomic_write_bytes` / :func:`atomic_write_text`: write a unique temporary sibling,
  ``fsync`` it, rename it over the destination, ``fsync`` the folder.  Readers see the old file or
  the whole new one, never a partial one, even after a power cut.
- :func:`temp_path` names such a sibling for a tool that writes its own output (g++ ``-o``);
  :func:`install` then ``fsync``\\ s and renames it.  Every temporary name contains ``.tmp``.
- :func:`locked`: an exclusive ``fcntl.flock`` on ``<path>.lock``, so that concurrent first uses of
  one entry wait for one producer instead of each producing it.  Take it only to *write*: reading a
  valid entry needs no lock (a read-only cache keeps working).  Lock files are removed on release
  (:func:`remove_stale_locks` removes those a folder that turned read-only kept).  A forked child
  closes its copies of the lock files other threads held (``os.register_at_fork``): a flock belongs
  to the open file, so a copy kept open would hold the lock for as long as the child lives.
- :func:`record_digests` / :func:`check_digests`: a ``sha256sum``-format sidecar (written after
  the files it lists) against which an entry is checked before it is used.
- :func:`remove_stale_temps`: remove ``*.tmp*`` files older than an hour (left by killed writers).
- :func:`write_failure`: the OSError behind a failed build (ENOSPC, EDQUOT, EFBIG, EROFS, EACCES,
  EPERM), raised or reported in a tool's log.
- :class:`Cache`: a cache folder named by an environment variable, with a private temporary
  fallback folder, and :meth:`Cache.entry`, which returns a validated entry or builds it (once,
  under the lock) with the helpers above.  A build runs in a private temporary build folder and
  only its finished files are written into the cache folder, so a folder that fills up or turns
  read-only at any moment costs no compile: the files go to the fallback folder instead.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import re
import secrets
import shutil
import stat
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path

__all__ = [
    "atomic_write_bytes", "atomic_write_text", "temp_path", "install", "locked", "record_digests",
    "check_digests", "remove_stale_temps", "remove_stale_locks", "write_failure", "STALE_TEMP_S", "Cache",
    "CacheError",
]

STALE_TEMP_S = 3600.0


def temp_path(path, suffix: str = "") -> Path:
    """A unique sibling of `path` to write into before :func:`install`: ``<name>.<token>.tmp<suffix>``."""
    path = Path(path)
    return path.with_name(f"{path.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp{suffix}")


def fsync_dir(folder) -> None:
    """Make a rename inside `folder` durable (best effort: some file systems refuse)."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def install(tmp, path) -> None:
    """``fsync`` the finished file `tmp`, rename it to `path` (atomically replacing it) and
    ``fsync`` the folder."""
    fd = os.open(tmp, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(Path(path).parent)


def _unlink_quietly(p) -> None:
    try:
        os.unlink(p)
    except OSError:
        pass


def atomic_write_bytes(path, data: bytes, mode: int = 0o666) -> None:
    """Write `data` to `path` so that no reader, and no crash, ever leaves a partial file there.
    The file gets `mode` less the umask (0666: the usual permissions).  Raises OSError, after
    removing its temporary file."""
    path = Path(path)
    tmp = temp_path(path)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), mode)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        _unlink_quietly(tmp)
        raise
    fsync_dir(path.parent)


def atomic_write_text(path, text: str, encoding: str = "utf-8") -> None:
    atomic_write_bytes(path, text.encode(encoding))


# The lock files this process has open, by the thread that opened them.  A forked child closes
# those of other threads (they are gone there); opening and closing are atomic with respect to
# fork (the guard), so a child never closes a number that another file took in between.
_lock_fds: dict = {}
_lock_fds_guard = threading.Lock()


def _open_lock_file(path, flags=os.O_RDONLY | os.O_CREAT) -> int:
    with _lock_fds_guard:
        fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0), 0o666)  # flock needs no write
        _lock_fds[fd] = threading.get_ident()
    return fd


def _close_lock_file(fd) -> None:
    with _lock_fds_guard:
        _lock_fds.pop(fd, None)
        os.close(fd)


def _after_fork_in_child() -> None:
    global _lock_fds_guard
    me = threading.get_ident()
    for fd, owner in list(_lock_fds.items()):
        if owner != me:
            del _lock_fds[fd]
            try:
                os.close(fd)
            except OSError:  # pragma: no cover
                pass
    _lock_fds_guard = threading.Lock()


os.register_at_fork(before=lambda: _lock_fds_guard.acquire(),
                    after_in_parent=lambda: _lock_fds_guard.release(),
                    after_in_child=_after_fork_in_child)


@contextlib.contextmanager
def locked(path, *, timeout: float | None = None):
    """Exclusive lock of the cache entry `path` (the file ``<path>.lock``, created in its folder)
    across processes and threads.  Raises OSError when the folder is not writable (the caller may
    then write elsewhere) and TimeoutError after `timeout` seconds (None: wait as long as the
    holder works; a holder that dies releases the lock).  The lock file is removed on release; a
    waiter that wakes on a removed lock file takes the new one."""
    lock = Path(path).with_name(Path(path).name + ".lock")
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        fd = _open_lock_file(lock)
        try:
            if deadline is None:
                fcntl.flock(fd, fcntl.LOCK_EX)
            else:
                while True:
                    try:
                        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                        break
                    except OSError as e:
                        if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                            raise
                        if time.monotonic() > deadline:
                            raise TimeoutError(f"waited {timeout} s for the lock {lock}") from None
                        time.sleep(0.02)
            try:
                same = os.path.samestat(os.fstat(fd), os.stat(lock))
            except FileNotFoundError:
                same = False
        except BaseException:
            _close_lock_file(fd)
            raise
        if same:
            break
        _close_lock_file(fd)  # the holder removed it before releasing: lock the current one
    try:
        yield lock
    finally:
        _unlink_quietly(lock)  # before the release, so that no one locks a removed file for good
        _close_lock_file(fd)


def file_digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def record_digests(sums_path, files) -> None:
    """Write (atomically) the sha256 of each of `files` (all in the folder of `sums_path`) into
    `sums_path`, as ``sha256sum`` does (``sha256sum -c`` checks it).  Write it after the files."""
    lines = []
    for f in files:
        f = Path(f)
        lines.append(f"{file_digest(f.read_bytes())}  {f.name}\n")
    atomic_write_text(sums_path, "".join(lines))


def check_digests(sums_path, required=(), verify=None) -> str | None:
    """None if every file listed in `sums_path` has its recorded sha256 (and `required` names are
    listed, and ``verify(name, data)`` returns None for each); else why not, in a few words:
    ``"missing"`` when neither the sidecar nor any required file exists."""
    sums_path = Path(sums_path)
    folder = sums_path.parent
    try:
        text = sums_path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        if not any((folder / r).exists() for r in required):
            return "missing"
        return f"no {sums_path.name}"
    except OSError as e:
        return f"{sums_path.name} unreadable: {e.strerror or e}"
    listed = {}
    for ln in text.splitlines():
        digest, sep, name = ln.partition("  ")
        if not sep or len(digest) != 64 or not name or "/" in name:
            return f"{sums_path.name} is damaged"
        listed[name] = digest
    if not listed:
        return f"{sums_path.name} is empty"
    for r in required:
        if r not in listed:
            return f"{r} not listed in {sums_path.name}"
    for name, digest in listed.items():
        try:
            data = (folder / name).read_bytes()
        except FileNotFoundError:
            return f"{name} is missing"
        except OSError as e:
            return f"{name} unreadable: {e.strerror or e}"
        if file_digest(data) != digest:
            return f"{name} does not match its sha256 ({len(data)} bytes)"
        if verify is not None:
            why = verify(name, data)
            if why:
                return why
    return None


def remove_stale_temps(folder, max_age: float = STALE_TEMP_S) -> int:
    """Remove the ``*.tmp*`` files of `folder` last modified over `max_age` seconds ago (left by
    writers that were killed).  Returns how many were removed; errors are ignored."""
    now = time.time()
    n = 0
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return 0
    for e in entries:
        if ".tmp" not in e.name:
            continue
        try:
            if e.is_file(follow_symlinks=False) and now - e.stat(follow_symlinks=False).st_mtime > max_age:
                os.unlink(e.path)
                n += 1
        except OSError:
            pass
    return n


def remove_stale_locks(folder) -> int:
    """Remove the ``*.lock`` files of `folder` that no one holds: those of builds that could not
    remove theirs (the folder had turned read-only).  Each is locked before it is removed, as
    :func:`locked` releases, so a process waiting on it takes a new one.  Returns how many."""
    n = 0
    try:
        entries = [e.path for e in os.scandir(folder) if e.name.endswith(".lock")]
    except OSError:
        return 0
    for path in entries:
        try:
            fd = _open_lock_file(path, os.O_RDONLY)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if os.path.samestat(os.fstat(fd), os.stat(path)):
                os.unlink(path)
                n += 1
        except OSError:  # held (a build is running), or gone meanwhile
            pass
        finally:
            _close_lock_file(fd)
    return n


#: the errors of a write that a folder refused: full, over quota, read-only, no permission
WRITE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EACCES, errno.EPERM)
# a tool's own words for a write that failed (g++, GNU as and ld: the message names no path)
_WRITER_WORDS = re.compile(r"final link failed|cannot open output file|error writing|error closing|"
                           r"can't write|cannot write|failed to write|write error")


def write_failure(exc: BaseException, folders=()) -> OSError | None:
    """The OSError behind a failed build, if a write failed: `exc` itself (an OSError with one of
    :data:`WRITE_ERRNOS`), or such an error reported on a line of the tool's log (``exc.log``, else
    its message) that names one of `folders` or is the tool's word for a failed write (``ld: final
    link failed: No space left on device``).  None otherwise (a compile error, a header the
    compiler cannot read)."""
    if isinstance(exc, OSError):
        return exc if exc.errno in WRITE_ERRNOS else None
    log = getattr(exc, "log", None) or str(exc)
    names = [str(f) for f in folders]
    for line in str(log).splitlines():
        for code in WRITE_ERRNOS:
            text = os.strerror(code)
            if text in line and (_WRITER_WORDS.search(line) or any(n in line for n in names)):
                return OSError(code, text, line.strip())
    return None


class CacheError(OSError):
    """Neither the configured cache folder nor a temporary one can be written; the message names
    the environment variable that sets the folder."""


def _signature(paths):
    """What identifies the current content of `paths` cheaply (None if one is missing)."""
    out = []
    for p in paths:
        try:
            st = os.stat(p)
        except OSError:
            return None
        out.append((st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns))
    return tuple(out)


def _reason(e: BaseException) -> str:
    if isinstance(e, OSError) and e.strerror:
        return f"{type(e).__name__}: {e.strerror}"
    return f"{type(e).__name__}: {e}"


class Cache:
    """A cache folder shared by processes: ``$<env_var>``, else ``default()``.

    :meth:`folder` is where entries are read; when the folder cannot be created or read (a file is
    in the way, no permission), a private temporary folder is used instead
    (``<tmp>/<fallback_prefix>-<uid>``, mode 0700, else a fresh ``mkdtemp``), with a one-time
    warning that names the variable.  A folder that can be read but not written (a read-only cache
    that is already filled) is still read; only the entries that must be built go to the
    temporary folder (with the same warning).

    An entry ``<stem>`` is the files ``<stem><suffix>`` for each suffix and ``<stem>.sum``
    (:func:`record_digests`, written last); it is used only when :func:`check_digests` accepts it.
    A checked entry is remembered per process with the files' inode, size and times, so a process
    hashes each file once.  Messages (damaged entries) go to stderr, one line each, prefixed with
    `label`."""

    def __init__(self, env_var: str, default, label: str, fallback_prefix: str):
        self.env_var = env_var
        self._default = default
        self.label = label
        self._prefix = fallback_prefix
        self._folders: dict = {}
        self._unwritable: set = set()
        self._fallback: Path | None = None
        self._valid: dict = {}
        self._said: set = set()

    # ------------------------------------------------------------ folders
    def configured(self) -> Path:
        d = os.environ.get(self.env_var)
        return Path(d) if d else Path(self._default())

    def _describe(self, p: Path) -> str:
        if os.environ.get(self.env_var):
            return f"{self.env_var}={p}"
        return f"{p} (the default; set {self.env_var} to choose another)"

    def folder(self) -> Path:
        """The folder to read entries from (created if missing)."""
        p = self.configured()
        got = self._folders.get(str(p))
        if got is None:
            try:
                p.mkdir(parents=True, exist_ok=True)
                if not os.access(p, os.R_OK | os.X_OK):
                    raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(p))
                got = p
            except OSError as e:
                got = self._fallback_folder(p, e)
            self._folders[str(p)] = got
        return got

    def _fallback_folder(self, configured: Path, err: BaseException) -> Path:
        """The private temporary folder, with a one-time warning about `configured`."""
        if self._fallback is None:
            base = Path(tempfile.gettempdir())
            uid = os.getuid()
            p = base / f"{self._prefix}-{uid}"
            ok = False
            try:
                p.mkdir(mode=0o700, exist_ok=True)
                st = os.lstat(p)
                ok = (stat.S_ISDIR(st.st_mode) and st.st_uid == uid and not st.st_mode & 0o077
                      and os.access(p, os.R_OK | os.W_OK | os.X_OK))
            except OSError:
                pass
            if not ok:  # someone else's, or too open: a fresh one for this process
                try:
                    p = Path(tempfile.mkdtemp(prefix=self._prefix + "-"))
                except OSError as e:
                    raise CacheError(e.errno, f"{self.label}: the cache folder {self._describe(configured)} is not "
                                              f"usable ({_reason(err)}), nor is the temporary folder {base} "
                                              f"({_reason(e)}): set {self.env_var} to a writable folder") from e
            self._fallback = p
        self._unwritable.add(str(configured))
        if ("folder", str(configured)) not in self._said:
            self._said.add(("folder", str(configured)))
            warnings.warn(f"{self.label}: the cache folder {self._describe(configured)} is not usable "
                          f"({_reason(err)}); using the private temporary folder {self._fallback} instead",
                          RuntimeWarning, stacklevel=2)
        return self._fallback

    def say(self, message: str) -> None:
        """One line on stderr (once per message and process)."""
        if message not in self._said:
            self._said.add(message)
            try:
                sys.stderr.write(f"{self.label}: {message}\n")
                sys.stderr.flush()
            except (OSError, ValueError):  # pragma: no cover - no stderr
                pass

    # ------------------------------------------------------------ entries
    def check(self, folder: Path, stem: str, suffixes, verify=None) -> str | None:
        """None if the entry is valid, else why not ("missing" if it is not there at all)."""
        sums = folder / (stem + ".sum")
        files = [folder / (stem + s) for s in suffixes]
        key = str(folder / stem)
        sig = _signature([sums, *files])
        if sig is not None and self._valid.get(key) == sig:
            return None
        why = check_digests(sums, [f.name for f in files], verify)
        if why is None and sig is not None:
            self._valid[key] = sig
        return why

    def entry(self, stem: str, suffixes, build, *, verify=None, force: bool = False) -> Path:
        """The path of the valid entry `stem` (its first suffix's file), built when it is missing or
        damaged (or always, with `force`).  ``build(tmp)`` must write that file at `tmp` (a str
        that contains ".tmp", in a private temporary build folder, beside which it may write its own
        temporary files) and return ``{suffix: bytes}`` for the other suffixes; it runs under the
        entry's lock, after :func:`remove_stale_temps`.  Concurrent first uses wait for one build.
        Errors of `build` propagate, except a failed write (:func:`write_failure`: a CacheError that
        names the temporary folder and the OS error).  An OSError of the cache folder (not
        writable, full) puts the built files in the temporary folder (a CacheError if that fails
        too).  A failed build leaves no temporary file, nor lock file, behind, except in a folder
        that turned read-only (removed by a later build there)."""
        suffixes = tuple(suffixes)
        primary = self.folder()
        fallback = self._fallback
        why = None
        if not force:
            why = self.check(primary, stem, suffixes, verify)
            if why is None:
                return primary / (stem + suffixes[0])
        made: dict = {}  # the built files, once built: a second folder takes them as they are
        if str(primary) in self._unwritable and fallback is not None and primary != fallback:
            return self._entry_elsewhere(primary, fallback, stem, suffixes, build, verify, force, why, made)
        try:
            return self._build_in(primary, stem, suffixes, build, verify, force, made)
        except OSError as e:
            if isinstance(e, CacheError):
                raise
            if primary == self._fallback:  # already the temporary folder that replaces the configured one
                raise CacheError(e.errno, f"{self.label}: the cache folder {self._describe(self.configured())} is "
                                          f"not usable, nor is the temporary folder {primary} ({_reason(e)}): set "
                                          f"{self.env_var} to a writable folder") from e
            fallback = self._fallback_folder(primary, e)
        return self._entry_elsewhere(primary, fallback, stem, suffixes, build, verify, force, why, made)

    def _entry_elsewhere(self, primary, fallback, stem, suffixes, build, verify, force, why, made):
        if why not in (None, "missing"):
            self.say(f"the cache entry {stem} in {primary} is damaged ({why}) and that folder "
                     f"is not writable: building it in {fallback}")
        if not force and self.check(fallback, stem, suffixes, verify) is None:
            return fallback / (stem + suffixes[0])
        try:
            return self._build_in(fallback, stem, suffixes, build, verify, force, made)
        except OSError as e:
            if isinstance(e, CacheError):
                raise
            raise CacheError(e.errno, f"{self.label}: the cache folder {self._describe(primary)} is not writable, "
                                      f"nor is the temporary folder {fallback} ({_reason(e)}): set {self.env_var} "
                                      f"to a writable folder") from e

    def _build_in(self, folder: Path, stem, suffixes, build, verify, force, made) -> Path:
        folder.mkdir(parents=True, exist_ok=True)  # it may have been removed since
        main = folder / (stem + suffixes[0])
        with locked(main):
            if not force:
                why = self.check(folder, stem, suffixes, verify)
                if why is None:
                    return main  # built by another process while this one waited
                if why != "missing":
                    self.say(f"the cache entry {stem} in {folder} is damaged ({why}): rebuilding it")
            remove_stale_temps(folder)
            remove_stale_locks(folder)
            if not made:
                made.update(self._build_privately(stem, suffixes, build))
            self._install(folder, stem, suffixes, made)
            self._valid.pop(str(folder / stem), None)
            why = self.check(folder, stem, suffixes, verify)
            if why is not None:  # pragma: no cover - a build that writes what `verify` refuses
                raise RuntimeError(f"{self.label}: the cache entry {main} just built does not check: {why}")
        return main

    def _build_privately(self, stem, suffixes, build) -> dict:
        """``{suffix: (bytes, mode)}`` of a build run in a private temporary build folder (removed
        after it): the tool never writes into the cache folder."""
        base = Path(tempfile.gettempdir())
        try:
            scratch = Path(tempfile.mkdtemp(prefix=f"{self._prefix}-build-"))
        except OSError as e:
            raise CacheError(e.errno, f"{self.label}: cannot build: no private build folder can be made in the "
                                      f"temporary folder {base} ({_reason(e)}); free space there or set TMPDIR "
                                      f"to a writable folder") from e
        try:
            tmp = temp_path(scratch / (stem + suffixes[0]), suffixes[0])
            try:
                extra = build(str(tmp)) or {}
                out = {suffixes[0]: (tmp.read_bytes(), stat.S_IMODE(os.stat(tmp).st_mode))}
            except Exception as e:
                err = write_failure(e, (scratch, base))
                if err is None:
                    raise
                raise CacheError(err.errno, f"{self.label}: cannot build: a write in the temporary folder {base} "
                                            f"failed ({_reason(err)}; {err.filename}): free space there or set "
                                            f"TMPDIR to a writable folder") from e
            out.update({s: (extra[s], 0o666) for s in suffixes[1:]})
            return out
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    def _install(self, folder: Path, stem, suffixes, made) -> None:
        """Write the built files into `folder`, the sidecar last; on an error, remove the ones
        written (useless without their sidecar) and raise it."""
        written = []
        try:
            for s in (*suffixes[1:], suffixes[0]):
                data, mode = made[s]
                atomic_write_bytes(folder / (stem + s), data, mode)
                written.append(folder / (stem + s))
            record_digests(folder / (stem + ".sum"), [folder / (stem + s) for s in suffixes])
        except OSError:
            for p in written:
                _unlink_quietly(p)
            raise
