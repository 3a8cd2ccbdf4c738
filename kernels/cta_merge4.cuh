// One CTA's 4-way merge work (issue 26: a pass that merges runs four at a time halves the global
// passes of a 2-way mergesort). The stable 4-way merge of runs a, b, c, e (ties in that order) is
// merge(merge(a, b), merge(c, e)): a tile's cuts are found by a Merge Path search over those two
// merges, never materialized, read through the 2-way co-ranks of (a, b) and (c, e) at every tile
// (PairGrid, split4: k_partition_runs4); inside the tile the two levels are merged in shared memory
// one after the other (merge4_tile).
#pragma once

#include "cta_merge.cuh"

namespace dsort {

// One pair of sorted runs a[0, na), b[0, nb) of a 4-way group, seen as their stable merge
// (ties: a first), with the pair's co-ranks at every multiple of `tile` from the table that a
// 2-way partition (k_partition_runs, for runs of the same length) wrote, from the pair's entry on:
// parts[k] is base + the co-rank of output position k * tile. Any output of the merge then costs a search
// inside one tile's worth of it, and one on the grid costs none.
template <class Ord>
struct PairGrid {
    using K = typename Ord::key_type;
    const K* a;
    const K* b;
    long long na, nb;
    long long base;  // the absolute position of a[0], a multiple of tile
    const long long* __restrict__ parts;  // from its entry base / tile on
    long long tile;

    // The co-rank (the count taken from a) of output position k * tile (na past the end).
    __device__ __forceinline__ long long on_grid(long long k) const {
        return k * tile >= na + nb ? na : parts[k] - base;
    }
    // The co-rank of output position p: p a multiple of tile, or past the end.
    __device__ __forceinline__ long long corank(long long p) const { return p >= na + nb ? na : parts[p / tile] - base; }
    // The bounds [lo, hi] of the co-rank of output m, from those of two outputs p0 <= m <= p1 of
    // co-ranks c0 and c1 (both i and m - i grow with m), clamped as merge_path_in clamps them.
    __device__ __forceinline__ void bounds(long long m, const long long (&br)[4], long long& lo, long long& hi) const {
        const long long p0 = br[0], c0 = br[1], p1 = br[2], c1 = br[3];
        lo = max(max(c0, m - (p1 - c1)), m - nb);
        hi = min(min(c1, m - (p0 - c0)), min(m, na));
    }
    // One step of the co-rank search of output m over [lo, hi): a[mid] is among the first m
    // outputs unless b[m - 1 - mid] comes strictly before it. Reads nothing once lo == hi.
    __device__ __forceinline__ void step(long long m, long long& lo, long long& hi) const {
        if (lo < hi) {
            const long long mid = lo + ((hi - lo) >> 1);
            if (Ord::less(b[m - 1 - mid], a[mid]))
                hi = mid;
            else
                lo = mid + 1;
        }
    }
    // Output m (< na + nb), given its co-rank i: a[i], unless b[j] comes strictly before it.
    __device__ __forceinline__ K at(long long m, long long i) const {
        const long long j = m - i;
        return (i < na && (j >= nb || !Ord::less(b[j], a[i]))) ? a[i] : b[j];
    }
    // Output m - 1 (m > 0), the last of the first m, given the co-rank i of m: on ties b's is later.
    __device__ __forceinline__ K before(long long m, long long i) const {
        const long long j = m - i;
        if (i == 0) return b[j - 1];
        if (j == 0) return a[i - 1];
        return Ord::less(b[j - 1], a[i - 1]) ? a[i - 1] : b[j - 1];
    }
};

// The co-ranks i of output m of x and j of output q of y, inside their brackets bx and by
// ({p0, c0, p1, c1}: two outputs around it and their co-ranks), the two searches in one loop: two
// independent chains of loads, in flight together.
template <class Ord>
__device__ __forceinline__ void rank2(const PairGrid<Ord>& x, long long m, const long long (&bx)[4], const PairGrid<Ord>& y,
                                      long long q, const long long (&by)[4], long long& i, long long& j) {
    long long xlo, xhi, ylo, yhi;
    x.bounds(m, bx, xlo, xhi);
    y.bounds(q, by, ylo, yhi);
    while (xlo < xhi || ylo < yhi) {
        x.step(m, xlo, xhi);
        y.step(q, ylo, yhi);
    }
    i = xlo;
    j = ylo;
}

// How many of the first d outputs of the stable 4-way merge of a group's runs a, b, c, e come
// from each: from_x, the count from X = merge(a, b) in merge(X, Y = merge(c, e)), by a Merge Path
// search over X and Y, first among the grid's positions (each output there read from the tables,
// no search), then inside the one tile left, each output found by a search of its co-rank between
// those of the nearest outputs already found on either side (the bracket halves with every step,
// and so does that search), X's and Y's side by side; then the co-ranks of from_x in X and of
// d - from_x in Y, from the last brackets. d is a multiple of tile, or the group's length.
template <class Ord>
__device__ __forceinline__ void split4(const PairGrid<Ord>& x, const PairGrid<Ord>& y, long long d, long long (&take)[4]) {
    const long long nx = x.na + x.nb, ny = y.na + y.nb, tile = x.tile;
    if (d >= nx + ny) {  // the whole group (the last boundary, at n)
        take[0] = x.na, take[1] = x.nb, take[2] = y.na, take[3] = y.nb;
        return;
    }
    long long lo = max(0LL, d - ny), hi = min(d, nx);  // from_x lies in [lo, hi]
    // X[m] is among the first d outputs iff Y[d - 1 - m] is not strictly before it (ties: X first).
    if (lo < hi) {
        // On the grid: m = k * tile in [lo, hi), where d - m is on Y's grid too (d / tile - k).
        const long long dk = d / tile;
        long long klo = (lo + tile - 1) / tile, khi = (hi - 1) / tile + 1;
        const long long k_first = klo;
        while (klo < khi) {
            const long long k = klo + ((khi - klo) >> 1), m = k * tile;
            if (Ord::less(y.before(d - m, y.on_grid(dk - k)), x.at(m, x.on_grid(k))))
                khi = k;
            else
                klo = k + 1;
        }
        // X[m] is in for grid m below klo * tile, out from there: one tile's positions are left.
        if (klo > k_first) lo = max(lo, (klo - 1) * tile + 1);
        if (klo * tile < hi) hi = klo * tile;
    }
    // [lo, hi] lies in X's tile [m0, m1], and the Y outputs d - 1 - m in Y's [d - m0 - tile, d - m0]
    const long long m0 = lo - lo % tile, m1 = min(m0 + tile, nx);
    const long long q0 = max(0LL, d - m0 - tile), q1 = min(d - m0, ny);
    long long bx[4] = {m0, x.corank(m0), m1, x.corank(m1)}, by[4] = {q0, y.corank(q0), q1, y.corank(q1)};
    while (lo < hi) {
        const long long m = lo + ((hi - lo) >> 1), q = d - 1 - m;
        long long i, j;
        rank2(x, m, bx, y, q, by, i, j);
        if (Ord::less(y.at(q, j), x.at(m, i))) {  // X[m] is out: from_x <= m, and Y[q] is in
            hi = m;
            bx[2] = m, bx[3] = i, by[0] = q, by[1] = j;
        } else {
            lo = m + 1;
            bx[0] = m, bx[1] = i, by[2] = q, by[3] = j;
        }
    }
    rank2(x, lo, bx, y, d - lo, by, take[0], take[2]);
    take[1] = lo - take[0];
    take[3] = d - lo - take[2];
}

// Level 1 of merge4_tile: X = merge(s[0, e0), s[e0, e1)) into [0, e1) and Y = merge(s[e1, e2),
// s[e2, total)) into [e1, total), in place, both at once: thread t makes outputs [t VT, t VT + VT)
// of X followed by Y (one Merge Path search a thread), values moved with their keys. A barrier
// parts every thread's reads from the writes.
template <class Ord, int NT, int VT, ValueMode MODE, class K, class V>
__device__ __forceinline__ void level1_merge(K* s_keys, V* s_vals, int e0, int e1, int e2, int total) {
    const int z = min(int(threadIdx.x) * VT, total);
    const bool in_x = z < e1;
    const int lo = in_x ? 0 : e1, mid = in_x ? e0 : e2, hi = in_x ? e1 : total;  // this thread's merge
    const int d = z - lo;
    const int m = merge_path<Ord>(s_keys + lo, mid - lo, s_keys + mid, hi - mid, d);
    K x[VT];
    int idx[VT];
    serial_merge_then<Ord, VT>(s_keys, lo + m, mid, mid + d - m, hi, in_x ? e1 - z : VT, e1, e2, e2, total, total - 1, x,
                               idx);
    V v[VT];
    if constexpr (MODE != kNoValues) {
#pragma unroll
        for (int i = 0; i < VT; ++i) v[i] = s_vals[min(idx[i], total - 1)];
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < VT; ++i) {
        const int j = z + i;
        if (j < total) {
            s_keys[j] = x[i];
            if constexpr (MODE != kNoValues) s_vals[j] = v[i];
        }
    }
}

// Merge one output tile of at most NT * VT elements from four sorted ranges src[r][0, len[r])
// (already cut by a 4-way partition: k_partition_runs4) into out[0, total). pos[r] is the source
// position of src[r][0] (the values written in kIota mode). Values are written as VO. All NT
// threads call it. Two levels in shared memory, each a 2-way Merge Path step of merge_tile's kind:
// X = merge(a, b) and Y = merge(c, e) written in place (thread t makes outputs [t VT, t VT + VT)
// of X followed by Y), then merge(X, Y); two short searches a thread.
template <class Ord, int NT, int VT, ValueMode MODE, class V, class VO = V>
__device__ __forceinline__ void merge4_tile(const typename Ord::key_type* const (&src)[4], const V* const (&vsrc)[4],
                                            const int (&len)[4], const long long (&pos)[4],
                                            typename Ord::key_type* __restrict__ out, VO* __restrict__ vout,
                                            unsigned char* smem) {
    using K = typename Ord::key_type;
    constexpr int TILE = NT * VT;
    const int tid = threadIdx.x;
    const int e0 = len[0], e1 = e0 + len[1], e2 = e1 + len[2], total = e2 + len[3];  // where each range ends
    const int nx = e1;  // X = merge(a, b) ends there, Y = merge(c, e) follows
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

    // Level 1: X = merge(a, b) into [0, nx) and Y = merge(c, e) into [nx, total), in place.
    level1_merge<Ord, NT, VT, MODE>(s_keys, s_vals, e0, e1, e2, total);
    __syncthreads();

    // Level 2: merge(X, Y), ties to X: merge_tile's fine phase (the values, positions in kIota
    // mode too, carried in shared memory by level 1).
    merge_fine<Ord, NT, VT, MODE>(s_keys, s_vals, nx, total, out, vout, [&](int i) { return s_vals[i]; });
}

}  // namespace dsort
