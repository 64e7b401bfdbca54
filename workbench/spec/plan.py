"""Conversion plans from metadata alone, and the materialisation of one target tensor at a time.

``build_plan`` resolves the source names, checks every source shape against the spec, and lists
one :class:`Step` per target tensor (output order: embedding, layers in order, final norm, head),
each naming the few source tensors it needs. ``materialize(step, read)`` then reads only those,
splits them into logical parts with the source rule, casts / pads, and fuses the parts with the
target rule. The reverse conversion is the same call with the formats swapped: one spec, both ways.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping, TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

from ..errors import InputError
from ..tensors.base import STORAGE, TensorMeta, cast
from .arch import ArchSpec, Rule
from .expr import Expr
from .model_params import ModelParams
from .resolve import missing, out_of_range, resolve_names
from .transforms import resize_rows

FLOAT_DTYPES = ("fp64", "fp32", "fp16", "bf16")


@dataclass(frozen=True)
class SourceTensor:
    """A source tensor with the rule and indices its name resolved to."""

    meta: TensorMeta
    rule: Rule
    env: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class PartRef:
    """Where one logical part of a target tensor lies in the source."""

    logical: str                 # concrete logical name, e.g. layers.3.attn.q
    source: str                  # physical source tensor holding it
    index: int                   # its position in that source's split
    rows: int | None = None      # vocab rows to pad/cut to (embedding, head), else None


@dataclass
class PlanContext:
    """What every step of a plan shares: the architecture, both formats and sizes, the source tensors."""

    arch: ArchSpec
    source_format: str
    target_format: str
    source_params: ModelParams
    target_params: ModelParams
    sources: dict[str, SourceTensor]


@dataclass(frozen=True)
class Step:
    """One target tensor of a plan: the source tensors and parts it is built from, by its rule."""

    target: TensorMeta
    sources: tuple[str, ...]
    parts: tuple[PartRef, ...]
    rule: Rule
    env: tuple[tuple[str, int], ...]
    context: PlanContext = field(repr=False, compare=False)


@dataclass
class Plan:
    """Every target tensor of a conversion, in order, built from headers only."""

    arch: str
    source_format: str
    target_format: str
    params: ModelParams
    target_params: ModelParams
    steps: list[Step]
    unmapped: list[str] = field(default_factory=list)    # source names no rule maps (allow_unmapped)
    unused: list[str] = field(default_factory=list)      # source names the format ignores (``_extra_state``)
    tied: list[str] = field(default_factory=list)        # logical names the source leaves tied (``lm_head``)

    @property
    def targets(self) -> list[TensorMeta]:
        return [step.target for step in self.steps]


def build_plan(source_metas: Mapping[str, TensorMeta], source_format: str, target_format: str, arch: ArchSpec,
               params: ModelParams, *, target_dtype: str | None = None, pad_vocab_to: int | None = None,
               allow_unmapped: bool = False) -> Plan:
    """One step per target tensor, from headers only; spec/shape disagreements raise InputError."""
    arch.format(target_format)
    if target_dtype is not None and target_dtype not in FLOAT_DTYPES:
        raise InputError("target dtype", f"'{target_dtype}' is not one of {', '.join(FLOAT_DTYPES)}", "pick one")
    resolution = resolve_names(source_metas, arch, source_format)
    unmapped = list(resolution.unmatched) + out_of_range(resolution, arch, params)
    if unmapped and not allow_unmapped:
        raise InputError(unmapped[0], f"{len(unmapped)} source tensor(s) match no rule of {arch.name}/{source_format}"
                         f" for {params.num_layers} layers: {_some(unmapped)}",
                         "pick the right arch/format, fix num_layers, or allow unmapped tensors (they are skipped)")
    absent = missing(resolution, arch, params)
    tied = tied_names(absent, arch, resolution)
    absent = [(rule, name) for rule, name in absent if not {p.text for p in rule.parts} <= tied]
    if absent:
        rule, name = absent[0]
        raise InputError(name, f"{len(absent)} tensor(s) of {arch.name}/{source_format} are missing: "
                         f"{_some([n for _, n in absent])} (first: {rule.describe()})",
                         "pass the complete checkpoint, or check num_layers / num_experts / the format")
    _check_pad_vocab(pad_vocab_to, params)
    skip = set(unmapped)
    sources = _check_sources(source_metas, resolution, arch, params, skip)
    target_params = params.with_values(vocab=pad_vocab_to) if pad_vocab_to else params
    context = PlanContext(arch, source_format, target_format, params, target_params, sources)
    steps = _steps(context, _logical_index(context), target_dtype, pad_vocab_to is not None, tied)
    return Plan(arch.name, source_format, target_format, params, target_params, steps, unmapped,
                list(resolution.ignored), sorted(tied))


def tied_names(absent: list[tuple[Rule, str]], arch: ArchSpec, resolution) -> set[str]:
    """Logical names absent from the source because they are tied (``tied_to`` in the hub): every
    tensor of their rule is absent and the tensor they are tied to is present."""
    present = {part.text for match in resolution.matches.values() for part in match.rule.parts}
    absent_rules = {id(rule): rule for rule, _ in absent}
    tied = set()
    for rule in absent_rules.values():
        parts = [arch.tensor(part) for part in rule.parts]
        if any(match.rule is rule for match in resolution.matches.values()):
            continue
        if all(t.tied_to is not None and t.tied_to in present and t.tied_to in arch.logical
               and arch.logical[t.tied_to].shape == t.shape for t in parts):
            tied |= {t.name for t in parts}
    return tied


def _check_pad_vocab(pad_vocab_to: int | None, params: ModelParams) -> None:
    """Padding only adds rows: a target below the vocabulary would drop real embedding/output rows."""
    if pad_vocab_to is None:
        return
    if isinstance(pad_vocab_to, bool) or not isinstance(pad_vocab_to, int) or pad_vocab_to < params.vocab:
        raise InputError("--pad-vocab-to", f"{pad_vocab_to!r} is below the checkpoint's vocabulary of {params.vocab} "
                         "rows: padding would cut real embedding and output rows",
                         f"pass N >= {params.vocab} (e.g. the padded vocabulary size), or leave --pad-vocab-to out")


def _some(names: list[str], limit: int = 6) -> str:
    return ", ".join(names[:limit]) + (f" ... (+{len(names) - limit})" if len(names) > limit else "")


def _check_sources(metas: Mapping[str, TensorMeta], resolution, arch: ArchSpec, params: ModelParams,
                   skip: set[str]) -> dict[str, SourceTensor]:
    expected: dict[int, tuple[int, ...]] = {}
    sources = {}
    for name, match in resolution.matches.items():
        if name in skip:
            continue
        rule, meta = match.rule, metas[name]
        if id(rule) not in expected:
            expected[id(rule)] = arch.physical_shape(rule, params)
        if tuple(meta.shape) != expected[id(rule)]:
            raise InputError(name, f"shape {list(meta.shape)} but {rule.describe()} expects "
                             f"{list(expected[id(rule)])} for {_param_text(params, arch)}",
                             "check the model sizes (--config) and the source format")
        sources[name] = SourceTensor(meta, rule, match.env)
    return sources


def _param_text(params: ModelParams, arch: ArchSpec) -> str:
    env = params.env()
    return ", ".join(f"{name}={env[name]}" for name in arch.params)


def _logical_index(context: PlanContext) -> dict[str, tuple[str, int]]:
    """Concrete logical name -> (source tensor, part index)."""
    index = {}
    for name, source in context.sources.items():
        for position, logical in enumerate(context.arch.part_names(source.rule, dict(source.env),
                                                                   context.source_params)):
            index[logical] = (name, position)
    return index


def _steps(context: PlanContext, index: dict[str, tuple[str, int]], target_dtype: str | None,
           resize: bool, tied: set[str]) -> list[Step]:
    arch, params = context.arch, context.target_params
    vocab_rows = {name for name, t in arch.logical.items() if t.shape[0] == Expr.var("vocab")}
    first_layer = min((t.order for t in arch.logical.values() if "i" in t.template.variables), default=0)
    keyed, names = [], set()
    for rule in arch.format(context.target_format).rules:
        tied_parts = {part.text for part in rule.parts} & tied
        if tied_parts:
            if len(tied_parts) < len(rule.parts):
                raise InputError(rule.where, f"{rule.describe()} holds tied {', '.join(sorted(tied_parts))} with "
                                 "other tensors", "the source must carry the tied tensor explicitly")
            continue                      # tied in the source: tied in the target (no tensor written)
        shape = arch.physical_shape(rule, params)
        rows = {part.text for part in rule.parts} & vocab_rows
        order = arch.tensor(rule.parts[0]).order
        for env in arch.instances(rule, params):
            logical = arch.part_names(rule, env, params)
            refs = tuple(PartRef(ln, *index[ln], params.vocab if resize and rows else None) for ln in logical)
            name = rule.name.format(env)
            if name in names:
                raise InputError(name, f"two target tensors share this name ({rule.describe()})", "fix the spec")
            names.add(name)
            sources = tuple(dict.fromkeys(ref.source for ref in refs))
            dtype = target_dtype or _common_dtype(name, [context.sources[s].meta for s in sources])
            step = Step(TensorMeta(name, shape, dtype), sources, refs, rule, tuple(env.items()), context)
            section = 1 if "i" in env else (0 if order < first_layer else 2)
            keyed.append(((section, env.get("i", -1), order, env.get("e", -1)), len(keyed), step))
    keyed.sort(key=lambda item: item[:2])
    return [step for _, _, step in keyed]


def _common_dtype(target: str, metas: list[TensorMeta]) -> str:
    dtypes = sorted({meta.dtype for meta in metas})
    if len(dtypes) > 1:
        raise InputError(target, f"its sources have different dtypes ({', '.join(f'{m.name}: {m.dtype}' for m in metas)})",
                         "choose a target dtype (--dtype) to cast them to")
    return dtypes[0]


# ---------------------------------------------------------------------- materialisation

def is_byte_copy(step: Step) -> bool:
    """True when the target's bytes are exactly its one source tensor's bytes (a rename, maybe a reshape).

    One source holding one part, no split or fuse transform on either side, no cast, no vocab
    resize: C-order bytes are unchanged by a reshape, so the writer may copy the stored byte range.
    """
    if len(step.parts) != 1 or len(step.sources) != 1 or step.parts[0].rows is not None:
        return False
    source = step.context.sources[step.sources[0]]
    return (source.meta.dtype == step.target.dtype and source.meta.nbytes == step.target.nbytes
            and not source.rule.pipeline.steps and not step.rule.pipeline.steps)


def materialize(step: Step, read: Callable[[str], np.ndarray]) -> np.ndarray:
    """The target tensor of ``step`` (STORAGE dtype, contiguous), reading only ``step.sources``."""
    import numpy as np

    context = step.context
    split = {name: _split_source(context, name, read(name)) for name in step.sources}
    parts = []
    for ref in step.parts:
        part = split[ref.source][ref.index]
        part = _cast(part, context.sources[ref.source].meta.dtype, step.target.dtype)
        parts.append(resize_rows(part, ref.rows) if ref.rows is not None else part)
    arch, params, rule = context.arch, context.target_params, step.rule
    env = params.env()
    fused = rule.pipeline.fuse(parts, arch.groups(rule, params), rule.pipeline.evaluate_args(env),
                               rule.pipeline.reshape_to(env))
    if tuple(fused.shape) != step.target.shape:
        raise AssertionError(f"{step.target.name}: built {fused.shape}, planned {step.target.shape}")
    return np.ascontiguousarray(fused, dtype=STORAGE[step.target.dtype])


def _split_source(context: PlanContext, name: str, array: np.ndarray) -> list[np.ndarray]:
    source = context.sources[name]
    if tuple(array.shape) != tuple(source.meta.shape):
        raise InputError(name, f"read shape {list(array.shape)}, header says {list(source.meta.shape)}",
                         "the checkpoint is inconsistent; re-export it")
    rule, arch, params = source.rule, context.arch, context.source_params
    if not rule.pipeline.steps and rule.pipeline.reshape is None:
        return [array]
    env = params.env()
    return rule.pipeline.split(array, arch.part_shapes(rule, env), arch.groups(rule, params),
                               rule.pipeline.evaluate_args(env))


def _cast(array: np.ndarray, source: str, target: str) -> np.ndarray:
    if source == target or source not in FLOAT_DTYPES or target not in FLOAT_DTYPES:
        return array
    return cast(array, source, target)


def expected_metas(arch: ArchSpec, fmt: str, params: ModelParams, dtype: str = "fp32") -> dict[str, TensorMeta]:
    """Every tensor of ``fmt`` for these sizes (name -> TensorMeta), in spec order, without data."""
    metas = {}
    for rule in arch.format(fmt).rules:
        shape = arch.physical_shape(rule, params)
        for env in arch.instances(rule, params):
            name = rule.name.format(env)
            metas[name] = TensorMeta(name, shape, dtype)
    return metas
