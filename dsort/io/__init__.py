"""Files in and out: the formats dsort sorts, read in bounded chunks and written whole or not at
all.

Formats (:data:`FORMATS`): fixed-width binary ``records`` (:mod:`.records`), 1-D numeric ``npy``
(:mod:`.npy`), ``parquet`` sorted by columns (:mod:`.parquet`). An input is a file, a directory or
a glob (:func:`discover`); an output is written under a temporary name beside it and renamed when
complete (:func:`staged`), after :func:`check_destination` has refused outputs that would clobber
or feed on the input. Bad input raises :class:`InputError` with a message for the user.
"""

from ._inputs import FORMATS, discover, format_of
from ._job import SortJob
from ._output import check_destination, remove_leftovers, staged
from ..core.errors import InputError

__all__ = [
    "FORMATS",
    "InputError",
    "SortJob",
    "check_destination",
    "discover",
    "format_of",
    "remove_leftovers",
    "staged",
]
