"""The benchmark (cupyops/bench/bench.py): quick runs on the CPU write valid JSON with every
field, the peers' compositions agree with cupyops, and the SIMT run reports the traffic model."""
import importlib.util
import json
import math
import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

from cupyops.bench import bench, peers

ROOT = pathlib.Path(__file__).resolve().parent.parent

RECORD_FIELDS = {"op", "case", "dtype", "shape", "device", "seconds", "peer", "peer_seconds",
                 "ratio", "bytes"}
TRAFFIC_FIELDS = {"launches", "requested_bytes", "sectors", "sector_bytes", "unique_sectors",
                  "min_sectors", "sectors_ratio", "coalescing", "model_seconds",
                  "model_min_seconds", "goal", "goal_met"}

# one case of each operator family, a few seconds in all
FEW = "|".join(f"^{c}$" for c in (
    "argmax/last tie=last/float32", "argmax/middle tie=last/float32", "argmin/first tie=first/int8",
    "hardmax/last tie=first/float16", "argwhere/d=0.1/bool", "nonzero/d=0.5/float32",
    "count_nonzero/d=0.1/int8", "nonzero_coordinates/d=0.5 size=n/float32"))


def _has(mod):
    try:
        return importlib.util.find_spec(mod) is not None
    except Exception:
        return False


def test_case_matrix_covers_the_issue():
    cases = bench.make_cases("quick")
    ids = {c.id for c in cases}
    for dt in ("float32", "float16", "int8", "bool"):
        for op in ("argmax", "argmin"):
            for layout in ("last", "first", "middle", "all"):
                for tie in ("first", "last"):
                    assert f"{op}/{layout} tie={tie}/{dt}" in ids
        for layout in ("last", "middle"):
            assert f"hardmax/{layout} tie=first/{dt}" in ids
        for d in (0.001, 0.1, 0.5):
            assert f"argwhere/d={d}/{dt}" in ids
            assert f"nonzero/d={d}/{dt}" in ids
            assert f"nonzero_coordinates/d={d} size=n/{dt}" in ids
    assert len(ids) == len(cases)
    mid = next(c for c in cases if c.id == "argmax/middle tie=first/float32")
    assert mid.params["axes"] == (1, 2) and len(mid.shape) == 4


@pytest.mark.parametrize("density", [0.001, 0.1, 0.5])
def test_inputs_have_the_density(density):
    case = bench.Case("argwhere", f"d={density}", np.float32, (256, 256), {"density": density})
    x = bench.make_input(case)
    assert x.__array_interface__["data"][0] % 256 == 0
    assert abs(np.count_nonzero(x) / x.size - density) < 0.01 + density * 0.05


def test_inputs_are_deterministic():
    case = bench.make_cases("tiny", ["float32"])[0]
    assert np.array_equal(bench.make_input(case), bench.make_input(case))


def test_numpy_compositions_agree_with_brute_force():
    from cupyops.ops.argreduce import bench as ar
    from cupyops.ops.nonzero import bench as nz
    rng = np.random.default_rng(0)
    x = rng.integers(0, 3, (3, 4, 5, 2)).astype(np.int8)       # many ties
    for axes in [(0,), (2,), (3,), (1, 2), (0, 3), (0, 1, 2, 3)]:
        kept = [i for i in range(4) if i not in axes]
        moved = np.moveaxis(x, axes, range(4 - len(axes), 4)).reshape([x.shape[i] for i in kept] + [-1])
        for kind, f in (("max", np.max), ("min", np.min)):
            ext = f(moved, axis=-1, keepdims=True)
            hit = moved == ext
            first = np.argmax(hit, axis=-1)
            last = hit.shape[-1] - 1 - np.argmax(hit[..., ::-1], axis=-1)
            got_first = ar.argreduce_composition(np, x, axes, kind, "first")
            got_last = ar.argreduce_composition(np, x, axes, kind, "last")
            assert np.array_equal(got_first, first.reshape(got_first.shape))
            assert np.array_equal(got_last, last.reshape(got_last.shape))
    h = ar.hardmax_numpy(x, 1, "last")
    idx = ar.argreduce_composition(np, x, (1,), "max", "last")
    assert np.array_equal(np.argmax(h[..., ::1] * (np.arange(4)[None, :, None, None] + 1), axis=1), idx)
    assert np.array_equal(ar.hardmax_onehot(np, x, 1, "last"), h)
    coords, count = nz.nonzero_coordinates_composition(np, x, x.size)
    assert coords.shape == (x.size, 4) and count == np.count_nonzero(x)
    assert np.array_equal(coords[:count], np.argwhere(x)) and np.all(coords[count:] == 0)


def test_onnxruntime_peer_matches_numpy():
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    ran = 0
    for case in bench.make_cases("tiny", ["float32", "int8"]):
        try:
            fn, conv = peers.onnxruntime_peer(case)
        except peers.PeerUnavailable:
            continue
        x = bench.make_input(case)
        ref_fn, ref_conv = peers.numpy_peer(case)
        assert bench._same(conv(fn(x)), ref_conv(ref_fn(x))), case.id
        ran += 1
    assert ran >= 30


def test_timer_orders_fast_and_slow():
    fast = lambda: None  # noqa: E731
    a = np.ones(200_000)
    slow = lambda: a.sum()  # noqa: E731
    t_fast, t_slow = bench.time_cpu([fast, slow], 0.01)
    assert 0 < t_fast < t_slow


def _check_records(records, device):
    assert records
    for r in records:
        assert RECORD_FIELDS <= set(r), set(RECORD_FIELDS) - set(r)
        assert r["device"] == device
        assert isinstance(r["shape"], list)
        if r["seconds"] is not None:
            assert r["seconds"] > 0 and r["bytes"] > 0
        if r["ratio"] is not None:
            assert math.isclose(r["ratio"], r["peer_seconds"] / r["seconds"])


def test_quick_cpu_run_writes_json(tmp_path, capsys):
    out = tmp_path / "bench.json"
    md = tmp_path / "bench.md"
    rc = bench.main(["--device", "cpu", "--tiny", "--cases", FEW, "--no-cold", "--no-overhead",
                     "--json", str(out), "--markdown", str(md)])
    assert rc == 0
    data = json.loads(out.read_text())
    assert set(data) == {"meta", "records", "cold_start", "overhead"}
    assert data["overhead"] == []          # --no-overhead
    assert data["meta"]["device"] == "cpu" and data["meta"]["mode"] == "tiny"
    records = data["records"]
    _check_records(records, "cpu")
    ops = {r["op"] for r in records}
    assert ops == {"argmax", "argmin", "hardmax", "argwhere", "nonzero", "count_nonzero",
                   "nonzero_coordinates"}
    numpy_recs = [r for r in records if r["peer"] == "numpy"]
    if _has("cupyops.ops.argreduce.numpy_path"):
        assert len(numpy_recs) == 8
    for r in numpy_recs:
        assert r["ok"] is True and r["ratio"] > 0
    text = capsys.readouterr()
    assert "vs numpy" in text.out and "argmax" in text.out
    assert "[" in text.err and "done" in text.err          # the progress indicator
    assert "| op | case |" in md.read_text()


def test_device_from_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("CUPYOPS_DEVICE", "cpu")
    out = tmp_path / "b.json"
    assert bench.main(["--tiny", "--cases", "^count_nonzero/d=0.1/float32$", "--no-cold", "--no-overhead",
                       "--no-peers", "--quiet", "--json", str(out)]) == 0
    recs = json.loads(out.read_text())["records"]
    assert len(recs) == 1 and recs[0]["device"] == "cpu" and recs[0]["peer"] is None


def test_bad_arguments():
    assert bench.main(["--device", "tpu", "--tiny", "--no-cold", "--no-overhead"]) == 2
    assert bench.main(["--tiny", "--no-cold", "--no-overhead", "--cases", "(unclosed"]) == 2
    assert bench.main(["--tiny", "--no-cold", "--no-overhead", "--dtypes", "float32,notadtype"]) == 2
    with pytest.raises(SystemExit):
        bench.main(["--nonsense"])


def test_cuda_refused_without_gpu():
    from cupyops.core.devices import cuda_status
    if cuda_status()[0]:
        pytest.skip("a GPU is present")
    assert bench.main(["--device", "cuda", "--tiny", "--no-cold", "--no-overhead", "--quiet"]) == 2


def test_cold_start_cpu():
    """The cpu device compiles nothing: one fresh process, no caches, no precompile column."""
    cold = bench.cold_start("cpu")
    assert [c["scenario"] for c in cold] == ["fresh process"]
    for c in cold:
        assert "error" not in c, c
        assert c["argwhere_first_s"] > 0
        if _has("cupyops.ops.argreduce.numpy_path"):
            assert c["argmax_first_s"] > 0
        assert "precompile_s" not in c
    header, _ = bench.cold_table(cold)
    assert "precompile s" not in header and "import s" in header


def test_cold_start_of_a_kernel_device_has_its_three_scenarios(monkeypatch):
    seen = []
    monkeypatch.setattr(bench, "_run_cold", lambda device, what, env, timeout=600: seen.append(
        (device, what)) or ({"precompile_s": 1.0} if what == "precompile" else {}))
    cold = bench.cold_start("simt")
    assert [c["scenario"] for c in cold] == ["empty cache", "filled disk cache",
                                             "empty cache, precompile"]
    assert seen == [("simt", "first"), ("simt", "first"), ("simt", "precompile")]
    assert "precompile s" in bench.cold_table(cold)[0]


def test_cold_table_columns_come_from_the_descriptors():
    header, rows = bench.cold_table([{"scenario": "s", "import_s": 0.1, "argmax_first_s": 0.2,
                                      "argmax_second_s": 0.001, "argwhere_first_s": 0.3,
                                      "argwhere_second_s": 0.0, "argwhere_error": "E",
                                      "process_s": 1.0}])
    assert header == ["scenario", "import s", "precompile s", "argmax 1st s", "argmax 2nd s",
                      "argwhere 1st s", "process s", "note"]
    assert rows == [["s", "0.100", "-", "0.200", "0.0010", "0.300", "1.00", "E"]]


def test_a_new_operator_is_benchmarked_from_its_descriptor(monkeypatch):
    """An operator the registry lists gets its cases, its call, its peers and its --help line
    from its descriptor alone: the benchmark names no operator."""
    import cupyops
    import cupyops.ops
    from cupyops.core.operator import Bench, BenchCase, Operator

    def doubled(x, /, *, device=None):
        """Twice x."""
    desc = Operator(doubled, None, bench=Bench(
        lambda sizes, dtype: [BenchCase("plain", sizes["nz"], {}, order=1)],
        lambda f, case, device: (lambda x: f(x, device=device)),
        lambda xp, case: (lambda x: x + x)))
    registry = cupyops.ops.operators() + (desc,)
    monkeypatch.setattr(cupyops.ops, "operators", lambda: registry)
    monkeypatch.setattr(cupyops, "doubled", lambda x, device=None: 2 * x, raising=False)
    ids = [c.id for c in bench.make_cases("tiny", ["float32"])]
    at = ids.index("doubled/plain/float32")       # order 1: with the second density's cases
    assert ids[at - 1:at + 2] == ["nonzero_coordinates/d=0.1 size=n/float32",
                                  "doubled/plain/float32", "argwhere/d=0.5/float32"]
    case = bench.make_cases("tiny", ["float32"])[at]
    recs = {r["peer"]: r for r in bench.run_case(case, "cpu", "tiny", 0.001, True)}
    assert recs["numpy"]["ok"] and recs["numpy"]["ratio"] > 0
    assert recs["onnxruntime"]["peer_status"] in ("n/a: no ONNX composition for doubled",
                                                  "n/a: onnxruntime is not installed "
                                                  "(pip install onnxruntime onnx)")
    assert recs["torch"]["peer_status"] in ("n/a: no torch composition for doubled",
                                            "n/a: torch not installed")
    assert re.search(r"\n  doubled +Twice x\.\n", bench.build_parser().format_help())


def test_command_line_entry(tmp_path):
    out = tmp_path / "cli.json"
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    p = subprocess.run([sys.executable, "-m", "cupyops", "bench", "cpu", "--tiny", "--no-cold", "--no-overhead",
                        "--cases", "^argwhere/d=0.1/float32$", "--json", str(out)],
                       capture_output=True, text=True, cwd=str(tmp_path), env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    assert json.loads(out.read_text())["records"][0]["op"] == "argwhere"


def test_thin_script_in_benchmarks_runs_the_package_benchmark(tmp_path):
    """benchmarks/bench.py is a thin script: same parser, same run, from any directory."""
    script = ROOT / "benchmarks" / "bench.py"
    assert "def make_cases" not in script.read_text()     # no second copy of the benchmark
    out = tmp_path / "script.json"
    p = subprocess.run([sys.executable, str(script), "--tiny", "--no-cold", "--no-overhead", "--no-peers",
                        "--cases", "^count_nonzero/d=0.5/int8$", "--json", str(out)],
                       capture_output=True, text=True, cwd=str(tmp_path), timeout=120)
    assert p.returncode == 0, p.stderr
    assert json.loads(out.read_text())["records"][0]["op"] == "count_nonzero"


def test_simt_run_reports_traffic(tmp_path):
    from cupyops.core.devices import simt_status
    if not simt_status()[0]:
        pytest.skip(simt_status()[1])
    try:
        import cupyops.simt as simt
    except Exception as exc:
        pytest.skip(f"cupyops.simt not importable: {exc}")
    if not hasattr(simt, "record_traffic"):
        pytest.skip("cupyops.simt.record_traffic not in this checkout yet")
    if not (_has("cupyops.ops.argreduce.launch") and _has("cupyops.ops.nonzero.launch")):
        pytest.skip("kernel paths not in this checkout yet")
    out = tmp_path / "simt.json"
    cases = "|".join(f"^{c}$" for c in (
        "argmax/last tie=first/float32", "hardmax/middle tie=last/float32", "argwhere/d=0.5/float32",
        "nonzero_coordinates/d=0.5 size=n/float32"))
    rc = bench.main(["--device", "simt", "--tiny", "--no-cold", "--no-overhead", "--quiet", "--json", str(out),
                     "--cases", cases])
    assert rc == 0
    records = json.loads(out.read_text())["records"]
    _check_records(records, "simt")
    assert len(records) == 4
    for r in records:
        if r["status"].startswith("unavailable"):
            continue
        assert r["ok"] is True
        assert TRAFFIC_FIELDS <= set(r), TRAFFIC_FIELDS - set(r)
        assert r["launches"] >= 1 and r["sectors"] >= 1 and r["min_sectors"] >= 1
        assert r["sectors_ratio"] == pytest.approx(r["sectors"] / r["min_sectors"])
        assert 0 < r["coalescing"] <= 1.0
        assert r["model_seconds"] >= r["launches"] * 3e-6
        assert r["goal"] is not None
    assert any("sectors" in r for r in records)


def test_simt_allocations_aligned_like_cupy():
    from cupyops.core import backend as _backend
    be = _backend.get_backend("simt")
    with bench.cupy_like_simt_allocations():
        for a in (be.empty((3, 5), np.float16), be.zeros(7, np.int64), be.full((2,), 9, np.int8)):
            assert a.__array_interface__["data"][0] % 256 == 0
        assert be.zeros((4,), np.int32).tolist() == [0, 0, 0, 0]
        assert be.full((2, 2), 3, np.float32).tolist() == [[3, 3], [3, 3]]
        assert be.empty((2, 3), np.uint8).shape == (2, 3)
    assert "empty" not in be.__dict__ and "zeros" not in be.__dict__ and "full" not in be.__dict__


def _stand_in_cupy():
    """A module that answers like CuPy with NumPy underneath and wall-clock 'CUDA events', to
    walk the GPU code path of the benchmark (timing loop, peers, table) on a machine without
    a GPU. It measures nothing real."""
    import time
    import types

    class Event:
        t = 0.0

        def record(self, stream=None):
            self.t = time.perf_counter()

        def synchronize(self):
            pass

    stream = types.SimpleNamespace(synchronize=lambda: None, ptr=0)
    fake = types.ModuleType("cupy")
    fake.__getattr__ = lambda name: getattr(np, name)
    fake.ndarray = type("StandInCupyArray", (), {})
    buffer = lambda *a, **k: types.SimpleNamespace(data=types.SimpleNamespace(ptr=0))  # noqa: E731
    fake.ones = fake.empty_like = buffer                 # copy_bandwidth's device buffers
    fake.cuda = types.SimpleNamespace(
        Event=Event, Device=type("StandInDevice", (), {}), get_elapsed_time=lambda a, b: (b.t - a.t) * 1e3 + 1e-6,
        Stream=types.SimpleNamespace(null=stream), get_current_stream=lambda: stream,
        runtime=types.SimpleNamespace(memcpyAsync=lambda *a: None, memcpyDeviceToDevice=3))
    return fake


def test_gpu_code_path_with_a_stand_in_cupy(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", _stand_in_cupy())
    monkeypatch.setenv("CUPYOPS_DEVICE", "cpu")        # 'ours' then runs the NumPy path
    bw = bench.copy_bandwidth(nbytes=1 << 16)
    assert bw > 0
    records = []
    for case in bench.make_cases("tiny", ["float32"]):
        if case.id in ("argmax/last tie=last/float32", "hardmax/middle tie=first/float32",
                       "nonzero_coordinates/d=0.5 size=n/float32", "nonzero/d=0.1/float32"):
            records += bench.run_case(case, "cuda", "tiny", 0.001, True, copy_bw=bw)
    _check_records(records, "cuda")
    by_peer = {}
    for r in records:
        by_peer.setdefault(r["peer"], []).append(r)
    assert len(by_peer["cupy"]) == 4 and all(r["ratio"] > 0 for r in by_peer["cupy"])
    assert all(r.get("peer_status") == "ok" for r in by_peer["cupy"])
    assert all(r["pct_copy"] > 0 and r["gbps"] > 0 for r in by_peer["cupy"])
    header, rows = bench.cuda_table(records, ["cupy", "torch"])
    assert header[5:8] == ["us", "GB/s", "% copy"] and len(rows) == 4


def test_plots_from_records(tmp_path):
    pytest.importorskip("matplotlib")
    cpu = [dict(op="argmax", case="last tie=first", dtype=dt, shape=[4, 4], device="cpu",
                seconds=1e-3, peer=p, peer_seconds=2e-3, ratio=2.0, bytes=64, ok=True, status="ok")
           for dt in ("float32", "int8") for p in ("numpy", "onnxruntime")]
    bench.make_plot(cpu, "cpu", tmp_path / "cpu.png")
    simt = [dict(op="argwhere", case="d=0.5", dtype="float32", shape=[4, 4], device="simt",
                 seconds=1.0, peer=None, peer_seconds=None, ratio=None, bytes=64, ok=True,
                 status="ok", sectors_ratio=1.4, goal=2.15, goal_met=True)]
    bench.make_plot(simt, "simt", tmp_path / "simt.png")
    for name in ("cpu.png", "simt.png"):
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# --------------------------------------------------------------------------- what a new user hit

ALL_NUMPY_DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                    "float16", "float32", "float64", "complex64", "complex128", "datetime64[s]",
                    "timedelta64[ms]")


@pytest.mark.parametrize("dtype", ALL_NUMPY_DTYPES)
def test_inputs_for_every_library_dtype(dtype):
    dt = np.dtype(dtype)
    plain = bench.Case("argmax", "last tie=first", dt, (64, 64), {"axes": (1,), "tie": "first"})
    x = bench.make_input(plain)
    assert x.dtype == dt and x.shape == (64, 64)
    if dt.kind in "iu" and dt.itemsize == 8:
        assert x.max() > np.iinfo(dt).max // 4          # the whole range, not int64's
    dense = bench.Case("argwhere", "d=0.1", dt, (128, 128), {"density": 0.1})
    y = bench.make_input(dense)
    assert y.dtype == dt
    assert abs(np.count_nonzero(y) / y.size - 0.1) < 0.02


def test_dtypes_run_or_are_skipped_with_a_note(tmp_path, capsys):
    """--dtypes uint64,complex64 (which crashed): every op that takes the dtype runs and checks
    out; one that does not take it yet is skipped with a note, not a crash."""
    out = tmp_path / "b.json"
    rc = bench.main(["--tiny", "--no-cold", "--no-overhead", "--no-peers", "--quiet", "--dtypes", "uint64,complex64",
                     "--cases", "last tie=first|d=0.5", "--json", str(out)])
    assert rc == 0
    data = json.loads(out.read_text())
    skipped = {(s["op"], s["dtype"]) for s in data["meta"]["skipped"]}
    ran = {(r["op"], r["dtype"]) for r in data["records"]}
    assert all(r["ok"] is True for r in data["records"]), data["records"]
    for op in ("argmax", "argmin", "hardmax", "argwhere", "nonzero", "count_nonzero",
               "nonzero_coordinates"):
        for dt in ("uint64", "complex64"):
            assert ((op, dt) in ran) != ((op, dt) in skipped), (op, dt)
    assert ("argmax", "uint64") in ran and ("argwhere", "complex64") in ran
    text = capsys.readouterr().out
    for op, dt in skipped:
        assert f"skipped {op} for {dt}: cupyops does not take it yet" in text


def test_an_op_refusing_a_dtype_is_skipped_not_fatal(tmp_path, monkeypatch, capsys):
    import cupyops
    real = cupyops.hardmax

    def refusing(x, *a, **k):
        if np.asarray(x).dtype == np.float32:
            raise TypeError("hardmax: x has dtype float32, which is not supported")
        return real(x, *a, **k)
    monkeypatch.setattr(cupyops, "hardmax", refusing)
    out = tmp_path / "b.json"
    rc = bench.main(["--tiny", "--no-cold", "--no-overhead", "--no-peers", "--dtypes", "float32,int8",
                     "--cases", "^(hardmax/last tie=first|argmax/last tie=first)/", "--json", str(out)])
    assert rc == 0
    data = json.loads(out.read_text())
    assert {(r["op"], r["dtype"]) for r in data["records"]} == {
        ("hardmax", "int8"), ("argmax", "float32"), ("argmax", "int8")}
    assert data["meta"]["skipped"] == [{"op": "hardmax", "dtype": "float32",
                                        "reason": "TypeError: hardmax: x has dtype float32, which is not supported"}]
    captured = capsys.readouterr()
    assert "skipping hardmax for float32" in captured.err
    assert "skipped hardmax for float32" in captured.out


def test_cases_matching_nothing_is_an_error(capsys):
    assert bench.main(["--tiny", "--no-cold", "--no-overhead", "--cases", "nomatch"]) == 2
    err = capsys.readouterr().err
    assert "--cases 'nomatch' matches none of the" in err and "--list" in err


def test_plot_without_matplotlib_fails_before_running(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)     # import matplotlib -> ImportError

    def must_not_run(*a, **k):
        raise AssertionError("the benchmark ran although --plot cannot be honoured")
    monkeypatch.setattr(bench, "run_case", must_not_run)
    rc = bench.main(["--tiny", "--no-cold", "--no-overhead", "--cases", FEW, "--plot", str(tmp_path / "p.png")])
    assert rc == 2
    err = capsys.readouterr().err
    assert "--plot needs matplotlib" in err and "nothing was run" in err
    assert not (tmp_path / "p.png").exists()


def test_written_files_are_named(tmp_path, capsys):
    paths = {"--json": tmp_path / "r.json", "--markdown": tmp_path / "r.md"}
    if _has("matplotlib"):
        paths["--plot"] = tmp_path / "r.png"
    argv = ["--tiny", "--no-cold", "--no-overhead", "--no-peers", "--quiet", "--cases", "^count_nonzero/d=0.5/int8$"]
    for opt, p in paths.items():
        argv += [opt, str(p)]
    assert bench.main(argv) == 0
    out = capsys.readouterr().out
    for opt, p in paths.items():
        assert p.exists()
        assert str(p.resolve()) in out, (opt, out[-500:])
    assert "wrote records (JSON): " in out and "wrote tables (Markdown): " in out


def test_missing_onnxruntime_is_said_once(monkeypatch, capsys):
    """A peer that is not installed is named once, with how to install it, not as a column of
    n/a cells (issue 36)."""
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    assert bench.main(["--device", "cpu", "--tiny", "--no-cold", "--no-overhead", "--quiet", "--cases", FEW]) == 0
    out = capsys.readouterr().out
    assert "vs onnxruntime" not in out and "n/a" not in out.split("legend:")[0], out[-800:]
    assert sum("onnxruntime" in ln for ln in out.splitlines()) == 1, out
    assert "not installed, so not timed: onnxruntime (pip install onnxruntime onnx)" in out


def test_simt_plot_zooms_and_keeps_goals_apart(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.colors as mcolors
    import matplotlib.pyplot as plt
    kept = []
    real_close = plt.close
    monkeypatch.setattr(plt, "close", lambda fig=None: kept.append(fig))
    recs = []
    for (op, case), vals in {("argmax", "last tie=first"): (1.006, 1.023),
                             ("nonzero_coordinates", "d=0.5 size=n"): (1.026, 1.034),
                             ("argwhere", "d=0.001"): (2.02, 2.09)}.items():
        for dt, v in zip(("float32", "float16", "int8", "bool"), vals + vals):
            recs.append(dict(op=op, case=case, dtype=dt, shape=[4], device="simt", ok=True,
                             status="ok", sectors_ratio=v))
    bench.make_plot(recs, "simt", tmp_path / "simt.png")
    assert (tmp_path / "simt.png").read_bytes()[:4] == b"\x89PNG"
    (fig,) = kept
    main = fig.axes[0]
    lo, hi = main.get_xlim()
    assert 0.9 < lo <= 1.0 and hi <= 1.4             # zoomed on 1.0-1.3, not from 0
    assert len(fig.axes) == 2 and fig.axes[1].get_xlim()[1] >= 2.09   # the rest: a second panel
    bar_colors = {mcolors.to_hex(p.get_facecolor()) for p in main.patches}
    assert len(bar_colors) == 4
    goal_lines = [ln for ln in main.get_lines() if ln.get_label() == "goal"
                  or (len(set(ln.get_xdata())) == 1 and ln.get_xdata()[0] in (1.05, 1.15))]
    assert goal_lines
    for ln in goal_lines:
        assert mcolors.to_hex(ln.get_color()) not in bar_colors
    real_close(fig)


def test_unavailable_simt_from_the_environment_is_named(monkeypatch, capsys):
    from cupyops.core import devices as _devices
    monkeypatch.setenv("CUPYOPS_SIMT_CXX", "no-such-compiler-cupyops-bench")
    monkeypatch.setenv("CUPYOPS_DEVICE", "simt")
    assert bench.main(["--tiny", "--no-cold", "--no-overhead", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "device simt (from CUPYOPS_DEVICE='simt') is not available here" in err
    assert "no-such-compiler-cupyops-bench" in err
    assert bench.main(["simt", "--tiny", "--no-cold", "--no-overhead", "--quiet"]) == 2
    assert "asked for on the command line" in capsys.readouterr().err
    assert not _devices.simt_status()[0]


def test_overhead_section(tmp_path, monkeypatch):
    """The overhead section: every public op on the kernel path (steady state and a first
    call), the CPU path at 4,096 and 1 M elements, each against its NumPy peer, with the goal
    and whether it was met, in the text and the JSON."""
    from cupyops.bench import overhead
    monkeypatch.setattr(overhead, "_number", lambda fn, target=2e-3: 2)   # keep it short
    rows = overhead.run("cpu", repeats=15)
    # each device its own sections: the NumPy path's on cpu, the kernel path's on simt
    assert {r["section"] for r in rows} == {"cpu-small", "cpu-1M"}
    from cupyops.core.devices import simt_status
    if simt_status()[0]:
        simt_rows = overhead.run("simt", repeats=5)
        assert {r["section"] for r in simt_rows} == {"kernel", "kernel-first"}
        for sec in ("kernel", "kernel-first"):
            ops = " ".join(r["op"] for r in simt_rows if r["section"] == sec)
            for name in ("argmax", "argmin", "nanargmax", "hardmax", "count_nonzero",
                         "argwhere", "nonzero", "nonzero_coordinates"):
                assert name in ops, (sec, name)
        rows += simt_rows
    text = "\n".join(overhead.format_tables(rows[:22]))
    assert "dry_run" not in text and "simt" not in text and "np.argmax(8" not in text
    for r in rows:
        assert r["us"] > 0 and r["peer_us"] > 0
        assert r["ratio"] == pytest.approx(r["peer_us"] / r["us"])
        assert isinstance(r["met"], bool) and r["goal"] in overhead.GOALS.values()
        assert r["verdict"] in ("met", "missed", "busy") and r["noise"] >= 0
        assert r["met"] == (r["verdict"] == "met")
    text = "\n".join(overhead.format_tables(rows))
    assert "goal" in text and f"of {len(rows)} met" in text and "±" in text
    out = tmp_path / "o.json"
    rc = bench.main(["--tiny", "--no-cold", "--quiet", "--cases", "^count_nonzero/d=0.1/float32$",
                     "--json", str(out)])
    assert rc == 0
    data = json.loads(out.read_text())
    assert data["overhead"] and {r["section"] for r in data["overhead"]} >= {"cpu-small"}


def test_an_overhead_goal_is_missed_only_beyond_the_noise():
    """Missed when even the rounds' upper quartile misses; within the noise, too close to call;
    the tally says the machine was too busy to judge those (issue 36)."""
    from cupyops.bench import overhead
    peer = [1.0] * 21
    steady = [1 / 0.15] * 21                                   # ratio 0.15 every round
    assert overhead.judge(steady, peer, 1 / 6) == ("missed", 0.0)
    noisy = [1 / r for r in [0.12, 0.15, 0.16, 0.165, 0.18, 0.2, 0.21] * 3]   # median 0.165
    verdict, noise = overhead.judge(noisy, peer, 1 / 6)
    assert verdict == "busy" and noise > 0.1
    assert overhead.judge([1 / 0.2] * 21, peer, 1 / 6)[0] == "met"
    # the small inputs' slack: within NumPy + 2 µs is met
    assert overhead.judge([3e-6] * 21, [1.5e-6] * 21, 0.9, 2e-6)[0] == "met"
    assert overhead.judge([9e-6] * 21, [1.5e-6] * 21, 0.9, 2e-6)[0] == "missed"
    rows = [{"section": "kernel", "op": "x", "device": "simt", "us": 6.0, "peer": "p",
             "peer_us": 1.0, "ratio": 0.165, "goal": 1 / 6, "noise": noise, "verdict": v,
             "met": v == "met"} for v in ("met", "missed", "busy")]
    text = "\n".join(overhead.format_tables(rows))
    assert "MISSED" in text and "too close to call" in text
    assert text.splitlines()[-1].startswith("overhead goals: 1 of 3 met, 1 missed, 1 too close "
                                            "to call") and "too busy to judge" in text


def test_the_report_has_a_legend_one_thread_ratios_and_a_verdict(capsys):
    """One legend for the case names (from the descriptors), the one-thread ratio beside the
    threaded one, and a closing verdict line (issue 37)."""
    assert bench.main(["--device", "cpu", "--tiny", "--no-cold", "--no-overhead", "--quiet",
                       "--threads", "2", "--cases", FEW + "|hardmax/middle"]) == 0
    out = capsys.readouterr().out
    lines = out.rstrip().splitlines()
    legend = lines[lines.index("legend:") + 1:]
    words = [ln.split("  ")[1] if ln.startswith("  ") else None for ln in legend]
    assert "tie=first, tie=last" in words and "d=" in words and "vs numpy 1t" in words, legend
    middle = next(ln for ln in legend if ln.split()[0] == "middle")
    assert "argmax" in middle and "hardmax" in middle      # two meanings, each named
    header = next(ln for ln in lines if ln.startswith("op "))
    assert "vs numpy  vs numpy 1t" in header
    assert lines[-1].startswith("verdict: faster than numpy in ") and "worst: " in lines[-1]
    assert "to judge" in lines[-1]


def test_the_verdict_says_when_the_machine_was_too_busy():
    from cupyops.bench import report
    recs = [{"op": "argmax", "case": "last tie=first", "dtype": "int8", "shape": [4], "ok": True,
             "peer": "numpy", "ratio": r, "noise": n} for r, n in ((1.2, 0.02), (0.8, 0.3),
                                                                   (0.9, 0.25))]
    line = report.verdict_line(recs, ["numpy"])
    assert line.startswith("verdict: faster than numpy in 1 of 3 cases")
    assert "worst: argmax last tie=first int8 4 at 0.80x numpy" in line
    assert "too busy to judge (timing noise ±25%)" in line
    quiet = [dict(r, noise=0.01) for r in recs]
    assert "±1%: quiet enough to judge" in report.verdict_line(quiet, ["numpy"])
    busy_row = [{"verdict": "busy", "noise": 0.01}, {"verdict": "met", "noise": 0.01}]
    assert "1 overhead goal within the noise" in report.verdict_line(quiet, ["numpy"], busy_row)


def test_peer_errors_are_printed_whole():
    """onnxruntime's error was cut mid-word (issue 37)."""
    case = next(c for c in bench.make_cases("tiny", ["bool"]) if c.op == "argmax")
    recs = {r["peer"]: r for r in bench.run_case(case, "cpu", "tiny", 0.001, True,
                                                 peer_names=["numpy", "onnxruntime"])}
    if "onnxruntime" not in recs:
        pytest.skip("onnxruntime is not installed")
    note = recs["onnxruntime"]["peer_status"]
    assert note.endswith("is invalid."), note            # (it ended "... in node () is i")
    assert set(recs) == {"numpy", "onnxruntime"}


def test_update_docs_replaces_only_its_block(tmp_path):
    doc = tmp_path / "perf.md"
    doc.write_text("# page\n\nbefore\n<!-- bench:cpu:begin -->\nSTALE TABLE\n<!-- bench:cpu:end -->\nafter\n")
    rc = bench.main(["--tiny", "--no-cold", "--no-overhead", "--quiet", "--cases",
                     "^count_nonzero/d=0.1/float32$", "--update-docs", str(doc)])
    assert rc == 0
    text = doc.read_text()
    assert "STALE TABLE" not in text and text.startswith("# page\n\nbefore\n") and text.endswith("after\n")
    assert "count_nonzero" in text and text.count("<!-- bench:cpu:begin -->") == 1
    bench.update_docs(doc, "cuda", ["| t |"])       # a page without the markers: appended
    assert "## Latest cuda tables" in doc.read_text() and "| t |" in doc.read_text()


def test_threads_are_reported_and_set(tmp_path, capsys, monkeypatch):
    """--threads N runs cupyops' NumPy path (and PyTorch's CPU peer) on N threads and says so;
    without it the library's setting counts, so CUPYOPS_NUM_THREADS=1 means one thread. The
    setting is as it was afterwards."""
    import cupyops
    out = tmp_path / "b.json"
    before = cupyops.get_num_threads()
    torch_before = __import__("torch").get_num_threads() if _has("torch") else None
    assert bench.main(["--device", "cpu", "--tiny", "--cases", "^argmax/last tie=first/float32$",
                       "--no-cold", "--no-overhead", "--quiet", "--threads", "3",
                       "--json", str(out)]) == 0
    meta = json.loads(out.read_text())["meta"]
    assert meta["threads"] == 3
    first = capsys.readouterr().out.splitlines()[0]
    assert "cupyops on 3 threads" in first, first
    assert cupyops.get_num_threads() == before
    if _has("torch"):
        import torch
        assert meta["torch_threads"] == 3 and torch.get_num_threads() == torch_before
        recs = json.loads(out.read_text())["records"]
        assert any(r["peer"] == "torch" and r["ratio"] for r in recs), recs
    from cupyops.core import threads as T
    monkeypatch.setattr(T._state, "env_value", 1)       # CUPYOPS_NUM_THREADS=1 at import
    assert bench.main(["--device", "cpu", "--tiny", "--cases", "^argmax/last tie=first/float32$",
                       "--no-cold", "--no-overhead", "--quiet", "--no-peers",
                       "--json", str(out)]) == 0
    assert json.loads(out.read_text())["meta"]["threads"] == 1
    assert "cupyops on 1 thread" in capsys.readouterr().out
    assert bench.main(["--device", "cpu", "--tiny", "--threads", "0", "--no-cold"]) == 2
    assert "--threads" in capsys.readouterr().err


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6])
def test_threads_check_orders_are_balanced(n):
    """Each callable follows every other equally often (a rotation gave the library's call the
    2-thread limit as its predecessor in every round), and each order is a permutation."""
    from collections import Counter

    from cupyops.bench import threads_check
    orders = threads_check.balanced_orders(n)
    assert all(sorted(o) == list(range(n)) for o in orders)
    pairs = Counter((o[k], o[k + 1]) for o in orders for k in range(n - 1))
    assert len(pairs) == n * (n - 1) and len(set(pairs.values())) <= 1


def test_threads_check_runs(tmp_path, capsys):
    """python -m cupyops.bench.threads_check: every case of the size set (--cases narrows
    them), each against one thread, NumPy and the 2-thread limit, with the run's noise; the
    goal rows alone with --goals-only."""
    from cupyops.bench import threads_check
    out = tmp_path / "t.json"
    assert threads_check.main(["--sizes", "tiny", "--rounds", "1", "--threads", "2",
                               "--goals-only", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "on 2 threads" in text and text.count("limit") >= len(threads_check.CASES)
    doc = json.loads(out.read_text())
    assert doc["threads"] == 2 and len(doc["rows"]) == len(threads_check.CASES)
    for r in doc["rows"]:
        assert r["seconds"] > 0 and r["limit_seconds"] > 0 and isinstance(r["met"], bool)
        assert "goal" in r and r["noise"] >= 0
    import argparse
    cases = threads_check.select(argparse.Namespace(sizes="full", dtypes=None,
                                                    goals_only=False, cases=None))
    assert len(cases) == len(bench.make_cases("full"))          # every case by default
    assert threads_check.main(["--sizes", "tiny", "--rounds", "2", "--threads", "2",
                               "--cases", "^hardmax/middle tie=last/int8$|decode 1x",
                               "--json", str(out)]) == 0
    rows = json.loads(out.read_text())["rows"]
    assert [(r["op"], r["case"]) for r in rows][0] == ("hardmax", "middle tie=last")
    assert len(rows) == 1 + sum(c.case.startswith("decode 1x") for c in bench.make_cases("tiny"))
    assert all("goal" not in r and isinstance(r["not_slower"], bool) for r in rows)
    assert "at least as fast on 2 threads as on one" in capsys.readouterr().out


def test_call_overhead_runs(tmp_path, capsys):
    """python -m cupyops.bench.call_overhead: per case, the median of (cupyops - the NumPy
    routine it ends in) over interleaved rounds, its noise and the 1.5 µs goal."""
    from cupyops.bench import call_overhead
    out = tmp_path / "o.json"
    assert call_overhead.main(["--rounds", "4", "--threads", "1", "--cases", "bool",
                               "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["threads"] == 1 and len(doc["rows"]) == 3
    for r in doc["rows"]:
        assert "bool" in r["case"] and r["us"] > 0 and r["routine_us"] > 0
        assert r["noise_us"] >= 0 and r["met"] == (r["over_us"] <= call_overhead.GOAL_US)
    assert "goals met:" in capsys.readouterr().out
