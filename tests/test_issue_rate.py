"""The issue-rate model (cupyops/bench/issue_rate.py) on kernels whose counts are known.

The first group needs nothing: hand-written SASS text through the parser, the path finder and
the arithmetic. The second compiles hand-written CUDA kernels with NVRTC and disassembles them
with cuobjdump (the ``test`` extra installs both); it is skipped, with the reason, where they
are missing.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from cupyops.bench import issue_rate as ir
from cupyops.bench.traffic import H100_BANDWIDTH

ROOT = Path(__file__).resolve().parents[1]


def _fraction(itemsize, clocks_per_element):
    return itemsize * ir.H100_SMS * ir.H100_CLOCK_HZ / clocks_per_element / H100_BANDWIDTH


# --------------------------------------------------------------------------------------------
# Without tools: SASS text by hand
# --------------------------------------------------------------------------------------------

def _sass(body: list, name="_Z1kPKi") -> str:
    lines = ["", "\tcode for sm_90", f"\t\tFunction : {name}",
             '\t.headerflags\t@"EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"']
    for k, ins in enumerate(body):
        lines.append(f"        /*{16 * k:04x}*/                   {ins} ;"
                     f"                    /* 0x000fe20000000f00 */")
        lines.append("                                 /* 0x000fe20000000f00 */")
    return "\n".join(lines) + "\n"


def _loop_sass(extra_alu: int, skipped: int = 0) -> str:
    """A loop: one LDG.E.CONSTANT, ``extra_alu`` IADD3s, a forward branch over ``skipped``
    instructions (a rare path), the counter update and the backward branch; then EXIT."""
    body = ["MOV R1, c[0x0][0x28]", "S2R R0, SR_TID.X"]
    head = len(body)
    body.append("LDG.E.CONSTANT R4, desc[UR4][R2.64]")
    body += [f"IADD3 R{5 + k % 4}, R4, R{5 + k % 4}, RZ" for k in range(extra_alu)]
    after = len(body) + 1 + skipped
    body.append(f"@P1 BRA 0x{16 * after:x}")
    body += [f"IMAD R{8 + k % 4}, R4, R9, R10" for k in range(skipped)]
    body += ["IADD3 R0, R0, 0x100, RZ", "ISETP.GE.AND P0, PT, R0, R3, PT",
             f"@!P0 BRA 0x{16 * head:x}", "EXIT", "BRA 0x0"]
    return _sass(body)


def test_parse_sass_functions_predicates_and_targets():
    funcs = ir.parse_sass(_loop_sass(3, 2))
    (name, ins), = funcs.items()
    assert name == "_Z1kPKi"
    assert ins[2].opcode == "LDG.E.CONSTANT" and ins[2].pipe == "lsu"
    bra = [i for i in ins if i.base == "BRA"]
    assert bra[0].pred == "P1" and bra[0].branch_target() > bra[0].addr
    assert bra[1].pred == "!P0" and bra[1].branch_target() == ins[2].addr
    assert not bra[0].unconditional and bra[-1].unconditional


def test_pipes_and_widths():
    assert ir.pipe_of("IADD3.X") == "alu"
    assert ir.pipe_of("LOP3.LUT") == "alu"
    assert ir.pipe_of("IMAD.MOV.U32") == "fma64"
    assert ir.pipe_of("FFMA.FTZ") == "fma"
    assert ir.pipe_of("SHFL.BFLY") == "lsu"
    assert ir.pipe_of("POPC") == "xu"
    assert ir.pipe_of("ULDC.64") == "uniform"
    assert ir.pipe_of("DSETP.GT.AND") == "fp64"
    assert ir.PIPES["alu"] == 64 and ir.PIPES["fma"] == 128 and ir.PIPES["lsu"] == 32
    mk = lambda op: ir.Instr(0, "", op, "", op)
    assert ir.input_load_bytes(mk("LDG.E.U8.CONSTANT")) == 1
    assert ir.input_load_bytes(mk("LDG.E.U16.CONSTANT")) == 2
    assert ir.input_load_bytes(mk("LDG.E.CONSTANT")) == 4
    assert ir.input_load_bytes(mk("LDG.E.64.CONSTANT")) == 8
    assert ir.input_load_bytes(mk("LDG.E.128.CONSTANT")) == 16
    assert ir.input_load_bytes(mk("LDG.E.64.STRONG.SYS")) == 0     # a status word
    assert ir.input_load_bytes(mk("LDG.E.64")) == 0                 # not read-only input
    assert ir.input_load_bytes(mk("STG.E")) == 0


@pytest.mark.parametrize("extra, skipped", [(0, 0), (6, 0), (6, 9), (20, 3)])
def test_loop_path_counts_by_hand(extra, skipped):
    funcs = ir.parse_sass(_loop_sass(extra, skipped))
    m = ir.model_function(next(iter(funcs.values())), 4)
    assert m["kind"] == "loop" and m["elements"] == 1 and m["input_loads"] == 1
    # LDG + extra IADD3 + @P1 BRA + IADD3 + ISETP + @!P0 BRA; the skipped IMADs are off the path
    assert m["instructions"] == extra + 5
    assert m["pipes"] == {"lsu": 1, "alu": extra + 2, "cbu": 2}
    per_pipe = {"lsu": 1 / 32, "alu": (extra + 2) / 64, "cbu": 2 / 64, "issue": (extra + 5) / 128}
    assert m["clocks_per_element"] == pytest.approx(per_pipe)
    cpe = max(per_pipe.values())
    assert m["busiest_pipe"] == max(per_pipe, key=per_pipe.get)
    assert m["busiest_pipe"] == ("issue" if extra == 0 else "alu")
    assert m["fraction_of_copy_bandwidth"] == pytest.approx(_fraction(4, cpe))


def test_tile_without_loop_and_no_input():
    body = ["S2R R0, SR_TID.X"] + ["LDG.E.U8.CONSTANT R%d, desc[UR4][R2.64+0x%x]" % (4 + k, 32 * k)
                                   for k in range(4)]
    body += ["LOP3.LUT R9, R4, R5, R6, 0xfe, !PT", "ISETP.NE.AND P0, PT, R9, RZ, PT",
             "@P0 BRA 0x%x" % (16 * (len(body) + 4)), "STG.E desc[UR4][R2.64], R9", "EXIT",
             "EXIT"]
    m = ir.model_function(next(iter(ir.parse_sass(_sass(body)).values())), 1)
    assert m["kind"] == "tile" and m["elements"] == 4
    # the path skipping the store is shorter: S2R + 4 LDG + LOP3 + ISETP + BRA + EXIT
    assert m["instructions"] == 9
    none = ir.model_function(next(iter(ir.parse_sass(_sass(
        ["LDG.E.64 R4, desc[UR4][R2.64]", "STG.E.64 desc[UR4][R6.64], R4", "EXIT"])).values())), 8)
    assert none == {"kind": "none"}


def test_complementary_predicated_loads_count_once():
    # a complex64 element read either as one 8-byte word (@P0) or as two 4-byte halves (@!P0)
    body = ["LDG.E.CONSTANT R8, desc[UR4][R2.64]"]
    head = 0
    body = ["@P0 LDG.E.64.CONSTANT R4, desc[UR4][R2.64]",
            "@!P0 LDG.E.CONSTANT R4, desc[UR4][R2.64]",
            "@!P0 LDG.E.CONSTANT R5, desc[UR4][R2.64+0x4]",
            "IADD3 R6, R4, R5, RZ", "@!P1 BRA 0x%x" % (16 * head), "EXIT"]
    m = ir.model_function(next(iter(ir.parse_sass(_sass(body)).values())), 8)
    assert m["elements"] == 1 and m["input_loads"] == 3


def test_widest_loop_is_the_steady_state():
    # loop A: 4 scalar loads (16 bytes); loop B: one 16-byte load (16 bytes) and more ALU;
    # loop C: one scalar load. B is the steady state (same bytes, widest load).
    a = ["LDG.E.CONSTANT R%d, desc[UR4][R2.64+0x%x]" % (4 + k, 4 * k) for k in range(4)]
    a += ["IADD3 R8, R4, R5, R6", "@!P0 BRA 0x0"]
    b0 = len(a)
    b = ["LDG.E.128.CONSTANT R12, desc[UR4][R2.64]"] + ["IMNMX R9, R12, R9, !PT"] * 12
    b += ["@!P1 BRA 0x%x" % (16 * b0)]
    c0 = b0 + len(b)
    c = ["LDG.E.CONSTANT R4, desc[UR4][R2.64]", "IMNMX R9, R4, R9, !PT", "@!P2 BRA 0x%x" % (16 * c0),
         "EXIT"]
    m = ir.model_function(next(iter(ir.parse_sass(_sass(a + b + c)).values())), 4)
    assert m["kind"] == "loop" and m["widest_load_bytes"] == 16 and m["input_loads"] == 1
    assert m["start"] == hex(16 * b0) and m["elements"] == 4
    assert len(m["candidates"]) == 3 and m["steady_loops"] == 1
    assert m["pipes"] == {"lsu": 1, "alu": 12, "cbu": 1}


def test_pyproject_pins_cuobjdump_and_nvdisasm_to_nvrtc_minor():
    text = (ROOT / "pyproject.toml").read_text()
    pins = {}
    for pkg in ("nvidia-cuda-nvrtc", "nvidia-cuda-cuobjdump", "nvidia-cuda-nvdisasm"):
        m = re.search(r'"%s==(\d+)\.(\d+)\.\*"' % re.escape(pkg), text)
        assert m, f"{pkg} is not pinned to a CUDA minor version in pyproject.toml"
        pins[pkg] = m.groups()
    assert len(set(pins.values())) == 1, pins
    from importlib import metadata
    try:
        got = {p: tuple(metadata.version(p).split(".")[:2]) for p in pins}
    except metadata.PackageNotFoundError:
        return
    assert len(set(got.values())) == 1, f"installed minors differ: {got}"


# --------------------------------------------------------------------------------------------
# With NVRTC + cuobjdump: compiled kernels
# --------------------------------------------------------------------------------------------

_OK, _WHY = ir.available()
needs_tools = pytest.mark.skipif(not _OK, reason=f"issue-rate tools unavailable: {_WHY}")


def _chain(n):
    # v = ((v ^ a) + b) ^ a ... : xor and add alternate, so neither LOP3 nor IADD3 can merge two
    ops = []
    for k in range(n):
        ops.append(f"v = (v ^ a{k % 4}) + b{k % 4};")
    return "\n        ".join(ops)


def _iadd_kernel(n):
    return f"""
extern "C" __global__ void k_chain{n}(const unsigned* __restrict__ x, unsigned* out, int count,
    unsigned a0, unsigned a1, unsigned a2, unsigned a3,
    unsigned b0, unsigned b1, unsigned b2, unsigned b3)
{{
    unsigned acc = 0;
#pragma unroll 1
    for (int i = threadIdx.x; i < count; i += 256) {{
        unsigned v = x[i];
        {_chain(n)}
        acc += v;
    }}
    out[threadIdx.x] = acc;
}}
"""


SHFL_KERNEL = """
extern "C" __global__ void k_shfl(const float* __restrict__ x, float* out, int count)
{
    float acc = 0.f;
#pragma unroll 1
    for (int i = threadIdx.x; i < count; i += 256) {
        float v = x[i];
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 4));
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 8));
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 16));
        acc += v;
    }
    out[threadIdx.x] = acc;
}
"""

VEC_KERNEL = """
extern "C" __global__ void k_vec(const uint4* __restrict__ x, unsigned* out, int count)
{
    unsigned acc = 0;
#pragma unroll 1
    for (int i = threadIdx.x; i < count; i += 256) {
        const uint4 v = x[i];
        acc = max(acc, max(max(v.x, v.y), max(v.z, v.w)));
    }
    out[threadIdx.x] = acc;
}
"""

TILE_KERNEL = """
extern "C" __global__ void k_tile(const unsigned char* __restrict__ x, unsigned* out)
{
    const unsigned char* p = x + blockIdx.x * 1024 + threadIdx.x;
    unsigned n = 0;
#pragma unroll
    for (int j = 0; j < 4; ++j) n += p[j * 256] != 0;
    out[blockIdx.x * 256 + threadIdx.x] = n;
}
"""


def _model(source, exprs, itemsize, arch=90, tmp_path=None):
    return ir.model_source(source, arch, tuple(exprs), itemsize, options=("--std=c++17",),
                           cache_dir=tmp_path)


@needs_tools
def test_chain_of_integer_ops_counts_one_alu_per_op(tmp_path):
    models = {n: _model(_iadd_kernel(n), [f"k_chain{n}"], 4, tmp_path=tmp_path)[f"k_chain{n}"]
              for n in (8, 24)}
    for n, m in models.items():
        assert m["kind"] == "loop" and m["elements"] == 1 and m["input_loads"] == 1
        assert m["opcodes"].get("LOP3", 0) >= n // 2, m["opcodes"]
        assert m["busiest_pipe"] == "alu"
        assert m["fraction_of_copy_bandwidth"] == pytest.approx(
            _fraction(4, m["pipes"]["alu"] / 64))
    # 16 more (xor, add) pairs: exactly 32 more ALU instructions on the loop's path
    assert models[24]["pipes"]["alu"] - models[8]["pipes"]["alu"] == 32
    assert models[24]["instructions"] - models[8]["instructions"] == 32
    assert models[24]["fraction_of_copy_bandwidth"] < models[8]["fraction_of_copy_bandwidth"]


@needs_tools
def test_shuffle_loop_is_lsu_bound(tmp_path):
    m = _model(SHFL_KERNEL, ["k_shfl"], 4, tmp_path=tmp_path)["k_shfl"]
    assert m["kind"] == "loop" and m["elements"] == 1
    # the converged path (BRA.DIV's fall-through), not the divergent fallback
    assert m["opcodes"]["SHFL"] == 5 and m["opcodes"]["LDG"] == 1
    assert "WARPSYNC" not in m["opcodes"]
    assert m["pipes"]["lsu"] == 6 and m["busiest_pipe"] == "lsu"
    # 6 LSU instructions at 32 per clock: 6/32 clocks per 4-byte element
    assert m["fraction_of_copy_bandwidth"] == pytest.approx(_fraction(4, 6 / 32))


@needs_tools
def test_vector_load_loop(tmp_path):
    m = _model(VEC_KERNEL, ["k_vec"], 4, tmp_path=tmp_path)["k_vec"]
    assert m["kind"] == "loop" and m["input_loads"] == 1 and m["widest_load_bytes"] == 16
    assert m["elements"] == 4                      # one 16-byte load = 4 four-byte elements
    assert m["instructions_per_element"] == pytest.approx(m["instructions"] / 4)
    assert m["opcodes"].get("VIMNMX", 0) + m["opcodes"].get("IMNMX", 0) >= 2   # 3-input max
    assert m["busiest_pipe"] in ("alu", "issue")


@needs_tools
def test_tile_kernel_and_sm80(tmp_path):
    for arch in (90, 80):
        m = _model(TILE_KERNEL, ["k_tile"], 1, arch=arch, tmp_path=tmp_path)["k_tile"]
        assert m["kind"] == "tile" and m["elements"] == 4 and m["input_loads"] == 4


@needs_tools
def test_cache_reuses_the_disassembly(tmp_path):
    src = _iadd_kernel(4)
    ir.sass_for(src, 90, ("--std=c++17",), ("k_chain4",), cache_dir=tmp_path)
    files = list(tmp_path.glob("*.json"))
    assert len(files) == 1
    files[0].write_text(files[0].read_text().replace("LOP3", "LOP3"))   # untouched, readable
    sass, lowered = ir.sass_for(src, 90, ("--std=c++17",), ("k_chain4",), cache_dir=tmp_path)
    assert lowered == {"k_chain4": "k_chain4"} and "LDG.E.CONSTANT" in sass


@needs_tools
def test_real_family_row_kernel_uses_its_16_byte_loop():
    rows = ir._family_job(("argreduce", "int8", 90, str(ir.default_cache_dir())))
    assert rows["ok"], rows
    by = {r["kernel"]: r for r in rows["rows"]}
    row = by["argreduce_row<signed char, int, 16>"]
    assert row["kind"] == "loop" and row["widest_load_bytes"] == 16 and row["elements"] == 16
    assert by["argreduce_finish<signed char, int>"]["kind"] == "none"
    col = by["argreduce_col<signed char, int, 4>"]
    assert col["kind"] == "loop" and col["widest_load_bytes"] == 4 and col["elements"] == 16


@needs_tools
def test_every_segment_kernel_is_modelled():
    """Issue 35: the issue-rate model covers the segment kernels. For a 4-byte and a 1-byte
    dtype every name expression of the family has a row, and each found the loop that reads x
    (kind "loop": x is read through the read-only path, LDG...CONSTANT, which is how the model
    knows the input's loads; with plain loads every row was "none")."""
    import numpy as np
    from cupyops.ops.segment import family
    for dt in ("float32", "int8"):
        res = ir._family_job(("segment", dt, 90, str(ir.default_cache_dir())))
        assert res["ok"], res
        by = {r["kernel"]: r for r in res["rows"]}
        assert set(by) == set(family.expressions(np.dtype(dt)))
        assert [k for k, r in by.items() if r["kind"] != "loop"] == []
        assert all(r["widest_load_bytes"] == np.dtype(dt).itemsize for r in by.values())


def test_bench_issue_rate_flag_puts_the_figures_into_the_json(tmp_path, monkeypatch, capsys):
    import json
    from cupyops.bench import bench
    row = {"family": "argreduce", "dtype": "int8", "arch": 90, "kernel": "argreduce_row<signed char, int>",
           "itemsize": 1, "kind": "loop", "busiest_pipe": "alu", "fraction_of_copy_bandwidth": 0.39}
    monkeypatch.setattr(ir, "available", lambda: (True, ""))
    monkeypatch.setattr(ir, "instantiation_report", lambda archs, *a, **k: [row])
    out = tmp_path / "b.json"
    rc = bench.main(["--device", "cpu", "--tiny", "--cases", "argmax/last tie=first/float32",
                     "--no-cold", "--no-overhead", "--no-peers", "--quiet", "--issue-rate",
                     "--json", str(out)])
    assert rc == 0
    data = json.loads(out.read_text())
    assert data["issue_rate"]["rows"] == [row]
    assert data["issue_rate"]["summary"]["sm_90"]["meet_goal"] == 0
    assert "issue-rate model" in capsys.readouterr().out


def test_loads_merged_by_address():
    # complex64 read as one 8-byte word (@P0) and as two 4-byte halves (@P1): predicates that
    # are not complementary, one element
    body = ["@P0 LDG.E.64.CONSTANT R4, desc[UR4][R2.64]",
            "@P1 LDG.E.CONSTANT R6, desc[UR4][R2.64]",
            "@P1 LDG.E.CONSTANT R7, desc[UR4][R2.64+0x4]",
            "IADD3 R8, R4, R6, R7", "@!P2 BRA 0x0", "EXIT"]
    m = ir.model_function(next(iter(ir.parse_sass(_sass(body)).values())), 8)
    assert m["elements"] == 1 and m["input_loads"] == 3
    # the same register after it is advanced names another element
    body = ["LDG.E.CONSTANT R4, desc[UR4][R2.64]", "IADD3 R2, P3, R2, 0x100, RZ",
            "IADD3.X R3, RZ, R3, RZ, P3, !PT", "LDG.E.CONSTANT R5, desc[UR4][R2.64]",
            "LDG.E.CONSTANT R6, desc[UR4][R2.64+0x200]",
            "IADD3 R8, R4, R5, R6", "@!P2 BRA 0x0", "EXIT"]
    m = ir.model_function(next(iter(ir.parse_sass(_sass(body)).values())), 4)
    assert m["elements"] == 3 and m["input_loads"] == 3
