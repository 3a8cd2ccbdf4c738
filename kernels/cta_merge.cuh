// One CTA's merge work: the serial merge of VT items per thread, and the merge of one output
// tile from its exact A and B ranges (MGPU's two-phase scheme, fine phase).
#pragma once

#include "cta_order.cuh"
#include "cta_search.cuh"

namespace dsort {

// How values travel with the keys. The host names the modes by these enumerators
// (dsort/engine/_kernels.py, Mode), so their numbers live here only.
enum ValueMode : int {
    kNoValues = 0,  // keys only
    kCarry = 1,     // values read from memory, moved by the merge indices
    kIota = 2,      // values are the source positions of the keys, generated, never read
};

// Shared memory of a tile (merge_tile, cta_blocksort): its keys from offset 0, then, from the next
// 16-byte boundary, what rides with them. The host sizes it from the same layout, in one place
// (dsort/engine/_kernels.py: merge_smem, blocksort_smem).
__host__ __device__ constexpr int align16(int bytes) { return (bytes + 15) & ~15; }

// Merge s[a, a_end) and s[b, b_end) (two adjacent sorted ranges in shared memory) into VT keys
// in registers, with the shared-memory index each came from. Ties take a first (stable).
// Items past the end of both ranges are garbage and the caller drops them; reads stay inside
// s[0, last]. serial_merge_then goes on after sw outputs (sw < VT) with s[c, c_end) and
// s[e, e_end): two merges laid end to end (level 1 of merge4_tile, cta_merge4.cuh, where one
// thread's outputs cross from the first merge to the second).
template <class Ord, int VT, class K>
__device__ __forceinline__ void serial_merge_then(const K* s, int a, int a_end, int b, int b_end, int sw, int c, int c_end,
                                                  int e, int e_end, int last, K (&out)[VT], int (&idx)[VT]) {
    K ka = s[min(a, last)];
    K kb = s[min(b, last)];
#pragma unroll
    for (int i = 0; i < VT; ++i) {
        if (i == sw) {  // on to the second merge
            a = c, a_end = c_end, b = e, b_end = e_end;
            ka = s[min(a, last)];
            kb = s[min(b, last)];
        }
        const bool take_b = b < b_end && (a >= a_end || Ord::less(kb, ka));
        out[i] = take_b ? kb : ka;
        idx[i] = take_b ? b : a;
        if (take_b)
            kb = s[min(++b, last)];
        else
            ka = s[min(++a, last)];
    }
}

template <class Ord, int VT, class K>
__device__ __forceinline__ void serial_merge(const K* s, int a, int a_end, int b, int b_end, int last, K (&out)[VT],
                                             int (&idx)[VT]) {
    serial_merge_then<Ord, VT>(s, a, a_end, b, b_end, VT, a, a_end, b, b_end, last, out, idx);  // never switches
}

// Strided loads (thread t gets items t + i * NT, coalesced) of items [0, total) of the
// concatenation of a[0, na) and b. Addresses are clamped to the last item instead of branching,
// so every thread issues all VT loads before the first use (a branch per item would leave one
// load in flight per thread). total >= 1.
template <int NT, int VT, class T>
__device__ __forceinline__ void load_strided(const T* a, int na, const T* b, int total, T (&r)[VT]) {
#pragma unroll
    for (int i = 0; i < VT; ++i) {
        const int j = min(int(threadIdx.x) + i * NT, total - 1);
        const T* p = j < na ? a + j : b + (j - na);
        r[i] = *p;
    }
}

template <int NT, int VT, class T>
__device__ __forceinline__ void store_strided(const T (&r)[VT], T* out, int total) {
#pragma unroll
    for (int i = 0; i < VT; ++i) {
        const int j = threadIdx.x + i * NT;
        if (j < total) out[j] = r[i];
    }
}

// Shared memory (items [0, total)) to global memory, coalesced, converted to U on the way.
template <int NT, int VT, class T, class U>
__device__ __forceinline__ void shared_to_global(const T* s, U* out, int total) {
    U r[VT];
#pragma unroll
    for (int i = 0; i < VT; ++i) r[i] = U(s[min(int(threadIdx.x) + i * NT, total - 1)]);
    store_strided<NT, VT>(r, out, total);
}

// Registers (VT per thread, thread-major: thread t holds items t*VT ...) to shared memory.
template <int NT, int VT, class T>
__device__ __forceinline__ void regs_to_shared(const T (&x)[VT], T* s, int count) {
    const int first = threadIdx.x * VT;
#pragma unroll
    for (int i = 0; i < VT; ++i)
        if (first + i < count) s[first + i] = x[i];
}

// A tile's merged keys and values (VT per thread, thread-major, in registers) written out: through
// shared memory (the tile's, no longer read by any thread once all have passed the barrier) so that
// the stores are coalesced, values converted to VO.
template <int NT, int VT, ValueMode MODE, class K, class V, class VO>
__device__ __forceinline__ void store_merged(const K (&x)[VT], const V (&v)[VT], K* s_keys, V* s_vals, K* __restrict__ out,
                                             VO* __restrict__ vout, int total) {
    __syncthreads();
    regs_to_shared<NT, VT>(x, s_keys, total);
    if constexpr (MODE != kNoValues) regs_to_shared<NT, VT>(v, s_vals, total);
    __syncthreads();
    shared_to_global<NT, VT>(s_keys, out, total);
    if constexpr (MODE != kNoValues) shared_to_global<NT, VT>(s_vals, vout, total);
}

// The fine phase of a tile's merge (MGPU's): s_keys[0, na) and s_keys[na, total), two sorted
// ranges in shared memory, merged, ties to the first; each thread makes its VT outputs by its own
// Merge Path search, the value of each the one value(i) gives for its shared-memory index i; then
// stored (store_merged). merge_tile's second phase and merge4_tile's second level.
template <class Ord, int NT, int VT, ValueMode MODE, class K, class V, class VO, class Value>
__device__ __forceinline__ void merge_fine(K* s_keys, V* s_vals, int na, int total, K* __restrict__ out, VO* __restrict__ vout,
                                           Value value) {
    const int diag = min(int(threadIdx.x) * VT, total);
    const int mp = merge_path<Ord>(s_keys, na, s_keys + na, total - na, diag);
    K x[VT];
    int idx[VT];
    serial_merge<Ord, VT>(s_keys, mp, na, na + diag - mp, total, total - 1, x, idx);
    V v[VT];
    if constexpr (MODE != kNoValues) {
#pragma unroll
        for (int i = 0; i < VT; ++i) v[i] = value(min(idx[i], total - 1));  // past the end: dropped by the store
    }
    store_merged<NT, VT, MODE>(x, v, s_keys, s_vals, out, vout, total);
}

// Merge one output tile of at most NT * VT elements from a[0, na) and b[0, nb) (both sorted,
// already cut by a Merge Path partition) into out[0, na + nb). a_pos / b_pos are the source
// positions of a[0] / b[0], the values written in kIota mode. Values are written as VO (a wider
// type on the last pass of an argsort). All NT threads must call this.
template <class Ord, int NT, int VT, ValueMode MODE, class V, class VO = V>
__device__ __forceinline__ void merge_tile(const typename Ord::key_type* __restrict__ a,
                                           const V* __restrict__ va, int na,
                                           const typename Ord::key_type* __restrict__ b,
                                           const V* __restrict__ vb, int nb, long long a_pos, long long b_pos,
                                           typename Ord::key_type* __restrict__ out, VO* __restrict__ vout,
                                           unsigned char* smem) {
    using K = typename Ord::key_type;
    constexpr int TILE = NT * VT;
    const int tid = threadIdx.x;
    const int total = na + nb;

    if (na == 0 || nb == 0) {
        // One-sided tile (e.g. a pair of runs already in order): a straight copy, no merge.
        const K* src = na ? a : b;
        K r[VT];
        load_strided<NT, VT>(src, total, src, total, r);
        store_strided<NT, VT>(r, out, total);
        if constexpr (MODE == kCarry) {
            const V* vsrc = na ? va : vb;
            V rv[VT];
            load_strided<NT, VT>(vsrc, total, vsrc, total, rv);
            VO wv[VT];
#pragma unroll
            for (int i = 0; i < VT; ++i) wv[i] = VO(rv[i]);
            store_strided<NT, VT>(wv, vout, total);
        }
        if constexpr (MODE == kIota) {
            const long long pos = na ? a_pos : b_pos;
#pragma unroll
            for (int i = 0; i < VT; ++i) {
                const int j = tid + i * NT;
                if (j < total) vout[j] = VO(pos + j);
            }
        }
        return;
    }

    K* s_keys = reinterpret_cast<K*>(smem);
    V* s_vals = reinterpret_cast<V*>(smem + align16(TILE * int(sizeof(K))));

    // Coalesced loads of both ranges, all issued before the first use.
    {
        K r[VT];
        load_strided<NT, VT>(a, na, b, total, r);
        if constexpr (MODE == kCarry) {
            V rv[VT];
            load_strided<NT, VT>(va, na, vb, total, rv);
            store_strided<NT, VT>(rv, s_vals, total);
        }
        store_strided<NT, VT>(r, s_keys, total);
    }
    __syncthreads();

    // Fine partition: each thread finds its VT outputs by its own Merge Path search; in kIota mode
    // a value is its key's source position, made from the shared-memory index.
    merge_fine<Ord, NT, VT, MODE>(s_keys, s_vals, na, total, out, vout, [&](int i) {
        if constexpr (MODE == kIota) return V(i < na ? a_pos + i : b_pos + (i - na));
        else return s_vals[i];
    });
}

}  // namespace dsort
