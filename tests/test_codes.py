"""dsort.engine._codes on a CUDA device: keys as the kernels see them (widened small integers,
byte rows packed big-endian), decoded back bit for bit; the reference is NumPy's own views
(``>u8`` words of zero-padded rows) and casts."""

import numpy as np
import pytest

from .conftest import HAS_GPU
from .gpu_cases import GPU, same
from .reference import make_keys

pytestmark = GPU

if HAS_GPU:
    import cupy

    from dsort.engine import _codes
    from dsort.engine import _kernels as P


def _words(rows, offset, length):
    """Bytes [offset, offset + length) of each row, zero-padded to 8 or 16 bytes, as big-endian
    uint64 words: one per row, or (hi, lo) pairs."""
    word = 16 if length > 8 else 8
    padded = np.zeros((len(rows), word), np.uint8)
    padded[:, :length] = rows[:, offset : offset + length]
    w = padded.view(">u8").astype(np.uint64)
    return w.reshape(-1) if word == 8 else w.reshape(-1, 2)


@pytest.mark.parametrize("dtype", ["bool", "int8", "uint8", "int16", "uint16"])
@pytest.mark.parametrize("n", [0, 1, 1000])
def test_small_keys_widen_to_int32(rng, dtype, n):
    x = make_keys(dtype, "special" if dtype != "bool" else "random", n, rng)
    c = _codes.encode(cupy.asarray(x))
    assert c.key == "int" and c.data.dtype == cupy.int32
    assert same(cupy.asnumpy(c.data), x.astype(np.int32))
    assert same(cupy.asnumpy(c.decode(c.data)), x)
    assert c.order(True, False) == P.Order("int", True, False)


@pytest.mark.parametrize("dtype", ["int32", "uint32", "int64", "uint64", "float32", "float64"])
def test_wide_numbers_are_themselves(rng, dtype):
    x = make_keys(dtype, "special", int(rng.integers(0, 3000)), rng)
    dx = cupy.asarray(x)
    c = _codes.encode(dx[::1])
    assert c.key == P.ctype_of(x.dtype) and same(cupy.asnumpy(c.data), x)
    assert same(cupy.asnumpy(c.decode(c.data)), x)
    strided = _codes.encode(cupy.asarray(np.repeat(x, 2))[::2])  # made contiguous for the kernels
    assert strided.data.flags.c_contiguous and same(cupy.asnumpy(strided.data), x)
    assert c.order(False, True).spelling == P.Order(P.ctype_of(x.dtype), False, True).spelling


@pytest.mark.parametrize("width", [1, 3, 7, 8, 9, 15, 16])
@pytest.mark.parametrize("n", [0, 1, 2, 5000])
def test_byte_rows_pack_big_endian_and_decode(rng, width, n):
    rows = rng.choice(np.array([0, 1, 0x7F, 0x80, 0xFF], np.uint8), (n, width))
    c = _codes.encode(cupy.asarray(rows))
    assert c.key == P.ROW_WORDS[16 if width > 8 else 8]
    assert same(cupy.asnumpy(c.data), _words(rows, 0, width))
    assert same(cupy.asnumpy(c.decode(c.data)), rows)
    # the words' order is memcmp's: NumPy's S items compare so
    s = np.ascontiguousarray(rows).view(f"S{width}").reshape(-1)
    w = _words(rows, 0, width)
    key = w if w.ndim == 1 else w[:, 0].astype(object) * 2**64 + w[:, 1].astype(object)
    order = sorted(range(n), key=lambda i: (key[i], i))
    assert [s[i] for i in order] == sorted(s.tolist())


@pytest.mark.parametrize("width", [17, 20, 33])
@pytest.mark.parametrize("perm_dtype", [None, "uint32", "uint64"])
def test_pack_slices_of_wide_rows_through_a_permutation(rng, width, perm_dtype):
    n = int(rng.integers(1, 4000))
    rows = rng.integers(0, 256, (n, width), dtype=np.uint8)
    perm = None if perm_dtype is None else rng.permutation(n).astype(perm_dtype)
    taken = rows if perm is None else rows[perm]
    for offset in range(0, width, 16):
        length = min(16, width - offset)
        c = _codes.pack(cupy.asarray(rows), offset, length, None if perm is None else cupy.asarray(perm))
        assert same(cupy.asnumpy(c.data), _words(taken, offset, length))
        with pytest.raises(AssertionError, match="only whole keys decode"):
            c.decode(c.data)
    assert _codes.wide_rows(cupy.asarray(rows))


def test_wide_rows_are_byte_rows_wider_than_16():
    for shape, dtype, wide in [((4, 16), "uint8", False), ((4, 17), "uint8", True), ((4, 17), "int8", False), ((4,), "uint8", False)]:
        assert _codes.wide_rows(cupy.zeros(shape, dtype)) is wide


@pytest.mark.parametrize("dtype", ["int32", "uint32", "float32", "int64", "uint64", "float64"])
def test_value_words_are_views_of_4_and_8_byte_values(rng, dtype):
    v = make_keys(dtype, "special", int(rng.integers(1, 1000)), rng)
    dv = cupy.asarray(v)
    w = _codes.value_words(dv)
    assert w.dtype == np.dtype(f"u{v.dtype.itemsize}") and same(cupy.asnumpy(w).view(v.dtype), v)
    assert w.data.ptr == dv.data.ptr  # a view: no copy
    strided = _codes.value_words(cupy.asarray(np.repeat(v, 2))[::2])
    assert same(cupy.asnumpy(strided).view(v.dtype), v)


@pytest.mark.parametrize("shape, dtype", [((5,), "int16"), ((5,), "uint8"), ((5,), "bool"), ((5, 2), "int32"), ((5, 3), "uint8")])
def test_other_values_have_no_words(shape, dtype):
    assert _codes.value_words(cupy.zeros(shape, dtype)) is None
