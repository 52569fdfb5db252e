"""The memory terms of the kernel model (cupyops/bench/issue_rate.py, issue 26): bytes in flight
per SM from the SASS path and the occupancy, L1->L2 requests per unique sector from simt's
launch records, and the JSON records of ``python -m cupyops.bench.issue_rate --json``.

The formula tests need nothing (hand-written SASS); the simt tests need the C++ compiler simt
uses; the record tests also NVRTC + cuobjdump (skipped, with the reason, where missing).
"""
from __future__ import annotations

import json

import numpy as np
import pytest

from cupyops.bench import issue_rate as ir
from cupyops.tools import nvrtc


def _sass(body: list, name="_Z1kPKh") -> str:
    lines = ["", "\tcode for sm_90", f"\t\tFunction : {name}"]
    for k, ins in enumerate(body):
        lines.append(f"        /*{16 * k:04x}*/                   {ins} ;"
                     f"                    /* 0x000fe20000000f00 */")
    return "\n".join(lines) + "\n"


def _two_path_kernel():
    """Loop A (a 16-byte path with a guarded byte-wise fallback for straddling words), then
    loop B (the scalar path: two 1-byte loads per iteration), then EXIT."""
    a = ["@P3 BRA 0x%x" % (16 * 6),                                   # 0: the fallback?
         "LDG.E.128.CONSTANT R4, desc[UR4][R2.64]",                    # 1
         "LOP3.LUT R8, R4, R5, R6, 0xfe, !PT",                         # 2
         "LOP3.LUT R8, R8, R7, RZ, 0xfc, !PT",                         # 3
         "POPC R9, R8", "BRA 0x%x" % (16 * 7),                         # 4, 5
         "LDG.E.U8.CONSTANT R4, desc[UR4][R2.64]",                     # 6: the fallback
         "@!P0 BRA 0x0"]                                                # 7: back to A
    b0 = len(a)
    b = ["LDG.E.U8.CONSTANT R10, desc[UR4][R12.64]",
         "LDG.E.U8.CONSTANT R11, desc[UR4][R12.64+0x100]",
         "IADD3 R9, R10, R11, R9", "@!P1 BRA 0x%x" % (16 * b0), "EXIT"]
    return next(iter(ir.parse_sass(_sass(a + b)).values()))


def test_loads_per_iteration_come_from_the_path_of_the_planned_width():
    instrs = _two_path_kernel()
    wide = ir.model_function(instrs, 1)
    assert wide["kind"] == "loop" and wide["start"] == "0x0"
    assert wide["elements"] == 16 and wide["input_loads"] == 1
    # a plan of 1-byte words: loop A holds a 16-byte load, so it is the wider plan's (its
    # byte-wise fallback does not make it the scalar loop); loop B: two 1-byte loads
    narrow = ir.model_function(instrs, 1, max_load_width=1)
    assert narrow["kind"] == "loop" and narrow["start"] == hex(16 * 8)
    assert narrow["elements"] == 2 and narrow["input_loads"] == 2
    assert ir.model_function(instrs, 1, max_load_width=16) == wide


def test_capped_tile_path_avoids_the_wide_branch():
    body = ["@P0 BRA 0x%x" % (16 * 4),
            "LDG.E.128.CONSTANT R4, desc[UR4][R2.64]", "LOP3.LUT R8, R4, R5, R6, 0xfe, !PT",
            "BRA 0x%x" % (16 * 8)]
    body += ["LDG.E.CONSTANT R%d, desc[UR4][R2.64+0x%x]" % (4 + k, 0x100 * k) for k in range(3)]
    body += ["LOP3.LUT R8, R4, R5, R6, 0xfe, !PT", "STG.E desc[UR4][R2.64], R8", "EXIT"]
    instrs = next(iter(ir.parse_sass(_sass(body)).values()))
    assert ir.model_function(instrs, 4)["elements"] == 4          # the 16-byte branch
    m = ir.model_function(instrs, 4, max_load_width=4)
    assert m["kind"] == "tile" and m["elements"] == 3 and m["input_loads"] == 3


def test_resident_threads_and_bytes_in_flight_formula():
    # 32 registers, 256 threads, no shared memory: 8 blocks per SM on sm_90 (2048 threads)
    occ = nvrtc.occupancy(32, 256, 90)
    assert occ.blocks_per_sm == 8
    many = ir.resident_threads(32, 256, 90, 0, blocks=10_000)
    assert many["blocks_per_sm"] == 8 and many["resident_threads"] == 2048
    assert ir.bytes_in_flight_per_sm(64, many["resident_threads"]) == 64 * 2048
    # one block: the kernel's capacity stays 2048 threads; the launch-capped figure is 256
    # threads over 132 SMs (sm_90) or 108 (sm_80)
    one = ir.resident_threads(32, 256, 90, 0, blocks=1)
    assert one["resident_threads"] == 2048
    assert one["resident_threads_launched"] == pytest.approx(256 / 132)
    assert ir.resident_threads(32, 256, 80, 0, blocks=1)["resident_threads_launched"] == \
        pytest.approx(256 / 108)
    # registers limit: 128 registers x 256 threads = 32 K registers a block: 2 blocks per SM
    regs = ir.resident_threads(128, 256, 90, 0, blocks=10_000)
    assert regs["blocks_per_sm"] == 2 and regs["limiter"] == "registers"
    assert regs["resident_threads"] == 512
    # shared memory limits: 100 KiB a block, 228 KiB an SM on sm_90
    sh = ir.resident_threads(32, 256, 90, 100 * 1024, blocks=10_000)
    assert sh["blocks_per_sm"] == 2 and sh["limiter"] == "shared"
    # the launch caps: 264 blocks on 132 SMs is 2 blocks an SM although 8 would fit
    assert ir.resident_threads(32, 256, 90, 0, blocks=264)["resident_threads_launched"] == 512
    assert ir.resident_threads(32, 256, 90, 0, blocks=264)["resident_threads"] == 2048


def test_requests_per_unique_sector_formula():
    assert ir.requests_per_unique_sector(320, 10) == 32.0
    assert ir.requests_per_unique_sector(10, 10) == 1.0
    assert ir.requests_per_unique_sector(0, 0) == 1.0
    with pytest.raises(ValueError):
        ir.requests_per_unique_sector(5, 0)


def test_planned_load_width_from_params():
    nz = np.zeros((), [("narrow_loads", "<i4"), ("vec", "<i4"), ("tr_vec", "<i4")])[()]
    assert ir.planned_load_width(nz, 1) == 1
    nz["tr_vec"] = 1
    assert ir.planned_load_width(nz, 1) == 16
    nz["tr_vec"], nz["narrow_loads"] = 0, 1
    assert ir.planned_load_width(nz, 8) == 4
    ar = np.zeros((), [("vec", "<i4"), ("narrow_in", "<i4")])[()]
    ar["vec"] = 4
    assert ir.planned_load_width(ar, 4) == 16
    ar["vec"] = 1
    assert ir.planned_load_width(ar, 2) == 2
    assert ir.planned_load_width(None, 4) is None
    assert ir.pass_of("argreduce_finish<float, int>", False) == "finish"
    assert ir.pass_of("nonzero_tiles<float, false>", True) == "read"
    assert ir.pass_of("some_write<float>", False) == "write"


# --------------------------------------------------------------------------------------------
# simt: requests per unique sector of a known-good and a known-bad launch
# --------------------------------------------------------------------------------------------

READ_KERNEL = r"""
extern "C" __global__ void rows(const unsigned char* __restrict__ x, unsigned* out, int n, int m)
{
    // thread t of the grid reads byte t of every row: a warp reads 32 neighbouring bytes
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned s = 0;
    for (int r = 0; r < n; ++r) s += x[(long)r * m + t];
    out[t] = s;
}
extern "C" __global__ void cols(const unsigned char* __restrict__ x, unsigned* out, int n, int m)
{
    // thread t reads row t: a warp's lanes are m bytes apart (32 sectors a request)
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned s = 0;
    for (int c = 0; c < m; ++c) s += x[(long)t * m + c];
    out[t] = s;
}
"""


def _simt_requests(name):
    simt = pytest.importorskip("cupyops.simt")
    try:
        mod = simt.RawModule(code=READ_KERNEL)
    except Exception as e:     # no C++ compiler
        pytest.skip(f"simt unavailable: {e}")
    n = m = 256
    raw = np.ones(n * m + 256, np.uint8)
    off = (-raw.__array_interface__["data"][0]) % 256       # sector-aligned, as CuPy allocates
    x = raw[off:off + n * m].reshape(n, m)
    out = np.zeros(256, np.uint32)
    with simt.record_traffic() as rec:
        mod.get_function(name)((2,), (128,), (x, out, np.int32(n), np.int32(m)))
    assert out.tolist() == [256] * 256
    (t,) = rec.launches
    return ir.requests_per_unique_sector(t.sectors_load, t.unique_sectors_load), t


def test_requests_per_unique_sector_of_a_coalesced_launch():
    r, t = _simt_requests("rows")
    assert t.unique_sectors_load == 256 * 256 // 32
    assert r == pytest.approx(1.0)


def test_requests_per_unique_sector_of_a_strided_launch():
    r, t = _simt_requests("cols")
    assert t.unique_sectors_load == 256 * 256 // 32
    assert r == pytest.approx(32.0)          # every sector asked for once per byte of it
    assert r > ir.GOAL_REQUESTS


# --------------------------------------------------------------------------------------------
# The records (simt + NVRTC + cuobjdump)
# --------------------------------------------------------------------------------------------

_OK, _WHY = ir.available()
needs_tools = pytest.mark.skipif(not _OK, reason=f"issue-rate tools unavailable: {_WHY}")


@needs_tools
def test_records_schema_and_passes(tmp_path):
    import cupyops as co
    lays = [
        ir.Layout("argwhere C", "argwhere",
                  lambda: ir._filled((64, 4096), np.uint8, "C", 0.5),
                  lambda x: co.argwhere(x, device="simt")),
        ir.Layout("argmax first", "argmax",
                  lambda: np.random.default_rng(2).standard_normal((1024, 1024)).astype(np.float32),
                  lambda x: co.argmax(x, axis=0, device="simt")),
    ]
    recs = ir.memory_records(lays, (90, 80))
    path = tmp_path / "r.json"
    path.write_text(json.dumps(recs))
    back = json.loads(path.read_text())
    assert isinstance(back, list) and back
    for r in back:
        assert set(ir.RECORD_KEYS) <= set(r)
        assert r["arch"] in ("sm_90", "sm_80") and r["pass"] in ("read", "write", "finish")
        assert r["bytes_in_flight_per_sm"] >= 0 and r["requests_per_unique_sector"] >= 1.0
    keys = [(r["arch"], r["kernel"], r["layout"], r["pass"]) for r in back]
    assert len(keys) == len(set(keys))          # one record per (arch, kernel, layout, pass)
    by = {(r["layout"], r["arch"], r["pass"]): r for r in back}
    # the exact argwhere: count and place launches of one kernel, one read record
    nz = by[("argwhere C", "sm_90", "read")]
    assert nz["kernel"].startswith("nonzero_tiles<") and nz["launches"] == 2
    assert nz["requests_per_unique_sector"] <= ir.GOAL_REQUESTS      # C order: coalesced
    # the column argmax: a read pass and a finish pass
    assert by[("argmax first", "sm_90", "read")]["kernel"].startswith("argreduce_col<")
    for r in back:       # a finish (combine) launch reads partials: no input in flight
        assert (r["pass"] == "finish") == r["kernel"].startswith("argreduce_finish<")
        if r["pass"] == "finish":
            assert r["bytes_in_flight_per_sm"] == 0 and r["layout"] == "argmax first"
    # the figure is the formula of the record's own fields
    for r in back:
        assert r["bytes_in_flight_per_sm"] == pytest.approx(
            r["bytes_per_thread_per_iteration"] * r["resident_threads_per_sm"])
        assert r["resident_threads_per_sm"] == (r["occupancy_blocks_per_sm"]
                                                * r["threads_per_block"])
        sms = ir.ARCH_SMS[int(r["arch"][3:])]
        assert r["resident_threads_per_sm_launched"] <= (
            r["blocks"] / sms * r["threads_per_block"] + 1e-9)
        assert r["goal_bytes_in_flight_per_sm"] == ir.GOAL_IN_FLIGHT


def test_issue_rate_json_is_a_list_of_records(tmp_path, monkeypatch):
    fake = [{"arch": "sm_90", "kernel": "k", "layout": "l", "pass": "read",
             "bytes_in_flight_per_sm": 1.0, "requests_per_unique_sector": 1.0}]
    monkeypatch.setattr(ir, "available", lambda: (True, ""))
    monkeypatch.setattr(ir, "instantiation_report", lambda *a, **k: [])
    monkeypatch.setattr(ir, "memory_records", lambda layouts, archs, **k: fake)
    out = tmp_path / "m.json"
    assert ir.main(["--json", str(out), "--layouts", "named"]) == 0
    assert json.loads(out.read_text()) == fake


def test_goal_misses_flat_16_kib_and_the_launch_capped_goal_of_the_input():
    assert ir.in_flight_goal(64 << 20) == 16 * 1024
    assert ir.in_flight_goal(132 * 1024) == 1024
    assert ir.in_flight_goal(108 * 1024, 80) == 1024

    def rec(pass_, op, flight, launched, requests):
        return {"arch": "sm_90", "pass": pass_, "op": op, "input_bytes": 1 << 20,
                "bytes_in_flight_per_sm": flight, "bytes_in_flight_per_sm_launched": launched,
                "requests_per_unique_sector": requests}
    recs = [rec("read", "argmax", 2000.0, 2000.0, 1.0),
            rec("read", "argwhere", 32768.0, 9000.0, 1.6),
            rec("read", "argmax", 20000.0, 100.0, 1.0),
            rec("finish", "argwhere", 0.0, 0.0, 9.0)]
    miss = ir.goal_misses(recs)
    assert miss["in_flight"] == [recs[0]]                  # below 16 KiB
    assert miss["in_flight_launched"] == [recs[0], recs[2]]   # 1 MiB / 132 = 7.76 KiB asked
    assert miss["requests"] == [recs[1]]                   # nonzero reads only
