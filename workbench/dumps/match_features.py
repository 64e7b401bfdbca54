"""Every call's alignment features (:class:`.match_align.Feature`) as numbers, for all calls of both sides at once.

A feature is (operator class, pass, element counts of the inputs then the outputs in slot order, l2norm of the first
output row). The aligner only asks which features are equal (:mod:`.match_align_native`), so each call gets codes
numbered over both sides together: its kind (class, pass), its key (kind, element counts) and its last element count
(or none), beside its level as a double. They are made from whole columns (the rows of every call's inputs and
outputs in one sort, the counts numbered by a hash checked against the counts themselves), not a :class:`.Feature`
per call per module group. ``tests/test_compare_match_features.py`` holds them to the :class:`.Feature` of each call,
and the pairs to :func:`.match_align.align` of those.
"""
from __future__ import annotations

import math

from .match_align_native import aligned_numbers
from .match_calls import Call, CallIndex, Rows, call_numbers, known

HASH_BASE = 1_000_003          # of the polynomial hash of a call's element counts (any base: the codes are checked)


class CallFeatures:
    """The features of both sides' calls, made on first use (:meth:`aligned`)."""

    def __init__(self, rows_a: Rows, rows_b: Rows, ops):
        self._rows = (rows_a, rows_b)
        self._ops = ops
        self._codes = None          # (kind, key, last, level) per side, indexed by call number

    def aligned(self, group_a: list[Call], group_b: list[Call]) -> list[tuple[int, int]]:
        """:func:`.match_align_native.aligned` of the two groups' features."""
        return self.aligned_at(call_numbers(group_a), call_numbers(group_b))

    def aligned_at(self, at_a, at_b) -> list[tuple[int, int]]:
        """:meth:`aligned` of the calls numbered ``at_a`` and ``at_b`` (int64 arrays) in their sides' CallIndex."""
        import numpy as np

        if self._codes is None:
            self._codes = _side_codes(*self._rows, self._ops)
            # the codes' ranges over both sides: the aligner clears 2 * keys counts per group (~10 us at ~5k keys),
            # less than numbering each group's codes again
            self._sizes = tuple(int(max(a.max(initial=-1), b.max(initial=-1))) + 1
                                for a, b in zip(*(codes[:2] for codes in self._codes), strict=True))
        (codes_a, codes_b), n, m = self._codes, len(at_a), len(at_b)
        kind, key, last, level = (np.concatenate([a[at_a], b[at_b]]) for a, b in zip(codes_a, codes_b, strict=True))
        return aligned_numbers(n, m, kind, key, last, level, *self._sizes)


def _side_codes(rows_a: Rows, rows_b: Rows, ops) -> tuple:
    """((kind, key, last, level) arrays of A's calls, the same of B's), the codes numbered over both sides."""
    import numpy as np

    from .match_codes import tuple_codes
    from .match_columns import object_array

    index_a, index_b = rows_a.derived["calls"], rows_b.derived["calls"]
    classes = _text_codes(index_a.ops, index_b.ops, ops.op_class)
    passes = _text_codes(index_a.passes, index_b.passes, None)
    as_tuples = any(_feature_columns(rows)[0].dtype == object for rows in (rows_a, rows_b))
    parts = [_counts(rows, as_tuples) for rows in (rows_a, rows_b)]
    sizes = len(index_a.ops)
    kind = tuple_codes((classes, passes))
    if as_tuples:                                                        # counts beyond int64: their tuples
        key = tuple_codes((kind, object_array([*parts[0][0], *parts[1][0]])))
        last = tuple_codes((object_array([*parts[0][1], *parts[1][1]]),))
    else:
        values, lengths = (np.concatenate([part[k] for part in parts]) for k in range(2))
        owner = np.concatenate([parts[0][2], parts[1][2] + sizes])            # B's calls after A's
        key = _sequence_codes(kind, values, lengths, owner)
        last = tuple_codes((np.concatenate([part[3] for part in parts]), np.concatenate([part[4] for part in parts])))
    levels = np.concatenate([part[-1] for part in parts])
    return tuple((kind[s], key[s], last[s], levels[s]) for s in (slice(0, sizes), slice(sizes, None)))


def _text_codes(texts_a: list, texts_b: list, transform):
    """Codes of both lists' texts (``transform`` of them when given), equal exactly where the values are: each list
    factorized alone, the few distinct values numbered together."""
    import numpy as np
    import pandas as pd

    from .match_columns import object_array

    found = [_factorized(object_array(texts)) for texts in (texts_a, texts_b)]
    distinct = [*found[0][1], *found[1][1]]
    if transform is not None:
        distinct = [transform(text) for text in distinct]
    joint = pd.factorize(object_array(distinct), use_na_sentinel=False)[0]
    offset = len(found[0][1])
    return np.concatenate([joint[:offset][found[0][0]], joint[offset:][found[1][0]]]).astype(np.int64)


def _factorized(values) -> tuple:
    """``pd.factorize(values, use_na_sentinel=False)``: without the missing-value pass it makes first when no value is
    missing (ops and passes are str), which is what its sentinel shows."""
    import pandas as pd

    codes, uniques = pd.factorize(values)
    if len(codes) and codes.min() < 0:
        return pd.factorize(values, use_na_sentinel=False)
    return codes, uniques


def _sequence_codes(kind, values, lengths, owner):
    """Codes of (kind, the sequence of ``values`` of each call): ``owner`` gives each value's call (values grouped
    by call, in order), ``lengths`` each call's count. Numbered by (kind, length, a 64-bit polynomial hash), then
    every call's values compared with those of the first call of its code: equal throughout, so the codes are exact;
    a collision (never seen) numbers the sequences as bytes instead."""
    import numpy as np

    from .match_codes import tuple_codes
    from .match_columns import object_array

    ends = np.cumsum(lengths)
    starts = ends - lengths
    place = np.arange(len(values), dtype=np.int64) - starts[owner]
    terms = values.astype(np.uint64) * _powers(int(place.max(initial=0)) + 1)[place]
    sums = np.concatenate([np.zeros(1, dtype=np.uint64), np.cumsum(terms, dtype=np.uint64)])
    hashes = (sums[ends] - sums[starts]).view(np.int64)
    key = tuple_codes((kind, lengths, hashes))
    first = np.full(int(key.max(initial=-1)) + 1, len(key), dtype=np.int64)
    np.minimum.at(first, key, np.arange(len(key), dtype=np.int64))
    model = first[key]                                     # each call's first call of the same code
    if np.array_equal(values, values[starts[model][owner] + place]):
        return key
    buffer = values.tobytes()
    sequences = [buffer[8 * s:8 * e] for s, e in zip(starts.tolist(), ends.tolist(), strict=True)]
    return tuple_codes((kind, object_array(sequences)))


def _powers(count: int):
    """HASH_BASE ** k modulo 2 ** 64 for k < ``count`` (uint64): what ``np.power`` gives each place, by one running
    product over the few places instead of a power per value."""
    import numpy as np

    factors = np.full(count, HASH_BASE, dtype=np.uint64)
    factors[0] = 1
    return np.cumprod(factors, dtype=np.uint64)          # wraps modulo 2 ** 64 as np.power's products do


def _counts(rows: Rows, as_tuples: bool) -> tuple:
    """One side's calls: (their inputs' then outputs' element counts in slot order, each call's number of them, the
    call of each count, whether it has a last count, the last count, the level); the counts as one int64 array, or
    as a list of tuples with ``as_tuples`` (a count beyond int64 on either side)."""
    import numpy as np

    index: CallIndex = rows.derived["calls"]
    count = len(index.ops)
    numel, level = _feature_columns(rows)
    ranks = index.io_rank
    chosen = np.flatnonzero(ranks < 2)                    # inputs then outputs, each in slot order (ties: rows)
    owner = index.call_of[chosen]
    order = np.lexsort((chosen, index.slots[chosen], ranks[chosen], owner))
    chosen, owner = chosen[order], owner[order]
    lengths = np.bincount(owner, minlength=count).astype(np.int64)
    values = numel[chosen]
    outputs = np.flatnonzero(ranks == 1)
    first = np.full(count, len(level), dtype=np.int64)
    np.minimum.at(first, index.call_of[outputs], outputs)
    levels = np.append(level, math.nan)[first]            # nan where a call has no output
    if as_tuples:
        items, ends = values.tolist(), np.cumsum(lengths).tolist()
        counts = [tuple(items[e - n:e]) for e, n in zip(ends, lengths.tolist(), strict=True)]
        return counts, [c[-1:] for c in counts], levels
    has = lengths > 0
    last = np.where(has, values[np.maximum(np.cumsum(lengths) - 1, 0)] if len(values) else 0, 0)
    return values, lengths, owner, has, last, levels


def _feature_columns(rows: Rows) -> tuple:
    """Per row, once per table: the element count (-1 when unknown; an int64 array, of objects for counts beyond
    int64) and the l2norm as a float64 array (nan when unknown), the values a :class:`.Feature` holds."""
    import numpy as np

    found = rows.derived.get("feature")
    if found is None:
        numel, level = rows.table["numel"], rows.table["l2norm"]
        if str(numel.dtype) in ("Int64", "int64"):
            counts = numel.to_numpy(dtype="int64", na_value=-1)
        else:
            counts = [int(n) if known(n) else -1 for n in rows["numel"]]
            try:
                counts = np.asarray(counts, dtype=np.int64)
            except OverflowError:
                counts = np.asarray(counts, dtype=object)
        levels = (level.to_numpy(dtype=np.float64) if str(level.dtype) == "float64"
                  else np.asarray([float(v) if known(v) else math.nan for v in rows["l2norm"]], dtype=np.float64))
        found = rows.derived["feature"] = (counts, levels)
    return found
