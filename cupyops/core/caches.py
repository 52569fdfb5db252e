"""Where cupyops keeps its caches on disk: :func:`cache_dir` decides for every one of them.

The folder of cache ``name`` is the first of these that is set (an empty variable is unset):

1. the cache's own variable, the folder itself: ``CUPYOPS_SIMT_CACHE`` (``simt``),
   ``CUPYOPS_TEST_CACHE`` (``test``);
2. ``$CUPYOPS_CACHE_DIR/<name>``: one root for every cupyops cache;
3. ``$XDG_CACHE_HOME/cupyops/<name>``, as the XDG base directory specification says (an
   absolute path only: the specification says to ignore a relative one);
4. ``~/.cache/cupyops/<name>``.

So ``XDG_CACHE_HOME`` moves them all, as it moves other programs' caches, and a ``CUPYOPS_*``
variable overrides it: ``CUPYOPS_CACHE_DIR`` for all of cupyops' caches, a cache's own variable
for that one. CuPy keeps the ``cuda`` device's compiled kernels in its own cache, which CuPy
places (``CUPY_CACHE_DIR``, default ``~/.cupy/kernel_cache``): :func:`cupy_kernel_cache` says
where, and cupyops never moves it. ``python -m cupyops info`` lists them all with their sizes.
"""
from __future__ import annotations

import os
import typing
from pathlib import Path

__all__ = ["CACHES", "RULE", "Cache", "cache_root", "cache_dir", "chosen_by",
           "cupy_kernel_cache", "disk_usage"]

#: the module docstring's rule in one line (python -m cupyops info prints it)
RULE = ("a cache's own variable, else $CUPYOPS_CACHE_DIR/<name>, else "
        "$XDG_CACHE_HOME/cupyops/<name>, else ~/.cache/cupyops/<name>")


class Cache(typing.NamedTuple):
    """One of cupyops' caches: its own variable (or None) and what it holds."""

    variable: str | None
    holds: str


#: every cache cupyops writes, by folder name
CACHES = {
    "simt": Cache("CUPYOPS_SIMT_CACHE", "the simt device's compiled kernel modules (g++)"),
    "nvrtc-checks": Cache(None, "NVRTC compile checks (python -m cupyops.tools.nvrtc, tests)"),
    "sass": Cache(None, "SASS of the issue-rate model (bench --issue-rate)"),
    "cupy-compile": Cache(None, "tests: kernel modules through CuPy's compile path"),
    "nvrtc-floor": Cache(None, "the oldest NVRTC the package claims, downloaded once "
                               "(python -m cupyops.tools.nvrtc_floor --download, tests)"),
    "test": Cache("CUPYOPS_TEST_CACHE", "tests: CuPy wheels installed with pip --target"),
}


def _env(name: str) -> str | None:
    return os.environ.get(name) or None


def _xdg_cache_home() -> Path | None:
    xdg = _env("XDG_CACHE_HOME")
    return Path(xdg) if xdg and os.path.isabs(xdg) else None


def cache_root() -> Path:
    """The folder of every cupyops cache without a variable of its own set: ``$CUPYOPS_CACHE_DIR``,
    else ``$XDG_CACHE_HOME/cupyops``, else ``~/.cache/cupyops``."""
    root = _env("CUPYOPS_CACHE_DIR")
    if root:
        return Path(root)
    return (_xdg_cache_home() or Path.home() / ".cache") / "cupyops"


def cache_dir(name: str) -> Path:
    """The folder of cache ``name`` (a key of :data:`CACHES`), as the module docstring says.
    Not created here: its user creates it when it writes."""
    own = CACHES[name].variable
    if own and _env(own):
        return Path(_env(own))
    return cache_root() / name


def chosen_by(name: str) -> str:
    """Which rule of the module docstring placed cache ``name``: its variable's name, or
    ``"the default"``."""
    own = CACHES[name].variable
    for var in (own, "CUPYOPS_CACHE_DIR"):
        if var and _env(var):
            return var
    return "XDG_CACHE_HOME" if _xdg_cache_home() else "the default"


def cupy_kernel_cache() -> tuple[Path, str]:
    """(CuPy's kernel cache folder, which setting chose it): ``$CUPY_CACHE_DIR``, else
    ``~/.cupy/kernel_cache`` (CuPy's own rule; the cuda device's modules are kept there)."""
    d = _env("CUPY_CACHE_DIR")
    if d:
        return Path(d), "CUPY_CACHE_DIR"
    return Path.home() / ".cupy" / "kernel_cache", "CuPy's default"


def disk_usage(folder: Path) -> tuple[int, int]:
    """(bytes, files) under ``folder`` (0, 0 when it does not exist); links are not followed."""
    total = files = 0
    for dirpath, _, names in os.walk(folder):
        for n in names:
            try:
                total += os.lstat(os.path.join(dirpath, n)).st_size
            except OSError:
                continue
            files += 1
    return total, files
