"""Many printed numbers to float64 in a few numpy operations, bit for bit equal to ``float(text)``.

Logs print a column of numbers in one layout (numpy arrays: ``5.53379708e-04``; Megatron:
``%.6E``, ``%.3f``, ``%12d``). Tokens of one length are stacked into a byte matrix; when every row
has the same classes of characters at the same places as the first (digits, ``.``, ``e``, signs),
the digits become one integer ``m`` per row (a dot product, exact below 2**53) and the value is
``m * 10**k`` or ``m / 10**-k``: both operands exact and ``|k| <= 22``, so the one IEEE operation
rounds correctly, which is what ``float`` returns (Clinger's fast path). Rows outside that range
(more than 15 significant digits, ``1e-30``) are parsed by ``float`` one by one; anything else
(``nan``, ``None``, units, mixed layouts) makes the function return ``None`` and the caller takes
its exact path.

    grid_floats(np.frombuffer(b"1.5e-05 2.5e-05", np.uint8).reshape(2, 8)[:, :7])  # -> [1.5e-05, 2.5e-05]
    token_floats(b" 1.5e-05  2.25e-05\\n-3.0e-07", 3)                               # -> 3 values or None
    batch_floats([b"[1.0 2.0]", b"[3.0]"], [2, 1])                                   # -> [1.0, 2.0, 3.0]
"""
from __future__ import annotations

import numpy as np

DIGIT, POINT, EXP, SIGN, OTHER = 0, 1, 2, 3, 4
CLASSES = np.full(256, OTHER, dtype=np.uint8)
CLASSES[48:58] = DIGIT
CLASSES[ord(".")] = POINT
CLASSES[[ord("e"), ord("E")]] = EXP
CLASSES[[ord(" "), ord("+"), ord("-")]] = SIGN
POW10 = 10.0 ** np.arange(23)                 # each one exact in float64
EXACT = float(1 << 53)
MAX_WIDTH = 40
MINUS = ord("-")
SLAB = 1 << 15
SPACE = b" \t\n\r\x0b\x0c"                    # what bytes.split() and numpy's sep=" " skip
BRACKETS_TO_SPACE = bytes.maketrans(b"[]\t\n\r\x0b\x0c\x00", b"        ")   # NUL: as values.parse_joined


def _layout(template: bytes) -> tuple | None:
    """(sign column, mantissa digit columns, fraction digit count, '.' column, 'e' column, exponent
    sign column, exponent digit columns) of one row's classes, -1 for an absent column; ``None``
    when the classes do not spell a float."""
    width, at = len(template), 0
    while at < width and template[at] == SIGN:
        at += 1
    sign = at - 1
    digits = _run(template, at, DIGIT)
    at += len(digits)
    point, fraction = -1, 0
    if at < width and template[at] == POINT:
        point = at
        more = _run(template, at + 1, DIGIT)
        digits, fraction, at = digits + more, len(more), at + 1 + len(more)
    if not digits or len(digits) > 22:
        return None
    mark, exp_sign, exponent = -1, -1, []
    if at < width and template[at] == EXP:
        mark, at = at, at + 1
        if at < width and template[at] == SIGN:
            exp_sign, at = at, at + 1
        exponent = _run(template, at, DIGIT)
        at += len(exponent)
        if not exponent or len(exponent) > 4:
            return None
    return (sign, digits, fraction, point, mark, exp_sign, exponent) if at == width else None


def _run(template: bytes, start: int, kind: int) -> list[int]:
    end = start
    while end < len(template) and template[end] == kind:
        end += 1
    return list(range(start, end))


def grid_floats(grid: np.ndarray) -> np.ndarray | None:
    """The numbers of a ``(rows, width)`` uint8 matrix, one per row, all in the first row's layout
    (see the module doc); ``None`` when a row differs or the layout is not a plain float. Worked
    through in slabs of ``SLAB`` rows, so that the temporaries stay small and warm."""
    rows, width = grid.shape
    if rows == 0:
        return np.empty(0, dtype=np.float64)
    if width == 0 or width > MAX_WIDTH:
        return None
    layout = _layout(CLASSES[grid[0]].tobytes())
    if layout is None:
        return None
    digit_columns = np.zeros(width, dtype=bool)
    digit_columns[layout[1] + layout[6]] = True
    values = np.empty(rows, dtype=np.float64)
    for start in range(0, rows, SLAB):
        if not _slab(grid[start:start + SLAB], layout, digit_columns, values[start:start + SLAB]):
            return None
    return values


def _slab(grid: np.ndarray, layout: tuple, digit_columns: np.ndarray, out: np.ndarray) -> bool:
    sign, digits, fraction, _, _, exp_sign, exponent = layout
    shifted = grid - np.uint8(48)                                 # digits 0..9, anything else above
    if not ((shifted < 10) == digit_columns).all() or not _others_agree(grid, layout):
        return False
    np.copyto(out, shifted[:, digits[0]], casting="unsafe")
    for column in digits[1:]:
        out *= 10.0
        out += shifted[:, column]
    power = -fraction
    if exponent:
        power = shifted[:, exponent[0]].astype(np.int32)
        for column in exponent[1:]:
            power *= 10
            power += shifted[:, column]
        if exp_sign >= 0:
            np.negative(power, out=power, where=grid[:, exp_sign] == MINUS)
        power -= fraction
    slow = _scale(out, power)
    if sign >= 0:
        np.negative(out, out=out, where=grid[:, sign] == MINUS)
    for row in slow:                                              # rare: exact but slow
        out[row] = float(grid[row].tobytes())
    return True


def _scale(mantissa: np.ndarray, power) -> np.ndarray:
    """``mantissa * 10**power`` in place where Clinger's fast path is exact; the rows where it is not."""
    low, high = (power, power) if np.isscalar(power) else (int(power.min()), int(power.max()))
    if mantissa.max() < EXACT and -22 <= low and high <= 22:
        if high <= 0:
            mantissa /= POW10[-power]
        elif low >= 0:
            mantissa *= POW10[power]
        else:
            np.copyto(mantissa, np.where(power >= 0, mantissa * POW10[np.maximum(power, 0)],
                                         mantissa / POW10[np.maximum(-power, 0)]))
        return np.empty(0, dtype=np.int64)
    power = np.broadcast_to(power, mantissa.shape)
    slow = np.flatnonzero((mantissa >= EXACT) | (np.abs(power) > 22))
    clipped = np.clip(power, -22, 22)
    np.copyto(mantissa, np.where(clipped >= 0, mantissa * POW10[np.maximum(clipped, 0)],
                                 mantissa / POW10[np.maximum(-clipped, 0)]))
    return slow


def _others_agree(grid: np.ndarray, layout: tuple) -> bool:
    """The columns that are not digits hold what the first row's layout says in every row."""
    sign, _, _, point, mark, exp_sign, _ = layout
    if sign > 0 and not (grid[:, :sign] == 32).all():             # '  -5' yes, '- 5' / '+-5' no
        return False
    if sign >= 0 and not _any_of(grid[:, sign], b" +-"):
        return False
    if point >= 0 and not (grid[:, point] == 46).all():
        return False
    if mark >= 0 and not _any_of(grid[:, mark], b"eE"):
        return False
    return exp_sign < 0 or _any_of(grid[:, exp_sign], b"+-")       # '1e 5' is not a number


def _any_of(column: np.ndarray, allowed: bytes) -> bool:
    """Every byte of ``column`` is one of ``allowed``."""
    found = column == allowed[0]
    for byte in allowed[1:]:
        found |= column == byte
    return bool(found.all())


def token_floats(text: bytes, count: int) -> np.ndarray | None:
    """The ``count`` whitespace-separated numbers of ``text`` (``[``, ``]`` and NUL count as spaces);
    ``None`` when there are not exactly ``count`` tokens or one is not in its length's layout."""
    return batch_floats([text], [count])


def batch_floats(texts: list[bytes], counts: list[int]) -> np.ndarray | None:
    """The numbers of several texts at once (as ``token_floats``), concatenated; ``None`` unless
    every text holds exactly its count of numbers, all read exactly."""
    data = np.frombuffer(b" ".join(texts).translate(BRACKETS_TO_SPACE), dtype=np.uint8)
    blank = np.concatenate(([True], data == 32, [True]))
    edges = np.flatnonzero(blank[1:] != blank[:-1])
    starts, ends = edges[0::2], edges[1::2]
    offsets = np.cumsum([0] + [len(text) + 1 for text in texts[:-1]])
    if not np.array_equal(np.diff(np.searchsorted(starts, offsets), append=starts.size), counts):
        return None
    if starts.size == 0:
        return np.empty(0, dtype=np.float64)
    lengths = ends - starts
    if (lengths == lengths[0]).all():                   # the usual case: squeeze the blanks out
        return grid_floats(data[data != 32].reshape(starts.size, int(lengths[0])))
    values = np.empty(starts.size, dtype=np.float64)
    for length in np.unique(lengths).tolist():
        rows = np.flatnonzero(lengths == length)
        parsed = _same_length(data, starts[rows], length)
        if parsed is None:
            return None
        values[rows] = parsed
    return values


def _same_length(data: np.ndarray, starts: np.ndarray, length: int) -> np.ndarray | None:
    if length > MAX_WIDTH:
        return None
    return grid_floats(data[starts[:, None] + np.arange(length)])
