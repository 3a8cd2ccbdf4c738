// One CTA's 4-way merge work (issue 26: a pass that merges runs four at a time halves the global
// passes of a 2-way mergesort). The stable 4-way merge of runs a, b, c, e (ties in that order) is
// merge(merge(a, b), merge(c, e)): every cut is found by nested Merge Path searches over those two
// merges, which are never materialized (Merged), and each thread then merges its VT outputs from
// four cursors, the same order.
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

// VT outputs of the 4-way merge of four ranges of shared memory s, run r at [at[r], end[r]),
// with the shared-memory index each came from. Ties go to the lower run (a < b < c < e), which
// is the order of merge(merge(a, b), merge(c, e)). Items past the end of all four are garbage and
// the caller drops them; reads stay inside s[0, last].
template <class Ord, int VT, class K>
__device__ __forceinline__ void serial_merge4(const K* s, int (&at)[4], const int (&end)[4], int last, K (&out)[VT],
                                              int (&idx)[VT]) {
    K ka = s[min(at[0], last)], kb = s[min(at[1], last)], kc = s[min(at[2], last)], ke = s[min(at[3], last)];
    int ia = at[0], ib = at[1], ic = at[2], ie = at[3];
#pragma unroll
    for (int i = 0; i < VT; ++i) {
        const bool ha = ia < end[0], hb = ib < end[1], hc = ic < end[2], he = ie < end[3];
        const bool tb = hb && (!ha || Ord::less(kb, ka));  // b's head before a's
        const bool te = he && (!hc || Ord::less(ke, kc));  // e's head before c's
        const K kx = tb ? kb : ka, ky = te ? ke : kc;
        const bool hx = ha || hb, hy = hc || he;
        const bool ty = hy && (!hx || Ord::less(ky, kx));  // the c/e winner before the a/b winner
        out[i] = ty ? ky : kx;
        if (ty) {
            if (te) {
                idx[i] = ie;
                ke = s[min(++ie, last)];
            } else {
                idx[i] = ic;
                kc = s[min(++ic, last)];
            }
        } else {
            if (tb) {
                idx[i] = ib;
                kb = s[min(++ib, last)];
            } else {
                idx[i] = ia;
                ka = s[min(++ia, last)];
            }
        }
    }
}

// Merge one output tile of at most NT * VT elements from four sorted ranges src[r][0, len[r])
// (already cut by a 4-way partition) into out[0, total). pos[r] is the source position of
// src[r][0] (the values written in kIota mode). Values are written as VO. All NT threads call it.
template <class Ord, int NT, int VT, ValueMode MODE, class V, class VO = V>
__device__ __forceinline__ void merge4_tile(const typename Ord::key_type* const (&src)[4], const V* const (&vsrc)[4],
                                            const int (&len)[4], const long long (&pos)[4],
                                            typename Ord::key_type* __restrict__ out, VO* __restrict__ vout,
                                            unsigned char* smem) {
    using K = typename Ord::key_type;
    constexpr int TILE = NT * VT;
    const int tid = threadIdx.x;
    int start[4], end[4];
    start[0] = 0;
#pragma unroll
    for (int r = 0; r < 4; ++r) {
        if (r) start[r] = end[r - 1];
        end[r] = start[r] + len[r];
    }
    const int total = end[3];
    if (total == 0) return;
    K* s_keys = reinterpret_cast<K*>(smem);
    V* s_vals = reinterpret_cast<V*>(smem + align16(TILE * int(sizeof(K))));

    // Coalesced loads of the four ranges, one after the other in shared memory.
    {
        K r[VT];
        V rv[VT];
#pragma unroll
        for (int i = 0; i < VT; ++i) {
            const int j = min(tid + i * NT, total - 1);
            const int q = j < end[0] ? 0 : j < end[1] ? 1 : j < end[2] ? 2 : 3;
            r[i] = src[q][j - start[q]];
            if constexpr (MODE == kCarry) rv[i] = vsrc[q][j - start[q]];
        }
        store_strided<NT, VT>(r, s_keys, total);
        if constexpr (MODE == kCarry) store_strided<NT, VT>(rv, s_vals, total);
    }
    __syncthreads();

    // Fine partition: each thread's VT outputs by its own 4-way search, then a serial 4-way merge.
    const int diag = min(tid * VT, total);
    int take[4];
    split4<Ord>(s_keys + start[0], len[0], s_keys + start[1], len[1], s_keys + start[2], len[2], s_keys + start[3], len[3],
                diag, take);
    int at[4];
#pragma unroll
    for (int r = 0; r < 4; ++r) at[r] = start[r] + take[r];
    K x[VT];
    int idx[VT];
    serial_merge4<Ord, VT>(s_keys, at, end, total - 1, x, idx);

    V v[VT];
    if constexpr (MODE == kCarry) {
#pragma unroll
        for (int i = 0; i < VT; ++i) v[i] = s_vals[min(idx[i], total - 1)];
    }
    if constexpr (MODE == kIota) {
#pragma unroll
        for (int i = 0; i < VT; ++i) {
            const int j = idx[i];
            const int q = j < end[0] ? 0 : j < end[1] ? 1 : j < end[2] ? 2 : 3;
            v[i] = V(pos[q] + (j - start[q]));
        }
    }
    store_merged<NT, VT, MODE>(x, v, s_keys, s_vals, out, vout, total);
}

}  // namespace dsort
