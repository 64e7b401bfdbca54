"""Hostile YAML: deep nesting, alias bombs, recursive aliases, bad bytes, through the real loaders."""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from workbench_testing import EXAMPLE_MEGATRON
from workbench.audit.checklist import load_checklist
from workbench.cli.main import main
from workbench.errors import InputError
from workbench.yaml_scan import DEPTH_LIMIT, NODE_BUDGET
from workbench.yamlio import load_yaml


def _refused(path: Path) -> str:
    with pytest.raises(InputError) as caught:
        load_yaml(path)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(str(path))
    return message


def _billion_laughs(levels: int = 10) -> str:
    lines = ['a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for level in range(1, levels):
        name, previous = chr(ord("a") + level), chr(ord("a") + level - 1)
        lines.append(f"{name}: &{name} [" + ", ".join([f"*{previous}"] * 9) + "]")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("levels", [5_000, 200_000])
def test_deep_flow_nesting_is_refused_before_the_composer(tmp_path, levels):
    # 5,000 levels used to raise RecursionError, 200,000 crashed the C composer (segfault)
    path = tmp_path / "deep.yaml"
    path.write_text("a: " + "[" * levels + "]" * levels + "\n")
    message = _refused(path)
    assert message.startswith(f"{path}:1: YAML nests {DEPTH_LIMIT + 1} levels deep")


def test_deep_block_nesting_names_the_line(tmp_path):
    path = tmp_path / "deep.yaml"
    path.write_text("".join("  " * level + f"k{level}:\n" for level in range(DEPTH_LIMIT + 20)) + "  " * 120 + "x\n")
    assert _refused(path).startswith(f"{path}:{DEPTH_LIMIT + 1}: YAML nests")


def test_depth_reached_through_a_chain_of_aliases_counts(tmp_path):
    # each line is shallow, but *x{k} carries k levels: consumers walking the data would recurse
    path = tmp_path / "chain.yaml"
    path.write_text("x0: &x0 [1]\n" + "".join(f"x{k}: &x{k} [*x{k - 1}]\n" for k in range(1, 200)))
    assert f"through alias *x{DEPTH_LIMIT - 2}" in _refused(path)


def test_billion_laughs_fails_fast_naming_the_alias_line(tmp_path):
    path = tmp_path / "laughs.yaml"
    path.write_text(_billion_laughs())
    start = time.perf_counter()
    message = _refused(path)
    assert time.perf_counter() - start < 0.5
    # 9**7 > 1e6: the alias on line 7 (*f inside g) crosses the budget
    assert message.startswith(f"{path}:7: alias *f expands the YAML to more than {NODE_BUDGET:,} nodes")


def test_merge_key_bomb_is_counted_too(tmp_path):
    path = tmp_path / "merge.yaml"
    lines = ["m0: &m0 {" + ", ".join(f"k{j}: {j}" for j in range(10)) + "}"]
    lines += [f"m{k}: &m{k} [" + ", ".join([f"{{<<: *m{k - 1}}}"] * 10) + "]" for k in range(1, 8)]
    path.write_text("\n".join(lines) + "\n")
    assert "more than 1,000,000 nodes" in _refused(path)


def test_aliases_within_budget_still_work_and_report_anchor_lines(tmp_path):
    path = tmp_path / "ok.yaml"
    path.write_text(_billion_laughs(levels=4))          # 9**4 leaves: well inside the budget
    doc = load_yaml(path)
    assert doc.get("d.8.8.8.8") == "lol" and doc.lines["d.8.8.8.8"] == 1   # the anchor's line


@pytest.mark.parametrize("text,line,words", [
    ("a: &a [1, *a]\n", 1, "alias *a is recursive"),
    ("a: &a\n  b:\n    c: *a\n", 3, "alias *a is recursive"),
    ("a: *nowhere\n", 1, "alias *nowhere refers to no anchor"),
    ("a: &x 1\nb: &x 2\n", 2, "anchor &x is defined twice (first on line 1)"),
])
def test_alias_errors_are_one_line_with_the_line(tmp_path, text, line, words):
    path = tmp_path / "alias.yaml"
    path.write_text(text)
    message = _refused(path)
    assert message.startswith(f"{path}:{line}: ") and words in message


def test_a_huge_anchor_name_is_clipped_in_the_message(tmp_path):
    path = tmp_path / "long.yaml"
    name = "n" * 100_000
    path.write_text(f"a: *{name}\n")
    assert len(_refused(path)) < 1_000


def test_non_utf8_and_truncated_yaml(tmp_path):
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"a: 1\nb: \xfe\xff\n")
    assert _refused(binary).startswith(f"{binary}:2: not UTF-8")
    cut = tmp_path / "cut.yaml"
    cut.write_text('a:\n  b: [1, 2\n  c: "unterminated\n')
    assert "YAML syntax error" in _refused(cut)


def test_checklist_knowledge_loader_uses_the_same_bounds(tmp_path):
    (tmp_path / "bomb.yaml").write_text(_billion_laughs())
    with pytest.raises(InputError, match=r"bomb\.yaml:7: alias \*f expands"):
        load_checklist(tmp_path)


def test_cli_refuses_a_bomb_as_the_mindformers_config(tmp_path, capsys):
    path = tmp_path / "mf.yaml"
    path.write_text(_billion_laughs())
    out = tmp_path / "report.json"
    start = time.perf_counter()
    assert main(["checklist", str(EXAMPLE_MEGATRON), str(path), "--out", str(out)]) == 2
    assert time.perf_counter() - start < 5
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{path}:7: alias *f" in err and "Traceback" not in err
    assert not out.exists()


def test_line_map_is_a_mapping_over_every_expanded_path(tmp_path):
    path = tmp_path / "m.yaml"
    path.write_text("base: &b {x: 1}\nuse:\n  - *b\n")
    doc = load_yaml(path)
    assert dict(doc.lines) == {"base": 1, "base.x": 1, "use": 2, "use.0": 1, "use.0.x": 1}  # alias: anchor line
    assert "use.1" not in doc.lines and doc.lines.get("use.0.y") is None
