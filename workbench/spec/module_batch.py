"""Module paths resolved many at a time: each template is matched once per match key, not once per path.

A dump's module paths are thousands of layers of a few dozen templates (``decoder.layers.17.self_attention``).
Paths that share a match key (:mod:`.module_keys`: their index runs that no template spells replaced by one
stand-in) match the same templates, so the key decides which template a path has, and where in the path each of
the template's indices is (the same digit run: a placeholder is always a whole run). Each path then reads its own
indices from its digit runs and is resolved by the same :func:`.modules.resolve_ref` that one path at a time uses: what
depends on the layer number (a layer set chosen by ``params``) is decided per path, as before.
"""
from __future__ import annotations


from functools import partial
from typing import Callable

from .arch import ArchSpec
from .model_params import ModelParams
from .module_keys import _DIGITS, keys_and_runs, literal_runs
from .modules import ANY_INDEX, ModuleRef, ModuleTemplate, resolve_ref, group_templates, plan_of
from .templates import Template, skeleton_of


def resolve_paths(paths: list[str], index: dict, formatter_of: Callable) -> list:
    """Each path's ModuleRef (or None): ``index`` is a format's templates by skeleton, ``formatter_of(module)`` the
    resolver's :func:`formatter` of a template. A path's digit runs are the next ones of all the paths' runs (its key
    has as many): no search per path."""
    keys, runs = keys_and_runs(paths, _literals(index))
    recipes: dict[str, tuple] = {}
    out = []
    at = 0                                  # where this path's runs start in runs
    for key in keys:
        recipe = recipes.get(key)
        if recipe is None:
            recipe = recipes[key] = _recipe(key, index, formatter_of)
        made, slots, one, count = recipe
        if made is None:
            out.append(None)
        elif one is not None:               # one index (the layer): no loop per path
            out.append(made({one[0]: int(runs[at + one[1]])}))
        else:
            out.append(made({variable: int(runs[at + place]) for variable, place in slots}))
        at += count
    return out


_LITERALS: dict[int, tuple[dict, frozenset]] = {}        # per index (kept alive by modules._CACHE): its literal runs


def _literals(index: dict) -> frozenset[str]:
    found = _LITERALS.get(id(index))
    if found is None or found[0] is not index:
        texts = [module.template.text for group in index.values() for module in group]
        found = _LITERALS[id(index)] = (index, literal_runs(texts))
    return found[1]


def _recipe(key: str, index: dict, formatter_of: Callable) -> tuple:
    """(the formatter of the first template matching ``key`` or None, (variable, its digit run's place in the path)
    per variable, that pair when it is the only one, the path's count of digit runs)."""
    count = len(_DIGITS.findall(key))
    for module in index.get(skeleton_of(key), ()):
        found = module.template.regex.match(key)
        if found is not None:
            slots = tuple((variable, _runs_before(key, found.start(variable))) for variable in module.template.variables)
            return formatter_of(module), slots, slots[0] if len(slots) == 1 else None, count
    return None, (), None, count


def _runs_before(text: str, end: int) -> int:
    return len(_DIGITS.findall(text, 0, end))


def formatter(arch: ArchSpec, module: ModuleTemplate, params: ModelParams | None,
               memo: dict) -> Callable[[dict[str, int]], ModuleRef]:
    """env -> :func:`resolve_ref`'s ref, with what does not depend on the index values decided once: without
    ``params`` no layer set is chosen and no index is spread, so the texts to format and the kind are the template's
    own (an index the path lacks reads ``*`` in the text itself). With ``params``: :func:`resolve_ref` itself."""
    found = memo.get(("formatter", id(module)))
    if found is not None and found[0] is module:
        return found[1]
    _, layer_of, stacked, leaf_texts, _ = plan_of(arch, module, params, memo)
    texts = tuple(_star(text, module.template.variables) for text, _, _ in leaf_texts)
    if params is not None or (module.leaf and not texts):
        made = partial(_general, arch, module, params, memo)
    elif module.leaf and len(texts) == 1:
        made = _one_leaf(texts[0], layer_of, "stacked" if stacked else "same")
    elif module.leaf:
        made = _many_leaves(texts, layer_of, stacked)
    else:
        made = _group(tuple(group_templates(arch, module)), layer_of)
    memo[("formatter", id(module))] = (module, made)
    return made


def _general(arch: ArchSpec, module: ModuleTemplate, params: ModelParams | None, memo: dict,
             env: dict[str, int]) -> ModuleRef:
    return resolve_ref(arch, module, env, params, memo)


def _star(text: str, known: tuple[str, ...]) -> str:
    """``text`` with each index that ``known`` lacks spelled ``*`` (what ``_Unknown`` formats it as)."""
    for variable in Template.parse(text).variables:
        if variable not in known:
            text = text.replace("{" + variable + "}", ANY_INDEX)
    return text


def _one_leaf(text: str, layer_of, kind: str):
    return lambda env: ModuleRef((text.format_map(env),), layer_of(env), kind)


def _many_leaves(texts: tuple[str, ...], layer_of, stacked: bool):
    def leaves(env: dict[str, int]) -> ModuleRef:
        names = tuple(dict.fromkeys([text.format_map(env) for text in texts]))     # equal names only by chance
        return ModuleRef(names, layer_of(env), "stacked" if stacked else ("fused" if len(names) > 1 else "same"))
    return leaves


def _group(groups: tuple[str, ...], layer_of):
    if not groups:
        return lambda env: ModuleRef((), layer_of(env), "root")
    return lambda env: ModuleRef(tuple([text.format_map(env) for text in groups]), layer_of(env), "group")
