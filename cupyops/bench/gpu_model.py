"""The model table (issue 32, part 4): the device model's predicted time of every case the GPU
run times, next to the measured time and Nsight Compute's DRAM throughput.

Three commands:

* ``prepare`` (here, before a visit; simt, NVRTC and cuobjdump, no GPU):
  ``python -m cupyops.bench.gpu_model prepare --out gpu-wheels/model-inputs.json``. For every
  case of bench cuda's GPU section (gpu_events' cases and the 256 MiB cases) and the quick set:

  - ``sectors_ratio``: sectors the call touches / the minimum, from a simt run of a *twin* (the
    case itself where simt can run it, else the same layout at 1 MiB);
  - the launches of the full-size call, from ``dry_run`` on simt (the planner's device is an
    H100's 132 SMs, an H200's too): kernel, grid, block, whether it reads the input, and per
    read launch the bytes one thread keeps in flight and the blocks an SM holds (SASS path and
    occupancy, :mod:`cupyops.bench.issue_rate`; left out where cuobjdump is missing);
  - the device-to-host reads of the call (the exact nonzero's count);
  - a hash of the kernel and launch sources: the table flags inputs prepared for other code.

* ``ncu-pass`` (on the GPU, under ``ncu``): one warm call of every GPU-section case, and a
  manifest of the cupyops kernels each launched, in order, so ncu's rows map to cases.

* ``table`` (anywhere): for each case measured (the bench's JSON)::

      predicted = min bytes x sectors_ratio / bandwidth(in flight) + launches x launch
                  + host reads x sync
      bandwidth(in flight) = min(copy bandwidth, SMs x bytes in flight per SM / latency)

  with the device's SMs, copy bandwidth (measured in the same run) and latency
  (:mod:`cupyops.bench.device_model`). A case off by more than 25 % on an input of >= 1 MiB is
  flagged, with what the model cannot see where a rule names it (a host-bound call: the model
  has no host side; a host read between passes). The Markdown goes between the
  ``model:cuda`` markers of docs/performance.md.
"""
from __future__ import annotations

import argparse
import contextlib
import csv
import hashlib
import json
import math
import pathlib
import sys

import numpy as np

from cupyops.bench import device_model

__all__ = ["OFF_LIMIT", "MIN_FLAG_BYTES", "source_hash", "prepare_case", "prepare", "predict",
           "parse_ncu_csv", "ncu_by_case", "table_rows", "render_markdown", "update_docs",
           "main"]

OFF_LIMIT, MIN_FLAG_BYTES = 0.25, 1 << 20
DOC_BEGIN, DOC_END = "<!-- model:cuda:begin -->", "<!-- model:cuda:end -->"
ROOT = pathlib.Path(__file__).resolve().parents[2]


def source_hash() -> str:
    """A hash of what the model inputs depend on: kernels, plans, launch code."""
    h = hashlib.sha256()
    pkg = pathlib.Path(__file__).resolve().parents[1]
    kern = pkg.parent / "kernels"
    files = sorted(kern.glob("*.cu*")) + sorted(pkg.glob("ops/*/plan.py")) + \
        sorted(pkg.glob("ops/*/launch.py"))
    for f in files:
        h.update(f.name.encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


# --------------------------------------------------------------------------------------------
# prepare (simt, here)
# --------------------------------------------------------------------------------------------

def _twin_sectors(call, x) -> tuple:
    """(sectors_ratio, launches, d2h) of ``call(x)`` on simt, measured."""
    import cupyops.simt as simt
    from cupyops.bench import cases as _cases
    from cupyops.bench import traffic
    from cupyops.bench.gpu_cases import min_bytes  # noqa: F401  (same outputs rule)
    from cupyops.core import trace
    with contextlib.ExitStack() as st:
        tr = st.enter_context(trace.recording())
        st.enter_context(_cases.cupy_like_simt_allocations())
        rec = st.enter_context(simt.record_traffic())
        res = call(x)
    outs = [a for a in (res if isinstance(res, tuple) else (res,)) if hasattr(a, "nbytes")]
    f = traffic.traffic_fields(list(rec.launches), [x], outs)
    return f["sectors_ratio"], f["launches"], tr.d2h_reads


def _full_launches(call, x, count) -> tuple:
    """(launch dicts, d2h reads) of ``call(x)`` planned at full size under dry_run on simt."""
    from cupyops.testing import dry_run
    with dry_run(count=count) as rec:
        call(x)
    out = []
    for expr, grid, block, smem, args in rec.launches:
        reads = any(isinstance(a, np.ndarray) and not a.dtype.names
                    and np.may_share_memory(a, x) for a in args)
        out.append({"kernel": expr, "grid": list(grid), "block": list(block),
                    "shared_mem": int(smem), "reads_input": bool(reads), "args": args})
    return out, rec.d2h_reads


def _in_flight_terms(models, launch, arch=90):
    """Bytes in flight per thread and blocks per SM of a read launch (SASS + occupancy)."""
    from cupyops.bench import issue_rate as ir
    from cupyops.tools import nvrtc as _nvrtc
    params = next((a for a in launch["args"] if isinstance(a, np.void) or (
        isinstance(a, np.ndarray) and a.dtype.names)), None)
    if isinstance(params, np.ndarray):
        params = params.reshape(-1)[0]
    itemsize = models.path(launch["kernel"], arch, None)["itemsize"]
    p = models.path(launch["kernel"], arch, ir.planned_load_width(params, itemsize))
    m = p["model"]
    per_thread = 0.0 if m["kind"] == "none" else m["elements"] * p["itemsize"]
    threads = math.prod(launch["block"])
    occ = _nvrtc.occupancy(p["registers"], threads, arch, 0,
                           p["shared_static"] + launch["shared_mem"])
    return {"per_thread_bytes": per_thread, "blocks_per_sm": occ.blocks_per_sm}


def prepare_case(key, twin_call, twin_x, full_call, full_x, count, models=None) -> dict:
    """The model inputs of one case (see the module doc)."""
    ratio, twin_launches, _ = _twin_sectors(twin_call, twin_x)
    launches, d2h = _full_launches(full_call, full_x, count)
    for ln in launches:
        if models is not None and ln["reads_input"]:
            try:
                ln.update(_in_flight_terms(models, ln))
            except Exception as exc:
                ln["terms_error"] = f"{type(exc).__name__}: {exc}"[:160]
        del ln["args"]
    return {"case": key, "sectors_ratio": ratio, "twin_shape": list(twin_x.shape),
            "twin_launches": twin_launches, "launches": launches, "d2h": d2h}


def _aligned_empty(shape, dtype, align=256):
    dt = np.dtype(dtype)
    n = max(1, math.prod(shape) * dt.itemsize)
    raw = np.empty(n + align, np.uint8)
    off = (-raw.__array_interface__["data"][0]) % align
    return raw[off:off + n].view(dt).reshape(shape)


def _density(name: str) -> float:
    for part in name.split():
        if part.startswith("d="):
            return float(part[2:])
    return 0.1


def _gpu_jobs(scale, twin_scale):
    """(key, twin call, twin input, full call, full input, count) of the GPU section's cases."""
    import cupyops
    from cupyops.bench import gpu_cases as G
    from cupyops.bench import gpu_events
    jobs = []
    for k, c in enumerate(gpu_events.kernel_cases() if scale != "tiny" else []):
        x = c.make(np, np.random.default_rng(k))
        call = (lambda x, c=c: c.ours(cupyops, x, "simt"))
        jobs.append((c.name, call, x, call, x, int(np.count_nonzero(x))))
    for k, (full, twin) in enumerate(zip(G.large_cases(scale), G.large_cases(twin_scale))):
        x = twin.make(np, np.random.default_rng(k))
        big = _aligned_empty(full.shape, G.dtype_of(full.dtype)) if full.nbytes > x.nbytes \
            else x
        count = int(math.prod(full.shape) * _density(full.name))
        jobs.append((full.name, (lambda x, c=twin: c.ours(cupyops, x, "simt")), x,
                     (lambda x, c=full: c.ours(cupyops, x, "simt")), big, count))
    return jobs


def _quick_jobs(mode="quick"):
    from cupyops.bench import bench
    jobs = []
    for c in bench.make_cases(mode):
        x = bench.make_input(c)
        call = bench.cupyops_call(c, "simt")
        jobs.append((c.id, call, x, call, x, int(np.count_nonzero(x))))
    return jobs


def prepare(sets=("kernel", "large", "quick"), scale="full", progress=None, only=None,
            quick_mode="quick") -> dict:
    """The model inputs of every case of ``sets`` (see the module doc), those of ``only`` (a set
    of keys) where given."""
    from cupyops.bench import issue_rate as ir
    ok, why = ir.available()
    models = ir.KernelModels() if ok else None
    twin_scale = "tiny" if scale == "tiny" else "small"
    jobs = _gpu_jobs(scale, twin_scale) if {"kernel", "large"} & set(sets) else []
    jobs += _quick_jobs(quick_mode) if "quick" in sets else []
    if only is not None:
        jobs = [j for j in jobs if j[0] in only]
    out = {"source_hash": source_hash(), "planned_on": "simt (132 SMs, as an H100 or H200)",
           "in_flight_terms": "yes" if ok else f"no: {why}", "cases": {}}
    for k, job in enumerate(jobs):
        if progress:
            progress(k, len(jobs), job[0])
        try:
            out["cases"][job[0]] = prepare_case(*job, models=models)
        except Exception as exc:
            out["cases"][job[0]] = {"case": job[0], "error": f"{type(exc).__name__}: {exc}"}
    return out


# --------------------------------------------------------------------------------------------
# the prediction
# --------------------------------------------------------------------------------------------

def in_flight_per_sm(launch: dict, device) -> float | None:
    """Bytes a read launch keeps in flight per SM on ``device``: per thread x threads per block
    x min(blocks an SM holds, blocks launched / SMs)."""
    if "per_thread_bytes" not in launch:
        return None
    blocks = math.prod(launch["grid"])
    per_sm = min(float(launch["blocks_per_sm"]), blocks / device.sms)
    return launch["per_thread_bytes"] * math.prod(launch["block"]) * per_sm


def predict(inputs: dict, min_bytes: int, device) -> dict:
    """The predicted seconds of a call moving ``min_bytes`` at least, and its terms."""
    reads = [in_flight_per_sm(ln, device) for ln in inputs["launches"] if ln["reads_input"]]
    known = [r for r in reads if r is not None]
    flight = min(known) if known else None
    bw = device_model.achieved_bandwidth(device, flight)
    launches = len(inputs["launches"])
    seconds = (min_bytes * inputs["sectors_ratio"] / bw + launches * device.launch_s
               + inputs["d2h"] * device.sync_s)
    return {"seconds": seconds, "in_flight_per_sm": flight, "bandwidth": bw,
            "launches": launches, "d2h": inputs["d2h"], "sectors_ratio": inputs["sectors_ratio"]}


# --------------------------------------------------------------------------------------------
# Nsight Compute
# --------------------------------------------------------------------------------------------

_UNITS = {"byte": 1, "kbyte": 1e3, "mbyte": 1e6, "gbyte": 1e9, "nsecond": 1e-9,
          "usecond": 1e-6, "msecond": 1e-3, "second": 1, "%": 1, "": 1}


def parse_ncu_csv(text: str) -> list:
    """Kernels of ``ncu --csv`` output (one row per kernel and metric, ``==PROF==`` lines
    around it), in launch order: ``{"id", "kernel", "metrics": {name: value in bytes,
    seconds or %}}``."""
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID"')), None)
    if start is None:
        return []
    kernels: dict = {}
    for row in csv.DictReader(lines[start:]):
        try:
            kid = int(row["ID"])
            value = float(str(row["Metric Value"]).replace(",", ""))
        except (KeyError, ValueError, TypeError):
            continue
        unit = _UNITS.get(str(row.get("Metric Unit", "")).strip().lower(), 1)
        k = kernels.setdefault(kid, {"id": kid, "kernel": row.get("Kernel Name", "?"),
                                     "metrics": {}})
        k["metrics"][row["Metric Name"]] = value * unit
    return [kernels[i] for i in sorted(kernels)]


def ncu_by_case(kernels: list, manifest: list) -> dict:
    """``{case: {"dram_bytes", "seconds", "dram_pct", "kernels"}}``: ncu's kernels handed to the
    manifest's cases in order (each case's kernels as the pass recorded them); a case whose
    kernel names do not match is left out."""
    out, pos = {}, 0
    for entry in manifest:
        names = entry["kernels"]
        rows = kernels[pos:pos + len(names)]
        pos += len(names)
        if len(rows) != len(names) or not all(
                r["kernel"].startswith(n.split("<", 1)[0]) for r, n in zip(rows, names)):
            continue
        m = [r["metrics"] for r in rows]
        secs = sum(x.get("gpu__time_duration.sum", 0.0) for x in m)
        pct = sum(x.get("dram__throughput.avg.pct_of_peak_sustained_elapsed", 0.0)
                  * x.get("gpu__time_duration.sum", 0.0) for x in m) / secs if secs else None
        out[entry["case"]] = {"dram_bytes": sum(x.get("dram__bytes_read.sum", 0.0)
                                                + x.get("dram__bytes_write.sum", 0.0) for x in m),
                              "seconds": secs, "dram_pct": pct, "kernels": len(rows)}
    return out


def ncu_pass(env, scale="full") -> list:
    """One call of every GPU-section case (warm: the bench compiled them), recording the
    cupyops kernels each launched: the manifest ncu's rows are mapped with."""
    import cupyops
    from cupyops.bench import gpu_bench
    from cupyops.testing import recording
    manifest = []
    for k, case in enumerate(gpu_bench.section_cases(scale)):
        x = case.make(env.xp, env.rng(k))
        env.sync()
        with recording() as tr:
            case.ours(cupyops, x, env.device)
            env.sync()
        manifest.append({"case": case.name, "kernels": [ln[0] for ln in tr.launches]})
        del x
        env.free()
    return manifest


# --------------------------------------------------------------------------------------------
# the table
# --------------------------------------------------------------------------------------------

def measured_cases(bench_doc: dict) -> dict:
    """``{case: {"seconds", "min_bytes", "bytes", "us_host"}}`` from a bench run's JSON: the
    quick set (CUDA events, best rounds) and the GPU section (events, medians)."""
    out = {}
    for r in bench_doc.get("records") or []:
        key = f"{r['op']}/{r['case']}/{r['dtype']}"
        if r.get("seconds") and key not in out:
            out[key] = {"seconds": r["seconds"], "min_bytes": r["bytes"], "bytes": r["bytes"]}
    for r in ((bench_doc.get("gpu") or {}).get("large") or {}).get("records") or []:
        if r.get("us_events"):
            out[r["case"]] = {"seconds": r["us_events"] / 1e6, "min_bytes": r["min_bytes"],
                              "bytes": r["bytes"], "us_host": r.get("us_host")}
    return out


def device_of(bench_doc: dict):
    """The device the run measured (its JSON's ``meta.device_spec``), else an H200 with the
    run's copy bandwidth."""
    meta = bench_doc.get("meta") or {}
    spec = meta.get("device_spec")
    if spec:
        fields = {k: v for k, v in spec.items() if k != "in_flight_needed"}
        return device_model.DeviceSpec(**fields)
    gbps = meta.get("copy_bandwidth_gbps")
    return device_model.H200.replace(copy_bandwidth=gbps * 1e9) if gbps else device_model.H200


def _note(meas, pred, flagged) -> str:
    if pred is None:
        return "no model inputs (gpu_model prepare)"
    if not flagged:
        return ""
    if meas["seconds"] > pred["seconds"] and pred["seconds"] < 25e-6:
        return "host-bound: the model has no host side"
    if pred["d2h"] and meas["seconds"] > pred["seconds"]:
        return "a host read between the passes (sync and launch not modelled)"
    if pred["in_flight_per_sm"] is None:
        return "no bytes-in-flight term (no SASS)"
    return "unexplained: the model is wrong here"


def table_rows(measured: dict, inputs: dict, device, ncu: dict | None = None) -> list:
    """One row per measured case: predicted against measured, ncu's DRAM figures, the flag."""
    rows = []
    for case, meas in measured.items():
        inp = (inputs.get("cases") or {}).get(case)
        pred = predict(inp, meas["min_bytes"], device) if inp and "error" not in inp else None
        off = None if pred is None else meas["seconds"] / pred["seconds"] - 1
        flagged = off is not None and abs(off) > OFF_LIMIT and meas["bytes"] >= MIN_FLAG_BYTES
        n = (ncu or {}).get(case) or {}
        rows.append({"case": case, "bytes": meas["bytes"], "measured_s": meas["seconds"],
                     "predicted_s": None if pred is None else pred["seconds"], "off": off,
                     "flagged": flagged, "terms": pred, "note": _note(meas, pred, flagged),
                     "dram_gbps": n["dram_bytes"] / n["seconds"] / 1e9 if n.get("seconds")
                     else None, "dram_pct": n.get("dram_pct")})
    return rows


def render_markdown(rows: list, device, meta: dict) -> list:
    from cupyops.bench.tables import format_markdown

    def num(v, spec):
        return "n/a" if v is None else format(v, spec)
    body = []
    for r in rows:
        t = r["terms"] or {}
        off = "n/a" if r["off"] is None else f"{r['off'] * 100:+.0f} %"
        body.append([r["case"], f"{r['bytes'] / 2**20:.2f}", f"{r['measured_s'] * 1e6:.1f}",
                     num(None if r["predicted_s"] is None else r["predicted_s"] * 1e6, ".1f"),
                     f"**{off}**" if r["flagged"] else off,
                     num(None if t.get("in_flight_per_sm") is None
                         else t["in_flight_per_sm"] / 1024, ".1f"),
                     num(None if not t else t["bandwidth"] / 1e9, ".0f"),
                     num(r["dram_gbps"], ".0f"), num(r["dram_pct"], ".0f"), r["note"]])
    flagged = sum(1 for r in rows if r["flagged"])
    head = [f"Device model: {device.name}, {device.sms} SMs, copy {device.copy_bandwidth / 1e12:.2f}"
            f" TB/s, peak {device.peak_bandwidth / 1e12:.2f} TB/s, latency "
            f"{device.latency_s * 1e9:.0f} ns: {device.in_flight_needed / 1024:.1f} KiB in "
            f"flight per SM needed. Inputs: {meta.get('inputs', '?')}.", "",
            f"{flagged} of {len(rows)} cases off by more than {OFF_LIMIT:.0%} on >= 1 MiB "
            "(bold).", ""]
    return head + [format_markdown(["case", "MiB", "measured us", "predicted us", "off",
                                    "in flight KiB/SM", "model GB/s", "DRAM GB/s (ncu)",
                                    "DRAM % peak", "what the model cannot see"], body)]


def update_docs(path, lines) -> None:
    """Replace the block between the ``model:cuda`` markers of ``path`` (append one if none)."""
    p = pathlib.Path(path)
    text = p.read_text()
    block = "\n".join([DOC_BEGIN] + list(lines) + [DOC_END])
    if DOC_BEGIN in text and DOC_END in text:
        head, rest = text.split(DOC_BEGIN, 1)
        text = head + block + rest.split(DOC_END, 1)[1]
    else:
        text = text.rstrip("\n") + f"\n\n## Model against measurement (GPU)\n\n{block}\n"
    p.write_text(text)


# --------------------------------------------------------------------------------------------
# command line
# --------------------------------------------------------------------------------------------

def _parser():
    p = argparse.ArgumentParser(prog="python -m cupyops.bench.gpu_model",
                                description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    pr = sub.add_parser("prepare", help="the model inputs, on simt (here, before a visit)")
    pr.add_argument("--out", default="gpu-wheels/model-inputs.json")
    pr.add_argument("--sets", default="kernel,large,quick")
    pr.add_argument("--scale", default="full", choices=("full", "small", "tiny"))
    nc = sub.add_parser("ncu-pass", help="one call of every GPU-section case (under ncu)")
    nc.add_argument("--manifest", required=True)
    nc.add_argument("--rehearse", action="store_true", help="simt, tiny scale, no GPU")
    tb = sub.add_parser("table", help="predicted against measured")
    tb.add_argument("--bench", required=True, help="bench cuda's --json")
    tb.add_argument("--inputs", default="gpu-wheels/model-inputs.json")
    tb.add_argument("--ncu", default=None)
    tb.add_argument("--manifest", default=None)
    tb.add_argument("--markdown", default=None)
    tb.add_argument("--update-docs", default=None, metavar="DOC")
    tb.add_argument("--json", default=None)
    tb.add_argument("--rehearse", action="store_true",
                    help="no carried inputs: prepare them on simt for the bench's cases")
    return p


def _print_progress(k, n, name):
    print(f"[{k + 1}/{n}] {name}", file=sys.stderr, flush=True)


def _load(path, default=None):
    try:
        return json.loads(pathlib.Path(path).read_text())
    except (OSError, ValueError, TypeError):
        return default


def _inputs_for(args, measured) -> tuple:
    """(inputs, what they are): the carried file, or in a rehearsal prepared now for the
    bench's cases (tiny scale)."""
    inputs = _load(args.inputs)
    missing = set(measured) - set((inputs or {}).get("cases") or {})
    if args.rehearse and missing:
        now = prepare(("large", "quick"), "tiny", _print_progress, only=missing,
                      quick_mode="tiny")
        if inputs is not None:
            now["cases"].update(inputs["cases"])
        return now, "prepared now on simt for the rehearsal's cases"
    if inputs is None:
        return {"cases": {}}, f"none ({args.inputs} missing: run gpu_model prepare before)"
    stale = inputs.get("source_hash") != source_hash()
    return inputs, (f"{args.inputs}" + (" (PREPARED FOR OTHER KERNEL SOURCES: rerun prepare)"
                                        if stale else ""))


def _table(args) -> int:
    doc = _load(args.bench)
    if doc is None:
        print(f"gpu_model: no bench JSON at {args.bench} (the bench step writes it)",
              file=sys.stderr)
        return 2
    measured = measured_cases(doc)
    inputs, what = _inputs_for(args, measured)
    ncu = None
    if args.ncu and args.manifest and pathlib.Path(args.ncu).is_file():
        ncu = ncu_by_case(parse_ncu_csv(pathlib.Path(args.ncu).read_text(errors="replace")),
                          _load(args.manifest, []))
    device = device_of(doc)
    rows = table_rows(measured, inputs, device, ncu)
    lines = render_markdown(rows, device, {"inputs": what})
    print("\n".join(lines))
    if args.markdown:
        pathlib.Path(args.markdown).write_text("\n".join(lines) + "\n")
    if args.update_docs:
        update_docs(args.update_docs, lines)
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(
            {"device": device.as_dict(), "inputs": what, "rows": rows}, indent=1, default=str))
    return 0


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "prepare":
        data = prepare(tuple(args.sets.split(",")), args.scale, _print_progress)
        pathlib.Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        pathlib.Path(args.out).write_text(json.dumps(data, indent=1, default=str))
        bad = [k for k, v in data["cases"].items() if "error" in v]
        print(f"{len(data['cases'])} cases prepared into {args.out}; in-flight terms: "
              f"{data['in_flight_terms']}; {len(bad)} failed {bad[:5]}")
        return 1 if bad else 0
    if args.command == "ncu-pass":
        from cupyops.bench import gpu_cases as G
        try:
            env = G.rehearsal_env("simt") if args.rehearse else G.cuda_env()
        except RuntimeError as exc:
            print(str(exc), file=sys.stderr)
            return 2
        manifest = ncu_pass(env, "tiny" if args.rehearse else "full")
        pathlib.Path(args.manifest).write_text(json.dumps(manifest, indent=1))
        print(f"{len(manifest)} cases, {sum(len(m['kernels']) for m in manifest)} kernels")
        return 0
    return _table(args)


if __name__ == "__main__":
    raise SystemExit(main())
