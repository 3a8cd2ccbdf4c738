"""dsort.io._inputs: an INPUT (a file, a directory or a glob) resolved to its format and files,
in name order (Python's ``sorted``); mixes of formats and unusable files refused by name."""

import os

import numpy as np
import pytest

from dsort.io import FORMATS, InputError, discover, format_of


def test_discover_file_directory_glob(tmp_path):
    for name in ["b.bin", "a.bin", ".hidden", "_manifest"]:
        (tmp_path / name).write_bytes(b"")
    assert discover(tmp_path / "a.bin") == ("records", [tmp_path / "a.bin"], [])
    assert discover(tmp_path) == ("records", [tmp_path / "a.bin", tmp_path / "b.bin"], [tmp_path])
    assert discover(str(tmp_path / "*.bin"))[1] == [tmp_path / "a.bin", tmp_path / "b.bin"]
    np.save(tmp_path / "x.npy", np.arange(3))
    assert discover(tmp_path / "x.npy")[0] == "npy"
    for fmt in (None, "records", "npy"):  # a stray .npy among records: refused, named, never dropped
        with pytest.raises(InputError, match=r"several formats \(npy: x.npy; records: a.bin, b.bin\)"):
            discover(tmp_path, fmt)
    with pytest.raises(InputError, match="several formats"):
        discover(str(tmp_path / "*"))
    assert discover(str(tmp_path / "*.npy")) == ("npy", [tmp_path / "x.npy"], [])
    (tmp_path / "x.npy").unlink()
    (tmp_path / "p.parquet").write_bytes(b"")
    with pytest.raises(InputError, match="several formats"):
        discover(tmp_path)
    with pytest.raises(InputError, match="does not exist"):
        discover(tmp_path / "missing.bin")
    with pytest.raises(InputError, match="no input file matches"):
        discover(str(tmp_path / "*.nothing"))
    (tmp_path / "dangling").symlink_to(tmp_path / "gone")
    with pytest.raises(InputError, match="does not exist"):
        discover(tmp_path / "dangling")


@pytest.mark.parametrize(
    "suffix, fmt",
    [(".npy", "npy"), (".NPY", "npy"), (".parquet", "parquet"), (".Pq", "parquet"), (".bin", None), ("", None), (".npy.gz", None)],
)
def test_format_of_is_the_suffix(tmp_path, suffix, fmt):
    for given in (f"data{suffix}", tmp_path / f"dir.d/data{suffix}"):
        assert format_of(given) == fmt


@pytest.mark.parametrize("count", [0, 1, 2, 7, 40])
def test_a_directory_is_its_visible_files_in_name_order(tmp_path, rng, count):
    """Names drawn at random (digits, letters, hidden and underscore names among them); nested
    directories are not entered; ``fmt`` overrides what the names say."""
    alphabet = list("abcXYZ019-.")
    names = {"".join(rng.choice(alphabet, int(rng.integers(1, 8)))) for _ in range(count)}
    names = {n for n in names if n not in (".", "..")}
    for n in names:
        (tmp_path / n).write_bytes(bytes(int(rng.integers(0, 5))))
    (tmp_path / "zz-nested").mkdir()
    (tmp_path / "zz-nested" / "inner.bin").write_bytes(b"x")
    visible = sorted(n for n in names if not n.startswith((".", "_")))
    fmt, files, dirs = discover(tmp_path)
    assert (fmt, files, dirs) == ("records", [tmp_path / n for n in visible], [tmp_path])
    assert discover(tmp_path, "npy")[:2] == ("npy", files)
    matched = sorted(n for n in names if not n.startswith("."))  # a glob's * skips hidden names only
    if not matched:
        with pytest.raises(InputError, match="no input file matches"):
            discover(str(tmp_path / "*"))
        return
    assert discover(str(tmp_path / "*")) == ("records", [tmp_path / n for n in matched], [])


def test_a_mix_of_many_files_is_listed_briefly(tmp_path, rng):
    n_npy, n_bin = (int(v) for v in rng.integers(6, 12, 2))
    for i in range(n_npy):
        np.save(tmp_path / f"n{i:02d}.npy", np.arange(1))
    for i in range(n_bin):
        (tmp_path / f"r{i:02d}.bin").write_bytes(b"")
    shown_npy = ", ".join(f"n{i:02d}.npy" for i in range(5))
    shown_bin = ", ".join(f"r{i:02d}.bin" for i in range(5))
    expected = f"(npy: {shown_npy} and {n_npy - 5} more; records: {shown_bin} and {n_bin - 5} more)"
    with pytest.raises(InputError) as e:
        discover(tmp_path)
    assert expected in str(e.value) and str(tmp_path) in str(e.value)


def test_unknown_formats_and_unusable_files_are_refused(tmp_path, monkeypatch):
    (tmp_path / "a.bin").write_bytes(b"")
    with pytest.raises(InputError, match=r"unknown format 'csv'; dsort reads " + ", ".join(FORMATS)):
        discover(tmp_path / "a.bin", "csv")
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="is not a regular file"):
        discover(fifo)
    monkeypatch.setattr(os, "access", lambda path, mode: False)
    with pytest.raises(InputError, match="is not readable"):
        discover(tmp_path / "a.bin")


def test_a_file_that_cannot_be_opened_is_refused_with_the_reason(tmp_path, monkeypatch):
    import builtins
    import errno

    (tmp_path / "a.bin").write_bytes(b"")
    real = builtins.open

    def failing(path, *a, **k):
        if str(path).endswith("a.bin"):
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        return real(path, *a, **k)

    monkeypatch.setattr(builtins, "open", failing)
    with pytest.raises(InputError, match=f"cannot be read: {os.strerror(errno.EIO)}"):
        discover(tmp_path / "a.bin")
