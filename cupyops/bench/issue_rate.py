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

5. **memory terms** (issue 26, the section "Memory terms" below), per (arch, kernel, layout,
   pass) for every benchmark case and every layout issue 26 names, run once on simt:

   * ``bytes_in_flight_per_sm = bytes per thread per iteration x resident threads per SM``:
     the widths of the input's LDG instructions on the path above, taken for the load width
     the launch's plan reads (``max_load_width``: a plan that misses a 16-byte path runs the
     scalar loop), times ``threads per block x blocks per SM`` from NVRTC's registers and
     shared memory and the block size (:func:`cupyops.tools.nvrtc.occupancy`): what one SM
     holds in flight once the grid fills it. ``bytes_in_flight_per_sm_launched`` caps the
     blocks per SM by the launch's own grid (blocks launched / SMs, 132 SMs on sm_90 and 108 on
     sm_80): a one-block plan shows a 132nd of a block in flight;
   * ``requests_per_unique_sector = sectors_load / unique_sectors_load`` of simt's launch
     record (1.0 for a launch that loads nothing).

Run it: ``python -m cupyops.bench.issue_rate [--arch 90 --arch 80] [--table docs/kernels.md]
[--json PATH] [--rows-json PATH] [--layouts quick|named|none]``. ``--json`` writes the memory
terms' records as a JSON list, each with at least ``arch`` ("sm_90"), ``kernel``, ``layout``,
``pass`` ("read" / "write" / "finish"), ``bytes_in_flight_per_sm`` and
``requests_per_unique_sector``; ``--rows-json`` the per-instantiation rows and summary; the
benchmark's ``--issue-rate`` flag puts the rows and summary into its JSON.
Needs the ``test`` extra (cuda-bindings, nvidia-cuda-nvrtc, nvidia-cuda-cuobjdump,
nvidia-cuda-nvdisasm). Disassemblies are cached on disk keyed by everything that goes into them.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib.util
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

import numpy as np

from cupyops.bench import device_model as _device
from cupyops.bench.traffic import H100_BANDWIDTH

__all__ = [
    "H100_SMS", "H100_CLOCK_HZ", "ISSUE_PER_SM", "PIPES", "OPCODE_PIPE", "Instr", "LoopModel",
    "available", "find_cuobjdump", "disassemble", "parse_sass", "pipe_of",
    "cap_loads", "model_function", "model_source", "input_load_bytes", "sass_for",
    "instantiation_report", "render_markdown", "update_doc", "main",
    # memory terms (issue 26)
    "ARCH_SMS", "GOAL_IN_FLIGHT", "GOAL_REQUESTS", "NONZERO_OPS", "RECORD_KEYS", "Layout",
    "NAMED_LAYOUTS", "bench_layouts", "resident_threads", "bytes_in_flight_per_sm",
    "requests_per_unique_sector", "planned_load_width", "pass_of", "run_layout",
    "KernelModels", "layout_records", "memory_records", "in_flight_goal", "goal_misses",
    "render_memory_markdown",
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

    def figures(self, itemsize: int, device=None) -> dict:
        """The path's figures on ``device`` (a DeviceSpec or preset name; default the H100:
        132 SMs x 1.98 GHz against 3.0 TB/s)."""
        dev = _device.from_name(device)
        cpe = self.clocks_per_element(itemsize)
        busiest = max(cpe, key=lambda p: (cpe[p], p == "issue"))
        clocks = cpe[busiest]
        bytes_per_s = dev.sms * dev.clock_hz / clocks * itemsize
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
            "fraction_of_copy_bandwidth": bytes_per_s / dev.copy_bandwidth,
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


def cap_loads(instrs: list, width: int) -> list:
    """``instrs`` for a launch whose plan reads ``width``-byte words of the input (a scalar
    layout of a kernel that also has a 16-byte path): an input load wider than ``width`` is
    not an input load, and where it is unconditional it ends every path through it (a
    ``KILL``): that branch belongs to the wider plan."""
    out = []
    for ins in instrs:
        if input_load_bytes(ins) > width:
            if ins.pred in ("", "PT"):
                ins = dataclasses.replace(ins, pred="", opcode="KILL", operands="")
            else:
                op = ".".join(m for m in ins.opcode.split(".") if m != "CONSTANT")
                ins = dataclasses.replace(ins, opcode=op)
        out.append(ins)
    return out


def model_function(instrs: list, itemsize: int, max_load_width: int | None = None,
                   device=None) -> dict:
    """The model of one entry function (its SASS) whose input elements are ``itemsize`` bytes.
    ``max_load_width``: the path of a plan that reads words of at most that many bytes
    (:func:`cap_loads`; a loop whose body holds a wider input load is the wider plan's).

    Returns a dict: ``kind`` ("loop" / "tile" / "none"), the figures of the reported path
    (:meth:`LoopModel.figures`) and ``candidates`` (every input loop's figures)."""
    wide: list = []
    if max_load_width is not None:
        wide = [ins.addr for ins in instrs if input_load_bytes(ins) > max_load_width]
        instrs = cap_loads(instrs, max_load_width)
    loops = [m for m in input_loops(instrs) if not any(m.start <= a <= m.end for a in wide)]
    if loops:
        top = max((m.input_bytes, m.widest_load) for m in loops)
        steady = [m for m in loops if (m.input_bytes, m.widest_load) == top]
        figs = [m.figures(itemsize, device) for m in steady]
        worst = min(range(len(figs)), key=lambda k: figs[k]["fraction_of_copy_bandwidth"])
        res = dict(figs[worst])
        res["steady_loops"] = len(steady)
        res["candidates"] = [m.figures(itemsize, device) for m in loops]
        return res
    ends = {i for i, ins in enumerate(instrs) if ins.base in ("EXIT", "RET")}
    if any(input_load_bytes(ins) for ins in instrs) and instrs:
        path = _best_path(instrs, 0, ends, instrs[0].addr, instrs[-1].addr)
        if path is not None:
            m = _count(instrs, path, "tile")
            if m.input_bytes:
                res = m.figures(itemsize, device)
                res["steady_loops"] = 0
                res["candidates"] = []
                return res
    return {"kind": "none"}


# --------------------------------------------------------------------------------------------
# Compiling and caching
# --------------------------------------------------------------------------------------------

def default_cache_dir() -> Path:
    """cupyops' ``sass`` cache (cupyops.core.caches)."""
    from cupyops.core import caches
    return caches.cache_dir("sass")


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
NON_INPUT_KERNELS = ("argreduce_finish", "argreduce_finish_values")


def _family_job(job):
    family_name, dtype_str, arch, cache_dir, device = (tuple(job) + (None,))[:5]
    from cupyops.tools import nvrtc as _nvrtc
    from cupyops.core import modules as _modules
    _nvrtc.load_family_modules()
    fam = _modules.get_family(family_name)
    dt = _dtype_from_str(dtype_str)
    rows = []
    # each module the library compiles (a kernel's SASS depends on the kernels beside it)
    for _, _, group in _nvrtc.runtime_modules([fam], [dt]):
        _, (source, arch, options, exprs) = _nvrtc.job_for(fam, dt, arch, exprs=group)
        try:
            sass, lowered = sass_for(source, arch, options, exprs, cache_dir=cache_dir,
                                     filename="module.cu")
        except Exception as e:
            return {"ok": False, "error": f"{type(e).__name__}: {e}"}
        funcs = parse_sass(sass)
        for e in exprs:
            if e.split("<", 1)[0] in NON_INPUT_KERNELS:
                m = {"kind": "none"}
            else:
                m = model_function(funcs.get(lowered[e], []), dt.itemsize, device=device)
            rows.append({"family": family_name, "dtype": str(dt), "arch": arch, "kernel": e,
                         "itemsize": dt.itemsize, **m})
    return {"ok": True, "rows": rows}


def _dtype_from_str(s: str) -> np.dtype:
    if s == "bfloat16":
        from cupyops.core import dtypes as _bf16
        return _bf16.dtype()
    return np.dtype(s)


def instantiation_report(archs=(90, 80), families=None, *, jobs: int = 2, cache_dir=None,
                         progress=None, device=None) -> list:
    """One row (dict) per family x dtype x name expression x arch: the model's figures on
    ``device`` (a preset's name, default the H100)."""
    from cupyops.tools import nvrtc as _nvrtc
    from cupyops.core import modules as _modules
    _nvrtc.load_family_modules()
    fams = [_modules.get_family(f) for f in families] if families else \
        list(_modules.families().values())
    cache_dir = default_cache_dir() if cache_dir is None else cache_dir
    dev = None if device is None else _device.from_name(device).name.lower()
    jobs_list = [(f.name, str(dt), int(a), str(cache_dir) if cache_dir else False, dev)
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


# ============================================================================================
# Memory terms (issue 26): bytes in flight per SM and L1->L2 requests per unique sector
# ============================================================================================
#
# One record per (arch, kernel, layout, pass). The traffic model (:mod:`cupyops.bench.traffic`)
# counts the DRAM sectors a call touches and the model above the instructions per element;
# neither sees a kernel that keeps too little memory in flight to cover the latency, nor one
# whose warps ask L2 for the same sectors many times over. Two terms do:
#
# ``bytes_in_flight_per_sm`` (per arch, from the SASS and NVRTC)::
#
#     bytes per thread per iteration  x  resident threads per SM
#
#     bytes per thread per iteration = the sum of the widths of the input's LDG instructions on
#         the path the issue-rate model selects (:func:`model_function`:
#         one steady-state loop iteration, or the whole tile of a kernel without a loop), for
#         the load width the launch's plan reads (:func:`planned_load_width`: a layout that
#         misses a kernel's 16-byte path runs its scalar loop, not the 16-byte one)
#     resident threads per SM = threads per block x B_occ
#         B_occ: blocks per SM from NVRTC's registers and static shared memory, the launch's
#         dynamic shared memory and block size (:func:`cupyops.tools.nvrtc.occupancy`)
#
#   (issue 26's definition: the kernel's capacity on an SM the grid fills). Beside it,
#   ``bytes_in_flight_per_sm_launched`` takes min(B_occ, blocks launched / SMs) blocks, SMs
#   132 on sm_90 (simt's H100 properties) and 108 on sm_80 (A100): a plan that launches one
#   block shows (block threads / 132) threads' worth per SM; the planners' block-count goal
#   (issue 26: >= min(132, bytes / 16 KiB) blocks) is what keeps this one up. It assumes every load of one iteration is issued before the first of them is used (what
#   unrolling and batching buy); the launches are simt's (planned for H100 properties), the same
#   grid weighed on both archs.
#
# ``requests_per_unique_sector`` (arch-independent, from simt's launch records)::
#
#     sectors_load / unique_sectors_load
#
#   sectors_load: for every warp-wide load, the distinct 32-byte sectors it touches, summed (the
#   L1 -> L2 requests); unique_sectors_load: the distinct sectors the launch loads. A launch
#   that loads nothing (0 / 0) counts 1.0: no request beyond the unique sectors.
#
# Each benchmark case (:func:`cupyops.bench.cases.make_cases`) and each layout named in issue 26
# (:data:`NAMED_LAYOUTS`) is run once on simt under ``record_traffic`` and the launch trace; each
# launch is mapped to its kernel instantiation (its name expression) and its pass
# (:func:`pass_of`): ``"finish"`` for combine / finish kernels (``argreduce_finish``), ``"read"``
# for launches given the input (an argument sharing memory with it: argreduce_row / col,
# nonzero_tiles / _t in every mode, count_nonzero_axes), ``"write"`` for the rest (results only).
# The launches of one kernel in one pass of a call (the exact nonzero's count and place launches)
# make one record: the least bytes in flight and the most requests per unique sector of them.
#
# Goals (issue 26) on the ``"read"`` records: >= :data:`GOAL_IN_FLIGHT` bytes in flight per SM on
# sm_90 (the record's ``goal_bytes_in_flight_per_sm``); <= :data:`GOAL_REQUESTS` requests per
# unique sector for every nonzero call. The launch-capped figure is reported against
# min(16 KiB, input bytes / 132) (:func:`in_flight_goal`: an input under 132 x 16 KiB = 2.06 MiB
# cannot have 16 KiB per SM in flight even when all of it is); :func:`goal_misses` counts both.

#: SMs per arch: simt's H100 properties (sm_90) and an A100 (sm_80)
ARCH_SMS = {90: 132, 80: 108}
GOAL_IN_FLIGHT = 16 * 1024          # bytes per SM on sm_90, read passes
GOAL_REQUESTS = 1.5                 # L1->L2 requests per unique sector, nonzero read passes
NONZERO_OPS = ("argwhere", "nonzero", "nonzero_coordinates", "count_nonzero")
#: the keys every record has (issue 26's check reads these)
RECORD_KEYS = ("arch", "kernel", "layout", "pass", "bytes_in_flight_per_sm",
               "requests_per_unique_sector")
_FINISH_WORDS = ("finish", "combine")


# --------------------------------------------------------------------------------------------
# The formulas
# --------------------------------------------------------------------------------------------

def sms_of(arch: int, device=None) -> int:
    """SMs the launch-capped terms divide by: the device's where it is of ``arch`` (an H200 is
    sm_90 with 132), else :data:`ARCH_SMS`."""
    dev = None if device is None else _device.from_name(device)
    if dev is not None and dev.arch == int(arch):
        return dev.sms
    return ARCH_SMS[int(arch)]


def resident_threads(registers: int, block_threads: int, arch: int, shared_bytes: int,
                     blocks: int, device=None) -> dict:
    """Threads per SM of a kernel of ``block_threads`` threads a block: ``resident_threads`` =
    ``block_threads x B_occ`` (B_occ = ``blocks_per_sm``, from registers and ``shared_bytes`` =
    static + dynamic shared memory), and ``resident_threads_launched`` = ``block_threads x
    min(B_occ, blocks / SMs)`` for a launch of ``blocks`` blocks (a float: an average over the
    SMs); also the occupancy's ``limiter``."""
    from cupyops.tools import nvrtc as _nvrtc
    occ = _nvrtc.occupancy(int(registers), int(block_threads), int(arch), 0, int(shared_bytes))
    launched = min(float(occ.blocks_per_sm), int(blocks) / sms_of(arch, device))
    return {"blocks_per_sm": occ.blocks_per_sm, "limiter": occ.limiter,
            "resident_threads": float(occ.blocks_per_sm * int(block_threads)),
            "resident_threads_launched": launched * int(block_threads)}


def bytes_in_flight_per_sm(bytes_per_thread: float, resident: float) -> float:
    """Input bytes per thread per iteration x resident threads per SM."""
    return float(bytes_per_thread) * float(resident)


def requests_per_unique_sector(sectors_load: int, unique_sectors_load: int) -> float:
    """L1->L2 load requests (sectors_load) per unique sector loaded; 1.0 when nothing is
    loaded (0 / 0)."""
    if unique_sectors_load <= 0:
        if sectors_load > 0:
            raise ValueError(f"{sectors_load} sectors requested but no unique sector")
        return 1.0
    return sectors_load / unique_sectors_load


def planned_load_width(params, itemsize: int) -> int | None:
    """Bytes of the input words a launch reads, from its packed parameters (a structured
    ``np.void``): nonzero's ``vec`` / ``tr_vec`` (16-byte words) and ``narrow_loads``,
    argreduce's ``vec`` (elements per load in the row kernel, groups per load in the column
    kernel) and ``narrow_in`` (complex read as two halves); None when the parameters name
    none of these (the model's steady state then)."""
    names = getattr(getattr(params, "dtype", None), "names", None) or ()

    def get(name):
        return int(params[name]) if name in names else 0
    if "narrow_in" in names:                      # ArParams
        if get("narrow_in"):
            return max(1, itemsize // 2)
        return min(16, max(1, get("vec")) * itemsize)
    if "vec" in names:                            # nz_params, nz_count_params
        if get("vec") or get("tr_vec"):
            return 16
        return max(1, itemsize // 2) if get("narrow_loads") else itemsize
    return None


def pass_of(kernel: str, reads_input: bool) -> str:
    """"finish" for combine / finish kernels, "read" for launches given the input, else
    "write"."""
    base = kernel.split("<", 1)[0]
    if any(w in base for w in _FINISH_WORDS):
        return "finish"
    return "read" if reads_input else "write"


# --------------------------------------------------------------------------------------------
# Layouts
# --------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Layout:
    id: str
    op: str
    make: Callable[[], np.ndarray]
    call: Callable[[np.ndarray], object]


def _aligned(shape, dtype, order="C", align=256):
    """An ``align``-byte aligned array (as CuPy allocates), C or F order."""
    dt = np.dtype(dtype)
    shape = tuple(shape)[::-1] if order == "F" else tuple(shape)
    nbytes = max(1, math.prod(shape) * dt.itemsize)
    raw = np.empty(nbytes + align, np.uint8)
    off = (-raw.__array_interface__["data"][0]) % align
    a = raw[off:off + nbytes].view(dt).reshape(shape)
    return a.T if order == "F" else a


def _filled(shape, dtype, order="C", density=None, seed=0):
    rng = np.random.default_rng(seed)
    x = _aligned(shape, dtype, order)
    dt = np.dtype(dtype)
    if density is None:
        x[...] = rng.standard_normal(shape).astype(dt) if dt.kind == "f" else \
            rng.integers(0, 256 if dt.itemsize == 1 else 1 << 15, shape).astype(dt)
    else:
        x[...] = (rng.random(shape) < density).astype(dt)
    return x


def _permuted_int8():
    # memory order (2, 0, 1) of the logical (64, 256, 64): a permuted 3-D view, density 0.5
    a = _filled((64, 64, 256), np.int8, density=0.5)       # memory (d2, d0, d1)
    return a.transpose(1, 2, 0)


def _named():
    import cupyops as co
    d = "simt"
    rows = [
        ("argmax (1,262144) uint8", "argmax", lambda: _filled((1, 262144), np.uint8),
         lambda x: co.argmax(x, axis=1, device=d)),
        ("argmax (1,66560) float32", "argmax", lambda: _filled((1, 66560), np.float32),
         lambda x: co.argmax(x, axis=1, device=d)),
        ("argmax (1,32768) float64", "argmax", lambda: _filled((1, 32768), np.float64),
         lambda x: co.argmax(x, axis=1, device=d)),
        ("argmax (1,131072) float32", "argmax", lambda: _filled((1, 131072), np.float32),
         lambda x: co.argmax(x, axis=1, device=d)),
        ("hardmax (1,262144) float32", "hardmax", lambda: _filled((1, 262144), np.float32),
         lambda x: co.hardmax(x, axis=1, device=d)),
        ("hardmax (1,1048576) float32 4 MiB", "hardmax",
         lambda: _filled((1, 1048576), np.float32), lambda x: co.hardmax(x, axis=1, device=d)),
        ("argwhere (64,4096) uint8 F d=0.5", "argwhere",
         lambda: _filled((64, 4096), np.uint8, "F", 0.5), lambda x: co.argwhere(x, device=d)),
        ("argwhere asfortranarray (1000,1000) bool d=0.5", "argwhere",
         lambda: _filled((1000, 1000), np.bool_, "F", 0.5), lambda x: co.argwhere(x, device=d)),
        ("nonzero (4097,1024) float32 F d=0.5", "nonzero",
         lambda: _filled((4097, 1024), np.float32, "F", 0.5), lambda x: co.nonzero(x, device=d)),
        ("nonzero_coordinates size=n permuted (64,256,64) int8 d=0.5", "nonzero_coordinates",
         _permuted_int8, lambda x: co.nonzero_coordinates(x, size=x.size, device=d)),
        ("nonzero (1024,1024).T float64 d=0.5", "nonzero",
         lambda: _filled((1024, 1024), np.float64, "F", 0.5), lambda x: co.nonzero(x, device=d)),
        ("count_nonzero (4097,1024) float32 F d=0.5", "count_nonzero",
         lambda: _filled((4097, 1024), np.float32, "F", 0.5),
         lambda x: co.count_nonzero(x, device=d)),
        ("count_nonzero axis=0 (1024,1024) int8 d=0.5", "count_nonzero",
         lambda: _filled((1024, 1024), np.int8, "C", 0.5),
         lambda x: co.count_nonzero(x, axis=0, device=d)),
    ]
    return [Layout(*r) for r in rows]


#: the layouts issue 26 names (a function: its lambdas import cupyops when called)
NAMED_LAYOUTS = _named


def bench_layouts(mode: str = "quick") -> list:
    """The benchmark's cases at size ``mode`` as Layouts (id = the case id)."""
    from cupyops.bench import cases as _cases
    return [Layout(c.id, c.op, (lambda c=c: _cases.make_input(c)),
                   _cases.cupyops_call(c, "simt")) for c in _cases.make_cases(mode)]


# --------------------------------------------------------------------------------------------
# Running a layout on simt
# --------------------------------------------------------------------------------------------

def _params_of(args):
    for a in args:
        if isinstance(a, np.void) or (isinstance(a, np.ndarray) and a.dtype.names
                                      and a.size == 1):
            return a if isinstance(a, np.void) else a.reshape(-1)[0]
    return None


def run_layout(layout: Layout) -> list:
    """Run ``layout``'s call once on simt; one dict per launch: kernel (name expression),
    grid, block, shared_mem, params, reads_input, pass and the traffic counters."""
    import cupyops.simt as simt
    from cupyops.bench import cases as _cases
    from cupyops.core import trace as _trace
    x = layout.make()
    with contextlib.ExitStack() as st:
        tr = st.enter_context(_trace.recording(args=True))
        st.enter_context(_cases.cupy_like_simt_allocations())
        rec = st.enter_context(simt.record_traffic())
        layout.call(x)
    if len(tr.launches) != len(rec.launches):
        raise RuntimeError(f"{layout.id}: {len(tr.launches)} traced launches but "
                           f"{len(rec.launches)} traffic records")
    out = []
    for (expr, grid, block, smem), args, t in zip(tr.launches, tr.launch_args, rec.launches):
        if t.kernel != expr:
            raise RuntimeError(f"{layout.id}: trace {expr!r} against traffic {t.kernel!r}")
        reads = any(isinstance(a, np.ndarray) and not a.dtype.names
                    and np.may_share_memory(a, x) for a in args)
        out.append({"kernel": expr, "grid": tuple(grid), "block": tuple(block),
                    "shared_mem": int(smem), "params": _params_of(args),
                    "reads_input": reads, "pass": pass_of(expr, reads),
                    "input_bytes": int(x.nbytes),
                    "sectors_load": int(t.sectors_load),
                    "unique_sectors_load": int(t.unique_sectors_load),
                    "shared_accesses": int(t.shared_accesses),
                    "shared_wavefronts": int(t.shared_wavefronts)})
    return out


# --------------------------------------------------------------------------------------------
# Kernel models (SASS + NVRTC), cached per module
# --------------------------------------------------------------------------------------------

class KernelModels:
    """SASS paths and NVRTC resources of the kernel instantiations the launches name."""

    def __init__(self):
        from cupyops.core import modules as _modules
        from cupyops.tools import nvrtc as _nvrtc
        _nvrtc.load_family_modules()
        self.owner = {}                 # name expression -> (family name, dtype, its module)
        for fam in _modules.families().values():
            for dt in fam.dtypes:
                for group in fam.modules_for(dt):
                    for e in group:
                        self.owner.setdefault(e, (fam.name, dt, tuple(group)))
        self._modules = {}
        self._paths = {}

    def module(self, family: str, dtype, arch: int, group: tuple):
        """SASS, lowered names and resources of the module holding ``group`` (the library's)."""
        key = (family, str(dtype), arch, group)
        m = self._modules.get(key)
        if m is None:
            from cupyops.tools import nvrtc as _nvrtc
            _, (source, arch_, options, exprs) = _nvrtc.job_for(family, dtype, arch, exprs=group)
            sass, lowered = sass_for(source, arch_, options, exprs, filename="module.cu")
            stats = _nvrtc.compile_many([(family, dtype, arch, group)])[0].kernels
            m = self._modules[key] = (parse_sass(sass), lowered, stats)
        return m

    def path(self, expr: str, arch: int, width: int | None) -> dict:
        """The issue-rate model of ``expr``'s input path on ``arch`` for loads up to
        ``width`` bytes (all when None or when no path is left), plus its resources."""
        key = (expr, arch, width)
        p = self._paths.get(key)
        if p is None:
            family, dt, group = self.owner[expr]
            funcs, lowered, stats = self.module(family, dt, arch, group)
            instrs = funcs.get(lowered[expr], [])
            if expr.split("<", 1)[0] in NON_INPUT_KERNELS:
                m = {"kind": "none"}
            else:
                m = model_function(instrs, dt.itemsize, width)
                if m["kind"] == "none" and width is not None:
                    m = model_function(instrs, dt.itemsize)
            st = stats[expr]
            p = self._paths[key] = {"model": m, "itemsize": dt.itemsize, "family": family,
                                    "dtype": str(dt), "registers": st.registers,
                                    "shared_static": st.shared_static}
        return p


# --------------------------------------------------------------------------------------------
# Records
# --------------------------------------------------------------------------------------------

def _launch_terms(models: KernelModels, launch: dict, arch: int, device=None) -> dict:
    itemsize = models.path(launch["kernel"], arch, None)["itemsize"]
    width = planned_load_width(launch["params"], itemsize)
    p = models.path(launch["kernel"], arch, width)
    m = p["model"]
    none = m["kind"] == "none"
    per_thread = 0.0 if none else m["elements"] * p["itemsize"]
    blocks = math.prod(launch["grid"])
    threads = math.prod(launch["block"])
    res = resident_threads(p["registers"], threads, arch,
                           p["shared_static"] + launch["shared_mem"], blocks, device)
    return {
        "bytes_in_flight_per_sm": bytes_in_flight_per_sm(per_thread, res["resident_threads"]),
        "bytes_in_flight_per_sm_launched": bytes_in_flight_per_sm(
            per_thread, res["resident_threads_launched"]),
        "requests_per_unique_sector": requests_per_unique_sector(
            launch["sectors_load"], launch["unique_sectors_load"]),
        "family": p["family"], "dtype": p["dtype"], "load_width": width,
        "path": "none" if none else f"{m['kind']} {m['start']}-{m['end']}",
        "loads_per_iteration": 0 if none else m["input_loads"],
        "bytes_per_thread_per_iteration": per_thread,
        "issue_rate": None if none else m["fraction_of_copy_bandwidth"],
        "blocks": blocks, "threads_per_block": threads, "registers": p["registers"],
        "shared_bytes": p["shared_static"] + launch["shared_mem"],
        "occupancy_blocks_per_sm": res["blocks_per_sm"],
        "resident_threads_per_sm": res["resident_threads"],
        "resident_threads_per_sm_launched": res["resident_threads_launched"],
        "sectors_load": launch["sectors_load"],
        "unique_sectors_load": launch["unique_sectors_load"],
        "shared_wavefronts_per_access": (launch["shared_wavefronts"] / launch["shared_accesses"]
                                         if launch["shared_accesses"] else None),
    }


def layout_records(models: KernelModels, layout: Layout, launches: list,
                   archs=(90, 80), device=None) -> list:
    """One record per (arch, kernel, pass) of ``layout``'s launches (see the module doc); the
    goals and launch caps of ``device``'s arch are ``device``'s (default the H100's)."""
    groups: dict = {}
    for ln in launches:
        groups.setdefault((ln["kernel"], ln["pass"]), []).append(ln)
    out = []
    for arch in archs:
        for (kernel, pass_), lns in groups.items():
            terms = [_launch_terms(models, ln, arch, device) for ln in lns]
            worst = min(terms, key=lambda t: t["bytes_in_flight_per_sm"])
            rec = {"arch": f"sm_{arch}", "kernel": kernel, "layout": layout.id, "pass": pass_,
                   "op": layout.op, "launches": len(lns),
                   "input_bytes": lns[0]["input_bytes"],
                   "goal_bytes_in_flight_per_sm": in_flight_goal(1 << 62, arch, device),
                   "goal_bytes_in_flight_per_sm_launched":
                       in_flight_goal(lns[0]["input_bytes"], arch, device)}
            rec.update(worst)
            rec["bytes_in_flight_per_sm"] = worst["bytes_in_flight_per_sm"]
            rec["bytes_in_flight_per_sm_launched"] = min(
                t["bytes_in_flight_per_sm_launched"] for t in terms)
            rec["requests_per_unique_sector"] = max(t["requests_per_unique_sector"]
                                                    for t in terms)
            out.append(rec)
    return out


def memory_records(layouts: list, archs=(90, 80), *, progress=None, device=None) -> list:
    """The records of every layout (run on simt), in layout order, with ``device``'s goals."""
    models = KernelModels()
    out = []
    t0 = time.perf_counter()
    for k, lay in enumerate(layouts):
        launches = run_layout(lay)
        out.extend(layout_records(models, lay, launches, archs, device))
        if progress:
            progress(k, len(layouts), lay.id, time.perf_counter() - t0)
    return out


def in_flight_goal(input_bytes: int, arch: int = 90, device=None) -> float:
    """The launch-capped bytes in flight per SM a read pass of an ``input_bytes`` input can be
    asked for: what ``device`` needs (bandwidth x latency / SMs; default the H100's
    :data:`GOAL_IN_FLIGHT`, issue 26's 16 KiB; an H200 needs about 27 KiB), or the whole input
    spread over the SMs where that is less (an input under 132 x 16 KiB = 2.06 MiB cannot put
    16 KiB per SM in flight)."""
    goal = float(GOAL_IN_FLIGHT)
    if device is not None:
        dev = _device.from_name(device)
        if dev.arch == int(arch):
            goal = dev.in_flight_needed
    return min(goal, input_bytes / sms_of(arch, device))


def goal_misses(records: list) -> dict:
    """The read-pass records (sm_90) that miss a goal: ``in_flight`` (below
    :data:`GOAL_IN_FLIGHT`), ``requests`` (a nonzero call above :data:`GOAL_REQUESTS`), and for
    information ``in_flight_launched`` (the launch-capped figure below :func:`in_flight_goal`
    of the input's size)."""
    reads = [r for r in records if r["pass"] == "read" and r["arch"] == "sm_90"]
    return {
        "in_flight": [r for r in reads if r["bytes_in_flight_per_sm"]
                      < r.get("goal_bytes_in_flight_per_sm", GOAL_IN_FLIGHT)],
        "in_flight_launched": [r for r in reads if r["bytes_in_flight_per_sm_launched"]
                               < r.get("goal_bytes_in_flight_per_sm_launched",
                                       in_flight_goal(r["input_bytes"]))],
        "requests": [r for r in reads if r["op"] in NONZERO_OPS
                     and r["requests_per_unique_sector"] > GOAL_REQUESTS],
    }


def _num(rec, key, spec):
    if rec is None:
        return "-"
    v = rec[key]
    return f"{v / 1024:.2f}" if spec == "kib" else format(v, spec)


def _italic(text, low):
    return f"*{text}*" if low else text


def _bold(text, bad):
    return f"**{text}**" if bad else text


def render_memory_markdown(records: list) -> list:
    """Markdown lines: the memory-terms section (one row per layout, kernel and pass, sm_90
    and sm_80 side by side)."""
    by = {(r["layout"], r["kernel"], r["pass"], r["arch"]): r for r in records}
    keys = list(dict.fromkeys((r["layout"], r["kernel"], r["pass"]) for r in records))
    miss = goal_misses(records)
    reads = [r for r in records if r["pass"] == "read" and r["arch"] == "sm_90"]
    goal_kib = max((r.get("goal_bytes_in_flight_per_sm", GOAL_IN_FLIGHT) for r in reads),
                   default=GOAL_IN_FLIGHT) / 1024
    lines = [
        "## Memory terms: bytes in flight and L2 requests (issue 26)", "",
        "Generated with the table above from simt runs of the benchmark's cases (quick sizes) "
        "and the layouts issue 26 names (`cupyops/bench/issue_rate.py`, `--json` writes them "
        "as records). `B/thr/it`: input bytes one thread loads per iteration (the widths of "
        "the input's LDG instructions on the issue-rate path, for the load width the launch's "
        "plan reads); `threads/SM`: threads per block x blocks per SM from NVRTC's registers "
        f"and shared memory; `KiB/SM` = B/thr/it x threads/SM (goal: {goal_kib:.4g} KiB on "
        "sm_90: the device's bandwidth x latency / SMs); "
        "`launched`: the same with blocks per SM capped by the launch's grid (blocks / SMs, "
        f"132 SMs on sm_90, 108 on sm_80), against min({goal_kib:.4g} KiB, input bytes / SMs) "
        "(italic "
        "where below: the block count the planner chose is the limit); "
        "`req/sector`: simt's sectors_load / unique_sectors_load (0/0 = 1.0). A record is the "
        "worst launch of a kernel in a pass. Goals on `read` passes (bold where missed): "
        f"in flight >= {goal_kib:.4g} KiB on sm_90; <= {GOAL_REQUESTS} requests per unique "
        "sector for "
        "nonzero calls.", "",
        f"* read passes below {goal_kib:.4g} KiB in flight per SM on sm_90: "
        f"{len(miss['in_flight'])} of {len(reads)}; launch-capped below min({goal_kib:.4g} KiB, "
        f"input / SMs): {len(miss['in_flight_launched'])}",
        f"* nonzero read passes above {GOAL_REQUESTS} requests per unique sector: "
        f"{len(miss['requests'])} of {sum(1 for r in reads if r['op'] in NONZERO_OPS)}", "",
        "| layout | pass | kernel | blocks | B/thr/it | threads/SM sm_90 | KiB/SM sm_90 | "
        "launched KiB/SM sm_90 | KiB/SM sm_80 | req/sector |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for lay, kernel, pass_ in keys:
        a, b = by.get((lay, kernel, pass_, "sm_90")), by.get((lay, kernel, pass_, "sm_80"))
        r = a or b
        bad_f = (a is not None and pass_ == "read"
                 and a["bytes_in_flight_per_sm"] < a["goal_bytes_in_flight_per_sm"])
        low_l = (a is not None and pass_ == "read" and a["bytes_in_flight_per_sm_launched"]
                 < a["goal_bytes_in_flight_per_sm_launched"])
        bad_r = (pass_ == "read" and r["op"] in NONZERO_OPS
                 and r["requests_per_unique_sector"] > GOAL_REQUESTS)
        lines.append(
            f"| {lay} | {pass_} | `{kernel}` | {r['blocks']} | "
            f"{r['bytes_per_thread_per_iteration']:g} | "
            f"{_num(a, 'resident_threads_per_sm', '.1f')} | "
            f"{_bold(_num(a, 'bytes_in_flight_per_sm', 'kib'), bad_f)} | "
            f"{_italic(_num(a, 'bytes_in_flight_per_sm_launched', 'kib'), low_l)} | "
            f"{_num(b, 'bytes_in_flight_per_sm', 'kib')} | "
            f"{_bold(format(r['requests_per_unique_sector'], '.2f'), bad_r)} |")
    lines.append("")
    return lines


def print_memory_progress(k: int, n: int, label: str, secs: float) -> None:
    print(f"[{k + 1}/{n}] {label} ({secs:.0f} s)", file=sys.stderr, flush=True)


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


def render_markdown(rows: list, memory: list | None = None) -> str:
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
    if memory:
        lines += render_memory_markdown(memory)
    lines.append(DOC_END)
    return "\n".join(lines) + "\n"


def update_doc(path, rows: list, memory: list | None = None) -> None:
    """Replace (or append) the issue-rate section of ``path`` between its markers."""
    p = Path(path)
    text = p.read_text() if p.exists() else ""
    block = render_markdown(rows, memory)
    i = text.find(DOC_BEGIN.split(" (")[0])
    j = text.find(DOC_END)
    if i >= 0 and j > i:
        text = text[:i] + block + text[j + len(DOC_END):].lstrip("\n")
    else:
        text = text.rstrip("\n") + "\n\n" + block
    p.write_text(text)


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m cupyops.bench.issue_rate",
                                 description="SASS issue-rate model of every kernel instantiation, "
                                             "and the memory terms of every benchmark layout")
    ap.add_argument("--arch", action="append", type=int, help="default: 90 and 80")
    ap.add_argument("--family", action="append")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--table", metavar="DOC", help="write the markdown section into DOC")
    ap.add_argument("--json", metavar="PATH",
                    help="write the memory-term records (a JSON list, one per arch, kernel, "
                         "layout and pass: the memory terms)")
    ap.add_argument("--rows-json", metavar="PATH",
                    help="write the per-instantiation issue-rate rows ({summary, rows})")
    ap.add_argument("--layouts", default="quick",
                    choices=("tiny", "small", "quick", "full", "named", "none"),
                    help="the benchmark's size set whose cases (plus the layouts issue 26 names) "
                         "the memory terms run on simt; named: only those; none: no memory "
                         "terms (default quick)")
    ap.add_argument("--no-cache", action="store_true")
    ap.add_argument("--device-model", default=None, metavar="NAME",
                    help="the device the figures and goals are for: h100 (default), h200, a100 "
                         "(cupyops/bench/device_model.py)")
    return ap


def _memory_records(args, archs) -> list:
    if args.layouts == "none":
        return []
    layouts = [] if args.layouts == "named" else bench_layouts(args.layouts)
    layouts += NAMED_LAYOUTS()
    return memory_records(layouts, archs, progress=print_memory_progress,
                          device=args.device_model)


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    ok, why = available()
    if not ok:
        print(f"issue-rate model unavailable: {why}", file=sys.stderr)
        return 2

    def progress(k, n, job, secs):
        print(f"[{k + 1}/{n}] {job[0]} {job[1]} sm_{job[2]} ({secs:.0f} s)", file=sys.stderr,
              flush=True)
    archs = tuple(args.arch or (90, 80))
    t0 = time.perf_counter()
    rows = instantiation_report(archs, args.family, jobs=args.jobs,
                                cache_dir=False if args.no_cache else None, progress=progress,
                                device=args.device_model)
    memory = _memory_records(args, archs) if (args.json or args.table) else []
    if args.json:
        Path(args.json).write_text(json.dumps(memory, indent=1))
    if args.rows_json:
        Path(args.rows_json).write_text(json.dumps({"summary": summary(rows), "rows": rows},
                                                   indent=1))
    if args.table:
        update_doc(args.table, rows, memory)
    if not (args.json or args.table or args.rows_json):
        sys.stdout.write(render_markdown(rows))
    print(f"issue-rate model: {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
