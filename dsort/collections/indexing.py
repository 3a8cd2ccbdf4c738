"""``set_index`` of a dask dataframe on dsort's sort, with dask's arguments and meaning (see
:func:`set_index`): exact divisions from the cuts, snapped to the ends of runs of equal values; the
user's divisions cut exactly; data already in order indexed where it is; missing keys last; dask's
own paths (``sorted=True``, ``sort=False``, ``append=True``) handed to dask. Public as
:func:`dsort.dataframe.set_index`."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..core import frame_chunk as F
from ..core.errors import UnsupportedValue
from ..core.frame_keys import column, type_names
from .frame_graph import Graph, grouped_cuts, nonempty_cuts
from ..core import frame_backend
from .divisions import as_key_values, incomparable
from .frame_spec import key_spec, on_gpu_frame, output_partitions, pandas_meta


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
    """``df`` indexed by a key and sorted by it (stably), with known divisions from the exact cuts.

    The cuts are those of partitions balanced by rows, each moved to the nearer end of the run of
    equal values it falls in, as dask's divisions need (a value lies in one partition only:
    ``loc`` looks in one); so the partitions are balanced to within one row, less what runs of
    equal values force (dask's own ``set_index`` cuts at approximate quantiles instead). The cuts
    run at the call, with the sorted partitions persisted so the input is read once; the rest is
    lazy.

    Parameters
    ----------
    df : dask.dataframe.DataFrame
        pandas or cudf partitions.
    other : label, dask Series or ``df.index``
        The key: a column (or the index, where it names it), or a dask Series aligned with ``df``,
        as pandas takes one. A categorical is sorted in its categories' order (ordered or not),
        its divisions in that order too, as dask's. Missing values go last, all in the last
        partition (a nullable or Arrow float's NaN, which pandas sorts after +inf and before them,
        too); a key of missing values only is refused.
    drop : bool, default True
        dask's: the key's column leaves the frame.
    sorted : bool, default False
        dask's: the key is sorted across the partitions already (nothing is moved).
    npartitions : int, optional
        Output partitions (default: the input's); ``len(divisions) - 1`` where ``divisions`` is
        given.
    divisions : sequence, optional
        Sorted boundaries: the result is cut exactly there, partition ``i`` holding the values in
        ``[divisions[i], divisions[i + 1])`` (the last one its upper bound too; values below the
        first boundary go to the first partition, above the last to the last: dask puts those
        below in its last), empty partitions kept. Divisions whose values do not compare with the
        key's (strings on an int key, ints on a string or datetime key) are refused with
        :class:`~dsort.core.errors.Incomparable` at the call, an object key's at the compute (see
        :func:`dsort.collections.divisions.check_kinds` for dask's answer to them, and why).
    sort : bool, default True
        ``False``: dask's own (no sort of dsort's is involved); so is ``append=True``.
    device : {None, "gpu"}, default None
        ``"gpu"``: the keys sorted on the workers' GPUs.
    shuffle_method, max_branch, upsample, partition_size
        dask's own machinery's knobs, accepted with no effect (as in :func:`sort_values`).

    Returns
    -------
    dask.dataframe.DataFrame
        Lazy, with known divisions: each the first index value of its partition (the last: the
        largest value). Partitions that would be empty are left out (but for given
        ``divisions``), and a frame of no rows has unknown divisions.
    """
    if isinstance(other, list) and len(other) == 1:
        other = other[0]
    _one_key(other)
    if divisions is not None:
        from dask.dataframe.core import check_divisions  # dask's refusals, dask's words

        check_divisions(divisions)
        if len(divisions) < 2:
            raise ValueError(
                "New division must hold at least two values: the bounds of one partition"
            )
    if (sorted or not sort) and npartitions is not None:
        raise ValueError(
            "Specifying npartitions with sort=False or sorted=True is not supported. Call "
            "`repartition` afterwards."
        )
    # dask's own: the data is not sorted (or indexed by several levels)
    if sorted or not sort or append:
        return dask_method(type(df), "set_index")(
            df, other, drop=drop, sorted=sorted, divisions=divisions, sort=sort, append=append
        )
    # a dask Series or Index, as dask and pandas take
    if hasattr(other, "dask") and hasattr(other, "npartitions"):
        return _set_index_by(
            df, other, drop=drop, npartitions=npartitions, divisions=divisions, device=device
        )
    # the column is the key, as in pandas and dask
    if other in df.columns and df.index.name == other:
        df = df.rename_axis(None)
    # cudf partitions: sorted on the GPUs, their key's values read through pandas
    if on_gpu_frame(df):
        device = "gpu"
    spec = key_spec(df, other, True, "last", "memory", device)
    dtype = column(pandas_meta(df), other).dtype
    # the user's boundaries as the key's values (what the cuts and the divisions use)
    if divisions is not None:
        divisions = as_key_values(divisions, dtype, other)
        return _set_index_at(df, other, drop, spec, divisions, device)
    missing, rows, presorted = _key_pass(df, other, dtype)
    if missing and missing == rows:
        # dask's own set_index takes them (the switch hands such calls to it)
        raise UnsupportedValue(
            f"column {other!r} holds only missing values (and NaN); divisions cannot be made of "
            "them"
        )
    if (
        presorted is not None
        and divisions is None
        and output_partitions(df, npartitions) == df.npartitions
    ):
        # in order already: each partition indexed where it is, nothing moved (as dask does)
        return dask_method(type(df), "set_index")(
            df, other, drop=drop, sorted=True, divisions=presorted
        )
    outputs = len(divisions) - 1 if divisions is not None else output_partitions(df, npartitions)
    g = Graph(df, spec, outputs, False, device, None, every_output=True)
    cut, _ = g.persist_cuts()
    index = other not in df.columns  # the index itself: sorted, and kept as the index
    meta = df._meta if index else _set_index(df._meta, other, drop)
    runs = len(g.sorted)
    if int(cut[-1].sum()) == 0:  # no rows
        out = g.collection(None, grouped_cuts(nonempty_cuts(cut), runs))
        return (
            out
            if index
            else out.map_partitions(_set_index, other, drop, meta=meta, align_dataframes=False)
        )
    cut = _before_missing(cut, rows - missing)
    firsts = _smallest(g.run("firsts", _firsts, spec, cut))
    ranks = g.run("ranks", _ranks, spec, [f[0] for f in firsts[1:-1]])
    cut = _before_missing(_snap(cut, ranks), rows - missing)
    firsts = _smallest(g.run("divisions", _firsts, spec, cut))
    out = g.collection(tuple(_python(f[1]) for f in firsts), grouped_cuts(cut, runs))
    return (
        out
        if index
        else out.map_partitions(_set_index, other, drop, meta=meta, align_dataframes=False)
    )


def _set_index_at(df, other, drop, spec, divisions, device):
    """:func:`set_index` at the user's ``divisions`` (the key's values): the result's divisions
    are known from them, so nothing runs now (as dask's): each sorted part's rows below every
    boundary are found by a task, and the cuts and output sizes by one more."""
    from . import scale

    outputs = len(divisions) - 1
    g = Graph(df, spec, outputs, False, device, None, every_output=True)
    runs = len(g.sorted)
    below = g.lazy("below", _below, spec, divisions)
    rows, sizes = g.lazy_one("at", _user_cuts, runs, outputs, *below)
    out = g.collection(
        tuple(_python(d) for d in divisions.tolist()),
        (rows, sizes, scale.merge_groups(outputs, runs)),
    )
    if other not in df.columns:  # the index itself: sorted, and kept as the index
        return out
    return out.map_partitions(
        _set_index, other, drop, meta=_set_index(df._meta, other, drop), align_dataframes=False
    )


def _user_cuts(runs: int, outputs: int, *below):
    """``(cut rows where the merge groups meet, every output's rows)`` of the parts' rows below
    every boundary (:func:`_below` of each)."""
    cut = np.array(
        [[0] * runs, *zip(*[b for b, _ in below]), [n for _, n in below]], np.int64
    ).reshape(-1, runs)
    rows, sizes, _ = grouped_cuts(cut, runs)
    return rows, sizes


def _before_missing(cut, present: int):
    """Cut rows with the missing values (sorted last) all in the last output, as dask's set_index
    puts them: every cut between outputs at or past the ``present`` values dropped."""
    keep = (
        [0]
        + [t for t in range(1, cut.shape[0] - 1) if int(cut[t].sum()) < present]
        + [cut.shape[0] - 1]
    )
    return cut[keep] if len(keep) < cut.shape[0] else cut


def _key_pass(df, other, dtype):
    """One pass over the key alone, before any sort: ``(missing values, rows, divisions)``, the
    divisions found where the partitions are in order already (each sorted, none empty, nothing
    missing, each one's last value below the next one's first: a value in one partition only), else
    None. Categoricals are always sorted (their order is their categories', not their values')."""
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
    # values that do not compare (an object column of several types): the sort refuses them
    except TypeError:
        return missing, rows, None
    return missing, rows, [_python(first) for first, _ in ends] + [_python(ends[-1][1])]


def _ends(s):
    """``(missing values, rows, (first, last))`` of a partition's key; ``(first, last)`` None unless
    it is sorted, has rows and nothing missing (a cudf key's, read as pandas)."""
    s = frame_backend.of(s).to_pandas(s)
    missing = _undivided(s)
    if not len(s) or missing or not s.is_monotonic_increasing:
        return missing, len(s), None
    return 0, len(s), (s[0], s[-1]) if isinstance(s, pd.Index) else (s.iloc[0], s.iloc[-1])


def _undivided(s) -> int:
    """Values of a key (a Series or Index) that no division is made of, all sorted last: the missing
    ones, and the NaN of a nullable or Arrow float, a value to pandas (after +inf, before the
    missing ones) that equals nothing, so no ``loc`` finds it by divisions."""
    gone = np.asarray(s.isna(), dtype=bool)
    if pd.api.types.is_float_dtype(s.dtype) and not isinstance(s.dtype, np.dtype):
        gone = gone | np.isnan(s.to_numpy(dtype=np.float64, na_value=np.nan))
    return int(gone.sum())


def dask_method(cls, name):
    """dask's own ``cls.name``, also while dsort's stands in its place
    (:mod:`dsort.collections.switch`)."""
    return getattr(cls, f"_dsort_dask_{name}", None) or getattr(cls, name)


def _one_key(other) -> None:
    """dask's refusals of a key that is not one column, with its exceptions and messages."""
    import dask.dataframe as dd

    if isinstance(other, list):
        if any(isinstance(c, (dd.DataFrame, dd.Series, dd.Index)) for c in other):
            raise TypeError("List[FrameBase] not supported by set_index")
        raise NotImplementedError(
            "Dask dataframe does not yet support multi-indexes.\nYou tried to index with this "
            f"index: {other}\n"
            "Indexes must be single columns only."
        )
    if isinstance(other, dd.DataFrame):
        raise NotImplementedError(
            "Dask dataframe does not yet support multi-indexes.\n"
            f"You tried to index with a frame with these columns: {list(other.columns)}\nIndexes "
            "must be single columns only."
        )


KEY = "__dsort_index__"  # the column a Series key travels in while the frame is sorted by it


def _set_index_by(df, key, **options):
    """:func:`set_index` by a dask Series or Index aligned with ``df`` (an expression of its
    columns, or its own index), as pandas and dask take one: the frame's columns all stay, and the
    index takes the key's name."""
    series = key.to_series() if _is_index(key) else key
    if _is_index(key) and series.npartitions == df.npartitions and series.divisions != df.divisions:
        # an expression of the index that moves its values (index + a day, index.floor("D")): dask
        # gives it other divisions (and to_series indexes it by its own values); the key's values
        # join the frame partition by partition, row by row, as pandas takes an Index
        meta = df._meta.assign(**{KEY: series._meta.to_numpy()})
        keyed = df.map_partitions(
            _with_key, series, meta=meta, align_dataframes=False, clear_divisions=True
        )
    else:
        keyed = df.assign(**{KEY: series})
    # the key's temporary column (a Series key is no column of the frame: drop has no say)
    options["drop"] = True
    out = set_index(keyed, KEY, **options)
    return out.map_partitions(
        _rename_index, key.name, meta=out._meta.rename_axis(key.name), align_dataframes=False
    )


def _with_key(part, key):
    return part.assign(**{KEY: key.to_numpy()})


def _is_index(x) -> bool:
    import dask.dataframe as dd

    return isinstance(x, dd.Index)


def _rename_index(part, name):
    return part.rename_axis(name)


def _python(value):
    """A division as dask gives them: a Python value where NumPy's scalar stands for one."""
    return value.item() if isinstance(value, np.generic) else value


def _set_index(part, col, drop):
    return part.set_index(col, drop=drop)


def _firsts(part, plan, q, spec, cut) -> list:
    """For every output of the cut rows ``cut``: ``(key bytes, value)`` of this part's first row
    in it, or None where it has none; then those of its last row with a value (not missing)."""
    frame = part.frame
    # its key's values as pandas (pandas' scalars, missing values as pandas counts them)
    frame = frame_backend.of(frame).key_frame(frame, spec.by)
    col = column(frame, spec.by[0])
    out = []
    for t in range(cut.shape[0] - 1):
        a, b = int(cut[t, q]), int(cut[t + 1, q])
        out.append(
            None if b <= a else (F.key_bytes(F.part_keys(spec, part, plan, a, a + 1)), col.iloc[a])
        )
    n = len(frame) - _undivided(col)  # its last value: missing ones (and NaN) sort after it
    out.append(
        None if n == 0 else (F.key_bytes(F.part_keys(spec, part, plan, n - 1, n)), col.iloc[n - 1])
    )
    return out


def _smallest(per_part) -> list:
    """Per output: the smallest ``(key, value)`` over the parts (its first row); last: the largest
    (the result's last row). An output no part has rows in takes the next one's (it is empty)."""
    columns = list(zip(*per_part))
    out = [
        min((x for x in c if x is not None), default=None, key=lambda x: x[0]) for c in columns[:-1]
    ]
    out.append(max((x for x in columns[-1] if x is not None), default=None, key=lambda x: x[0]))
    for t in range(len(out) - 2, -1, -1):
        out[t] = out[t] if out[t] is not None else out[t + 1]
    return [x if x is not None else (b"", None) for x in out]


def _ranks(part, plan, q, spec, keys):
    """Rows of this part before each of ``keys`` (:func:`dsort.core.frame_chunk.key_bytes`), and up
    to and including it."""
    from ..engine import numpy_engine

    mine = F.part_keys(spec, part, plan)
    probes = F.from_key_bytes(keys, mine) if keys else mine[:0]
    return numpy_engine.searchsorted(mine, probes, "left"), numpy_engine.searchsorted(
        mine, probes, "right"
    )


def _below(part, plan, q, spec, divisions):
    """``(rows of this part before each of the inner divisions, its rows)``: ``divisions`` (all of
    them) a pandas Series of the key's dtype, encoded as the part's keys are (strings at the wider
    of theirs and the part's). Where an object key's values (this part's kinds) do not compare with
    the divisions' (strings and numbers; the outer two count: they are the result's divisions
    too), refused with :class:`Incomparable`: this is the first task that meets both."""
    from ..core.frame_keys import comparable, widen
    from ..engine import numpy_engine

    frame = pd.DataFrame({spec.by[0]: divisions})
    if part.keys.ndim == 1:  # keyed by words
        mine, probes = part.keys, spec.words(frame)[1:-1]
    else:
        own, have, kinds = spec.encode_part(frame)
        theirs = part.kinds[0] if part.kinds else ()
        # an object key: its values' kinds are known only now
        if not comparable([*theirs, *kinds[0]]):
            raise incomparable(
                spec.by[0], divisions.tolist(), kinds[0], f"values of {type_names(theirs)}"
            )
        want = tuple(max(a, b) for a, b in zip(have, plan.widths))
        mine, probes = F.part_keys(spec, part, plan), widen(spec, own[1:-1], have, want)
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
