"""The devices the API-level tests run on. The NumPy path always; the SIMT kernel path when
its modules are present (they are part of this repository, so in CI they always are)."""
import importlib.util

KERNEL_DEVICES = [d for d, mod in (("simt", "cupyops._gpu_argreduce"),) if importlib.util.find_spec(mod)]
NONZERO_KERNEL_DEVICES = [d for d, mod in (("simt", "cupyops._gpu_nonzero"),) if importlib.util.find_spec(mod)]
