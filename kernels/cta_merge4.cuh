// One CTA's 4-way merge work (issue 26: a pass that merges runs four at a time halves the global
// passes of a 2-way mergesort). The stable 4-way merge of runs a, b, c, e (ties in that order) is
// merge(merge(a, b), merge(c, e)): a tile's cuts are found by nested Merge Path searches over those
// two merges, never materialized (Merged, split4: k_partition_runs4); inside the tile the two
// levels are merged in shared memory one after the other (merge4_tile).
#pragma once

#include "cta_merge.cuh"

namespace dsort {

// The stable merge of sorted a[0, na) and b[0, nb) (ties: a first) as a random-access sequence:
// element i found by a Merge Path search, so that merge_path runs over it as over an array.
template <class Ord, class It, class I>
struct Merged {
    It a;
    I na;
    It b;
    I nb;

    __device__ __forceinline__ typename Ord::key_type operator[](I i) const {
        const I c = merge_path<Ord>(a, na, b, nb, i);  // taken from a among the first i
        const I j = i - c;
        // the next output: a[c], unless b[j] comes strictly before it
        return (c < na && (j >= nb || !Ord::less(b[j], a[c]))) ? a[c] : b[j];
    }
};

// How many of the first d outputs of the stable 4-way merge of a, b, c, e come from each.
template <class Ord, class It, class I>
__device__ __forceinline__ void split4(It a, I na, It b, I nb, It c, I nc, It e, I ne, I d, I (&take)[4]) {
    const Merged<Ord, It, I> x{a, na, b, nb}, y{c, nc, e, ne};
    const I from_x = merge_path<Ord>(x, na + nb, y, nc + ne, d);
    take[0] = merge_path<Ord>(a, na, b, nb, from_x);
    take[1] = from_x - take[0];
    take[2] = merge_path<Ord>(c, nc, e, ne, d - from_x);
    take[3] = d - from_x - take[2];
}

// One 2-way merge of adjacent sorted ranges s[lo, mid) and s[mid, hi) of a tile's shared memory,
// written back in place: thread t makes outputs [t VT, t VT + VT), values moved with their keys.
// Reads stay inside s[0, last]; a barrier parts every thread's reads from the writes.
template <class Ord, int NT, int VT, ValueMode MODE, class K, class V>
__device__ __forceinline__ void level1_merge(K* s_keys, V* s_vals, int lo, int mid, int hi, int last) {
    const int d = min(int(threadIdx.x) * VT, hi - lo);
    const int m = merge_path<Ord>(s_keys + lo, mid - lo, s_keys + mid, hi - mid, d);
    K x[VT];
    int idx[VT];
    serial_merge<Ord, VT>(s_keys, lo + m, mid, mid + d - m, hi, last, x, idx);
    V v[VT];
    if constexpr (MODE != kNoValues) {
#pragma unroll
        for (int i = 0; i < VT; ++i) v[i] = s_vals[min(idx[i], last)];
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < VT; ++i) {
        const int j = int(threadIdx.x) * VT + i;
        if (j < hi - lo) {
            s_keys[lo + j] = x[i];
            if constexpr (MODE != kNoValues) s_vals[lo + j] = v[i];
        }
    }
}

// Merge one output tile of at most NT * VT elements from four sorted ranges src[r][0, len[r])
// (already cut by a 4-way partition: k_partition_runs4) into out[0, total). pos[r] is the source
// position of src[r][0] (the values written in kIota mode). Values are written as VO. All NT
// threads call it. Two levels in shared memory, each a 2-way Merge Path step of merge_tile's kind:
// X = merge(a, b) and Y = merge(c, e) written in place (thread t makes outputs [t VT, t VT + VT)
// of both), then merge(X, Y); three short searches a thread, not a search inside a search.
template <class Ord, int NT, int VT, ValueMode MODE, class V, class VO = V>
__device__ __forceinline__ void merge4_tile(const typename Ord::key_type* const (&src)[4], const V* const (&vsrc)[4],
                                            const int (&len)[4], const long long (&pos)[4],
                                            typename Ord::key_type* __restrict__ out, VO* __restrict__ vout,
                                            unsigned char* smem) {
    using K = typename Ord::key_type;
    constexpr int TILE = NT * VT;
    const int tid = threadIdx.x;
    const int e0 = len[0], e1 = e0 + len[1], e2 = e1 + len[2], total = e2 + len[3];  // where each range ends
    const int nx = e1, ny = total - e1;  // X = merge(a, b), Y = merge(c, e)
    K* s_keys = reinterpret_cast<K*>(smem);
    V* s_vals = reinterpret_cast<V*>(smem + align16(TILE * int(sizeof(K))));

    // Coalesced loads of the four ranges, one after the other in shared memory; in kIota mode the
    // values are their source positions, so that both levels move them as carried values.
    {
        K r[VT];
        V rv[VT];
#pragma unroll
        for (int i = 0; i < VT; ++i) {
            const int j = min(tid + i * NT, total - 1);
            const int k = j < e0 ? j : j < e1 ? j - e0 : j < e2 ? j - e1 : j - e2;  // its place in its range
            const K* p = j < e0 ? src[0] : j < e1 ? src[1] : j < e2 ? src[2] : src[3];
            r[i] = p[k];
            if constexpr (MODE == kCarry) {
                const V* pv = j < e0 ? vsrc[0] : j < e1 ? vsrc[1] : j < e2 ? vsrc[2] : vsrc[3];
                rv[i] = pv[k];
            }
            if constexpr (MODE == kIota) rv[i] = V((j < e0 ? pos[0] : j < e1 ? pos[1] : j < e2 ? pos[2] : pos[3]) + k);
        }
        store_strided<NT, VT>(r, s_keys, total);
        if constexpr (MODE != kNoValues) store_strided<NT, VT>(rv, s_vals, total);
    }
    __syncthreads();

    // Level 1: X = merge(a, b) into [0, nx), then Y = merge(c, e) into [nx, total), each in place
    // once every thread has read its inputs (the two regions are apart: Y is made while X is
    // written); one merge's registers live at a time.
    level1_merge<Ord, NT, VT, MODE>(s_keys, s_vals, 0, e0, e1, total - 1);
    level1_merge<Ord, NT, VT, MODE>(s_keys, s_vals, e1, e2, total, total - 1);
    __syncthreads();

    // Level 2: merge(X, Y), ties to X, as merge_tile's fine phase.
    const int diag = min(tid * VT, total);
    const int mp = merge_path<Ord>(s_keys, nx, s_keys + nx, ny, diag);
    K x[VT];
    int idx[VT];
    serial_merge<Ord, VT>(s_keys, mp, nx, nx + diag - mp, total, total - 1, x, idx);
    V v[VT];
    if constexpr (MODE != kNoValues) {
#pragma unroll
        for (int i = 0; i < VT; ++i) v[i] = s_vals[min(idx[i], total - 1)];
    }
    store_merged<NT, VT, MODE>(x, v, s_keys, s_vals, out, vout, total);
}

}  // namespace dsort
