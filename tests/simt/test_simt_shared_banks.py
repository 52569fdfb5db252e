"""simt counts shared-memory bank conflicts in its launch records (issue 26):
``shared_accesses`` (warp-wide shared-memory instructions: lanes of one warp at one access site
and occurrence, atomics included) and ``shared_wavefronts`` (for each, the most distinct 4-byte
words one of the 32 banks serves)."""
import numpy as np
import pytest

from cupyops import simt

SRC = r"""
extern "C" __global__ void banks(float *out, int stride, int mode) {
    __shared__ __align__(16) float s[32 * 33 + 64];
    __shared__ unsigned mask[64];
    int t = threadIdx.x;
    for (int i = t; i < 32 * 33 + 64; i += blockDim.x) s[i] = (float)i;
    if (t < 64) mask[t] = 0;
    __syncthreads();
    float v = 0.0f;
    if (mode == 0) v = s[(t * stride) % (32 * 33)];  // stride 1: no conflict; 32: 32-way; 33: none
    else if (mode == 1) v = s[0];                // one word for every lane: a broadcast
    else if (mode == 2) atomicOr(&mask[(t * stride) & 63], 1u << (t & 31));
    else if (mode == 3) { float2 w = reinterpret_cast<float2 *>(s)[t]; v = w.x + w.y; }
    __syncthreads();
    out[blockIdx.x * blockDim.x + t] = v;
}
"""


@pytest.fixture(scope="module")
def kernel():
    return simt.RawModule(code=SRC).get_function("banks")


def _degree(kernel, stride, mode, threads=32, blocks=1):
    out = np.zeros(threads * blocks, np.float32)
    with simt.record_traffic() as rec:
        kernel((blocks,), (threads,), (out, np.int32(stride), np.int32(mode)))
    (t,) = rec.launches
    return t.shared_accesses, t.shared_wavefronts


def test_bank_conflicts_are_counted(kernel):
    # the fill loop, mask zeroing and the read (and the stores of the fill) are the accesses;
    # compare two launches that differ only in the read's stride
    base_a, base_w = _degree(kernel, 1, 0)
    a32, w32 = _degree(kernel, 32, 0)
    a33, w33 = _degree(kernel, 33, 0)
    assert a32 == base_a == a33
    assert w32 - base_w == 31            # 32 words in one bank: 32 wavefronts instead of 1
    assert w33 == base_w                 # stride 33 spreads over every bank
    _, wb = _degree(kernel, 0, 1)
    assert wb == base_w                  # a broadcast is one word: no conflict


def test_shared_atomics_and_vector_accesses(kernel):
    base_a, base_w = _degree(kernel, 1, 0)
    a1, w1 = _degree(kernel, 1, 2)       # lanes on 32 consecutive words
    a2, w2 = _degree(kernel, 2, 2)       # two lanes a bank, distinct words: 2-way
    assert a1 == a2
    assert w2 - w1 == 1
    # 8-byte loads: 64 words over 32 banks. g++ may split a vector copy into its scalar
    # loads, each 2-way here (a GPU's one LDS.64 takes 2 wavefronts): at least that
    a8, w8 = _degree(kernel, 0, 3)
    assert w8 - base_w >= 1 and a8 >= base_a


def test_warps_count_apart(kernel):
    a1, w1 = _degree(kernel, 32, 0, threads=32)
    a2, w2 = _degree(kernel, 32, 0, threads=64)
    assert (w2 - w1) > 0 and a2 > a1
