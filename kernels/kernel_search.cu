// Searches over global memory, one thread per query: the coarse Merge Path partitions of the
// merge kernels, the engine's merge_path and searchsorted, and the sortedness check that lets
// sorted (and strictly reverse-sorted) input skip the sort.
#pragma once

#include "cta_order.cuh"
#include "cta_search.cuh"
#include "cta_flags.cuh"

namespace dsort {

// parts[t] = absolute position in keys where the A range of output tile t of one mergesort pass
// starts: the co-rank of position min(t * tile, n) inside its pair of runs of length `run`.
template <class Ord>
__global__ void k_partition_runs(const typename Ord::key_type* __restrict__ keys, long long n, long long run,
                                 long long tile, long long count, long long* __restrict__ parts) {
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= count) return;
    const long long p = min(t * tile, n);
    const long long pair = p - p % (2 * run);
    const long long a_end = min(pair + run, n), b_end = min(pair + 2 * run, n);
    parts[t] = pair + merge_path<Ord>(keys + pair, a_end - pair, keys + a_end, b_end - a_end, p - pair);
}

// out[i] = co-rank of diagonal diags[i] (or of min(i * step, na + nb) when diags is null).
template <class Ord>
__global__ void k_merge_path(const typename Ord::key_type* __restrict__ a, long long na,
                             const typename Ord::key_type* __restrict__ b, long long nb,
                             const long long* __restrict__ diags, long long step, long long count,
                             long long* __restrict__ out) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= count) return;
    const long long d = diags ? diags[i] : min(i * step, na + nb);
    out[i] = merge_path<Ord>(a, na, b, nb, d);
}

template <class Ord, bool Right>
__global__ void k_searchsorted(const typename Ord::key_type* __restrict__ s, long long n,
                               const typename Ord::key_type* __restrict__ probes, long long count,
                               long long* __restrict__ out) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= count) return;
    out[i] = rank_of<Ord, Right>(s, n, probes[i]);
}

// The sortedness check, one read of the keys (fused with a copy, when copy is not null, so that
// a sorted input's sort costs that one pass). A persistent grid of NT-thread CTAs walks tiles of
// NT * VT keys (NT and VT from the host's plan: dsort/engine/_kernels.py):
//   flags[0] = 1 if some neighbour pair is out of order (not sorted);
//   flags[1] = 1 if some neighbour pair is not strictly descending in the order (so reversing
//   the input is not its stable sort).
// Once both flags are set the copy is not needed and the CTAs stop, so on unsorted input the
// check costs about one tile per CTA.
template <class Ord, int NT, int VT>
__global__ void __launch_bounds__(NT) k_check_sorted(const typename Ord::key_type* __restrict__ keys,
                                                     long long n, int* flags,
                                                     typename Ord::key_type* __restrict__ copy) {
    using K = typename Ord::key_type;
    constexpr int TILE = NT * VT;
    const long long tiles = (n + TILE - 1) / TILE;
    for (long long t = blockIdx.x; t < tiles; t += gridDim.x) {
        if (answer_known(flags)) return;
        const long long base = t * TILE + threadIdx.x;
        K x[VT], y[VT];
#pragma unroll
        for (int i = 0; i < VT; ++i) {  // clamped, not branched: all loads in flight at once
            const long long j = min(base + i * NT, n - 1);
            x[i] = keys[j];
            y[i] = keys[min(j + 1, n - 1)];  // the neighbour: the next thread's x
        }
        bool unsorted = false, not_reversed = false;
#pragma unroll
        for (int i = 0; i < VT; ++i) {
            const long long j = base + i * NT;
            if (j + 1 < n) {
                const bool down = Ord::less(y[i], x[i]);
                unsorted |= down;
                not_reversed |= !down;
            }
            if (copy && j < n) copy[j] = x[i];
        }
        publish_flags(flags, unsorted, not_reversed);
    }
}

}  // namespace dsort
