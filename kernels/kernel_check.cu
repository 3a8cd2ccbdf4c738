// The output checks of valsort (dsort/valsort.py) in one pass each, on the GPU: the sum of the
// records' CRC-32s, and the order and duplicate counts of consecutive keys.
//
// Written apart from the sort on purpose: the check must not trust the code whose output it
// verifies, so nothing here includes the sort's comparators (cta_order.cuh) or searches. Each
// kernel is a persistent grid (grid-stride loop); a CTA publishes its totals with one atomic per
// counter per warp. Results go to `out`, four unsigned 64-bit words the host zeroes first:
//   k_crc32_sum:       out[0] += sum over rows of zlib's CRC-32 of the row's `width` bytes
//   k_pair_order*:     out[1] += pairs out of order, out[2] += pairs of equal keys,
//                      out[3] = min(out[3], position of the first record out of order)
// (the host sets out[3] to n, "none", before the order kernels run).
#pragma once

namespace dsort {
namespace check {

__device__ __forceinline__ unsigned long long warp_sum(unsigned long long v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ unsigned long long warp_min(unsigned long long v) {
    for (int o = 16; o > 0; o >>= 1) {
        const unsigned long long w = __shfl_down_sync(0xffffffffu, v, o);
        v = w < v ? w : v;
    }
    return v;
}

// Lane 0 of each warp adds the warp's counts (and lowers the first position).
__device__ __forceinline__ void publish_order(unsigned long long* out, unsigned long long wrong, unsigned long long equal,
                                              unsigned long long first) {
    wrong = warp_sum(wrong);
    equal = warp_sum(equal);
    first = warp_min(first);
    if ((threadIdx.x & 31) == 0) {
        if (wrong) atomicAdd(out + 1, wrong);
        if (equal) atomicAdd(out + 2, equal);
        if (wrong) atomicMin(out + 3, first);
    }
}

// Keys as values: NaN after every number in both directions, NaNs equal to each other.
template <class T>
__device__ __forceinline__ bool is_nan(T) { return false; }
template <>
__device__ __forceinline__ bool is_nan<float>(float x) { return x != x; }
template <>
__device__ __forceinline__ bool is_nan<double>(double x) { return x != x; }

}  // namespace check

// One thread per record: `width` bytes at `rows + r * stride`.
__global__ void k_crc32_sum(const unsigned char* __restrict__ rows, long long n, int width, long long stride,
                            unsigned long long* out) {
    __shared__ unsigned table[256];  // zlib's CRC-32 (reflected polynomial 0xEDB88320), one byte at a time
    for (int i = threadIdx.x; i < 256; i += blockDim.x) {
        unsigned c = (unsigned)i;
        for (int k = 0; k < 8; ++k) c = (c & 1u) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        table[i] = c;
    }
    __syncthreads();
    unsigned long long sum = 0;
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long r = (long long)blockIdx.x * blockDim.x + threadIdx.x; r < n; r += step) {
        const unsigned char* p = rows + r * stride;
        unsigned c = 0xFFFFFFFFu;
        for (int j = 0; j < width; ++j) c = table[(c ^ p[j]) & 0xFFu] ^ (c >> 8);
        sum += c ^ 0xFFFFFFFFu;
    }
    sum = check::warp_sum(sum);
    if ((threadIdx.x & 31) == 0 && sum) atomicAdd(out, sum);
}

// Consecutive keys a = keys[i - 1], b = keys[i] (element stride `stride`), for i in [1, n).
template <class T, bool Descending>
__global__ void k_pair_order(const T* __restrict__ keys, long long n, long long stride, unsigned long long* out) {
    unsigned long long wrong = 0, equal = 0, first = (unsigned long long)n;
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long i = 1 + (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
        const T a = keys[(i - 1) * stride], b = keys[i * stride];
        const bool na = check::is_nan(a), nb = check::is_nan(b);
        const bool w = (Descending ? (b > a) : (b < a)) || (na && !nb);
        wrong += w;
        equal += (a == b) || (na && nb);
        if (w && (unsigned long long)i < first) first = (unsigned long long)i;
    }
    check::publish_order(out, wrong, equal, first);
}

// Byte keys compared as memcmp: `width` bytes at `rows + i * stride`.
template <bool Descending>
__global__ void k_pair_order_rows(const unsigned char* __restrict__ rows, long long n, int width, long long stride,
                                  unsigned long long* out) {
    unsigned long long wrong = 0, equal = 0, first = (unsigned long long)n;
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long i = 1 + (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
        const unsigned char* a = rows + (i - 1) * stride;
        const unsigned char* b = rows + i * stride;
        int k = 0;
        while (k < width && a[k] == b[k]) ++k;
        const bool w = k < width && (Descending ? b[k] > a[k] : b[k] < a[k]);
        wrong += w;
        equal += k == width;
        if (w && (unsigned long long)i < first) first = (unsigned long long)i;
    }
    check::publish_order(out, wrong, equal, first);
}

}  // namespace dsort
