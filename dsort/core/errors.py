"""dsort's error types, for every layer: bad input and impossible limits (the command line prints
the message as one line and exits 2), and jobs that could not finish or failed their check (exit
1)."""


class InputError(ValueError):
    """Input or output paths that dsort refuses, with a message meant for the person who gave
    them."""


class LimitError(InputError):
    """A cluster option or limit that cannot work (exit status 2, like bad input)."""


class JobFailed(Exception):
    """The job could not finish: the cluster lost its workers (exit status 1, like a failed
    check)."""


class CheckFailed(JobFailed):
    """The output's record count or checksum differs from the input's, or it is out of order."""


class Unsupported(Exception):
    """A key dsort does not sort (dask's own sort may: dsort's stand-in for dask's methods hands
    such calls to dask, :mod:`dsort.collections.switch`)."""


class UnsupportedType(Unsupported, TypeError):
    """A key of a type dsort does not sort."""


class Incomparable(UnsupportedType):
    """A key whose values do not compare with each other (numbers and strings, say), in one
    partition or across partitions: pandas' sort refuses them too, so dask's own cannot sort them
    either, and dsort's stand-in for dask's methods raises it rather than handing the call on."""


class UnsupportedValue(Unsupported, ValueError):
    """A key whose values dsort cannot sort as asked (a categorical whose categories are not in
    their values' order, for divisions)."""
