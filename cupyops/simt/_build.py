"""Compilation of kernel sources and of the runtime with the system g++, with caching."""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import subprocess
import tempfile
from pathlib import Path

from cupyops.core import caches as _caches

from . import _cache
from ._errors import CompileError

_HERE = Path(__file__).resolve().parent
INCLUDE_DIR = _HERE / "include"
RUNTIME_SOURCES = (_HERE / "simt_runtime.cpp", _HERE / "simt_switch.S")

ASAN_FLAGS = (
    "-fsanitize=kernel-address",
    "--param", "asan-instrumentation-with-call-threshold=0",
    "--param", "asan-stack=0",
    "--param", "asan-globals=0",
)
# ThreadSanitizer instrumentation reports every load and store (ASan drops the check of a store
# that follows a load of the same address in a basic block, hiding writes to read-only inputs)
# and marks volatile accesses.  The callbacks are ours (simt_runtime.cpp); libtsan is never linked.
TSAN_FLAGS = (
    "-fsanitize=thread",
    "--param", "tsan-instrument-func-entry-exit=0",
    "--param", "tsan-distinguish-volatile=1",
)


def instrumentation_flags():
    return ASAN_FLAGS if os.environ.get("CUPYOPS_SIMT_SANITIZER", "thread") == "address" else TSAN_FLAGS
KERNEL_FLAGS = (
    "-std=c++17", "-O2", "-g1", "-fPIC", "-fno-strict-aliasing", "-fstack-clash-protection",
    "-fno-gnu-unique",
    # what NVRTC rejects: exceptions, variable-length arrays
    "-fno-exceptions", "-Werror=vla",
    # keep side-effect-free loops (a spin on a plain load must spin, not vanish)
    "-fno-finite-loops",
    # C++ undefined behaviour that a GPU defines: reported through our UBSan handlers
    "-fsanitize=shift-exponent,float-cast-overflow",
    # a dereference of a pointer not aligned for its type (a float4 at +4 B, a raw cast to int4*):
    # checked before g++ splits the vector access into narrower ones that would pass
    "-fsanitize=alignment",
    # per-function frame sizes: fiber stacks are sized from them
    "-fstack-usage",
)

_compiler_id_cache: dict[str, str] = {}


def compiler() -> str:
    return os.environ.get("CUPYOPS_SIMT_CXX", "g++")


def compiler_id() -> str:
    cxx = compiler()
    if cxx not in _compiler_id_cache:
        try:
            out = subprocess.run([cxx, "--version"], capture_output=True, text=True, check=True).stdout
        except (OSError, subprocess.CalledProcessError) as e:  # pragma: no cover - no compiler
            raise CompileError(f"cupyops.simt needs a C++ compiler ({cxx!r}): {e}") from e
        _compiler_id_cache[cxx] = out.splitlines()[0] if out else cxx
    return _compiler_id_cache[cxx]


_CACHE = _cache.Cache("CUPYOPS_SIMT_CACHE", lambda: _caches.cache_dir("simt"), "cupyops.simt",
                      "cupyops-simt")


def cache_dir() -> Path:
    """The folder of the cached libraries: $CUPYOPS_SIMT_CACHE, else cupyops' cache folder's
    ``simt`` (cupyops.core.caches: $CUPYOPS_CACHE_DIR, $XDG_CACHE_HOME/cupyops or
    ~/.cache/cupyops), or a private temporary folder when that one is unusable (with a
    one-time warning)."""
    return _CACHE.folder()


def _support_digest() -> str:
    h = hashlib.sha256()
    for f in sorted(INCLUDE_DIR.glob("*.h")) + list(RUNTIME_SOURCES) + [Path(__file__), _HERE / "_cache.py"]:
        h.update(f.name.encode())
        h.update(f.read_bytes())
    h.update(compiler_id().encode())
    return h.hexdigest()


_support_digest_cache: list[str] = []


def support_digest() -> str:
    if not _support_digest_cache:
        _support_digest_cache.append(_support_digest())
    return _support_digest_cache[0]


_UNDECLARED = re.compile(r"[‘'](__\w+)[’'] was not declared in this scope")


def _explain(stderr: str) -> str:
    """A leading sentence for what NVRTC would also reject, from g++'s messages."""
    m = _UNDECLARED.search(stderr)
    if m:
        return (f"unsupported CUDA built-in {m.group(1)!r}: cupyops.simt does not emulate it "
                f"(or it does not exist). ")
    if "exception handling disabled" in stderr:
        return "try/catch/throw is not allowed in device code (NVRTC rejects exceptions). "
    if "variable length array" in stderr or "-Werror=vla" in stderr:
        return "variable-length arrays are not allowed in device code (NVRTC rejects them). "
    if "assignment of read-only" in stderr:
        return "a store to a const object (NVRTC rejects it too). "
    return ""


def _run_compiler(cmd: list[str], what: str) -> None:
    try:
        r = subprocess.run(cmd, capture_output=True, text=True)
    except OSError as e:
        raise CompileError(f"cannot run the compiler for {what}: {e}", log=str(e)) from e
    if r.returncode != 0:
        log = f"$ {shlex.join(cmd)}\n{r.stdout}{r.stderr}"
        first = next((ln for ln in (r.stderr or "").splitlines() if "error" in ln), "")
        raise CompileError(f"compilation of {what} failed: {_explain(r.stderr or '')}{first}\n{log}", log=log)


# ---------------------------------------------------------------- cached libraries
# Each library is built from a unique temporary source into a unique temporary object and
# library, its entry symbols are checked, then it is fsync'ed and renamed into place, under a
# per-digest lock (concurrent first uses wait for one compile), and its sha256 is recorded in a
# ".sum" sidecar written after it.  Nothing is dlopen'ed before its digests check (_cache.Cache).
RUNTIME_SYMBOLS = ("simt_launch", "simt_register_module", "simt_module_static_shared", "simt_symbol_name",
                   "simt_context_switch_benchmark")


def _elf_problem(data: bytes) -> str | None:
    """Why `data` is not a whole ELF64 shared object (None if it looks whole): every header, segment
    and section it names must lie inside it (a truncated library crashes the process in dlopen)."""
    import struct
    if len(data) < 64 or data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return "not an ELF64 file"
    try:
        e_type, = struct.unpack_from("<H", data, 0x10)
        e_phoff, e_shoff = struct.unpack_from("<QQ", data, 0x20)
        e_phentsize, e_phnum, e_shentsize, e_shnum = struct.unpack_from("<HHHH", data, 0x36)
        if e_type != 3 or e_phnum == 0:  # ET_DYN
            return "not a shared library"
        for i in range(e_phnum):
            _, _, p_offset, _, _, p_filesz = struct.unpack_from("<IIQQQQ", data, e_phoff + i * e_phentsize)
            if p_offset + p_filesz > len(data):
                return "truncated"
        for i in range(e_shnum):
            sh = struct.unpack_from("<IIQQQQ", data, e_shoff + i * e_shentsize)
            if sh[1] != 8 and sh[4] + sh[5] > len(data):  # not SHT_NOBITS
                return "truncated"
    except struct.error:
        return "truncated"
    return None


def _verify_entry(name: str, data: bytes) -> str | None:
    if name.endswith(".so"):
        why = _elf_problem(data)
        return f"{name} is {why}" if why else None
    if name.endswith(".stack") and not data.strip().isdigit():
        return f"{name} is damaged"
    return None


def exported_symbols(so_path) -> set:
    """Names of the defined dynamic symbols of an ELF64 shared object (what dlsym finds)."""
    import struct
    data = Path(so_path).read_bytes()
    if _elf_problem(data):
        return set()
    e_shoff, = struct.unpack_from("<Q", data, 0x28)
    e_shentsize, e_shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, e_shoff + i * e_shentsize) for i in range(e_shnum)]
    out = set()
    for sh in sections:
        sh_type, sh_offset, sh_size, sh_link, sh_entsize = sh[1], sh[4], sh[5], sh[6], sh[9]
        if sh_type != 11 or not sh_entsize:  # SHT_DYNSYM
            continue
        str_off = sections[sh_link][4]
        for k in range(sh_size // sh_entsize):
            st_name, _, _, st_shndx, _, _ = struct.unpack_from("<IBBHQQ", data, sh_offset + k * sh_entsize)
            if st_shndx != 0 and st_name != 0:
                out.add(data[str_off + st_name:data.index(b"\0", str_off + st_name)].decode(errors="replace"))
    return out


def _check_exports(so_path, names, what: str) -> None:
    """Refuse to install a library that lacks an entry symbol (e.g. built from an empty source)."""
    missing = sorted(set(names) - exported_symbols(so_path))
    if missing:
        raise CompileError(f"{what}: the built library lacks {', '.join(missing[:4])}"
                           f"{' ...' if len(missing) > 4 else ''}", log=" ".join(missing))


def _cleanup(*paths) -> None:
    for f in paths:
        try:
            os.unlink(f)
        except OSError:
            pass


def build_runtime(force: bool = False) -> Path:
    """The cached, checked runtime library (built on first use; rebuilt with `force`)."""

    def build(tmp):
        cmd = [compiler(), "-std=c++17", "-O2", "-frounding-math", "-fPIC", "-shared", "-fvisibility=hidden",
               *map(str, RUNTIME_SOURCES), "-o", tmp, "-ldl"]
        _run_compiler(cmd, "the cupyops.simt runtime")
        _check_exports(tmp, RUNTIME_SYMBOLS, "the cupyops.simt runtime")
        return {}

    return _CACHE.entry(f"simt_runtime-{support_digest()[:24]}", (".so",), build, verify=_verify_entry, force=force)


_private: list = []


def _private_copy(path: Path) -> Path:
    """A copy of `path` under a fresh name in a private folder of this process (removed at exit)."""
    import atexit
    import shutil
    if not _private:
        d = tempfile.mkdtemp(prefix="cupyops-simt-load-")
        atexit.register(shutil.rmtree, d, True)
        _private.append(Path(d))
    out = _private[0] / f"{len(list(_private[0].iterdir()))}-{path.name}"
    shutil.copyfile(path, out)
    return out


def load_library(path: Path, rebuild, *, symbol: str, mode: int = 0):
    """``(path, ctypes.CDLL)`` of the checked cached library `path`.  Should it still not load, or
    lack `symbol`, it is rebuilt once (``rebuild()`` returns the new path) and loaded from a private
    copy: dlopen would hand back whatever it already mapped for `path`."""
    import ctypes
    try:
        lib = ctypes.CDLL(str(path), mode=mode)
        getattr(lib, symbol)
        return path, lib
    except (OSError, AttributeError) as e:
        _CACHE.say(f"{path.name} in the cache folder {path.parent} does not load ({e}): rebuilding it")
    path = rebuild()
    try:
        lib = ctypes.CDLL(str(_private_copy(path)), mode=mode)
        getattr(lib, symbol)
    except (OSError, AttributeError) as e:
        raise CompileError(f"the rebuilt library {path} does not load either: {e}", log=str(e)) from e
    return path, lib


# ---------------------------------------------------------------- options
_IGNORED_WITH_VALUE = {
    "-arch", "--gpu-architecture", "-gencode", "--generate-code", "-maxrregcount", "--maxrregcount",
    "-dc", "--relocatable-device-code", "-ccbin", "-rdc", "--dopt", "-dopt", "--split-compile",
    "-split-compile", "--ptxas-options", "-Xptxas", "-time", "--time", "-default-device",
}


def translate_options(options) -> list[str]:
    """Keep -D/-U/-I (and their long NVRTC spellings); ignore GPU-only options."""
    out: list[str] = []
    opts = [str(o) for o in (options or ())]
    i = 0
    while i < len(opts):
        o = opts[i]
        nxt = opts[i + 1] if i + 1 < len(opts) else None
        if o in ("-D", "--define-macro", "-U", "--undefine-macro", "-I", "--include-path"):
            if nxt is not None:
                flag = {"--define-macro": "-D", "--undefine-macro": "-U", "--include-path": "-I"}.get(o, o)
                out.append(flag + nxt)
            i += 2
            continue
        if o.startswith("--define-macro="):
            out.append("-D" + o.split("=", 1)[1])
        elif o.startswith("--undefine-macro="):
            out.append("-U" + o.split("=", 1)[1])
        elif o.startswith("--include-path="):
            out.append("-I" + o.split("=", 1)[1])
        elif o.startswith(("-D", "-U", "-I")) and len(o) > 2:
            out.append(o)
        elif o in ("-std=c++20", "--std=c++20"):
            out.append("-std=c++20")
        elif o in _IGNORED_WITH_VALUE and nxt is not None and not nxt.startswith("-"):
            i += 2
            continue
        # everything else (-arch=..., --use_fast_math, -lineinfo, --std=c++17, ...) is ignored
        i += 1
    return out + fp_contract_flags(opts)


def fmad_option(options) -> bool:
    """The module's --fmad (NVRTC's default: true; --use_fast_math implies it; the last one wins)."""
    on = True
    for o in options or ():
        o = str(o)
        if o in ("--fmad=false", "-fmad=false"):
            on = False
        elif o in ("--fmad=true", "-fmad=true", "--use_fast_math", "-use_fast_math"):
            on = True
    return on


_cpu_fma: list = []


def cpu_has_fma() -> bool:
    """Whether this CPU (and OS) can run FMA3 instructions (x86-64 Linux: /proc/cpuinfo)."""
    if not _cpu_fma:
        flags = set()
        try:
            with open("/proc/cpuinfo") as f:
                for ln in f:
                    if ln.startswith("flags"):
                        flags = set(ln.split(":", 1)[1].split())
                        break
        except OSError:
            pass
        _cpu_fma.append({"fma", "avx"} <= flags and os.environ.get("CUPYOPS_SIMT_FMA", "1") != "0")
    return _cpu_fma[0]


def fp_contract_flags(options) -> list[str]:
    """FMA contraction as the module's --fmad asks: NVRTC contracts a*b+c (float32 and float64)
    into one fma by default, so the product is not rounded first.  g++ contracts the same way under
    -ffp-contract=fast, but only for a target with FMA instructions (-mfma; 128-bit vectors, as
    without it).  A CPU without FMA rounds twice (README)."""
    if not fmad_option(options):
        return ["-ffp-contract=off"]
    if cpu_has_fma():
        return ["-mfma", "-mprefer-vector-width=128", "-ffp-contract=fast"]
    return ["-ffp-contract=fast"]


# ---------------------------------------------------------------- source preprocessing
def _blank_comments_and_strings(src: str) -> str:
    """Same length as src, with comments, string and char literals replaced by spaces
    (newlines kept), so structural regexes see only code."""
    out = list(src)
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        if c == "/" and i + 1 < n and src[i + 1] == "/":
            j = src.find("\n", i)
            j = n if j < 0 else j
            for k in range(i, j):
                out[k] = " "
            i = j
        elif c == "/" and i + 1 < n and src[i + 1] == "*":
            j = src.find("*/", i + 2)
            j = n if j < 0 else j + 2
            for k in range(i, j):
                if out[k] != "\n":
                    out[k] = " "
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and src[j] != c and src[j] != "\n":
                j += 2 if src[j] == "\\" else 1
            j = min(j + 1, n)
            for k in range(i + 1, j - 1):
                out[k] = " "
            i = j
        else:
            i += 1
    return "".join(out)


_BRACE_NS = re.compile(r'(?:\bnamespace(?:\s+[\w:]+)?|\bextern\s*"C"|\bextern\s*"C\+\+")\s*$')


def _scope_map(code: str):
    """For each '{' position: whether it opens a namespace/extern-"C" scope, and the list
    of (pos, depth_is_function) for queries.  Returns a function pos -> in_function_body."""
    events = []  # (pos, +1/-1, is_ns)
    stack = []
    for m in re.finditer(r"[{}]", code):
        if m.group() == "{":
            head = code[max(0, m.start() - 200):m.start()]
            # for extern "C" the quotes are blanked: match on the blanked spelling too
            is_ns = bool(_BRACE_NS.search(head)) or bool(re.search(r'\bextern\s*"\s*"\s*$', head)) \
                or bool(re.search(r'\bextern\s*"C(\+\+)?"\s*$', head))
            stack.append(is_ns)
            events.append((m.start(), tuple(stack)))
        else:
            if stack:
                stack.pop()
            events.append((m.start(), tuple(stack)))
    positions = [e[0] for e in events]

    import bisect

    def in_function(pos: int) -> bool:
        k = bisect.bisect_left(positions, pos) - 1
        if k < 0:
            return False
        st = events[k][1]
        return any(not ns for ns in st)

    return in_function


_PARENS = r"\((?:[^()]|\((?:[^()]|\([^()]*\))*\))*\)"  # up to 3 levels of nesting
_EXTERN_SHARED = re.compile(
    r"\bextern\b(?P<decl>(?:[^;{}()]|" + _PARENS + r")*?\b__shared__\b(?:[^;{}()]|" + _PARENS + r")*?)"
    r"\b(?P<name>[A-Za-z_]\w*)\s*\[\s*\]\s*;")


def _balanced(code: str, i: int) -> int:
    """Index just past the parenthesis group opening at code[i] == '('."""
    depth = 0
    for j in range(i, len(code)):
        if code[j] == "(":
            depth += 1
        elif code[j] == ")":
            depth -= 1
            if depth == 0:
                return j + 1
    return len(code)


_SHARED_INIT = re.compile(r"\b__shared__\b(?!\s*(?:struct|union|class)\b)((?:[^;{}()=]|" + _PARENS + r")*?)(=|\{)")


_checked_sources: set = set()


def check_source(src: str, name: str = "kernel") -> None:
    """Refuse what NVRTC refuses and g++ would accept."""
    key = hashlib.sha256(src.encode()).hexdigest()
    if key in _checked_sources:
        return
    _check_source(src, name)
    _checked_sources.add(key)


def _check_source(src: str, name: str) -> None:
    code = _blank_directives(_blank_comments_and_strings(src))
    for m in _SHARED_INIT.finditer(code):
        k = max(code.rfind(";", 0, m.start()), code.rfind("{", 0, m.start()), code.rfind("}", 0, m.start()))
        if re.search(r"\bextern\b", code[k + 1:m.start()]):
            continue
        line = code.count("\n", 0, m.start()) + 1
        raise CompileError(f"{name}:{line}: a __shared__ variable cannot have an initializer (NVRTC: "
                           f"\"initializer not allowed for __shared__ variable\")", log=src.splitlines()[line - 1])
    if re.search(r"\bstd\s*::", code) and not re.search(r"^\s*#\s*include\s*<", src, re.M):
        m = re.search(r"\bstd\s*::\s*\w+", code)
        line = code.count("\n", 0, m.start()) + 1
        raise CompileError(f"{name}:{line}: {m.group(0)!r} is used without any #include: NVRTC has no implicit "
                           f"standard library (namespace \"std\" has no member)", log=src.splitlines()[line - 1])


_BOUNDS_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(?P<name>[A-Za-z_]\w*)(?P<params>\([^()]*\))?(?P<body>.*)$")


def _bounds_macros(src: str) -> dict:
    """``#define NAME ... __launch_bounds__(...) ...`` (object- or function-like) of the source,
    also through other such macros: name -> (parameter names or None, body).  Continuation lines
    are joined; a body that uses the ``#``/``##`` operators is left alone."""
    defs = {}
    lines = _blank_comments_and_strings(src).split("\n")
    orig = src.split("\n")
    i = 0
    while i < len(lines):
        text, k = lines[i], i
        while text.rstrip().endswith("\\") and k + 1 < len(lines):
            k += 1
            text = text.rstrip()[:-1] + " " + lines[k]
        m = _BOUNDS_DEFINE.match(text)
        if m and "#" not in m.group("body"):
            # the body from the original text (string literals are blanked in `text`)
            full = " ".join(ln.rstrip().rstrip("\\") for ln in orig[i:k + 1])
            fm = _BOUNDS_DEFINE.match(full)
            params = None
            if m.group("params") is not None:
                params = [x.strip() for x in m.group("params")[1:-1].split(",") if x.strip()]
            defs[m.group("name")] = (params, (fm or m).group("body").strip())
        i = k + 1
    out = {n: d for n, d in defs.items() if "__launch_bounds__" in d[1] and n != "__launch_bounds__"}
    grew = True
    while grew:
        grew = False
        for n, d in defs.items():
            if n not in out and n != "__launch_bounds__" and any(re.search(r"\b" + re.escape(o) + r"\b", d[1])
                                                                 for o in out):
                out[n] = d
                grew = True
    return out


def _expand_bounds_macros(src: str) -> str:
    """Expand, in code (not in directives), the uses of macros that carry __launch_bounds__, so
    that the bounds below see them (up to 4 levels of such macros).  Line numbers are kept."""
    for _ in range(8):
        macros = _bounds_macros(src)
        if not macros:
            return src
        code = _blank_directives(_blank_comments_and_strings(src))
        edits = []
        pat = re.compile(r"\b(" + "|".join(map(re.escape, macros)) + r")\b")
        for m in pat.finditer(code):
            params, body = macros[m.group(1)]
            end = m.end()
            if params is not None:
                j = end
                while j < len(code) and code[j] in " \t\n":
                    j += 1
                if j >= len(code) or code[j] != "(":
                    continue
                end = _balanced(code, j)
                args = [a.strip() for a in _split_top(src[j + 1:end - 1])]
                rep = body
                named = [q for q in params if q != "..."]
                subst = {q: (args[n] if n < len(args) else "") for n, q in enumerate(named)}
                if params and params[-1] == "...":
                    subst["__VA_ARGS__"] = ", ".join(args[len(named):])
                if subst:
                    rep = re.sub(r"\b(" + "|".join(map(re.escape, subst)) + r")\b", lambda q: subst[q.group(1)], rep)
            else:
                rep = body
            nl = src.count("\n", m.start(), end)
            edits.append((m.start(), end, " " + rep + " " + "\n" * nl))
        if not edits:
            return src
        for a, b, text in sorted(edits, reverse=True):
            src = src[:a] + text + src[b:]
    return src


_DECL_SKIP = {"__attribute__", "__align__", "alignas", "__declspec", "__launch_bounds__", "__maxnreg__",
              "__cluster_dims__"}


def _declarator_name(code: str, start: int) -> tuple[str | None, int]:
    """The function name of the declaration going on at `start` (the identifier before the first
    parameter list at parenthesis depth 0, skipping attribute groups) and the position of that '('."""
    j = start
    while j < len(code):
        c = code[j]
        if c in "{;":
            return None, -1
        if c == "(":
            m = re.search(r"([A-Za-z_]\w*)\s*$", code[start:j])
            if m and m.group(1) not in _DECL_SKIP:
                return m.group(1), j
            j = _balanced(code, j)
            continue
        j += 1
    return None, -1


def _launch_bounds(src: str) -> str:
    """``__launch_bounds__(N, ...)`` of a kernel -> a check at the top of its body: on the
    definition itself, through a macro, or on an earlier declaration of the kernel."""
    if "__launch_bounds__" not in src:
        return src
    src = _expand_bounds_macros(src)
    code = _blank_directives(_blank_comments_and_strings(src))
    edits = []
    declared = {}   # kernel name -> bound arguments, from declarations without a body
    bodies = set()  # positions of bodies that already get a check
    for m in re.finditer(r"\b__launch_bounds__\s*\(", code):
        open_ = m.end() - 1
        close = _balanced(code, open_)
        args = src[open_ + 1:close - 1].replace("\n", " ")
        # the body: the first '{' (or ';' for a declaration) at parenthesis depth 0 after the name
        depth, j = 0, close
        while j < len(code):
            c = code[j]
            if c == "(":
                depth += 1
            elif c == ")":
                depth -= 1
            elif depth == 0 and c in "{;":
                break
            j += 1
        blank = "".join(ch if ch == "\n" else " " for ch in src[m.start():close])
        edits.append((m.start(), close, blank))
        if j < len(code) and code[j] == "{":
            edits.append((j + 1, j + 1, f" __simt_launch_bounds({args}); "))
            bodies.add(j)
        elif j < len(code):
            # a declaration: its kernel's definition (later, without bounds of its own) gets the check
            k = max(code.rfind(";", 0, m.start()), code.rfind("{", 0, m.start()), code.rfind("}", 0, m.start()))
            if re.search(r"\btemplate\b", code[k + 1:m.start()]):
                continue
            name, _ = _declarator_name(code, k + 1)
            if name:
                declared[name] = (args, j)
    for name, (args, after) in declared.items():
        for d in re.finditer(r"\b" + re.escape(name) + r"\s*\(", code[after:]):
            pos = after + d.start()
            k = max(code.rfind(";", 0, pos), code.rfind("{", 0, pos), code.rfind("}", 0, pos))
            if not re.search(r"\b__global__\b", code[k + 1:pos]):
                continue
            end = _balanced(code, after + d.end() - 1)
            n = end
            while n < len(code) and code[n] in " \t\n":
                n += 1
            if n < len(code) and code[n] == "{" and n not in bodies:
                edits.append((n + 1, n + 1, f" __simt_launch_bounds({args}); "))
                bodies.add(n)
    for a, b, text in sorted(edits, reverse=True):
        src = src[:a] + text + src[b:]
    return src


_SUBSCRIPTS = r"(?:\s*(?:\[(?:[^\[\];]|\[[^\[\];]*\])*\]|\.\s*\w+|->\s*\w+))*"


def _maybe_stored(code: str, name: str, decl_start: int, decl_end: int, is_array: bool) -> bool:
    """Whether the source may store to the variable `name` (outside its own declaration): an
    assignment or increment of it (through subscripts and members), its address taken, or (an
    array) its name used other than subscripted, which may hand a pointer to a store."""
    n = re.escape(name)
    pats = [r"\b" + n + r"\b" + _SUBSCRIPTS + r"\s*(?:(?:[-+*/%&|^]|<<|>>)?=(?!=)|\+\+|--)",
            r"(?:\+\+|--)\s*\b" + n + r"\b"]
    if is_array:
        pats.append(r"\b" + n + r"\b(?!\s*\[)")
    for pat in pats:
        for m in re.finditer(pat, code):
            if not (decl_start <= m.start() < decl_end):
                return True
    for m in re.finditer(r"&\s*\b" + n + r"\b", code):   # the address taken (not a binary &, &&)
        before = code[:m.start()].rstrip()
        if not (decl_start <= m.start() < decl_end) and not (before and (before[-1].isalnum() or before[-1] in "_)]&")):
            return True
    return False


def _const_constant(src: str) -> str:
    """``__constant__ T x = ...;`` -> ``const __constant__ T x = ...;`` where the source never
    stores to x (g++ may then fold its values, as NVRTC does).  A store to __constant__ data
    compiles (NVRTC warns and compiles that kernel to ``trap;``) and, as the data lives in a
    read-only section, fails the launch that executes it (ReadOnlyWriteError)."""
    code = _blank_directives(_blank_comments_and_strings(src))
    edits = []
    for m in re.finditer(r"\b__constant__\b", code):
        k = max(code.rfind(";", 0, m.start()), code.rfind("{", 0, m.start()), code.rfind("}", 0, m.start()))
        end = code.find(";", m.end())
        if end < 0:
            continue
        decl = code[k + 1:end]
        if "=" not in decl or "(" in decl.split("=", 1)[0] or re.search(r"\bconst\b|\bextern\b", decl):
            continue
        head = decl.split("=", 1)[0]
        nm = re.search(r"([A-Za-z_]\w*)\s*((?:\[[^\]]*\]\s*)*)$", head)
        if nm and _maybe_stored(code, nm.group(1), k + 1, end, bool(nm.group(2))):
            continue
        edits.append(m.start())
    for pos in reversed(edits):
        src = src[:pos] + "const " + src[pos:]
    return src


def preprocess(src: str) -> str:
    """Rewrite the few constructs that have no direct C++ equivalent; keeps line numbers."""
    src = _launch_bounds(src)
    src = _const_constant(src)
    # 'static __shared__' -> '__shared__' (our __shared__ already means static storage)
    src = re.sub(r"\bstatic(\s+(?:volatile\s+|__align__\s*\([^()]*\)\s+)*)__shared__\b", r"\1__shared__", src)
    src = re.sub(r"\b__shared__(\s+(?:volatile\s+|__align__\s*\([^()]*\)\s+)*)static\b", r"__shared__\1", src)
    code = _blank_comments_and_strings(src)
    in_function = _scope_map(code)
    pieces = []
    last = 0
    for m in _EXTERN_SHARED.finditer(code):
        decl = src[m.start("decl"):m.end("decl")]
        name = m.group("name")
        typ = re.sub(r"\b__shared__\b", " ", decl)
        typ = re.sub(r"\b(?:__align__|alignas|__attribute__)\s*" + _PARENS, " ", typ)
        typ = " ".join(typ.split())
        if not typ:
            continue
        nl = src.count("\n", m.start(), m.end())
        if in_function(m.start()):
            rep = f"{typ} *const {name} = reinterpret_cast<{typ} *>(__simt_dyn_shared());"
        else:
            line_end = src.count("\n", 0, m.end()) + 1
            rep = (f"\n#define {name} (reinterpret_cast<{typ} *>(__simt_dyn_shared()))\n"
                   f"#line {line_end}\n")
            nl = 0
        pieces.append(src[last:m.start()])
        pieces.append(rep + "\n" * max(nl, 0))
        last = m.end()
    pieces.append(src[last:])
    return "".join(pieces)


_GLOBAL_DECL = re.compile(
    r"\b__global__\b(?P<decl>(?:[^;{}()]|\([^()]*\))*?)"
    r"\b(?!__launch_bounds__\b|__align__\b|__attribute__\b|__declspec\b)(?P<name>[A-Za-z_]\w*)\s*\(")


def _blank_directives(code: str) -> str:
    """Blank preprocessor directive lines (with their continuations), keeping the length."""
    out = []
    cont = False
    for line in code.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        if cont or body.lstrip().startswith("#"):
            cont = body.endswith("\\")
            out.append(" " * len(body) + line[len(body):])
        else:
            out.append(line)
    return "".join(out)


def extern_c_kernels(src: str) -> list[str]:
    """Names of the extern "C" __global__ functions of a source (declared or defined)."""
    if "__launch_bounds__" in src:
        src = _expand_bounds_macros(src)
    code = _blank_directives(_blank_comments_and_strings(src))
    names = []
    # extern "C" { ... } blocks (the quotes' contents are blanked: look at the original)
    blocks = []
    for m in re.finditer(r'\bextern\s*"C"\s*\{', src):
        if code[m.start():m.start() + 6] != "extern":
            continue
        depth, j = 0, m.end() - 1
        while j < len(code):
            if code[j] == "{":
                depth += 1
            elif code[j] == "}":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        blocks.append((m.end(), j))
    for m in _GLOBAL_DECL.finditer(code):
        name = m.group("name")
        if name in ("__launch_bounds__", "__align__"):
            continue
        # the declaration's start: after the previous ; { or }
        k = max(code.rfind(";", 0, m.start()), code.rfind("{", 0, m.start()), code.rfind("}", 0, m.start()))
        head = src[k + 1:m.start()]
        head_code = code[k + 1:m.start()]
        if re.search(r"\btemplate\b", head_code):
            continue
        is_c = bool(re.search(r'\bextern\s*"C"', head)) or any(a <= m.start() < b for a, b in blocks)
        if is_c and name not in names:
            names.append(name)
    return names


def generated_entries(entries: list[str]) -> str:
    lines = ["", "#line 1 \"<cupyops.simt generated>\""]
    attr = 'extern "C" __attribute__((visibility("default"), no_sanitize_address, no_sanitize_thread))'
    for i, expr in enumerate(entries):
        lines.append(f"{attr} void __simt_entry_{i}(void **a) {{ __simt_call(&{expr}, a); }}")
        lines.append(f"{attr} int __simt_sig_{i}(unsigned long long *o, int cap) "
                     f"{{ return __simt_signature(&{expr}, o, cap); }}")
        lines.append(f"{attr} void *__simt_kaddr_{i}(void) {{ return reinterpret_cast<void *>(&{expr}); }}")
    lines.append("static thread_local char __simt_tls_anchor_v;")
    lines.append(f"{attr} void *__simt_tls_anchor(void) {{ return &__simt_tls_anchor_v; }}")
    return "\n".join(lines) + "\n"


_ALLOWED_UNDEF = re.compile(
    r"^(?:__tsan_\w+|__ubsan_\w+|__asan_\w+|__simt_\w+|_GLOBAL_OFFSET_TABLE_|__tls_get_addr|__cxa_\w+|_ITM_\w+|"
    r"__gmon_start__|_Jv_RegisterClasses|__stack_chk_fail|__dso_handle|_Unwind_\w+|__gxx_personality_v0|"
    r"memcpy|memmove|memset|memcmp|printf|puts|putchar|malloc|free|__assert_fail|__printf_chk|"
    r"_Z\w*|"  # C++ symbols: inline functions of the headers
    r"__[a-z]+?(?:qi|hi|si|di|ti|sf|df|xf|tf|hf|bf)(?:qi|hi|si|di|ti|sf|df|xf|tf|hf|bf)?[0-9]?|"  # libgcc helpers
    r"(?:__)?(?:acos|asin|atan|atan2|cos|sin|tan|cosh|sinh|tanh|acosh|asinh|atanh|exp|exp2|exp10|expm1|frexp|"
    r"ldexp|log|log10|log1p|log2|logb|ilogb|modf|scalbn|scalbln|pow|sqrt|cbrt|hypot|erf|erfc|lgamma|tgamma|"
    r"ceil|floor|fmod|trunc|round|lround|llround|rint|lrint|llrint|nearbyint|remainder|remquo|copysign|nan|"
    r"nextafter|fdim|fmax|fmin|fma|fabs|sincos|j0|j1|jn|y0|y1|yn|isnan|isinf|finite|signbit|fpclassify)"
    r"(?:f|l|f16|f32|f64)?(?:_finite)?)$")


def undefined_symbols(so_path) -> list[str]:
    """Names of the undefined global symbols of an ELF64 object."""
    import struct
    data = Path(so_path).read_bytes()
    if data[:4] != b"\x7fELF" or data[4] != 2:
        return []
    e_shoff, = struct.unpack_from("<Q", data, 0x28)
    e_shentsize, e_shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, e_shoff + i * e_shentsize) for i in range(e_shnum)]
    out = []
    for sh in sections:
        sh_type, sh_offset, sh_size, sh_link, sh_entsize = sh[1], sh[4], sh[5], sh[6], sh[9]
        if sh_type != 2 or not sh_entsize:
            continue
        str_off = sections[sh_link][4]
        for k in range(sh_size // sh_entsize):
            st_name, st_info, _, st_shndx, _, _ = struct.unpack_from("<IBBHQQ", data, sh_offset + k * sh_entsize)
            if st_shndx != 0 or st_name == 0 or (st_info >> 4) not in (1, 2):
                continue
            end = data.index(b"\0", str_off + st_name)
            out.append(data[str_off + st_name:end].decode(errors="replace"))
    return out


_WEAK_OK = ("_ITM_", "__gmon_start__", "_Jv_", "__cxa_", "_GLOBAL_OFFSET_TABLE_", "__tls_get_addr", "__dso_handle",
            "_Z", "__stack_chk_fail")


def _resolvable(sym: str) -> bool:
    """Whether the dynamic loader will find `sym` (libc, libm, libstdc++ or the simt runtime)."""
    import ctypes
    if sym.startswith(_WEAK_OK) or sym.startswith(("__tsan_", "__ubsan_", "__asan_", "__simt_")):
        return True
    for lib in _loaded_libs():
        try:
            getattr(lib, sym)
            return True
        except AttributeError:
            continue
    return False


_libs: list = []


def _loaded_libs():
    import ctypes
    import ctypes.util
    if not _libs:
        _libs.append(ctypes.CDLL(None))
        for n in ("m", "stdc++", "gcc_s"):
            path = ctypes.util.find_library(n)
            if path:
                try:
                    _libs.append(ctypes.CDLL(path))
                except OSError:
                    pass
    return _libs


def stack_need(so_path) -> int:
    """Largest frame (bytes) of the module's functions, from -fstack-usage (0 if unknown)."""
    p = Path(so_path).with_suffix(".stack")
    try:
        return int(p.read_text().strip() or 0)
    except (OSError, ValueError):
        return 0


def precompiled_header(flags: list[str]) -> Path:
    """The header every kernel module includes (simt_cuda.h), precompiled by g++ for exactly
    `flags` and cached: a module is one kernel (cupyops.core.modules), so the header's parse was
    about half of a small module's compile.  The returned stub includes simt_cuda.h; g++ takes
    the ``.gch`` beside it when its flags match and reads the stub (the same text) otherwise.
    Falls back to simt_cuda.h itself when g++ makes no precompiled header."""
    h = hashlib.sha256("\0".join([compiler(), *flags, support_digest()]).encode())
    stub = f'#include "{INCLUDE_DIR / "simt_cuda.h"}"\n'

    def build(tmp):
        Path(tmp).write_text(stub)
        with tempfile.TemporaryDirectory(prefix="cupyops-simt-pch-") as work:  # -fstack-usage's .su
            gch = os.path.join(work, "simt_cuda.h.gch")
            _run_compiler([compiler(), *flags, "-x", "c++-header", tmp, "-o", gch],
                          "the precompiled simt_cuda.h")
            return {".h.gch": Path(gch).read_bytes()}

    try:
        return _CACHE.entry(f"simt_cuda-{h.hexdigest()[:24]}", (".h", ".h.gch"), build)
    except (CompileError, OSError):       # no PCH from this compiler: the plain header
        return INCLUDE_DIR / "simt_cuda.h"


def build_module(source: str, options, entries: list[str], name: str = "kernel", force: bool = False) -> Path:
    """Compile a kernel source (already assembled) into a cached, checked shared object (rebuilt
    with `force`)."""
    check_source(source, name)
    opts = translate_options(options)
    full = f'#line 1 "{name}"\n' + preprocess(source) + generated_entries(entries)
    h = hashlib.sha256()
    h.update(full.encode())
    flags = instrumentation_flags()
    h.update("\0".join(opts + list(flags)).encode())
    h.update(support_digest().encode())
    digest = h.hexdigest()[:32]

    def build(tmp):
        base = tmp[:-3]  # a unique mod-<digest>.so.<token>.tmp
        src_path, obj, su = base + ".cpp", base + ".o", base + ".su"
        try:
            Path(src_path).write_text(full)
            header = precompiled_header([*KERNEL_FLAGS, *flags, f"-I{INCLUDE_DIR}", *opts])
            cmd = [compiler(), *KERNEL_FLAGS, *flags, f"-I{INCLUDE_DIR}", "-include",
                   str(header), *opts, "-x", "c++", "-c", src_path, "-o", obj]
            _run_compiler(cmd, f"kernel module {name!r}")
            frame = 0
            try:
                for ln in Path(su).read_text().splitlines():
                    parts = ln.split("\t")
                    if len(parts) >= 2 and parts[1].strip().isdigit():
                        frame = max(frame, int(parts[1]))
            except OSError:
                pass
            undef = undefined_symbols(obj)
            bad = sorted({n for n in undef if not _ALLOWED_UNDEF.match(n)})
            if bad:
                raise CompileError(f"kernel module {name!r} calls host function(s) {', '.join(bad)}, which device "
                                   f"code cannot call (NVRTC: undefined in device code)", log=" ".join(bad))
            missing = sorted({n for n in undef if not _resolvable(n)})
            if missing:
                raise CompileError(f"kernel module {name!r} uses {', '.join(missing)}: unsupported CUDA built-in(s), "
                                   f"not emulated by cupyops.simt", log=" ".join(missing))
            # link without -fsanitize: the callbacks resolve against the runtime at load time
            _run_compiler([compiler(), "-shared", "-fPIC", obj, "-o", tmp], f"kernel module {name!r} (link)")
            _check_exports(tmp, ["__simt_tls_anchor"] + [f"__simt_{k}_{i}" for i in range(len(entries))
                                                         for k in ("entry", "sig", "kaddr")],
                           f"kernel module {name!r}")
            return {".stack": str(frame).encode()}
        finally:
            _cleanup(src_path, obj, su)

    return _CACHE.entry(f"mod-{digest}", (".so", ".stack"), build, verify=_verify_entry, force=force)


def source_location(so_path, offset: int, name: str = "kernel.cu") -> str | None:
    """'file:line (function)' of a code offset in a compiled module (needs binutils' addr2line)."""
    try:
        r = subprocess.run(["addr2line", "-C", "-f", "-i", "-e", str(so_path), hex(offset)],
                           capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = r.stdout.strip().splitlines()
    if r.returncode != 0 or len(lines) < 2 or lines[1].startswith("??"):
        return None
    # innermost frame first; with -i, inlined callers follow
    # the module's own (temporary, removed) source file, should a location name it
    src = re.compile(r"\S*/" + re.escape(Path(so_path).stem) + r"[^\s:/]*\.cpp")
    frames = []
    for i in range(0, len(lines) - 1, 2):
        loc = src.sub(name, re.sub(r"\s*\(discriminator \d+\)", "", lines[i + 1]))
        frames.append(f"{loc} ({lines[i]})")
    return " <- ".join(frames[:4])


def tls_symbols(so_path) -> list[tuple[str, int]]:
    """(name, size) of the thread-local (= static __shared__) symbols of an ELF64 shared object."""
    import struct
    data = Path(so_path).read_bytes()
    if data[:4] != b"\x7fELF" or data[4] != 2:
        return []
    e_shoff, = struct.unpack_from("<Q", data, 0x28)
    e_shentsize, e_shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, e_shoff + i * e_shentsize) for i in range(e_shnum)]
    out = []
    for sh in sections:
        sh_type, sh_offset, sh_size, sh_link, sh_entsize = sh[1], sh[4], sh[5], sh[6], sh[9]
        if sh_type != 2 or not sh_entsize:  # SHT_SYMTAB
            continue
        str_off = sections[sh_link][4]
        for k in range(sh_size // sh_entsize):
            st_name, st_info, _, _, _, st_size = struct.unpack_from("<IBBHQQ", data, sh_offset + k * sh_entsize)
            if st_info & 0xF != 6:  # STT_TLS
                continue
            end = data.index(b"\0", str_off + st_name)
            out.append((data[str_off + st_name:end].decode(errors="replace"), st_size))
    return out


def function_prefix(mangled: str) -> str:
    """Mangled-name prefix of the static locals of a function ('_ZZ' <encoding> 'E')."""
    enc = mangled[2:] if mangled.startswith("_Z") else f"{len(mangled)}{mangled}"
    return "_ZZ" + enc + "E"


def _split_top(params: str) -> list[str]:
    out, depth, cur = [], 0, []
    for c in params:
        if c in "(<[":
            depth += 1
        elif c in ")>]":
            depth -= 1
        if c == "," and depth == 0:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(c)
    if "".join(cur).strip():
        out.append("".join(cur))
    return out


def const_restrict_params(src: str, kernel: str) -> list[bool]:
    """For the __global__ function named by `kernel` (a name expression is cut at '<'): which
    parameters are ``const T* __restrict__`` (loaded through the non-coherent path on a GPU).
    Empty if the declaration cannot be found."""
    base = kernel.split("<", 1)[0].strip().split("::")[-1]
    key = (hashlib.sha256(src.encode()).hexdigest(), base)
    if key in _restrict_memo:
        return _restrict_memo[key]
    code = _blanked_memo.get(key[0])
    if code is None:
        code = _blanked_memo[key[0]] = _blank_directives(_blank_comments_and_strings(src))
    res = _restrict_memo[key] = _const_restrict_scan(code, base)
    return res


_restrict_memo: dict = {}
_blanked_memo: dict = {}


def _const_restrict_scan(code: str, base: str) -> list[bool]:
    for m in re.finditer(r"\b__global__\b", code):
        k = re.compile(r"\b" + re.escape(base) + r"\s*\(").search(code, m.end())
        if not k or re.search(r"[;{}]", code[m.end():k.start()]):
            continue
        close = _balanced(code, k.end() - 1)
        params = _split_top(code[k.end():close - 1])
        res = []
        for prm in params:
            star = prm.rfind("*")
            res.append(star >= 0 and bool(re.search(r"\b__restrict(?:__)?\b", prm[star:]))
                       and bool(re.search(r"\bconst\b", prm[:star])))
        return res
    return []


def ftz_option(options) -> bool:
    """Whether the options ask for -ftz=true (as CuPy always adds)."""
    on = False
    for o in options or ():
        o = str(o)
        if o in ("-ftz=true", "--ftz=true", "-use_fast_math", "--use_fast_math"):
            on = True
        elif o in ("-ftz=false", "--ftz=false"):
            on = False
    return on
