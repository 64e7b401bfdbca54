"""Rows numbered by their values, for grouping with numpy: the tuple of a row's values in several columns
(:func:`tuple_codes`: calls, features, unmatched reasons), a text column of a few distinct values
(:func:`few_codes`: a call's pass) and a row's io (:func:`io_codes`)."""
from __future__ import annotations

IOS = ("input", "output", "parameter")        # the ios matching reads of a call (any other io: code 3)
IO_CODE = {io: code for code, io in enumerate(IOS)}


def tuple_codes(columns):
    """One code per row for the tuple of its values in ``columns``, numbered in order of first appearance
    (as ``dict.setdefault`` would number the tuples; None is a value of its own). An integer column holding one
    value (one rank, one step) is skipped: it tells no rows apart."""
    import numpy as np
    import pandas as pd

    codes = None
    for values in columns:
        if not (isinstance(values, np.ndarray) and values.dtype.kind in "iu"):
            values = np.asarray(values, dtype=object)      # integers stay an integer array: the same numbering
        elif len(values) and values.min() == values.max():  # one value: code 0 for every row changes nothing
            codes = np.zeros(len(values), dtype=np.int64) if codes is None else codes
            continue
        found, uniques = pd.factorize(values, use_na_sentinel=False)
        codes = found if codes is None else pd.factorize(codes * len(uniques) + found)[0]
    return np.asarray(codes, dtype=np.int64)


def few_codes(texts, limit: int = 8):
    """``pd.factorize``'s codes of an object array of str (each value numbered in order of first appearance), by
    one comparison of the whole array per distinct value instead of a hash of each row; None past ``limit``
    distinct values (the caller factorizes)."""
    import numpy as np

    codes = np.empty(len(texts), dtype=np.int64)
    left = np.ones(len(texts), dtype=bool)
    first = 0
    for code in range(limit):
        if first >= len(texts):
            return codes
        same = texts == texts[first]                   # str only: equality is exact, no row of an earlier code
        codes[same] = code
        left &= ~same
        first = int(left.argmax()) if left.any() else len(texts)
    return codes if not left.any() else None


def io_codes(ios):
    """Each row's io (an object array) as its place in IOS, 3 for any other value (None included)."""
    import numpy as np

    codes = np.full(len(ios), 3, dtype=np.int8)
    for code, io in enumerate(IOS):
        codes[ios == io] = code
    return codes
