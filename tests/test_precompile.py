"""precompile from the shell and its progress (issue 33), and the NVRTC timing tool's plan:
what it times is what the library compiles. No compiler runs here except one small reference
compile with NVRTC; precompile's threads and module list are tested in tests/test_modules.py."""
import io
import json
import time

import numpy as np
import pytest

import cupyops
from cupyops import __main__ as cli
from cupyops.core import backend as _backend
from cupyops.core import modules as m
from cupyops.core import progress as _progress
from _fake_modules import OneKernelModule


@pytest.fixture
def fake_simt(monkeypatch):
    built = []

    def factory(source, options, exprs, device_id):
        built.append(exprs)
        return OneKernelModule(exprs)
    monkeypatch.setitem(m._factories, "simt", factory)
    monkeypatch.setattr(_backend, "_backends", {})
    m.clear_cache()
    yield built
    m.clear_cache()


def test_cli_precompiles_the_chosen_modules(fake_simt, capsys):
    rc = cli.main(["precompile", "--device", "simt", "--dtypes", "float32", "int8",
                   "--families", "nonzero", "--workers", "2"])
    assert rc == 0
    fam = m.get_family("nonzero")
    want = {g for dt in (np.float32, np.int8) for g in fam.modules_for(dt)}
    # float32: 3 kernels x 2 index widths; int8: the tile kernel also with its packed path
    assert set(fake_simt) == want and len(fake_simt) == len(want) == 6 + 8
    out = capsys.readouterr().out
    assert "14 kernels of 2 family x dtype pairs ready on simt" in out


def test_cli_names_a_bad_argument(fake_simt, capsys):
    assert cli.main(["precompile", "--device", "simt", "--dtypes", "str"]) == 1
    assert "no chosen kernel family serves dtype" in capsys.readouterr().err
    assert cli.main(["precompile", "--device", "tpu"]) == 1
    assert "device must be" in capsys.readouterr().err
    assert fake_simt == []


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_batch_counts_modules_on_a_terminal(monkeypatch):
    monkeypatch.delenv("CUPYOPS_PROGRESS", raising=False)
    term, pipe = _Terminal(), io.StringIO()
    for stream in (term, pipe):
        with _progress.batch(3, "cuda", stream=stream) as b:
            b.notice.after = 0.0
            b.notice.__exit__(None, None, None)       # restart its timer at 0 s
            b.notice.__enter__()
            time.sleep(0.1)
            for _ in range(3):
                b.advance("nonzero", ("k<float>",))
    assert "\rcupyops: precompile: 3/3 modules" in term.getvalue()
    assert "precompile: compiling 3 kernel modules for CUDA" in term.getvalue()
    assert "3/3" not in pipe.getvalue() and "done in" in pipe.getvalue()


# ------------------------------------------------------------------------------------------
# The NVRTC timing tool times the library's modules
# ------------------------------------------------------------------------------------------

def test_timing_plan_is_the_library_modules():
    from cupyops.tools import nvrtc_timing as nt
    jobs = nt.plan_jobs(("family", "runtime"), ["nonzero"], ["bool", "int8", "float32"])
    family = [j for j in jobs if j["grouping"] == "family"]
    runtime = [j for j in jobs if j["grouping"] == "runtime"]
    fam = m.get_family("nonzero")
    # before: one module per family x dtype, the family's source as the library compiled it
    # (bool and int8 are one instantiation: one compile, as CuPy's disk cache made it)
    assert [j["dtypes"] for j in family] == [["bool", "int8"], ["float32"]]
    assert family[0]["source"] == m.module_source("nonzero")
    assert family[0]["exprs"] == list(fam.expressions_for(np.bool_))
    # after: the registry's modules, bool and int8 sharing theirs (8: the tile kernel also
    # with its packed path), float32 6, with the runtime source
    assert len(runtime) == 8 + 6
    for j in runtime:
        assert j["source"] == m.module_source("nonzero", tuple(j["exprs"]))
        assert j["options"] == list(m.compile_options(fam))
    assert {tuple(j["dtypes"]) for j in runtime} == {("bool", "int8"), ("float32",)}


def test_timing_worker_compiles_with_cupys_options():
    pytest.importorskip("cuda.bindings.nvrtc")
    pytest.importorskip("cupy")
    from cupyops.tools import nvrtc_timing as nt
    registered = m.families().get("selftest")
    m.register_family(m.SELFTEST_FAMILY)
    try:
        job = nt.plan_jobs(("runtime",), ["selftest"], ["int16"])[0]
        res = nt.worker(job)
    finally:
        if registered is None:          # as it was: other test files register it at import
            m._families.pop("selftest", None)
    assert res["seconds"] > 0 and res["reference_s"] > 0 and res["cubin_bytes"] > 0
    assert res["options_from"].startswith("CuPy ")
    # exactly what a RawModule hands NVRTC: CuPy's assembled options, -ftz=true, the arch,
    # --device-as-default-execution-space (tests/cupy_compile.py builds them through CuPy)
    import sys
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
    import cupy_compile
    assert tuple(res["options"]) == cupy_compile.rawmodule_options(tuple(job["options"])) + (
        "-arch=sm_90", "--device-as-default-execution-space")


def test_timing_report_from_records():
    from cupyops.tools import nvrtc_timing as nt
    exprs = m.get_family("argreduce").expressions_for(np.float32)
    base = dict(family="argreduce", dtypes=["float32"], arch=90, load_s=0.01,
                preprocess_s=0.03, reference_s=0.1, loadavg=1.0, options=["-arch=sm_90"],
                options_from="CuPy 14.2.0")
    recs = [dict(base, grouping="family", exprs=list(exprs), seconds=4.0, ratio=40.0)]
    recs += [dict(base, grouping="runtime", exprs=[e], seconds=0.5, ratio=5.0) for e in exprs]
    text = nt.report(recs)
    assert ("| argmin / argmax / nanarg* / hardmax | float32 | 4.04 (40.4x) | 0.54 (5.4x), row "
            "or decode, vec 4 | 1.04 (10.4x), split rows, vec 4 | 1.04 (10.4x), split rows, "
            "vec 4 |") in text
    n = len(exprs)                    # index and values modes of each kernel
    assert n >= 6 and f"| family | 1 | 4.0 | 40 |" in text
    assert f"| runtime | {n} | {0.5 * n:.1f} | {5 * n} |" in text
    assert f"runtime / family: {0.5 * n / 4:.2f} in seconds" in text
    json.dumps(recs)


def test_timing_compare_with_an_earlier_run():
    from cupyops.tools import nvrtc_timing as nt
    base = dict(family="argreduce", grouping="runtime", load_s=0.0, preprocess_s=0.0,
                reference_s=0.1, loadavg=1.0)
    before = [dict(base, dtypes=["int8"], exprs=[f"k{i}<x>"], seconds=1.0, ratio=10.0)
              for i in range(2)]
    after = [dict(base, dtypes=["int8"], exprs=[f"k{i}<x, 1>"], seconds=0.5, ratio=r)
             for i, r in enumerate((5.0, 6.0, 4.0))]
    after.append(dict(base, family="nonzero", dtypes=["int8"], exprs=["n"], seconds=9.0,
                      ratio=90.0))       # in one run only: not compared
    lines = nt.compare_table(before, after)
    assert "| argreduce | int8 | 2 | 20 | 1.00 (10.0x) | 3 | 15 | 0.50 (6.0x) |" in lines
    assert "| argreduce | 2 | 2.0 | 20 | 3 | 1.5 | 15 | 0.75 |" in lines
    assert "| all | 2 | 2.0 | 20 | 3 | 1.5 | 15 | 0.75 |" in lines
    assert not any("nonzero" in ln for ln in lines)


# ------------------------------------------------------------------------------------------
# simt: one module a kernel, so the header every module includes is precompiled once
# ------------------------------------------------------------------------------------------

def test_simt_precompiled_header_and_its_fallback(tmp_path, monkeypatch):
    from cupyops import simt  # noqa: F401
    from cupyops.simt import _build
    if not cupyops.available_devices().count("simt"):
        pytest.skip("no C++ compiler for simt")
    monkeypatch.setenv("CUPYOPS_SIMT_CACHE", str(tmp_path))
    flags = [*_build.KERNEL_FLAGS, *_build.instrumentation_flags(), f"-I{_build.INCLUDE_DIR}"]
    header = _build.precompiled_header(flags)
    assert header.parent == tmp_path and (tmp_path / (header.name + ".gch")).stat().st_size > 0
    assert "simt_cuda.h" in header.read_text()          # the stub: the same text without it
    calls = []
    monkeypatch.setattr(_build, "_run_compiler", lambda cmd, what: calls.append(cmd))
    assert _build.precompiled_header(flags) == header and calls == []      # cached
    assert sorted(p.name for p in tmp_path.iterdir() if ".tmp" in p.name or p.suffix == ".su") == []

    def refuse(cmd, what):
        raise _build.CompileError("no PCH here", log="")
    monkeypatch.setattr(_build, "_run_compiler", refuse)
    assert _build.precompiled_header(flags + ["-DOTHER"]) == _build.INCLUDE_DIR / "simt_cuda.h"


def test_timing_report_goes_into_its_docs_block(tmp_path):
    from cupyops.tools import nvrtc as _nvrtc
    from cupyops.tools import nvrtc_timing as nt
    doc = tmp_path / "kernels.md"
    doc.write_text("# Kernel resources\n\ntable\n")
    nt.update_docs(doc, "report one\n", "python -m cupyops.tools.nvrtc_timing --from-json x.json")
    text = doc.read_text()
    assert text.startswith("# Kernel resources\n\ntable\n") and "report one" in text
    assert nt.SECTION_BEGIN in text and "generated by: python -m cupyops.tools.nvrtc_timing " \
        "--from-json x.json" in text
    # prose added inside the section by hand stays; the report is replaced
    doc.write_text(text.replace("# NVRTC time per module (issue 33)\n",
                                "# NVRTC time per module (issue 33)\n\nprose\n"))
    nt.update_docs(doc, "report two\n", "python -m cupyops.tools.nvrtc_timing")
    text = doc.read_text()
    assert "prose" in text and "report two" in text and "report one" not in text
    # nvrtc --table regenerates the file and keeps the section
    assert "nvrtc-timing" in _nvrtc.KEPT_BLOCKS
