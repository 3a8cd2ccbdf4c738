// 4-way mergesort passes (issue 26): sorted runs of length `run` merged four at a time into runs
// of 4 * run, half the global passes of the 2-way passes (kernel_mergesort.cu). Per pass the
// host driver (dsort/engine/_mergesort.py, ways=4) launches k_partition_runs4, then k_merge4_runs.
#pragma once

#include "cta_merge4.cuh"

namespace dsort {

// parts[4 t + r] = absolute position in keys where run r of output tile t's group starts being
// read by that tile: the 4-way co-ranks of position min(t * tile, n) inside its group of four runs
// of length `run`. pairs: the 2-way co-ranks of the same pass's tiles, for pairs of runs of length
// `run` (k_partition_runs, launched first), of which each group holds two: (a, b) and (c, e).
template <class Ord>
__global__ void k_partition_runs4(const typename Ord::key_type* __restrict__ keys, long long n, long long run,
                                  long long tile, long long count, const long long* __restrict__ pairs,
                                  long long* __restrict__ parts) {
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= count) return;
    const long long p = min(t * tile, n);
    const long long g = p - p % (4 * run);
    long long start[4], len[4], take[4];
#pragma unroll
    for (int r = 0; r < 4; ++r) {
        start[r] = min(g + r * run, n);
        len[r] = min(g + (r + 1) * run, n) - start[r];
    }
    // y's table entries are read only when it has keys, and then start[2] is a multiple of tile
    const PairGrid<Ord> x{keys + start[0], keys + start[1], len[0], len[1], start[0], pairs + start[0] / tile, tile};
    const PairGrid<Ord> y{keys + start[2], keys + start[3], len[2], len[3], start[2], pairs + start[2] / tile, tile};
    split4<Ord>(x, y, p - g, take);
#pragma unroll
    for (int r = 0; r < 4; ++r) parts[4 * t + r] = start[r] + take[r];
}

// One 4-way global pass: CTA t writes output tile [t * TILE, (t + 1) * TILE) of its group of four
// runs from the ranges that parts (k_partition_runs4) gives at its start and end. TILE divides
// 4 * run, so a tile never straddles two groups. MODE is kNoValues or kCarry; values are written as
// VO (wider on the last pass of an argsort).
template <class Ord, int NT, int VT, ValueMode MODE, class V, class VO = V>
__global__ void __launch_bounds__(NT) k_merge4_runs(const typename Ord::key_type* __restrict__ keys_in,
                                                    const V* __restrict__ vals_in,
                                                    typename Ord::key_type* __restrict__ keys_out,
                                                    VO* __restrict__ vals_out, long long n, long long run,
                                                    const long long* __restrict__ parts) {
    using K = typename Ord::key_type;
    extern __shared__ __align__(16) unsigned char smem[];
    constexpr int TILE = NT * VT;
    const long long p0 = (long long)blockIdx.x * TILE;
    const long long p1 = min(p0 + TILE, n);
    const long long g = p0 - p0 % (4 * run);
    const bool last_of_group = p1 == min(g + 4 * run, n);  // the partition at p1 belongs to the next group
    const K* src[4];
    const V* vsrc[4];
    int len[4];
    long long pos[4];
#pragma unroll
    for (int r = 0; r < 4; ++r) {
        const long long lo = parts[4LL * blockIdx.x + r];
        const long long hi = last_of_group ? min(g + (r + 1) * run, n) : parts[4LL * (blockIdx.x + 1) + r];
        src[r] = keys_in + lo;
        vsrc[r] = MODE == kCarry ? vals_in + lo : vals_in;
        len[r] = int(hi - lo);
        pos[r] = lo;
    }
    merge4_tile<Ord, NT, VT, MODE, V, VO>(src, vsrc, len, pos, keys_out + p0, MODE != kNoValues ? vals_out + p0 : vals_out,
                                          smem);
}

}  // namespace dsort
