"""The devices the API-level tests run on: the NumPy path, the CUDA kernels on the SIMT layer
(the CPU's execution of CUDA) and, when ``cupyops.core.devices.cuda_status()`` finds a GPU, the
same kernels on it twice: NumPy input with ``device="cuda"``, and CuPy input (the pseudo-device
``"cupy"``). ``ops(device)`` gives the cupyops functions as seen from a NumPy test on one of
them: arguments and results stay NumPy arrays, and for ``"cupy"`` the call itself takes and
returns CuPy arrays (checked), with ``out=`` passed as CuPy arrays and copied back."""
import numpy as np

import cupyops
from cupyops.core.devices import cuda_status

GPU = bool(cuda_status()[0])
KERNEL_DEVICES = ["simt"] + (["cuda", "cupy"] if GPU else [])
NONZERO_KERNEL_DEVICES = list(KERNEL_DEVICES)


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
            import cupy
            kw.pop("device", None)
            if np.asarray(x).dtype.kind in "mM":
                # CuPy has no datetime64/timedelta64 arrays: NumPy input on the GPU instead
                return fn(x, *args, out=out, device="cuda", **kw)
            xc = cupy.asarray(np.asarray(x))
            if out is not None:
                outs = out if isinstance(out, tuple) else (out,)
                outc = tuple(cupy.asarray(o) for o in outs)
                kw["out"] = outc if isinstance(out, tuple) else outc[0]
            res = fn(xc, *args, **kw)
            many = isinstance(res, tuple)
            got = res if many else (res,)
            for r in got:
                assert isinstance(r, cupy.ndarray), f"{name}: CuPy in, {type(r).__name__} out"
                assert r.device.id == xc.device.id, f"{name}: result on another GPU"
            if out is not None:
                assert all(r is o for r, o in zip(got, outc)), f"{name}: out= was not returned"
                for o, oc in zip(outs, outc):
                    o[...] = cupy.asnumpy(oc)
                return out
            host = tuple(cupy.asnumpy(r) for r in got)
            return host if many else host[0]
        return call


def ops(device):
    """The cupyops functions on ``device`` ("cpu", "simt", "cuda" or "cupy")."""
    return _CupyInput() if device == "cupy" else _OnDevice(device)
