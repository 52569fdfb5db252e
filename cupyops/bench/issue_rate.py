"""Issue-rate model of the kernels: SASS instructions per input element, per pipe (issue 15).

The traffic model (:mod:`cupyops.bench.traffic`) counts sectors; it cannot see a kernel that is
limited by the instructions it issues per element rather than by memory. This model reads the
kernels' real machine code:

1. every kernel instantiation (family x dtype x name expression, :mod:`cupyops.core.modules`) is
   compiled with NVRTC to a cubin for ``sm_90`` (and ``sm_80``) with the CuPy path's options
   (:func:`cupyops.tools.nvrtc.cupy_options`);
2. the cubin is disassembled with ``cuobjdump -sass`` from the pip packages
   ``nvidia-cuda-cuobjdump`` + ``nvidia-cuda-nvdisasm`` (no driver, no GPU);
3. in each entry function, **the path that reads the input** is found:

   * the steady-state loop: a backward branch (``BRA`` to an earlier address) whose body
     ``[target, branch]`` holds global loads of the input (``LDG`` that are not ``.STRONG`` /
     volatile: those are the look-back's status words). Among several such loops (vector widths,
     unrolled main loop and remainder, modes) the one that loads the most input bytes per
     iteration, then with the widest load, is the steady state; loops tied on both are all
     kept and the worst of them is reported;
   * where no loop reads the input (``nonzero_tiles``: a tile of ITEMS loads per thread), the
     whole function, entry to ``EXIT``;

   and through that region the one path (branches taken or not) that reads the most input bytes
   and, among those, issues the fewest instructions: the common case (one dimension, no odometer
   carry, no NaN, no guard). Back edges of inner loops are not followed (such a loop counts
   once). Predicated-off instructions count: they issue.
4. the instructions of that path are counted per input element (``elements`` = input bytes
   loaded on the path / itemsize) and per pipe, each opcode weighted by its cc 9.0 throughput
   (:data:`PIPES`, :data:`OPCODE_PIPE`); the busiest pipe gives SM clocks per element, and
   ``132 SMs x 1.98 GHz`` turn that into bytes per second and a fraction of H100 copy
   bandwidth (:data:`cupyops.bench.traffic.H100_BANDWIDTH`).

Run it: ``python -m cupyops.bench.issue_rate [--arch 90 --arch 80] [--table docs/kernels.md]
[--json PATH]``; the benchmark's ``--issue-rate`` flag puts the same figures into its JSON.
Needs the ``test`` extra (cuda-bindings, nvidia-cuda-nvrtc, nvidia-cuda-cuobjdump,
nvidia-cuda-nvdisasm). Disassemblies are cached on disk keyed by everything that goes into them.
"""
from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from cupyops.bench.traffic import H100_BANDWIDTH

__all__ = [
    "H100_SMS", "H100_CLOCK_HZ", "ISSUE_PER_SM", "PIPES", "OPCODE_PIPE", "Instr", "LoopModel",
    "available", "find_cuobjdump", "disassemble", "parse_sass", "pipe_of",
    "model_function", "model_source", "instantiation_report", "render_markdown",
    "update_doc", "main",
]

# --------------------------------------------------------------------------------------------
# The machine
# --------------------------------------------------------------------------------------------

H100_SMS = 132                  # H100 SXM5
H100_CLOCK_HZ = 1.98e9          # boost clock
ISSUE_PER_SM = 128              # 4 schedulers x 1 warp-instruction (32 lanes) per clock

#: Pipe -> results per clock per SM on cc 9.0. Source: CUDA C++ Programming Guide, "Arithmetic
#: Instructions", table "Throughput of Native Arithmetic Instructions (Number of Results per
#: Clock Cycle per Multiprocessor)", column 9.0: 32-bit FP add/mul/fma 128; 64-bit FP 64;
#: 32-bit integer add/extended add/subtract 64, multiply/multiply-add 64, shift 64,
#: compare/min/max 64, bitwise and/or/xor 64; warp shuffle 32; warp reduce 16; 32-bit FP
#: reciprocal/rsqrt/log2/exp2/sin/cos 16; population count, count of leading zeros 16; type
#: conversions 16 (8/16-bit -> 32-bit integer 64). Loads, stores, atomics and shuffles share the
#: LSU/MIO path ("lsu", Nsight Compute's pipe of LDG/STG/LDS/STS/ATOM/SHFL/S2R) at 32 per clock.
#: Branches and convergence (CBU) are taken at 64; the uniform datapath ("uniform") and
#: "issue" (every instruction, 4 schedulers x 32 lanes) at 128.
PIPES: dict = {
    "issue": 128,
    "alu": 64,        # IADD3, LOP3, ISETP, SEL, SHF, PRMT, LEA, IMNMX/VIMNMX, FSETP, FMNMX, MOV, VOTE
    "fma": 128,       # FFMA/FADD/FMUL, HFMA2/HADD2 (2 fp16 results = 1 instruction at 128)
    "fma64": 64,      # IMAD, IMUL, IDP (32-bit integer multiply-add, 64/clk on the FMA datapath)
    "fp64": 64,       # DADD, DMUL, DFMA, DSETP, DMNMX
    "xu": 16,         # MUFU, POPC, FLO, BREV, conversions I2F/F2I/F2F/I2I, SIMD video, REDUX
    "lsu": 32,        # LDG, STG, LD, ST, LDS, STS, LDL, STL, ATOM*, RED, SHFL, S2R, MATCH
    "cbu": 64,        # BRA, BSSY, BSYNC, WARPSYNC, EXIT, RET, CALL, BAR
    "uniform": 128,   # U* instructions (one per warp, uniform datapath)
}

#: Busy pipes sharing hardware: "fma64" instructions run on the FMA datapath at half rate, so
#: the FMA datapath's time is fma + fma64 (:func:`pipe_clocks` adds it as "fma_datapath").
_SHARED = {"fma_datapath": ("fma", "fma64")}

#: Opcode (the part before the first dot) -> pipe. Anything unknown goes to "alu" and is listed
#: in the model's ``unknown_opcodes``.
OPCODE_PIPE: dict = {}
for _pipe, _ops in {
    "alu": "IADD3 IADD IADD32I VIADD LOP3 LOP LOP32I ISETP ICMP SEL SHF SHL SHR PRMT LEA ISCADD "
           "IMNMX VIMNMX VIMNMX3 IABS BMSK SGXT FSETP FSET FSEL FMNMX HSETP2 HSET2 HMNMX2 "
           "MOV MOV32I PLOP3 PSETP P2R R2P VOTE VOTEU CSET CSETP FCHK CS2R IDE NOP BMOV "
           "VIADDMNMX DSETP_ALU PMTRIG",
    "fma": "FFMA FADD FMUL FFMA32I FADD32I FMUL32I HFMA2 HADD2 HMUL2 FSWZADD HFMA2_MMA",
    "fma64": "IMAD IMUL IMAD32I IMUL32I IDP IDP4A IMADSP",
    "fp64": "DADD DMUL DFMA DSETP DMNMX DSET",
    "xu": "MUFU POPC FLO BREV I2F F2I F2F I2I I2IP F2FP FRND VABSDIFF VABSDIFF4 VMNMX VADD VSET "
          "REDUX IDE",
    "lsu": "LDG LD LDS LDL LDSM STG ST STS STL ATOM ATOMG ATOMS RED REDG SHFL S2R MATCH LDGSTS "
           "LDGDEPBAR MEMBAR CCTL ERRBAR FENCE",
    "cbu": "BRA BRX JMP JMX BSSY BSYNC WARPSYNC ENDCOLLECTIVE EXIT RET CALL BAR BREAK YIELD KILL BPT NANOSLEEP "
           "WARPGROUP DEPBAR",
}.items():
    for _op in _ops.split():
        OPCODE_PIPE.setdefault(_op, _pipe)
OPCODE_PIPE["IDE"] = "alu"

#: conversions that the guide gives 64/clk (8- and 16-bit integers to 32-bit): I2I.S16/U16/S8/U8
_FAST_I2I = re.compile(r"^I2I\.(?:S|U)32\.(?:S|U)(?:8|16)\b|^I2IP\b")


def pipe_of(opcode: str) -> str:
    """Pipe of a full opcode with modifiers (``LDG.E.128.CONSTANT`` -> ``lsu``)."""
    base = opcode.split(".", 1)[0]
    if base.startswith("U") and base not in OPCODE_PIPE and base[1:] in OPCODE_PIPE:
        return "uniform"                  # UIADD3, ULOP3, UMOV, USHF, UISETP, ULDC, ...
    if base in ("ULDC", "UMOV", "UIADD3", "ULOP3", "USHF", "UISETP", "USEL", "UPRMT", "ULEA",
                "UIMAD", "UFLO", "UPOPC", "UBMSK", "USGXT", "UPLOP3", "UP2UR", "UR2UP", "S2UR",
                "R2UR", "UBREV", "UCLEA", "UVIMNMX"):
        return "uniform"
    if base == "LDC":
        return "lsu"                      # constant-bank load into a vector register
    if base == "I2I" and _FAST_I2I.match(opcode):
        return "alu"
    return OPCODE_PIPE.get(base, "alu")


def _known(opcode: str) -> bool:
    base = opcode.split(".", 1)[0]
    return (base in OPCODE_PIPE or base == "LDC" or pipe_of(opcode) == "uniform")


# --------------------------------------------------------------------------------------------
# cuobjdump
# --------------------------------------------------------------------------------------------

def _package_tools(name: str, packages: tuple, subdirs: tuple):
    """Executable ``name`` files in the ``subdirs`` of the pip packages ``packages`` (those
    installed), in that order."""
    for pkg in packages:
        try:
            spec = importlib.util.find_spec(pkg)
        except (ImportError, ValueError):
            spec = None
        for loc in (spec.submodule_search_locations or []) if spec else []:
            for sub in subdirs:
                exe = os.path.join(loc, sub, name)
                if os.access(exe, os.X_OK):
                    yield exe


def find_cuobjdump() -> str | None:
    """``cuobjdump`` from the pip package nvidia-cuda-cuobjdump (``nvidia/cu13/bin`` or
    ``nvidia/cuda_cuobjdump/bin``), with ``nvdisasm`` next to it; else one on PATH whose
    directory also holds nvdisasm. ``CUPYOPS_CUOBJDUMP`` overrides."""
    env = os.environ.get("CUPYOPS_CUOBJDUMP")
    if env:
        return env if os.access(env, os.X_OK) else None
    for exe in _package_tools("cuobjdump", ("nvidia.cu13", "nvidia.cu12", "nvidia.cuda_cuobjdump", "nvidia"),
                              ("bin", "cu13/bin", "cu12/bin", "cuda_cuobjdump/bin")):
        if _nvdisasm_for(exe):
            return exe
    exe = shutil.which("cuobjdump")
    return exe if exe and _nvdisasm_for(exe) else None


def _nvdisasm_for(cuobjdump: str) -> str | None:
    cand = os.path.join(os.path.dirname(cuobjdump), "nvdisasm")
    if os.access(cand, os.X_OK):
        return cand
    found = _package_tools("nvdisasm", ("nvidia.cu13", "nvidia.cu12", "nvidia.cuda_nvdisasm"),
                           ("bin", "cuda_nvdisasm/bin"))
    return next(found, None) or shutil.which("nvdisasm")


def available() -> tuple[bool, str]:
    """(True, "") when NVRTC and cuobjdump + nvdisasm are usable; else (False, why)."""
    try:
        from cupyops.tools import nvrtc as _nvrtc
    except Exception as e:   # pragma: no cover
        return False, f"cupyops.tools.nvrtc: {e}"
    ok, why = _nvrtc.available()
    if not ok:
        return False, f"NVRTC not usable ({why}); install the test extra"
    if find_cuobjdump() is None:
        return False, ("cuobjdump with nvdisasm not found: pip install nvidia-cuda-cuobjdump "
                       "nvidia-cuda-nvdisasm (the test extra)")
    return True, ""


def _tool_env(exe: str) -> dict:
    env = dict(os.environ)
    nvd = _nvdisasm_for(exe)
    if nvd:
        env["PATH"] = os.path.dirname(nvd) + os.pathsep + env.get("PATH", "")
    return env


def _cuobjdump_version(exe: str) -> str:
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=60,
                             env=_tool_env(exe)).stdout
    except (OSError, subprocess.SubprocessError):
        return "?"
    m = re.search(r"release [\d.]+, V([\d.]+)", out)
    return m.group(1) if m else out.strip()[-40:]


def disassemble(cubin: bytes, exe: str | None = None) -> str:
    """``cuobjdump -sass`` of a cubin (bytes)."""
    exe = exe or find_cuobjdump()
    if exe is None:
        raise RuntimeError(available()[1])
    with tempfile.TemporaryDirectory(prefix="cupyops-sass-") as d:
        path = os.path.join(d, "module.cubin")
        with open(path, "wb") as f:
            f.write(cubin)
        r = subprocess.run([exe, "-sass", path], capture_output=True, text=True, timeout=600,
                           env=_tool_env(exe))
    if r.returncode != 0:
        raise RuntimeError(f"cuobjdump -sass failed ({r.returncode}): {r.stderr.strip()}")
    return r.stdout


# --------------------------------------------------------------------------------------------
# SASS
# --------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Instr:
    addr: int
    pred: str            # "", "P0", "!P0", "PT", ...
    opcode: str          # with modifiers: "LDG.E.128.CONSTANT"
    operands: str
    text: str

    @property
    def base(self) -> str:
        return self.opcode.split(".", 1)[0]

    @property
    def pipe(self) -> str:
        return pipe_of(self.opcode)

    def branch_target(self) -> int | None:
        if self.base not in ("BRA", "JMP", "BRX", "JMX", "CALL"):
            return None
        m = re.findall(r"0x([0-9a-fA-F]+)", self.operands)
        if self.base in ("BRX", "JMX") or not m:
            return None
        return int(m[-1], 16)

    @property
    def unconditional(self) -> bool:
        """No guard: no predicate, and for a branch no condition operand (``BRA.DIV UR7,
        0x280`` branches only when the warp diverged; ``BRA !UP0, 0x..`` on a uniform
        predicate)."""
        if self.pred not in ("", "PT"):
            return False
        if self.base in ("BRA", "JMP", "EXIT", "RET", "KILL"):
            if any(m in ("DIV", "CONV") for m in self.opcode.split(".")[1:]):
                return False
            ops = [o.strip() for o in self.operands.split(",") if o.strip()]
            return len(ops) <= 1 or all(o in ("PT", "UPT") for o in ops[:-1])
        return True


_FUNC_RE = re.compile(r"^\s*Function\s*:\s*(\S+)")
_INSTR_RE = re.compile(r"^\s*/\*([0-9a-fA-F]{4,})\*/\s+(.*?)\s*;")
_PRED_RE = re.compile(r"^@(!?U?P[0-6T])\s+")


def parse_sass(text: str) -> dict:
    """mangled function name -> [Instr, ...] from ``cuobjdump -sass`` output."""
    funcs: dict = {}
    cur = None
    for line in text.splitlines():
        m = _FUNC_RE.match(line)
        if m:
            cur = funcs.setdefault(m.group(1), [])
            continue
        m = _INSTR_RE.match(line)
        if not m or cur is None:
            continue
        body = m.group(2).strip()
        pred = ""
        pm = _PRED_RE.match(body)
        if pm:
            pred = pm.group(1)
            body = body[pm.end():]
        parts = body.split(None, 1)
        if not parts:
            continue
        cur.append(Instr(int(m.group(1), 16), pred, parts[0],
                         parts[1] if len(parts) > 1 else "", m.group(2).strip()))
    return funcs


_LDG_WIDTH = {"U8": 1, "S8": 1, "U16": 2, "S16": 2, "64": 8, "128": 16}


def input_load_bytes(ins: Instr) -> int:
    """Bytes one lane reads with a global load of the input: ``LDG....CONSTANT`` (PTX
    ``ld.global.nc``, what a ``const T* __restrict__`` kernel argument is read with), 0 for
    anything else (status words, partials through non-const pointers, other instructions)."""
    if ins.base != "LDG":
        return 0
    mods = ins.opcode.split(".")[1:]
    if "CONSTANT" not in mods:
        return 0
    for m in mods:
        if m in _LDG_WIDTH:
            return _LDG_WIDTH[m]
    return 4


# --------------------------------------------------------------------------------------------
# The path and the counts
# --------------------------------------------------------------------------------------------

def _best_path(instrs: list, start: int, ends: set, lo: int, hi: int):
    """Through instrs[start..] (indices, addresses in [lo, hi]) along forward edges only, the
    path to an index in ``ends`` with the most input bytes, then the fewest instructions.
    Returns the list of indices, or None."""
    n = len(instrs)
    addr_index = {ins.addr: i for i, ins in enumerate(instrs)}
    # score[i] = (bytes, -count) of the best path start -> i (inclusive); maximise
    score = [None] * n
    prev = [None] * n
    score[start] = (input_load_bytes(instrs[start]), -1)
    best_end = None
    for i in range(start, n):
        if score[i] is None:
            continue
        ins = instrs[i]
        if ins.addr > hi:
            break
        if i in ends:
            if best_end is None or score[i] > score[best_end]:
                best_end = i
            continue
        succ = []
        tgt = ins.branch_target()
        is_jump = ins.base in ("BRA", "JMP")
        if ins.base in ("EXIT", "RET", "KILL") and ins.unconditional:
            continue
        if ins.base in ("BRX", "JMX"):
            continue
        if not (is_jump and ins.unconditional) and i + 1 < n:
            succ.append(i + 1)
        if is_jump and tgt is not None and tgt > ins.addr and lo <= tgt <= hi:
            j = addr_index.get(tgt)
            if j is not None:
                succ.append(j)
        for j in succ:
            b, c = score[i]
            cand = (b + input_load_bytes(instrs[j]), c - 1)
            if score[j] is None or cand > score[j]:
                score[j] = cand
                prev[j] = i
    if best_end is None:
        return None
    path = []
    i = best_end
    while i is not None:
        path.append(i)
        if i == start:
            break
        i = prev[i]
    return path[::-1]


@dataclasses.dataclass
class LoopModel:
    """Counts along one input path (a loop iteration, or a whole tile)."""
    kind: str                 # "loop" or "tile"
    start: int                # address of the loop head (or the entry)
    end: int                  # address of the backward branch (or the exit)
    instructions: int         # on the path
    input_bytes: int          # per lane on the path
    widest_load: int          # bytes of the widest input load on the path
    loads: int                # input load instructions on the path
    pipes: dict               # pipe -> instructions on the path
    opcodes: dict             # base opcode -> instructions on the path
    unknown_opcodes: tuple = ()

    def elements(self, itemsize: int) -> float:
        return self.input_bytes / itemsize

    def clocks_per_element(self, itemsize: int) -> dict:
        """pipe -> SM clocks per input element (the issue pipe included)."""
        e = self.elements(itemsize)
        out = {p: n / PIPES[p] / e for p, n in self.pipes.items() if n}
        out["issue"] = self.instructions / PIPES["issue"] / e
        for name, parts in _SHARED.items():
            v = sum(self.pipes.get(p, 0) / PIPES[p] for p in parts) / e
            if v and sum(1 for p in parts if self.pipes.get(p)) > 1:
                out[name] = v
        return out

    def figures(self, itemsize: int) -> dict:
        cpe = self.clocks_per_element(itemsize)
        busiest = max(cpe, key=lambda p: (cpe[p], p == "issue"))
        clocks = cpe[busiest]
        bytes_per_s = H100_SMS * H100_CLOCK_HZ / clocks * itemsize
        return {
            "kind": self.kind, "start": hex(self.start), "end": hex(self.end),
            "instructions": self.instructions, "elements": self.elements(itemsize),
            "instructions_per_element": self.instructions / self.elements(itemsize),
            "input_loads": self.loads, "widest_load_bytes": self.widest_load,
            "pipes": dict(sorted(self.pipes.items())),
            "opcodes": dict(sorted(self.opcodes.items())),
            "clocks_per_element": dict(sorted(cpe.items())),
            "busiest_pipe": busiest,
            "bytes_per_second": bytes_per_s,
            "fraction_of_copy_bandwidth": bytes_per_s / H100_BANDWIDTH,
            "unknown_opcodes": list(self.unknown_opcodes),
        }


_ADDR_RE = re.compile(r"\[\s*(U?R\d+)(\.64)?\s*(?:([+-])\s*(0x[0-9a-fA-F]+|\d+))?\s*\]\s*$")
_DEST_RE = re.compile(r"^\s*(U?R)(\d+)\b")


def _load_address(ins: Instr):
    """(base register, is 64-bit, byte offset) of a global load's address operand, or None."""
    m = _ADDR_RE.search(ins.operands)
    if not m:
        return None
    off = int(m.group(4), 0) if m.group(4) else 0
    return m.group(1), bool(m.group(2)), -off if m.group(3) == "-" else off


def _union_bytes(intervals) -> int:
    total = end = 0
    for lo, hi in sorted(intervals):
        if hi > end:
            total += hi - max(lo, end)
            end = hi
    return total


def _count(instrs: list, path: list, kind: str) -> LoopModel:
    pipes: dict = {}
    opcodes: dict = {}
    unknown = set()
    nbytes = loads = widest = 0
    guarded: dict = {}        # predicate register -> [bytes under @P, bytes under @!P]
    # input loads merged by address: (base register, its version on the path) -> byte ranges.
    # One element read both as a wide word and as narrow pieces (complex64 as one 8-byte load
    # or two 4-byte halves, under predicates that need not be complementary) counts once.
    by_addr: dict = {}
    version: dict = {}        # register -> times written so far on the path
    for i in path:
        ins = instrs[i]
        p = ins.pipe
        pipes[p] = pipes.get(p, 0) + 1
        opcodes[ins.base] = opcodes.get(ins.base, 0) + 1
        if not _known(ins.opcode):
            unknown.add(ins.base)
        b = input_load_bytes(ins)
        addr = _load_address(ins) if b else None
        if addr is not None:
            reg, _, off = addr
            by_addr.setdefault((reg, version.get(reg, 0)), []).append((off, off + b))
            loads += 1
            widest = max(widest, b)
        elif b:
            if ins.pred and ins.pred not in ("PT",):
                g = guarded.setdefault(ins.pred.lstrip("!"), [0, 0])
                g[ins.pred.startswith("!")] += b
            else:
                nbytes += b
            loads += 1
            widest = max(widest, b)
        if ins.base not in ("ST", "STG", "STS", "STL", "RED", "BRA", "EXIT", "BAR", "JMP",
                            "CALL", "RET") and not ins.opcode.startswith("ISETP"):
            d = _DEST_RE.match(ins.operands)
            if d:                 # a write of Rn (a 64-bit write also names Rn; bump Rn-1 too)
                for k in (int(d.group(2)), int(d.group(2)) - 1):
                    r = f"{d.group(1)}{k}"
                    version[r] = version.get(r, 0) + 1
    # loads under complementary predicates are alternatives (complex read as one wide word or
    # as two narrow ones): an element is read by one side only
    nbytes += sum(max(g) for g in guarded.values())
    nbytes += sum(_union_bytes(iv) for iv in by_addr.values())
    return LoopModel(kind, instrs[path[0]].addr, instrs[path[-1]].addr, len(path), nbytes,
                     widest, loads, pipes, opcodes, tuple(sorted(unknown)))


def input_loops(instrs: list) -> list:
    """Every loop (backward branch) whose steady-state path reads the input: LoopModels."""
    addr_index = {ins.addr: i for i, ins in enumerate(instrs)}
    out = []
    for b, ins in enumerate(instrs):
        if ins.base != "BRA":
            continue
        tgt = ins.branch_target()
        if tgt is None or tgt >= ins.addr or tgt not in addr_index:
            continue
        h = addr_index[tgt]
        if not any(input_load_bytes(instrs[k]) for k in range(h, b + 1)):
            continue
        path = _best_path(instrs, h, {b}, tgt, ins.addr)
        if path is None:
            continue
        m = _count(instrs, path, "loop")
        if m.input_bytes:
            out.append(m)
    return out


def model_function(instrs: list, itemsize: int) -> dict:
    """The model of one entry function (its SASS) whose input elements are ``itemsize`` bytes.

    Returns a dict: ``kind`` ("loop" / "tile" / "none"), the figures of the reported path
    (:meth:`LoopModel.figures`) and ``candidates`` (every input loop's figures)."""
    loops = input_loops(instrs)
    if loops:
        top = max((m.input_bytes, m.widest_load) for m in loops)
        steady = [m for m in loops if (m.input_bytes, m.widest_load) == top]
        figs = [m.figures(itemsize) for m in steady]
        worst = min(range(len(figs)), key=lambda k: figs[k]["fraction_of_copy_bandwidth"])
        res = dict(figs[worst])
        res["steady_loops"] = len(steady)
        res["candidates"] = [m.figures(itemsize) for m in loops]
        return res
    ends = {i for i, ins in enumerate(instrs) if ins.base in ("EXIT", "RET")}
    if any(input_load_bytes(ins) for ins in instrs) and instrs:
        path = _best_path(instrs, 0, ends, instrs[0].addr, instrs[-1].addr)
        if path is not None:
            m = _count(instrs, path, "tile")
            if m.input_bytes:
                res = m.figures(itemsize)
                res["steady_loops"] = 0
                res["candidates"] = []
                return res
    return {"kind": "none"}


# --------------------------------------------------------------------------------------------
# Compiling and caching
# --------------------------------------------------------------------------------------------

def default_cache_dir() -> Path:
    from cupyops.tools import nvrtc as _nvrtc
    return _nvrtc.cache_root() / "sass"


def sass_for(source: str, arch: int, options: tuple = (), name_expressions: tuple = (),
             *, cache_dir=None, filename: str = "kernel.cu") -> tuple[str, dict]:
    """(SASS text, lowered names) of ``source`` compiled for ``sm_<arch>`` with ``options``
    (the full list, as :func:`cupyops.tools.nvrtc.compile_cubin` takes it); cached on disk keyed by
    source, options, arch, name expressions and the NVRTC and cuobjdump versions."""
    from cupyops.tools import nvrtc as _nvrtc
    exe = find_cuobjdump()
    if exe is None:
        raise RuntimeError(available()[1])
    if cache_dir is None:
        cache_dir = default_cache_dir()
    key = _nvrtc.cache_key(source, str(int(arch)), "\0".join(options), "\0".join(name_expressions),
                           "%d.%d" % _nvrtc.nvrtc_version(), _cuobjdump_version(exe), "sass-v1")
    path = Path(cache_dir) / f"{key}.json" if cache_dir else None
    if path is not None and path.is_file():
        try:
            d = json.loads(path.read_text())
            return d["sass"], d["lowered"]
        except (ValueError, KeyError):
            pass
    res = _nvrtc.compile_cubin(source, int(arch), tuple(options), tuple(name_expressions),
                               keep_binaries=True, filename=filename)
    sass = disassemble(res.cubin, exe)
    if path is not None:
        _nvrtc.write_cache_entry(path, {"sass": sass, "lowered": res.lowered_names})
    return sass, dict(res.lowered_names)


def model_source(source: str, arch: int, name_expressions: tuple, itemsize, *,
                 options: tuple | None = None, cache_dir=None) -> dict:
    """Model every name expression of a source (for tests and one-off kernels).
    ``itemsize``: an int for all, or ``expr -> int``. Returns ``expr -> model dict``."""
    from cupyops.tools import nvrtc as _nvrtc
    from cupyops.core import modules as _modules
    if options is None:
        options = _nvrtc.cupy_options(_modules.NVRTC_OPTIONS)
    sass, lowered = sass_for(source, arch, options, tuple(name_expressions), cache_dir=cache_dir)
    funcs = parse_sass(sass)
    out = {}
    for e in name_expressions:
        size = itemsize(e) if callable(itemsize) else int(itemsize)
        out[e] = model_function(funcs.get(lowered[e], []), size)
    return out


#: Entry functions that do not read the input (their loads are partials): not modelled.
NON_INPUT_KERNELS = ("argreduce_finish",)


def _family_job(job):
    family_name, dtype_str, arch, cache_dir = job
    from cupyops.tools import nvrtc as _nvrtc
    from cupyops.core import modules as _modules
    _nvrtc.load_family_modules()
    fam = _modules.get_family(family_name)
    dt = _dtype_from_str(dtype_str)
    _, (source, arch, options, exprs) = _nvrtc.job_for(fam, dt, arch)
    try:
        sass, lowered = sass_for(source, arch, options, exprs, cache_dir=cache_dir,
                                 filename="module.cu")
    except Exception as e:
        return {"ok": False, "error": f"{type(e).__name__}: {e}"}
    funcs = parse_sass(sass)
    rows = []
    for e in exprs:
        if e.split("<", 1)[0] in NON_INPUT_KERNELS:
            m = {"kind": "none"}
        else:
            m = model_function(funcs.get(lowered[e], []), dt.itemsize)
        rows.append({"family": family_name, "dtype": str(dt), "arch": arch, "kernel": e,
                     "itemsize": dt.itemsize, **m})
    return {"ok": True, "rows": rows}


def _dtype_from_str(s: str) -> np.dtype:
    if s == "bfloat16":
        from cupyops.core import dtypes as _bf16
        return _bf16.dtype()
    return np.dtype(s)


def instantiation_report(archs=(90, 80), families=None, *, jobs: int = 2, cache_dir=None,
                         progress=None) -> list:
    """One row (dict) per family x dtype x name expression x arch: the model's figures."""
    from cupyops.tools import nvrtc as _nvrtc
    from cupyops.core import modules as _modules
    _nvrtc.load_family_modules()
    fams = [_modules.get_family(f) for f in families] if families else \
        list(_modules.families().values())
    cache_dir = default_cache_dir() if cache_dir is None else cache_dir
    jobs_list = [(f.name, str(dt), int(a), str(cache_dir) if cache_dir else False)
                 for f in fams for dt in f.dtypes for a in archs]
    out = []
    t0 = time.perf_counter()

    def done(k, res):
        if progress:
            progress(k, len(jobs_list), jobs_list[k], time.perf_counter() - t0)
        if not res["ok"]:
            raise RuntimeError(f"{jobs_list[k][:3]}: {res['error']}")
        return res["rows"]

    results = [None] * len(jobs_list)

    def keep(k, res):
        results[k] = done(k, res)
    _nvrtc.run_pool(_family_job, jobs_list, jobs, keep)
    for r in results:
        out.extend(r)
    return out


# --------------------------------------------------------------------------------------------
# Output
# --------------------------------------------------------------------------------------------

GOAL = 0.90
DOC_BEGIN = "<!-- issue-rate:begin (python -m cupyops.bench.issue_rate --table docs/kernels.md) -->"
DOC_END = "<!-- issue-rate:end -->"


def summary(rows: list) -> dict:
    """Per arch: instantiations modelled, how many meet the goal, the worst."""
    out = {}
    for a in sorted({r["arch"] for r in rows}):
        ar = [r for r in rows if r["arch"] == a and r.get("kind") != "none"]
        worst = min(ar, key=lambda r: r["fraction_of_copy_bandwidth"], default=None)
        out[f"sm_{a}"] = {
            "modelled": len(ar),
            "meet_goal": sum(1 for r in ar if r["fraction_of_copy_bandwidth"] >= GOAL),
            "goal": GOAL,
            "worst": None if worst is None else {
                k: worst[k] for k in ("family", "dtype", "kernel", "busiest_pipe",
                                      "fraction_of_copy_bandwidth")},
        }
    return out


def render_markdown(rows: list) -> str:
    lines = [
        DOC_BEGIN, "",
        "# Issue-rate model",
        "",
        "Generated by `python -m cupyops.bench.issue_rate --table docs/kernels.md` "
        "(`cupyops/bench/issue_rate.py`); do not edit by hand.",
        "",
        "Each kernel instantiation is compiled with NVRTC (the CuPy path's options) to a cubin "
        "and disassembled with `cuobjdump -sass`. The path that reads the input is the "
        "steady-state loop (a backward branch whose body holds the input's global loads; "
        "among several, the one loading the most bytes per iteration with the widest load; "
        "through it, the path with the most input bytes and the fewest instructions), or the "
        "whole tile where a kernel has no such loop (`nonzero_tiles`: entry to exit, the "
        "count pass). Its SASS instructions are counted per input element and per pipe, each "
        "weighted by its cc 9.0 throughput per SM per clock (CUDA C++ Programming Guide, "
        "\"Throughput of Native Arithmetic Instructions\": alu 64 (integer add/logic/compare/"
        "shift, select, min/max), fma 128 (FP32), fma64 64 (IMAD, on the FMA datapath: "
        "`fma_datapath` = fma + fma64), fp64 64, xu 16 (popc, conversions, MUFU), lsu 32 "
        "(loads, stores, shuffles), cbu 64 (branches), issue 128 (every instruction). "
        "`clk/elem` is the busiest pipe's SM clocks per element; `% BW` the fraction of H100 "
        f"copy bandwidth ({H100_BANDWIDTH / 1e12:.1f} TB/s) that it allows at "
        f"{H100_SMS} SMs x {H100_CLOCK_HZ / 1e9:.2f} GHz. Goal: >= {GOAL:.0%}. "
        "`argreduce_finish` reads partials, not the input: not modelled. The sm_80 "
        "section weighs sm_80's code with the same cc 9.0 table and H100 figures. "
        "(`python -m cupyops.tools.nvrtc --table` rewrites the rest of this page and keeps this block.)",
        "",
    ]
    for a, s in summary(rows).items():
        w = s["worst"]
        lines.append(f"* {a}: {s['meet_goal']} of {s['modelled']} instantiations meet the goal"
                     + (f"; worst `{w['kernel']}` ({w['dtype']}) at "
                        f"{w['fraction_of_copy_bandwidth']:.0%}, {w['busiest_pipe']} pipe"
                        if w else ""))
    lines.append("")
    for a in sorted({r["arch"] for r in rows}, reverse=True):
        lines += [f"## sm_{a}", "",
                  "| kernel | dtype | path | elems | instr/elem | alu | fma+imad | lsu | xu | "
                  "busiest | clk/elem | % BW |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for r in sorted((r for r in rows if r["arch"] == a),
                        key=lambda r: (r["family"], r["kernel"].split("<")[0], r["dtype"],
                                       r["kernel"])):
            if r.get("kind") == "none":
                continue
            e = r["elements"]
            p = r["pipes"]

            def per(*names):
                return f"{sum(p.get(n, 0) for n in names) / e:.2f}"
            frac = r["fraction_of_copy_bandwidth"]
            lines.append(
                f"| `{r['kernel']}` | {r['dtype']} | {r['kind']} {r['start']}-{r['end']} | "
                f"{e:g} | {r['instructions_per_element']:.2f} | {per('alu')} | "
                f"{per('fma', 'fma64')} | {per('lsu')} | {per('xu')} | {r['busiest_pipe']} | "
                f"{r['clocks_per_element'][r['busiest_pipe']]:.4f} | "
                f"{'**' if frac < GOAL else ''}{frac:.0%}{'**' if frac < GOAL else ''} |")
        lines.append("")
    lines.append(DOC_END)
    return "\n".join(lines) + "\n"


def update_doc(path, rows: list) -> None:
    """Replace (or append) the issue-rate section of ``path`` between its markers."""
    p = Path(path)
    text = p.read_text() if p.exists() else ""
    block = render_markdown(rows)
    i = text.find(DOC_BEGIN.split(" (")[0])
    j = text.find(DOC_END)
    if i >= 0 and j > i:
        text = text[:i] + block + text[j + len(DOC_END):].lstrip("\n")
    else:
        text = text.rstrip("\n") + "\n\n" + block
    p.write_text(text)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m cupyops.bench.issue_rate",
                                 description="SASS issue-rate model of every kernel instantiation")
    ap.add_argument("--arch", action="append", type=int, help="default: 90 and 80")
    ap.add_argument("--family", action="append")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--table", metavar="DOC", help="write the markdown section into DOC")
    ap.add_argument("--json", metavar="PATH")
    ap.add_argument("--no-cache", action="store_true")
    args = ap.parse_args(argv)
    ok, why = available()
    if not ok:
        print(f"issue-rate model unavailable: {why}", file=sys.stderr)
        return 2

    def progress(k, n, job, secs):
        print(f"[{k + 1}/{n}] {job[0]} {job[1]} sm_{job[2]} ({secs:.0f} s)", file=sys.stderr,
              flush=True)
    rows = instantiation_report(tuple(args.arch or (90, 80)), args.family, jobs=args.jobs,
                                cache_dir=False if args.no_cache else None, progress=progress)
    if args.json:
        Path(args.json).write_text(json.dumps({"summary": summary(rows), "rows": rows},
                                              indent=1))
    if args.table:
        update_doc(args.table, rows)
    if not args.json and not args.table:
        sys.stdout.write(render_markdown(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
