"""Each kernel parameter struct has one definition (cupyops.core.structs.Struct in the op's
``params`` module): its NumPy dtype, its packer and the ``static_assert``s of the C side come
from it. The kernel sources pin the same size and every offset, and NVRTC compiles the
definition's own asserts against the C structs."""
import re

import numpy as np
import pytest

import cupyops  # noqa: F401  (registers the kernel families)
from cupyops.core import modules as _modules
from cupyops.core.fastread import (env_reader, env_reader_public, numpy_data_ptr,
                                   numpy_data_ptr_public)
from cupyops.ops.argreduce.params import AR_PARAMS
from cupyops.ops.nonzero.params import FASTDIV, NZ_COUNT_PARAMS, NZ_PARAMS

STRUCTS = [("argreduce", AR_PARAMS), ("nonzero", FASTDIV), ("nonzero", NZ_PARAMS),
           ("nonzero", NZ_COUNT_PARAMS)]


def _asserted(source: str, cname: str) -> dict:
    """``{"sizeof": n, member: offset, ...}`` from the source's static_asserts on ``cname``: the
    plain form ``static_assert(offsetof(S, f) == n, ...)`` and the kernels' shorthand, a macro
    defined as ``CUO_FIELD_AT(S, field, off)`` and used as ``M(f, n);`` until its ``#undef``."""
    out = {}
    for m in re.finditer(r"static_assert\s*\(\s*sizeof\s*\(\s*%s\s*\)\s*==\s*(\d+)"
                         % cname, source):
        out["sizeof"] = int(m.group(1))
    for m in re.finditer(r"static_assert\s*\(\s*(?:__builtin_)?offsetof\s*\(\s*%s\s*,\s*(\w+)\s*\)\s*==\s*(\d+)"
                         % cname, source):
        out[m.group(1)] = int(m.group(2))
    for m in re.finditer(r"#define\s+(\w+)\(\w+,\s*\w+\)\s+CUO_FIELD_AT\(\s*%s\s*,[^\n]*\n(.*?)#undef\s+\1"
                         % cname, source, re.S):
        for f in re.finditer(r"\b%s\(\s*(\w+)\s*,\s*(\d+)\s*\)" % m.group(1), m.group(2)):
            out[f.group(1)] = int(f.group(2))
    return out


@pytest.mark.parametrize("family,layout", STRUCTS, ids=[s.cname for _, s in STRUCTS])
def test_the_kernel_source_asserts_the_same_size_and_offsets(family, layout):
    source = _modules.module_source(family)
    want = {"sizeof": layout.dtype.itemsize, **layout.offsets()}
    assert _asserted(source, layout.cname) == want


@pytest.mark.parametrize("family,layout", STRUCTS, ids=[s.cname for _, s in STRUCTS])
def test_nvrtc_compiles_the_definitions_asserts_against_the_c_struct(family, layout):
    pytest.importorskip("cuda.bindings.nvrtc")
    from cupyops.tools import nvrtc as _nvrtc
    ok, why = _nvrtc.available()
    if not ok:
        pytest.skip(f"NVRTC does not load: {why}")
    fam = _modules.get_family(family)
    options = _nvrtc.cupy_options(_modules.compile_options(fam)) + ("-DCUO_CHECK_LAYOUT",)
    source = _modules.module_source(family) + "\n" + layout.c_asserts() + "\n"
    _nvrtc.compile_ptx(source, 90, options)          # raises NvrtcError on a failed assert
    wrong = layout.c_asserts().replace(f"== {layout.dtype.itemsize}",
                                       f"== {layout.dtype.itemsize + 8}", 1)
    with pytest.raises(_nvrtc.NvrtcError, match="size"):
        _nvrtc.compile_ptx(_modules.module_source(family) + "\n" + wrong + "\n", 90,
                           options)


def test_struct_dtype_is_the_c_layout():
    assert AR_PARAMS.dtype.itemsize == 832 and FASTDIV.dtype.itemsize == 24
    assert NZ_PARAMS.dtype.fields["in_div"][0] == np.dtype((FASTDIV.dtype, (8,)))
    lines = AR_PARAMS.c_asserts().splitlines()
    assert lines[0] == 'static_assert(sizeof(ArParams) == 832, "ArParams: size");'
    assert len(lines) == 1 + len(AR_PARAMS.fields)


# --------------------------------------------------------------------------- fast reads

def test_fast_env_reader_agrees_with_os_environ(monkeypatch):
    fast, public = env_reader("CUPYOPS_FASTREAD_PROBE"), env_reader_public("CUPYOPS_FASTREAD_PROBE")
    monkeypatch.delenv("CUPYOPS_FASTREAD_PROBE", raising=False)
    assert fast() is None and public() is None
    for value in ("simt", "", "cuda:1", "é"):
        monkeypatch.setenv("CUPYOPS_FASTREAD_PROBE", value)
        got = fast()
        assert (got.decode("utf-8", "surrogateescape") if isinstance(got, bytes) else got) \
            == public() == value


def test_fast_data_pointer_agrees_with_the_array_interface():
    base = np.arange(4096, dtype=np.float64)
    views = [base, base[3:], base[::-2], base.reshape(64, 64)[5:, ::3].T, base[:0],
             np.zeros((), np.int8), np.asfortranarray(base.reshape(16, 256))[1:],
             base.view(np.uint8)[1:17].view(np.int16)]
    for v in views:
        assert numpy_data_ptr(v) == numpy_data_ptr_public(v), v.shape


def test_the_offset_checks_compile_only_where_asked():
    """CuPy's NVRTC on a GPU machine (CuPy 14.2, H200) knew neither offsetof nor
    __builtin_offsetof: every offsetof in the kernels sits under CUO_CHECK_LAYOUT."""
    from cupyops.core.modules import kernels_root
    for path in sorted(kernels_root().glob("*.cu*")):
        guarded = False
        for line in path.read_text().splitlines():
            if line.startswith("#if"):
                guarded = "CUO_CHECK_LAYOUT" in line
            elif line.startswith(("#else", "#endif")):
                guarded = False
            elif "offsetof" in line and not line.lstrip().startswith("//"):
                assert guarded, f"{path.name}: {line.strip()}"
