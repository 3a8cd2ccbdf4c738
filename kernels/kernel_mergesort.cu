// Mergesort kernels: blocksort of every tile, then global passes that merge pairs of sorted
// runs. The host driver (dsort/engine/_mergesort.py) launches, per pass, k_partition_runs
// (kernel_search.cu) and k_merge_runs, ping-ponging between two buffers.
#pragma once

#include "cta_blocksort.cuh"

namespace dsort {

// One CTA per tile of NT * VT keys: keys_out[tile] = the tile sorted (values likewise, as VO).
template <class Ord, int NT, int VT, ValueMode MODE, class V, class VO = V>
__global__ void __launch_bounds__(NT) k_blocksort(const typename Ord::key_type* __restrict__ keys_in,
                                                  const V* __restrict__ vals_in,
                                                  typename Ord::key_type* __restrict__ keys_out,
                                                  VO* __restrict__ vals_out, long long n) {
    extern __shared__ __align__(16) unsigned char smem[];
    constexpr int TILE = NT * VT;
    const long long base = (long long)blockIdx.x * TILE;
    const int count = (int)min((long long)TILE, n - base);
    cta_blocksort<Ord, NT, VT, MODE, V, VO>(keys_in + base, MODE == kCarry ? vals_in + base : vals_in,
                                         keys_out + base, MODE != kNoValues ? vals_out + base : vals_out,
                                         count, base, smem);
}

// One global merge pass: sorted runs of length `run` are merged in pairs into runs of 2 * run.
// CTA t writes output tile [t * TILE, (t + 1) * TILE); parts[t] is the absolute position in
// keys_in where its A range starts (k_partition_runs). TILE divides 2 * run, so a tile never
// straddles two pairs. MODE is kNoValues or kCarry; values are written as VO (wider on the last
// pass of an argsort, which then needs no conversion pass of its own).
template <class Ord, int NT, int VT, ValueMode MODE, class V, class VO = V>
__global__ void __launch_bounds__(NT) k_merge_runs(const typename Ord::key_type* __restrict__ keys_in,
                                                   const V* __restrict__ vals_in,
                                                   typename Ord::key_type* __restrict__ keys_out,
                                                   VO* __restrict__ vals_out, long long n, long long run,
                                                   const long long* __restrict__ parts) {
    extern __shared__ __align__(16) unsigned char smem[];
    constexpr int TILE = NT * VT;
    const long long p0 = (long long)blockIdx.x * TILE;
    const long long p1 = min(p0 + TILE, n);
    const long long pair = p0 - p0 % (2 * run);
    const long long a_end = min(pair + run, n), b_end = min(pair + 2 * run, n);
    const long long a0 = parts[blockIdx.x];
    // The partition at p1 belongs to the next pair when this tile ends its pair.
    const long long a1 = p1 == b_end ? a_end : parts[blockIdx.x + 1];
    const long long b0 = a_end + (p0 - pair) - (a0 - pair);
    const long long b1 = a_end + (p1 - pair) - (a1 - pair);
    merge_tile<Ord, NT, VT, MODE, V, VO>(keys_in + a0, MODE == kCarry ? vals_in + a0 : vals_in, int(a1 - a0),
                                     keys_in + b0, MODE == kCarry ? vals_in + b0 : vals_in, int(b1 - b0), a0, b0,
                                     keys_out + p0, MODE != kNoValues ? vals_out + p0 : vals_out, smem);
}

}  // namespace dsort
