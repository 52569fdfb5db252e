// cupyops.simt stand-in for <cuda_bf16.h>: __nv_bfloat16 and __nv_bfloat162 (see simt_fp16.h).
#include "simt_fp16.h"
