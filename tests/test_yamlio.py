from __future__ import annotations

import pytest

from workbench.errors import InputError
from workbench.yamlio import load_yaml

TEXT = """\
base: &base
  data_loader:
    shuffle: False
  batch_size: 4
task:
  dataset_config: *base
merged:
  <<: *base
  extra: 1
list: [a, b]
"""


def test_lines_and_aliases(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(TEXT)
    doc = load_yaml(path)
    assert doc.get("task.dataset_config.data_loader.shuffle") is False
    assert doc.lines["base.data_loader.shuffle"] == 3
    assert doc.lines["task.dataset_config.data_loader.shuffle"] == 3  # reached through the alias: the anchor's line
    assert doc.get("merged.batch_size") == 4 and doc.lines["merged.batch_size"] == 4
    assert doc.get("list.1") == "b" and doc.lines["list.1"] == 10
    assert doc.where("merged.extra") == "merged.extra (c.yaml:9)"
    assert doc.has("base.batch_size") and not doc.has("base.nothing")


def test_syntax_error_reports_line_and_column(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("a: 1\nb: [1, 2\nc: 3\n")
    with pytest.raises(InputError) as error:
        load_yaml(path)
    assert str(error.value).startswith(f"{path}:3:") and "YAML syntax error" in str(error.value)


def test_unsafe_tags_are_refused(tmp_path):
    path = tmp_path / "evil.yaml"
    path.write_text("a: !!python/object/apply:os.system ['touch pwned']\n")
    with pytest.raises(InputError):
        load_yaml(path)
    assert not (tmp_path / "pwned").exists()
