"""dsort.io._output: OUTPUT checked before any work, written under a temporary name beside it and
published whole by one rename; leftovers of killed runs removed, and nothing else."""

import os
import signal

import pytest

from dsort.io import InputError, check_destination, remove_leftovers, staged
from dsort.io import _output
from dsort.io._output import MARKER, OutputExists, temporary_name


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


def test_input_inside_output_and_unusable_parents_are_refused(tmp_path, monkeypatch):
    out = tmp_path / "out"
    (out / "sub").mkdir(parents=True)
    (out / "sub" / "a.bin").write_bytes(b"")
    for inputs, dirs in (([out / "sub" / "a.bin"], []), ([], [out / "sub"])):
        with pytest.raises(InputError, match="is inside OUTPUT"):
            check_destination(out, inputs, overwrite=True, input_dirs=dirs)
    monkeypatch.setattr(os, "access", lambda path, mode: False)
    with pytest.raises(InputError, match="is not writable"):
        check_destination(tmp_path / "new.bin", [], overwrite=False)


def test_a_symlink_output_is_replaced_not_followed(tmp_path):
    target = tmp_path / "target.bin"
    target.write_bytes(b"kept")
    link = tmp_path / "link.bin"
    link.symlink_to(target)
    with pytest.raises(InputError, match="--overwrite"):
        check_destination(link, [], overwrite=False)
    assert check_destination(link, [], overwrite=True) == link
    with staged(link, overwrite=True) as tmp:
        tmp.write_bytes(b"new")
    assert not link.is_symlink() and link.read_bytes() == b"new" and target.read_bytes() == b"kept"
    link.unlink()
    link.symlink_to(target)  # a link to the input is the input
    with pytest.raises(InputError, match="one of the input files"):
        check_destination(link, [target], overwrite=True)


def test_an_output_that_is_not_a_file_or_directory_is_never_replaced(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="not a regular file or directory"):
        check_destination(fifo, [], overwrite=True)
    with pytest.raises(InputError, match="not a regular file or directory"):
        with staged(fifo, overwrite=True) as tmp:
            tmp.write_bytes(b"x")
    assert fifo.exists() and not fifo.is_file() and os.listdir(tmp_path) == ["pipe"]


def test_temporary_names_are_hidden_beside_output_and_say_who_made_them(tmp_path):
    out = tmp_path / "some.out.bin"
    names = {temporary_name(out, kind) for kind in ("tmp", "old", "runs") for _ in range(20)}
    assert len(names) == 60  # random parts: never the same name twice
    for p in names:
        assert p.parent == tmp_path
        head, tag, pid, rand = p.name.rsplit("-", 3)
        assert head == ".some.out.bin.dsort" and tag in ("tmp", "old", "runs") and int(pid) == os.getpid()
        assert len(rand) == 8 and int(rand, 16) >= 0
    # a name made by this process is one that remove_leftovers keeps (the process is alive)
    for p in list(names)[:3]:
        p.write_bytes(b"x")
    assert remove_leftovers(tmp_path, out.name) == [] and len(os.listdir(tmp_path)) == 3


def test_remove_leftovers_reports_what_it_removed(tmp_path, capsys):
    import io
    import subprocess

    dead = subprocess.Popen(["true"])
    dead.wait()
    gone = [tmp_path / f".o.dsort-{kind}-{dead.pid}-{i:08x}" for i, kind in enumerate(("tmp", "old", "runs"))]
    gone[0].write_bytes(b"x")
    gone[1].mkdir()
    (gone[1] / "part").write_bytes(b"p")
    gone[2].mkdir()
    kept = [
        tmp_path / f".o.dsort-tmp-{dead.pid}-0123abc",  # 7 hex digits: not a dsort name
        tmp_path / f".o.dsort-new-{dead.pid}-0123abcd",  # not a kind dsort makes
        tmp_path / f".ox.dsort-tmp-{dead.pid}-0123abcd",  # another OUTPUT's
        tmp_path / f"o.dsort-tmp-{dead.pid}-0123abcd",  # not hidden
    ]
    for p in kept:
        p.write_bytes(b"k")
    stream = io.StringIO()
    assert sorted(remove_leftovers(tmp_path, "o", stream)) == sorted(gone)
    assert sorted(os.listdir(tmp_path)) == sorted(p.name for p in kept)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 3 and all(f"process {dead.pid}" in line for line in lines) and capsys.readouterr().err == ""
    assert remove_leftovers(tmp_path / "missing", "o", stream) == []


@pytest.mark.parametrize("directory", [False, True])
@pytest.mark.parametrize("overwrite", [False, True])
def test_publishing_without_renameat2(tmp_path, monkeypatch, directory, overwrite):
    """On a kernel or file system without renameat2 the fallbacks keep the same promises: a new
    OUTPUT appears whole, an existing one is replaced only with ``overwrite``, an OUTPUT that
    appeared meanwhile is kept without it."""
    monkeypatch.setattr(_output, "_renameat2", False)

    def write(tmp, data):
        if directory:
            (tmp / "part").write_bytes(data)
            _manifest(tmp, "part")
        else:
            tmp.write_bytes(data)

    def read(p):
        return (p / "part").read_bytes() if directory else p.read_bytes()

    out = tmp_path / "out"
    with staged(out, directory=directory, overwrite=overwrite) as tmp:
        write(tmp, b"first")
    assert read(out) == b"first"
    if overwrite:
        with staged(out, directory=directory, overwrite=True) as tmp:
            write(tmp, b"second")
        assert read(out) == b"second"
    else:
        late = tmp_path / "late"
        with pytest.raises(OutputExists):
            with staged(late, directory=directory) as tmp:
                write(tmp, b"mine")
                late.write_bytes(b"theirs")
        assert late.read_bytes() == b"theirs"
    assert not [n for n in os.listdir(tmp_path) if "dsort-" in n]


def test_sigterm_while_staging_publishes_nothing(tmp_path):
    import threading

    if threading.current_thread() is not threading.main_thread():
        pytest.skip("staged turns SIGTERM into SystemExit only in the main thread")
    out = tmp_path / "out.bin"
    out.write_bytes(b"old")
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(SystemExit) as e:
        with staged(out, overwrite=True) as tmp:
            tmp.write_bytes(b"half")
            os.kill(os.getpid(), signal.SIGTERM)
    assert e.value.code == 128 + signal.SIGTERM
    assert out.read_bytes() == b"old" and os.listdir(tmp_path) == ["out.bin"]
    assert signal.getsignal(signal.SIGTERM) is before  # the handler is the caller's again


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork")
def test_a_forked_child_flushes_with_threads_of_its_own(tmp_path):
    """A child forked while the parent stages an output and flushes its files in the background
    has neither the parent's flusher threads nor its staged directories: its flushes there are
    its own, done in the calling thread."""
    import time

    pid = None
    with staged(tmp_path / "out", directory=True) as tmp:
        f = tmp / "part"
        f.write_bytes(b"rows")
        _output.flush_soon(f)  # the parent's flusher made
        assert _output._flusher is not None and _output._staging
        pid = os.fork()
        if pid == 0:  # the child: 0 only where it starts without the parent's flusher or staging
            code = 1
            try:
                if _output._flusher is None and not _output._staging:
                    _output.flush_soon(f)  # flushed here and now
                    code = 0 if _output._flusher is None else 1
            finally:
                os._exit(code)
        deadline = time.monotonic() + 30
        while True:
            got, status = os.waitpid(pid, os.WNOHANG)
            if got or time.monotonic() > deadline:
                break
            time.sleep(0.01)
        if not got:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
    assert got and os.waitstatus_to_exitcode(status) == 0
