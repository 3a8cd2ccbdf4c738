// CTA blocksort: one tile of NT * VT keys sorted by one CTA.
//
// Each thread sorts its VT keys in registers with an odd-even transposition network (stable:
// only adjacent keys that are strictly out of order swap), then log2(NT) merge passes in shared
// memory double the sorted run length, each thread finding its VT outputs with its own Merge
// Path search. Values never enter the passes: each key carries its tile position, and the
// values are gathered once at the end (read from the tile's window, or generated in kIota mode).
#pragma once

#include "cta_merge.cuh"

namespace dsort {

// Stable sort of the first `valid` of VT register keys; the rest never move.
template <class Ord, int VT, bool WithPos, class K>
__device__ __forceinline__ void oddeven_sort(K (&x)[VT], int (&pos)[VT], int valid) {
#pragma unroll
    for (int pass = 0; pass < VT; ++pass) {
#pragma unroll
        for (int i = pass & 1; i + 1 < VT; i += 2) {
            if (i + 1 < valid && Ord::less(x[i + 1], x[i])) {
                const K t = x[i];
                x[i] = x[i + 1];
                x[i + 1] = t;
                if constexpr (WithPos) {
                    const int p = pos[i];
                    pos[i] = pos[i + 1];
                    pos[i + 1] = p;
                }
            }
        }
    }
}

// Sort keys_in[0, count) (count <= NT * VT) into keys_out; values likewise (MODE), written as
// VO. base is the tile's position in the whole input (for kIota values).
template <class Ord, int NT, int VT, ValueMode MODE, class V, class VO = V>
__device__ __forceinline__ void cta_blocksort(const typename Ord::key_type* __restrict__ keys_in,
                                              const V* __restrict__ vals_in,
                                              typename Ord::key_type* __restrict__ keys_out,
                                              VO* __restrict__ vals_out, int count, long long base,
                                              unsigned char* smem) {
    using K = typename Ord::key_type;
    constexpr int TILE = NT * VT;
    constexpr bool kPos = MODE != kNoValues;
    const int tid = threadIdx.x;
    K* s_keys = reinterpret_cast<K*>(smem);
    int* s_pos = reinterpret_cast<int*>(smem + align16(TILE * int(sizeof(K))));

    {
        K r[VT];
        load_strided<NT, VT>(keys_in, count, keys_in, count, r);
        store_strided<NT, VT>(r, s_keys, count);
    }
    __syncthreads();

    const int first = tid * VT;
    const int valid = max(0, min(VT, count - first));
    K x[VT];
    int pos[VT];
#pragma unroll
    for (int i = 0; i < VT; ++i) {
        x[i] = s_keys[min(first + i, count - 1)];
        pos[i] = first + i;
    }
    oddeven_sort<Ord, VT, kPos>(x, pos, valid);

    for (int coop = 2; coop <= NT; coop *= 2) {
        __syncthreads();
        regs_to_shared<NT, VT>(x, s_keys, count);
        if constexpr (kPos) regs_to_shared<NT, VT>(pos, s_pos, count);
        __syncthreads();
        if (valid > 0) {
            // The pair of runs this thread's outputs belong to: [a0, a1) and [a1, b1).
            const int run = VT * (coop >> 1);
            const int start = (tid & ~(coop - 1)) * VT;
            const int a0 = min(start, count), a1 = min(start + run, count), b1 = min(start + 2 * run, count);
            const int diag = first - a0;
            const int mp = merge_path<Ord>(s_keys + a0, a1 - a0, s_keys + a1, b1 - a1, diag);
            int idx[VT];
            serial_merge<Ord, VT>(s_keys, a0 + mp, a1, a1 + diag - mp, b1, count - 1, x, idx);
            if constexpr (kPos) {
#pragma unroll
                for (int i = 0; i < VT; ++i) pos[i] = s_pos[idx[i]];
            }
        }
    }

    __syncthreads();
    regs_to_shared<NT, VT>(x, s_keys, count);
    if constexpr (kPos) regs_to_shared<NT, VT>(pos, s_pos, count);
    __syncthreads();
    shared_to_global<NT, VT>(s_keys, keys_out, count);
    if constexpr (kPos) {
        int p[VT];
#pragma unroll
        for (int i = 0; i < VT; ++i) p[i] = s_pos[min(tid + i * NT, count - 1)];
        VO v[VT];
#pragma unroll
        for (int i = 0; i < VT; ++i) {
            // The gather reads inside this tile's window of vals_in: L1/L2 absorb the scatter.
            if constexpr (MODE == kCarry) v[i] = VO(vals_in[p[i]]);
            if constexpr (MODE == kIota) v[i] = VO(base + p[i]);
        }
        store_strided<NT, VT>(v, vals_out, count);
    }
}

}  // namespace dsort
