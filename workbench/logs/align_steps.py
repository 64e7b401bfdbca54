"""Put two runs' series on the same steps, and say how.

Readers already number every value by the 1-based optimizer update it belongs to (Megatron's
printed lr is shifted to the next update there). What is left to settle here: which metric of
each side is comparable (Megatron's ``lm loss`` against MindFormers' ``lm_loss`` when the printed
mcore ``loss`` adds aux/MTP terms), interval means (Megatron's ``--log-interval`` > 1 prints the
mean loss of the interval: the finer side is averaged over the same windows), steps one side
lacks (sink chunks, a shorter run), and a manual ``shift``.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import InputError
from .schema import LogSeries

LOSS_PIECES = ("load_balancing_loss", "z_loss", "mtp_loss")


@dataclass
class AlignedSeries:
    metric: str
    steps: np.ndarray
    reference: np.ndarray
    candidate: np.ndarray
    baselines: list[np.ndarray] = field(default_factory=list)
    statements: list[str] = field(default_factory=list)


def available(series: LogSeries) -> set[str]:
    return set(series.series["metric"].unique())


def resolve_metric(requested: str, reference: LogSeries, candidate: LogSeries) -> tuple[str, str, list[str]]:
    """The metric name to read on each side for ``requested``, and what was decided."""
    have_a, have_b = available(reference), available(candidate)
    if requested == "loss":
        if "lm_loss" in have_a and "lm_loss" in have_b:
            return "lm_loss", "lm_loss", ["comparing the language-model loss (lm_loss) of both sides"]
        name_a = "lm_loss" if "lm_loss" in have_a else "loss"
        name_b = "lm_loss" if "lm_loss" in have_b else "loss"
        said = [f"comparing {reference.source}:{name_a} with {candidate.source}:{name_b}"]
        for side, name, have in ((candidate, name_b, have_b), (reference, name_a, have_a)):
            extra = sorted(have & set(LOSS_PIECES))
            if name == "loss" and extra:
                said.append(f"{side.source} prints a total loss that includes {', '.join(extra)}: print "
                            "separate losses (MindFormers print_separate_loss) to compare lm_loss alone")
        for side, name, have in ((reference, name_a, have_a), (candidate, name_b, have_b)):
            if name not in have:
                raise InputError(side.source, f"no loss values found (metrics: {', '.join(sorted(have)) or 'none'})",
                                 "pass a training log with iteration/step lines")
        return name_a, name_b, said
    for side, have in ((reference, have_a), (candidate, have_b)):
        if requested not in have:
            raise InputError(side.source, f"no {requested!r} values (metrics: {', '.join(sorted(have)) or 'none'})",
                             "choose another --metric, or a log that prints it")
    return requested, requested, []


def _values(series: LogSeries, metric: str, shift: int = 0) -> dict[int, float]:
    view = series.metric(metric)
    return {int(step) + shift: float(value) for step, value in view.items()}


def _interval(series: LogSeries) -> int:
    return max(int(series.facts.get("log_interval", 1) or 1), 1)


def _window_means(values: dict[int, float], ends: list[int], width: int) -> dict[int, float]:
    """The mean of ``values`` over (end - width, end] for each end that has all its steps."""
    out = {}
    for end in ends:
        window = [values.get(step) for step in range(end - width + 1, end + 1)]
        if all(value is not None for value in window):
            out[end] = float(np.mean(window))
    return out


def align(reference: LogSeries, candidate: LogSeries, metric: str, baselines: list[LogSeries] = (),
          shift: int = 0) -> AlignedSeries:
    """Common steps of both sides (and of every baseline) for ``metric``; ``shift`` moves the candidate."""
    name_a, name_b, said = resolve_metric(metric, reference, candidate)
    ref, cand = _values(reference, name_a), _values(candidate, name_b, shift)
    bases = [_values(base, name_a) for base in baselines]
    if shift:
        said.append(f"candidate steps shifted by {shift:+d}")
    width_a, width_b = _interval(reference), _interval(candidate)
    if "loss" in name_a and width_a != width_b:
        width = max(width_a, width_b)
        finer = "candidate" if width_a > width_b else "reference"
        said.append(f"{finer} averaged over windows of {width} steps to match the other side's log interval "
                    f"(printed losses are interval means)")
        if width_a > width_b:
            cand = _window_means(cand, sorted(ref), width)
        else:
            ref = _window_means(ref, sorted(cand), width)
            bases = [_window_means(base, sorted(cand), width) for base in bases]
    common = sorted(set(ref) & set(cand).intersection(*[set(b) for b in bases]) if bases else set(ref) & set(cand))
    if not common:
        raise InputError(candidate.source, f"no step in common with {reference.source} for {metric} "
                         f"(reference steps {_span(ref)}, candidate steps {_span(cand)})",
                         "check the logs are of the same run length, or pass --shift")
    lost = len(set(ref) - set(common)), len(set(cand) - set(common))
    if any(lost):
        said.append(f"{len(common)} common steps; {lost[0]} only in the reference, {lost[1]} only in the candidate")
    steps = np.asarray(common, dtype=np.int64)
    return AlignedSeries(metric=name_b if name_a == name_b else f"{name_a} vs {name_b}", steps=steps,
                         reference=np.array([ref[s] for s in common]), candidate=np.array([cand[s] for s in common]),
                         baselines=[np.array([base[s] for s in common]) for base in bases], statements=said)


def _span(values: dict[int, float]) -> str:
    return f"{min(values)}..{max(values)}" if values else "none"
