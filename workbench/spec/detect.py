"""Which architecture and which format a set of tensor names is, by which templates match.

A format *fits* when every name (not ignored) matches one of its rules. Among fitting formats the
one that leaves fewest rules unused wins (a Llama checkpoint fits Qwen2's HF format too, but
leaves its bias rules unused). Equal candidates are an error listing them: names alone cannot
tell Megatron's ``linear_fc1`` [gate; up] from MindFormers mcore's interleaved one, nor
MindFormers 2.1.0 ``w_qkv`` from the older plain-block layout; the caller passes ``candidates``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from ..errors import InputError
from ..tensors.base import TensorMeta
from .arch import ArchSpec
from .infer import shapes_consistent
from .loader import archs_declaring, available_archs, load_arch
from .resolve import resolve_names
from .templates import skeleton_of


@dataclass(frozen=True)
class FormatFit:
    """How well one format of one architecture fits a checkpoint's names."""

    arch: str
    format: str
    matched: int
    unmatched: tuple[str, ...]
    unused_rules: int

    @property
    def fits(self) -> bool:
        return self.matched > 0 and not self.unmatched

    def describe(self) -> str:
        text = f"{self.arch}/{self.format}: {self.matched} matched"
        if self.unmatched:
            text += f", {len(self.unmatched)} unmatched (e.g. {', '.join(self.unmatched[:3])})"
        return text + (f", {self.unused_rules} rules unused" if self.unused_rules else "")


def format_fits(names: Sequence[str], arch: ArchSpec, candidates: Iterable[str] | None = None,
                skeletons: Sequence[str] | None = None) -> list[FormatFit]:
    """How well each format of ``arch`` (or each of ``candidates``) matches the names."""
    skeletons = skeletons if skeletons is not None else [skeleton_of(name) for name in names]
    fits = []
    for fmt in (candidates if candidates is not None else arch.formats):
        resolution = resolve_names(names, arch, fmt, skeletons=skeletons)
        fits.append(FormatFit(arch.name, fmt, len(resolution.matches), tuple(resolution.unmatched),
                              len(resolution.unused_rules)))
    return fits


def formats_for(arch: ArchSpec, framework: str) -> list[str]:
    """The formats of one framework family (``megatron`` -> megatron, megatron_grouped, ...): the
    ``candidates`` to pass to :func:`detect_format` when the container already tells the framework."""
    return [fmt for fmt in arch.formats if fmt == framework or fmt.startswith(framework + "_")]


def best_fits(fits: list[FormatFit], allow_unmatched: bool = False) -> list[FormatFit]:
    """Fits that match every name (fewest unused rules first). ``allow_unmatched`` (the user passed
    --allow-unmapped): if none matches every name, the fits with the most matches and fewest extras."""
    good = [fit for fit in fits if fit.fits]
    if not good and allow_unmatched and any(fit.matched for fit in fits):
        top = max((fit.matched, -len(fit.unmatched)) for fit in fits)
        good = [fit for fit in fits if (fit.matched, -len(fit.unmatched)) == top]
    if not good:
        return []
    least = min(fit.unused_rules for fit in good)
    return [fit for fit in good if fit.unused_rules == least]


def detect_format(names: Iterable[str] | Mapping[str, TensorMeta], arch: ArchSpec,
                  candidates: Iterable[str] | None = None, allow_unmatched: bool = False) -> str:
    """The one format of ``arch`` these names are; InputError when none or several fit.

    Given metas (name -> TensorMeta) instead of names, formats whose names tie are told apart by
    shapes where they can be (MindFormers gmm [E, in, out] vs [E, out, in]; Megatron GroupedMLP
    [h, E*2F] vs MindFormers mcore [E*h, 2F]).
    """
    metas = names if isinstance(names, Mapping) else None
    names = list(names)
    fits = format_fits(names, arch, candidates)
    best = best_fits(fits, allow_unmatched)
    if len(best) > 1 and metas is not None:
        best = [fit for fit in best if shapes_consistent(metas, fit.format, arch)] or best
    if len(best) == 1:
        return best[0].format
    if not best:
        closest = max(fits, key=lambda fit: (fit.matched - len(fit.unmatched), -fit.unused_rules))
        raise InputError(f"{len(names)} tensor names", f"no format of arch {arch.name} matches every name; closest "
                         f"{closest.describe()}", "pick the right --arch, or allow unmapped tensors with an explicit format")
    notes = "; ".join(f"{fit.format} ({arch.formats[fit.format].note})" for fit in best)
    raise InputError(f"{len(names)} tensor names", f"names fit {len(best)} formats of arch {arch.name} equally: "
                     f"{', '.join(fit.format for fit in best)}; their layouts differ",
                     f"name the format explicitly: {notes}")


def detect_arch(names: Iterable[str], archs: Iterable[str] | None = None, allow_unmatched: bool = False,
                model_type: str | None = None) -> str:
    """The one architecture whose formats fit these names best; InputError when none or several.

    ``model_type`` (an HF config.json's, when the checkpoint carries one): a spec declaring it
    (``hf_config.model_type``) whose format fits every name with no rule left unused is the answer,
    the best fit there can be, found without building every other spec (and it settles a tie with
    another architecture that fits as well); otherwise every spec is tried, as without it.
    """
    names = list(names)
    skeletons = [skeleton_of(name) for name in names]
    if archs is None and model_type:
        ranked, _ = _ranked(names, skeletons, archs_declaring(model_type), False)
        perfect = [item for item in ranked if item[0] == (0, 0)]
        if len(perfect) == 1:
            return perfect[0][1]
    ranked, all_fits = _ranked(names, skeletons, archs if archs is not None else available_archs(), allow_unmatched)
    if not ranked:
        closest = max(all_fits, key=lambda fit: fit.matched - len(fit.unmatched)) if all_fits else None
        raise InputError(f"{len(names)} tensor names", "no converter spec matches every name"
                         + (f"; closest {closest.describe()}" if closest else ""),
                         "pass --arch, or write converters/<arch>.yaml for this model family")
    least = min(item[0] for item in ranked)
    winners = [item for item in ranked if item[0] == least]
    if len(winners) > 1:
        raise InputError(f"{len(names)} tensor names", "names fit several architectures equally: "
                         + ", ".join(f"{name} ({'/'.join(fmts)})" for _, name, fmts in winners), "pass --arch")
    return winners[0][1]


def _ranked(names: list[str], skeletons: list[str], archs: Iterable[str], allow_unmatched: bool):
    """((unmatched, unused rules), arch, best formats) of each arch some format of which fits; and every fit."""
    ranked = []
    all_fits = []
    for arch_name in archs:
        fits = format_fits(names, load_arch(arch_name), skeletons=skeletons)
        all_fits += fits
        best = best_fits(fits, allow_unmatched)
        if best:
            ranked.append(((len(best[0].unmatched), best[0].unused_rules), arch_name, [fit.format for fit in best]))
    return ranked, all_fits
