"""The interop layer (cupyops/interop/dlpack.py): DLPack inputs enter zero-copy (checked by
pointer) and leave as their own type; out= of that type; requires_grad; bf16 through torch; bad
devices; the NumPy/CuPy pass-through; and cupyops.array_namespace."""
import sys

import numpy as np
import pytest

import cupyops
from cupyops import _call as _api
from cupyops.core import dtypes as _bf16
from cupyops.core.arrays import library_of
from cupyops.interop import dlpack as _adapt
from _devices import KERNEL_DEVICES, device_kw, is_cupy

xps = pytest.importorskip("array_api_strict")
_StrictArray = type(xps.asarray(0))


def ptr(a):
    return a.__array_interface__["data"][0]


def through_interop(fn):
    """``fn`` (a function whose first parameter is x) behind the interop layer as cupyops._call
    routes a call: DLPack arrays of other libraries enter and leave through
    cupyops.interop.dlpack, NumPy and array-likes go straight to ``fn``."""
    def call(x, axis=None, **kw):
        lib = library_of(x)
        if lib in (None, "numpy", "cupy"):
            return fn(x, axis, **kw)
        return _adapt.call(fn, lib, x, dict(kw, axis=axis))
    return call


class Spy:
    """Wraps a public function the way cupyops._call does, recording what it received."""

    def __init__(self, fn):
        self.seen = []

        def spy(x, /, axis=None, *, tie="first", out=None, device=None):
            self.seen.append((x, out))
            return fn(x, axis, tie=tie, out=out, device=device)
        spy.__name__ = fn.__name__
        self.f = through_interop(spy)


# ---------------------------------------------------------------------------- NumPy and friends

def test_numpy_and_array_likes_unchanged():
    x = np.array([[1, 5, 2], [7, 0, 7]])
    spy = Spy(_api.PUBLIC["argmax"])
    r = spy.f(x, 1)
    assert spy.seen[0][0] is x and type(r) is np.ndarray
    assert cupyops.argmax([3, 9, 1]) == 1 and type(cupyops.argmax([3, 9, 1])) is np.ndarray
    m = np.matrix([[1, 5], [7, 0]])
    assert type(cupyops.hardmax(m)) is np.ndarray        # subclasses: plain arrays, as before
    assert cupyops.argmax is _api.PUBLIC["argmax"]


def test_library_of():
    assert library_of(np.zeros(2)) == "numpy"
    assert library_of(np.zeros(2).view(np.matrix)) == "numpy"
    assert library_of([1, 2]) is None
    assert library_of(np.float32(1)) is None
    assert library_of(xps.asarray([1])) == "array_api_strict"


def test_dask_gives_a_lazy_dask_array():
    # issue 16: a Dask array is not a DLPack input; it gives a lazy Dask array (tests/test_dask.py)
    da = pytest.importorskip("dask.array")
    x = da.from_array(np.array([1, 5, 2]), chunks=2)
    assert library_of(x) == "dask"
    r = cupyops.argmax(x)
    assert isinstance(r, da.Array) and r.compute(scheduler="sync") == 1


# ---------------------------------------------------------------------------- array_api_strict

def test_array_api_strict_in_and_out():
    x = xps.asarray([[1.0, 5.0, 2.0], [7.0, float("nan"), 7.0]])
    r = cupyops.argmax(x, axis=1)
    assert isinstance(r, _StrictArray) and r.dtype == xps.int64
    assert xps.all(r == xps.asarray([1, 1]))
    h = cupyops.hardmax(x, axis=1, tie="last")
    assert isinstance(h, _StrictArray) and h.dtype == xps.float64
    nz = cupyops.nonzero(x)
    assert isinstance(nz, tuple) and all(isinstance(a, _StrictArray) for a in nz)
    c, n = cupyops.nonzero_coordinates(x, size=8, fill_value=-1)
    assert isinstance(c, _StrictArray) and isinstance(n, _StrictArray) and int(n) == 6
    assert isinstance(cupyops.count_nonzero(x, axis=0), _StrictArray)
    for dev in KERNEL_DEVICES:
        if is_cupy(dev):
            continue    # array_api_strict arrays live on the host: there is no GPU form of them
        assert isinstance(cupyops.argmin(x, device=dev), _StrictArray)


def test_array_api_strict_out_written_in_place():
    x = xps.asarray([[1, 5, 2], [7, 0, 7]])
    out = xps.zeros((2,), dtype=xps.int32)
    assert cupyops.argmin(x, axis=1, out=out) is out
    assert xps.all(out == xps.asarray([0, 1], dtype=xps.int32))


# ---------------------------------------------------------------------------- torch

torch_only = pytest.mark.skipif("torch" not in sys.modules and
                                __import__("importlib").util.find_spec("torch") is None,
                                reason="torch is not installed")


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


def _tensor_on(t, device):
    """A CPU tensor as the call on ``device`` takes it: on the GPU for "cupy" (a CUDA tensor,
    viewed as a CuPy array), else as it is (``device=`` then names the device)."""
    return t.cuda() if is_cupy(device) else t


@torch_only
def test_torch_zero_copy_by_pointer(torch):
    t = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    for view in (t, t.t(), t[::2, 1::2], t[1]):
        spy = Spy(_api.PUBLIC["argmax"])
        r = spy.f(view, None if view.ndim == 1 else 0)
        got = spy.seen[0][0]
        assert isinstance(got, np.ndarray) and ptr(got) == view.data_ptr()
        assert got.strides == tuple(s * view.element_size() for s in view.stride())
        assert isinstance(r, torch.Tensor)
    # results leave zero-copy too: torch's tensor shares the NumPy result's memory
    res = []

    def keep(x, /, axis=None, *, out=None, device=None):
        res.append(_api.PUBLIC["argmax"](x, axis))
        return res[-1]
    r = through_interop(keep)(t, 1)
    assert r.data_ptr() == ptr(res[0])


@torch_only
def test_torch_every_op(torch):
    x0 = torch.tensor([[1.0, 5.0, float("nan"), 5.0], [0.0, -0.0, 3.0, 3.0]])
    keep = x0.clone()
    for dev in ["cpu"] + KERNEL_DEVICES:
        x, kw = _tensor_on(x0, dev), device_kw(dev)
        r = cupyops.argmax(x, axis=1, **kw)
        assert r.device == x.device and torch.equal(r.cpu(), torch.tensor([2, 2]))
        assert torch.equal(cupyops.argmin(x, axis=1, tie="last", **kw).cpu(), torch.tensor([2, 1]))
        assert torch.equal(cupyops.nanargmax(x, axis=1, tie="last", **kw).cpu(),
                           torch.tensor([3, 3]))
        h = cupyops.hardmax(x, axis=1, **kw)
        assert h.dtype == torch.float32 and h.tolist() == [[0, 0, 1, 0], [0, 0, 1, 0]]
        assert torch.equal(cupyops.argwhere(x, **kw).cpu(), torch.tensor(np.argwhere(x0.numpy())))
        assert cupyops.count_nonzero(x, **kw).item() == 6
        rows, cols = cupyops.nonzero(x, **kw)
        assert rows.tolist() == [0, 0, 0, 0, 1, 1] and cols.tolist() == [0, 1, 2, 3, 2, 3]
        x = x.cpu()
        assert torch.equal(x.isnan(), keep.isnan()) and torch.equal(x.nan_to_num(), keep.nan_to_num())


@torch_only
def test_torch_requires_grad(torch):
    x = torch.tensor([[1.0, 3.0], [4.0, 2.0]], requires_grad=True)
    r = cupyops.argmax(x, axis=1)
    h = cupyops.hardmax(x)
    assert not r.requires_grad and not h.requires_grad and r.tolist() == [1, 0]
    (x * 2).sum().backward()                       # the graph of x is untouched
    assert x.grad.tolist() == [[2, 2], [2, 2]]
    out = torch.zeros(2, 2, requires_grad=True)
    assert cupyops.hardmax(x, out=out) is out and out.detach().tolist() == [[0, 1], [1, 0]]


@torch_only
def test_torch_out(torch):
    x = torch.tensor([[1, 5, 2], [7, 0, 7]])
    out = torch.full((2,), -1, dtype=torch.int32)
    p = out.data_ptr()
    assert cupyops.argmax(x, axis=1, tie="last", out=out) is out
    assert out.tolist() == [1, 2] and out.data_ptr() == p
    with pytest.raises(TypeError, match="out must be a torch.Tensor like x"):
        cupyops.argmax(x, axis=1, out=np.empty(2, np.int64))
    with pytest.raises(TypeError, match="out has dtype"):
        cupyops.argmax(x, axis=1, out=torch.empty(2, dtype=torch.float32))
    with pytest.raises(ValueError, match="shape"):
        cupyops.argmax(x, axis=1, out=torch.empty(3, dtype=torch.int64))
    with pytest.raises(ValueError, match="overlaps"):
        y = torch.zeros(4, dtype=torch.int64)
        cupyops.hardmax(y, out=y)
    coords, count = torch.empty(8, 2, dtype=torch.int64), torch.empty((), dtype=torch.int64)
    got = cupyops.nonzero_coordinates(x, size=8, fill_value=-1, out=(coords, count))
    assert got[0] is coords and got[1] is count and count.item() == 5


@torch_only
def test_torch_bfloat16(torch):
    f = torch.tensor([[1.0, -0.0, 0.0, 3.0, 3.0], [float("nan"), 2.0, float("nan"), -1.0, 5.0]])
    x = f.to(torch.bfloat16)
    for dev in ["cpu"] + KERNEL_DEVICES:
        xd, kw = _tensor_on(x, dev), device_kw(dev)
        assert cupyops.argmax(xd, axis=1, tie="last", **kw).tolist() == [4, 2]
        assert cupyops.argmin(xd, axis=1, tie="last", **kw).tolist() == [2, 2]
        assert cupyops.nanargmin(xd, axis=1, **kw).tolist() == [1, 3]
        h = cupyops.hardmax(xd, axis=1, **kw)
        assert h.device == xd.device
        assert h.dtype == torch.bfloat16 and h.float().tolist() == [[0, 0, 0, 1, 0], [1, 0, 0, 0, 0]]
        assert cupyops.count_nonzero(xd, **kw).item() == 8
    out = torch.empty_like(x)
    assert cupyops.hardmax(x, tie="last", out=out) is out and out[0, 4].item() == 1.0
    with pytest.raises(TypeError, match="out has dtype"):
        cupyops.argmax(x, axis=1, out=torch.empty(2, dtype=torch.bfloat16))


@torch_only
def test_torch_bfloat16_without_ml_dtypes(torch, monkeypatch):
    monkeypatch.setattr(_bf16, "_DTYPE", [None])     # as if ml_dtypes were not installed
    x = torch.tensor([[1.0, 4.0, float("nan")], [-0.0, 0.0, -2.0]]).to(torch.bfloat16)
    assert cupyops.argmax(x, axis=1, tie="last").tolist() == [2, 1]
    h = cupyops.hardmax(x, axis=1, tie="last")
    assert h.dtype == torch.bfloat16 and h.float().tolist() == [[0, 0, 1], [0, 1, 0]]
    out = torch.zeros_like(x)
    assert cupyops.hardmax(x, out=out) is out and out.float().tolist() == [[0, 0, 1], [1, 0, 0]]


# ---------------------------------------------------------------------------- devices, errors

class FakeDLPack:
    """An array of an unknown library: DLPack of a NumPy array, on a chosen DLPack device."""

    def __init__(self, a, device=(1, 0)):
        self.a, self.device = a, device

    def __dlpack__(self, **kw):
        return self.a.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self.device


@pytest.mark.parametrize("dev, name", [((10, 0), "ROCm"), ((8, 0), "Metal"), ((14, 1), "OneAPI")])
def test_unsupported_dlpack_device(dev, name):
    with pytest.raises(ValueError, match=f"DLPack device {name}.*no hidden transfers"):
        cupyops.argmax(FakeDLPack(np.zeros(3), dev))


def test_cuda_dlpack_without_cupy(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)
    with pytest.raises(RuntimeError, match=r"CuPy is not installed.*'\.\[cuda13\]'"):
        cupyops.argmax(FakeDLPack(np.zeros(3), (2, 0)))


def test_read_only_export():
    a = np.array([1, 9, 3])
    a.flags.writeable = False
    x = FakeDLPack(a)
    assert int(cupyops.argmax(x)) == 1                 # fine as input
    ro = np.zeros((), np.int64)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        cupyops.argmax(x, out=FakeDLPack(ro))


def test_jax():
    jnp = pytest.importorskip("jax.numpy")
    x = jnp.asarray([[1.0, 5.0, 2.0], [7.0, 0.0, 7.0]])
    r = cupyops.argmax(x, axis=1, tie="last")
    assert type(r).__module__.partition(".")[0] in ("jax", "jaxlib") and r.tolist() == [1, 2]
    assert cupyops.hardmax(x.astype(jnp.bfloat16)).dtype == jnp.bfloat16
    with pytest.raises(ValueError, match="JAX"):
        cupyops.argmax(x, axis=1, out=jnp.zeros(2, jnp.int64))


# ---------------------------------------------------------------------------- array_namespace

def namespaces():
    out = [np.asarray([[1, 0, 3], [3, 2, 0]]), xps.asarray([[1, 0, 3], [3, 2, 0]])]
    try:
        import torch
        out.append(torch.tensor([[1, 0, 3], [3, 2, 0]]))
    except ImportError:
        pass
    return out


@pytest.mark.parametrize("x", namespaces(), ids=lambda a: type(a).__module__.partition(".")[0])
def test_array_namespace(x):
    xp = cupyops.array_namespace(x)
    for name in ("argmax", "argmin", "nonzero", "count_nonzero", "hardmax", "nanargmax"):
        assert getattr(xp, name) is getattr(cupyops, name)
    import array_api_compat
    base = array_api_compat.array_namespace(x)
    assert xp.sum is base.sum and xp.where is base.where
    assert xp.__array_namespace_info__ is base.__array_namespace_info__
    assert cupyops.array_namespace(x) is xp
    r = xp.argmax(x, axis=1, keepdims=True)
    assert array_api_compat.array_namespace(r) is base and tuple(r.shape) == (2, 1)
    assert int(xp.argmax(x)) == 2 and int(xp.argmin(x)) == 1
    assert int(xp.count_nonzero(x)) == 4
    assert tuple(xp.count_nonzero(x, axis=(0, 1), keepdims=True).shape) == (1, 1)
    rows, cols = xp.nonzero(x)
    assert [int(v) for v in rows] == [0, 0, 1, 1] and [int(v) for v in cols] == [0, 2, 0, 1]
    with pytest.raises(ValueError):
        xp.nonzero(xp.asarray(1))


def test_array_namespace_errors():
    with pytest.raises(TypeError, match="array_namespace"):
        cupyops.array_namespace(np.zeros(2), xps.zeros(2))
    with pytest.raises(TypeError, match="at least one"):
        cupyops.array_namespace()


def test_torch_subclasses_are_torch():
    torch = pytest.importorskip("torch")
    import cupyops

    class MyT(torch.Tensor):
        pass
    t = torch.tensor([1.0, 3.0, 2.0], requires_grad=True).as_subclass(MyT)
    r = cupyops.argmax(t)
    assert isinstance(r, torch.Tensor) and int(r) == 1 and not r.requires_grad
    h = cupyops.hardmax(torch.tensor([1.0, 3.0, 2.0], dtype=torch.bfloat16).as_subclass(MyT))
    assert isinstance(h, torch.Tensor) and h.dtype == torch.bfloat16 and h.tolist() == [0, 1, 0]
    out = torch.empty((), dtype=torch.int64)
    assert cupyops.argmax(t, out=out) is out and int(out) == 1
