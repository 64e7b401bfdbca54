"""Dump columns as arrays: values looked up once per distinct id and spread with numpy,
integer columns with a mask (pandas' nullable ``Int64`` built from them, not from a Python object per row)."""
from __future__ import annotations


def by_id(ids, value_of):
    """An object array: ``value_of(i)`` for each row's id ``i``, computed once per distinct id."""
    import numpy as np

    distinct, inverse = np.unique(ids, return_inverse=True)
    values = np.empty(len(distinct), dtype=object)
    values[:] = [value_of(i) for i in distinct.tolist()]
    return values[inverse.reshape(-1)]


def integers(ids, value_of):
    """A nullable ``Int64`` array: ``value_of(i)`` (an int, or None for <NA>) for each row's id ``i``, once per
    distinct id."""
    import numpy as np
    import pandas as pd

    distinct, inverse = np.unique(ids, return_inverse=True)
    found = [value_of(i) for i in distinct.tolist()]
    missing = np.array([v is None for v in found], dtype=bool)
    exact = np.array([0 if v is None else v for v in found], dtype=np.int64)
    inverse = inverse.reshape(-1)
    return pd.arrays.IntegerArray(exact[inverse], missing[inverse])


def counts(values):
    """A count column of the scan (an integer as a double's exact value; -1: absent) as nullable ``Int64``, as
    the Python reader makes it (``int(float(n))``)."""
    import numpy as np
    import pandas as pd

    return pd.arrays.IntegerArray(values.astype(np.float64).astype(np.int64), values < 0)
