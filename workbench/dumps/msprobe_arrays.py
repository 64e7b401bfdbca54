"""Dump columns as arrays: values looked up once per distinct id and spread with numpy,
integer columns with a mask (pandas' nullable ``Int64`` built from them, not from a Python object per row)."""
from __future__ import annotations


def distinct(ids):
    """``np.unique(ids, return_inverse=True)`` (the distinct ids ascending, each row's index among them, flat) by
    hashing the rows (``pd.factorize``) and sorting only the distinct ids: a sort of every row took ~30 ms per
    200k-row column, and ``value_of`` below still meets the ids in ascending order (which error a reader raises
    first does not change)."""
    import numpy as np
    import pandas as pd

    codes, found = pd.factorize(np.asarray(ids).reshape(-1))
    found = np.asarray(found)
    order = np.argsort(found, kind="stable")
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order), dtype=np.int64)
    return found[order], rank[codes]


def by_id(ids, value_of, found=None):
    """An object array: ``value_of(i)`` for each row's id ``i``, computed once per distinct id. ``found``:
    :func:`distinct` of ``ids`` when the caller has it already."""
    import numpy as np

    ascending, inverse = distinct(ids) if found is None else found
    values = np.empty(len(ascending), dtype=object)
    values[:] = [value_of(i) for i in ascending.tolist()]
    return values[inverse]


def integers(ids, value_of, found=None):
    """A nullable ``Int64`` array: ``value_of(i)`` (an int, or None for <NA>) for each row's id ``i``, once per
    distinct id (``found``: as in :func:`by_id`)."""
    import numpy as np
    import pandas as pd

    ascending, inverse = distinct(ids) if found is None else found
    found = [value_of(i) for i in ascending.tolist()]
    missing = np.array([v is None for v in found], dtype=bool)
    exact = np.array([0 if v is None else v for v in found], dtype=np.int64)
    return pd.arrays.IntegerArray(exact[inverse], missing[inverse])


def counts(values):
    """A count column of the scan (an integer as a double's exact value; -1: absent) as nullable ``Int64``, as
    the Python reader makes it (``int(float(n))``)."""
    import numpy as np
    import pandas as pd

    return pd.arrays.IntegerArray(values.astype(np.float64).astype(np.int64), values < 0)


def spread_codes(values, index):
    """``values[index]`` (an object array per entry, spread to rows) as a ``pd.Categorical`` of the distinct values
    the rows use: the table numbers module paths by these codes rather than hashing every row's str
    (:func:`.rows.table_from_columns`); an object array where a value is not a str."""
    import numpy as np
    import pandas as pd

    values = np.asarray(values, dtype=object)
    codes, found = pd.factorize(values, use_na_sentinel=False)
    if not all(type(v) is str for v in found.tolist()):
        return values[index]
    codes = codes[index]
    used = np.bincount(codes, minlength=len(found)) > 0
    if not used.all():                                  # entries without rows: their values are not the table's
        codes, found = (np.cumsum(used) - 1)[codes], found[used]
    return pd.Categorical.from_codes(codes, categories=pd.Index(found, dtype=object))
