"""Sorting dask dataframes and series with pandas' semantics: :func:`sort_values`,
:func:`sort_series`, :func:`set_index`, and the ``.dsort`` accessor on dask frames and series.

``sort_values(df, by, *, ascending=True, na_position="last")`` equals pandas'
``df.sort_values(by, ascending=..., na_position=..., kind="stable")`` on the concatenated
partitions: stable (ties keep their input order), missing values (NaN, None, NaT, pd.NA) last (or
first), index labels kept (or, with ``ignore_index``, the rows' positions); ``by`` names columns or
index levels. The result has the input's number of partitions (or ``npartitions``), balanced to
within one row.

How (the same three steps as for arrays, on the rows' keys): each partition's ``by`` columns are
encoded as fixed-width byte keys whose ``memcmp`` order is the wanted order (one column of NumPy
numbers sorted on the host: as one ``uint64`` word per row; :mod:`dsort.core.frame_keys`) and the
partition is sorted by them; the exact cuts of every output
partition come from samples and windows of the keys (:mod:`dsort.core.plan`); each output partition takes
its slice of every sorted partition and merges them by their keys (:mod:`dsort.core.frame_chunk`). Only
the slices travel, once. Building the result runs nothing: the input is read once, during
``compute``; unsupported key types and wrong arguments fail at the call, from the frame's meta.

Graph phases (task groups on the dashboard, :mod:`dsort.collections.tasks`): ``dsort-sort`` (one per input
partition), ``dsort-info`` (a part's size and regular sample), ``dsort-plan`` (with the windows
around every cut), ``dsort-window``, ``dsort-cuts`` (small), ``dsort-slice`` (one per input and output partition; it runs where the
sorted partition lives), ``dsort-sliced`` (one per input partition: all its slices made),
``dsort-merge`` (one per output partition, after every ``dsort-sliced``).

Frames bigger than memory: ``strategy="external"`` (:func:`sort_values_external`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..core import frame_chunk as F
from ..core.errors import UnsupportedType, UnsupportedValue
from . import tasks as T
from .frame_graph import Graph, as_collection, grouped_cuts, nonempty_cuts, output_pieces, positional_divisions
from ..core.frame_keys import KeySpec, RowCodec, column, encode_keys, normalize, string_columns, string_widths

__all__ = [
    "encode_keys",
    "set_index",
    "sort_series",
    "sort_values",
    "sort_values_external",
    "string_columns",
    "string_widths",
]

STRATEGIES = ("auto", "memory", "external")
DEVICES = (None, "gpu")


def _spec(df, by, ascending, na_position, strategy, device) -> KeySpec:
    """The sort's key spec, every argument checked against the frame's meta (no data read)."""
    if not isinstance(getattr(df, "_meta", None), pd.DataFrame):
        kind = f"{type(df).__module__.split('.')[0]} {type(df).__name__}"
        what = "a dask Series: use sort_series" if isinstance(getattr(df, "_meta", None), pd.Series) else f"a {kind}"
        raise UnsupportedType(f"dsort.dataframe sorts dask DataFrames; this is {what}")
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {STRATEGIES}, got {strategy!r}")
    if device not in DEVICES:
        raise ValueError(f"device must be one of {DEVICES}, got {device!r}")
    by, ascending = normalize(by, ascending)
    for c in by:
        column(df._meta, c)  # a KeyError naming the columns, or ambiguous
    _check_categories(df, by)
    return KeySpec.of(df._meta, by, ascending, na_position)


def _partitions(df, npartitions) -> int:
    """The output partitions: ``npartitions`` (a whole number, at least 1) or the input's."""
    if npartitions is None or npartitions == "auto":  # dask's "auto" (dask 2026.8's own sorts fail on it): the input's
        return df.npartitions
    if isinstance(npartitions, bool) or not isinstance(npartitions, (int, np.integer)) or npartitions < 1:
        raise ValueError(f"npartitions must be a whole number of at least 1, got {npartitions!r}")
    return int(npartitions)


def choose_strategy(partitions: int, outputs: int, divisions: bool = False, device=None) -> str:
    """The ``"auto"`` rule. ``"memory"`` where the external sort cannot run (workers on several
    machines, whose files the others cannot read; ``divisions=True``). Else ``"external"`` for
    ``device="gpu"``: its runs stay on the GPUs and a merge of many runs is one sort of their
    slices (2^28 rows in 64 partitions on one H100: 6.5 s in memory, 1.8 s external; BENCHMARKS.md,
    "Dataframes"). On the CPU, ``"memory"`` while its slices (runs x merge groups,
    :mod:`dsort.collections.scale`: about twice the worker threads each, whatever the partitions)
    are at most the setting ``dsort.dataframe.memory-pieces`` (1024; dask's config), else
    ``"external"``. Each in-memory slice is one dask task and transfer; the external sort reads
    its slices inside its merge tasks (on one machine from the page cache). Measured on 8 CPU
    workers (BENCHMARKS.md, "Scale"), the in-memory sort was the faster or within 1.2x of the
    external one at 16 to 4096 partitions."""
    from . import config, external, scale

    runs = len(scale.frame_runs(partitions, external=False))
    pieces = runs * len(scale.merge_groups(outputs, runs))
    if divisions or not external.one_host():
        return "memory"
    if device == "gpu" or pieces > int(config.get("dataframe.memory-pieces")):
        return "external"
    return "memory"


def _widths_tuple(spec: KeySpec, widths):
    if not widths:
        return None
    return tuple(max(int(widths.get(c, 0)), 1) if st else 0 for c, st in zip(spec.by, spec.strings))


def sort_values(
    df,
    by,
    *,
    ascending=True,
    na_position="last",
    npartitions=None,
    ignore_index=False,
    divisions=False,
    strategy="auto",
    device=None,
    widths=None,
    local_directory=None,
    memory_limit="auto",
    shuffle_method=None,
    max_branch=None,
    upsample=None,
    partition_size=None,
    sort_function=None,
    sort_function_kwargs=None,
):
    """Sort a dask dataframe by ``by`` (a column label or index level name, or a list of them),
    like pandas' stable ``sort_values``: see the module docstring. Returns a lazy dask dataframe
    of ``npartitions`` partitions (default: the input's), balanced to within one row.

    Options after ``by`` are keywords, as in pandas (in dask the third positional argument would
    be ``npartitions``). ``ignore_index``: the result's index is the rows' positions, 0 to n - 1.
    ``divisions=True`` (implies ``ignore_index``): the result's divisions are known (the positions
    where its partitions start, from the exact cuts), so ``loc`` by position finds its partition;
    the cuts then run at the call (the sorted partitions are persisted, so the input is still read
    once). ``device="gpu"``: the keys are sorted on the workers' GPUs, the rows follow on the host.
    ``widths``: a width in bytes for each string column by name (all partitions' keys encoded at
    it; else each partition's own, padded where they meet). ``strategy``: ``"memory"``,
    ``"external"`` (frames bigger than memory: :func:`sort_values_external`, with
    ``local_directory`` and ``memory_limit``) or ``"auto"`` (:func:`choose_strategy`).
    ``shuffle_method``, ``max_branch``, ``upsample``, ``partition_size``: knobs of dask's own
    shuffle and quantiles, accepted so that dask calls run unchanged, with no effect (the cuts are
    exact and the partitions balanced whatever they say). ``sort_function``,
    ``sort_function_kwargs``: dask's; where either is given, each output partition (already in
    order) is passed through ``sort_function(part, by=[...], ascending=..., na_position=...,
    ignore_index=..., **sort_function_kwargs)``, as dask sorts its partitions (default: pandas'
    ``sort_values``, stable unless the kwargs say otherwise)."""
    if sort_function is not None or sort_function_kwargs is not None:
        out = sort_values(
            df, by, ascending=ascending, na_position=na_position, npartitions=npartitions, ignore_index=ignore_index,
            divisions=divisions, strategy=strategy, device=device, widths=widths, local_directory=local_directory,
            memory_limit=memory_limit,
        )  # fmt: skip
        kwargs = dict(by=by if isinstance(by, list) else [by], ascending=ascending, na_position=na_position, ignore_index=ignore_index)
        if sort_function is None:
            sort_function, kwargs["kind"] = _sort_part, "stable"
        kwargs.update(sort_function_kwargs or {})
        return out.map_partitions(sort_function, **kwargs, meta=out._meta, align_dataframes=False)
    spec = _spec(df, by, ascending, na_position, strategy, device)
    parts = _partitions(df, npartitions)
    if strategy == "auto":
        strategy = choose_strategy(df.npartitions, parts, divisions, device)
    if strategy == "external":
        if divisions:
            raise ValueError("divisions=True needs the in-memory sort (strategy='memory')")
        return sort_values_external(
            df,
            list(spec.by),
            ascending=list(spec.ascending),
            na_position=na_position,
            widths=widths,
            npartitions=parts,
            ignore_index=ignore_index,
            local_directory=local_directory,
            memory_limit=memory_limit,
            device=device,
        )
    g = Graph(df, spec, parts, ignore_index or divisions, device, _widths_tuple(spec, widths))
    if divisions:
        rows, p = g.persist_cuts()
        sizes = [n for n in p.out_sizes if n] or [0]  # balanced: any empty outputs come last
        groups = [(a, min(b, len(sizes))) for a, b in g.groups if a < len(sizes)]
        return g.collection(positional_divisions(sizes), (rows[: len(groups) + 1], tuple(sizes), groups))
    return g.collection()


def _check_categories(df, by) -> None:
    """Categorical sort columns sort by their codes, so every partition must share one list of
    categories, known up front (dask's ``.cat.as_known()``)."""
    from dask.dataframe.utils import has_known_categories

    for c in by:
        if c in df.columns and isinstance(df._meta[c].dtype, pd.CategoricalDtype) and not has_known_categories(df[c]):
            raise UnsupportedValue(f"column {c!r}: its categories are not known; sort by df[{c!r}].cat.as_known() (dask) instead")


def sort_series(
    s, *, ascending=True, na_position="last", npartitions=None, ignore_index=False, divisions=False, strategy="auto", device=None, **options
):
    """A dask series sorted by its values, as pandas' ``Series.sort_values(kind="stable")``: index
    labels kept (or positions with ``ignore_index``; known positional divisions with
    ``divisions=True``), the name kept. The other options are :func:`sort_values`'s."""
    if not isinstance(getattr(s, "_meta", None), pd.Series):
        raise TypeError(
            f"sort_series sorts dask Series; this is a {type(s).__name__}"
            + (" (sort_values sorts frames)" if hasattr(s, "columns") else "")
        )
    label = s.name if s.name is not None else "values"  # errors name the series by its name
    out = sort_values(
        s.to_frame(name=label),
        [label],
        ascending=ascending,
        na_position=na_position,
        npartitions=npartitions,
        ignore_index=ignore_index,
        divisions=divisions,
        strategy=strategy,
        device=device,
        **options,
    )
    return out[label].rename(s.name)


def set_index(
    df,
    other,
    drop=True,
    sorted=False,
    npartitions=None,
    divisions=None,
    sort=True,
    *,
    append=False,
    device=None,
    shuffle_method=None,
    max_branch=None,
    upsample=None,
    partition_size=None,
):
    """``df`` indexed by its column ``other`` (or by its index, where ``other`` names it; or by a dask
    Series aligned with ``df``, or ``df.index``, as pandas takes one), sorted by it (stably), with
    **known divisions from the exact cuts**: the cuts of partitions balanced by
    rows, each moved to the nearer end of the run of equal values it falls in, as dask's divisions
    need (a value lies in one partition only: ``loc`` looks in one); so the partitions are balanced
    to within one row, less what runs of equal values force (dask's own ``set_index`` cuts at
    approximate quantiles instead). Each division is the first index value of its partition (the
    last: the largest value); partitions that would be empty are left out, and a frame of no rows
    has unknown divisions. A categorical is sorted in its categories' order (ordered or not), its
    divisions in that order too, as dask's. Missing values in ``other`` go last, all in the last
    partition, the divisions made of the values (as dask's); a key of missing values only is
    refused. The cuts run at the call, with the sorted partitions persisted so the
    input is read once; the rest is lazy.

    dask's arguments, with dask's meaning: ``divisions`` (sorted; ``npartitions`` is then
    ``len(divisions) - 1``): the result is cut exactly at the user's boundaries, partition ``i``
    holding the values in ``[divisions[i], divisions[i + 1])`` (the last one its upper bound too;
    values below the first boundary go to the first partition, above the last to the last: dask
    puts those below in its last partition), empty partitions kept. ``sorted=True`` (the column is
    already sorted across the partitions: nothing is moved), ``sort=False`` and ``append=True``
    are dask's own (no sort of dsort's is involved). ``shuffle_method``, ``max_branch``,
    ``upsample``, ``partition_size``: dask's own machinery's knobs, accepted with no effect (as in
    :func:`sort_values`)."""
    if isinstance(other, list) and len(other) == 1:
        other = other[0]
    _one_key(other)
    if divisions is not None:
        from dask.dataframe.core import check_divisions  # dask's refusals, dask's words

        check_divisions(divisions)
        if len(divisions) < 2:
            raise ValueError("New division must hold at least two values: the bounds of one partition")
    if (sorted or not sort) and npartitions is not None:
        raise ValueError("Specifying npartitions with sort=False or sorted=True is not supported. Call `repartition` afterwards.")
    if sorted or not sort or append:  # dask's own: the data is not sorted (or indexed by several levels)
        return dask_method(type(df), "set_index")(df, other, drop=drop, sorted=sorted, divisions=divisions, sort=sort, append=append)
    if hasattr(other, "dask") and hasattr(other, "npartitions"):  # a dask Series or Index, as dask and pandas take
        return _set_index_by(df, other, drop=drop, npartitions=npartitions, divisions=divisions, device=device)
    if other in df.columns and df.index.name == other:  # the column is the key, as in pandas and dask
        df = df.rename_axis(None)
    spec = _spec(df, other, True, "last", "memory", device)
    dtype = column(df._meta, other).dtype
    if divisions is not None:  # the user's boundaries as the key's values (what the cuts and the divisions use)
        divisions = _as_key_values(divisions, dtype, other)
    missing, rows, presorted = _key_pass(df, other, dtype)
    if missing and missing == rows:
        raise UnsupportedValue(  # dask's own set_index takes them (the switch hands such calls to it)
            f"column {other!r} holds only missing values; divisions cannot be made of them"
        )
    if presorted is not None and divisions is None and _partitions(df, npartitions) == df.npartitions:
        # in order already: each partition indexed where it is, nothing moved (as dask does)
        return dask_method(type(df), "set_index")(df, other, drop=drop, sorted=True, divisions=presorted)
    outputs = len(divisions) - 1 if divisions is not None else _partitions(df, npartitions)
    g = Graph(df, spec, outputs, False, device, None, every_output=True)
    cut, _ = g.persist_cuts()
    index = other not in df.columns  # the index itself: sorted, and kept as the index
    meta = df._meta if index else _set_index(df._meta, other, drop)
    runs = len(g.sorted)
    if divisions is not None or int(cut[-1].sum()) == 0:
        if divisions is not None:  # the user's boundaries, exactly
            below = g.run("below", _below, spec, divisions[1:-1])
            cut = np.array([[0] * runs, *zip(*[b for b, _ in below]), [n for _, n in below]], np.int64).reshape(-1, runs)
            out = g.collection(tuple(_python(d) for d in divisions.tolist()), grouped_cuts(cut, runs))
        else:  # no rows
            out = g.collection(None, grouped_cuts(nonempty_cuts(cut), runs))
        return out if index else out.map_partitions(_set_index, other, drop, meta=meta, align_dataframes=False)
    cut = _before_missing(cut, rows - missing)
    firsts = _smallest(g.run("firsts", _firsts, spec, cut))
    ranks = g.run("ranks", _ranks, spec, [f[0] for f in firsts[1:-1]])
    cut = _before_missing(_snap(cut, ranks), rows - missing)
    firsts = _smallest(g.run("divisions", _firsts, spec, cut))
    out = g.collection(tuple(_python(f[1]) for f in firsts), grouped_cuts(cut, runs))
    return out if index else out.map_partitions(_set_index, other, drop, meta=meta, align_dataframes=False)


def _as_key_values(divisions, dtype, other) -> pd.Series:
    """The user's divisions as values of the key's dtype (``"2021-01-02"`` on a datetime key is
    that day's timestamp); ones that are not: refused (dask's own set_index may take them)."""
    try:
        values = pd.Series(list(divisions), dtype=dtype)
    except (TypeError, ValueError) as e:
        raise UnsupportedValue(f"divisions {list(divisions)!r} are not values of column {other!r} ({dtype}): {e}") from None
    if values.isna().any() or not values.is_monotonic_increasing:
        raise UnsupportedValue(f"divisions {list(divisions)!r} are not increasing values of column {other!r} ({dtype})")
    return values


def _before_missing(cut, present: int):
    """Cut rows with the missing values (sorted last) all in the last output, as dask's set_index
    puts them: every cut between outputs at or past the ``present`` values dropped."""
    keep = [0] + [t for t in range(1, cut.shape[0] - 1) if int(cut[t].sum()) < present] + [cut.shape[0] - 1]
    return cut[keep] if len(keep) < cut.shape[0] else cut


def _key_pass(df, other, dtype):
    """One pass over the key alone, before any sort: ``(missing values, rows, divisions)``, the divisions
    found where the partitions are in order already (each sorted, none empty, nothing missing, each
    one's last value below the next one's first: a value in one partition only), else None.
    Categoricals are always sorted (their order is their categories', not their values')."""
    import dask

    key = df[other] if other in df.columns else df.index
    parts = dask.compute(*[dask.delayed(_ends)(part) for part in key.to_delayed()])
    missing, rows = sum(m for m, _, _ in parts), sum(n for _, n, _ in parts)
    ends = [e for _, _, e in parts]
    if missing or isinstance(dtype, pd.CategoricalDtype) or any(e is None for e in ends):
        return missing, rows, None
    try:
        if any(a[1] >= b[0] for a, b in zip(ends[:-1], ends[1:])):
            return missing, rows, None
    except TypeError:  # values that do not compare (an object column of several types): sorted by dsort's rules
        return missing, rows, None
    return missing, rows, [_python(first) for first, _ in ends] + [_python(ends[-1][1])]


def _ends(s):
    """``(missing values, rows, (first, last))`` of a partition's key; ``(first, last)`` None unless
    it is sorted, has rows and nothing missing."""
    missing = int(s.isna().sum())
    if not len(s) or missing or not s.is_monotonic_increasing:
        return missing, len(s), None
    return 0, len(s), (s[0], s[-1]) if isinstance(s, pd.Index) else (s.iloc[0], s.iloc[-1])


def dask_method(cls, name):
    """dask's own ``cls.name``, also while dsort's stands in its place (:mod:`dsort.collections.switch`)."""
    return getattr(cls, f"_dsort_dask_{name}", None) or getattr(cls, name)


def _one_key(other) -> None:
    """dask's refusals of a key that is not one column, with its exceptions and messages."""
    import dask.dataframe as dd

    if isinstance(other, list):
        if any(isinstance(c, (dd.DataFrame, dd.Series, dd.Index)) for c in other):
            raise TypeError("List[FrameBase] not supported by set_index")
        raise NotImplementedError(
            f"Dask dataframe does not yet support multi-indexes.\nYou tried to index with this index: {other}\n"
            "Indexes must be single columns only."
        )
    if isinstance(other, dd.DataFrame):
        raise NotImplementedError(
            "Dask dataframe does not yet support multi-indexes.\n"
            f"You tried to index with a frame with these columns: {list(other.columns)}\nIndexes must be single columns only."
        )


KEY = "__dsort_index__"  # the column a Series key travels in while the frame is sorted by it


def _set_index_by(df, key, **options):
    """:func:`set_index` by a dask Series or Index aligned with ``df`` (an expression of its columns,
    or its own index), as pandas and dask take one: the frame's columns all stay, and the index takes
    the key's name."""
    series = key.to_series() if _is_index(key) else key
    options["drop"] = True  # the key's temporary column (a Series key is no column of the frame: drop has no say)
    out = set_index(df.assign(**{KEY: series}), KEY, **options)
    return out.map_partitions(_rename_index, key.name, meta=out._meta.rename_axis(key.name), align_dataframes=False)


def _is_index(x) -> bool:
    import dask.dataframe as dd

    return isinstance(x, dd.Index)


def _rename_index(part, name):
    return part.rename_axis(name)


def _python(value):
    """A division as dask gives them: a Python value where NumPy's scalar stands for one."""
    return value.item() if isinstance(value, np.generic) else value


def _sort_part(part, **kwargs):
    return part.sort_values(**kwargs)


def _set_index(part, col, drop):
    return part.set_index(col, drop=drop)


def _firsts(part, plan, q, spec, cut) -> list:
    """For every output of the cut rows ``cut``: ``(key bytes, value)`` of this part's first row
    in it, or None where it has none; then those of its last row with a value (not missing)."""
    col = column(part.frame, spec.by[0])
    out = []
    for t in range(cut.shape[0] - 1):
        a, b = int(cut[t, q]), int(cut[t + 1, q])
        out.append(None if b <= a else (F.key_bytes(F.part_keys(spec, part, plan, a, a + 1)), col.iloc[a]))
    n = len(part.frame) - int(col.isna().sum())  # its last value: missing ones sort after it
    out.append(None if n == 0 else (F.key_bytes(F.part_keys(spec, part, plan, n - 1, n)), col.iloc[n - 1]))
    return out


def _smallest(per_part) -> list:
    """Per output: the smallest ``(key, value)`` over the parts (its first row); last: the largest
    (the result's last row). An output no part has rows in takes the next one's (it is empty)."""
    columns = list(zip(*per_part))
    out = [min((x for x in c if x is not None), default=None, key=lambda x: x[0]) for c in columns[:-1]]
    out.append(max((x for x in columns[-1] if x is not None), default=None, key=lambda x: x[0]))
    for t in range(len(out) - 2, -1, -1):
        out[t] = out[t] if out[t] is not None else out[t + 1]
    return [x if x is not None else (b"", None) for x in out]


def _ranks(part, plan, q, spec, keys):
    """Rows of this part before each of ``keys`` (:func:`dsort.core.frame_chunk.key_bytes`), and up to and including it."""
    from ..engine import numpy_engine

    mine = F.part_keys(spec, part, plan)
    probes = F.from_key_bytes(keys, mine) if keys else mine[:0]
    return numpy_engine.searchsorted(mine, probes, "left"), numpy_engine.searchsorted(mine, probes, "right")


def _below(part, plan, q, spec, values):
    """``(rows of this part before each of values, its rows)``: ``values`` a pandas Series of the
    key's dtype, encoded as the part's keys are (strings at the wider of theirs and the part's)."""
    from ..core.frame_keys import widen
    from ..engine import numpy_engine

    frame = pd.DataFrame({spec.by[0]: values})
    if part.keys.ndim == 1:  # keyed by words
        mine, probes = part.keys, spec.words(frame)
    else:
        own, have = spec.encode(frame)
        want = tuple(max(a, b) for a, b in zip(have, plan.widths))
        mine, probes = F.part_keys(spec, part, plan), widen(spec, own, have, want)
        mine = widen(spec, mine, plan.widths, want)
    return numpy_engine.searchsorted(mine, probes, "left").tolist(), len(part.frame)


def _snap(cut, ranks):
    """Cut rows moved to the nearer end of the run of equal keys each falls in (all parts alike),
    outputs left empty by that dropped."""
    cut = cut.copy()
    for t in range(1, cut.shape[0] - 1):
        left = np.array([r[0][t - 1] for r in ranks], np.int64)
        right = np.array([r[1][t - 1] for r in ranks], np.int64)
        target = int(cut[t].sum())
        cut[t] = left if target - int(left.sum()) <= int(right.sum()) - target else right
    return nonempty_cuts(cut)


def sort_values_external(
    df,
    by,
    *,
    ascending=True,
    na_position="last",
    widths=None,
    npartitions=None,
    ignore_index=False,
    local_directory=None,
    memory_limit="auto",
    device=None,
):
    """:func:`sort_values` in memory bounded by the partition size, not the frame's: each partition
    is sorted by its encoded keys into a run (its rows pickled in blocks in a file under
    ``local_directory``, its keys in the run store, in memory up to ``memory_limit``), the exact cuts
    of every output partition come from the keys alone, and each output partition reads its slices
    of the runs and merges them (:mod:`dsort.collections.external`), so
    ``sort_values_external(df, ...).to_parquet(path)`` never holds the frame. ``npartitions``
    output partitions (default: the input's), balanced to within one row; the runs are removed once
    every output partition is made. Lazy, as the in-memory sort."""
    from dask.base import tokenize

    from . import external
    from ..core import runs as R
    from .array import run_memory

    from . import scale

    spec = _spec(df, by, ascending, na_position, "external", device)
    budget = run_memory(memory_limit)
    widths = _widths_tuple(spec, widths)
    partitions, spacing = _partitions(df, npartitions), 256
    runs_at = scale.frame_runs(df.npartitions, external=True)
    groups = scale.merge_groups(partitions, len(runs_at))
    starts = tuple(a for a, _ in groups)
    tok = tokenize(df, spec, widths, npartitions, ignore_index, device, "external", runs_at, starts)
    codec = RowCodec.of(df._meta)
    if codec is not None:  # fixed-width columns: rows in the run store, no pickling
        key_bytes = spec.width((0,) * len(spec.by))
        layout = R.Layout(key_bytes + codec.row_bytes, key_bytes)
        store = external.store_config(tok, layout.row_bytes, local_directory, budget, gpu=device == "gpu")
        job = external.FixedFrameJob(
            layout, spec, codec, partitions, spacing, store, ignore_index=ignore_index, gpu=device == "gpu", starts=starts
        )
        run, cuts, merge, extra = external.fixed_run, external.fixed_cuts, external.fixed_merge, ()
    else:
        store = external.store_config(tok, spec.width(widths or (1,) * len(spec.by)), local_directory, budget)
        job = external.FrameJob(spec, widths, partitions, spacing, store, ignore_index=ignore_index, device=device, starts=starts)
        run, cuts, merge, extra = external.frame_run, external.frame_cuts, external.frame_merge, (df._meta,)
    dsk = {}
    inputs = df.__dask_keys__()
    runs = [(T.name(T.RUN, tok), g) for g in range(len(runs_at))]
    for key, (a, b) in zip(runs, runs_at):
        dsk[key] = T.task(key, run, job, key[1], *[T.ref(k) for k in inputs[a:b]])
    cut = T.name(T.CUTS, tok)
    dsk[cut] = T.task(cut, cuts, job, *map(T.ref, runs))
    sizes = T.name(T.SIZES, tok)
    dsk[sizes] = T.task(sizes, external.output_sizes, job, T.ref(cut))
    merges = [(T.name(T.MERGE, tok), g) for g in range(len(groups))]
    for g, key in enumerate(merges):
        dsk[key] = T.task_beside(key, T.beside(runs, g, len(groups)), merge, job, T.ref(cut), g, *extra)
    return as_collection(df, dsk, df._meta, None, output_pieces(dsk, tok, merges, groups, T.ref(sizes)), tok)


class _FrameAccessor:
    """``ddf.dsort``: dsort's sorts as methods of a dask dataframe (registered when dask.dataframe
    and dsort are both imported)."""

    def __init__(self, df):
        self._df = df

    def sort_values(self, by, **options):
        """:func:`dsort.dataframe.sort_values` of this frame."""
        return sort_values(self._df, by, **options)

    def set_index(self, other, *args, **options):
        """:func:`dsort.dataframe.set_index` of this frame (dask's positional arguments too)."""
        return set_index(self._df, other, *args, **options)


class _SeriesAccessor:
    """``series.dsort``: :func:`sort_series` as a method of a dask series."""

    def __init__(self, s):
        self._s = s

    def sort_values(self, **options):
        """:func:`dsort.dataframe.sort_series` of this series."""
        return sort_series(self._s, **options)


def register_accessors() -> None:
    """Put ``.dsort`` on dask dataframes and series (done once dsort and dask.dataframe are both
    imported, in either order: see :mod:`dsort`)."""
    import warnings

    from dask.dataframe import extensions

    with warnings.catch_warnings():  # registering twice (a reload) only warns
        warnings.simplefilter("ignore")
        extensions.register_dataframe_accessor("dsort")(_FrameAccessor)
        extensions.register_series_accessor("dsort")(_SeriesAccessor)
