"""``bench cuda``'s GPU sections (issue 32, part 3): the time budget and its deadline, the large
cases and the host cost (:mod:`cupyops.bench.gpu_cases`), the cold-compile section, and their
text and Markdown.

* **Budget.** :func:`estimate` adds up, before anything runs, what the run will take on an
  H200 from the case sizes (4.3 TB/s of copy): the quick set's timing rounds, the large cases
  (:func:`cupyops.bench.gpu_cases.case_seconds`), the host cost, the overhead section, start-up.
  ``bench cuda`` refuses a run whose estimate passes ``--deadline`` (default
  :data:`CUDA_DEADLINE_S` = 90 s), and once the deadline passes it records the cases left as
  ``not run`` and exits 1: the run never overstays silently.
* **Cold compile** (``--compile-only``): the first call of every case, cupyops and each peer
  one at a time (NVRTC and CuPy's own kernels), and the fresh-process cold-start scenarios; run
  with empty caches pointed at a folder the timed run then reuses warm.
* **From JSON** (``--from-json``): the Markdown and the docs block rebuilt from a run's JSON,
  on any machine (the GPU run's tables land in docs/performance.md from its JSON).
"""
from __future__ import annotations

import json
import math
import time

from cupyops.bench import device_model
from cupyops.bench import gpu_cases as G
from cupyops.bench.tables import format_markdown, format_text

__all__ = ["CUDA_DEADLINE_S", "estimate", "Deadline", "large_section", "compile_section",
           "text_lines", "markdown_lines", "load_run"]

#: what ``bench cuda`` (quick set + large cases + peers, warm caches) must fit in on the GPU
CUDA_DEADLINE_S = 90.0
#: estimate's constants: a quick case's setup (input, NumPy reference, peers' checks), a timing
#: round's batch per callable, start-up (imports, copy bandwidth), the overhead section
QUICK_SETUP_S, ROUND_BATCH_S, START_S, OVERHEAD_S = 0.1, 2e-3, 8.0, 12.0


def quick_case_seconds(budget: float, repeat: int, fns: int = 4) -> float:
    """One quick case under ``bench.time_cuda``: at least 3 rounds, more until ``budget`` per
    callable is spent, of one ~2 ms batch per callable (cupyops, CuPy, PyTorch, the copy);
    ``repeat`` times."""
    rounds = max(3, math.ceil(budget / ROUND_BATCH_S))
    return QUICK_SETUP_S + max(1, repeat) * rounds * fns * ROUND_BATCH_S


def estimate(n_quick: int, budget: float, repeat: int, large: list, *, overhead: bool,
             host: bool, bandwidth: float = device_model.H200.copy_bandwidth) -> dict:
    """Seconds per part and in all, on a device of ``bandwidth`` bytes/s of copy."""
    parts = {"start": START_S, "quick": n_quick * quick_case_seconds(budget, repeat),
             "large": G.estimate_seconds(large, bandwidth, max(5, repeat)),
             "host_cost": 1.5 if host else 0.0, "overhead": OVERHEAD_S if overhead else 0.0}
    parts["total"] = sum(parts.values())
    return parts


class Deadline:
    """``seconds`` from ``start`` (``time.perf_counter()``); None: no deadline."""

    def __init__(self, seconds, start=None):
        self.seconds = seconds
        self.start = time.perf_counter() if start is None else start

    @property
    def at(self):
        return None if not self.seconds else self.start + self.seconds

    def passed(self) -> bool:
        return self.at is not None and time.perf_counter() > self.at

    def elapsed(self) -> float:
        return time.perf_counter() - self.start


def not_run(base: dict, why: str) -> dict:
    return dict(base, seconds=None, peer=None, peer_seconds=None, ratio=None, bytes=None,
                ok=None, status=f"not run: {why}")


def section_cases(scale) -> list:
    """The GPU section's cases: gpu_events' kernel-memory cases (at their own sizes, left out
    of a ``"tiny"`` rehearsal) and the large cases at ``scale``."""
    from cupyops.bench import gpu_events
    return (gpu_events.kernel_cases() if scale != "tiny" else []) + G.large_cases(scale)


def large_section(env, scale, repeat, deadline: Deadline, quiet=False) -> dict:
    """gpu_events' and the large cases, and the host cost, on ``env`` within ``deadline``."""
    cases = section_cases(scale)
    recs = G.measure_cases(cases, env, max(5, repeat), deadline=deadline.at,
                           progress=None if quiet else G.print_progress)
    host = [] if deadline.passed() else G.host_cost(env, 1000 if env.events else 50,
                                                  max(5, repeat))
    return {"records": recs, "host_cost": host, "scale": scale, "env": env.name}


# --------------------------------------------------------------------------------------------
# cold compile
# --------------------------------------------------------------------------------------------

def _first_call(fn, sync) -> float:
    t0 = time.perf_counter()
    fn()
    sync()
    return time.perf_counter() - t0


def _quick_first_calls(cases, device, peer_table, xp, sync) -> list:
    from cupyops.bench.cases import cupyops_call, make_input
    rows = []
    for case in cases:
        x = xp.asarray(make_input(case))
        row = {"case": case.id, "cupyops_s": _first_call(lambda: cupyops_call(case, device)(x),
                                                         sync), "peers_s": {}}
        for name, builder in peer_table.items():
            try:
                fn, _ = builder(case)
                prep = getattr(fn, "prepare", None)
                xp_ = prep(x) if prep else x
                row["peers_s"][name] = _first_call(lambda: fn(xp_), sync)
            except Exception as exc:
                row["peers_s"][name] = None
                row.setdefault("notes", []).append(f"{name}: {type(exc).__name__}")
        rows.append(row)
    return rows


def _large_first_calls(env, scale) -> list:
    import cupyops
    rows = []
    for k, case in enumerate(G.large_cases(scale)):
        x = case.make(env.xp, env.rng(k))
        row = {"case": case.name, "cupyops_s": _first_call(
            lambda: case.ours(cupyops, x, env.device), env.sync), "peers_s": {}}
        for name, f in case.peers.items():
            if name == "torch" and env.torch is None:
                continue
            arg = (env.torch, env.to_torch(x)) if name == "torch" else (env.xp, x)
            try:
                row["peers_s"][name] = _first_call(lambda: f(*arg), env.sync)
            except Exception:
                row["peers_s"][name] = None
        rows.append(row)
        del x
        env.free()
    return rows


def compile_section(cases, device, peer_table, env, scale, cold_start=None) -> dict:
    """The first call of every quick and large case, cupyops and each peer apart (with empty
    caches: the cold compile), and ``cold_start(device)``'s fresh-process scenarios (bench's
    cold start) unless it is None."""
    t0 = time.perf_counter()
    rows = _quick_first_calls(cases, device, peer_table, env.xp, env.sync)
    rows += _large_first_calls(env, scale)
    out = {"rows": rows, "wall_s": time.perf_counter() - t0,
           "cupyops_s": sum(r["cupyops_s"] for r in rows),
           "peers_s": sum(v for r in rows for v in r["peers_s"].values() if v)}
    if cold_start is not None:
        out["cold_start"] = cold_start("cuda" if env.events else device)
    return out


def compile_lines(section: dict, fmt, top: int = 12) -> list:
    rows = sorted(section["rows"], key=lambda r: -r["cupyops_s"])[:top]
    peers = sorted({p for r in section["rows"] for p in r["peers_s"]})
    hdr = ["first call (slowest first)", "cupyops s"] + [f"{p} s" for p in peers]
    body = [[r["case"], f"{r['cupyops_s']:.2f}"] + [G.fmt_num(r["peers_s"].get(p), ".2f")
                                                    for p in peers] for r in rows]
    return [f"cold compile: {len(section['rows'])} first calls in {section['wall_s']:.1f} s "
            f"(cupyops {section['cupyops_s']:.1f} s, peers {section['peers_s']:.1f} s)", "",
            fmt(hdr, body)]


# --------------------------------------------------------------------------------------------
# the report
# --------------------------------------------------------------------------------------------

def budget_line(budget: dict) -> str:
    est = budget.get("estimate", {})
    parts = ", ".join(f"{k} {v:.0f} s" for k, v in est.items() if k != "total")
    dl = budget.get("deadline_s")
    line = (f"time budget: estimated {est.get('total', 0):.0f} s on an H200 ({parts}), "
            + (f"deadline {dl:.0f} s" if dl else "no deadline")
            + f"; took {budget.get('elapsed_s', 0):.0f} s")
    if budget.get("not_run"):
        line += f"; NOT RUN past the deadline: {budget['not_run']} cases"
    return line


def _sections(gpu: dict, fmt) -> list:
    out = []
    if gpu.get("budget"):
        out += [budget_line(gpu["budget"]), ""]
    large = gpu.get("large") or {}
    if large.get("records") or large.get("host_cost"):
        out += [f"large cases ({large.get('scale')} scale, {large.get('env')}): µs per call from "
                "CUDA events and the host clock, copy fraction = time of a device-to-device "
                "copy moving the minimum bytes / cupyops' time, ratio = peer / cupyops "
                "(medians of interleaved repeats)", ""]
        out += G.report_lines(large.get("records") or [], large.get("host_cost") or (), fmt)
        out.append("")
    if gpu.get("compile"):
        out += compile_lines(gpu["compile"], fmt) + [""]
    return out


def text_lines(gpu: dict) -> list:
    return _sections(gpu, format_text)


def markdown_lines(gpu: dict) -> list:
    return _sections(gpu, format_markdown)


def load_run(path, args, Run):
    """A ``Run`` (:class:`cupyops.bench.bench.Run`) rebuilt from a run's ``--json`` file
    (nothing measured): its tables can be written again, e.g. into docs/performance.md."""
    doc = json.loads(open(path).read())
    meta = doc.get("meta") or {}
    run = Run(args, ["--from-json", str(path)], meta.get("device", "cuda"),
              meta.get("mode", "quick"), meta.get("budget_s") or 0.0, [], {}, meta=meta,
              records=doc.get("records") or [], cold=doc.get("cold_start") or [],
              overhead_rows=doc.get("overhead") or [])
    gbps = meta.get("copy_bandwidth_gbps")
    run.copy_bw = gbps * 1e9 if gbps else None
    run.gpu = doc.get("gpu") or {}
    return run
