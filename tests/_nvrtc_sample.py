"""What CI's NVRTC checks compile, for the two files that share the work
(tests/test_nvrtc_compile.py: cubins, ptxas's registers, spills and occupancy;
tests/test_cupy_compile.py: every other module through a real CuPy's compile path).

Under ``CUPYOPS_NVRTC_ARCHS=required`` (the default) each architecture compiles a sample of the
dtypes; a list of architectures, ``all`` or ``pytest --run-slow`` compiles every dtype for each.
"""
import os

#: sm_90 (the H100/H200's): one dtype of each kind and width: the byte logic, a 1- and a 4-byte
#: integer, every float, both complex widths (an unsigned integer, or a wider signed one, holds
#: the registers of its signed twin; its module still compiles, through CuPy)
SM90_DTYPES = frozenset({"bool", "int8", "int32", "float16", "bfloat16", "float32", "float64",
                         "complex64", "complex128"})
#: the dtypes whose code differs between architectures: bool's byte logic, half and bfloat16
#: arithmetic, and the 16-byte values that hold the most registers (float64's 8-byte values hold
#: fewer)
ARCH_SENSITIVE_DTYPES = frozenset({"bool", "float16", "bfloat16", "complex128"})
#: every required architecture's sample: sm_75 (the oldest) bool's byte logic and bfloat16,
#: which it has no instructions for; sm_80 (occupancy's other architecture) bfloat16, native from
#: sm_80, and the 16-byte values; sm_86 (sm_80's instruction set, other SM limits) float16, whose
#: arithmetic the 8.x headers choose by architecture (sm_89 has the same set); sm_100 (another
#: ptxas back end) the 16-byte values; sm_89 and sm_120 compile the selftest module alone (every
#: architecture does). The other pairs are --run-slow's.
SAMPLED_DTYPES = {90: SM90_DTYPES, 75: frozenset({"bool", "bfloat16"}),
                  80: frozenset({"bfloat16", "complex128"}), 86: frozenset({"float16"}),
                  89: frozenset(), 100: frozenset({"complex128"}), 120: frozenset()}


def sampled() -> bool:
    """Whether this run samples (``CUPYOPS_NVRTC_ARCHS`` is ``required``, the default)."""
    return os.environ.get("CUPYOPS_NVRTC_ARCHS", "required").strip() == "required"
