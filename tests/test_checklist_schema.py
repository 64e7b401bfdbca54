"""The knowledge files are validated at load time with precise messages."""
from __future__ import annotations

import pytest

from workbench.audit.checklist import load_checklist, parse_section
from workbench.config.registry import load_registry, parse_registry
from workbench.errors import InputError
from workbench.yamlio import parse_yaml


def registry_from(text, tmp_path):
    path = tmp_path / "keys.yaml"
    path.write_text(text)
    return parse_registry(parse_yaml(text, path))


def section_from(text, tmp_path):
    path = tmp_path / "section.yaml"
    path.write_text(text)
    return parse_section(parse_yaml(text, path), set(load_registry().keys))


def test_shipped_checklist_covers_every_section_of_the_issue():
    names = [section.name for section in load_checklist()]
    assert names == ["Network structure", "MoE", "Optimizer", "Weights", "Mixed precision", "Parallel", "Other"]
    assert sum(len(section.items) for section in load_checklist()) >= 80


def test_every_registry_key_is_used_by_an_item_or_a_derivation():
    used = {key for section in load_checklist() for item in section.items for key in item.keys}
    registry = load_registry()
    copied = {side.derive["copy"] for spec in registry.keys.values()
              for side in [spec.megatron, *spec.mindformers.values()] if side and isinstance(side.derive, dict)}
    import inspect
    from workbench.config import derive, derive_mindformers
    derivation_source = inspect.getsource(derive) + inspect.getsource(derive_mindformers)
    # a key named in the size vocabulary (aliases: spec:, issue 13) is used there, e.g. moe.first_dense_layers
    # now that the CheckList compares the whole MoE layer pattern (issue 12)
    vocabulary = {key for key, spec in registry.keys.items() if spec.aliases.spec is not None}
    unused = [key for key in registry.keys
              if key not in used | copied | vocabulary and f'"{key}"' not in derivation_source]
    assert unused == []


@pytest.mark.parametrize("body,needle", [
    ("keys:\n  a.b:\n    type: integer\n    megatron: {arg: a}\n", "type 'integer' is not one of"),
    ("keys:\n  a.b:\n    type: int\n    megatron: {agr: a}\n", "unknown field(s) ['agr']"),
    ("keys:\n  a.b:\n    type: int\n    megatron: {path: a}\n", "'path' is not used on the megatron side"),
    ("keys:\n  a.b:\n    type: int\n    megatron: {derive: no_such_formula}\n", "unknown derivation 'no_such_formula'"),
    ("keys:\n  a.b:\n    type: int\n    megatron: {derive: {copy: x.y}}\n", "derive copies unknown key 'x.y'"),
    ("keys:\n  a.b:\n    type: int\n    megatron: {fixed: 1}\n", "a fixed value needs a 'why'"),
    ("keys:\n  a.b:\n    type: int\n    mindformers: {legacy: {path: a}, path: b}\n", "mix of legacy:/mcore:"),
    ("nothing: here\n", "expected a top-level 'keys:' mapping"),
])
def test_bad_registry_entries_are_named(tmp_path, body, needle):
    with pytest.raises(InputError) as error:
        registry_from(body, tmp_path)
    assert needle in str(error.value)
    assert "keys.yaml" in str(error.value)


def test_registry_error_names_the_line(tmp_path):
    with pytest.raises(InputError) as error:
        registry_from("keys:\n  ok.key:\n    type: int\n    megatron: {arg: a}\n  bad.key:\n    type: nope\n", tmp_path)
    assert "keys.yaml:5 [keys.bad.key]" in str(error.value)


@pytest.mark.parametrize("item,needle", [
    ("{id: x, title: X, keys: [model.num_layers], rule: nearly_equal, why: w}", "unknown rule 'nearly_equal'"),
    ("{id: x, title: X, keys: [model.layers], rule: equal, why: w}", "unknown canonical key(s) ['model.layers']"),
    ("{id: x, title: X, keys: [model.num_layers], rule: equal, why: w, severity: fatal}", "severity 'fatal'"),
    ("{id: x, title: X, keys: [model.num_layers], rule: equal}", "missing 'why'"),
    ("{id: x, title: X, keys: [model.num_layers], rule: equal, why: w, colour: red}", "unknown field(s) ['colour']"),
    ("{id: x, title: X, keys: [model.num_layers], rule: equal, why: w, when: dense}", "when 'dense'"),
])
def test_bad_items_are_named(tmp_path, item, needle):
    with pytest.raises(InputError) as error:
        section_from(f"section: S\nitems:\n  - {item}\n", tmp_path)
    assert needle in str(error.value) and "section.yaml:3 [items[0]]" in str(error.value)


def test_duplicate_ids_across_sections_are_rejected(tmp_path):
    item = "  - {id: dup, title: X, keys: [model.num_layers], rule: equal, why: w}\n"
    (tmp_path / "a.yaml").write_text("section: A\nitems:\n" + item)
    (tmp_path / "b.yaml").write_text("section: B\nitems:\n" + item)
    with pytest.raises(InputError, match="item id 'dup' is also used in a.yaml"):
        load_checklist.__wrapped__(tmp_path)


def test_a_new_item_is_one_yaml_entry(tmp_path):
    (tmp_path / "extra.yaml").write_text(
        "section: Extra\nitems:\n  - {id: layers_again, title: Layers, keys: [model.num_layers], rule: equal, why: w}\n")
    sections = load_checklist.__wrapped__(tmp_path)
    assert [item.id for item in sections[0].items] == ["layers_again"]
