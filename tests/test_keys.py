"""dsort.engine.keys: which keys sort, and the engines' argument checks (one home for each)."""

import numpy as np
import pytest

from dsort.engine import keys as K


@pytest.mark.parametrize("dtype", ["bool", "int8", "uint64", "float32", "float64", "S4", "V3"])
def test_supported_dtypes(dtype):
    assert K.check_dtype(dtype) == np.dtype(dtype)


@pytest.mark.parametrize("dtype", ["float16", "complex64", "O", "M8[ns]", "U3"])
def test_unsupported_dtypes_name_the_supported(dtype):
    with pytest.raises(TypeError, match="dsort sorts bool"):
        K.check_dtype(dtype)


def test_byte_rows():
    assert K.is_byte_rows(np.zeros((3, 10), np.uint8)) and not K.is_byte_rows(np.zeros((3, 0), np.uint8))
    assert not K.is_byte_rows(np.zeros((3, 10), np.int8))


def test_argument_checks():
    x = np.arange(5)
    assert K.check_sort(x, None, "last") is False and K.check_sort(x, x * 2, "first") is True
    with pytest.raises(ValueError, match="one row per key"):
        K.check_sort(x, x[:3], "last")
    with pytest.raises(ValueError, match="na_position"):
        K.check_one(x, "middle")
    with pytest.raises(ValueError, match="1-D"):
        K.check_one(np.zeros((2, 2)), "last")
    assert K.check_path(x, x, np.array([0, 10]), "last") is False
    with pytest.raises(ValueError, match=r"diagonals must lie in \[0, 10\]"):
        K.check_path(x, x, np.array([11]), "last")
    K.check_path(x, x, np.array([], np.int64), "last")
    with pytest.raises(TypeError, match="different dtypes"):
        K.check_path(x, x.astype(np.float64), np.array([1]), "last")
    with pytest.raises(ValueError, match="side"):
        K.check_search(x, "middle", "last")
    with pytest.raises(ValueError, match="both inputs of a merge or for neither"):
        K.check_merge(x, x, x, None, "last")
