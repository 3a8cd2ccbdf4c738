// Binary searches shared by every kernel: the Merge Path (co-rank) search and rank probes.
//
// Both are written over random-access "iterators" (a pointer, or RowIt for byte rows) and an
// order with a static less(), so the same code runs over shared memory inside a CTA and over
// global memory in the partition and search kernels.
#pragma once

namespace dsort {

// Co-rank of output position diag in the stable merge of sorted a[0, na) and b[0, nb): the
// number i of elements taken from a among the first diag outputs, with j = diag - i from b.
// It is the i with a[i-1] <= b[j] and b[j-1] < a[i]: on ties a goes first, which makes the
// merge stable. Binary search along the cross-diagonal: a[mid] is among the first diag outputs
// exactly when b[diag-1-mid] is not strictly before it. merge_path_in searches only [lo, hi],
// where the co-ranks of two diagonals around diag bound it (i and diag - i both grow with diag).
template <class Ord, class ItA, class ItB, class I>
__device__ __forceinline__ I merge_path_in(ItA a, I na, ItB b, I nb, I diag, I lo, I hi) {
    if (diag > nb && diag - nb > lo) lo = diag - nb;
    if (diag < hi) hi = diag;
    if (na < hi) hi = na;
    while (lo < hi) {
        const I mid = lo + ((hi - lo) >> 1);
        if (Ord::less(b[diag - 1 - mid], a[mid]))
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo;
}

template <class Ord, class ItA, class ItB, class I>
__device__ __forceinline__ I merge_path(ItA a, I na, ItB b, I nb, I diag) {
    return merge_path_in<Ord>(a, na, b, nb, diag, I(0), na);
}

// Rank of probe p in sorted s[0, n): how many elements come strictly before p (Right = false,
// "searchsorted left"), or are not after p (Right = true, "searchsorted right").
template <class Ord, bool Right, class It, class Key, class I>
__device__ __forceinline__ I rank_of(It s, I n, const Key& p) {
    I lo = 0, hi = n;
    while (lo < hi) {
        const I mid = lo + ((hi - lo) >> 1);
        const bool before = Right ? !Ord::less(p, s[mid]) : Ord::less(s[mid], p);
        if (before)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

}  // namespace dsort
