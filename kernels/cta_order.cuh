// Comparator traits: the one place that defines dsort's key order on the device.
//
// Order<T, Descending, NaNFirst>::less(a, b) is true when a must come strictly before b.
// Everything else (merge path, serial merge, blocksort, searches) is written against it, so one
// template instantiation per key type, direction and NaN policy gives every kernel its order.
//   * integers by value; descending compares the other way round (ties stay equal: stability is
//     kept by the algorithms, never by the comparator);
//   * floats by value, -0.0 == 0.0 (IEEE comparison already says so), NaN after every number in
//     both directions, or before every number with NaNFirst; all NaNs are equal;
//   * Bytes16: up to 16 key bytes packed big-endian into two words, compared like memcmp.
#pragma once

namespace dsort {

// A value slot that carries nothing (keys-only kernels).
struct NoValue {};

// Up to 16 bytes of a byte key, big-endian: comparing (hi, lo) as unsigned words is memcmp.
struct __align__(16) Bytes16 {
    unsigned long long hi, lo;
};

template <class T> struct is_float { static constexpr bool value = false; };
template <> struct is_float<float> { static constexpr bool value = true; };
template <> struct is_float<double> { static constexpr bool value = true; };

template <class T>
__device__ __forceinline__ bool value_less(const T& a, const T& b) { return a < b; }

template <>
__device__ __forceinline__ bool value_less<Bytes16>(const Bytes16& a, const Bytes16& b) {
    return a.hi < b.hi || (a.hi == b.hi && a.lo < b.lo);
}

template <class T, bool Descending, bool NaNFirst>
struct Order {
    using key_type = T;

    static __device__ __forceinline__ bool less(const T& a, const T& b) {
        // Comparisons involving NaN are false, so c is the order of two numbers only.
        const bool c = Descending ? value_less(b, a) : value_less(a, b);
        if constexpr (is_float<T>::value) {
            const bool na = a != a, nb = b != b;
            return NaNFirst ? (c || (na && !nb)) : (c || (nb && !na));
        } else {
            return c;
        }
    }
};

}  // namespace dsort
