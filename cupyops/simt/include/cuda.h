#include "simt_cuda.h"
