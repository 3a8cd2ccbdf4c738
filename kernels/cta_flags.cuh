// CTA-wide yes/no findings published to two global flags (the sortedness checks).
#pragma once

namespace dsort {

// Publish one CTA's findings: one atomic per flag per CTA, and none once the flag is set (every
// warp of a sorted input finds "not reversed": per-warp atomics on one address serialize).
__device__ __forceinline__ void publish_flags(int* flags, bool unsorted, bool not_reversed) {
    const volatile int* seen = flags;
    const int u = __syncthreads_or(unsorted), r = __syncthreads_or(not_reversed);
    if (threadIdx.x == 0) {
        if (u && !seen[0]) atomicOr(flags, 1);
        if (r && !seen[1]) atomicOr(flags + 1, 1);
    }
}

// True (in every thread of the CTA alike) once both flags are set: the answer is "sort it".
__device__ __forceinline__ bool answer_known(const int* flags) {
    const volatile int* seen = flags;
    return __syncthreads_and(seen[0] && seen[1]);
}

}  // namespace dsort
