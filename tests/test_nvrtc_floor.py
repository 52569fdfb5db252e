"""The kernel modules compile with the oldest NVRTC the package claims (the cuda13 extra's
floor, 13.0), not only with the NVRTC installed here (13.5): a GPU machine's NVRTC 13.0 once
rejected code that 13.5 and CuPy's compile path here accepted.

``python -m cupyops.tools.nvrtc_floor --download`` runs in a fresh process (the floor's
library must be loaded before any other NVRTC): every module of float16 for sm_90, and a probe of a construct 13.0 rejects, which shows that 13.0 is what compiled them.
Needs the package index once (the wheel is kept in the cache folder ``nvrtc-floor``)."""
import json
import subprocess
import sys

import pytest

from cupyops.tools import nvrtc as T
from cupyops.tools import nvrtc_floor

ok, why = T.available()
pytestmark = pytest.mark.skipif(not ok, reason=f"NVRTC unavailable: {why}")


@pytest.fixture(scope="module")
def floor_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("floor") / "floor.json"
    proc = subprocess.run([sys.executable, "-m", "cupyops.tools.nvrtc_floor", "--download",
                           "--json", str(out)], capture_output=True, text=True, timeout=900)
    if not out.is_file():
        pytest.fail(f"nvrtc_floor wrote no result (exit {proc.returncode}):\n"
                    f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc, json.loads(out.read_text())


def test_every_sampled_module_compiles_with_the_floor(floor_run):
    proc, res = floor_run
    assert res["version"] == [13, 0], res["version"]
    assert not res["failed"], "\n\n".join(res["failed"])[:6000]
    assert proc.returncode == 0
    want = nvrtc_floor.modules()
    assert res["modules"] == len(want)
    assert set(res["families"]) == set(nvrtc_floor.kernel_families())
    assert {"argreduce", "nonzero", "segment", "segment_flat"} <= set(res["families"])


def test_the_floor_is_what_compiled(floor_run):
    """NVRTC 13.0 rejects static_assert over __builtin_offsetof (the H200 machine's failure);
    the NVRTC installed here accepts it: the check ran on the floor, and can fail."""
    _, res = floor_run
    assert res["offsetof_assert"] is False
    assert T.nvrtc_version() > (13, 0)
    T.compile_program(nvrtc_floor.OFFSETOF_PROBE, ("--gpu-architecture=sm_90",))


def test_the_floor_matches_the_extra():
    """FLOOR follows pyproject.toml's cuda13 extra: cuda-toolkit's lowest 13 release."""
    from _cupy_extras import floor_pins
    low = floor_pins("cuda13")["cuda-toolkit"]
    assert nvrtc_floor.FLOOR == f"nvidia-cuda-nvrtc=={low}.*"
