"""What CI's NVRTC checks compile, for the two files that share the work:
tests/test_nvrtc_compile.py (cubins: ptxas's registers, spills and occupancy, and .ftz in the
PTX) and tests/test_cupy_compile.py (PTX through a real CuPy's compile path: NVRTC's front end,
no ptxas).

Under ``CUPYOPS_NVRTC_ARCHS=required`` (the default) each required architecture compiles the
cubins of a sample of the dtypes (:data:`SAMPLED_DTYPES`); a list of architectures, ``all``
or ``pytest --run-slow`` compiles every dtype for each.
"""
import os

#: sm_90 (the H100/H200's): the byte logic, the 1-, 4- and 8-byte signed integers, timedelta64
#: (its own type, NaT's rules), every float and both complex widths. Its kernels run under
#: ``__launch_bounds__(256, 4)``, a cap of 64 registers: a kernel at the cap spills rather than
#: losing occupancy, and the 8-byte integers' argreduce and segment kernels sit there. Left
#: out: the unsigned integers and int16 (the comparisons of their signed twins, one sign flip
#: apart); their modules compile through the newest CuPy (PTX, no ptxas) and under --run-slow.
SM90_DTYPES = frozenset({"bool", "int8", "int32", "int64", "timedelta64[ns]", "float16",
                         "bfloat16", "float32", "float64", "complex64", "complex128"})
#: every required architecture's sample. The kernels read half and bfloat16 as bits and have no
#: ``__CUDA_ARCH__`` branches, so what differs between architectures is ptxas's register
#: allocation: sm_75 (the oldest) the byte logic and bfloat16; sm_80 (the A100, occupancy's
#: other architecture) bool (nonzero's byte tiles sit at 64 registers there, 50 % occupancy),
#: bfloat16, float32 (the segment family's flat kernels of rows take 4-byte values only) and
#: the 16-byte values; sm_100 (the B200, another back end) bool and the 16-byte values; sm_120
#: the 16-byte values; sm_86 and sm_89 the selftest module alone (every architecture compiles
#: it).
SAMPLED_DTYPES = {90: SM90_DTYPES, 75: frozenset({"bool", "bfloat16"}),
                  80: frozenset({"bool", "bfloat16", "float32", "complex128"}),
                  86: frozenset(), 89: frozenset(),
                  100: frozenset({"bool", "complex128"}), 120: frozenset({"complex128"})}


def sampled() -> bool:
    """Whether this run samples (``CUPYOPS_NVRTC_ARCHS`` is ``required``, the default)."""
    return os.environ.get("CUPYOPS_NVRTC_ARCHS", "required").strip() == "required"


def checked(name, dt, arch) -> bool:
    """Whether the NVRTC checks compile family ``name``'s cubins of ``dt`` for ``sm_<arch>``
    in this run (the selftest family: always), given ``arch`` is one of the run's."""
    if not sampled() or name == "selftest":
        return True
    return str(dt) in SAMPLED_DTYPES.get(int(arch), frozenset())
