"""Issue 26's memory goals on the kernels' reading passes, from the memory terms of the kernel
model (cupyops/bench/issue_rate.py: the records ``python -m cupyops.bench.issue_rate --json``
writes), for the benchmark's cases at the quick sizes and the layouts issue 26 names:

* >= 16 KiB in flight per SM on sm_90 for every "read" pass (the kernel's loads per iteration x
  width x the threads NVRTC's registers and shared memory leave resident on an SM);
* <= 1.5 L1->L2 requests per unique sector for every "read" pass of a nonzero call.

Slow (every layout runs on simt: a few minutes): ``pytest --run-slow``. Needs NVRTC and
cuobjdump (the test extra) and simt's C++ compiler; skipped, with the reason, without them.
"""
from __future__ import annotations

import pytest

from cupyops.bench import issue_rate as ir

_OK, _WHY = ir.available()
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not _OK, reason=f"issue-rate tools unavailable: {_WHY}")]


@pytest.fixture(scope="module")
def records():
    return ir.memory_records(ir.bench_layouts("quick") + ir.NAMED_LAYOUTS(), (90, 80))


def _table(rows, key, fmt):
    return "\n".join(f"  {r['layout']} | {r['kernel']} | blocks {r['blocks']} | "
                     f"{fmt(r[key])}" for r in rows)


def test_every_layout_has_a_read_pass(records):
    layouts = {r["layout"] for r in records}
    read = {r["layout"] for r in records if r["pass"] == "read"}
    assert layouts == read, sorted(layouts - read)


def test_read_passes_keep_16_kib_in_flight_per_sm_on_sm_90(records):
    miss = ir.goal_misses(records)["in_flight"]
    assert not miss, (f"{len(miss)} read passes below {ir.GOAL_IN_FLIGHT // 1024} KiB in flight "
                      "per SM on sm_90:\n"
                      + _table(miss, "bytes_in_flight_per_sm", lambda v: f"{v / 1024:.2f} KiB"))


def test_nonzero_read_passes_ask_at_most_1_5_requests_per_unique_sector(records):
    miss = ir.goal_misses(records)["requests"]
    assert not miss, (f"{len(miss)} nonzero read passes above {ir.GOAL_REQUESTS} requests per "
                      "unique sector:\n"
                      + _table(miss, "requests_per_unique_sector", lambda v: f"{v:.2f}"))
