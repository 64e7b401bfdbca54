"""Order-preserving alignment of two operator sequences (the calls of one matched module, or of the whole
unit outside any module).

TroubleShooter's scheme, made stricter: first ANCHORS — calls whose (operator class, pass, element
counts of every input and output) occur exactly once on each side — kept where they are in the same order
on both sides (longest increasing subsequence); then each gap between anchors is aligned by dynamic
programming over equivalent operators only (same class and pass), preferring equal element counts, then
close statistics. Names are never compared for similarity: two calls pair only when the operator table
says they compute the same thing.
"""
from __future__ import annotations

import bisect
import math
from collections import Counter
from typing import NamedTuple

MAX_CELLS = 250_000          # a gap larger than this (calls A x calls B) is aligned greedily, in order
LOOKAHEAD = 8                # greedy: equivalent calls of B looked at for an equal-size one


class Feature(NamedTuple):
    """What alignment knows of a call (a tuple: made ~100k times per comparison, a frozen dataclass's
    ``__init__`` cost a third of the time)."""

    cls: str                 # operator class (converters/operators.yaml)
    pass_: str
    numels: tuple            # element counts of the inputs then the outputs, in slot order
    level: float             # l2norm of the first output (nan when unknown): a tie-breaker

    @property
    def key(self) -> tuple:
        return (self.cls, self.pass_, self.numels)


def align(a: list[Feature], b: list[Feature]) -> list[tuple[int, int]]:
    """Pairs (i, j), increasing in both, of equivalent calls."""
    anchors = _anchors(a, b)
    pairs: list[tuple[int, int]] = []
    start_a = start_b = 0
    for i, j in [*anchors, (len(a), len(b))]:
        pairs += [(start_a + x, start_b + y) for x, y in _gap(a[start_a:i], b[start_b:j])]
        if i < len(a):
            pairs.append((i, j))
        start_a, start_b = i + 1, j + 1
    return pairs


def _anchors(a: list[Feature], b: list[Feature]) -> list[tuple[int, int]]:
    count_a, count_b = Counter(f.key for f in a), Counter(f.key for f in b)
    where_b = {f.key: j for j, f in enumerate(b) if count_b[f.key] == 1}
    candidates = [(i, where_b[f.key]) for i, f in enumerate(a) if count_a[f.key] == 1 and f.key in where_b]
    return _increasing(candidates)


def _increasing(pairs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The longest subsequence of ``pairs`` (sorted by i) whose j increase too."""
    tails: list[int] = []            # tails[k]: smallest j ending an increasing run of length k + 1
    tail_at: list[int] = []
    back: list[int] = []
    for position, (_, j) in enumerate(pairs):
        k = bisect.bisect_left(tails, j)
        if k == len(tails):
            tails.append(j)
            tail_at.append(position)
        else:
            tails[k], tail_at[k] = j, position
        back.append(tail_at[k - 1] if k else -1)
    chain, position = [], tail_at[-1] if tail_at else -1
    while position >= 0:
        chain.append(pairs[position])
        position = back[position]
    return chain[::-1]


def score(x: Feature, y: Feature) -> float:
    """How well two calls pair: 0 = never (different operator or pass)."""
    if x.cls != y.cls or x.pass_ != y.pass_:
        return 0.0
    value = 2.0
    if x.numels == y.numels:
        value += 1.0
    elif sorted(x.numels[-1:]) == sorted(y.numels[-1:]):
        value += 0.5                 # same output size: a reshape/transpose-tolerant match
    if math.isfinite(x.level) and math.isfinite(y.level):
        scale = max(abs(x.level), abs(y.level), 1e-30)
        value += 1.0 - min(abs(x.level - y.level) / scale, 1.0)
    return value


def _gap(a: list[Feature], b: list[Feature]) -> list[tuple[int, int]]:
    if not a or not b:
        return []
    if len(a) * len(b) > MAX_CELLS:
        return _greedy(a, b)
    scores = _scores(a, b)
    best = _best(scores, len(a) + 1, len(b) + 1)
    pairs, i, j = [], len(a), len(b)
    while i and j:
        pair = scores[i - 1][j - 1]
        if pair and best[i][j] == best[i - 1][j - 1] + pair:
            pairs.append((i - 1, j - 1))
            i, j = i - 1, j - 1
        elif best[i][j] == best[i - 1][j]:
            i -= 1
        else:
            j -= 1
    return pairs[::-1]


SMALL = 64                   # gaps of fewer cells are scored by the Python loop (numpy's per-row overhead is more)


def _best(scores: list[list[float]], rows: int, cols: int) -> list[list[float]]:
    """The dynamic programming table: ``best[i][j]`` = max(``best[i-1][j]``, ``best[i][j-1]``, ``best[i-1][j-1]`` +
    score when the score is not 0). A row at a time with numpy when the gap is not small: the first two terms
    without ``best[i][j-1]`` are whole-row operations, and ``best[i][j-1]`` is a running maximum along the row
    (the same float additions and maxima, so the same table: ``tests/test_compare_fast_matching.py``)."""
    if rows * cols < SMALL:
        return _best_loop(scores, rows, cols)
    import numpy as np

    table = np.zeros((rows, cols))
    for i in range(1, rows):
        above, pair = table[i - 1], np.asarray(scores[i - 1])
        candidate = np.maximum(above[1:], np.where(pair != 0.0, above[:-1] + pair, -1.0))
        table[i, 1:] = np.maximum.accumulate(np.maximum(candidate, 0.0))
    return table.tolist()


def _best_loop(scores: list[list[float]], rows: int, cols: int) -> list[list[float]]:
    best = [[0.0] * cols for _ in range(rows)]
    for i in range(1, rows):
        here, above, row = best[i], best[i - 1], scores[i - 1]
        for j in range(1, cols):
            pair = row[j - 1]
            here[j] = max(above[j], here[j - 1], above[j - 1] + pair if pair else -1.0)
    return best


def _scores(a: list[Feature], b: list[Feature]) -> list[list[float]]:
    """``score(a[i], b[j])`` for every cell; only calls of one operator class and pass are scored (the rest
    are 0 without a call)."""
    same: dict[tuple, list[int]] = {}
    for j, y in enumerate(b):
        same.setdefault((y.cls, y.pass_), []).append(j)
    table = []
    for x in a:
        row = [0.0] * len(b)
        for j in same.get((x.cls, x.pass_), ()):
            row[j] = score(x, b[j])
        table.append(row)
    return table


def _greedy(a: list[Feature], b: list[Feature]) -> list[tuple[int, int]]:
    """In order: each call of A takes the next unused equivalent call of B (an equal-size one among the next
    ``LOOKAHEAD`` equivalents when there is one). Positions per (class, pass) are indexed once, so a long
    gap costs O((n + m) log m), never n x m."""
    positions: dict[tuple, list[int]] = {}
    for k, y in enumerate(b):
        positions.setdefault((y.cls, y.pass_), []).append(k)
    pairs, j = [], 0
    for i, x in enumerate(a):
        candidates = positions.get((x.cls, x.pass_), [])
        start = bisect.bisect_left(candidates, j)
        window = candidates[start:start + LOOKAHEAD]
        if not window:
            continue
        k = next((k for k in window if b[k].numels == x.numels), window[0])
        pairs.append((i, k))
        j = k + 1
    return pairs
