"""Files of an on-disk cache that survive parallel first use, crashes and damage.

Helpers for any cache folder that several processes share (reusable outside cupyops.simt):

- :func:`atomic_write_bytes` / :func:`atomic_write_text`: write a unique temporary sibling,
  ``fsync`` it, rename it over the destination, ``fsync`` the folder.  Readers see the old file or
  the whole new one, never a partial one, even after a power cut.
- :func:`temp_path` names such a sibling for a tool that writes its own output (g++ ``-o``);
  :func:`install` then ``fsync``\\ s and renames it.  Every temporary name contains ``.tmp``.
- :func:`locked`: an exclusive ``fcntl.flock`` on ``<path>.lock``, so that concurrent first uses of
  one entry wait for one producer instead of each producing it.  Take it only to *write*: reading a
  valid entry needs no lock (a read-only cache keeps working).  Lock files are removed on release.
- :func:`record_digests` / :func:`check_digests`: a ``sha256sum``-format sidecar (written after
  the files it lists) against which an entry is checked before it is used.
- :func:`remove_stale_temps`: remove ``*.tmp*`` files older than an hour (left by killed writers).
- :class:`Cache`: a cache folder named by an environment variable, with a private temporary
  fallback folder, and :meth:`Cache.entry`, which returns a validated entry or builds it (once,
  under the lock) with the helpers above.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import secrets
import stat
import sys
import tempfile
import time
import warnings
from pathlib import Path

__all__ = [
    "atomic_write_bytes", "atomic_write_text", "temp_path", "install", "locked", "record_digests",
    "check_digests", "remove_stale_temps", "STALE_TEMP_S", "Cache", "CacheError",
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


def atomic_write_bytes(path, data: bytes) -> None:
    """Write `data` to `path` so that no reader, and no crash, ever leaves a partial file there.
    The file gets the usual permissions (0666 less the umask).  Raises OSError."""
    path = Path(path)
    tmp = temp_path(path)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
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
        fd = os.open(lock, os.O_RDONLY | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o666)  # flock needs no write
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
            os.close(fd)
            raise
        if same:
            break
        os.close(fd)  # the holder removed it before releasing: lock the current one
    try:
        yield lock
    finally:
        _unlink_quietly(lock)  # before the release, so that no one locks a removed file for good
        os.close(fd)


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
        that contains ".tmp") and return ``{suffix: bytes}`` for the other suffixes; it runs under
        the entry's lock, after :func:`remove_stale_temps`.  Concurrent first uses wait for one
        build.  Errors of `build` propagate; an OSError of the folder (not writable) moves the
        build to the temporary folder (a CacheError if that fails too)."""
        suffixes = tuple(suffixes)
        primary = self.folder()
        fallback = self._fallback
        why = None
        if not force:
            why = self.check(primary, stem, suffixes, verify)
            if why is None:
                return primary / (stem + suffixes[0])
        if str(primary) in self._unwritable and fallback is not None and primary != fallback:
            return self._entry_elsewhere(primary, fallback, stem, suffixes, build, verify, force, why)
        try:
            return self._build_in(primary, stem, suffixes, build, verify, force)
        except OSError as e:
            if isinstance(e, CacheError):
                raise
            if primary == self._fallback:  # already the temporary folder that replaces the configured one
                raise CacheError(e.errno, f"{self.label}: the cache folder {self._describe(self.configured())} is "
                                          f"not usable, nor is the temporary folder {primary} ({_reason(e)}): set "
                                          f"{self.env_var} to a writable folder") from e
            fallback = self._fallback_folder(primary, e)
        return self._entry_elsewhere(primary, fallback, stem, suffixes, build, verify, force, why)

    def _entry_elsewhere(self, primary, fallback, stem, suffixes, build, verify, force, why):
        if why not in (None, "missing"):
            self.say(f"the cache entry {stem} in {primary} is damaged ({why}) and that folder "
                     f"is not writable: building it in {fallback}")
        if not force and self.check(fallback, stem, suffixes, verify) is None:
            return fallback / (stem + suffixes[0])
        try:
            return self._build_in(fallback, stem, suffixes, build, verify, force)
        except OSError as e:
            if isinstance(e, CacheError):
                raise
            raise CacheError(e.errno, f"{self.label}: the cache folder {self._describe(primary)} is not writable, "
                                      f"nor is the temporary folder {fallback} ({_reason(e)}): set {self.env_var} "
                                      f"to a writable folder") from e

    def _build_in(self, folder: Path, stem, suffixes, build, verify, force) -> Path:
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
            tmp = temp_path(main, suffixes[0])
            try:
                extra = build(str(tmp)) or {}
                for s in suffixes[1:]:
                    atomic_write_bytes(folder / (stem + s), extra[s])
                install(tmp, main)
            finally:
                _unlink_quietly(tmp)
            record_digests(folder / (stem + ".sum"), [folder / (stem + s) for s in suffixes])
            self._valid.pop(str(folder / stem), None)
            why = self.check(folder, stem, suffixes, verify)
            if why is not None:  # pragma: no cover - a build that writes what `verify` refuses
                raise RuntimeError(f"{self.label}: the cache entry {main} just built does not check: {why}")
        return main
