// cupyops.simt stand-in for <cuda_fp16.h>: __half and __half2 (with __nv_bfloat16, see simt_fp16.h).
#include "simt_fp16.h"
