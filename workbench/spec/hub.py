"""The hub: the canonical logical tensor names every format maps to (``converters/_hub.yaml``).

Each entry gives the default shape in parameters and which layers hold it (``dense`` MLP layers,
``moe`` layers, or ``all``), and ``tied_to`` when a checkpoint may leave it out because it is another
tensor (the output head of a model with tied embeddings is the embedding). The hub order is the
output order of every conversion plan.
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from ..errors import InputError, location
from ..knowledge import knowledge_dir
from ..yamlio import YamlDoc
from .arch import LogicalTensor
from .layer_sets import hub_doc, load_indices
from .expr import ExprError, parse
from .model_params import PARAM_NAMES
from .templates import Template, TemplateError

HUB_FILE = "_hub.yaml"


def hub_path(folder: Path | None = None) -> Path:
    return (folder or knowledge_dir("converters")) / HUB_FILE


@lru_cache(maxsize=8)
def load_hub(path: Path) -> dict[str, LogicalTensor]:
    """Hub template text -> LogicalTensor, in file order; malformed entries raise InputError."""
    doc = hub_doc(path)
    entries = doc.get("hub", None)
    if not isinstance(entries, dict) or not entries:
        raise InputError(location(path, doc.lines.get("hub"), "hub"), "expected a mapping 'hub:' of logical names",
                         "write hub: {embed: {shape: [vocab, hidden]}, ...}")
    layer_sets = tuple(load_indices(path).layer_sets)
    hub = {name: _entry(doc, name, value, order, layer_sets) for order, (name, value) in enumerate(entries.items())}
    for name, tensor in hub.items():
        _check_tied(doc, hub, name, tensor)
    return hub


def _check_tied(doc: YamlDoc, hub: dict[str, LogicalTensor], name: str, tensor: LogicalTensor) -> None:
    if tensor.tied_to is None:
        return
    where = location(doc.path, doc.lines.get(f"hub.{name}.tied_to"), f"hub.{name}.tied_to")
    other = hub.get(tensor.tied_to)
    if other is None or other.shape != tensor.shape or other.template.variables or tensor.template.variables:
        raise InputError(where, f"tied_to: {tensor.tied_to!r} must name a hub tensor of the same shape, both "
                         "without indices", "name the tensor this one shares its weights with (lm_head: embed)")


def _entry(doc: YamlDoc, name: str, value: object, order: int, layer_sets: tuple[str, ...]) -> LogicalTensor:
    key = f"hub.{name}"
    where = location(doc.path, doc.lines.get(key), key)
    if not isinstance(value, dict) or "shape" not in value:
        raise InputError(where, f"expected {{shape: [...], layers: all|dense|moe}}, found {value!r}",
                         "give the tensor's shape in parameters")
    unknown = sorted(set(value) - {"shape", "layers", "note", "tied_to", "module"})
    if unknown:
        raise InputError(where, f"unknown field(s) {', '.join(unknown)}", "use shape, layers, note, tied_to, module")
    try:
        template = Template.parse(name)
    except TemplateError as error:
        raise InputError(where, str(error), "fix the logical name") from None
    layers = value.get("layers", "all")
    if layers not in layer_sets:
        raise InputError(where, f"layers: {layers!r} is not one of {', '.join(layer_sets)} (layer_sets:)",
                         "fix 'layers'")
    module = _module(where, value.get("module"), template)
    tied_to = value.get("tied_to")
    if tied_to is not None and not isinstance(tied_to, str):
        raise InputError(where, f"tied_to must be a hub name, found {tied_to!r}", "write tied_to: embed")
    return LogicalTensor(template, parse_shape(value["shape"], where), layers, order, tied_to, module)


def _module(where: str, value: object, template: Template) -> str | None:
    """``module:`` must be a logical name with no index the tensor's own name lacks."""
    if value is None:
        return None
    try:
        module = Template.parse(value)
    except TemplateError as error:
        raise InputError(where, f"module: {error}", "name the logical module, e.g. layers.{i}.attn.q") from None
    if not set(module.variables) <= set(template.variables):
        raise InputError(where, f"module: {value!r} has an index the tensor's name lacks",
                         "use only the tensor's own placeholders")
    return module.text


def parse_shape(value: object, where: str, known: frozenset[str] = PARAM_NAMES) -> tuple:
    """``[num_heads*head_dim, hidden]`` -> tuple of Expr; one-line InputError otherwise."""
    if not isinstance(value, list) or not value:
        raise InputError(where, f"a shape must be a non-empty list of sizes, found {value!r}",
                         "write e.g. [num_heads*head_dim, hidden]")
    try:
        return tuple(parse(item, known) for item in value)
    except ExprError as error:
        raise InputError(where, f"bad shape: {error}", "use integers, parameter names, + and *") from None
