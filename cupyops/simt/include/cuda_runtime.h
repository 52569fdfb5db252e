// cupyops.simt stand-in for <cuda_runtime.h>: everything lives in simt_cuda.h.
#include "simt_cuda.h"
