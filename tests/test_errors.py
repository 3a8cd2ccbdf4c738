"""dsort.core.errors: the error types; bad input, which the command line prints as one line
and exits 2 on; every refusal of dsort.io is one."""

import pytest

import dsort.io
from dsort.cli import main
from dsort.io import InputError
from dsort.io._output import OutputExists
from dsort.service import LimitError


def test_input_error_is_a_value_error_and_the_io_errors_are_input_errors():
    for cls in (OutputExists, LimitError):
        assert issubclass(cls, InputError)
    assert issubclass(InputError, ValueError)
    with pytest.raises(ValueError, match="^the message$"):  # callers that catch ValueError see it, as it was said
        raise InputError("the message")
    assert dsort.io.InputError is InputError


@pytest.mark.parametrize("cls", [InputError, OutputExists, LimitError])
def test_the_command_line_prints_the_message_and_exits_2(tmp_path, rng, capsys, monkeypatch, cls):
    message = f"a message for the user {int(rng.integers(10**9))}: {tmp_path}"

    def refuse(*args, **kwargs):
        raise cls(message)

    monkeypatch.setattr(dsort.io, "discover", refuse)
    assert main(["check", str(tmp_path / "in.bin")]) == 2
    out = capsys.readouterr()
    assert out.err == f"dsort: error: {message}\n" and out.out == ""


def test_a_real_refusal_reaches_the_user_as_one_line(tmp_path, capsys):
    missing = tmp_path / "missing.bin"
    with pytest.raises(InputError) as e:
        dsort.io.discover(missing)
    assert main(["check", str(missing)]) == 2
    assert capsys.readouterr().err == f"dsort: error: {e.value}\n"
