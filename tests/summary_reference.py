"""What ``dsort check`` should report about a sequence of records, counted in plain Python: the
independent reference for the format modules' ``check_tasks`` (``valsort``'s summaries combined)."""

import zlib

from .reference import compare


def expected(keys, records, descending=False):
    """``(records, checksum, unordered, duplicates, first unordered)`` of Python ``keys`` (ints,
    floats or bytes) and their ``records`` (bytes, CRC-32 each); NaN last in both directions."""
    unordered, duplicates, first = 0, 0, None
    for i in range(1, len(keys)):
        c = compare(keys[i - 1], keys[i], descending, "last")
        if c > 0:
            unordered += 1
            first = i if first is None else first
        duplicates += c == 0
    return len(keys), sum(zlib.crc32(r) for r in records), unordered, duplicates, first


def combined(tasks, descending=False):
    """The same five numbers from dsort: its check tasks computed and their summaries combined."""
    import dask

    from dsort.core import valsort

    s = valsort.combine(dask.compute(*tasks, scheduler="sync"), descending=descending)
    return s.records, s.checksum, s.unordered, s.duplicates, s.first_unordered
