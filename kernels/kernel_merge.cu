// Standalone merge of two sorted device arrays (CuPy has none): k_merge_path
// (kernel_search.cu) cuts the output into tiles, then one CTA per tile merges its exact ranges.
#pragma once

#include "cta_merge.cuh"

namespace dsort {

// out[0, na + nb) = stable merge of a and b (ties from a first). parts[t] is the co-rank of
// output position t * TILE (t = 0 .. tiles). kIota values are positions in concatenate([a, b]).
template <class Ord, int NT, int VT, ValueMode MODE, class V>
__global__ void __launch_bounds__(NT) k_merge_pair(const typename Ord::key_type* __restrict__ a,
                                                   const V* __restrict__ va, long long na,
                                                   const typename Ord::key_type* __restrict__ b,
                                                   const V* __restrict__ vb, long long nb,
                                                   typename Ord::key_type* __restrict__ out, V* __restrict__ vout,
                                                   const long long* __restrict__ parts) {
    extern __shared__ __align__(16) unsigned char smem[];
    constexpr int TILE = NT * VT;
    const long long p0 = (long long)blockIdx.x * TILE;
    const long long p1 = min(p0 + TILE, na + nb);
    const long long a0 = parts[blockIdx.x], a1 = parts[blockIdx.x + 1];
    const long long b0 = p0 - a0, b1 = p1 - a1;
    merge_tile<Ord, NT, VT, MODE, V>(a + a0, MODE == kCarry ? va + a0 : va, int(a1 - a0), b + b0,
                                     MODE == kCarry ? vb + b0 : vb, int(b1 - b0), a0, na + b0, out + p0,
                                     MODE != kNoValues ? vout + p0 : vout, smem);
}

}  // namespace dsort
