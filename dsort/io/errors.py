"""The one error type for bad input: the command line prints its message and exits non-zero."""


class InputError(ValueError):
    """Input or output paths that dsort refuses, with a message meant for the person who gave them."""
