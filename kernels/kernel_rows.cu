// Fixed-width byte keys ("byte rows": n rows of `width` bytes, compared like memcmp).
//
// The sort and merge kernels see a byte key as one machine word (width <= 8, big-endian uint64)
// or as Bytes16 (width <= 16); wider keys are sorted by stable passes over 16-byte slices, last
// slice first. k_pack_rows / k_unpack_rows convert. The searches (merge_path, searchsorted,
// sortedness) compare the rows in place, any width, through RowIt and RowOrder.
#pragma once

#include "cta_order.cuh"
#include "cta_search.cuh"
#include "cta_flags.cuh"

namespace dsort {

// One row, with the width every row of the call shares.
struct RowRef {
    const unsigned char* p;
    int width;
};

// Rows as a random-access sequence of RowRef, so merge_path and rank_of run over them.
struct RowIt {
    const unsigned char* base;
    int width;
    __device__ __forceinline__ RowRef operator[](long long i) const { return RowRef{base + i * width, width}; }
};

// memcmp order.
template <bool Descending>
struct RowOrder {
    static __device__ __forceinline__ bool less(RowRef a, RowRef b) {
        for (int k = 0; k < a.width; ++k) {
            const unsigned x = a.p[k], y = b.p[k];
            if (x != y) return Descending ? x > y : x < y;
        }
        return false;
    }
};

template <class K>
__device__ __forceinline__ void put_byte(K& k, int i, unsigned byte);

template <>
__device__ __forceinline__ void put_byte<unsigned long long>(unsigned long long& k, int i, unsigned byte) {
    k |= (unsigned long long)byte << (8 * (7 - i));
}

template <>
__device__ __forceinline__ void put_byte<Bytes16>(Bytes16& k, int i, unsigned byte) {
    if (i < 8)
        k.hi |= (unsigned long long)byte << (8 * (7 - i));
    else
        k.lo |= (unsigned long long)byte << (8 * (15 - i));
}

template <class K>
__device__ __forceinline__ unsigned get_byte(const K& k, int i);

template <>
__device__ __forceinline__ unsigned get_byte<unsigned long long>(const unsigned long long& k, int i) {
    return unsigned(k >> (8 * (7 - i))) & 0xffu;
}

template <>
__device__ __forceinline__ unsigned get_byte<Bytes16>(const Bytes16& k, int i) {
    return i < 8 ? unsigned(k.hi >> (8 * (7 - i))) & 0xffu : unsigned(k.lo >> (8 * (15 - i))) & 0xffu;
}

// out[i] = bytes [offset, offset + len) of row perm[i] (row i when perm is null), packed
// big-endian and zero-padded (every key is padded alike, so the order is memcmp's); rows `pitch`
// bytes apart (a view of wider records, or contiguous rows).
template <class K, class P>
__global__ void k_pack_rows(const unsigned char* __restrict__ rows, long long n, long long pitch, int offset, int len,
                            const P* __restrict__ perm, K* __restrict__ out) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const long long r = perm ? (long long)perm[i] : i;
    const unsigned char* src = rows + r * pitch + offset;
    K k{};
    for (int j = 0; j < len; ++j) put_byte(k, j, src[j]);
    out[i] = k;
}

// Row i of out = row pos[i * pos_stride] of src (row i where pos is null): `words` words a row,
// src's rows `pitch` words apart (a view's rows, or a gather's). One thread per word written.
template <class W, class P>
__global__ void k_gather_rows(const W* __restrict__ src, long long pitch, const P* __restrict__ pos, long long pos_stride,
                              long long n, int words, W* __restrict__ out) {
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n * words) return;
    const long long i = t / words;
    const long long r = pos ? (long long)pos[i * pos_stride] : i;
    out[t] = src[r * pitch + (t - i * words)];
}

// out[i] = start + i * step: positions (an identity permutation, a reversal) without a CuPy kernel.
__global__ void k_iota(long long start, long long step, long long n, long long* __restrict__ out) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = start + i * step;
}

template <class K>
__global__ void k_unpack_rows(const K* __restrict__ keys, long long n, int width, unsigned char* __restrict__ rows) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const K k = keys[i];
    unsigned char* dst = rows + i * width;
    for (int j = 0; j < width; ++j) dst[j] = (unsigned char)get_byte(k, j);
}

template <bool Descending>
__global__ void k_rows_merge_path(const unsigned char* __restrict__ a, long long na,
                                  const unsigned char* __restrict__ b, long long nb, int width,
                                  const long long* __restrict__ diags, long long count, long long* __restrict__ out) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= count) return;
    out[i] = merge_path<RowOrder<Descending>>(RowIt{a, width}, na, RowIt{b, width}, nb, diags[i]);
}

template <bool Descending, bool Right>
__global__ void k_rows_searchsorted(const unsigned char* __restrict__ s, long long n,
                                    const unsigned char* __restrict__ probes, long long count, int width,
                                    long long* __restrict__ out) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= count) return;
    out[i] = rank_of<RowOrder<Descending>, Right>(RowIt{s, width}, n, RowRef{probes + i * width, width});
}

// Same flags as k_check_sorted, over byte rows (grid-stride, stops once the answer is known).
template <bool Descending>
__global__ void k_rows_check(const unsigned char* __restrict__ rows, long long n, int width, int* flags) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long start = (long long)blockIdx.x * blockDim.x; start + 1 < n; start += stride) {
        if (answer_known(flags)) return;
        const long long i = start + threadIdx.x;
        bool down = false, up = false;
        if (i + 1 < n) {
            down = RowOrder<Descending>::less(RowRef{rows + (i + 1) * width, width}, RowRef{rows + i * width, width});
            up = !down;
        }
        publish_flags(flags, down, up);
    }
}

}  // namespace dsort
