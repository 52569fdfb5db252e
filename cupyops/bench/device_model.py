"""The device the kernel models predict for: SMs, memory bandwidth, latency, and what follows.

The traffic model (:mod:`cupyops.bench.traffic`), the issue-rate and memory-terms model
(:mod:`cupyops.bench.issue_rate`) and the GPU model table (:mod:`cupyops.bench.gpu_model`) take a
:class:`DeviceSpec` instead of a fixed H100. The one figure a kernel must meet to run at the
bandwidth is **the bytes it keeps in flight per SM** (Little's law)::

    bytes in flight per SM needed = bandwidth x latency / SMs

An H100 SXM (3.35 TB/s, 132 SMs) needs about 16 KiB; an H200 (4.8 TB/s, 132 SMs, its HBM3e a bit
slower to answer) about 27 KiB: the 16 KiB goal of issue 26 was the H100's
(/work/shared/NOTES.md: "Bytes in flight per SM needed ~ 25-30 KiB [H200], against 14 KiB for
an H100").

Presets (:data:`PRESETS`) hold datasheet peaks and the copy bandwidth measured or expected
(H200: 4.3 TB/s of device-to-device copy, read + write, measured on the lent machine); latency is
the loaded DRAM latency the needed bytes in flight imply, a model parameter, not a measurement.
:func:`from_cupy` reads a real device's SMs and peak bandwidth from CuPy, and takes the latency of
the preset its name matches (or :data:`DEFAULT_LATENCY_S`).
"""
from __future__ import annotations

import dataclasses

__all__ = ["DeviceSpec", "PRESETS", "H100", "H200", "A100", "DEFAULT", "DEFAULT_LATENCY_S",
           "from_name", "from_cupy", "from_properties", "achieved_bandwidth"]

#: loaded DRAM latency used where no preset names the device
DEFAULT_LATENCY_S = 0.7e-6


@dataclasses.dataclass(frozen=True)
class DeviceSpec:
    """One device as the models see it.

    ``copy_bandwidth``: bytes/s a device-to-device copy moves (read + write counted), the
    roofline of the traffic model; ``peak_bandwidth``: the datasheet's; ``latency_s``: loaded
    DRAM latency; ``launch_s``: GPU time a dependent launch adds; ``sync_s``: a host read of a
    device value (the exact nonzero's count) in the stream, round trip."""

    name: str
    sms: int
    peak_bandwidth: float
    copy_bandwidth: float
    latency_s: float
    arch: int = 90
    clock_hz: float = 1.98e9
    launch_s: float = 3e-6
    sync_s: float = 10e-6

    @property
    def in_flight_needed(self) -> float:
        """Bytes in flight per SM to reach the peak bandwidth: bandwidth x latency / SMs."""
        return self.peak_bandwidth * self.latency_s / self.sms

    def replace(self, **changes) -> "DeviceSpec":
        return dataclasses.replace(self, **changes)

    def as_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["in_flight_needed"] = self.in_flight_needed
        return d


#: H100 SXM5: 3.35 TB/s HBM3; the traffic model's roofline was 3.0 TB/s of copy. Latency set so
#: that it needs 16 KiB per SM, issue 26's goal.
H100 = DeviceSpec("H100", 132, 3.35e12, 3.0e12, 16 * 1024 * 132 / 3.35e12)
#: H200 SXM: 4.8 TB/s HBM3e, 132 SMs; 4.3 TB/s of copy measured on the lent machine (runs 1-3).
H200 = DeviceSpec("H200", 132, 4.8e12, 4.3e12, 0.75e-6)
#: A100 SXM 80 GB: 2.04 TB/s, 108 SMs.
A100 = DeviceSpec("A100", 108, 2.04e12, 1.8e12, 0.6e-6, arch=80, clock_hz=1.41e9)
PRESETS = {"h100": H100, "h200": H200, "a100": A100}
#: what the models assume when told nothing (the figures of docs/kernels.md)
DEFAULT = H100


def from_name(name: str | DeviceSpec | None) -> DeviceSpec:
    """A preset by name (``"h200"``, case-insensitive), a spec as given, or :data:`DEFAULT`."""
    if name is None:
        return DEFAULT
    if isinstance(name, DeviceSpec):
        return name
    spec = PRESETS.get(str(name).strip().lower())
    if spec is None:
        raise ValueError(f"unknown device model {name!r}; expected one of "
                         f"{', '.join(sorted(PRESETS))}")
    return spec


def from_properties(props: dict, copy_bandwidth: float | None = None) -> DeviceSpec:
    """A spec from CUDA device properties (``cudaGetDeviceProperties`` as CuPy returns them):
    SMs, peak bandwidth = 2 x memory clock x bus width (DDR), the name's preset latency; the copy
    bandwidth measured (else 90 % of the peak)."""
    name = props.get("name", b"?")
    name = name.decode() if isinstance(name, bytes) else str(name)
    sms = int(props.get("multiProcessorCount", 0)) or DEFAULT.sms
    clock_khz = float(props.get("memoryClockRate", 0) or 0)
    bus_bits = float(props.get("memoryBusWidth", 0) or 0)
    peak = 2 * clock_khz * 1e3 * bus_bits / 8 if clock_khz and bus_bits else None
    preset = next((p for k, p in PRESETS.items() if k in name.lower()), None)
    if peak is None:
        peak = preset.peak_bandwidth if preset else DEFAULT.peak_bandwidth
    latency = preset.latency_s if preset else DEFAULT_LATENCY_S
    clock = float(props.get("clockRate", 0) or 0) * 1e3 or DEFAULT.clock_hz
    arch = int(props.get("major", 9)) * 10 + int(props.get("minor", 0))
    return DeviceSpec(name, sms, peak, copy_bandwidth or 0.9 * peak, latency, arch=arch,
                      clock_hz=clock)


def from_cupy(device_id: int = 0, copy_bandwidth: float | None = None) -> DeviceSpec:
    """The spec of CuPy's device ``device_id`` (needs a GPU)."""
    import cupy
    return from_properties(cupy.cuda.runtime.getDeviceProperties(device_id), copy_bandwidth)


def achieved_bandwidth(device: DeviceSpec, in_flight_per_sm: float | None) -> float:
    """What a pass keeping ``in_flight_per_sm`` bytes in flight on every SM reaches: the copy
    bandwidth, or less where Little's law caps it (SMs x bytes in flight / latency). None: no
    cap known."""
    if in_flight_per_sm is None:
        return device.copy_bandwidth
    return min(device.copy_bandwidth, device.sms * float(in_flight_per_sm) / device.latency_s)
