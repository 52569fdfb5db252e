"""The devices the API-level tests run on: the NumPy path, and the CUDA kernels on the SIMT
layer (the CPU's execution of CUDA). Real GPUs are covered by tests marked ``gpu``."""
KERNEL_DEVICES = ["simt"]
NONZERO_KERNEL_DEVICES = ["simt"]
