"""Optional NVRTC front end for cupyops.simt (``set_checks(nvrtc=True)`` or CUPYOPS_SIMT_NVRTC=1).

When ``cuda.bindings.nvrtc`` is installed, a module's source is first compiled to PTX by NVRTC
itself (no driver needed), so that whatever a GPU build rejects is refused here too, and the PTX's
``.maxntid`` gives each kernel's launch bound.  Without NVRTC (or when the source needs headers
NVRTC cannot find) the check is skipped: simt never depends on it."""

from __future__ import annotations

import hashlib
import json
import re
import sys
from pathlib import Path

from ._cache import atomic_write_text
from ._errors import CompileError

_ARCH = "--gpu-architecture=compute_90"


def _nvrtc():
    try:
        from cuda.bindings import nvrtc  # type: ignore
    except Exception:  # pragma: no cover - not installed
        return None
    return nvrtc


def available() -> bool:
    return _nvrtc() is not None


def _include_dirs() -> list[str]:
    out = []
    for p in sys.path:
        for sub in ("nvidia/cu13/include", "nvidia/cuda_runtime/include", "nvidia/cu12/include"):
            d = Path(p) / sub
            if (d / "cuda_fp16.h").exists():
                out.append(str(d))
    return out[:1]


def _options(options) -> list[bytes]:
    out = [_ARCH, "--std=c++17", "-default-device"]
    opts = [str(o) for o in options or ()]
    i = 0
    while i < len(opts):
        o = opts[i]
        if o in ("-D", "-U", "-I", "--define-macro", "--undefine-macro", "--include-path") and i + 1 < len(opts):
            out += [o, opts[i + 1]]
            i += 2
            continue
        if o.startswith(("-D", "-U", "-I", "--define-macro=", "--undefine-macro=", "--include-path=", "-ftz=")):
            out.append(o)
        i += 1
    out += [f"-I{d}" for d in _include_dirs()]
    return [o.encode() for o in out]


_memo: dict = {}


def check(source: str, options, name_expressions, name: str = "kernel.cu", cache_dir: Path | None = None) -> dict:
    """Compile with NVRTC; raise CompileError with its log if it fails.  Returns
    {name expression or extern "C" name: maxntid (threads) or 0}; {} when NVRTC is unavailable or
    the source needs headers it cannot find."""
    nv = _nvrtc()
    if nv is None:
        return {}
    key = hashlib.sha256("\0".join([source, *map(str, options or ()), *name_expressions]).encode()).hexdigest()
    if key in _memo:
        return _memo[key]
    path = cache_dir / f"nvrtc-{key[:32]}.json" if cache_dir else None
    if path is not None and path.exists():
        try:
            res = json.loads(path.read_text())
        except (OSError, ValueError):     # damaged: computed again and rewritten
            res = None
        if isinstance(res, dict):
            _memo[key] = res
            return res
    err, prog = nv.nvrtcCreateProgram(source.encode(), name.encode(), 0, [], [])
    if err != nv.nvrtcResult.NVRTC_SUCCESS:  # pragma: no cover
        return {}
    try:
        for e in name_expressions:
            nv.nvrtcAddNameExpression(prog, e.encode())
        opts = _options(options)
        (rc,) = nv.nvrtcCompileProgram(prog, len(opts), opts)
        _, n = nv.nvrtcGetProgramLogSize(prog)
        log = b" " * n
        nv.nvrtcGetProgramLog(prog, log)
        log = log.decode(errors="replace").rstrip("\0 \n")
        if rc != nv.nvrtcResult.NVRTC_SUCCESS:
            if re.search(r"cannot open source file|could not open source file", log):
                _memo[key] = {}
                return {}
            first = next((ln for ln in log.splitlines() if "error" in ln), log.splitlines()[0] if log else "")
            raise CompileError(f"NVRTC rejects kernel module {name!r}: {first}\n{log}", log=log)
        _, n = nv.nvrtcGetPTXSize(prog)
        ptx = b" " * n
        nv.nvrtcGetPTX(prog, ptx)
        ptx = ptx.decode(errors="replace")
        lowered = {}
        for e in name_expressions:
            r, low = nv.nvrtcGetLoweredName(prog, e.encode())
            if r == nv.nvrtcResult.NVRTC_SUCCESS:
                lowered[low.decode() if isinstance(low, bytes) else str(low)] = e
    finally:
        nv.nvrtcDestroyProgram(prog)
    res = {}
    for m in re.finditer(r"\.entry\s+(\w+)\s*\((?:[^()]|\([^()]*\))*\)\s*([^{]*)\{", ptx):
        ent, attrs = m.group(1), m.group(2)
        t = re.search(r"\.maxntid\s+(\d+)(?:\s*,\s*(\d+))?(?:\s*,\s*(\d+))?", attrs)
        n = 0
        if t:
            n = 1
            for g in t.groups():
                if g:
                    n *= int(g)
        res[lowered.get(ent, ent)] = n
    _memo[key] = res
    if path is not None:
        try:
            atomic_write_text(path, json.dumps(res))
        except OSError:  # pragma: no cover
            pass
    return res
