"""The devices the API-level tests run on: the NumPy path, the CUDA kernels on the SIMT layer
(the CPU's execution of CUDA) and, when ``cupyops.core.devices.cuda_status()`` finds a GPU, the
same kernels on it twice: NumPy input with ``device="cuda"``, and CuPy input (the pseudo-device
``"cupy"``, always after the NumPy-input devices). ``ops(device)`` gives the cupyops functions
as seen from a NumPy test on one of them: arguments and results stay NumPy arrays, and for
``"cupy"`` the call itself takes and returns CuPy arrays (checked), with ``out=`` passed as
CuPy arrays and copied back. CuPy input keeps the NumPy array's layout: the same strides (zero
and negative ones too) and the same data-pointer offset modulo 256, so layout cases reach the
GPU as they are (a broadcast of 2**33 elements stays one element).

``to_device``, ``device_kw``, ``host``, ``shares_memory`` and ``workspace`` are the pieces of
``ops`` for tests that need a call's own input or results (freshness, memory sharing, cache
keys, scratch).

Every test that calls the API on simt also runs on the GPU devices, unless it is about the
emulator itself, its traffic counters, dry runs or CuPy's host marshalling: those are
``EMULATOR_ONLY`` (tests/test_gpu_coverage.py enforces both)."""
import os

import numpy as np

import cupyops
from cupyops.core.devices import cuda_status

GPU = bool(cuda_status()[0])


def gpu_skip_reason() -> str:
    """Why the tests marked ``gpu`` skip here (tests/conftest.py): "no GPU found" and CuPy's
    words where there is none."""
    return f"needs a CUDA GPU: {cuda_status()[1]}"

#: CUPYOPS_TEST_DEVICES=cuda,cupy keeps only those kernel devices (the offline GPU check runs
#: the API tests on the GPU alone: simt's compiles are cold on a fresh machine)
_ONLY = {d.strip() for d in os.environ.get("CUPYOPS_TEST_DEVICES", "").split(",") if d.strip()}
KERNEL_DEVICES = [d for d in ["simt"] + (["cuda", "cupy"] if GPU else [])
                  if not _ONLY or d in _ONLY]
NONZERO_KERNEL_DEVICES = list(KERNEL_DEVICES)

#: Tests that call the API on simt only, as ``path::function`` under tests/ (every
#: parametrization of the function): each is about the emulator itself (its C++ compiler),
#: its traffic counters, dry runs, or CuPy's host marshalling, and its node id says so (simt,
#: traffic, dry_run, marshal or overhead).
EMULATOR_ONLY = {
    # issue 26: grids, traffic records and shared-memory replays that only simt counts
    "test_argreduce_grid.py::test_reading_pass_fills_the_sms",
    "test_argreduce_grid.py::test_issue_examples",
    "test_argreduce_grid.py::test_results_match_numpy",
    "test_argreduce_packed.py::test_column_combine_is_not_bank_conflicted",
    "test_memory_terms.py::test_records_schema_and_passes",
    "test_nonzero_memory.py::test_requests_per_unique_sector_and_path",
    "test_nonzero_memory.py::test_wide_inner_extent_reads_each_sector_once",
    "test_nonzero_memory.py::test_shared_bank_conflicts",
    "test_nonzero_memory.py::test_permuted_size_traffic",
    "test_nonzero_memory.py::test_word_path_under_schedules",
    "test_nonzero_memory.py::test_count_axis0_requests",
    "test_nonzero_memory.py::test_count_modes_under_schedules",
    # dry runs: launches recorded instead of run
    "test_dry_run.py::test_every_op_records_without_compiling",
    "test_dry_run.py::test_bad_input_fails_the_same_inside",
    "test_dry_run.py::test_dry_run_ends_with_the_block",
    "test_host_cost.py::test_dry_run_steady_state_records_every_launch",
    "test_host_cost.py::test_dry_run_keeps_only_the_recent_launches",
    # the emulator's C++ compiler
    "test_errors.py::test_argument_errors_come_before_device_errors_of_cuda_and_simt",
    "test_dispatch.py::test_simt_needs_a_compiler_that_works",
    "test_host_cost.py::test_a_cached_simt_call_fails_once_the_compiler_is_gone",
    # issue 33: simt's module builds in threads (a recording factory, barriers)
    "test_ensure_modules.py::test_a_split_plan_first_simt_call_through_the_api",
    # traffic counters (simt.record_traffic) of the public calls
    "test_nonzero_packed.py::test_traffic_goals",
    "test_traffic.py::test_argreduce_traffic_goal",
    # issue 32: requests per sector of chunked tiles, the scratch state read back from simt
    # (test_nonzero_api.py::test_inner_extents_past_the_tile_budget runs on every device)
    "test_nonzero_memory.py::test_requests_of_inner_extents_past_the_tile_budget",
    "test_nonzero_memory.py::test_inner_chunks_of_several_inner_dims_under_schedules",
    "test_cupy_path.py::test_simt_zero_state_is_zero_after_every_call",
    # the device parser: every spelling of every device, simt's included, in one list
    "test_errors.py::test_one_device_parser_reads_cpu_simt_and_cuda_names_alike",
    # the GPU check's case preparation: its traffic counts come from simt (gpu_model.py)
    "test_gpu_model.py::test_prepare_a_case_on_simt",
    # the GPU benchmark's machinery (deadline, docs writer) rehearsed on simt
    "test_gpu_bench.py::test_cases_past_the_deadline_are_not_run_on_simt",
    "test_gpu_bench.py::test_the_docs_writer_fills_the_cuda_block_from_simt_records",
    # the benchmark on simt: its traffic records, its overhead section's kernel path (issue 36)
    "test_bench.py::test_simt_run_reports_traffic",
    "test_bench.py::test_overhead_section",
    "test_bench.py::test_unavailable_simt_from_the_environment_is_named",
    # CuPy's host marshalling of a sweep recorded on simt (tests/cupy_marshal.py)
    "test_cupy_path.py::test_installed_cupy_marshals_every_launch",
    "test_cupy_path.py::test_oldest_cupy_marshals_every_launch",
    # issue 35: the segment kernels' traffic on simt against its minimum, and the benchmark's
    # traffic minimum counting the offsets
    "test_segment_kernels.py::test_simt_traffic_goal",
    "test_segment_kernels.py::test_benchmark_traffic_counts_the_offsets",
}

#: dtype kinds a CuPy array can hold (bfloat16, kind "V", aside)
_CUPY_KINDS = "biufc"


def is_cupy(device) -> bool:
    return device == "cupy"


def device_kw(device) -> dict:
    """The ``device=`` keyword of a call on ``device``: none for CuPy input."""
    return {} if is_cupy(device) else {"device": device}


def workspace(nbytes, device):
    """A cupyops.Workspace for calls on ``device`` (CuPy input: the current GPU's)."""
    return cupyops.Workspace(nbytes, device="cuda" if is_cupy(device) else device)


def cupy_can_hold(dtype) -> bool:
    """Whether CuPy has arrays of ``dtype`` (not datetime64 / timedelta64, object, strings)."""
    dt = np.dtype(dtype)
    return dt.kind in _CUPY_KINDS or (dt.kind == "V" and dt.name == "bfloat16")


def copy_layout(x, align):
    """Where a copy of NumPy array ``x`` (not empty) with ``x``'s strides sits in a fresh
    buffer: ``(nbytes, offset)``, ``offset`` being the byte offset of element 0. The lowest
    byte ``x`` spans sits at ``x``'s own address mod 256, rounded down to ``align`` (a GPU
    array's elements are aligned; an unaligned NumPy array's copy is not)."""
    lo = hi = 0                    # byte extent relative to element 0
    for n, s in zip(x.shape, x.strides):
        if s > 0:
            hi += (n - 1) * s
        else:
            lo += (n - 1) * s
    hi += x.dtype.itemsize
    pad = (x.__array_interface__["data"][0] + lo) % 256
    pad -= pad % align
    return pad + hi - lo, pad - lo


def _bits(dt):
    """The dtype a copy of ``dt`` is written through (bfloat16 as its uint16 bits)."""
    return np.dtype(np.uint16) if dt.kind == "V" else dt


def copy_into(x, dt, empty, view, put):
    """A copy of NumPy array ``x`` (not empty, strides element-aligned) as dtype ``dt`` (x's in
    native byte order) with x's strides, in the library whose ``empty(nbytes)`` gives a fresh
    byte buffer, ``view(buffer, shape, dtype, offset, strides)`` an array on it and ``put(dst,
    src)`` copies NumPy ``src`` into ``dst``: the distinct elements once (a zero-stride axis
    at its first index), through their bits (bfloat16 as uint16)."""
    from cupyops.core.dtypes import element_alignment
    nbytes, offset = copy_layout(x, element_alignment(dt))
    raw = empty(nbytes)
    first = tuple(slice(0, 1) if s == 0 else slice(None) for s in x.strides)
    distinct = x[first] if first else x
    put(view(raw, distinct.shape, _bits(dt), offset, x.strides),
        np.ascontiguousarray(distinct, dtype=dt).view(_bits(dt)))
    return view(raw, x.shape, dt, offset, x.strides)


def _cupy_view(raw, shape, dtype, offset, strides):
    import cupy
    return cupy.ndarray(shape, dtype, memptr=raw.data + offset, strides=strides)


def _cupy_put(dst, src):
    import cupy
    dst[...] = cupy.asarray(src)


def to_device(x, device):
    """``x`` as a call on ``device`` takes it: for ``"cupy"`` a CuPy array on the current GPU
    with x's values, strides and pointer offset (mod 256; native byte order, elements
    aligned), else ``x`` itself. A dtype CuPy cannot hold (datetime64, ...) stays NumPy."""
    if not is_cupy(device):
        return x
    import cupy
    from cupyops.core.dtypes import element_alignment
    x = np.asarray(x)
    if not cupy_can_hold(x.dtype):
        return x
    dt = x.dtype.newbyteorder("=")
    if x.size == 0:
        return cupy.empty(x.shape, dt)
    align = element_alignment(dt)
    if any(n > 1 and s % align for n, s in zip(x.shape, x.strides)):
        # strides no GPU array can have (cupyops refuses them): a compact copy
        return cupy.asarray(np.ascontiguousarray(x, dtype=dt).view(_bits(dt))).view(dt)
    return copy_into(x, dt, lambda n: cupy.empty(n, np.uint8), _cupy_view, _cupy_put)


def laid_out(a, strides):
    """NumPy array ``a`` copied to the given ``strides`` (a CuPy result's: tests read the
    layout of results too, and ``cupy.asnumpy`` gives C order)."""
    if a.ndim == 0 or a.size == 0 or a.strides == tuple(strides):
        return a
    lo = sum((n - 1) * s for n, s in zip(a.shape, strides) if s < 0)
    hi = sum((n - 1) * s for n, s in zip(a.shape, strides) if s > 0) + a.dtype.itemsize
    out = np.ndarray(a.shape, a.dtype, buffer=np.empty(hi - lo, np.uint8), offset=-lo,
                     strides=strides)
    out[...] = a
    return out


def host(r):
    """A result (or a tuple of them) as NumPy arrays, CuPy ones with their strides."""
    if isinstance(r, tuple):
        return tuple(host(a) for a in r)
    if type(r).__module__.startswith("cupy"):
        import cupy
        return laid_out(cupy.asnumpy(r), r.strides)
    return r


def shares_memory(a, b) -> bool:
    """np.shares_memory, for CuPy results too (by their bounds: the stricter answer)."""
    if type(a).__module__.startswith("cupy"):
        import cupy
        return bool(cupy.may_share_memory(a, b))
    return bool(np.shares_memory(a, b))


def _assert_cupy_results(got, name, device_id):
    import cupy
    for r in got:
        assert isinstance(r, cupy.ndarray), f"{name}: CuPy in, {type(r).__name__} out"
        assert r.device.id == device_id, f"{name}: result on another GPU"


class _OnDevice:
    def __init__(self, device):
        self.device = device

    def __getattr__(self, name):
        fn = getattr(cupyops, name)

        def call(*args, **kw):
            kw.setdefault("device", self.device)
            return fn(*args, **kw)
        return call


class _CupyInput:
    """CuPy arrays in, CuPy arrays out, on x's GPU, on the current stream."""

    device = "cupy"

    def __getattr__(self, name):
        fn = getattr(cupyops, name)

        def call(x, *args, out=None, **kw):
            kw.pop("device", None)
            xc = to_device(x, "cupy")
            if isinstance(xc, np.ndarray):
                # CuPy has no datetime64/timedelta64 arrays: NumPy input on the GPU instead
                if out is not None:
                    kw["out"] = out
                return fn(xc, *args, device="cuda", **kw)
            if out is not None:
                outs = out if isinstance(out, tuple) else (out,)
                outc = tuple(to_device(o, "cupy") for o in outs)
                kw["out"] = outc if isinstance(out, tuple) else outc[0]
            res = fn(xc, *args, **kw)
            many = isinstance(res, tuple)
            got = res if many else (res,)
            _assert_cupy_results(got, name, xc.device.id)
            if out is not None:
                assert all(r is o for r, o in zip(got, outc)), f"{name}: out= was not returned"
                for o, oc in zip(outs, outc):
                    o[...] = host(oc)
                return out
            if name == "hardmax" and not np.asarray(x).dtype.isnative:
                # CuPy holds native byte order only: hardmax's result has x's dtype, which the
                # CuPy input had natively; seen from the NumPy test, the NumPy input's
                return host(res).astype(np.asarray(x).dtype)
            return host(res)
        return call


def ops(device):
    """The cupyops functions on ``device`` ("cpu", "simt", "cuda" or "cupy")."""
    return _CupyInput() if is_cupy(device) else _OnDevice(device)
