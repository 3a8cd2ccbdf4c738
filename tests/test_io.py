"""dsort.io and dsort.dataframe without the command line."""

import os

import numpy as np
import pytest

from dsort import gen
from dsort.io import InputError, check_destination, discover, staged
from dsort.io._output import MARKER, OutputExists
from dsort.io import npy as npyio
from dsort.io import records as recio


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


def test_record_sizes_and_npy_headers_are_checked(tmp_path):
    (tmp_path / "r.bin").write_bytes(bytes(250))
    with pytest.raises(InputError, match="not a multiple of the record size 100"):
        recio.lengths([tmp_path / "r.bin"], 100)
    assert recio.lengths([tmp_path / "r.bin"], 50) == [5]
    with pytest.raises(InputError, match="--key-size"):
        recio.check_sizes(100, 0)
    np.save(tmp_path / "two.npy", np.zeros((2, 2)))
    np.save(tmp_path / "half.npy", np.zeros(3, np.float16))
    np.save(tmp_path / "text.npy", np.array([b"a", b"b"]))
    np.save(tmp_path / "big.npy", np.arange(3, dtype=">i8"))
    (tmp_path / "junk.npy").write_bytes(b"not numpy")
    for name, msg in [
        ("two", "1-D"),
        ("half", "unsupported dtype float16"),
        ("text", "unsupported dtype"),
        ("big", "byte order"),
        ("junk", "not a readable .npy"),
    ]:
        with pytest.raises(InputError, match=msg):
            npyio.header(tmp_path / f"{name}.npy")
    np.save(tmp_path / "a.npy", np.arange(3, dtype=np.int32))
    np.save(tmp_path / "b.npy", np.arange(3, dtype=np.int64))
    with pytest.raises(InputError, match="different dtypes"):
        npyio.inspect([tmp_path / "a.npy", tmp_path / "b.npy"])


def test_read_blocks_are_bounded(tmp_path):
    data = gen.record_chunk(0, 1000, seed=1)
    data.tofile(tmp_path / "a.bin")
    data[:300].tofile(tmp_path / "b.bin")
    x = recio.read([tmp_path / "a.bin", tmp_path / "b.bin"], 100, 256)
    assert x.chunks[0] == (256, 256, 256, 232, 256, 44)
    np.testing.assert_array_equal(x.compute(scheduler="sync"), np.concatenate([data, data[:300]]))


def test_destination_rules(tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    (src / "a.bin").write_bytes(b"")
    with pytest.raises(InputError, match="inside INPUT"):
        check_destination(src / "out.bin", [src / "a.bin"], overwrite=True, input_dirs=[src])
    with pytest.raises(InputError, match="one of the input files"):
        check_destination(src / "a.bin", [src / "a.bin"], overwrite=True)
    (tmp_path / "out.bin").write_bytes(b"old")
    with pytest.raises(InputError, match="--overwrite"):
        check_destination(tmp_path / "out.bin", [src / "a.bin"], overwrite=False)
    assert check_destination(tmp_path / "out.bin", [src / "a.bin"], overwrite=True) == tmp_path / "out.bin"
    with pytest.raises(InputError, match="does not exist"):
        check_destination(tmp_path / "nodir" / "out.bin", [], overwrite=False)


def _manifest(d, part="part-00000.parquet"):
    import json

    (d / MARKER).write_text(json.dumps({"format": "dsort-parquet", "parts": [{"path": part, "rows": 1}]}))


def test_overwrite_replaces_only_files_and_dsort_directories(tmp_path):
    """An unrelated directory at OUTPUT is never deleted, --overwrite or not; one dsort wrote
    (its manifest inside) may be replaced, and is, in one exchange."""
    important = tmp_path / "important"
    important.mkdir()
    (important / "thesis.tex").write_bytes(b"years of work")
    for overwrite in (False, True):
        with pytest.raises(InputError, match="did not write" if overwrite else "--overwrite"):
            check_destination(important, [], overwrite=overwrite)
    ours = tmp_path / "sorted"
    ours.mkdir()
    (ours / "part-00000.parquet").write_bytes(b"old")
    for fake in ("{}", "not json", '{"format": "something else"}'):  # only a real manifest counts
        (ours / MARKER).write_text(fake)
        with pytest.raises(InputError, match="did not write"):
            check_destination(ours, [], overwrite=True)
    _manifest(ours)
    (ours / "notes.txt").write_bytes(b"a user's file, put there later")
    with pytest.raises(InputError, match=r"holds files dsort did not write \(notes.txt\)"):
        check_destination(ours, [], overwrite=True)
    (ours / "notes.txt").unlink()
    assert check_destination(ours, [], overwrite=True) == ours
    with staged(ours, directory=True, overwrite=True) as tmp:
        (tmp / "part-00000.parquet").write_bytes(b"new")
        _manifest(tmp)
    assert (ours / "part-00000.parquet").read_bytes() == b"new"
    # the marker is checked again at the end: a directory swapped in meanwhile survives
    out = tmp_path / "late"
    with pytest.raises(InputError, match="did not write"):
        with staged(out, overwrite=True) as tmp:
            tmp.write_bytes(b"sorted")
            out.mkdir()
            (out / "keep").write_bytes(b"k")
    assert (out / "keep").read_bytes() == b"k"
    assert (important / "thesis.tex").read_bytes() == b"years of work"
    assert sorted(os.listdir(tmp_path)) == ["important", "late", "sorted"]


def test_an_output_that_appears_meanwhile_is_kept_and_the_loser_fails(tmp_path):
    """Two runs without --overwrite that both started before OUTPUT existed: the one that finishes
    second fails clearly, and the first one's output stays as it was."""
    for directory in (False, True):
        out = tmp_path / f"out{int(directory)}"
        with pytest.raises(OutputExists, match="appeared while this sort ran"):
            with staged(out, directory=directory) as tmp:
                (tmp / "part" if directory else tmp).write_bytes(b"second")
                out.write_bytes(b"first")  # the other run published first
        assert out.read_bytes() == b"first"
    assert sorted(os.listdir(tmp_path)) == ["out0", "out1"]


def test_publishing_flushes_only_what_dsort_wrote(tmp_path, monkeypatch):
    """Not the other files beside OUTPUT: they may be many, or vanish meanwhile."""
    neighbour = tmp_path / "someone-elses.bin"
    neighbour.write_bytes(b"x")
    synced = []
    real = os.fsync

    def fsync(fd):
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        return real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    with staged(tmp_path / "out", directory=True) as tmp:
        (tmp / "part").write_bytes(b"p")
        neighbour.unlink()  # another job's temporary file, gone before we publish
    names = [os.path.basename(p) for p in synced]
    assert "someone-elses.bin" not in names and "part" in names and names[-1] == tmp_path.name


def test_a_directory_swap_never_leaves_output_missing(tmp_path, monkeypatch):
    """Replacing a directory OUTPUT is one atomic exchange: interrupted right after it, OUTPUT is
    the new complete directory, never missing."""
    from dsort.io import _output

    out = tmp_path / "sorted"
    out.mkdir()
    _manifest(out, "part")
    (out / "part").write_bytes(b"old")
    seen = []

    def interrupted_remove(path):
        seen.append(out.exists() and (out / "part").read_bytes())
        raise KeyboardInterrupt

    monkeypatch.setattr(_output, "_remove", interrupted_remove)
    with pytest.raises(KeyboardInterrupt):
        with staged(out, directory=True, overwrite=True) as tmp:
            (tmp / "part").write_bytes(b"new")
            _manifest(tmp, "part")
    assert seen and set(seen) == {b"new"} and (out / "part").read_bytes() == b"new"


def test_staged_output_is_all_or_nothing(tmp_path):
    out = tmp_path / "out.bin"
    out.write_bytes(b"old")
    with pytest.raises(RuntimeError):
        with staged(out, overwrite=True) as tmp:
            tmp.write_bytes(b"half")
            raise RuntimeError("boom")
    assert out.read_bytes() == b"old" and os.listdir(tmp_path) == ["out.bin"]
    with staged(out, overwrite=True) as tmp:
        tmp.write_bytes(b"new")
    assert out.read_bytes() == b"new" and os.listdir(tmp_path) == ["out.bin"]
    d = tmp_path / "dir"
    with staged(d, directory=True) as tmp:
        (tmp / "part").write_bytes(b"x")
    assert (d / "part").read_bytes() == b"x"


def test_leftovers_of_a_killed_run_are_removed_and_nothing_else(tmp_path, capsys):
    """A run killed by SIGKILL leaves hidden names that carry its PID: the next run for the same
    OUTPUT removes those whose process is gone, and says so; a live run's files and other files stay."""
    import subprocess

    dead = subprocess.Popen(["true"])
    dead.wait()
    names = {
        f".out.bin.dsort-tmp-{dead.pid}-0123abcd": False,
        f".out.bin.dsort-runs-{dead.pid}-0123abcd": False,
        f".out.bin.dsort-tmp-{os.getpid()}-0123abcd": True,  # a run still going: kept
        ".out.bin.dsort-tmp-notapid": True,
        ".other.bin.dsort-tmp-1-0123abcd": True,
        "out.bin": True,
    }
    for n in names:
        (tmp_path / n).mkdir() if "runs" in n else (tmp_path / n).write_bytes(b"x")
    with staged(tmp_path / "out.bin", overwrite=True) as tmp:
        tmp.write_bytes(b"new")
    assert sorted(os.listdir(tmp_path)) == sorted(n for n, keep in names.items() if keep)
    assert capsys.readouterr().err.count("left by an earlier run") == 2
