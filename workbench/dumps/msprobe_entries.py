"""Entry names of an msprobe dump.json → op, module path, pass and whether it is a parameter gradient, through
the YAML's ``module_pattern`` and ``api_pattern`` (module paths from construct.json's parents for API entries)."""
from __future__ import annotations

from sys import intern                  # op and pass names: one object per spelling, not one per entry

from .api_stems import by_stem, ends_in_digits, stem
from .formats import DumpFormats
from .module_names import module_groups
from .msprobe_lines import as_list, pick


def entry_infos(names: list[str], parents: dict | None, fmt: DumpFormats, stems=None, joined=None) -> tuple:
    """Ops, module paths and passes of entry names (as :func:`entry_info` gives them one by one), and whether
    any is a parameter gradient. ``stems``: :func:`.api_stems.stem_codes` of the names, when the library found
    them; then API names are read once per stem and per parent (:func:`_by_stems`), the rest one by one.
    ``joined``: instead of ``parents``, each name's parent as :func:`.msprobe_join.entry_parents` numbers them.
    ``names``: a list, or :class:`.msprobe_lines.Packed` (strs made of only the names read)."""
    if stems is not None and by_stem(fmt.msprobe["api_pattern"]) and ends_in_digits(fmt.msprobe["module_pattern"]):
        found = _by_stems(names, parents, fmt, stems, joined)
        if found is not None:
            return found
    return _one_by_one(as_list(names), parents if joined is None else _parent_list(joined), fmt)


def _parent_list(joined, rows=None) -> list:
    """Each name's parent (or each of ``rows``'), None where it has none, from their numbered parents: a list
    spread with numpy, not a dict of the names."""
    import numpy as np

    code, texts = joined
    return np.array([*texts, None], dtype=object)[code if rows is None else code[rows]].tolist()


def _by_stems(names: list[str], parents: dict | None, fmt: DumpFormats, stems, joined=None) -> tuple | None:
    """:func:`entry_infos` as object arrays, with Python per stem and per distinct parent for the API names of
    the stem form (the module pattern cannot match them: :func:`.api_stems.ends_in_digits`), and per name for
    the rest (module names, names of no stem or of a stem the API pattern does not match); ``None`` when a
    construct.json parent is unhashable (the loop decides)."""
    import numpy as np

    m = fmt.msprobe
    code, first = stems
    api_match = m["api_pattern"].match
    ops_of, passes_of = [], []
    for name in pick(names, first):                         # one name per stem made a str
        found = api_match(name)
        prim, api, pass_ = found.group("prim", "api", "pass") if found else (None, None, None)
        ops_of.append(intern(prim or api) if found else None)
        passes_of.append(intern(pass_) if found else None)
    matched = np.array([op is not None for op in ops_of] + [False], dtype=bool)
    stemmed = matched[code]                                  # code -1 (no stem) reads the last, False
    rows, rest = np.flatnonzero(stemmed), np.flatnonzero(~stemmed)
    ops, modules, passes = (np.empty(len(names), dtype=object) for _ in range(3))
    cache: dict = {}
    if joined is None:
        parent_list = list(map(parents.get, pick(names, rows)))
        try:
            distinct = set(parent_list)
        except TypeError:
            return None
        owners = {parent: _owner_module(parent, m, cache) for parent in distinct}
        modules[rows] = list(map(owners.__getitem__, parent_list))
    else:                                                    # parents numbered: one owner per distinct parent
        owner = np.array([*(_owner_module(text, m, cache) for text in joined[1]), ""], dtype=object)
        modules[rows] = owner[joined[0][rows]]
        parents = _parent_list(joined, rest)
    ops[rows] = np.array([*ops_of, None], dtype=object)[code[rows]]
    passes[rows] = np.array([*passes_of, None], dtype=object)[code[rows]]
    found = _one_by_one(pick(names, rest), parents, fmt)
    for column, values in zip((ops, modules, passes), found[:3], strict=True):
        column[rest] = values
    return ops, modules, passes, found[3]


def _one_by_one(names: list[str], parents, fmt: DumpFormats) -> tuple[list, list, list, bool]:
    """:func:`entry_infos` in one loop with the patterns' bound methods, module paths once per path or parent,
    an API entry's op and pass once per stem where that is exact (:mod:`.api_stems`). ``parents``: construct.json's
    dict, or each name's parent in a list (None: none)."""
    m = fmt.msprobe
    module_of_name, api_match = module_groups(m["module_pattern"]), m["api_pattern"].match
    parent_list = map(parents.get, names) if isinstance(parents, dict) else parents
    stem_of = stem if by_stem(m["api_pattern"]) else _no_stem
    by_stems: dict = {}                                       # (head, pass) -> (op, pass) of a matched API name
    cache: dict = {}
    owners: dict = {}                                         # parent name -> its module path
    ops, modules, passes, grad = [], [], [], False
    for name, parent in zip(names, parent_list, strict=True):
        found = module_of_name(name)
        if found:
            cls, path, pass_ = found
            module = cache.get(path)
            if module is None:
                module = _module_of(path, m, cache)
            if pass_ == "parameters_grad":
                grad, pass_ = True, "backward"
            ops.append(intern(cls))
            modules.append(module)
            passes.append(intern(pass_))
            continue
        module = owners.get(parent) if type(parent) is str else ""
        if module is None:
            module = owners[parent] = _owner_module(parent, m, cache)
        key = stem_of(name)
        known = by_stems.get(key)
        if known is not None:
            ops.append(known[0])
            passes.append(known[1])
        elif found := api_match(name):
            prim, api, pass_ = found.group("prim", "api", "pass")
            ops.append(intern(prim or api))
            passes.append(intern(pass_))
            if key is not None:
                by_stems[key] = ops[-1], passes[-1]
        else:
            op, _, pass_, _ = entry_info(name, {}, fmt, cache)       # its module: the parent's, above
            ops.append(op)
            passes.append(pass_)
        modules.append(module)
    return ops, modules, passes, grad


def _no_stem(name: str) -> None:
    return None


def entry_info(entry: str, parents: dict, fmt: DumpFormats, cache: dict) -> tuple[str, str, str, bool]:
    """(op, module path, pass, gradient flag) of an entry; module paths cached per path and per parent name."""
    m = fmt.msprobe
    found = m["module_pattern"].match(entry)
    if found:
        grad = found.group("pass") == "parameters_grad"
        return (intern(found.group("cls")), _module_of(found.group("path"), m, cache),
                "backward" if grad else intern(found.group("pass")), grad)
    found = m["api_pattern"].match(entry)
    module = _owner_module(parents.get(entry), m, cache)
    if found:
        return intern(found.group("prim") or found.group("api")), module, intern(found.group("pass")), False
    pieces = entry.split(".")
    return (pieces[1] if len(pieces) > 1 else entry, module, "backward" if ".backward" in entry else "forward",
            False)


def _owner_module(parent, m: dict, cache: dict) -> str:
    """The module path of the module/cell entry an API entry ran in (construct.json), else ""."""
    if not isinstance(parent, str):
        return ""
    key = ("parent", parent)
    if key not in cache:
        owner = m["module_pattern"].match(parent)
        cache[key] = _module_of(owner.group("path"), m, cache) if owner else ""
    return cache[key]


def _module_of(path: str, m: dict, cache: dict) -> str:
    if path not in cache:
        cache[path] = _unwrapped(path, m)
    return cache[path]


def _unwrapped(path: str, m: dict) -> str:
    """``module.module.decoder.layers.0`` → ``decoder.layers.0`` (training wrappers are not in checkpoint names)."""
    first, dot, _ = path.partition(".")
    if not dot or first not in m["wrappers"]:
        return path                                       # nothing to drop: no split and join
    pieces = path.split(".")
    while len(pieces) > 1 and pieces[0] in m["wrappers"]:
        pieces.pop(0)
    return ".".join(pieces)
