"""The fast paths of `workbench compare` give what the plain ones gave: the msprobe dump.json read entry by
entry equals the whole-document reading (repeated names, odd layouts, errors), and the bracket count that
bounds JSON nesting equals a per-character count."""
from __future__ import annotations

import json
import random

import pytest

from workbench.dumps.msprobe_json import DATA_FOUND, Irregular, data_entries
from workbench.dumps.open_dump import open_dump
from workbench.errors import InputError
from workbench.input_files import json_depth


def _tensor(high: float, shape=(2,)) -> dict:
    return {"type": "torch.Tensor", "dtype": "torch.float32", "shape": list(shape), "Max": high, "Min": 0.0,
            "Mean": 0.5, "Norm": 1.0}


def _write(tmp_path, text: str):
    folder = tmp_path / "step0" / "rank0"
    folder.mkdir(parents=True)
    (folder / "dump.json").write_text(text)
    return tmp_path


def test_repeated_entry_keeps_json_loads_semantics(tmp_path):
    """json.loads keeps a repeated name's LAST value at its FIRST position: the streamed reader must too."""
    first = json.dumps({"output": [_tensor(1.0)]})
    other = json.dumps({"output": [_tensor(7.0)]})
    last = json.dumps({"output": [_tensor(9.0, (3,))]})
    text = ('{"task": "statistics", "data": {"Functional.relu.0.forward": %s, "Functional.gelu.0.forward": %s, '
            '"Functional.relu.0.forward": %s}, "level": "L1"}' % (first, other, last))
    table = open_dump(_write(tmp_path, text))
    assert table["name"].tolist() == ["Functional.relu.0.forward.output.0", "Functional.gelu.0.forward.output.0"]
    assert table["max"].tolist() == [9.0, 7.0] and table["shape"].tolist() == ["3", "2"]


@pytest.mark.parametrize("text", ['{"data": {"a": 1,}}', '{"data": []}', '[]', '{"data": {"a": 1}} tail',
                                  '{"data": {"a": 1}, "data": {}}', '{"level": "L1"}', '{"data": {"a": {}'])
def test_irregular_documents_are_left_to_the_whole_document_parse(text):
    with pytest.raises(Irregular):
        list(data_entries(text))


def test_streamed_entries_in_file_order_with_any_spacing():
    text = ' {\n "task" : "x" ,"data" : { "b" : {"k": [1, 2]} , "a" : NaN } , "z": [{"q": null}] }\n'
    found = list(data_entries(text))
    assert found[0] is DATA_FOUND and [name for name, _ in found[1:]] == ["b", "a"]
    assert found[1][1] == {"k": [1, 2]} and found[2][1] != found[2][1]          # NaN, as json.loads reads it


def test_bad_entry_reported_by_the_whole_document_rules(tmp_path):
    """An entry that is not a mapping, and a syntax error after it: the syntax error (json.loads') wins."""
    text = '{"data": {"Functional.relu.0.forward": 5, "Functional.gelu.0.forward": {"output": [}}}'
    root = _write(tmp_path, text)
    with pytest.raises(InputError) as caught:
        open_dump(root)
    assert "dump.json:1:" in caught.value.where and "invalid msprobe dump.json" in caught.value.problem
    (root / "step0" / "rank0" / "dump.json").write_text('{"data": {"Functional.relu.0.forward": 5}}')
    with pytest.raises(InputError, match=r"is int, expected a mapping"):
        open_dump(root)


def _slow_depth(text: str) -> int:
    """Per character: brackets outside strings, escapes honoured."""
    depth = best = 0
    inside = escaped = False
    for char in text:
        if inside:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                inside = False
        elif char == '"':
            inside = True
        elif char in "[{":
            depth += 1
            best = max(best, depth)
        elif char in "]}":
            depth -= 1
    return best


def _random_value(rng: random.Random, depth: int):
    if depth > 6 or rng.random() < 0.3:
        return "".join(rng.choice('[]{}"\\ab\u00e9\n') for _ in range(rng.randint(0, 6)))
    if rng.random() < 0.5:
        return [_random_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return {_random_value(rng, 7): _random_value(rng, depth + 1) for _ in range(rng.randint(0, 3))}


def test_json_depth_equals_a_per_character_count():
    rng = random.Random(11)
    for _ in range(3000):
        text = json.dumps(_random_value(rng, 0), ensure_ascii=rng.random() < 0.5)
        assert json_depth(text) == _slow_depth(text), text
        assert json_depth(text.encode()) == _slow_depth(text)
    assert json_depth('"unterminated [[') == 2                    # an unterminated string counts its brackets
    assert json_depth("[" * 5000 + "]" * 5000) == 5000
