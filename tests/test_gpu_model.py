"""Issue 32 part 4: the models take the device (SMs, bandwidth, latency -> bytes in flight per
SM needed), and the model table (predicted against measured, ncu's DRAM throughput, > 25 % off
on >= 1 MiB flagged) is built from a run's JSON, ncu's CSV and the inputs prepared on simt."""
import json

import numpy as np
import pytest

from cupyops.bench import device_model as D
from cupyops.bench import gpu_model as M
from cupyops.bench import issue_rate as ir
from cupyops.bench import traffic


def test_bytes_in_flight_needed_per_device():
    assert D.H100.in_flight_needed == pytest.approx(16 * 1024)
    assert 25 * 1024 <= D.H200.in_flight_needed <= 30 * 1024
    assert D.H200.sms == 132 and D.H200.peak_bandwidth == 4.8e12
    assert D.from_name("H200") is D.H200 and D.from_name(None) is D.DEFAULT
    with pytest.raises(ValueError, match="unknown device model"):
        D.from_name("v100")
    spec = D.from_properties({"name": b"NVIDIA H200", "multiProcessorCount": 132,
                              "memoryClockRate": 2_619_000, "memoryBusWidth": 6144,
                              "major": 9, "minor": 0}, copy_bandwidth=4.3e12)
    assert spec.peak_bandwidth == pytest.approx(2 * 2.619e9 * 6144 / 8)
    assert spec.latency_s == D.H200.latency_s and spec.arch == 90 and spec.sms == 132
    # Little's law caps a pass that keeps too little in flight
    assert D.achieved_bandwidth(D.H200, None) == D.H200.copy_bandwidth
    assert D.achieved_bandwidth(D.H200, 8 * 1024) == pytest.approx(132 * 8192 / 0.75e-6)


def test_traffic_and_memory_terms_take_the_device():
    assert traffic.model_seconds(93_750_000, 0) == pytest.approx(1e-3)          # H100 default
    assert traffic.model_seconds(93_750_000, 0, "h200") == pytest.approx(3e12 / 4.3e12 * 1e-3)
    assert ir.in_flight_goal(64 << 20) == 16 * 1024
    assert ir.in_flight_goal(64 << 20, 90, "h200") == pytest.approx(D.H200.in_flight_needed)
    assert ir.in_flight_goal(64 << 20, 80, "h200") == 16 * 1024           # not the H200's arch
    a100 = D.A100
    assert ir.sms_of(80, a100) == 108 and ir.sms_of(90, a100) == 132
    rec = {"pass": "read", "arch": "sm_90", "op": "argmax", "input_bytes": 64 << 20,
           "bytes_in_flight_per_sm": 20 * 1024, "bytes_in_flight_per_sm_launched": 20 * 1024,
           "requests_per_unique_sector": 1.0}
    assert not ir.goal_misses([dict(rec, goal_bytes_in_flight_per_sm=16 * 1024)])["in_flight"]
    h200 = dict(rec, goal_bytes_in_flight_per_sm=ir.in_flight_goal(1 << 62, 90, "h200"))
    assert ir.goal_misses([h200])["in_flight"] == [h200]


NCU = """==PROF== Connected to process 1
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Section Name","Metric Name","Metric Unit","Metric Value"
"0","1","python","h","argreduce_row<float, int>(ArParams)","1","7","Command line profiler metrics","dram__bytes_read.sum","Mbyte","268.44"
"0","1","python","h","argreduce_row<float, int>(ArParams)","1","7","Command line profiler metrics","dram__bytes_write.sum","Kbyte","1.02"
"0","1","python","h","argreduce_row<float, int>(ArParams)","1","7","Command line profiler metrics","dram__throughput.avg.pct_of_peak_sustained_elapsed","%","90.5"
"0","1","python","h","argreduce_row<float, int>(ArParams)","1","7","Command line profiler metrics","gpu__time_duration.sum","usecond","64.00"
"1","1","python","h","nonzero_tiles<float>(nz_params)","1","7","Command line profiler metrics","dram__bytes_read.sum","Gbyte","1.5"
"1","1","python","h","nonzero_tiles<float>(nz_params)","1","7","Command line profiler metrics","gpu__time_duration.sum","msecond","1,000.0"
==PROF== Disconnected
"""


def test_ncu_csv_and_the_manifest():
    ks = M.parse_ncu_csv(NCU)
    assert [k["id"] for k in ks] == [0, 1]
    assert ks[0]["metrics"]["dram__bytes_read.sum"] == pytest.approx(268.44e6)
    assert ks[0]["metrics"]["gpu__time_duration.sum"] == pytest.approx(64e-6)
    assert ks[1]["metrics"]["gpu__time_duration.sum"] == pytest.approx(1.0)
    by = M.ncu_by_case(ks, [{"case": "a", "kernels": ["argreduce_row<float, int>"]},
                            {"case": "b", "kernels": ["argreduce_col<float, int>"]}])
    assert set(by) == {"a"}                      # b's name does not match: left out
    assert by["a"]["dram_bytes"] == pytest.approx(268.44e6 + 1020)
    assert by["a"]["dram_pct"] == pytest.approx(90.5)
    assert M.parse_ncu_csv("no csv here") == []


def _inputs(per_thread=64.0):
    return {"sectors_ratio": 1.0, "d2h": 0, "launches": [
        {"kernel": "k", "grid": [1320], "block": [256], "reads_input": True,
         "per_thread_bytes": per_thread, "blocks_per_sm": 8}]}


def test_prediction_and_the_flag():
    dev = D.H200
    p = M.predict(_inputs(), 256 << 20, dev)
    assert p["in_flight_per_sm"] == pytest.approx(64 * 256 * 8)          # 10 blocks/SM -> 8
    assert p["seconds"] == pytest.approx((256 << 20) / dev.copy_bandwidth + dev.launch_s)
    starved = M.predict(_inputs(per_thread=4.0), 256 << 20, dev)
    assert starved["bandwidth"] < dev.copy_bandwidth and starved["seconds"] > p["seconds"]
    measured = {"big": {"seconds": p["seconds"] * 1.5, "min_bytes": 256 << 20,
                        "bytes": 256 << 20},
                "near": {"seconds": p["seconds"] * 1.1, "min_bytes": 256 << 20,
                         "bytes": 256 << 20},
                "small": {"seconds": 40e-6, "min_bytes": 4096, "bytes": 4096},
                "none": {"seconds": 1e-3, "min_bytes": 1 << 20, "bytes": 1 << 20}}
    inputs = {"cases": {"big": _inputs(), "near": _inputs(), "small": _inputs()}}
    rows = {r["case"]: r for r in M.table_rows(measured, inputs, dev)}
    assert rows["big"]["flagged"] and rows["big"]["off"] == pytest.approx(0.5)
    assert rows["big"]["note"] == "unexplained: the model is wrong here"
    assert not rows["near"]["flagged"] and not rows["small"]["flagged"]     # < 1 MiB
    assert rows["none"]["predicted_s"] is None and "prepare" in rows["none"]["note"]
    md = "\n".join(M.render_markdown(list(rows.values()), dev, {"inputs": "x"}))
    assert "**+50 %**" in md and "1 of 4 cases off by more than 25%" in md


def test_the_table_from_a_bench_json_into_the_docs(tmp_path):
    bench_doc = {"meta": {"copy_bandwidth_gbps": 4000.0},
                 "records": [{"op": "argmax", "case": "last tie=first", "dtype": "float32",
                              "seconds": 1e-3, "bytes": 4 << 20}],
                 "gpu": {"large": {"records": [{"case": "L", "us_events": 80.0,
                                                "min_bytes": 256 << 20, "bytes": 256 << 20}]}}}
    measured = M.measured_cases(bench_doc)
    assert set(measured) == {"argmax/last tie=first/float32", "L"}
    assert M.device_of(bench_doc).copy_bandwidth == 4.0e12
    (tmp_path / "b.json").write_text(json.dumps(bench_doc))
    (tmp_path / "i.json").write_text(json.dumps({"source_hash": "old", "cases": {
        "L": _inputs()}}))
    page = tmp_path / "perf.md"
    page.write_text(f"x\n{M.DOC_BEGIN}\nold\n{M.DOC_END}\ny\n")
    assert M.main(["table", "--bench", str(tmp_path / "b.json"), "--inputs",
                   str(tmp_path / "i.json"), "--update-docs", str(page)]) == 0
    text = page.read_text()
    assert "old\n" not in text and "| L | 256.00 | 80.0 |" in text and text.endswith("y\n")
    assert "PREPARED FOR OTHER KERNEL SOURCES" in text


def test_prepare_a_case_on_simt():
    """A row-major argmax: sectors near the minimum, one launch that
    reads the input; the full-size plan comes from dry_run without reading its input."""
    import cupyops
    x = np.random.default_rng(0).random((64, 256)).astype(np.float32)
    full = M._aligned_empty((2048, 4096), np.float32)

    def call(a):
        return cupyops.argmax(a, axis=-1, device="simt")
    inp = M.prepare_case("k", call, x, call, full, 0, models=None)
    assert 1.0 <= inp["sectors_ratio"] <= 1.25          # (64 output sectors on 64 KiB)
    assert inp["d2h"] == 0 and len(inp["launches"]) >= 1
    assert any(ln["reads_input"] for ln in inp["launches"])
    assert all("args" not in ln for ln in inp["launches"])      # JSON-ready
    json.dumps(inp)
