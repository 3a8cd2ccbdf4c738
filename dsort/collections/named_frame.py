"""A dask dataframe made of tasks dsort names itself (:class:`NamedGraph`): the sorted frames'
collection. Imported only where one is made: it imports dask's dataframe expressions, which a
sort of arrays or files never needs."""

from __future__ import annotations

import functools

from dask.dataframe.dask_expr import new_collection
from dask.dataframe.dask_expr.io.io import FromGraph

from . import tasks as T


class NamedGraph(FromGraph):
    """dask-expr's ``FromGraph`` whose name is the one given (``name_prefix``), never a hash of its
    graph, and whose partitions are the graph's tasks ``(name, i)`` themselves: a key of
    ``keys`` of another name is taken by an alias task. (``FromGraph`` hashes the graph to name
    the frame, which costs the data of a persisted input and fails on a loader dask cannot
    hash, and aliases every partition.)"""

    @functools.cached_property
    def _name(self):
        return self.operand("name_prefix")

    def __dask_tokenize__(self):
        return self._name

    def _layer(self):
        dsk = dict(self.operand("layer"))
        for new, old in zip(self.__dask_keys__(), self.operand("keys")):
            if new != old:
                dsk[new] = T.alias(new, old)
        return dsk


def collection(graph, meta, divisions, keys, name: str):
    """The dask dataframe of partitions ``keys`` (tasks of ``graph``), named ``name``."""
    return new_collection(
        NamedGraph(layer=graph, _meta=meta, divisions=divisions, keys=list(keys), name_prefix=name)
    )
