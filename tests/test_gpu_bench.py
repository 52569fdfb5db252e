"""Issue 32 part 3 without a GPU: the large cases are the issue's list at 256 MiB, each is
measured with both clocks, a copy fraction and the peers (rehearsed on simt with NumPy in CuPy's
place), a wrong result is caught, the host-cost rows, the time budget (a cuda run estimated past
its 90 s deadline is refused, cases past a deadline are not run and the run exits 1), and the
docs writer fills the bench:cuda block from a run's JSON."""
import json

import numpy as np
import pytest

from cupyops.bench import bench, gpu_bench
from cupyops.bench import gpu_cases as G


def test_the_large_cases_are_the_issues():
    cases = G.large_cases("full")
    names = {c.name for c in cases}
    for op in ("argmax", "argmin"):
        for where in ("last", "first", "all"):
            for dt in ("float32", "float16", "int8"):
                assert any(n.startswith(f"{op} {where} ") and n.endswith(dt) for n in names)
    for words in (("hardmax", "last"), ("count_nonzero", "all"), ("count_nonzero", "axis 0"),
                  ("nonzero_coordinates", "size=n"), ("argwhere",)):
        assert any(all(w in n for w in words) for n in names), words
    for rows in (1, 8):
        for dt in ("bfloat16", "float32"):
            assert f"decode argmax {rows}x131072 {dt}" in names
    big = [c for c in cases if c.op != "decode"]
    assert all(c.nbytes == 256 << 20 for c in big)
    assert all(G.copy_goal_for(c) == (0.75 if c.exact else 0.90) for c in big)
    assert all(G.copy_goal_for(c) is None for c in cases if c.op == "decode")
    assert all(c.peers.get("cupy") and c.peers.get("torch") for c in cases)


def test_segment_cases_count_their_offsets_and_agree_with_both_peers_on_simt():
    """Issue 35's GPU goal: every length distribution at 256 MiB; the minimum bytes hold x,
    the offsets and the result."""
    full = G.large_cases("full", ["segment_argmax"])
    assert [c.name.split()[1] for c in full] == ["short", "long", "power-law", "huge+tiny"]
    assert all(c.nbytes == 256 << 20 and G.copy_goal_for(c) == 0.90 for c in full)
    recs = G.measure_cases(G.large_cases("tiny", ["segment_argmax"]), G.rehearsal_env("simt"),
                           repeats=5)
    for c, r in zip(G.large_cases("tiny", ["segment_argmax"]), recs):
        assert r["status"] == "ok" and r["ok"] is True, r
        offsets = np.asarray(G._SEGMENT_OFFSETS["offsets"]) if r is recs[-1] else None
        if offsets is not None:
            assert r["min_bytes"] == c.nbytes + offsets.nbytes + (len(offsets) - 1) * 8
        if G._torch_module(False) is not None:
            assert r["peers"]["torch"]["status"] == "ok", r


def test_a_new_op_is_one_builder():
    def builder(scale):
        shape = G.shape_for(G.SCALES[scale], "float32")
        return [G.GpuCase("newop", "newop", "large", shape, "float32",
                          lambda xp, rng: G.uniform(xp, rng, shape, "float32"),
                          lambda co, x, d: co.argmax(x, axis=-1, device=d),
                          {"cupy": lambda xp, x: xp.argmax(x, axis=-1)})]
    try:
        G.register("newop")(builder)
        assert [c.name for c in G.large_cases("tiny", ["newop"])] == ["newop"]
    finally:
        G.LARGE_OPS.pop("newop")


def test_measure_case_rehearsed_on_simt():
    env = G.rehearsal_env("simt")
    cases = [c for c in G.large_cases("tiny") if c.name in (
        "argmax first 64x64 float32", "argwhere 128x128 int8 d=0.1")]
    recs = G.measure_cases(cases, env, repeats=5)
    for r in recs:
        assert r["ok"] is True and r["status"] == "ok", r
        assert r["us_events"] > 0 and r["us_host"] > 0 and r["copy_us"] > 0
        assert r["copy_fraction"] == pytest.approx(r["copy_us"] / r["us_events"])
        assert r["min_bytes"] > r["bytes"] and r["repeats"] == 5
        assert r["peers"]["cupy"]["status"] == "ok" and r["peers"]["cupy"]["ratio"] > 0
        assert r["peers"]["cupy"]["met"] == (r["peers"]["cupy"]["ratio"] >= G.PEER_GOAL)
    g = G.geomeans(recs)
    assert {(x["op"], x["peer"]) for x in g} >= {("argmax", "cupy"), ("argwhere", "cupy")}
    text = "\n".join(G.report_lines(recs))
    assert "copy frac" in text and "geometric mean vs cupy" in text


def test_a_wrong_result_is_caught():
    env = G.rehearsal_env("cpu")
    shape = (16, 16)
    wrong = G.GpuCase("wrong", "argmax", "large", shape, "float32",
                      lambda xp, rng: G.uniform(xp, rng, shape, "float32"),
                      lambda co, x, d: co.argmin(x, axis=-1, device=d),
                      {"cupy": lambda xp, x: xp.argmax(x, axis=-1)})
    r = G.measure_case(wrong, env, repeats=1)
    assert r["ok"] is False and r["status"].startswith("MISMATCH")


def test_host_cost_rows_rehearsed():
    rows = G.host_cost(G.rehearsal_env("simt"), calls=20, repeats=5)
    assert len(rows) == 6 and all(r["launches"] == 1 for r in rows)
    assert any(r["case"].startswith("segment_argmax") for r in rows)
    for r in rows:
        assert r["ratio"] == pytest.approx(r["peer_us"] / r["us"])
        assert r["met"] == (r["ratio"] >= 1.0) and r["peer"] == "numpy.argmax"


def test_the_budget_of_the_gpucheck_bench_fits_90_s():
    from cupyops.bench.cases import make_cases
    est = gpu_bench.estimate(len(make_cases("quick")), 0.005, 5,
                             gpu_bench.section_cases("full"), overhead=True, host=True)
    assert est["total"] <= gpu_bench.CUDA_DEADLINE_S * 0.8, est
    slow = gpu_bench.estimate(len(make_cases("quick")), 0.05, 5, [], overhead=True, host=False)
    assert slow["total"] > gpu_bench.CUDA_DEADLINE_S


def test_a_cuda_run_estimated_past_its_deadline_is_refused(capsys):
    rc = bench.main(["cuda", "--repeat", "5", "--no-cold", "--quiet"])
    err = capsys.readouterr().err
    assert rc == 2 and "estimated at" in err and "deadline of 90 s" in err


def test_cases_past_the_deadline_are_not_run_on_simt(tmp_path, capsys):
    out = tmp_path / "b.json"
    rc = bench.main(["simt", "--tiny", "--no-cold", "--no-overhead", "--quiet", "--deadline",
                     "1e-9", "--cases", "^argmax/last tie=first/float32$", "--json", str(out)])
    assert rc == 1 and "not run" in capsys.readouterr().err
    doc = json.loads(out.read_text())
    assert doc["records"][0]["status"] == "not run: past the deadline"


def _cuda_json(tmp_path):
    """A run's JSON as a GPU run writes it: the rehearsal's, relabelled cuda."""
    out = tmp_path / "r.json"
    assert bench.main(["simt", "--tiny", "--large", "--no-cold", "--no-overhead", "--quiet",
                       "--repeat", "1", "--cases", "^count_nonzero/d=0.1/int8$", "--json",
                       str(out)]) == 0
    doc = json.loads(out.read_text())
    doc["meta"]["device"] = "cuda"
    doc["meta"]["copy_bandwidth_gbps"] = 4300.0
    for r in doc["records"]:
        r.update(device="cuda", copy_fraction=0.5, peer="cupy", ratio=1.2)
    out.write_text(json.dumps(doc))
    return out


def test_the_docs_writer_fills_the_cuda_block_from_simt_records(tmp_path, capsys):
    src = _cuda_json(tmp_path)
    page = tmp_path / "perf.md"
    page.write_text("# p\n<!-- bench:cuda:begin -->\nNo GPU run yet.\n<!-- bench:cuda:end -->\n"
                    "tail\n")
    assert bench.main(["--from-json", str(src), "--update-docs", str(page)]) == 0
    text = page.read_text()
    assert "No GPU run yet" not in text and text.endswith("tail\n")
    assert "copy frac" in text and "large cases" in text and "host cost" in text
    assert "| count_nonzero | d=0.1 |" in text and "0.50" in text
    assert "time budget: estimated" in text
